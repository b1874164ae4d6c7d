//! The v1 protocol end to end against the local v1 REST service (GHES-like), and its faults.
//! nektos/act's real cache server is exercised in tests/integration/act_cache_server.rs.

use exact_cache::archive::Compression;
use exact_cache::keys::cache_version;

use crate::support::services::{Fault, Op, Services};
use crate::support::{NO_STATE, Step, assert_shown, snapshot, write};

const INPUTS: [(&str, &str); 2] = [("path", "out"), ("native", "none")];

#[test]
fn round_trip_with_chunked_uploads_and_ranged_downloads() {
    let services = Services::start();
    let mut step = Step::against(services.v1_env());
    step.set_env("EXACT_CACHE_UPLOAD_BLOCK_MIB", "0.25");
    step.set_env("EXACT_CACHE_DOWNLOAD_CHUNK_MIB", "0.25");
    // A whole archive of 2.4 MB (an entry of packs is small whatever its files hold).
    step.set_env("EXACT_CACHE_CONTENT", "whole");
    let data: Vec<u8> = (0..600_000u32).flat_map(|i| (i.wrapping_mul(2654435761)).to_le_bytes()).collect();
    write(&step.ws.join("out/w.bin"), &data);
    write(&step.ws.join("out/e.expected"), b"e");
    let inputs = [("path", "out"), ("native", "none"), ("compression", "none")];
    let save = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    // The save's log names the store (GitHub cache service v1).
    assert_shown!(step.dir.path(), "v1_save_names_the_store", save.group("Save "));
    assert!(services.faults.calls(Op::V1Upload) >= 9, "chunked: {}", services.faults.calls(Op::V1Upload));
    let before = snapshot(&step.ws.join("out"));
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(restore.output("reused"), "true", "{}", restore.stdout);
    assert!(services.faults.calls(Op::V1Download) >= 9, "ranged");
    assert_eq!(snapshot(&step.ws.join("out")), before);
    assert_eq!(*services.faults.auth_to_blob.lock().unwrap(), 0, "no token on archive downloads");
    let secret = "0123456789abcdef0123456789abcdef";
    assert!(restore.stdout.contains(&format!("::add-mask::v1/{secret}")), "the cache URL's secret is masked");
    assert!(!restore.readable().contains(secret));

    // The save after a warm restore finds the restore's record: it writes nothing.
    let again = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(again.output("save-result"), "skipped-hit", "{}", again.stdout);
    assert_eq!(services.faults.calls(Op::V1Reserve), 1);

    // A conflict only the reservation reveals (another job saved meanwhile): 409, `exists`.
    write(&step.ws.join("out/new"), b"n");
    let other = [("path", "out"), ("native", "none"), ("compression", "none"), ("variant", "race")];
    services.faults.push(
        Op::V1Reserve,
        Fault::Status { code: 409, retry_after: None, msg: "Cache already exists." },
        1,
    );
    let raced = step.run(&["save"], &other, NO_STATE);
    assert_eq!((raced.code, raced.output("save-result")), (0, "exists"), "{}", raced.stdout);
}

#[test]
fn faults_end_as_warnings_and_misses() {
    let services = Services::start();
    let step = Step::against(services.v1_env());
    write(&step.ws.join("out/a"), b"a");
    assert_eq!(step.run(&["save"], &INPUTS, NO_STATE).output("save-result"), "saved");
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    let before = snapshot(&step.ws);

    // A `Retry-After` longer than a step waits (cache_rules.rs has the one it waits out).
    services.faults.push(Op::V1Lookup, Fault::Status { code: 429, retry_after: Some(600), msg: "slow down" }, 1);
    let r = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!((r.code, r.output("reused"), r.output("miss-reason")), (0, "false", "service-error"));
    // The warning names the status and the planted `Retry-After`.
    assert_shown!(step.dir.path(), "v1_a_long_retry_after", crate::support::planted(&r.said(), "600 s"));
    assert_eq!(snapshot(&step.ws), before);

    services.faults.push(Op::V1Download, Fault::Reset { after: 10 }, 1);
    let r = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!(r.output("reused"), "true", "resumed after a reset: {}", r.stdout);
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();

    services.faults.push(Op::V1Download, Fault::Truncate { keep: 10 }, 100);
    let r = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!((r.output("reused"), r.output("miss-reason")), ("false", "service-error"), "{}", r.stdout);
    assert_eq!(snapshot(&step.ws), before);
    services.faults.clear();

    write(&step.ws.join("out/b"), b"b");
    let second = [("path", "out"), ("native", "none"), ("variant", "2")];
    services.faults.push(Op::V1Commit, Fault::Status { code: 500, retry_after: None, msg: "broken file" }, 100);
    let r = step.run(&["save"], &second, NO_STATE);
    assert_eq!((r.code, r.output("save-result")), (0, "error"), "{}", r.stdout);
}

#[test]
fn prefix_matches_are_misses_before_any_download() {
    let services = Services::start();
    let step = Step::against(services.v1_env());
    let key = step.run(&["fingerprint"], &INPUTS, NO_STATE).output("key").to_owned();
    services.plant_v1(&format!("{key}x"), &cache_version(&["out"], Compression::Zstd), b"someone else's");
    let r = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!((r.output("cache-hit"), r.output("miss-reason")), ("false", "prefix-only"), "{}", r.stdout);
    assert_eq!(services.faults.calls(Op::V1Download), 0);
}
