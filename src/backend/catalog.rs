//! Where entries can be listed and deleted, for `explain-misses`, `list` and `prune`: the
//! [`Catalog`] trait each store provides (the cache service's through the GitHub REST API, as its
//! protocols cannot list or delete), and its errors.

use crate::keys::{Key, Version};
use std::path::PathBuf;

use super::http::MAX_ANSWER_BYTES;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// What deletes it: the REST cache id, or the local file name.
    pub id: String,
    pub key: Key,
    pub version: Version,
    /// The ref that saved it, empty for a save outside Actions; `None` where it is not known (an
    /// old entry of the local store).
    pub r#ref: Option<String>,
    /// Seconds since the epoch.
    pub created: i64,
    /// When a restore last used it, in seconds since the epoch, where the store records it.
    pub last_used: Option<i64>,
    pub size: u64,
}

impl Listed {
    /// Whether it was saved on `r#ref` (any ref: `None`). An entry whose ref is not known is on
    /// no particular ref.
    pub fn is_on(&self, r#ref: Option<&str>) -> bool {
        r#ref.is_none_or(|r| self.r#ref.as_deref() == Some(r))
    }

    /// When it was last created or used, whichever is later: what its age counts from.
    pub fn last_touched(&self) -> i64 {
        self.last_used.map_or(self.created, |used| used.max(self.created))
    }
}

/// Why entries cannot be listed or deleted. Only [`CatalogError::Forbidden`] stops a prune; the
/// rest are reported and skipped.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// No API for this backend (`backend: github` without a cache service): the reason.
    #[error("{reason}")]
    Unavailable { reason: String },
    /// Object storage trouble: the backend's own error (a [`super::BackendError`]), whole.
    #[error(transparent)]
    Storage { source: Box<dyn std::error::Error + Send + Sync> },
    #[error("the GitHub REST API is not reachable under nektos/act")]
    UnderAct,
    #[error("no `github-token` (the REST API needs `GITHUB_TOKEN` or a PAT)")]
    NoToken,
    #[error("`GITHUB_REPOSITORY` is not set")]
    NoRepository,
    #[error("`GITHUB_REPOSITORY` is `{repository}`, not `owner/repo`")]
    BadRepository { repository: String },
    #[error("`GITHUB_API_URL` is not usable")]
    BadApiUrl {
        #[source]
        source: octocrab::Error,
    },
    #[error("cannot start the REST runtime")]
    Runtime {
        #[source]
        source: std::io::Error,
    },
    #[error("cannot build the REST client")]
    Client {
        #[source]
        source: octocrab::Error,
    },
    /// The token may not do this (401, 403).
    #[error("{what}: HTTP {status}: {message} (the token needs `{needs}`)")]
    Forbidden { what: String, status: u16, message: String, needs: &'static str },
    /// It is not there (already deleted, or no such repository).
    #[error("{what}: HTTP 404: {message}")]
    NotFound { what: String, message: String },
    #[error("{what}: HTTP {status}: {message}")]
    Status { what: String, status: u16, message: String },
    /// The request did not get an answer.
    #[error("{what}")]
    Request {
        what: String,
        #[source]
        source: octocrab::Error,
    },
    #[error("{what}: the answer was larger than {} MiB", MAX_ANSWER_BYTES >> 20)]
    TooLarge { what: String },
    #[error("{what}: unreadable answer")]
    Unreadable {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// A REST call that found no cache API of GitHub's kind at `url` (without its query).
    #[error("GitHub's REST cache API at `{url}` did not answer (self-hosted cache servers usually lack it)")]
    NoCacheApi {
        url: String,
        #[source]
        source: Box<CatalogError>,
    },
    #[error("list caches: the listing did not end within {within} ({pages} pages)")]
    ListDeadline { within: String, pages: u32 },
    #[error("`{id}` is not a cache id")]
    BadCacheId { id: String },
    #[error("cannot {what} `{}`", path.display())]
    Local {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{id}` is not a local entry")]
    NotLocalEntry { id: String },
}

pub trait Catalog {
    fn describe(&self) -> String;

    /// Entries whose key starts with `key_prefix`, newest first: those saved on `r#ref` when it
    /// is given ([`Listed::is_on`]), else of every ref.
    fn list(&self, key_prefix: &str, r#ref: Option<&str>) -> Result<Vec<Listed>, CatalogError>;

    fn delete(&self, entry: &Listed) -> Result<(), CatalogError>;
}
