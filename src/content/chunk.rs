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
        let mut hashing = Hashing { inner: reader.take(size), hasher: Sha256::new(), n: 0 };
        if size <= self.whole_file_max {
            let mut bytes = Vec::with_capacity(size as usize);
            hashing.read_to_end(&mut bytes)?;
            let (hash, n) = (Hash::from(hashing.hasher), hashing.n);
            if !bytes.is_empty() {
                each(bytes, hash)?;
            }
            return Ok((hash, n));
        }
        let chunker = fastcdc::v2020::StreamCDC::new(&mut hashing, self.min, self.avg, self.max);
        for chunk in chunker {
            let data = chunk.map_err(io::Error::from)?.data;
            let hash = Hash::of(&data);
            each(data, hash)?;
        }
        Ok((Hash::from(hashing.hasher), hashing.n))
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
}
