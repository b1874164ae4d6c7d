//! Restore side: extract an untrusted archive into staging, verify it completely, then move it
//! into place — or leave every target exactly as it was.
//!
//! What is refused, before anything leaves staging: names that are absolute, contain `..`, or
//! lie outside every `path` root; duplicates; hard links, devices, FIFOs; setuid/setgid/sticky
//! bits; symlinks whose target leaves their root; entries beneath a non-directory, of their own
//! root or of another one that overlaps it ([`super::claims`]); data after the manifest or after
//! the end of the archive; any difference from the manifest (extra or missing entries, sizes,
//! hashes, modes, link targets); a wrong key; a missing `required` path.
//!
//! Those checks read names as text. What makes a restore unable to write outside its roots is
//! that every file-system call goes through a directory handle and never follows a symlink
//! ([`super::beneath`]); each root's location is resolved once, before anything is placed.
//!
//! [`unpack`] runs the steps of [`Stager`]: stage each entry, check the trailer, verify against
//! the manifest, check `required`; [`Staged::commit`] (in `place`) puts everything in place.

use super::beneath::{self, Tree};
use super::claims::{Claims, Granted};
use super::codec::{Compression, decoder};
use super::records::Records;
use super::safety::{check_covered, check_entry_name, check_link_covered, check_symlink_target};
use super::staging;
use super::writers::{Failure, NewFile, Writers};
use super::{FINGERPRINT_NAME, MANIFEST_NAME};
use crate::content::map::{CONTENT_NAME, ContentMap, PACKS_PAX, parse_packs_record};
use crate::content::restore::{FetchError, FetchPlan, Reads, Wanted, fetch};
use crate::content::store::PackStore;
use crate::content::{Hash, PackName};
use crate::fingerprint::FingerprintRecord;
use crate::manifest::{EntryKind, EntryPath, Generation, Manifest, ManifestEntry, Mismatch};
use crate::outcome::MissReason;
use crate::paths::{Pattern, PatternSet};
use cap_std::fs::Dir;
use std::collections::HashSet;
use std::fs;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MAX_FINGERPRINT_BYTES: u64 = 16 << 20;
const MAX_MANIFEST_BYTES: u64 = 512 << 20;
/// What a manifest may spend on one entry besides its name and link target (escaped as JSON):
/// the field names, kind, mode, a 20-digit size and a sha256 take 163 bytes.
const MANIFEST_BYTES_PER_ENTRY: u64 = 192;
/// What a manifest may spend besides its entries and root lines: the format, key and stack.
const MANIFEST_BYTES_BASE: u64 = 64 << 10;
/// The largest content map a restore reads (about half a million blobs).
const MAX_CONTENT_BYTES: u64 = 64 << 20;
/// What a content map justifies of a manifest, per byte of the map: its files are not members, so
/// they are justified by the blobs the map lists (a manifest's line for a file is about the size
/// of the map's line for its blob, and files may share blobs).
const MANIFEST_BYTES_PER_MAP_BYTE: u64 = 8;
/// Room besides for files without blobs of their own (empty files, copies of another file).
const MANIFEST_BYTES_BESIDE_MAP: u64 = 16 << 20;
/// The fewest bytes a manifest spends on one entry (`{"path":"0/x","kind":"file",…}` with a
/// SHA-256): how many entries a manifest of a given size can list.
const MANIFEST_MIN_ENTRY_BYTES: u64 = 96;
/// Largest piece of a file handed to a writer at once.
const CHUNK: u64 = 1 << 20;

/// Writer threads: file creation is system-call bound and runs in parallel even on few cores.
fn writer_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 4)
}

fn io_failure((path, source): Failure) -> UnpackError {
    UnpackError::Io { path, source }
}

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
    /// Something already in a target that a restore never removes: a directory that is not
    /// empty where the entry has a file or link, or a file or link outside what `path` covers.
    #[error("cannot restore into `{}`: {detail}; it is left as it is", path.display())]
    InTheWay { path: PathBuf, detail: String },
    #[error("{cause}; undoing it failed too, the previous files are kept in {kept}: {failures}")]
    RollbackFailed {
        #[source]
        cause: Box<UnpackError>,
        kept: String,
        failures: String,
    },
    #[error("cannot restore at `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The files' content could not be fetched from the store's packs: a pack missing, corrupt
    /// or short, a content map that does not lead to the manifest's files (`content-missing`),
    /// the store's trouble, or this disk's.
    #[error("cannot fetch the entry's files")]
    Content(#[source] FetchError),
}

impl UnpackError {
    pub fn miss_reason(&self) -> MissReason {
        match self {
            UnpackError::Corrupt { .. } | UnpackError::Unsafe { .. } => MissReason::Corrupt,
            UnpackError::Mismatch(_) => MissReason::ManifestMismatch,
            UnpackError::Incomplete { .. } => MissReason::Incomplete,
            UnpackError::Io { .. } | UnpackError::InTheWay { .. } | UnpackError::RollbackFailed { .. } => {
                MissReason::IoError
            }
            UnpackError::Content(e) if e.content_missing() => MissReason::ContentMissing,
            UnpackError::Content(FetchError::Sink(_)) => MissReason::IoError,
            UnpackError::Content(_) => MissReason::ServiceError,
        }
    }

    /// The pack whose absence or damage made the entry unusable: its replacement must not
    /// reference it.
    pub fn bad_pack(&self) -> Option<PackName> {
        match self {
            UnpackError::Content(e) => e.bad_pack(),
            _ => None,
        }
    }

    fn corrupt(detail: impl Into<String>, source: io::Error) -> Self {
        UnpackError::Corrupt { detail: detail.into(), source: Some(source) }
    }

    fn corrupt_detail(detail: impl Into<String>) -> Self {
        UnpackError::Corrupt { detail: detail.into(), source: None }
    }

    pub(super) fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| UnpackError::Io { path, source }
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
    /// Where the files of an entry whose content is in packs come from (`None`: a store that
    /// keeps entries whole; such an entry is then refused).
    pub packs: Option<&'a dyn PackStore>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RestoreStats {
    /// Files and symlinks.
    pub files: usize,
    pub dirs: usize,
    /// Bytes of file content.
    pub bytes: u64,
    /// The entry's files are in packs (not members of its archive).
    pub content: bool,
    /// Of `files`, those already in place (kept, not written), and their bytes.
    pub in_place: usize,
    pub in_place_bytes: u64,
    /// Bytes read from packs.
    pub fetched: u64,
}

#[derive(Debug)]
pub(super) struct StagedEntry {
    pub root: usize,
    pub rel: String,
    pub kind: EntryKind,
    pub mode: u32,
    pub size: u64,
    pub sha256: Option<String>,
    pub target: Option<String>,
    /// An identical entry of an earlier, overlapping root puts this in place.
    pub duplicate_of: Option<usize>,
    /// A file already in place with the manifest's content and mode: kept as it is.
    pub in_place: bool,
}

impl StagedEntry {
    fn entry_path(&self) -> EntryPath<'_> {
        EntryPath::new(self.root, &self.rel)
    }
}

/// Where root `i` lands, resolved once before anything is placed.
pub(super) struct Site {
    /// The destination with symlinks resolved: claims are judged on it.
    pub real: PathBuf,
    /// The nearest existing directory at or above the destination (the destination itself
    /// when it is a directory), opened through its resolved path when the restore began.
    pub anchor: Arc<Dir>,
    /// Components from `anchor` down to the destination; empty when the destination is an
    /// existing directory.
    pub missing: Vec<String>,
    /// The directory holding the destination, opened when the restore began (when the
    /// destination is an existing directory; else placement reaches it from `anchor`).
    pub above: Option<Arc<Dir>>,
    /// The root's `path` line.
    pub pattern: Pattern,
    /// Where other roots' own locations lie beneath this one's (relative paths, with their
    /// lines): a restore never replaces them or what leads to them.
    pub inner_roots: Vec<(String, String)>,
}

impl Site {
    /// Whether the root's `path` line covers `rel` ([`Pattern::covers`]).
    pub fn covers(&self, rel: &str) -> bool {
        self.pattern.covers(rel)
    }

    pub fn anchor_path(&self) -> &Path {
        self.real.ancestors().nth(self.missing.len()).unwrap_or(&self.real)
    }

    /// The `path` line of another root whose own location is `rel` or lies beneath it.
    pub fn root_location_at(&self, rel: &str) -> Option<&str> {
        self.inner_roots
            .iter()
            .find(|(r, _)| rel.is_empty() || r == rel || r.strip_prefix(rel).is_some_and(|rest| rest.starts_with('/')))
            .map(|(_, line)| line.as_str())
    }

    fn locate(pattern: &Pattern) -> Result<Self, UnpackError> {
        let base = &pattern.base;
        let mut existing = base.to_path_buf();
        let mut missing = Vec::new();
        loop {
            match fs::metadata(&existing) {
                Ok(meta) if meta.is_dir() => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(UnpackError::Io { path: existing, source }),
            }
            let name =
                existing.file_name().and_then(|n| n.to_str()).map(str::to_owned).ok_or_else(|| UnpackError::Io {
                    path: base.to_owned(),
                    source: io::Error::new(io::ErrorKind::NotFound, "no existing ancestor directory"),
                })?;
            missing.push(name);
            existing.pop();
        }
        missing.reverse();
        let real_anchor = fs::canonicalize(&existing).map_err(UnpackError::io(&existing))?;
        let anchor = beneath::open_trusted(&real_anchor).map_err(UnpackError::io(&real_anchor))?;
        let mut real = real_anchor;
        real.extend(&missing);
        let above = match (missing.is_empty(), real.parent()) {
            (true, Some(parent)) => Some(Arc::new(beneath::open_trusted(parent).map_err(UnpackError::io(parent))?)),
            _ => None,
        };
        let anchor = Arc::new(anchor);
        Ok(Self { real, anchor, missing, above, pattern: pattern.clone(), inner_roots: Vec::new() })
    }
}

/// A root's staging directory: `<holder>/<name>/root` is the root's twin, `backup-<n>` beside
/// it keeps what placement replaced.
pub(super) struct Stage {
    pub holder: Arc<Dir>,
    pub holder_path: PathBuf,
    pub name: String,
    /// Handles beneath the staging directory.
    pub tree: Tree,
}

impl Stage {
    pub fn path(&self) -> PathBuf {
        self.holder_path.join(&self.name)
    }
}

/// The staging twin of an entry, relative to its staging directory.
pub(super) fn staged_rel(rel: &str) -> String {
    if rel.is_empty() { "root".to_owned() } else { format!("root/{rel}") }
}

/// A verified archive, extracted into staging and not yet in place. Dropping it removes the
/// staging directories.
pub struct Staged {
    pub(super) sites: Vec<Site>,
    pub(super) stages: Vec<Option<Stage>>,
    pub(super) keep_staging: bool,
    pub(super) entries: Vec<StagedEntry>,
    pub record: FingerprintRecord,
    pub manifest: Manifest,
    pub stats: RestoreStats,
}

/// Read, check and stage an archive from `reader` (compressed bytes). Every header record is
/// bounded (`Records`), the fingerprint and the manifest by their own limits.
pub fn unpack<R: Read>(reader: R, plan: &RestorePlan) -> Result<Staged, UnpackError> {
    let buffered = BufReader::with_capacity(1 << 20, reader);
    let stream = decoder(plan.compression, buffered).map_err(|e| UnpackError::corrupt("cannot start decoding", e))?;
    let mut archive = tar::Archive::new(Records::new(stream));
    let mut stager = Stager::new(plan)?;
    let entries = archive.entries().map_err(|e| UnpackError::corrupt("unreadable tar stream", e))?;
    for (index, entry) in entries.enumerate() {
        let entry = entry.map_err(|e| UnpackError::corrupt("unreadable tar header", e))?;
        stager.member(index, entry)?;
    }
    stager.finish_files()?;
    check_trailer(archive.into_inner())?;
    stager.content_files()?;
    let staged = stager.verify()?;
    staged.check_required(plan)?;
    Ok(staged)
}

/// The staging steps of one restore.
struct Stager<'p> {
    /// Declared first, so dropped first: the writer threads are joined before dropping
    /// `staged` removes the staging directories they write into.
    writers: Option<Writers>,
    plan: &'p RestorePlan<'p>,
    staged: Staged,
    claims: Claims,
    /// Pairs of identical entries of overlapping roots, compared once their content is known.
    duplicates: Vec<(usize, usize)>,
    /// Roots whose own location is claimed already.
    root_claimed: Vec<bool>,
    have_record: bool,
    manifest: Option<Manifest>,
    /// The largest manifest the entries so far can justify: what ours would be, with room.
    manifest_budget: u64,
    /// The entry's content map: its files are in packs.
    content: Option<ContentMap>,
    /// File members staged (an archive with a content map has none).
    file_members: usize,
}

impl<'p> Stager<'p> {
    fn new(plan: &'p RestorePlan<'p>) -> Result<Self, UnpackError> {
        let mut sites = plan.paths.includes.iter().map(Site::locate).collect::<Result<Vec<_>, _>>()?;
        // Overlapping roots, as written and as resolved: each knows where the others are.
        for i in 0..sites.len() {
            for j in (0..sites.len()).filter(|&j| j != i) {
                let (outer, inner) = (&plan.paths.includes[i], &plan.paths.includes[j]);
                let rel = inner
                    .base
                    .strip_prefix(&outer.base)
                    .ok()
                    .or_else(|| sites[j].real.strip_prefix(&sites[i].real).ok())
                    .map(|r| r.to_string_lossy().replace('\\', "/"));
                if let Some(rel) = rel {
                    sites[i].inner_roots.push((rel, inner.line.clone()));
                }
            }
        }
        let stages = sites.iter().map(|_| None).collect();
        Ok(Self {
            plan,
            staged: Staged {
                sites,
                stages,
                keep_staging: false,
                entries: Vec::new(),
                record: placeholder_record(),
                manifest: Manifest {
                    exact_cache_manifest: 0,
                    key: String::new(),
                    roots: vec![],
                    entries: vec![],
                    stack: None,
                    generation: None,
                },
                stats: RestoreStats::default(),
            },
            claims: Claims::default(),
            duplicates: Vec::new(),
            writers: Some(Writers::new(writer_threads())),
            root_claimed: vec![false; plan.paths.includes.len()],
            have_record: false,
            manifest: None,
            content: None,
            file_members: 0,
            manifest_budget: MANIFEST_BYTES_BASE
                + plan.paths.includes.iter().map(|p| json_len(&p.line) + 32).sum::<u64>()
                + json_len(plan.key),
        })
    }

    /// One tar member: the fingerprint (first), the manifest (last), or an entry.
    fn member<R: Read>(&mut self, index: usize, mut entry: tar::Entry<'_, R>) -> Result<(), UnpackError> {
        let name = String::from_utf8(entry.path_bytes().into_owned()).map_err(|e| UnpackError::Unsafe {
            entry: String::from_utf8_lossy(e.as_bytes()).into_owned(),
            detail: "name is not UTF-8".into(),
        })?;
        let entry_type = entry.header().entry_type();
        if self.manifest.is_some() {
            return Err(UnpackError::Unsafe { entry: name, detail: "entry after the manifest".into() });
        }
        if index == 0 {
            if name != FINGERPRINT_NAME || !entry_type.is_file() {
                return Err(UnpackError::corrupt_detail(format!("first member is `{name}`, not the fingerprint")));
            }
            let bytes = read_small(&mut entry, MAX_FINGERPRINT_BYTES, &name)?;
            let record = FingerprintRecord::from_json(&bytes)
                .map_err(|e| UnpackError::corrupt_detail(format!("bad fingerprint member: {e}")))?;
            if record.key != self.plan.key {
                return Err(UnpackError::Mismatch(Mismatch::Key {
                    manifest: record.key.to_string(),
                    expected: self.plan.key.to_owned(),
                }));
            }
            self.staged.record = record;
            self.have_record = true;
            return Ok(());
        }
        if name == MANIFEST_NAME && entry_type.is_file() {
            self.manifest = Some(self.read_manifest(&mut entry, &name)?);
            return Ok(());
        }
        if self.content.is_some() {
            return Err(UnpackError::Unsafe { entry: name, detail: "entry after the content map".into() });
        }
        if name == CONTENT_NAME && entry_type.is_file() {
            if self.file_members > 0 {
                return Err(UnpackError::corrupt_detail("an archive with file members and a content map"));
            }
            let bytes = read_small(&mut entry, MAX_CONTENT_BYTES, &name)?;
            let map = ContentMap::from_slice(&bytes)
                .map_err(|e| UnpackError::corrupt_detail(format!("bad content map: {e}")))?;
            self.manifest_budget += bytes.len() as u64 * MANIFEST_BYTES_PER_MAP_BYTE + MANIFEST_BYTES_BESIDE_MAP;
            self.content = Some(map);
            return Ok(());
        }
        self.stage_entry(name, entry)
    }

    /// The manifest, parsed as it streams. It lists the entries before it, so it may be no
    /// larger than they justify (a 4 MB archive cannot carry a 500 MB manifest) and list at most
    /// one more of them than there are.
    fn read_manifest<R: Read>(&self, entry: &mut tar::Entry<'_, R>, name: &str) -> Result<Manifest, UnpackError> {
        let size = entry.size();
        let limit = self.manifest_budget.min(MAX_MANIFEST_BYTES);
        if size > limit {
            let entries = self.staged.entries.len();
            return Err(UnpackError::corrupt_detail(format!(
                "`{name}` is too large: {size} bytes, more than the {limit} its {entries} entries can need"
            )));
        }
        let mut counted = Counted { inner: entry, n: 0 };
        // One more than the archive holds, so that the usual damage — an entry missing from the
        // archive — is still named by verification (`manifest-mismatch`).
        // With a content map, the files it lists too: as many as the budget can hold.
        let files = match self.content {
            Some(_) => (limit / MANIFEST_MIN_ENTRY_BYTES) as usize,
            None => 0,
        };
        let bound = self.staged.entries.len() + 1 + files;
        let parsed = Manifest::from_reader_bounded(BufReader::new(&mut counted), bound)
            .map_err(|e| UnpackError::corrupt_detail(format!("bad manifest: {e}")))?;
        if counted.n != size {
            return Err(UnpackError::corrupt_detail(format!("`{name}` is truncated")));
        }
        Ok(parsed)
    }

    /// Check one entry's name, type, mode and place, and write it into its root's staging.
    fn stage_entry<R: Read>(&mut self, name: String, mut entry: tar::Entry<'_, R>) -> Result<(), UnpackError> {
        let refuse = |detail: &str| UnpackError::Unsafe { entry: name.clone(), detail: detail.to_owned() };
        let (root, rel) = check_entry_name(&name).map_err(|d| refuse(&d))?;
        let roots = self.staged.sites.len();
        if root >= roots {
            return Err(refuse(&format!("belongs to `path` root {root}, but there are only {roots}")));
        }
        check_covered(self.plan.paths, root, &rel).map_err(|d| refuse(&d))?;
        let entry_type = entry.header().entry_type();
        let kind = match entry_type {
            tar::EntryType::Regular | tar::EntryType::Continuous if !name.ends_with('/') => EntryKind::File,
            tar::EntryType::Directory => EntryKind::Dir,
            tar::EntryType::Symlink => EntryKind::Symlink,
            tar::EntryType::Link => return Err(refuse("hard links are not allowed")),
            tar::EntryType::Char | tar::EntryType::Block => return Err(refuse("device files are not allowed")),
            tar::EntryType::Fifo => return Err(refuse("FIFOs are not allowed")),
            other => return Err(refuse(&format!("unsupported entry type {other:?}"))),
        };
        let mode = entry.header().mode().map_err(|e| UnpackError::corrupt(format!("bad mode for `{name}`"), e))?;
        if mode & 0o7000 != 0 {
            return Err(refuse("setuid, setgid or sticky bit"));
        }
        let mode = mode & 0o777;
        if rel.is_empty() && kind == EntryKind::Symlink {
            return Err(refuse("a `path` root cannot be a symlink"));
        }
        let target = match kind {
            EntryKind::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .ok_or_else(|| refuse("symlink without a target"))?;
                check_symlink_target(&rel, &target).map_err(|d| refuse(&d))?;
                // The link may lead only to what its own `path` line covers (under a glob: to a
                // match, not to any file beside it).
                check_link_covered(self.plan.paths, root, &rel, &target).map_err(|d| refuse(&d))?;
                Some(target)
            }
            _ => None,
        };

        self.manifest_budget += json_len(&name) + target.as_deref().map_or(0, json_len) + MANIFEST_BYTES_PER_ENTRY;
        let index = self.staged.entries.len();
        let duplicate_of = self.claim(root, &rel, kind, &name, index).map_err(|d| refuse(&d))?;
        if let Some(earlier) = duplicate_of {
            self.duplicates.push((earlier, index));
        }

        // A file root replaces whatever is at its destination, so its staging cannot live inside.
        let inside_ok = !(rel.is_empty() && kind != EntryKind::Dir);
        let (parent, leaf, path) = self.staged.staged_parent(root, &rel, inside_ok)?;
        let record = StagedEntry {
            root,
            rel,
            kind,
            mode,
            size: 0,
            sha256: None,
            target: target.clone(),
            duplicate_of,
            in_place: false,
        };
        if kind == EntryKind::File {
            self.file_members += 1;
        }
        match kind {
            EntryKind::Dir => match parent.create_dir(&leaf) {
                Ok(()) => {}
                Err(e)
                    if e.kind() == io::ErrorKind::AlreadyExists
                        && matches!(beneath::kind_of(&parent, &leaf), Ok(Some(beneath::Kind::Dir))) => {}
                Err(source) => return Err(UnpackError::Io { path, source }),
            },
            EntryKind::Symlink => {
                let target = target.expect("checked above");
                make_symlink(&parent, &target, &leaf).map_err(UnpackError::io(&path))?;
            }
            EntryKind::File => {
                let mtime = entry.header().mtime().ok().map(|m| m as i64);
                let file = NewFile { dir: parent, name: leaf, path };
                self.writers().begin(index, file, mode, mtime).map_err(io_failure)?;
                let size = self.stream_content(&mut entry, &name)?;
                self.writers().end().map_err(io_failure)?;
                if size != entry.size() {
                    return Err(UnpackError::corrupt_detail(format!("`{name}` is truncated")));
                }
                self.staged.stats.files += 1;
                self.staged.stats.bytes += size;
            }
        }
        match kind {
            EntryKind::Dir => self.staged.stats.dirs += 1,
            EntryKind::Symlink => self.staged.stats.files += 1,
            EntryKind::File => {}
        }
        self.staged.entries.push(record);
        Ok(())
    }

    /// Claim the entry's real destination against every root's entries so far; the index of
    /// an identical earlier entry of an overlapping root.
    fn claim(
        &mut self,
        root: usize,
        rel: &str,
        kind: EntryKind,
        name: &str,
        index: usize,
    ) -> Result<Option<usize>, String> {
        let site = &self.staged.sites[root];
        if !self.root_claimed[root] {
            self.root_claimed[root] = true;
            if !rel.is_empty() {
                // Entries below a root without an entry of its own: it will be a directory.
                let line = &self.plan.paths.includes[root].line;
                self.claims.claim(&site.real, EntryKind::Dir, line, root, None)?;
            }
        }
        let dest = if rel.is_empty() { site.real.clone() } else { site.real.join(rel) };
        match self.claims.claim(&dest, kind, name, root, Some(index))? {
            Granted::New => Ok(None),
            Granted::Same { index } => Ok(index),
        }
    }

    /// Hand a file's content to its writer, in chunks as it decodes; the bytes read.
    fn stream_content<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>, name: &str) -> Result<u64, UnpackError> {
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
            self.writers().data(chunk).map_err(io_failure)?;
        }
        Ok(size)
    }

    fn writers(&mut self) -> &mut Writers {
        self.writers.as_mut().expect("writers run until the files are finished")
    }

    /// Wait for the writers: every file's size and hash.
    fn finish_files(&mut self) -> Result<(), UnpackError> {
        let writers = self.writers.take().expect("files are finished once");
        for written in writers.finish().map_err(io_failure)? {
            let e = &mut self.staged.entries[written.index];
            e.size = written.size;
            e.sha256 = Some(written.sha256);
        }
        Ok(())
    }

    /// An entry whose files are in packs: every file the manifest lists, checked as a member
    /// would be (its name, its place, its mode), kept where it is already in place, the others
    /// fetched into staging — every blob verified as it arrives — before anything is placed.
    fn content_files(&mut self) -> Result<(), UnpackError> {
        let Some(map) = self.content.take() else { return Ok(()) };
        let manifest = self
            .manifest
            .take()
            .ok_or_else(|| UnpackError::corrupt_detail("no manifest at the end (truncated archive?)"))?;
        manifest.check_header(self.plan.key, self.staged.sites.len()).map_err(UnpackError::Mismatch)?;
        let Some(packs) = self.plan.packs else {
            return Err(UnpackError::corrupt_detail("the entry's files are in packs, and this store keeps none"));
        };
        let members: HashSet<String> = self.staged.entries.iter().map(|e| e.entry_path().to_string()).collect();
        let roots = self.staged.sites.len();
        // (the entry's index, what it must hold) of each file to put in place.
        let mut files: Vec<(usize, Wanted)> = Vec::new();
        for m in manifest.entries.iter().filter(|m| m.kind == EntryKind::File && !members.contains(&m.path)) {
            let refuse = |detail: &str| UnpackError::Unsafe { entry: m.path.clone(), detail: detail.to_owned() };
            let (root, rel) = check_entry_name(&m.path).map_err(|d| refuse(&d))?;
            if root >= roots {
                return Err(refuse(&format!("belongs to `path` root {root}, but there are only {roots}")));
            }
            check_covered(self.plan.paths, root, &rel).map_err(|d| refuse(&d))?;
            if m.mode & !0o777 != 0 {
                return Err(refuse("setuid, setgid or sticky bit"));
            }
            if m.target.is_some() {
                return Err(refuse("a file with a link target"));
            }
            let hash =
                m.sha256.as_deref().and_then(Hash::parse).ok_or_else(|| {
                    UnpackError::corrupt_detail(format!("`{}` has no SHA-256 in the manifest", m.path))
                })?;
            let index = self.staged.entries.len();
            let duplicate_of = self.claim(root, &rel, EntryKind::File, &m.path, index).map_err(|d| refuse(&d))?;
            if let Some(earlier) = duplicate_of {
                self.duplicates.push((earlier, index));
            }
            self.staged.entries.push(StagedEntry {
                root,
                rel,
                kind: EntryKind::File,
                mode: m.mode,
                size: m.size,
                sha256: m.sha256.clone(),
                target: None,
                duplicate_of,
                in_place: false,
            });
            let stats = &mut self.staged.stats;
            stats.files += 1;
            stats.bytes += m.size;
            if duplicate_of.is_none() {
                files.push((index, Wanted { hash, size: m.size }));
            }
        }
        self.manifest = Some(manifest);
        let threads = writer_threads();
        let kept = super::fetch::in_place(&self.staged, &files, threads)?;
        let mut wanted = Vec::new();
        let mut staged = Vec::new();
        for ((index, w), kept) in files.iter().zip(kept) {
            if kept {
                self.staged.entries[*index].in_place = true;
                self.staged.stats.in_place += 1;
                self.staged.stats.in_place_bytes += w.size;
            } else {
                wanted.push(*w);
                staged.push(*index);
            }
        }
        self.staged.stats.content = true;
        let plan = FetchPlan::new(&map, &wanted, packs.ranges(), Reads::DEFAULT)
            .map_err(|e| UnpackError::Content(FetchError::Map(e)))?;
        let sink = super::fetch::StageSink::prepare(&mut self.staged, &staged)?;
        let fetched = fetch(packs, &map, &plan, &sink, threads).map_err(|e| match e {
            // This disk's trouble names the file.
            FetchError::Sink(source) if wanted.len() == 1 => UnpackError::Io { path: sink.path(0).to_owned(), source },
            other => UnpackError::Content(other),
        })?;
        self.staged.stats.fetched = fetched.fetched;
        Ok(())
    }

    /// The archive is complete and matches its manifest; identical entries of overlapping
    /// roots really are identical.
    fn verify(mut self) -> Result<Staged, UnpackError> {
        if !self.have_record {
            return Err(UnpackError::corrupt_detail("empty archive"));
        }
        let manifest = self
            .manifest
            .take()
            .ok_or_else(|| UnpackError::corrupt_detail("no manifest at the end (truncated archive?)"))?;
        let staged = &mut self.staged;
        manifest.check_header(self.plan.key, staged.sites.len()).map_err(UnpackError::Mismatch)?;
        let actual: Vec<ManifestEntry> = staged
            .entries
            .iter()
            .map(|e| ManifestEntry {
                path: e.entry_path().to_string(),
                kind: e.kind,
                mode: e.mode,
                size: e.size,
                sha256: e.sha256.clone(),
                target: e.target.clone(),
            })
            .collect();
        manifest.verify(&actual).map_err(UnpackError::Mismatch)?;
        for &(earlier, later) in &self.duplicates {
            let (a, b) = (&staged.entries[earlier], &staged.entries[later]);
            if (a.sha256.as_ref(), a.target.as_ref(), a.mode) != (b.sha256.as_ref(), b.target.as_ref(), b.mode) {
                return Err(UnpackError::Unsafe {
                    entry: b.entry_path().to_string(),
                    detail: format!("differs from `{}`, which lands at the same place", a.entry_path()),
                });
            }
        }
        staged.manifest = manifest;
        Ok(self.staged)
    }
}

/// Everything after the tar end marker must be zero padding; reading to the end also makes the
/// decoder check the last frame's checksum.
fn check_trailer(mut rest: impl Read) -> Result<(), UnpackError> {
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match rest.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(UnpackError::corrupt("unreadable end of archive", e)),
        };
        if buf[..n].iter().any(|b| *b != 0) {
            return Err(UnpackError::corrupt_detail("data after the end of the archive"));
        }
    }
}

impl Staged {
    /// Where each root lands, as resolved (symlinks followed) when this restore began.
    pub fn root_locations(&self) -> Vec<PathBuf> {
        self.sites.iter().map(|site| site.real.clone()).collect()
    }

    /// Every `required` path is in the entry.
    fn check_required(&self, plan: &RestorePlan) -> Result<(), UnpackError> {
        for required in plan.required {
            let found = plan.paths.includes.iter().enumerate().any(|(i, pattern)| {
                let Ok(rel) = required.strip_prefix(&pattern.base) else {
                    return false;
                };
                let rel = rel.to_string_lossy().replace('\\', "/");
                let below = format!("{rel}/");
                self.entries
                    .iter()
                    .any(|e| e.root == i && (e.rel == rel || (!rel.is_empty() && e.rel.starts_with(&below))))
            });
            if !found {
                return Err(UnpackError::Incomplete { path: required.to_string_lossy().into_owned() });
            }
        }
        Ok(())
    }

    /// Root `i`'s staging, created on first use: inside the destination when it is an existing,
    /// writable directory, else in its nearest existing ancestor, so that moves are renames on
    /// one filesystem.
    pub(super) fn stage(&mut self, i: usize, inside_ok: bool) -> Result<&mut Stage, UnpackError> {
        if self.stages[i].is_none() {
            let site = &self.sites[i];
            let inside = inside_ok && site.missing.is_empty();
            let (holder, holder_path) = if inside || !site.missing.is_empty() {
                (Arc::clone(&site.anchor), site.anchor_path().to_owned())
            } else {
                (above(site)?, site.real.parent().unwrap_or(&site.real).to_owned())
            };
            let made = match staging::create(&holder) {
                Ok(name) => Ok((holder, holder_path, name)),
                // A read-only destination: stage next to it instead.
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied && inside => {
                    let holder = above(site)?;
                    let parent = site.real.parent().unwrap_or(&site.real).to_owned();
                    staging::create(&holder).map(|name| (holder, parent, name))
                }
                Err(e) => Err(e),
            };
            let (holder, holder_path, name) = made.map_err(UnpackError::io(&site.real))?;
            let dir = beneath::open_child(&holder, &name).map_err(UnpackError::io(holder_path.join(&name)))?;
            self.stages[i] = Some(Stage { holder, holder_path, name, tree: Tree::new(Arc::new(dir)) });
        }
        Ok(self.stages[i].as_mut().expect("just created"))
    }

    /// The staged parent directory of entry `rel` of root `root` (in [`Staged::stage`]'s
    /// staging; parents are made once, by an explicit directory entry or the first file below
    /// it), the entry's name there, and its staged path.
    pub(super) fn staged_parent(
        &mut self,
        root: usize,
        rel: &str,
        inside_ok: bool,
    ) -> Result<(Arc<Dir>, String, PathBuf), UnpackError> {
        let stage = self.stage(root, inside_ok)?;
        let stage_path = stage.path();
        let staged = staged_rel(rel);
        let (parent_rel, leaf) = beneath::split_last(&staged);
        let parent = stage
            .tree
            .dir_with(parent_rel, &mut |dir, rel, found| match found {
                None => dir.create_dir(beneath::split_last(rel).1),
                Some(_) => Err(io::Error::new(io::ErrorKind::NotADirectory, "staged parent is not a directory")),
            })
            .map_err(|source| UnpackError::Io { path: stage_path.join(parent_rel), source })?;
        Ok((parent, leaf.to_owned(), stage_path.join(&staged)))
    }
}

/// The directory holding an existing destination directory.
pub(super) fn above(site: &Site) -> Result<Arc<Dir>, UnpackError> {
    site.above.clone().ok_or_else(|| UnpackError::Io {
        path: site.real.clone(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "a `path` root without a parent directory"),
    })
}

impl Drop for Staged {
    fn drop(&mut self) {
        if self.keep_staging {
            return;
        }
        for Stage { holder, name, tree, .. } in std::mem::take(&mut self.stages).into_iter().flatten() {
            // Its own handles closed first: Windows does not remove a directory open elsewhere.
            drop(tree);
            let _ = beneath::remove_tree(&holder, &name);
        }
    }
}

#[cfg(unix)]
fn make_symlink(dir: &Dir, target: &str, name: &str) -> io::Result<()> {
    dir.symlink(target, name)
}

#[cfg(not(unix))]
fn make_symlink(dir: &Dir, target: &str, name: &str) -> io::Result<()> {
    dir.symlink_file(target, name)
}

/// Read only the first member of an archive: its fingerprint record.
pub fn read_fingerprint<R: Read>(reader: R, compression: Compression) -> Result<FingerprintRecord, UnpackError> {
    let stream =
        decoder(compression, BufReader::new(reader)).map_err(|e| UnpackError::corrupt("cannot start decoding", e))?;
    let mut archive = tar::Archive::new(Records::new(stream));
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

/// What [`first_pax`] decodes at most.
const GENERATION_HEAD_BYTES: u64 = 64 << 10;

/// The generation record copied before the fingerprint member ([`super::GENERATION_PAX`]):
/// `Ok(None)` when the archive has none (saved before it was recorded) or it is not one.
pub fn read_generation<R: Read>(reader: R, compression: Compression) -> Result<Option<Generation>, UnpackError> {
    let value = first_pax(reader, compression, super::GENERATION_PAX)?;
    Ok(value.and_then(|v| serde_json::from_slice(&v).ok()).and_then(Generation::from_value))
}

/// The packs an entry references, from the record before its fingerprint member
/// ([`PACKS_PAX`]): `Ok(None)` when it has none (its files are members) or it is not one.
pub fn read_packs<R: Read>(reader: R, compression: Compression) -> Result<Option<Vec<PackName>>, UnpackError> {
    let value = first_pax(reader, compression, PACKS_PAX)?;
    Ok(value.and_then(|v| String::from_utf8(v).ok()).and_then(|text| parse_packs_record(&text)))
}

/// The value of pax record `key` before the archive's first member.
fn first_pax<R: Read>(reader: R, compression: Compression, key: &str) -> Result<Option<Vec<u8>>, UnpackError> {
    let stream =
        decoder(compression, BufReader::new(reader)).map_err(|e| UnpackError::corrupt("cannot start decoding", e))?;
    // The record and the fingerprint's header are the archive's first few KiB: a pax record
    // that claims more (the tar reader holds one whole) is cut here, whatever it decompresses to.
    let mut archive = tar::Archive::new(Records::new(stream.take(GENERATION_HEAD_BYTES)));
    let mut entries = archive.entries().map_err(|e| UnpackError::corrupt("unreadable tar stream", e))?;
    let mut first = entries
        .next()
        .ok_or_else(|| UnpackError::Corrupt { detail: "empty archive".into(), source: None })?
        .map_err(|e| UnpackError::corrupt("unreadable tar header", e))?;
    let Some(extensions) = first.pax_extensions().map_err(|e| UnpackError::corrupt("unreadable pax record", e))? else {
        return Ok(None);
    };
    for extension in extensions {
        let extension = extension.map_err(|e| UnpackError::corrupt("unreadable pax record", e))?;
        if extension.key_bytes() == key.as_bytes() {
            return Ok(Some(extension.value_bytes().to_vec()));
        }
    }
    Ok(None)
}

/// The content map of an entry whose files are in packs, read from its archive: the members
/// before it are directories and links, so only the archive's small head is read. `Ok(None)`:
/// a file member comes first (the entry's files are members), or there is no map.
pub fn read_content_map<R: Read>(reader: R, compression: Compression) -> Result<Option<ContentMap>, UnpackError> {
    let stream = decoder(compression, BufReader::with_capacity(1 << 16, reader))
        .map_err(|e| UnpackError::corrupt("cannot start decoding", e))?;
    let mut archive = tar::Archive::new(Records::new(stream));
    let entries = archive.entries().map_err(|e| UnpackError::corrupt("unreadable tar stream", e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| UnpackError::corrupt("unreadable tar header", e))?;
        let name = entry.path_bytes().into_owned();
        if name == CONTENT_NAME.as_bytes() {
            let bytes = read_small(&mut entry, MAX_CONTENT_BYTES, CONTENT_NAME)?;
            let map = ContentMap::from_slice(&bytes)
                .map_err(|e| UnpackError::corrupt_detail(format!("bad content map: {e}")))?;
            return Ok(Some(map));
        }
        if name != FINGERPRINT_NAME.as_bytes() && entry.header().entry_type().is_file() {
            return Ok(None);
        }
    }
    Ok(None)
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

/// The length of `text` as a JSON string (quotes included), escaped as serde_json writes it.
fn json_len(text: &str) -> u64 {
    let escaped: usize = text
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..0x20 | 0x7f => 6,
            _ => 1,
        })
        .sum();
    escaped as u64 + 2
}

struct Counted<'a, R> {
    inner: &'a mut R,
    n: u64,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.n += n as u64;
        Ok(n)
    }
}

fn placeholder_record() -> FingerprintRecord {
    FingerprintRecord::new("", &"".into(), Default::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An archive whose generation pax record holds `value`, then the fingerprint member.
    fn with_generation(value: &str) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        tar.append_pax_extensions([(super::super::GENERATION_PAX, value.as_bytes())]).unwrap();
        let record = placeholder_record().to_json();
        let mut header = tar::Header::new_ustar();
        header.set_size(record.len() as u64);
        header.set_mode(0o644);
        tar.append_data(&mut header, FINGERPRINT_NAME, record.as_bytes()).unwrap();
        tar.into_inner().unwrap()
    }

    #[test]
    fn a_generation_record_that_is_no_object_is_no_figure() {
        let read = |value: &str| read_generation(&with_generation(value)[..], Compression::None).unwrap();
        let honest = r#"{"millis":20700,"recorded":1796000000}"#;
        assert_eq!(read(honest).map(|g| g.millis), Some(20_700));
        // serde reads an array as a struct, field by field: `[1,2]` would be 1 ms, recorded at 2.
        for forged in ["[1,2]", "[20700,1796000000]", r#"{"millis":1.5,"recorded":0}"#, "\"3 days\""] {
            assert_eq!(read(forged), None, "{forged}");
        }
    }
}
