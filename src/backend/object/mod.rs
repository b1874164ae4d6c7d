//! What every object store (S3, Azure Blob) shares, written once and laid out as a store is:
//! this file, the store — a store describes itself ([`ObjectStore`]: its name, its inputs, the
//! one naming where its entries live, its settings resolved against the environment, its
//! client, and its secrets), and [`Objects`] makes that a [`Store`] of the registry whose
//! configured form builds the client as its backend and, with the same credentials, as its
//! catalog; [`client`], what each store's client does ([`ObjectClient`]); [`backend`] and
//! [`catalog`], the [`ObjectBackend`] over any client. The inputs of the same role take the
//! same parses: a prefix ([`prefix_input`]) and an endpoint ([`endpoint_input`]).
//!
//! How entries are kept inside an object store (names, metadata, listings) is [`super::entries`].

mod backend;
mod catalog;
mod client;

pub use backend::ObjectBackend;
pub use client::{Needs, NewEntry, Object, ObjectClient};

use super::catalog::{Catalog, CatalogError};
use super::http::Http;
use super::store::{Configured, Store};
use super::{Backend, BackendError, ErrorKind};
use crate::env::Env;
use crate::inputs::{Catalog as Listing, Input, InputError, InputKind, InputSpec, RawInputs, Scope};
use crate::paths::Locations;
use crate::runner::SecretSink;
use std::fmt;
use std::sync::Arc;

/// An object store, described for [`Objects`].
pub trait ObjectStore: fmt::Debug + Send + Sync + 'static {
    /// Its inputs as given.
    type Inputs: fmt::Debug + Send + Sync + 'static;
    /// Where its entries live, from the inputs and the environment.
    type Settings;
    /// Its client, under its backend and catalog ([`ObjectBackend`]).
    type Client: ObjectClient;

    /// Its name as the `backend` input takes it.
    const NAME: &'static str;

    /// Its own inputs, in the order documentation lists them.
    fn inputs(&self) -> &'static [&'static InputSpec];

    /// Read and check its inputs.
    fn read(&self, raw: &RawInputs) -> Result<Self::Inputs, InputError>;

    /// The input naming where its entries live (a bucket, a container), required when it is
    /// chosen, and whether `inputs` give it.
    fn place(&self, inputs: &Self::Inputs) -> (&'static Input<Option<String>>, bool);

    /// The inputs first, then the store's own variables; why not, in words.
    fn resolve(&self, inputs: &Self::Inputs, env: &Env) -> Result<Self::Settings, String>;

    /// The backend of `settings` over its client, with the credentials of `env` (its secrets
    /// masked first).
    fn connect(
        &self,
        http: Arc<Http>,
        settings: Self::Settings,
        env: &Env,
    ) -> Result<ObjectBackend<Self::Client>, BackendError>;

    /// The values of its credentials in `env`: masked in every step, never saved.
    fn secret_values(&self, env: &Env) -> Vec<String>;
}

/// An object store as a [`Store`] of the registry.
pub struct Objects<S: ObjectStore>(pub S);

impl<S: ObjectStore + Clone> Store for Objects<S> {
    fn name(&self) -> &'static str {
        S::NAME
    }

    fn inputs(&self) -> &'static [&'static InputSpec] {
        self.0.inputs()
    }

    fn configure(&self, raw: &RawInputs, _: &Locations, chosen: bool) -> Result<Arc<dyn Configured>, InputError> {
        let inputs = self.0.read(raw)?;
        let (place, given) = self.0.place(&inputs);
        if chosen && !given {
            let detail = format!("is required with `backend: {}`", S::NAME);
            return Err(InputError::Invalid { name: place.name(), detail });
        }
        Ok(Arc::new(ObjectConfig { store: self.0.clone(), inputs }))
    }
}

/// An object store with its inputs read.
#[derive(Debug)]
struct ObjectConfig<S: ObjectStore> {
    store: S,
    inputs: S::Inputs,
}

impl<S: ObjectStore> ObjectConfig<S> {
    fn client(&self, env: &Env, secrets: SecretSink) -> Result<ObjectBackend<S::Client>, BackendError> {
        let settings =
            self.store.resolve(&self.inputs, env).map_err(|reason| BackendError::new(ErrorKind::Fatal, reason))?;
        self.store.connect(Arc::new(Http::new(env, secrets)?), settings, env)
    }
}

impl<S: ObjectStore> Configured for ObjectConfig<S> {
    fn backend(&self, env: &Env, secrets: SecretSink) -> Result<Box<dyn Backend>, BackendError> {
        Ok(Box::new(self.client(env, secrets)?))
    }

    fn catalog(&self, env: &Env, _token: Option<&str>) -> Result<Box<dyn Catalog>, CatalogError> {
        // Listing needs no secret of its own: the same credentials as the backend's.
        Ok(Box::new(self.client(env, SecretSink::detached())?))
    }

    fn secret_values(&self, env: &Env) -> Vec<String> {
        self.store.secret_values(env)
    }
}

/// A store's prefix input (`<store>-prefix`), read by the catalog commands too.
pub const fn prefix_input(name: &'static str, description: &'static str) -> Input<Option<String>> {
    Input::new(name, InputKind::Text, Scope::Cache, "", description, parse_prefix).catalog(Listing::Both)
}

/// A store's endpoint input (`<store>-endpoint`), read by the catalog commands too.
pub const fn endpoint_input(name: &'static str, description: &'static str) -> Input<Option<String>> {
    Input::new(name, InputKind::Text, Scope::Cache, "", description, parse_endpoint).catalog(Listing::Both)
}

/// An object store's endpoint input: an `http(s)` URL with a host; `None` when not given.
pub fn parse_endpoint(value: Option<&str>) -> Result<Option<String>, String> {
    let Some(e) = value.map(str::trim).filter(|e| !e.is_empty()) else { return Ok(None) };
    let parsed = url::Url::parse(e).ok().filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
    match parsed {
        Some(_) => Ok(Some(e.to_owned())),
        None => Err(format!("`{e}` is not an `http://` or `https://` URL")),
    }
}

/// An object store's prefix input: ASCII letters, digits, `-`, `_`, `.` and `/` between
/// non-empty segments other than `.` and `..`; `None` when not given.
pub fn parse_prefix(value: Option<&str>) -> Result<Option<String>, String> {
    let Some(p) = value.map(str::trim).filter(|p| !p.is_empty()) else { return Ok(None) };
    let segments: Vec<&str> = p.trim_matches('/').split('/').collect();
    let valid = p.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'/'))
        && segments.iter().all(|s| !s.is_empty() && *s != "." && *s != "..");
    match valid {
        true => Ok(Some(p.to_owned())),
        false => Err(format!(
            "`{p}` is not a key prefix: use ASCII letters, digits, `-`, `_`, `.` and `/` between non-empty segments \
             other than `.` and `..`"
        )),
    }
}
