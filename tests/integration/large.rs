//! Size and memory: a large tree round-trips byte-identically through the CLI and the local
//! backend, and restoring a 2 GB entry streams (bounded peak memory).

use std::path::Path;
use std::process::Command;

use crate::support::{self, random_file, snapshot, write};

/// Run the CLI; returns stdout and the peak RSS in MiB. The measurement goes through a small
/// Python parent: `ru_maxrss` survives fork and exec, so a child forked straight from this
/// (large) test process would report the test's own memory.
fn cli(ws: &Path, cache: &Path, args: &[&str]) -> (String, f64) {
    let out = Command::new("python3")
        .args(["-c", support::MEASURE_RSS, support::exe()])
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .env("EXACT_CACHE_DIR", cache)
        .env("RUNNER_TEMP", cache.parent().unwrap())
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_OUTPUT")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{args:?} failed:\n{stderr}\n{stdout}");
    let kib: f64 = stderr.lines().find_map(|l| l.strip_prefix("maxrss-kib=")).unwrap().parse().unwrap();
    (stdout, kib / 1024.0)
}

fn output<'a>(stdout: &'a str, name: &str) -> &'a str {
    stdout.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix('=')).unwrap_or_else(|| panic!("{name} in {stdout}"))
}

#[test]
#[ignore = "slow: 200 MB in 20k files"]
fn a_tree_of_200_mb_and_20k_files_round_trips() {
    let _disk = support::one_disk_heavy_test_at_a_time(2);
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let cache = dir.path().join("cache");
    random_file(&ws.join("out/weights.bin"), 200 << 20);
    for i in 0..20_000u32 {
        let path = ws.join(format!("out/kernels/{:03}/k{i:05}.py", i % 200));
        write(&path, format!("# kernel {i}\n{}\n", "x = 1\n".repeat((i % 40) as usize)).as_bytes());
        if i % 97 == 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    for i in 0..50 {
        std::fs::create_dir_all(ws.join(format!("out/empty/{i}/deeper"))).unwrap();
    }
    std::os::unix::fs::symlink("weights.bin", ws.join("out/latest")).unwrap();
    std::os::unix::fs::symlink("../weights.bin", ws.join("out/kernels/weights")).unwrap();
    let before = snapshot(&ws.join("out"));
    assert!(before.len() > 20_000);

    let args = ["--path=out", "--prefix=large", "--native=os,arch,isa", "--allow-machine-only-key"];
    let (saved, _) = cli(&ws, &cache, &[&["save"][..], &args].concat());
    assert_eq!(output(&saved, "save-result"), "saved");
    std::fs::remove_dir_all(ws.join("out")).unwrap();
    let (restored, _) = cli(&ws, &cache, &[&["restore"][..], &args].concat());
    assert_eq!(output(&restored, "reused"), "true");
    assert_eq!(output(&restored, "restored-files"), "20003");
    assert_eq!(snapshot(&ws.join("out")), before);
}

#[test]
#[ignore = "slow: a 2 GB entry"]
fn restoring_a_2_gb_entry_streams_in_bounded_memory() {
    let _disk = support::one_disk_heavy_test_at_a_time(5);
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let cache = dir.path().join("cache");
    random_file(&ws.join("big/blob.bin"), 2 << 30);
    let args = ["--path=big", "--prefix=big", "--native=none", "--allow-machine-only-key"];
    let (saved, save_usage) = cli(&ws, &cache, &[&["save"][..], &args].concat());
    assert_eq!(output(&saved, "save-result"), "saved");
    std::fs::remove_dir_all(ws.join("big")).unwrap();
    let (restored, usage) = cli(&ws, &cache, &[&["restore"][..], &args].concat());
    assert_eq!(output(&restored, "reused"), "true");
    assert_eq!(output(&restored, "restored-bytes"), (2u64 << 30).to_string());
    let (restore_mb, save_mb) = (usage, save_usage);
    eprintln!("peak RSS: save {save_mb:.0} MiB, restore {restore_mb:.0} MiB (2 GiB entry)");
    assert!(restore_mb < 200.0, "restore peak RSS {restore_mb:.0} MiB");
}
