//! The local directory backend under concurrent use by separate processes.

use exact_cache::backend::{Backend, Committed, LocalBackend, Reservation};
use exact_cache::keys::Key;
use std::io::{Read, Write};
use std::process::{Command, Stdio};

use crate::support::{self, Step, write};

#[test]
fn entries_are_immutable_and_appear_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let backend = LocalBackend::new(dir.path());
    let key = Key::from(format!("p-{}", "a".repeat(64)));
    assert!(backend.lookup(&key, &"v1".into()).unwrap().is_none());
    let Reservation::Reserved(mut upload) = backend.reserve(&key, &"v1".into()).unwrap() else { panic!("reserved") };
    upload.write_all(b"first").unwrap();
    assert!(backend.lookup(&key, &"v1".into()).unwrap().is_none(), "an entry is invisible until committed");
    assert_eq!(upload.commit().unwrap(), Committed::Saved);

    assert!(matches!(backend.reserve(&key, &"v1".into()).unwrap(), Reservation::Exists));
    let entry = backend.lookup(&key, &"v1".into()).unwrap().unwrap();
    assert_eq!(entry.size, Some(5));
    let mut bytes = Vec::new();
    backend.open(&entry).unwrap().read_to_end(&mut bytes).unwrap();
    assert_eq!(bytes, b"first");
    assert!(backend.lookup(&key, &"v2".into()).unwrap().is_none(), "the version is part of the identity");
    assert!(!format!("{entry:?}").contains(dir.path().to_str().unwrap()), "locations never print");

    // Two writers race: the first commit wins, the second hears `Exists`.
    let other = Key::from(format!("p-{}", "b".repeat(64)));
    let (Reservation::Reserved(mut a), Reservation::Reserved(mut b)) =
        (backend.reserve(&other, &"v1".into()).unwrap(), backend.reserve(&other, &"v1".into()).unwrap())
    else {
        panic!("both reserve before either commits")
    };
    a.write_all(b"from a").unwrap();
    b.write_all(b"from b, longer").unwrap();
    assert_eq!(b.commit().unwrap(), Committed::Saved);
    assert_eq!(a.commit().unwrap(), Committed::Exists);
    let mut bytes = Vec::new();
    backend.open(&backend.lookup(&other, &"v1".into()).unwrap().unwrap()).unwrap().read_to_end(&mut bytes).unwrap();
    assert_eq!(bytes, b"from b, longer");
    assert_eq!(std::fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0, "no temporary files left");
}

#[test]
fn two_processes_saving_one_key_while_others_restore() {
    let step = Step::new();
    // Enough data that the two saves overlap in time.
    for i in 0..200 {
        write(&step.ws.join(format!("out/f{i:03}.bin")), &vec![i as u8; 64 * 1024]);
    }
    let inputs = [("path", "out"), ("native", "none"), ("prefix", "race"), ("allow-machine-only-key", "true")];
    let spawn = |args: &[&str], extra: &[(&str, &str)]| {
        let mut cmd = Command::new(support::exe());
        cmd.args(args)
            .env("EXACT_CACHE_DIR", &step.cache)
            .env("RUNNER_TEMP", &step.runner_temp)
            .env_remove("GITHUB_ACTIONS")
            .env_remove("GITHUB_OUTPUT")
            .current_dir(&step.ws)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in inputs.iter().chain(extra) {
            cmd.arg(format!("--{k}={v}"));
        }
        cmd.spawn().unwrap()
    };
    let savers: Vec<_> = (0..2).map(|_| spawn(&["save"], &[])).collect();
    // Restores running at the same time into another directory see nothing or everything.
    let restore_ws = step.dir.path().join("restore-ws");
    std::fs::create_dir_all(&restore_ws).unwrap();
    let mut restore_results = Vec::new();
    for _ in 0..6 {
        let out = Command::new(support::exe())
            .args([
                "restore",
                "--path=out",
                "--native=none",
                "--prefix=race",
                "--allow-machine-only-key",
                "--workspace",
            ])
            .arg(&restore_ws)
            .env("EXACT_CACHE_DIR", &step.cache)
            .env("RUNNER_TEMP", &step.runner_temp)
            .env_remove("GITHUB_ACTIONS")
            .env_remove("GITHUB_OUTPUT")
            .output()
            .unwrap();
        restore_results.push(String::from_utf8(out.stdout).unwrap());
    }
    let results: Vec<String> =
        savers.into_iter().map(|c| String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()).collect();
    let outcome = |text: &str| text.lines().find_map(|l| l.strip_prefix("save-result=")).unwrap_or("?").to_owned();
    let mut outcomes: Vec<String> = results.iter().map(|r| outcome(r)).collect();
    outcomes.sort();
    assert_eq!(outcomes, ["exists", "saved"], "{results:?}");
    for r in &restore_results {
        let reason = r.lines().find_map(|l| l.strip_prefix("miss-reason=")).unwrap();
        assert!(reason == "not-found" || reason == "none", "a concurrent restore saw `{reason}`:\n{r}");
    }
    assert_eq!(std::fs::read_dir(step.cache.join("entries")).unwrap().count(), 1);
}

#[test]
fn a_save_sweeps_uploads_that_killed_saves_left_behind() {
    use std::time::{Duration, SystemTime};
    let step = Step::new();
    let tmp = step.cache.join("tmp");
    // A save killed with SIGKILL: its process (a pid above the kernel's limit) is gone.
    let dead = tmp.join("upload-4194999-aBc123");
    // An older version's name, without a pid, two days old.
    let old = tmp.join("upload-Xy12Zq");
    // A save running now, and one whose pid means nothing here (another container) but that
    // holds its lock.
    let live = tmp.join(format!("upload-{}-dEf456", std::process::id()));
    let locked = tmp.join("upload-4194998-gHi789");
    for p in [&dead, &old, &live, &locked] {
        write(p, b"half an archive");
    }
    let two_days_ago = SystemTime::now() - Duration::from_secs(2 * 24 * 60 * 60);
    filetime::set_file_mtime(&old, filetime::FileTime::from_system_time(two_days_ago)).unwrap();
    let lock = std::fs::File::open(&locked).unwrap();
    lock.lock().unwrap();

    write(&step.ws.join("out/a"), b"a");
    let r = step.run(&["save"], &[("path", "out"), ("native", "none")], &Default::default());
    assert_eq!(r.output("save-result"), "saved", "{}", r.stdout);
    assert!(!dead.exists(), "the dead process's upload is swept");
    assert!(!old.exists(), "a day-old upload is swept");
    assert!(live.exists() && locked.exists(), "uploads in progress stay");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 2, "{left:?}");
    drop(lock);
}
