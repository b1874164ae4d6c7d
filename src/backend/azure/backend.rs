//! The Azure Blob store's backend: a lookup is a `HEAD` of the entry's blob, a restore's first
//! lookup one listing, a download a SAS URL read by the shared download machinery, and a save
//! a block blob ([`super::upload`]).

use super::client::Client;
use super::settings::AzureSettings;
use super::upload;
use crate::backend::http::{Http, one_line};
use crate::backend::{Backend, BackendError, CacheEntry, ErrorKind, Reservation, download, entries};
use crate::env::Env;
use crate::ids::{Key, Version};
use std::io::Read;
use std::sync::Arc;

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

    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    pub(super) fn block_on<T>(&self, future: impl Future<Output = T>) -> T {
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
        Ok(Reservation::Reserved(upload::start(&self.client, name, self.current_ref.as_deref(), key, version)))
    }
}
