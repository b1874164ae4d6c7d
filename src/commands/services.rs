//! Which cache backend and which catalog (where entries are listed and deleted) a
//! configuration gets. Commands receive them as factories, so a test can hand in its own.

use crate::backend::http::Http;
use crate::backend::{
    Backend, BackendError, CacheEntry, Choice, ErrorKind, LocalBackend, Reservation, S3Backend, S3Settings, V1Backend,
    V2Backend, choose,
};
use crate::config::Config;
use crate::env::Env;
use crate::github::{Catalog, CatalogError, GithubCatalog};
use crate::runner::SecretSink;
use std::sync::Arc;

/// Builds the backend a configuration asks for.
pub type BackendFactory = dyn Fn(&Config, &Env, SecretSink) -> Box<dyn Backend>;
/// Builds the catalog (REST or local) that lists and deletes entries.
pub type CatalogFactory = dyn Fn(&Config, &Env) -> Result<Box<dyn Catalog>, CatalogError>;

/// The backend the configuration and the environment ask for (see [`crate::backend::select`]).
/// One that cannot be built is [`Unavailable`]: every call is service trouble with the reason.
pub fn select_backend(config: &Config, env: &Env, secrets: SecretSink) -> Box<dyn Backend> {
    let dir = config.local_dir.clone().unwrap_or_else(|| LocalBackend::default_dir(env));
    let http = || Http::new(env, secrets.clone()).map(Arc::new);
    let built: Result<Box<dyn Backend>, BackendError> = match choose(config.backend, config.protocol, dir, env) {
        Choice::Local { dir } => Ok(Box::new(LocalBackend::new(dir))),
        Choice::V1 { cache_url, token } => {
            http().and_then(|h| Ok(Box::new(V1Backend::new(h, &cache_url, token)?) as _))
        }
        Choice::V2 { results_url, token } => {
            http().and_then(|h| Ok(Box::new(V2Backend::new(h, &results_url, token)?) as _))
        }
        Choice::S3 => s3(config, env, secrets.clone()).map(|b| Box::new(b) as _),
        Choice::Unavailable { reason } => Err(BackendError::new(ErrorKind::Fatal, reason)),
    };
    built.unwrap_or_else(|e| Box::new(Unavailable { reason: crate::text::error_chain(&e) }))
}

/// Where entries are listed and deleted: the local store for the local backend, else the GitHub
/// REST API (with `github-token`, or `GITHUB_TOKEN`).
pub fn select_catalog(config: &Config, env: &Env) -> Result<Box<dyn Catalog>, CatalogError> {
    let dir = config.local_dir.clone().unwrap_or_else(|| LocalBackend::default_dir(env));
    match choose(config.backend, config.protocol, dir, env) {
        Choice::Local { dir } => Ok(Box::new(LocalBackend::new(dir))),
        Choice::Unavailable { reason } => Err(CatalogError::Unavailable { reason }),
        // Listing needs no secret of its own: the same credentials as the backend's.
        Choice::S3 => s3(config, env, SecretSink::detached()).map(|b| Box::new(b) as _).map_err(CatalogError::from),
        Choice::V1 { .. } | Choice::V2 { .. } => {
            let token = config.github_token.as_deref().or_else(|| env.non_empty("GITHUB_TOKEN"));
            Ok(Box::new(GithubCatalog::from_env(env, token)?))
        }
    }
}

/// The S3 backend of the `s3-*` inputs and the AWS environment.
fn s3(config: &Config, env: &Env, secrets: SecretSink) -> Result<S3Backend, BackendError> {
    let settings =
        S3Settings::resolve(&config.s3, env).map_err(|reason| BackendError::new(ErrorKind::Fatal, reason))?;
    S3Backend::new(Arc::new(Http::new(env, secrets)?), settings, env)
}

/// No cache service can be reached.
struct Unavailable {
    reason: String,
}

impl Backend for Unavailable {
    fn describe(&self) -> String {
        "no cache service".to_owned()
    }

    fn lookup(&self, _key: &str, _version: &str) -> Result<Option<CacheEntry>, BackendError> {
        Err(BackendError::new(ErrorKind::Fatal, self.reason.clone()))
    }

    fn open(&self, _entry: &CacheEntry) -> Result<Box<dyn std::io::Read + Send + '_>, BackendError> {
        Err(BackendError::new(ErrorKind::Fatal, self.reason.clone()))
    }

    fn reserve(&self, _key: &str, _version: &str) -> Result<Reservation, BackendError> {
        Err(BackendError::new(ErrorKind::Fatal, self.reason.clone()))
    }
}
