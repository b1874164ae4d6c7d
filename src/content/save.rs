//! What a save uploads: its files' blobs that no entry it can read holds in a pack that is still
//! there, written into a few new packs; everything else is referenced where it lies.
//!
//! 1. [`ContentIndex::build`]: the content maps of the entries the save may read (the commands
//!    find them: at least the newest entry of its prefix on its ref and on the default branch),
//!    less the packs a restore found missing or corrupt, less the packs the store no longer has
//!    ([`PackPresence`], asked once for all of them). An evicted pack is never referenced again.
//! 2. [`ContentSaver::add_file`] for each file, in the archive's order: read once, hashed,
//!    split into blobs ([`super::chunk`]); a blob the index or this save already holds is
//!    referenced, any other goes to the [`PackWriter`]. Finished packs are stored on a thread of
//!    their own while reading goes on.
//! 3. [`ContentSaver::finish`]: the last pack stored, the earlier packs the map references asked
//!    for once more (one gone since the index was built fails the save with
//!    [`SaveError::Gone`], to run again without it), then the content map, which the archive
//!    writes before the manifest; the entry is committed only after that, so no manifest names a
//!    pack that was not stored.

use super::chunk::Chunking;
use super::map::{ContentMap, Located, MapBuilder};
use super::pack::{FinishedPack, PackOptions, PackWriter};
use super::store::{PackStore, PackStoreError};
use super::{Hash, PackName};
use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::sync::mpsc;

/// Which packs a store still holds: the question a save asks before it references any.
pub trait PackPresence {
    fn exist(&self, names: &[PackName]) -> Result<Vec<bool>, PackStoreError>;
}

impl<T: PackStore + ?Sized> PackPresence for T {
    fn exist(&self, names: &[PackName]) -> Result<Vec<bool>, PackStoreError> {
        PackStore::exist(self, names)
    }
}

/// Where the blobs a save may reference lie.
#[derive(Debug, Default)]
pub struct ContentIndex {
    blobs: HashMap<Hash, Located>,
    /// Packs referenced by the maps and left out: gone from the store, or known bad.
    pub left_out: Vec<PackName>,
    /// Small packs left out so that their blobs go into this save's new packs
    /// ([`ContentIndex::REPACK_ABOVE`]).
    pub repacked: Vec<PackName>,
}

impl ContentIndex {
    /// Each save of a tree with a few files changed adds a small pack, so a long line of keys
    /// would reference more and more packs: more reads per restore, more entries on the cache
    /// service. Where the maps reference more than this many live packs, a save keeps the
    /// [`ContentIndex::REPACK_KEEP`] packs that hold the most of their bytes and stores the blobs
    /// of the others that its tree still holds anew, in its own packs: a little upload, once
    /// every few dozen saves, for an entry of few packs.
    pub const REPACK_ABOVE: usize = 32;
    pub const REPACK_KEEP: usize = 16;

    /// The blobs of `maps` in packs that are not in `bad` and that `presence` says exist, less
    /// the small packs a save re-packs.
    pub fn build(
        maps: &[&ContentMap],
        bad: &[PackName],
        presence: &(impl PackPresence + ?Sized),
    ) -> Result<ContentIndex, PackStoreError> {
        let mut packs: Vec<PackName> = maps.iter().flat_map(|m| m.packs.iter().copied()).collect();
        packs.sort();
        packs.dedup();
        let bad: HashSet<&PackName> = bad.iter().collect();
        let asked: Vec<PackName> = packs.iter().filter(|p| !bad.contains(p)).copied().collect();
        let there = if asked.is_empty() { Vec::new() } else { presence.exist(&asked)? };
        let mut live: HashSet<PackName> = asked.iter().zip(&there).filter(|(_, t)| **t).map(|(p, _)| *p).collect();
        let left_out = packs.into_iter().filter(|p| !live.contains(p)).collect();
        let repacked = Self::small_packs(maps, &live);
        for pack in &repacked {
            live.remove(pack);
        }
        let mut blobs = HashMap::new();
        for map in maps {
            for (hash, at) in map.located() {
                if live.contains(&at.pack) {
                    blobs.entry(hash).or_insert(at);
                }
            }
        }
        Ok(ContentIndex { blobs, left_out, repacked })
    }

    /// Where `live` holds more than [`Self::REPACK_ABOVE`] packs: all but the
    /// [`Self::REPACK_KEEP`] that hold the most compressed bytes of the maps' blobs (ties by
    /// name), sorted.
    fn small_packs(maps: &[&ContentMap], live: &HashSet<PackName>) -> Vec<PackName> {
        if live.len() <= Self::REPACK_ABOVE {
            return Vec::new();
        }
        let mut bytes: HashMap<PackName, u64> = live.iter().map(|p| (*p, 0)).collect();
        let mut counted = HashSet::new();
        for map in maps {
            for (hash, at) in map.located() {
                if let Some(held) = bytes.get_mut(&at.pack)
                    && counted.insert((at.pack, hash))
                {
                    *held += at.compressed;
                }
            }
        }
        let mut by_size: Vec<(u64, PackName)> = bytes.into_iter().map(|(p, b)| (b, p)).collect();
        by_size.sort_by(|a, b| b.cmp(a));
        let mut small: Vec<PackName> = by_size.into_iter().skip(Self::REPACK_KEEP).map(|(_, p)| p).collect();
        small.sort();
        small
    }

    pub fn get(&self, hash: &Hash) -> Option<&Located> {
        self.blobs.get(hash)
    }

    pub fn len(&self) -> usize {
        self.blobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blobs.is_empty()
    }
}

/// What a save uploaded and what it found already stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SaveStats {
    pub files: u64,
    /// Bytes of the files.
    pub bytes: u64,
    /// Blobs (and their bytes, uncompressed) written into new packs.
    pub new_blobs: u64,
    pub new_bytes: u64,
    /// Blobs (and their bytes) referenced where they lie: in an earlier entry's pack, or
    /// earlier in this save (a file or chunk the tree holds twice).
    pub found_blobs: u64,
    pub found_bytes: u64,
    /// New packs, and their bytes: what was uploaded.
    pub packs: u64,
    pub uploaded: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    #[error("cannot read the file")]
    Read(#[source] io::Error),
    #[error("cannot write a pack")]
    Pack(#[source] io::Error),
    #[error("cannot store a pack")]
    Store(#[source] PackStoreError),
    /// Packs the index held are gone from the store now (pruned or evicted while this save
    /// ran): the save must run again without them (`ContentIndex::build`'s `bad`).
    #[error("{} referenced packs are gone from the store", .0.len())]
    Gone(Vec<PackName>),
}

/// One save's content: see the module doc.
pub struct ContentSaver<'a> {
    index: &'a ContentIndex,
    store: &'a dyn PackStore,
    /// The packs this save stored.
    stored: HashSet<PackName>,
    chunking: Chunking,
    writer: Option<PackWriter>,
    builder: MapBuilder,
    /// Blobs given to the writer and not yet in a finished pack.
    pending: HashSet<Hash>,
    /// Files of more than one blob: their hash and their blobs' hashes.
    chunked: Vec<(Hash, Vec<Hash>)>,
    uploads: Option<mpsc::SyncSender<FinishedPack>>,
    uploader: Option<std::thread::ScopedJoinHandle<'a, Result<(), PackStoreError>>>,
    stats: SaveStats,
}

impl<'a> ContentSaver<'a> {
    /// A save referencing what `index` holds and storing new packs in `store` (on a thread of
    /// `scope`, at most two packs waiting).
    pub fn new<'env: 'a>(
        scope: &'a std::thread::Scope<'a, 'env>,
        index: &'a ContentIndex,
        store: &'a dyn PackStore,
        chunking: Chunking,
        options: PackOptions,
    ) -> io::Result<Self> {
        let writer = PackWriter::new(options)?;
        let (uploads, waiting) = mpsc::sync_channel::<FinishedPack>(1);
        let uploader = scope.spawn(move || {
            for pack in waiting {
                let mut file = pack.open().map_err(|e| PackStoreError::trouble("read a written pack", e))?;
                store.put(&pack.name, pack.len, &mut file)?;
            }
            Ok(())
        });
        Ok(ContentSaver {
            index,
            store,
            stored: HashSet::new(),
            chunking,
            writer: Some(writer),
            builder: MapBuilder::new(),
            pending: HashSet::new(),
            chunked: Vec::new(),
            uploads: Some(uploads),
            uploader: Some(uploader),
            stats: SaveStats::default(),
        })
    }

    /// Read a file of `size` bytes from `reader` (wrap it to inspect every byte, as the secret
    /// scan does); its hash and the bytes read (fewer than `size`: it shrank while it was read).
    pub fn add_file(&mut self, reader: impl Read, size: u64) -> Result<(Hash, u64), SaveError> {
        let mut parts = Vec::new();
        let mut finished = Vec::new();
        let mut failed = None;
        let chunking = self.chunking;
        let (hash, n) = chunking
            .split(reader, size, &mut |data, hash| {
                parts.push(hash);
                let len = data.len() as u64;
                if let Some(at) = self.index.get(&hash) {
                    self.builder.blob(hash, *at);
                    self.stats.found_blobs += 1;
                    self.stats.found_bytes += len;
                } else if self.builder.has(&hash) || self.pending.contains(&hash) {
                    self.stats.found_blobs += 1;
                    self.stats.found_bytes += len;
                } else {
                    self.pending.insert(hash);
                    self.stats.new_blobs += 1;
                    self.stats.new_bytes += len;
                    match self.writer.as_mut().expect("open until finished").add(hash, data) {
                        Ok(packs) => finished.extend(packs),
                        Err(e) => {
                            failed = Some(e);
                            return Err(io::Error::other("a pack could not be written"));
                        }
                    }
                }
                Ok(())
            })
            .map_err(|e| match failed.take() {
                Some(pack) => SaveError::Pack(pack),
                None => SaveError::Read(e),
            })?;
        if parts.len() > 1 {
            self.chunked.push((hash, parts));
        }
        self.stats.files += 1;
        self.stats.bytes += n;
        for pack in finished {
            self.store(pack)?;
        }
        Ok((hash, n))
    }

    /// Hand a finished pack to the uploading thread, its blobs now placed.
    fn store(&mut self, pack: FinishedPack) -> Result<(), SaveError> {
        for place in &pack.blobs {
            self.pending.remove(&place.hash);
            self.builder.placed(pack.name, place);
        }
        self.stats.packs += 1;
        self.stats.uploaded += pack.len;
        self.stored.insert(pack.name);
        let sent = self.uploads.as_ref().map(|u| u.send(pack));
        if !matches!(sent, Some(Ok(()))) {
            // The uploader stopped: its error says why.
            return Err(self.join_uploader().err().unwrap_or_else(|| {
                SaveError::Store(PackStoreError::Trouble { what: "the pack upload stopped".into(), source: None })
            }));
        }
        Ok(())
    }

    fn join_uploader(&mut self) -> Result<(), SaveError> {
        self.uploads = None;
        match self.uploader.take().map(|h| h.join()) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(SaveError::Store(e)),
            Some(Err(panic)) => std::panic::resume_unwind(panic),
        }
    }

    /// Store the last packs and wait for every upload, then ask the store once more whether the
    /// earlier packs it references are still there (so that a pack pruned or evicted while the
    /// save ran is caught now, not by the next restore); the entry's content map and what the
    /// save uploaded and found.
    pub fn finish(mut self) -> Result<(ContentMap, SaveStats), SaveError> {
        let writer = self.writer.take().expect("finished once");
        for pack in writer.finish().map_err(SaveError::Pack)? {
            self.store(pack)?;
        }
        self.join_uploader()?;
        for (file, parts) in std::mem::take(&mut self.chunked) {
            self.builder.chunked(file, &parts);
        }
        let map = std::mem::take(&mut self.builder).finish();
        let earlier: Vec<PackName> = map.packs.iter().filter(|p| !self.stored.contains(p)).copied().collect();
        if !earlier.is_empty() {
            let there = self.store.exist(&earlier).map_err(SaveError::Store)?;
            let gone: Vec<PackName> = earlier.iter().zip(there).filter(|(_, t)| !t).map(|(p, _)| *p).collect();
            if !gone.is_empty() {
                return Err(SaveError::Gone(gone));
            }
        }
        Ok((map, self.stats.clone()))
    }
}

impl Drop for ContentSaver<'_> {
    fn drop(&mut self) {
        // A save abandoned half way: stop the uploader (what it stored is unreferenced, and
        // prune removes it after the grace period).
        self.uploads = None;
    }
}
