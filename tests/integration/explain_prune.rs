//! `explain-misses`, `prune`, `list` and `verify-reuse`, against the local cache service with
//! its fake GitHub REST endpoints (list by key prefix and ref with pagination, delete by id),
//! and against the local backend.

use std::path::Path;

use crate::support::services::{Fault, Op, REST_TOKEN, Services};
use crate::support::{self, NO_STATE, Step, assert_shown, fake_torch, write};
use exact_cache::outcome::{MissReason, Output, SaveResult};

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
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).save_result(), SaveResult::Saved);

    site(&sitedir, "exact-cache-fake-torch", "2.15.0");
    let gets = services.faults.calls(Op::BlobGet);
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((r.code, r.miss_reason()), (0, MissReason::NotFound), "{}", r.stdout);
    // Log and summary name the distribution and both versions.
    assert_shown!(step.dir.path(), "a_miss_names_the_package", r.brief());
    assert_eq!(services.faults.calls(Op::BlobGet) - gets, 1, "one small ranged read, not a download");
    assert!(!r.readable().contains(REST_TOKEN));
}

#[test]
fn explain_without_permission_or_rest_says_why_in_one_line() {
    let services = Services::start();
    let step = step_with_rest(&services);
    write(&step.ws.join("out/a"), b"a");
    let inputs = [("path", "out"), ("native", "none"), ("github-token", REST_TOKEN)];
    assert!(step.run(&["save"], &inputs, NO_STATE).saved());
    let other = [("path", "out"), ("native", "none"), ("github-token", REST_TOKEN), ("variant", "x")];
    services.faults.push(
        Op::RestList,
        Fault::Status { code: 403, retry_after: None, msg: "Resource not accessible by integration" },
        1,
    );
    let denied = step.run(&["restore"], &other, NO_STATE);
    assert_eq!((denied.code, denied.miss_reason()), (0, MissReason::NotFound));
    assert_eq!(denied.annotations(), [], "not a warning: {}", denied.stdout);

    let mut act = step_with_rest(&services);
    act.set_env("ACT", "true");
    let under_act = act.run(&["restore"], &other, NO_STATE);
    let no_token = [("path", "out"), ("native", "none"), ("variant", "x")];
    let tokenless = step.run(&["restore"], &no_token, NO_STATE);
    // One line each: HTTP 403 and the permission it takes, act, the missing token.
    let why = |r: &crate::support::StepResult| r.group("Why this is a miss");
    let said = format!("--- 403\n{}--- act\n{}--- no token\n{}", why(&denied), why(&under_act), why(&tokenless));
    assert_shown!(step.dir.path(), "explain_without_permission_or_rest", said);
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
        assert_eq!(r.save_result(), SaveResult::Saved, "{}", r.stdout);
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
    // Log and summary give prune's account: what it kept and deleted, of which prefix, on which ref.
    assert_shown!(step.dir.path(), "prune_after_a_save", newest.brief());
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

    // Without `actions: write`: a warning, the save stands.
    services.faults.push(
        Op::RestDelete,
        Fault::Status { code: 403, retry_after: None, msg: "Resource not accessible by integration" },
        1,
    );
    let r = save("models", "5", &[("prune", "true")]);
    assert_eq!((r.code, r.warnings().len()), (0, 1), "{}", r.stdout);
    // The warning names the request and the permission it takes.
    assert_shown!(step.dir.path(), "prune_without_permission", r.said());
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
    assert_eq!(r.deleted().len(), 225, "the newest 5 are kept: {}", r.stdout);
    assert!(services.faults.calls(Op::RestList) >= 3, "three pages of 100");
    assert_eq!(services.entries().len(), 230, "a dry run deletes nothing");
}

#[test]
fn verify_reuse_names_what_changed_after_a_warm_restore() {
    let step = Step::new();
    write(&step.ws.join("out/a.bin"), b"a");
    write(&step.ws.join("out/b.bin"), b"b");
    let mut inputs = vec![("path", "out"), ("native", "none"), ("verify-reuse", "warn")];
    assert!(step.run(&["save"], &inputs, NO_STATE).saved());
    let warm = step.run(&["restore"], &inputs, NO_STATE);
    assert!(warm.reused());

    let quiet = step.run(&["save", "--post"], &inputs, &warm.state);
    assert_eq!(quiet.save_result(), SaveResult::SkippedHit);
    assert_eq!(quiet.changed_files(), Vec::<&str>::new());
    assert_eq!(quiet.annotations(), [], "{}", quiet.stdout);

    write(&step.ws.join("out/a.bin"), b"A");
    write(&step.ws.join("out/new.bin"), b"n");
    std::fs::remove_file(step.ws.join("out/b.bin")).unwrap();
    let warned = step.run(&["save", "--post"], &inputs, &warm.state);
    assert_eq!((warned.code, warned.warnings().len()), (0, 1), "{}", warned.stdout);
    assert_eq!(warned.changed_files(), ["out/a.bin", "out/b.bin", "out/new.bin"]);

    inputs[2] = ("verify-reuse", "fail");
    let failed = step.run(&["save", "--post"], &inputs, &warm.state);
    assert_eq!((failed.code, failed.errors().len()), (1, 2), "{}", failed.stdout);
    // What each says: nothing changed; 1 added, 1 changed, 1 removed (log and summary); the failure.
    let said = format!("--- unchanged\n{}--- warn\n{}--- fail\n{}", quiet.brief(), warned.brief(), failed.said());
    assert_shown!(step.dir.path(), "verify_reuse_names_what_changed", said);
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
    let components = r.fingerprint().components.components;
    for facet in ["native.isa", "native.libc", "native.compiler", "native.gpu", "python.interpreter", "torch"] {
        assert!(components.contains_key(facet), "{facet} in {components:?}");
    }
    assert_eq!(components["torch"]["torch"].as_text(), Some("2.15.0+cpu"));
    assert_eq!(components["env"]["TORCHINDUCTOR_MAX_AUTOTUNE"].as_text(), Some("1"));
    assert!(!components["env"].contains_key("TORCH_LOGS"), "logging does not change codegen");

    // A codegen variable changes the key; what the preset cached is saved in the post step.
    let mut other = Step::new();
    other.set_env("TORCHINDUCTOR_MAX_AUTOTUNE", "0");
    fake_torch(&other.ws);
    let r2 = other.run(&["fingerprint"], &inputs, NO_STATE);
    assert_ne!(r2.key(), r.key());
    write(&base.join("inductor/fxgraph/ab/entry"), b"compiled");
    let mut post_env = step.extra_env.clone();
    post_env.extend(r.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    step.extra_env = post_env;
    let post = step.run(&["save", "--post"], &inputs, &r.state);
    assert_eq!(post.save_result(), SaveResult::Saved, "{}", post.stdout);
}

#[test]
fn prune_uses_the_saved_keys_prefix_and_never_deletes_what_it_just_saved() {
    let services = Services::start();
    let step = step_with_rest(&services);
    write(&step.ws.join("out/a"), b"a");
    // Entries of the default prefix must survive a prune of another prefix.
    let default = [("path", "out"), ("native", "none"), ("github-token", REST_TOKEN)];
    assert!(step.run(&["save"], &default, NO_STATE).saved());
    fn models(variant: &str) -> Vec<(&str, &str)> {
        vec![
            ("path", "out"),
            ("native", "none"),
            ("prefix", "models"),
            ("variant", variant),
            ("github-token", REST_TOKEN),
        ]
    }
    assert!(step.run(&["save"], &models("old"), NO_STATE).saved());
    // The save action with an explicit key from a `models` restore and no `prefix` input.
    let key = step.run(&["restore"], &models("new"), NO_STATE).key();
    let save = step.run(
        &["save"],
        &[("path", "out"), ("key", &key), ("prune", "true"), ("github-token", REST_TOKEN)],
        NO_STATE,
    );
    assert_eq!(save.save_result(), SaveResult::Saved, "{}", save.stdout);
    // The older entry of `models` is deleted, the new one stays, the default prefix's is untouched
    // (and the pack the two entries of `models` shared stays: the new one references it).
    let keys = || -> Vec<String> { services.entries().into_iter().map(|e| e.key).collect() };
    let is_pack = |k: &String| k.contains("-pack.");
    let models_keys = || keys().into_iter().filter(|k| k.starts_with("models-") && !is_pack(k)).collect::<Vec<_>>();
    assert_eq!(models_keys(), [key.to_string()], "{:?}", keys());
    assert_eq!(keys().iter().filter(|k| k.starts_with("models-") && is_pack(k)).count(), 1, "{:?}", keys());
    assert!(keys().iter().any(|k| k.starts_with("exact-cache-")), "another prefix is untouched: {:?}", keys());

    // A 404 on delete (a concurrent prune got there first) is not a failure and does not stop
    // the others.
    for v in ["x1", "x2", "x3"] {
        assert!(step.run(&["save"], &models(v), NO_STATE).saved());
    }
    services.faults.push(Op::RestDelete, Fault::Status { code: 404, retry_after: None, msg: "Not Found" }, 1);
    let mut last = models("x4");
    last.push(("prune", "true"));
    let r = step.run(&["save"], &last, NO_STATE);
    assert_eq!(r.annotations(), [], "{}", r.stdout);
    // The fault answers 404 and keeps its entry: the other three are gone all the same, and the
    // log counts all four as deleted.
    let left = models_keys();
    assert!(left.len() == 2 && left.contains(&r.key().to_string()), "{left:?}");
    assert_eq!(r.stdout.lines().filter(|l| l.starts_with("  deleted models-")).count(), 4, "{}", r.stdout);
}

#[test]
fn local_prune_keeps_the_entry_just_saved_even_within_one_second() {
    let step = Step::new();
    write(&step.ws.join("out/a"), b"a");
    for v in ["1", "2", "3"] {
        let inputs = [("path", "out"), ("native", "none"), ("prefix", "fast"), ("variant", v), ("prune", "true")];
        let r = step.run(&["save"], &inputs, NO_STATE);
        assert!(r.saved());
        let restore = step.run(
            &["restore"],
            &[("path", "out"), ("native", "none"), ("prefix", "fast"), ("variant", v)],
            NO_STATE,
        );
        assert!(restore.reused(), "variant {v} survived its own prune:\n{}", r.stdout);
    }
    assert_eq!(std::fs::read_dir(step.cache.join("entries")).unwrap().count(), 1);
}

#[test]
fn explain_reads_one_small_range_of_a_large_entry() {
    let services = Services::start();
    let mut step = step_with_rest(&services);
    step.set_env("EXACT_CACHE_DOWNLOAD_CHUNK_MIB", "1");
    // A large archive: an entry of packs is small whatever its files hold.
    step.set_env("EXACT_CACHE_CONTENT", "whole");
    let data: Vec<u8> = (0..3_000_000u32).flat_map(|i| i.wrapping_mul(2654435761).to_le_bytes()).collect();
    write(&step.ws.join("out/big.bin"), &data);
    let inputs = [("path", "out"), ("native", "none"), ("compression", "none"), ("github-token", REST_TOKEN)];
    assert!(step.run(&["save"], &inputs, NO_STATE).saved());
    let gets = services.faults.calls(Op::BlobGet);
    let other =
        [("path", "out"), ("native", "none"), ("compression", "none"), ("github-token", REST_TOKEN), ("variant", "v")];
    let r = step.run(&["restore"], &other, NO_STATE);
    // It read the entry's fingerprint: the variant is named as added.
    assert_shown!(step.dir.path(), "explain_reads_one_small_range", r.group("Why this is a miss"));
    assert_eq!(services.faults.calls(Op::BlobGet) - gets, 1, "one GET for a 12 MB entry");
}

#[test]
fn verify_reuse_does_not_count_files_that_were_there_before_the_restore() {
    let step = Step::new();
    write(&step.ws.join("out/a.bin"), b"a");
    let inputs = [("path", "out"), ("native", "none"), ("verify-reuse", "fail")];
    assert!(step.run(&["save"], &inputs, NO_STATE).saved());
    std::fs::remove_file(step.ws.join("out/a.bin")).unwrap();
    write(&step.ws.join("out/other-key-leftover.bin"), b"from another run");
    let warm = step.run(&["restore"], &inputs, NO_STATE);
    assert!(warm.reused());
    let post = step.run(&["save", "--post"], &inputs, &warm.state);
    assert_eq!(post.code, 0, "{}", post.stdout);
    assert_eq!(post.changed_files(), Vec::<&str>::new());
}

#[test]
fn a_miss_on_an_entry_of_the_same_key_names_the_path_lines_or_compression() {
    let step = Step::new();
    write(&step.ws.join("out/a"), b"a");
    let saved = [("path", "out"), ("native", "none"), ("prefix", "same")];
    let key = step.run(&["save"], &saved, NO_STATE).key();

    let other_paths = [("path", "other"), ("native", "none"), ("prefix", "same")];
    let paths = step.run(&["restore"], &other_paths, NO_STATE);
    assert_eq!((paths.code, paths.key(), paths.miss_reason()), (0, key.clone(), MissReason::NotFound));

    let gzip = [("path", "out"), ("native", "none"), ("prefix", "same"), ("compression", "gzip")];
    let compression = step.run(&["restore"], &gzip, NO_STATE);
    assert_eq!(compression.miss_reason(), MissReason::NotFound);

    let explained = step.run(&["explain"], &other_paths, NO_STATE);
    assert_eq!(explained.output(Output::Against.name()), key.as_str());
    let changes = explained.output_lines(Output::Changes);
    // Our own entry, with our version, is nothing to compare with.
    let hit = step.run(&["explain"], &saved, NO_STATE);
    // The restores compare with this very key (never "no earlier entry") and say what differs:
    // the `path` lines, the compression it was saved with; `explain` answers the same, and a hit.
    let said = format!(
        "--- other path lines\n{}--- gzip\n{}--- explain: changes\n{}\n--- explain our own\n{}",
        paths.brief(),
        compression.group("Why this is a miss"),
        changes.join("\n"),
        hit.brief()
    );
    assert_shown!(step.dir.path(), "a_miss_on_an_entry_of_the_same_key", said);
}

#[test]
fn files_under_path_that_are_not_in_the_entry_are_kept_and_reported() {
    let step = Step::new();
    write(&step.ws.join("out/a.bin"), b"a");
    let inputs = [("path", "out"), ("native", "none"), ("verify-reuse", "fail")];
    assert!(step.run(&["save"], &inputs, NO_STATE).saved());
    write(&step.ws.join("out/x1.bin"), b"from another tool");
    write(&step.ws.join("out/sub/x2.bin"), b"from another tool");
    let warm = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((warm.reused(), warm.extra_files()), (true, 2));
    assert!(step.ws.join("out/x1.bin").is_file() && step.ws.join("out/sub/x2.bin").is_file(), "never removed");
    // Not "added" by the job: `verify-reuse: fail` passes.
    let post = step.run(&["save", "--post"], &inputs, &warm.state);
    assert_eq!((post.code, post.changed_files()), (0, vec![]), "{}", post.stdout);
    // The restore names them; the save counts them as there before the restore, kept.
    let said = format!("--- restore\n{}--- post\n{}", warm.brief(), post.brief());
    assert_shown!(step.dir.path(), "files_not_in_the_entry_are_kept", said);

    std::fs::remove_file(step.ws.join("out/sub/x2.bin")).unwrap();
    let one = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(one.extra_files(), 1);
    let miss = step.run(&["restore"], &[("path", "out"), ("native", "none"), ("variant", "v")], NO_STATE);
    assert_eq!((miss.reused(), miss.extra_files()), (false, 0));
}

#[test]
fn logs_and_summaries_count_in_words_and_say_when_a_miss_is_not_explained() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"print(1)");
    write(&step.ws.join("out/a"), b"a");
    let inputs = [("path", "out"), ("native", "none"), ("prefix", "words"), ("hash-files", "gen.py")];
    let cold = step.run(&["restore"], &inputs, NO_STATE);
    assert!(step.run(&["save"], &inputs, NO_STATE).saved());
    let again = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(again.save_result(), SaveResult::Exists);
    let warm = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(warm.restored_files(), 1, "{}", warm.stdout);
    // `1 value`, `1 component`, `1 file` (never `1 values`, `1 files`); the file-value suffix
    // explained once; an unexplained miss says why; an existing entry is not "another job's".
    let shown = format!("--- cold\n{}--- save again\n{}--- warm\n{}", cold.shown(), again.shown(), warm.shown());
    assert_shown!(step.dir.path(), "logs_and_summaries_count_in_words", shown);
}

#[test]
fn the_rest_catalog_names_an_entry_of_the_same_key_saved_for_other_paths() {
    let services = Services::start();
    let step = step_with_rest(&services);
    write(&step.ws.join("out/a"), b"a");
    let saved = [("path", "out"), ("native", "none"), ("github-token", REST_TOKEN)];
    let key = step.run(&["save"], &saved, NO_STATE).key();
    let other = [("path", "other"), ("native", "none"), ("github-token", REST_TOKEN)];
    let r = step.run(&["restore"], &other, NO_STATE);
    assert_eq!((r.key(), r.miss_reason()), (key, MissReason::NotFound));
    // As the local store's does (`a_miss_on_an_entry_of_the_same_key_…`).
    assert_shown!(step.dir.path(), "the_rest_catalog_names_an_entry_of_the_same_key", r.group("Why this is a miss"));
}

/// `list` on the command line: the table (short keys; `--long` full ones) on stdout, so
/// `list | less` shows it; an empty list says so; `--json` a document on stdout; `--quiet` leaves
/// only warnings, errors and the outputs.
#[test]
fn list_prints_a_table_or_json_and_quiet_keeps_only_the_outputs() {
    let step = Step::new();
    write(&step.ws.join("out/a"), b"a");
    let inputs = [("path", "out"), ("native", "none"), ("prefix", "tbl")];
    let key = step.run(&["save"], &inputs, NO_STATE).key();
    let mut transcript = String::new();
    let mut cli = |args: &[&str]| {
        let run = step.cli(args);
        assert!(run.success(), "{run:?}");
        transcript +=
            &format!("$ exact-cache {}\n--- stdout\n{}--- stderr\n{}", args.join(" "), run.stdout, run.stderr);
        run
    };
    let list = cli(&["list", "--prefix=tbl"]);
    let mut rows = list.stdout.lines();
    let header: Vec<&str> = rows.next().unwrap().split_whitespace().collect();
    let columns = ["key", "size", "created", "used", "ref", "version", "generated", "in", "slot", "in", "packs"];
    assert_eq!(header, columns, "{list:?}");
    assert!(rows.next().unwrap().starts_with(&format!("{}…  ", &key[..4 + 12])), "a short key: {list:?}");
    let long = cli(&["list", "--prefix=tbl", "--long"]);
    assert!(long.stdout.lines().nth(1).unwrap().starts_with(&format!("{key}  ")), "{long:?}");
    cli(&["list", "--prefix=nothing-here"]);

    let json = step.cli(&["list", "--prefix=tbl", "--json"]).stdout;
    let entries: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let entry = &entries.as_array().unwrap()[0];
    assert!(entry["key"].as_str().unwrap().starts_with("tbl-"));
    assert!(entry["created"].as_str().unwrap().ends_with('Z'), "{entry}");
    assert!(entry["size"].as_u64().unwrap() > 0 && entry["version"].as_str().unwrap().len() == 64, "{entry}");

    // `explain` on the command line: the entry saved outside Actions is named as such (never
    // `()`), the fingerprint's table is listed, and `--quiet` keeps the answer.
    let explain = ["explain", "--path=out", "--native=none", "--prefix=tbl", "--variant=other"];
    cli(&explain);
    cli(&[&explain[..1], &["-q"], &explain[1..]].concat());
    // Other commands log one line about the fingerprint, the table with `--verbose`.
    cli(&["fingerprint", "--path=out", "--native=none", "--variant=v", "--prefix=tbl"]);
    cli(&["restore", "--path=out", "--native=none", "--variant=v", "--prefix=tbl"]);
    cli(&["restore", "--verbose", "--path=out", "--native=none", "--variant=v", "--prefix=tbl"]);

    let quiet = cli(&["restore", "--quiet", "--path=out", "--native=none", "--prefix=tbl"]);
    assert_eq!(quiet.output(Output::Reused), "true", "{quiet:?}");
    assert_eq!(quiet.stderr, "", "nothing but outputs");
    // The table's rows (an ISO time, no ref), what `list` read, what `explain` and the fingerprint
    // log say.
    let mut settings = support::redactions(step.dir.path());
    // An archive's size varies with its files' times.
    settings.add_filter(r"\b\d+ B  ", "[SIZE]  ");
    settings.bind(|| insta::assert_snapshot!("the_command_line", transcript));
}
