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

/// Whether process `pid` exists and has not exited (this process always does). A process
/// that cannot be opened for another reason than not existing (access denied) counts as alive.
#[cfg(windows)]
pub fn alive(pid: u32) -> bool {
    use windows_sys::Win32::Foundation::{CloseHandle, ERROR_INVALID_PARAMETER, GetLastError, STILL_ACTIVE};
    use windows_sys::Win32::System::Threading::{GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION};
    if pid == std::process::id() {
        return true;
    }
    // SAFETY: OpenProcess only reads its arguments; a handle it returns is closed below.
    let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if handle.is_null() {
        // SAFETY: reads the calling thread's last error, set by OpenProcess.
        return unsafe { GetLastError() } != ERROR_INVALID_PARAMETER;
    }
    let mut code = 0u32;
    // SAFETY: `handle` is an open process handle and `code` a valid place for the exit code.
    let known = unsafe { GetExitCodeProcess(handle, &mut code) } != 0;
    // SAFETY: `handle` was opened above and is closed once.
    unsafe { CloseHandle(handle) };
    !known || code == STILL_ACTIVE as u32
}

#[cfg(not(any(unix, windows)))]
pub fn alive(_pid: u32) -> bool {
    true
}
