//! What every store must offer for packs ([`PackStore`]), and the local directory's packs
//! ([`LocalPackStore`]).
//!
//! A pack store is one prefix's packs in one store (a prefix's packs are its own:
//! [`super::names`]). It stores a pack whole or not at all, says which packs exist (in one
//! round for many), reads a byte range of one (or, where the store refuses ranges, the whole
//! pack), lists its packs with their creation times and deletes one (for prune).

use super::PackName;
use super::names::{pack_key, pack_of};
use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PackStoreError {
    /// The store answers that it has no such pack (never stored, evicted, deleted).
    #[error("pack {0} is not in the store")]
    Missing(PackName),
    /// Anything else: the store could not be asked (a service error, a timeout, this disk), which
    /// says nothing of the entry.
    #[error("{what}")]
    Trouble {
        what: String,
        #[source]
        source: Option<io::Error>,
    },
}

impl PackStoreError {
    pub fn trouble(what: impl Into<String>, source: io::Error) -> Self {
        PackStoreError::Trouble { what: what.into(), source: Some(source) }
    }
}

/// A pack as a listing shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedPack {
    pub name: PackName,
    pub size: u64,
    /// When it was stored, in seconds since the epoch.
    pub created: i64,
}

/// What [`PackStore::read`] gives: the range asked for, or the whole pack from its start.
pub enum Ranged<'a> {
    Range(Box<dyn Read + Send + 'a>),
    Whole(Box<dyn Read + Send + 'a>),
}

/// One prefix's packs in one store.
pub trait PackStore: Send + Sync {
    /// The store, as a log line names it.
    fn describe(&self) -> String;

    /// Store pack `name` (`len` bytes from `bytes`): whole or not at all. A pack of that name
    /// already stored is kept (its name is the hash of its bytes).
    fn put(&self, name: &PackName, len: u64, bytes: &mut dyn Read) -> Result<(), PackStoreError>;

    /// Which of `names` the store holds, in their order; one round where the store can.
    fn exist(&self, names: &[PackName]) -> Result<Vec<bool>, PackStoreError>;

    /// Whether [`PackStore::read`] honours ranges; where not, a restore reads each pack once.
    fn ranges(&self) -> bool;

    /// The bytes `range` of pack `name`, or the whole pack where the store refuses ranges.
    fn read(&self, name: &PackName, range: Range<u64>) -> Result<Ranged<'_>, PackStoreError>;

    /// Every pack of the store.
    fn list(&self) -> Result<Vec<ListedPack>, PackStoreError>;

    /// Delete pack `name`; one already gone is no error.
    fn delete(&self, name: &PackName) -> Result<(), PackStoreError>;
}

/// A prefix's packs in a local directory: files named by their key (`<prefix>-pack.<hex>`),
/// written under a temporary name in the same directory (`.tmp-pack-<pid>-…`, swept once its
/// process is gone) and linked to their name only if it does not exist yet, so readers never
/// see part of a pack; read without following links, only plain files.
pub struct LocalPackStore {
    dir: PathBuf,
    prefix: String,
}

/// What a temporary pack file's name starts with (never a pack key: keys start with a prefix).
const TEMP_PREFIX: &str = ".tmp-pack-";

impl LocalPackStore {
    pub fn new(dir: impl Into<PathBuf>, prefix: &str) -> Self {
        LocalPackStore { dir: dir.into(), prefix: prefix.to_owned() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file_name(&self, name: &PackName) -> String {
        pack_key(&self.prefix, name).to_string()
    }

    fn trouble(&self, what: &str, e: io::Error) -> PackStoreError {
        PackStoreError::trouble(format!("cannot {what} in `{}`", self.dir.display()), e)
    }

    /// The store's directory, opened by its path (the user named it); `None` when it is absent.
    fn open_dir(&self) -> io::Result<Option<Dir>> {
        match Dir::open_ambient_dir(&self.dir, cap_std::ambient_authority()) {
            Ok(dir) => Ok(Some(dir)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Pack `name` opened for reading: never through a link, never blocking, a plain file only.
    fn open_pack(&self, name: &PackName) -> Result<std::fs::File, PackStoreError> {
        let Some(dir) = self.open_dir().map_err(|e| self.trouble("open", e))? else {
            return Err(PackStoreError::Missing(*name));
        };
        let mut options = OpenOptions::new();
        options.read(true).follow(FollowSymlinks::No);
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
        }
        let file = match dir.open_with(self.file_name(name), &options) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(PackStoreError::Missing(*name)),
            // A link where the pack should be (ELOOP): no pack.
            Err(e) if is_link_refusal(&e) => return Err(PackStoreError::Missing(*name)),
            Err(e) => return Err(self.trouble(&format!("open pack {name}"), e)),
        };
        let meta = file.metadata().map_err(|e| self.trouble("read", e))?;
        if !meta.is_file() {
            return Err(PackStoreError::Missing(*name));
        }
        let file = file.into_std();
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let fd = file.as_raw_fd();
            // SAFETY: fcntl on a descriptor this function owns, with plain integer flags.
            unsafe {
                let flags = libc::fcntl(fd, libc::F_GETFL);
                if flags >= 0 {
                    libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
                }
            }
        }
        Ok(file)
    }
}

impl LocalPackStore {
    /// Remove the temporary packs of saves that were killed: named for a process that is gone,
    /// or older than a day (a store shared by containers, where a pid means nothing here).
    fn sweep_stale(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let now = std::time::SystemTime::now();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(TEMP_PREFIX)) else { continue };
            let pid = rest.split_once('-').and_then(|(pid, _)| pid.parse::<u32>().ok());
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age.as_secs() > 24 * 60 * 60));
            if old || pid.is_some_and(|pid| !crate::process::alive(pid)) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

fn is_link_refusal(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ELOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

impl PackStore for LocalPackStore {
    fn describe(&self) -> String {
        format!("local packs `{}`", self.dir.display())
    }

    fn put(&self, name: &PackName, len: u64, bytes: &mut dyn Read) -> Result<(), PackStoreError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| self.trouble("create the directory", e))?;
        self.sweep_stale();
        let tmp = tempfile::Builder::new()
            .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
            .tempfile_in(&self.dir)
            .map_err(|e| self.trouble("create a file", e))?;
        let mut writer = io::BufWriter::with_capacity(1 << 20, tmp.as_file());
        let copied = io::copy(&mut bytes.take(len), &mut writer).map_err(|e| self.trouble("write a pack", e))?;
        if copied != len {
            return Err(PackStoreError::Trouble {
                what: format!("pack {name} ended after {copied} of {len} bytes"),
                source: None,
            });
        }
        writer.into_inner().map_err(|e| self.trouble("write a pack", e.into_error()))?;
        tmp.as_file().sync_all().map_err(|e| self.trouble("sync a pack", e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = 0o666 & !crate::file_mode::current_umask();
            let _ = std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(mode));
        }
        match tmp.persist_noclobber(self.dir.join(self.file_name(name))) {
            Ok(_) => Ok(()),
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(self.trouble(&format!("store pack {name}"), e.error)),
        }
    }

    fn exist(&self, names: &[PackName]) -> Result<Vec<bool>, PackStoreError> {
        let Some(dir) = self.open_dir().map_err(|e| self.trouble("open", e))? else {
            return Ok(vec![false; names.len()]);
        };
        names
            .iter()
            .map(|name| match dir.symlink_metadata(self.file_name(name)) {
                Ok(meta) => Ok(meta.is_file()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(self.trouble("look for a pack", e)),
            })
            .collect()
    }

    fn ranges(&self) -> bool {
        true
    }

    fn read(&self, name: &PackName, range: Range<u64>) -> Result<Ranged<'_>, PackStoreError> {
        let mut file = self.open_pack(name)?;
        file.seek(SeekFrom::Start(range.start)).map_err(|e| self.trouble("read a pack", e))?;
        Ok(Ranged::Range(Box::new(file.take(range.end.saturating_sub(range.start)))))
    }

    fn list(&self) -> Result<Vec<ListedPack>, PackStoreError> {
        let Some(dir) = self.open_dir().map_err(|e| self.trouble("open", e))? else { return Ok(Vec::new()) };
        let mut packs = Vec::new();
        for item in dir.entries().map_err(|e| self.trouble("list", e))? {
            let item = item.map_err(|e| self.trouble("list", e))?;
            let file_name = item.file_name();
            let Some(name) = file_name.to_str().and_then(|n| pack_of(&self.prefix, n)) else { continue };
            // Not followed: a link there is no pack.
            let Ok(meta) = dir.symlink_metadata(file_name) else { continue };
            if !meta.is_file() {
                continue;
            }
            let created = meta
                .modified()
                .ok()
                .and_then(|t| t.into_std().duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs() as i64);
            packs.push(ListedPack { name, size: meta.len(), created });
        }
        packs.sort_by_key(|p| p.name);
        Ok(packs)
    }

    fn delete(&self, name: &PackName) -> Result<(), PackStoreError> {
        let Some(dir) = self.open_dir().map_err(|e| self.trouble("open", e))? else { return Ok(()) };
        match dir.remove_file(self.file_name(name)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.trouble(&format!("delete pack {name}"), e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::Hash;

    fn read_all(store: &dyn PackStore, name: &PackName, range: Range<u64>) -> Vec<u8> {
        let mut out = Vec::new();
        match store.read(name, range).unwrap() {
            Ranged::Range(mut r) | Ranged::Whole(mut r) => r.read_to_end(&mut out).unwrap(),
        };
        out
    }

    #[test]
    fn the_local_store_puts_reads_ranges_lists_and_deletes_packs() {
        let scratch = tempfile::tempdir().unwrap();
        let store = LocalPackStore::new(scratch.path().join("packs"), "p");
        let bytes = b"0123456789".repeat(10);
        let name = Hash::of(&bytes);
        assert_eq!(store.exist(&[name]).unwrap(), [false], "no directory yet");
        assert!(matches!(store.read(&name, 0..1), Err(PackStoreError::Missing(_))));
        store.put(&name, bytes.len() as u64, &mut &bytes[..]).unwrap();
        // Stored again (another save of the same bytes): kept as it is.
        store.put(&name, bytes.len() as u64, &mut &bytes[..]).unwrap();
        let other = Hash::of(b"other");
        assert_eq!(store.exist(&[other, name]).unwrap(), [false, true]);
        assert_eq!(read_all(&store, &name, 12..15), b"234");
        let listed = store.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].name, listed[0].size), (name, 100));
        assert!(listed[0].created > 1_700_000_000);
        let file = scratch.path().join("packs").join(format!("p-pack.{name}"));
        assert!(file.is_file(), "named by its key");
        // Another prefix's packs, temporary files and strays are no packs of this one.
        std::fs::write(scratch.path().join("packs").join(format!("q-pack.{name}")), b"x").unwrap();
        let own = scratch.path().join("packs").join(format!(".tmp-pack-{}-x", std::process::id()));
        std::fs::write(&own, b"x").unwrap();
        assert_eq!(store.list().unwrap().len(), 1);
        // A short stream stores nothing.
        assert!(store.put(&other, 10, &mut &b"abc"[..]).is_err());
        assert_eq!(store.exist(&[other]).unwrap(), [false]);
        // A killed save's temporary pack (its process gone) is swept by the next put; a live
        // process's is kept. (A pid that cannot exist is a unix fact.)
        if cfg!(unix) {
            let dead = scratch.path().join("packs").join(".tmp-pack-4194999-x");
            std::fs::write(&dead, b"x").unwrap();
            store.put(&name, bytes.len() as u64, &mut &bytes[..]).unwrap();
            assert!(!dead.exists() && own.exists());
        }
        store.delete(&name).unwrap();
        store.delete(&name).unwrap();
        assert!(store.list().unwrap().is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn a_link_in_the_local_store_is_never_followed() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("packs");
        std::fs::create_dir_all(&dir).unwrap();
        let secret = scratch.path().join("secret");
        std::fs::write(&secret, b"not a pack").unwrap();
        let name = Hash::of(b"not a pack");
        std::os::unix::fs::symlink(&secret, dir.join(format!("p-pack.{name}"))).unwrap();
        let store = LocalPackStore::new(&dir, "p");
        assert!(matches!(store.read(&name, 0..4), Err(PackStoreError::Missing(_))));
        assert_eq!(store.exist(&[name]).unwrap(), [false]);
        assert!(store.list().unwrap().is_empty());
        store.delete(&name).unwrap();
        assert!(secret.exists(), "deleting removes the link, never its target");
    }
}
