//! Parallel file writing for restores: the unpacker decodes and parses on its own thread and
//! hands each file to one of a few writer threads, which create it (with its mode), write it,
//! hash it, and set its mtime. Creating many small files is mostly system-call time, which
//! runs in parallel; a large file is streamed to one writer in chunks, so the hash and the
//! writes overlap with decoding. Memory is bounded by the queues (a few chunks per writer).
//! Files are created through the handle of their (staging) directory, never by path.

use super::beneath;
use crate::file_mode::current_umask;
use cap_std::fs::Dir;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Chunks of a file queued per writer.
const QUEUE: usize = 8;

enum Job {
    Begin { index: usize, file: NewFile, mode: u32, mtime: Option<i64> },
    Data(Vec<u8>),
    End,
}

/// A file to create: its directory's handle and its name there; `path` is for messages.
pub(super) struct NewFile {
    pub dir: Arc<Dir>,
    pub name: String,
    pub path: PathBuf,
}

/// What a writer made of one file.
pub(super) struct Written {
    pub index: usize,
    pub size: u64,
    pub sha256: String,
}

/// The first failure, by path.
pub(super) type Failure = (PathBuf, io::Error);

pub(super) struct Writers {
    senders: Vec<SyncSender<Job>>,
    threads: Vec<JoinHandle<()>>,
    results: Arc<Mutex<Vec<Written>>>,
    failure: Arc<Mutex<Option<Failure>>>,
    next: usize,
    current: Option<usize>,
}

impl Writers {
    pub fn new(count: usize) -> Self {
        let results = Arc::new(Mutex::new(Vec::new()));
        let failure = Arc::new(Mutex::new(None));
        let umask = current_umask();
        let (senders, threads) = (0..count.max(1))
            .map(|i| {
                let (tx, rx) = sync_channel::<Job>(QUEUE);
                let (results, failure) = (Arc::clone(&results), Arc::clone(&failure));
                let thread = std::thread::Builder::new()
                    .name(format!("exact-cache-writer-{i}"))
                    .spawn(move || work(rx, umask, &results, &failure))
                    .expect("spawn a writer thread");
                (tx, thread)
            })
            .unzip();
        Self { senders, threads, results, failure, next: 0, current: None }
    }

    /// Start file number `index`; its content follows with [`Writers::data`], then
    /// [`Writers::end`].
    pub fn begin(&mut self, index: usize, file: NewFile, mode: u32, mtime: Option<i64>) -> Result<(), Failure> {
        let writer = self.next % self.senders.len();
        self.next += 1;
        self.current = Some(writer);
        self.send(Job::Begin { index, file, mode, mtime })
    }

    pub fn data(&mut self, bytes: Vec<u8>) -> Result<(), Failure> {
        self.send(Job::Data(bytes))
    }

    pub fn end(&mut self) -> Result<(), Failure> {
        let sent = self.send(Job::End);
        self.current = None;
        sent
    }

    fn send(&mut self, job: Job) -> Result<(), Failure> {
        self.check()?;
        let writer = self.current.expect("a file was begun");
        // A closed queue means the writer stopped on a failure, which `check` then reports.
        if self.senders[writer].send(job).is_err() {
            self.check()?;
        }
        Ok(())
    }

    /// The first failure of any writer so far.
    pub fn check(&self) -> Result<(), Failure> {
        match self.failure.lock().unwrap().take() {
            Some(f) => Err(f),
            None => Ok(()),
        }
    }

    /// Wait for every writer; the files written, or the first failure.
    pub fn finish(mut self) -> Result<Vec<Written>, Failure> {
        self.senders.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        self.check()?;
        Ok(std::mem::take(&mut *self.results.lock().unwrap()))
    }
}

impl Drop for Writers {
    fn drop(&mut self) {
        self.senders.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

struct Open {
    index: usize,
    path: PathBuf,
    file: File,
    hasher: Sha256,
    size: u64,
    mode: u32,
    mtime: Option<i64>,
}

fn work(rx: Receiver<Job>, umask: u32, results: &Mutex<Vec<Written>>, failure: &Mutex<Option<Failure>>) {
    let mut open: Option<Open> = None;
    for job in rx {
        let step = match job {
            Job::Begin { index, file: new, mode, mtime } => create(&new, mode).map(|file| {
                open = Some(Open { index, path: new.path, file, hasher: Sha256::new(), size: 0, mode, mtime });
            }),
            Job::Data(bytes) => {
                let o = open.as_mut().expect("data follows begin");
                o.hasher.update(&bytes);
                o.size += bytes.len() as u64;
                o.file.write_all(&bytes).map_err(|e| (o.path.clone(), e))
            }
            Job::End => {
                let o = open.take().expect("end follows begin");
                close(o, umask).map(|written| results.lock().unwrap().push(written))
            }
        };
        if let Err(f) = step {
            failure.lock().unwrap().get_or_insert(f);
            return; // dropping the receiver tells the unpacker
        }
    }
}

fn create(new: &NewFile, mode: u32) -> Result<File, Failure> {
    // The owner may always write while we fill it; the exact mode is set at the end when the
    // umask or a read-only mode requires it.
    beneath::create_file(&new.dir, &new.name, mode | 0o200).map_err(|e| (new.path.clone(), e))
}

fn close(o: Open, umask: u32) -> Result<Written, Failure> {
    if let Some(mtime) = o.mtime {
        let _ = filetime::set_file_handle_times(&o.file, None, Some(filetime::FileTime::from_unix_time(mtime, 0)));
    }
    #[cfg(unix)]
    if (o.mode | 0o200) & !umask != o.mode {
        use std::os::unix::fs::PermissionsExt;
        o.file.set_permissions(std::fs::Permissions::from_mode(o.mode)).map_err(|e| (o.path.clone(), e))?;
    }
    #[cfg(not(unix))]
    {
        // Windows keeps one permission fact, the read-only attribute; there is no umask.
        let _ = umask;
        if o.mode & 0o200 == 0 {
            let mut permissions = o.file.metadata().map_err(|e| (o.path.clone(), e))?.permissions();
            permissions.set_readonly(true);
            o.file.set_permissions(permissions).map_err(|e| (o.path.clone(), e))?;
        }
    }
    Ok(Written { index: o.index, size: o.size, sha256: hex::encode(o.hasher.finalize()) })
}
