//! The action as users run it, under nektos/act (host mode) against act's own cache server: the
//! workflows of `examples/`, each cold then warm, plus a failed job, a tampered entry, a changed
//! generator and a runner the release has no binary for. The action runs from a scratch
//! repository holding what a release holds (`action.yml` files and `dist/`), through the node
//! shim and the committed dist binary.

use std::path::Path;

use crate::support::act::{ActRun, git_repo, run_act};
use crate::support::torch_venv;
use crate::support::{assert_shown, needs};

const FILES: &[&str] = &["action.yml", "restore/action.yml", "save/action.yml", "fingerprint/action.yml"];

/// A repository like a user's checkout of the action plus our examples; workflows under
/// `.github/workflows/<example>.yml`.
fn repo() -> tempfile::TempDir {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for f in FILES {
        files.push((f.to_string(), std::fs::read(root.join(f)).unwrap()));
    }
    for entry in std::fs::read_dir(root.join("dist")).unwrap() {
        let path = entry.unwrap().path();
        files.push((format!("dist/{}", path.file_name().unwrap().to_string_lossy()), std::fs::read(&path).unwrap()));
    }
    // For quick iteration only: run another binary (its sum is rewritten); CI uses dist/.
    if let Ok(binary) = std::env::var("EXACT_CACHE_TEST_BINARY") {
        use sha2::Digest;
        let bytes = std::fs::read(binary).unwrap();
        let sum = hex::encode(sha2::Sha256::digest(&bytes));
        files.retain(|(n, _)| n != "dist/exact-cache-x86_64-unknown-linux-gnu" && n != "dist/SHA256SUMS");
        files.push(("dist/exact-cache-x86_64-unknown-linux-gnu".into(), bytes));
        files.push(("dist/SHA256SUMS".into(), format!("{sum}  exact-cache-x86_64-unknown-linux-gnu\n").into_bytes()));
    }
    for example in ["fixtures", "split", "composite", "torch-inductor", "s3"] {
        for entry in walkdir::WalkDir::new(root.join("examples").join(example)) {
            let entry = entry.unwrap();
            if entry.file_type().is_file() {
                let rel = entry.path().strip_prefix(root).unwrap().to_string_lossy().into_owned();
                files.push((rel, std::fs::read(entry.path()).unwrap()));
            }
        }
        let workflow = std::fs::read(root.join("examples").join(example).join("workflow.yml")).unwrap();
        files.push((format!(".github/workflows/{example}.yml"), workflow));
    }
    let text: Vec<(String, String)> = files
        .iter()
        .filter(|(_, b)| std::str::from_utf8(b).is_ok())
        .map(|(n, b)| (n.clone(), String::from_utf8(b.clone()).unwrap()))
        .collect();
    let borrowed: Vec<(&str, &str)> = text.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    let dir = git_repo(&borrowed);
    // Binary files (the dist binary) are written directly; act copies the directory as it is.
    for (name, bytes) in files.iter().filter(|(_, b)| std::str::from_utf8(b).is_err()) {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    dir
}

fn run(repo: &Path, example: &str, storage: &Path, extra: &[(&str, &str)]) -> ActRun {
    let workflow = repo.join(format!(".github/workflows/{example}.yml"));
    let src = repo.to_string_lossy().into_owned();
    let mut env = vec![("SRC", src.as_str())];
    env.extend_from_slice(extra);
    run_act(repo, &workflow, storage, &env)
}

fn generated(run: &ActRun) -> bool {
    run.log.contains("GENERATING fixtures")
}

#[needs(act)]
fn fixtures_cold_then_warm() {
    let repo = repo();
    let storage = tempfile::tempdir().unwrap();
    let sums = tempfile::tempdir().unwrap();
    let (cold_sums, warm_sums) = (sums.path().join("cold"), sums.path().join("warm"));

    let cold = run(repo.path(), "fixtures", storage.path(), &[("SUMS_FILE", cold_sums.to_str().unwrap())]);
    assert!(cold.success, "{}", cold.log);
    assert_eq!(cold.output("cache", "cache-hit"), "false");
    assert_eq!(cold.output("cache", "reused"), "false");
    assert_eq!(cold.output("cache", "miss-reason"), "not-found");
    assert!(generated(&cold), "the generator ran on the miss");
    assert_eq!(cold.output("cache", "save-result"), "saved", "the post step saved:\n{}", cold.log);

    let warm = run(repo.path(), "fixtures", storage.path(), &[("SUMS_FILE", warm_sums.to_str().unwrap())]);
    assert!(warm.success, "{}", warm.log);
    assert_eq!(warm.output("cache", "cache-hit"), "true");
    assert_eq!(warm.output("cache", "reused"), "true");
    assert_eq!(warm.output("cache", "miss-reason"), "none");
    assert_eq!(warm.output("cache", "key"), cold.output("cache", "key"));
    assert!(!generated(&warm), "the generator was skipped through `reuse-env`");
    assert_eq!(warm.output("cache", "save-result"), "skipped-hit");
    let (a, b) = (std::fs::read_to_string(&cold_sums).unwrap(), std::fs::read_to_string(&warm_sums).unwrap());
    assert!(a.contains("run_model.sh") && a.contains("755 fixtures/run_model.sh"), "{a}");
    assert_eq!(a, b, "byte-identical, modes kept");
}

#[needs(act)]
fn a_failed_job_saves_nothing() {
    let repo = repo();
    let storage = tempfile::tempdir().unwrap();
    let failed = run(repo.path(), "fixtures", storage.path(), &[("FAIL_JOB", "1")]);
    assert!(!failed.success, "{}", failed.log);
    assert_eq!(failed.output("cache", "reused"), "false");
    assert!(generated(&failed));
    assert!(
        !failed.outputs.get("cache").is_some_and(|o| o.contains_key("save-result")),
        "no post save:\n{}",
        failed.log
    );
    // The post step ran (`post-if: always()`) and said why it saved nothing.
    assert_shown!(repo.path(), "act_a_failed_job_saves_nothing", failed.said());
    let next = run(repo.path(), "fixtures", storage.path(), &[]);
    assert!(next.success, "{}", next.log);
    assert_eq!(next.output("cache", "miss-reason"), "not-found", "nothing was saved by the failed job");
}

#[needs(act)]
fn a_runner_without_a_binary_warns_and_the_job_goes_on_as_on_a_miss() {
    let repo = repo();
    // A release without a binary for this runner (Linux/X64 here, as macOS/ARM64 is today).
    std::fs::remove_file(repo.path().join("dist/exact-cache-x86_64-unknown-linux-gnu")).unwrap();
    let storage = tempfile::tempdir().unwrap();
    let r = run(repo.path(), "fixtures", storage.path(), &[]);
    assert!(r.success, "{}", r.log);
    // A warning names the platform without a binary.
    assert_shown!(repo.path(), "act_a_runner_without_a_binary", r.said());
    for (name, value) in [
        ("cache-hit", "false"),
        ("reused", "false"),
        ("miss-reason", "unsupported-platform"),
        ("restored-files", "0"),
        ("restored-bytes", "0"),
        ("key", ""),
        ("save-result", "unsupported-platform"),
        ("saved", "false"),
    ] {
        assert_eq!(r.output("cache", name), value, "{name}");
    }
    assert!(generated(&r), "`reuse-env` was exported as 0, so the generator ran:\n{}", r.log);
    assert!(r.log.contains("cache-hit=false reused=false miss-reason=unsupported-platform"), "{}", r.log);
}

/// Whether a file in act's storage is one of our packs (it opens with a zstd skippable frame
/// whose payload starts "exact-cache pack"), not an entry's archive.
fn is_pack(bytes: &[u8]) -> bool {
    bytes.get(8..24) == Some(b"exact-cache pack")
}

/// Flip one byte in the middle of a file under act's storage (`<storage>/cache/`): the largest
/// pack, or the newest entry archive.
fn tamper(storage: &Path, pack: bool) {
    let files: Vec<(std::path::PathBuf, Vec<u8>, std::time::SystemTime)> = walkdir::WalkDir::new(storage.join("cache"))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| (e.path().to_owned(), std::fs::read(e.path()).unwrap(), e.metadata().unwrap().modified().unwrap()))
        .filter(|(_, bytes, _)| is_pack(bytes) == pack)
        .collect();
    let (path, mut bytes, _) = if pack {
        files.into_iter().max_by_key(|(_, bytes, _)| bytes.len())
    } else {
        files.into_iter().max_by_key(|(_, _, modified)| *modified)
    }
    .unwrap_or_else(|| panic!("no {} in act's storage", if pack { "pack" } else { "entry" }));
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(path, bytes).unwrap();
}

/// A flipped byte in a pack (`content-missing`), then in the entry's own archive (`corrupt` or
/// `manifest-mismatch`): each time the job regenerates, the post step saves the replacement, and
/// the next run is an exact hit on it.
#[needs(act)]
fn a_tampered_entry_is_refused_the_job_regenerates_and_the_next_run_hits() {
    let repo = repo();
    let storage = tempfile::tempdir().unwrap();
    assert!(run(repo.path(), "fixtures", storage.path(), &[]).success);
    let rounds = [(true, &["content-missing"][..]), (false, &["corrupt", "manifest-mismatch"][..])];
    for (generation, (pack, reasons)) in (1..).zip(rounds) {
        tamper(storage.path(), pack);
        let warm = run(repo.path(), "fixtures", storage.path(), &[]);
        assert!(warm.success, "the job regenerates and passes:\n{}", warm.log);
        assert_eq!(warm.output("cache", "cache-hit"), "false", "the files are not in place");
        assert_eq!(warm.output("cache", "entry-exists"), "true");
        assert_eq!(warm.output("cache", "reused"), "false");
        let reason = warm.output("cache", "miss-reason");
        assert!(reasons.contains(&reason), "a flipped byte in the {}: {reason}", if pack { "pack" } else { "entry" });
        let reported = format!("not reused ({reason})");
        let warned = warm.annotations.iter().any(|(level, m)| level == "warning" && m.starts_with(&reported));
        assert!(warned, "the reason is reported:\n{}", warm.log);
        assert!(generated(&warm));
        let saved = format!("saved generation {generation} base:");
        assert!(warm.log.contains(&saved), "the post step saves the replacement:\n{}", warm.log);

        // The entry healed: the next run is an exact hit on the replacement.
        let healed = run(repo.path(), "fixtures", storage.path(), &[]);
        assert!(healed.success, "{}", healed.log);
        assert_eq!(healed.output("cache", "reused"), "true", "{}", healed.log);
        assert!(!generated(&healed));
    }
}

#[needs(act)]
fn a_changed_generator_is_a_miss_under_a_new_key() {
    let repo = repo();
    let storage = tempfile::tempdir().unwrap();
    let first = run(repo.path(), "fixtures", storage.path(), &[]);
    assert!(first.success, "{}", first.log);
    let script = repo.path().join("examples/fixtures/generate_fixtures.py");
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str("# a new model architecture\n");
    std::fs::write(&script, text).unwrap();
    let second = run(repo.path(), "fixtures", storage.path(), &[]);
    assert!(second.success, "{}", second.log);
    assert_eq!(second.output("cache", "miss-reason"), "not-found");
    assert_ne!(second.output("cache", "key"), first.output("cache", "key"));
    assert!(generated(&second));
}

#[needs(act)]
fn restore_and_save_building_blocks_cold_then_warm() {
    let repo = repo();
    let storage = tempfile::tempdir().unwrap();
    let cold = run(repo.path(), "split", storage.path(), &[]);
    assert!(cold.success, "{}", cold.log);
    assert_eq!(cold.output("restore", "reused"), "false");
    assert_eq!(cold.output("save", "save-result"), "saved");
    let warm = run(repo.path(), "split", storage.path(), &[]);
    assert!(warm.success, "{}", warm.log);
    assert_eq!(warm.output("restore", "reused"), "true");
    assert!(!generated(&warm));
}

#[needs(act)]
fn a_composite_action_wrapping_restore_and_save() {
    let repo = repo();
    let storage = tempfile::tempdir().unwrap();
    let cold = run(repo.path(), "composite", storage.path(), &[]);
    assert!(cold.success, "{}", cold.log);
    assert!(generated(&cold));
    assert!(cold.log.contains("reused=false key=composite-fixtures-v1-"), "{}", cold.log);
    let warm = run(repo.path(), "composite", storage.path(), &[]);
    assert!(warm.success, "{}", warm.log);
    assert!(!generated(&warm));
    assert!(warm.log.contains("reused=true key=composite-fixtures-v1-"), "{}", warm.log);
}

/// `backend: s3` under act: the example workflow against s3s-fs, cold then warm, with the
/// credentials and endpoint in the environment as the AWS tools read them.
#[needs(act, s3s_fs)]
fn s3_backend_cold_then_warm() {
    let repo = repo();
    let storage = tempfile::tempdir().unwrap();
    let server = crate::support::s3::S3Server::start();
    let mut env: Vec<(String, String)> = server.env();
    env.push(("AWS_ENDPOINT_URL_S3".into(), server.endpoint()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let cold = run(repo.path(), "s3", storage.path(), &env);
    assert!(cold.success, "{}", cold.log);
    assert_eq!(cold.output("cache", "miss-reason"), "not-found");
    assert!(generated(&cold));
    assert_eq!(cold.output("cache", "save-result"), "saved", "{}", cold.log);
    assert!(cold.log.contains("S3 bucket `ci-cache`"), "{}", cold.log);
    let objects = server.objects();
    assert!(objects.iter().any(|o| o.to_string_lossy().starts_with("exact-cache/s3-fixtures-v1-")), "{objects:?}");
    let warm = run(repo.path(), "s3", storage.path(), &env);
    assert!(warm.success, "{}", warm.log);
    assert_eq!(warm.output("cache", "reused"), "true", "{}", warm.log);
    assert!(!generated(&warm));
    assert!(!warm.log.contains(crate::support::s3::SECRET_KEY));
}

/// The time to generate a save recorded, in seconds, from its log line.
fn time_to_generate(log: &str) -> f64 {
    let line = log
        .lines()
        .find_map(|l| l.split("time to generate: ").nth(1))
        .unwrap_or_else(|| panic!("no time to generate:\n{log}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    match words[..] {
        [minutes, "min", seconds, "s", ..] => minutes.parse::<f64>().unwrap() * 60.0 + seconds.parse::<f64>().unwrap(),
        [seconds, "s", ..] => seconds.parse().unwrap(),
        _ => panic!("{line}"),
    }
}

/// The `INDUCTOR {...}` report line of compile_model.py.
fn inductor_report(run: &ActRun) -> serde_json::Value {
    let line =
        run.log.lines().find_map(|l| l.split("INDUCTOR ").nth(1)).unwrap_or_else(|| panic!("no report:\n{}", run.log));
    serde_json::from_str(line.trim()).unwrap()
}

/// Issue 14's sequence: model A cold; A and a new model B warm (B is kept as a layer); A and B
/// again on a fresh machine: nothing compiles, and the stack has one layer.
#[needs(act, torch)]
#[ignore = "slow: real torch.compile under act, three runs"]
fn torch_compile_cold_then_warm_then_grown_reuses_the_inductor_cache() {
    let repo = repo();
    let storage = tempfile::tempdir().unwrap();
    let caches = tempfile::tempdir().unwrap();
    let venv = torch_venv();
    let inductor = caches.path().join("inductor");
    let triton = caches.path().join("triton");
    // Torch puts its precompiled headers (150 MB) in <tmp>/torchinductor_<user> whatever the
    // cache directory: keep them in this test's scratch space.
    let tmp = caches.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let env = |models: &'static str, new: &'static str| {
        [
            ("TORCH_VENV", venv.to_str().unwrap().to_owned()),
            ("TORCHINDUCTOR_CACHE_DIR", inductor.to_str().unwrap().to_owned()),
            ("TRITON_CACHE_DIR", triton.to_str().unwrap().to_owned()),
            ("TMPDIR", tmp.to_str().unwrap().to_owned()),
            ("MODELS", models.to_owned()),
            ("NEW_MODELS", new.to_owned()),
        ]
    };
    let job = |models, new| {
        // A fresh machine: nothing local survives between jobs.
        let _ = std::fs::remove_dir_all(&inductor);
        let _ = std::fs::remove_dir_all(&triton);
        let env = env(models, new);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let run = run(repo.path(), "torch-inductor", storage.path(), &env);
        assert!(run.success, "{}", run.log);
        let report = inductor_report(&run);
        (run, report)
    };
    let count = |report: &serde_json::Value, name: &str| report[name].as_i64().unwrap();

    let (cold, cold_report) = job("a", "0");
    assert_eq!(cold.output("inductor", "cache-hit"), "false");
    assert_eq!(cold.output("inductor", "save-result"), "saved");
    assert!(count(&cold_report, "fxgraph_cache_miss") >= 1, "{cold_report}");
    // What the entry took to make: from the end of the restore to the last graph written — the
    // compile, and the interpreter starting and importing torch before it (issue 34). The log
    // shows whole seconds past a minute; the warm run's output has tenths.
    let compile = cold_report["compile_seconds"].as_f64().unwrap();
    let logged = time_to_generate(&cold.log);

    // A is reused; B is compiled and kept as layer 1 of the same exact key.
    let (warm, warm_report) = job("a,b", "1");
    assert_eq!(warm.output("inductor", "reused"), "true");
    assert_eq!(warm.output("inductor", "layers"), "0");
    assert!(count(&warm_report, "fxgraph_cache_hit") >= 1, "{warm_report}");
    assert_eq!(count(&warm_report, "fxgraph_cache_miss"), 1, "{warm_report}");
    assert!(warm.log.contains("did not hold; `grow` kept them"), "verify-reuse saw B's graphs: {}", warm.log);
    assert_eq!(warm.output("inductor", "save-result"), "layer", "{}", warm.log);
    // The hit is worth what the cold run recorded, less its own restore.
    let seconds = |run: &ActRun, name: &str| -> f64 { run.output("inductor", name).parse().unwrap() };
    let recorded = seconds(&warm, "generation-seconds");
    assert!((recorded - logged).abs() < 1.0, "restored figure {recorded} s, logged {logged} s");
    // Importing torch takes seconds, tens of them on a loaded machine.
    assert!((compile - 0.1..compile + 60.0).contains(&recorded), "recorded {recorded} s, compile {compile} s");
    let generation = recorded;
    // A compile cache: the restore claims no saving (its `time-saved` is empty); the post step
    // sets it to what torch spared (act shows the step's outputs as the post step left them), and
    // says it beside the graph counts: A's compile, which torch timed within the cold compile.
    assert!(warm.log.contains("::set-output:: time-saved=\n"), "the restore's: {}", warm.log);
    assert!(warm.log.contains("what this hit saves is torch's own figure"), "{}", warm.log);
    let saved = seconds(&warm, "time-saved");
    assert!(saved > 0.0 && saved <= compile + 1.0, "time-saved {saved} s, A's cold compile {compile} s");
    assert!(warm.log.contains("`grow` kept them; torch took 1 graph from its FX graph cache and compiled 1"));
    assert!(warm.log.contains("the restored entry spared "), "{}", warm.log);

    // Base + layer 1: the third run compiles nothing.
    let (grown, grown_report) = job("a,b", "0");
    assert_eq!(grown.output("inductor", "reused"), "true");
    assert_eq!(grown.output("inductor", "layers"), "1", "{}", grown.log);
    assert_eq!(count(&grown_report, "fxgraph_cache_miss"), 0, "{grown_report}");
    assert!(count(&grown_report, "fxgraph_cache_hit") >= 2, "{grown_report}");
    assert!(grown.log.contains("warm run: every graph came from the restored cache"), "{}", grown.log);
    assert!(grown.log.contains("verify-reuse: nothing under `path` changed since the restore"), "{}", grown.log);
    assert_eq!(grown.output("inductor", "save-result"), "skipped-hit");
    // Base and layer: A's figure and B's window; torch's, A's compile and B's.
    let stacked = seconds(&grown, "generation-seconds");
    assert!(stacked > generation, "base + layer {stacked} s, base {generation} s");
    let both = seconds(&grown, "time-saved");
    assert!(both > saved, "time-saved from base + layer {both} s, from the base {saved} s");
    eprintln!(
        "torch.compile under act: A cold {} s; A+B warm (B new) {} s; A+B from base + layer {} s",
        cold_report["compile_seconds"], warm_report["compile_seconds"], grown_report["compile_seconds"]
    );
    eprintln!(
        "time to generate recorded: A {recorded} s (compile {compile} s, so {:.1} s of interpreter start and \
         imports); base + layer {stacked} s; time-saved (torch's): A {saved} s, A + B {both} s",
        recorded - compile,
    );
}

/// A job of one step, `uses: ./` with `with` (YAML lines at its indentation), then a step that
/// would restore nothing it should not: it prints what the cache step said.
fn one_step_workflow(repo: &Path, name: &str, with: &str) {
    let workflow = format!(
        "name: {name}\non: push\npermissions: {{}}\njobs:\n  job:\n    runs-on: ubuntu-latest\n    steps:\n      \
         - run: cp -a \"$SRC\"/. .\n      - id: cache\n        uses: ./\n        with:\n{with}      - run: echo \
         \"after the cache step\"\n"
    );
    std::fs::write(repo.join(format!(".github/workflows/{name}.yml")), workflow).unwrap();
}

#[needs(act)]
fn a_step_migrated_from_actions_cache_fails_with_a_hint_and_restores_nothing() {
    let repo = repo();
    let storage = tempfile::tempdir().unwrap();
    let with = "          path: fixtures\n          key: fixtures-${{ hashFiles('examples/**/*.py') }}\n          \
                restore-keys: fixtures-\n";
    one_step_workflow(repo.path(), "migrated", with);
    let r = run(repo.path(), "migrated", storage.path(), &[]);
    assert!(!r.success, "an input error fails the step:\n{}", r.log);
    // The error moves `hashFiles(...)` to `hash-files`.
    assert_shown!(repo.path(), "act_a_step_migrated_from_actions_cache", r.said());
    assert!(!r.log.contains("after the cache step"), "{}", r.log);
    assert!(!repo.path().join("fixtures").exists());
}

#[needs(act)]
fn an_empty_prefix_is_an_input_error_under_act() {
    let repo = repo();
    let storage = tempfile::tempdir().unwrap();
    one_step_workflow(repo.path(), "empty-prefix", "          path: fixtures\n          prefix: ''\n");
    let r = run(repo.path(), "empty-prefix", storage.path(), &[]);
    assert!(!r.success, "{}", r.log);
    assert_shown!(repo.path(), "act_an_empty_prefix", r.said());
}
