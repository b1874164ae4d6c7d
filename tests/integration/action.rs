//! The binary as an Actions step: inputs, outputs, state, env, summary, annotations, exit codes.

use crate::support::{self, CliRun, NO_STATE, Step, assert_shown, set_exec, snapshot, write};
use exact_cache::fingerprint::Value;
use exact_cache::outcome::{MissReason, Output, SaveResult};

fn generate_fixtures(step: &Step) {
    write(&step.ws.join("fixtures/model.pth"), &[3u8; 10_000]);
    write(&step.ws.join("fixtures/model.expected"), b"tensor([1., 2.])\n");
    write(&step.ws.join("fixtures/saved_model/saved_model.pb"), b"pb");
    std::fs::create_dir_all(step.ws.join("fixtures/saved_model/assets")).unwrap();
    write(&step.ws.join("fixtures/run.sh"), b"#!/bin/sh\n");
    set_exec(&step.ws.join("fixtures/run.sh"), true);
    std::os::unix::fs::symlink("model.pth", step.ws.join("fixtures/latest.pth")).unwrap();
}

fn inputs() -> Vec<(&'static str, &'static str)> {
    vec![
        ("path", "fixtures"),
        ("prefix", "fixtures-v1"),
        ("hash-files", "gen.py"),
        ("required", "fixtures/model.pth\nfixtures/saved_model"),
        ("reuse-env", "REUSE_FIXTURES"),
    ]
}

#[test]
fn cold_then_warm() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"print('generate')\n");

    let cold = step.run(&["restore"], &inputs(), NO_STATE);
    assert_eq!(cold.code, 0, "{}", cold.stdout);
    assert!(!cold.cache_hit() && !cold.reused());
    assert_eq!(cold.miss_reason(), MissReason::NotFound);
    assert_eq!(cold.restored_files(), 0);
    assert_eq!(cold.env["REUSE_FIXTURES"], "0");
    let key = cold.key();
    assert_eq!(key.prefix(), Some("fixtures-v1"), "{key}");
    let fingerprint = cold.fingerprint();
    assert_eq!(fingerprint.key, key);
    assert!(matches!(fingerprint.components.components["files"]["gen.py"], Value::Text(_)));
    assert_eq!(cold.state["key"], key.as_str());

    generate_fixtures(&step);
    let post = step.run(&["save", "--post"], &inputs(), &cold.state);
    assert_eq!(post.code, 0, "{}", post.stdout);
    assert!(post.saved());
    assert_eq!(post.save_result(), SaveResult::Saved);
    let produced = snapshot(&step.ws.join("fixtures"));

    std::fs::remove_dir_all(step.ws.join("fixtures")).unwrap();
    let warm = step.run(&["restore"], &inputs(), NO_STATE);
    assert_eq!(warm.code, 0, "{}", warm.stdout);
    assert!(warm.cache_hit() && warm.reused());
    assert_eq!(warm.miss_reason(), MissReason::None);
    assert_eq!(warm.key(), key);
    assert_eq!(warm.restored_files(), 5);
    assert_eq!(warm.restored_bytes(), 10_000 + 17 + 2 + 10);
    assert_eq!(warm.env["REUSE_FIXTURES"], "1");
    assert_eq!(snapshot(&step.ws.join("fixtures")), produced, "byte-identical, modes and links kept");

    let post = step.run(&["save", "--post"], &inputs(), &warm.state);
    assert_eq!(post.save_result(), SaveResult::SkippedHit);
    assert!(!post.saved());

    // A changed generator is a different key: a miss.
    write(&step.ws.join("gen.py"), b"print('generate v2')\n");
    let changed = step.run(&["restore"], &inputs(), NO_STATE);
    assert_eq!(changed.miss_reason(), MissReason::NotFound);
    assert_ne!(changed.key(), key);
}

#[test]
fn a_flipped_byte_in_the_stored_entry_is_never_reused() {
    let mut said = String::new();
    for compression in ["zstd", "none"] {
        let mut step = Step::new();
        // The files' bytes inside the archive (a flipped byte of a pack: content.rs).
        step.set_env("EXACT_CACHE_CONTENT", "whole");
        write(&step.ws.join("gen.py"), b"print('generate')\n");
        let mut inputs = inputs();
        inputs.push(("compression", compression));
        generate_fixtures(&step);
        let save = step.run(&["save"], &inputs, NO_STATE);
        assert_eq!(save.save_result(), SaveResult::Saved, "{}", save.stdout);

        let entry = step.stored_entry();
        let mut bytes = std::fs::read(&entry).unwrap();
        // A byte inside the model file's data (zstd: inside the compressed stream).
        let at = if compression == "none" { 2048 + 1024 } else { bytes.len() / 2 };
        bytes[at] ^= 0x01;
        std::fs::write(&entry, &bytes).unwrap();

        // The target holds a half-generated state; the failed restore must not change it.
        std::fs::remove_file(step.ws.join("fixtures/model.pth")).unwrap();
        write(&step.ws.join("fixtures/partial.tmp"), b"half");
        let before = snapshot(&step.ws);
        let restore = step.run(&["restore"], &inputs, NO_STATE);
        assert_eq!(restore.code, 0, "{}", restore.stdout);
        assert!(!restore.cache_hit(), "{}", restore.stdout);
        assert_eq!((restore.reused(), restore.entry_exists()), (false, true));
        let reason = restore.miss_reason();
        assert!(matches!(reason, MissReason::Corrupt | MissReason::ManifestMismatch), "{compression}: {reason}");
        assert_eq!(restore.warnings().len(), 1, "trouble: {}", restore.stdout);
        assert_eq!(restore.env["REUSE_FIXTURES"], "0");
        assert_eq!(snapshot(&step.ws), before, "{compression}: target untouched");

        let mut strict = inputs.clone();
        strict.push(("strict", "true"));
        let failed = step.run(&["restore"], &strict, NO_STATE);
        assert_eq!(failed.code, 1, "strict turns a corrupt entry into a failure");
        assert!(!failed.reused());
        assert_eq!((failed.warnings().len(), failed.errors().len()), (1, 1), "{}", failed.stdout);
        let tmp = step.dir.path().to_str().unwrap();
        let shown = failed.said().replace(tmp, "[TMP]");
        let shown = if compression == "zstd" { up_to_the_reason(&shown) } else { shown };
        said += &format!("--- compression: {compression}, strict\n{shown}");
    }
    assert_shown!(std::path::Path::new("[TMP]"), "flipped_byte_strict", said);
}

/// `said` with each annotation cut where its reason starts: where a flipped byte lands in a
/// compressed stream (and so the reason and the decoder's words) varies with the archive's bytes.
fn up_to_the_reason(said: &str) -> String {
    let lines = said.lines().filter(|l| !l.starts_with("  caused by: ")).map(|l| {
        let at = ["corrupt", "manifest-mismatch"].iter().filter_map(|r| l.find(r)).min();
        at.map_or(l.to_owned(), |at| format!("{}[REASON]", &l[..at]))
    });
    lines.map(|l| l + "\n").collect()
}

#[test]
fn bad_input_is_a_clear_error() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (vec![], "no path"),
        (vec![("path", "out"), ("native", "os,gpus")], "an unknown facet"),
        (vec![("path", "out"), ("compression", "brotli")], "an unknown compression"),
        (vec![("path", "out"), ("hash-files", "nope/*.py")], "a hash-files pattern that matches nothing"),
        (vec![("path", "out"), ("hash-files", "/proc/self/mem")], "a hash-files file that cannot be read"),
        (vec![("path", "out"), ("hash-commands", "false")], "a failing hash-commands command"),
        (vec![("path", "out"), ("lookup-only", "maybe")], "a switch that is neither true nor false"),
    ];
    let mut said = String::new();
    for (inputs, about) in cases {
        let r = step.run(&["restore"], &inputs, NO_STATE);
        assert_eq!(r.code, 1, "{about}");
        assert_eq!(r.errors().len(), 1, "{}", r.stdout);
        said += &format!("--- {about}\n{}", r.said());
    }
    assert_shown!(step.dir.path(), "bad_input", said);
    let r = step.run(&["restore", "--no-such-flag"], &[], NO_STATE);
    assert_eq!(r.code, 2, "usage errors exit 2");
}

#[test]
fn incomplete_sets_are_never_saved() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    write(&step.ws.join("fixtures/model.pth"), b"only this");
    let save = step.run(&["save"], &inputs(), NO_STATE);
    assert_eq!(save.code, 0);
    assert_eq!(save.save_result(), SaveResult::Incomplete);
    assert!(!save.saved());
    assert!(
        !step.cache.join("entries").exists() || std::fs::read_dir(step.cache.join("entries")).unwrap().count() == 0
    );

    std::fs::remove_dir_all(step.ws.join("fixtures")).unwrap();
    let empty = step.run(&["save"], &[("path", "fixtures")], NO_STATE);
    assert_eq!(empty.save_result(), SaveResult::Incomplete);
    // Each names its cause: the required path missing, and nothing at all.
    let said = format!("--- a required path missing\n{}--- nothing\n{}", save.said(), empty.said());
    assert_shown!(step.dir.path(), "incomplete_sets", said);
}

#[test]
fn a_named_tool_that_is_missing_is_an_input_error_and_a_default_probe_is_absent() {
    let mut step = Step::new();
    let strict_off = [("path", "out"), ("strict", "false")];
    let cases = [("compilers", "cc\nexact-cache-no-such-cc"), ("python", "exact-cache-no-such-python")];
    let mut said = String::new();
    for (input, value) in cases {
        for mode in ["fingerprint", "restore"] {
            let mut inputs = strict_off.to_vec();
            inputs.push((input, value));
            let r = step.run(&[mode], &inputs, NO_STATE);
            assert_eq!(r.code, 1, "{mode} with {input}: {}", r.readable());
            said += &format!("--- {mode} with `{input}: {value}`\n{}", r.said());
        }
    }
    assert_shown!(step.dir.path(), "a_named_tool_that_is_missing", said);

    // `$CC` is the default probe, not a named command: a missing one is recorded as absent.
    step.extra_env.push(("CC".into(), "exact-cache-no-such-cc".into()));
    let r = step.run(&["fingerprint"], &strict_off, NO_STATE);
    assert_eq!(r.code, 0, "{}", r.readable());
    let compilers = &r.fingerprint().components.components["native.compiler"];
    assert_eq!(compilers.get("exact-cache-no-such-cc"), Some(&Value::Absent), "{compilers:?}");
}

#[test]
fn saving_twice_reports_exists() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    generate_fixtures(&step);
    // `reuse-env` is an input of the restoring entry points only: the save entry point warns.
    let inputs: Vec<_> = inputs().into_iter().filter(|(name, _)| *name != "reuse-env").collect();
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).save_result(), SaveResult::Saved);
    let again = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(again.code, 0);
    assert_eq!(again.save_result(), SaveResult::Exists);
    assert!(!again.saved());
    assert_eq!(again.annotations(), [], "exists is information, not a warning: {}", again.stdout);
}

#[test]
fn save_with_an_explicit_key_uses_the_restore_steps_fingerprint() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    let restore = step.run(&["restore"], &inputs(), NO_STATE);
    let key = restore.key();
    generate_fixtures(&step);
    // Something changes between restore and save; the entry is still saved under the key the
    // restore step computed, with its fingerprint.
    write(&step.ws.join("gen.py"), b"changed after restore");
    let mut save_inputs = inputs();
    save_inputs.push(("key", &key));
    let save = step.run(&["save"], &save_inputs, NO_STATE);
    assert_eq!(save.save_result(), SaveResult::Saved, "{}", save.stdout);
    assert_eq!(save.key(), key);
    assert!(step.stored_entry().file_name().unwrap().to_string_lossy().starts_with(&format!("{key}@")));
    // The save entry point given only `path` and `key` heads its summary as the restore did.
    assert!(restore.summary.starts_with("### exact-cache restore: fixtures-v1\n"), "{}", restore.summary);
    let save = step.run(&["save"], &[("path", "fixtures"), ("key", &key)], NO_STATE);
    assert!(save.summary.starts_with("### exact-cache save: fixtures-v1\n"), "{}", save.summary);

    let unknown = format!("fixtures-v1-{}", "f".repeat(64));
    let mut bad = inputs();
    bad.push(("key", &unknown));
    let r = step.run(&["save"], &bad, NO_STATE);
    assert_eq!((r.code, r.errors().len()), (1, 1), "{}", r.stdout);
    assert_shown!(step.dir.path(), "save_with_an_unknown_key", r.said());
}

#[test]
fn clean_on_miss_lookup_only_and_fail_on_cache_miss() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    write(&step.ws.join("fixtures/stale.pth"), b"old");
    write(&step.ws.join("fixtures/keep.txt"), b"excluded from path");
    let mut clean = vec![("path", "fixtures\n!fixtures/keep.txt"), ("clean-on-miss", "true")];
    let r = step.run(&["restore"], &clean, NO_STATE);
    assert_eq!(r.miss_reason(), MissReason::NotFound);
    assert_eq!(r.cleaned_files(), 1);
    assert!(!step.ws.join("fixtures/stale.pth").exists());
    assert!(step.ws.join("fixtures/keep.txt").exists(), "excluded paths survive");

    clean.push(("fail-on-cache-miss", "true"));
    let r = step.run(&["restore"], &clean, NO_STATE);
    assert_eq!((r.code, r.errors().len()), (1, 1), "{}", r.stdout);
    assert!(!r.reused(), "outputs are written even when the step fails");
    assert_shown!(step.dir.path(), "fail_on_cache_miss", r.said());

    write(&step.ws.join("fixtures/new.pth"), b"new");
    assert!(step.run(&["save"], &[("path", "fixtures\n!fixtures/keep.txt")], NO_STATE).saved());
    let lookup = step.run(
        &["restore"],
        &[("path", "fixtures\n!fixtures/keep.txt"), ("lookup-only", "true"), ("fail-on-cache-miss", "true")],
        NO_STATE,
    );
    assert_eq!(lookup.code, 0);
    assert!(lookup.cache_hit() && !lookup.reused());
    assert_eq!(lookup.miss_reason(), MissReason::LookupOnly);
}

#[test]
fn read_only_cache_mode_skips_the_save() {
    let mut step = Step::new();
    step.set_env("ACTIONS_CACHE_MODE", "read");
    write(&step.ws.join("out/a"), b"a");
    let r = step.run(&["save"], &[("path", "out")], NO_STATE);
    assert_eq!(r.code, 0);
    assert_eq!(r.save_result(), SaveResult::ReadOnly);
    assert!(!step.cache.join("entries").exists());
}

#[test]
fn cli_mode_prints_outputs_on_stdout_and_logs_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("ws/out/a"), b"a");
    let out = std::process::Command::new(support::exe())
        .args(["fingerprint", "--path", "out", "--prefix", "Demo", "--native", "os", "--hash-env=CI", "--workspace"])
        .arg(dir.path().join("ws"))
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_OUTPUT")
        .env("RUNNER_TEMP", dir.path())
        .output()
        .unwrap();
    let run = CliRun::from(out);
    assert!(run.success(), "{run:?}");
    assert_eq!(exact_cache::keys::Key::from(run.output(Output::Key)).prefix(), Some("demo"), "{}", run.stdout);
    // Nothing but outputs on stdout; the log, with the fingerprint's table, on stderr.
    let names: Vec<&str> = run.stdout.lines().map(|l| l.split_once('=').expect("name=value").0).collect();
    assert_eq!(names, [Output::Key.name(), Output::FingerprintFile.name()], "{}", run.stdout);
    assert_ne!(run.stderr, "");
}

#[test]
fn home_and_absolute_roots_restore_to_the_same_resolved_place() {
    let step = Step::new();
    let abs_root = step.dir.path().join("abs-root");
    write(&step.home.join(".cache/inductor/fx/abc.py"), b"kernel");
    write(&abs_root.join("lib.so"), b"\x7fELF");
    let lines = format!("~/.cache/inductor\n{}", abs_root.display());
    let inputs = [("path", lines.as_str()), ("native", "none")];
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).save_result(), SaveResult::Saved);
    let before = (snapshot(&step.home), snapshot(&abs_root));
    std::fs::remove_dir_all(step.home.join(".cache")).unwrap();
    std::fs::remove_dir_all(&abs_root).unwrap();
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert!(r.reused(), "{}", r.stdout);
    assert_eq!((snapshot(&step.home), snapshot(&abs_root)), before);
}

#[test]
fn a_save_that_cannot_archive_warns_sets_outputs_and_lets_the_job_go_on() {
    let step = Step::new();
    write(&step.ws.join("venv/lib/site.py"), b"x");
    std::os::unix::fs::symlink("/usr/bin/python3", step.ws.join("venv/python")).unwrap();
    let save = step.run(&["save"], &[("path", "venv"), ("native", "none")], NO_STATE);
    assert_eq!(save.code, 0, "{}", save.stdout);
    assert!(!save.saved());
    assert_eq!(save.save_result(), SaveResult::Error);
    // The warning names the cause: the absolute link.
    assert_shown!(step.dir.path(), "a_save_that_cannot_archive", save.said());
    let strict = step.run(&["save"], &[("path", "venv"), ("native", "none"), ("strict", "true")], NO_STATE);
    assert_eq!(strict.code, 1);
    assert_eq!(strict.save_result(), SaveResult::Error);
}

#[test]
fn fail_on_cache_miss_fires_when_an_existing_entry_is_unusable() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    generate_fixtures(&step);
    let mut inputs = inputs();
    inputs.push(("compression", "none"));
    assert!(step.run(&["save"], &inputs, NO_STATE).saved());
    let entry = step.stored_entry();
    let mut bytes = std::fs::read(&entry).unwrap();
    bytes[3072] ^= 1;
    std::fs::write(&entry, bytes).unwrap();
    inputs.push(("fail-on-cache-miss", "true"));
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((r.cache_hit(), r.reused(), r.entry_exists()), (false, false, true));
    assert_eq!(r.code, 1, "{}", r.stdout);
}

#[test]
fn a_save_with_other_paths_or_compression_than_its_key_is_refused() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    let key = step.run(&["restore"], &inputs(), NO_STATE).key();
    generate_fixtures(&step);
    let mut save_inputs = inputs();
    save_inputs.push(("key", &key));
    save_inputs.push(("compression", "gzip"));
    let r = step.run(&["save"], &save_inputs, NO_STATE);
    assert_eq!((r.code, r.errors().len()), (1, 1), "{}", r.stdout);
    assert_shown!(step.dir.path(), "a_save_with_other_paths_or_compression", r.said());
    assert!(!step.cache.join("entries").exists(), "nothing stored under a key that could never restore");
}

/// Read-only directories (a Go module cache, say) restored once must not block the next
/// restore or `clean-on-miss`. Runs as an unprivileged user: root ignores permissions.
#[test]
fn read_only_directories_do_not_block_restore_or_clean() {
    let step = Step::new();
    let nobody = |args: &[&str]| {
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", support::exe()])
            .args(args)
            .arg("--workspace")
            .arg(&step.ws)
            .env_remove("GITHUB_ACTIONS")
            .env("EXACT_CACHE_DIR", step.dir.path().join("nobody-cache"))
            .env("HOME", step.dir.path())
            .output()
            .unwrap();
        CliRun::from(out)
    };
    use std::os::unix::fs::PermissionsExt;
    write(&step.ws.join("mod/pkg/a.go"), b"package a");
    std::fs::set_permissions(step.ws.join("mod/pkg"), std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::set_permissions(step.ws.join("mod/pkg/a.go"), std::fs::Permissions::from_mode(0o444)).unwrap();
    for p in [step.dir.path(), &step.dir.path().join("work"), &step.dir.path().join("work/repo"), &step.ws] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let chown = std::process::Command::new("chown").args(["-R", "65534:65534"]).arg(&step.ws).status().unwrap();
    assert!(chown.success());
    let args = ["--path=mod", "--native=none", "--allow-machine-only-key"];
    let saved = nobody(&[&["save"][..], &args].concat());
    assert_eq!(saved.output(Output::SaveResult), SaveResult::Saved.name(), "{saved:?}");
    // The tree is still there, read-only: restore over it.
    let restored = nobody(&[&["restore"][..], &args].concat());
    assert_eq!(restored.output(Output::Reused), "true", "{restored:?}");
    assert_eq!(std::fs::metadata(step.ws.join("mod/pkg")).unwrap().permissions().mode() & 0o777, 0o555);
    // A miss with clean-on-miss removes it all.
    let cleaned = nobody(&[
        "restore",
        "--path=mod",
        "--native=none",
        "--variant=other",
        "--clean-on-miss",
        "--allow-machine-only-key",
    ]);
    assert_eq!(cleaned.output(Output::MissReason), MissReason::NotFound.name(), "{cleaned:?}");
    assert_eq!(cleaned.warnings(), Vec::<String>::new(), "{cleaned:?}");
    assert!(!step.ws.join("mod/pkg/a.go").exists());
}

#[test]
fn a_file_holding_a_token_or_a_secret_env_value_is_never_saved() {
    let token = "ghs_RuntimeToken0123456789abcdefXYZ";
    let mut step = Step::new();
    step.set_env("ACTIONS_RUNTIME_TOKEN", token);
    step.set_env("HF_TOKEN", "hf_userSecretValue42");
    write(&step.ws.join("gen.py"), b"print('generate')\n");
    let cold = step.run(&["restore"], &inputs(), NO_STATE);
    generate_fixtures(&step);
    let leaked = format!("header\n{token}\ntrailer");
    write(&step.ws.join("fixtures/saved_model/assets/vocab.txt"), leaked.as_bytes());

    let everything = support::StepResult::readable;
    let post = step.run(&["save", "--post"], &inputs(), &cold.state);
    assert_eq!(post.code, 0, "a refused save is a warning: {}", post.stdout);
    assert_eq!(post.save_result(), SaveResult::SecretFound);
    assert!(!post.saved());
    assert_eq!(post.warnings().len(), 1, "{}", post.stdout);
    // What each refusal names: the file, the fingerprint, the input.
    let mut said = format!("--- a file holding the runtime token\n{}", post.said());
    assert!(!everything(&post).contains(token), "{}", everything(&post));
    assert!(
        !step.cache.join("entries").exists() || std::fs::read_dir(step.cache.join("entries")).unwrap().count() == 0
    );

    // A `secret-env` value is refused the same way; strict makes it fail the step.
    write(&step.ws.join("fixtures/saved_model/assets/vocab.txt"), b"x hf_userSecretValue42 y");
    let mut with_list = inputs();
    with_list.push(("secret-env", "HF_TOKEN"));
    let post = step.run(&["save", "--post"], &with_list, &cold.state);
    assert_eq!(post.save_result(), SaveResult::SecretFound);
    assert!(!everything(&post).contains("hf_userSecretValue42"));
    with_list.push(("strict", "true"));
    let strict = step.run(&["save", "--post"], &with_list, &cold.state);
    assert_ne!(strict.code, 0, "{}", strict.stdout);
    assert_eq!(strict.save_result(), SaveResult::SecretFound);

    // Without the listed variable, the same file is ordinary data and saves.
    let post = step.run(&["save", "--post"], &inputs(), &cold.state);
    assert_eq!(post.save_result(), SaveResult::Saved, "{}", post.stdout);

    // A token listed in `hash-env` would sit in the archive's fingerprint member in clear.
    let hashing_it = [inputs(), vec![("hash-env", "HF_TOKEN"), ("secret-env", "HF_TOKEN")]].concat();
    let restore = step.run(&["restore"], &hashing_it, NO_STATE);
    assert!(!everything(&restore).contains("hf_userSecretValue42"), "{}", everything(&restore));
    let post = step.run(&["save", "--post"], &hashing_it, &restore.state);
    assert_eq!(post.save_result(), SaveResult::SecretFound, "{}", post.stdout);
    said += &format!("--- a secret-env value in hash-env\n{}", post.said());
    assert!(!everything(&post).contains("hf_userSecretValue42"));

    let bad = step.run(&["save", "--post"], &[inputs(), vec![("secret-env", "HF-TOKEN")]].concat(), &cold.state);
    assert_ne!(bad.code, 0, "{}", bad.stdout);
    said += &format!("--- a secret-env name that is no variable name\n{}", bad.said());
    assert_shown!(step.dir.path(), "secrets_never_saved", said);
}

/// Every 12-character piece of `secret` that lies on one line.
fn fragments(secret: &str) -> Vec<String> {
    let chars: Vec<char> = secret.chars().collect();
    chars.windows(12).map(|w| w.iter().collect::<String>()).filter(|f| !f.contains('\n')).collect()
}

#[test]
fn a_long_multi_line_secret_env_value_in_hash_env_never_shows() {
    use exact_cache::archive::{Compression, Inventory, SecretScanner, write_archive};
    use exact_cache::fingerprint::{Component, Fingerprint, FingerprintRecord, Value};
    // Longer than any cut, over several lines; the rotated value was never registered.
    let secret: String =
        (0..4).map(|i| format!("k{i}-{}", "Rv8TqW3zLm5Yp1Hs".repeat(4))).collect::<Vec<_>>().join("\n");
    let rotated = secret.replace("Rv8", "Xo4");
    let pin = "q7Z4k9"; // shorter than anything registered as a secret
    assert!(secret.len() > 200);
    let mut step = Step::new();
    step.set_env("DEPLOY_KEY", secret.clone());
    step.set_env("DEPLOY_PIN", pin);
    write(&step.ws.join("gen.py"), b"print('generate')\n");
    // An entry of the prefix saved before the key was rotated and listed in `secret-env`.
    let mut env = Component::new();
    env.insert("DEPLOY_KEY".into(), Value::text(&rotated));
    env.insert("DEPLOY_PIN".into(), Value::text("old-pin-0815"));
    let mut fp = Fingerprint::default();
    fp.insert("env", env);
    let earlier = FingerprintRecord::new("fixtures-v1", &"v1".into(), fp);
    let none = SecretScanner::none();
    let (bytes, _) =
        write_archive(&Inventory::default(), &earlier, Compression::Zstd, None, &none, Vec::new(), &mut |_| {})
            .unwrap();
    write(&step.cache.join(format!("entries/{}@v1", earlier.key)), &bytes);

    let listed = [("hash-env", "DEPLOY_KEY\nDEPLOY_PIN"), ("secret-env", "DEPLOY_KEY\nDEPLOY_PIN"), ("native", "none")];
    let hashing = [inputs(), listed.to_vec()].concat();
    let fingerprint = step.run(&["fingerprint"], &hashing, NO_STATE);
    let restore = step.run(&["restore"], &hashing, NO_STATE);
    generate_fixtures(&step);
    let post = step.run(&["save", "--post"], &hashing, &restore.state);
    assert_eq!(post.save_result(), SaveResult::SecretFound, "{}", post.stdout);
    for r in [&fingerprint, &restore, &post] {
        let readable = r.readable();
        assert!(!readable.contains(pin) && !readable.contains("old-pin-0815"), "{readable}");
        for fragment in fragments(&secret).iter().chain(&fragments(&rotated)) {
            assert!(!readable.contains(fragment.as_str()), "`{fragment}` shows in\n{readable}");
        }
    }
    // The miss is explained (`DEPLOY_KEY` changed), and log and summary show both values as `***`.
    assert_shown!(step.dir.path(), "secret_env_values_show_masked", restore.shown());
    // The real value still decides the key.
    step.extra_env.retain(|(k, _)| k != "DEPLOY_KEY");
    step.set_env("DEPLOY_KEY", rotated.clone());
    let other = step.run(&["fingerprint"], &hashing, NO_STATE);
    assert_ne!(other.key(), fingerprint.key());
}

#[test]
fn a_path_line_holding_the_token_is_never_saved() {
    let token = "ghs_RootLineToken0123456789abcdefXYZ";
    let mut step = Step::new();
    step.set_env("GITHUB_TOKEN", token);
    let line = format!("out-{token}");
    write(&step.ws.join(&line).join("model.bin"), b"weights");
    let inputs = [("path", line.as_str()), ("native", "none"), ("prefix", "roots")];
    let r = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!((r.code, r.save_result()), (0, SaveResult::SecretFound), "{}", r.stdout);
    assert_shown!(step.dir.path(), "a_path_line_holding_the_token", r.said());
    assert!(!r.readable().contains(token), "{}", r.readable());
    assert!(
        !step.cache.join("entries").exists() || std::fs::read_dir(step.cache.join("entries")).unwrap().count() == 0
    );
}

/// A `clean-on-miss` that cannot finish under `strict` fails the step, and what it left is
/// never saved under the key: not by the post step of a job that went on
/// (`continue-on-error`), and not after a failed job (`save-on-failure`).
#[test]
fn stale_files_that_clean_on_miss_could_not_remove_are_never_saved() {
    let step = Step::new();
    write(&step.ws.join("out/stale.bin"), b"from an older generator");
    let Some(_guard) = support::Immutable::set(&step.ws.join("out/stale.bin")) else {
        eprintln!("skipped: `chattr +i` is not available here");
        return;
    };
    let inputs = [
        ("path", "out"),
        ("native", "none"),
        ("clean-on-miss", "true"),
        ("strict", "true"),
        ("save-on-failure", "true"),
        ("reuse-env", "REUSED"),
    ];
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((restore.code, restore.errors().len()), (1, 1), "{}", restore.stdout);
    // Published all the same: the miss, the key for the post step, and that it must not save.
    assert_eq!(restore.miss_reason(), MissReason::NotFound);
    assert_eq!(restore.state["skip-save"], "stale");
    assert_eq!(restore.env["REUSED"], "0");

    let post = step.run(&["save", "--post"], &inputs, &restore.state);
    assert_eq!(post.code, 0, "{}", post.stdout);
    assert_eq!(post.save_result(), SaveResult::Incomplete);
    // The restore names the file it could not remove; the post step says why it saves nothing.
    let said = format!("--- restore\n{}--- post\n{}", restore.said(), post.said());
    assert_shown!(step.dir.path(), "stale_files_never_saved", said);
}

/// The post step runs after every job (`post-if: always()`, with `job-status` filled in by the
/// runner): after a failed or cancelled job it saves nothing and says so in one notice (GitHub
/// hides a skipped post step), unless `save-on-failure`; the restore's summary said so on the miss.
#[test]
fn a_failed_job_saves_nothing_and_says_so_unless_save_on_failure() {
    let step = Step::new();
    write(&step.ws.join("out/a"), b"a");
    let inputs = [("path", "out"), ("native", "none")];
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    // Log and summary say when the post step saves: only if the job succeeds.
    assert_shown!(step.dir.path(), "saved_only_if_the_job_succeeds", restore.shown());
    let mut said = String::new();
    for status in ["failure", "cancelled"] {
        let failed = [&inputs[..], &[("job-status", status)]].concat();
        let post = step.run(&["save", "--post"], &failed, &restore.state);
        assert_eq!(post.code, 0, "{}", post.stdout);
        assert_eq!(post.notices().len(), 1, "{}", post.stdout);
        said += &format!("--- job-status: {status}\n{}", post.said());
        assert!(post.outputs.is_empty() && post.summary.is_empty(), "{}", post.stdout);
        assert!(
            !step.cache.join("entries").exists() || std::fs::read_dir(step.cache.join("entries")).unwrap().count() == 0
        );
    }
    assert_shown!(step.dir.path(), "a_failed_job_saves_nothing", said);
    let anyway = [&inputs[..], &[("job-status", "failure"), ("save-on-failure", "true")]].concat();
    let restore = step.run(&["restore"], &anyway, NO_STATE);
    assert_shown!(step.dir.path(), "saved_also_if_the_job_fails", restore.shown());
    let post = step.run(&["save", "--post"], &anyway, &restore.state);
    assert_eq!(post.save_result(), SaveResult::Saved, "{}", post.stdout);
    let succeeded = [&inputs[..], &[("job-status", "success")]].concat();
    let post = step.run(&["save", "--post"], &succeeded, &restore.state);
    assert_eq!(post.save_result(), SaveResult::Exists, "{}", post.stdout);
}

/// A step moved from actions/cache keeps `key: …hashFiles(…)` and `restore-keys`: exact-cache
/// would have computed a key without those files and reused another workflow's entry.
#[test]
fn a_migrated_actions_cache_step_fails_with_a_hint_and_restores_nothing() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    generate_fixtures(&step);
    // Another workflow's entry under the default prefix and the same paths.
    let other = step.run(&["save"], &[("path", "fixtures")], NO_STATE);
    assert_eq!(other.save_result(), SaveResult::Saved, "{}", other.stdout);
    std::fs::remove_dir_all(step.ws.join("fixtures")).unwrap();

    // Each entry point fails with the same error: a hint for `key`, one for `restore-keys`.
    let migrated = [("path", "fixtures"), ("key", "fixtures-0123abcd"), ("restore-keys", "fixtures-")];
    let mut said = Vec::new();
    for args in [&["restore"][..], &["save", "--post"], &["fingerprint"]] {
        let r = step.run(args, &migrated, NO_STATE);
        assert_eq!((r.code, r.errors().len()), (1, 1), "{args:?}: {}", r.stdout);
        said.push(r.said());
        assert!(r.outputs.is_empty(), "{args:?}: no outputs from a step that refused its inputs");
    }
    assert!(said.iter().all(|s| *s == said[0]), "{said:?}");
    assert!(!step.ws.join("fixtures").exists(), "nothing restored");

    let r = step.run(&["restore"], &[("path", "fixtures"), ("save-always", "true")], NO_STATE);
    assert_eq!((r.code, r.errors().len()), (1, 1), "{}", r.stdout);
    let said = format!("--- key and restore-keys\n{}--- save-always\n{}", said[0], r.said());
    assert_shown!(step.dir.path(), "a_migrated_actions_cache_step", said);
}

/// A misspelt input name fails the step (its value would be left out of the key), and a key with
/// no project input is an input error naming the fix unless `allow-machine-only-key` asks for it.
#[test]
fn a_mistyped_input_or_a_key_without_project_inputs_fails_the_step() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    let inputs = [("path", "fixtures"), ("hash-file", "gen.py"), ("allow-machine-only-key", "false")];
    let mistyped = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((mistyped.code, mistyped.errors().len()), (1, 1), "{}", mistyped.stdout);
    assert!(mistyped.outputs.is_empty());
    let machine_only = step.run(&["restore"], &[("path", "fixtures"), ("allow-machine-only-key", "false")], NO_STATE);
    assert_eq!((machine_only.code, machine_only.errors().len()), (1, 1), "{}", machine_only.stdout);
    let r = step.run(&["restore"], &[("path", "fixtures"), ("hash-files", "gen.py")], NO_STATE);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let elsewhere = step.run(&["save"], &[("path", "fixtures"), ("lookup-only", "true")], NO_STATE);
    assert_eq!((elsewhere.code, elsewhere.warnings().len()), (0, 2), "{}", elsewhere.stdout);
    // The misspelt name with the one meant, the fix for a machine-only key, the entry point.
    let said = format!(
        "--- hash-file\n{}--- no project input\n{}--- lookup-only on save\n{}",
        mistyped.said(),
        machine_only.said(),
        elsewhere.said()
    );
    assert_shown!(step.dir.path(), "a_mistyped_input_or_a_key_without_project_inputs", said);
}

/// The runner sets `INPUT_*` for every input an `action.yml` declares, with its default: no
/// entry point, and not the root action's post step, remarks on them.
#[test]
fn declared_inputs_at_their_defaults_produce_no_warning() {
    use exact_cache::config::{EntryPoint, INPUTS};
    let step = Step::new();
    write(&step.ws.join("out/a"), b"a");
    let with_defaults = |entry: EntryPoint| -> Vec<(&'static str, &'static str)> {
        let mut inputs: Vec<_> = INPUTS.iter().filter(|i| i.declared_by(entry)).map(|i| (i.name, i.default)).collect();
        inputs.iter_mut().find(|(n, _)| *n == "path").unwrap().1 = "out";
        inputs.iter_mut().find(|(n, _)| *n == "native").unwrap().1 = "none";
        inputs.iter_mut().find(|(n, _)| *n == "hash-env").unwrap().1 = "CI";
        inputs
    };
    let main = step.run(&["restore"], &with_defaults(EntryPoint::Root), NO_STATE);
    let runs = [
        step.run(&["fingerprint"], &with_defaults(EntryPoint::Fingerprint), NO_STATE),
        step.run(&["restore"], &with_defaults(EntryPoint::Restore), NO_STATE),
        step.run(&["save", "--post"], &with_defaults(EntryPoint::Root), &main.state),
        step.run(&["save"], &with_defaults(EntryPoint::Save), NO_STATE),
    ];
    for r in std::iter::once(&main).chain(&runs) {
        assert_eq!(r.code, 0, "{}", r.stdout);
        assert_eq!(r.annotations(), [], "{}", r.stdout);
    }
}

/// `prefix: ''` used to become the default prefix, and `prune` on the default prefix deleted
/// another job's entry.
#[test]
fn an_empty_prefix_is_refused_and_the_default_prefix_is_never_pruned() {
    let step = Step::new();
    write(&step.ws.join("out/a"), b"a");
    let empty = step.run(&["restore"], &[("path", "out"), ("prefix", "")], NO_STATE);
    assert_eq!((empty.code, empty.errors().len()), (1, 1), "{}", empty.stdout);

    // Two jobs on the default prefix; the second asks to prune after its save.
    let first = step.run(&["save"], &[("path", "out"), ("native", "none")], NO_STATE);
    assert_eq!(first.save_result(), SaveResult::Saved, "{}", first.stdout);
    let second =
        step.run(&["save"], &[("path", "out"), ("native", "none"), ("variant", "b"), ("prune", "true")], NO_STATE);
    assert_eq!((second.code, second.save_result()), (0, SaveResult::Saved), "{}", second.stdout);
    assert_eq!(second.warnings().len(), 1, "{}", second.stdout);
    assert_eq!(std::fs::read_dir(step.cache.join("entries")).unwrap().count(), 2, "both entries kept");

    let cli = |args: &[&str]| {
        let out = std::process::Command::new(support::exe())
            .args(args)
            .arg("--workspace")
            .arg(&step.ws)
            .env_remove("GITHUB_ACTIONS")
            .env("EXACT_CACHE_DIR", &step.cache)
            .env("HOME", &step.home)
            .env("RUNNER_TEMP", &step.runner_temp)
            .output()
            .unwrap();
        CliRun::from(out)
    };
    let refused = cli(&["prune"]);
    assert_eq!(refused.code, Some(1), "{refused:?}");
    let dry = cli(&["prune", "--prefix=exact-cache", "--dry-run"]);
    assert_eq!(dry.code, Some(0), "a dry run deletes nothing: {dry:?}");
    assert_eq!(dry.outputs(Output::WouldDelete).len(), 1, "{dry:?}");
    let list = cli(&["list"]);
    assert_eq!((list.code, support::list_table(&list.stdout).len()), (Some(0), 2), "{list:?}");
    let empty_cli = cli(&["fingerprint", "--path=out", "--native=none", "--prefix="]);
    assert_eq!(empty_cli.code, Some(1), "{empty_cli:?}");
    assert_eq!(std::fs::read_dir(step.cache.join("entries")).unwrap().count(), 2, "both entries kept");
    // The errors and the warning name the fix (`prefix`); `list` says which prefix it read.
    let said = format!(
        "--- restore with prefix: ''\n{}--- save and prune on the default prefix\n{}--- prune\n{}\
         --- fingerprint --prefix=\n{}--- list\n{}",
        empty.said(),
        second.said(),
        refused.said(),
        empty_cli.said(),
        list.stderr
    );
    assert_shown!(step.dir.path(), "an_empty_prefix_and_the_default_prefix", said);
}

/// An existing but empty `path` (empty directories only) used to save `saved 0 files`, and the
/// next run reused nothing as if it were the generated output.
#[test]
fn a_path_without_files_is_never_saved() {
    let step = Step::new();
    std::fs::create_dir_all(step.ws.join("fixtures/empty/deeper")).unwrap();
    let inputs = [("path", "fixtures"), ("native", "none")];
    let cold = step.run(&["restore"], &inputs, NO_STATE);
    for r in [step.run(&["save"], &inputs, NO_STATE), step.run(&["save", "--post"], &inputs, &cold.state)] {
        assert_eq!(r.code, 0, "{}", r.stdout);
        assert_eq!((r.saved(), r.save_result()), (false, SaveResult::Incomplete));
        assert_shown!(step.dir.path(), "a_path_without_files", r.said());
    }
    assert!(
        !step.cache.join("entries").exists() || std::fs::read_dir(step.cache.join("entries")).unwrap().count() == 0
    );
    // One file is enough.
    write(&step.ws.join("fixtures/empty/marker"), b"");
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).save_result(), SaveResult::Saved);
}

#[test]
fn save_if_false_restores_and_verifies_but_writes_nothing() {
    let step = Step::new();
    let entries = || std::fs::read_dir(step.cache.join("entries")).map_or(0, |d| d.count());
    write(&step.ws.join("out/a.bin"), &[7u8; 4096]);
    let off = [("path", "out"), ("native", "none"), ("grow", "true"), ("save-if", "False")];

    // A miss's post step: no entry, and the key is still reported.
    let miss = step.run(&["restore"], &off, NO_STATE);
    assert_eq!(miss.miss_reason(), MissReason::NotFound);
    let post = step.run(&["save", "--post"], &off, &miss.state);
    assert_eq!((post.code, post.save_result(), post.saved()), (0, SaveResult::Disabled, false));
    assert_eq!(post.key(), miss.key());
    assert_eq!(entries(), 0, "nothing written");
    let direct = step.run(&["save"], &off, NO_STATE);
    assert_eq!(direct.save_result(), SaveResult::Disabled);
    assert_eq!(entries(), 0);

    // Another job saves; with `save-if: false` a restore still reuses it, `verify-reuse` still
    // reports what the job added, and `grow` writes no layer of it.
    let on: Vec<_> = off.iter().copied().filter(|(name, _)| *name != "save-if").collect();
    assert_eq!(step.run(&["save"], &on, NO_STATE).save_result(), SaveResult::Saved);
    assert_eq!(entries(), 1);
    let mut verifying = off.to_vec();
    verifying.push(("verify-reuse", "warn"));
    let hit = step.run(&["restore"], &verifying, NO_STATE);
    assert!(hit.reused());
    write(&step.ws.join("out/b.bin"), b"added by the job");
    let post = step.run(&["save", "--post"], &verifying, &hit.state);
    assert_eq!(post.save_result(), SaveResult::SkippedHit, "{}", post.stdout);
    assert_eq!(post.changed_files(), ["out/b.bin"], "{}", post.stdout);
    assert_eq!(entries(), 1, "no layer written");
    // The control: the same job with `save-if` left out saves the layer.
    let post = step.run(&["save", "--post"], &on, &hit.state);
    assert_eq!(post.save_result(), SaveResult::Layer, "{}", post.stdout);

    let bad = step.run(&["save"], &[("path", "out"), ("save-if", "maybe")], NO_STATE);
    assert_eq!((bad.code, bad.errors().len()), (1, 1), "{}", bad.stdout);
    assert_shown!(step.dir.path(), "save_if_maybe", bad.said());
}

/// Two caches in one job write into one step summary: each heading names its cache (the
/// `prefix`, or with the default prefix the first `path` line), so the reader tells them apart.
#[test]
fn two_caches_in_one_job_have_summary_headings_that_tell_them_apart() {
    let mut step = Step::new();
    let summary = step.dir.path().join("job-summary.md");
    step.set_env("GITHUB_STEP_SUMMARY", summary.to_string_lossy());
    let caches = [
        [("path", "fixtures"), ("prefix", "fixtures-v1"), ("native", "none")],
        [("path", "models/**"), ("prefix", "models-v2"), ("native", "none")],
    ];
    for inputs in &caches {
        assert_eq!(step.run(&["restore"], inputs, NO_STATE).miss_reason(), MissReason::NotFound);
    }
    step.run(&["restore"], &[("path", "third"), ("native", "none")], NO_STATE);
    let text = std::fs::read_to_string(&summary).unwrap();
    let headings: Vec<&str> = text.lines().filter(|l| l.starts_with("### ")).collect();
    let expected = ["fixtures-v1", "models-v2", "third"].map(|name| format!("### exact-cache restore: {name}"));
    assert_eq!(headings, expected, "{text}");
}
