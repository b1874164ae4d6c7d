//! The decoded tar stream on its way to the tar reader, watched block by block so that no
//! header record costs more than [`MAX_RECORD_BYTES`] of memory.
//!
//! The tar reader holds an extension record — pax (`x`, `g`), GNU long name (`L`) or long link
//! (`K`) — whole before the member it describes, and a 1 GiB pax record compresses to a few KiB.
//! Ours hold a path (under 4 KiB), a link target, a size, the generation record or the pack
//! names. A larger record is a corrupt archive, refused when its header arrives, before a byte
//! of it is read (the bound `unpack::first_pax` reads with too).
//!
//! The watcher reads the stream as the tar reader does — its headers parsed by the `tar` crate
//! itself, a pax `size` overriding the next member's size as the crate applies it — and passes
//! every byte through unchanged. After the end-of-archive block it only passes bytes on.

use std::io::{self, Read};

/// The largest extension record accepted (pax, GNU long name or link).
pub(super) const MAX_RECORD_BYTES: u64 = 64 << 10;

const BLOCK: usize = 512;

/// `inner`, a decoded tar stream, with every extension record bounded.
pub(super) struct Records<R> {
    inner: R,
    state: State,
    /// A pax record's `size`: the size of the next member that is not an extension record.
    next_size: Option<u64>,
    /// Why the stream is refused: every later read fails with it.
    refused: Option<String>,
}

enum State {
    /// Within a header block: its bytes so far.
    Header { block: Box<[u8; BLOCK]>, filled: usize },
    /// Within a member's data, padded to whole blocks: the bytes left, and a pax record's bytes
    /// (its unpadded length, and what arrived) when the member is one.
    Data { left: u64, pax: Option<(u64, Vec<u8>)> },
    /// After the end-of-archive block (or a header the tar reader refuses itself).
    Ended,
}

impl State {
    fn header() -> State {
        State::Header { block: Box::new([0; BLOCK]), filled: 0 }
    }
}

impl<R: Read> Records<R> {
    pub(super) fn new(inner: R) -> Self {
        Self { inner, state: State::header(), next_size: None, refused: None }
    }

    /// A whole header block arrived: what follows it.
    fn after_header(&mut self, block: &[u8; BLOCK]) -> State {
        // The tar reader ends the archive at the first zero block.
        if block.iter().all(|b| *b == 0) {
            return State::Ended;
        }
        let header = tar::Header::from_byte_slice(block);
        let kind = header.entry_type();
        // A size the tar reader cannot parse either fails it there.
        let Ok(header_size) = header.entry_size() else { return State::Ended };
        let extension = kind.is_gnu_longname()
            || kind.is_gnu_longlink()
            || kind.is_pax_local_extensions()
            || kind.is_pax_global_extensions();
        let size = if extension { header_size } else { self.next_size.take().unwrap_or(header_size) };
        if kind.is_gnu_sparse() {
            // Its extension blocks move the data; no archive of ours has one.
            self.refused = Some("a sparse member, which exact-cache never writes".to_owned());
            return State::Ended;
        }
        if extension && size > MAX_RECORD_BYTES {
            self.refused = Some(format!(
                "a header record ({}) of {size} bytes, more than the {MAX_RECORD_BYTES} one may hold",
                record_name(kind)
            ));
            return State::Ended;
        }
        // As the tar reader: a pax record describes the next member only in a ustar or GNU header.
        let recognized = header.as_ustar().is_some() || header.as_gnu().is_some();
        let pax = (recognized && kind.is_pax_local_extensions()).then(|| (size, Vec::with_capacity(size as usize)));
        match size.checked_next_multiple_of(BLOCK as u64) {
            Some(0) => State::header(),
            Some(left) => State::Data { left, pax },
            None => {
                self.refused = Some(format!("a member of {size} bytes"));
                State::Ended
            }
        }
    }
}

/// How a record's type is named in the refusal.
fn record_name(kind: tar::EntryType) -> &'static str {
    if kind.is_gnu_longname() {
        "a GNU long name"
    } else if kind.is_gnu_longlink() {
        "a GNU long link"
    } else {
        "pax"
    }
}

/// The `size` a pax record gives the next member, read as the `tar` crate reads it (the first
/// `size` key; a record it cannot read gives none).
fn pax_size(record: &[u8]) -> Option<u64> {
    for extension in tar::PaxExtensions::new(record) {
        let extension = extension.ok()?;
        if extension.key() == Ok("size") {
            return extension.value().ok()?.parse().ok();
        }
    }
    None
}

impl<R: Read> Read for Records<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(why) = &self.refused {
            return Err(io::Error::new(io::ErrorKind::InvalidData, why.clone()));
        }
        match &mut self.state {
            State::Ended => self.inner.read(buf),
            State::Header { block, filled } => {
                let want = (BLOCK - *filled).min(buf.len());
                let n = self.inner.read(&mut buf[..want])?;
                block[*filled..*filled + n].copy_from_slice(&buf[..n]);
                *filled += n;
                if *filled == BLOCK {
                    let block = std::mem::replace(block, Box::new([0; BLOCK]));
                    self.state = self.after_header(&block);
                }
                Ok(n)
            }
            State::Data { left, pax } => {
                let want = (*left).min(buf.len() as u64) as usize;
                let n = self.inner.read(&mut buf[..want])?;
                if let Some((len, bytes)) = pax {
                    let room = (*len as usize).saturating_sub(bytes.len()).min(n);
                    bytes.extend_from_slice(&buf[..room]);
                }
                *left -= n as u64;
                if *left == 0 {
                    if let Some((_, bytes)) = pax {
                        self.next_size = pax_size(bytes);
                    }
                    self.state = State::header();
                }
                Ok(n)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, kind: tar::EntryType, size: u64) -> Vec<u8> {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(kind);
        h.set_mode(0o644);
        h.set_size(size);
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_cksum();
        h.as_bytes().to_vec()
    }

    fn padded(mut data: Vec<u8>) -> Vec<u8> {
        data.resize(data.len().next_multiple_of(BLOCK), 0);
        data
    }

    fn pax_record(key: &str, value: &str) -> Vec<u8> {
        let rest = format!(" {key}={value}\n");
        let mut len = rest.len() + 1;
        while format!("{len}{rest}").len() != len {
            len += 1;
        }
        format!("{len}{rest}").into_bytes()
    }

    /// The members the tar reader sees through the watcher, or its error.
    fn members(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
        let mut archive = tar::Archive::new(Records::new(bytes));
        let mut out = Vec::new();
        for entry in archive.entries().map_err(|e| e.to_string())? {
            let mut entry = entry.map_err(|e| e.to_string())?;
            let mut data = Vec::new();
            entry.read_to_end(&mut data).map_err(|e| e.to_string())?;
            out.push((String::from_utf8_lossy(&entry.path_bytes()).into_owned(), data));
        }
        Ok(out)
    }

    #[test]
    fn a_pax_size_moves_the_next_member_as_the_tar_reader_moves_it() {
        // A member whose header says 0 bytes and whose pax record says 700: both readers take
        // 700, so the member after it is found where it is.
        let record = pax_record("size", "700");
        let mut bytes = header("././@PaxHeader", tar::EntryType::XHeader, record.len() as u64);
        bytes.extend(padded(record));
        bytes.extend(header("a", tar::EntryType::Regular, 0));
        bytes.extend(padded(vec![7; 700]));
        bytes.extend(header("b", tar::EntryType::Regular, 2));
        bytes.extend(padded(b"bb".to_vec()));
        bytes.extend([0; 1024]);
        let seen = members(&bytes).unwrap();
        assert_eq!(seen, [("a".to_owned(), vec![7; 700]), ("b".to_owned(), b"bb".to_vec())]);
    }

    #[test]
    fn a_record_larger_than_the_bound_is_refused_before_it_is_read() {
        for kind in [tar::EntryType::XHeader, tar::EntryType::GNULongName, tar::EntryType::XGlobalHeader] {
            let size = MAX_RECORD_BYTES + 1;
            let mut bytes = header("././@LongLink", kind, size);
            // Only the first block of it: a read beyond the header would be refused anyway.
            bytes.extend([b'a'; BLOCK]);
            let err = members(&bytes).unwrap_err();
            assert!(err.contains(&format!("of {size} bytes, more than the 65536")), "{kind:?}: {err}");
        }
        // At the bound it is read, and describes the member after it.
        let name = "n".repeat(MAX_RECORD_BYTES as usize);
        let mut bytes = header("././@LongLink", tar::EntryType::GNULongName, MAX_RECORD_BYTES);
        bytes.extend(padded(name.clone().into_bytes()));
        bytes.extend(header("short", tar::EntryType::Regular, 1));
        bytes.extend(padded(b"x".to_vec()));
        bytes.extend([0; 1024]);
        assert_eq!(members(&bytes).unwrap(), [(name, b"x".to_vec())]);
    }
}
