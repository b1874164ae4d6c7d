//! An object store's backend, written once over its client ([`ObjectClient`]): a lookup is a
//! `HEAD` of the entry's object, a restore's first lookup one listing of the names of later
//! generations then a lookup of the newest, a download a signed URL read by the shared download
//! machinery, and a save a lookup (an existing entry is `exists` before anything is uploaded)
//! then the client's upload.

use super::client::{NewEntry, ObjectClient};
use crate::backend::http::Http;
use crate::backend::{Backend, BackendError, CacheEntry, Reservation, download, entries};
use crate::env::Env;
use crate::keys::{Key, Version};
use std::io::Read;
use std::sync::Arc;

/// An object store's backend, which is also its catalog (`super::catalog`).
pub struct ObjectBackend<C> {
    client: Arc<C>,
    /// The client's own, for downloads and to wait on requests.
    http: Arc<Http>,
    /// Empty, or ending in `/`.
    prefix: String,
    current_ref: Option<String>,
}

impl<C: ObjectClient> ObjectBackend<C> {
    /// The backend of `client` (which sends through `http`) for the entries named `prefix`…,
    /// saving on `GITHUB_REF` of `env`.
    pub fn over(http: Arc<Http>, prefix: String, client: C, env: &Env) -> Self {
        let current_ref = env.non_empty("GITHUB_REF").map(str::to_owned);
        Self { client: Arc::new(client), http, prefix, current_ref }
    }

    pub(super) fn client(&self) -> &C {
        &self.client
    }

    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    pub(super) fn block_on<T>(&self, future: impl Future<Output = T>) -> T {
        self.http.rt().block_on(future)
    }
}

impl<C: ObjectClient> Backend for ObjectBackend<C> {
    fn describe(&self) -> String {
        self.client.describe()
    }

    fn lookup(&self, key: &Key, version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        let name = entries::object_name(&self.prefix, key, version);
        self.block_on(self.client.lookup(&name, key, version))
    }

    /// One listing of the objects named `<newest_of>…`, then a lookup of the newest; credentials
    /// that may not list leave generation 0.
    fn lookup_newest_or(
        &self,
        newest_of: &str,
        key: &Key,
        version: &Version,
    ) -> Result<Option<CacheEntry>, BackendError> {
        let prefix = format!("{}{newest_of}", self.prefix);
        let listing = self.block_on(self.client.list(&prefix));
        let named = listing.map(|objects| objects.into_iter().map(|object| (object.name, object.modified)).collect());
        entries::newest_or(named, (&prefix, newest_of), (key, version), |k| self.lookup(k, version))
    }

    fn open(&self, entry: &CacheEntry) -> Result<Box<dyn Read + Send + '_>, BackendError> {
        let url = self.block_on(self.client.download_url(&entry.location))?;
        Ok(download::open(Arc::clone(&self.http), url))
    }

    fn read_prefix(&self, entry: &CacheEntry, len: u64) -> Result<Vec<u8>, BackendError> {
        let url = self.block_on(self.client.download_url(&entry.location))?;
        download::read_prefix(&self.http, &url, len)
    }

    fn packs(&self, prefix: &str) -> Option<Box<dyn crate::content::store::PackStore>> {
        let current_ref = self.current_ref.clone();
        let client = Arc::clone(&self.client);
        Some(Box::new(super::ObjectPacks::new(client, Arc::clone(&self.http), (&self.prefix, prefix), current_ref)))
    }

    fn reserve(&self, key: &Key, version: &Version) -> Result<Reservation, BackendError> {
        if self.lookup(key, version)?.is_some() {
            return Ok(Reservation::Exists);
        }
        let entry = NewEntry {
            name: entries::object_name(&self.prefix, key, version),
            metadata: entries::metadata(self.current_ref.as_deref(), version),
            key: key.to_owned(),
            version: version.to_owned(),
        };
        Ok(Reservation::Reserved(self.block_on(self.client.upload(entry))?))
    }
}
