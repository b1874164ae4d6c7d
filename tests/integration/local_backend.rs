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

/// A FIFO at `path` (what someone sharing the store could plant).
fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0, "mkfifo {}", path.display());
}

/// The store's file names under `sub` (`entries`, `meta`).
fn names(step: &Step, sub: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(step.cache.join(sub))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Issue 30, finding 3: use records (and entry files) of a shared local store that are not
/// plain files — a FIFO, a link to `/dev/zero`, a linked `meta/` — never hang a restore, a
/// miss's explanation or `list`, never make them grow, and never let a restore or a save touch
/// anything outside the store. Each run is bounded (`timeout 20`), so a hang shows as a failure.
#[test]
fn use_records_that_are_not_plain_files_never_hang_grow_or_reach_out() {
    use std::time::{Duration, SystemTime};
    let mut step = Step::new();
    step.wrapper = vec!["timeout".into(), "20".into()];
    let inputs = [("path", "out"), ("native", "none"), ("prefix", "rec"), ("explain-misses", "true")];
    write(&step.ws.join("out/a"), b"a");
    let saved = step.run(&["save"], &inputs, &Default::default());
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);
    let [entry] = <[String; 1]>::try_from(names(&step, "entries")).unwrap();

    // A FIFO as the record of the entry a restore hits.
    std::fs::remove_file(step.cache.join("meta").join(&entry)).unwrap();
    mkfifo(&step.cache.join("meta").join(&entry));
    let hit = step.run(&["restore"], &inputs, &Default::default());
    assert_eq!(hit.code, 0, "a FIFO record hung the restore (124: killed):\n{}", hit.stdout);
    assert_eq!(hit.output("reused"), "true", "{}", hit.stdout);

    // A FIFO record and a FIFO entry file of other entries of the prefix: a miss is explained.
    let other = entry.replacen("rec-", "rec-f", 1);
    mkfifo(&step.cache.join("meta").join(&other));
    mkfifo(&step.cache.join("entries").join(entry.replacen("rec-", "rec-e", 1)));
    let miss_inputs =
        [("path", "out"), ("native", "none"), ("prefix", "rec"), ("explain-misses", "true"), ("variant", "x")];
    let miss = step.run(&["restore"], &miss_inputs, &Default::default());
    assert_eq!(miss.code, 0, "a FIFO hung the explanation (124: killed):\n{}", miss.stdout);
    assert_eq!(miss.output("miss-reason"), "not-found", "{}", miss.stdout);

    // A record linked to /dev/zero: `list` reads a few bytes of it at most.
    let zero = entry.replacen("rec-", "rec-z", 1);
    write(&step.cache.join("entries").join(&zero), b"not an archive");
    std::os::unix::fs::symlink("/dev/zero", step.cache.join("meta").join(&zero)).unwrap();
    let mut list = Command::new("python3");
    list.args(["-c", support::MEASURE_RSS, "timeout", "20", support::exe(), "list", "--prefix=rec"])
        .arg(format!("--workspace={}", step.ws.display()))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", &step.home)
        .env("EXACT_CACHE_DIR", &step.cache);
    let out = list.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rss_mib: f64 =
        stderr.lines().find_map(|l| l.strip_prefix("maxrss-kib=")).and_then(|k| k.parse::<f64>().ok()).unwrap()
            / 1024.0;
    assert!(out.status.success(), "list: {stderr}");
    assert!(rss_mib < 100.0, "list grew to {rss_mib:.0} MiB reading a record linked to /dev/zero");
    assert!(stderr.contains("ignoring the record `meta/"), "one warning says what was ignored: {stderr}");

    // A linked `meta/`: a restore changes no time outside, a save makes no file there.
    let outside = step.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let victim = outside.join(&entry);
    write(&victim, b"someone else's");
    let long_ago = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    filetime::set_file_mtime(&victim, filetime::FileTime::from_system_time(long_ago)).unwrap();
    std::fs::rename(step.cache.join("meta"), step.dir.path().join("meta-aside")).unwrap();
    std::os::unix::fs::symlink(&outside, step.cache.join("meta")).unwrap();
    let hit = step.run(&["restore"], &inputs, &Default::default());
    assert_eq!(hit.output("reused"), "true", "{}", hit.stdout);
    assert_eq!(std::fs::metadata(&victim).unwrap().modified().unwrap(), long_ago, "a time changed outside");
    write(&step.ws.join("out/b"), b"b");
    let saved = step.run(&["save"], &[("path", "out"), ("native", "none"), ("prefix", "rec2")], &Default::default());
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);
    let made: Vec<_> = std::fs::read_dir(&outside).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(made.len(), 1, "a save made a file outside the store: {made:?}");
}

/// Issue 30, finding 7: a restore needs no write access to the local store. As an unprivileged
/// user, in a store that user may only read, a restore hits, records nothing and warns about
/// nothing (an entry without a record included).
#[test]
fn a_restore_from_a_store_it_may_only_read_hits_and_warns_about_nothing() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipped: needs root and setpriv to run the binary as uid 65534");
        return;
    }
    let mut step = Step::new();
    let inputs = [("path", "out"), ("native", "none"), ("prefix", "ro")];
    write(&step.ws.join("out/a"), b"a");
    let saved = step.run(&["save"], &inputs, &Default::default());
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);
    let [entry] = <[String; 1]>::try_from(names(&step, "entries")).unwrap();
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    // Everything on the way readable, the workspace and the runner's files nobody's own, the
    // store root's and read-only to nobody; one entry without its record.
    let mut dir = step.ws.as_path();
    while dir.starts_with(step.dir.path()) {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir = dir.parent().unwrap();
    }
    for owned in [&step.ws, &step.home, &step.runner_temp] {
        for entry in walkdir::WalkDir::new(owned) {
            std::os::unix::fs::lchown(entry.unwrap().path(), Some(65534), Some(65534)).unwrap();
        }
    }
    std::fs::create_dir_all(step.dir.path().join("run-1")).unwrap();
    std::os::unix::fs::chown(step.dir.path().join("run-1"), Some(65534), Some(65534)).unwrap();
    let record = step.cache.join("meta").join(&entry);
    let before = std::fs::metadata(&record).unwrap().modified().unwrap();
    step.wrapper =
        ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"].map(String::from).to_vec();
    let hit = step.run(&["restore"], &inputs, &Default::default());
    assert_eq!(hit.output("reused"), "true", "{}", hit.stdout);
    assert!(!hit.stdout.contains("::warning::"), "{}", hit.stdout);
    assert_eq!(std::fs::metadata(&record).unwrap().modified().unwrap(), before, "nothing recorded");
    std::fs::remove_file(&record).unwrap();
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    std::fs::create_dir_all(step.dir.path().join("run-2")).unwrap();
    std::os::unix::fs::chown(step.dir.path().join("run-2"), Some(65534), Some(65534)).unwrap();
    let hit = step.run(&["restore"], &inputs, &Default::default());
    assert_eq!(hit.output("reused"), "true", "{}", hit.stdout);
    assert!(!hit.stdout.contains("::warning::"), "{}", hit.stdout);
    assert!(!record.exists(), "no record made in a store it may only read");
}
