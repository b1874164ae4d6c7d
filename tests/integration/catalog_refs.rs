//! `list` and `prune` across refs and over time: every store that records the ref a save ran on
//! itself (the local store, S3, Azure Blob; GitHub's service records its own, which
//! `explain_prune` covers) keeps prune's per-ref rule, and shows every ref without one;
//! `--ref`, `--all-refs`, `--older-than` and `--preset`; what the command line prints.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::support::{NO_STATE, Peer, Step, StepResult, Store, on_every_store, write};

const PREFIX: &str = "refs";
const MAIN: &str = "refs/heads/main";
const FEATURE: &str = "refs/heads/feature";

on_every_store!(where records_refs:
    prune_on_a_feature_branch_never_deletes_mains_entry,
    without_a_ref_list_and_prune_see_every_ref,
    older_than_deletes_what_was_created_before,
    explain_names_what_changed_and_prune_keeps_the_newest_of_each_ref,
);

/// A step of `peer` on `r#ref` (`None`: no ref, as on a workstation), with a file to save.
fn on_ref(peer: &dyn Peer, r#ref: Option<&str>) -> Step {
    let mut step = peer.step();
    step.extra_env.retain(|(name, _)| name != "GITHUB_REF");
    if let Some(r) = r#ref {
        step.set_env("GITHUB_REF", r);
    }
    write(&step.ws.join("out/a"), b"a");
    step
}

fn inputs<'a>(variant: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut inputs = vec![("path", "out"), ("native", "none"), ("prefix", PREFIX), ("variant", variant)];
    inputs.extend_from_slice(extra);
    inputs
}

/// Save the entry of `variant`; its key.
fn save(step: &Step, variant: &str, extra: &[(&str, &str)]) -> (String, StepResult) {
    let r = step.run(&["save"], &inputs(variant, extra), NO_STATE);
    assert_eq!(r.output("save-result"), "saved", "{}", r.stdout);
    (r.output("key").to_owned(), r)
}

/// Stores keep creation times in whole seconds: saves to be told apart are planted apart.
const APART: Duration = Duration::from_secs(10);

fn lines(r: &StepResult, output: &str) -> Vec<String> {
    r.output(output).lines().map(str::to_owned).collect()
}

fn run(step: &Step, args: &[&str]) -> StepResult {
    let r = step.run(args, &[("prefix", PREFIX)], NO_STATE);
    assert_eq!(r.code, 0, "{args:?}: {}", r.stdout);
    r
}

fn prune_on_a_feature_branch_never_deletes_mains_entry(store: Store) {
    let peer = store.start();
    let main = on_ref(&*peer, Some(MAIN));
    let (mains, _) = save(&main, "main", &[]);
    peer.backdate(&mains, 2 * APART);
    let feature = on_ref(&*peer, Some(FEATURE));
    let (f1, _) = save(&feature, "f1", &[]);
    peer.backdate(&f1, APART);
    let (newest, saved) = save(&feature, "f2", &[("prune", "true"), ("prune-keep", "1")]);
    let line = format!("prune: kept the newest 1, deleted 1 older entry of `{PREFIX}` on `{FEATURE}`");
    assert!(saved.stdout.contains(&line), "{}", saved.stdout);
    let again = run(&feature, &["prune"]);
    assert!(again.stdout.contains(&format!("1 entry of `{PREFIX}` on `{FEATURE}` in")), "{}", again.stdout);
    assert!(again.stdout.contains("kept the newest 1 key (1 entry), deleted 0"), "{}", again.stdout);

    let own = run(&feature, &["list"]);
    assert_eq!(lines(&own, "keys"), [newest.as_str()]);
    let every = run(&feature, &["list", "--all-refs"]);
    assert_eq!(lines(&every, "keys"), [newest, mains], "newest first");
    assert!(every.stdout.contains(MAIN) && every.stdout.contains(FEATURE), "each entry's ref: {}", every.stdout);
    assert_eq!(main.run(&["restore"], &inputs("main", &[]), NO_STATE).output("reused"), "true");
}

fn without_a_ref_list_and_prune_see_every_ref(store: Store) {
    let peer = store.start();
    let (m1, _) = save(&on_ref(&*peer, Some(MAIN)), "m1", &[]);
    peer.backdate(&m1, 2 * APART);
    let feature = on_ref(&*peer, Some(FEATURE));
    let (f1, _) = save(&feature, "f1", &[]);
    peer.backdate(&f1, APART);
    let (f2, _) = save(&feature, "f2", &[]);

    let workstation = on_ref(&*peer, None);
    let listed = run(&workstation, &["list"]);
    assert_eq!(lines(&listed, "keys"), [f2.clone(), f1.clone(), m1.clone()]);
    assert!(listed.stdout.contains(&format!("3 entries of `{PREFIX}` on every ref in")), "{}", listed.stdout);
    let on_main = run(&workstation, &["list", "--ref", MAIN]);
    assert_eq!(lines(&on_main, "keys"), [m1.as_str()]);
    assert!(on_main.stdout.contains(&format!("1 entry of `{PREFIX}` on `{MAIN}` in")), "{}", on_main.stdout);

    // Each ref keeps its newest.
    let dry = run(&workstation, &["prune", "--dry-run"]);
    assert_eq!(lines(&dry, "would-delete"), [f1.as_str()]);
    assert!(!dry.outputs.contains_key("deleted"), "a dry run deletes nothing: {:?}", dry.outputs);
    let kept = "kept the newest 2 keys (2 entries; the newest 1 of each of 2 refs), would delete 1";
    assert!(dry.stdout.contains(kept), "{}", dry.stdout);
    assert_eq!(lines(&run(&workstation, &["prune", "--ref", MAIN]), "deleted"), Vec::<String>::new());
    // Asked: every ref's as one.
    let all = run(&workstation, &["prune", "--all-refs"]);
    assert_eq!(lines(&all, "deleted"), [f1, m1]);
    assert!(all.stdout.contains(&format!("3 entries of `{PREFIX}` on all refs, as one in")), "{}", all.stdout);
    assert_eq!(lines(&run(&workstation, &["list"]), "keys"), [f2]);
    assert_eq!(peer.entries(), 1);
}

fn older_than_deletes_what_was_created_before(store: Store) {
    let peer = store.start();
    let step = on_ref(&*peer, Some(MAIN));
    let (old, _) = save(&step, "old", &[]);
    peer.backdate(&old, Duration::from_secs(3600));
    let (new, _) = save(&step, "new", &[]);
    let dry = run(&step, &["prune", "--older-than=30m", "--dry-run"]);
    assert_eq!(lines(&dry, "would-delete"), [old.as_str()]);
    let pruned = run(&step, &["prune", "--older-than=30m"]);
    assert_eq!(lines(&pruned, "deleted"), [old], "the newest of its ref or not");
    assert!(pruned.stdout.contains("kept 1 entry created or used within 30m, deleted 1"), "{}", pruned.stdout);
    assert_eq!(lines(&run(&step, &["list"]), "keys"), [new]);
}

/// A changed generator: the miss names it, and `prune` keeps the newest entry of this ref and
/// every entry of other refs, or of none (saved outside Actions).
fn explain_names_what_changed_and_prune_keeps_the_newest_of_each_ref(store: Store) {
    let peer = store.start();
    let job = |r#ref: Option<&str>, generator: &[u8]| {
        let step = on_ref(&*peer, r#ref);
        write(&step.ws.join("gen.py"), generator);
        step
    };
    let inputs = inputs("gen", &[("hash-files", "gen.py")]);
    let main = job(Some(MAIN), b"v1");
    let first = main.run(&["save"], &inputs, NO_STATE);
    assert_eq!(first.output("save-result"), "saved", "{}", first.stdout);
    peer.backdate(first.output("key"), APART);
    write(&main.ws.join("gen.py"), b"v2");
    let missed = main.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(missed.output("miss-reason"), "not-found", "{}", missed.stdout);
    assert!(missed.stdout.contains("files: gen.py changed"), "the miss is explained: {}", missed.stdout);
    let (second, _) = save(&main, "gen", &[("hash-files", "gen.py")]);
    assert!(run(&main, &["list"]).stdout.contains(&format!("2 entries of `{PREFIX}` on `{MAIN}`")));
    for (r#ref, generator) in [(Some("refs/pull/7/merge"), b"pr".as_slice()), (None, b"local")] {
        let saved = job(r#ref, generator).run(&["save"], &inputs, NO_STATE);
        assert_eq!(saved.output("save-result"), "saved", "{ref:?}: {}", saved.stdout);
    }

    let dry = run(&main, &["prune", "--dry-run", "--prune-keep=1"]);
    assert_eq!(lines(&dry, "would-delete"), [first.output("key")], "{}", dry.stdout);
    let pruned = run(&main, &["prune", "--prune-keep=1"]);
    assert!(pruned.stdout.contains("kept the newest 1 key (1 entry), deleted 1"), "{}", pruned.stdout);
    assert_eq!(peer.entries(), 3, "the newest on main, the pull request's and the one without a ref");
    assert_eq!(lines(&run(&main, &["list"]), "keys"), [second]);
    assert_eq!(main.run(&["restore"], &inputs, NO_STATE).output("reused"), "true");
}

/// Set the modification time of every file of the local store's `dir` (`entries`, `meta`) that
/// belongs to `key`.
fn backdate(cache: &Path, dir: &str, key: &str, to: SystemTime) {
    for file in std::fs::read_dir(cache.join(dir)).unwrap() {
        let path = file.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with(&format!("{key}@")) {
            std::fs::File::options().write(true).open(&path).unwrap().set_modified(to).unwrap();
        }
    }
}

#[test]
fn the_local_store_records_refs_and_uses_and_older_than_counts_from_the_last_use() {
    let mut step = Step::new();
    step.set_env("GITHUB_REF", MAIN);
    write(&step.ws.join("out/a"), b"a");
    let (unused, _) = save(&step, "unused", &[]);
    let (used, _) = save(&step, "used", &[]);
    let (recent, _) = save(&step, "recent", &[]);
    let listed = run(&step, &["list"]);
    assert_eq!(lines(&listed, "keys").len(), 3, "every entry carries its ref: {}", listed.stdout);
    let header = listed.stdout.lines().find(|l| l.trim_start().starts_with("key ")).unwrap();
    assert!(header.contains(" used ") && header.contains(" ref "), "{header}");

    let ten_days_ago = SystemTime::now() - Duration::from_secs(10 * 86_400);
    for key in [&unused, &used] {
        backdate(&step.cache, "entries", key, ten_days_ago);
        backdate(&step.cache, "meta", key, ten_days_ago);
    }
    // A restore records its use; reading a fingerprint to explain a miss does not.
    assert_eq!(step.run(&["restore"], &inputs("used", &[]), NO_STATE).output("reused"), "true");
    let missed = step.run(&["restore"], &inputs("other", &[]), NO_STATE);
    assert_eq!(missed.output("miss-reason"), "not-found");
    let pruned = run(&step, &["prune", "--older-than=7d"]);
    assert_eq!(lines(&pruned, "deleted"), [unused.as_str()], "{}", pruned.stdout);
    assert!(pruned.stdout.contains("kept 2 entries created or used within 7d, deleted 1"), "{}", pruned.stdout);

    // An entry saved before the store recorded refs: on no particular ref, so only a prune of
    // every ref touches it.
    for file in std::fs::read_dir(step.cache.join("meta")).unwrap() {
        let path = file.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with(&format!("{used}@")) {
            std::fs::remove_file(path).unwrap();
        }
    }
    backdate(&step.cache, "entries", &used, ten_days_ago);
    assert_eq!(lines(&run(&step, &["list"]), "keys"), [recent.as_str()], "not on `{MAIN}`");
    assert_eq!(lines(&run(&step, &["prune", "--older-than=7d"]), "deleted"), Vec::<String>::new());
    let every = run(&step, &["list", "--all-refs"]);
    assert_eq!(lines(&every, "keys"), [recent, used.clone()]);
    assert_eq!(lines(&run(&step, &["prune", "--older-than=7d", "--all-refs"]), "deleted"), [used]);
}

#[test]
fn list_names_a_stacks_slots_without_the_path_lines_and_takes_a_preset() {
    let step = Step::new();
    let grow = [("path", "out"), ("native", "none"), ("prefix", "stack"), ("grow", "true")];
    write(&step.ws.join("out/a"), &[b'a'; 1000]);
    assert_eq!(step.run(&["save"], &grow, NO_STATE).output("save-result"), "saved");
    let warm = step.run(&["restore"], &grow, NO_STATE);
    assert_eq!(warm.output("reused"), "true", "{}", warm.stdout);
    write(&step.ws.join("out/b"), b"b");
    let layer = step.run(&["save", "--post"], &grow, &warm.state);
    assert_eq!(layer.output("save-result"), "layer", "{}", layer.stdout);

    let listed = step.run(&["list"], &[("prefix", "stack")], NO_STATE);
    let rows: Vec<&str> = listed.stdout.lines().filter(|l| l.trim_start().starts_with("stack-")).collect();
    assert_eq!(rows.len(), 2, "{}", listed.stdout);
    assert!(rows[0].ends_with("  layer 1") && rows[1].ends_with("  base"), "{rows:?}");

    for args in [&["list", "--preset=torch-inductor"][..], &["prune", "--preset=torch-inductor", "--dry-run"]] {
        let r = step.run(args, &[("prefix", "stack")], NO_STATE);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stdout);
        assert!(r.stdout.contains("2 entries of `stack`"), "{}", r.stdout);
    }
}

/// What the command line prints on stdout: one `name=item` line per item of a list output, what
/// a dry run would delete under its own name; and an error's first line names what is missing.
#[test]
fn the_command_line_prints_one_line_per_item_and_names_what_is_missing() {
    let step = Step::new();
    write(&step.ws.join("out/a"), b"a");
    let cli_inputs = |v| [("path", "out"), ("native", "none"), ("prefix", "cli"), ("variant", v)];
    let (k1, k2) = (step.run(&["save"], &cli_inputs("1"), NO_STATE), step.run(&["save"], &cli_inputs("2"), NO_STATE));
    let cli = |args: &[&str]| {
        let out = step.cli(args);
        (out.status.success(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    };
    let (ok, stdout, _) = cli(&["list", "--prefix=cli", "--long"]);
    assert!(ok);
    let keys: Vec<&str> = stdout.lines().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(keys, [k2.output("key"), k1.output("key")], "{stdout}");
    let (ok, stdout, stderr) = cli(&["prune", "--prefix=cli", "--dry-run"]);
    assert!(ok && stderr.contains(&format!("would delete {}", k1.output("key"))), "{stderr}");
    assert_eq!(stdout, format!("would-delete={}\n", k1.output("key")));
    let (_, stdout, _) = cli(&["prune", "--prefix=cli", "--prune-keep=5"]);
    assert_eq!(stdout, "deleted=\n", "an empty list");

    let (ok, _, stderr) = cli(&["fingerprint", "--path=out", "--native=none", "--python=/nonexistent/python3"]);
    let first = stderr.lines().find(|l| l.starts_with("error:")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(!ok && first.contains("`/nonexistent/python3` not found"), "{stderr}");
}
