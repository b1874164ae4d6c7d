//! The official `@actions/cache` client (npm, v6) against the local test service: it saves and
//! restores through it over v2 and v1, which proves the service speaks the real protocol; and
//! its entries and ours live side by side under the same key without either seeing the other.

use std::path::Path;

use crate::support::needs;
use crate::support::services::{BlobStore, Services, azurite};
use crate::support::{NO_STATE, Step, counting, snapshot, write};

/// `node actions-cache.mjs <op> <key> <paths…>` in `ws`, however it ends.
pub(crate) fn run_official(
    env: &[(String, String)],
    ws: &Path,
    op: &str,
    key: &str,
    paths: &[&str],
) -> std::process::Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node/actions-cache.mjs");
    assert!(azurite::node_modules().join("@actions/cache").exists(), "run `npm ci` in tests/node");
    let temp = tempfile::tempdir().unwrap();
    std::process::Command::new("node")
        .arg(script)
        .args([op, key])
        .args(paths)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("GITHUB_WORKSPACE", ws)
        .env("RUNNER_TEMP", temp.path())
        .env("NO_PROXY", "127.0.0.1")
        .output()
        .unwrap()
}

/// `node actions-cache.mjs <op> <key> <paths…>` in `ws`; the JSON line it prints.
fn official(env: &[(String, String)], ws: &Path, op: &str, key: &str, paths: &[&str]) -> serde_json::Value {
    let out = run_official(env, ws, op, key, paths);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "@actions/cache {op} failed:\n{stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)))
}

pub(crate) fn official_round_trip(env: Vec<(String, String)>) {
    let ws = tempfile::tempdir().unwrap();
    write(&ws.path().join("out/model.pth"), &vec![5u8; 2_000_000]);
    write(&ws.path().join("out/sub/x.expected"), b"x");
    let before = snapshot(&ws.path().join("out"));
    let saved = official(&env, ws.path(), "save", "peer-key-1", &["out"]);
    assert!(saved["cacheId"].as_i64().unwrap() > 0, "{saved}");
    std::fs::remove_dir_all(ws.path().join("out")).unwrap();
    let restored = official(&env, ws.path(), "restore", "peer-key-1", &["out"]);
    assert_eq!(restored["matchedKey"], "peer-key-1");
    assert_eq!(snapshot(&ws.path().join("out")), before);
    let missed = official(&env, ws.path(), "restore", "peer-key-2", &["out"]);
    assert_eq!(missed["matchedKey"], serde_json::Value::Null);
}

#[needs(azurite, actions_cache)]
fn the_official_client_saves_and_restores_through_the_v2_service() {
    let services = Services::start_with(BlobStore::AzuriteFront);
    official_round_trip(services.v2_env());
    assert_eq!(*services.faults.auth_to_blob.lock().unwrap(), 0);
    assert!(services.entries().iter().any(|e| e.key == "peer-key-1" && e.finalized));
}

#[needs(azurite, actions_cache)]
fn the_official_client_saves_and_restores_through_the_v1_service() {
    let services = Services::start_with(BlobStore::AzuriteFront);
    official_round_trip(services.v1_env());
}

#[needs(azurite, actions_cache)]
fn our_entries_and_the_official_clients_never_see_each_other() {
    let services = Services::start_with(BlobStore::AzuriteFront);
    let mut step = Step::new();
    step.extra_env = services.v2_env();
    let inputs = [("path", "out"), ("native", "none"), ("prefix", "shared")];
    let key = step.run(&["fingerprint"], &inputs, NO_STATE).output("key").to_owned();

    // The official client saves *its* tree under exactly our key.
    write(&step.ws.join("out/owner.txt"), b"actions/cache");
    official(&step.extra_env, &step.ws, "save", &key, &["out"]);
    // Ours, under the same key: a different version, so a separate entry.
    write(&step.ws.join("out/owner.txt"), b"exact-cache");
    let save = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    let versions: Vec<_> = services.entries().into_iter().filter(|e| e.key == key).map(|e| e.version).collect();
    assert_eq!(versions.len(), 2);
    assert_ne!(versions[0], versions[1]);

    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    let ours = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(ours.output("reused"), "true", "{}", ours.stdout);
    assert_eq!(std::fs::read(step.ws.join("out/owner.txt")).unwrap(), b"exact-cache");

    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    let theirs = official(&step.extra_env, &step.ws, "restore", &key, &["out"]);
    assert_eq!(theirs["matchedKey"], key.as_str());
    assert_eq!(std::fs::read(step.ws.join("out/owner.txt")).unwrap(), b"actions/cache");

    // An entry only the official client saved is invisible to us.
    write(&step.ws.join("other/f"), b"f");
    let other_inputs = [("path", "other"), ("native", "none"), ("prefix", "shared")];
    let other_key = step.run(&["fingerprint"], &other_inputs, NO_STATE).output("key").to_owned();
    official(&step.extra_env, &step.ws, "save", &other_key, &["other"]);
    let r = step.run(&["restore"], &other_inputs, NO_STATE);
    assert_eq!(r.output("miss-reason"), "not-found");
}

/// The benchmark's minimal blob store serves both clients like Azurite does.
#[needs(actions_cache)]
fn the_fast_blob_store_serves_both_clients() {
    let services = Services::start_with(BlobStore::Fast { name: String::new() });
    official_round_trip(services.v2_env());
    let mut step = Step::new();
    step.extra_env = services.v2_env();
    step.set_env("EXACT_CACHE_UPLOAD_BLOCK_MIB", "1");
    step.set_env("EXACT_CACHE_SINGLE_PUT_MIB", "1");
    write(&step.ws.join("out/w.bin"), &counting(1_000_000));
    let inputs = [("path", "out"), ("native", "none"), ("compression", "none")];
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("save-result"), "saved");
    let before = snapshot(&step.ws.join("out"));
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(r.output("reused"), "true", "{}", r.stdout);
    assert_eq!(snapshot(&step.ws.join("out")), before);
}
