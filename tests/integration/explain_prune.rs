//! `explain-misses`, `prune`, `list` and `verify-reuse`, against the local cache service with
//! its fake GitHub REST endpoints (list by key prefix and ref with pagination, delete by id),
//! and against the local backend.

use std::path::Path;

use crate::support::services::{Fault, Op, REST_TOKEN, Services};
use crate::support::{NO_STATE, Step, fake_torch, write};

/// A step against the v2 service, with the REST API that explains misses and prunes.
fn step_with_rest(services: &Services) -> Step {
    Step::against([services.v2_env(), services.rest_env()].concat())
}

/// A fake site-packages with one distribution.
fn site(dir: &Path, name: &str, version: &str) {
    let _ = std::fs::remove_dir_all(dir);
    let info = dir.join(format!("{}-{version}.dist-info", name.replace('-', "_")));
    write(&info.join("METADATA"), format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n").as_bytes());
}

#[test]
fn a_miss_names_the_package_whose_version_changed() {
    let services = Services::start();
    let mut step = step_with_rest(&services);
    let sitedir = step.dir.path().join("site");
    step.set_env("PYTHONPATH", sitedir.to_string_lossy().into_owned());
    let inputs = [
        ("path", "out"),
        ("native", "none"),
        ("prefix", "models"),
        ("python", "python3"),
        ("github-token", REST_TOKEN),
    ];
    site(&sitedir, "exact-cache-fake-torch", "2.14.0");
    write(&step.ws.join("out/model.pth"), b"weights");
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("save-result"), "saved");

    site(&sitedir, "exact-cache-fake-torch", "2.15.0");
    let gets = services.faults.calls(Op::BlobGet);
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((r.code, r.output("miss-reason")), (0, "not-found"), "{}", r.stdout);
    assert!(r.stdout.contains("python: exact-cache-fake-torch 2.14.0 → 2.15.0"), "{}", r.stdout);
    assert!(r.summary.contains("python: exact-cache-fake-torch 2.14.0 → 2.15.0"), "{}", r.summary);
    assert_eq!(services.faults.calls(Op::BlobGet) - gets, 1, "one small ranged read, not a download");
    assert!(!r.readable().contains(REST_TOKEN));
}

#[test]
fn explain_without_permission_or_rest_says_why_in_one_line() {
    let services = Services::start();
    let step = step_with_rest(&services);
    write(&step.ws.join("out/a"), b"a");
    let inputs = [("path", "out"), ("native", "none"), ("github-token", REST_TOKEN)];
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("saved"), "true");
    let other = [("path", "out"), ("native", "none"), ("github-token", REST_TOKEN), ("variant", "x")];
    services.faults.push(
        Op::RestList,
        Fault::Status { code: 403, retry_after: None, msg: "Resource not accessible by integration" },
        1,
    );
    let r = step.run(&["restore"], &other, NO_STATE);
    assert_eq!((r.code, r.output("miss-reason")), (0, "not-found"));
    let lines: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("explain-misses:")).collect();
    assert_eq!(lines.len(), 1, "{}", r.stdout);
    assert!(lines[0].contains("HTTP 403") && lines[0].contains("`actions: read`"), "{}", lines[0]);
    assert!(!r.stdout.contains("::warning"), "not a warning: {}", r.stdout);

    let mut act = step_with_rest(&services);
    act.set_env("ACT", "true");
    let r = act.run(&["restore"], &other, NO_STATE);
    assert!(
        r.stdout.contains("explain-misses: skipped: the GitHub REST API is not reachable under nektos/act"),
        "{}",
        r.stdout
    );
    let no_token = [("path", "out"), ("native", "none"), ("variant", "x")];
    let r = step.run(&["restore"], &no_token, NO_STATE);
    assert!(r.stdout.contains("explain-misses: skipped: no `github-token`"), "{}", r.stdout);
}

#[test]
fn prune_deletes_exactly_the_superseded_entries() {
    let services = Services::start();
    let step = step_with_rest(&services);
    write(&step.ws.join("out/a"), b"a");
    let save = |prefix: &str, variant: &str, extra: &[(&str, &str)]| {
        let mut inputs = vec![
            ("path", "out"),
            ("native", "none"),
            ("prefix", prefix),
            ("variant", variant),
            ("github-token", REST_TOKEN),
        ];
        inputs.extend_from_slice(extra);
        let r = step.run(&["save"], &inputs, NO_STATE);
        assert_eq!(r.output("save-result"), "saved", "{}", r.stdout);
        r
    };
    for v in ["1", "2", "3"] {
        save("models", v, &[]);
    }
    save("models-other", "1", &[]); // a longer prefix that starts with ours
    save("weights", "1", &[]); // another prefix
    services.set_ref("refs/heads/feature");
    save("models", "feature", &[]); // another ref
    services.set_ref("refs/heads/main");
    let before: Vec<String> = services.entries().iter().map(|e| e.key.clone()).collect();

    let newest = save("models", "4", &[("prune", "true"), ("prune-keep", "2")]);
    assert!(
        newest.stdout.contains("prune: kept the newest 2, deleted 2 older entries of `models` on `refs/heads/main`"),
        "{}",
        newest.stdout
    );
    let after: Vec<String> = services.entries().iter().map(|e| e.key.clone()).collect();
    let deleted: Vec<&String> = before.iter().filter(|k| !after.contains(k)).collect();
    assert_eq!(deleted.len(), 2, "{deleted:?}");
    let entries = services.entries();
    let models_main: Vec<_> = entries
        .iter()
        .filter(|e| e.r#ref == "refs/heads/main" && e.key.len() == "models-".len() + 64 && e.key.starts_with("models-"))
        .collect();
    assert_eq!(models_main.len(), 2, "the new entry and the newest older one remain");
    assert!(entries.iter().any(|e| e.key.starts_with("models-other-")), "a longer prefix is never pruned");
    assert!(entries.iter().any(|e| e.key.starts_with("weights-")), "another prefix is never pruned");
    assert!(entries.iter().any(|e| e.r#ref == "refs/heads/feature"), "another ref is never pruned");
    assert!(newest.summary.contains("**prune**"), "{}", newest.summary);

    // Without `actions: write`: a warning, the save stands.
    services.faults.push(
        Op::RestDelete,
        Fault::Status { code: 403, retry_after: None, msg: "Resource not accessible by integration" },
        1,
    );
    let r = save("models", "5", &[("prune", "true")]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains("::warning::prune: delete cache") && r.stdout.contains("`actions: write`"),
        "{}",
        r.stdout
    );
}

#[test]
fn listing_pages_through_many_entries() {
    let services = Services::start();
    let step = step_with_rest(&services);
    let version = "0".repeat(64);
    for i in 0..230u32 {
        services.plant_listed(&format!("bulk-{i:064x}"), &version);
    }
    let r = step.run(
        &["prune", "--dry-run"],
        &[("prefix", "bulk"), ("prune-keep", "5"), ("github-token", REST_TOKEN)],
        NO_STATE,
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.contains("kept the newest 5 keys (5 entries), would delete 225"), "{}", r.stdout);
    assert!(services.faults.calls(Op::RestList) >= 3, "three pages of 100");
    assert_eq!(services.entries().len(), 230, "a dry run deletes nothing");
}

#[test]
fn verify_reuse_names_what_changed_after_a_warm_restore() {
    let step = Step::new();
    write(&step.ws.join("out/a.bin"), b"a");
    write(&step.ws.join("out/b.bin"), b"b");
    let mut inputs = vec![("path", "out"), ("native", "none"), ("verify-reuse", "warn")];
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("saved"), "true");
    let warm = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(warm.output("reused"), "true");

    let quiet = step.run(&["save", "--post"], &inputs, &warm.state);
    assert_eq!(quiet.output("save-result"), "skipped-hit");
    assert_eq!(quiet.output("changed-files"), "");
    assert!(quiet.stdout.contains("verify-reuse: nothing under `path` changed"), "{}", quiet.stdout);

    write(&step.ws.join("out/a.bin"), b"A");
    write(&step.ws.join("out/new.bin"), b"n");
    std::fs::remove_file(step.ws.join("out/b.bin")).unwrap();
    let warned = step.run(&["save", "--post"], &inputs, &warm.state);
    assert_eq!(warned.code, 0);
    assert_eq!(warned.output("changed-files"), "out/a.bin\nout/b.bin\nout/new.bin");
    assert!(warned.stdout.contains("::warning::verify-reuse: 1 added, 1 changed, 1 removed"), "{}", warned.stdout);
    assert!(warned.summary.contains("verify-reuse"), "{}", warned.summary);

    inputs[2] = ("verify-reuse", "fail");
    let failed = step.run(&["save", "--post"], &inputs, &warm.state);
    assert_eq!(failed.code, 1);
    assert!(failed.stdout.contains("::error::`verify-reuse: fail`: 3 files under `path` changed"), "{}", failed.stdout);
}

#[test]
fn the_torch_inductor_preset_exports_its_directories_and_fingerprints_torch() {
    let mut step = Step::new();
    step.set_env("TORCHINDUCTOR_MAX_AUTOTUNE", "1");
    step.set_env("TORCH_LOGS", "+dynamo");
    fake_torch(&step.ws);
    let inputs = [("preset", "torch-inductor"), ("python", "python3")];
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let base = step.runner_temp.parent().unwrap().join("_exact-cache/torch-inductor");
    assert_eq!(Path::new(&r.env["TORCHINDUCTOR_CACHE_DIR"]), base.join("inductor"));
    assert_eq!(Path::new(&r.env["TRITON_CACHE_DIR"]), base.join("triton"));
    assert!(base.join("inductor").is_dir());
    let fp: serde_json::Value = serde_json::from_slice(&std::fs::read(r.output("fingerprint-file")).unwrap()).unwrap();
    let components = &fp["components"];
    for facet in ["native.isa", "native.libc", "native.compiler", "native.gpu", "python.interpreter", "torch"] {
        assert!(components.get(facet).is_some(), "{facet} in {components}");
    }
    assert_eq!(components["torch"]["torch"], "2.15.0+cpu");
    assert_eq!(components["env"]["TORCHINDUCTOR_MAX_AUTOTUNE"], "1");
    assert!(components["env"].get("TORCH_LOGS").is_none(), "logging does not change codegen");

    // A codegen variable changes the key; what the preset cached is saved in the post step.
    let mut other = Step::new();
    other.set_env("TORCHINDUCTOR_MAX_AUTOTUNE", "0");
    fake_torch(&other.ws);
    let r2 = other.run(&["fingerprint"], &inputs, NO_STATE);
    assert_ne!(r2.output("key"), r.output("key"));
    write(&base.join("inductor/fxgraph/ab/entry"), b"compiled");
    let mut post_env = step.extra_env.clone();
    post_env.extend(r.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    step.extra_env = post_env;
    let post = step.run(&["save", "--post"], &inputs, &r.state);
    assert_eq!(post.output("save-result"), "saved", "{}", post.stdout);
}

#[test]
fn prune_uses_the_saved_keys_prefix_and_never_deletes_what_it_just_saved() {
    let services = Services::start();
    let step = step_with_rest(&services);
    write(&step.ws.join("out/a"), b"a");
    // Entries of the default prefix must survive a prune of another prefix.
    let default = [("path", "out"), ("native", "none"), ("github-token", REST_TOKEN)];
    assert_eq!(step.run(&["save"], &default, NO_STATE).output("saved"), "true");
    fn models(variant: &str) -> Vec<(&str, &str)> {
        vec![
            ("path", "out"),
            ("native", "none"),
            ("prefix", "models"),
            ("variant", variant),
            ("github-token", REST_TOKEN),
        ]
    }
    assert_eq!(step.run(&["save"], &models("old"), NO_STATE).output("saved"), "true");
    // The save action with an explicit key from a `models` restore and no `prefix` input.
    let key = step.run(&["restore"], &models("new"), NO_STATE).output("key").to_owned();
    let save = step.run(
        &["save"],
        &[("path", "out"), ("key", &key), ("prune", "true"), ("github-token", REST_TOKEN)],
        NO_STATE,
    );
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    assert!(save.stdout.contains("deleted 1 older entry of `models`"), "{}", save.stdout);
    let keys: Vec<String> = services.entries().into_iter().map(|e| e.key).collect();
    assert!(keys.contains(&key), "the new entry stays");
    assert!(keys.iter().any(|k| k.starts_with("exact-cache-")), "another prefix is untouched: {keys:?}");
    assert_eq!(keys.iter().filter(|k| k.starts_with("models-")).count(), 1);

    // A 404 on delete (a concurrent prune got there first) is not a failure and does not stop
    // the others.
    for v in ["x1", "x2", "x3"] {
        assert_eq!(step.run(&["save"], &models(v), NO_STATE).output("saved"), "true");
    }
    services.faults.push(Op::RestDelete, Fault::Status { code: 404, retry_after: None, msg: "Not Found" }, 1);
    let mut last = models("x4");
    last.push(("prune", "true"));
    let r = step.run(&["save"], &last, NO_STATE);
    assert!(!r.stdout.contains("::warning"), "{}", r.stdout);
    assert!(r.stdout.contains("deleted 4 older entries of `models`"), "{}", r.stdout);
}

#[test]
fn local_prune_keeps_the_entry_just_saved_even_within_one_second() {
    let step = Step::new();
    write(&step.ws.join("out/a"), b"a");
    for v in ["1", "2", "3"] {
        let inputs = [("path", "out"), ("native", "none"), ("prefix", "fast"), ("variant", v), ("prune", "true")];
        let r = step.run(&["save"], &inputs, NO_STATE);
        assert_eq!(r.output("saved"), "true");
        let restore = step.run(
            &["restore"],
            &[("path", "out"), ("native", "none"), ("prefix", "fast"), ("variant", v)],
            NO_STATE,
        );
        assert_eq!(restore.output("reused"), "true", "variant {v} survived its own prune:\n{}", r.stdout);
    }
    assert_eq!(std::fs::read_dir(step.cache.join("entries")).unwrap().count(), 1);
}

#[test]
fn explain_reads_one_small_range_of_a_large_entry() {
    let services = Services::start();
    let mut step = step_with_rest(&services);
    step.set_env("EXACT_CACHE_DOWNLOAD_CHUNK_MIB", "1");
    let data: Vec<u8> = (0..3_000_000u32).flat_map(|i| i.wrapping_mul(2654435761).to_le_bytes()).collect();
    write(&step.ws.join("out/big.bin"), &data);
    let inputs = [("path", "out"), ("native", "none"), ("compression", "none"), ("github-token", REST_TOKEN)];
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("saved"), "true");
    let gets = services.faults.calls(Op::BlobGet);
    let other =
        [("path", "out"), ("native", "none"), ("compression", "none"), ("github-token", REST_TOKEN), ("variant", "v")];
    let r = step.run(&["restore"], &other, NO_STATE);
    assert!(r.stdout.contains("variant: variant added"), "{}", r.stdout);
    assert_eq!(services.faults.calls(Op::BlobGet) - gets, 1, "one GET for a 12 MB entry");
}

#[test]
fn verify_reuse_does_not_count_files_that_were_there_before_the_restore() {
    let step = Step::new();
    write(&step.ws.join("out/a.bin"), b"a");
    let inputs = [("path", "out"), ("native", "none"), ("verify-reuse", "fail")];
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("saved"), "true");
    std::fs::remove_file(step.ws.join("out/a.bin")).unwrap();
    write(&step.ws.join("out/other-key-leftover.bin"), b"from another run");
    let warm = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(warm.output("reused"), "true");
    let post = step.run(&["save", "--post"], &inputs, &warm.state);
    assert_eq!(post.code, 0, "{}", post.stdout);
    assert_eq!(post.output("changed-files"), "");
}

#[test]
fn a_miss_on_an_entry_of_the_same_key_names_the_path_lines_or_compression() {
    let step = Step::new();
    write(&step.ws.join("out/a"), b"a");
    let saved = [("path", "out"), ("native", "none"), ("prefix", "same")];
    let key = step.run(&["save"], &saved, NO_STATE).output("key").to_owned();

    let other_paths = [("path", "other"), ("native", "none"), ("prefix", "same")];
    let r = step.run(&["restore"], &other_paths, NO_STATE);
    assert_eq!((r.code, r.output("key"), r.output("miss-reason")), (0, key.as_str(), "not-found"));
    let sentence = "an entry with this key exists for other `path` lines or compression";
    assert!(r.stdout.contains(&format!("compared with `{key}`")), "{}", r.stdout);
    assert!(r.stdout.contains(sentence) && r.stdout.contains("saved with other `path` lines"), "{}", r.stdout);
    assert!(!r.stdout.contains("no earlier entry"), "{}", r.stdout);
    assert!(r.summary.contains("has this very key and fingerprint"), "{}", r.summary);
    assert!(r.summary.contains(&format!("| why | {sentence}")), "the miss's detail: {}", r.summary);

    let gzip = [("path", "out"), ("native", "none"), ("prefix", "same"), ("compression", "gzip")];
    let r = step.run(&["restore"], &gzip, NO_STATE);
    assert_eq!(r.output("miss-reason"), "not-found");
    assert!(r.stdout.contains("it was saved with `compression: zstd`"), "{}", r.stdout);

    let explained = step.run(&["explain"], &other_paths, NO_STATE);
    assert_eq!(explained.output("against"), key);
    assert!(explained.output("changes").starts_with(sentence), "{}", explained.stdout);
    // Our own entry, with our version, is nothing to compare with.
    let hit = step.run(&["explain"], &saved, NO_STATE);
    assert!(hit.stdout.contains("exists with this run's `path` lines and compression: a hit"), "{}", hit.stdout);
}

#[test]
fn files_under_path_that_are_not_in_the_entry_are_kept_and_reported() {
    let step = Step::new();
    write(&step.ws.join("out/a.bin"), b"a");
    let inputs = [("path", "out"), ("native", "none"), ("verify-reuse", "fail")];
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("saved"), "true");
    write(&step.ws.join("out/x1.bin"), b"from another tool");
    write(&step.ws.join("out/sub/x2.bin"), b"from another tool");
    let warm = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((warm.output("reused"), warm.output("extra-files")), ("true", "2"));
    let line = "kept 2 files under `path` not in the entry: `out/sub/x2.bin`, `out/x1.bin`";
    assert!(warm.stdout.contains(line), "{}", warm.stdout);
    assert!(step.ws.join("out/x1.bin").is_file() && step.ws.join("out/sub/x2.bin").is_file(), "never removed");
    // Not "added" by the job: `verify-reuse: fail` passes.
    let post = step.run(&["save", "--post"], &inputs, &warm.state);
    assert_eq!((post.code, post.output("changed-files")), (0, ""), "{}", post.stdout);
    let kept =
        "nothing under `path` changed since the restore (2 files not in the entry, there before the restore, kept)";
    assert!(post.stdout.contains(kept), "{}", post.stdout);

    std::fs::remove_file(step.ws.join("out/sub/x2.bin")).unwrap();
    let one = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(one.output("extra-files"), "1");
    let miss = step.run(&["restore"], &[("path", "out"), ("native", "none"), ("variant", "v")], NO_STATE);
    assert_eq!((miss.output("reused"), miss.output("extra-files")), ("false", "0"));
}

#[test]
fn logs_and_summaries_count_in_words_and_say_when_a_miss_is_not_explained() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"print(1)");
    write(&step.ws.join("out/a"), b"a");
    let inputs = [("path", "out"), ("native", "none"), ("prefix", "words"), ("hash-files", "gen.py")];
    let cold = step.run(&["restore"], &inputs, NO_STATE);
    assert!(cold.stdout.contains("files (1 value)"), "{}", cold.stdout);
    assert!(cold.stdout.contains("`x` when it is executable or `-` when not"), "the suffix, once: {}", cold.stdout);
    assert!(cold.summary.contains("Fingerprint: 1 component, 1 value"), "{}", cold.summary);
    assert!(cold.summary.contains("`explain-misses`: no earlier entry with prefix `words`"), "{}", cold.summary);
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("saved"), "true");
    let again = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(again.output("save-result"), "exists");
    assert!(!again.readable().contains("another job saved"), "{}", again.readable());
    let warm = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(warm.output("restored-files"), "1", "{}", warm.stdout);
    assert!(warm.summary.contains("1 file, "), "{}", warm.summary);
    assert!(!warm.readable().contains("1 files") && !cold.readable().contains("1 values"));
}

#[test]
fn the_rest_catalog_names_an_entry_of_the_same_key_saved_for_other_paths() {
    let services = Services::start();
    let step = step_with_rest(&services);
    write(&step.ws.join("out/a"), b"a");
    let saved = [("path", "out"), ("native", "none"), ("github-token", REST_TOKEN)];
    let key = step.run(&["save"], &saved, NO_STATE).output("key").to_owned();
    let other = [("path", "other"), ("native", "none"), ("github-token", REST_TOKEN)];
    let r = step.run(&["restore"], &other, NO_STATE);
    assert_eq!((r.output("key"), r.output("miss-reason")), (key.as_str(), "not-found"));
    assert!(r.stdout.contains("an entry with this key exists for other `path` lines or compression"), "{}", r.stdout);
}

/// `list` on the command line: the table (short keys; `--long` full ones) on stdout, so
/// `list | less` shows it; an empty list says so; `--json` a document on stdout; `--quiet` leaves
/// only warnings, errors and the outputs.
#[test]
fn list_prints_a_table_or_json_and_quiet_keeps_only_the_outputs() {
    let step = Step::new();
    write(&step.ws.join("out/a"), b"a");
    let inputs = [("path", "out"), ("native", "none"), ("prefix", "tbl")];
    let key = step.run(&["save"], &inputs, NO_STATE).output("key").to_owned();
    let cli = |args: &[&str]| {
        let out = step.cli(args);
        assert!(out.status.success(), "{out:?}");
        (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    };
    let (stdout, stderr) = cli(&["list", "--prefix=tbl"]);
    let mut rows = stdout.lines();
    let header: Vec<&str> = rows.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["key", "size", "created", "used", "ref", "version", "generated", "in", "slot"], "{stdout}");
    let row = rows.next().unwrap();
    assert!(row.starts_with(&format!("{}…  ", &key[..4 + 12])), "a short key: {row}");
    assert!(row.contains("T") && row.contains("Z  -"), "an ISO time and no ref: {row}");
    assert!(stderr.contains("1 entry of `tbl`"), "{stderr}");
    let (long, _) = cli(&["list", "--prefix=tbl", "--long"]);
    assert!(long.lines().nth(1).unwrap().starts_with(&format!("{key}  ")), "{long}");
    let (empty, _) = cli(&["list", "--prefix=nothing-here"]);
    assert!(empty.starts_with("no entries of `nothing-here`"), "{empty}");

    let (json, _) = cli(&["list", "--prefix=tbl", "--json"]);
    let entries: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let entry = &entries.as_array().unwrap()[0];
    assert!(entry["key"].as_str().unwrap().starts_with("tbl-"));
    assert!(entry["created"].as_str().unwrap().ends_with('Z'), "{entry}");
    assert!(entry["size"].as_u64().unwrap() > 0 && entry["version"].as_str().unwrap().len() == 64, "{entry}");

    // `explain` on the command line: the entry saved outside Actions is named as such (never
    // `()`), the fingerprint's table is listed, and `--quiet` keeps the answer.
    let (_, stderr) = cli(&["explain", "--path=out", "--native=none", "--prefix=tbl", "--variant=other"]);
    assert!(stderr.contains("(saved outside Actions):") && !stderr.contains("()"), "{stderr}");
    assert!(stderr.contains("  variant = other"), "the table: {stderr}");
    let (_, quiet) = cli(&["explain", "-q", "--path=out", "--native=none", "--prefix=tbl", "--variant=other"]);
    assert!(quiet.starts_with("compared with `tbl-") && quiet.contains("variant"), "{quiet}");
    // Other commands log one line about the fingerprint, the table with `--verbose`.
    let (_, brief) = cli(&["fingerprint", "--path=out", "--native=os", "--prefix=tbl"]);
    assert!(brief.contains("native.os (") && brief.contains("\n  family = "), "fingerprint lists it: {brief}");
    let (_, brief) = cli(&["restore", "--path=out", "--native=os", "--prefix=tbl"]);
    assert!(brief.contains("fingerprint: 1 component, ") && brief.contains(" (native.os; `--verbose` lists them)"));
    assert!(!brief.contains("family = "), "{brief}");
    let (_, verbose) = cli(&["restore", "--verbose", "--path=out", "--native=os", "--prefix=tbl"]);
    assert!(verbose.contains("native.os (") && verbose.contains("\n  family = "), "{verbose}");

    let (stdout, stderr) = cli(&["restore", "--quiet", "--path=out", "--native=none", "--prefix=tbl"]);
    assert!(stdout.contains("reused=true"), "{stdout}");
    assert_eq!(stderr, "", "nothing but outputs");
}
