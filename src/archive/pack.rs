//! Save side: list what the `path` roots hold ([`inventory`]), then stream it into an archive
//! ([`write_archive`]), hashing every file in the same read that archives it — or, for an entry
//! whose content is stored once (docs/content.md), read every file into packs first
//! ([`store_content`]: each file read once, through the secret scan, hashed and split into
//! blobs, the blobs no readable entry holds written into new packs and stored), then write the
//! small archive that names them ([`write_content_archive`]: the packs record and the
//! fingerprint first, directories and links, the content map, the manifest last). The packs
//! are stored before the archive is written, so no manifest names a pack that is not stored.

use super::codec::{Compression, Effort, effort_for};
use super::safety::{check_link_covered, check_symlink_target};
use super::secrets::{GateError, SecretScanner};
use super::{FINGERPRINT_NAME, MANIFEST_NAME};
use crate::content::Hash;
use crate::content::map::{CONTENT_NAME, ContentMap, PACKS_PAX};
use crate::content::save::{ContentSaver, SaveError, SaveStats};
use crate::fingerprint::FingerprintRecord;
use crate::manifest::{
    EntryKind, EntryPath, Generation, MANIFEST_FORMAT, Manifest, ManifestEntry, RootKind, RootRecord, StackSlot,
};
use crate::paths::{PathError, PatternSet, walk};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("cannot read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{}` shrank while it was being archived", path.display())]
    Changed { path: PathBuf },
    #[error("symlink `{}` cannot be cached: {detail}", path.display())]
    Symlink { path: PathBuf, detail: String },
    #[error("cannot write the archive")]
    Write(#[source] io::Error),
    #[error("`{}` holds the value of a token or of a `secret-env` variable (not shown)", path.display())]
    Secret { path: PathBuf },
    /// The packs could not be written or stored (the store's trouble, or packs the save meant to
    /// reference gone from the store: [`SaveError::Gone`]).
    #[error(transparent)]
    Content(SaveError),
}

/// One thing to archive.
#[derive(Clone, Debug)]
pub struct SourceEntry {
    pub root: usize,
    pub rel: String,
    pub abs: PathBuf,
    pub kind: EntryKind,
    pub mode: u32,
    pub size: u64,
    pub mtime: u64,
    /// The modification time in milliseconds since the epoch (0 when not known): the end of
    /// what generated the entry.
    pub modified_ms: i64,
    pub target: Option<String>,
}

impl SourceEntry {
    /// Where it lies in an entry (its name in the archive and the manifest).
    pub fn entry_path(&self) -> EntryPath<'_> {
        EntryPath::new(self.root, &self.rel)
    }
}

/// What the roots hold right now.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    pub roots: Vec<RootRecord>,
    pub entries: Vec<SourceEntry>,
    /// Sockets, FIFOs and devices found under a root; never archived.
    pub skipped: Vec<PathBuf>,
}

impl Inventory {
    pub fn content_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }

    pub fn contains(&self, abs: &Path) -> bool {
        self.entries.iter().any(|e| e.abs == abs)
    }
}

#[derive(Clone, Debug)]
pub struct PackStats {
    /// The zstd effort the compressibility probe chose, and the ratio it saw.
    pub effort: Effort,
    pub sample_ratio: f64,
    pub files: usize,
    pub symlinks: usize,
    pub content_bytes: u64,
}

pub fn inventory(set: &PatternSet) -> Result<Inventory, PackError> {
    let mut inv = Inventory::default();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    for (root, pattern) in set.includes.iter().enumerate() {
        let found = walk(pattern, set, true)?;
        let kind = match (&pattern.glob, found.first()) {
            (_, None) if pattern.glob.is_none() => RootKind::Missing,
            (Some(_), _) => RootKind::Glob,
            (None, Some(f)) if f.metadata.is_dir() => RootKind::Dir,
            (None, _) => RootKind::File,
        };
        inv.roots.push(RootRecord { line: pattern.line.clone(), kind });
        for f in found {
            if !seen.insert(f.abs.clone()) {
                continue;
            }
            let (kind, size, target) = if f.file_type.is_symlink() {
                let target =
                    std::fs::read_link(&f.abs).map_err(|source| PackError::Read { path: f.abs.clone(), source })?;
                let target = target
                    .to_str()
                    .ok_or_else(|| PackError::Symlink { path: f.abs.clone(), detail: "target is not UTF-8".into() })?
                    .to_owned();
                check_symlink_target(&f.rel, &target)
                    .and_then(|()| check_link_covered(set, root, &f.rel, &target))
                    .map_err(|detail| PackError::Symlink { path: f.abs.clone(), detail })?;
                (EntryKind::Symlink, 0, Some(target))
            } else if f.file_type.is_dir() {
                (EntryKind::Dir, 0, None)
            } else if f.file_type.is_file() {
                (EntryKind::File, f.metadata.len(), None)
            } else {
                inv.skipped.push(f.abs);
                continue;
            };
            inv.entries.push(SourceEntry {
                root,
                rel: f.rel,
                abs: f.abs,
                kind,
                mode: permission_bits(&f.metadata, kind),
                size,
                mtime: f
                    .metadata
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_secs()),
                modified_ms: f
                    .metadata
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_millis() as i64),
                target,
            });
        }
    }
    Ok(inv)
}

fn permission_bits(meta: &std::fs::Metadata, kind: EntryKind) -> u32 {
    #[cfg(unix)]
    {
        let _ = kind;
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o777
    }
    #[cfg(not(unix))]
    {
        // Windows keeps one permission fact, the read-only attribute of a file.
        match kind {
            EntryKind::Dir => 0o755,
            EntryKind::File if meta.permissions().readonly() => 0o444,
            _ => 0o644,
        }
    }
}

/// What an archive records about itself besides its files: its slot in the key's stack (a
/// layer or a later generation's base) and what it took to generate.
#[derive(Clone, Debug, Default)]
pub struct Stamp {
    pub stack: Option<StackSlot>,
    /// In the manifest (checked with it on restore) and, as a copy for `list`, in a pax record
    /// ([`GENERATION_PAX`]) before the fingerprint member, within the archive's first bytes.
    pub generation: Option<Generation>,
}

/// The pax record before the fingerprint member that copies the manifest's generation record,
/// so `list` reads it from the start of an archive (the manifest is its last member). Readers
/// that do not know it skip it, as pax readers skip every record they do not know.
pub const GENERATION_PAX: &str = "EXACT_CACHE.generation";

/// Stream `inv` into `out` as an archive (`stack`: its slot, for a layer or a later generation's
/// base); `on_bytes` hears about every chunk of file content. `path` lines, names, link targets
/// and contents pass `secrets` first: a hit ends the archive unfinished.
pub fn write_archive<W: Write>(
    inv: &Inventory,
    record: &FingerprintRecord,
    compression: Compression,
    stack: Option<StackSlot>,
    secrets: &SecretScanner,
    out: W,
    on_bytes: &mut dyn FnMut(u64),
) -> Result<(W, PackStats), PackError> {
    write_archive_with(inv, record, compression, Stamp { stack, generation: None }, secrets, out, on_bytes)
}

/// [`write_archive`], recording `stamp`.
pub fn write_archive_with<W: Write>(
    inv: &Inventory,
    record: &FingerprintRecord,
    compression: Compression,
    stamp: Stamp,
    secrets: &SecretScanner,
    out: W,
    on_bytes: &mut dyn FnMut(u64),
) -> Result<(W, PackStats), PackError> {
    let Stamp { stack, generation } = stamp;
    if let Some(root) = secrets.in_roots(&inv.roots) {
        return Err(PackError::Secret { path: PathBuf::from(&root.line) });
    }
    let (effort, sample_ratio) = match compression {
        Compression::Zstd => effort_for(&sample(inv)),
        _ => (Effort::Normal, 0.0),
    };
    let encoder = compression.encoder_with(out, effort).map_err(PackError::Write)?;
    let mut tar = tar::Builder::new(encoder);
    let write_err = PackError::Write;

    let fingerprint = record.to_json();
    if let Some(generation) = &generation {
        let json = serde_json::to_vec(generation).expect("generation records serialize");
        tar.append_pax_extensions([(GENERATION_PAX, &json[..])]).map_err(write_err)?;
    }
    append_ours(&mut tar, FINGERPRINT_NAME, fingerprint.as_bytes()).map_err(write_err)?;

    let mut entries = Vec::with_capacity(inv.entries.len());
    let (mut files, mut symlinks, mut bytes) = (0usize, 0usize, 0u64);
    let mut buf = vec![0u8; 1 << 20];
    for e in &inv.entries {
        if secrets.in_name(&e.rel) || e.target.as_deref().is_some_and(|t| secrets.in_name(t)) {
            return Err(PackError::Secret { path: e.abs.clone() });
        }
        let (mut manifest_entry, path) = append_unless_file(&mut tar, e, &mut symlinks).map_err(write_err)?;
        if e.kind == EntryKind::File {
            let mut file = File::open(&e.abs).map_err(|source| PackError::Read { path: e.abs.clone(), source })?;
            append(&mut tar, &path, tar::EntryType::Regular, e.mode, e.mtime, None, e.size).map_err(write_err)?;
            let mut hasher = Sha256::new();
            let mut remaining = e.size;
            let mut gate = secrets.gate();
            let mut emit = |bytes: &[u8]| tar.get_mut().write_all(bytes);
            while remaining > 0 {
                let want = remaining.min(buf.len() as u64) as usize;
                let n =
                    file.read(&mut buf[..want]).map_err(|source| PackError::Read { path: e.abs.clone(), source })?;
                if n == 0 {
                    return Err(PackError::Changed { path: e.abs.clone() });
                }
                hasher.update(&buf[..n]);
                gate.feed(&buf[..n], &mut emit).map_err(|g| match g {
                    GateError::Secret => PackError::Secret { path: e.abs.clone() },
                    GateError::Write(io) => PackError::Write(io),
                })?;
                remaining -= n as u64;
                on_bytes(n as u64);
            }
            gate.finish(&mut emit).map_err(write_err)?;
            pad(&mut tar, e.size).map_err(write_err)?;
            manifest_entry.size = e.size;
            manifest_entry.sha256 = Some(hex::encode(hasher.finalize()));
            files += 1;
            bytes += e.size;
        }
        entries.push(manifest_entry);
    }

    let manifest_json = manifest_json(record, inv, entries, stack, generation);
    append_ours(&mut tar, MANIFEST_NAME, &manifest_json).map_err(write_err)?;

    let encoder = tar.into_inner().map_err(write_err)?;
    let out = encoder.finish().map_err(write_err)?;
    Ok((out, PackStats { effort, sample_ratio, files, symlinks, content_bytes: bytes }))
}

/// The zstd effort for `inv`'s files, from a sample of them, and the ratio it saw (as a whole
/// archive chooses its level; a save of packs uses it for its blobs).
pub fn effort_of(inv: &Inventory) -> (Effort, f64) {
    effort_for(&sample(inv))
}

/// Up to 32 pieces of 128 KiB, spread evenly over the bytes of the files (not over the files:
/// a few large weights files decide as much as their share of the bytes). The pieces never
/// overlap: files of less than 4 MiB in all are sampled once each, not 32 pieces that repeat
/// one another (which zstd would find, and call noise compressible).
fn sample(inv: &Inventory) -> Vec<u8> {
    const PIECES: u64 = 32;
    const PIECE: u64 = 128 * 1024;
    let files: Vec<&SourceEntry> = inv.entries.iter().filter(|e| e.kind == EntryKind::File && e.size > 0).collect();
    let total: u64 = files.iter().map(|e| e.size).sum();
    let mut sample = Vec::new();
    if total == 0 {
        return sample;
    }
    let (mut file, mut before) = (0usize, 0u64);
    for i in 0..PIECES {
        let at = total * i / PIECES;
        while before + files[file].size <= at {
            before += files[file].size;
            file += 1;
        }
        let e = files[file];
        let offset = at - before;
        let len = PIECE.min(total * (i + 1) / PIECES - at);
        if len == 0 {
            continue;
        }
        if let Ok(mut f) = File::open(&e.abs) {
            use std::io::{Seek, SeekFrom};
            let mut piece = Vec::with_capacity(len as usize);
            if f.seek(SeekFrom::Start(offset)).is_ok() && f.take(len).read_to_end(&mut piece).is_ok() {
                sample.extend_from_slice(&piece);
            }
        }
    }
    sample
}

/// The member of a directory or link (counted in `symlinks`); a file's is its writer's to add.
/// Returns the entry's manifest line and its path in the archive.
fn append_unless_file<W: Write>(
    tar: &mut tar::Builder<W>,
    e: &SourceEntry,
    symlinks: &mut usize,
) -> io::Result<(ManifestEntry, String)> {
    let path = e.entry_path().to_string();
    let mut line =
        ManifestEntry { path: path.clone(), kind: e.kind, mode: e.mode, size: 0, sha256: None, target: None };
    match e.kind {
        EntryKind::Dir => append(tar, &format!("{path}/"), tar::EntryType::Directory, e.mode, e.mtime, None, 0)?,
        EntryKind::Symlink => {
            append(tar, &path, tar::EntryType::Symlink, e.mode, e.mtime, e.target.as_deref(), 0)?;
            line.target = e.target.clone();
            *symlinks += 1;
        }
        EntryKind::File => {}
    }
    Ok((line, path))
}

fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    name: &str,
    entry_type: tar::EntryType,
    mode: u32,
    mtime: u64,
    link: Option<&str>,
    size: u64,
) -> io::Result<()> {
    const USTAR_NAME: usize = 100;
    const USTAR_MAX_SIZE: u64 = 0o77777777777;
    let mut pax: Vec<(&str, Vec<u8>)> = Vec::new();
    if name.len() > USTAR_NAME {
        pax.push(("path", name.as_bytes().to_vec()));
    }
    if let Some(link) = link.filter(|l| l.len() > USTAR_NAME) {
        pax.push(("linkpath", link.as_bytes().to_vec()));
    }
    if size > USTAR_MAX_SIZE {
        pax.push(("size", size.to_string().into_bytes()));
    }
    if !pax.is_empty() {
        tar.append_pax_extensions(pax.iter().map(|(k, v)| (*k, v.as_slice())))?;
    }
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(entry_type);
    header.set_mode(mode);
    header.set_mtime(mtime);
    header.set_uid(0);
    header.set_gid(0);
    header.set_size(size);
    let short_name = truncate(name, USTAR_NAME);
    header.as_old_mut().name[..short_name.len()].copy_from_slice(short_name.as_bytes());
    if let Some(link) = link {
        let short = truncate(link, USTAR_NAME);
        header.as_old_mut().linkname[..short.len()].copy_from_slice(short.as_bytes());
    }
    header.set_cksum();
    tar.get_mut().write_all(header.as_bytes())
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A member of our own (the fingerprint, the content map, the manifest): a file of `bytes`.
fn append_ours<W: Write>(tar: &mut tar::Builder<W>, name: &str, bytes: &[u8]) -> io::Result<()> {
    append(tar, name, tar::EntryType::Regular, 0o644, 0, None, bytes.len() as u64)?;
    tar.get_mut().write_all(bytes)?;
    pad(tar, bytes.len() as u64)
}

fn manifest_json(
    record: &FingerprintRecord,
    inv: &Inventory,
    entries: Vec<ManifestEntry>,
    stack: Option<StackSlot>,
    generation: Option<Generation>,
) -> Vec<u8> {
    let manifest = Manifest {
        exact_cache_manifest: MANIFEST_FORMAT,
        key: record.key.to_string(),
        roots: inv.roots.clone(),
        entries,
        stack,
        generation,
    };
    serde_json::to_vec(&manifest).expect("manifests always serialize")
}

fn pad<W: Write>(tar: &mut tar::Builder<W>, size: u64) -> io::Result<()> {
    let rem = (size % 512) as usize;
    if rem != 0 {
        tar.get_mut().write_all(&[0u8; 512][..512 - rem])?;
    }
    Ok(())
}

/// What [`store_content`] read and stored: each file's hash (by its index in the inventory), the
/// entry's content map and what the save uploaded and found already stored.
#[derive(Debug)]
pub struct Content {
    hashes: std::collections::HashMap<usize, Hash>,
    pub map: ContentMap,
    pub stats: SaveStats,
}

/// Read every file of `inv` once, through `secrets`' scan, into `saver` (which references the
/// blobs its index holds and stores the rest in new packs), then finish it: every pack stored.
/// Names and link targets are scanned first, so a secret there uploads nothing; one in a file's
/// bytes stops the save before the blobs that hold it are packed.
pub fn store_content(
    inv: &Inventory,
    secrets: &SecretScanner,
    mut saver: ContentSaver<'_>,
    on_bytes: &mut dyn FnMut(u64),
) -> Result<Content, PackError> {
    if let Some(root) = secrets.in_roots(&inv.roots) {
        return Err(PackError::Secret { path: PathBuf::from(&root.line) });
    }
    if let Some(e) =
        inv.entries.iter().find(|e| secrets.in_name(&e.rel) || e.target.as_deref().is_some_and(|t| secrets.in_name(t)))
    {
        return Err(PackError::Secret { path: e.abs.clone() });
    }
    let mut hashes = std::collections::HashMap::new();
    let mut buffers = GateBuffers::default();
    for (index, e) in inv.entries.iter().enumerate().filter(|(_, e)| e.kind == EntryKind::File) {
        let file = File::open(&e.abs).map_err(|source| PackError::Read { path: e.abs.clone(), source })?;
        let mut gated = Gated::new(file.take(e.size), secrets, on_bytes, &mut buffers);
        let added = saver.add_file(&mut gated, e.size);
        if gated.secret {
            return Err(PackError::Secret { path: e.abs.clone() });
        }
        let (hash, n) = match added {
            Ok(done) => done,
            Err(SaveError::Read(source)) => return Err(PackError::Read { path: e.abs.clone(), source }),
            Err(other) => return Err(PackError::Content(other)),
        };
        if n != e.size {
            return Err(PackError::Changed { path: e.abs.clone() });
        }
        hashes.insert(index, hash);
    }
    let (map, stats) = saver.finish().map_err(PackError::Content)?;
    Ok(Content { hashes, map, stats })
}

/// The buffers a [`Gated`] reader works in, kept from one file to the next: a tree of tens of
/// thousands of small files would otherwise allocate and clear a MiB for each (a tenth of a cold
/// save's time, measured).
struct GateBuffers {
    read: Vec<u8>,
    out: Vec<u8>,
}

impl Default for GateBuffers {
    fn default() -> Self {
        GateBuffers { read: vec![0u8; 1 << 20], out: Vec::new() }
    }
}

/// A file's bytes as they pass the secret scan: what a gate holds back is released at the end.
struct Gated<'s, 'b, R> {
    inner: R,
    gate: Option<super::secrets::Gate<'s>>,
    buffers: &'b mut GateBuffers,
    /// Where the next byte of `buffers.out` to hand out is.
    at: usize,
    /// The scan found a secret: the read failed for that.
    secret: bool,
    on_bytes: &'b mut dyn FnMut(u64),
}

impl<'s, 'b, R: Read> Gated<'s, 'b, R> {
    fn new(
        inner: R,
        secrets: &'s SecretScanner,
        on_bytes: &'b mut dyn FnMut(u64),
        buffers: &'b mut GateBuffers,
    ) -> Self {
        buffers.out.clear();
        Gated { inner, gate: Some(secrets.gate()), buffers, at: 0, secret: false, on_bytes }
    }
}

impl<R: Read> Read for Gated<'_, '_, R> {
    fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        loop {
            let GateBuffers { read, out } = &mut *self.buffers;
            if self.at < out.len() {
                let n = dst.len().min(out.len() - self.at);
                dst[..n].copy_from_slice(&out[self.at..self.at + n]);
                self.at += n;
                return Ok(n);
            }
            out.clear();
            self.at = 0;
            let Some(gate) = self.gate.as_mut() else { return Ok(0) };
            let n = match self.inner.read(read) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let mut emit = |bytes: &[u8]| {
                out.extend_from_slice(bytes);
                Ok(())
            };
            if n == 0 {
                self.gate.take().expect("still open").finish(&mut emit)?;
                continue;
            }
            (self.on_bytes)(n as u64);
            if let Err(GateError::Secret) = gate.feed(&read[..n], &mut emit) {
                self.secret = true;
                return Err(io::Error::other("the file holds a secret"));
            }
        }
    }
}

/// Write the archive of an entry whose files' content is in packs ([`store_content`]): before
/// the fingerprint member, the generation record (if any) and the packs record ([`PACKS_PAX`]);
/// directories and links as members; files only in the manifest; the content map
/// ([`CONTENT_NAME`]) just before the manifest.
pub fn write_content_archive<W: Write>(
    inv: &Inventory,
    record: &FingerprintRecord,
    compression: Compression,
    stamp: Stamp,
    content: &Content,
    out: W,
) -> Result<(W, PackStats), PackError> {
    let Stamp { stack, generation } = stamp;
    let encoder = compression.encoder_with(out, Effort::Normal).map_err(PackError::Write)?;
    let mut tar = tar::Builder::new(encoder);
    let write_err = PackError::Write;

    let generation_json = generation.as_ref().map(|g| serde_json::to_vec(g).expect("generation records serialize"));
    let packs = content.map.packs_record();
    let mut pax: Vec<(&str, &[u8])> = Vec::new();
    if let Some(json) = &generation_json {
        pax.push((GENERATION_PAX, json));
    }
    pax.push((PACKS_PAX, packs.as_bytes()));
    tar.append_pax_extensions(pax).map_err(write_err)?;
    let fingerprint = record.to_json();
    append_ours(&mut tar, FINGERPRINT_NAME, fingerprint.as_bytes()).map_err(write_err)?;

    let mut entries = Vec::with_capacity(inv.entries.len());
    let (mut files, mut symlinks, mut bytes) = (0usize, 0usize, 0u64);
    for (index, e) in inv.entries.iter().enumerate() {
        let (mut manifest_entry, _) = append_unless_file(&mut tar, e, &mut symlinks).map_err(write_err)?;
        if e.kind == EntryKind::File {
            let hash = content.hashes.get(&index).expect("every file was stored");
            manifest_entry.size = e.size;
            manifest_entry.sha256 = Some(hash.to_hex());
            files += 1;
            bytes += e.size;
        }
        entries.push(manifest_entry);
    }

    let map = content.map.to_vec();
    append_ours(&mut tar, CONTENT_NAME, &map).map_err(write_err)?;

    let manifest_json = manifest_json(record, inv, entries, stack, generation);
    append_ours(&mut tar, MANIFEST_NAME, &manifest_json).map_err(write_err)?;

    let encoder = tar.into_inner().map_err(write_err)?;
    let out = encoder.finish().map_err(write_err)?;
    let stats = PackStats { effort: Effort::Normal, sample_ratio: 0.0, files, symlinks, content_bytes: bytes };
    Ok((out, stats))
}
