//! Entry points of the fuzz targets in `fuzz/` and of their replay test (tests/fuzz_replay.rs).
//! Each takes arbitrary bytes, must never panic, and asserts the promise of the code it drives:
//! a parsed manifest verifies against itself, a fingerprint record survives a round trip, a
//! server's answer never yields a range outside what was asked, and an archive — whatever it
//! holds — never changes anything outside the restore roots, and changes nothing at all
//! unless it is restored whole. Not part of the supported interface.

use crate::archive::{Compression, RestorePlan, read_fingerprint, unpack as unpack_archive};
use crate::backend::http::status_error;
use crate::backend::wire;
use crate::fingerprint::{Fingerprint, FingerprintRecord, Value};
use crate::manifest::Manifest;
use crate::paths::{Locations, PatternSet};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// The fingerprint record (and so the key) every seed archive of the `unpack` target is made for.
pub fn unpack_record() -> FingerprintRecord {
    let mut fp = Fingerprint::default();
    fp.insert("variant", [("variant".to_owned(), Value::text("fuzz"))].into());
    FingerprintRecord::new("fuzz", "v", fp)
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
        FingerprintRecord::new("fuzz", "v", fp)
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

/// Service answers: Twirp and v1 bodies, error bodies, `Content-Range` and `Content-Length`.
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
    if let Ok(first) = wire::first_answer(Some(text), length, asked_last, None) {
        assert!(first.len >= 1 && first.len <= asked_last + 1 && first.len <= first.total);
        assert!(length.is_none_or(|l| l == first.len));
    }
    if wire::range_answer(Some(text), length, r.first, r.last, Some(r.total)).is_err() {
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
    let plan = RestorePlan { key: &key, paths: &paths, required: &[], compression };
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
        assert!(!path.to_string_lossy().contains(crate::paths::STAGING_PREFIX), "staging left behind: {path:?}");
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
        if entry.file_type().is_dir() {
            let _ = std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o700));
        }
    }
}
