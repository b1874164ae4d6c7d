//! The GitHub Actions cache service (`backend: github`, and `auto` wherever a runner offers it):
//! the v1 REST protocol and v2 (Twirp + Azure Blob), chosen by the `protocol` input and the
//! environment as the official client chooses ([`settings`]), and the REST API as its catalog.
//!
//! Where another store has one `backend.rs`, it has one file per protocol ([`v1`], [`v2`]).

mod catalog;
mod packs;
mod settings;
mod v1;
mod v2;

pub use catalog::GithubCatalog;
pub use packs::ServicePacks;
pub use settings::{Protocol, Service};
pub use v1::V1Backend;
pub use v2::V2Backend;

use super::catalog::CatalogError;
use super::http::Http;
use super::{Backend, BackendError, CacheMode, ErrorKind};
use crate::env::Env;
use crate::inputs::{Input, InputSpec, Readers};
use crate::runner::SecretSink;
use std::sync::Arc;

pub static PROTOCOL: Input<Protocol> = Input::choice(
    "protocol",
    Readers::CACHE.and_listing(),
    "auto",
    "Cache service protocol: `auto`, `v1` or `v2` (`auto` follows the official client's choice).",
);

pub(super) static INPUTS: [&InputSpec; 1] = [&PROTOCOL.spec];

/// Whether the runner offers a cache service under `protocol`.
pub(super) fn serves(protocol: Protocol, env: &Env) -> bool {
    settings::service(protocol, env).is_some()
}

/// The backend of the service `env` offers under `protocol`, or why there is none.
pub(super) fn backend(protocol: Protocol, env: &Env, secrets: SecretSink) -> Result<Box<dyn Backend>, BackendError> {
    service_backend(protocol, env, secrets).map(|(backend, _)| backend)
}

/// [`backend`], and the HTTP client it sends through.
fn service_backend(
    protocol: Protocol,
    env: &Env,
    secrets: SecretSink,
) -> Result<(Box<dyn Backend>, Arc<Http>), BackendError> {
    let service = settings::service(protocol, env)
        .unwrap_or_else(|| Err(settings::no_service_reason(protocol, env)))
        .map_err(|reason| BackendError::new(ErrorKind::Fatal, reason))?;
    let http = Arc::new(Http::new(env, secrets)?);
    let mode = CacheMode::from_env(env).0;
    let backend: Box<dyn Backend> = match service {
        Service::V1 { cache_url, token } => {
            Box::new(V1Backend::new(Arc::clone(&http), &cache_url, token)?.with_mode(mode))
        }
        Service::V2 { results_url, token } => {
            Box::new(V2Backend::new(Arc::clone(&http), &results_url, token)?.with_mode(mode))
        }
    };
    Ok((backend, http))
}

/// The packs of `prefix` on the service `env` offers, listed and deleted through the REST API
/// with `token` where there is one.
pub(super) fn packs(
    protocol: Protocol,
    env: &Env,
    secrets: SecretSink,
    token: Option<&str>,
    prefix: &str,
) -> Result<ServicePacks, BackendError> {
    let (backend, http) = service_backend(protocol, env, secrets)?;
    let packs = ServicePacks::new(backend, http, prefix);
    Ok(match catalog(protocol, env, token) {
        Ok(catalog) => packs.with_catalog(Box::new(catalog)),
        Err(_) => packs,
    })
}

/// The REST API, with `token` (else `GITHUB_TOKEN`), where a service serves the run.
pub(super) fn catalog(protocol: Protocol, env: &Env, token: Option<&str>) -> Result<GithubCatalog, CatalogError> {
    match settings::service(protocol, env) {
        Some(Ok(_)) => GithubCatalog::from_env(env, token.or_else(|| env.non_empty("GITHUB_TOKEN"))),
        Some(Err(reason)) => Err(CatalogError::Unavailable { reason }),
        None => Err(CatalogError::Unavailable { reason: settings::no_service_reason(protocol, env) }),
    }
}
