//! An object store's packs, written once over its client ([`ObjectClient`]): each pack the
//! object `<store prefix>packs/<prefix>-pack.<hex>`, stored through the client's own save (a
//! conditional create under its final name, with the pack version as its metadata), asked for
//! in one listing (a `HEAD` each where the credentials may not list), read by ranged GETs of a
//! signed URL, listed and deleted as entries are.

use super::client::{NewEntry, ObjectClient};
use crate::backend::download::open_range;
use crate::backend::http::Http;
use crate::backend::packs::{pack_error, stream_into, trouble};
use crate::backend::{BackendError, ErrorKind, entries};
use crate::content::PackName;
use crate::content::names::{pack_key, pack_key_start, pack_of, pack_version};
use crate::content::store::{ListedPack, PackStore, PackStoreError, Ranged};
use std::io::Read;
use std::ops::Range;
use std::sync::Arc;

/// The folder of packs under a store's prefix.
pub const PACKS_DIR: &str = "packs/";

pub struct ObjectPacks<C> {
    client: Arc<C>,
    http: Arc<Http>,
    /// The ref saved with each pack (as with each entry).
    current_ref: Option<String>,
    /// `<store prefix>packs/`.
    dir: String,
    prefix: String,
}

impl<C: ObjectClient> ObjectPacks<C> {
    /// The packs of `prefix` under the store prefix `store_prefix` (empty, or ending in `/`).
    pub(super) fn new(
        client: Arc<C>,
        http: Arc<Http>,
        (store_prefix, prefix): (&str, &str),
        current_ref: Option<String>,
    ) -> Self {
        let dir = format!("{store_prefix}{PACKS_DIR}");
        Self { client, http, current_ref, dir, prefix: prefix.to_owned() }
    }

    fn block_on<T>(&self, future: impl Future<Output = T>) -> T {
        self.http.rt().block_on(future)
    }

    fn object(&self, name: &PackName) -> String {
        format!("{}{}", self.dir, pack_key(&self.prefix, name))
    }

    /// Every pack of the listing, with its size and modification time.
    fn listing(&self) -> Result<Vec<ListedPack>, BackendError> {
        let start = format!("{}{}", self.dir, pack_key_start(&self.prefix));
        let objects = self.block_on(self.client.list(&start))?;
        let mut packs: Vec<ListedPack> = objects
            .into_iter()
            .filter_map(|o| {
                let name = pack_of(&self.prefix, o.name.strip_prefix(&self.dir)?)?;
                Some(ListedPack { name, size: o.size, created: o.modified })
            })
            .collect();
        packs.sort_by_key(|p| p.name);
        Ok(packs)
    }
}

impl<C: ObjectClient> PackStore for ObjectPacks<C> {
    fn describe(&self) -> String {
        format!("packs of {}", self.client.describe())
    }

    /// Through the store's own save: the object appears whole, once, under its final name.
    fn put(&self, name: &PackName, len: u64, bytes: &mut dyn Read) -> Result<(), PackStoreError> {
        let version = pack_version();
        let entry = NewEntry {
            name: self.object(name),
            metadata: entries::metadata(self.current_ref.as_deref(), &version),
            key: pack_key(&self.prefix, name),
            version,
        };
        let upload = self.block_on(self.client.upload(entry)).map_err(trouble)?;
        stream_into(upload, name, len, bytes)
    }

    /// One listing; where the credentials may not list, a `HEAD` of each.
    fn exist(&self, names: &[PackName]) -> Result<Vec<bool>, PackStoreError> {
        match self.listing() {
            Ok(listed) => {
                let there: std::collections::HashSet<PackName> = listed.into_iter().map(|p| p.name).collect();
                Ok(names.iter().map(|n| there.contains(n)).collect())
            }
            Err(e) if e.kind == ErrorKind::Forbidden => names
                .iter()
                .map(|name| {
                    let found = self.block_on(self.client.metadata(&self.object(name)));
                    found.map(|m| m.is_some()).map_err(trouble)
                })
                .collect(),
            Err(e) => Err(trouble(e)),
        }
    }

    fn ranges(&self) -> bool {
        true
    }

    fn read(&self, name: &PackName, range: Range<u64>) -> Result<Ranged<'_>, PackStoreError> {
        let url = self.block_on(self.client.download_url(&self.object(name)));
        let url = url.map_err(|e| pack_error(name, e))?;
        open_range(&self.http, &url, range).map(Ranged::from).map_err(|e| pack_error(name, e))
    }

    fn list(&self) -> Result<Vec<ListedPack>, PackStoreError> {
        self.listing().map_err(trouble)
    }

    fn delete(&self, name: &PackName) -> Result<(), PackStoreError> {
        match self.block_on(self.client.delete(&self.object(name))) {
            Err(e) if e.kind != ErrorKind::NotFound => Err(trouble(e)),
            _ => Ok(()),
        }
    }
}
