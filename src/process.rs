//! Other processes on this machine: whether one that left a temporary file or directory (a
//! staging directory, a local-store upload, named with its pid) is still alive, so a crashed
//! run's leftovers can be told from a running one's.

/// Whether process `pid` exists (this process always does).
#[cfg(unix)]
pub fn alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: signal 0 only checks whether the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(not(unix))]
pub fn alive(_pid: u32) -> bool {
    true
}
