//! The local directory backend: for runs outside Actions and self-hosted runners with a
//! persistent disk (`backend: local`).
//!
//! Layout under the root: `entries/<key>@<version>` (one archive each), `meta/<key>@<version>`
//! (the ref that saved it and, as its modification time, its last use: [`super::meta`]) and
//! `tmp/`. A save writes `tmp/upload-<pid>-<random>`, syncs it, and links it to its final name
//! only if that name does not exist yet (`persist_noclobber`): entries are immutable, readers
//! never see a partial file, and of two processes saving the same key exactly one wins while
//! the other hears `Exists`; the winner then records its ref. A restore that opens an entry
//! records the use on its record, never on the entry.
//!
//! A save that was killed leaves its temporary file behind; the next save sweeps those whose
//! process is gone, or that are older than a day. A writing upload holds an advisory lock on
//! its file, so a store shared by containers (where another's pid means nothing here) never
//! loses a live upload.

use crate::backend::{Backend, BackendError, CacheEntry, Committed, ErrorKind, Reservation, Upload};
use crate::env::Env;
use crate::ids::{Key, Version};
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const UPLOAD_PREFIX: &str = "upload-";
/// A temporary upload older than this is a leftover whatever its name says.
const STALE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

pub struct LocalBackend {
    root: PathBuf,
    /// The ref recorded with each entry saved (`GITHUB_REF`; the empty ref outside Actions).
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

    fn reserve(&self, key: &Key, version: &Version) -> Result<Reservation, BackendError> {
        let final_path = self.entry_path(key, version)?;
        if final_path.exists() {
            return Ok(Reservation::Exists);
        }
        let tmp_dir = self.root.join("tmp");
        for dir in [&tmp_dir, &self.root.join("entries")] {
            fs::create_dir_all(dir).map_err(|e| self.io_error("create", dir, e))?;
        }
        sweep_stale_uploads(&tmp_dir);
        let tmp = tempfile::Builder::new()
            .prefix(&upload_prefix())
            .tempfile_in(&tmp_dir)
            .map_err(|e| self.io_error("create a file in", &tmp_dir, e))?;
        let file = tmp.reopen().map_err(|e| self.io_error("open", tmp.path(), e))?;
        // Released by the kernel however this process ends; a sweep never removes a locked file.
        let _ = file.try_lock();
        Ok(Reservation::Reserved(Box::new(LocalUpload {
            writer: BufWriter::with_capacity(1 << 20, file),
            tmp: Some(tmp),
            final_path,
            written: 0,
            root: self.root.clone(),
            saving_ref: self.saving_ref.clone(),
        })))
    }
}

impl LocalBackend {
    /// The entry's file, reached beneath the store's directory: never through a link, never
    /// blocking on a FIFO, only a plain file.
    fn open_file(&self, entry: &CacheEntry) -> Result<File, BackendError> {
        let path = Path::new(&entry.location);
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        super::meta::open_entry(&self.root, name).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => BackendError::new(ErrorKind::NotFound, "entry disappeared"),
            _ => self.io_error("open", path, e),
        })
    }
}

/// The start of a temporary file's name in `tmp/`: this process's, which a sweep leaves alone
/// while the process lives.
pub(super) fn upload_prefix() -> String {
    format!("{UPLOAD_PREFIX}{}-", std::process::id())
}

/// Temporary files are private; what the store keeps is readable like any other file the user
/// makes.
pub(super) fn readable_by_all(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = 0o666 & !crate::file_mode::current_umask();
        let _ = fs::set_permissions(path, fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Remove the temporary uploads in `dir` that no process is writing: not locked, and either
/// named for a process that is gone or older than [`STALE_AFTER`].
fn sweep_stale_uploads(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(UPLOAD_PREFIX)) else { continue };
        let pid = rest.split_once('-').and_then(|(pid, _)| pid.parse::<u32>().ok());
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > STALE_AFTER));
        if !(old || pid.is_some_and(|pid| !crate::process::alive(pid))) {
            continue;
        }
        let path = entry.path();
        let Ok(file) = File::open(&path) else { continue };
        if file.try_lock().is_ok() {
            let _ = fs::remove_file(&path);
        }
    }
}

struct LocalUpload {
    writer: BufWriter<File>,
    tmp: Option<tempfile::NamedTempFile>,
    final_path: PathBuf,
    written: u64,
    root: PathBuf,
    saving_ref: String,
}

impl Write for LocalUpload {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.writer.write(buf).map_err(|e| self.store_error(e))?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush().map_err(|e| self.store_error(e))
    }
}

impl LocalUpload {
    /// A write failure of the store (disk full) is backend trouble, not a problem of the files.
    fn store_error(&self, e: io::Error) -> io::Error {
        BackendError::new(ErrorKind::Fatal, format!("cannot write to the local cache `{}`", self.final_path.display()))
            .with_source(e)
            .into_io()
    }
}

impl Upload for LocalUpload {
    fn commit(mut self: Box<Self>) -> Result<Committed, BackendError> {
        let fatal =
            |what: &str, e: io::Error| BackendError::new(ErrorKind::Fatal, format!("cannot {what}")).with_source(e);
        self.writer.flush().map_err(|e| fatal("write the entry", e))?;
        self.writer.get_ref().sync_all().map_err(|e| fatal("sync the entry", e))?;
        let tmp = self.tmp.take().expect("committed once");
        readable_by_all(tmp.path());
        match tmp.persist_noclobber(&self.final_path) {
            Ok(_) => {
                let name = self.final_path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                // Without its record the entry is one of an unknown ref: kept by every ref's prune.
                super::meta::record_save(&self.root, name, &self.saving_ref);
                Ok(Committed::Saved)
            }
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(Committed::Exists),
            Err(e) => Err(fatal(&format!("store `{}`", self.final_path.display()), e.error)),
        }
    }
}
