//! What the local store keeps beside each entry: `meta/<key>@<version>`, a small JSON document
//! naming the ref that saved it, whose modification time is when a restore last used the entry.
//! A failure to write one never fails a save or a restore.
//!
//! A shared store is written by others: records (and, for [`open_entry`], entries) are reached
//! beneath the store's directory handle, never through a link, opened without blocking (a FIFO
//! cannot stall a restore) and read only when they are plain files. Anything else is ignored,
//! with one warning.

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, OpenOptions};
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::SystemTime;

const DIR: &str = "meta";

/// A record is a few dozen bytes; one longer than this is not one of ours.
const MAX_RECORD: u64 = 4096;

#[derive(Default, Serialize, Deserialize)]
struct Record {
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    saved_ref: Option<String>,
}

/// What the store knows of an entry besides its file.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct EntryMeta {
    pub saved_ref: Option<String>,
    pub last_used: Option<SystemTime>,
}

/// The store's directory (its own path is the user's, links and all).
fn open_root(root: &Path) -> io::Result<Dir> {
    Dir::open_ambient_dir(root, cap_std::ambient_authority())
}

/// `sub` of the store, never through a link; made when `create` and missing.
pub(super) fn open_store_dir(root: &Path, sub: &str, create: bool) -> io::Result<Dir> {
    let root = open_root(root)?;
    match root.open_dir_nofollow(sub) {
        Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
            match root.create_dir(sub) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
            root.open_dir_nofollow(sub)
        }
        opened => opened,
    }
}

/// Open `name` in `dir` without following a link and without blocking, for reading or for
/// writing; an error unless it is a plain file.
pub(super) fn open_plain(dir: &Dir, name: &str, write: bool) -> io::Result<File> {
    if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a file name"));
    }
    let mut options = OpenOptions::new();
    options.read(!write).write(write).follow(FollowSymlinks::No);
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = dir.open_with(name, &options)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a plain file: a link, a FIFO, a device or a directory",
        ));
    }
    Ok(file)
}

/// The entry file `name` of the store, as [`open_plain`] opens it.
pub(super) fn open_entry(root: &Path, name: &str) -> io::Result<std::fs::File> {
    let dir = open_store_dir(root, "entries", false)?;
    let file = open_plain(&dir, name, false)?.into_std();
    #[cfg(unix)]
    clear_nonblocking(&file);
    Ok(file)
}

/// A plain file read as usual from here on.
#[cfg(unix)]
fn clear_nonblocking(file: &std::fs::File) {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function's caller owns, with plain integer flags.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
}

/// One warning per process for something in the store that is not what the store writes.
fn ignored(root: &Path, what: &str, e: &io::Error) {
    crate::runner::warn_later(&format!(
        "local cache `{}`: ignoring {what}, which is not what the store writes there ({e})",
        root.display()
    ));
}

/// Record that the entry `name` was saved on `saved_ref` (see [`write_record`]); a store this
/// user may not write keeps none, silently, and anything else in the way is a warning.
pub(super) fn record_save(root: &Path, name: &str, saved_ref: &str) {
    match write_record(root, name, saved_ref) {
        Ok(()) => {}
        Err(e) if is_refusal(&e) => {}
        Err(e) => ignored(root, &format!("`meta/` (recording `{name}`)"), &e),
    }
}

/// Write the record of `name` whole under a temporary name in `meta/` and rename it over any
/// earlier record.
fn write_record(root: &Path, name: &str, saved_ref: &str) -> io::Result<()> {
    let dir = open_store_dir(root, DIR, true)?;
    let record = serde_json::to_vec(&Record { saved_ref: Some(saved_ref.to_owned()) }).map_err(io::Error::other)?;
    let tmp = format!(".{}{:x}", super::upload::upload_prefix(), rand_suffix());
    let mut options = OpenOptions::new();
    options.write(true).create_new(true).follow(FollowSymlinks::No);
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        options.mode(0o666);
    }
    let written = dir.open_with(&tmp, &options).and_then(|mut file| file.write_all(&record));
    let renamed = written.and_then(|()| dir.rename(&tmp, &dir, name));
    if renamed.is_err() {
        let _ = dir.remove_file(&tmp);
    }
    renamed
}

/// A few random bits for a temporary name (the process id comes first).
fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos());
    hasher.finish()
}

/// Record a use of the entry `name` now (creating an empty record for an entry saved before
/// records were kept). A store this user may only read keeps no record, silently.
pub(super) fn record_use(root: &Path, name: &str) {
    let dir = match open_store_dir(root, DIR, true) {
        Ok(dir) => dir,
        Err(e) if is_refusal(&e) => return,
        Err(e) => return ignored(root, "`meta/`", &e),
    };
    let opened = match open_plain(&dir, name, true) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => create_empty(&dir, name),
        opened => opened,
    };
    match opened {
        Ok(file) => {
            let _ = file.into_std().set_modified(SystemTime::now());
        }
        Err(e) if is_refusal(&e) => {}
        Err(e) => ignored(root, &format!("the record `meta/{name}`"), &e),
    }
}

/// The store refuses this user a write (read-only credentials, a read-only file system):
/// nothing to warn about.
fn is_refusal(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied || e.raw_os_error() == Some(libc_erofs())
}

#[cfg(unix)]
fn libc_erofs() -> i32 {
    libc::EROFS
}

#[cfg(not(unix))]
fn libc_erofs() -> i32 {
    -1
}

fn create_empty(dir: &Dir, name: &str) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true).follow(FollowSymlinks::No);
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        options.mode(0o666);
    }
    let mut file = dir.open_with(name, &options)?;
    file.write_all(b"{}")?;
    Ok(file)
}

/// What the record of `name` says (nothing, when there is none or it cannot be read).
pub(super) fn read(root: &Path, name: &str) -> EntryMeta {
    let dir = match open_store_dir(root, DIR, false) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return EntryMeta::default(),
        Err(e) => {
            ignored(root, "`meta/`", &e);
            return EntryMeta::default();
        }
    };
    let file = match open_plain(&dir, name, false) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return EntryMeta::default(),
        Err(e) => {
            ignored(root, &format!("the record `meta/{name}`"), &e);
            return EntryMeta::default();
        }
    };
    let last_used = file.metadata().and_then(|m| m.modified()).ok().map(|t| t.into_std());
    let mut bytes = Vec::new();
    let record = match (&file).take(MAX_RECORD + 1).read_to_end(&mut bytes) {
        Ok(_) if bytes.len() as u64 <= MAX_RECORD => serde_json::from_slice(&bytes).unwrap_or_default(),
        _ => Record::default(),
    };
    EntryMeta { saved_ref: record.saved_ref, last_used }
}

pub(super) fn remove(root: &Path, name: &str) {
    if let Ok(dir) = open_store_dir(root, DIR, false) {
        let _ = dir.remove_file(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn path(root: &Path, name: &str) -> std::path::PathBuf {
        root.join(DIR).join(name)
    }

    #[test]
    fn a_record_keeps_the_ref_and_a_use_moves_its_time() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(read(root.path(), "k@v"), EntryMeta::default(), "no record: nothing known");
        write_record(root.path(), "k@v", "refs/heads/café").unwrap();
        let saved = read(root.path(), "k@v");
        assert_eq!(saved.saved_ref.as_deref(), Some("refs/heads/café"));
        let long_ago = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        fs::File::options().write(true).open(path(root.path(), "k@v")).unwrap().set_modified(long_ago).unwrap();
        assert_eq!(read(root.path(), "k@v").last_used, Some(long_ago));
        record_use(root.path(), "k@v");
        let used = read(root.path(), "k@v");
        assert!(used.last_used.unwrap() > long_ago, "{used:?}");
        assert_eq!(used.saved_ref.as_deref(), Some("refs/heads/café"), "a use keeps the ref");
        let names: Vec<_> = fs::read_dir(root.path().join(DIR)).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["k@v"], "nothing left behind");

        #[cfg(unix)]
        {
            let target = root.path().join("elsewhere");
            fs::write(&target, b"x").unwrap();
            fs::File::options().write(true).open(&target).unwrap().set_modified(long_ago).unwrap();
            std::os::unix::fs::symlink(&target, path(root.path(), "linked@v")).unwrap();
            record_use(root.path(), "linked@v");
            assert_eq!(fs::metadata(&target).unwrap().modified().unwrap(), long_ago, "a link is not followed");
        }

        // An entry from before records: a use records the time, the ref stays unknown.
        record_use(root.path(), "old@v");
        let old = read(root.path(), "old@v");
        assert_eq!((old.saved_ref, old.last_used.is_some()), (None, true));
        remove(root.path(), "old@v");
        assert_eq!(read(root.path(), "old@v"), EntryMeta::default());
    }

    /// A FIFO, a link to `/dev/zero` or a directory as a record, and a linked `meta/`, are
    /// ignored: nothing blocks, nothing grows, nothing outside is touched.
    #[cfg(unix)]
    #[test]
    fn records_that_are_not_plain_files_are_ignored_without_blocking() {
        let root = tempfile::tempdir().unwrap();
        let meta = root.path().join(DIR);
        fs::create_dir(&meta).unwrap();
        let fifo = std::ffi::CString::new(path(root.path(), "fifo@v").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o666) }, 0);
        std::os::unix::fs::symlink("/dev/zero", path(root.path(), "zero@v")).unwrap();
        fs::create_dir(path(root.path(), "dir@v")).unwrap();
        fs::write(path(root.path(), "big@v"), vec![b' '; 1 << 20]).unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        let store = root.path().to_owned();
        std::thread::spawn(move || {
            for name in ["fifo@v", "zero@v", "dir@v", "big@v"] {
                record_use(&store, name);
                let read = read(&store, name);
                done.send((name, read)).unwrap();
            }
        });
        for _ in 0..4 {
            let (name, read) = finished.recv_timeout(std::time::Duration::from_secs(5)).expect("nothing blocks");
            assert_eq!(read.saved_ref, None, "{name}");
        }
        assert!(fs::symlink_metadata(path(root.path(), "zero@v")).unwrap().file_type().is_symlink());

        // A linked `meta/`: neither a use nor a save reaches where it points.
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("k@v");
        fs::write(&victim, b"not the store's").unwrap();
        let long_ago = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        fs::File::options().write(true).open(&victim).unwrap().set_modified(long_ago).unwrap();
        let linked = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), linked.path().join(DIR)).unwrap();
        record_use(linked.path(), "k@v");
        assert!(write_record(linked.path(), "new@v", "refs/heads/main").is_err());
        record_save(linked.path(), "new@v", "refs/heads/main");
        assert_eq!(fs::metadata(&victim).unwrap().modified().unwrap(), long_ago, "no time changed outside");
        let names: Vec<_> = fs::read_dir(outside.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["k@v"], "no file made outside");
        assert_eq!(read(linked.path(), "k@v"), EntryMeta::default());
    }
}
