//! Secret scan before a save: the bytes, names and link targets about to be archived must not
//! contain the job's tokens (`ACTIONS_RUNTIME_TOKEN`, `GITHUB_TOKEN`, the `github-token` input)
//! or the values of the variables named in `secret-env`. It runs before anything is reserved or
//! uploaded, so a file holding a token never reaches the blob store, not even as uncommitted
//! blocks. A finding names the file, never the secret.

use super::pack::{Inventory, PackError, SourceEntry};
use crate::manifest::EntryKind;
use memchr::memmem::Finder;
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Values shorter than this are not scanned for: they would match ordinary data.
pub const MIN_SECRET_LEN: usize = 8;

pub struct SecretScanner {
    finders: Vec<Finder<'static>>,
    longest: usize,
}

impl SecretScanner {
    pub fn new<S: AsRef<str>>(secrets: impl IntoIterator<Item = S>) -> Self {
        let mut values: Vec<String> =
            secrets.into_iter().map(|s| s.as_ref().trim().to_owned()).filter(|s| s.len() >= MIN_SECRET_LEN).collect();
        values.sort();
        values.dedup();
        let longest = values.iter().map(String::len).max().unwrap_or(0);
        Self { finders: values.iter().map(|v| Finder::new(v.as_bytes()).into_owned()).collect(), longest }
    }

    pub fn is_empty(&self) -> bool {
        self.finders.is_empty()
    }

    fn found_in(&self, bytes: &[u8]) -> bool {
        self.finders.iter().any(|f| f.find(bytes).is_some())
    }

    /// An entry whose name, link target or content holds a secret (the first one, when only
    /// one does). Files are read on a few threads: the scan reads everything the save will.
    pub fn scan(&self, inv: &Inventory) -> Result<Option<PathBuf>, PackError> {
        if self.is_empty() {
            return Ok(None);
        }
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 4);
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let found: Vec<Result<Option<usize>, PackError>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut buf = vec![0u8; 1 << 20];
                        while !stop.load(Ordering::Relaxed) {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(e) = inv.entries.get(i) else { return Ok(None) };
                            let hit = self.entry_holds_secret(e, &mut buf);
                            if !matches!(hit, Ok(false)) {
                                stop.store(true, Ordering::Relaxed);
                                return hit.map(|_| Some(i));
                            }
                        }
                        Ok(None)
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().expect("scan threads do not panic")).collect()
        });
        let mut first: Option<usize> = None;
        for r in found {
            if let Some(i) = r? {
                first = Some(first.map_or(i, |f| f.min(i)));
            }
        }
        Ok(first.map(|i| inv.entries[i].abs.clone()))
    }

    fn entry_holds_secret(&self, e: &SourceEntry, buf: &mut [u8]) -> Result<bool, PackError> {
        if self.found_in(e.rel.as_bytes()) || e.target.as_ref().is_some_and(|t| self.found_in(t.as_bytes())) {
            return Ok(true);
        }
        if e.kind != EntryKind::File {
            return Ok(false);
        }
        let read_error = |source| PackError::Read { path: e.abs.clone(), source };
        let mut file = File::open(&e.abs).map_err(read_error)?;
        // Chunks overlap by the longest secret, so one spanning a boundary is still found.
        let overlap = self.longest.saturating_sub(1);
        let mut kept = 0usize;
        loop {
            let n = file.read(&mut buf[kept..]).map_err(read_error)?;
            if n == 0 {
                return Ok(false);
            }
            let filled = kept + n;
            if self.found_in(&buf[..filled]) {
                return Ok(true);
            }
            kept = overlap.min(filled);
            buf.copy_within(filled - kept..filled, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_secrets_across_chunk_boundaries_and_ignores_short_values() {
        let dir = tempfile::tempdir().unwrap();
        let secret = "ghs_0123456789abcdefSECRET";
        let mut data = vec![b'x'; (1 << 20) - 10];
        data.extend_from_slice(secret.as_bytes());
        data.extend_from_slice(&[b'y'; 100]);
        std::fs::create_dir_all(dir.path().join("out")).unwrap();
        std::fs::write(dir.path().join("out/big.bin"), &data).unwrap();
        std::fs::write(dir.path().join("out/clean.txt"), b"nothing here").unwrap();
        let locations = crate::paths::Locations { workspace: dir.path().to_owned(), home: None };
        let set = crate::paths::PatternSet::parse(&["out"], &locations).unwrap();
        let inv = super::super::inventory(&set).unwrap();
        let found = SecretScanner::new([secret, "short"]).scan(&inv).unwrap();
        assert_eq!(found, Some(dir.path().join("out/big.bin")));
        assert_eq!(SecretScanner::new(["not-in-there-at-all"]).scan(&inv).unwrap(), None);
        assert!(SecretScanner::new(["short", ""]).is_empty());
    }
}
