//! The Windows binary under wine (`support::Wine`): a local-store save → restore round trip of
//! nested directories and a read-only file, byte for byte; a glob line with `\` separators; a
//! corrupt entry refused; a crashed run's staging swept; the fingerprint's Windows facts; what
//! Windows cannot keep (exec bits, links) reported.

use crate::support::needs;
use crate::support::{NO_STATE, Step, Wine, noise, snapshot, write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A step under wine.
fn step() -> Step {
    Step::under_wine(Wine::get())
}

/// Files, a read-only file, nested and empty directories under `ws/out`.
fn generate(ws: &Path) {
    write(&ws.join("out/a.txt"), b"alpha\n");
    write(&ws.join("out/sub/b.bin"), &noise(300_000, 7));
    write(&ws.join("out/sub/deeper/c.bin"), &noise(5_000, 8));
    write(&ws.join("out/sub/deeper/read-only.txt"), b"do not touch\n");
    std::fs::set_permissions(ws.join("out/sub/deeper/read-only.txt"), std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::create_dir_all(ws.join("out/empty")).unwrap();
}

fn staging_left(dir: &Path) -> Vec<String> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".exact-cache-staging-"))
        .collect()
}

#[needs(wine)]
fn a_tree_of_nested_directories_and_a_read_only_file_round_trips_byte_identical() {
    let step = step();
    generate(&step.ws);
    let saved_tree = snapshot(&step.ws.join("out"));
    let inputs = [("path", "out")];
    let save = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(save.output("save-result"), "saved", "{save:#?}");

    std::fs::set_permissions(step.ws.join("out/sub/deeper/read-only.txt"), std::fs::Permissions::from_mode(0o644))
        .unwrap();
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(restore.output("cache-hit"), "true", "{restore:#?}");
    assert_eq!(restore.output("restored-files"), "4");
    assert_eq!(snapshot(&step.ws.join("out")), saved_tree, "byte-identical, the read-only file read-only");

    // Again over the restored tree: what is there (the read-only file too) is replaced.
    let again = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(again.output("cache-hit"), "true", "{again:#?}");
    assert_eq!(snapshot(&step.ws.join("out")), saved_tree);
    assert_eq!(staging_left(&step.ws), Vec::<String>::new(), "staging is removed, the replaced files with it");
}

#[needs(wine)]
fn a_glob_line_with_backslashes_saves_and_restores_its_matches() {
    let step = step();
    generate(&step.ws);
    let inputs = [("path", r"out\sub\**\*.bin"), ("native", "none")];
    let save = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(save.output("save-result"), "saved", "{save:#?}");
    let saved_tree = snapshot(&step.ws.join("out/sub"));

    std::fs::set_permissions(step.ws.join("out/sub/deeper/read-only.txt"), std::fs::Permissions::from_mode(0o644))
        .unwrap();
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(restore.output("cache-hit"), "true", "{restore:#?}");
    assert_eq!(restore.output("restored-files"), "2", "only the matches: {restore:#?}");
    let only_matches: std::collections::BTreeMap<_, _> =
        saved_tree.into_iter().filter(|(rel, _)| rel.is_empty() || !rel.ends_with(".txt")).collect();
    assert_eq!(snapshot(&step.ws.join("out/sub")), only_matches);
}

#[needs(wine)]
fn a_corrupt_entry_is_refused_and_the_target_left_as_it_was() {
    let step = step();
    generate(&step.ws);
    let inputs = [("path", "out"), ("native", "none"), ("compression", "none")];
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("saved"), "true");
    let entry = step.stored_entry();
    let mut bytes = std::fs::read(&entry).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&entry, &bytes).unwrap();

    std::fs::remove_file(step.ws.join("out/a.txt")).unwrap();
    let before = snapshot(&step.ws);
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((restore.code, restore.output("cache-hit")), (0, "false"), "{restore:#?}");
    let reason = restore.output("miss-reason");
    assert!(reason == "corrupt" || reason == "manifest-mismatch", "{reason}: {restore:#?}");
    assert_eq!(snapshot(&step.ws), before, "target untouched, no staging left");
}

#[needs(wine)]
fn a_crashed_runs_staging_is_swept_by_the_next_restore() {
    let step = step();
    generate(&step.ws);
    let inputs = [("path", "out"), ("native", "none")];
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("saved"), "true");
    std::fs::set_permissions(step.ws.join("out/sub/deeper/read-only.txt"), std::fs::Permissions::from_mode(0o644))
        .unwrap();
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    // What a restore killed half way leaves beside its target (no Windows process has this
    // pid), with a read-only file in it.
    let leftover = step.ws.join(".exact-cache-staging-2147483644-0123456789abcdef");
    write(&leftover.join("root/sub/partial.bin"), b"half");
    std::fs::set_permissions(leftover.join("root/sub/partial.bin"), std::fs::Permissions::from_mode(0o444)).unwrap();

    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(restore.output("cache-hit"), "true", "{restore:#?}");
    assert!(!leftover.exists(), "the dead run's staging is swept");
    assert_eq!(staging_left(&step.ws), Vec::<String>::new());
}

#[needs(wine)]
fn the_fingerprint_records_the_windows_version_and_msvc() {
    let mut step = step();
    let wine = step.wine.unwrap();
    // A stand-in for MSVC's `cl`, which prints its banner on stderr when run without arguments.
    let tools = step.dir.path().join("msvc");
    let banner = "Microsoft (R) C/C++ Optimizing Compiler Version 19.40.33811 for x64";
    write(&tools.join("cl.cmd"), format!("@echo {banner} 1>&2\r\n@echo usage: cl 1>&2\r\n").as_bytes());
    step.set_env("WINEPATH", wine.path(&tools));
    let fingerprint = step.run(&["fingerprint"], &[("path", "out")], NO_STATE);
    assert_eq!(fingerprint.code, 0, "{fingerprint:#?}");
    let record = std::fs::read_to_string(wine.unix_path(fingerprint.output("fingerprint-file"))).unwrap();
    let json: serde_json::Value = serde_json::from_str(&record).unwrap();
    let os = &json["components"]["native.os"];
    assert_eq!(os["family"], "windows", "{record}");
    assert!(os["distro"] == "windows" || os["distro"] == "windows-server", "{record}");
    let version = os["version"].as_str().unwrap_or_else(|| panic!("no version: {record}"));
    let parts: Vec<&str> = version.split('.').collect();
    assert!(parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok()), "major.minor.build: {version}");
    assert_eq!(json["components"]["native.compiler"]["cl"], banner, "{record}");
}

#[needs(wine)]
fn what_windows_cannot_keep_is_reported() {
    let mut step = step();
    let wine = step.wine.take();
    // Saved on Linux (same key: no native facets): an exec bit and a link to a directory.
    write(&step.ws.join("out/d/f"), b"x");
    write(&step.ws.join("out/run.sh"), b"#!/bin/sh\n");
    std::fs::set_permissions(step.ws.join("out/run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("d", step.ws.join("out/to-d")).unwrap();
    let inputs = [("path", "out"), ("native", "none")];
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("saved"), "true");

    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    step.wine = wine;
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(restore.output("cache-hit"), "true", "{restore:#?}");
    assert!(
        restore.stdout.contains(
            "::warning::not as saved on Windows: the exec bits of 1 file(s) (Windows has none); 1 symlink(s) are made \
             as file links"
        ),
        "{}",
        restore.stdout
    );
    // (Wine 8's CreateSymbolicLinkW does nothing, so the link itself is not checked here.)
    assert_eq!(std::fs::read(step.ws.join("out/run.sh")).unwrap(), b"#!/bin/sh\n");
}
