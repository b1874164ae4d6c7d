//! Which key a save writes under (issue 41): the one the job's restore computed. What exact-cache
//! itself exports after a miss (its reads hook, first on `PYTHONPATH`) enters no key, so another
//! cache's miss changes no key and a save without `key` computes the restore's; and a save
//! without `key` whose fingerprint the job's own steps changed since the restore refuses,
//! rather than store an entry no restore looks for.

use crate::support::{NO_STATE, Step, StepResult, write};

/// Give the step what `r` exported to later steps (`$GITHUB_ENV`), as the runner does.
fn export(step: &mut Step, r: &StepResult) {
    for (name, value) in &r.env {
        step.set_env(name, value);
    }
}

fn entries(step: &Step) -> usize {
    std::fs::read_dir(step.cache.join("entries")).map_or(0, |d| d.count())
}

#[test]
fn another_caches_miss_changes_no_key_that_hashes_pythonpath() {
    for theirs in [None, Some("/opt/their-lib")] {
        let mut step = Step::new();
        if let Some(path) = theirs {
            step.set_env("PYTHONPATH", path);
        }
        write(&step.ws.join("gen.py"), b"print('a')\n");
        let a = [("path", "out-a"), ("hash-files", "gen.py"), ("native", "none")];
        let b = [("path", "out-b"), ("hash-env", "PYTHONPATH"), ("native", "none"), ("prefix", "b")];
        let before = step.run(&["fingerprint"], &b, NO_STATE).output("key").to_owned();

        // Cache a misses: its restore puts its reads hook first on the job's `PYTHONPATH`.
        let missed = step.run(&["restore"], &a, NO_STATE);
        assert_eq!(missed.output("miss-reason"), "not-found", "{}", missed.stdout);
        let exported = missed.env.get("PYTHONPATH").expect("the hook is exported").clone();
        // The hook's own directory (`exact-cache/reads-<random>`) first, then theirs.
        let (hook, rest) = exported.split_once(':').map_or((exported.as_str(), None), |(h, r)| (h, Some(r)));
        let hook_dir = step.runner_temp.join("exact-cache");
        assert!(hook.starts_with(&format!("{}/reads-", hook_dir.display())), "{exported}");
        assert_eq!(rest, theirs, "{exported}");
        export(&mut step, &missed);

        // Cache b's key is the same, in its restore and in its save without `key`.
        let restore = step.run(&["restore"], &b, NO_STATE);
        assert_eq!(restore.output("key"), before, "{}", restore.stdout);
        write(&step.ws.join("out-b/f"), b"b");
        let save = step.run(&["save"], &b, NO_STATE);
        assert_eq!((save.output("key"), save.output("save-result")), (before.as_str(), "saved"), "{}", save.stdout);

        // A later job, where no cache missed before b: its restore finds that entry.
        let mut later = Step::new();
        later.cache = step.cache.clone();
        if let Some(path) = theirs {
            later.set_env("PYTHONPATH", path);
        }
        let r = later.run(&["restore"], &b, NO_STATE);
        assert_eq!((r.output("key"), r.output("reused")), (before.as_str(), "true"), "{}", r.stdout);
    }
}

#[test]
fn a_save_without_key_refuses_a_fingerprint_changed_since_the_restore() {
    let mut step = Step::new();
    step.set_env("MODEL_FLAVOR", "small");
    let inputs = [("path", "out"), ("hash-env", "MODEL_FLAVOR"), ("native", "none")];
    let missed = step.run(&["restore"], &inputs, NO_STATE);
    let key = missed.output("key").to_owned();
    export(&mut step, &missed);
    write(&step.ws.join("out/model.pth"), b"weights");

    // A later step of the job changes what enters the key.
    step.set_env("MODEL_FLAVOR", "large");
    let refused = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    let error = refused.stdout.lines().find(|l| l.starts_with("::error::")).expect("an error");
    for said in [
        format!("this job's restore step computed the key `{key}` for this cache"),
        "what changed: env: MODEL_FLAVOR small → large".to_owned(),
        "key: ${{ steps.<restore>.outputs.key }}".to_owned(),
    ] {
        assert!(error.contains(&said), "`{said}` in {error}");
    }
    assert_eq!(entries(&step), 0, "nothing saved under a key no restore computes");

    // With the restore's key, what it missed is saved where the next job's restore looks.
    let save = step.run(&["save"], &[inputs[0], inputs[2], ("key", &key)], NO_STATE);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    step.set_env("MODEL_FLAVOR", "small");
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((r.output("key"), r.output("reused")), (key.as_str(), "true"), "{}", r.stdout);

    // After that warm restore, too: a layer or nothing, never a base under another key.
    step.set_env("MODEL_FLAVOR", "large");
    let after_hit = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(after_hit.code, 1, "{}", after_hit.stdout);
    assert_eq!(entries(&step), 1);

    // Nothing changed: the save computes the restore's key and goes on.
    step.set_env("MODEL_FLAVOR", "small");
    let same = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!((same.code, same.output("save-result")), (0, "skipped-hit"), "{}", same.stdout);
}

#[test]
fn a_save_without_key_in_a_job_that_restored_nothing_computes_its_key() {
    let mut step = Step::new();
    step.set_env("MODEL_FLAVOR", "small");
    // Another cache was restored in the job (another prefix): it says nothing of this one.
    let other = [("path", "other"), ("hash-env", "MODEL_FLAVOR"), ("native", "none"), ("prefix", "other")];
    step.run(&["restore"], &other, NO_STATE);
    step.set_env("MODEL_FLAVOR", "large");
    write(&step.ws.join("out/model.pth"), b"weights");
    let inputs = [("path", "out"), ("hash-env", "MODEL_FLAVOR"), ("native", "none")];
    let save = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    assert_eq!(step.run(&["restore"], &inputs, NO_STATE).output("reused"), "true");
}
