//! What a restore fetches and writes: only the files that are not already in place, by the
//! fewest reads of packs, every blob verified as it arrives, into staging, all or nothing.
//!
//! 1. In place or not ([`in_place`]): a file already at its path is kept when it is a plain file
//!    of the manifest's size whose bytes hash to the manifest's SHA-256 — read and hashed every
//!    time, never judged by size and time (exactness first); the mode is the caller's to compare.
//! 2. [`FetchPlan::new`]: the blobs of the files to write, grouped by pack into byte ranges: the
//!    blobs of one pack in offset order, neighbours joined into one read while the gap between
//!    them is at most [`Reads::gap`] and the read at most [`Reads::max`]; where the store refuses
//!    ranges, one read per pack from its start.
//! 3. [`fetch`]: the reads on a few threads; each frame decompressed into at most its blob's
//!    length and verified by the blob's hash before any of it is written; each blob written at
//!    its offsets of the files that hold it, through a [`Sink`] (the caller's staging); a file of
//!    several blobs read back and checked against its hash. Any pack that is missing, short or
//!    corrupt fails the whole fetch ([`FetchError::content_missing`]): nothing was placed, the
//!    caller drops its staging and the entry is a miss, `content-missing`, which its
//!    replacement heals (the save leaves out [`FetchError::bad_pack`]).

use super::map::{ContentMap, MapError};
use super::pack::{BlobError, BlobOpener};
use super::store::{PackStore, PackStoreError, Ranged};
use super::{Hash, PackName};
use std::collections::BTreeMap;
use std::io::{self, Read};
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Whether the `size` bytes `reader` gives (the file already at an entry's path, opened without
/// following a link) are the content of hash `hash`: the same length and the same hash.
pub fn in_place(reader: impl Read, size: u64, hash: &Hash) -> io::Result<bool> {
    in_place_with(reader, size, hash, &mut Vec::new())
}

/// [`in_place`] reading through `buf`, which a thread keeps from one file to the next rather
/// than allocating and clearing one for each file.
fn in_place_with(reader: impl Read, size: u64, hash: &Hash, buf: &mut Vec<u8>) -> io::Result<bool> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    // One byte more than the manifest's size tells a file that grew. A small file is read in
    // one call (and one more that finds its end), a large one a MiB at a time.
    let mut reader = reader.take(size + 1);
    let want = (size + 1).min(1 << 20) as usize;
    if buf.len() < want {
        buf.resize(want, 0);
    }
    let buf = &mut buf[..want];
    let mut n = 0u64;
    loop {
        let got = match reader.read(buf) {
            Ok(0) => break,
            Ok(got) => got,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..got]);
        n += got as u64;
    }
    Ok(n == size && Hash::from(hasher) == *hash)
}

/// [`in_place`] for each of `files` on `threads` threads: `open(i)` opens what is at file `i`'s
/// path (`None`: nothing, or not a plain file, or not of the manifest's mode: not in place).
pub fn in_place_all<R: Read>(
    files: &[Wanted],
    threads: usize,
    open: &(dyn Fn(usize) -> io::Result<Option<R>> + Sync),
) -> io::Result<Vec<bool>> {
    let next = AtomicUsize::new(0);
    let found: Vec<Mutex<Option<bool>>> = files.iter().map(|_| Mutex::new(None)).collect();
    let error: Mutex<Option<io::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                let mut buf = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= files.len() {
                        return;
                    }
                    let kept = open(i).and_then(|r| match r {
                        Some(r) => in_place_with(r, files[i].size, &files[i].hash, &mut buf),
                        None => Ok(false),
                    });
                    match kept {
                        Ok(kept) => *found[i].lock().expect("not poisoned") = Some(kept),
                        Err(e) => {
                            error.lock().expect("not poisoned").get_or_insert(e);
                            return;
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = error.into_inner().expect("not poisoned") {
        return Err(e);
    }
    Ok(found.into_iter().map(|f| f.into_inner().expect("not poisoned").unwrap_or(false)).collect())
}

/// A file a restore must write: its content's hash and size, as the manifest says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub hash: Hash,
    pub size: u64,
}

/// How reads of a pack are joined.
#[derive(Clone, Copy, Debug)]
pub struct Reads {
    /// Blobs at most this far apart are read in one range (the bytes between are read and
    /// dropped): a request costs about what this many bytes take to arrive.
    pub gap: u64,
    /// A joined read stops growing at this length, so the reads of one pack run in parallel.
    pub max: u64,
}

impl Reads {
    pub const DEFAULT: Reads = Reads { gap: 1 << 20, max: 16 << 20 };
}

/// One read: a range of a pack and the blobs in it (indices in the map's `blobs`, by offset).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackRead {
    pub pack: PackName,
    pub range: Range<u64>,
    pub blobs: Vec<u32>,
}

/// What a restore reads and where each blob goes.
#[derive(Debug)]
pub struct FetchPlan {
    pub reads: Vec<PackRead>,
    /// For each blob index: the (wanted file, offset) pairs it is written at.
    places: BTreeMap<u32, Vec<(usize, u64)>>,
    /// The wanted files, and which are not one blob of their own hash (checked by reading them
    /// back).
    files: Vec<Wanted>,
    several: Vec<usize>,
}

impl FetchPlan {
    /// The reads that bring `wanted`'s blobs; `ranges`: whether the store honours ranges.
    pub fn new(map: &ContentMap, wanted: &[Wanted], ranges: bool, reads: Reads) -> Result<FetchPlan, MapError> {
        let by_hash = map.by_hash();
        let mut places: BTreeMap<u32, Vec<(usize, u64)>> = BTreeMap::new();
        let mut several = Vec::new();
        for (i, w) in wanted.iter().enumerate() {
            let blobs = map.file_blobs(&by_hash, &w.hash, w.size)?;
            // Only a file of one blob whose hash is the file's is verified with its blob.
            let own_blob = matches!(blobs[..], [only] if map.blobs[only as usize].hash == w.hash);
            if !blobs.is_empty() && !own_blob {
                several.push(i);
            }
            let mut offset = 0;
            for b in blobs {
                places.entry(b).or_default().push((i, offset));
                offset += map.blobs[b as usize].size;
            }
        }
        let mut by_pack: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for &b in places.keys() {
            by_pack.entry(map.blobs[b as usize].pack).or_default().push(b);
        }
        let mut out = Vec::new();
        for (pack, mut blobs) in by_pack {
            blobs.sort_by_key(|&b| map.blobs[b as usize].offset);
            let pack = map.packs[pack as usize];
            let mut current: Option<PackRead> = None;
            for b in blobs {
                let blob = &map.blobs[b as usize];
                let (start, end) = (blob.offset, blob.offset + blob.compressed);
                if let Some(read) = current.as_mut() {
                    let joins = !ranges
                        || (start <= read.range.end.saturating_add(reads.gap) && end - read.range.start <= reads.max);
                    if joins {
                        read.range.end = read.range.end.max(end);
                        read.blobs.push(b);
                        continue;
                    }
                    out.push(current.take().expect("there is one"));
                }
                let start = if ranges { start } else { 0 };
                current = Some(PackRead { pack, range: start..end, blobs: vec![b] });
            }
            out.extend(current);
        }
        Ok(FetchPlan { reads: out, places, files: wanted.to_vec(), several })
    }

    /// Bytes the reads bring.
    pub fn bytes(&self) -> u64 {
        self.reads.iter().map(|r| r.range.end - r.range.start).sum()
    }
}

/// Where a restore writes the files it fetches: its staging, never the files in place.
///
/// A file is open only from its first write to its [`Sink::done`]: a tree of many thousands of
/// files never holds more than a few open at once (the limit on open files is 256 on macOS).
pub trait Sink: Sync {
    /// Write `bytes` at `offset` of wanted file `file`, made (empty) by its first write; from
    /// several threads at once, in any order.
    fn write_at(&self, file: usize, offset: u64, bytes: &[u8]) -> io::Result<()>;
    /// Wanted file `file` as written, from its start (to check a file of several blobs).
    fn read_back(&self, file: usize) -> io::Result<Box<dyn Read + '_>>;
    /// Every byte of wanted file `file` is written and checked: finish and close it. An empty
    /// file, which no blob writes, is made by this call alone.
    fn done(&self, file: usize) -> io::Result<()>;
}

/// The files of a [`Sink`] open now: each made on first use, shared by the threads writing it,
/// and closed once done (when the last writer lets go of it).
pub struct OpenFiles {
    slots: Vec<Mutex<Option<std::sync::Arc<std::fs::File>>>>,
}

impl OpenFiles {
    pub fn new(files: usize) -> Self {
        OpenFiles { slots: (0..files).map(|_| Mutex::new(None)).collect() }
    }

    /// File `file`, made by `make` if it is not open.
    pub fn get_or_make(
        &self,
        file: usize,
        make: impl FnOnce() -> io::Result<std::fs::File>,
    ) -> io::Result<std::sync::Arc<std::fs::File>> {
        let mut slot = self.slots[file].lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(std::sync::Arc::new(make()?));
        }
        Ok(std::sync::Arc::clone(slot.as_ref().expect("just made")))
    }

    /// File `file` if it is open.
    pub fn get(&self, file: usize) -> io::Result<std::sync::Arc<std::fs::File>> {
        let slot = self.slots[file].lock().unwrap_or_else(|e| e.into_inner());
        slot.clone().ok_or_else(|| io::Error::other(format!("wanted file {file} is not open")))
    }

    /// Let go of file `file` (closed once no writer holds it).
    pub fn close(&self, file: usize) {
        self.slots[file].lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("pack {0} is missing from the store")]
    Missing(PackName),
    #[error("pack {pack} is corrupt: {detail}")]
    Corrupt { pack: PackName, detail: String },
    /// The content map does not lead to the manifest's files.
    #[error(transparent)]
    Map(#[from] MapError),
    #[error("the file of hash {hash:?} assembled from its blobs has another hash")]
    Assembled { hash: Hash },
    #[error(transparent)]
    Store(PackStoreError),
    #[error("cannot write into staging")]
    Sink(#[source] io::Error),
}

impl FetchError {
    /// Whether the entry's content cannot be had (a pack missing or corrupt, or a map that does
    /// not lead to its files): the miss reason `content-missing`, which a replacement heals.
    /// Otherwise the store or this disk failed (`service-error`, `io-error`).
    pub fn content_missing(&self) -> bool {
        matches!(
            self,
            FetchError::Missing(_) | FetchError::Corrupt { .. } | FetchError::Map(_) | FetchError::Assembled { .. }
        )
    }

    /// The pack a replacement must not reference again.
    pub fn bad_pack(&self) -> Option<PackName> {
        match self {
            FetchError::Missing(pack) | FetchError::Corrupt { pack, .. } => Some(*pack),
            _ => None,
        }
    }
}

/// What a fetch brought and wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchStats {
    pub reads: u64,
    /// Bytes read from packs.
    pub fetched: u64,
    pub blobs: u64,
    pub files: u64,
    /// Bytes written into staging.
    pub written: u64,
}

/// Carry out `plan` on `store` into `sink` with `threads` threads; see the module doc.
pub fn fetch(
    store: &dyn PackStore,
    map: &ContentMap,
    plan: &FetchPlan,
    sink: &dyn Sink,
    threads: usize,
) -> Result<FetchStats, FetchError> {
    let threads = threads.max(1);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<FetchError>> = Mutex::new(None);
    let fail = |e: FetchError| {
        failed.store(true, Ordering::Relaxed);
        first_error.lock().expect("not poisoned").get_or_insert(e);
    };
    let stats = Mutex::new(FetchStats::default());
    let written = Written::new(plan);
    // Empty files: no blob writes them.
    for (i, w) in plan.files.iter().enumerate() {
        if w.size == 0 {
            sink.done(i).map_err(FetchError::Sink)?;
        }
    }
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut mine = FetchStats::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= plan.reads.len() || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    if let Err(e) = read_one(store, map, (plan, &written), &plan.reads[i], sink, &mut mine) {
                        fail(e);
                        break;
                    }
                }
                let mut total = stats.lock().expect("not poisoned");
                total.reads += mine.reads;
                total.fetched += mine.fetched;
                total.blobs += mine.blobs;
                total.written += mine.written;
            });
        }
    });
    if let Some(e) = first_error.into_inner().expect("not poisoned") {
        return Err(e);
    }
    // A map that left bytes of a file unwritten.
    if let Some(i) = written.left.iter().position(|left| left.load(Ordering::Acquire) != 0) {
        return Err(FetchError::Assembled { hash: plan.files[i].hash });
    }
    let mut stats = stats.into_inner().expect("not poisoned");
    stats.files = plan.files.len() as u64;
    Ok(stats)
}

/// The bytes of each wanted file still to be written: the write that ends a file checks it (a
/// file of several blobs is read back) and closes it.
struct Written {
    left: Vec<AtomicU64>,
    several: std::collections::HashSet<usize>,
}

impl Written {
    fn new(plan: &FetchPlan) -> Self {
        let left = plan.files.iter().map(|w| AtomicU64::new(w.size)).collect();
        Written { left, several: plan.several.iter().copied().collect() }
    }

    /// `len` more bytes of wanted file `file` were written; the last of them finish it.
    fn wrote(&self, plan: &FetchPlan, sink: &dyn Sink, file: usize, len: u64) -> Result<(), FetchError> {
        let w = plan.files[file];
        let before = self.left[file]
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| left.checked_sub(len))
            // Places that write more than the file holds: only a forged map has them.
            .map_err(|_| FetchError::Assembled { hash: w.hash })?;
        if before != len {
            return Ok(());
        }
        if self.several.contains(&file) {
            let back = sink.read_back(file).map_err(FetchError::Sink)?;
            if !in_place(back, w.size, &w.hash).map_err(FetchError::Sink)? {
                return Err(FetchError::Assembled { hash: w.hash });
            }
        }
        sink.done(file).map_err(FetchError::Sink)
    }
}

/// One read: its frames in order, each verified, then written at its places.
fn read_one(
    store: &dyn PackStore,
    map: &ContentMap,
    (plan, written): (&FetchPlan, &Written),
    read: &PackRead,
    sink: &dyn Sink,
    stats: &mut FetchStats,
) -> Result<(), FetchError> {
    let pack = read.pack;
    let opened = store.read(&pack, read.range.clone()).map_err(|e| match e {
        PackStoreError::Missing(p) => FetchError::Missing(p),
        other => FetchError::Store(other),
    })?;
    // Where the reader is in the pack.
    let (mut reader, mut at) = match opened {
        Ranged::Range(r) => (r, read.range.start),
        Ranged::Whole(r) => (r, 0),
    };
    let corrupt = |detail: String| FetchError::Corrupt { pack, detail };
    let mut frame = Vec::new();
    let mut opener = BlobOpener::default();
    stats.reads += 1;
    for &b in &read.blobs {
        let blob = &map.blobs[b as usize];
        if blob.offset < at {
            // Blobs overlapping in a pack: only a forged map has them.
            return Err(corrupt(format!("blob {:?} overlaps the one before it", blob.hash)));
        }
        let skip = blob.offset - at;
        let skipped = io::copy(&mut (&mut reader).take(skip), &mut io::sink()).map_err(|e| trouble(pack, e))?;
        frame.clear();
        let got = (&mut reader).take(blob.compressed).read_to_end(&mut frame).map_err(|e| trouble(pack, e))?;
        stats.fetched += skipped + got as u64;
        if skipped != skip || got as u64 != blob.compressed {
            return Err(corrupt(format!("it ends before blob {:?}", blob.hash)));
        }
        at = blob.offset + blob.compressed;
        let bytes = opener.open(&frame, blob.size, &blob.hash).map_err(|e: BlobError| corrupt(e.to_string()))?;
        for &(file, offset) in &plan.places[&b] {
            sink.write_at(file, offset, bytes).map_err(FetchError::Sink)?;
            stats.written += bytes.len() as u64;
            written.wrote(plan, sink, file, bytes.len() as u64)?;
        }
        stats.blobs += 1;
    }
    Ok(())
}

/// A read that failed half way: the store's trouble, not the pack's fault.
fn trouble(pack: PackName, e: io::Error) -> FetchError {
    FetchError::Store(PackStoreError::trouble(format!("cannot read pack {pack}"), e))
}

/// A [`Sink`] of plain files: `open(file)` makes wanted file `file`, open for reading and
/// writing; positional writes, so threads share it.
pub struct FileSink<F: Fn(usize) -> io::Result<std::fs::File> + Sync> {
    open: F,
    files: OpenFiles,
}

impl<F: Fn(usize) -> io::Result<std::fs::File> + Sync> FileSink<F> {
    pub fn new(files: usize, open: F) -> Self {
        FileSink { open, files: OpenFiles::new(files) }
    }
}

impl<F: Fn(usize) -> io::Result<std::fs::File> + Sync> Sink for FileSink<F> {
    fn write_at(&self, file: usize, offset: u64, bytes: &[u8]) -> io::Result<()> {
        write_all_at(&*self.files.get_or_make(file, || (self.open)(file))?, bytes, offset)
    }

    fn read_back(&self, file: usize) -> io::Result<Box<dyn Read + '_>> {
        use std::io::Seek;
        let mut clone = self.files.get(file)?.try_clone()?;
        clone.seek(io::SeekFrom::Start(0))?;
        Ok(Box::new(clone))
    }

    fn done(&self, file: usize) -> io::Result<()> {
        self.files.get_or_make(file, || (self.open)(file))?;
        self.files.close(file);
        Ok(())
    }
}

#[cfg(unix)]
pub(crate) fn write_all_at(file: &std::fs::File, bytes: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
}

#[cfg(windows)]
pub(crate) fn write_all_at(file: &std::fs::File, mut bytes: &[u8], mut offset: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !bytes.is_empty() {
        let n = file.seek_write(bytes, offset)?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[n..];
        offset += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_bytes_are_in_place() {
        let data = crate::content::testing::noise(1, 3 << 20);
        let hash = Hash::of(&data);
        let size = data.len() as u64;
        assert!(in_place(&data[..], size, &hash).unwrap());
        let mut flipped = data.clone();
        flipped[2 << 20] ^= 1;
        assert!(!in_place(&flipped[..], size, &hash).unwrap(), "one byte changed");
        assert!(!in_place(&data[..data.len() - 1], size, &hash).unwrap(), "shorter");
        let mut longer = data.clone();
        longer.push(0);
        assert!(!in_place(&longer[..], size, &hash).unwrap(), "longer, with the same first bytes");
        assert!(in_place(&b""[..], 0, &Hash::empty()).unwrap());
        assert!(!in_place(&b"x"[..], 0, &Hash::empty()).unwrap());
    }
}
