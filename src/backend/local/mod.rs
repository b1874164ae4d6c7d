//! The local directory store (`backend: local`, and `auto` where no runner offers a cache
//! service): entries are files in one directory, which is also their catalog, each with a
//! record of the ref that saved it and of its last use.

mod backend;
mod catalog;
mod meta;
mod upload;

pub use backend::LocalBackend;

use crate::env::Env;
use crate::inputs::{Input, InputError, InputSpec, RawInputs, Readers};
use crate::paths::Locations;
use std::path::{Path, PathBuf};

pub static LOCAL_DIR: Input<Option<String>> = Input::text(
    "local-dir",
    Readers::CACHE.and_listing(),
    "Directory of the local backend (default: `$EXACT_CACHE_DIR`, else the user cache directory).",
);

pub(super) static INPUTS: [&InputSpec; 1] = [&LOCAL_DIR.spec];

/// `local-dir`, resolved against the workspace and home.
pub(super) fn read(raw: &RawInputs, locations: &Locations) -> Result<Option<PathBuf>, InputError> {
    let name = LOCAL_DIR.name();
    LOCAL_DIR
        .read(raw)?
        .map(|dir| locations.resolve(&dir).map_err(|source| InputError::Path { name, source }))
        .transpose()
}

/// The store in `dir` (`None`: [`LocalBackend::default_dir`]), saving on `GITHUB_REF`.
pub(super) fn store(dir: Option<&Path>, env: &Env) -> LocalBackend {
    let dir = dir.map_or_else(|| LocalBackend::default_dir(env), Path::to_owned);
    LocalBackend::new(dir).saving_on(env.non_empty("GITHUB_REF"))
}
