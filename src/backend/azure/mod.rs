//! Azure Blob Storage (`backend: azure-blob`): a container of an Azure storage account (or
//! Azurite, or a sovereign cloud's endpoint) for self-hosted fleets on Azure.
//!
//! `object_store` (apache arrow-rs) holds the credentials — the Azure environment only: an
//! account key (Shared Key), a SAS token, a bearer token, a client secret, workload identity
//! (`AZURE_FEDERATED_TOKEN_FILE`), managed identity, the Azure CLI; or a connection string — and
//! signs; our own HTTP client ([`Http`]) sends every request, so Azure gets the same retries,
//! timeouts, parallel ranged downloads and block uploads as the other backends. Requests are
//! authorized one by one with `object_store`'s `AzureAuthorizer` rather than as SAS URLs, because
//! a SAS from `object_store` covers one blob only (a listing needs the container) and cannot be
//! made from a SAS token; downloads, which send no header, get a SAS URL instead. Keys, tokens
//! and signatures are registered as secrets before any request.
//!
//! Layout and metadata are S3's ([`super::entries`]): `<prefix><key>/<first 16 hex digits of the
//! version>`, one block blob per entry, with the full version, the ref that saved it and its
//! creation time as blob metadata (`x-ms-meta-version`, `-ref`, `-created`). A listing carries
//! the metadata (`include=metadata`), so listing needs no request per entry.
//!
//! An entry appears atomically and only once: the blob is created by Put Blob or Put Block List
//! with `If-None-Match: *`, so a second saver is refused (`409 BlobAlreadyExists` or `412`) and
//! reported as `exists` (see [`upload`]).

mod client;
mod settings;
mod store;
mod upload;

pub use settings::{AzureInputs, AzureSettings, SECRET_VARS};
pub use store::{AZURE_ACCOUNT, AZURE_BLOB, AZURE_CONTAINER, AZURE_ENDPOINT, AZURE_PREFIX};

use crate::backend::catalog::{Catalog, CatalogError, Listed};
use crate::backend::http::{Http, one_line};
use crate::backend::upload::BlockWriter;
use crate::backend::{Backend, BackendError, CacheEntry, ErrorKind, Reservation, download, entries};
use crate::env::Env;
use crate::ids::{Key, Version};
use bytes::Bytes;
use client::{Client, META};
use reqwest::Method;
use reqwest::header::HeaderName;
use std::io::Read;
use std::sync::Arc;
use upload::{AzureUpload, BlobSink};

pub struct AzureBlobBackend {
    client: Arc<Client>,
    /// The ref saved with each entry.
    current_ref: Option<String>,
}

impl AzureBlobBackend {
    pub fn new(http: Arc<Http>, settings: AzureSettings, env: &Env) -> Result<Self, BackendError> {
        for secret in AzureSettings::secrets(env) {
            http.secrets.add(&secret);
        }
        http.mask_token_file(env, "AZURE_FEDERATED_TOKEN_FILE")?;
        let store = settings.builder(env).build().map_err(|e| {
            BackendError::new(
                ErrorKind::Fatal,
                format!("cannot configure the Azure Blob client: {}", one_line(&e.to_string())),
            )
        })?;
        let client = Arc::new(Client::new(http, store, settings)?);
        Ok(Self { client, current_ref: env.non_empty("GITHUB_REF").map(str::to_owned) })
    }

    fn block_on<T>(&self, future: impl Future<Output = T>) -> T {
        self.client.http.rt().block_on(future)
    }
}

impl Backend for AzureBlobBackend {
    fn describe(&self) -> String {
        let s = &self.client.settings;
        let prefix = if s.prefix.is_empty() { String::new() } else { format!(", prefix `{}`", s.prefix) };
        let at = if s.custom_endpoint { format!(" at {}", s.endpoint) } else { String::new() };
        format!("Azure Blob container `{}` of account `{}`{prefix}{at}", s.container, s.account)
    }

    fn lookup(&self, key: &Key, version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        self.block_on(self.client.lookup(key, version))
    }

    /// One listing of the blobs named `<newest_of>…`, then a lookup of the newest; a role that
    /// may not list leaves generation 0.
    fn lookup_newest_or(
        &self,
        newest_of: &str,
        key: &Key,
        version: &Version,
    ) -> Result<Option<CacheEntry>, BackendError> {
        let prefix = format!("{}{newest_of}", self.client.settings.prefix);
        let listing = self.block_on(self.client.list_blobs(&prefix)).map(|blobs| {
            let modified = |at: &str| chrono::DateTime::parse_from_rfc2822(at).map_or(0, |t| t.timestamp());
            blobs.into_iter().filter_map(|blob| Some((blob.name?, modified(&blob.properties.last_modified)))).collect()
        });
        entries::newest_or(listing, (&prefix, newest_of), (key, version), |k| self.lookup(k, version))
    }

    fn open(&self, entry: &CacheEntry) -> Result<Box<dyn Read + Send + '_>, BackendError> {
        let url = self.block_on(self.client.download_url(&entry.location))?;
        Ok(download::open(Arc::clone(&self.client.http), url))
    }

    fn read_prefix(&self, entry: &CacheEntry, len: u64) -> Result<Vec<u8>, BackendError> {
        let url = self.block_on(self.client.download_url(&entry.location))?;
        download::read_prefix(&self.client.http, &url, len)
    }

    fn reserve(&self, key: &Key, version: &Version) -> Result<Reservation, BackendError> {
        // An existing entry is `exists` before anything is uploaded.
        if self.lookup(key, version)?.is_some() {
            return Ok(Reservation::Exists);
        }
        let name = entries::object_name(&self.client.settings.prefix, key, version);
        let metadata = entries::metadata(self.current_ref.as_deref(), version)
            .into_iter()
            .map(|(field, value)| {
                let name = HeaderName::try_from(format!("{META}{field}")).expect("a metadata field is a header name");
                (name, value)
            })
            .collect();
        let sink = Arc::new(BlobSink::new(Arc::clone(&self.client), name, metadata));
        let writer = BlockWriter::new(Arc::clone(&self.client.http), sink.clone(), true);
        Ok(Reservation::Reserved(Box::new(AzureUpload {
            sink,
            writer: Some(writer),
            key: key.to_owned(),
            version: version.to_owned(),
        })))
    }
}

impl Catalog for AzureBlobBackend {
    fn describe(&self) -> String {
        Backend::describe(self)
    }

    /// Every entry whose key starts with `key_prefix` (on `r#ref` when given), newest first, with
    /// the ref and creation time it was saved with (from the listing's metadata).
    fn list(&self, key_prefix: &str, r#ref: Option<&str>) -> Result<Vec<Listed>, CatalogError> {
        let prefix = format!("{}{key_prefix}", self.client.settings.prefix);
        let blobs = self
            .block_on(self.client.list_blobs(&prefix))
            .map_err(|e| entries::forbidden(e, "list".into(), "Storage Blob Data Reader"))?;
        let found: Vec<Listed> = blobs
            .into_iter()
            .filter_map(|blob| {
                let name = blob.name?;
                let parts = entries::split_name(&name, &prefix, key_prefix)?;
                let modified =
                    chrono::DateTime::parse_from_rfc2822(&blob.properties.last_modified).map_or(0, |t| t.timestamp());
                let meta = |field: &str| blob.metadata.get(field).filter(|v| !v.is_empty()).cloned();
                Some(entries::listed(&name, parts, blob.properties.content_length, modified, meta))
            })
            .collect();
        Ok(entries::newest_on(found, r#ref))
    }

    fn delete(&self, entry: &Listed) -> Result<(), CatalogError> {
        if !entry.id.starts_with(&self.client.settings.prefix) {
            return Err(CatalogError::NotLocalEntry { id: entry.id.clone() });
        }
        let deleted =
            self.block_on(self.client.call("delete", Method::DELETE, Some(&entry.id), &[], &[], Bytes::new()));
        match deleted {
            Ok(_) => Ok(()),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(entries::forbidden(e, format!("delete `{}`", entry.id), "Storage Blob Data Contributor")),
        }
    }
}
