//! `clean-on-miss`: remove stale files under the `path` roots before generation starts, so a
//! miss begins from nothing rather than from leftovers of an older run. Excluded (`!`) paths
//! are kept, and so are the directories that still hold them.

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
        let found = walk(pattern, set, true)?;
        let mut dirs = Vec::new();
        for f in found {
            if f.file_type.is_dir() {
                // A literal directory root stays; only what is inside goes.
                if !(f.rel.is_empty() && pattern.glob.is_none()) {
                    dirs.push(f.abs);
                }
                continue;
            }
            match fs::remove_file(&f.abs) {
                Ok(()) => stats.removed_files += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(CleanError::Remove { path: f.abs, source });
                }
            }
        }
        for dir in dirs.into_iter().rev() {
            // Directories still holding excluded files are not empty and stay.
            if fs::remove_dir(&dir).is_ok() {
                stats.removed_dirs += 1;
            }
        }
    }
    Ok(stats)
}
