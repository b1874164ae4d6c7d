//! The secret scan of a save: the bytes, names and link targets being archived, and the `path`
//! lines the manifest keeps, must not contain the job's tokens, the store's credentials or the
//! values of the variables named in `secret-env`. The packer scans each file's bytes as it reads
//! them (no second pass) and passes them on only once cleared, so a secret never reaches the
//! encoder, let alone the wire; finding one aborts the archive and the entry is never committed.
//! A finding names the file, never the secret.

use crate::fingerprint::FingerprintRecord;
use crate::manifest::RootRecord;
use memchr::memmem::Finder;
use std::io;

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

    pub fn none() -> Self {
        Self::new(Vec::<String>::new())
    }

    pub fn is_empty(&self) -> bool {
        self.finders.is_empty()
    }

    fn found_in(&self, bytes: &[u8]) -> bool {
        self.finders.iter().any(|f| f.find(bytes).is_some())
    }

    /// Whether `name` (an entry's path or link target) holds a secret.
    pub fn in_name(&self, name: &str) -> bool {
        self.found_in(name.as_bytes())
    }

    /// The first root whose `path` line (stored in the manifest) holds a secret.
    pub fn in_roots<'r>(&self, roots: &'r [RootRecord]) -> Option<&'r RootRecord> {
        roots.iter().find(|r| self.found_in(r.line.as_bytes()))
    }

    /// Whether the fingerprint record holds a secret in any of its own strings (not its JSON,
    /// where escaping would hide a multi-line or quoted value): a `hash-env` naming a token.
    pub fn in_fingerprint(&self, record: &FingerprintRecord) -> bool {
        self.found_in(record.prefix.as_bytes())
            || record.components.components.iter().any(|(name, component)| {
                self.found_in(name.as_bytes())
                    || component.iter().any(|(label, value)| {
                        self.found_in(label.as_bytes()) || value.as_text().is_some_and(|t| self.found_in(t.as_bytes()))
                    })
            })
    }

    pub fn gate(&self) -> Gate<'_> {
        Gate { scanner: self, held: Vec::with_capacity(self.longest) }
    }
}

/// Passes a file's bytes on only once they are known to hold no secret. It keeps back the last
/// `longest − 1` bytes of what it was fed, until the next chunk (or the end) shows that no
/// secret spans them: not even a secret's first bytes reach the archive.
pub struct Gate<'a> {
    scanner: &'a SecretScanner,
    held: Vec<u8>,
}

impl Gate<'_> {
    pub fn feed(&mut self, chunk: &[u8], out: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> Result<(), GateError> {
        let scanner = self.scanner;
        if scanner.is_empty() {
            return out(chunk).map_err(GateError::Write);
        }
        let overlap = scanner.longest - 1;
        // A secret that starts in the held bytes ends within the first `overlap` of the chunk.
        if !self.held.is_empty() {
            let head = &chunk[..chunk.len().min(overlap)];
            let mut window = Vec::with_capacity(self.held.len() + head.len());
            window.extend_from_slice(&self.held);
            window.extend_from_slice(head);
            if scanner.found_in(&window) {
                return Err(GateError::Secret);
            }
        }
        if scanner.found_in(chunk) {
            return Err(GateError::Secret);
        }
        if chunk.len() >= overlap {
            out(&self.held).map_err(GateError::Write)?;
            out(&chunk[..chunk.len() - overlap]).map_err(GateError::Write)?;
            self.held.clear();
            self.held.extend_from_slice(&chunk[chunk.len() - overlap..]);
        } else {
            self.held.extend_from_slice(chunk);
            let release = self.held.len().saturating_sub(overlap);
            out(&self.held[..release]).map_err(GateError::Write)?;
            self.held.drain(..release);
        }
        Ok(())
    }

    /// The end of the file: what was held back is safe now.
    pub fn finish(mut self, out: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        out(&std::mem::take(&mut self.held))
    }
}

#[derive(Debug)]
pub enum GateError {
    Secret,
    Write(io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `data` in chunks of `size`; what came out, and whether a secret stopped it.
    fn pass(scanner: &SecretScanner, data: &[u8], size: usize) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        let mut gate = scanner.gate();
        for chunk in data.chunks(size) {
            let mut sink = |b: &[u8]| {
                out.extend_from_slice(b);
                Ok(())
            };
            match gate.feed(chunk, &mut sink) {
                Ok(()) => {}
                Err(GateError::Secret) => return (out, true),
                Err(GateError::Write(e)) => panic!("{e}"),
            }
        }
        gate.finish(&mut |b: &[u8]| {
            out.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        (out, false)
    }

    #[test]
    fn a_multi_line_or_quoted_value_in_the_fingerprint_is_found() {
        use crate::fingerprint::{Fingerprint, Value};
        let key = "-----BEGIN KEY-----\nMIIEabc\"def\n-----END KEY-----";
        let mut fp = Fingerprint::default();
        fp.insert("env", [("DEPLOY_KEY".to_owned(), Value::text(key))].into());
        let record = FingerprintRecord::new("p", &"v".into(), fp);
        assert!(!record.to_json().contains(key), "JSON escapes it: a search of the JSON would miss it");
        assert!(SecretScanner::new([key]).in_fingerprint(&record));
        assert!(!SecretScanner::new(["something-else"]).in_fingerprint(&record));
    }

    #[test]
    fn no_byte_of_a_secret_passes_whatever_the_chunking() {
        let secret = b"ghs_0123456789abcdefSECRET";
        let scanner = SecretScanner::new([std::str::from_utf8(secret).unwrap(), "short", "another-token-value"]);
        for at in [0usize, 1, 7, 25, 26, 27, 63, 100] {
            let mut data: Vec<u8> = (0..130u8).map(|i| b'a' + i % 26).collect();
            data.splice(at..at, secret.iter().copied());
            for size in 1..=64 {
                let (out, stopped) = pass(&scanner, &data, size);
                assert!(stopped, "secret at {at}, chunks of {size}");
                assert!(out.len() <= at, "secret at {at}, chunks of {size}: {} bytes passed", out.len());
                assert_eq!(out, data[..out.len()]);
            }
        }
        let clean: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        for size in [1, 5, 24, 25, 26, 1000] {
            assert_eq!(pass(&scanner, &clean, size), (clean.clone(), false), "chunks of {size}");
        }
        assert!(SecretScanner::new(["short", ""]).is_empty());
        assert_eq!(pass(&SecretScanner::new(["short"]), b"short", 2), (b"short".to_vec(), false));
    }
}
