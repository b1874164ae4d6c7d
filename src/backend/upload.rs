//! Uploads as a plain `Write`: bytes are cut into fixed-size blocks that upload several at a
//! time on the HTTP runtime while the packer goes on producing the next ones. The writer blocks
//! when the uploads fall behind, so memory stays at (blocks in flight + 2) × block size and no
//! temporary archive file is written.
//!
//! What a block upload is depends on the backend ([`BlockSink`]): Azure Put Block for v2, a
//! `PATCH` with `Content-Range` for v1, a part of a multipart upload for S3 (at least 5 MiB but
//! the last). An archive that fits in one block never starts the machinery when the backend
//! asks for that, so v2 can send it with a single Put Blob. The first block that fails stops
//! the upload, and every later write fails with its error, whole (kind, status and source).

use super::http::Http;
use super::{BackendError, ErrorKind};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use std::future::Future;
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

/// How a finished upload ended.
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
