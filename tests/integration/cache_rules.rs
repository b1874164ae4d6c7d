//! GitHub's cache rules of 2026 (docs/cache-service-protocol.md, the last section) against the
//! local cache service, v2 and v1: `ACTIONS_CACHE_MODE`, a refused read (`cache read denied:`),
//! a refused write (`cache write denied:`) and a cache over its quota, and a rate limit's
//! `Retry-After`. The official `@actions/cache` client meets the same answers, which proves they
//! are the ones it knows (tests at the end).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::needs;
use crate::support::services::{self, BlobStore, Fault, Op, Services};
use crate::support::{NO_STATE, Step, StepResult, assert_shown, snapshot, write};

const INPUTS: [(&str, &str); 3] = [("path", "out"), ("native", "none"), ("variant", "rules")];

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    [&INPUTS[..], extra].concat()
}

/// The v2 or v1 environment of `services`.
fn protocol_env(services: &Services, v1: bool) -> Vec<(String, String)> {
    if v1 { services.v1_env() } else { services.v2_env() }
}

/// The lookup and reservation calls of a protocol.
fn ops(v1: bool) -> (Op, Op) {
    if v1 { (Op::V1Lookup, Op::V1Reserve) } else { (Op::Lookup, Op::Create) }
}

/// A step with an entry saved, its tree removed; and that tree.
fn saved(services: &Services, v1: bool) -> (Step, std::collections::BTreeMap<String, String>) {
    let step = Step::against(protocol_env(services, v1));
    write(&step.ws.join("out/model.pth"), &vec![3u8; 50_000]);
    let save = step.run(&["save"], &INPUTS, NO_STATE);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    let tree = snapshot(&step.ws.join("out"));
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    (step, tree)
}

fn warnings(r: &StepResult) -> Vec<&str> {
    r.stdout.lines().filter_map(|l| l.strip_prefix("::warning::")).collect()
}

/// The finalized entries, packs left out (a save of a new tree stores one beside its entry).
fn finalized(services: &Services) -> usize {
    services.entries().iter().filter(|e| e.finalized && !e.key.contains("-pack.")).count()
}

#[test]
fn cache_mode_none_and_write_only_skip_the_restore_and_say_so() {
    for v1 in [false, true] {
        let services = Services::start();
        let (mut step, tree) = saved(&services, v1);
        let (lookup, _) = ops(v1);
        let before = services.faults.calls(lookup);
        for mode in ["none", "write-only", " Write-Only "] {
            step.set_env("ACTIONS_CACHE_MODE", mode);
            for strict in ["false", "true"] {
                let r = step.run(&["restore"], &with(&[("strict", strict)]), NO_STATE);
                // No failure under `strict`: the runner's policy is no cache trouble.
                assert_eq!(r.code, 0, "{mode}: {}", r.stdout);
                let outputs = (r.output("cache-hit"), r.output("reused"), r.output("miss-reason"));
                assert_eq!(outputs, ("false", "false", "cache-mode"), "{mode}: {}", r.stdout);
                let said = format!("not reused (cache-mode): `ACTIONS_CACHE_MODE` is `{}`", mode.trim().to_lowercase());
                assert!(r.stdout.contains(&said), "{}", r.stdout);
                assert!(warnings(&r).is_empty(), "an info line, no warning: {}", r.stdout);
                assert!(r.summary.contains("cache-mode"), "{}", r.summary);
                // `write-only` regenerates and saves: what the generator reads is recorded.
                let armed = mode.trim().eq_ignore_ascii_case("write-only");
                assert_eq!(r.env.contains_key("EXACT_CACHE_READS_LOG"), armed, "{mode}: {:?}", r.env);
            }
        }
        assert_eq!(services.faults.calls(lookup), before, "nothing was looked up (v1: {v1})");
        assert!(!step.ws.join("out").exists());

        // `read` reads; a value that is none of the four is a warning and reads as `write`.
        for (mode, warned) in [("read", false), ("readonly", true)] {
            step.set_env("ACTIONS_CACHE_MODE", mode);
            let r = step.run(&["restore"], &INPUTS, NO_STATE);
            assert_eq!(r.output("reused"), "true", "{mode}: {}", r.stdout);
            assert_eq!(snapshot(&step.ws.join("out")), tree);
            let warning = warnings(&r).into_iter().find(|w| w.contains("ACTIONS_CACHE_MODE"));
            assert_eq!(warning.is_some(), warned, "{mode}: {}", r.stdout);
            if warned {
                // The warning names the value, the four modes and how it is read.
                assert_shown!(step.dir.path(), "an_unknown_cache_mode", r.said());
            }
            std::fs::remove_dir_all(step.ws.join("out")).unwrap();
        }
    }
}

#[test]
fn cache_mode_read_and_none_skip_the_save_and_write_only_saves_without_reading() {
    for v1 in [false, true] {
        let services = Services::start();
        let mut step = Step::against(protocol_env(&services, v1));
        write(&step.ws.join("out/a"), b"a");
        let (lookup, reserve) = ops(v1);
        for mode in ["read", "none"] {
            step.set_env("ACTIONS_CACHE_MODE", mode);
            // A miss of a job that may not write arms nothing for a save it never makes.
            let missed = step.run(&["restore"], &INPUTS, NO_STATE);
            assert!(missed.env.is_empty(), "{mode}: {:?}", missed.env);
            let r = step.run(&["save"], &with(&[("strict", "true")]), NO_STATE);
            assert_eq!((r.code, r.output("saved"), r.output("save-result")), (0, "false", "read-only"), "{}", r.stdout);
            assert!(r.stdout.contains(&format!("`ACTIONS_CACHE_MODE` is `{mode}`: this job may not write")));
            assert!(warnings(&r).is_empty(), "{}", r.stdout);
        }
        // The `read` restore's one lookup; neither save made a call.
        assert_eq!((services.faults.calls(lookup), services.faults.calls(reserve)), (1, 0));
        let lookups = services.faults.calls(lookup);

        // `write-only`: the service refuses every read, and the save never asks it one.
        services.faults.push(lookup, Fault::ReadDenied, 100);
        step.set_env("ACTIONS_CACHE_MODE", "write-only");
        let r = step.run(&["save"], &INPUTS, NO_STATE);
        assert_eq!(r.output("save-result"), "saved", "{}", r.stdout);
        assert!(warnings(&r).is_empty(), "{}", r.stdout);
        assert_eq!((services.faults.calls(lookup) - lookups, finalized(&services)), (0, 1), "v1: {v1}");
        // A second save of the key, which the job could not look up: the service refuses it.
        let again = step.run(&["save"], &INPUTS, NO_STATE);
        assert_eq!(again.output("save-result"), "exists", "{}", again.stdout);
        assert_eq!((services.faults.calls(lookup) - lookups, finalized(&services)), (0, 1));

        // Read back with `write`.
        services.faults.clear();
        step.set_env("ACTIONS_CACHE_MODE", "write");
        std::fs::remove_dir_all(step.ws.join("out")).unwrap();
        assert_eq!(step.run(&["restore"], &INPUTS, NO_STATE).output("reused"), "true");
    }
}

#[test]
fn a_refused_read_is_a_miss_with_a_warning() {
    for v1 in [false, true] {
        let services = Services::start();
        let (step, _) = saved(&services, v1);
        let (lookup, _) = ops(v1);
        let before = snapshot(&step.ws);
        for strict in [false, true] {
            let calls = services.faults.calls(lookup);
            services.faults.push(lookup, Fault::ReadDenied, 100);
            let r = step.run(&["restore"], &with(&[("strict", if strict { "true" } else { "false" })]), NO_STATE);
            services.faults.clear();
            let outputs = (r.output("cache-hit"), r.output("entry-exists"), r.output("miss-reason"));
            assert_eq!(outputs, ("false", "false", "read-denied"), "{}", r.stdout);
            let said = if strict { "::error::" } else { "::warning::" };
            let line = r.stdout.lines().find(|l| l.starts_with(said)).unwrap_or_else(|| panic!("{}", r.stdout));
            assert!(line.contains(services::READ_DENIED), "the service's words: {line}");
            // Never a failed step, unless `strict` (the service's refusal is cache trouble).
            assert_eq!(r.code, i32::from(strict), "{}", r.stdout);
            assert_eq!(services.faults.calls(lookup) - calls, 1, "a refusal is not retried");
            assert_eq!(snapshot(&step.ws), before, "nothing placed");
        }
    }
}

#[test]
fn a_refused_write_and_a_full_quota_skip_the_save_with_a_warning() {
    let cases: [(bool, Op, Fault, &str); 6] = [
        (false, Op::Create, Fault::ReadOnly, services::WRITE_DENIED),
        (false, Op::Create, Fault::Quota, services::QUOTA),
        (false, Op::Finalize, Fault::Quota, services::QUOTA),
        (
            false,
            Op::Create,
            Fault::Status { code: 400, retry_after: None, msg: "insufficient usage to create cache entry" },
            "insufficient usage",
        ),
        (true, Op::V1Reserve, Fault::ReadOnly, services::WRITE_DENIED),
        (true, Op::V1Reserve, Fault::Quota, services::QUOTA),
    ];
    for (v1, op, fault, words) in cases {
        for strict in [false, true] {
            let services = Services::start();
            let step = Step::against(protocol_env(&services, v1));
            write(&step.ws.join("out/a"), b"a");
            services.faults.push(op, fault.clone(), 100);
            let r = step.run(&["save"], &with(&[("strict", if strict { "true" } else { "false" })]), NO_STATE);
            let what = format!("{op:?} {fault:?} (strict: {strict})");
            assert_eq!((r.output("saved"), r.output("save-result")), ("false", "read-only"), "{what}: {}", r.stdout);
            let said = if strict { "::error::" } else { "::warning::" };
            let line = r.stdout.lines().find(|l| l.starts_with(said)).unwrap_or_else(|| panic!("{what}: {}", r.stdout));
            assert!(line.contains(words), "{what}: {line}");
            // Never a failed step, unless `strict`; refused once, never retried, never taken
            // for "another job saved it".
            assert_eq!(r.code, i32::from(strict), "{what}: {}", r.stdout);
            assert_eq!(services.faults.calls(op), 1, "{what}");
            assert_eq!(finalized(&services), 0, "{what}");
            // The next job, allowed again, saves (a refused Finalize leaves its reservation, which
            // the service keeps until it expires).
            if op != Op::Finalize {
                services.faults.clear();
                assert_eq!(step.run(&["save"], &INPUTS, NO_STATE).output("save-result"), "saved", "{what}");
            }
        }
    }
}

#[test]
fn a_rate_limited_lookup_waits_once_for_retry_after_then_misses() {
    for v1 in [false, true] {
        let services = Services::start();
        let (mut step, tree) = saved(&services, v1);
        let (lookup, reserve) = ops(v1);
        let limited = |after: u64| Fault::Status { code: 429, retry_after: Some(after), msg: "rate limited" };

        // One 429 asking for a second: waited out, then the entry is reused.
        let calls = services.faults.calls(lookup);
        services.faults.push(lookup, limited(1), 1);
        let started = Instant::now();
        let r = step.run(&["restore"], &INPUTS, NO_STATE);
        let took = started.elapsed();
        assert_eq!(r.output("reused"), "true", "{}", r.stdout);
        assert_eq!(snapshot(&step.ws.join("out")), tree);
        assert!(warnings(&r).is_empty(), "{}", r.stdout);
        assert_eq!(services.faults.calls(lookup) - calls, 3, "the 429, the entry's, its pack's");
        assert!(took >= Duration::from_secs(1), "waited {took:?}");
        std::fs::remove_dir_all(step.ws.join("out")).unwrap();

        // Still limited after the wait: one wait, never a loop, then a miss with a warning.
        let calls = services.faults.calls(lookup);
        services.faults.push(lookup, limited(1), 100);
        let started = Instant::now();
        let r = step.run(&["restore"], &INPUTS, NO_STATE);
        let took = started.elapsed();
        services.faults.clear();
        assert_eq!((r.code, r.output("miss-reason")), (0, "service-error"), "{}", r.stdout);
        // The warning names the call, the status and the planted `Retry-After`.
        let name = if v1 { "rate_limited_lookup_v1" } else { "rate_limited_lookup_v2" };
        assert_shown!(step.dir.path(), name, crate::support::planted(&r.said(), "1 s"));
        assert_eq!(services.faults.calls(lookup) - calls, 2, "one wait, then no more calls");
        assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(20), "{took:?}");

        // A `Retry-After` longer than the step waits (60 s; here 2): not waited, a miss at once.
        step.set_env("EXACT_CACHE_RATE_LIMIT_WAIT_SECONDS", "2");
        let calls = services.faults.calls(lookup);
        services.faults.push(lookup, limited(30), 100);
        let started = Instant::now();
        let r = step.run(&["restore"], &INPUTS, NO_STATE);
        services.faults.clear();
        assert_eq!(r.output("miss-reason"), "service-error", "{}", r.stdout);
        assert_eq!(services.faults.calls(lookup) - calls, 1);
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());

        // The same on a save's reservation: waited once, then saved.
        write(&step.ws.join("out/b"), b"b");
        services.faults.push(reserve, limited(1), 1);
        let other = [("path", "out"), ("native", "none"), ("variant", "rules-2")];
        let r = step.run(&["save"], &other, NO_STATE);
        assert_eq!(r.output("save-result"), "saved", "{}", r.stdout);
    }
}

// ---- the official client meets the same answers ---------------------------------------------

/// The official client's `op` of `key` over `env` in `ws`: whether it succeeded, and what it
/// printed (its log, with its `::warning::` lines, and its errors).
fn official(env: &[(String, String)], ws: &Path, op: &str, key: &str) -> (bool, String) {
    let out = crate::official_client::run_official(env, ws, op, key, &["out"]);
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[needs(actions_cache)]
fn the_official_client_reads_the_refusals_and_the_mode_as_we_do() {
    for v1 in [false, true] {
        let services = Services::start_with(BlobStore::Fast { name: String::new() });
        let mut env = protocol_env(&services, v1);
        let ws = tempfile::tempdir().unwrap();
        write(&ws.path().join("out/a"), b"a");
        let (lookup, reserve) = ops(v1);
        let (saved, log) = official(&env, ws.path(), "save", "peer-key");
        assert!(saved, "{log}");

        // A refused read: a warning naming it, and a miss.
        services.faults.push(lookup, Fault::ReadDenied, 100);
        let (_, log) = official(&env, ws.path(), "restore", "peer-key");
        services.faults.clear();
        let warning =
            log.lines().find(|l| l.starts_with("::warning::Failed to restore")).unwrap_or_else(|| panic!("{log}"));
        assert!(warning.contains(services::READ_DENIED), "{warning}");

        // A refused write: it takes it for the policy's denial, not for another job's entry.
        services.faults.push(reserve, Fault::ReadOnly, 100);
        let (saved, log) = official(&env, ws.path(), "save", "peer-key-2");
        services.faults.clear();
        assert!(!saved);
        let denied = format!("Unable to reserve cache with key peer-key-2. More details: {}", services::WRITE_DENIED);
        assert!(log.contains(&denied), "{log}");

        // A full quota: named in a warning.
        services.faults.push(reserve, Fault::Quota, 100);
        let (saved, log) = official(&env, ws.path(), "save", "peer-key-3");
        services.faults.clear();
        assert!(!saved);
        assert!(log.lines().any(|l| l.starts_with("::warning::") && l.contains(services::QUOTA)), "{log}");

        // `ACTIONS_CACHE_MODE`: `none` skips the restore, `read` the save; not a call either way.
        let calls = (services.faults.calls(lookup), services.faults.calls(reserve));
        env.push(("ACTIONS_CACHE_MODE".into(), "none".into()));
        let (ok, log) = official(&env, ws.path(), "restore", "peer-key");
        assert!(ok && log.contains("Cache restore skipped"), "{log}");
        env.pop();
        env.push(("ACTIONS_CACHE_MODE".into(), "read".into()));
        let (saved, log) = official(&env, ws.path(), "save", "peer-key-4");
        assert!(!saved && log.contains("Cache save skipped"), "{log}");
        assert_eq!((services.faults.calls(lookup), services.faults.calls(reserve)), calls);
    }
    // A rate-limited lookup (v2): it reads `Retry-After` and gives up, as our answer says it.
    let services = Services::start_with(BlobStore::Fast { name: String::new() });
    let ws = tempfile::tempdir().unwrap();
    // And a full quota at `FinalizeCacheEntryUpload` (v2): its message, as a warning.
    write(&ws.path().join("out/a"), b"a");
    services.faults.push(Op::Finalize, Fault::Quota, 100);
    let (saved, log) = official(&services.v2_env(), ws.path(), "save", "peer-key-5");
    services.faults.clear();
    assert!(!saved);
    assert!(log.lines().any(|l| l.starts_with("::warning::") && l.contains(services::QUOTA)), "{log}");
    services.faults.push(Op::Lookup, Fault::Status { code: 429, retry_after: Some(30), msg: "rate limited" }, 100);
    let (_, log) = official(&services.v2_env(), ws.path(), "restore", "peer-key");
    assert!(log.contains("your rate limit will reset in 30 seconds"), "{log}");
}
