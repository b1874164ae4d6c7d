//! Generations that cannot strand (guarantee 11): the scenarios a hostile review found against
//! the earlier scheme, where a restore stepped through rounds of exact lookups and a save
//! numbered a new base from a file or from what it found. Now one rule says what a restore
//! reaches (the newest base, in one lookup) and one place numbers a new base (against the
//! store); each scenario runs on every store.

use exact_cache::archive::Compression;
use exact_cache::keys::{Key, cache_version, slot_names};
use exact_cache::outcome::SaveResult;

use crate::support::{NO_STATE, Peer, Step, StepResult, Store, noise, on_every_store, write};

const PREFIX: &str = "gens";

fn inputs<'a>(path: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut inputs = vec![("path", path), ("native", "none"), ("prefix", PREFIX)];
    inputs.extend_from_slice(extra);
    inputs
}

fn outputs(r: &StepResult, names: &[&str]) -> Vec<String> {
    names.iter().map(|n| r.output(n).to_owned()).collect()
}

fn generate(step: &Step, path: &str) {
    write(&step.ws.join(path).join("model.pth"), &noise(64 << 10, 7));
    write(&step.ws.join(path).join("model.expected"), b"expected\n");
}

/// The key and version of `key`'s generation-`generation` base for `path`.
fn base_of(key: &str, path: &str, generation: u32) -> (String, String) {
    let (key, version) = slot_names(&Key::from(key), &cache_version(&[path], Compression::Zstd), generation, 0);
    (key.to_string(), version.to_string())
}

/// A job of the root action: restore, regenerate unless `cache-hit`, then the post step.
fn job(step: &Step, inputs: &[(&str, &str)], path: &str) -> (StepResult, StepResult) {
    let restore = step.run(&["restore"], inputs, NO_STATE);
    assert_eq!(restore.code, 0, "{}", restore.stdout);
    if restore.output("cache-hit") != "true" {
        generate(step, path);
    }
    let save = step.run(&["save", "--post"], inputs, &restore.state);
    assert_eq!(save.code, 0, "{}", save.stdout);
    (restore, save)
}

/// The first entry of `path`, saved by a cold job; its key.
fn first_entry(step: &Step, inputs: &[(&str, &str)], path: &str) -> String {
    let (_, save) = job(step, inputs, path);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    save.output("key").to_owned()
}

fn prune(peer: &dyn Peer, args: &[&str]) -> StepResult {
    let catalog = peer.catalog_inputs();
    let mut inputs = vec![("prefix", PREFIX)];
    inputs.extend(catalog.iter().map(|(name, value)| (*name, value.as_str())));
    let r = peer.step().run(&[&["prune"], args].concat(), &inputs, NO_STATE);
    assert_eq!(r.code, 0, "{args:?}: {}", r.stdout);
    r
}

/// Scenario 1: The CLI's `restore` then `save` (and the sub-actions without `key`): the save finds the
/// restore's record by the key it computes. After a warm restore it writes a layer or nothing,
/// and `verify-reuse` runs — never a new base on every run.
fn a_save_after_a_warm_restore_writes_a_layer_or_nothing(store: Store) {
    let peer = store.start();
    let step = peer.step();
    let grow = inputs("out", &[("grow", "true"), ("verify-reuse", "warn")]);
    assert_eq!(step.run(&["restore"], &grow, NO_STATE).output("cache-hit"), "false");
    generate(&step, "out");
    assert_eq!(step.run(&["save"], &grow, NO_STATE).output("save-result"), "saved");
    for run in 0..3 {
        let restore = step.run(&["restore"], &grow, NO_STATE);
        assert_eq!(outputs(&restore, &["reused"]), ["true"], "{}", restore.stdout);
        let save = step.run(&["save"], &grow, NO_STATE);
        assert_eq!(save.output("save-result"), "skipped-hit", "run {run}: {}", save.stdout);
        assert_eq!(save.output("changed-files"), "", "verify-reuse found nothing changed: {}", save.stdout);
        assert!(!save.stdout.contains("generation"), "run {run}: {}", save.stdout);
    }
    // What the job adds goes into a layer.
    step.run(&["restore"], &grow, NO_STATE);
    write(&step.ws.join("out/new.bin"), b"new graph");
    let layer = step.run(&["save"], &grow, NO_STATE);
    assert_eq!(layer.output("save-result"), "layer", "{}", layer.stdout);
    if peer.lists_entries() {
        assert_eq!(peer.entries(), 2, "the base and one layer");
    }
}

/// Scenario 2: A restore that cannot place the entry for a reason of this disk (`io-error`: here a
/// directory where the entry has a file) never makes the save write a new generation.
fn a_restore_that_fails_on_this_disk_never_writes_a_generation(store: Store) {
    let peer = store.start();
    let grow = inputs("out", &[("grow", "true")]);
    first_entry(&peer.step(), &grow, "out");
    for _ in 0..3 {
        let step = peer.step();
        write(&step.ws.join("out/model.pth/in-the-way"), b"a directory where the entry has a file");
        let restore = step.run(&["restore"], &grow, NO_STATE);
        let save = step.run(&["save", "--post"], &grow, &restore.state);
        assert_eq!(restore.output("miss-reason"), "io-error", "{}", restore.stdout);
        assert_eq!(save.output("save-result"), "exists", "{}", save.stdout);
        assert!(!save.stdout.contains("generation"), "{}", save.stdout);
    }
    if peer.lists_entries() {
        assert_eq!(peer.entries(), 1);
    }
    // Healed into generation 1, generation 0 gone: a file in the way still saves nothing, where
    // a save that knew only generation 0 would upload a base no restore reaches, run after run.
    let key = peer.step().run(&["fingerprint"], &grow, NO_STATE).output("key").to_owned();
    let (k0, v0) = base_of(&key, "out", 0);
    peer.corrupt(&k0, &v0);
    let (_, healed) = job(&peer.step(), &grow, "out");
    assert_eq!(healed.save_result(), SaveResult::Saved, "{}", healed.stdout);
    // The replacement is generation 1's base: a restore now reuses it.
    let replaced = peer.step().run(&["restore"], &grow, NO_STATE);
    assert_eq!(replaced.reused_generation(), Some(1), "{}", replaced.stdout);
    peer.evict(&k0, &v0);
    for _ in 0..2 {
        let step = peer.step();
        write(&step.ws.join("out/model.pth/in-the-way"), b"a directory where the entry has a file");
        let restore = step.run(&["restore"], &grow, NO_STATE);
        let save = step.run(&["save", "--post"], &grow, &restore.state);
        assert_eq!(restore.output("miss-reason"), "io-error", "{}", restore.stdout);
        // `exists`, not a new generation 0 (evicted above): the save numbered from generation 1.
        assert_eq!(save.save_result(), SaveResult::Exists, "{}", save.stdout);
    }
    if peer.lists_entries() {
        assert_eq!(peer.entries(), 1, "generation 1 alone");
    }
}

/// Scenario 3: A step that writes into the restore's record (once a bare number) cannot choose the
/// generation: the save numbers a new base against the store, so the next restore reaches it,
/// and `prune` never deletes what later restores use.
fn a_record_a_step_wrote_never_numbers_a_generation(store: Store) {
    let peer = store.start();
    let pruning = inputs("out", &[("prune", "true"), ("prune-keep", "1")]);
    let key = first_entry(&peer.step(), &pruning, "out");
    let (k0, v0) = base_of(&key, "out", 0);
    peer.corrupt(&k0, &v0);
    let step = peer.step();
    let restore = step.run(&["restore"], &pruning, NO_STATE);
    assert_eq!(restore.output("miss-reason"), "corrupt", "{}", restore.stdout);
    let record = std::fs::read_dir(step.dir.path().join("runner-temp/exact-cache"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".restore.json"))
        .expect("the restore's record");
    let forged = std::fs::read_to_string(&record).unwrap().replace(r#""newest":0"#, r#""newest":5"#);
    assert!(forged.contains(r#""newest":5"#), "{forged}");
    std::fs::write(&record, forged).unwrap();
    std::fs::write(record.with_file_name(format!("{key}.replacement")), "5").unwrap();
    generate(&step, "out");
    let save = step.run(&["save", "--post"], &pruning, &restore.state);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    for _ in 0..2 {
        let (restore, save) = job(&peer.step(), &pruning, "out");
        assert_eq!(outputs(&restore, &["cache-hit", "reused"]), ["true", "true"], "{}", restore.stdout);
        assert_eq!(restore.reused_generation(), Some(1), "the replacement: {}", restore.stdout);
        assert_eq!(save.output("save-result"), "skipped-hit", "{}", save.stdout);
    }
}

/// Scenario 4: Prune never deletes what restores use, and deleting or evicting any generation a restore
/// does not use never strands the one it does: no intermediate generation is stepped through.
fn prune_and_eviction_never_strand_the_base_restores_use(store: Store) {
    let peer = store.start();
    let plain = inputs("out", &[]);
    let key = first_entry(&peer.step(), &plain, "out");
    // Two replacements: generations 1 and 2.
    for generation in 0..2 {
        let (k, v) = base_of(&key, "out", generation);
        peer.corrupt(&k, &v);
        let (restore, save) = job(&peer.step(), &plain, "out");
        assert_eq!(restore.output("miss-reason"), "corrupt", "{}", restore.stdout);
        assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    }
    // A base planted above them that cannot be used is the newest: a miss, and its replacement.
    let (k5, v5) = base_of(&key, "out", 5);
    peer.plant(&k5, &v5, b"not an archive");
    let (restore, save) = job(&peer.step(), &plain, "out");
    assert_eq!(restore.output("miss-reason"), "corrupt", "{}", restore.stdout);
    assert_eq!(restore.unusable_newest(), Some(5), "{}", restore.stdout);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);

    // Prune by count, with every generation there: it deletes what no restore reaches and keeps
    // the newest, which the next restore uses.
    if peer.lists_entries() {
        let pruned = prune(peer.as_ref(), &["--prune-keep", "1"]);
        for generation in [0, 1, 2] {
            let (k, _) = base_of(&key, "out", generation);
            assert!(
                pruned.stdout.contains(&format!("deleted {k}\n")) || pruned.stdout.contains(&format!("deleted {k} (")),
                "{generation}: {}",
                pruned.stdout
            );
        }
        assert!(!pruned.stdout.contains(".g6"), "the newest is kept: {}", pruned.stdout);
        let (restore, _) = job(&peer.step(), &plain, "out");
        assert_eq!(restore.reused_generation(), Some(6), "{}", restore.stdout);
        // Planted again, as eviction's counterpart: older generations a store still holds.
        for generation in [0, 1, 2, 5] {
            let (k, v) = base_of(&key, "out", generation);
            peer.plant(&k, &v, b"an older generation");
        }
    }
    // Generations 0, 1, 2 and 5 evicted or deleted: generation 6 is reached all the same, in one
    // lookup.
    for generation in [0, 1, 2, 5] {
        let (k, v) = base_of(&key, "out", generation);
        peer.evict(&k, &v);
    }
    let (restore, _) = job(&peer.step(), &plain, "out");
    assert_eq!(outputs(&restore, &["reused"]), ["true"], "{}", restore.stdout);
    assert_eq!(restore.reused_generation(), Some(6), "{}", restore.stdout);
}

/// Scenario 4, by age: the documented retention (`--all-refs --older-than`) deletes an old generation; the
/// newest, used today, is kept and still reached.
fn retention_by_age_never_strands_the_base_restores_use(store: Store) {
    let peer = store.start();
    let plain = inputs("out", &[]);
    let key = first_entry(&peer.step(), &plain, "out");
    let (k0, v0) = base_of(&key, "out", 0);
    peer.corrupt(&k0, &v0);
    job(&peer.step(), &plain, "out");
    peer.corrupt(&base_of(&key, "out", 1).0, &base_of(&key, "out", 1).1);
    job(&peer.step(), &plain, "out");
    let fortnight = std::time::Duration::from_secs(15 * 24 * 3600);
    peer.backdate(&key, fortnight);
    peer.backdate(&base_of(&key, "out", 1).0, fortnight);
    let pruned = prune(peer.as_ref(), &["--all-refs", "--older-than", "14d"]);
    assert_eq!(pruned.deleted().len(), 2, "{}", pruned.stdout);
    let (restore, _) = job(&peer.step(), &plain, "out");
    assert_eq!(outputs(&restore, &["reused"]), ["true"], "{}", restore.stdout);
    assert_eq!(restore.reused_generation(), Some(2), "{}", restore.stdout);
}

/// Scenario 5: Two caches whose keys are equal (their `path` lines differ, so their versions do): each
/// restore's record is its own, so one's hit never hides the other's replacement, and prune
/// keeps each one's live base.
fn two_caches_of_one_key_heal_and_prune_apart(store: Store) {
    let peer = store.start();
    let (a, b) = (inputs("a", &[]), inputs("b", &[]));
    let key = first_entry(&peer.step(), &a, "a");
    assert_eq!(first_entry(&peer.step(), &b, "b"), key, "one key, two versions");
    let (ka, va) = base_of(&key, "a", 0);
    peer.corrupt(&ka, &va);
    // One job: A cannot be used, B is a hit.
    let step = peer.step();
    let restore_a = step.run(&["restore"], &a, NO_STATE);
    let restore_b = step.run(&["restore"], &b, NO_STATE);
    assert_eq!(restore_a.output("miss-reason"), "corrupt", "{}", restore_a.stdout);
    assert_eq!(restore_b.output("reused"), "true", "{}", restore_b.stdout);
    generate(&step, "a");
    let save_b = step.run(&["save", "--post"], &b, &restore_b.state);
    let save_a = step.run(&["save", "--post"], &a, &restore_a.state);
    assert_eq!(save_b.output("save-result"), "skipped-hit", "{}", save_b.stdout);
    assert_eq!(save_a.output("save-result"), "saved", "{}", save_a.stdout);
    // A's replacement is generation 1's base; B's generation 0 stays.
    for (inputs, path, generation) in [(&a, "a", 1), (&b, "b", 0)] {
        let (restore, _) = job(&peer.step(), inputs, path);
        assert_eq!(outputs(&restore, &["reused"]), ["true"], "{path}: {}", restore.stdout);
        assert_eq!(restore.reused_generation(), Some(generation), "{path}: {}", restore.stdout);
    }
    if !peer.lists_entries() {
        return;
    }
    let pruned = prune(peer.as_ref(), &["--prune-keep", "1"]);
    assert_eq!(pruned.deleted().len(), 1, "A's unusable generation 0 alone: {}", pruned.stdout);
    for (inputs, path) in [(&a, "a"), (&b, "b")] {
        let (restore, _) = job(&peer.step(), inputs, path);
        assert_eq!(outputs(&restore, &["reused"]), ["true"], "{path}: {}", restore.stdout);
    }
}

on_every_store!(
    a_save_after_a_warm_restore_writes_a_layer_or_nothing,
    a_restore_that_fails_on_this_disk_never_writes_a_generation,
    a_record_a_step_wrote_never_numbers_a_generation,
    prune_and_eviction_never_strand_the_base_restores_use,
    two_caches_of_one_key_heal_and_prune_apart,
);
on_every_store!(where records_refs: retention_by_age_never_strands_the_base_restores_use);

/// A later generation that is newer than the highest one (here by its time on the local store,
/// as a copy of the store that did not keep times makes it; on GitHub, one of this ref's scope
/// below one of the default branch's): when it cannot be used, its replacement goes above every
/// generation that exists, never into `exists` run after run.
#[test]
fn a_replacement_goes_above_generations_this_runs_lookup_does_not_reach() {
    let peer = Store::Local.start();
    let plain = inputs("out", &[]);
    let key = first_entry(&peer.step(), &plain, "out");
    for generation in 0..2 {
        let (k, v) = base_of(&key, "out", generation);
        peer.corrupt(&k, &v);
        job(&peer.step(), &plain, "out");
    }
    // Generation 1 (corrupt) newer than generation 2.
    let hour = std::time::Duration::from_secs(3600);
    peer.backdate(&key, hour);
    peer.backdate(&base_of(&key, "out", 2).0, hour);
    let (restore, save) = job(&peer.step(), &plain, "out");
    assert_eq!(restore.unusable_newest(), Some(1), "generation 1 is the newest: {}", restore.stdout);
    assert_eq!(restore.output("miss-reason"), "corrupt", "{}", restore.stdout);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    assert!(
        save.stdout.contains(
            "generation 2 base exists where this run's lookup does not reach it; saving generation 3 base instead"
        ),
        "{}",
        save.stdout
    );
    let (restore, _) = job(&peer.step(), &plain, "out");
    assert_eq!(restore.reused_generation(), Some(3), "{}", restore.stdout);
}

/// Files under the later generations' prefix that are no generation of ours (a copy, a name
/// with a space) are never taken for the newest base.
#[test]
fn names_that_are_no_generation_are_never_the_newest_base() {
    let peer = Store::Local.start();
    let plain = inputs("out", &[]);
    let key = first_entry(&peer.step(), &plain, "out");
    let (_, version) = base_of(&key, "out", 0);
    for stray in ["gold", "1 copy", "01", "1.bak"] {
        peer.plant(&format!("{key}.g{stray}"), &version, b"stray");
    }
    let (restore, save) = job(&peer.step(), &plain, "out");
    assert_eq!(outputs(&restore, &["reused", "miss-reason"]), ["true", "none"], "{}", restore.stdout);
    assert_eq!(save.output("save-result"), "skipped-hit", "{}", save.stdout);
}

/// A restore's record names the store it asked: a save to another store ignores it (and saves
/// there), rather than taking the other store's hit for its own.
#[test]
fn a_restore_record_of_another_store_is_not_used() {
    let (one, other) = (Store::Local.start(), Store::Local.start());
    let plain = inputs("out", &[]);
    first_entry(&one.step(), &plain, "out");
    let mut step = one.step();
    let restore = step.run(&["restore"], &plain, NO_STATE);
    assert_eq!(restore.output("reused"), "true", "{}", restore.stdout);
    step.extra_env.retain(|(name, _)| name != "EXACT_CACHE_DIR");
    step.extra_env.extend(other.env());
    let save = step.run(&["save"], &plain, NO_STATE);
    assert_eq!(save.save_result(), SaveResult::Saved, "{}", save.stdout);
    // The log says the restore's record is of another store and is not used.
    let mut settings = crate::support::redactions(step.dir.path());
    for (_, dir) in other.env() {
        settings.add_filter(&crate::support::regex_escape(&dir), "[OTHER]");
    }
    settings.bind(|| insta::assert_snapshot!("a_restore_record_of_another_store", save.brief()));
}

/// Without replacements, a restore costs one lookup on GitHub's service (the newest base and
/// generation 0 in one call), with or without `grow`'s layers after it.
#[test]
fn a_restore_of_a_key_without_replacements_is_one_lookup_call() {
    use crate::support::services::{Op, Services};
    let services = Services::start();
    let step = Step::against(services.v2_env());
    let plain = inputs("out", &[]);
    generate(&step, "out");
    assert_eq!(step.run(&["save"], &plain, NO_STATE).output("save-result"), "saved");
    let before = services.faults.calls(Op::Lookup);
    let restore = step.run(&["restore"], &plain, NO_STATE);
    assert_eq!(restore.output("reused"), "true", "{}", restore.stdout);
    assert_eq!(services.faults.calls(Op::Lookup) - before, 1, "one GetCacheEntryDownloadURL");
}
