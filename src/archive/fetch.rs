//! The files of an entry whose content is in packs (docs/content.md): which are already in
//! place ([`in_place`]: what is at the destination, reached through directory handles that never
//! follow a link, is a plain file of the manifest's mode, size and SHA-256 — read and hashed
//! every time), and the staging the others are fetched into ([`StageSink`]: each file created
//! in its root's staging directory through the handle of its staged parent, written at its
//! blobs' offsets by several threads at once, then given its mode).

use super::beneath::{self, Tree};
use super::unpack::{Staged, UnpackError};
use crate::content::restore::{OpenFiles, Sink, Wanted, in_place_all};
use cap_std::fs::Dir;
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Whether each of `files` (an entry's index in `staged.entries`, and what it must hold) is in
/// place at its destination, on `threads` threads.
pub(super) fn in_place(staged: &Staged, files: &[(usize, Wanted)], threads: usize) -> Result<Vec<bool>, UnpackError> {
    let trees: Vec<Mutex<Tree>> =
        staged.sites.iter().map(|site| Mutex::new(Tree::new(Arc::clone(&site.anchor)))).collect();
    let wanted: Vec<Wanted> = files.iter().map(|(_, w)| *w).collect();
    let open = |i: usize| -> io::Result<Option<std::fs::File>> {
        let entry = &staged.entries[files[i].0];
        let site = &staged.sites[entry.root];
        // From the nearest existing directory the restore began at, down to the file.
        let mut parts: Vec<&str> = site.missing.iter().map(String::as_str).collect();
        parts.extend(entry.rel.split('/').filter(|p| !p.is_empty()));
        let Some((leaf, above)) = parts.split_last() else { return Ok(None) };
        let dir = match trees[entry.root].lock().unwrap_or_else(|e| e.into_inner()).dir(&above.join("/")) {
            Ok(dir) => dir,
            // A link, a file or nothing on the way: nothing of ours is there.
            Err(_) => return Ok(None),
        };
        Ok(match beneath::open_plain_file(&dir, leaf) {
            Ok(Some((file, mode))) if same_mode(mode, entry.mode) => Some(file),
            // Anything else, or what cannot be opened, is replaced by the restore.
            _ => None,
        })
    };
    in_place_all(&wanted, threads, &open)
        .map_err(|source| UnpackError::Io { path: staged.sites[0].real.clone(), source })
}

/// Whether the permission bits `found` on disk are the manifest's `mode`: on Windows, whose one
/// permission fact is the read-only attribute, whether both are read-only or neither is.
fn same_mode(found: u32, mode: u32) -> bool {
    if cfg!(windows) { (found & 0o200 == 0) == (mode & 0o200 == 0) } else { found == mode }
}

/// One file to fetch: its staged parent's handle, its name there, its path (for messages) and
/// its mode.
struct Target {
    dir: Arc<Dir>,
    name: String,
    path: PathBuf,
    mode: u32,
}

/// The staging of the files a restore fetches, in the order of its wanted files.
pub(super) struct StageSink {
    targets: Vec<Target>,
    files: OpenFiles,
    umask: u32,
}

impl StageSink {
    /// The staging of entries `entries` (indices in `staged.entries`), their staged parent
    /// directories made (an entry's own directory members are made already).
    pub(super) fn prepare(staged: &mut Staged, entries: &[usize]) -> Result<Self, UnpackError> {
        let mut targets = Vec::with_capacity(entries.len());
        for &index in entries {
            let (root, rel, mode) = {
                let e = &staged.entries[index];
                (e.root, e.rel.clone(), e.mode)
            };
            // A file root replaces whatever is at its destination: its staging is beside it.
            let (dir, name, path) = staged.staged_parent(root, &rel, !rel.is_empty())?;
            targets.push(Target { dir, name, path, mode });
        }
        let files = OpenFiles::new(targets.len());
        Ok(Self { targets, files, umask: crate::file_mode::current_umask() })
    }

    fn make(&self, file: usize) -> io::Result<std::fs::File> {
        let target = &self.targets[file];
        beneath::create_file_rw(&target.dir, &target.name, target.mode | 0o200)
    }

    /// Where wanted file `file` is staged (for messages).
    pub(super) fn path(&self, file: usize) -> &std::path::Path {
        &self.targets[file].path
    }
}

impl Sink for StageSink {
    fn write_at(&self, file: usize, offset: u64, bytes: &[u8]) -> io::Result<()> {
        crate::content::restore::write_all_at(&*self.files.get_or_make(file, || self.make(file))?, bytes, offset)
    }

    fn read_back(&self, file: usize) -> io::Result<Box<dyn Read + '_>> {
        use std::io::Seek;
        let mut clone = self.files.get(file)?.try_clone()?;
        clone.seek(io::SeekFrom::Start(0))?;
        Ok(Box::new(clone))
    }

    /// Give the file its mode (the owner could write while it was filled), and close it.
    fn done(&self, file: usize) -> io::Result<()> {
        let (target, umask) = (&self.targets[file], self.umask);
        let handle = self.files.get_or_make(file, || self.make(file))?;
        #[cfg(unix)]
        if (target.mode | 0o200) & !umask != target.mode {
            use std::os::unix::fs::PermissionsExt;
            handle.set_permissions(std::fs::Permissions::from_mode(target.mode))?;
        }
        #[cfg(not(unix))]
        {
            let _ = umask;
            if target.mode & 0o200 == 0 {
                let mut permissions = handle.metadata()?.permissions();
                permissions.set_readonly(true);
                handle.set_permissions(permissions)?;
            }
        }
        drop(handle);
        self.files.close(file);
        Ok(())
    }
}
