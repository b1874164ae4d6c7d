//! Stores as providers. Each place entries can live — the GitHub cache service, the local
//! directory, S3-compatible object storage, Azure Blob Storage — is one [`Store`]: its name for the `backend` input,
//! its own inputs (they join the input registry), and, configured, its backend, its catalog and
//! the variables holding its credentials. [`STORES`] is the registry: adding a store is one
//! directory under `backend/` and one line here.
//!
//! Every store's directory has the same files for the same roles (a store leaves out what it
//! has no use for): `mod.rs`, the store — its inputs, read and checked, and its [`Store`] (an
//! object store describes itself as an [`super::object::ObjectStore`] instead, and
//! [`super::object::Objects`] makes that a [`Store`]); `settings.rs`, its typed settings from
//! the inputs and the environment, and its credential variables; `client.rs`, its requests
//! (signed, sent, their answers read as [`BackendError`]s); `backend.rs`, its [`Backend`];
//! `catalog.rs`, its [`Catalog`]; `upload.rs`, its saves (an [`super::Upload`]).

use super::catalog::{Catalog, CatalogError};
use super::{Backend, BackendError};
use crate::env::Env;
use crate::inputs::{InputError, InputSpec, RawInputs};
use crate::paths::Locations;
use crate::runner::SecretSink;
use std::fmt;
use std::sync::Arc;

/// A kind of store, before its inputs are read.
pub trait Store: Sync {
    /// Its name as the `backend` input takes it.
    fn name(&self) -> &'static str;

    /// Its own inputs, in the order documentation lists them.
    fn inputs(&self) -> &'static [&'static InputSpec];

    /// Read and check its inputs. Every store is configured whichever is chosen, so a bad value
    /// is an input error wherever it is written; `chosen` says whether the user named it.
    fn configure(
        &self,
        raw: &RawInputs,
        locations: &Locations,
        chosen: bool,
    ) -> Result<Arc<dyn Configured>, InputError>;
}

/// A store with its inputs read.
pub trait Configured: Send + Sync + fmt::Debug {
    /// With `backend: auto`, whether this store serves the run (a runner's cache service; the
    /// local directory always).
    fn serves_auto(&self, _env: &Env) -> bool {
        false
    }

    fn backend(&self, env: &Env, secrets: SecretSink) -> Result<Box<dyn Backend>, BackendError>;

    /// Where its entries are listed and deleted; `token` is the `github-token` input.
    fn catalog(&self, env: &Env, token: Option<&str>) -> Result<Box<dyn Catalog>, CatalogError>;

    /// The values of its credentials in `env`: masked in every step, and never saved.
    fn secret_values(&self, _env: &Env) -> Vec<String> {
        Vec::new()
    }
}

/// Every store; with `backend: auto` the first that serves the run is chosen.
pub static STORES: &[&dyn Store] =
    &[&super::github::GITHUB, &super::local::LOCAL, &super::s3::S3, &super::azure::AZURE_BLOB];

/// The `backend` input: `auto`, or a store's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    Auto,
    Named(&'static str),
}

/// `auto` or a store's name, in any ASCII case.
pub fn parse_backend(value: Option<&str>) -> Result<BackendChoice, String> {
    let value = value.unwrap_or("auto").trim();
    if value.eq_ignore_ascii_case("auto") {
        return Ok(BackendChoice::Auto);
    }
    STORES.iter().find(|s| s.name().eq_ignore_ascii_case(value)).map(|s| BackendChoice::Named(s.name())).ok_or_else(
        || {
            let names: Vec<String> =
                std::iter::once("auto").chain(STORES.iter().map(|s| s.name())).map(|n| format!("`{n}`")).collect();
            format!("`{value}` is not one of {}", names.join(", "))
        },
    )
}

/// Every store configured, and the user's choice.
#[derive(Clone, Debug)]
pub struct Stores {
    choice: BackendChoice,
    configured: Vec<(&'static str, Arc<dyn Configured>)>,
}

impl Stores {
    pub fn configure(choice: BackendChoice, raw: &RawInputs, locations: &Locations) -> Result<Self, InputError> {
        let configured = STORES
            .iter()
            .map(|store| {
                let chosen = choice == BackendChoice::Named(store.name());
                Ok((store.name(), store.configure(raw, locations, chosen)?))
            })
            .collect::<Result<_, InputError>>()?;
        Ok(Stores { choice, configured })
    }

    pub fn choice(&self) -> BackendChoice {
        self.choice
    }

    /// The name of the store serving this run: the one named, else the first that serves it.
    pub fn chosen_name(&self, env: &Env) -> &'static str {
        self.chosen(env).0
    }

    fn chosen(&self, env: &Env) -> &(&'static str, Arc<dyn Configured>) {
        let pick = |(name, store): &(&'static str, Arc<dyn Configured>)| match self.choice {
            BackendChoice::Named(chosen) => *name == chosen,
            BackendChoice::Auto => store.serves_auto(env),
        };
        self.configured.iter().find(|s| pick(s)).expect("the local store serves every run")
    }

    /// The chosen store's backend, or why it cannot be built.
    pub fn backend(&self, env: &Env, secrets: SecretSink) -> Result<Box<dyn Backend>, BackendError> {
        self.chosen(env).1.backend(env, secrets)
    }

    /// Where the chosen store's entries are listed and deleted.
    pub fn catalog(&self, env: &Env, token: Option<&str>) -> Result<Box<dyn Catalog>, CatalogError> {
        self.chosen(env).1.catalog(env, token)
    }

    /// The chosen store's credentials in `env`.
    pub fn secret_values(&self, env: &Env) -> Vec<String> {
        self.chosen(env).1.secret_values(env)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stores(pairs: &[(&str, &str)]) -> Result<Stores, InputError> {
        let mut raw = RawInputs::default();
        for (k, v) in pairs {
            raw.set(k, *v);
        }
        let choice = parse_backend(raw.get("backend")).unwrap();
        let locations = Locations { workspace: "/ws".into(), home: Some("/home/u".into()) };
        Stores::configure(choice, &raw, &locations)
    }

    const SERVICE: &[(&str, &str)] = &[("ACTIONS_CACHE_URL", "http://10.0.0.2:34567/abc/")];

    #[test]
    fn auto_takes_the_runners_service_else_the_local_directory_and_a_name_is_obeyed() {
        let env = |pairs: &[(&str, &str)]| Env::from_pairs(pairs.iter().copied());
        assert_eq!(stores(&[]).unwrap().chosen_name(&env(SERVICE)), "github");
        assert_eq!(stores(&[]).unwrap().chosen_name(&env(&[])), "local");
        assert_eq!(stores(&[("backend", "LOCAL")]).unwrap().chosen_name(&env(SERVICE)), "local");
        let github = stores(&[("backend", "github")]).unwrap();
        assert_eq!(github.chosen_name(&env(&[])), "github");
        let Err(err) = github.backend(&env(&[]), SecretSink::detached()) else { panic!("no service") };
        let err = err.to_string();
        assert!(err.contains("no cache service is configured"), "{err}");
        assert!(matches!(github.catalog(&env(&[]), None), Err(CatalogError::Unavailable { .. })));
    }

    #[test]
    fn the_backend_input_names_every_store() {
        assert_eq!(parse_backend(Some(" S3 ")), Ok(BackendChoice::Named("s3")));
        assert_eq!(parse_backend(None), Ok(BackendChoice::Auto));
        let err = parse_backend(Some("gcs")).unwrap_err();
        assert!(err.starts_with("`gcs` is not one of `auto`, `github`, `local`, `s3`"), "{err}");
    }

    #[test]
    fn a_stores_input_is_checked_whichever_store_is_chosen_and_its_needs_when_chosen() {
        let err = stores(&[("s3-bucket", "Bad_Bucket")]).unwrap_err().to_string();
        assert!(err.contains("is not a bucket name"), "{err}");
        let err = stores(&[("backend", "s3")]).unwrap_err().to_string();
        assert_eq!(err, "input `s3-bucket`: is required with `backend: s3`");
    }
}
