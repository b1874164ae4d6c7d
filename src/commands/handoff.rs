//! What one step leaves on disk for a later one: the fingerprint file (restore or fingerprint →
//! save), the restore's record of what it did with a key and version (restore → save: the
//! stack it reused, for `verify-reuse` and `grow`, or that the entries it found could not be
//! used, so the save writes a replacement), and the `.exact-cache-root` marker (restore or
//! save → a later job's `clean-on-miss`).

use super::Error;
use super::verify::Kept;
use crate::backend::LocalBackend;
use crate::config::Locate;
use crate::env::Env;
use crate::fingerprint::FingerprintRecord;
use crate::keys::{Key, Version};
use crate::outcome::HitRecord;
use crate::runner::Runner;
use std::path::{Path, PathBuf};

/// Where the fingerprint file of `key` lives unless `fingerprint-file` says otherwise.
/// `$RUNNER_TEMP/exact-cache/` on a runner (private to the job); otherwise a directory of the
/// user's own, never a shared and predictable `/tmp` path.
pub(super) fn fingerprint_path(fingerprint_file: Option<&Path>, env: &Env, key: &Key) -> PathBuf {
    fingerprint_file.map(Path::to_path_buf).unwrap_or_else(|| {
        let dir = match env.non_empty("RUNNER_TEMP") {
            Some(temp) => PathBuf::from(temp).join("exact-cache"),
            None => LocalBackend::default_dir(env).join("fingerprints"),
        };
        dir.join(format!("{key}.json"))
    })
}

/// What a restore did with a key and version, for the save of the same job: every restore
/// writes it (replacing an earlier one), and a save that computes the same key and version
/// reads it. The save checks what it says against the store before it writes a
/// new generation (a step could write anything here): it never numbers one from this file.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct RestoreRecord {
    pub key: Key,
    pub version: Version,
    /// The store the restore asked ([`crate::backend::Backend::describe`]): a save to another
    /// store ignores the record.
    pub store: String,
    /// When the restore wrote it (seconds since the epoch): outside Actions, where records are
    /// kept in the user's own directory across sessions, an old one is ignored.
    pub written_at: i64,
    pub restored: Restored,
    /// When the restore ended, in milliseconds since the epoch: where the generation time a save
    /// records starts (absent in records of earlier versions: not recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<i64>,
    /// On a reuse: for `verify-reuse`'s line and a compaction's figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hit: Option<HitRecord>,
    /// What the restore's inputs asked of the fingerprint
    /// ([`crate::fingerprint::FingerprintSpec::inputs_digest`]): a save without `key` with the
    /// same is a save of the same cache (`restored_keys`). Absent in records of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<String>,
}

/// What a save reads of the restore's record besides what it did: when it ended and what a
/// reuse was worth ([`super::worth`]).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RestoreTimes {
    pub ended_ms: Option<i64>,
    pub hit: Option<HitRecord>,
}

/// Why a save does not use the restore's record.
#[derive(Debug, thiserror::Error)]
pub(super) enum RecordError {
    #[error("cannot read `{}`: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("`{}` is not a restore record: {source}", path.display())]
    Decode { path: PathBuf, source: serde_json::Error },
    #[error("`{}` is the record of another key or version", path.display())]
    OtherKey { path: PathBuf },
    #[error("`{}` is the record of a restore from another store", path.display())]
    OtherStore { path: PathBuf },
    #[error("`{}` is the record of a restore more than 12 hours ago", path.display())]
    Old { path: PathBuf },
}

/// Outside Actions, a restore record older than this is another session's.
const RECORD_OUTLIVES_A_SESSION: i64 = 12 * 60 * 60;

/// The seconds since the epoch now.
pub(super) fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Restored {
    /// The stack was put in place: the save compares the tree with it, grows it, or saves nothing.
    Reused(Box<Kept>),
    /// Bases were found and none could be used for what it holds: the save of the job that
    /// regenerated writes a replacement above the newest, unless one newer than `newest` exists.
    /// `bad_packs`: the packs the restore found missing or corrupt (hex), which the replacement
    /// never references; absent in records of earlier versions.
    Unusable {
        newest: u32,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        bad_packs: Vec<String>,
    },
    /// Nothing was reused (nothing found, service trouble, `lookup-only`, a file in the way).
    NotReused,
}

/// Where the restore record of `key` and `version` lives: beside the fingerprint file, named by
/// both (two caches can share a key when their `path` lines differ).
pub(super) fn record_path(fingerprint_file: Option<&Path>, env: &Env, key: &Key, version: &Version) -> PathBuf {
    let short: String = version.chars().take(16).collect();
    fingerprint_path(fingerprint_file, env, key).with_file_name(format!("{key}.{short}.restore.json"))
}

/// Write the restore's record; its path.
pub(super) fn write_record(
    fingerprint_file: Option<&Path>,
    env: &Env,
    record: &RestoreRecord,
) -> std::io::Result<PathBuf> {
    let path = record_path(fingerprint_file, env, &record.key, &record.version);
    write_atomically(&path, &serde_json::to_string(record).expect("records serialize"))?;
    Ok(path)
}

/// The restore's record of `key` and `version` for a save to `store`: `Ok(None)` when no restore
/// left one; an error names a record that cannot be read, is another's, or (outside Actions,
/// where `RUNNER_TEMP` is unset) is older than a session.
pub(super) fn read_record(
    fingerprint_file: Option<&Path>,
    env: &Env,
    (key, version): (&Key, &Version),
    store: &str,
) -> Result<Option<(Restored, RestoreTimes)>, RecordError> {
    Ok(read_whole_record(fingerprint_file, env, (key, version), store)?
        .map(|record| (record.restored, RestoreTimes { ended_ms: record.ended_ms, hit: record.hit })))
}

fn read_whole_record(
    fingerprint_file: Option<&Path>,
    env: &Env,
    (key, version): (&Key, &Version),
    store: &str,
) -> Result<Option<RestoreRecord>, RecordError> {
    let path = record_path(fingerprint_file, env, key, version);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(RecordError::Read { path, source }),
    };
    let record: RestoreRecord = match serde_json::from_slice(&bytes) {
        Ok(record) => record,
        Err(source) => return Err(RecordError::Decode { path, source }),
    };
    if record.key != *key || record.version != *version {
        return Err(RecordError::OtherKey { path });
    }
    if record.store != store {
        return Err(RecordError::OtherStore { path });
    }
    if env.non_empty("RUNNER_TEMP").is_none() && now() - record.written_at > RECORD_OUTLIVES_A_SESSION {
        return Err(RecordError::Old { path });
    }
    Ok(Some(record))
}

/// The most files of the fingerprint directory [`restored_keys`] looks at.
const RECORDS_LOOKED_AT: usize = 1_000;

/// The keys this job's restores of the same cache computed: of `prefix`, for `version`, from
/// `store`, with the same `inputs` ([`RestoreRecord::inputs`]) — the keys of the restore records
/// beside the fingerprint files, each read as [`read_record`] reads it.
pub(super) fn restored_keys(
    fingerprint_file: Option<&Path>,
    env: &Env,
    (prefix, version, inputs): (&str, &Version, &str),
    store: &str,
) -> Vec<Key> {
    let any = Key::from(format!("{prefix}-"));
    let dir = fingerprint_path(fingerprint_file, env, &any).with_file_name("");
    let short: String = version.chars().take(16).collect();
    let suffix = format!(".{short}.restore.json");
    let Ok(listing) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut keys: Vec<Key> = listing
        .take(RECORDS_LOOKED_AT)
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(&suffix).map(Key::from))
        .filter(|key| key.is_of(prefix))
        .filter(|key| {
            let record = read_whole_record(fingerprint_file, env, (key, version), store);
            matches!(record, Ok(Some(r)) if r.inputs.as_deref() == Some(inputs))
        })
        .collect();
    keys.sort();
    keys
}

pub(super) fn write_fingerprint(
    fingerprint_file: Option<&Path>,
    env: &Env,
    record: &FingerprintRecord,
) -> Result<PathBuf, Error> {
    let path = fingerprint_path(fingerprint_file, env, &record.key);
    write_atomically(&path, &record.to_json())
        .map_err(|source| Error::WriteFingerprint { path: path.clone(), source })?;
    Ok(path)
}

pub(super) fn read_fingerprint(path: &Path, key: &Key) -> Result<FingerprintRecord, Error> {
    let bytes = std::fs::read(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => Error::NoFingerprint { key: key.clone(), path: path.to_owned() },
        _ => Error::ReadFingerprint { path: path.to_owned(), source },
    })?;
    let record = FingerprintRecord::from_json(&bytes)
        .map_err(|_| Error::WrongFingerprint { key: key.clone(), path: path.to_owned() })?;
    if record.key != *key {
        return Err(Error::WrongFingerprint { key: key.clone(), path: path.to_owned() });
    }
    Ok(record)
}

/// Write `text` through a temporary file renamed into place: an existing file or symlink at
/// the path is replaced, never written through.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let mut tmp = tempfile::NamedTempFile::new_in(parent)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Leave the marker that lets a later `clean-on-miss` clean the directory roots (by index)
/// exact-cache has restored into or saved from (only where it could not clean otherwise).
pub(super) fn mark_owned(runner: &Runner, locate: &Locate, roots: &[usize]) {
    for (dir, e) in locate.clean_guard.mark_owned(&locate.paths, roots) {
        super::render::unmarked(&dir, &e).say(runner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_file_that_cannot_be_read_keeps_its_cause() {
        let dir = tempfile::tempdir().unwrap();
        let missing = read_fingerprint(&dir.path().join("k.json"), &"k".into()).unwrap_err();
        assert!(matches!(missing, Error::NoFingerprint { .. }), "{missing:?}");
        // A directory where the file should be: not "run the restore step first".
        let unreadable = read_fingerprint(dir.path(), &"k".into()).unwrap_err();
        assert!(matches!(&unreadable, Error::ReadFingerprint { path, .. } if path == dir.path()), "{unreadable:?}");
        assert!(std::error::Error::source(&unreadable).is_some());
    }
}
