//! Entry points of the fuzz targets in `fuzz/` and of their replay test (tests/integration/fuzz_replay.rs).
//! Each takes arbitrary bytes, must never panic, and asserts the promise of the code it drives:
//! a parsed manifest verifies against itself, a fingerprint record survives a round trip, a
//! server's answer never yields a range outside what was asked, and an archive — whatever it
//! holds, whatever the workspace already holds, however the roots overlap — never changes
//! anything outside the restore roots, and changes nothing at all unless it is restored whole.
//! Test support, not the product: a crate of its own so `src/` holds only what ships, as cargo
//! keeps `cargo-test-support` beside it. Unix only: the cases make symlinks and compare modes.

#![cfg(unix)]

use exact_cache::archive::{Compression, RestorePlan, read_fingerprint, unpack as unpack_archive};
use exact_cache::backend::http::status_error;
use exact_cache::backend::wire;
use exact_cache::fingerprint::{Fingerprint, FingerprintRecord, Value};
use exact_cache::manifest::Manifest;
use exact_cache::paths::{Locations, PatternSet};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// The fingerprint record (and so the key) every seed archive of the `unpack` target is made for.
pub fn unpack_record() -> FingerprintRecord {
    let mut fp = Fingerprint::default();
    fp.insert("variant", [("variant".to_owned(), Value::text("fuzz"))].into());
    FingerprintRecord::new("fuzz", &"v".into(), fp)
}
/// The `path` lines of the `unpack` target, relative to its workspace.
pub const UNPACK_PATHS: &[&str] = &["out", "model.pt", "glob/*.bin", "!out/skip"];

/// The manifest parser: whatever parses must verify against its own entries unless it lists a
/// path twice, and must check its header without panicking.
pub fn manifest(data: &[u8]) {
    let Ok(manifest) = serde_json::from_slice::<Manifest>(data) else { return };
    let _ = manifest.check_header("fuzz", 4);
    let mut seen = std::collections::HashSet::new();
    let duplicates = !manifest.entries.iter().all(|e| seen.insert(e.path.as_str()));
    let verdict = manifest.verify(&manifest.entries);
    assert_eq!(verdict.is_err(), duplicates, "a manifest must verify against itself: {verdict:?}");
    if let Some((last, rest)) = manifest.entries.split_last() {
        assert!(manifest.verify(rest).is_err(), "a missing `{}` must be noticed", last.path);
    }
}

/// Fingerprint records, as read from a file and from another entry's archive (explain): a
/// record that parses round-trips exactly, and diffs against any other record do not panic.
pub fn fingerprint(data: &[u8]) {
    let baseline = {
        let mut fp = Fingerprint::default();
        fp.insert("env", [("A".to_owned(), Value::text("1"))].into());
        FingerprintRecord::new("fuzz", &"v".into(), fp)
    };
    if let Ok(record) = FingerprintRecord::from_json(data) {
        let again = FingerprintRecord::from_json(record.to_json().as_bytes()).expect("a parsed record re-parses");
        assert_eq!(again.key, record.key);
        assert_eq!(again.components.encode(), record.components.encode());
        let _ = baseline.components.diff(&record.components);
    }
    // Explain's path: the first member of an archive prefix, in every codec.
    for compression in [Compression::None, Compression::Zstd, Compression::Gzip] {
        let _ = read_fingerprint(data, compression);
    }
    // Structure without a valid digest still must not break diffing or encoding.
    if let Ok(record) = serde_json::from_slice::<FingerprintRecord>(data) {
        let _ = record.components.diff(&baseline.components);
        let _ = record.components.digest();
    }
}

/// Service answers: Twirp, v1 and S3 bodies, error bodies, `Content-Range` and `Content-Length`.
/// The first byte picks the decoder; the rest is the input.
pub fn wire(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    match selector % 4 {
        0 => {
            let _ = wire::decode::<wire::DownloadUrlResponse>(&text);
            let _ = wire::decode::<wire::CreateResponse>(&text);
            let _ = wire::decode::<wire::FinalizeResponse>(&text);
            let _ = wire::decode::<wire::LookupAnswer>(&text);
            let _ = wire::decode::<wire::ReserveAnswer>(&text);
            let _ = wire::decode_xml::<wire::ListBucketResult>(&text);
            let _ = wire::decode_xml::<wire::InitiateMultipartUploadResult>(&text);
            let _ = wire::error_document(&text);
        }
        1 => {
            let status = reqwest::StatusCode::from_u16(400 + u16::from(selector) % 200).expect("4xx/5xx");
            let mut headers = reqwest::header::HeaderMap::new();
            if let Ok(value) = reqwest::header::HeaderValue::from_bytes(&rest[..rest.len().min(12)]) {
                headers.insert(reqwest::header::RETRY_AFTER, value);
            }
            let e = status_error("fuzz", status, &headers, &text);
            assert!(!e.message.contains('\n'), "an error detail is one line: {:?}", e.message);
            assert!(e.message.chars().count() <= 400, "an error detail is short");
        }
        2 => content_range(rest, &text),
        _ => ranges(rest),
    }
}

fn content_range(rest: &[u8], text: &str) {
    let Some(r) = wire::parse_content_range(text) else { return };
    assert!(r.first <= r.last && r.last < r.total, "{r:?} from {text:?}");
    let asked_last = u64::from(rest.first().copied().unwrap_or(0)) * 1000;
    let length = rest.get(1).map(|b| u64::from(*b) * 10);
    if let Ok(first) = wire::first_answer(Some(text), length, asked_last) {
        assert!(first.len >= 1 && first.len <= asked_last + 1 && first.len <= first.total);
        assert!(length.is_none_or(|l| l == first.len));
    }
    if wire::range_answer(Some(text), length, r.first, r.last, r.total).is_err() {
        assert!(length.is_some_and(|l| l != r.last - r.first + 1), "an exact answer is accepted: {text:?}");
    }
}

/// The ranges after a first answer: contiguous, non-empty, at most one chunk each, ending at
/// the total, for any numbers (the first 64 are walked; the end is checked when that is all).
fn ranges(rest: &[u8]) {
    let mut n = [0u8; 24];
    let used = rest.len().min(24);
    n[..used].copy_from_slice(&rest[..used]);
    let number = |i: usize| u64::from_le_bytes(n[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let (from, total, chunk) = (number(0), number(1), number(2));
    let mut expected_start = from;
    for (first, last) in wire::later_ranges(from, total, chunk).take(64) {
        assert_eq!(first, expected_start);
        assert!(first <= last && last < total && last - first < chunk.max(1));
        expected_start = last + 1;
    }
    if from < total {
        let count = (total - from).div_ceil(chunk.max(1));
        if count <= 64 {
            assert_eq!(expected_start, total, "the ranges end at the total");
        }
    }
}

/// What [`unpack`] did with an input.
#[derive(Debug, PartialEq, Eq)]
pub enum UnpackOutcome {
    Restored,
    Refused(String),
}

/// An archive from anywhere, restored into a fresh temporary workspace with a pre-existing
/// tree, a symlink pointing out of a root and a sentinel directory outside the workspace.
/// The first byte picks the codec. Asserts that nothing outside the roots ever changes, that
/// a refused archive changes nothing at all, that staging is always cleaned up, and that every
/// restored symlink stays inside its root.
pub fn unpack(data: &[u8]) -> UnpackOutcome {
    let Some((&selector, archive)) = data.split_first() else { return UnpackOutcome::Refused("empty".into()) };
    let compression = [Compression::None, Compression::Zstd, Compression::Gzip][usize::from(selector % 3)];
    let dir = tempfile::tempdir().expect("temporary directory");
    let base = dir.path();
    let ws = base.join("ws");
    for d in ["outside", "ws/out/sub", "ws/glob", "ws/keep"] {
        std::fs::create_dir_all(base.join(d)).expect("mkdir");
    }
    for (f, content) in [
        ("outside/secret.txt", "outside"),
        ("ws/gen.py", "gen"),
        ("ws/out/old.txt", "old"),
        ("ws/glob/keep.txt", "keep"),
        ("ws/keep/k.txt", "k"),
    ] {
        std::fs::write(base.join(f), content).expect("write");
    }
    std::os::unix::fs::symlink("../../outside", ws.join("out/escape")).expect("symlink");
    std::os::unix::fs::symlink("../outside", ws.join("glob/escape.bin")).expect("symlink");
    let before = tree(base);

    let locations = Locations { workspace: ws.clone(), home: Some(base.join("home")) };
    let paths = PatternSet::parse(UNPACK_PATHS, &locations).expect("fixed path lines parse");
    let key = unpack_record().key;
    let plan = RestorePlan { key: &key, paths: &paths, required: &[], compression, packs: None };
    let outcome = match unpack_archive(archive, &plan)
        .map_err(|e| e.to_string())
        .and_then(|staged| staged.commit().map_err(|e| e.to_string()))
    {
        Ok(_) => UnpackOutcome::Restored,
        Err(e) => UnpackOutcome::Refused(e),
    };
    let after = tree(base);
    make_removable(base);

    if let UnpackOutcome::Refused(why) = &outcome {
        assert_eq!(after, before, "a refused archive changed the tree ({why})");
        return outcome;
    }
    let in_root = |p: &Path| restorable(p);
    for (path, was) in &before {
        if !in_root(path) {
            assert_eq!(after.get(path), Some(was), "`{}` outside the roots changed", path.display());
        }
    }
    for (path, now) in &after {
        assert!(in_root(path) || before.contains_key(path), "`{}` was created outside the roots", path.display());
        assert!(!path.to_string_lossy().contains(exact_cache::paths::STAGING_PREFIX), "staging left behind: {path:?}");
        if let (Node::Link(target), false) = (now, before.get(path) == Some(now)) {
            let root = root_of(path).expect("restored links lie in a root");
            let resolved = normalize(&path.parent().expect("in a directory").join(target));
            assert!(resolved.starts_with(&root), "link `{}` → `{target}` leaves its root", path.display());
        }
    }
    outcome
}

/// The restore root a path lies in, relative to the temporary base: `ws/out`, `ws/model.pt`, or
/// the `ws/glob/<name>.bin` that `glob/*.bin` matched (with everything beneath it).
fn root_of(path: &Path) -> Option<PathBuf> {
    let parts: Vec<String> = path.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    match parts.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["ws", "out", ..] => Some(PathBuf::from("ws/out")),
        ["ws", "model.pt", ..] => Some(PathBuf::from("ws/model.pt")),
        ["ws", "glob", name, ..] if name.ends_with(".bin") => Some(Path::new("ws/glob").join(name)),
        _ => None,
    }
}

fn restorable(path: &Path) -> bool {
    // Directories on the way to a root (their mtime is not compared) and the roots' contents.
    root_of(path).is_some() || matches!(path.to_str(), Some("ws" | "ws/glob"))
}

/// `a/b/../c` → `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[derive(Debug, PartialEq, Eq)]
enum Node {
    Dir(u32),
    File(u32, Vec<u8>),
    Link(String),
    Other(u32),
    /// A file or directory this user may not read (an archive may restore mode 000).
    Unreadable(u32),
}

/// Every path under `base` (relative) with its kind, permission bits and content.
fn tree(base: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    let mut walk = walkdir::WalkDir::new(base).min_depth(1).follow_links(false).into_iter();
    while let Some(entry) = walk.next() {
        let Ok(entry) = entry else { continue }; // beneath an unreadable directory: recorded below
        let meta = entry.path().symlink_metadata().expect("stat");
        let mode = meta.permissions().mode() & 0o7777;
        let node = if meta.file_type().is_symlink() {
            Node::Link(std::fs::read_link(entry.path()).expect("readlink").to_string_lossy().into_owned())
        } else if meta.is_dir() {
            if std::fs::read_dir(entry.path()).is_err() {
                walk.skip_current_dir();
                Node::Unreadable(mode)
            } else {
                Node::Dir(mode)
            }
        } else if meta.is_file() {
            std::fs::read(entry.path()).map_or(Node::Unreadable(mode), |bytes| Node::File(mode, bytes))
        } else {
            Node::Other(meta.mode())
        };
        out.insert(entry.path().strip_prefix(base).expect("under base").to_owned(), node);
    }
    out
}

/// Make everything under `base` removable again (a restored mode-000 directory is not).
fn make_removable(base: &Path) {
    for entry in walkdir::WalkDir::new(base).follow_links(false).into_iter().flatten() {
        let locked = entry.metadata().map_or(true, |m| m.permissions().mode() & 0o700 != 0o700);
        if entry.file_type().is_dir() && locked {
            let _ = std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o700));
        }
    }
}

// ---- placement: guarantee 6 under overlapping roots and hostile targets ----------------------

/// The `path` lines the `placement` target picks its 1–3 roots from: nested plain directories and
/// globs whose matches can lie inside one another's.
pub const PLACEMENT_ROOTS: &[&str] = &["out", "out/r", "out/r/s", "**/*.pth", "**/*.pt2", "d/*"];
/// Names of entries, of pre-existing paths and of link-target components. Few, so that entries
/// of different roots, pre-existing links and link targets collide.
const NAMES: &[&str] =
    &["a", "l", "sub", "x", "victim.txt", "a.pth", "l.pt2", "r", "s", "d", "b.pth", "outside", "out", "ws"];
/// Where pre-existing content goes, relative to the workspace (then 1–3 names).
const PREFIXES: &[&str] = &["", "out", "out/r", "out/r/s", "d"];
/// Absolute link targets, as placeholders for places of the scratch directory. `{root}` stands
/// for `/`; see [`check_placement`] for when it is the real one.
const PLACES: &[&str] = &["{outside}", "{outside}/dir", "{base}", "{root}", "{ws}", "{ws}/out"];
const DIR_MODES: &[u32] = &[0o755, 0o700, 0o555];
const FILE_MODES: &[u32] = &[0o644, 0o600, 0o755];
/// The `..` of all link targets of a case together (pre-existing and archived): once spent,
/// further targets climb no more. With it, no resolution ever climbs above the scratch
/// directory, whatever a broken restore follows (see [`PADDING`]).
const UPS_BUDGET: usize = 16;
/// Heights are counted from the directory holding `ws/` and `outside/`. A resolution starts at
/// most [`FAKE_ROOT_HEIGHT`] high (the highest absolute target) or inside the workspace, and only
/// a link's leading `..` climb: following a link again from the same place lands on the same
/// height, so the highest directory any chain of links reaches is at most `FAKE_ROOT_HEIGHT +
/// UPS_BUDGET` = `PADDING`, the scratch directory's own top.
const PADDING: usize = FAKE_ROOT_HEIGHT + UPS_BUDGET;
const FAKE_ROOT_HEIGHT: usize = 2;
/// Bytes of one generated input ([`placement_input`]); a case reads at most about 300.
pub const PLACEMENT_INPUT_LEN: usize = 512;

/// What an entry or a pre-existing path is. Link targets may hold the placeholders of `PLACES`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    Dir(u32),
    File(u32),
    Link(String),
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::Dir(mode) => write!(f, "/ (dir {mode:o})"),
            Shape::File(mode) => write!(f, " (file {mode:o})"),
            Shape::Link(target) => write!(f, " -> {target}"),
        }
    }
}

/// One restore: its `path` roots, what the workspace holds before, and the archive's entries
/// (root index, path relative to the root, shape), in archive order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementCase {
    pub roots: Vec<String>,
    pub existing: Vec<(String, Shape)>,
    pub entries: Vec<(usize, String, Shape)>,
}

impl std::fmt::Display for PlacementCase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "roots: {}", self.roots.join(", "))?;
        for (path, shape) in &self.existing {
            writeln!(f, "  before: {path}{shape}")?;
        }
        for (root, rel, shape) in &self.entries {
            writeln!(f, "  entry:  {}{shape}", exact_cache::manifest::EntryPath::new(*root, rel))?;
        }
        Ok(())
    }
}

/// Reads choices from fuzz bytes: each is one byte modulo the number of options, and 0 once
/// the bytes run out (so every input decodes, and short inputs make small cases).
struct Choices<'a> {
    data: &'a [u8],
    at: usize,
    ups_left: usize,
}

impl Choices<'_> {
    fn pick(&mut self, options: usize) -> usize {
        let byte = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        usize::from(byte) % options
    }

    fn names(&mut self, count: usize) -> Vec<&'static str> {
        (0..count).map(|_| NAMES[self.pick(NAMES.len())]).collect()
    }

    fn shape(&mut self) -> Shape {
        match self.pick(4) {
            0 => Shape::Dir(DIR_MODES[self.pick(DIR_MODES.len())]),
            1 => Shape::File(FILE_MODES[self.pick(FILE_MODES.len())]),
            _ => Shape::Link(self.target()),
        }
    }

    fn target(&mut self) -> String {
        if self.pick(4) < 3 {
            let ups = self.pick(5).min(self.ups_left);
            self.ups_left -= ups;
            let count = self.pick(3);
            let mut parts = vec![".."; ups];
            parts.extend(self.names(count));
            if parts.is_empty() { ".".to_owned() } else { parts.join("/") }
        } else {
            let place = PLACES[self.pick(PLACES.len())];
            let count = self.pick(2);
            std::iter::once(place).chain(self.names(count)).collect::<Vec<_>>().join("/")
        }
    }
}

/// The inverse of [`Choices`], for writing cases by hand (seeds, regressions).
#[derive(Default)]
struct Encoder(Vec<u8>);

impl Encoder {
    fn index(&mut self, table: &[&str], item: &str) {
        let i = table.iter().position(|t| *t == item).unwrap_or_else(|| panic!("`{item}` is not one of {table:?}"));
        self.0.push(i as u8);
    }

    fn count(&mut self, n: usize, below: usize, what: &str) {
        assert!(n < below, "at most {} {what}", below - 1);
        self.0.push(n as u8);
    }

    fn names(&mut self, names: &[&str]) {
        for name in names {
            self.index(NAMES, name);
        }
    }

    fn mode(&mut self, modes: &[u32], mode: u32) {
        let i =
            modes.iter().position(|m| *m == mode).unwrap_or_else(|| panic!("mode {mode:o} is not one of {modes:?}"));
        self.0.push(i as u8);
    }

    fn shape(&mut self, shape: &Shape) {
        match shape {
            Shape::Dir(mode) => {
                self.0.push(0);
                self.mode(DIR_MODES, *mode);
            }
            Shape::File(mode) => {
                self.0.push(1);
                self.mode(FILE_MODES, *mode);
            }
            Shape::Link(target) => {
                self.0.push(2);
                self.target(target);
            }
        }
    }

    fn target(&mut self, target: &str) {
        if target.starts_with('{') {
            let place = PLACES
                .iter()
                .filter(|p| target == **p || target.starts_with(&format!("{p}/")))
                .max_by_key(|p| p.len())
                .unwrap_or_else(|| panic!("`{target}` starts with no place of {PLACES:?}"));
            self.0.push(3);
            self.index(PLACES, place);
            let names: Vec<&str> = target[place.len()..].split('/').filter(|n| !n.is_empty()).collect();
            self.count(names.len(), 2, "name after a place");
            self.names(&names);
        } else {
            let parts: Vec<&str> = target.split('/').filter(|p| *p != "." && !p.is_empty()).collect();
            let ups = parts.iter().take_while(|p| **p == "..").count();
            self.0.push(0);
            self.count(ups, 5, "leading `..`");
            self.count(parts.len() - ups, 3, "names after the `..`");
            self.names(&parts[ups..]);
        }
    }
}

impl PlacementCase {
    /// A case written out by hand (tests, seeds).
    pub fn new(roots: &[&str], existing: Vec<(&str, Shape)>, entries: Vec<(usize, &str, Shape)>) -> Self {
        Self {
            roots: roots.iter().map(|r| (*r).to_owned()).collect(),
            existing: existing.into_iter().map(|(p, s)| (p.to_owned(), s)).collect(),
            entries: entries.into_iter().map(|(r, p, s)| (r, p.to_owned(), s)).collect(),
        }
    }

    /// Decode fuzz bytes into a case; every input is a case. Unless the first byte is a
    /// multiple of 8, the entries a verifier refuses (outside their glob, duplicates, beneath a
    /// non-directory, link targets leaving their root) are dropped, so that the archive reaches
    /// placement rather than being refused whole for one of them.
    pub fn decode(data: &[u8]) -> Self {
        let mut c = Choices { data, at: 0, ups_left: UPS_BUDGET };
        let filtered = c.pick(8) != 0;
        let roots: Vec<String> =
            (0..1 + c.pick(3)).map(|_| PLACEMENT_ROOTS[c.pick(PLACEMENT_ROOTS.len())].to_owned()).collect();
        let existing = (0..c.pick(9))
            .map(|_| {
                let prefix = PREFIXES[c.pick(PREFIXES.len())];
                let count = 1 + c.pick(3);
                let names = c.names(count).join("/");
                let path = if prefix.is_empty() { names } else { format!("{prefix}/{names}") };
                (path, c.shape())
            })
            .collect();
        let entries: Vec<_> = (0..c.pick(13))
            .map(|_| {
                let root = c.pick(roots.len());
                let count = c.pick(5);
                (root, c.names(count).join("/"), c.shape())
            })
            .collect();
        let entries = if filtered { verifiable(&entries, &roots) } else { entries };
        Self { roots, existing, entries }
    }

    /// Bytes that [`PlacementCase::decode`] turns back into this case (entries as they are,
    /// unfiltered). Panics on a case no input can express (a name, mode or place outside the
    /// tables, too many of something, more `..` than the budget).
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        e.0.push(0);
        e.count(self.roots.len() - 1, 3, "extra roots");
        for root in &self.roots {
            e.index(PLACEMENT_ROOTS, root);
        }
        e.count(self.existing.len(), 9, "pre-existing paths");
        for (path, shape) in &self.existing {
            let prefix = PREFIXES
                .iter()
                .filter(|p| !p.is_empty() && path.starts_with(&format!("{p}/")))
                .filter(|p| path[p.len() + 1..].split('/').count() <= 3)
                .max_by_key(|p| p.len())
                .copied()
                .unwrap_or("");
            let rest = if prefix.is_empty() { path.as_str() } else { &path[prefix.len() + 1..] };
            let names: Vec<&str> = rest.split('/').collect();
            e.index(PREFIXES, prefix);
            e.count(names.len() - 1, 3, "names after a prefix");
            e.names(&names);
            e.shape(shape);
        }
        e.count(self.entries.len(), 13, "entries");
        for (root, rel, shape) in &self.entries {
            e.count(*root, self.roots.len(), "root index");
            let names: Vec<&str> = rel.split('/').filter(|n| !n.is_empty()).collect();
            e.count(names.len(), 5, "names in an entry path");
            e.names(&names);
            e.shape(shape);
        }
        e.0
    }
}

/// The deterministic generator: [`PLACEMENT_INPUT_LEN`] pseudo-random bytes for case `case`
/// of `seed` (splitmix64 to seed, xorshift64 to draw), to decode with
/// [`PlacementCase::decode`] or to hand to the fuzz target as a file.
pub fn placement_input(seed: u64, case: u64) -> Vec<u8> {
    let mut z = seed.wrapping_add(case.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    let mut x = (z ^ (z >> 31)) | 1;
    (0..PLACEMENT_INPUT_LEN)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// What a restore made of a [`PlacementCase`].
#[derive(Debug, PartialEq, Eq)]
pub enum PlacementOutcome {
    Restored,
    /// Refused before placement (`unpack`: the verifier) or undone (`commit`), with the error.
    Refused {
        at: &'static str,
        error: String,
    },
}

/// What [`check_placement`] found: the restore's outcome and every promise it broke.
#[derive(Debug)]
pub struct PlacementVerdict {
    pub outcome: PlacementOutcome,
    pub broken: Vec<String>,
}

impl std::fmt::Display for PlacementVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.outcome {
            PlacementOutcome::Restored => write!(f, "restored")?,
            PlacementOutcome::Refused { at, error } => write!(f, "refused at {at}: {error}")?,
        }
        write!(f, "; {} broken promise(s)", self.broken.len())?;
        for b in self.broken.iter().take(12) {
            write!(f, "\n  {b}")?;
        }
        Ok(())
    }
}

/// Fuzz target `placement`: the bytes decode into a [`PlacementCase`]; panics with the case and
/// what went wrong when [`check_placement`] finds a broken promise.
pub fn placement(data: &[u8]) -> PlacementOutcome {
    let case = PlacementCase::decode(data);
    let verdict = check_placement(&case);
    assert!(verdict.broken.is_empty(), "guarantee 6 broken by\n{case}{verdict}");
    verdict.outcome
}

/// Restore `case` in a fresh scratch directory and judge it against guarantee 6 of
/// docs/design.md (restored content is untrusted) and guarantee 2 (all or nothing).
///
/// The scratch directory: [`PADDING`] nested directories, then `outside/` (files, a directory, a
/// link: the region a broken restore would reach) and `ws/`, the workspace, which holds the
/// case's pre-existing content. Links aimed at `{root}` point to the real `/` only when that
/// cannot be written through (a user other than root that cannot write `/`, and none of the
/// names exist there); otherwise to a padding directory [`FAKE_ROOT_HEIGHT`] levels above.
/// Nothing is ever placed where a restore would treat it as user input rather than as target
/// content: no pre-existing link is a plain root, a glob's base, or an ancestor of either.
///
/// After the restore (success or refusal does not matter), the verdict lists each broken
/// promise:
/// - nothing outside `ws/` was created, changed (kind, mode, content, link target) or removed;
/// - in `ws/`, nothing outside the roots changed, and the only new paths outside the roots are
///   directories on the way to an entry;
/// - every link the restore made or changed resolves inside the roots — following the links
///   the restore made; a link already there (the user's) ends the walk, since where it points
///   is not the restore's doing;
/// - a refused restore left the whole tree exactly as it was (its staging included:
///   [`exact_cache::archive::Staged`] removes its staging when dropped);
/// - a completed one left no staging directory.
pub fn check_placement(case: &PlacementCase) -> PlacementVerdict {
    use std::fs;
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().expect("temporary directory");
    let top = dir.path().canonicalize().expect("temporary directory resolves");
    let mut base = top.clone();
    let mut fake_root = top.clone();
    for level in 0..PADDING {
        if level == PADDING - FAKE_ROOT_HEIGHT {
            fake_root = base.clone();
        }
        base.push("p");
        fs::create_dir(&base).expect("mkdir");
    }
    let ws = base.join("ws");
    let outside = base.join("outside");
    for d in [&ws, &outside, &outside.join("dir"), &outside.join("dir/sub")] {
        fs::create_dir(d).expect("mkdir");
    }
    for (f, content, mode) in [("secret.txt", "secret", 0o600), ("a", "a", 0o644), ("dir/f", "f", 0o755)] {
        fs::write(outside.join(f), content).expect("write");
        fs::set_permissions(outside.join(f), fs::Permissions::from_mode(mode)).expect("chmod");
    }
    symlink("dir", outside.join("l")).expect("symlink");
    let root = if real_root_is_safe() { PathBuf::from("/") } else { fake_root };
    let resolve_places = |target: &str| {
        let Some((place, rest)) = target.strip_prefix('{').and_then(|t| t.split_once('}')) else {
            return target.to_owned();
        };
        let place = match place {
            "outside" => &outside,
            "base" => &base,
            "root" => &root,
            "ws" => &ws,
            other => panic!("no place `{other}`"),
        };
        let rest = rest.trim_start_matches('/');
        let path = if rest.is_empty() { place.clone() } else { place.join(rest) };
        path.to_string_lossy().into_owned()
    };

    let locations = Locations { workspace: ws.clone(), home: None };
    let paths = PatternSet::parse(&case.roots, &locations).expect("the roots parse");
    let bases: Vec<&Path> = paths.includes.iter().map(|p| p.base.as_path()).collect();

    // Pre-existing content, never written through a link (nor through one made earlier here).
    let mut dir_modes = Vec::new();
    'existing: for (rel, shape) in &case.existing {
        let dest = ws.join(rel);
        if matches!(shape, Shape::Link(_)) && bases.iter().any(|b| b.starts_with(&dest)) {
            continue; // a link at a root's base or above: user input, not target content
        }
        for ancestor in
            Path::new(rel).ancestors().skip(1).filter(|a| !a.as_os_str().is_empty()).collect::<Vec<_>>().iter().rev()
        {
            let at = ws.join(ancestor);
            match at.symlink_metadata() {
                Ok(m) if m.is_dir() => {}
                Ok(_) => continue 'existing,
                Err(_) => fs::create_dir(&at).expect("mkdir in the workspace"),
            }
        }
        if dest.symlink_metadata().is_ok() {
            continue;
        }
        match shape {
            Shape::Dir(mode) => {
                fs::create_dir(&dest).expect("mkdir in the workspace");
                dir_modes.push((dest, *mode));
            }
            Shape::File(mode) => {
                fs::write(&dest, format!("before {rel}\n")).expect("write in the workspace");
                fs::set_permissions(&dest, fs::Permissions::from_mode(*mode)).expect("chmod");
            }
            Shape::Link(target) => symlink(resolve_places(target), &dest).expect("symlink in the workspace"),
        }
    }
    for (d, mode) in dir_modes.iter().rev() {
        fs::set_permissions(d, fs::Permissions::from_mode(*mode)).expect("chmod");
    }

    let entries = &case.entries;
    let archive = placement_archive(entries, &case.roots, &resolve_places);
    let before = tree(&top);
    let key = unpack_record().key;
    let plan = RestorePlan { key: &key, paths: &paths, required: &[], compression: Compression::None, packs: None };
    let outcome = match unpack_archive(&archive[..], &plan) {
        Err(e) => PlacementOutcome::Refused { at: "unpack", error: e.to_string() },
        Ok(staged) => match staged.commit() {
            Ok(_) => PlacementOutcome::Restored,
            Err(e) => PlacementOutcome::Refused { at: "commit", error: e.to_string() },
        },
    };
    let after = tree(&top);
    let judged = Judge { top: &top, ws: &ws, paths: &paths, before: &before, after: &after }.judge(&outcome, entries);
    make_removable(&top);
    PlacementVerdict { outcome, broken: judged }
}

/// Whether links to the real `/` are harmless here: nothing can be created, changed or merged
/// into there by this user.
fn real_root_is_safe() -> bool {
    // SAFETY: `geteuid` has no preconditions; `access` reads a NUL-terminated literal.
    let (euid, writable) = unsafe { (libc::geteuid(), libc::access(c"/".as_ptr(), libc::W_OK) == 0) };
    euid != 0 && !writable && NAMES.iter().all(|n| Path::new("/").join(n).symlink_metadata().is_err())
}

/// The entries an honest verifier accepts, in order: covered by their root, no duplicates,
/// nothing beneath a non-directory of the same root, link targets inside their root.
fn verifiable(entries: &[(usize, String, Shape)], roots: &[String]) -> Vec<(usize, String, Shape)> {
    let locations = Locations { workspace: PathBuf::from("/ws"), home: None };
    let paths = PatternSet::parse(roots, &locations).expect("the roots parse");
    let mut kept: Vec<(usize, String, Shape)> = Vec::new();
    for (root, rel, shape) in entries {
        let pattern = &paths.includes[*root];
        let dest = if rel.is_empty() { pattern.base.clone() } else { pattern.base.join(rel) };
        let covered = match &pattern.glob {
            None => true,
            Some(glob) => dest.ancestors().take_while(|a| *a != pattern.base).any(|a| glob.is_match(a)),
        };
        let clash = kept.iter().any(|(r, other, other_shape)| {
            let under = |a: &str, b: &str| b.is_empty() && !a.is_empty() || a.starts_with(&format!("{b}/"));
            *r == *root
                && (other == rel
                    || (under(rel, other) && !matches!(other_shape, Shape::Dir(_)))
                    || (under(other, rel) && !matches!(shape, Shape::Dir(_))))
        });
        let link_ok = match shape {
            // A place stands for an absolute path.
            Shape::Link(target) => {
                !target.starts_with('{') && exact_cache::archive::check_symlink_target(rel, target).is_ok()
            }
            _ => true,
        };
        if covered && !clash && link_ok {
            kept.push((*root, rel.clone(), shape.clone()));
        }
    }
    kept
}

/// A valid archive of `entries`: the fingerprint first, the manifest — matching every entry —
/// last, so the verifier lets it through to placement.
fn placement_archive(
    entries: &[(usize, String, Shape)],
    roots: &[String],
    resolve_places: &dyn Fn(&str) -> String,
) -> Vec<u8> {
    use exact_cache::archive::{FINGERPRINT_NAME, MANIFEST_NAME};
    use exact_cache::manifest::{EntryKind, EntryPath, MANIFEST_FORMAT, ManifestEntry, RootKind, RootRecord};
    use sha2::Digest;
    let mut tar = tar::Builder::new(Vec::new());
    let record = unpack_record();
    append_member(&mut tar, FINGERPRINT_NAME, tar::EntryType::Regular, 0o644, None, record.to_json().as_bytes());
    let mut listed = Vec::new();
    for (root, rel, shape) in entries {
        let path = EntryPath::new(*root, rel).to_string();
        let (kind, mode, size, sha256, target) = match shape {
            Shape::Dir(mode) => {
                append_member(&mut tar, &format!("{path}/"), tar::EntryType::Directory, *mode, None, b"");
                (EntryKind::Dir, *mode, 0, None, None)
            }
            Shape::File(mode) => {
                let content = format!("restored {path}\n");
                append_member(&mut tar, &path, tar::EntryType::Regular, *mode, None, content.as_bytes());
                let sha = hex::encode(sha2::Sha256::digest(content.as_bytes()));
                (EntryKind::File, *mode, content.len() as u64, Some(sha), None)
            }
            Shape::Link(target) => {
                let target = resolve_places(target);
                append_member(&mut tar, &path, tar::EntryType::Symlink, 0o777, Some(&target), b"");
                (EntryKind::Symlink, 0o777, 0, None, Some(target))
            }
        };
        listed.push(ManifestEntry { path, kind, mode, size, sha256, target });
    }
    let manifest = Manifest {
        exact_cache_manifest: MANIFEST_FORMAT,
        key: record.key.to_string(),
        roots: roots
            .iter()
            .map(|line| RootRecord {
                line: line.clone(),
                kind: if exact_cache::paths::has_glob_meta(line) { RootKind::Glob } else { RootKind::Dir },
            })
            .collect(),
        entries: listed,
        stack: None,
        generation: None,
    };
    let json = serde_json::to_vec(&manifest).expect("a manifest serializes");
    append_member(&mut tar, MANIFEST_NAME, tar::EntryType::Regular, 0o644, None, &json);
    tar.into_inner().expect("writing to memory")
}

/// One tar member, with a pax header when the link target does not fit the ustar field.
fn append_member(
    tar: &mut tar::Builder<Vec<u8>>,
    name: &str,
    kind: tar::EntryType,
    mode: u32,
    link: Option<&str>,
    data: &[u8],
) {
    assert!(name.len() <= 100, "short names only: {name}");
    if let Some(link) = link.filter(|l| l.len() > 100) {
        tar.append_pax_extensions([("linkpath", link.as_bytes())]).expect("writing to memory");
    }
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_mtime(1_700_000_000);
    header.set_size(data.len() as u64);
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    if let Some(link) = link {
        let short = &link.as_bytes()[..link.len().min(100)];
        header.as_old_mut().linkname[..short.len()].copy_from_slice(short);
    }
    header.set_cksum();
    tar.append(&header, data).expect("writing to memory");
}

/// The trees before and after one restore, relative to the scratch directory's top.
struct Judge<'a> {
    top: &'a Path,
    ws: &'a Path,
    paths: &'a PatternSet,
    before: &'a BTreeMap<PathBuf, Node>,
    after: &'a BTreeMap<PathBuf, Node>,
}

impl Judge<'_> {
    fn judge(&self, outcome: &PlacementOutcome, entries: &[(usize, String, Shape)]) -> Vec<String> {
        let mut broken = Vec::new();
        let ws_rel = self.ws.strip_prefix(self.top).expect("the workspace is in the scratch directory");
        let paths: std::collections::BTreeSet<&PathBuf> = self.before.keys().chain(self.after.keys()).collect();
        // Directories on the way to an entry may be created outside the roots.
        let mut on_the_way = std::collections::HashSet::new();
        for (root, rel, _) in entries {
            let base = &self.paths.includes[*root].base;
            let dest = if rel.is_empty() { base.clone() } else { base.join(rel) };
            on_the_way
                .extend(dest.ancestors().skip(1).filter_map(|a| a.strip_prefix(self.top).ok()).map(Path::to_owned));
        }
        for path in paths {
            let (was, now) = (self.before.get(path), self.after.get(path));
            if path.to_string_lossy().contains(exact_cache::paths::STAGING_PREFIX) {
                // Reported once, at its top directory; `Staged` removes it when dropped.
                let top_dir = path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(exact_cache::paths::STAGING_PREFIX));
                if top_dir && now.is_some() && was.is_none() {
                    broken.push(format!("staging left behind: `{}`", self.show(path)));
                }
                continue;
            }
            if was == now {
                continue;
            }
            let change = match (was, now) {
                (None, Some(n)) => format!("created ({})", describe(n)),
                (Some(w), None) => format!("removed (was {})", describe(w)),
                (Some(w), Some(n)) => format!("changed from {} to {}", describe(w), describe(n)),
                (None, None) => unreachable!("a path of one of the trees"),
            };
            if let PlacementOutcome::Refused { at, .. } = outcome {
                broken.push(format!("refused at {at}, yet `{}` was {change}", self.show(path)));
                continue;
            }
            let Ok(in_ws) = path.strip_prefix(ws_rel) else {
                broken.push(format!("`{}`, outside the workspace, was {change}", self.show(path)));
                continue;
            };
            if in_ws.as_os_str().is_empty() || !self.in_roots(in_ws) {
                let allowed = was.is_none() && matches!(now, Some(Node::Dir(_))) && on_the_way.contains(path);
                if !allowed {
                    broken.push(format!("`{}`, in the workspace but outside the roots, was {change}", self.show(path)));
                }
            }
        }
        if let PlacementOutcome::Restored = outcome {
            for (path, now) in self.after {
                if let (Node::Link(_), true) = (now, self.before.get(path) != Some(now))
                    && path.starts_with(ws_rel)
                {
                    self.check_link(path, &mut broken);
                }
            }
        }
        broken
    }

    /// A path relative to the top as it reads from `{base}`, the directory holding `ws/` and
    /// `outside/`: `{base}/ws/out/x`, `{base}/outside/x`, `{base}/../../x` in the padding above.
    fn show(&self, path: &Path) -> String {
        let base = self.ws.parent().expect("the workspace has a parent").strip_prefix(self.top).expect("in the top");
        let shared = path.components().zip(base.components()).take_while(|(a, b)| a == b).count();
        let rest: PathBuf = path.components().skip(shared).collect();
        let ups = "/..".repeat(base.components().count() - shared);
        let rest = if rest.as_os_str().is_empty() { String::new() } else { format!("/{}", rest.display()) };
        format!("{{base}}{ups}{rest}")
    }

    /// Whether a workspace-relative path lies in one of the roots: beneath a plain root's base,
    /// or at or beneath a glob's match.
    fn in_roots(&self, in_ws: &Path) -> bool {
        let abs = self.ws.join(in_ws);
        self.paths.includes.iter().any(|p| match &p.glob {
            None => abs.starts_with(&p.base),
            Some(glob) => {
                abs.ancestors().take_while(|a| a.starts_with(&p.base) && *a != p.base).any(|a| glob.is_match(a))
            }
        })
    }

    /// A link the restore made must lead into the roots, following the links the restore made
    /// (at most 40, as the kernel does) and stopping at a link that was already there.
    fn check_link(&self, link: &Path, broken: &mut Vec<String>) {
        let restored = |abs: &Path| {
            let rel = abs.strip_prefix(self.top).ok();
            let now = rel.and_then(|r| self.after.get(r));
            matches!(now, Some(Node::Link(_))) && rel.and_then(|r| self.before.get(r)) != now
        };
        let abs = self.top.join(link);
        let target = std::fs::read_link(&abs).expect("readlink");
        let mut at = abs.parent().expect("a link lies in a directory").to_owned();
        let mut todo = std::collections::VecDeque::new();
        push_front_components(&mut todo, &target);
        let mut hops = 0;
        while let Some(part) = todo.pop_front() {
            match part {
                Step::Root => at = PathBuf::from("/"),
                Step::Up => {
                    at.pop();
                }
                Step::Name(name) => {
                    let next = at.join(name);
                    if !next.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
                        at = next;
                        continue;
                    }
                    if !restored(&next) {
                        at = next; // the user's own link: where it leads is not the restore's doing
                        break;
                    }
                    hops += 1;
                    if hops > 40 {
                        return; // a loop leads nowhere
                    }
                    let target = std::fs::read_link(&next).expect("readlink");
                    push_front_components(&mut todo, &target);
                }
            }
        }
        let inside = at.strip_prefix(self.ws).is_ok_and(|in_ws| !in_ws.as_os_str().is_empty() && self.in_roots(in_ws));
        if !inside {
            broken.push(format!(
                "restored link `{}` -> `{}` leads to `{}`, outside the roots",
                self.show(link),
                target.display(),
                at.strip_prefix(self.top).map_or_else(|_| at.display().to_string(), |rel| self.show(rel))
            ));
        }
    }
}

/// One step of resolving a path.
enum Step {
    Root,
    Up,
    Name(std::ffi::OsString),
}

/// Put a link target's steps in front of `todo`, in order.
fn push_front_components(todo: &mut std::collections::VecDeque<Step>, target: &Path) {
    for c in target.components().rev() {
        match c {
            Component::RootDir | Component::Prefix(_) => todo.push_front(Step::Root),
            Component::CurDir => {}
            Component::ParentDir => todo.push_front(Step::Up),
            Component::Normal(name) => todo.push_front(Step::Name(name.to_owned())),
        }
    }
}

fn describe(node: &Node) -> String {
    match node {
        Node::Dir(mode) => format!("dir {mode:o}"),
        Node::File(mode, bytes) => format!("file {mode:o} {:?}", String::from_utf8_lossy(bytes)),
        Node::Link(target) => format!("link -> {target}"),
        Node::Other(mode) => format!("special {mode:o}"),
        Node::Unreadable(mode) => format!("unreadable {mode:o}"),
    }
}
