//! `list` and `prune` across refs and over time: every store that records the ref a save ran on
//! itself (the local store, S3, Azure Blob; GitHub's service records its own, which
//! `explain_prune` covers) keeps prune's per-ref rule, and shows every ref without one;
//! `--ref`, `--all-refs`, `--older-than` and `--preset`; what the command line prints.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::support::{NO_STATE, Peer, Step, StepResult, Store, assert_shown, on_every_store, write};
use exact_cache::outcome::{MissReason, Output, SaveResult};

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
    assert_eq!(r.save_result(), SaveResult::Saved, "{}", r.stdout);
    (r.key().to_string(), r)
}

/// Stores keep creation times in whole seconds: saves to be told apart are planted apart.
const APART: Duration = Duration::from_secs(10);

fn lines(r: &StepResult, output: Output) -> Vec<String> {
    r.output_lines(output).into_iter().map(str::to_owned).collect()
}

/// The `ref` column of what `list` logged.
fn refs(r: &StepResult) -> Vec<String> {
    r.listed().into_iter().map(|row| row["ref"].clone()).collect()
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
    // The save's prune deletes `f1` (the later prune finds nothing to delete, `list` no `f1`).
    let (newest, _) = save(&feature, "f2", &[("prune", "true"), ("prune-keep", "1")]);
    let again = run(&feature, &["prune"]);
    assert_eq!(lines(&again, Output::Deleted), Vec::<String>::new());

    let own = run(&feature, &["list"]);
    assert_eq!(lines(&own, Output::Keys), [newest.as_str()]);
    let every = run(&feature, &["list", "--all-refs"]);
    assert_eq!(lines(&every, Output::Keys), [newest, mains], "newest first");
    assert_eq!(refs(&every), [FEATURE, MAIN], "each entry's ref: {}", every.stdout);
    assert!(main.run(&["restore"], &inputs("main", &[]), NO_STATE).reused());
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
    assert_eq!(lines(&listed, Output::Keys), [f2.clone(), f1.clone(), m1.clone()]);
    assert_eq!(refs(&listed), [FEATURE, FEATURE, MAIN], "every ref's: {}", listed.stdout);
    let on_main = run(&workstation, &["list", "--ref", MAIN]);
    assert_eq!(lines(&on_main, Output::Keys), [m1.as_str()]);
    assert_eq!(refs(&on_main), [MAIN]);

    // Each ref keeps its newest.
    let dry = run(&workstation, &["prune", "--dry-run"]);
    assert_eq!(lines(&dry, Output::WouldDelete), [f1.as_str()]);
    assert!(!dry.outputs.contains_key("deleted"), "a dry run deletes nothing: {:?}", dry.outputs);
    assert_eq!(lines(&run(&workstation, &["prune", "--ref", MAIN]), Output::Deleted), Vec::<String>::new());
    // Asked: every ref's as one.
    let all = run(&workstation, &["prune", "--all-refs"]);
    assert_eq!(lines(&all, Output::Deleted), [f1, m1]);
    assert_eq!(lines(&run(&workstation, &["list"]), Output::Keys), [f2]);
    assert_eq!(peer.entries(), 1);
}

fn older_than_deletes_what_was_created_before(store: Store) {
    let peer = store.start();
    let step = on_ref(&*peer, Some(MAIN));
    let (old, _) = save(&step, "old", &[]);
    peer.backdate(&old, Duration::from_secs(3600));
    let (new, _) = save(&step, "new", &[]);
    let dry = run(&step, &["prune", "--older-than=30m", "--dry-run"]);
    assert_eq!(lines(&dry, Output::WouldDelete), [old.as_str()]);
    let pruned = run(&step, &["prune", "--older-than=30m"]);
    assert_eq!(lines(&pruned, Output::Deleted), [old], "the newest of its ref or not");
    assert_eq!(lines(&run(&step, &["list"]), Output::Keys), [new]);
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
    assert_eq!(first.save_result(), SaveResult::Saved, "{}", first.stdout);
    peer.backdate(&first.key(), APART);
    write(&main.ws.join("gen.py"), b"v2");
    let missed = main.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(missed.miss_reason(), MissReason::NotFound, "{}", missed.stdout);
    // The miss is explained: the entry compared with, and `gen.py` changed.
    let why = missed.group("Why this is a miss").replace(first.key().as_str(), "[FIRST]");
    assert_shown!(main.dir.path(), "explain_names_what_changed", why);
    let (second, _) = save(&main, "gen", &[("hash-files", "gen.py")]);
    assert_eq!(lines(&run(&main, &["list"]), Output::Keys).len(), 2);
    for (r#ref, generator) in [(Some("refs/pull/7/merge"), b"pr".as_slice()), (None, b"local")] {
        let saved = job(r#ref, generator).run(&["save"], &inputs, NO_STATE);
        assert_eq!(saved.save_result(), SaveResult::Saved, "{ref:?}: {}", saved.stdout);
    }

    let dry = run(&main, &["prune", "--dry-run", "--prune-keep=1"]);
    assert_eq!(lines(&dry, Output::WouldDelete), [first.key().to_string()], "{}", dry.stdout);
    let pruned = run(&main, &["prune", "--prune-keep=1"]);
    assert_eq!(lines(&pruned, Output::Deleted), [first.key().to_string()], "{}", pruned.stdout);
    assert_eq!(peer.entries(), 3, "the newest on main, the pull request's and the one without a ref");
    assert_eq!(lines(&run(&main, &["list"]), Output::Keys), [second]);
    assert!(main.run(&["restore"], &inputs, NO_STATE).reused());
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
    assert_eq!(lines(&listed, Output::Keys).len(), 3, "every entry carries its ref: {}", listed.stdout);
    // The local store shows each entry's ref and last use.
    assert_eq!(refs(&listed), [MAIN; 3]);
    assert!(listed.listed().iter().all(|row| row["used"].ends_with('Z')), "{}", listed.stdout);

    let ten_days_ago = SystemTime::now() - Duration::from_secs(10 * 86_400);
    for key in [&unused, &used] {
        backdate(&step.cache, "entries", key, ten_days_ago);
        backdate(&step.cache, "meta", key, ten_days_ago);
    }
    // A restore records its use; reading a fingerprint to explain a miss does not.
    assert!(step.run(&["restore"], &inputs("used", &[]), NO_STATE).reused());
    let missed = step.run(&["restore"], &inputs("other", &[]), NO_STATE);
    assert_eq!(missed.miss_reason(), MissReason::NotFound);
    let pruned = run(&step, &["prune", "--older-than=7d"]);
    assert_eq!(lines(&pruned, Output::Deleted), [unused.as_str()], "{}", pruned.stdout);

    // An entry saved before the store recorded refs: on no particular ref, so only a prune of
    // every ref touches it.
    for file in std::fs::read_dir(step.cache.join("meta")).unwrap() {
        let path = file.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with(&format!("{used}@")) {
            std::fs::remove_file(path).unwrap();
        }
    }
    backdate(&step.cache, "entries", &used, ten_days_ago);
    assert_eq!(lines(&run(&step, &["list"]), Output::Keys), [recent.as_str()], "not on `{MAIN}`");
    assert_eq!(lines(&run(&step, &["prune", "--older-than=7d"]), Output::Deleted), Vec::<String>::new());
    let every = run(&step, &["list", "--all-refs"]);
    assert_eq!(lines(&every, Output::Keys), [recent, used.clone()]);
    assert_eq!(lines(&run(&step, &["prune", "--older-than=7d", "--all-refs"]), Output::Deleted), [used]);
}

#[test]
fn list_names_a_stacks_slots_without_the_path_lines_and_takes_a_preset() {
    let step = Step::new();
    let grow = [("path", "out"), ("native", "none"), ("prefix", "stack"), ("grow", "true")];
    write(&step.ws.join("out/a"), &[b'a'; 1000]);
    assert_eq!(step.run(&["save"], &grow, NO_STATE).save_result(), SaveResult::Saved);
    let warm = step.run(&["restore"], &grow, NO_STATE);
    assert!(warm.reused(), "{}", warm.stdout);
    write(&step.ws.join("out/b"), b"b");
    let layer = step.run(&["save", "--post"], &grow, &warm.state);
    assert_eq!(layer.save_result(), SaveResult::Layer, "{}", layer.stdout);

    let listed = step.run(&["list"], &[("prefix", "stack")], NO_STATE);
    let slots: Vec<String> = listed.listed().into_iter().map(|row| row["slot"].clone()).collect();
    assert_eq!(slots, ["layer 1", "base"], "{}", listed.stdout);

    let list = step.run(&["list", "--preset=torch-inductor"], &[("prefix", "stack")], NO_STATE);
    assert_eq!((list.code, list.output_lines(Output::Keys).len()), (0, 2), "{}", list.stdout);
    // A dry run of prune lists both too (and would delete neither: they are the newest key's).
    let prune = step.run(&["prune", "--preset=torch-inductor", "--dry-run"], &[("prefix", "stack")], NO_STATE);
    assert_eq!((prune.code, prune.deleted()), (0, vec![]), "{}", prune.stdout);
    assert_shown!(step.dir.path(), "prune_takes_a_preset", &prune.stdout);
}

/// What the command line prints on stdout: one `name=item` line per item of a list output, what
/// a dry run would delete under its own name; and an error's first line names what is missing.
#[test]
fn the_command_line_prints_one_line_per_item_and_names_what_is_missing() {
    let step = Step::new();
    write(&step.ws.join("out/a"), b"a");
    let cli_inputs = |v| [("path", "out"), ("native", "none"), ("prefix", "cli"), ("variant", v)];
    let (k1, k2) = (step.run(&["save"], &cli_inputs("1"), NO_STATE), step.run(&["save"], &cli_inputs("2"), NO_STATE));
    let list = step.cli(&["list", "--prefix=cli", "--long"]);
    assert!(list.success(), "{list:?}");
    let keys: Vec<String> =
        crate::support::list_table(&list.stdout).into_iter().map(|row| row["key"].clone()).collect();
    assert_eq!(keys, [k2.key().to_string(), k1.key().to_string()], "{list:?}");
    let dry = step.cli(&["prune", "--prefix=cli", "--dry-run"]);
    assert!(dry.success(), "{dry:?}");
    assert_eq!(dry.stdout, format!("would-delete={}\n", k1.key()));
    let none = step.cli(&["prune", "--prefix=cli", "--prune-keep=5"]);
    assert_eq!(none.stdout, "deleted=\n", "an empty list");

    let missing = step.cli(&["fingerprint", "--path=out", "--native=none", "--python=/nonexistent/python3"]);
    assert!(!missing.success(), "{missing:?}");
    // The error's first line names the interpreter that is missing.
    assert_shown!(step.dir.path(), "the_command_line_names_what_is_missing", missing.said());
}
