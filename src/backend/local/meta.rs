//! What the local store keeps beside each entry: `meta/<key>@<version>`, a small JSON document
//! naming the ref that saved it (`{"ref":"refs/heads/main"}`; the empty ref for a save outside
//! Actions), whose modification time is when a restore last used the entry. An entry saved before
//! the store kept these has none: its ref is not known, and its last use is its creation until a
//! restore records one. Records are written whole and renamed into place, and a failure to write
//! one never fails a save or a restore (a store this user may only read keeps no record).

use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

const DIR: &str = "meta";

/// A record as stored.
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

fn path(root: &Path, name: &str) -> PathBuf {
    root.join(DIR).join(name)
}

/// Record that the entry `name` was saved on `saved_ref`; `tmp` is where the record is written
/// before it is renamed over any earlier one.
pub(super) fn record_save(root: &Path, tmp: &Path, name: &str, saved_ref: &str) -> io::Result<()> {
    let dir = root.join(DIR);
    fs::create_dir_all(&dir)?;
    let record = Record { saved_ref: Some(saved_ref.to_owned()) };
    let mut file = tempfile::Builder::new().prefix(&super::backend::upload_prefix()).tempfile_in(tmp)?;
    file.write_all(&serde_json::to_vec(&record).map_err(io::Error::other)?)?;
    super::backend::readable_by_all(file.path());
    file.persist(dir.join(name)).map(drop).map_err(|e| e.error)
}

/// Record a use of the entry `name` now (creating an empty record for an entry saved before
/// records were kept).
pub(super) fn record_use(root: &Path, name: &str) {
    let path = path(root, name);
    let mut options = OpenOptions::new();
    options.write(true);
    // A record is a file the store wrote: a link planted in a shared store is not followed.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
    let opened = match options.open(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => create_empty(&path),
        opened => opened,
    };
    if let Ok(file) = opened {
        let _ = file.set_modified(SystemTime::now());
    }
}

fn create_empty(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(b"{}")?;
    super::backend::readable_by_all(path);
    Ok(file)
}

/// What the record of `name` says (nothing, when there is none or it cannot be read).
pub(super) fn read(root: &Path, name: &str) -> EntryMeta {
    let path = path(root, name);
    let Ok(bytes) = fs::read(&path) else { return EntryMeta::default() };
    let record: Record = serde_json::from_slice(&bytes).unwrap_or_default();
    let last_used = fs::metadata(&path).and_then(|m| m.modified()).ok();
    EntryMeta { saved_ref: record.saved_ref, last_used }
}

/// Remove the record of a deleted entry.
pub(super) fn remove(root: &Path, name: &str) {
    let _ = fs::remove_file(path(root, name));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_keeps_the_ref_and_a_use_moves_its_time() {
        let root = tempfile::tempdir().unwrap();
        let tmp = root.path().join("tmp");
        fs::create_dir(&tmp).unwrap();
        assert_eq!(read(root.path(), "k@v"), EntryMeta::default(), "no record: nothing known");
        record_save(root.path(), &tmp, "k@v", "refs/heads/café").unwrap();
        let saved = read(root.path(), "k@v");
        assert_eq!(saved.saved_ref.as_deref(), Some("refs/heads/café"));
        let long_ago = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        File::options().write(true).open(path(root.path(), "k@v")).unwrap().set_modified(long_ago).unwrap();
        assert_eq!(read(root.path(), "k@v").last_used, Some(long_ago));
        record_use(root.path(), "k@v");
        let used = read(root.path(), "k@v");
        assert!(used.last_used.unwrap() > long_ago, "{used:?}");
        assert_eq!(used.saved_ref.as_deref(), Some("refs/heads/café"), "a use keeps the ref");
        assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0, "nothing left behind");

        #[cfg(unix)]
        {
            let target = root.path().join("elsewhere");
            fs::write(&target, b"x").unwrap();
            File::options().write(true).open(&target).unwrap().set_modified(long_ago).unwrap();
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
}
