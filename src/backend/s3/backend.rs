//! The S3 store's backend: a lookup is a `HEAD` of the entry's object (a miss checks once that
//! the bucket exists), a restore's first lookup one listing, a download a pre-signed URL read by
//! the shared download machinery, and a save a multipart upload ([`super::upload`]).

use super::client::{Client, META};
use super::settings::S3Settings;
use super::upload;
use crate::backend::http::Http;
use crate::backend::{Backend, BackendError, CacheEntry, ErrorKind, Reservation, download, entries};
use crate::env::Env;
use crate::ids::{Key, Version};
use bytes::Bytes;
use object_store::path::Path as StorePath;
use reqwest::Method;
use std::io::Read;
use std::sync::Arc;

pub struct S3Backend {
    client: Arc<Client>,
    /// The ref saved with each entry.
    current_ref: Option<String>,
}

impl S3Backend {
    pub fn new(http: Arc<Http>, settings: S3Settings, env: &Env) -> Result<Self, BackendError> {
        let client = Arc::new(Client::new(http, settings, env)?);
        Ok(Self { client, current_ref: env.non_empty("GITHUB_REF").map(str::to_owned) })
    }

    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    fn path(&self, key: &Key, version: &Version) -> StorePath {
        StorePath::from(entries::object_name(&self.client.settings.prefix, key, version))
    }
}

impl Backend for S3Backend {
    fn describe(&self) -> String {
        let s = &self.client.settings;
        let at = s.endpoint.as_deref().map(|e| format!(" at {e}")).unwrap_or_default();
        format!(
            "S3 bucket `{}`{}{at} ({})",
            s.bucket,
            if s.prefix.is_empty() { String::new() } else { format!(", prefix `{}`", s.prefix) },
            s.region
        )
    }

    fn lookup(&self, key: &Key, version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        let client = &self.client;
        let path = self.path(key, version);
        let head =
            client.http.rt().block_on(client.call("look up the entry", Method::HEAD, &path, &[], &[], Bytes::new()));
        match head {
            Ok((headers, _)) => Ok(entries::found(&headers, META, path.as_ref(), key, version)),
            Err(e) if e.kind == ErrorKind::NotFound => {
                if client.bucket_exists.get().is_none() {
                    client.http.rt().block_on(client.check_bucket())?;
                    let _ = client.bucket_exists.set(());
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// One listing of the objects named `<newest_of>…`, then a lookup of the newest; a policy
    /// that does not allow listing leaves generation 0 (`s3:ListBucket` reaches later ones).
    fn lookup_newest_or(
        &self,
        newest_of: &str,
        key: &Key,
        version: &Version,
    ) -> Result<Option<CacheEntry>, BackendError> {
        let client = &self.client;
        let prefix = format!("{}{newest_of}", client.settings.prefix);
        let listing = client.http.rt().block_on(client.list_objects(&prefix));
        let named = listing.map(|objects| objects.into_iter().map(|(name, _, modified)| (name, modified)).collect());
        entries::newest_or(named, (&prefix, newest_of), (key, version), |k| self.lookup(k, version))
    }

    fn open(&self, entry: &CacheEntry) -> Result<Box<dyn Read + Send + '_>, BackendError> {
        let client = &self.client;
        let path = StorePath::from(entry.location.as_str());
        let url = client.http.rt().block_on(client.sign(Method::GET, &path, &[], &[]))?;
        Ok(download::open(Arc::clone(&client.http), url))
    }

    fn read_prefix(&self, entry: &CacheEntry, len: u64) -> Result<Vec<u8>, BackendError> {
        let client = &self.client;
        let path = StorePath::from(entry.location.as_str());
        let url = client.http.rt().block_on(client.sign(Method::GET, &path, &[], &[]))?;
        download::read_prefix(&client.http, &url, len)
    }

    fn reserve(&self, key: &Key, version: &Version) -> Result<Reservation, BackendError> {
        let client = &self.client;
        let path = self.path(key, version);
        // An existing entry is `exists` before anything is uploaded.
        if self.lookup(key, version)?.is_some() {
            return Ok(Reservation::Exists);
        }
        let upload = client.http.rt().block_on(upload::start(client, path, self.current_ref.as_deref(), version))?;
        Ok(Reservation::Reserved(upload))
    }
}
