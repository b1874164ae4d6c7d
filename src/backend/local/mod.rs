//! The local directory store (`backend: local`, and `auto` where no runner offers a cache
//! service): entries are files in one directory, which is also their catalog, each with a
//! record of the ref that saved it and of its last use.
//!
//! Its files are every store's ([`super::store`]): this one, the store (its input, read here);
//! [`backend`], [`catalog`] and [`upload`], the roles by those names; and [`meta`], its records.
//! It has no settings of its own beyond a directory, and no client: the file system is one.

mod backend;
mod catalog;
mod meta;
mod upload;

pub use backend::LocalBackend;

use super::catalog::{Catalog, CatalogError};
use super::store::{Configured, Store};
use super::{Backend, BackendError};
use crate::env::Env;
use crate::inputs::{Catalog as Listing, Input, InputError, InputSpec, RawInputs, Scope};
use crate::paths::Locations;
use crate::runner::SecretSink;
use std::path::PathBuf;
use std::sync::Arc;

pub static LOCAL_DIR: Input<Option<String>> = Input::text(
    "local-dir",
    Scope::Cache,
    "Directory of the local backend (default: `$EXACT_CACHE_DIR`, else the user cache directory).",
)
.catalog(Listing::Both);

pub struct LocalStore;

pub static LOCAL: LocalStore = LocalStore;

impl Store for LocalStore {
    fn name(&self) -> &'static str {
        "local"
    }

    fn inputs(&self) -> &'static [&'static InputSpec] {
        static INPUTS: [&InputSpec; 1] = [&LOCAL_DIR.spec];
        &INPUTS
    }

    fn configure(
        &self,
        raw: &RawInputs,
        locations: &Locations,
        _chosen: bool,
    ) -> Result<Arc<dyn Configured>, InputError> {
        let name = LOCAL_DIR.name();
        let dir = LOCAL_DIR
            .read(raw)?
            .map(|dir| locations.resolve(&dir).map_err(|source| InputError::Path { name, source }))
            .transpose()?;
        Ok(Arc::new(LocalConfig { dir }))
    }
}

#[derive(Debug)]
struct LocalConfig {
    /// `local-dir`; `None`: [`LocalBackend::default_dir`].
    dir: Option<PathBuf>,
}

impl LocalConfig {
    fn store(&self, env: &Env) -> LocalBackend {
        LocalBackend::new(self.dir.clone().unwrap_or_else(|| LocalBackend::default_dir(env)))
            .saving_on(env.non_empty("GITHUB_REF"))
    }
}

impl Configured for LocalConfig {
    fn serves_auto(&self, _env: &Env) -> bool {
        true
    }

    fn backend(&self, env: &Env, _secrets: SecretSink) -> Result<Box<dyn Backend>, BackendError> {
        Ok(Box::new(self.store(env)))
    }

    fn catalog(&self, env: &Env, _token: Option<&str>) -> Result<Box<dyn Catalog>, CatalogError> {
        Ok(Box::new(self.store(env)))
    }
}
