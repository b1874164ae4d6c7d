//! Staging directories beside restore targets: named `.exact-cache-staging-<pid>-<random>`, so
//! a later run can tell a crashed run's leftovers (its process is gone) from a running
//! restore's, and remove them.

use crate::paths::STAGING_PREFIX;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Create a staging directory in `anchor`, first removing stale ones left there by runs that
/// no longer exist.
pub(super) fn create(anchor: &Path) -> io::Result<PathBuf> {
    sweep_stale(anchor);
    let dir =
        tempfile::Builder::new().prefix(&format!("{STAGING_PREFIX}{}-", std::process::id())).tempdir_in(anchor)?;
    Ok(dir.keep())
}

/// Remove staging directories in `dir` whose process is gone.
pub fn sweep_stale(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(STAGING_PREFIX)) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !process_alive(pid) {
            let _ = force_remove(&entry.path());
        }
    }
}

#[cfg(unix)]
fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    // SAFETY: signal 0 only checks whether the process exists.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(not(unix))]
fn process_alive(_pid: u32) -> bool {
    true
}

/// Remove a tree even where it holds read-only directories.
pub(super) fn force_remove(path: &Path) -> io::Result<()> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            for entry in walkdir::WalkDir::new(path).follow_links(false).into_iter().flatten() {
                if entry.file_type().is_dir() {
                    let _ = make_writable(entry.path());
                }
            }
            fs::remove_dir_all(path)
        }
    }
}

/// Give the owner write and search permission on a directory; returns the old mode when it
/// had to change.
#[cfg(unix)]
pub(super) fn make_writable(dir: &Path) -> io::Result<Option<u32>> {
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(dir)?.permissions().mode() & 0o7777;
    if mode & 0o300 == 0o300 {
        return Ok(None);
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(mode | 0o300))?;
    Ok(Some(mode))
}

#[cfg(not(unix))]
pub(super) fn make_writable(_dir: &Path) -> io::Result<Option<u32>> {
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_staging_of_dead_processes_is_swept_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        // A pid that cannot exist (above the kernel's limit).
        let dead = dir.path().join(format!("{STAGING_PREFIX}4194999-abc"));
        let live = dir.path().join(format!("{STAGING_PREFIX}{}-abc", std::process::id()));
        fs::create_dir_all(dead.join("root/ro")).unwrap();
        fs::create_dir_all(&live).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::write(dead.join("root/ro/f"), b"x").unwrap();
            fs::set_permissions(dead.join("root/ro"), fs::Permissions::from_mode(0o555)).unwrap();
        }
        sweep_stale(dir.path());
        assert!(!dead.exists());
        assert!(live.exists());
    }
}
