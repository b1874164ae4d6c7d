//! The vocabulary of step outputs: why a restore missed, how a save ended.

use std::fmt;

/// `miss-reason` output values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissReason {
    None,
    NotFound,
    PrefixOnly,
    ManifestMismatch,
    Corrupt,
    Incomplete,
    Timeout,
    ServiceError,
    LookupOnly,
    /// The entry was fine but could not be written here (disk full, permissions).
    IoError,
}

impl MissReason {
    /// Whether the entry was found and downloaded, and only its verification or placement
    /// failed: `cache-hit` is then `true` while `reused` is `false`.
    pub fn entry_was_downloaded(self) -> bool {
        matches!(
            self,
            MissReason::Corrupt | MissReason::ManifestMismatch | MissReason::Incomplete | MissReason::IoError
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MissReason::None => "none",
            MissReason::NotFound => "not-found",
            MissReason::PrefixOnly => "prefix-only",
            MissReason::ManifestMismatch => "manifest-mismatch",
            MissReason::Corrupt => "corrupt",
            MissReason::Incomplete => "incomplete",
            MissReason::Timeout => "timeout",
            MissReason::ServiceError => "service-error",
            MissReason::LookupOnly => "lookup-only",
            MissReason::IoError => "io-error",
        }
    }
}

impl fmt::Display for MissReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `save-result` output values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveResult {
    Saved,
    Exists,
    SkippedHit,
    ReadOnly,
    RateLimited,
    Incomplete,
    /// The files held a token or a `secret-env` value.
    SecretFound,
    Error,
}

impl SaveResult {
    pub fn as_str(self) -> &'static str {
        match self {
            SaveResult::Saved => "saved",
            SaveResult::Exists => "exists",
            SaveResult::SkippedHit => "skipped-hit",
            SaveResult::ReadOnly => "read-only",
            SaveResult::RateLimited => "rate-limited",
            SaveResult::Incomplete => "incomplete",
            SaveResult::SecretFound => "secret-found",
            SaveResult::Error => "error",
        }
    }
}

impl fmt::Display for SaveResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
