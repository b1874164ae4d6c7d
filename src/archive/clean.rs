//! `clean-on-miss`: remove stale files under the `path` roots before generation starts, so a
//! miss begins from nothing rather than from leftovers of an older run. Excluded (`!`) paths
//! are kept, and so are the directories that still hold them; nothing inside a `.git`
//! directory is ever removed. Read-only directories are opened for the removal. Leftover
//! staging directories of crashed restores go too.

use crate::paths::{PathError, PatternSet, walk};
use std::fs;
use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("cannot remove `{}`", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanStats {
    pub removed_files: usize,
    pub removed_dirs: usize,
}

pub fn clean(set: &PatternSet) -> Result<CleanStats, CleanError> {
    let mut stats = CleanStats::default();
    for pattern in &set.includes {
        super::staging::sweep_stale(&pattern.base);
        if let Some(parent) = pattern.base.parent() {
            super::staging::sweep_stale(parent);
        }
        let found = walk(pattern, set, true)?;
        let mut dirs = Vec::new();
        for f in found {
            if f.abs.components().any(|c| c.as_os_str() == ".git") {
                continue;
            }
            if f.file_type.is_dir() {
                // A literal directory root stays; only what is inside goes.
                if !(f.rel.is_empty() && pattern.glob.is_none()) {
                    dirs.push(f.abs);
                }
                continue;
            }
            let mut result = fs::remove_file(&f.abs);
            if result.as_ref().is_err_and(|e| e.kind() == io::ErrorKind::PermissionDenied)
                && let Some(parent) = f.abs.parent()
                && super::staging::make_writable(parent).is_ok()
            {
                result = fs::remove_file(&f.abs);
            }
            match result {
                Ok(()) => stats.removed_files += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(CleanError::Remove { path: f.abs, source });
                }
            }
        }
        for dir in dirs.into_iter().rev() {
            // Directories still holding excluded files are not empty and stay.
            if let Some(parent) = dir.parent() {
                let _ = super::staging::make_writable(parent);
            }
            if fs::remove_dir(&dir).is_ok() {
                stats.removed_dirs += 1;
            }
        }
    }
    Ok(stats)
}
