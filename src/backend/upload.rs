//! Uploads as a plain `Write`: bytes are cut into fixed-size blocks that upload several at a
//! time on the HTTP runtime while the packer produces the next ones. The writer blocks when the
//! uploads fall behind, so memory stays at (blocks in flight + 2) × block size and no temporary
//! archive file is written. What a block upload is depends on the backend ([`BlockSink`]); the
//! first block that fails stops the upload, and every later write fails with its error.

use super::http::Http;
use super::{BackendError, Committed, ErrorKind, Upload};
use base64::Engine;
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::io::{self, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One block upload of a protocol.
pub trait BlockSink: Send + Sync + 'static {
    /// Upload block number `index`, whose bytes start at `offset` of the archive.
    fn put_block(&self, index: usize, offset: u64, data: Bytes) -> BoxFuture<'_, Result<(), BackendError>>;
}

/// The block ids of one upload, as the Azure SDK makes them: base64 of 48 characters, a random
/// UUID (36) and the block's index zero-padded to 12 digits. Servers that stand in for Azure
/// (falcondev-oss/github-actions-cache-server) read the index from that layout and refuse any
/// other; the random part keeps a racing writer's blocks apart.
pub struct BlockIds {
    uuid: String,
}

impl BlockIds {
    pub fn new() -> Self {
        // RandomState is seeded from the OS once per process and differs per instance.
        let bits = |salt: u64| RandomState::new().hash_one((salt, std::time::SystemTime::now()));
        let (hi, lo) = (bits(1), bits(2));
        // A version 4 UUID: version nibble 4, variant bits 10.
        let hi = (hi & !0xf000) | 0x4000;
        let lo = (lo & !(0b11 << 62)) | (0b10 << 62);
        let uuid = format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xffff,
            hi & 0xffff,
            lo >> 48,
            lo & 0xffff_ffff_ffff
        );
        Self { uuid }
    }

    /// The id of block number `index` (at most 50,000 blocks: Azure's limit).
    pub fn id(&self, index: usize) -> String {
        base64::engine::general_purpose::STANDARD.encode(format!("{}{index:012}", self.uuid))
    }
}

impl Default for BlockIds {
    fn default() -> Self {
        Self::new()
    }
}

pub enum Finished {
    /// Everything fit in one block and nothing was uploaded yet.
    Small(Bytes),
    /// `blocks` blocks of `total` bytes were uploaded.
    Blocks { blocks: usize, total: u64 },
}

pub struct BlockWriter {
    http: Arc<Http>,
    sink: Arc<dyn BlockSink>,
    block_size: usize,
    allow_small: bool,
    buf: Vec<u8>,
    next_index: usize,
    offset: u64,
    tx: Option<mpsc::Sender<(usize, u64, Bytes)>>,
    task: Option<JoinHandle<Result<(), BackendError>>>,
    /// The first block upload that failed: every later write fails with it.
    failure: Arc<Mutex<Option<BackendError>>>,
}

impl BlockWriter {
    /// `allow_small`: keep an archive that fits in one block for [`Finished::Small`].
    pub fn new(http: Arc<Http>, sink: Arc<dyn BlockSink>, allow_small: bool) -> Self {
        let block_size = if allow_small {
            http.tuning.upload_block.max(http.tuning.single_put_limit)
        } else {
            http.tuning.upload_block
        };
        Self {
            block_size,
            buf: Vec::with_capacity(block_size.min(8 << 20)),
            http,
            sink,
            allow_small,
            next_index: 0,
            offset: 0,
            tx: None,
            task: None,
            failure: Arc::new(Mutex::new(None)),
        }
    }

    /// Use blocks of `size` bytes (S3 wants at least 5 MiB but for the last).
    pub fn set_block_size(&mut self, size: usize) {
        self.block_size = size;
    }

    fn start(&mut self) {
        let concurrency = self.http.tuning.upload_concurrency;
        let (tx, mut rx) = mpsc::channel::<(usize, u64, Bytes)>(1);
        let sink = Arc::clone(&self.sink);
        let failure = Arc::clone(&self.failure);
        self.task = Some(self.http.rt().spawn(async move {
            let mut running = FuturesUnordered::new();
            let mut closed = false;
            loop {
                tokio::select! {
                    block = rx.recv(), if !closed && running.len() < concurrency => match block {
                        Some((index, offset, data)) => running.push(sink.put_block(index, offset, data)),
                        None => closed = true,
                    },
                    Some(done) = running.next(), if !running.is_empty() => {
                        if let Err(e) = done {
                            *failure.lock().unwrap() = Some(e.clone());
                            return Err(e);
                        }
                    }
                    else => break,
                }
                if closed && running.is_empty() {
                    break;
                }
            }
            Ok(())
        }));
        self.tx = Some(tx);
    }

    fn send_block(&mut self) -> io::Result<()> {
        if self.tx.is_none() {
            self.start();
        }
        let data = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(self.block_size)));
        let len = data.len() as u64;
        let sent = self.tx.as_ref().expect("started").blocking_send((self.next_index, self.offset, data));
        self.next_index += 1;
        self.offset += len;
        if sent.is_err() { Err(self.failure_io()) } else { Ok(()) }
    }

    fn failure_io(&self) -> io::Error {
        let failure = self.failure.lock().unwrap().clone();
        failure.unwrap_or_else(|| BackendError::new(ErrorKind::Fatal, "upload stopped")).into_io()
    }

    /// Send what is left and wait for every block.
    pub fn finish(mut self) -> Result<Finished, BackendError> {
        if self.tx.is_none() && self.allow_small {
            return Ok(Finished::Small(Bytes::from(std::mem::take(&mut self.buf))));
        }
        if !self.buf.is_empty() || self.next_index == 0 {
            self.send_block().map_err(|e| {
                BackendError::from_io(e)
                    .unwrap_or_else(|e| BackendError::new(ErrorKind::Fatal, "upload stopped").with_source(e))
            })?;
        }
        drop(self.tx.take());
        let task = self.task.take().expect("started");
        self.http
            .rt()
            .block_on(task)
            .map_err(|e| BackendError::new(ErrorKind::Fatal, "upload task failed").with_source(e))??;
        Ok(Finished::Blocks { blocks: self.next_index, total: self.offset })
    }
}

impl Drop for BlockWriter {
    fn drop(&mut self) {
        // An abandoned upload (the packer failed) stops sending blocks.
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Write for BlockWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.failure.lock().unwrap().is_some() {
            return Err(self.failure_io());
        }
        let room = self.block_size - self.buf.len();
        let n = room.min(data.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == self.block_size {
            self.send_block()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What ends a [`BlockUpload`] once every block is written.
pub trait CommitBlocks: Send + 'static {
    /// Make the entry of what the writer left (`finished`) appear, or learn it is there already.
    fn commit(self, finished: Finished) -> Result<Committed, BackendError>;
}

/// A reserved save streamed through a [`BlockWriter`], committed by `C`. Dropped without a
/// commit, the writer stops first, then `C` is dropped (it may clean up after itself).
pub struct BlockUpload<C: CommitBlocks> {
    // Fields drop in this order: the writer stops sending blocks before `commit` cleans up
    // (S3 aborts its multipart upload then). Keep `writer` first.
    writer: BlockWriter,
    commit: C,
}

impl<C: CommitBlocks> BlockUpload<C> {
    pub fn new(writer: BlockWriter, commit: C) -> Self {
        Self { writer, commit }
    }
}

impl<C: CommitBlocks> Write for BlockUpload<C> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<C: CommitBlocks> Upload for BlockUpload<C> {
    fn commit(self: Box<Self>) -> Result<Committed, BackendError> {
        let BlockUpload { writer, commit } = *self;
        let finished = writer.finish()?;
        commit.commit(finished)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout a server that stands in for Azure parses: 48 bytes, a UUID, then the index.
    fn parse(id: &str) -> (String, usize) {
        let raw = base64::engine::general_purpose::STANDARD.decode(id).expect("base64");
        assert_eq!(raw.len(), 48, "{id}");
        let text = String::from_utf8(raw).expect("text");
        let (uuid, index) = text.split_at(36);
        assert!(index.bytes().all(|b| b.is_ascii_digit()), "{text}");
        (uuid.to_owned(), index.parse().expect("digits"))
    }

    #[test]
    fn block_ids_are_the_azure_sdks_layout() {
        let ids = BlockIds::new();
        for index in [0, 1, 9, 10, 4_999, 49_999] {
            let (uuid, parsed) = parse(&ids.id(index));
            assert_eq!(parsed, index);
            let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{uuid}");
            assert!(uuid.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit()), "{uuid}");
            assert_eq!(&uuid[14..15], "4", "a version 4 UUID: {uuid}");
        }
        assert_eq!(ids.id(0).len(), ids.id(49_999).len(), "one width");
        assert_eq!(parse(&ids.id(0)).0, parse(&ids.id(7)).0, "one upload, one UUID");
        assert_ne!(parse(&BlockIds::new().id(0)).0, parse(&ids.id(0)).0, "another upload, another UUID");
    }
}
