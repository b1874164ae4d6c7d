//! The binary as an Actions step: inputs, outputs, state, env, summary, annotations, exit codes.

use crate::support::{self, NO_STATE, Step, set_exec, snapshot, write};

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
    assert_eq!(cold.output("cache-hit"), "false");
    assert_eq!(cold.output("reused"), "false");
    assert_eq!(cold.output("miss-reason"), "not-found");
    assert_eq!(cold.output("restored-files"), "0");
    assert_eq!(cold.env["REUSE_FIXTURES"], "0");
    let key = cold.output("key").to_owned();
    assert!(key.starts_with("fixtures-v1-") && key.len() == "fixtures-v1-".len() + 64);
    let fingerprint: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cold.output("fingerprint-file")).unwrap()).unwrap();
    assert_eq!(fingerprint["key"], key.as_str());
    assert!(fingerprint["components"]["files"]["gen.py"].is_string());
    assert_eq!(cold.state["key"], key);

    generate_fixtures(&step);
    let post = step.run(&["save", "--post"], &inputs(), &cold.state);
    assert_eq!(post.code, 0, "{}", post.stdout);
    assert_eq!(post.output("saved"), "true");
    assert_eq!(post.output("save-result"), "saved");
    let produced = snapshot(&step.ws.join("fixtures"));

    std::fs::remove_dir_all(step.ws.join("fixtures")).unwrap();
    let warm = step.run(&["restore"], &inputs(), NO_STATE);
    assert_eq!(warm.code, 0, "{}", warm.stdout);
    assert_eq!(warm.output("cache-hit"), "true");
    assert_eq!(warm.output("reused"), "true");
    assert_eq!(warm.output("miss-reason"), "none");
    assert_eq!(warm.output("key"), key);
    assert_eq!(warm.output("restored-files"), "5");
    assert_eq!(warm.output("restored-bytes"), (10_000 + 17 + 2 + 10).to_string());
    assert_eq!(warm.env["REUSE_FIXTURES"], "1");
    assert_eq!(snapshot(&step.ws.join("fixtures")), produced, "byte-identical, modes and links kept");

    let post = step.run(&["save", "--post"], &inputs(), &warm.state);
    assert_eq!(post.output("save-result"), "skipped-hit");
    assert_eq!(post.output("saved"), "false");

    // A changed generator is a different key: a miss.
    write(&step.ws.join("gen.py"), b"print('generate v2')\n");
    let changed = step.run(&["restore"], &inputs(), NO_STATE);
    assert_eq!(changed.output("miss-reason"), "not-found");
    assert_ne!(changed.output("key"), key);
}

#[test]
fn a_flipped_byte_in_the_stored_entry_is_never_reused() {
    for compression in ["zstd", "none"] {
        let step = Step::new();
        write(&step.ws.join("gen.py"), b"print('generate')\n");
        let mut inputs = inputs();
        inputs.push(("compression", compression));
        generate_fixtures(&step);
        let save = step.run(&["save"], &inputs, NO_STATE);
        assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);

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
        assert_eq!(restore.output("cache-hit"), "false", "{}", restore.stdout);
        assert_eq!((restore.output("reused"), restore.output("entry-exists")), ("false", "true"));
        let reason = restore.output("miss-reason");
        assert!(reason == "corrupt" || reason == "manifest-mismatch", "{compression}: {reason}");
        assert!(restore.stdout.lines().any(|l| l.starts_with("::warning::")), "trouble: {}", restore.stdout);
        assert_eq!(restore.env["REUSE_FIXTURES"], "0");
        assert_eq!(snapshot(&step.ws), before, "{compression}: target untouched");

        let mut strict = inputs.clone();
        strict.push(("strict", "true"));
        let failed = step.run(&["restore"], &strict, NO_STATE);
        assert_eq!(failed.code, 1, "strict turns a corrupt entry into a failure");
        assert_eq!(failed.output("reused"), "false");
        assert!(failed.stdout.contains("::error::cache trouble and `strict` is set"), "{}", failed.stdout);
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (vec![], "::error::input `path` is required"),
        (vec![("path", "out"), ("native", "os,gpus")], "::error::input `native`: unknown facet `gpus`"),
        (vec![("path", "out"), ("compression", "brotli")], "::error::input `compression`: `brotli` is not one of"),
        (vec![("path", "out"), ("hash-files", "nope/*.py")], "`hash-files` pattern `nope/*.py` matched no files"),
        (vec![("path", "out"), ("hash-files", "/proc/self/mem")], "cannot read `/proc/self/mem`"),
        (vec![("path", "out"), ("hash-commands", "false")], "`hash-commands` command `false` failed: exit status 1"),
        (
            vec![("path", "out"), ("lookup-only", "maybe")],
            "::error::input `lookup-only`: `maybe` is not `true` or `false`",
        ),
    ];
    for (inputs, message) in cases {
        let r = step.run(&["restore"], &inputs, NO_STATE);
        assert_eq!(r.code, 1, "{message}");
        assert!(r.stdout.contains(message), "expected `{message}` in:\n{}", r.stdout);
        assert!(r.stdout.lines().filter(|l| l.starts_with("::error::")).count() == 1);
    }
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
    assert_eq!(save.output("save-result"), "incomplete");
    assert_eq!(save.output("saved"), "false");
    assert!(save.stdout.contains("::warning::required path"), "{}", save.stdout);
    assert!(
        !step.cache.join("entries").exists() || std::fs::read_dir(step.cache.join("entries")).unwrap().count() == 0
    );

    std::fs::remove_dir_all(step.ws.join("fixtures")).unwrap();
    let empty = step.run(&["save"], &[("path", "fixtures")], NO_STATE);
    assert_eq!(empty.output("save-result"), "incomplete");
    assert!(empty.stdout.contains("nothing to save"), "{}", empty.stdout);
}

#[test]
fn a_named_tool_that_is_missing_is_an_input_error_and_a_default_probe_is_absent() {
    let mut step = Step::new();
    let strict_off = [("path", "out"), ("strict", "false")];
    let cases = [
        (
            "compilers",
            "cc\nexact-cache-no-such-cc",
            "compiler `exact-cache-no-such-cc` (named in `compilers`) not found",
        ),
        ("python", "exact-cache-no-such-python", "python interpreter `exact-cache-no-such-python` not found"),
    ];
    for (input, value, message) in cases {
        for mode in ["fingerprint", "restore"] {
            let mut inputs = strict_off.to_vec();
            inputs.push((input, value));
            let r = step.run(&[mode], &inputs, NO_STATE);
            assert_eq!(r.code, 1, "{mode} with {input}: {}", r.readable());
            assert!(r.stdout.contains(message), "expected `{message}` in:\n{}", r.stdout);
        }
    }

    // `$CC` is the default probe, not a named command: a missing one is recorded as absent.
    step.extra_env.push(("CC".into(), "exact-cache-no-such-cc".into()));
    let r = step.run(&["fingerprint"], &strict_off, NO_STATE);
    assert_eq!(r.code, 0, "{}", r.readable());
    let record = std::fs::read_to_string(r.output("fingerprint-file")).unwrap();
    assert!(record.contains("exact-cache-no-such-cc"), "{record}");
}

#[test]
fn saving_twice_reports_exists() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    generate_fixtures(&step);
    // `reuse-env` is an input of the restoring entry points only: the save entry point warns.
    let inputs: Vec<_> = inputs().into_iter().filter(|(name, _)| *name != "reuse-env").collect();
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("save-result"), "saved");
    let again = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(again.code, 0);
    assert_eq!(again.output("save-result"), "exists");
    assert_eq!(again.output("saved"), "false");
    assert!(!again.stdout.contains("::warning"), "exists is information, not a warning: {}", again.stdout);
}

#[test]
fn save_with_an_explicit_key_uses_the_restore_steps_fingerprint() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    let restore = step.run(&["restore"], &inputs(), NO_STATE);
    let key = restore.output("key").to_owned();
    generate_fixtures(&step);
    // Something changes between restore and save; the entry is still saved under the key the
    // restore step computed, with its fingerprint.
    write(&step.ws.join("gen.py"), b"changed after restore");
    let mut save_inputs = inputs();
    save_inputs.push(("key", &key));
    let save = step.run(&["save"], &save_inputs, NO_STATE);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    assert_eq!(save.output("key"), key);
    assert!(step.stored_entry().file_name().unwrap().to_string_lossy().starts_with(&format!("{key}@")));
    // The save entry point given only `path` and `key` heads its summary as the restore did.
    assert!(restore.summary.starts_with("### exact-cache restore: fixtures-v1\n"), "{}", restore.summary);
    let save = step.run(&["save"], &[("path", "fixtures"), ("key", &key)], NO_STATE);
    assert!(save.summary.starts_with("### exact-cache save: fixtures-v1\n"), "{}", save.summary);

    let unknown = format!("fixtures-v1-{}", "f".repeat(64));
    let mut bad = inputs();
    bad.push(("key", &unknown));
    let r = step.run(&["save"], &bad, NO_STATE);
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("no fingerprint file for key"), "{}", r.stdout);
}

#[test]
fn clean_on_miss_lookup_only_and_fail_on_cache_miss() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    write(&step.ws.join("fixtures/stale.pth"), b"old");
    write(&step.ws.join("fixtures/keep.txt"), b"excluded from path");
    let mut clean = vec![("path", "fixtures\n!fixtures/keep.txt"), ("clean-on-miss", "true")];
    let r = step.run(&["restore"], &clean, NO_STATE);
    assert_eq!(r.output("miss-reason"), "not-found");
    assert!(!step.ws.join("fixtures/stale.pth").exists());
    assert!(step.ws.join("fixtures/keep.txt").exists(), "excluded paths survive");

    clean.push(("fail-on-cache-miss", "true"));
    let r = step.run(&["restore"], &clean, NO_STATE);
    assert_eq!(r.code, 1);
    assert_eq!(r.output("reused"), "false", "outputs are written even when the step fails");
    assert!(r.stdout.contains("`fail-on-cache-miss` is set"));

    write(&step.ws.join("fixtures/new.pth"), b"new");
    assert_eq!(step.run(&["save"], &[("path", "fixtures\n!fixtures/keep.txt")], NO_STATE).output("saved"), "true");
    let lookup = step.run(
        &["restore"],
        &[("path", "fixtures\n!fixtures/keep.txt"), ("lookup-only", "true"), ("fail-on-cache-miss", "true")],
        NO_STATE,
    );
    assert_eq!(lookup.code, 0);
    assert_eq!(lookup.output("cache-hit"), "true");
    assert_eq!(lookup.output("reused"), "false");
    assert_eq!(lookup.output("miss-reason"), "lookup-only");
}

#[test]
fn read_only_cache_mode_skips_the_save() {
    let mut step = Step::new();
    step.set_env("ACTIONS_CACHE_MODE", "read");
    write(&step.ws.join("out/a"), b"a");
    let r = step.run(&["save"], &[("path", "out")], NO_STATE);
    assert_eq!(r.code, 0);
    assert_eq!(r.output("save-result"), "read-only");
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
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let key_line = stdout.lines().find(|l| l.starts_with("key=demo-")).expect("key on stdout");
    assert_eq!(key_line.len(), "key=demo-".len() + 64);
    assert!(String::from_utf8(out.stderr).unwrap().contains("native.os"));
}

#[test]
fn home_and_absolute_roots_restore_to_the_same_resolved_place() {
    let step = Step::new();
    let abs_root = step.dir.path().join("abs-root");
    write(&step.home.join(".cache/inductor/fx/abc.py"), b"kernel");
    write(&abs_root.join("lib.so"), b"\x7fELF");
    let lines = format!("~/.cache/inductor\n{}", abs_root.display());
    let inputs = [("path", lines.as_str()), ("native", "none")];
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("save-result"), "saved");
    let before = (snapshot(&step.home), snapshot(&abs_root));
    std::fs::remove_dir_all(step.home.join(".cache")).unwrap();
    std::fs::remove_dir_all(&abs_root).unwrap();
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(r.output("reused"), "true", "{}", r.stdout);
    assert_eq!((snapshot(&step.home), snapshot(&abs_root)), before);
}

#[test]
fn a_save_that_cannot_archive_warns_sets_outputs_and_lets_the_job_go_on() {
    let step = Step::new();
    write(&step.ws.join("venv/lib/site.py"), b"x");
    std::os::unix::fs::symlink("/usr/bin/python3", step.ws.join("venv/python")).unwrap();
    let save = step.run(&["save"], &[("path", "venv"), ("native", "none")], NO_STATE);
    assert_eq!(save.code, 0, "{}", save.stdout);
    assert_eq!(save.output("saved"), "false");
    assert_eq!(save.output("save-result"), "error");
    let warning = save.stdout.lines().find(|l| l.starts_with("::warning::")).expect("a warning");
    assert!(warning.contains("is absolute"), "the cause: {warning}");
    let strict = step.run(&["save"], &[("path", "venv"), ("native", "none"), ("strict", "true")], NO_STATE);
    assert_eq!(strict.code, 1);
    assert_eq!(strict.output("save-result"), "error");
}

#[test]
fn fail_on_cache_miss_fires_when_an_existing_entry_is_unusable() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    generate_fixtures(&step);
    let mut inputs = inputs();
    inputs.push(("compression", "none"));
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("saved"), "true");
    let entry = step.stored_entry();
    let mut bytes = std::fs::read(&entry).unwrap();
    bytes[3072] ^= 1;
    std::fs::write(&entry, bytes).unwrap();
    inputs.push(("fail-on-cache-miss", "true"));
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((r.output("cache-hit"), r.output("reused"), r.output("entry-exists")), ("false", "false", "true"));
    assert_eq!(r.code, 1, "{}", r.stdout);
}

#[test]
fn a_save_with_other_paths_or_compression_than_its_key_is_refused() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    let key = step.run(&["restore"], &inputs(), NO_STATE).output("key").to_owned();
    generate_fixtures(&step);
    let mut save_inputs = inputs();
    save_inputs.push(("key", &key));
    save_inputs.push(("compression", "gzip"));
    let r = step.run(&["save"], &save_inputs, NO_STATE);
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("was computed for other `path` lines or another `compression`"), "{}", r.stdout);
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
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
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
    assert!(nobody(&[&["save"][..], &args].concat()).contains("save-result=saved"));
    // The tree is still there, read-only: restore over it.
    let restored = nobody(&[&["restore"][..], &args].concat());
    assert!(restored.contains("reused=true"), "{restored}");
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
    assert!(cleaned.contains("miss-reason=not-found") && !cleaned.contains("warning"), "{cleaned}");
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
    assert_eq!(post.output("save-result"), "secret-found");
    assert_eq!(post.output("saved"), "false");
    assert!(post.stdout.contains("::warning") && post.stdout.contains("fixtures/saved_model/assets/vocab.txt"));
    assert!(!everything(&post).contains(token), "{}", everything(&post));
    assert!(
        !step.cache.join("entries").exists() || std::fs::read_dir(step.cache.join("entries")).unwrap().count() == 0
    );

    // A `secret-env` value is refused the same way; strict makes it fail the step.
    write(&step.ws.join("fixtures/saved_model/assets/vocab.txt"), b"x hf_userSecretValue42 y");
    let mut with_list = inputs();
    with_list.push(("secret-env", "HF_TOKEN"));
    let post = step.run(&["save", "--post"], &with_list, &cold.state);
    assert_eq!(post.output("save-result"), "secret-found");
    assert!(!everything(&post).contains("hf_userSecretValue42"));
    with_list.push(("strict", "true"));
    let strict = step.run(&["save", "--post"], &with_list, &cold.state);
    assert_ne!(strict.code, 0, "{}", strict.stdout);
    assert_eq!(strict.output("save-result"), "secret-found");

    // Without the listed variable, the same file is ordinary data and saves.
    let post = step.run(&["save", "--post"], &inputs(), &cold.state);
    assert_eq!(post.output("save-result"), "saved", "{}", post.stdout);

    // A token listed in `hash-env` would sit in the archive's fingerprint member in clear.
    let hashing_it = [inputs(), vec![("hash-env", "HF_TOKEN"), ("secret-env", "HF_TOKEN")]].concat();
    let restore = step.run(&["restore"], &hashing_it, NO_STATE);
    assert!(!everything(&restore).contains("hf_userSecretValue42"), "{}", everything(&restore));
    let post = step.run(&["save", "--post"], &hashing_it, &restore.state);
    assert_eq!(post.output("save-result"), "secret-found", "{}", post.stdout);
    assert!(post.stdout.contains("the fingerprint"), "{}", post.stdout);
    assert!(!everything(&post).contains("hf_userSecretValue42"));

    let bad = step.run(&["save", "--post"], &[inputs(), vec![("secret-env", "HF-TOKEN")]].concat(), &cold.state);
    assert_ne!(bad.code, 0, "{}", bad.stdout);
    assert!(bad.stdout.contains("secret-env"), "{}", bad.stdout);
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

    let hashing =
        [inputs(), vec![("hash-env", "DEPLOY_KEY\nDEPLOY_PIN"), ("secret-env", "DEPLOY_KEY\nDEPLOY_PIN")]].concat();
    let fingerprint = step.run(&["fingerprint"], &hashing, NO_STATE);
    let restore = step.run(&["restore"], &hashing, NO_STATE);
    generate_fixtures(&step);
    let post = step.run(&["save", "--post"], &hashing, &restore.state);
    assert_eq!(post.output("save-result"), "secret-found", "{}", post.stdout);
    for r in [&fingerprint, &restore, &post] {
        let readable = r.readable();
        assert!(!readable.contains(pin) && !readable.contains("old-pin-0815"), "{readable}");
        for fragment in fragments(&secret).iter().chain(&fragments(&rotated)) {
            assert!(!readable.contains(fragment.as_str()), "`{fragment}` shows in\n{readable}");
        }
    }
    assert!(restore.stdout.contains("env: DEPLOY_KEY changed"), "explained: {}", restore.stdout);
    assert!(restore.stdout.contains("DEPLOY_KEY = ***") && restore.stdout.contains("DEPLOY_PIN = ***"));
    assert!(restore.summary.contains("| `env` | `DEPLOY_KEY` | `***` |"), "{}", restore.summary);
    // The real value still decides the key.
    step.extra_env.retain(|(k, _)| k != "DEPLOY_KEY");
    step.set_env("DEPLOY_KEY", rotated.clone());
    let other = step.run(&["fingerprint"], &hashing, NO_STATE);
    assert_ne!(other.output("key"), fingerprint.output("key"));
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
    assert_eq!((r.code, r.output("save-result")), (0, "secret-found"), "{}", r.stdout);
    assert!(r.stdout.contains("a `path` line holds the value of a token"), "{}", r.stdout);
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
    assert_eq!(restore.code, 1, "{}", restore.stdout);
    assert!(restore.stdout.contains("cannot remove stale files"), "{}", restore.stdout);
    // Published all the same: the miss, the key for the post step, and that it must not save.
    assert_eq!(restore.output("miss-reason"), "not-found");
    assert_eq!(restore.state["skip-save"], "stale");
    assert_eq!(restore.env["REUSED"], "0");

    let post = step.run(&["save", "--post"], &inputs, &restore.state);
    assert_eq!(post.code, 0, "{}", post.stdout);
    assert_eq!(post.output("save-result"), "incomplete");
    assert!(post.stdout.contains("could not remove stale files"), "{}", post.stdout);
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
    assert!(restore.summary.contains("| saved | by the post step, only if the job succeeds"), "{}", restore.summary);
    assert!(restore.stdout.contains("saved: by the post step, only if the job succeeds"), "{}", restore.stdout);
    for status in ["failure", "cancelled"] {
        let failed = [&inputs[..], &[("job-status", status)]].concat();
        let post = step.run(&["save", "--post"], &failed, &restore.state);
        assert_eq!(post.code, 0, "{}", post.stdout);
        let notice =
            format!("::notice::the job's status is `{status}`: nothing was saved (`save-on-failure: true` to change)");
        assert!(post.stdout.contains(&notice), "{}", post.stdout);
        assert!(post.outputs.is_empty() && post.summary.is_empty(), "{}", post.stdout);
        assert!(
            !step.cache.join("entries").exists() || std::fs::read_dir(step.cache.join("entries")).unwrap().count() == 0
        );
    }
    let anyway = [&inputs[..], &[("job-status", "failure"), ("save-on-failure", "true")]].concat();
    let restore = step.run(&["restore"], &anyway, NO_STATE);
    assert!(restore.summary.contains("| saved | by the post step, also if the job fails"), "{}", restore.summary);
    let post = step.run(&["save", "--post"], &anyway, &restore.state);
    assert_eq!(post.output("save-result"), "saved", "{}", post.stdout);
    let succeeded = [&inputs[..], &[("job-status", "success")]].concat();
    let post = step.run(&["save", "--post"], &succeeded, &restore.state);
    assert_eq!(post.output("save-result"), "exists", "{}", post.stdout);
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
    assert_eq!(other.output("save-result"), "saved", "{}", other.stdout);
    std::fs::remove_dir_all(step.ws.join("fixtures")).unwrap();

    let migrated = [("path", "fixtures"), ("key", "fixtures-0123abcd"), ("restore-keys", "fixtures-")];
    for args in [&["restore"][..], &["save", "--post"], &["fingerprint"]] {
        let r = step.run(args, &migrated, NO_STATE);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stdout);
        assert!(r.stdout.contains("::error::input `key` (from actions/cache): the key is computed from the fingerprint here: move the files of your `hashFiles(...)` to `hash-files`"), "{}", r.stdout);
        assert!(
            r.stdout.contains("input `restore-keys` (from actions/cache): exact-cache never falls back to another key")
        );
        assert!(r.outputs.is_empty(), "{args:?}: no outputs from a step that refused its inputs");
    }
    assert!(!step.ws.join("fixtures").exists(), "nothing restored");

    let r = step.run(&["restore"], &[("path", "fixtures"), ("save-always", "true")], NO_STATE);
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains("input `save-always` (from actions/cache): write `save-on-failure: true`"),
        "{}",
        r.stdout
    );
}

/// A misspelt input name fails the step (its value would be left out of the key), and a key with
/// no project input is an input error naming the fix unless `allow-machine-only-key` asks for it.
#[test]
fn a_mistyped_input_or_a_key_without_project_inputs_fails_the_step() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"x");
    let inputs = [("path", "fixtures"), ("hash-file", "gen.py"), ("allow-machine-only-key", "false")];
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stdout.contains("::error::unknown input `hash-file`: did you mean `hash-files`?"), "{}", r.stdout);
    assert!(r.outputs.is_empty());
    let r = step.run(&["restore"], &[("path", "fixtures"), ("allow-machine-only-key", "false")], NO_STATE);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stdout.contains("::error::input `hash-files`: the key holds no project input"), "{}", r.stdout);
    assert!(r.stdout.contains("set `allow-machine-only-key: true`"), "{}", r.stdout);
    let r = step.run(&["restore"], &[("path", "fixtures"), ("hash-files", "gen.py")], NO_STATE);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let r = step.run(&["save"], &[("path", "fixtures"), ("lookup-only", "true")], NO_STATE);
    assert!(r.stdout.contains("::warning::input `lookup-only` is not an input of this entry point"), "{}", r.stdout);
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
        assert!(!r.stdout.contains("input `"), "{}", r.stdout);
    }
}

/// `prefix: ''` used to become the default prefix, and `prune` on the default prefix deleted
/// another job's entry.
#[test]
fn an_empty_prefix_is_refused_and_the_default_prefix_is_never_pruned() {
    let step = Step::new();
    write(&step.ws.join("out/a"), b"a");
    let r = step.run(&["restore"], &[("path", "out"), ("prefix", "")], NO_STATE);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stdout.contains("::error::input `prefix`: is empty: name this cache"), "{}", r.stdout);

    // Two jobs on the default prefix; the second asks to prune after its save.
    let first = step.run(&["save"], &[("path", "out"), ("native", "none")], NO_STATE);
    assert_eq!(first.output("save-result"), "saved", "{}", first.stdout);
    let second =
        step.run(&["save"], &[("path", "out"), ("native", "none"), ("variant", "b"), ("prune", "true")], NO_STATE);
    assert_eq!((second.code, second.output("save-result")), (0, "saved"), "{}", second.stdout);
    assert!(second.stdout.contains("::warning::prune: `exact-cache` is the default prefix"), "{}", second.stdout);
    assert!(second.stdout.contains("set `prefix` to name this cache"), "{}", second.stdout);
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
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = cli(&["prune"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("error: input `prefix`: `exact-cache` is the default prefix"), "{err}");
    assert!(err.contains("set `prefix` to name this cache"), "{err}");
    let (code, err) = cli(&["prune", "--prefix=exact-cache", "--dry-run"]);
    assert_eq!(code, Some(0), "a dry run deletes nothing: {err}");
    assert!(err.contains("would delete"), "{err}");
    let (code, err) = cli(&["list"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("2 entries of `exact-cache` (the default prefix; `--prefix` names another)"), "{err}");
    let (code, err) = cli(&["fingerprint", "--path=out", "--native=none", "--prefix="]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("input `prefix`: is empty"), "{err}");
    assert_eq!(std::fs::read_dir(step.cache.join("entries")).unwrap().count(), 2, "both entries kept");
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
        assert_eq!((r.output("saved"), r.output("save-result")), ("false", "incomplete"));
        assert!(
            r.stdout.contains("::warning::nothing to save: `path` holds only empty directories, no files"),
            "{}",
            r.stdout
        );
    }
    assert!(
        !step.cache.join("entries").exists() || std::fs::read_dir(step.cache.join("entries")).unwrap().count() == 0
    );
    // One file is enough.
    write(&step.ws.join("fixtures/empty/marker"), b"");
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("save-result"), "saved");
}

#[test]
fn save_if_false_restores_and_verifies_but_writes_nothing() {
    let step = Step::new();
    let entries = || std::fs::read_dir(step.cache.join("entries")).map_or(0, |d| d.count());
    write(&step.ws.join("out/a.bin"), &[7u8; 4096]);
    let off = [("path", "out"), ("native", "none"), ("grow", "true"), ("save-if", "False")];

    // A miss's post step: no entry, and the key is still reported.
    let miss = step.run(&["restore"], &off, NO_STATE);
    assert_eq!(miss.output("miss-reason"), "not-found");
    let post = step.run(&["save", "--post"], &off, &miss.state);
    assert_eq!((post.code, post.output("save-result"), post.output("saved")), (0, "disabled", "false"));
    assert_eq!(post.output("key"), miss.output("key"));
    assert_eq!(entries(), 0, "nothing written");
    let direct = step.run(&["save"], &off, NO_STATE);
    assert_eq!(direct.output("save-result"), "disabled");
    assert_eq!(entries(), 0);

    // Another job saves; with `save-if: false` a restore still reuses it, `verify-reuse` still
    // reports what the job added, and `grow` writes no layer of it.
    let on: Vec<_> = off.iter().copied().filter(|(name, _)| *name != "save-if").collect();
    assert_eq!(step.run(&["save"], &on, NO_STATE).output("save-result"), "saved");
    assert_eq!(entries(), 1);
    let mut verifying = off.to_vec();
    verifying.push(("verify-reuse", "warn"));
    let hit = step.run(&["restore"], &verifying, NO_STATE);
    assert_eq!(hit.output("reused"), "true");
    write(&step.ws.join("out/b.bin"), b"added by the job");
    let post = step.run(&["save", "--post"], &verifying, &hit.state);
    assert_eq!(post.output("save-result"), "skipped-hit", "{}", post.stdout);
    assert!(post.output("changed-files").contains("b.bin"), "{}", post.stdout);
    assert_eq!(entries(), 1, "no layer written");
    // The control: the same job with `save-if` left out saves the layer.
    let post = step.run(&["save", "--post"], &on, &hit.state);
    assert_eq!(post.output("save-result"), "layer", "{}", post.stdout);

    let bad = step.run(&["save"], &[("path", "out"), ("save-if", "maybe")], NO_STATE);
    assert_eq!(bad.code, 1);
    assert!(bad.stdout.contains("input `save-if`: `maybe` is not `true` or `false`"), "{}", bad.stdout);
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
        assert_eq!(step.run(&["restore"], inputs, NO_STATE).output("miss-reason"), "not-found");
    }
    step.run(&["restore"], &[("path", "third"), ("native", "none")], NO_STATE);
    let text = std::fs::read_to_string(&summary).unwrap();
    let headings: Vec<&str> = text.lines().filter(|l| l.starts_with("### ")).collect();
    let expected = ["fixtures-v1", "models-v2", "third"].map(|name| format!("### exact-cache restore: {name}"));
    assert_eq!(headings, expected, "{text}");
}
