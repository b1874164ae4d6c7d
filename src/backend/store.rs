//! The store a run uses, as a value: [`Store`], built once from the inputs, and one `match` for
//! its backend, catalog and secrets. The `backend` input's description and the registry's store
//! inputs are derived from [`StoreKind::ALL`]. Each store is one directory under `backend/`
//! (docs/architecture.md, "Adding a store").

use super::catalog::{Catalog, CatalogError};
use super::{Backend, BackendError, azure, github, local, s3};
use crate::choice;
use crate::content::store::PackStore;
use crate::env::Env;
use crate::inputs::{Input, InputError, InputKind, InputSpec, RawInputs, Readers};
use crate::paths::Locations;
use crate::runner::SecretSink;
use std::path::PathBuf;
use std::sync::LazyLock;

choice::named_enum! {
    /// A kind of store, as the `backend` input names it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum StoreKind {
        Github => "github",
        Local => "local",
        S3 => "s3",
        AzureBlob => "azure-blob",
    }
}

impl StoreKind {
    pub const ALL: [StoreKind; 4] = [StoreKind::Github, StoreKind::Local, StoreKind::S3, StoreKind::AzureBlob];

    /// Its own inputs, in the order documentation lists them.
    pub fn inputs(self) -> &'static [&'static InputSpec] {
        match self {
            StoreKind::Github => &github::INPUTS,
            StoreKind::Local => &local::INPUTS,
            StoreKind::S3 => &s3::INPUTS,
            StoreKind::AzureBlob => &azure::INPUTS,
        }
    }
}

/// The `backend` input: `None` for `auto`.
pub static BACKEND: LazyLock<Input<Option<StoreKind>>> = LazyLock::new(|| {
    let names: Vec<String> = StoreKind::ALL.iter().map(|k| format!("`{}`", k.name())).collect();
    let (last, others) = names.split_last().expect("stores");
    let description = format!(
        "Where entries live: `auto` (the runner's cache service, else the local directory), {} or {last}.",
        others.join(", ")
    );
    Input::new("backend", InputKind::Text, Readers::CACHE.and_listing(), "auto", description.leak(), parse_backend)
});

fn parse_backend(value: Option<&str>) -> Result<Option<StoreKind>, String> {
    let value = value.unwrap_or("auto").trim();
    if value.eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    choice::parse(value).map(Some).ok_or_else(|| {
        let names: Vec<String> =
            std::iter::once("auto").chain(StoreKind::ALL.map(StoreKind::name)).map(|n| format!("`{n}`")).collect();
        format!("`{value}` is not one of {}", names.join(", "))
    })
}

/// The store the inputs chose, with its own inputs read.
#[derive(Clone, Debug)]
pub enum Store {
    /// The runner's cache service, spoken in `protocol` (or as the environment says).
    Github(github::Protocol),
    /// `local-dir`; `None`: [`local::LocalBackend::default_dir`].
    Local(Option<PathBuf>),
    S3(s3::S3Inputs),
    AzureBlob(azure::AzureInputs),
}

impl Store {
    /// The store `backend` names (`auto`: the runner's cache service where `env` offers one, else
    /// the local directory). Every store's inputs are read, so a bad value is an input error
    /// whichever store is chosen.
    pub fn configure(raw: &RawInputs, locations: &Locations, env: &Env) -> Result<Store, InputError> {
        let choice = BACKEND.read(raw)?;
        let protocol = github::PROTOCOL.read(raw)?;
        let dir = local::read(raw, locations)?;
        let (s3, azure) = (s3::S3Inputs::read(raw)?, azure::AzureInputs::read(raw)?);
        let required = |input: &Input<Option<String>>, given: bool, kind: StoreKind| match given {
            true => Ok(()),
            false => Err(InputError::Invalid {
                name: input.name(),
                detail: format!("is required with `backend: {}`", kind.name()),
            }),
        };
        let kind = choice.unwrap_or(match github::serves(protocol, env) {
            true => StoreKind::Github,
            false => StoreKind::Local,
        });
        Ok(match kind {
            StoreKind::Github => Store::Github(protocol),
            StoreKind::Local => Store::Local(dir),
            StoreKind::S3 => {
                required(&s3::S3_BUCKET, s3.bucket.is_some(), kind)?;
                Store::S3(s3)
            }
            StoreKind::AzureBlob => {
                required(&azure::AZURE_CONTAINER, azure.container.is_some(), kind)?;
                Store::AzureBlob(azure)
            }
        })
    }

    pub fn kind(&self) -> StoreKind {
        match self {
            Store::Github(_) => StoreKind::Github,
            Store::Local(_) => StoreKind::Local,
            Store::S3(_) => StoreKind::S3,
            Store::AzureBlob(_) => StoreKind::AzureBlob,
        }
    }

    /// Its backend, or why it cannot be built.
    pub fn backend(&self, env: &Env, secrets: SecretSink) -> Result<Box<dyn Backend>, BackendError> {
        Ok(match self {
            Store::Github(protocol) => github::backend(*protocol, env, secrets)?,
            Store::Local(dir) => Box::new(local::store(dir.as_deref(), env)),
            Store::S3(inputs) => Box::new(s3::connect(inputs, env, secrets)?),
            Store::AzureBlob(inputs) => Box::new(azure::connect(inputs, env, secrets)?),
        })
    }

    /// Where its entries are listed and deleted; `token` is the `github-token` input.
    pub fn catalog(&self, env: &Env, token: Option<&str>) -> Result<Box<dyn Catalog>, CatalogError> {
        Ok(match self {
            Store::Github(protocol) => Box::new(github::catalog(*protocol, env, token)?),
            Store::Local(dir) => Box::new(local::store(dir.as_deref(), env)),
            Store::S3(inputs) => Box::new(s3::connect(inputs, env, SecretSink::detached())?),
            Store::AzureBlob(inputs) => Box::new(azure::connect(inputs, env, SecretSink::detached())?),
        })
    }

    /// Its packs of `prefix` (content stored once), with what lists and deletes them.
    pub fn packs(
        &self,
        env: &Env,
        secrets: SecretSink,
        token: Option<&str>,
        prefix: &str,
    ) -> Result<Box<dyn PackStore>, BackendError> {
        match self {
            Store::Github(protocol) => Ok(Box::new(github::packs(*protocol, env, secrets, token, prefix)?)),
            _ => Ok(self.backend(env, secrets)?.packs(prefix).expect("every store keeps packs")),
        }
    }

    /// The values of its credentials in `env`: masked in every step, and never saved.
    pub fn secret_values(&self, env: &Env) -> Vec<String> {
        match self {
            Store::Github(_) | Store::Local(_) => Vec::new(),
            Store::S3(_) => s3::S3Settings::secrets(env),
            Store::AzureBlob(_) => azure::AzureSettings::secrets(env),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(pairs: &[(&str, &str)], env: &[(&str, &str)]) -> Result<Store, InputError> {
        let mut raw = RawInputs::default();
        for (k, v) in pairs {
            raw.set(k, *v);
        }
        let locations = Locations { workspace: "/ws".into(), home: Some("/home/u".into()) };
        Store::configure(&raw, &locations, &Env::from_pairs(env.iter().copied()))
    }

    const SERVICE: &[(&str, &str)] = &[("ACTIONS_CACHE_URL", "http://10.0.0.2:34567/abc/")];

    #[test]
    fn auto_takes_the_runners_service_else_the_local_directory_and_a_name_is_obeyed() {
        let kind = |pairs: &[(&str, &str)], env: &[(&str, &str)]| store(pairs, env).unwrap().kind();
        assert_eq!(kind(&[], SERVICE), StoreKind::Github);
        assert_eq!(kind(&[], &[]), StoreKind::Local);
        assert_eq!(kind(&[("backend", "LOCAL")], SERVICE), StoreKind::Local);
        let github = store(&[("backend", "github")], &[]).unwrap();
        assert_eq!(github.kind(), StoreKind::Github);
        let Err(err) = github.backend(&Env::default(), SecretSink::detached()) else { panic!("no service") };
        let err = err.to_string();
        assert!(err.contains("no cache service is configured"), "{err}");
        assert!(matches!(github.catalog(&Env::default(), None), Err(CatalogError::Unavailable { .. })));
    }

    #[test]
    fn the_backend_input_names_and_documents_every_store() {
        assert_eq!(parse_backend(Some(" S3 ")), Ok(Some(StoreKind::S3)));
        assert_eq!(parse_backend(None), Ok(None));
        let err = parse_backend(Some("gcs")).unwrap_err();
        let names: Vec<String> = StoreKind::ALL.iter().map(|k| format!("`{}`", k.name())).collect();
        assert_eq!(err, format!("`gcs` is not one of `auto`, {}", names.join(", ")));
        let listed = format!("{} or {}.", names[..names.len() - 1].join(", "), names[names.len() - 1]);
        assert!(BACKEND.spec.description.ends_with(&listed), "{}", BACKEND.spec.description);
    }

    #[test]
    fn a_stores_input_is_checked_whichever_store_is_chosen_and_its_place_when_chosen() {
        let err = store(&[("s3-bucket", "Bad_Bucket")], &[]).unwrap_err().to_string();
        assert!(err.contains("is not a bucket name"), "{err}");
        let err = store(&[("backend", "s3")], &[]).unwrap_err().to_string();
        assert_eq!(err, "input `s3-bucket`: is required with `backend: s3`");
        let err = store(&[("backend", "azure-blob")], &[]).unwrap_err().to_string();
        assert_eq!(err, "input `azure-container`: is required with `backend: azure-blob`");
    }

    #[test]
    fn secrets_are_the_chosen_stores_only() {
        let env = [("AWS_SECRET_ACCESS_KEY", "aws-secret"), ("AZURE_STORAGE_SAS_TOKEN", "?sv=1&sig=abc")];
        let s3 = store(&[("backend", "s3"), ("s3-bucket", "bucket-1")], &[]).unwrap();
        assert_eq!(s3.secret_values(&Env::from_pairs(env)), ["aws-secret"]);
        let azure = store(&[("backend", "azure-blob"), ("azure-container", "cache-1")], &[]).unwrap();
        assert_eq!(azure.secret_values(&Env::from_pairs(env)), ["?sv=1&sig=abc", "abc"]);
        assert!(store(&[], &[]).unwrap().secret_values(&Env::from_pairs(env)).is_empty());
    }
}
