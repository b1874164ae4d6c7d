//! Which cache backend and which catalog (where entries are listed and deleted) a
//! configuration gets: the store the `backend` input chose ([`crate::backend::Store`]).
//! Commands receive them as factories, so a test can hand in its own. And what the runner lets
//! the job do with them ([`cache_mode`]).

use super::render;
use crate::backend::{Backend, BackendError, CacheEntry, CacheMode, Catalog, CatalogError, ErrorKind, Reservation};
use crate::config::Locate;
use crate::env::Env;
use crate::keys::{Key, Version};
use crate::runner::Runner;
use crate::runner::SecretSink;
use crate::text::error_chain;

/// Builds the backend a configuration asks for.
pub type BackendFactory = dyn Fn(&Locate, &Env, SecretSink) -> Box<dyn Backend>;
/// Builds the catalog that lists and deletes entries.
pub type CatalogFactory = dyn Fn(&Locate, &Env) -> Result<Box<dyn Catalog>, CatalogError>;

/// The chosen store's backend; one that cannot be built fails every call as service trouble,
/// with the reason.
pub fn select_backend(locate: &Locate, env: &Env, secrets: SecretSink) -> Box<dyn Backend> {
    locate.store.backend(env, secrets).unwrap_or_else(|e| Box::new(Unavailable { reason: error_chain(&e) }))
}

/// Where the chosen store's entries are listed and deleted (the GitHub REST API with
/// `github-token`, or `GITHUB_TOKEN`, for the cache service).
pub fn select_catalog(locate: &Locate, env: &Env) -> Result<Box<dyn Catalog>, CatalogError> {
    locate.store.catalog(env, locate.github_token.as_deref())
}

/// What the runner lets this job do with the cache (`ACTIONS_CACHE_MODE`); a value that is none
/// of the four is said in a warning, and read as `write`.
pub(super) fn cache_mode(runner: &Runner) -> CacheMode {
    let (mode, unknown) = CacheMode::from_env(runner.env());
    if let Some(value) = unknown {
        render::unknown_cache_mode(&value).say(runner);
    }
    mode
}

/// No cache service can be reached.
struct Unavailable {
    reason: String,
}

impl Backend for Unavailable {
    fn describe(&self) -> String {
        "no cache service".to_owned()
    }

    fn lookup(&self, _key: &Key, _version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        Err(BackendError::new(ErrorKind::Fatal, self.reason.clone()))
    }

    fn lookup_newest_or(&self, _: &str, _key: &Key, _version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        Err(BackendError::new(ErrorKind::Fatal, self.reason.clone()))
    }

    fn open(&self, _entry: &CacheEntry) -> Result<Box<dyn std::io::Read + Send + '_>, BackendError> {
        Err(BackendError::new(ErrorKind::Fatal, self.reason.clone()))
    }

    fn reserve(&self, _key: &Key, _version: &Version) -> Result<Reservation, BackendError> {
        Err(BackendError::new(ErrorKind::Fatal, self.reason.clone()))
    }
}
