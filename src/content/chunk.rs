//! How a file becomes blobs: a file up to [`Chunking::whole_file_max`] is one blob (its hash is
//! the file's, which the manifest records anyway); a larger one is cut into content-defined
//! chunks (FastCDC 2020, normalization level 1, the crate's fixed gear table), so an edit moves
//! only the chunks around it and the rest are found again by their hashes.
//!
//! The sizes ([`Chunking::DEFAULT`]) are measured by `bench/content.rs` (docs/content.md has
//! the figures): a 1 MiB change in the middle of a 200 MB file costs the changed bytes and about
//! two average chunks around them, so smaller chunks upload less again but make more blobs (each
//! one a line of the content map, a zstd frame and a piece of a range). Changing any of them
//! changes where files are cut, so new saves stop sharing chunks of large files with old entries
//! (never correctness: every blob is verified by its own hash).

use super::Hash;
use sha2::{Digest, Sha256};
use std::io::{self, Read};
use std::sync::mpsc;

/// Where files are cut into blobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunking {
    /// Files up to this size are one blob.
    pub whole_file_max: u64,
    pub min: u32,
    pub avg: u32,
    pub max: u32,
}

impl Chunking {
    /// 256 KiB / 1 MiB / 4 MiB chunks of files above 4 MiB.
    pub const DEFAULT: Chunking = Chunking { whole_file_max: 4 << 20, min: 256 << 10, avg: 1 << 20, max: 4 << 20 };

    /// The largest blob this chunking makes.
    pub fn max_blob(&self) -> u64 {
        self.whole_file_max.max(u64::from(self.max))
    }

    /// Read the `size` bytes of a file from `reader` and hand its blobs to `each` with their
    /// hashes, in order; the file's hash and the bytes read (fewer than `size`: the file shrank
    /// while it was read; bytes beyond `size` are never read). A file of one blob is hashed once.
    pub fn split<R: Read>(
        &self,
        reader: R,
        size: u64,
        each: &mut dyn FnMut(Vec<u8>, Hash) -> io::Result<()>,
    ) -> io::Result<(Hash, u64)> {
        let inner = reader.take(size);
        if size <= self.whole_file_max {
            let mut hashing = Hashing { inner, hasher: Sha256::new(), n: 0 };
            let mut bytes = Vec::with_capacity(size as usize);
            hashing.read_to_end(&mut bytes)?;
            let (hash, n) = (Hash::from(hashing.hasher), hashing.n);
            if !bytes.is_empty() {
                each(bytes, hash)?;
            }
            return Ok((hash, n));
        }
        // A large file is hashed twice, whole (for the manifest) and chunk by chunk (for its
        // blobs): the whole file's hash is taken on a thread of its own, from a copy of each
        // read, so the reading thread does one of the two (measured on 5 × 400 MB: SHA-256 was
        // half a save's CPU, all of it on the reading thread).
        std::thread::scope(|scope| {
            let (reads, taken) = mpsc::sync_channel::<Vec<u8>>(8);
            let whole = scope.spawn(move || {
                let mut hasher = Sha256::new();
                for read in taken {
                    hasher.update(&read);
                }
                Hash::from(hasher)
            });
            let mut teeing = Teeing { inner, reads: Some(reads), n: 0 };
            let cut = (|| {
                for chunk in fastcdc::v2020::StreamCDC::new(&mut teeing, self.min, self.avg, self.max) {
                    let data = chunk.map_err(io::Error::from)?.data;
                    let hash = Hash::of(&data);
                    each(data, hash)?;
                }
                Ok::<(), io::Error>(())
            })();
            let n = teeing.n;
            teeing.reads = None;
            let hash = whole.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            cut.map(|()| (hash, n))
        })
    }
}

/// A reader that hands a copy of what passes through it to a hashing thread, and counts it.
struct Teeing<R> {
    inner: R,
    reads: Option<mpsc::SyncSender<Vec<u8>>>,
    n: u64,
}

impl<R: Read> Read for Teeing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            let reads = self.reads.as_ref().ok_or_else(|| io::Error::other("read after the end"))?;
            reads.send(buf[..n].to_vec()).map_err(|_| io::Error::other("the hashing thread stopped"))?;
        }
        self.n += n as u64;
        Ok(n)
    }
}

/// A reader that hashes and counts what passes through it.
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    n: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.n += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::testing::noise;

    fn blobs(chunking: &Chunking, data: &[u8]) -> (Vec<Vec<u8>>, Hash) {
        let mut out = Vec::new();
        let (hash, n) = chunking
            .split(data, data.len() as u64, &mut |b, h| {
                assert_eq!(h, Hash::of(&b));
                out.push(b);
                Ok(())
            })
            .unwrap();
        assert_eq!(n, data.len() as u64);
        (out, hash)
    }

    const SMALL: Chunking = Chunking { whole_file_max: 64 << 10, min: 4 << 10, avg: 16 << 10, max: 64 << 10 };

    #[test]
    fn small_files_are_one_blob_and_large_ones_chunks_that_join_to_the_file() {
        let data = noise(1, 3 << 20);
        let (whole, hash) = blobs(&Chunking::DEFAULT, &data);
        assert_eq!(whole, vec![data.clone()]);
        assert_eq!(hash, Hash::of(&data));
        let (chunks, hash) = blobs(&SMALL, &data);
        assert!(chunks.len() > 100, "{} chunks", chunks.len());
        assert!(chunks.iter().all(|c| c.len() <= 64 << 10));
        assert_eq!(chunks.concat(), data);
        assert_eq!(hash, Hash::of(&data));
        let (none, hash) = blobs(&SMALL, &[]);
        assert!(none.is_empty());
        assert_eq!(hash, Hash::empty());
    }

    #[test]
    fn an_insertion_moves_only_the_chunks_around_it() {
        let data = noise(2, 4 << 20);
        let mut edited = data.clone();
        let at = data.len() / 2;
        edited.splice(at..at, noise(3, 1000));
        let before: std::collections::HashSet<Hash> = blobs(&SMALL, &data).0.iter().map(|c| Hash::of(c)).collect();
        let after = blobs(&SMALL, &edited).0;
        let new: Vec<&Vec<u8>> = after.iter().filter(|c| !before.contains(&Hash::of(c))).collect();
        assert!(!new.is_empty());
        // Every chunk but the one or two around the insertion is found again.
        assert!(new.len() <= 3, "{} of {} chunks are new", new.len(), after.len());
        let new_bytes: usize = new.iter().map(|c| c.len()).sum();
        assert!(new_bytes <= 1000 + 3 * (64 << 10), "{new_bytes} new bytes");
    }

    #[test]
    fn a_file_that_shrank_reads_short_and_one_that_grew_stops_at_its_size() {
        let data = noise(4, 200_000);
        let (hash, n) = SMALL.split(&data[..100_000], 200_000, &mut |_, _| Ok(())).unwrap();
        assert_eq!((hash, n), (Hash::of(&data[..100_000]), 100_000));
        let mut seen = Vec::new();
        let (hash, n) = SMALL
            .split(&data[..], 150_000, &mut |b, _| {
                seen.extend(b);
                Ok(())
            })
            .unwrap();
        assert_eq!((hash, n, seen.len()), (Hash::of(&data[..150_000]), 150_000, 150_000));
    }

    #[test]
    fn an_error_of_the_reader_or_of_a_blobs_taker_ends_the_split_with_it() {
        let data = noise(5, 1 << 20);
        let mut taken = 0;
        let failed = SMALL.split(&data[..], data.len() as u64, &mut |_, _| {
            taken += 1;
            if taken == 3 { Err(io::Error::other("the pack is full")) } else { Ok(()) }
        });
        assert_eq!(failed.unwrap_err().to_string(), "the pack is full");
        assert_eq!(taken, 3, "no blob is taken after the error");

        struct Broken<'a>(&'a [u8]);
        impl Read for Broken<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0.is_empty() {
                    return Err(io::Error::other("the disk went away"));
                }
                let most = buf.len().min(100_000);
                self.0.read(&mut buf[..most])
            }
        }
        let failed = SMALL.split(Broken(&data[..500_000]), data.len() as u64, &mut |_, _| Ok(()));
        assert_eq!(failed.unwrap_err().to_string(), "the disk went away");
    }
}
