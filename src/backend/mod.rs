//! Cache backends behind one trait. Each store has its own directory and is one variant of
//! [`Store`], whose one `match` gives its backend, catalog and secrets. Command logic sees only
//! [`Backend`]: exact lookup, a streaming download, and reserve → stream → commit for saves.
//! `http`, `download`, `upload` and `wire` are what the stores share, `blob` the Azure block blob
//! the v2 service and the Azure store write, `object` and `entries` what the object stores share.
//!
//! Every failure is a [`BackendError`] whose [`ErrorKind`] decides retries and whether it is a
//! warning; nothing downstream matches on message text.

pub mod azure;
pub mod blob;
mod catalog;
mod download;
mod entries;
mod github;
pub mod http;
mod local;
mod mode;
mod object;
mod packs;
pub mod s3;
mod store;
mod upload;
pub mod wire;

pub use catalog::{Catalog, CatalogError, Listed};
pub use github::{V1Backend, V2Backend};
pub use local::LocalBackend;
pub use mode::CacheMode;
pub use packs::backend_error;
pub(crate) use store::BACKEND;
pub use store::{Store, StoreKind};

use crate::keys::{Key, Version};
use std::fmt;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    NotFound,
    AlreadyExists,
    /// A conditional request was refused (HTTP 412): for S3's `If-None-Match: *`, the object
    /// exists already.
    Precondition,
    /// The credentials may not do this (HTTP 403). Never retried, never a miss.
    Forbidden,
    /// A read-only token (GitHub's `cache write denied:`). A save ends `read-only`.
    ReadOnly,
    /// GitHub's `cache read denied:`, inside a 403: a restore ends as a miss (`read-denied`); a
    /// save's check that an entry exists learns nothing from it.
    ReadDenied,
    /// HTTP 429, with the `Retry-After` it asked for. [`http::Http::retry`] waits it out once.
    RateLimited {
        retry_after: Option<Duration>,
    },
    /// The repository is over its storage quota until eviction frees room. A save ends `read-only`.
    QuotaExceeded,
    /// Worth retrying: 5xx, resets.
    Transient,
    Timeout,
    Fatal,
}

/// A backend failure. Cloning shares the source, so a reader or writer that fails keeps
/// failing with the whole error.
#[derive(Clone, Debug)]
pub struct BackendError {
    pub kind: ErrorKind,
    /// The HTTP status of the answer that failed, when a server answered.
    pub status: Option<u16>,
    pub message: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl BackendError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, status: None, message: message.into(), source: None }
    }

    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Wrap into an `io::Error` for `Read`/`Write` paths; [`BackendError::from_io`] takes it out.
    pub fn into_io(self) -> io::Error {
        let kind = match self.kind {
            ErrorKind::Timeout => io::ErrorKind::TimedOut,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, self)
    }

    /// The backend error inside an `io::Error` made by [`BackendError::into_io`], whole; any
    /// other `io::Error` comes back as it was.
    pub fn from_io(err: io::Error) -> Result<Self, io::Error> {
        if BackendError::in_io(&err).is_none() {
            return Err(err);
        }
        let inner = err.into_inner().expect("checked: it wraps a backend error");
        Ok(*inner.downcast::<BackendError>().expect("checked: it wraps a backend error"))
    }

    /// The backend error inside an `io::Error` made by [`BackendError::into_io`], if any.
    pub fn in_io(err: &io::Error) -> Option<&BackendError> {
        err.get_ref().and_then(|e| e.downcast_ref::<BackendError>())
    }
}

impl From<BackendError> for CatalogError {
    fn from(e: BackendError) -> Self {
        Self::Storage { source: Box::new(e) }
    }
}

/// An entry found by an exact lookup.
#[derive(Clone)]
pub struct CacheEntry {
    pub key: Key,
    pub version: Version,
    /// Known before downloading only where the backend keeps the bytes itself (the local store).
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

pub enum Reservation {
    /// An entry with this key and version exists (or another job is creating it).
    Exists,
    Reserved(Box<dyn Upload>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Committed {
    Saved,
    /// Another writer committed the same key and version first.
    Exists,
    /// Another writer is creating the same key and version (it may never appear).
    Creating,
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
    fn lookup(&self, key: &Key, version: &Version) -> Result<Option<CacheEntry>, BackendError>;

    /// A restore's first lookup: the newest entry of `version` whose key starts with `newest_of`
    /// (a later generation's base), else the entry of exactly `key`. The cache services answer
    /// it in one call; the stores that list read one listing. Callers check the key.
    fn lookup_newest_or(
        &self,
        newest_of: &str,
        key: &Key,
        version: &Version,
    ) -> Result<Option<CacheEntry>, BackendError>;

    /// Stream the entry's bytes. Errors inside the stream wrap a [`BackendError`].
    fn open(&self, entry: &CacheEntry) -> Result<Box<dyn Read + Send + '_>, BackendError>;

    /// Start a save of this key and version, or learn that an entry with them exists.
    fn reserve(&self, key: &Key, version: &Version) -> Result<Reservation, BackendError>;

    /// Its packs of `prefix` (content stored once, docs/content.md), kept beside its entries;
    /// `None`: this backend keeps every entry whole (a test's backend).
    fn packs(&self, prefix: &str) -> Option<Box<dyn crate::content::store::PackStore>> {
        let _ = prefix;
        None
    }

    /// The first `len` bytes of an entry (to explain a miss without downloading it whole).
    fn read_prefix(&self, entry: &CacheEntry, len: u64) -> Result<Vec<u8>, BackendError> {
        let mut bytes = Vec::new();
        self.open(entry)?.take(len).read_to_end(&mut bytes).map_err(|e| {
            BackendError::from_io(e)
                .unwrap_or_else(|e| BackendError::new(ErrorKind::Fatal, "cannot read the entry").with_source(e))
        })?;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn an_error_comes_out_of_io_whole() {
        let cause = io::Error::new(io::ErrorKind::ConnectionReset, "reset by peer");
        let e = BackendError::new(ErrorKind::Forbidden, "put: HTTP 403").with_status(403).with_source(cause);
        let io = e.clone().into_io();
        let back = BackendError::from_io(io).expect("a backend error");
        assert_eq!((back.kind, back.status, back.message.as_str()), (ErrorKind::Forbidden, Some(403), "put: HTTP 403"));
        let source = back.source().and_then(|s| s.downcast_ref::<io::Error>()).expect("the source survives");
        assert_eq!(source.kind(), io::ErrorKind::ConnectionReset);
        // A clone shares it.
        assert_eq!(e.source().map(ToString::to_string).as_deref(), Some("reset by peer"));
        // Any other io error comes back as it was.
        let plain = BackendError::from_io(io::Error::other("disk full")).unwrap_err();
        assert_eq!(plain.to_string(), "disk full");
        assert_eq!(BackendError::new(ErrorKind::Timeout, "t").into_io().kind(), io::ErrorKind::TimedOut);
    }
}
