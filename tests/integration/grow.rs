//! `grow`: layers of one exact key, through the real binary, on every store of the matrix
//! (`support::stores`: the local store, the v1 and v2 test services, S3; act's own server runs the
//! torch example in `act_examples`). Each "job" starts from an empty `out` (a fresh runner),
//! restores, changes `out`, and runs the post step with the restore's state.

use exact_cache::archive::{Compression, FINGERPRINT_NAME, MANIFEST_NAME};
use exact_cache::keys::{Key, cache_version, slot_names};
use exact_cache::manifest::{MANIFEST_FORMAT, Manifest, ManifestEntry, RootKind, RootRecord, StackSlot};
use std::path::Path;

use crate::support::services::REST_TOKEN;
use crate::support::{
    NO_STATE, Peer, Step, StepResult, Store, TarBuilder, assert_shown, dir_entry, file_entry, link_entry,
    on_every_store, snapshot, write,
};

/// A shared store and the jobs that use it.
struct Scene {
    peer: Box<dyn Peer>,
    max_layers: &'static str,
    max_share: &'static str,
    /// The `path` lines.
    lines: &'static [&'static str],
}

/// One job's restore and post step.
struct Job {
    step: Step,
    restore: StepResult,
}

/// What a layer made by hand at slot `(0, 1)` needs: the key, a restore of the stack as it is
/// (the probe) and its fingerprint record, and the slot naming what the probe placed as parent.
struct OnTop {
    key: String,
    probe: Job,
    record: Vec<u8>,
    slot: StackSlot,
}

const PATH: &str = "out";

impl Scene {
    fn new(store: Store) -> Self {
        Self::on(store.start())
    }

    fn on(peer: Box<dyn Peer>) -> Self {
        Self { peer, max_layers: "4", max_share: "10000%", lines: &[PATH] }
    }

    /// A scene of its own on another empty store of the same kind.
    fn another(&self) -> Self {
        Self::on(self.peer.another())
    }

    fn step(&self) -> Step {
        self.peer.step()
    }

    fn inputs(&self) -> Vec<(&'static str, &'static str)> {
        let path = if self.lines == [PATH] { PATH } else { Box::leak(self.lines.join("\n").into_boxed_str()) };
        vec![
            ("path", path),
            ("native", "none"),
            ("compression", "none"),
            ("prefix", "grow"),
            ("grow", "true"),
            ("grow-max-layers", self.max_layers),
            ("grow-max-share", self.max_share),
        ]
    }

    /// A fresh runner: restore into an empty workspace.
    fn restore(&self) -> Job {
        let step = self.step();
        let restore = step.run(&["restore"], &self.inputs(), NO_STATE);
        assert_eq!(restore.code, 0, "{}", restore.stdout);
        Job { step, restore }
    }

    fn key(&self) -> String {
        let fp = self.step().run(&["fingerprint"], &self.inputs(), NO_STATE);
        fp.output("key").to_owned()
    }

    /// The key and version of slot `(generation, layer)` of `key`.
    fn names(&self, key: &str, (generation, layer): (u32, u32)) -> (String, String) {
        let base = cache_version(self.lines, Compression::None);
        let (key, version) = slot_names(&Key::from(key), &base, generation, layer);
        (key.to_string(), version.to_string())
    }

    /// Store `bytes` at `slot` of `key`, as a hostile or broken writer would.
    fn plant(&self, key: &str, slot: (u32, u32), bytes: &[u8]) {
        let (key, version) = self.names(key, slot);
        self.peer.plant(&key, &version, bytes);
    }

    /// Remove `slot` of `key`, as eviction would.
    fn evict(&self, key: &str, slot: (u32, u32)) {
        let (key, version) = self.names(key, slot);
        self.peer.evict(&key, &version);
    }

    /// A job that restores, writes `files` into `out`, and saves in its post step.
    fn job(&self, files: &[(&str, &str)]) -> (Job, StepResult) {
        let job = self.restore();
        for (name, data) in files {
            write(&job.step.ws.join(PATH).join(name), data.as_bytes());
        }
        let saved = job.post(self);
        (job, saved)
    }

    /// What a layer made by hand on top of the stack as it is needs.
    fn on_top(&self) -> OnTop {
        let probe = self.restore();
        let record = std::fs::read(probe.restore.output("fingerprint-file")).unwrap();
        let slot = StackSlot { generation: 0, layer: 1, parent: Some(restored_digest(&probe)) };
        OnTop { key: self.key(), probe, record, slot }
    }

    /// A restore that reuses the base without its layers, and says `why`.
    fn restore_without_layers(&self, why: &str) -> Job {
        let job = self.restore();
        assert_eq!(outputs(&job.restore, &["reused", "layers"]), ["true", "0"], "{}", job.restore.stdout);
        assert!(job.restore.stdout.contains(why), "{}", job.restore.stdout);
        job
    }

    /// A base holding `a.bin`, `garbage` planted at `slot`, then a job that adds `b.bin`: its
    /// restore reuses the base and no layer.
    fn job_over_garbage_at(&self, slot: (u32, u32), garbage: &[u8]) -> (Job, StepResult) {
        self.job(&[("a.bin", "graph a")]);
        self.plant(&self.key(), slot, garbage);
        let (job, saved) = self.job(&[("b.bin", "graph b")]);
        assert_eq!(outputs(&job.restore, &["reused", "layers"]), ["true", "0"], "{}", job.restore.stdout);
        (job, saved)
    }
}

impl Job {
    fn post(&self, scene: &Scene) -> StepResult {
        let saved = self.step.run(&["save", "--post"], &scene.inputs(), &self.restore.state);
        assert_eq!(saved.code, 0, "{}", saved.stdout);
        saved
    }

    /// The names under `out`.
    fn names(&self) -> Vec<String> {
        snapshot(&self.step.ws.join(PATH)).into_keys().filter(|n| !n.is_empty()).collect()
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.step.ws.join(PATH).join(name)).unwrap()
    }
}

fn outputs(r: &StepResult, names: &[&str]) -> Vec<String> {
    names.iter().map(|n| r.output(n).to_owned()).collect()
}

/// A layer archive made by hand: `record` first, `members` (files and links), a manifest at
/// `slot` naming `parent`.
fn layer_archive(record: &[u8], key: &str, members: &[(&str, Option<&str>, &[u8])], slot: StackSlot) -> Vec<u8> {
    let mut tar = TarBuilder::default();
    tar.file(FINGERPRINT_NAME, record);
    let mut entries = Vec::new();
    for (name, link, data) in members {
        match link {
            Some(target) => {
                tar.entry(name, tar::EntryType::Symlink, 0o777, b"", Some(target));
                entries.push(link_entry(name, target));
            }
            None => {
                tar.file(name, data);
                entries.push(file_entry(name, data));
            }
        }
    }
    let manifest = Manifest {
        exact_cache_manifest: MANIFEST_FORMAT,
        key: key.to_owned(),
        roots: vec![RootRecord { line: PATH.into(), kind: RootKind::Dir }],
        entries,
        stack: Some(slot),
        generation: None,
    };
    tar.file(MANIFEST_NAME, &serde_json::to_vec(&manifest).unwrap());
    tar.finish()
}

/// The digest of what the restore of `job` put in place (its base alone): a layer's parent.
fn restored_digest(job: &Job) -> String {
    let kept: serde_json::Value =
        serde_json::from_slice(&std::fs::read(job.restore.state.get("manifest-file").unwrap()).unwrap()).unwrap();
    let manifest: Manifest = serde_json::from_value(kept["restored"]["manifest"].clone()).unwrap();
    manifest.digest()
}

on_every_store!(
    a_warm_run_keeps_what_it_added_and_layers_apply_in_order,
    a_layer_that_would_change_a_file_below_it_is_refused,
    a_corrupt_newest_base_is_a_miss_and_its_replacement_goes_above_it,
    a_restore_that_looked_for_fewer_layers_compacts_instead_of_sticking,
    compaction_never_takes_files_that_were_there_before_the_restore,
    a_corrupt_layer_stops_the_stack_and_the_next_save_compacts,
    a_missing_middle_layer_stops_the_stack_before_the_gap,
    two_jobs_growing_at_once_save_one_layer,
    after_max_layers_the_next_save_compacts_into_a_new_generation,
    a_layer_of_another_fingerprint_or_parent_is_never_applied,
    a_hostile_layer_never_writes_outside_its_roots,
    a_layer_never_removes_replaces_or_repermissions_what_is_below_it,
    a_job_that_changes_a_directory_mode_still_saves_a_layer_that_applies,
    a_layer_never_reaches_beneath_a_link_of_the_stack_through_another_root,
    a_layer_that_a_file_on_disk_is_in_the_way_of_makes_the_next_save_compact,
);

fn a_warm_run_keeps_what_it_added_and_layers_apply_in_order(store: Store) {
    let scene = Scene::new(store);
    let (cold, saved) = scene.job(&[("a.bin", "graph a")]);
    assert_eq!(outputs(&cold.restore, &["reused", "layers"]), ["false", "0"]);
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);

    // Warm: A is reused, B is new: the post step keeps B as layer 1.
    let (warm, saved) = scene.job(&[("b.bin", "graph b")]);
    assert_eq!(outputs(&warm.restore, &["reused", "layers"]), ["true", "0"]);
    assert_eq!(outputs(&saved, &["save-result", "saved"]), ["layer", "true"], "{}", saved.stdout);

    // The third run gets A and B, and a run that adds nothing saves nothing.
    let (third, saved) = scene.job(&[]);
    assert_eq!(outputs(&third.restore, &["reused", "layers", "restored-files"]), ["true", "1", "2"]);
    assert_eq!((third.read("a.bin"), third.read("b.bin")), ("graph a".into(), "graph b".into()));
    assert_eq!(third.restore.reused_generation(), Some(0), "{}", third.restore.stdout);
    third.restore.summary_row("stack");
    assert_eq!(saved.output("save-result"), "skipped-hit");

    // Layer 2 adds C (in a new directory, on top of layer 1); layers only add: the job's change
    // to B and its removal of A are not kept.
    let job = scene.restore();
    write(&job.step.ws.join("out/b.bin"), b"graph b, second version");
    write(&job.step.ws.join("out/new/c.bin"), b"graph c");
    std::fs::remove_file(job.step.ws.join("out/a.bin")).unwrap();
    let saved = job.post(&scene);
    assert_eq!(saved.output("save-result"), "layer", "{}", saved.stdout);

    let fourth = scene.restore();
    assert_eq!(outputs(&fourth.restore, &["layers", "restored-files", "restored-bytes"]), ["2", "3", "21"]);
    assert_eq!(fourth.names(), ["a.bin", "b.bin", "new", "new/c.bin"]);
    assert_eq!(fourth.read("b.bin"), "graph b");

    // Without `grow`, a restore looks for the base alone.
    let plain = scene.step();
    let inputs: Vec<(&str, &str)> =
        scene.inputs().into_iter().map(|(k, v)| if k == "grow" { (k, "false") } else { (k, v) }).collect();
    let r = plain.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(outputs(&r, &["reused", "layers", "restored-files"]), ["true", "0", "1"]);
}

fn a_corrupt_layer_stops_the_stack_and_the_next_save_compacts(store: Store) {
    let scene = Scene::new(store);
    let (job, saved) = scene.job_over_garbage_at((0, 1), b"this is not an archive");
    let stack = job.restore.reused_stack().expect("a stack reused");
    assert_eq!((stack.layers, stack.stopped), (0, true), "{stack:?}");
    assert_eq!(job.names(), ["a.bin", "b.bin"]);
    // The corrupt layer cannot be replaced (entries are immutable): the save compacts instead.
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);

    let next = scene.restore();
    assert_eq!(outputs(&next.restore, &["reused", "layers", "restored-files"]), ["true", "0", "2"]);
    assert_eq!(next.restore.reused_generation(), Some(1), "{}", next.restore.stdout);
}

fn a_missing_middle_layer_stops_the_stack_before_the_gap(store: Store) {
    let scene = Scene::new(store);
    scene.job(&[("a.bin", "graph a")]);
    assert_eq!(scene.job(&[("b.bin", "graph b")]).1.output("save-result"), "layer");
    assert_eq!(scene.job(&[("c.bin", "graph c")]).1.output("save-result"), "layer");
    scene.evict(&scene.key(), (0, 1));

    let job = scene.restore_without_layers("layer 1 is missing, so layer 2 and later are not applied");
    assert_eq!(job.names(), ["a.bin"], "layer 2 never applies without layer 1");
}

fn two_jobs_growing_at_once_save_one_layer(store: Store) {
    let scene = Scene::new(store);
    // A base larger than both layers, so that neither save compacts.
    scene.job(&[("a.bin", &"a".repeat(8 << 20))]);
    let jobs = [scene.restore(), scene.restore()];
    for (i, job) in jobs.iter().enumerate() {
        write(&job.step.ws.join(format!("out/job{i}.bin")), &vec![i as u8; 2 << 20]);
    }
    let results: Vec<String> = std::thread::scope(|s| {
        let scene = &scene;
        let posts: Vec<_> = jobs.into_iter().map(|job| s.spawn(move || job.post(scene))).collect();
        posts.into_iter().map(|p| p.join().unwrap().output("save-result").to_owned()).collect()
    });
    let mut sorted = results.clone();
    sorted.sort();
    if scene.peer.refuses_racing_commits() {
        assert_eq!(sorted, ["exists", "layer"], "{results:?}");
    } else {
        assert!(sorted == ["exists", "layer"] || sorted == ["layer", "layer"], "{results:?}");
    }

    let next = scene.restore();
    assert_eq!(outputs(&next.restore, &["reused", "layers"]), ["true", "1"]);
    let winners: Vec<Vec<String>> = (0..results.len())
        .filter(|&i| results[i] == "layer")
        .map(|i| vec!["a.bin".to_owned(), format!("job{i}.bin")])
        .collect();
    assert!(winners.contains(&next.names()), "{:?} is none of {winners:?}", next.names());
}

fn after_max_layers_the_next_save_compacts_into_a_new_generation(store: Store) {
    let mut scene = Scene::new(store);
    scene.max_layers = "2";
    scene.job(&[("a.bin", "graph a")]);
    assert_eq!(scene.job(&[("b.bin", "graph b")]).1.output("save-result"), "layer");
    assert_eq!(scene.job(&[("c.bin", "graph c")]).1.output("save-result"), "layer");
    let (full, saved) = scene.job(&[("d.bin", "graph d")]);
    assert_eq!(full.restore.layers(), 2);
    // What the save compacts for (`CompactWhy::Full`): the restore kept a whole stack of
    // `grow-max-layers` layers, not one that stopped.
    let stack = full.restore.reused_stack().expect("a stack reused");
    assert_eq!((stack.layers, stack.stopped), (2, false), "{stack:?}");
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);

    let (next, saved) = scene.job(&[("e.bin", "graph e")]);
    assert_eq!(outputs(&next.restore, &["layers", "restored-files"]), ["0", "4"]);
    assert_eq!(next.restore.reused_generation(), Some(1), "{}", next.restore.stdout);
    assert_eq!(saved.output("save-result"), "layer", "generation 1 grows layers of its own");
    let last = scene.restore();
    assert_eq!(outputs(&last.restore, &["layers", "restored-files"]), ["1", "5"]);

    // Layers that would outweigh `grow-max-share` of the base compact too.
    let mut heavy = scene.another();
    heavy.max_share = "50%";
    heavy.job(&[("a.bin", "0123456789")]);
    assert_eq!(heavy.job(&[("b.bin", "01234")]).1.output("save-result"), "layer");
    let (_, saved) = heavy.job(&[("c.bin", "0")]);
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);
    assert!(saved.stdout.contains("its layers would hold 6 B against a base of 10 B (`grow-max-share` 50%)"));

    // `list` names each slot; `prune` keeps the live stack (generation 1's base and layer)
    // and deletes generation 0, which its base holds.
    if !scene.peer.lists_entries() {
        return;
    }
    let flags =
        ["--prefix", "grow", "--path", PATH, "--compression", "none", "--grow", "true", "--github-token", REST_TOKEN];
    let listed = scene.step().run(&[&["list"], &flags[..]].concat(), &[], NO_STATE);
    assert_eq!(listed.code, 0, "{}", listed.stdout);
    for slot in ["  base", "  layer 1", "  layer 2", "  generation 1 base", "  generation 1 layer 1"] {
        assert!(listed.stdout.contains(slot), "`list` names `{slot}`: {}", listed.stdout);
    }
    let pruned = scene.step().run(&[&["prune", "--prune-keep", "1"], &flags[..]].concat(), &[], NO_STATE);
    assert_eq!(pruned.code, 0, "{}", pruned.stdout);
    assert_eq!(pruned.deleted().len(), 3, "{}", pruned.stdout);
    assert!(pruned.stdout.contains(&format!("deleted {} (layer 2)", scene.key())), "{}", pruned.stdout);
    assert_eq!(scene.peer.entries(), 2, "generation 1's base and layer are kept");
    let again = scene.restore();
    assert_eq!(outputs(&again.restore, &["layers", "restored-files"]), ["1", "5"]);
}

fn a_layer_of_another_fingerprint_or_parent_is_never_applied(store: Store) {
    let scene = Scene::new(store);
    scene.job(&[("a.bin", "graph a")]);
    let OnTop { key, record, slot, .. } = scene.on_top();

    // Another fingerprint (another `variant`): its record names another key.
    let other = scene.step();
    let mut inputs = scene.inputs();
    inputs.push(("variant", "other"));
    let fp = other.run(&["fingerprint"], &inputs, NO_STATE);
    let foreign_record = std::fs::read(fp.output("fingerprint-file")).unwrap();
    let foreign_key = fp.output("key").to_owned();
    let foreign = layer_archive(&foreign_record, &foreign_key, &[("0/planted.bin", None, b"x")], slot.clone());
    scene.plant(&key, (0, 1), &foreign);
    let job = scene.restore_without_layers("layer 1 not applied");
    assert!(!job.step.ws.join("out/planted.bin").exists());
    scene.evict(&key, (0, 1));

    // Our fingerprint, made on top of another base.
    let elsewhere = StackSlot { parent: Some("0".repeat(64)), ..slot.clone() };
    scene.plant(&key, (0, 1), &layer_archive(&record, &key, &[("0/planted.bin", None, b"x")], elsewhere));
    let job = scene.restore_without_layers("made on top of another base or layer");
    assert!(!job.step.ws.join("out/planted.bin").exists());
    scene.evict(&key, (0, 1));

    // The control: the same layer with the right parent applies.
    scene.plant(&key, (0, 1), &layer_archive(&record, &key, &[("0/planted.bin", None, b"x")], slot));
    let job = scene.restore();
    assert_eq!(outputs(&job.restore, &["reused", "layers"]), ["true", "1"], "{}", job.restore.stdout);
    assert!(job.step.ws.join("out/planted.bin").exists());
}

fn a_hostile_layer_never_writes_outside_its_roots(store: Store) {
    let scene = Scene::new(store);
    scene.job(&[("a.bin", "graph a")]);
    let OnTop { key, record, slot, .. } = scene.on_top();
    // A link out of the root, then a file through it.
    let members: &[(&str, Option<&str>, &[u8])] = &[("0/escape", Some("../.."), b""), ("0/escape/owned", None, b"x")];
    scene.plant(&key, (0, 1), &layer_archive(&record, &key, members, slot));

    let job = scene.step();
    let victim = job.dir.path().join("work/repo/owned");
    let before = snapshot(job.dir.path());
    let restore = job.run(&["restore"], &scene.inputs(), NO_STATE);
    assert_eq!(outputs(&restore, &["reused", "layers"]), ["true", "0"], "{}", restore.stdout);
    assert!(restore.reused_stack().expect("a stack reused").stopped, "{}", restore.stdout);
    assert!(!victim.exists());
    let after = snapshot(job.dir.path());
    let changed: Vec<&String> = after
        .keys()
        .chain(before.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .filter(|k| !in_own_places(k))
        .collect();
    assert!(changed.is_empty(), "a hostile layer changed {changed:?}");
}

/// What a restore writes for itself: the workspace's `out`, its command files, `RUNNER_TEMP`.
fn in_own_places(path: &str) -> bool {
    let p = Path::new(path);
    p.starts_with("work/repo/repo/out") || p.starts_with("runner-temp") || path.starts_with("run-")
}

#[test]
fn evicted_generations_never_strand_the_newest_and_layers_without_their_base_are_explained() {
    let mut scene = Scene::new(Store::Local);
    scene.max_layers = "1";
    scene.job(&[("a.bin", "graph a")]);
    assert_eq!(scene.job(&[("b.bin", "graph b")]).1.output("save-result"), "layer");
    let key = scene.key();
    assert_eq!(scene.job(&[("c.bin", "graph c")]).1.output("save-result"), "saved");
    assert_eq!(scene.job(&[("d.bin", "graph d")]).1.output("save-result"), "layer");
    assert_eq!(scene.job(&[("e.bin", "graph e")]).1.output("save-result"), "saved");
    let plain: Vec<(&str, &str)> =
        scene.inputs().into_iter().map(|(k, v)| if k == "grow" { (k, "false") } else { (k, v) }).collect();

    // With or without `grow`, one lookup answers the newest base: the compacted one.
    let r = scene.step().run(&["restore"], &plain, NO_STATE);
    assert_eq!(outputs(&r, &["reused", "layers"]), ["true", "0"], "{}", r.stdout);
    assert_eq!(r.reused_generation(), Some(2), "{}", r.stdout);

    // Generations 0 and 1 evicted: the newest is reached all the same.
    scene.evict(&key, (0, 0));
    scene.evict(&key, (1, 0));
    for inputs in [&plain, &scene.inputs()] {
        let r = scene.step().run(&["restore"], inputs, NO_STATE);
        assert_eq!(outputs(&r, &["reused", "miss-reason"]), ["true", "none"], "{}", r.stdout);
        assert_eq!(r.reused_generation(), Some(2), "{}", r.stdout);
    }

    // Only layers left: their bases were evicted, and a layer never applies without its base.
    scene.evict(&key, (2, 0));
    let r = scene.step().run(&["restore"], &scene.inputs(), NO_STATE);
    assert_eq!(outputs(&r, &["reused", "miss-reason", "layers"]), ["false", "not-found", "0"]);
    assert!(r.stdout.contains("of this key's stack exists: its base is gone (evicted or deleted)"), "{}", r.stdout);
}

fn a_layer_that_would_change_a_file_below_it_is_refused(store: Store) {
    let scene = Scene::new(store);
    scene.job(&[("a.bin", "graph a")]);
    let OnTop { key, record, slot, .. } = scene.on_top();
    let members: &[(&str, Option<&str>, &[u8])] = &[("0/a.bin", None, b"poisoned"), ("0/b.bin", None, b"graph b")];
    scene.plant(&key, (0, 1), &layer_archive(&record, &key, members, slot));
    let job =
        scene.restore_without_layers("it would change `0/a.bin` (a file below it) into a file; layers only add files");
    assert_eq!((job.read("a.bin"), job.names()), ("graph a".into(), vec!["a.bin".into()]));
}

/// A member of a layer made by hand.
enum Member {
    Dir(&'static str, u32),
    File(&'static str, &'static [u8]),
    Link(&'static str, &'static str),
}

/// A layer archive of any members (directories with their modes too), at `slot`.
fn layer_of(record: &[u8], key: &str, members: &[Member], slot: StackSlot) -> Vec<u8> {
    slot_of(record, key, members, vec![RootRecord { line: PATH.into(), kind: RootKind::Dir }], Some(slot))
}

/// Any slot's archive (`stack` `None`: a generation-0 base), for `roots`.
fn slot_of(record: &[u8], key: &str, members: &[Member], roots: Vec<RootRecord>, stack: Option<StackSlot>) -> Vec<u8> {
    let mut tar = TarBuilder::default();
    tar.file(FINGERPRINT_NAME, record);
    let mut entries = Vec::new();
    for member in members {
        match *member {
            Member::Dir(name, mode) => {
                tar.entry(&format!("{name}/"), tar::EntryType::Directory, mode, b"", None);
                entries.push(ManifestEntry { mode, ..dir_entry(name) });
            }
            Member::File(name, data) => {
                tar.file(name, data);
                entries.push(file_entry(name, data));
            }
            Member::Link(name, target) => {
                tar.entry(name, tar::EntryType::Symlink, 0o777, b"", Some(target));
                entries.push(link_entry(name, target));
            }
        }
    }
    let manifest = Manifest {
        exact_cache_manifest: MANIFEST_FORMAT,
        key: key.to_owned(),
        roots,
        entries,
        stack,
        generation: None,
    };
    tar.file(MANIFEST_NAME, &serde_json::to_vec(&manifest).unwrap());
    tar.finish()
}

/// A base of a file, a directory holding a file, and a link; its directories 755.
fn base_with_dirs_and_a_link(scene: &Scene) {
    use std::os::unix::fs::PermissionsExt;
    let cold = scene.restore();
    let out = cold.step.ws.join(PATH);
    write(&out.join("a.pth"), b"weights");
    write(&out.join("sub/b.pth"), b"more weights");
    std::os::unix::fs::symlink("a.pth", out.join("lnk")).unwrap();
    for dir in [out.clone(), out.join("sub")] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    assert_eq!(cold.post(scene).output("save-result"), "saved");
}

fn a_layer_never_removes_replaces_or_repermissions_what_is_below_it(store: Store) {
    use Member::{Dir, File, Link};
    let scene = Scene::new(store);
    base_with_dirs_and_a_link(&scene);
    let OnTop { key, probe, record, slot } = scene.on_top();
    let base = snapshot(&probe.step.ws.join(PATH));
    let cases: &[(&str, &[Member], &str)] = &[
        (
            "a directory where the base has a file",
            &[Dir("0/a.pth", 0o755)],
            "change `0/a.pth` (a file below it) into a dir",
        ),
        (
            "a file beneath a base file",
            &[File("0/a.pth/x", b"x")],
            "put `0/a.pth/x` beneath `0/a.pth`, a file below it",
        ),
        (
            "a directory and a file beneath a base file",
            &[Dir("0/a.pth", 0o755), File("0/a.pth/x", b"x")],
            "change `0/a.pth` (a file below it) into a dir",
        ),
        (
            "a directory where the base has a link",
            &[Dir("0/lnk", 0o755)],
            "change `0/lnk` (a symlink below it) into a dir",
        ),
        ("a file where the base has a link", &[File("0/lnk", b"x")], "change `0/lnk` (a symlink below it) into a file"),
        ("a link where the base has a file", &[Link("0/a.pth", "sub/b.pth")], "change `0/a.pth` (a file below it)"),
        ("a file beneath a base link", &[File("0/lnk/x", b"x")], "beneath `0/lnk`, a symlink below it"),
        ("the same file again", &[File("0/a.pth", b"weights")], "change `0/a.pth` (a file below it) into a file"),
        (
            "another mode for a directory",
            &[Dir("0/sub", 0o777), File("0/sub/c.pth", b"c")],
            "change the mode of `0/sub` from 755 to 777",
        ),
        ("another mode for the root", &[Dir("0", 0o000), File("0/c.pth", b"c")], "mode of `0` from 755 to 000"),
    ];
    for (what, members, why) in cases {
        scene.plant(&key, (0, 1), &layer_of(&record, &key, members, slot.clone()));
        let job = scene.restore();
        let stdout = &job.restore.stdout;
        assert_eq!(outputs(&job.restore, &["reused", "layers"]), ["true", "0"], "{what}: {stdout}");
        assert!(job.restore.reused_stack().expect("a stack reused").stopped, "{what}: {stdout}");
        assert!(stdout.contains(why), "{what}: {stdout}");
        assert_eq!(snapshot(&job.step.ws.join(PATH)), base, "{what}: nothing of the layer is placed");
        let leftovers: Vec<_> = std::fs::read_dir(job.step.ws.join(PATH))
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().into_string().ok())
            .filter(|n| n.starts_with(".exact-cache"))
            .collect();
        assert!(leftovers.is_empty(), "{what}: {leftovers:?}");
        scene.evict(&key, (0, 1));
    }

    // The control: the same directories at their own modes, and a new file, apply.
    let members = [Dir("0", 0o755), Dir("0/sub", 0o755), File("0/sub/c.pth", b"c")];
    scene.plant(&key, (0, 1), &layer_of(&record, &key, &members, slot));
    let job = scene.restore();
    assert_eq!(outputs(&job.restore, &["reused", "layers"]), ["true", "1"], "{}", job.restore.stdout);
    assert_eq!(job.read("sub/c.pth"), "c");
}

/// A job that changes a directory's mode, or replaces a file with a directory, still saves a
/// layer that the next restore applies: the layer keeps the stack's directory modes and leaves
/// out what would lie beneath a file of the stack.
fn a_job_that_changes_a_directory_mode_still_saves_a_layer_that_applies(store: Store) {
    use std::os::unix::fs::PermissionsExt;
    let scene = Scene::new(store);
    base_with_dirs_and_a_link(&scene);
    let job = scene.restore();
    let out = job.step.ws.join(PATH);
    std::fs::set_permissions(out.join("sub"), std::fs::Permissions::from_mode(0o700)).unwrap();
    write(&out.join("sub/c.pth"), b"c");
    std::fs::remove_file(out.join("a.pth")).unwrap();
    write(&out.join("a.pth/x"), b"x");
    let saved = job.post(&scene);
    assert_eq!(saved.output("save-result"), "layer", "{}", saved.stdout);

    let next = scene.restore();
    assert_eq!(outputs(&next.restore, &["reused", "layers"]), ["true", "1"], "{}", next.restore.stdout);
    assert_eq!(next.read("sub/c.pth"), "c");
    assert_eq!(next.read("a.pth"), "weights");
    let sub = std::fs::metadata(next.step.ws.join("out/sub")).unwrap().permissions().mode() & 0o777;
    assert_eq!(sub, 0o755);
}

/// With `path` lines `out` and `out/r`, a base that places the link `out/r -> inner` would
/// carry root `out/r` of a later layer to `out/inner`, beneath the stack's link, where the
/// check by entry path cannot see: the layer is refused.
fn a_layer_never_reaches_beneath_a_link_of_the_stack_through_another_root(store: Store) {
    use Member::{Dir, File, Link};
    let mut scene = Scene::new(store);
    scene.lines = &["out", "out/r"];
    let (_, saved) = scene.job(&[("x.bin", "x")]);
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);
    let key = scene.key();
    let probe = scene.restore();
    let record = std::fs::read(probe.restore.output("fingerprint-file")).unwrap();
    let roots = vec![
        RootRecord { line: "out".into(), kind: RootKind::Dir },
        RootRecord { line: "out/r".into(), kind: RootKind::Missing },
    ];
    let base = [Dir("0", 0o755), File("0/x.bin", b"x"), Dir("0/inner", 0o755), Link("0/r", "inner")];
    scene.evict(&key, (0, 0));
    scene.plant(&key, (0, 0), &slot_of(&record, &key, &base, roots.clone(), None));
    let probe = scene.restore();
    assert_eq!(probe.restore.output("reused"), "true", "{}", probe.restore.stdout);
    let slot = StackSlot { generation: 0, layer: 1, parent: Some(restored_digest(&probe)) };
    let layer = [Dir("1", 0o755), File("1/evil.txt", b"evil")];
    scene.plant(&key, (0, 1), &slot_of(&record, &key, &layer, roots, Some(slot)));

    let job = scene.restore_without_layers("layer 1 not applied (corrupt)");
    // The warning names the `path` line that now leads elsewhere.
    let said = job.restore.said().replace(job.step.dir.path().to_str().unwrap(), "[TMP]");
    assert_shown!(Path::new("[TMP]"), "a_layer_through_a_root_that_moved", said);
    assert!(!job.step.ws.join("out/inner/evil.txt").exists());
}

/// A file already on disk where a layer has one (a leftover of another job) is never replaced:
/// the layer is refused, and since that is no service trouble, the next save compacts.
fn a_layer_that_a_file_on_disk_is_in_the_way_of_makes_the_next_save_compact(store: Store) {
    let scene = Scene::new(store);
    scene.job(&[("a.bin", "graph a")]);
    assert_eq!(scene.job(&[("b.bin", "graph b")]).1.output("save-result"), "layer");

    let step = scene.step();
    write(&step.ws.join("out/b.bin"), b"STALE");
    let restore = step.run(&["restore"], &scene.inputs(), NO_STATE);
    assert_eq!(outputs(&restore, &["reused", "layers"]), ["true", "0"], "{}", restore.stdout);
    // The warning says a layer never replaces what is already there.
    let said = restore.said().replace(step.dir.path().to_str().unwrap(), "[TMP]");
    assert_shown!(Path::new("[TMP]"), "a_layer_with_a_file_in_its_way", said);
    let job = Job { step, restore };
    assert_eq!(job.read("b.bin"), "STALE", "what was there stays");
    write(&job.step.ws.join("out/c.bin"), b"graph c");
    let saved = job.post(&scene);
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);

    let next = scene.restore();
    assert_eq!(outputs(&next.restore, &["reused", "layers"]), ["true", "0"], "{}", next.restore.stdout);
    assert_eq!(next.restore.reused_generation(), Some(1), "compacted: {}", next.restore.stdout);
    assert!(!next.restore.reused_stack().expect("a stack reused").stopped, "{}", next.restore.stdout);
    assert_eq!(next.names(), ["a.bin", "c.bin"]);
}

fn a_corrupt_newest_base_is_a_miss_and_its_replacement_goes_above_it(store: Store) {
    let scene = Scene::new(store);
    scene.job(&[("a.bin", "graph a")]);
    scene.plant(&scene.key(), (3, 0), b"garbage at generation 3");
    // The newest base is the only one a restore uses: unusable, it is a miss, and the job that
    // regenerates writes the replacement above it.
    let (job, saved) = scene.job(&[("a.bin", "graph a"), ("b.bin", "graph b")]);
    assert_eq!(outputs(&job.restore, &["reused", "miss-reason"]), ["false", "corrupt"], "{}", job.restore.stdout);
    assert_eq!(job.restore.unusable_newest(), Some(3), "{}", job.restore.stdout);
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);
    let next = scene.restore();
    assert_eq!(outputs(&next.restore, &["reused", "restored-files"]), ["true", "2"]);
    assert_eq!(next.restore.reused_generation(), Some(4), "{}", next.restore.stdout);

    // Every base unusable: the restore misses, and the save goes above them, not into `exists`.
    let lone = scene.another();
    lone.job(&[("a.bin", "graph a")]);
    let key = lone.key();
    lone.evict(&key, (0, 0));
    lone.plant(&key, (0, 0), b"corrupt generation 0");
    let (miss, saved) = lone.job(&[("a.bin", "graph a")]);
    assert_eq!(outputs(&miss.restore, &["reused", "miss-reason"]), ["false", "corrupt"]);
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);
    let healed = lone.restore().restore;
    assert_eq!((healed.output("reused"), healed.reused_generation()), ("true", Some(1)), "{}", healed.stdout);
}

fn a_restore_that_looked_for_fewer_layers_compacts_instead_of_sticking(store: Store) {
    let mut scene = Scene::new(store);
    scene.job(&[("a.bin", "graph a")]);
    assert_eq!(scene.job(&[("b.bin", "graph b")]).1.output("save-result"), "layer");
    assert_eq!(scene.job(&[("c.bin", "graph c")]).1.output("save-result"), "layer");
    // A restore that looks for one layer only, and a save that would allow four.
    scene.max_layers = "1";
    let job = scene.restore();
    assert_eq!(job.restore.layers(), 1);
    write(&job.step.ws.join("out/d.bin"), b"graph d");
    scene.max_layers = "4";
    let saved = job.post(&scene);
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);
    assert_eq!(scene.restore().names(), ["a.bin", "b.bin", "d.bin"], "generation 1 holds what was restored");
}

fn compaction_never_takes_files_that_were_there_before_the_restore(store: Store) {
    let mut scene = Scene::new(store);
    scene.max_share = "1%";
    scene.job(&[("a.bin", "graph a")]);
    // A runner with a leftover file (another fingerprint's, say) under `path`.
    let step = scene.step();
    write(&step.ws.join("out/leftover.bin"), b"from another job");
    let restore = step.run(&["restore"], &scene.inputs(), NO_STATE);
    assert_eq!(outputs(&restore, &["reused", "extra-files"]), ["true", "1"]);
    let job = Job { step, restore };
    write(&job.step.ws.join("out/b.bin"), b"graph b");
    let saved = job.post(&scene);
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);
    let next = scene.restore();
    assert_eq!(next.restore.reused_generation(), Some(1), "compacted: {}", next.restore.stdout);
    assert_eq!(next.names(), ["a.bin", "b.bin"]);
}
