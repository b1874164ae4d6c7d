//! What one step leaves on disk for a later one: the fingerprint file (restore or fingerprint →
//! save), the manifest of a reused entry (restore → save, for `verify-reuse`), the base a save
//! writes to replace an entry the restore could not use (restore → save), and the
//! `.exact-cache-root` marker (restore or save → a later job's `clean-on-miss`).

use super::Error;
use super::verify::Kept;
use crate::backend::LocalBackend;
use crate::config::Config;
use crate::env::Env;
use crate::fingerprint::FingerprintRecord;
use crate::ids::Key;
use crate::runner::Runner;
use crate::stack::{MAX_GENERATIONS, Slot};
use std::path::{Path, PathBuf};

/// Where the fingerprint file of `key` lives unless `fingerprint-file` says otherwise.
/// `$RUNNER_TEMP/exact-cache/` on a runner (private to the job); otherwise a directory of the
/// user's own, never a shared and predictable `/tmp` path.
pub(super) fn fingerprint_path(config: &Config, env: &Env, key: &Key) -> PathBuf {
    config.fingerprint_file.clone().unwrap_or_else(|| {
        let dir = match env.non_empty("RUNNER_TEMP") {
            Some(temp) => PathBuf::from(temp).join("exact-cache"),
            None => LocalBackend::default_dir(env).join("fingerprints"),
        };
        dir.join(format!("{key}.json"))
    })
}

/// Where the manifest of a restored entry is kept for `verify-reuse`.
pub(super) fn manifest_path(config: &Config, env: &Env, key: &Key) -> PathBuf {
    fingerprint_path(config, env, key).with_file_name(format!("{key}.manifest.json"))
}

/// Where a restore that could not use the bases it found tells the save which generation's
/// base replaces them.
fn replacement_path(config: &Config, env: &Env, key: &Key) -> PathBuf {
    fingerprint_path(config, env, key).with_file_name(format!("{key}.replacement"))
}

/// Record (or, with `None`, forget) that this job's save of `key` writes `slot`, a replacement.
pub(super) fn expect_replacement(config: &Config, env: &Env, key: &Key, slot: Option<Slot>) -> std::io::Result<()> {
    let path = replacement_path(config, env, key);
    match slot {
        Some(slot) => write_atomically(&path, &slot.generation.to_string()),
        None => match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
    }
}

/// The base a restore in this job asked the save of `key` to write as a replacement.
pub(super) fn replacement(config: &Config, env: &Env, key: &Key) -> Option<Slot> {
    let text = std::fs::read_to_string(replacement_path(config, env, key)).ok()?;
    let generation: u32 = text.trim().parse().ok()?;
    (generation > 0 && generation < MAX_GENERATIONS).then(|| Slot::base(generation))
}

pub(super) fn write_fingerprint(config: &Config, env: &Env, record: &FingerprintRecord) -> Result<PathBuf, Error> {
    let path = fingerprint_path(config, env, &record.key);
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

/// Keep the manifest of the entry reused under `key` (and what was there before) for the save
/// step's `verify-reuse`; `None` (with a warning) when it cannot be written.
pub(super) fn keep_manifest(runner: &Runner, config: &Config, key: &Key, kept: &Kept) -> Option<PathBuf> {
    let path = manifest_path(config, runner.env(), key);
    match write_atomically(&path, &serde_json::to_string(kept).expect("manifests serialize")) {
        Ok(()) => Some(path),
        Err(e) => {
            runner.warning(&format!("cannot keep the restored manifest for `verify-reuse`: {e}"));
            None
        }
    }
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
pub(super) fn mark_owned(runner: &Runner, config: &Config, roots: &[usize]) {
    for (dir, e) in config.clean_guard.mark_owned(&config.paths, roots) {
        runner.warning(&format!("cannot mark `{}` as exact-cache's own for `clean-on-miss`: {e}", dir.display()));
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
