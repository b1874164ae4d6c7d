//! The cache service's packs (v1 and v2 alike): each pack an entry of its own
//! ([`crate::content::names`]), saved as the protocol saves any entry and found by exact lookups,
//! so a pack is visible exactly where an entry saved in its scope would be (one saved on a pull
//! request's ref is not found from the default branch). Ranges are read from the URL its lookup
//! gave. Listing and deleting packs go through the REST API, where there is one.

use crate::backend::download::open_range;
use crate::backend::http::Http;
use crate::backend::packs::{pack_error, put_through, trouble};
use crate::backend::{Backend, Catalog};
use crate::content::PackName;
use crate::content::names::{pack_key, pack_key_start, pack_of, pack_version};
use crate::content::store::{ListedPack, PackStore, PackStoreError, Ranged};
use std::collections::HashMap;
use std::io::Read;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub struct ServicePacks {
    backend: Box<dyn Backend>,
    http: Arc<Http>,
    prefix: String,
    /// Where each pack's lookup found it (a signed URL, or v1's archive location: never shown).
    located: Mutex<HashMap<PackName, String>>,
    /// A read of a range was answered with the whole pack: later plans read whole packs.
    whole_only: AtomicBool,
    catalog: Option<Box<dyn Catalog + Send + Sync>>,
}

impl ServicePacks {
    /// The packs of `prefix` that `backend` (a protocol's, sending through `http`) reaches.
    pub(super) fn new(backend: Box<dyn Backend>, http: Arc<Http>, prefix: &str) -> Self {
        let (located, whole_only) = (Mutex::default(), AtomicBool::new(false));
        Self { backend, http, prefix: prefix.to_owned(), located, whole_only, catalog: None }
    }

    pub fn with_catalog(self, catalog: Box<dyn Catalog + Send + Sync>) -> Self {
        Self { catalog: Some(catalog), ..self }
    }

    /// Where pack `name` is, as an exact lookup in this job's scope answers; `None`: not there.
    fn locate(&self, name: &PackName) -> Result<Option<String>, PackStoreError> {
        if let Some(url) = self.located.lock().unwrap_or_else(|e| e.into_inner()).get(name) {
            return Ok(Some(url.clone()));
        }
        let key = pack_key(&self.prefix, name);
        let found = self.backend.lookup(&key, &pack_version()).map_err(trouble)?;
        // The service matches prefixes: only the pack's own key is the pack.
        let Some(entry) = found.filter(|e| e.key == key) else { return Ok(None) };
        self.located.lock().unwrap_or_else(|e| e.into_inner()).insert(*name, entry.location.clone());
        Ok(Some(entry.location))
    }

    fn catalog(&self) -> Result<&dyn Catalog, PackStoreError> {
        let catalog = self.catalog.as_deref().map(|c| c as &dyn Catalog);
        catalog.ok_or_else(|| PackStoreError::Trouble {
            what: "the cache service lists and deletes packs only through the REST API (`github-token`)".into(),
            source: None,
        })
    }

    fn listed(&self) -> Result<Vec<(ListedPack, crate::backend::Listed)>, PackStoreError> {
        let catalog = self.catalog()?;
        let listed = catalog.list(&pack_key_start(&self.prefix), None).map_err(|e| PackStoreError::Trouble {
            what: format!("cannot list packs: {}", crate::text::error_line(&e)),
            source: None,
        })?;
        let version = pack_version();
        Ok(listed
            .into_iter()
            .filter(|l| l.version == version)
            .filter_map(|l| {
                let name = pack_of(&self.prefix, &l.key)?;
                Some((ListedPack { name, size: l.size, created: l.created }, l))
            })
            .collect())
    }
}

impl PackStore for ServicePacks {
    fn describe(&self) -> String {
        format!("packs on the {}", self.backend.describe())
    }

    /// As an entry of its own: its key and the pack version.
    fn put(&self, name: &PackName, len: u64, bytes: &mut dyn Read) -> Result<(), PackStoreError> {
        put_through(self.backend.as_ref(), &self.prefix, name, len, bytes)
    }

    /// An exact lookup of each: what this job's scope sees.
    fn exist(&self, names: &[PackName]) -> Result<Vec<bool>, PackStoreError> {
        names.iter().map(|name| self.locate(name).map(|found| found.is_some())).collect()
    }

    fn ranges(&self) -> bool {
        !self.whole_only.load(Ordering::Relaxed)
    }

    fn read(&self, name: &PackName, range: Range<u64>) -> Result<Ranged<'_>, PackStoreError> {
        let url = self.locate(name)?.ok_or(PackStoreError::Missing(*name))?;
        let read = open_range(&self.http, &url, range).map_err(|e| pack_error(name, e))?;
        if matches!(read, crate::backend::download::RangeRead::Whole(_)) {
            self.whole_only.store(true, Ordering::Relaxed);
        }
        Ok(read.into())
    }

    fn list(&self) -> Result<Vec<ListedPack>, PackStoreError> {
        let mut packs: Vec<ListedPack> = self.listed()?.into_iter().map(|(p, _)| p).collect();
        packs.sort_by_key(|p| p.name);
        Ok(packs)
    }

    fn delete(&self, name: &PackName) -> Result<(), PackStoreError> {
        let Some((_, listed)) = self.listed()?.into_iter().find(|(p, _)| p.name == *name) else { return Ok(()) };
        self.catalog()?.delete(&listed).map_err(|e| PackStoreError::Trouble {
            what: format!("cannot delete pack {name}: {}", crate::text::error_line(&e)),
            source: None,
        })
    }
}
