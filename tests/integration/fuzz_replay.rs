//! The fuzz targets' inputs replayed on the stable toolchain: the seed corpus (fuzz/seeds/,
//! real archives and service answers) and every input that once crashed a target
//! (fuzz/regressions/). `UPDATE_FUZZ_SEEDS=1` regenerates the seeds from the current packer.

use exact_cache::archive::{Compression, FINGERPRINT_NAME, MANIFEST_NAME, SecretScanner, inventory, write_archive};
use exact_cache::paths::{Locations, PatternSet};
use exact_cache_fuzz_oracle::{
    self as fuzzing, PlacementCase, PlacementOutcome, Shape, UNPACK_PATHS, UnpackOutcome, unpack_record,
};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::support::{self, write};

const TARGETS: &[&str] = &["manifest", "fingerprint", "wire", "unpack", "placement"];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn inputs(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = fuzz_dir().join(kind).join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    files.into_iter().map(|p| (p.clone(), std::fs::read(&p).unwrap())).collect()
}

fn run(target: &str, data: &[u8]) -> Option<UnpackOutcome> {
    match target {
        "manifest" => fuzzing::manifest(data),
        "fingerprint" => fuzzing::fingerprint(data),
        "wire" => fuzzing::wire(data),
        "unpack" => return Some(fuzzing::unpack(data)),
        "placement" => {
            fuzzing::placement(data);
        }
        other => panic!("unknown target {other}"),
    }
    None
}

/// A small tree under the `unpack` target's path lines: nested files, modes, an empty
/// directory, symlinks inside the root, an excluded directory and glob matches.
fn seed_archive(compression: Compression) -> Vec<u8> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    write(&ws.join("out/a.txt"), b"alpha\n");
    write(&ws.join("out/sub/b.bin"), &[0u8, 1, 2, 3, 255]);
    write(&ws.join("out/tool"), b"#!/bin/sh\n");
    std::fs::set_permissions(ws.join("out/tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(ws.join("out/empty")).unwrap();
    std::os::unix::fs::symlink("sub/b.bin", ws.join("out/link")).unwrap();
    std::os::unix::fs::symlink("../a.txt", ws.join("out/sub/up")).unwrap();
    write(&ws.join("out/skip/ignored.txt"), b"excluded");
    write(&ws.join("model.pt"), b"weights");
    write(&ws.join("glob/x.bin"), b"x");
    write(&ws.join("glob/y.bin/inner.txt"), b"inner");
    write(&ws.join("glob/not-matched.txt"), b"no");
    let set = PatternSet::parse(UNPACK_PATHS, &Locations { workspace: ws.clone(), home: None }).unwrap();
    let inv = inventory(&set).unwrap();
    write_archive(&inv, &unpack_record(), compression, None, &SecretScanner::none(), Vec::new(), &mut |_| {}).unwrap().0
}

/// Honest restores of the `placement` target, as cases (fuzz/seeds/placement holds their
/// encodings): overlapping plain roots with links inside them, nested glob matches, links the
/// user already had (out of the workspace, to `/`) that the archive replaces or stays clear of,
/// a refused archive and one undone at commit. Each keeps guarantee 6 on today's code; shapes
/// that do not are in tests/integration/placement_property.rs.
fn placement_seeds() -> Vec<(&'static str, PlacementCase)> {
    let dir = || Shape::Dir(0o755);
    let file = || Shape::File(0o644);
    let link = |t: &str| Shape::Link(t.to_owned());
    let case = PlacementCase::new;
    vec![
        (
            "overlapping-roots",
            case(
                &["out", "out/r"],
                vec![("out/victim.txt", file()), ("out/r/s", dir())],
                vec![
                    (0, "", dir()),
                    (0, "r", dir()),
                    (0, "r/a.pth", file()),
                    (0, "l", link("r")),
                    (1, "x", Shape::File(0o755)),
                    (1, "s", Shape::Dir(0o700)),
                    (1, "s/l", link("../x")),
                ],
            ),
        ),
        (
            "nested-globs",
            case(
                &["**/*.pth", "**/*.pt2", "d/*"],
                vec![("a.pth", dir()), ("sub/l.pt2", file()), ("d/x", Shape::File(0o600))],
                vec![
                    (0, "a.pth", dir()),
                    (0, "a.pth/x", file()),
                    (0, "a.pth/l", link(".")),
                    (0, "sub/b.pth", file()),
                    (1, "sub/l.pt2", file()),
                    (1, "l.pt2", link("sub/l.pt2")),
                    (2, "x", file()),
                    (2, "s", dir()),
                    (2, "s/l", link("../x")),
                ],
            ),
        ),
        (
            "user-links",
            case(
                &["out", "d/*"],
                vec![
                    ("out/sub", link("../../outside")),
                    ("x", link("{outside}")),
                    ("out/l", link("{root}")),
                    ("out/r/s", Shape::Dir(0o555)),
                ],
                vec![
                    (0, "a", file()),
                    (0, "r/s/x", file()),
                    (0, "l", file()),
                    (0, "sub", dir()),
                    (1, "x", dir()),
                    (1, "x/victim.txt", file()),
                ],
            ),
        ),
        ("refused-absolute-link", case(&["out"], vec![("out/a", file())], vec![(0, "l", link("{outside}"))])),
        ("refused-at-commit", case(&["out"], vec![("out/a/x", file())], vec![(0, "x", file()), (0, "a", file())])),
    ]
}

fn member(tar_bytes: &[u8], name: &str) -> Vec<u8> {
    let mut archive = tar::Archive::new(tar_bytes);
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().to_str() == Some(name) {
            let mut out = Vec::new();
            entry.read_to_end(&mut out).unwrap();
            return out;
        }
    }
    panic!("no member {name}");
}

fn write_seeds() {
    let seeds = fuzz_dir().join("seeds");
    let _ = std::fs::remove_dir_all(&seeds);
    let put = |target: &str, name: &str, data: &[u8]| write(&seeds.join(target).join(name), data);
    let plain = seed_archive(Compression::None);
    for (selector, name, compression) in [
        (0u8, "archive-none", Compression::None),
        (1, "archive-zstd", Compression::Zstd),
        (2, "archive-gzip", Compression::Gzip),
    ] {
        let bytes = if compression == Compression::None { plain.clone() } else { seed_archive(compression) };
        put("unpack", name, &[vec![selector], bytes].concat());
    }
    // Hostile shapes next to the honest ones: a traversal and a link out of the root.
    let record = unpack_record().to_json();
    let mut hostile = support::TarBuilder::default();
    hostile.file(FINGERPRINT_NAME, record.as_bytes()).file("0/../../outside/secret.txt", b"pwned");
    put("unpack", "hostile-traversal", &[vec![0u8], hostile.finish()].concat());
    let mut hostile = support::TarBuilder::default();
    hostile
        .file(FINGERPRINT_NAME, record.as_bytes())
        .entry("0/escape", tar::EntryType::Symlink, 0o777, b"", Some("../../outside"))
        .file("0/escape/secret.txt", b"pwned");
    put("unpack", "hostile-symlink", &[vec![0u8], hostile.finish()].concat());

    for (name, case) in placement_seeds() {
        put("placement", name, &case.encode());
    }

    put("manifest", "manifest.json", &member(&plain, MANIFEST_NAME));
    put("fingerprint", "fingerprint.json", &member(&plain, FINGERPRINT_NAME));
    put("fingerprint", "archive-prefix", &plain[..plain.len().min(4096)]);

    let wire: &[(&str, u8, &[u8])] = &[
        (
            "download-url",
            0,
            br#"{"ok":true,"signed_download_url":"https://a.blob.core.windows.net/c/b?sig=x","matched_key":"k-1"}"#,
        ),
        ("create", 0, br#"{"ok":false,"message":"cache entry already exists"}"#),
        ("finalize", 0, br#"{"ok":true,"entry_id":"9876"}"#),
        ("v1-lookup", 0, br#"{"cacheKey":"k-1","archiveLocation":"http://127.0.0.1/a","scope":"refs/heads/main"}"#),
        ("v1-reserve", 0, br#"{"cacheId":42}"#),
        ("twirp-error", 1, br#"{"code":"resource_exhausted","msg":"insufficient usage to create cache entry"}"#),
        (
            "azure-error",
            5,
            b"<?xml version=\"1.0\"?><Error><Code>AuthenticationFailed</Code><Message>m</Message></Error>",
        ),
        ("content-range", 2, b"\x0a\x03bytes 0-8388607/123456789"),
        ("ranges", 3, &[0, 0, 128, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 128, 0, 0, 0, 0, 0]),
    ];
    for (name, selector, body) in wire {
        put("wire", name, &[&[*selector][..], body].concat());
    }
}

#[test]
fn seeds_and_regressions_replay_cleanly() {
    if std::env::var_os("UPDATE_FUZZ_SEEDS").is_some() {
        write_seeds();
    }
    for target in TARGETS {
        let seeds = inputs("seeds", target);
        assert!(!seeds.is_empty(), "fuzz/seeds/{target} is empty: run with UPDATE_FUZZ_SEEDS=1");
        for (path, data) in seeds.iter().chain(inputs("regressions", target).iter()) {
            let outcome = std::panic::catch_unwind(|| run(target, data));
            assert!(outcome.is_ok(), "{target} panicked on {}", path.display());
        }
    }
}

#[test]
fn the_unpack_seeds_are_real_archives_in_every_codec() {
    let mut restored = Vec::new();
    for (path, data) in inputs("seeds", "unpack") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let outcome = fuzzing::unpack(&data);
        if name.starts_with("archive-") {
            assert_eq!(outcome, UnpackOutcome::Restored, "{name}");
            restored.push(data[0]);
        } else {
            assert!(matches!(outcome, UnpackOutcome::Refused(_)), "{name}: {outcome:?}");
        }
    }
    restored.sort();
    assert_eq!(restored, [0, 1, 2], "one honest seed per codec");
}

#[test]
fn hostile_and_mangled_archives_come_back_refused() {
    let record = unpack_record().to_json();
    let mut tar = support::TarBuilder::default();
    tar.file(FINGERPRINT_NAME, record.as_bytes()).file("7/x", b"root 7 does not exist");
    assert!(matches!(fuzzing::unpack(&[vec![0u8], tar.finish()].concat()), UnpackOutcome::Refused(_)));
    // A mangled honest archive is refused, never half-restored.
    let mut data = [vec![0u8], seed_archive(Compression::None)].concat();
    let at = data.windows(6).position(|w| w == b"alpha\n").expect("content stored as is");
    data[at] ^= 0xff;
    assert!(matches!(fuzzing::unpack(&data), UnpackOutcome::Refused(_)));
}

#[test]
fn the_placement_seeds_are_the_cases_and_reach_placement() {
    let seeds = inputs("seeds", "placement");
    assert_eq!(seeds.len(), placement_seeds().len(), "run with UPDATE_FUZZ_SEEDS=1");
    for (name, case) in placement_seeds() {
        let (_, data) = seeds.iter().find(|(p, _)| p.ends_with(name)).expect("a seed per case");
        assert_eq!(PlacementCase::decode(data), case, "{name}");
        let outcome = fuzzing::placement(data);
        match name.strip_prefix("refused-") {
            None => assert_eq!(outcome, PlacementOutcome::Restored, "{name}"),
            Some(_) => assert!(matches!(outcome, PlacementOutcome::Refused { .. }), "{name}: {outcome:?}"),
        }
    }
}
