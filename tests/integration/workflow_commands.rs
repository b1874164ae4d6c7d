//! Text from outside the binary — file names from `hash-files`, `hash-env` values, labels and
//! values read from another entry's fingerprint by `explain-misses` — never starts a workflow
//! command, read the way the runner reads a step's output (`runner::log_model`).

use exact_cache::archive::{Compression, Inventory, SecretScanner, write_archive};
use exact_cache::fingerprint::{Component, Fingerprint, FingerprintRecord, Value};
use exact_cache::runner::log_model;

use crate::support::services::{self, BlobStore, Services};
use crate::support::{NO_STATE, Step, StepResult, write};

/// What an attacker would have the runner do: an error annotation with a title, a mask that
/// hides `backend` in the rest of the log, an output, through v2 and v1 commands and every line
/// break the runner knows.
const PAYLOADS: [&str; 5] = [
    "x\n::error title=pwned::injected",
    "y\r::add-mask::backend",
    "z\r\n  ::set-output name=a::b",
    "w ##[add-mask]backend",
    "v ##[error title=pwned]injected",
];

/// The commands the runner would obey: only our own groups (and the masks of the service's
/// tokens), never one with properties, never anything naming the payloads.
fn assert_only_our_commands(r: &StepResult) {
    for c in log_model::commands(&r.stdout) {
        assert!(
            matches!(c.name.as_str(), "group" | "endgroup" | "add-mask") && c.properties.is_empty(),
            "the runner would obey {c:?}:\n{}",
            r.stdout
        );
        assert!(!c.data.contains("pwned") && !c.data.contains("backend"), "{c:?}:\n{}", r.stdout);
    }
}

#[test]
fn file_names_and_hash_env_values_never_start_a_command() {
    let mut step = Step::new();
    for (i, payload) in PAYLOADS.iter().enumerate() {
        write(&step.ws.join(format!("gen/{i}{payload}")), b"generator\n");
        step.set_env(format!("EVIL_{i}"), *payload);
    }
    let names: Vec<String> = (0..PAYLOADS.len()).map(|i| format!("EVIL_{i}")).collect();
    let inputs = [
        ("path", "out"),
        ("native", "none"),
        ("prefix", "inj"),
        ("hash-files", "gen/*"),
        ("hash-env", &names.join(",")),
    ];
    for args in [&["fingerprint"][..], &["restore"]] {
        let r = step.run(args, &inputs, NO_STATE);
        assert_eq!(r.code, 0, "{}", r.stdout);
        assert_only_our_commands(&r);
        // Nothing was dropped: the runner shows every payload line as text.
        let shown = log_model::text(&r.stdout).join("\n");
        assert!(shown.contains("::error title=pwned::injected") && shown.contains("##[add-mask]backend"), "{shown}");
    }
}

/// An entry saved by someone else under our prefix, whose fingerprint holds the payloads in
/// labels and values: its key and archive.
fn hostile_entry(prefix: &str) -> (String, Vec<u8>) {
    let mut env = Component::new();
    let mut dists = Component::new();
    for (i, payload) in PAYLOADS.iter().enumerate() {
        env.insert(format!("EVIL_{i}"), Value::text(*payload));
        env.insert(format!("LABEL_{i}{payload}"), Value::text("1"));
        dists.insert(format!("dist{i}{payload}"), Value::text(format!("1.0{payload}")));
    }
    env.insert("A_TABLE".into(), Value::text("a|b\n| x | y |<img src=x onerror=alert(1)>"));
    let mut fp = Fingerprint::default();
    fp.insert("env", env);
    fp.insert("python.dists", dists);
    let record = FingerprintRecord::new(prefix, "v1", fp);
    let (bytes, _) = write_archive(
        &Inventory::default(),
        &record,
        Compression::Zstd,
        None,
        &SecretScanner::none(),
        Vec::new(),
        &mut |_| {},
    )
    .unwrap();
    (record.key, bytes)
}

/// Where the hostile entry is served from: the local store's directory, or the v2 service
/// (listed by its REST API, read with one ranged request).
enum Served {
    Local,
    V2(Services),
}

#[test]
fn explain_misses_against_a_hostile_entry_never_starts_a_command_local_store() {
    explain_misses_against_a_hostile_entry(Served::Local);
}

#[test]
fn explain_misses_against_a_hostile_entry_never_starts_a_command_v2_service() {
    explain_misses_against_a_hostile_entry(Served::V2(Services::start_with(BlobStore::Fast { name: String::new() })));
}

fn explain_misses_against_a_hostile_entry(served: Served) {
    let mut step = Step::new();
    let (theirs, bytes) = hostile_entry("inj");
    let mut github_token = None;
    match &served {
        Served::Local => write(&step.cache.join(format!("entries/{theirs}@v1")), &bytes),
        Served::V2(services) => {
            step.extra_env = services.v2_env();
            step.extra_env.extend(services.rest_env());
            services.plant(&theirs, "v1", &bytes);
            github_token = Some(services::REST_TOKEN);
        }
    }
    for i in 0..PAYLOADS.len() {
        step.set_env(format!("EVIL_{i}"), "harmless");
    }
    let names: Vec<String> = (0..PAYLOADS.len()).map(|i| format!("EVIL_{i}")).chain(["A_TABLE".into()]).collect();
    let hash_env = names.join(",");
    let mut inputs = vec![("path", "out"), ("native", "none"), ("prefix", "inj"), ("hash-env", hash_env.as_str())];
    inputs.extend(github_token.map(|t| ("github-token", t)));
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((r.code, r.output("miss-reason")), (0, "not-found"), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("compared with `{theirs}`")), "explained: {}", r.stdout);
    assert_only_our_commands(&r);
    let shown = log_model::text(&r.stdout).join("\n");
    assert!(shown.contains("::error title=pwned::injected removed"), "{shown}");

    // The summary's table of changes keeps one cell per row, and holds no HTML of theirs.
    assert!(!r.summary.contains("<img"), "{}", r.summary);
    let table: Vec<&str> = r
        .summary
        .lines()
        .skip_while(|l| !l.starts_with("| what changed |"))
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert!(table.len() > PAYLOADS.len(), "{}", r.summary);
    for row in table {
        // GFM ends a cell at each `|` not right after a backslash.
        let inner = row.trim().strip_prefix('|').and_then(|r| r.strip_suffix('|')).unwrap();
        let bars = inner.char_indices().filter(|&(i, c)| c == '|' && !inner[..i].ends_with('\\')).count();
        assert_eq!(bars, 0, "one cell: {row}");
    }
}
