//! Restore side: extract an untrusted archive into staging, verify it completely, then move it
//! into place — or leave every target exactly as it was.
//!
//! What is refused, before anything leaves staging: names that are absolute, contain `..`, or
//! lie outside every `path` root; duplicates; hard links, devices, FIFOs; setuid/setgid/sticky
//! bits; symlinks whose target leaves their root; entries beneath a non-directory; data after
//! the manifest or after the end of the archive; any difference from the manifest (extra or
//! missing entries, sizes, hashes, modes, link targets); a wrong key; a missing `required` path.

use super::codec::{Compression, decoder};
use super::safety::{check_entry_name, check_symlink_target};
use super::staging;
use super::{FINGERPRINT_NAME, MANIFEST_NAME};
use crate::fingerprint::FingerprintRecord;
use crate::manifest::{EntryKind, Manifest, ManifestEntry, Mismatch, entry_path};
use crate::outcome::MissReason;
use crate::paths::PatternSet;

use super::writers::{Failure, Writers};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

const MAX_FINGERPRINT_BYTES: u64 = 16 << 20;
/// Largest piece of a file handed to a writer at once.
const CHUNK: u64 = 1 << 20;

/// Writer threads: file creation is system-call bound and runs in parallel even on few cores.
fn writer_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 4)
}

fn io_failure((path, source): Failure) -> UnpackError {
    UnpackError::Io { path, source }
}
const MAX_MANIFEST_BYTES: u64 = 512 << 20;

#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("corrupt archive: {detail}")]
    Corrupt {
        detail: String,
        #[source]
        source: Option<io::Error>,
    },
    #[error("refused archive entry `{entry}`: {detail}")]
    Unsafe { entry: String, detail: String },
    #[error("archive does not match its manifest: {0}")]
    Mismatch(Mismatch),
    #[error("required path `{path}` is not in the entry")]
    Incomplete { path: String },
    #[error("{cause}; undoing it failed too, the previous files are kept in {kept}: {failures}")]
    RollbackFailed { cause: Box<UnpackError>, kept: String, failures: String },
    #[error("cannot write `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl UnpackError {
    pub fn miss_reason(&self) -> MissReason {
        match self {
            UnpackError::Corrupt { .. } | UnpackError::Unsafe { .. } => MissReason::Corrupt,
            UnpackError::Mismatch(_) => MissReason::ManifestMismatch,
            UnpackError::Incomplete { .. } => MissReason::Incomplete,
            UnpackError::Io { .. } | UnpackError::RollbackFailed { .. } => MissReason::IoError,
        }
    }

    fn corrupt(detail: impl Into<String>, source: io::Error) -> Self {
        UnpackError::Corrupt { detail: detail.into(), source: Some(source) }
    }
}

/// Where a restore may write and what it must find.
pub struct RestorePlan<'a> {
    pub key: &'a str,
    /// The `path` lines: root `i` is `paths.includes[i]`. Entries of a glob line must match
    /// the glob (or lie under a matching directory), and nothing a `!` line excludes is written.
    pub paths: &'a PatternSet,
    /// Paths that must be in the entry.
    pub required: &'a [PathBuf],
    pub compression: Compression,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RestoreStats {
    /// Files and symlinks.
    pub files: usize,
    pub dirs: usize,
    /// Bytes of file content.
    pub bytes: u64,
}

#[derive(Debug)]
struct StagedEntry {
    root: usize,
    rel: String,
    kind: EntryKind,
    mode: u32,
    size: u64,
    sha256: Option<String>,
    target: Option<String>,
}

/// A verified archive, extracted into staging and not yet in place. Dropping it removes the
/// staging directories.
pub struct Staged {
    roots: Vec<PathBuf>,
    staging: Vec<Option<PathBuf>>,
    keep_staging: bool,
    entries: Vec<StagedEntry>,
    pub record: FingerprintRecord,
    pub manifest: Manifest,
    pub stats: RestoreStats,
}

/// Read, check and stage an archive from `reader` (compressed bytes).
pub fn unpack<R: Read>(reader: R, plan: &RestorePlan) -> Result<Staged, UnpackError> {
    let roots: Vec<PathBuf> = plan.paths.includes.iter().map(|p| p.base.clone()).collect();
    let buffered = BufReader::with_capacity(1 << 20, reader);
    let stream = decoder(plan.compression, buffered).map_err(|e| UnpackError::corrupt("cannot start decoding", e))?;
    let mut archive = tar::Archive::new(stream);
    let mut staged = Staged {
        roots: roots.clone(),
        staging: (0..roots.len()).map(|_| None).collect(),
        keep_staging: false,
        entries: Vec::new(),
        record: placeholder_record(),
        manifest: Manifest { exact_cache_manifest: 0, key: String::new(), roots: vec![], entries: vec![] },
        stats: RestoreStats::default(),
    };
    let mut kinds: HashMap<(usize, String), EntryKind> = HashMap::new();
    let mut made_dirs: HashSet<PathBuf> = HashSet::new();
    let mut writers = Writers::new(writer_threads());
    let mut have_record = false;
    let mut manifest: Option<Manifest> = None;
    let mut buf = vec![0u8; 1 << 20];

    let entries = archive.entries().map_err(|e| UnpackError::corrupt("unreadable tar stream", e))?;
    for (index, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|e| UnpackError::corrupt("unreadable tar header", e))?;
        let name_bytes = entry.path_bytes().into_owned();
        let name = String::from_utf8(name_bytes).map_err(|e| UnpackError::Unsafe {
            entry: String::from_utf8_lossy(e.as_bytes()).into_owned(),
            detail: "name is not UTF-8".into(),
        })?;
        let entry_type = entry.header().entry_type();
        if manifest.is_some() {
            return Err(UnpackError::Unsafe { entry: name, detail: "entry after the manifest".into() });
        }
        if index == 0 {
            if name != FINGERPRINT_NAME || !entry_type.is_file() {
                return Err(UnpackError::Corrupt {
                    detail: format!("first member is `{name}`, not the fingerprint"),
                    source: None,
                });
            }
            let bytes = read_small(&mut entry, MAX_FINGERPRINT_BYTES, &name)?;
            let record = FingerprintRecord::from_json(&bytes)
                .map_err(|e| UnpackError::Corrupt { detail: format!("bad fingerprint member: {e}"), source: None })?;
            if record.key != plan.key {
                return Err(UnpackError::Mismatch(Mismatch::Key {
                    manifest: record.key,
                    expected: plan.key.to_owned(),
                }));
            }
            staged.record = record;
            have_record = true;
            continue;
        }
        if name == MANIFEST_NAME && entry_type.is_file() {
            let bytes = read_small(&mut entry, MAX_MANIFEST_BYTES, &name)?;
            let parsed: Manifest = serde_json::from_slice(&bytes)
                .map_err(|e| UnpackError::Corrupt { detail: format!("bad manifest: {e}"), source: None })?;
            manifest = Some(parsed);
            continue;
        }
        let refuse = |detail: &str| UnpackError::Unsafe { entry: name.clone(), detail: detail.to_owned() };
        let (root, rel) = check_entry_name(&name).map_err(|d| refuse(&d))?;
        if root >= roots.len() {
            return Err(refuse(&format!("belongs to `path` root {root}, but there are only {}", roots.len())));
        }
        check_covered(plan.paths, root, &rel).map_err(|d| refuse(&d))?;
        let kind = match entry_type {
            tar::EntryType::Regular | tar::EntryType::Continuous if !name.ends_with('/') => EntryKind::File,
            tar::EntryType::Directory => EntryKind::Dir,
            tar::EntryType::Symlink => EntryKind::Symlink,
            tar::EntryType::Link => return Err(refuse("hard links are not allowed")),
            tar::EntryType::Char | tar::EntryType::Block => {
                return Err(refuse("device files are not allowed"));
            }
            tar::EntryType::Fifo => return Err(refuse("FIFOs are not allowed")),
            other => return Err(refuse(&format!("unsupported entry type {other:?}"))),
        };
        let mode = entry.header().mode().map_err(|e| UnpackError::corrupt(format!("bad mode for `{name}`"), e))?;
        if mode & 0o7000 != 0 {
            return Err(refuse("setuid, setgid or sticky bit"));
        }
        let mode = mode & 0o777;
        if kinds.contains_key(&(root, rel.clone())) {
            return Err(refuse("duplicate entry"));
        }
        if rel.is_empty() && kind == EntryKind::Symlink {
            return Err(refuse("a `path` root cannot be a symlink"));
        }
        // Every ancestor inside the root must be a directory we staged (or will create).
        let mut ancestor = String::new();
        let parts: Vec<&str> = if rel.is_empty() { vec![] } else { rel.split('/').collect() };
        for (i, part) in parts.iter().enumerate() {
            let check = |a: &str| match kinds.get(&(root, a.to_owned())) {
                Some(EntryKind::Dir) | None => Ok(()),
                Some(_) => Err(refuse(&format!("lies beneath `{}`, which is not a directory", entry_path(root, a)))),
            };
            check(&ancestor)?;
            if i + 1 < parts.len() {
                if !ancestor.is_empty() {
                    ancestor.push('/');
                }
                ancestor.push_str(part);
            }
        }

        // A file root replaces whatever is at its destination, so its staging cannot live inside.
        let stage = staged.stage_root(root, !(rel.is_empty() && kind != EntryKind::Dir))?;
        let path = if rel.is_empty() { stage.clone() } else { stage.join(&rel) };
        // Parents are created once: an explicit directory entry, or the first file below it.
        if let Some(parent) = path.parent()
            && !made_dirs.contains(parent)
        {
            fs::create_dir_all(parent).map_err(|source| UnpackError::Io { path: parent.to_owned(), source })?;
            made_dirs.insert(parent.to_owned());
        }
        let mut record = StagedEntry { root, rel: rel.clone(), kind, mode, size: 0, sha256: None, target: None };
        match kind {
            EntryKind::Dir => {
                match fs::create_dir(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => {}
                    Err(source) => return Err(UnpackError::Io { path, source }),
                }
                made_dirs.insert(path);
            }
            EntryKind::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .ok_or_else(|| refuse("symlink without a target"))?;
                check_symlink_target(&rel, &target).map_err(|d| refuse(&d))?;
                make_symlink(&target, &path).map_err(|source| UnpackError::Io { path: path.clone(), source })?;
                record.target = Some(target);
            }
            EntryKind::File => {
                let mtime = entry.header().mtime().ok().map(|m| m as i64);
                writers.begin(staged.entries.len(), path.clone(), mode, mtime).map_err(io_failure)?;
                let mut size = 0u64;
                loop {
                    // Small files go in one piece; large ones in chunks, read as they decode.
                    let mut chunk = vec![0u8; (entry.size() - size).min(CHUNK) as usize];
                    if chunk.is_empty() {
                        break;
                    }
                    let mut filled = 0;
                    while filled < chunk.len() {
                        match entry.read(&mut chunk[filled..]) {
                            Ok(0) => break,
                            Ok(n) => filled += n,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(UnpackError::corrupt(format!("cannot read `{name}`"), e)),
                        }
                    }
                    if filled == 0 {
                        break;
                    }
                    chunk.truncate(filled);
                    size += filled as u64;
                    writers.data(chunk).map_err(io_failure)?;
                }
                writers.end().map_err(io_failure)?;
                if size != entry.size() {
                    return Err(UnpackError::Corrupt { detail: format!("`{name}` is truncated"), source: None });
                }
                staged.stats.files += 1;
                staged.stats.bytes += size;
            }
        }
        match kind {
            EntryKind::Dir => staged.stats.dirs += 1,
            EntryKind::Symlink => staged.stats.files += 1,
            EntryKind::File => {}
        }
        kinds.insert((root, rel), kind);
        staged.entries.push(record);
    }

    // Every file is written: take their sizes and hashes.
    for written in writers.finish().map_err(io_failure)? {
        let e = &mut staged.entries[written.index];
        e.size = written.size;
        e.sha256 = Some(written.sha256);
    }

    // Everything after the tar end marker must be zero padding; reading to the end also makes
    // the decoder check the last frame's checksum.
    let mut rest = archive.into_inner();
    loop {
        let n = match rest.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(UnpackError::corrupt("unreadable end of archive", e)),
        };
        if buf[..n].iter().any(|b| *b != 0) {
            return Err(UnpackError::Corrupt { detail: "data after the end of the archive".into(), source: None });
        }
    }

    if !have_record {
        return Err(UnpackError::Corrupt { detail: "empty archive".into(), source: None });
    }
    let manifest = manifest.ok_or_else(|| UnpackError::Corrupt {
        detail: "no manifest at the end (truncated archive?)".into(),
        source: None,
    })?;
    manifest.check_header(plan.key, roots.len()).map_err(UnpackError::Mismatch)?;
    let actual: Vec<ManifestEntry> = staged
        .entries
        .iter()
        .map(|e| ManifestEntry {
            path: entry_path(e.root, &e.rel),
            kind: e.kind,
            mode: e.mode,
            size: e.size,
            sha256: e.sha256.clone(),
            target: e.target.clone(),
        })
        .collect();
    manifest.verify(&actual).map_err(UnpackError::Mismatch)?;
    staged.manifest = manifest;

    for required in plan.required {
        let found = roots.iter().enumerate().any(|(i, base)| {
            let Ok(rel) = required.strip_prefix(base) else {
                return false;
            };
            let rel = rel.to_string_lossy().replace('\\', "/");
            kinds.contains_key(&(i, rel.clone()))
                || (!rel.is_empty() && kinds.keys().any(|(r, k)| *r == i && k.starts_with(&format!("{rel}/"))))
        });
        if !found {
            return Err(UnpackError::Incomplete { path: required.to_string_lossy().into_owned() });
        }
    }
    Ok(staged)
}

/// An entry of root `root` at `rel` must be something that root's `path` line could have
/// saved: under a glob line it must match the glob or lie under a matching directory (the
/// glob's base itself is never an entry), and no `!` line may exclude it or its parents.
fn check_covered(paths: &PatternSet, root: usize, rel: &str) -> Result<(), String> {
    let pattern = &paths.includes[root];
    let dest = if rel.is_empty() { pattern.base.clone() } else { pattern.base.join(rel) };
    let within_root = || dest.ancestors().take_while(|a| a.starts_with(&pattern.base) && *a != pattern.base);
    if let Some(glob) = &pattern.glob {
        if rel.is_empty() {
            return Err(format!("the base of glob `{}` cannot be an entry", pattern.line));
        }
        if !within_root().any(|a| glob.is_match(a)) {
            return Err(format!("does not match `path` line `{}`", pattern.line));
        }
    }
    if paths.is_excluded(&dest) || within_root().any(|a| paths.is_excluded(a)) {
        return Err("is excluded by a `!` line of `path`".into());
    }
    Ok(())
}

/// Read only the first member of an archive: its fingerprint record.
pub fn read_fingerprint<R: Read>(reader: R, compression: Compression) -> Result<FingerprintRecord, UnpackError> {
    let stream =
        decoder(compression, BufReader::new(reader)).map_err(|e| UnpackError::corrupt("cannot start decoding", e))?;
    let mut archive = tar::Archive::new(stream);
    let mut entries = archive.entries().map_err(|e| UnpackError::corrupt("unreadable tar stream", e))?;
    let mut first = entries
        .next()
        .ok_or_else(|| UnpackError::Corrupt { detail: "empty archive".into(), source: None })?
        .map_err(|e| UnpackError::corrupt("unreadable tar header", e))?;
    let name = String::from_utf8_lossy(&first.path_bytes()).into_owned();
    if name != FINGERPRINT_NAME {
        return Err(UnpackError::Corrupt {
            detail: format!("first member is `{name}`, not the fingerprint"),
            source: None,
        });
    }
    let bytes = read_small(&mut first, MAX_FINGERPRINT_BYTES, &name)?;
    FingerprintRecord::from_json(&bytes)
        .map_err(|e| UnpackError::Corrupt { detail: format!("bad fingerprint member: {e}"), source: None })
}

fn read_small<R: Read>(entry: &mut tar::Entry<'_, R>, max: u64, name: &str) -> Result<Vec<u8>, UnpackError> {
    let size = entry.size();
    if size > max {
        return Err(UnpackError::Corrupt { detail: format!("`{name}` is too large ({size} bytes)"), source: None });
    }
    // The header's size is untrusted: grow with what actually arrives.
    let mut bytes = Vec::with_capacity(size.min(1 << 20) as usize);
    entry.read_to_end(&mut bytes).map_err(|e| UnpackError::corrupt(format!("cannot read `{name}`"), e))?;
    if bytes.len() as u64 != size {
        return Err(UnpackError::Corrupt { detail: format!("`{name}` is truncated"), source: None });
    }
    Ok(bytes)
}

fn placeholder_record() -> FingerprintRecord {
    FingerprintRecord::new("", "", Default::default())
}

#[cfg(unix)]
fn make_symlink(target: &str, path: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, path)
}

#[cfg(not(unix))]
fn make_symlink(target: &str, path: &Path) -> io::Result<()> {
    std::os::windows::fs::symlink_file(target, path)
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> io::Result<()> {
    Ok(())
}

#[cfg(unix)]
fn get_mode(meta: &fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn get_mode(_meta: &fs::Metadata) -> u32 {
    0o755
}

/// One step of placement, recorded so it can be undone.
enum Undo {
    Placed { dest: PathBuf, staged: PathBuf },
    Backup { dest: PathBuf, backup: PathBuf },
    CreatedDir(PathBuf),
    Mode { path: PathBuf, mode: u32 },
}

impl Staged {
    /// The staging twin of root `i`'s destination, created on first use: inside the
    /// destination when it is an existing, writable directory, else in its nearest existing
    /// ancestor, so that moves are renames on one filesystem.
    fn stage_root(&mut self, i: usize, inside_ok: bool) -> Result<PathBuf, UnpackError> {
        if self.staging[i].is_none() {
            let dest = &self.roots[i];
            let mut anchor: &Path = if inside_ok && dest.is_dir() { dest } else { dest.parent().unwrap_or(dest) };
            let created = loop {
                if anchor.is_dir() {
                    match staging::create(anchor) {
                        Ok(dir) => break dir,
                        // A read-only destination: stage next to it instead.
                        Err(e) if e.kind() == io::ErrorKind::PermissionDenied && anchor == dest.as_path() => {}
                        Err(source) => return Err(UnpackError::Io { path: anchor.to_owned(), source }),
                    }
                }
                anchor = anchor.parent().ok_or_else(|| UnpackError::Io {
                    path: dest.clone(),
                    source: io::Error::new(io::ErrorKind::NotFound, "no existing ancestor directory"),
                })?;
            };
            self.staging[i] = Some(created);
        }
        Ok(self.staging[i].as_ref().expect("just created").join("root"))
    }

    /// Move everything into place. On failure every completed step is undone, so the targets
    /// are exactly as they were, and the error is returned. Should undoing fail too, the
    /// staging directory (holding the previous files) is kept and the error names it.
    pub fn commit(mut self) -> Result<RestoreStats, UnpackError> {
        let mut journal = Vec::new();
        match self.place_all(&mut journal) {
            Ok(()) => Ok(self.stats),
            Err(cause) => {
                let failures: Vec<String> = journal.into_iter().rev().filter_map(|step| undo(step).err()).collect();
                if failures.is_empty() {
                    return Err(cause);
                }
                self.keep_staging = true;
                let kept =
                    self.staging.iter().flatten().map(|p| format!("`{}`", p.display())).collect::<Vec<_>>().join(", ");
                Err(UnpackError::RollbackFailed { cause: Box::new(cause), kept, failures: failures.join("; ") })
            }
        }
    }

    fn place_all(&mut self, journal: &mut Vec<Undo>) -> Result<(), UnpackError> {
        let io_err = |path: &Path| {
            let path = path.to_owned();
            move |source| UnpackError::Io { path, source }
        };
        let mut backups = 0usize;
        let mut dir_modes: Vec<(PathBuf, u32)> = Vec::new();
        let mut relaxed: Vec<(PathBuf, u32)> = Vec::new();
        for i in 0..self.roots.len() {
            let Some(staging) = self.staging[i].clone() else {
                continue;
            };
            let stage = staging.join("root");
            let base = self.roots[i].clone();
            let mut moved_subtree: Option<String> = None;
            for e in self.entries.iter().filter(|e| e.root == i) {
                let dest = if e.rel.is_empty() { base.clone() } else { base.join(&e.rel) };
                if e.kind == EntryKind::Dir {
                    dir_modes.push((dest.clone(), e.mode));
                }
                if let Some(prefix) = &moved_subtree {
                    let within = prefix.is_empty()
                        || (e.rel.starts_with(prefix.as_str()) && e.rel.as_bytes().get(prefix.len()) == Some(&b'/'));
                    if within {
                        continue;
                    }
                    moved_subtree = None;
                }
                let source = if e.rel.is_empty() { stage.clone() } else { stage.join(&e.rel) };
                let existing = if e.rel.is_empty() { fs::metadata(&dest) } else { fs::symlink_metadata(&dest) };
                match existing {
                    Ok(meta) if e.kind == EntryKind::Dir && meta.is_dir() => continue, // merge into it
                    Ok(_) => {
                        relax_parent(&dest, journal, &mut relaxed)?;
                        let backup = staging.join(format!("backup-{backups}"));
                        backups += 1;
                        fs::rename(&dest, &backup).map_err(io_err(&dest))?;
                        journal.push(Undo::Backup { dest: dest.clone(), backup });
                    }
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {
                        create_parents(&dest, journal, &mut relaxed)?;
                        relax_parent(&dest, journal, &mut relaxed)?;
                    }
                    Err(err) => {
                        return Err(UnpackError::Io { path: dest, source: err });
                    }
                }
                fs::rename(&source, &dest).map_err(io_err(&dest))?;
                journal.push(Undo::Placed { dest, staged: source });
                if e.kind == EntryKind::Dir {
                    moved_subtree = Some(e.rel.clone());
                }
            }
        }
        // Directory modes last, deepest first, so read-only directories do not block children.
        for (path, mode) in dir_modes.iter().rev() {
            let old = fs::metadata(path).map_err(io_err(path))?;
            if get_mode(&old) != *mode {
                journal.push(Undo::Mode { path: path.clone(), mode: get_mode(&old) });
                set_mode(path, *mode).map_err(io_err(path))?;
            }
        }
        // Directories that were opened for writing and are not part of the entry get their
        // own mode back.
        for (path, mode) in relaxed.iter().rev() {
            if !dir_modes.iter().any(|(p, _)| p == path) {
                set_mode(path, *mode).map_err(io_err(path))?;
            }
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if self.keep_staging {
            return;
        }
        for dir in self.staging.iter().flatten() {
            let _ = staging::force_remove(dir);
        }
    }
}

/// Give `dest`'s parent owner write permission when it lacks it (a read-only directory from an
/// earlier restore), recording the old mode.
fn relax_parent(dest: &Path, journal: &mut Vec<Undo>, relaxed: &mut Vec<(PathBuf, u32)>) -> Result<(), UnpackError> {
    let Some(parent) = dest.parent() else { return Ok(()) };
    if let Some(old) =
        staging::make_writable(parent).map_err(|source| UnpackError::Io { path: parent.to_owned(), source })?
    {
        journal.push(Undo::Mode { path: parent.to_owned(), mode: old });
        relaxed.push((parent.to_owned(), old));
    }
    Ok(())
}

fn create_parents(dest: &Path, journal: &mut Vec<Undo>, relaxed: &mut Vec<(PathBuf, u32)>) -> Result<(), UnpackError> {
    let mut missing = Vec::new();
    let mut p = dest.parent();
    while let Some(dir) = p {
        match fs::symlink_metadata(dir) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(dir.to_owned()),
            Err(source) => {
                return Err(UnpackError::Io { path: dir.to_owned(), source });
            }
        }
        p = dir.parent();
    }
    for dir in missing.into_iter().rev() {
        relax_parent(&dir, journal, relaxed)?;
        fs::create_dir(&dir).map_err(|source| UnpackError::Io { path: dir.clone(), source })?;
        journal.push(Undo::CreatedDir(dir));
    }
    Ok(())
}

fn undo(step: Undo) -> Result<(), String> {
    let fail = |what: &str, path: &Path, e: io::Error| Err(format!("could not {what} `{}`: {e}", path.display()));
    match step {
        Undo::Placed { dest, staged } => {
            if fs::rename(&dest, &staged).is_err() {
                let removed = fs::remove_dir_all(&dest).or_else(|_| fs::remove_file(&dest));
                if let Err(e) = removed {
                    return fail("remove the restored", &dest, e);
                }
            }
            Ok(())
        }
        Undo::Backup { dest, backup } => match fs::rename(&backup, &dest) {
            Ok(()) => Ok(()),
            Err(e) => fail("put back the previous", &dest, e),
        },
        Undo::CreatedDir(dir) => {
            let _ = fs::remove_dir(&dir);
            Ok(())
        }
        Undo::Mode { path, mode } => match set_mode(&path, mode) {
            Ok(()) => Ok(()),
            Err(e) => fail("reset the mode of", &path, e),
        },
    }
}
