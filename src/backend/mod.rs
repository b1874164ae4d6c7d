//! Cache backends behind one trait (the local directory, the GitHub cache service v1 and v2,
//! S3-compatible object storage). Command logic sees only [`Backend`]: exact lookup by key and
//! version, a streaming download, and reserve → stream → commit for saves.
//!
//! Every failure carries an [`ErrorKind`] that decides retries and whether it is a warning or a
//! failure; nothing downstream matches on message text. Entry locations may be signed URLs:
//! they are never printed (`CacheEntry`'s `Debug` leaves them out).

mod download;
pub mod http;
mod local;
mod s3;
pub mod select;
mod upload;
mod v1;
mod v2;
pub mod wire;

pub use local::LocalBackend;
pub use s3::{S3Backend, S3Inputs, S3Settings, SECRET_VARS as S3_SECRET_VARS};
pub use select::{BackendChoice, Choice, Protocol, choose};
pub use v1::V1Backend;
pub use v2::V2Backend;

use std::fmt;
use std::io::{self, Read, Write};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    NotFound,
    AlreadyExists,
    /// The token may read but not write (read-only cache, `ACTIONS_CACHE_MODE=read`).
    ReadOnly,
    RateLimited {
        retry_after: Option<Duration>,
    },
    QuotaExceeded,
    /// Worth retrying: 5xx, resets.
    Transient,
    Timeout,
    Fatal,
}

#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct BackendError {
    pub kind: ErrorKind,
    pub message: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl BackendError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), source: None }
    }

    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Wrap into an `io::Error` for `Read`/`Write` paths; [`BackendError::in_io`] gets it back.
    pub fn into_io(self) -> io::Error {
        let kind = match self.kind {
            ErrorKind::Timeout => io::ErrorKind::TimedOut,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, self)
    }

    /// The backend error inside an `io::Error` made by [`BackendError::into_io`], if any.
    pub fn in_io(err: &io::Error) -> Option<&BackendError> {
        err.get_ref().and_then(|e| e.downcast_ref::<BackendError>())
    }
}

/// An entry found by an exact lookup.
#[derive(Clone)]
pub struct CacheEntry {
    /// The key the backend returned, compared with the requested key by the caller.
    pub key: String,
    pub version: String,
    /// Known before downloading only where the backend keeps the bytes itself (the local
    /// store); the services' lookups announce no size, their downloads do.
    pub size: Option<u64>,
    /// Where to download from; may be a signed URL. Never print it.
    pub location: String,
}

impl fmt::Debug for CacheEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheEntry")
            .field("key", &self.key)
            .field("version", &self.version)
            .field("size", &self.size)
            .field("location", &"<redacted>")
            .finish()
    }
}

/// The outcome of a reservation.
pub enum Reservation {
    /// An entry with this key and version exists (or another job is creating it).
    Exists,
    Reserved(Box<dyn Upload>),
}

/// The outcome of a commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Committed {
    Saved {
        size: u64,
    },
    /// Another writer committed the same key and version first.
    Exists,
}

/// A reserved entry being written. Dropping it without [`Upload::commit`] abandons it.
pub trait Upload: Write + Send {
    fn commit(self: Box<Self>) -> Result<Committed, BackendError>;
}

pub trait Backend: Send + Sync {
    /// `local directory /path`, `GitHub cache service v2`, …
    fn describe(&self) -> String;

    /// The entry for exactly this key and version, if the backend has one. Remote services may
    /// answer with a different (prefix-matched) key; callers must compare.
    fn lookup(&self, key: &str, version: &str) -> Result<Option<CacheEntry>, BackendError>;

    /// Stream the entry's bytes. Errors inside the stream wrap a [`BackendError`].
    fn open(&self, entry: &CacheEntry) -> Result<Box<dyn Read + Send + '_>, BackendError>;

    /// Start a save of this key and version, or learn that an entry with them exists.
    fn reserve(&self, key: &str, version: &str) -> Result<Reservation, BackendError>;

    /// The first `len` bytes of an entry (for explaining misses from another entry's
    /// fingerprint without downloading it).
    fn read_prefix(&self, entry: &CacheEntry, len: u64) -> Result<Vec<u8>, BackendError> {
        let mut bytes = Vec::new();
        self.open(entry)?.take(len).read_to_end(&mut bytes).map_err(|e| {
            BackendError::in_io(&e).map_or_else(
                || BackendError::new(ErrorKind::Fatal, e.to_string()),
                |b| BackendError::new(b.kind, b.message.clone()),
            )
        })?;
        Ok(bytes)
    }
}
