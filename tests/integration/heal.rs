//! Entries that heal: an entry found under our exact key that cannot be used (tampered,
//! incomplete, not matching its manifest) never blocks its key. The job regenerates, its save
//! writes a replacement one generation above, and the next job is an exact hit again — on every
//! store of the matrix (act's own server: `act_cache_server`). A healthy entry is never replaced,
//! and `cache-hit` is `true` only when the files are in place.

use exact_cache::archive::Compression;
use exact_cache::keys::{Key, cache_version, slot_names};
use std::collections::BTreeMap;

use crate::support::{NO_STATE, Peer, Step, StepResult, Store, noise, on_every_store, snapshot, write};

const INPUTS: [(&str, &str); 3] = [("path", "out"), ("native", "none"), ("prefix", "heal")];

/// One job: restore; regenerate unless `cache-hit` says the files are in place (as a workflow
/// guarded by `if: steps.cache.outputs.cache-hit != 'true'` does); then the post step.
struct Job {
    restore: StepResult,
    /// Whether the generator ran.
    regenerated: bool,
    save: StepResult,
    files: BTreeMap<String, String>,
}

fn generate(step: &Step) {
    write(&step.ws.join("out/model.pth"), &noise(1 << 20, 3));
    write(&step.ws.join("out/sub/model.expected"), b"expected output\n");
}

fn job(peer: &dyn Peer, inputs: &[(&str, &str)]) -> Job {
    let step = peer.step();
    let restore = step.run(&["restore"], inputs, NO_STATE);
    assert_eq!(restore.code, 0, "{}", restore.stdout);
    let regenerated = restore.output("cache-hit") != "true";
    if regenerated {
        generate(&step);
    }
    let save = step.run(&["save", "--post"], inputs, &restore.state);
    assert_eq!(save.code, 0, "{}", save.stdout);
    let files = snapshot(&step.ws.join("out"));
    Job { restore, regenerated, save, files }
}

fn outputs(r: &StepResult, names: &[&str]) -> Vec<String> {
    names.iter().map(|n| r.output(n).to_owned()).collect()
}

/// The first entry, saved by a cold job.
fn first_entry(peer: &dyn Peer) -> (String, BTreeMap<String, String>) {
    let cold = job(peer, &INPUTS);
    assert_eq!(outputs(&cold.save, &["save-result"]), ["saved"], "{}", cold.save.stdout);
    (cold.save.output("key").to_owned(), cold.files)
}

/// The key and version of `key`'s generation-`generation` base.
fn base_of(key: &str, generation: u32) -> (String, String) {
    let (key, version) = slot_names(&Key::from(key), &cache_version(&["out"], Compression::Zstd), generation, 0);
    (key.to_string(), version.to_string())
}

/// Flip bytes of `key`'s generation-`generation` base.
fn corrupt_base(peer: &dyn Peer, key: &str, generation: u32) {
    let (key, version) = base_of(key, generation);
    peer.corrupt(&key, &version);
}

/// Tamper with the entry; the next job regenerates and saves the replacement; the one after it
/// is an exact hit on the replacement.
fn a_tampered_entry_is_replaced_and_the_next_job_hits(store: Store) {
    let peer = store.start();
    let (key, files) = first_entry(peer.as_ref());
    corrupt_base(peer.as_ref(), &key, 0);

    let refused = job(peer.as_ref(), &INPUTS);
    let r = &refused.restore;
    assert_eq!(outputs(r, &["cache-hit", "reused", "entry-exists"]), ["false", "false", "true"], "{}", r.stdout);
    assert!(matches!(r.output("miss-reason"), "corrupt" | "manifest-mismatch"), "{}", r.stdout);
    assert!(refused.regenerated, "`cache-hit` is false, so the guarded generator runs");
    assert_eq!(r.unusable_newest(), Some(0), "{}", r.stdout);
    assert_eq!(refused.save.output("save-result"), "saved", "{}", refused.save.stdout);

    let healed = job(peer.as_ref(), &INPUTS);
    let r = &healed.restore;
    let hit = outputs(r, &["cache-hit", "reused", "entry-exists", "miss-reason"]);
    assert_eq!(hit, ["true", "true", "true", "none"], "{}", r.stdout);
    assert_eq!(r.reused_generation(), Some(1), "the replacement: {}", r.stdout);
    assert!(!healed.regenerated);
    assert_eq!(healed.files, files, "the replacement holds what the generator made");
    assert_eq!(healed.save.output("save-result"), "skipped-hit", "a healthy entry is never replaced");

    // Each later job stays an exact hit, and the store holds the bad entry and one replacement.
    let again = job(peer.as_ref(), &INPUTS);
    assert_eq!(outputs(&again.restore, &["reused"]), ["true"], "{}", again.restore.stdout);
    if peer.lists_entries() {
        assert_eq!(peer.entries(), 2, "generation 0 (tampered) and its replacement");
    }
}

/// A healthy entry is never replaced: a job that reused it saves nothing, and one that could not
/// place it for reasons of its own (not the entry's) does not write a replacement either.
fn a_healthy_entry_is_never_replaced(store: Store) {
    let peer = store.start();
    let (key, _) = first_entry(peer.as_ref());
    let warm = job(peer.as_ref(), &INPUTS);
    assert_eq!(outputs(&warm.restore, &["cache-hit", "reused"]), ["true", "true"]);
    assert_eq!(warm.save.output("save-result"), "skipped-hit");
    // A save without a restore in the job (another workflow's `save`) finds the entry there.
    let step = peer.step();
    generate(&step);
    let saved = step.run(&["save"], &INPUTS, NO_STATE);
    assert_eq!((saved.output("save-result"), saved.output("key")), ("exists", key.as_str()), "{}", saved.stdout);
    if peer.lists_entries() {
        assert_eq!(peer.entries(), 1);
    }
}

on_every_store!(a_tampered_entry_is_replaced_and_the_next_job_hits, a_healthy_entry_is_never_replaced);

/// `required` is not part of the key: adding a required path that the old entry lacks made
/// every run `incomplete`. Now the first such run saves a replacement that holds it.
#[test]
fn an_entry_that_lacks_a_newly_required_path_is_replaced() {
    let peer = Store::Local.start();
    let (_, _) = first_entry(peer.as_ref());
    let mut inputs = INPUTS.to_vec();
    inputs.push(("required", "out/sub/model.expected\nout/index.json"));
    let step = peer.step();
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(outputs(&restore, &["cache-hit", "miss-reason"]), ["false", "incomplete"], "{}", restore.stdout);
    generate(&step);
    write(&step.ws.join("out/index.json"), b"{}");
    let save = step.run(&["save", "--post"], &inputs, &restore.state);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);

    let next = job(peer.as_ref(), &inputs);
    assert_eq!(outputs(&next.restore, &["cache-hit", "reused", "miss-reason"]), ["true", "true", "none"]);
    assert!(next.files.contains_key("index.json"), "{:?}", next.files.keys());
}

/// The `save` entry point after a `restore` in the same job (no post step) writes the
/// replacement too, and a later restore that succeeds forgets the request.
#[test]
fn the_save_entry_point_writes_the_replacement_the_restore_asked_for() {
    let peer = Store::Local.start();
    let (key, files) = first_entry(peer.as_ref());
    corrupt_base(peer.as_ref(), &key, 0);
    let step = peer.step();
    let restore = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!(restore.output("cache-hit"), "false", "{}", restore.stdout);
    generate(&step);
    let save = step.run(&["save"], &[INPUTS.as_slice(), &[("key", key.as_str())]].concat(), NO_STATE);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);

    // The same runner's next restore reuses the replacement; its save, without `key`, finds the
    // restore's record by the key it computes and writes nothing.
    let restore = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!(outputs(&restore, &["cache-hit", "reused"]), ["true", "true"], "{}", restore.stdout);
    assert_eq!(restore.reused_generation(), Some(1), "the replacement: {}", restore.stdout);
    assert_eq!(snapshot(&step.ws.join("out")), files);
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    generate(&step);
    let after_hit = step.run(&["save"], &INPUTS, NO_STATE);
    assert_eq!(after_hit.output("save-result"), "skipped-hit", "{}", after_hit.stdout);
}

/// `lookup-only` reports `cache-hit=true` when an entry exists, without downloading it.
#[test]
fn lookup_only_hits_when_an_entry_exists() {
    let peer = Store::Local.start();
    first_entry(peer.as_ref());
    let step = peer.step();
    let r = step.run(&["restore"], &[INPUTS.as_slice(), &[("lookup-only", "true")]].concat(), NO_STATE);
    assert_eq!(
        outputs(&r, &["cache-hit", "reused", "entry-exists", "miss-reason"]),
        ["true", "false", "true", "lookup-only"]
    );
}

/// With `prune`, the save of the replacement deletes the entry it replaces, and a second
/// replacement the first: a restore reaches the newest base alone, so nothing else is kept.
#[test]
fn prune_deletes_every_replaced_entry() {
    let peer = Store::Local.start();
    let inputs = [INPUTS.as_slice(), &[("prune", "true")]].concat();
    let (key, files) = first_entry(peer.as_ref());
    corrupt_base(peer.as_ref(), &key, 0);
    let refused = job(peer.as_ref(), &inputs);
    assert_eq!(refused.save.output("save-result"), "saved", "{}", refused.save.stdout);
    let deleted = refused.save.stdout.lines().filter(|l| l.starts_with("  deleted ")).count();
    assert_eq!(deleted, 1, "the prune lists the older entry it deleted: {}", refused.save.stdout);
    assert_eq!(peer.entries(), 1, "only the replacement is left");

    corrupt_base(peer.as_ref(), &key, 1);
    let again = job(peer.as_ref(), &inputs);
    assert_eq!(again.restore.unusable_newest(), Some(1), "{}", again.restore.stdout);
    assert_eq!(again.save.output("save-result"), "saved", "{}", again.save.stdout);
    assert_eq!(peer.entries(), 1, "generation 1 goes: no restore reaches it once generation 2 exists");
    let healed = job(peer.as_ref(), &inputs);
    assert_eq!(outputs(&healed.restore, &["reused"]), ["true"], "{}", healed.restore.stdout);
    assert_eq!(healed.restore.reused_generation(), Some(2), "{}", healed.restore.stdout);
    assert_eq!(healed.files, files);
}
