//! Packs: a zstd skippable frame that makes the pack unique ([`PACK_HEAD`] and 16 random bytes),
//! then blobs, each compressed on its own as one zstd frame, one after another; no index (the
//! content maps that reference a pack say where each blob lies in it), so `zstd -d` reads a pack
//! as the concatenation of its blobs. A pack's name is the SHA-256 of its bytes: a stored pack is
//! verified by its name and never changes; a blob is read with a byte range and verified on its
//! own ([`open_blob`]). The random bytes keep two saves from ever making one name: a save that
//! replaces an entry whose pack was corrupt writes packs of new names, never "stores" its blobs
//! under the corrupt pack's name, which a store keeps as it is.
//!
//! [`PackWriter`] compresses the blobs it is given on a few threads at once (a blob is at most a
//! few MiB, so whole blobs are the unit of parallel work and no frame needs zstd's own threads),
//! appends the frames in the order given to a file, and rolls to a new pack once a pack reaches
//! its target size; memory stays within a few blobs per thread. Appending, and hashing each
//! pack for its name, is a thread of its own too: on the caller's thread it was a third pass
//! over every byte (after the file's and the blob's hashes) in the way of the reading.

use super::{Hash, PackName};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::mpsc;

/// The payload's start of the skippable frame that opens every pack.
pub const PACK_HEAD: &[u8; 16] = b"exact-cache pack";
/// zstd's skippable frame magic numbers are 0x184D2A50 to 0x184D2A5F.
const SKIPPABLE_MAGIC: u32 = 0x184D_2A5E;

/// The opening frame of a new pack: the skippable magic, its length, [`PACK_HEAD`], 16 bytes
/// unlike any other pack's.
fn pack_head() -> Vec<u8> {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut head = Vec::with_capacity(40);
    head.extend(SKIPPABLE_MAGIC.to_le_bytes());
    head.extend(32u32.to_le_bytes());
    head.extend(PACK_HEAD);
    for round in 0..2u64 {
        let mut random = std::collections::hash_map::RandomState::new().build_hasher();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        random.write_u128(now.as_nanos());
        random.write_u32(std::process::id());
        random.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed) ^ round);
        head.extend(random.finish().to_le_bytes());
    }
    head
}

/// Where a blob lies in its pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlobPlace {
    pub hash: Hash,
    pub offset: u64,
    /// Its frame's length in the pack.
    pub compressed: u64,
    /// Its length uncompressed.
    pub size: u64,
}

/// How packs are written.
#[derive(Clone, Debug)]
pub struct PackOptions {
    /// Where the pack files are written until they are stored.
    pub dir: PathBuf,
    /// A pack is finished once it holds this many bytes (the last frame may pass it).
    pub target: u64,
    /// The zstd level (3; -1 for data that barely compresses or where `compression` is `none`).
    pub level: i32,
    /// Compressing threads.
    pub threads: usize,
}

impl PackOptions {
    /// ~64 MiB packs (as hestia's): few new entries per save where each pack is one (GitHub
    /// allows 200 a minute), and still ranges worth fetching apart.
    pub const TARGET: u64 = 64 << 20;
    /// The most new packs a save of a large tree makes: GitHub allows a repository 200 new
    /// cache entries a minute, and a matrix of jobs saving at once shares them.
    pub const MOST_PACKS: u64 = 24;
    /// Packs grow to at most this size to stay within [`Self::MOST_PACKS`].
    pub const LARGEST_TARGET: u64 = 1 << 30;

    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 8);
        PackOptions { dir: dir.into(), target: Self::TARGET, level: 3, threads }
    }

    /// The pack size for a save of `bytes` (uncompressed; what it stores anew is at most
    /// that): [`Self::TARGET`], or larger, up to [`Self::LARGEST_TARGET`], so that the save makes
    /// at most about [`Self::MOST_PACKS`] packs.
    pub fn target_for(bytes: u64) -> u64 {
        bytes.div_ceil(Self::MOST_PACKS).clamp(Self::TARGET, Self::LARGEST_TARGET)
    }
}

/// A pack written to a file, ready to be stored (the file is removed when this is dropped).
#[derive(Debug)]
pub struct FinishedPack {
    pub name: PackName,
    pub len: u64,
    pub blobs: Vec<BlobPlace>,
    pub file: tempfile::TempPath,
}

impl FinishedPack {
    /// Its bytes, from the start.
    pub fn open(&self) -> io::Result<File> {
        File::open(&self.file)
    }
}

/// Blobs handed to a compressing thread together, in order, and what comes back: a tree of
/// small files makes tens of thousands of small blobs, and a message and a wake-up for each cost
/// more than compressing them (measured: a tenth of a cold save of 30,000 files in wake-ups).
type Job = (u64, Vec<(Hash, Vec<u8>)>);
type Done = (u64, io::Result<Frames>);
/// Compressed blobs: hash, size uncompressed, frame.
type Frames = Vec<(Hash, u64, Vec<u8>)>;

/// A batch is sent once it holds this many bytes.
const BATCH_BYTES: u64 = 1 << 20;

/// Writes blobs into packs; see the module doc.
pub struct PackWriter {
    options: PackOptions,
    jobs: Option<mpsc::SyncSender<Job>>,
    done: mpsc::Receiver<Done>,
    workers: Vec<std::thread::JoinHandle<()>>,
    /// Blobs given and not sent yet, and their bytes.
    batch: Vec<(Hash, Vec<u8>)>,
    batch_bytes: u64,
    /// Sequence number of the next batch sent, and of the next to append.
    next_in: u64,
    next_out: u64,
    /// Compressed batches that came back before their turn.
    waiting: BTreeMap<u64, Frames>,
    /// Batches in order to the appending thread, and the packs it finished.
    frames: Option<mpsc::SyncSender<Frames>>,
    packs: mpsc::Receiver<io::Result<FinishedPack>>,
    appender: Option<std::thread::JoinHandle<()>>,
}

/// The appending thread's state: the pack being written.
struct Appender {
    options: PackOptions,
    current: Option<Open>,
    packs: mpsc::Sender<io::Result<FinishedPack>>,
}

/// The pack being written.
struct Open {
    file: io::BufWriter<File>,
    path: tempfile::TempPath,
    hasher: Sha256,
    len: u64,
    blobs: Vec<BlobPlace>,
}

impl PackWriter {
    pub fn new(options: PackOptions) -> io::Result<Self> {
        let threads = options.threads.max(1);
        let (jobs, job_rx) = mpsc::sync_channel::<Job>(threads);
        let (done_tx, done) = mpsc::channel::<Done>();
        let job_rx = std::sync::Arc::new(std::sync::Mutex::new(job_rx));
        let level = options.level;
        let workers = (0..threads)
            .map(|_| {
                let (job_rx, done_tx) = (std::sync::Arc::clone(&job_rx), done_tx.clone());
                std::thread::spawn(move || {
                    let mut compressor = zstd::bulk::Compressor::new(level).ok();
                    loop {
                        let job = job_rx.lock().map(|rx| rx.recv());
                        let Ok(Ok((seq, blobs))) = job else { return };
                        let out = blobs
                            .into_iter()
                            .map(|(hash, data)| match compressor.as_mut() {
                                Some(c) => c.compress(&data).map(|frame| (hash, data.len() as u64, frame)),
                                None => Err(io::Error::other("cannot start zstd")),
                            })
                            .collect();
                        if done_tx.send((seq, out)).is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        let (frames, frames_rx) = mpsc::sync_channel::<Frames>(4);
        let (packs_tx, packs) = mpsc::channel();
        let mut appender = Appender { options: options.clone(), current: None, packs: packs_tx };
        let appender = std::thread::spawn(move || appender.run(frames_rx));
        Ok(PackWriter {
            options,
            jobs: Some(jobs),
            done,
            workers,
            batch: Vec::new(),
            batch_bytes: 0,
            next_in: 0,
            next_out: 0,
            waiting: BTreeMap::new(),
            frames: Some(frames),
            packs,
            appender: Some(appender),
        })
    }

    /// Add a blob (`hash` is the SHA-256 of `data`, which the caller computed); the packs that
    /// were finished since the last call, to be stored.
    pub fn add(&mut self, hash: Hash, data: Vec<u8>) -> io::Result<Vec<FinishedPack>> {
        self.batch_bytes += data.len() as u64;
        self.batch.push((hash, data));
        if self.batch_bytes >= BATCH_BYTES {
            self.send_batch()?;
        }
        // Append what is ready without waiting.
        while let Ok(done) = self.done.try_recv() {
            self.accept(done)?;
        }
        let mut finished = Vec::new();
        while let Ok(pack) = self.packs.try_recv() {
            finished.push(pack?);
        }
        Ok(finished)
    }

    /// Append every blob given and finish the last pack; the packs not handed out yet.
    pub fn finish(mut self) -> io::Result<Vec<FinishedPack>> {
        if !self.batch.is_empty() {
            self.send_batch()?;
        }
        while self.next_out < self.next_in {
            self.append_one()?;
        }
        // The appender finishes the last pack once its queue closes.
        self.frames = None;
        if let Some(appender) = self.appender.take() {
            appender.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        }
        self.packs.try_iter().collect()
    }

    fn send_batch(&mut self) -> io::Result<()> {
        // At most two batches per thread in flight: block on the oldest before sending more.
        while self.next_in - self.next_out >= 2 * self.options.threads.max(1) as u64 {
            self.append_one()?;
        }
        let batch = std::mem::take(&mut self.batch);
        self.batch_bytes = 0;
        let jobs = self.jobs.as_ref().expect("open until finished");
        jobs.send((self.next_in, batch)).map_err(|_| io::Error::other("a compressing thread stopped"))?;
        self.next_in += 1;
        Ok(())
    }

    /// Wait for the next batch in order and append it.
    fn append_one(&mut self) -> io::Result<()> {
        let before = self.next_out;
        while self.next_out == before {
            let done = self.done.recv().map_err(|_| io::Error::other("a compressing thread stopped"))?;
            self.accept(done)?;
        }
        Ok(())
    }

    /// Take a compressed batch; append every batch now in order.
    fn accept(&mut self, (seq, out): Done) -> io::Result<()> {
        self.waiting.insert(seq, out?);
        while let Some(frames) = self.waiting.remove(&self.next_out) {
            let appender = self.frames.as_ref().expect("open until finished");
            if appender.send(frames).is_err() {
                return Err(self.appender_failed());
            }
            self.next_out += 1;
        }
        Ok(())
    }

    /// Why the appending thread stopped: the error it sent last.
    fn appender_failed(&mut self) -> io::Error {
        self.packs.try_iter().find_map(Result::err).unwrap_or_else(|| io::Error::other("the appending thread stopped"))
    }
}

impl Appender {
    /// Append every batch, in order, and finish the last pack once the queue closes; an error
    /// is sent and ends the thread (the writer's next send fails and reads it).
    fn run(&mut self, batches: mpsc::Receiver<Frames>) {
        let appended = (|| {
            for frames in batches {
                for (hash, size, frame) in frames {
                    self.append(hash, size, &frame)?;
                }
            }
            self.close_current()
        })();
        if let Err(e) = appended {
            let _ = self.packs.send(Err(e));
        }
    }

    fn append(&mut self, hash: Hash, size: u64, frame: &[u8]) -> io::Result<()> {
        let full = |c: &Open| !c.blobs.is_empty() && c.len + frame.len() as u64 > self.options.target;
        if self.current.as_ref().is_some_and(full) {
            self.close_current()?;
        }
        if self.current.is_none() {
            let tmp = tempfile::Builder::new().prefix("pack-").tempfile_in(&self.options.dir)?;
            let (file, path) = tmp.into_parts();
            let mut file = io::BufWriter::with_capacity(1 << 20, file);
            let head = pack_head();
            file.write_all(&head)?;
            let mut hasher = Sha256::new();
            hasher.update(&head);
            self.current = Some(Open { file, path, hasher, len: head.len() as u64, blobs: Vec::new() });
        }
        let open = self.current.as_mut().expect("just opened");
        open.file.write_all(frame)?;
        open.hasher.update(frame);
        open.blobs.push(BlobPlace { hash, offset: open.len, compressed: frame.len() as u64, size });
        open.len += frame.len() as u64;
        Ok(())
    }

    fn close_current(&mut self) -> io::Result<()> {
        let Some(open) = self.current.take() else { return Ok(()) };
        // Flushed, not synced: the file is only read back by this process, and a store syncs
        // what it keeps.
        open.file.into_inner().map_err(|e| e.into_error())?;
        let pack = FinishedPack { name: Hash::from(open.hasher), len: open.len, blobs: open.blobs, file: open.path };
        // The writer gone (a save abandoned): nothing waits for the pack.
        let _ = self.packs.send(Ok(pack));
        Ok(())
    }
}

impl Drop for PackWriter {
    fn drop(&mut self) {
        // Closing the queues ends the threads once they finish the blob at hand.
        self.jobs = None;
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
        self.frames = None;
        if let Some(appender) = self.appender.take() {
            let _ = appender.join();
        }
    }
}

/// Why a blob's bytes are not the blob.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BlobError {
    #[error("blob {hash:?} does not decompress: {detail}")]
    Undecodable { hash: Hash, detail: String },
    #[error("blob {hash:?} is {actual} bytes, not {expected}")]
    Size { hash: Hash, expected: u64, actual: u64 },
    #[error("blob {hash:?} has other content (its hash is {actual:?})")]
    Hash { hash: Hash, actual: Hash },
}

/// The blob `hash` of `size` bytes from its frame: decompressed into at most `size` bytes and
/// verified by its hash.
pub fn open_blob(frame: &[u8], size: u64, hash: &Hash) -> Result<Vec<u8>, BlobError> {
    BlobOpener::default().open(frame, size, hash).map(<[u8]>::to_vec)
}

/// Opens blobs one after another ([`open_blob`]) with one zstd context and one buffer: a
/// restore of tens of thousands of small files would otherwise make both for every blob.
#[derive(Default)]
pub struct BlobOpener {
    decompressor: Option<zstd::bulk::Decompressor<'static>>,
    out: Vec<u8>,
}

impl BlobOpener {
    /// [`open_blob`]'s bytes, until the next call.
    pub fn open(&mut self, frame: &[u8], size: u64, hash: &Hash) -> Result<&[u8], BlobError> {
        let undecodable = |e: io::Error| BlobError::Undecodable { hash: *hash, detail: e.to_string() };
        let decompressor = match &mut self.decompressor {
            Some(d) => d,
            None => self.decompressor.insert(zstd::bulk::Decompressor::new().map_err(undecodable)?),
        };
        // Room for `size` bytes, so a frame that holds more does not decode (more room may be
        // left from a larger blob before: then the size check below refuses it).
        self.out.clear();
        self.out.reserve(size as usize);
        decompressor.decompress_to_buffer(frame, &mut self.out).map_err(undecodable)?;
        if self.out.len() as u64 != size {
            return Err(BlobError::Size { hash: *hash, expected: size, actual: self.out.len() as u64 });
        }
        let actual = Hash::of(&self.out);
        if actual != *hash {
            return Err(BlobError::Hash { hash: *hash, actual });
        }
        Ok(&self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::testing::noise;

    fn options(dir: &std::path::Path, target: u64, threads: usize) -> PackOptions {
        PackOptions { dir: dir.to_owned(), target, level: 3, threads }
    }

    #[test]
    fn blobs_round_trip_through_packs_in_the_order_given_and_packs_roll_at_their_target() {
        let dir = tempfile::tempdir().unwrap();
        // ~9 MB: several batches in flight on the three threads at once.
        let blobs: Vec<Vec<u8>> = (0..300).map(|i| noise(i, 10_000 + (i % 40) as usize * 1000)).collect();
        let mut writer = PackWriter::new(options(dir.path(), 200_000, 3)).unwrap();
        let mut packs = Vec::new();
        for b in &blobs {
            packs.extend(writer.add(Hash::of(b), b.clone()).unwrap());
        }
        packs.extend(writer.finish().unwrap());
        assert!(packs.len() >= 4, "{} packs", packs.len());
        let mut i = 0;
        for pack in &packs {
            let bytes = std::fs::read(&pack.file).unwrap();
            assert_eq!(bytes.len() as u64, pack.len);
            assert_eq!(pack.name, Hash::of(&bytes), "a pack is named by its bytes");
            // Only a pack's last frame may take it past its target.
            let last = pack.blobs.last().unwrap();
            assert!(last.offset <= 200_000);
            // zstd reads a pack as its blobs, one after another.
            let whole = zstd::stream::decode_all(&bytes[..]).unwrap();
            let sizes: u64 = pack.blobs.iter().map(|b| b.size).sum();
            assert_eq!(whole.len() as u64, sizes);
            for place in &pack.blobs {
                assert_eq!(place.hash, Hash::of(&blobs[i]), "in the order given");
                let frame = &bytes[place.offset as usize..(place.offset + place.compressed) as usize];
                assert_eq!(open_blob(frame, place.size, &place.hash).unwrap(), blobs[i]);
                i += 1;
            }
        }
        assert_eq!(i, blobs.len());
    }

    #[test]
    fn a_blob_is_refused_when_its_frame_or_size_or_hash_is_wrong() {
        let data = b"hello hello hello hello".repeat(100);
        let hash = Hash::of(&data);
        let frame = zstd::bulk::compress(&data, 3).unwrap();
        assert_eq!(open_blob(&frame, data.len() as u64, &hash).unwrap(), data);
        assert!(matches!(open_blob(&frame, 10, &hash), Err(BlobError::Undecodable { .. })), "no more than its size");
        assert!(matches!(open_blob(&frame, data.len() as u64 + 1, &hash), Err(BlobError::Size { .. })));
        let other = Hash::of(b"other");
        assert!(matches!(open_blob(&frame, data.len() as u64, &other), Err(BlobError::Hash { .. })));
        let mut flipped = frame.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x10;
        assert!(open_blob(&flipped, data.len() as u64, &hash).is_err());
        assert!(open_blob(&frame[..frame.len() - 3], data.len() as u64, &hash).is_err());
    }

    #[test]
    fn an_opener_kept_across_blobs_refuses_what_open_blob_refuses() {
        let mut opener = BlobOpener::default();
        let big = noise(5, 100_000);
        let frame = zstd::bulk::compress(&big, 3).unwrap();
        assert_eq!(opener.open(&frame, big.len() as u64, &Hash::of(&big)).unwrap(), &big[..]);
        let small = b"hello hello hello ".repeat(10);
        let (small_frame, hash) = (zstd::bulk::compress(&small, 3).unwrap(), Hash::of(&small));
        // The room the larger blob left does not let a frame pass for fewer bytes than it holds.
        assert!(opener.open(&small_frame, 10, &hash).is_err());
        assert_eq!(opener.open(&small_frame, small.len() as u64, &hash).unwrap(), &small[..]);
        let other = Hash::of(&big);
        assert!(matches!(opener.open(&small_frame, small.len() as u64, &other), Err(BlobError::Hash { .. })));
        assert_eq!(opener.open(&frame, big.len() as u64, &other).unwrap(), &big[..], "and goes on");
    }

    #[test]
    fn two_packs_of_the_same_blobs_have_different_names() {
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<PackName> = (0..2)
            .map(|_| {
                let mut writer = PackWriter::new(options(dir.path(), 1000, 1)).unwrap();
                assert!(writer.add(Hash::of(b"blob"), b"blob".to_vec()).unwrap().is_empty());
                let packs = writer.finish().unwrap();
                assert_eq!(packs.len(), 1);
                assert_eq!(packs[0].blobs[0].offset, 40, "after the opening frame");
                packs[0].name
            })
            .collect();
        assert_ne!(names[0], names[1]);
    }

    #[test]
    fn a_large_tree_makes_few_large_packs_and_a_small_one_64_mib_packs() {
        assert_eq!(PackOptions::target_for(0), PackOptions::TARGET);
        assert_eq!(PackOptions::target_for(1 << 30), PackOptions::TARGET, "16 packs of 64 MiB");
        // 6 GiB: 24 packs of 256 MiB rather than 96 of 64 MiB.
        assert_eq!(PackOptions::target_for(6 << 30), 256 << 20);
        assert_eq!(PackOptions::target_for(100 << 30), PackOptions::LARGEST_TARGET);
    }

    #[test]
    fn a_pack_that_cannot_be_written_fails_the_writer_with_the_cause() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let mut writer = PackWriter::new(options(&gone, 100_000, 2)).unwrap();
        let mut failed = None;
        for i in 0..50 {
            let blob = noise(i, 50_000);
            if let Err(e) = writer.add(Hash::of(&blob), blob) {
                failed = Some(e);
                break;
            }
        }
        let failed = match failed {
            Some(e) => e,
            None => writer.finish().expect_err("no directory to write packs in"),
        };
        assert_eq!(failed.kind(), io::ErrorKind::NotFound, "{failed}");
    }

    #[test]
    fn no_blobs_make_no_pack() {
        let dir = tempfile::tempdir().unwrap();
        assert!(PackWriter::new(options(dir.path(), 1000, 2)).unwrap().finish().unwrap().is_empty());
    }
}
