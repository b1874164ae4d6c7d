//! `backend: azure-blob` as a store: its `azure-*` inputs, checked here, and its backend, which
//! is also its catalog.

use super::settings::is_container_name;
use super::{AzureBlobBackend, AzureInputs, AzureSettings};
use crate::backend::catalog::{Catalog, CatalogError};
use crate::backend::entries::{parse_endpoint, parse_prefix};
use crate::backend::http::Http;
use crate::backend::store::{Configured, Store};
use crate::backend::{Backend, BackendError, ErrorKind};
use crate::env::Env;
use crate::inputs::{Catalog as Listing, Input, InputError, InputKind, InputSpec, RawInputs, Scope};
use crate::paths::Locations;
use crate::runner::SecretSink;
use std::sync::Arc;

pub static AZURE_ACCOUNT: Input<Option<String>> = Input::text(
    "azure-account",
    Scope::Cache,
    "With `backend: azure-blob`: the storage account (default: `AZURE_STORAGE_ACCOUNT_NAME`, \
     `AZURE_STORAGE_ACCOUNT`, else the connection string's). Credentials come only from the Azure environment \
     (an account key, a SAS token, a connection string, workload or managed identity, a client secret), never \
     from inputs.",
)
.catalog(Listing::Both);

pub static AZURE_CONTAINER: Input<Option<String>> = Input::new(
    "azure-container",
    InputKind::Text,
    Scope::Cache,
    "",
    "With `backend: azure-blob`: the blob container (required).",
    |value| match value.map(str::trim).filter(|c| !c.is_empty()) {
        Some(c) if !is_container_name(c) => Err(format!(
            "`{c}` is not a container name (3 to 63 lowercase letters, digits and single `-`, starting and ending \
             with a letter or digit)"
        )),
        container => Ok(container.map(str::to_owned)),
    },
)
.catalog(Listing::Both);

pub static AZURE_PREFIX: Input<Option<String>> = Input::new(
    "azure-prefix",
    InputKind::Text,
    Scope::Cache,
    "",
    "With `backend: azure-blob`: a name prefix inside the container (e.g. `ci-cache/`).",
    parse_prefix,
)
.catalog(Listing::Both);

pub static AZURE_ENDPOINT: Input<Option<String>> = Input::new(
    "azure-endpoint",
    InputKind::Text,
    Scope::Cache,
    "",
    "With `backend: azure-blob`: the blob endpoint, for Azurite or a sovereign cloud (default: \
     `AZURE_STORAGE_ENDPOINT`, `AZURE_ENDPOINT`, the connection string's, else `https://<account>.blob.core.windows.net`).",
    parse_endpoint,
)
.catalog(Listing::Both);

pub struct AzureBlobStore;

pub static AZURE_BLOB: AzureBlobStore = AzureBlobStore;

impl Store for AzureBlobStore {
    fn name(&self) -> &'static str {
        "azure-blob"
    }

    fn inputs(&self) -> &'static [&'static InputSpec] {
        static INPUTS: [&InputSpec; 4] =
            [&AZURE_ACCOUNT.spec, &AZURE_CONTAINER.spec, &AZURE_PREFIX.spec, &AZURE_ENDPOINT.spec];
        &INPUTS
    }

    fn configure(&self, raw: &RawInputs, _: &Locations, chosen: bool) -> Result<Arc<dyn Configured>, InputError> {
        let inputs = AzureInputs {
            account: AZURE_ACCOUNT.read(raw)?,
            container: AZURE_CONTAINER.read(raw)?,
            prefix: AZURE_PREFIX.read(raw)?,
            endpoint: AZURE_ENDPOINT.read(raw)?,
        };
        if chosen && inputs.container.is_none() {
            let detail = "is required with `backend: azure-blob`".into();
            return Err(InputError::Invalid { name: AZURE_CONTAINER.name(), detail });
        }
        Ok(Arc::new(AzureConfig { inputs }))
    }
}

#[derive(Debug)]
struct AzureConfig {
    inputs: AzureInputs,
}

impl AzureConfig {
    fn client(&self, env: &Env, secrets: SecretSink) -> Result<AzureBlobBackend, BackendError> {
        let settings =
            AzureSettings::resolve(&self.inputs, env).map_err(|reason| BackendError::new(ErrorKind::Fatal, reason))?;
        AzureBlobBackend::new(Arc::new(Http::new(env, secrets)?), settings, env)
    }
}

impl Configured for AzureConfig {
    fn backend(&self, env: &Env, secrets: SecretSink) -> Result<Box<dyn Backend>, BackendError> {
        Ok(Box::new(self.client(env, secrets)?))
    }

    fn catalog(&self, env: &Env, _token: Option<&str>) -> Result<Box<dyn Catalog>, CatalogError> {
        // Listing needs no secret of its own: the same credentials as the backend's.
        Ok(Box::new(self.client(env, SecretSink::detached())?))
    }

    fn secret_values(&self, env: &Env) -> Vec<String> {
        AzureSettings::secrets(env)
    }
}
