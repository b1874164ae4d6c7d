//! What an object store's client does ([`ObjectClient`]), the only part of an object store that
//! differs from another's.

use crate::backend::entries::Metadata;
use crate::backend::{BackendError, CacheEntry, Upload};
use crate::keys::{Key, Version};
use reqwest::header::HeaderName;
use std::future::Future;
use std::sync::Arc;

pub struct Object {
    pub name: String,
    pub size: u64,
    /// Seconds since the epoch.
    pub modified: i64,
    /// The entry's metadata where the listing carries it (Azure's does); `None`: ask
    /// [`ObjectClient::metadata`].
    pub metadata: Option<Metadata>,
}

/// What a store's credentials need for a catalog, named when they are refused.
pub struct Needs {
    /// The permission or role a listing needs.
    pub list: &'static str,
    /// The permission or role a delete needs.
    pub delete: &'static str,
}

/// A save about to start: the entry's object name, the metadata to save with it
/// ([`crate::backend::entries::metadata`]), and its key and version (a commit that fails asks
/// whether another writer's entry is there).
pub struct NewEntry {
    pub name: String,
    pub metadata: [(&'static str, String); 3],
    pub key: Key,
    pub version: Version,
}

impl NewEntry {
    /// The metadata as the headers that save it, each field's name after the store's prefix
    /// (`x-amz-meta-`, `x-ms-meta-`).
    pub fn metadata_headers(&self, prefix: &str) -> Vec<(HeaderName, String)> {
        self.metadata
            .iter()
            .map(|(field, value)| {
                let name = HeaderName::try_from(format!("{prefix}{field}")).expect("a metadata field is a header name");
                (name, value.clone())
            })
            .collect()
    }
}

/// An object store's requests, behind [`super::ObjectBackend`] (which names each entry's object).
pub trait ObjectClient: Send + Sync + Sized + 'static {
    const NEEDS: Needs;

    /// `S3 bucket …`, `Azure Blob container …`.
    fn describe(&self) -> String;

    /// The entry for exactly this key and version if the object `name` is it (a `HEAD`).
    fn lookup(
        &self,
        name: &str,
        key: &Key,
        version: &Version,
    ) -> impl Future<Output = Result<Option<CacheEntry>, BackendError>>;

    /// Every object whose name starts with `prefix`, bounded like every listing.
    fn list(&self, prefix: &str) -> impl Future<Output = Result<Vec<Object>, BackendError>>;

    /// The metadata of the object `name` (a `HEAD`), for a listing that does not carry it;
    /// `None`: the object is gone. Every store answers it, so that a listing without metadata
    /// never shows entries without their version and ref.
    fn metadata(&self, name: &str) -> impl Future<Output = Result<Option<Metadata>, BackendError>>;

    /// A URL that reads the object `name` by itself (signed; its signature masked).
    fn download_url(&self, name: &str) -> impl Future<Output = Result<String, BackendError>>;

    fn delete(&self, name: &str) -> impl Future<Output = Result<(), BackendError>>;

    fn upload(self: &Arc<Self>, entry: NewEntry) -> impl Future<Output = Result<Box<dyn Upload>, BackendError>>;
}
