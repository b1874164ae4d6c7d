//! The fault matrix: every fault the test service can inject, on restore and on save, with
//! and without `strict`, and what the user sees — outputs, exit status, the workspace, and
//! whether an entry was committed. The table below is the test; docs/fault-matrix.md is
//! generated from it (`UPDATE_FAULT_MATRIX=1` rewrites it; otherwise a stale file fails).

use crate::support::needs;
use crate::support::services::{self, BlobStore, Fault, Op, Services};
use crate::support::{self, NO_STATE, Step, generate_model, snapshot, write};

const INPUTS: [(&str, &str); 3] = [("path", "out"), ("native", "none"), ("variant", "fault-matrix")];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Restore,
    Save,
}

struct Row {
    fault: &'static str,
    at: &'static str,
    op: Op,
    inject: Fault,
    /// How many calls it strikes (more than the retries: persistent).
    times: usize,
    phase: Phase,
    strict: bool,
    /// Outputs, as `name=value` pairs in a fixed order.
    outputs: &'static str,
    exit: i32,
    /// Restore: `restored` or `untouched`. Save: `committed` or `nothing committed`.
    files: &'static str,
    warning: bool,
}

fn status(code: u16, msg: &'static str) -> Fault {
    Fault::Status { code, retry_after: None, msg }
}

#[rustfmt::skip]
fn rows() -> Vec<Row> {
    use Phase::*;
    // A `Retry-After` the step waits out once (1 s), and one it does not wait for (600 s).
    let r429 = Fault::Status { code: 429, retry_after: Some(1), msg: "rate limited" };
    let r429_long = Fault::Status { code: 429, retry_after: Some(600), msg: "rate limited" };
    let quota = status(400, "insufficient usage to create cache entry");
    let row = |fault, at, op, inject, times, phase, strict, outputs, exit, files, warning| Row { fault, at, op, inject, times, phase, strict, outputs, exit, files, warning };
    vec![
        row("429 rate limited once (`Retry-After: 1`)", "GetCacheEntryDownloadURL", Op::Lookup, r429.clone(), 1, Restore, false, "cache-hit=true reused=true miss-reason=none", 0, "restored", false),
        row("429 rate limited persistent (`Retry-After: 1`)", "GetCacheEntryDownloadURL", Op::Lookup, r429.clone(), 5, Restore, false, "cache-hit=false reused=false miss-reason=service-error", 0, "untouched", true),
        row("429 rate limited persistent (`Retry-After: 1`)", "GetCacheEntryDownloadURL", Op::Lookup, r429.clone(), 5, Restore, true, "cache-hit=false reused=false miss-reason=service-error", 1, "untouched", true),
        row("429 rate limited (`Retry-After: 600`)", "GetCacheEntryDownloadURL", Op::Lookup, r429_long.clone(), 5, Restore, false, "cache-hit=false reused=false miss-reason=service-error", 0, "untouched", true),
        row("read denied (`cache read denied:`)", "GetCacheEntryDownloadURL", Op::Lookup, Fault::ReadDenied, 100, Restore, false, "cache-hit=false reused=false miss-reason=read-denied", 0, "untouched", true),
        row("read denied (`cache read denied:`)", "GetCacheEntryDownloadURL", Op::Lookup, Fault::ReadDenied, 100, Restore, true, "cache-hit=false reused=false miss-reason=read-denied", 1, "untouched", true),
        row("503 once", "GetCacheEntryDownloadURL", Op::Lookup, status(503, "busy"), 1, Restore, false, "cache-hit=true reused=true miss-reason=none", 0, "restored", false),
        row("500 persistent", "GetCacheEntryDownloadURL", Op::Lookup, status(500, "down"), 100, Restore, false, "cache-hit=false reused=false miss-reason=service-error", 0, "untouched", true),
        row("500 persistent", "GetCacheEntryDownloadURL", Op::Lookup, status(500, "down"), 100, Restore, true, "cache-hit=false reused=false miss-reason=service-error", 1, "untouched", true),
        row("500 persistent", "blob GET", Op::BlobGet, status(500, "InternalError"), 100, Restore, false, "cache-hit=false reused=false miss-reason=service-error", 0, "untouched", true),
        row("connection reset once", "blob GET", Op::BlobGet, Fault::Reset { after: 1000 }, 1, Restore, false, "cache-hit=true reused=true miss-reason=none", 0, "restored", false),
        row("connection reset persistent", "blob GET", Op::BlobGet, Fault::Reset { after: 1000 }, 100, Restore, false, "cache-hit=false reused=false miss-reason=service-error", 0, "untouched", true),
        row("truncated body once", "blob GET", Op::BlobGet, Fault::Truncate { keep: 100 }, 1, Restore, false, "cache-hit=true reused=true miss-reason=none", 0, "restored", false),
        row("truncated body persistent", "blob GET", Op::BlobGet, Fault::Truncate { keep: 100 }, 100, Restore, false, "cache-hit=false reused=false miss-reason=service-error", 0, "untouched", true),
        row("stall (no bytes for longer than the read timeout)", "blob GET", Op::BlobGet, Fault::Stall { seconds: 3.0 }, 100, Restore, false, "cache-hit=false reused=false miss-reason=timeout", 0, "untouched", true),
        row("stall (no bytes for longer than the read timeout)", "blob GET", Op::BlobGet, Fault::Stall { seconds: 3.0 }, 100, Restore, true, "cache-hit=false reused=false miss-reason=timeout", 1, "untouched", true),
        row("corrupt blob (one flipped byte)", "blob GET", Op::BlobGet, Fault::Corrupt { offset: 600 }, 100, Restore, false, "cache-hit=false reused=false miss-reason=corrupt", 0, "untouched", true),
        row("corrupt blob (one flipped byte)", "blob GET", Op::BlobGet, Fault::Corrupt { offset: 600 }, 100, Restore, true, "cache-hit=false reused=false miss-reason=corrupt", 1, "untouched", true),
        row("wrong size (Content-Range total too large)", "blob GET", Op::BlobGet, Fault::WrongSize { extra: 4096 }, 100, Restore, false, "cache-hit=false reused=false miss-reason=service-error", 0, "untouched", true),
        row("prefix match of another key", "GetCacheEntryDownloadURL", Op::Lookup, Fault::WrongMatchedKey(String::new()), 2, Restore, false, "cache-hit=false reused=false miss-reason=prefix-only", 0, "untouched", false),
        row("read-only token (`cache write denied:`)", "CreateCacheEntry", Op::Create, Fault::ReadOnly, 100, Restore, false, "cache-hit=true reused=true miss-reason=none", 0, "restored", false),
        row("429 rate limited once (`Retry-After: 1`)", "CreateCacheEntry", Op::Create, r429.clone(), 1, Save, false, "saved=true save-result=saved", 0, "committed", false),
        row("429 rate limited persistent (`Retry-After: 1`)", "CreateCacheEntry", Op::Create, r429.clone(), 5, Save, false, "saved=false save-result=rate-limited", 0, "nothing committed", true),
        row("429 rate limited persistent (`Retry-After: 1`)", "CreateCacheEntry", Op::Create, r429.clone(), 5, Save, true, "saved=false save-result=rate-limited", 1, "nothing committed", true),
        row("429 rate limited (`Retry-After: 600`)", "CreateCacheEntry", Op::Create, r429_long, 5, Save, false, "saved=false save-result=rate-limited", 0, "nothing committed", true),
        row("503 once", "CreateCacheEntry", Op::Create, status(503, "busy"), 1, Save, false, "saved=true save-result=saved", 0, "committed", false),
        row("500 persistent", "CreateCacheEntry", Op::Create, status(500, "down"), 100, Save, false, "saved=false save-result=error", 0, "nothing committed", true),
        row("500 persistent", "CreateCacheEntry", Op::Create, status(500, "down"), 100, Save, true, "saved=false save-result=error", 1, "nothing committed", true),
        row("503 once", "blob PUT", Op::BlobPut, status(503, "ServerBusy"), 1, Save, false, "saved=true save-result=saved", 0, "committed", false),
        row("500 persistent", "blob PUT", Op::BlobPut, status(500, "InternalError"), 100, Save, false, "saved=false save-result=error", 0, "nothing committed", true),
        row("connection reset once", "blob PUT", Op::BlobPut, Fault::Reset { after: 0 }, 1, Save, false, "saved=true save-result=saved", 0, "committed", false),
        row("stall (longer than the call timeout)", "CreateCacheEntry", Op::Create, Fault::Stall { seconds: 3.0 }, 100, Save, false, "saved=false save-result=error", 0, "nothing committed", true),
        row("500 persistent", "FinalizeCacheEntryUpload", Op::Finalize, status(500, "down"), 100, Save, false, "saved=false save-result=error", 0, "nothing committed", true),
        row("read-only token (`cache write denied:`)", "CreateCacheEntry", Op::Create, Fault::ReadOnly, 100, Save, false, "saved=false save-result=read-only", 0, "nothing committed", true),
        row("read-only token (`cache write denied:`)", "CreateCacheEntry", Op::Create, Fault::ReadOnly, 100, Save, true, "saved=false save-result=read-only", 1, "nothing committed", true),
        row("quota read-only (`ok: false`, \"Cache storage quota exceeded…\")", "CreateCacheEntry", Op::Create, Fault::Quota, 100, Save, false, "saved=false save-result=read-only", 0, "nothing committed", true),
        row("quota read-only (`ok: false`, \"Cache storage quota exceeded…\")", "CreateCacheEntry", Op::Create, Fault::Quota, 100, Save, true, "saved=false save-result=read-only", 1, "nothing committed", true),
        row("quota read-only (`ok: false`, \"Cache storage quota exceeded…\")", "FinalizeCacheEntryUpload", Op::Finalize, Fault::Quota, 100, Save, false, "saved=false save-result=read-only", 0, "nothing committed", true),
        row("quota exceeded (400 \"insufficient usage\")", "CreateCacheEntry", Op::Create, quota.clone(), 100, Save, false, "saved=false save-result=read-only", 0, "nothing committed", true),
        row("quota exceeded (400 \"insufficient usage\")", "CreateCacheEntry", Op::Create, quota, 100, Save, true, "saved=false save-result=read-only", 1, "nothing committed", true),
        row("409 already exists", "CreateCacheEntry", Op::Create, status(409, "cache entry already exists"), 1, Save, false, "saved=false save-result=exists", 0, "nothing committed", false),
        // The v1 REST protocol (GHES, act, Gitea/Forgejo runners).
        row("429 rate limited persistent (`Retry-After: 1`)", "v1 `GET cache`", Op::V1Lookup, r429, 5, Restore, false, "cache-hit=false reused=false miss-reason=service-error", 0, "untouched", true),
        row("read denied (`cache read denied:`)", "v1 `GET cache`", Op::V1Lookup, Fault::ReadDenied, 100, Restore, false, "cache-hit=false reused=false miss-reason=read-denied", 0, "untouched", true),
        row("connection reset persistent", "v1 archive download", Op::V1Download, Fault::Reset { after: 1000 }, 100, Restore, false, "cache-hit=false reused=false miss-reason=service-error", 0, "untouched", true),
        row("corrupt blob (one flipped byte)", "v1 archive download", Op::V1Download, Fault::Corrupt { offset: 600 }, 100, Restore, false, "cache-hit=false reused=false miss-reason=corrupt", 0, "untouched", true),
        row("read-only token (`cache write denied:`)", "v1 `POST caches`", Op::V1Reserve, Fault::ReadOnly, 100, Save, false, "saved=false save-result=read-only", 0, "nothing committed", true),
        row("quota exceeded (400, \"Cache storage quota exceeded…\")", "v1 `POST caches`", Op::V1Reserve, Fault::Quota, 100, Save, false, "saved=false save-result=read-only", 0, "nothing committed", true),
        row("500 persistent", "v1 `POST caches`", Op::V1Reserve, status(500, "down"), 100, Save, false, "saved=false save-result=error", 0, "nothing committed", true),
        row("500 persistent", "v1 `PATCH caches/<id>`", Op::V1Upload, status(500, "down"), 100, Save, false, "saved=false save-result=error", 0, "nothing committed", true),
        row("500 persistent", "v1 `POST caches/<id>`", Op::V1Commit, status(500, "down"), 100, Save, false, "saved=false save-result=error", 0, "nothing committed", true),
    ]
}

struct Observed {
    outputs: String,
    exit: i32,
    files: &'static str,
    warning: bool,
}

/// A step against the protocol that `op` belongs to, with the REST API and short timeouts.
fn step_for_op(services: &Services, op: Op) -> Step {
    let v1 = matches!(op, Op::V1Lookup | Op::V1Reserve | Op::V1Upload | Op::V1Commit | Op::V1Download);
    let protocol = if v1 { services.v1_env() } else { services.v2_env() };
    // Misses are explained through the REST API: its token is in play on every restore too.
    let mut step = Step::against([protocol, services.rest_env()].concat());
    for (k, v) in [("EXACT_CACHE_READ_TIMEOUT_SECONDS", "1"), ("EXACT_CACHE_CALL_TIMEOUT_SECONDS", "1")] {
        step.set_env(k, v);
    }
    step
}

fn inputs(strict: bool) -> Vec<(&'static str, &'static str)> {
    let mut inputs = INPUTS.to_vec();
    inputs.push(("github-token", services::REST_TOKEN));
    if strict {
        inputs.push(("strict", "true"));
    }
    inputs
}

fn observe(row: &Row) -> Observed {
    let services = Services::start_with(BlobStore::AzuriteFront);
    let step = step_for_op(&services, row.op);
    generate_model(&step.ws, 100_000);
    let mut inject = row.inject.clone();
    if let Fault::WrongMatchedKey(_) = inject {
        let key = step.run(&["fingerprint"], &INPUTS, NO_STATE).output("key").to_owned();
        inject = Fault::WrongMatchedKey(format!("{key}-another-entry"));
    }
    let (names, result): (&[&str], _) = match row.phase {
        Phase::Restore => {
            let save = step.run(&["save"], &INPUTS, NO_STATE);
            assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
            let tree = snapshot(&step.ws.join("out"));
            std::fs::remove_dir_all(step.ws.join("out")).unwrap();
            write(&step.ws.join("notes.txt"), b"what the workspace held before");
            let before = snapshot(&step.ws);
            services.faults.push(row.op, inject, row.times);
            let r = step.run(&["restore"], &inputs(row.strict), NO_STATE);
            let files = if snapshot(&step.ws) == before {
                "untouched"
            } else {
                assert_eq!(snapshot(&step.ws.join("out")), tree, "a restore is all or nothing");
                "restored"
            };
            (&["cache-hit", "reused", "miss-reason"], (r, files))
        }
        Phase::Save => {
            services.faults.push(row.op, inject, row.times);
            let r = step.run(&["save"], &inputs(row.strict), NO_STATE);
            // The entry; the packs a save stores before it are entries of their own.
            let committed = services.entries().iter().filter(|e| e.finalized && !e.key.contains("-pack.")).count();
            let files = match committed {
                0 => "nothing committed",
                1 => "committed",
                n => panic!("{n} entries"),
            };
            (&["saved", "save-result"], (r, files))
        }
    };
    let (r, files) = result;
    assert_no_secret_leaks(&r);
    let outputs = names
        .iter()
        .map(|n| format!("{n}={}", r.outputs.get(*n).map_or("<unset>", String::as_str)))
        .collect::<Vec<_>>()
        .join(" ");
    Observed {
        outputs,
        exit: r.code,
        files,
        warning: r.stdout.contains("::warning::") || r.stdout.contains("::error::"),
    }
}

/// The runtime token, the REST token and the blob signature appear nowhere a user or a log
/// collector can read them: log (except the `::add-mask::` lines that mask them), stderr,
/// summary, outputs.
fn assert_no_secret_leaks(r: &support::StepResult) {
    let sig = services::azurite::account_sas_signature();
    let encoded_sig: String = url::form_urlencoded::byte_serialize(sig.as_bytes()).collect();
    let readable = r.readable();
    for (what, secret) in [
        ("the runtime token", services::TOKEN),
        ("the REST token", services::REST_TOKEN),
        ("the blob signature", &sig),
        ("the blob signature (URL-encoded)", &encoded_sig),
        ("a signed URL", "sig="),
        ("the v1 cache URL's secret", services::V1_SECRET),
    ] {
        assert!(!readable.contains(secret), "{what} leaked:\n{readable}");
    }
}

fn markdown(rows: &[Row]) -> String {
    let mut md = String::from(
        "# What happens when the cache service fails\n\n\
         Generated by `tests/integration/fault_matrix.rs` from the faults it injects into the local cache service (v2:\n\
         Twirp + Azure Blob in Azurite; v1 REST where marked) and what it observed. Do not edit by hand:\n\
         `UPDATE_FAULT_MATRIX=1 cargo test --test integration fault_matrix` rewrites it.\n\n\
         Transient faults (5xx, resets, short bodies, timeouts) are retried with backoff, 4 attempts in\n\
         all; a 429 is waited out once for its `Retry-After` (at most 60 s), and then, or when it asks\n\
         longer, stops every later call of the run. A refused read or write (`cache read denied:`, `cache\n\
         write denied:`) and a full quota are never retried. \"untouched\": the workspace\n\
         is byte-for-byte what it was before the step. \"nothing committed\": this step created no entry,\n\
         so no later job can restore a partial one. Without `strict`, every fault ends as a warning and\n\
         the step succeeds; with `strict: true` it fails. In every case the log, the summary and the\n\
         outputs were checked to hold neither the runtime token, nor the REST token, nor a signed URL.\n\n",
    );
    for (phase, title) in [(Phase::Restore, "Restore"), (Phase::Save, "Save")] {
        md.push_str(&format!("## {title}\n\n| fault | where | strict | outputs | exit | {} | annotation |\n|---|---|---|---|---|---|---|\n",
            if phase == Phase::Restore { "workspace" } else { "entry" }));
        for r in rows.iter().filter(|r| r.phase == phase) {
            let outputs = r.outputs.split(' ').map(|o| format!("`{o}`")).collect::<Vec<_>>().join(" ");
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                r.fault,
                r.at,
                if r.strict { "true" } else { "false" },
                outputs,
                r.exit,
                r.files,
                if !r.warning {
                    "none"
                } else if r.exit != 0 {
                    "error"
                } else {
                    "warning"
                }
            ));
        }
        md.push('\n');
    }
    md
}

#[needs(azurite)]
#[ignore = "slow: every fault on restore and save, v1 and v2"]
fn every_fault_on_restore_and_save_ends_as_documented() {
    let rows = rows();
    // Independent rows, each with its own service: a few at a time.
    let observed: Vec<Observed> = std::thread::scope(|s| {
        let chunks: Vec<_> = rows.chunks(rows.len().div_ceil(4)).collect();
        let handles: Vec<_> =
            chunks.into_iter().map(|chunk| s.spawn(move || chunk.iter().map(observe).collect::<Vec<_>>())).collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let mut mismatches = Vec::new();
    for (row, seen) in rows.iter().zip(&observed) {
        let expected = (row.outputs, row.exit, row.files, row.warning);
        let got = (seen.outputs.as_str(), seen.exit, seen.files, seen.warning);
        if expected != got {
            mismatches.push(format!(
                "{} at {} ({:?}, strict {}): expected {expected:?}, got {got:?}",
                row.fault, row.at, row.op, row.strict
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    let doc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/fault-matrix.md");
    let generated = markdown(&rows);
    if std::env::var_os("UPDATE_FAULT_MATRIX").is_some() {
        std::fs::write(&doc, &generated).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&doc).unwrap_or_default(),
        generated,
        "docs/fault-matrix.md is stale: run with UPDATE_FAULT_MATRIX=1"
    );
}

/// The REST side (`explain-misses`, `prune`) fails too, and its token must not show either.
#[test]
fn rest_failures_of_explain_and_prune_leak_nothing() {
    for (op, fault) in [
        (Op::RestList, status(403, "Resource not accessible by integration")),
        (Op::RestList, status(500, "down")),
        (Op::RestDelete, status(500, "down")),
    ] {
        let services = Services::start();
        let step = step_for_op(&services, op);
        generate_model(&step.ws, 100_000);
        let mut with_prune = inputs(false);
        // Named: `prune` skips the default prefix, which other workflows share.
        with_prune.extend([("prune", "true"), ("prefix", "fault-rest")]);
        // An older entry with the same prefix, so the save has something to prune.
        let mut older = with_prune.clone();
        older.retain(|(k, _)| *k != "variant");
        older.push(("variant", "fault-matrix-older"));
        step.run(&["save"], &older, NO_STATE);
        services.faults.push(op, fault.clone(), 100);
        let miss = step.run(&["restore"], &inputs(false), NO_STATE);
        assert_eq!(miss.output("miss-reason"), "not-found", "{}", miss.stdout);
        assert_no_secret_leaks(&miss);
        let save = step.run(&["save"], &with_prune, NO_STATE);
        assert_eq!(save.output("save-result"), "saved", "a REST failure never fails the save: {}", save.stdout);
        assert_no_secret_leaks(&save);
        assert!(services.faults.calls(op) > 0, "{op:?} was called and failed: {}{}", miss.stdout, save.stdout);
    }
}
