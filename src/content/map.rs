//! An entry's content map: where the blobs of its files lie. It is the archive member
//! [`CONTENT_NAME`], just before the manifest; the manifest stays the authority on what each
//! file is (size, SHA-256), and the map only says where to find it, so a map that lies yields
//! files that fail verification, never other files.
//!
//! A file of size 0 has no blob. A file of one blob is found by its own hash (a whole-file blob's
//! hash is the file's); a file of several is listed in `chunked` (its hash → its blobs, in
//! order). JSON, compact: each blob is `[hash, pack index, offset, compressed length, length]`.
//!
//! ```json
//! {"exact_cache_content":1,"packs":["<64 hex>"],"blobs":[["<64 hex>",0,0,1033,4096]],"chunked":{}}
//! ```

use super::pack::BlobPlace;
use super::{Hash, PackName};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// The archive member holding the content map.
pub const CONTENT_NAME: &str = ".exact-cache/content.json";
/// The pax record, before the fingerprint member, that copies the map's pack names, so that
/// `prune` and `list` learn an entry's packs from the archive's first bytes.
pub const PACKS_PAX: &str = "EXACT_CACHE.packs";
pub const CONTENT_FORMAT: u32 = 1;
/// The largest blob a map may name: bounds what one blob costs to decompress.
pub const MAX_BLOB: u64 = 64 << 20;

/// One blob: its hash, the index of its pack in [`ContentMap::packs`], where its frame lies in
/// that pack, and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "(Hash, u32, u64, u64, u64)", into = "(Hash, u32, u64, u64, u64)")]
pub struct BlobRef {
    pub hash: Hash,
    pub pack: u32,
    pub offset: u64,
    pub compressed: u64,
    pub size: u64,
}

impl From<(Hash, u32, u64, u64, u64)> for BlobRef {
    fn from((hash, pack, offset, compressed, size): (Hash, u32, u64, u64, u64)) -> Self {
        BlobRef { hash, pack, offset, compressed, size }
    }
}

impl From<BlobRef> for (Hash, u32, u64, u64, u64) {
    fn from(b: BlobRef) -> Self {
        (b.hash, b.pack, b.offset, b.compressed, b.size)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentMap {
    pub exact_cache_content: u32,
    pub packs: Vec<PackName>,
    pub blobs: Vec<BlobRef>,
    /// Files of more than one blob: the file's hash → its blobs' indices in `blobs`, in order
    /// (at least two).
    #[serde(default)]
    pub chunked: BTreeMap<Hash, Vec<u32>>,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error("content map format {0} is not supported")]
    Format(u32),
    #[error("content map: {0}")]
    Invalid(String),
    #[error("content map has no blob for the file of hash {hash:?} ({size} bytes)")]
    NoBlob { hash: Hash, size: u64 },
    #[error("content map's blobs for the file of hash {hash:?} make {actual} bytes, not {size}")]
    Length { hash: Hash, size: u64, actual: u64 },
}

/// Where one blob lies, by pack name (what a content index keeps across entries).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Located {
    pub pack: PackName,
    pub offset: u64,
    pub compressed: u64,
    pub size: u64,
}

impl ContentMap {
    /// Parse and check a map.
    pub fn from_slice(bytes: &[u8]) -> Result<ContentMap, MapError> {
        let map: ContentMap =
            serde_json::from_slice(bytes).map_err(|e| MapError::Invalid(format!("not a content map: {e}")))?;
        map.check()?;
        Ok(map)
    }

    pub fn to_vec(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("content maps serialize")
    }

    /// Every index in range, every blob of a size a restore will decompress, no pack twice.
    pub fn check(&self) -> Result<(), MapError> {
        if self.exact_cache_content != CONTENT_FORMAT {
            return Err(MapError::Format(self.exact_cache_content));
        }
        let mut packs = std::collections::HashSet::new();
        if let Some(twice) = self.packs.iter().find(|p| !packs.insert(**p)) {
            return Err(MapError::Invalid(format!("pack {twice} is listed twice")));
        }
        for b in &self.blobs {
            if b.pack as usize >= self.packs.len() {
                return Err(MapError::Invalid(format!(
                    "blob {:?} names pack {}, of {}",
                    b.hash,
                    b.pack,
                    self.packs.len()
                )));
            }
            if b.size == 0 || b.size > MAX_BLOB || b.compressed == 0 || b.offset.checked_add(b.compressed).is_none() {
                return Err(MapError::Invalid(format!("blob {:?} has impossible lengths", b.hash)));
            }
            // What zstd makes of incompressible bytes, with room.
            if b.compressed > b.size + b.size / 64 + 1024 {
                return Err(MapError::Invalid(format!("blob {:?} is larger compressed than zstd makes it", b.hash)));
            }
        }
        for (file, indices) in &self.chunked {
            if indices.len() < 2 || indices.iter().any(|&i| i as usize >= self.blobs.len()) {
                return Err(MapError::Invalid(format!("chunked file {file:?} names blobs out of range")));
            }
        }
        Ok(())
    }

    /// Where each blob of this map lies, by hash.
    pub fn located(&self) -> impl Iterator<Item = (Hash, Located)> + '_ {
        self.blobs.iter().map(|b| {
            let pack = self.packs[b.pack as usize];
            (b.hash, Located { pack, offset: b.offset, compressed: b.compressed, size: b.size })
        })
    }

    /// The blobs of the file of `hash` and `size`, in order, as indices in `blobs`.
    pub fn file_blobs(&self, by_hash: &HashMap<Hash, u32>, hash: &Hash, size: u64) -> Result<Vec<u32>, MapError> {
        if size == 0 {
            return if *hash == Hash::empty() {
                Ok(Vec::new())
            } else {
                Err(MapError::Length { hash: *hash, size, actual: 0 })
            };
        }
        let indices = match self.chunked.get(hash) {
            Some(indices) => indices.clone(),
            None => vec![*by_hash.get(hash).ok_or(MapError::NoBlob { hash: *hash, size })?],
        };
        let actual: u64 = indices.iter().map(|&i| self.blobs[i as usize].size).sum();
        if actual != size {
            return Err(MapError::Length { hash: *hash, size, actual });
        }
        Ok(indices)
    }

    /// Blob indices by hash.
    pub fn by_hash(&self) -> HashMap<Hash, u32> {
        self.blobs.iter().enumerate().map(|(i, b)| (b.hash, i as u32)).collect()
    }

    /// The pax record copying the pack names: their hex, separated by `,`.
    pub fn packs_record(&self) -> String {
        self.packs.iter().map(Hash::to_hex).collect::<Vec<_>>().join(",")
    }
}

/// The pack names of a [`PACKS_PAX`] record; `None` when it is not one.
pub fn parse_packs_record(text: &str) -> Option<Vec<PackName>> {
    if text.is_empty() {
        return Some(Vec::new());
    }
    text.split(',').map(Hash::parse).collect()
}

/// Builds a content map as a save decides where each blob lies.
#[derive(Default)]
pub struct MapBuilder {
    map: ContentMap,
    packs: HashMap<PackName, u32>,
    blobs: HashMap<Hash, u32>,
}

impl MapBuilder {
    pub fn new() -> Self {
        MapBuilder {
            map: ContentMap { exact_cache_content: CONTENT_FORMAT, ..ContentMap::default() },
            ..Default::default()
        }
    }

    /// Record where blob `hash` lies (once; a later place of the same blob is ignored).
    pub fn blob(&mut self, hash: Hash, at: Located) {
        if self.blobs.contains_key(&hash) {
            return;
        }
        let next = self.packs.len() as u32;
        let pack = *self.packs.entry(at.pack).or_insert_with(|| {
            self.map.packs.push(at.pack);
            next
        });
        self.blobs.insert(hash, self.map.blobs.len() as u32);
        self.map.blobs.push(BlobRef { hash, pack, offset: at.offset, compressed: at.compressed, size: at.size });
    }

    /// Record a blob written into the new pack `pack`.
    pub fn placed(&mut self, pack: PackName, place: &BlobPlace) {
        let at = Located { pack, offset: place.offset, compressed: place.compressed, size: place.size };
        self.blob(place.hash, at);
    }

    /// Whether blob `hash` is placed already.
    pub fn has(&self, hash: &Hash) -> bool {
        self.blobs.contains_key(hash)
    }

    /// Record that the file of hash `file` is the blobs `parts`, in order (more than one).
    pub fn chunked(&mut self, file: Hash, parts: &[Hash]) {
        debug_assert!(parts.len() > 1);
        let indices = parts.iter().map(|h| self.blobs[h]).collect();
        self.map.chunked.insert(file, indices);
    }

    /// The map; every blob of a chunked file must have been placed.
    pub fn finish(self) -> ContentMap {
        self.map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(pack: &[u8], offset: u64) -> Located {
        Located { pack: Hash::of(pack), offset, compressed: 10, size: 20 }
    }

    #[test]
    fn a_map_reads_back_and_resolves_files() {
        let (a, b, c) = (Hash::of(b"a"), Hash::of(b"b"), Hash::of(b"c"));
        let mut builder = MapBuilder::new();
        builder.blob(a, at(b"p1", 0));
        builder.blob(b, at(b"p2", 0));
        builder.blob(c, at(b"p1", 10));
        builder.blob(a, at(b"p2", 99));
        let file = Hash::of(b"the file");
        builder.chunked(file, &[a, b, a, c]);
        let map = builder.finish();
        assert_eq!(map.packs, [Hash::of(b"p1"), Hash::of(b"p2")]);
        assert_eq!(map.blobs[0].offset, 0, "the first place of a blob is kept");
        let json = map.to_vec();
        assert!(json.starts_with(br#"{"exact_cache_content":1,"packs":[""#), "{}", String::from_utf8_lossy(&json));
        let back = ContentMap::from_slice(&json).unwrap();
        assert_eq!(back, map);
        let by_hash = back.by_hash();
        assert_eq!(back.file_blobs(&by_hash, &file, 80).unwrap(), [0, 1, 0, 2]);
        assert_eq!(back.file_blobs(&by_hash, &b, 20).unwrap(), [1]);
        assert!(matches!(back.file_blobs(&by_hash, &b, 21), Err(MapError::Length { .. })));
        assert!(matches!(back.file_blobs(&by_hash, &Hash::of(b"x"), 20), Err(MapError::NoBlob { .. })));
        assert_eq!(back.file_blobs(&by_hash, &Hash::empty(), 0).unwrap(), Vec::<u32>::new());
        assert_eq!(parse_packs_record(&back.packs_record()), Some(back.packs.clone()));
        assert_eq!(parse_packs_record("zz"), None);
    }

    #[test]
    fn a_map_out_of_range_or_of_impossible_sizes_is_refused() {
        let mut builder = MapBuilder::new();
        builder.blob(Hash::of(b"a"), at(b"p1", 0));
        let good = builder.finish();
        let refused = |change: &dyn Fn(&mut ContentMap)| {
            let mut map = good.clone();
            change(&mut map);
            ContentMap::from_slice(&map.to_vec()).unwrap_err()
        };
        assert!(matches!(refused(&|m| m.exact_cache_content = 2), MapError::Format(2)));
        refused(&|m| m.blobs[0].pack = 1);
        refused(&|m| m.blobs[0].size = MAX_BLOB + 1);
        refused(&|m| m.blobs[0].compressed = 100_000);
        refused(&|m| m.blobs[0].offset = u64::MAX);
        refused(&|m| m.packs.push(m.packs[0]));
        refused(&|m| {
            m.chunked.insert(Hash::of(b"f"), vec![0, 3]);
        });
        // A "chunked" file of one blob would be that blob under another hash.
        refused(&|m| {
            m.chunked.insert(Hash::of(b"f"), vec![0]);
        });
        assert!(ContentMap::from_slice(br#"{"exact_cache_content":1}"#).is_err());
    }
}
