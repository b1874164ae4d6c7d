//! Archives: round trips, all-or-nothing placement, and hostile archives built by hand.

use crate::support::{Immutable, TarBuilder, assert_shown, dir_entry, file_entry, snapshot, write};
use exact_cache::archive::{
    Compression, FINGERPRINT_NAME, MANIFEST_NAME, RestorePlan, SecretScanner, UnpackError, inventory, unpack,
    write_archive,
};
use exact_cache::fingerprint::{Fingerprint, FingerprintRecord};
use exact_cache::manifest::{MANIFEST_FORMAT, Manifest, ManifestEntry, RootKind, RootRecord};
use exact_cache::outcome::MissReason;
use exact_cache::paths::{Locations, PatternSet};
use std::path::Path;
use tar::EntryType;

fn record(prefix: &str) -> FingerprintRecord {
    let mut fp = Fingerprint::default();
    fp.insert("variant", [("variant".to_owned(), exact_cache::fingerprint::Value::text(prefix))].into());
    FingerprintRecord::new(prefix, &"v".into(), fp)
}

fn pattern_set(ws: &Path, lines: &[&str]) -> PatternSet {
    PatternSet::parse(lines, &Locations { workspace: ws.to_owned(), home: None }).unwrap()
}

fn pack(ws: &Path, lines: &[&str], rec: &FingerprintRecord, compression: Compression) -> Vec<u8> {
    let inv = inventory(&pattern_set(ws, lines)).unwrap();
    write_archive(&inv, rec, compression, None, &SecretScanner::none(), Vec::new(), &mut |_| {}).unwrap().0
}

fn restore(bytes: &[u8], ws: &Path, lines: &[&str], key: &str, compression: Compression) -> Result<(), UnpackError> {
    let set = pattern_set(ws, lines);
    let plan = RestorePlan { key, paths: &set, required: &[], compression, packs: None };
    unpack(bytes, &plan)?.commit().map(|_| ())
}

fn fixture_tree(ws: &Path) {
    use std::os::unix::fs::PermissionsExt;
    write(&ws.join("out/models/a.pth"), &vec![1u8; 70_000]);
    write(&ws.join("out/models/b.expected"), b"expected\n");
    write(&ws.join("out/bin/tool"), b"#!/bin/sh\necho hi\n");
    std::fs::set_permissions(ws.join("out/bin/tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(ws.join("out/models/b.expected"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::create_dir_all(ws.join("out/empty/nested")).unwrap();
    std::os::unix::fs::symlink("models/a.pth", ws.join("out/latest.pth")).unwrap();
    std::os::unix::fs::symlink("../models", ws.join("out/bin/models")).unwrap();
    let long = "d".repeat(80);
    write(&ws.join(format!("out/{long}/{long}/file-with-a-long-name.txt")), b"long");
    write(&ws.join("saved_model/variables/variables.index"), b"idx");
    write(&ws.join("saved_model/saved_model.pb"), &[0u8, 1, 2, 3]);
    write(&ws.join("single.pte"), b"pte");
}

#[test]
fn round_trip_is_byte_identical_for_every_codec() {
    let lines = ["out", "saved_model", "single.pte", "missing-dir"];
    for compression in [Compression::Zstd, Compression::Gzip, Compression::None] {
        let src = tempfile::tempdir().unwrap();
        fixture_tree(src.path());
        let rec = record("rt");
        let bytes = pack(src.path(), &lines, &rec, compression);
        let dst = tempfile::tempdir().unwrap();
        restore(&bytes, dst.path(), &lines, &rec.key, compression).unwrap();
        assert_eq!(snapshot(dst.path()), snapshot(src.path()), "{}", compression.name());
        let leftovers: Vec<_> = std::fs::read_dir(dst.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".exact-cache"))
            .collect();
        assert!(leftovers.is_empty(), "staging removed: {leftovers:?}");
    }
}

#[test]
fn globs_keep_their_base_and_restore_over_existing_files() {
    let src = tempfile::tempdir().unwrap();
    write(&src.path().join("fixtures/x/1.pth"), b"one");
    write(&src.path().join("fixtures/2.pth"), b"two");
    write(&src.path().join("fixtures/gen.py"), b"not cached");
    let lines = ["fixtures/**/*.pth"];
    let rec = record("glob");
    let bytes = pack(src.path(), &lines, &rec, Compression::Zstd);
    let dst = tempfile::tempdir().unwrap();
    write(&dst.path().join("fixtures/gen.py"), b"the checkout's own file");
    write(&dst.path().join("fixtures/2.pth"), b"stale");
    restore(&bytes, dst.path(), &lines, &rec.key, Compression::Zstd).unwrap();
    assert_eq!(std::fs::read(dst.path().join("fixtures/2.pth")).unwrap(), b"two");
    assert_eq!(std::fs::read(dst.path().join("fixtures/x/1.pth")).unwrap(), b"one");
    assert_eq!(std::fs::read(dst.path().join("fixtures/gen.py")).unwrap(), b"the checkout's own file");
}

#[test]
fn a_failed_placement_leaves_the_target_exactly_as_it_was() {
    let src = tempfile::tempdir().unwrap();
    write(&src.path().join("out/0.pth"), b"new zero");
    write(&src.path().join("out/a/b.pth"), b"new b");
    write(&src.path().join("out/c/d.pth"), b"new d");
    let lines = ["out/**/*.pth"];
    let rec = record("rollback");
    let bytes = pack(src.path(), &lines, &rec, Compression::Zstd);

    let dst = tempfile::tempdir().unwrap();
    write(&dst.path().join("out/0.pth"), b"old zero");
    // A file where the entry needs a directory: it is replaced (and must come back).
    write(&dst.path().join("out/a"), b"in the way");
    // A directory nothing can be placed in, even by root: `out/c/d.pth` cannot be placed.
    std::fs::create_dir_all(dst.path().join("out/c")).unwrap();
    let before = snapshot(dst.path());
    let Some(_guard) = Immutable::set(&dst.path().join("out/c")) else {
        eprintln!("skipped: `chattr +i` is not available here");
        return;
    };
    let err = restore(&bytes, dst.path(), &lines, &rec.key, Compression::Zstd).unwrap_err();
    assert_eq!(err.miss_reason(), MissReason::IoError, "{err}");
    drop(_guard);
    assert_eq!(snapshot(dst.path()), before, "every move was undone");
}

/// Found by the adversarial review: when setting a directory's mode failed, the rollback tried
/// to put back a mode that had never changed, failed, and kept the staging directory (hostile
/// content included) in the target. A failed chmod is simply not a step to undo.
#[test]
fn a_directory_mode_that_cannot_be_set_is_rolled_back_cleanly() {
    use std::os::unix::fs::PermissionsExt;
    let src = tempfile::tempdir().unwrap();
    write(&src.path().join("out/x"), b"new x");
    std::fs::create_dir_all(src.path().join("out/ro")).unwrap();
    std::fs::set_permissions(src.path().join("out/ro"), std::fs::Permissions::from_mode(0o700)).unwrap();
    let lines = ["out"];
    let rec = record("modes");
    let bytes = pack(src.path(), &lines, &rec, Compression::Zstd);

    let dst = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dst.path().join("out/ro")).unwrap();
    std::fs::set_permissions(dst.path().join("out/ro"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = snapshot(dst.path());
    let Some(guard) = Immutable::set(&dst.path().join("out/ro")) else {
        eprintln!("skipped: `chattr +i` is not available here");
        return;
    };
    let err = restore(&bytes, dst.path(), &lines, &rec.key, Compression::Zstd).unwrap_err();
    assert!(matches!(err, UnpackError::Io { .. }), "a clean rollback, not {err}");
    drop(guard);
    assert_eq!(snapshot(dst.path()), before, "every move was undone, no staging left");
}

#[test]
fn symlinks_escaping_a_root_are_refused_at_save() {
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(src.path().join("out")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", src.path().join("out/abs")).unwrap();
    let absolute = inventory(&pattern_set(src.path(), &["out"])).unwrap_err();
    std::fs::remove_file(src.path().join("out/abs")).unwrap();
    std::os::unix::fs::symlink("../../x", src.path().join("out/up")).unwrap();
    let escaping = inventory(&pattern_set(src.path(), &["out"])).unwrap_err();
    // Each error names the link and says why: an absolute target, one that escapes its root.
    let said = format!("{absolute}\n{escaping}\n");
    assert_shown!(src.path(), "symlinks_escaping_a_root_are_refused_at_save", said);
}

// ---- hostile archives ------------------------------------------------------------------------

const KEY_PREFIX: &str = "hostile";

fn fingerprint_member(tar: &mut TarBuilder) -> String {
    let rec = record(KEY_PREFIX);
    tar.file(FINGERPRINT_NAME, rec.to_json().as_bytes());
    rec.key.to_string()
}

fn manifest_member(tar: &mut TarBuilder, key: &str, entries: Vec<ManifestEntry>) {
    let m = Manifest {
        exact_cache_manifest: MANIFEST_FORMAT,
        key: key.into(),
        roots: vec![RootRecord { line: "out".into(), kind: RootKind::Dir }],
        entries,
        stack: None,
        generation: None,
    };
    tar.file(MANIFEST_NAME, &serde_json::to_vec(&m).unwrap());
}

/// Restore `bytes` into a fresh workspace whose `out` root holds a sentinel file, and check
/// that nothing changed anywhere: not the root, not its parent, not a sibling directory.
fn assert_refused(bytes: Vec<u8>, key: &str, expected: MissReason, message: &str) {
    let ws = tempfile::tempdir().unwrap();
    write(&ws.path().join("out/sentinel"), b"keep me");
    write(&ws.path().join("outside/victim"), b"untouched");
    let before = snapshot(ws.path());
    let set = pattern_set(ws.path(), &["out"]);
    let plan = RestorePlan { key, paths: &set, required: &[], compression: Compression::None, packs: None };
    let err = match unpack(&bytes[..], &plan) {
        Ok(staged) => staged.commit().map(|_| ()).unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(err.miss_reason(), expected, "{message}: {err}");
    assert!(err.to_string().contains(message), "expected `{message}` in `{err}`");
    assert_eq!(snapshot(ws.path()), before, "{message}: the workspace must be untouched");
}

#[test]
fn an_honest_hand_made_archive_is_accepted() {
    // The control for every refusal below: the same builder, nothing hostile.
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None).file("0/a", b"data");
    manifest_member(&mut tar, &key, vec![dir_entry("0"), file_entry("0/a", b"data")]);
    let ws = tempfile::tempdir().unwrap();
    let set = pattern_set(ws.path(), &["out"]);
    let plan = RestorePlan { key: &key, paths: &set, required: &[], compression: Compression::None, packs: None };
    unpack(&tar.finish()[..], &plan).unwrap().commit().unwrap();
    assert_eq!(std::fs::read(ws.path().join("out/a")).unwrap(), b"data");
}

#[test]
fn names_that_escape_are_refused() {
    for (name, message) in [
        ("0/../outside/victim", "name contains `.` or `..`"),
        ("/etc/passwd", "absolute or empty name"),
        ("../outside/victim", "outside every `path` root"),
        ("7/x", "belongs to `path` root 7, but there are only 1"),
        ("0//x", "empty component"),
    ] {
        let mut tar = TarBuilder::default();
        let key = fingerprint_member(&mut tar);
        tar.file(name, b"evil");
        manifest_member(&mut tar, &key, vec![file_entry(name, b"evil")]);
        assert_refused(tar.finish(), &key, MissReason::Corrupt, message);
    }
}

#[test]
fn links_devices_and_special_bits_are_refused() {
    type Case = (&'static str, EntryType, u32, Option<&'static str>, &'static str);
    let cases: [Case; 8] = [
        ("0/abs", EntryType::Symlink, 0o777, Some("/etc/passwd"), "is absolute"),
        ("0/up", EntryType::Symlink, 0o777, Some("../outside/victim"), "escapes its root"),
        ("0/d/up", EntryType::Symlink, 0o777, Some("../../outside"), "escapes its root"),
        ("0/hard", EntryType::Link, 0o644, Some("0/../../outside/victim"), "hard links are not allowed"),
        ("0/tty", EntryType::Char, 0o644, None, "device files are not allowed"),
        ("0/disk", EntryType::Block, 0o644, None, "device files are not allowed"),
        ("0/pipe", EntryType::Fifo, 0o644, None, "FIFOs are not allowed"),
        ("0/suid", EntryType::Regular, 0o4755, None, "setuid, setgid or sticky bit"),
    ];
    for (name, kind, mode, link, message) in cases {
        let mut tar = TarBuilder::default();
        let key = fingerprint_member(&mut tar);
        tar.entry("0/", EntryType::Directory, 0o755, b"", None);
        tar.entry("0/d/", EntryType::Directory, 0o755, b"", None);
        tar.entry(name, kind, mode, b"", link);
        manifest_member(&mut tar, &key, vec![dir_entry("0"), dir_entry("0/d")]);
        assert_refused(tar.finish(), &key, MissReason::Corrupt, message);
    }
}

#[test]
fn entries_beneath_a_symlink_are_refused() {
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None);
    tar.entry("0/sub/", EntryType::Directory, 0o755, b"", None);
    tar.entry("0/link", EntryType::Symlink, 0o777, b"", Some("sub"));
    tar.file("0/link/x", b"through the link");
    manifest_member(&mut tar, &key, vec![]);
    assert_refused(tar.finish(), &key, MissReason::Corrupt, "lies beneath `0/link`, which is not a directory");
}

#[test]
fn duplicates_and_extras_are_refused() {
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.file("0", b"one").file("0", b"two");
    manifest_member(&mut tar, &key, vec![file_entry("0", b"one")]);
    assert_refused(tar.finish(), &key, MissReason::Corrupt, "duplicate entry");

    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None).file("0/a", b"a").file("0/extra", b"x");
    manifest_member(&mut tar, &key, vec![dir_entry("0"), file_entry("0/a", b"a")]);
    assert_refused(
        tar.finish(),
        &key,
        MissReason::ManifestMismatch,
        "`0/extra` is in the archive but not in the manifest",
    );
}

#[test]
fn content_that_disagrees_with_the_manifest_is_refused() {
    // More bytes than the manifest says.
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None).file("0/a", b"abcdef-and-more");
    let mut short = file_entry("0/a", b"abcdef-and-more");
    short.size = 6;
    manifest_member(&mut tar, &key, vec![dir_entry("0"), short]);
    assert_refused(tar.finish(), &key, MissReason::ManifestMismatch, "size is 15 in the archive but 6 in the manifest");

    // Same size, other bytes.
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None).file("0/a", b"tampered");
    manifest_member(&mut tar, &key, vec![dir_entry("0"), file_entry("0/a", b"original")]);
    assert_refused(tar.finish(), &key, MissReason::ManifestMismatch, "sha256 is");

    // The manifest lists a file the archive lacks.
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None).file("0/a", b"a");
    manifest_member(&mut tar, &key, vec![dir_entry("0"), file_entry("0/a", b"a"), file_entry("0/gone", b"g")]);
    assert_refused(tar.finish(), &key, MissReason::ManifestMismatch, "`0/gone` is listed in the manifest but missing");
}

#[test]
fn truncated_and_misordered_archives_are_refused() {
    // No manifest: the archive was cut short.
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None).file("0/a", b"a");
    assert_refused(tar.finish(), &key, MissReason::Corrupt, "no manifest");

    // Cut in the middle of a file.
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None).file("0/a", &[7u8; 5000]);
    let mut bytes = tar.finish();
    bytes.truncate(bytes.len() - 1024 - 3000);
    assert_refused(bytes, &key, MissReason::Corrupt, "truncated");

    // Something after the manifest.
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None);
    manifest_member(&mut tar, &key, vec![dir_entry("0")]);
    tar.file("0/late", b"smuggled");
    assert_refused(tar.finish(), &key, MissReason::Corrupt, "entry after the manifest");

    // Garbage after the end of the archive.
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None);
    manifest_member(&mut tar, &key, vec![dir_entry("0")]);
    let mut bytes = tar.finish();
    bytes.extend_from_slice(b"trailing garbage");
    assert_refused(bytes, &key, MissReason::Corrupt, "data after the end of the archive");

    // The fingerprint must come first.
    let mut tar = TarBuilder::default();
    tar.entry("0/", EntryType::Directory, 0o755, b"", None);
    let key = fingerprint_member(&mut tar);
    assert_refused(tar.finish(), &key, MissReason::Corrupt, "not the fingerprint");
}

#[test]
fn an_archive_for_another_key_is_refused() {
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None);
    manifest_member(&mut tar, &key, vec![dir_entry("0")]);
    let other = format!("hostile-{}", "0".repeat(64));
    assert_refused(tar.finish(), &other, MissReason::ManifestMismatch, "expected `hostile-000");
}

#[test]
fn a_required_path_missing_from_the_entry_is_incomplete() {
    let src = tempfile::tempdir().unwrap();
    write(&src.path().join("out/a.pth"), b"a");
    let rec = record("req");
    let bytes = pack(src.path(), &["out"], &rec, Compression::Zstd);
    let dst = tempfile::tempdir().unwrap();
    let set = pattern_set(dst.path(), &["out"]);
    let required = vec![dst.path().join("out/b.pth")];
    let plan =
        RestorePlan { key: &rec.key, paths: &set, required: &required, compression: Compression::Zstd, packs: None };
    let err = unpack(&bytes[..], &plan).err().unwrap();
    assert_eq!(err.miss_reason(), MissReason::Incomplete);
    assert!(!dst.path().join("out").exists());
    let ok_required = vec![dst.path().join("out/a.pth"), dst.path().join("out")];
    let plan =
        RestorePlan { key: &rec.key, paths: &set, required: &ok_required, compression: Compression::Zstd, packs: None };
    unpack(&bytes[..], &plan).unwrap().commit().unwrap();
}

/// A tampered entry for a glob line must not reach beyond what the glob covers, even though
/// the glob's base (here the workspace itself) is where entries are rooted.
#[test]
fn entries_outside_a_glob_or_inside_an_exclude_are_refused() {
    let cases: [(&[&str], &str, &str); 5] = [
        (&["*.expected"], "0/.git/hooks/pre-commit", "does not match `path` line `*.expected`"),
        (&["*.expected"], "0/", "the base of glob `*.expected` cannot be an entry"),
        (&["models/**/*.pth"], "0/evil.sh", "does not match `path` line `models/**/*.pth`"),
        (&["out", "!out/keep"], "0/keep/x", "is excluded by a `!` line"),
        (&["out", "!out/keep"], "0/keep", "is excluded by a `!` line"),
    ];
    for (lines, name, message) in cases {
        let mut tar = TarBuilder::default();
        let key = fingerprint_member(&mut tar);
        if name.ends_with('/') {
            tar.entry(name, EntryType::Directory, 0o777, b"", None);
        } else {
            tar.entry(name, EntryType::Regular, 0o755, b"#!/bin/sh\n", None);
        }
        manifest_member(&mut tar, &key, vec![]);
        let ws = tempfile::tempdir().unwrap();
        write(&ws.path().join("a.expected"), b"keep");
        let before = snapshot(ws.path());
        let set = pattern_set(ws.path(), lines);
        let plan = RestorePlan { key: &key, paths: &set, required: &[], compression: Compression::None, packs: None };
        let err = unpack(&tar.finish()[..], &plan).err().expect("refused");
        assert_eq!(err.miss_reason(), MissReason::Corrupt);
        assert!(err.to_string().contains(message), "{lines:?} {name}: {err}");
        assert_eq!(snapshot(ws.path()), before);
    }
    // The honest case still works: a matching entry below a glob's base.
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.file("0/sub/m.pth", b"w");
    let m = Manifest {
        exact_cache_manifest: MANIFEST_FORMAT,
        key: key.clone(),
        roots: vec![RootRecord { line: "models/**/*.pth".into(), kind: RootKind::Glob }],
        entries: vec![file_entry("0/sub/m.pth", b"w")],
        stack: None,
        generation: None,
    };
    tar.file(MANIFEST_NAME, &serde_json::to_vec(&m).unwrap());
    let ws = tempfile::tempdir().unwrap();
    let set = pattern_set(ws.path(), &["models/**/*.pth"]);
    let plan = RestorePlan { key: &key, paths: &set, required: &[], compression: Compression::None, packs: None };
    unpack(&tar.finish()[..], &plan).unwrap().commit().unwrap();
    assert_eq!(std::fs::read(ws.path().join("models/sub/m.pth")).unwrap(), b"w");
}

// ---- overlapping roots and placement order (found by review) ---------------------------------

fn manifest_for(tar: &mut TarBuilder, key: &str, lines: &[&str], entries: Vec<ManifestEntry>) {
    let roots = lines.iter().map(|l| RootRecord { line: (*l).into(), kind: RootKind::Dir }).collect();
    let m = Manifest {
        exact_cache_manifest: MANIFEST_FORMAT,
        key: key.into(),
        roots,
        entries,
        stack: None,
        generation: None,
    };
    tar.file(MANIFEST_NAME, &serde_json::to_vec(&m).unwrap());
}

fn dir_with_mode(path: &str, mode: u32) -> ManifestEntry {
    ManifestEntry { mode, ..dir_entry(path) }
}

/// `path: out` and `out/sub`, where the user's `out/sub` is a link to `elsewhere`: root 0's
/// entry `sub/` must not replace the link another root stands on (the link would be lost and
/// the content land in two places). The restore is refused and nothing changes.
#[test]
fn a_root_that_is_a_link_inside_another_root_is_never_replaced() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("out")).unwrap();
    write(&ws.path().join("elsewhere/own"), b"the user's");
    std::os::unix::fs::symlink("../elsewhere", ws.path().join("out/sub")).unwrap();
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None);
    tar.entry("0/sub/", EntryType::Directory, 0o755, b"", None);
    tar.file("0/sub/x", b"x");
    tar.entry("1/", EntryType::Directory, 0o755, b"", None);
    tar.file("1/x", b"x");
    let entries =
        vec![dir_entry("0"), dir_entry("0/sub"), file_entry("0/sub/x", b"x"), dir_entry("1"), file_entry("1/x", b"x")];
    manifest_for(&mut tar, &key, &["out", "out/sub"], entries);
    let before = snapshot(ws.path());
    let err = restore(&tar.finish(), ws.path(), &["out", "out/sub"], &key, Compression::None).unwrap_err();
    // The error names the root and says a restore never replaces it.
    assert_shown!(ws.path(), "a_root_is_never_replaced_by_another", err.to_string());
    assert_eq!(snapshot(ws.path()), before);
}

/// A directory reached through two roots' handles (`out` and the glob `out/r/*.pt`) gets the
/// mode its entry says, not the mode it had while it was opened for writing.
#[test]
fn a_directory_reached_through_two_roots_gets_its_entry_mode() {
    use std::os::unix::fs::PermissionsExt;
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("out/r")).unwrap();
    std::fs::set_permissions(ws.path().join("out/r"), std::fs::Permissions::from_mode(0o555)).unwrap();
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None);
    tar.entry("0/r/", EntryType::Directory, 0o700, b"", None);
    tar.file("1/a.pt", b"a");
    let entries = vec![dir_entry("0"), dir_with_mode("0/r", 0o700), file_entry("1/a.pt", b"a")];
    manifest_for(&mut tar, &key, &["out", "out/r/*.pt"], entries);
    restore(&tar.finish(), ws.path(), &["out", "out/r/*.pt"], &key, Compression::None).unwrap();
    assert_eq!(std::fs::metadata(ws.path().join("out/r")).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(std::fs::read(ws.path().join("out/r/a.pt")).unwrap(), b"a");
}

/// Two roots disagreeing about one directory's mode is refused, like any other disagreement.
#[test]
fn two_roots_disagreeing_about_a_directory_are_refused() {
    let ws = tempfile::tempdir().unwrap();
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None);
    tar.entry("0/r/", EntryType::Directory, 0o700, b"", None);
    tar.entry("1/", EntryType::Directory, 0o755, b"", None);
    let entries = vec![dir_entry("0"), dir_with_mode("0/r", 0o700), dir_entry("1")];
    manifest_for(&mut tar, &key, &["out", "out/r"], entries);
    let err = restore(&tar.finish(), ws.path(), &["out", "out/r"], &key, Compression::None).unwrap_err();
    assert_eq!(err.miss_reason(), MissReason::Corrupt, "{err}");
    // The error names the two entries that land at the same place and differ.
    assert_shown!(ws.path(), "two_roots_disagreeing", err.to_string());
}

/// A valid archive whose directory's children do not follow it directly still restores: what
/// lies beneath a directory moved into place whole is never placed twice.
#[test]
fn children_listed_apart_from_their_directory_still_restore() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("out")).unwrap();
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    tar.entry("0/", EntryType::Directory, 0o755, b"", None);
    tar.entry("0/a/", EntryType::Directory, 0o755, b"", None);
    tar.file("0/b", b"b");
    tar.file("0/a/y", b"y");
    let entries = vec![dir_entry("0"), dir_entry("0/a"), file_entry("0/b", b"b"), file_entry("0/a/y", b"y")];
    manifest_for(&mut tar, &key, &["out"], entries);
    restore(&tar.finish(), ws.path(), &["out"], &key, Compression::None).unwrap();
    assert_eq!(std::fs::read(ws.path().join("out/a/y")).unwrap(), b"y");
    assert_eq!(std::fs::read(ws.path().join("out/b")).unwrap(), b"b");
}

/// Defence in depth for `grow`: placement of a layer never replaces what is already there and
/// never changes an existing directory's mode, even where the manifest check before it (which
/// refuses such layers by the stack's manifest) were bypassed; the target is left as it was.
#[test]
fn a_layer_placement_replaces_nothing_and_changes_no_directory_mode() {
    use std::os::unix::fs::PermissionsExt;
    let member = |tar: &mut TarBuilder, e: &ManifestEntry| match e.kind {
        exact_cache::manifest::EntryKind::Dir => {
            tar.entry(&format!("{}/", e.path), EntryType::Directory, e.mode, b"", None);
        }
        exact_cache::manifest::EntryKind::Symlink => {
            tar.entry(&e.path, EntryType::Symlink, 0o777, b"", e.target.as_deref());
        }
        exact_cache::manifest::EntryKind::File => {
            tar.file(&e.path, b"x");
        }
    };
    let mode = |path: &str, mode: u32| ManifestEntry { mode, ..dir_entry(path) };
    let cases: Vec<(&str, Vec<ManifestEntry>, &str)> = vec![
        ("a file on a file", vec![file_entry("0/a.pth", b"x")], "a layer never replaces what is already there"),
        ("a directory on a file", vec![dir_entry("0/a.pth")], "a layer never replaces what is already there"),
        ("a file on a link", vec![file_entry("0/lnk", b"x")], "a layer never replaces what is already there"),
        ("a file beneath a file", vec![file_entry("0/a.pth/x", b"x")], "a layer never replaces the file"),
        ("a file beneath a link", vec![file_entry("0/lnk/x", b"x")], "a layer never replaces the symlink"),
        ("a file on an empty directory", vec![file_entry("0/empty", b"x")], "never replaces what is already there"),
        ("another mode for a directory", vec![mode("0/sub", 0o777), file_entry("0/sub/new", b"x")], "from 755 to 777"),
        ("another mode for the root", vec![mode("0", 0o000), file_entry("0/new", b"x")], "from 755 to 000"),
    ];
    for (what, entries, message) in cases {
        let ws = tempfile::tempdir().unwrap();
        let out = ws.path().join("out");
        write(&out.join("a.pth"), b"weights");
        write(&out.join("sub/b.pth"), b"more weights");
        std::fs::create_dir(out.join("empty")).unwrap();
        std::os::unix::fs::symlink("a.pth", out.join("lnk")).unwrap();
        for dir in [&out, &out.join("sub"), &out.join("empty")] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let before = snapshot(ws.path());
        let mut tar = TarBuilder::default();
        let key = fingerprint_member(&mut tar);
        for e in &entries {
            member(&mut tar, e);
        }
        manifest_member(&mut tar, &key, entries);
        let set = pattern_set(ws.path(), &["out"]);
        let plan = RestorePlan { key: &key, paths: &set, required: &[], compression: Compression::None, packs: None };
        let err = unpack(&tar.finish()[..], &plan).unwrap().commit_layer().map(|_| ()).unwrap_err();
        let chain = exact_cache::text::error_chain(&err);
        assert!(chain.contains(message), "{what}: expected `{message}` in `{chain}`");
        assert_eq!(snapshot(ws.path()), before, "{what}: the target must be as it was");
    }

    // The control: a layer that only adds, merging into directories of the same mode, applies.
    let ws = tempfile::tempdir().unwrap();
    write(&ws.path().join("out/sub/b.pth"), b"more weights");
    for dir in ["out", "out/sub"] {
        std::fs::set_permissions(ws.path().join(dir), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut tar = TarBuilder::default();
    let key = fingerprint_member(&mut tar);
    let entries = vec![dir_entry("0"), dir_entry("0/sub"), file_entry("0/sub/new", b"x"), dir_entry("0/fresh")];
    for e in &entries {
        member(&mut tar, e);
    }
    manifest_member(&mut tar, &key, entries);
    let set = pattern_set(ws.path(), &["out"]);
    let plan = RestorePlan { key: &key, paths: &set, required: &[], compression: Compression::None, packs: None };
    unpack(&tar.finish()[..], &plan).unwrap().commit_layer().unwrap();
    assert_eq!(std::fs::read(ws.path().join("out/sub/new")).unwrap(), b"x");
    assert!(ws.path().join("out/fresh").is_dir());
}
