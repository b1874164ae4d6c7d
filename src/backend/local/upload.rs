//! A save to the local store: a temporary file in `tmp/`, written, synced, and linked to the
//! entry's name only if that name does not exist yet; and the sweep of what killed saves left.
//! A save holds an advisory lock on its file, so a store shared by containers (where another's
//! pid means nothing here) never loses a live upload.

use crate::backend::{BackendError, Committed, ErrorKind, Upload};
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const UPLOAD_PREFIX: &str = "upload-";
/// A temporary upload older than this is a leftover whatever its name says.
const STALE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The start of a temporary file's name in `tmp/`: this process's, which a sweep leaves alone
/// while the process lives.
pub(super) fn upload_prefix() -> String {
    format!("{UPLOAD_PREFIX}{}-", std::process::id())
}

/// Temporary files are private; what the store keeps is readable like any other file the user
/// makes.
fn readable_by_all(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = 0o666 & !crate::file_mode::current_umask();
        let _ = fs::set_permissions(path, fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Remove the temporary uploads in `dir` that no process is writing: not locked, and either
/// named for a process that is gone or older than [`STALE_AFTER`].
pub(super) fn sweep_stale_uploads(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(UPLOAD_PREFIX)) else { continue };
        let pid = rest.split_once('-').and_then(|(pid, _)| pid.parse::<u32>().ok());
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > STALE_AFTER));
        if !(old || pid.is_some_and(|pid| !crate::process::alive(pid))) {
            continue;
        }
        let path = entry.path();
        let Ok(file) = File::open(&path) else { continue };
        if file.try_lock().is_ok() {
            let _ = fs::remove_file(&path);
        }
    }
}

pub(super) struct LocalUpload {
    writer: BufWriter<File>,
    tmp: Option<tempfile::NamedTempFile>,
    final_path: PathBuf,
    written: u64,
    root: PathBuf,
    saving_ref: String,
}

impl Write for LocalUpload {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.writer.write(buf).map_err(|e| self.store_error(e))?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush().map_err(|e| self.store_error(e))
    }
}

impl LocalUpload {
    /// The save into `tmp` (open as `file`, locked) of the entry at `final_path`, recorded as
    /// saved on `saving_ref` in the store at `root`.
    pub(super) fn new(
        file: File,
        tmp: tempfile::NamedTempFile,
        final_path: PathBuf,
        root: PathBuf,
        saving_ref: String,
    ) -> Self {
        let writer = BufWriter::with_capacity(1 << 20, file);
        Self { writer, tmp: Some(tmp), final_path, written: 0, root, saving_ref }
    }

    /// A write failure of the store (disk full) is backend trouble, not a problem of the files.
    fn store_error(&self, e: io::Error) -> io::Error {
        BackendError::new(ErrorKind::Fatal, format!("cannot write to the local cache `{}`", self.final_path.display()))
            .with_source(e)
            .into_io()
    }
}

impl Upload for LocalUpload {
    fn commit(mut self: Box<Self>) -> Result<Committed, BackendError> {
        let fatal =
            |what: &str, e: io::Error| BackendError::new(ErrorKind::Fatal, format!("cannot {what}")).with_source(e);
        self.writer.flush().map_err(|e| fatal("write the entry", e))?;
        self.writer.get_ref().sync_all().map_err(|e| fatal("sync the entry", e))?;
        let tmp = self.tmp.take().expect("committed once");
        readable_by_all(tmp.path());
        match tmp.persist_noclobber(&self.final_path) {
            Ok(_) => {
                let name = self.final_path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                // Without its record the entry is one of an unknown ref: kept by every ref's prune.
                super::meta::record_save(&self.root, name, &self.saving_ref);
                Ok(Committed::Saved)
            }
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(Committed::Exists),
            Err(e) => Err(fatal(&format!("store `{}`", self.final_path.display()), e.error)),
        }
    }
}
