//! Text from outside the binary — file names from `hash-files`, `hash-env` values, labels and
//! values read from another entry's fingerprint by `explain-misses` — never starts a workflow
//! command, read the way the runner reads a step's output (`support::log_model`); shows its
//! invisible characters escaped and its URLs only inside code spans; stays one item per line
//! of a list output; and has its secrets redacted before any cut.

use crate::support::log_model;
use exact_cache::archive::{Compression, Inventory, SecretScanner, write_archive};
use exact_cache::fingerprint::{Component, Fingerprint, FingerprintRecord, Value};

use crate::support::{NO_STATE, Step, StepResult, Store, on_every_store, write};

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
    let record = FingerprintRecord::new(prefix, &"v1".into(), fp);
    let bytes = archive_of_nothing(&record);
    (record.key.to_string(), bytes)
}

// The hostile entries are planted in every store that lists entries (GitHub's through its REST
// API, each read with one ranged request); changed files are reported on every store.
on_every_store!(where lists_entries:
    explain_misses_against_a_hostile_entry_never_starts_a_command,
    their_values_show_escaped_and_never_as_links,
);
on_every_store!(a_line_break_in_a_file_name_stays_inside_one_item_of_changed_files);

/// `inputs` and those the store's catalog needs (`Peer::catalog_inputs`).
fn with_catalog<'a>(catalog: &'a [(&'static str, String)], inputs: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut all = inputs.to_vec();
    all.extend(catalog.iter().map(|(name, value)| (*name, value.as_str())));
    all
}

fn explain_misses_against_a_hostile_entry_never_starts_a_command(store: Store) {
    let peer = store.start();
    let mut step = peer.step();
    let (theirs, bytes) = hostile_entry("inj");
    peer.plant(&theirs, "v1", &bytes);
    for i in 0..PAYLOADS.len() {
        step.set_env(format!("EVIL_{i}"), "harmless");
    }
    let names: Vec<String> = (0..PAYLOADS.len()).map(|i| format!("EVIL_{i}")).chain(["A_TABLE".into()]).collect();
    let hash_env = names.join(",");
    let catalog = peer.catalog_inputs();
    let inputs = with_catalog(
        &catalog,
        &[("path", "out"), ("native", "none"), ("prefix", "inj"), ("hash-env", hash_env.as_str())],
    );
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((r.code, r.output("miss-reason")), (0, "not-found"), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("compared with `{theirs}`")), "explained: {}", r.stdout);
    assert_only_our_commands(&r);
    let shown = log_model::text(&r.stdout).join("\n");
    assert!(shown.contains("::error title=pwned::injected removed"), "{shown}");

    // The summary's table of changes keeps one cell per row, and holds no HTML of theirs (but
    // inside code spans, where it is text).
    assert!(!outside_code(&r.summary).contains("<img"), "{}", r.summary);
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

/// A `secret-env` value, longer than a name is cut to in the log and the summary.
const DEPLOY_KEY: &str = "dk-7Hq2Lx9Vb4Nc8Zr1Tw6Ym3Pf5Gs0Ju";

/// Every run of `text`'s characters of length `len`.
fn windows(text: &str, len: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.windows(len).map(|w| w.iter().collect()).collect()
}

#[test]
fn a_secret_in_a_file_name_is_redacted_before_the_name_is_cut() {
    // Files kept beside a reused entry are named in the log and the summary, each cut to 120
    // characters: here the cut falls inside the secret, 8 to 28 characters into it.
    let mut step = Step::new();
    step.set_env("DEPLOY_KEY", DEPLOY_KEY);
    let inputs = [("path", "out"), ("native", "none"), ("secret-env", "DEPLOY_KEY")];
    write(&step.ws.join("out/a.txt"), b"a\n");
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("saved"), "true");
    for padding in [88, 96, 104, 108] {
        write(&step.ws.join(format!("out/{}{DEPLOY_KEY}.txt", "n".repeat(padding))), b"kept\n");
    }
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((r.output("reused"), r.output("extra-files")), ("true", "4"), "{}", r.stdout);
    // The log names the 4 files kept beside the entry, each cut, the secret redacted first.
    crate::support::assert_shown!(step.dir.path(), "a_secret_in_a_file_name", r.group("Restore "));
    let readable = r.readable();
    for fragment in windows(DEPLOY_KEY, 8) {
        assert!(!readable.contains(&fragment), "`{fragment}` of the secret shown:\n{readable}");
    }
}

#[test]
fn a_secret_in_a_file_name_is_redacted_in_mixed_case_and_partial_url_encodings() {
    // `clean-on-miss` names the files it removes. Here the names hold the secret URL-encoded
    // the way real encoders leave it: path-style (`+` and `=` raw, `/` as `%2F`) and strict
    // with hex digits of both cases in one name.
    const SECRET: &str = "Tok3n+Sess/ion=Val";
    let mut step = Step::new();
    step.set_env("MYSECRET", SECRET);
    let names = ["Tok3n+Sess%2Fion=Val", "Tok3n%2BSess%2fion%3DVal"];
    for name in names {
        write(&step.ws.join(format!("out/{name}.log")), b"stale\n");
    }
    let inputs = [("path", "out"), ("native", "none"), ("secret-env", "MYSECRET"), ("clean-on-miss", "true")];
    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(r.output("miss-reason"), "not-found", "{}", r.stdout);
    for name in names {
        assert!(!step.ws.join(format!("out/{name}.log")).exists(), "{name} was not cleaned");
    }
    let readable = r.readable();
    for shown in names.into_iter().chain([SECRET, "Sess%2Fion", "Sess%2fion"]) {
        assert!(!readable.contains(shown), "`{shown}` of the secret shown:\n{readable}");
    }
    assert!(readable.contains("***.log"), "the cleaned files are not named:\n{readable}");
}

/// No invisible character of theirs is shown raw in the log, on stderr or in the summary.
fn assert_none_raw(r: &StepResult) {
    for (what, text) in [("log", &r.stdout), ("stderr", &r.stderr), ("summary", &r.summary)] {
        let raw = text.chars().find(|c| matches!(c, '\u{202e}' | '\u{200b}' | '\u{feff}' | '\u{1b}'));
        assert_eq!(raw, None, "the {what} shows an invisible character raw:\n{text}");
    }
}

/// The summary outside its code spans (the values here hold no backtick): what GitHub renders
/// as Markdown, autolinks included.
fn outside_code(summary: &str) -> String {
    summary.split('`').step_by(2).collect()
}

fn a_line_break_in_a_file_name_stays_inside_one_item_of_changed_files(store: Store) {
    let peer = store.start();
    let step = peer.step();
    let inputs = [("path", "out"), ("native", "none"), ("verify-reuse", "warn")];
    write(&step.ws.join("out/a.bin"), b"a");
    assert_eq!(step.run(&["save"], &inputs, NO_STATE).output("saved"), "true");
    let warm = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(warm.output("reused"), "true", "{}", warm.stdout);
    let names = ["out/bidi\u{202e}txt.exe", "out/evil\nout/fake-entry", "out/back\\slash\ttab\u{1b}[31m"];
    for name in names {
        write(&step.ws.join(name), b"added by the job");
    }
    let post = step.run(&["save", "--post"], &inputs, &warm.state);
    let changed = post.output("changed-files");
    assert_eq!(
        changed, "out/back\\\\slash\\ttab\\u{1b}[31m\nout/bidi\\u{202e}txt.exe\nout/evil\\nout/fake-entry",
        "one escaped line per file:\n{}",
        post.stdout
    );
    assert_none_raw(&post);
    assert!(post.summary.contains("bidi\\u{202e}txt.exe"), "{}", post.summary);
}

/// An entry of someone else's under `inj` whose fingerprint holds a bidi override, a URL and a
/// label with a line break; our own values hold the same kinds of text. `explain-misses`
/// shows both sides in the log and the summary, and `explain` lists the changes as an output.
fn their_values_show_escaped_and_never_as_links(store: Store) {
    let peer = store.start();
    let mut step = peer.step();
    let mut env = Component::new();
    env.insert("EVIL_URL".into(), Value::text("https://evil.example/theirs"));
    env.insert("BIDI".into(), Value::text("theirs\u{202e}gnp.exe\u{200b}"));
    env.insert("LABEL\nfake: injected".into(), Value::text("1"));
    let mut fp = Fingerprint::default();
    fp.insert("env", env);
    let record = FingerprintRecord::new("inj", &"v1".into(), fp);
    let bytes = archive_of_nothing(&record);
    peer.plant(&record.key, "v1", &bytes);
    step.set_env("EVIL_URL", "https://evil.example/ours");
    step.set_env("BIDI", "ours\u{202e}gnp.exe");
    let catalog = peer.catalog_inputs();
    let inputs = with_catalog(
        &catalog,
        &[("path", "out"), ("native", "none"), ("prefix", "inj"), ("hash-env", "EVIL_URL,BIDI")],
    );

    let r = step.run(&["restore"], &inputs, NO_STATE);
    assert!(r.stdout.contains(&format!("compared with `{}`", record.key)), "explained: {}", r.stdout);
    assert!(r.summary.contains("https://evil.example/theirs") && r.summary.contains("https://evil.example/ours"));
    assert!(!outside_code(&r.summary).contains("evil.example"), "a bare URL:\n{}", r.summary);
    assert_none_raw(&r);
    assert!(r.stdout.contains("theirs\\u{202e}gnp.exe\\u{200b}"), "shown escaped: {}", r.stdout);
    assert!(r.summary.contains("theirs\\u{202e}gnp.exe\\u{200b}"), "shown escaped: {}", r.summary);

    let explained = step.run(&["explain"], &inputs, NO_STATE);
    let changes = explained.output("changes");
    assert!(changes.lines().all(|l| !l.starts_with("fake")), "one change per line:\n{changes}");
    assert!(changes.lines().any(|l| l == "env: LABEL\\nfake: injected removed"), "{changes}");
    assert_none_raw(&explained);
}

#[test]
fn invisible_characters_in_file_names_show_escaped() {
    let mut step = Step::new();
    write(&step.ws.join("gen/evil\u{202e}yp.exe"), b"generator\n");
    write(&step.ws.join("gen/zero\u{200b}width\u{feff}.py"), b"generator\n");
    step.set_env("COLOR", "\u{1b}[31mred\u{1b}[0m");
    let inputs = [("path", "out"), ("native", "none"), ("hash-files", "gen/*"), ("hash-env", "COLOR")];
    let r = step.run(&["fingerprint"], &inputs, NO_STATE);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_none_raw(&r);
    for shown in ["gen/evil\\u{202e}yp.exe", "gen/zero\\u{200b}width\\u{feff}.py", "\\u{1b}[31mred\\u{1b}[0m"] {
        assert!(r.stdout.contains(shown) && r.summary.contains(shown), "`{shown}`:\n{}\n{}", r.stdout, r.summary);
    }
}

/// An entry of `record` that holds no files: all a test of its fingerprint needs.
fn archive_of_nothing(record: &FingerprintRecord) -> Vec<u8> {
    let (bytes, _) = write_archive(
        &Inventory::default(),
        record,
        Compression::Zstd,
        None,
        &SecretScanner::none(),
        Vec::new(),
        &mut |_| {},
    )
    .unwrap();
    bytes
}
