//! Our v1 client against nektos/act's real cache server (act 0.2.89, host mode): a round trip
//! within one run, reuse across runs, a tampered entry replaced by the next run, and act's
//! prefix matching never restoring another key.

use crate::support::act::{git_repo, run_act};
use crate::support::exe;
use crate::support::needs;

const ROUND_TRIP: &str = r#"
on: push
jobs:
  cache:
    runs-on: ubuntu-latest
    steps:
      - run: |
          mkdir -p out/sub
          head -c 3000000 /dev/urandom > out/weights.bin
          echo expected > out/sub/a.expected
          chmod +x out/sub/a.expected
          sha256sum out/weights.bin out/sub/a.expected > "$RUNNER_TEMP/before.sums"
      - id: save
        run: '"$EXE" save --path out --native none --allow-machine-only-key --prefix act-demo'
      - run: rm -rf out
      - id: restore
        run: '"$EXE" restore --path out --native none --allow-machine-only-key --prefix act-demo'
      - run: |
          sha256sum -c "$RUNNER_TEMP/before.sums"
          test -x out/sub/a.expected
"#;

const RESTORE_ONLY: &str = r#"
on: push
jobs:
  cache:
    runs-on: ubuntu-latest
    steps:
      - id: restore
        run: '"$EXE" restore --path out --native none --allow-machine-only-key --prefix act-demo'
      - run: test -s out/weights.bin
"#;

/// Plants, through act's own v1 API, an entry whose key extends ours, with our version.
const PREFIX_TRAP: &str = r#"
on: push
jobs:
  cache:
    runs-on: ubuntu-latest
    steps:
      - id: fp
        run: '"$EXE" fingerprint --path trap --native none --allow-machine-only-key --prefix act-trap'
      - run: |
          key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["key"])' "${{ steps.fp.outputs.fingerprint-file }}")
          version=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "${{ steps.fp.outputs.fingerprint-file }}")
          api="${ACTIONS_CACHE_URL}_apis/artifactcache"
          printf 'not ours' > blob
          id=$(curl -sf -X POST -H 'Content-Type: application/json' \
            -d "{\"key\":\"${key}-other\",\"version\":\"$version\",\"cacheSize\":8}" "$api/caches" \
            | python3 -c 'import json,sys; print(json.load(sys.stdin)["cacheId"])')
          curl -sf -X PATCH -H 'Content-Type: application/octet-stream' -H 'Content-Range: bytes 0-7/*' \
            --data-binary @blob "$api/caches/$id"
          curl -sf -X POST -H 'Content-Type: application/json' -d '{"size":8}' "$api/caches/$id"
          echo "planted ${key}-other"
      - id: restore
        run: '"$EXE" restore --path trap --native none --allow-machine-only-key --prefix act-trap'
      - run: test ! -e trap
"#;

/// A job guarded as migrated workflows are: the generator runs unless `cache-hit` is `true`.
const GUARDED_JOB: &str = r#"
on: push
jobs:
  cache:
    runs-on: ubuntu-latest
    steps:
      - id: restore
        run: '"$EXE" restore --path out --native none --allow-machine-only-key --prefix act-demo'
      - id: generate
        if: steps.restore.outputs.cache-hit != 'true'
        run: |
          mkdir -p out/sub
          head -c 3000000 /dev/urandom > out/weights.bin
          echo expected > out/sub/a.expected
          echo "ran=yes" >> "$GITHUB_OUTPUT"
      - run: test -s out/weights.bin
      - id: save
        run: '"$EXE" save --path out --native none --allow-machine-only-key --prefix act-demo'
"#;

/// The largest file act's cache server keeps: the archive of the one entry saved.
fn largest_stored_file(storage: &std::path::Path) -> std::path::PathBuf {
    let mut files = Vec::new();
    let mut dirs = vec![storage.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() { dirs.push(entry.path()) } else { files.push((meta.len(), entry.path())) }
        }
    }
    files.into_iter().max().expect("act stored something").1
}

#[needs(act)]
fn a_tampered_entry_on_acts_server_is_replaced_and_the_next_run_hits() {
    let repo = git_repo(&[(".github/workflows/rt.yml", ROUND_TRIP), (".github/workflows/job.yml", GUARDED_JOB)]);
    let storage = tempfile::tempdir().unwrap();
    let exe = exe();
    let first = run_act(repo.path(), &repo.path().join(".github/workflows/rt.yml"), storage.path(), &[("EXE", exe)]);
    assert_eq!(first.output("save", "save-result"), "saved", "{}", first.log);
    let archive = largest_stored_file(storage.path());
    let mut bytes = std::fs::read(&archive).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&archive, bytes).unwrap();

    let job = repo.path().join(".github/workflows/job.yml");
    let refused = run_act(repo.path(), &job, storage.path(), &[("EXE", exe)]);
    assert!(refused.success, "{}", refused.log);
    assert_eq!(refused.output("restore", "cache-hit"), "false", "{}", refused.log);
    assert_eq!(refused.output("restore", "entry-exists"), "true");
    assert_eq!(refused.output("generate", "ran"), "yes", "the guarded generator ran");
    assert_eq!(refused.output("save", "save-result"), "saved", "{}", refused.log);
    assert!(refused.log.contains("saved generation 1 base:"), "{}", refused.log);

    let healed = run_act(repo.path(), &job, storage.path(), &[("EXE", exe)]);
    assert!(healed.success, "{}", healed.log);
    assert_eq!(healed.output("restore", "reused"), "true", "{}", healed.log);
    assert!(!healed.outputs.contains_key("generate"), "the generator was skipped:\n{}", healed.log);
    // The save after a warm restore finds the restore's record: nothing to write.
    assert_eq!(healed.output("save", "save-result"), "skipped-hit", "{}", healed.log);
    assert!(healed.log.contains("stack: generation 1 base"), "act's server answers the newest: {}", healed.log);
}

#[needs(act)]
fn round_trip_and_reuse_across_runs_with_acts_cache_server() {
    let repo = git_repo(&[(".github/workflows/rt.yml", ROUND_TRIP), (".github/workflows/again.yml", RESTORE_ONLY)]);
    let storage = tempfile::tempdir().unwrap();
    let exe = exe();
    let run = run_act(repo.path(), &repo.path().join(".github/workflows/rt.yml"), storage.path(), &[("EXE", exe)]);
    assert!(run.success, "{}", run.log);
    assert_eq!(run.output("save", "save-result"), "saved");
    assert_eq!(run.output("restore", "reused"), "true");
    assert_eq!(run.output("restore", "miss-reason"), "none");
    assert!(run.log.contains("GitHub cache service v1"), "{}", run.log);

    let again = run_act(repo.path(), &repo.path().join(".github/workflows/again.yml"), storage.path(), &[("EXE", exe)]);
    assert!(again.success, "{}", again.log);
    assert_eq!(again.output("restore", "reused"), "true");
}

#[needs(act)]
fn acts_prefix_match_is_never_restored() {
    let repo = git_repo(&[(".github/workflows/trap.yml", PREFIX_TRAP)]);
    let storage = tempfile::tempdir().unwrap();
    let run = run_act(repo.path(), &repo.path().join(".github/workflows/trap.yml"), storage.path(), &[("EXE", exe())]);
    assert!(run.success, "{}", run.log);
    assert!(run.log.contains("planted act-trap-"), "{}", run.log);
    assert_eq!(run.output("restore", "cache-hit"), "false");
    assert_eq!(run.output("restore", "miss-reason"), "prefix-only");
}
