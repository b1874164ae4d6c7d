//! Azure Blob Storage (`backend: azure-blob`): a container of an Azure storage account (or
//! Azurite, or a sovereign cloud's endpoint) for self-hosted fleets on Azure.
//!
//! `object_store` (apache arrow-rs) holds the credentials (the Azure environment only, or a
//! connection string) and signs; our own HTTP client ([`Http`]) sends every request. Requests are
//! authorized one by one with `object_store`'s `AzureAuthorizer` rather than as SAS URLs, because
//! a SAS from `object_store` covers one blob only (a listing needs the container) and cannot be
//! made from a SAS token; downloads, which send no header, get a SAS URL instead.
//!
//! Entries are laid out as `super::entries` says, one block blob each, created with
//! `If-None-Match: *` so that a second saver is refused and reported as `exists` (`upload`).

mod client;
mod settings;
mod upload;

pub use settings::{AzureInputs, AzureSettings};

use crate::backend::http::Http;
use crate::backend::object::{ObjectBackend, endpoint_input, prefix_input};
use crate::backend::{BackendError, ErrorKind};
use crate::env::Env;
use crate::inputs::{Input, InputError, InputKind, InputSpec, RawInputs, Readers};
use crate::runner::SecretSink;
use client::Client;
use settings::is_container_name;
use std::sync::Arc;

pub static AZURE_ACCOUNT: Input<Option<String>> = Input::text(
    "azure-account",
    Readers::CACHE.and_listing(),
    "With `backend: azure-blob`: the storage account (default: `AZURE_STORAGE_ACCOUNT_NAME`, \
     `AZURE_STORAGE_ACCOUNT`, else the connection string's). Credentials come only from the Azure environment \
     (an account key, a SAS token, a connection string, workload or managed identity, a client secret), never \
     from inputs.",
);

pub static AZURE_CONTAINER: Input<Option<String>> = Input::new(
    "azure-container",
    InputKind::Text,
    Readers::CACHE.and_listing(),
    "",
    "With `backend: azure-blob`: the blob container (required).",
    |value| match value.map(str::trim).filter(|c| !c.is_empty()) {
        Some(c) if !is_container_name(c) => Err(format!(
            "`{c}` is not a container name (3 to 63 lowercase letters, digits and single `-`, starting and ending \
             with a letter or digit)"
        )),
        container => Ok(container.map(str::to_owned)),
    },
);

pub static AZURE_PREFIX: Input<Option<String>> =
    prefix_input("azure-prefix", "With `backend: azure-blob`: a name prefix inside the container (e.g. `ci-cache/`).");

pub static AZURE_ENDPOINT: Input<Option<String>> = endpoint_input(
    "azure-endpoint",
    "With `backend: azure-blob`: the blob endpoint, for Azurite or a sovereign cloud (default: \
     `AZURE_STORAGE_ENDPOINT`, `AZURE_ENDPOINT`, the connection string's, else `https://<account>.blob.core.windows.net`).",
);

pub(super) static INPUTS: [&InputSpec; 4] =
    [&AZURE_ACCOUNT.spec, &AZURE_CONTAINER.spec, &AZURE_PREFIX.spec, &AZURE_ENDPOINT.spec];

impl AzureInputs {
    pub fn read(raw: &RawInputs) -> Result<AzureInputs, InputError> {
        Ok(AzureInputs {
            account: AZURE_ACCOUNT.read(raw)?,
            container: AZURE_CONTAINER.read(raw)?,
            prefix: AZURE_PREFIX.read(raw)?,
            endpoint: AZURE_ENDPOINT.read(raw)?,
        })
    }
}

pub type AzureBlobBackend = ObjectBackend<Client>;

/// The backend of the container `inputs` and `env` name; its secrets are masked through
/// `secrets` before any request.
pub fn connect(inputs: &AzureInputs, env: &Env, secrets: SecretSink) -> Result<AzureBlobBackend, BackendError> {
    let settings = AzureSettings::resolve(inputs, env).map_err(|reason| BackendError::new(ErrorKind::Fatal, reason))?;
    let http = Arc::new(Http::new(env, secrets)?);
    let prefix = settings.prefix.clone();
    Ok(ObjectBackend::over(Arc::clone(&http), prefix, Client::connect(http, settings, env)?, env))
}
