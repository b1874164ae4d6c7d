//! The v2 protocol end to end against the local Twirp service, its blobs in the in-repo fast blob
//! store (and in Azurite for the round trips that prove it against the real one): round trips and
//! every injected fault, with the outcome a user would expect.

use exact_cache::archive::Compression;
use exact_cache::keys::{Key, cache_version};
use exact_cache::outcome::SaveResult;
use std::collections::BTreeMap;

use crate::support::needs;
use crate::support::services::{self, BlobStore, Fault, Op, Services};
use crate::support::{self, NO_STATE, Step, generate_model, random_file, snapshot, write};

#[needs(azurite)]
fn round_trip_through_twirp_and_azurite_is_byte_identical() {
    let services = Services::start_with(BlobStore::AzuriteFront);
    let step = Step::against(services.v2_env());
    write(&step.ws.join("out/a.bin"), &vec![7u8; 300_000]);
    write(&step.ws.join("out/sub/b.txt"), b"hello");
    let inputs = [("path", "out"), ("native", "none")];
    let save = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    // The save's log names the store (GitHub cache service v2).
    support::assert_shown!(step.dir.path(), "v2_save_names_the_store", save.group("Save "));
    let before = snapshot(&step.ws.join("out"));
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(restore.output("reused"), "true", "{}", restore.stdout);
    assert_eq!(snapshot(&step.ws.join("out")), before);
    assert_eq!(*services.faults.auth_to_blob.lock().unwrap(), 0, "the runtime token never goes to the blob host");
    assert!(!restore.stdout.contains("sig="), "signed URLs never print");
}

const INPUTS: [(&str, &str); 3] = [("path", "out"), ("native", "none"), ("variant", "faults")];

/// A step with a saved entry, and the tree it holds.
fn saved(services: &Services) -> (Step, BTreeMap<String, String>) {
    let step = Step::against(services.v2_env());
    generate_model(&step.ws, 200_000);
    let save = step.run(&["save"], &INPUTS, NO_STATE);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    let tree = snapshot(&step.ws.join("out"));
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    (step, tree)
}

/// The workspace must hold exactly what it held before a failed restore.
fn assert_untouched(step: &Step, before: &BTreeMap<String, String>) {
    assert_eq!(&snapshot(&step.ws), before, "nothing partially restored");
}

#[test]
fn large_entries_use_blocks_and_parallel_ranges() {
    let services = Services::start();
    let mut step = Step::against(services.v2_env());
    for (k, v) in [
        ("EXACT_CACHE_UPLOAD_BLOCK_MIB", "1"),
        ("EXACT_CACHE_SINGLE_PUT_MIB", "1"),
        ("EXACT_CACHE_DOWNLOAD_CHUNK_MIB", "1"),
        ("EXACT_CACHE_PROGRESS_SECONDS", "0"),
        // A whole archive of 12 MiB (an entry of packs is small whatever its files hold).
        ("EXACT_CACHE_CONTENT", "whole"),
    ] {
        step.set_env(k, v);
    }
    let data = support::noise(12 << 20, 0x9e3779b97f4a7c15);
    write(&step.ws.join("out/weights.bin"), &data);
    let inputs = [("path", "out"), ("native", "none"), ("compression", "none")];
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("save-result"), "saved");
    // Twelve 1 MiB blocks and a block list, not one Put Blob.
    assert!(services.faults.calls(Op::BlobPut) >= 13, "{} puts", services.faults.calls(Op::BlobPut));
    let before = snapshot(&step.ws.join("out"));
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(restore.output("reused"), "true", "{}", restore.stdout);
    assert!(services.faults.calls(Op::BlobGet) >= 12, "ranged GETs");
    // Progress lines while it runs, and a final size/time/throughput line.
    let save_log =
        &step.run(&["save"], &[("path", "out"), ("native", "none"), ("variant", "progress")], NO_STATE).stdout;
    assert!(save_log.lines().any(|l| l.starts_with("archive: ") && l.contains(" of 12.0 MiB (")), "{save_log}");
    assert!(restore.stdout.lines().any(|l| l.starts_with("download: 12.0 MiB in ")), "{}", restore.stdout);
    assert_eq!(snapshot(&step.ws.join("out")), before);
}

#[test]
fn rate_limits_stop_the_save_and_every_later_call() {
    let services = Services::start();
    let step = Step::against(services.v2_env());
    write(&step.ws.join("out/a"), b"a");
    // A `Retry-After` longer than a step waits (cache_rules.rs has the one it waits out).
    services.faults.push(Op::Create, Fault::Status { code: 429, retry_after: Some(600), msg: "rate limited" }, 5);
    let r = step.run(&["save"], &INPUTS, NO_STATE);
    assert_eq!(r.code, 0);
    assert_eq!(r.output("save-result"), "rate-limited");
    assert_eq!(r.output("saved"), "false");
    // The warning names the call, the status and the planted `Retry-After`.
    support::assert_shown!(step.dir.path(), "v2_a_long_retry_after", support::planted(&r.said(), "600 s"));
    assert_eq!(services.faults.calls(Op::Create), 1, "a 429 not waited out is never retried");
    assert_eq!(services.faults.calls(Op::BlobPut), 0);
    let strict = step.run(&["save"], &[INPUTS[0], INPUTS[1], INPUTS[2], ("strict", "true")], NO_STATE);
    assert_eq!(strict.code, 1);
    assert_eq!(strict.output("save-result"), "rate-limited");
}

#[test]
fn transient_errors_are_retried_and_persistent_ones_become_a_miss() {
    let services = Services::start();
    let (step, tree) = saved(&services);
    services.faults.push(Op::Lookup, Fault::Status { code: 503, retry_after: None, msg: "busy" }, 2);
    let r = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!(r.output("reused"), "true", "two 503s, then success: {}", r.stdout);
    assert_eq!(snapshot(&step.ws.join("out")), tree);

    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    let before = snapshot(&step.ws);
    let calls = services.faults.calls(Op::Lookup);
    services.faults.push(Op::Lookup, Fault::Status { code: 500, retry_after: None, msg: "down" }, 100);
    let r = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!(r.code, 0);
    assert_eq!(
        (r.output("cache-hit"), r.output("reused"), r.output("miss-reason")),
        ("false", "false", "service-error")
    );
    // The warning names the call and the server's answer.
    support::assert_shown!(step.dir.path(), "v2_a_lookup_that_fails", r.said());
    let tries = services.faults.calls(Op::Lookup) - calls;
    assert_eq!(tries, 4, "bounded retries: 4 of the one lookup that answers the newest base");
    assert_untouched(&step, &before);
}

#[test]
fn a_reset_or_truncated_download_resumes_or_misses_cleanly() {
    let services = Services::start();
    let (step, tree) = saved(&services);
    services.faults.push(Op::BlobGet, Fault::Reset { after: 1000 }, 1);
    let r = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!(r.output("reused"), "true", "resumed after a reset: {}", r.stdout);
    assert_eq!(snapshot(&step.ws.join("out")), tree);
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();

    services.faults.push(Op::BlobGet, Fault::Truncate { keep: 100 }, 1);
    let r = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!(r.output("reused"), "true", "a short body is retried: {}", r.stdout);
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();

    let before = snapshot(&step.ws);
    services.faults.push(Op::BlobGet, Fault::Reset { after: 1000 }, 100);
    let r = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!(r.code, 0);
    assert_eq!((r.output("reused"), r.output("miss-reason")), ("false", "service-error"), "{}", r.stdout);
    assert_untouched(&step, &before);
}

#[test]
fn a_stalled_download_times_out() {
    let services = Services::start();
    let (mut step, _) = saved(&services);
    step.set_env("EXACT_CACHE_READ_TIMEOUT_SECONDS", "0.5");
    step.set_env("EXACT_CACHE_ATTEMPTS", "2");
    let before = snapshot(&step.ws);
    services.faults.push(Op::BlobGet, Fault::Stall { seconds: 3.0 }, 100);
    let started = std::time::Instant::now();
    let r = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!(r.code, 0);
    assert_eq!((r.output("reused"), r.output("miss-reason")), ("false", "timeout"), "{}", r.stdout);
    assert!(started.elapsed().as_secs_f64() < 3.0, "gave up without waiting for the stall");
    assert_untouched(&step, &before);

    // The overall deadline holds even when every single read is quick enough.
    let services = Services::start();
    let (mut step, _) = saved(&services);
    step.set_env("EXACT_CACHE_DOWNLOAD_DEADLINE_SECONDS", "0.5");
    services.faults.push(Op::BlobGet, Fault::Stall { seconds: 1.0 }, 100);
    let r = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!(r.output("miss-reason"), "timeout", "{}", r.stdout);
    assert!(r.stdout.contains("the download did not finish within 500 ms"), "{}", r.stdout);
}

#[test]
fn a_prefix_match_is_never_downloaded() {
    let services = Services::start();
    let step = Step::against(services.v2_env());
    let key = step.run(&["fingerprint"], &INPUTS, NO_STATE).output("key").to_owned();
    let version = cache_version(&["out"], Compression::Zstd);
    // An entry whose key has ours as a prefix, with our version: the service offers it.
    services.plant(&format!("{key}-other"), &version, b"not an archive of ours");
    let before = snapshot(&step.ws);
    let r = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!(r.code, 0);
    assert_eq!((r.output("cache-hit"), r.output("reused"), r.output("miss-reason")), ("false", "false", "prefix-only"));
    assert!(r.stdout.contains(&format!("the service offered `{key}-other`")), "{}", r.stdout);
    assert_eq!(services.faults.calls(Op::BlobGet), 0, "not a byte downloaded");
    assert_untouched(&step, &before);

    // The same when the service claims a different key for an entry, or none at all.
    for claimed in ["exact-cache-something-else", ""] {
        services.faults.push(Op::Lookup, Fault::WrongMatchedKey(claimed.into()), 1);
        let r = step.run(&["restore"], &INPUTS, NO_STATE);
        assert_eq!(r.output("miss-reason"), "prefix-only", "claimed `{claimed}`");
        assert_eq!(services.faults.calls(Op::BlobGet), 0);
    }
}

#[test]
fn read_only_tokens_conflicts_and_quota() {
    let services = Services::start();
    let step = Step::against(services.v2_env());
    write(&step.ws.join("out/a"), b"a");

    services.faults.push(Op::Create, Fault::ReadOnly, 1);
    let r = step.run(&["save"], &INPUTS, NO_STATE);
    assert_eq!((r.code, r.save_result()), (0, SaveResult::ReadOnly));
    let denied = r.said();

    services.faults.push(
        Op::Create,
        Fault::Status { code: 400, retry_after: None, msg: "insufficient usage to create cache entry" },
        1,
    );
    let r = step.run(&["save"], &INPUTS, NO_STATE);
    // Over its quota the cache is read-only until eviction frees room.
    assert_eq!((r.code, r.save_result()), (0, SaveResult::ReadOnly));
    // Each warning gives the cause: a write denied, insufficient usage.
    let said = format!("--- write denied\n{denied}--- over the quota\n{}", r.said());
    support::assert_shown!(step.dir.path(), "v2_read_only_and_quota", said);

    services.faults.push(
        Op::Create,
        Fault::Status {
            code: 409,
            retry_after: None,
            msg: "cache entry with the same key, version, and scope already exists",
        },
        1,
    );
    let r = step.run(&["save"], &INPUTS, NO_STATE);
    assert_eq!((r.code, r.output("save-result"), r.output("saved")), (0, "exists", "false"));
    assert!(!r.stdout.contains("::warning"), "409 is information: {}", r.stdout);

    // A real conflict: save, then save again.
    assert_eq!(step.run(&["save"], &INPUTS, NO_STATE).output("save-result"), "saved");
    let again = step.run(&["save"], &INPUTS, NO_STATE);
    assert_eq!(again.output("save-result"), "exists");
}

#[test]
fn blob_upload_failures_are_retried_then_reported() {
    let services = Services::start();
    let step = Step::against(services.v2_env());
    write(&step.ws.join("out/a"), b"a");
    services.faults.push(Op::BlobPut, Fault::Status { code: 503, retry_after: None, msg: "ServerBusy" }, 1);
    assert_eq!(step.run(&["save"], &INPUTS, NO_STATE).output("save-result"), "saved");

    write(&step.ws.join("out/b"), b"b");
    let inputs = [("path", "out"), ("native", "none"), ("variant", "second")];
    services.faults.push(Op::BlobPut, Fault::Status { code: 500, retry_after: None, msg: "InternalError" }, 100);
    let r = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!((r.code, r.output("save-result")), (0, "error"), "{}", r.stdout);
    services.faults.clear();
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(restore.output("miss-reason"), "not-found", "an unfinalized entry is never visible");
}

#[test]
fn a_corrupt_blob_is_a_corrupt_miss() {
    let services = Services::start();
    let (step, _) = saved(&services);
    let before = snapshot(&step.ws);
    services.faults.push(Op::BlobGet, Fault::Corrupt { offset: 600 }, 100);
    let r = step.run(&["restore"], &INPUTS, NO_STATE);
    assert_eq!((r.code, r.output("cache-hit"), r.output("entry-exists")), (0, "false", "true"));
    assert_eq!(r.output("miss-reason"), "corrupt", "{}", r.stdout);
    assert_untouched(&step, &before);
}

#[test]
fn cache_mode_read_skips_saving() {
    let services = Services::start();
    let mut step = Step::against(services.v2_env());
    step.set_env("ACTIONS_CACHE_MODE", "read");
    write(&step.ws.join("out/a"), b"a");
    let r = step.run(&["save"], &INPUTS, NO_STATE);
    assert_eq!(r.output("save-result"), "read-only");
    assert_eq!(services.faults.calls(Op::Create), 0);
}

/// 1 GiB through Twirp and Azurite with bounded memory on both sides.
#[needs(azurite)]
#[ignore = "slow: a 1 GiB entry through the v2 service and Azurite"]
fn a_1_gib_entry_round_trips_in_bounded_memory() {
    let _disk = support::one_disk_heavy_test_at_a_time(4);
    let services = Services::start_with(BlobStore::AzuriteFront);
    let mut step = Step::against(services.v2_env());
    step.measure = true;
    random_file(&step.ws.join("big/blob.bin"), 1 << 30);
    let inputs = [("path", "big"), ("native", "none")];
    let save = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    std::fs::remove_dir_all(step.ws.join("big")).unwrap();
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(restore.output("reused"), "true", "{}", restore.stdout);
    assert_eq!(restore.output("restored-bytes"), (1u64 << 30).to_string());
    let (save_mib, restore_mib) = (save.peak_rss_mib.unwrap(), restore.peak_rss_mib.unwrap());
    eprintln!("1 GiB via v2: peak RSS save {save_mib:.0} MiB, restore {restore_mib:.0} MiB");
    assert!(save_mib < 300.0 && restore_mib < 300.0, "save {save_mib:.0} MiB, restore {restore_mib:.0} MiB");
}

/// Uploads are not bound by the per-read idle timeout of downloads: a service that takes longer
/// than that to answer a block (or a slow uplink) is not a failure.
#[test]
fn slow_block_answers_are_not_read_timeouts() {
    let services = Services::start();
    let mut step = Step::against(services.v2_env());
    step.set_env("EXACT_CACHE_READ_TIMEOUT_SECONDS", "0.3");
    step.set_env("EXACT_CACHE_ATTEMPTS", "1");
    write(&step.ws.join("out/a"), b"a");
    services.faults.push(Op::BlobPut, Fault::Stall { seconds: 1.0 }, 1);
    services.faults.push(Op::Finalize, Fault::Stall { seconds: 1.0 }, 1);
    let r = step.run(&["save"], &INPUTS, NO_STATE);
    assert_eq!(r.output("save-result"), "saved", "{}", r.stdout);
}

/// Dropping a download half-way (the unpacker failed) and then the backend, while ranges are
/// still in flight, must not bring the process down (the runtime is never dropped inside one
/// of its own workers).
#[test]
fn dropping_a_download_mid_flight_is_clean() {
    use exact_cache::backend::{Backend, V2Backend, http::Http};
    use exact_cache::runner::SecretSink;
    use std::io::Read;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static PANICS: AtomicUsize = AtomicUsize::new(0);
    let services = Services::start();
    let mut step = Step::against(services.v2_env());
    step.set_env("EXACT_CACHE_DOWNLOAD_CHUNK_MIB", "0.0625");
    write(&step.ws.join("out/big"), &vec![9u8; 2 << 20]);
    let inputs = [("path", "out"), ("native", "none"), ("compression", "none")];
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("save-result"), "saved");
    let key = step.run(&["fingerprint"], &inputs, NO_STATE).output("key").to_owned();

    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        previous(info);
    }));
    let env = exact_cache::env::Env::from_pairs(
        step.extra_env.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>(),
    );
    let http = std::sync::Arc::new(Http::new(&env, SecretSink::detached()).unwrap());
    let backend = V2Backend::new(http, &services.url, services::TOKEN.to_owned()).unwrap();
    let entry = backend.lookup(&Key::from(&key), &cache_version(&["out"], Compression::None)).unwrap().unwrap();
    services.faults.push(Op::BlobGet, Fault::Stall { seconds: 0.5 }, 50);
    let mut reader = backend.open(&entry).unwrap();
    let mut buf = [0u8; 1000];
    reader.read_exact(&mut buf).unwrap();
    drop(reader);
    drop(backend);
    // Instead of waiting to see that nothing happens: nothing the backend asked for is left
    // unanswered at the server (a body counts until it is sent; a request whose connection
    // closed with the backend is dropped), so nothing can reach its tasks later.
    assert!(services.faults.wait_until_blob_front_is_idle(std::time::Duration::from_secs(30)));
    assert_eq!(PANICS.load(Ordering::SeqCst), 0);
}

#[test]
fn a_file_holding_the_runtime_token_never_reaches_the_blob_store() {
    // Whole archives stream blocks while packing goes on; packs are stored once written.
    for content in ["whole", "packs"] {
        let services = Services::start();
        let mut step = Step::against(services.v2_env());
        // Small blocks, no compression: blocks go up while packing continues, and the token
        // would be visible in the uploaded bytes if any part of it were sent.
        // One block in flight and one queued: the packer cannot reach the second file before
        // several blocks of the first were accepted, however slow the machine.
        step.set_env("EXACT_CACHE_UPLOAD_BLOCK_MIB", "1");
        step.set_env("EXACT_CACHE_SINGLE_PUT_MIB", "1");
        step.set_env("EXACT_CACHE_UPLOAD_CONCURRENCY", "1");
        step.set_env("EXACT_CACHE_CONTENT", content);
        let inputs = [("path", "out"), ("native", "none"), ("compression", "none")];
        write(&step.ws.join("out/a-weights.bin"), &support::noise(8 << 20, 7));
        let token = services::TOKEN;
        write(&step.ws.join("out/z-config.json"), format!("{{\"token\": \"{token}\"}}").as_bytes());

        let r = step.run(&["save"], &inputs, NO_STATE);
        assert_eq!(r.code, 0, "{content}: {}", r.stdout);
        assert_eq!((r.output("saved"), r.output("save-result")), ("false", "secret-found"), "{content}");
        assert!(r.stdout.contains("::warning::") && r.stdout.contains("out/z-config.json"), "{}", r.stdout);
        let uploaded = services.faults.blob_put_bytes.lock().unwrap().clone();
        if content == "whole" {
            assert!(uploaded.len() >= 1 << 20, "blocks of the earlier file were streamed: {} bytes", uploaded.len());
        }
        let head = &token.as_bytes()[..8];
        assert!(!uploaded.windows(8).any(|w| w == head), "{content}: not even the token's first bytes were uploaded");
        assert!(services.entries().iter().all(|e| !e.finalized), "{content}: nothing was committed");
        let restore = step.run(&["restore"], &inputs, NO_STATE);
        assert_eq!(restore.output("miss-reason"), "not-found", "{content}");
    }
}
