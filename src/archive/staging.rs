//! Staging directories beside restore targets: named `.exact-cache-staging-<pid>-<random>`, so
//! a later run can tell a crashed run's leftovers (its process is gone) from a running
//! restore's, and remove them. Created and removed through directory handles only.

use super::beneath;
use crate::paths::STAGING_PREFIX;
use cap_std::fs::Dir;
use std::hash::{BuildHasher, Hasher};
use std::io;

/// Create a staging directory in `anchor`, first removing stale ones left there by runs that
/// no longer exist; its name.
pub(super) fn create(anchor: &Dir) -> io::Result<String> {
    sweep_stale_in(anchor);
    loop {
        let mut random = std::collections::hash_map::RandomState::new().build_hasher();
        random.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos(),
        );
        let name = format!("{STAGING_PREFIX}{}-{:016x}", std::process::id(), random.finish());
        match anchor.create_dir(&name) {
            Ok(()) => return Ok(name),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Remove staging directories in `dir` whose process is gone.
#[cfg(test)]
fn sweep_stale(dir: &std::path::Path) {
    if let Ok(handle) = beneath::open_trusted(dir) {
        sweep_stale_in(&handle);
    }
}

pub(super) fn sweep_stale_in(dir: &Dir) {
    let Ok(entries) = dir.entries() else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix(STAGING_PREFIX) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !crate::process::alive(pid) {
            let _ = beneath::remove_tree(dir, name);
        }
    }
}

// A pid that cannot exist is a unix fact (the tests under wine sweep a Windows leftover).
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn stale_staging_of_dead_processes_is_swept_and_live_ones_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // A pid that cannot exist (above the kernel's limit).
        let dead = dir.path().join(format!("{STAGING_PREFIX}4194999-abc"));
        let live = dir.path().join(format!("{STAGING_PREFIX}{}-abc", std::process::id()));
        fs::create_dir_all(dead.join("root/ro")).unwrap();
        fs::create_dir_all(&live).unwrap();
        fs::write(dead.join("root/ro/f"), b"x").unwrap();
        fs::set_permissions(dead.join("root/ro"), fs::Permissions::from_mode(0o555)).unwrap();
        sweep_stale(dir.path());
        assert!(!dead.exists());
        assert!(live.exists());
    }
}
