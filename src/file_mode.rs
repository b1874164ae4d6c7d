//! Permission bits of the files this process creates: the umask, read once where a mode is
//! decided (restored files, local store entries).

/// The process's umask: the permission bits new files lose.
#[cfg(unix)]
pub fn current_umask() -> u32 {
    // SAFETY: umask cannot fail; the old mask is put back at once.
    unsafe {
        let mask = libc::umask(0o022);
        libc::umask(mask);
        mask as u32
    }
}

#[cfg(not(unix))]
pub fn current_umask() -> u32 {
    0
}
