//! How a command fails: one error enum for every command, and its rendering with causes.

use crate::archive::{CleanError, PackError};
use crate::backend::CatalogError;
use crate::config::InputError;
use crate::fingerprint::FingerprintError;
use crate::keys::Key;
use crate::outcome::MissReason;
use crate::runner::RunnerError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] InputError),
    #[error("cannot compute the fingerprint")]
    Fingerprint(#[from] FingerprintError),
    #[error(transparent)]
    Runner(#[from] RunnerError),
    #[error("cannot write the fingerprint file `{}`", path.display())]
    WriteFingerprint {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "no fingerprint file for key `{key}` at `{}`: run the restore or fingerprint step first in this job, or \
         pass `fingerprint-file`",
        path.display()
    )]
    NoFingerprint { key: Key, path: PathBuf },
    #[error("cannot read the fingerprint file `{}`", path.display())]
    ReadFingerprint {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("fingerprint file `{}` does not belong to key `{key}`", path.display())]
    WrongFingerprint { key: Key, path: PathBuf },
    #[error(
        "key `{key}` was computed for other `path` lines or another `compression` than this save step's; give \
         the save step the same `path` and `compression` as the restore step"
    )]
    VersionMismatch { key: Key },
    #[error(
        "this job's restore step computed the key `{restored}` for this cache, and the fingerprint computed now \
         gives `{computed}` ({changes}): an entry saved under it is one no restore looks for. Pass the restore \
         step's key, `key: ${{{{ steps.<restore>.outputs.key }}}}`, to save what it missed (or give this save its own \
         `prefix` if it is another cache)"
    )]
    KeyChangedSinceRestore { restored: Key, computed: Key, changes: String },
    #[error("the entry for `{key}` was not reused ({reason}) and `fail-on-cache-miss` is set")]
    FailOnMiss { key: Key, reason: MissReason },
    #[error("cache trouble and `strict` is set: {0}")]
    Strict(String),
    #[error("cannot archive the `path` entries")]
    Pack(#[from] PackError),
    #[error("cannot remove stale files (`clean-on-miss`)")]
    Clean(#[from] CleanError),
    #[error("cannot determine the workspace directory")]
    Workspace(#[source] std::io::Error),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("`verify-reuse: fail`: {} under `path` changed since the restore", crate::units::count_of(*count, "file"))]
    VerifyFailed { count: usize },
    #[error(
        "`uncovered-reads: fail`: the generating run read {} that no input covers; nothing was saved",
        crate::units::count_of(*count, "file")
    )]
    UncoveredReads { count: usize },
}
