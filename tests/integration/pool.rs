//! One cache for a runner pool: runners installed in different directories (their workspace,
//! home, `RUNNER_TEMP` and exact-cache's own directory elsewhere) share entries, each restoring
//! into its own places; the `torch-inductor` preset refuses an interpreter without torch; and
//! `verify-reuse` does not warn about what `grow` kept, the normal case of a pool's warm runs.

use crate::support::{NO_STATE, Peer, Step, Store, assert_shown, fake_torch, on_every_store, write};
use std::path::Path;

/// A runner of the pool (its own directories, torch installed), reaching `peer`.
fn runner(peer: &dyn Peer) -> Step {
    let step = peer.step();
    fake_torch(&step.ws);
    step
}

/// The `path` lines every runner is given: a workspace-relative line, a `~/…` line and an
/// absolute one, as `${{ github.workspace }}/models` expands on this runner (the preset adds its
/// directories).
fn path_lines(step: &Step) -> String {
    format!("out\n~/.cache/gen\n{}/models", step.ws.display())
}

fn inputs(path: &str) -> [(&'static str, &str); 4] {
    [("preset", "torch-inductor"), ("python", "python3"), ("path", path), ("grow-max-share", "1000%")]
}

fn inductor_dir(step: &Step) -> std::path::PathBuf {
    step.runner_temp.parent().unwrap().join("_exact-cache/torch-inductor/inductor")
}

/// Three runners installed in different directories, one store: the first saves, the second
/// restores it exactly into its own places and grows it by a layer, the third restores both.
fn runners_installed_in_different_directories_share_one_entry(store: Store) {
    let peer = store.start();
    let (first, second, third) = (runner(peer.as_ref()), runner(peer.as_ref()), runner(peer.as_ref()));
    assert_ne!(first.ws, second.ws);

    let first_paths = path_lines(&first);
    let cold = first.run(&["restore"], &inputs(&first_paths), NO_STATE);
    assert_eq!(cold.output("cache-hit"), "false", "{}", cold.stdout);
    write(&first.ws.join("out/a.bin"), b"a");
    write(&first.home.join(".cache/gen/g.bin"), b"g");
    write(&first.ws.join("models/m.pth"), b"m");
    write(&inductor_dir(&first).join("fxgraph/ab/entry"), b"compiled");
    let saved = first.run(&["save", "--post"], &inputs(&first_paths), &cold.state);
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);

    let second_paths = path_lines(&second);
    let warm = second.run(&["restore"], &inputs(&second_paths), NO_STATE);
    assert_eq!(warm.output("key"), cold.output("key"));
    assert_eq!((warm.output("cache-hit"), warm.output("reused")), ("true", "true"), "{}", warm.stdout);
    for (file, content) in [
        (second.ws.join("out/a.bin"), "a"),
        (second.home.join(".cache/gen/g.bin"), "g"),
        (second.ws.join("models/m.pth"), "m"),
        (inductor_dir(&second).join("fxgraph/ab/entry"), "compiled"),
    ] {
        assert_eq!(std::fs::read_to_string(&file).unwrap(), content, "{}", file.display());
    }
    assert_eq!(Path::new(&warm.env["TORCHINDUCTOR_CACHE_DIR"]), inductor_dir(&second));
    write(&inductor_dir(&second).join("fxgraph/cd/entry"), b"compiled on the second");
    let grown = second.run(&["save", "--post"], &inputs(&second_paths), &warm.state);
    assert_eq!(grown.output("save-result"), "layer", "{}", grown.stdout);

    let third_paths = path_lines(&third);
    let stacked = third.run(&["restore"], &inputs(&third_paths), NO_STATE);
    assert_eq!((stacked.output("reused"), stacked.output("layers")), ("true", "1"), "{}", stacked.stdout);
    let layered = std::fs::read_to_string(inductor_dir(&third).join("fxgraph/cd/entry")).unwrap();
    assert_eq!(layered, "compiled on the second");
}

on_every_store!(runners_installed_in_different_directories_share_one_entry);

#[test]
fn the_preset_refuses_an_interpreter_without_torch() {
    let step = Step::new();
    // `-S`: no site-packages, so no torch wherever this runs.
    let r = step.run(&["restore"], &[("preset", "torch-inductor"), ("python", "python3 -S")], NO_STATE);
    assert_ne!(r.code, 0, "{}", r.stdout);
    // The error names the input, the interpreter and the fix.
    assert_shown!(step.dir.path(), "the_preset_refuses_an_interpreter_without_torch", r.said());
}

#[test]
fn verify_reuse_does_not_warn_about_additions_grow_kept() {
    let peer = Store::Local.start();
    let job = |inputs: &[(&str, &str)], change: &dyn Fn(&Path)| {
        let step = runner(peer.as_ref());
        let restore = step.run(&["restore"], inputs, NO_STATE);
        change(&step.ws);
        step.run(&["save", "--post"], inputs, &restore.state)
    };
    let inputs =
        [("path", "out"), ("native", "none"), ("grow", "true"), ("grow-max-share", "1000%"), ("verify-reuse", "warn")];
    let cold = job(&inputs, &|ws| write(&ws.join("out/a.bin"), b"a"));
    assert_eq!(cold.output("save-result"), "saved", "{}", cold.stdout);

    let grown = job(&inputs, &|ws| write(&ws.join("out/b.bin"), b"b"));
    assert_eq!(grown.output("save-result"), "layer", "{}", grown.stdout);
    assert!(!grown.stdout.contains("::warning::"), "{}", grown.stdout);
    let kept =
        "verify-reuse: 1 added, 0 changed, 0 removed under `path` since the restore: `grow` kept the added files";
    assert!(grown.stdout.contains(kept), "{}", grown.stdout);
    assert_eq!(grown.output("changed-files"), "out/b.bin");

    // A changed file still warns (the addition beside it is kept).
    let changed = job(&inputs, &|ws| {
        write(&ws.join("out/a.bin"), b"A");
        write(&ws.join("out/c.bin"), b"c");
    });
    assert_eq!(changed.output("save-result"), "layer", "{}", changed.stdout);
    assert_eq!(changed.warnings().len(), 1, "{}", changed.stdout);

    // Additions nothing kept (`save-if: false` writes no layer) still warn.
    let mut restoring_only = inputs.to_vec();
    restoring_only.push(("save-if", "false"));
    let unsaved = job(&restoring_only, &|ws| write(&ws.join("out/d.bin"), b"d"));
    assert_eq!(unsaved.output("save-result"), "skipped-hit", "{}", unsaved.stdout);
    // Each warning counts what was added, changed and removed.
    let said = format!("--- a file changed\n{}--- an addition not kept\n{}", changed.said(), unsaved.said());
    // What the hit saved depends on how long the tiny generator took: not shown.
    let mut settings = crate::support::redactions(Path::new("[TMP]"));
    settings.add_filter(r"(since the restore(: `grow` kept the added files)?); .*", "$1; [WORTH]");
    settings.bind(|| insta::assert_snapshot!("verify_reuse_warns_about_what_grow_did_not_keep", said));
}
