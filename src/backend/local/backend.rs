//! The local directory backend: for runs outside Actions and self-hosted runners with a
//! persistent disk (`backend: local`).
//!
//! Layout under the root: `entries/<key>@<version>` (one archive each), `meta/<key>@<version>`
//! ([`super::meta`]), `packs/<prefix>-pack.<hex>` ([`crate::content::store::LocalPackStore`])
//! and `tmp/`. A save links a synced temporary file to its final name only if that name does
//! not exist yet: entries are immutable, readers never see a partial file, and of two processes
//! saving the same key exactly one wins ([`super::upload`]).

use super::upload::{self, LocalUpload};
use crate::backend::{Backend, BackendError, CacheEntry, ErrorKind, Reservation};
use crate::env::Env;
use crate::keys::{Key, Version};
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub struct LocalBackend {
    root: PathBuf,
    /// `GITHUB_REF`; empty outside Actions.
    saving_ref: String,
}

impl LocalBackend {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into(), saving_ref: String::new() }
    }

    /// The store that records `saving_ref` with each entry it saves (`None`: the empty ref).
    pub fn saving_on(self, saving_ref: Option<&str>) -> Self {
        Self { saving_ref: saving_ref.unwrap_or_default().to_owned(), ..self }
    }

    pub(super) fn root(&self) -> &Path {
        &self.root
    }

    /// `EXACT_CACHE_DIR`, else `<user cache dir>/exact-cache`.
    pub fn default_dir(env: &Env) -> PathBuf {
        if let Some(dir) = env.non_empty("EXACT_CACHE_DIR") {
            return PathBuf::from(dir);
        }
        env.non_empty("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| {
                env.home_dir().map(
                    |h| {
                        if cfg!(target_os = "macos") { h.join("Library/Caches") } else { h.join(".cache") }
                    },
                )
            })
            .or_else(dirs::cache_dir)
            .unwrap_or_else(std::env::temp_dir)
            .join("exact-cache")
    }

    fn entry_path(&self, key: &Key, version: &Version) -> Result<PathBuf, BackendError> {
        let safe =
            |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
        if !safe(key) || !safe(version) || key.starts_with('.') {
            return Err(BackendError::new(
                ErrorKind::Fatal,
                format!("`{key}` is not a valid key for the local backend"),
            ));
        }
        Ok(self.root.join("entries").join(format!("{key}@{version}")))
    }

    fn io_error(&self, what: &str, path: &Path, e: io::Error) -> BackendError {
        BackendError::new(ErrorKind::Fatal, format!("cannot {what} `{}`", path.display())).with_source(e)
    }
}

impl Backend for LocalBackend {
    fn describe(&self) -> String {
        format!("local directory `{}`", self.root.display())
    }

    fn lookup(&self, key: &Key, version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        let path = self.entry_path(key, version)?;
        match fs::metadata(&path) {
            Ok(meta) => Ok(Some(CacheEntry {
                key: key.to_owned(),
                version: version.to_owned(),
                size: Some(meta.len()),
                location: path.to_string_lossy().into_owned(),
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io_error("read", &path, e)),
        }
    }

    /// The entry files named `<newest_of>…@<version>` (plain files, never followed), the last
    /// modified (entries are never written after they appear), then a lookup of it.
    fn lookup_newest_or(
        &self,
        newest_of: &str,
        key: &Key,
        version: &Version,
    ) -> Result<Option<CacheEntry>, BackendError> {
        let dir = self.root.join("entries");
        let suffix = format!("@{version}");
        let listing = match fs::read_dir(&dir) {
            Ok(listing) => listing,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io_error("list", &dir, e)),
        };
        let mut newest: Option<(SystemTime, String)> = None;
        for item in listing {
            let item = item.map_err(|e| self.io_error("list", &dir, e))?;
            let name = item.file_name();
            let Some(found) = name
                .to_str()
                .and_then(|n| n.strip_suffix(&suffix))
                .filter(|k| k.starts_with(newest_of) && crate::stack::generation_of(key, k).is_some())
            else {
                continue;
            };
            // `DirEntry::metadata` does not follow a link.
            let Some(meta) = item.metadata().ok().filter(|m| m.is_file()) else { continue };
            let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            let rank = |(time, key): &(SystemTime, String)| (*time, key.len(), key.clone());
            let candidate = (modified, found.to_owned());
            if newest.as_ref().is_none_or(|n| rank(&candidate) > rank(n)) {
                newest = Some(candidate);
            }
        }
        if let Some((_, found)) = newest
            && let Some(entry) = self.lookup(&Key::from(found), version)?
        {
            return Ok(Some(entry));
        }
        self.lookup(key, version)
    }

    /// The entry's file; the use is recorded (a restore opens what it applies).
    fn open(&self, entry: &CacheEntry) -> Result<Box<dyn Read + Send + '_>, BackendError> {
        let file = self.open_file(entry)?;
        if let Some(name) = Path::new(&entry.location).file_name().and_then(|n| n.to_str()) {
            super::meta::record_use(&self.root, name);
        }
        Ok(Box::new(file))
    }

    /// Reading another entry's fingerprint (explaining a miss) is no use of it.
    fn read_prefix(&self, entry: &CacheEntry, len: u64) -> Result<Vec<u8>, BackendError> {
        let mut bytes = Vec::new();
        let path = Path::new(&entry.location);
        self.open_file(entry)?.take(len).read_to_end(&mut bytes).map_err(|e| self.io_error("read", path, e))?;
        Ok(bytes)
    }

    fn packs(&self, prefix: &str) -> Option<Box<dyn crate::content::store::PackStore>> {
        Some(Box::new(crate::content::store::LocalPackStore::new(self.root.join("packs"), prefix)))
    }

    fn reserve(&self, key: &Key, version: &Version) -> Result<Reservation, BackendError> {
        let final_path = self.entry_path(key, version)?;
        if final_path.exists() {
            return Ok(Reservation::Exists);
        }
        let tmp_dir = self.root.join("tmp");
        for dir in [&tmp_dir, &self.root.join("entries")] {
            fs::create_dir_all(dir).map_err(|e| self.io_error("create", dir, e))?;
        }
        upload::sweep_stale_uploads(&tmp_dir);
        let tmp = tempfile::Builder::new()
            .prefix(&upload::upload_prefix())
            .tempfile_in(&tmp_dir)
            .map_err(|e| self.io_error("create a file in", &tmp_dir, e))?;
        let file = tmp.reopen().map_err(|e| self.io_error("open", tmp.path(), e))?;
        // Released by the kernel however this process ends; a sweep never removes a locked file.
        let _ = file.try_lock();
        let upload = LocalUpload::new(file, tmp, final_path, self.root.clone(), self.saving_ref.clone());
        Ok(Reservation::Reserved(Box::new(upload)))
    }
}

impl LocalBackend {
    /// The entry's file, as [`super::meta::open_entry`] reaches it.
    fn open_file(&self, entry: &CacheEntry) -> Result<File, BackendError> {
        let path = Path::new(&entry.location);
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        super::meta::open_entry(&self.root, name).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => BackendError::new(ErrorKind::NotFound, "entry disappeared"),
            _ => self.io_error("open", path, e),
        })
    }
}
