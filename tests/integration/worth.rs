//! What each hit is worth (issue 34): the generation time a save records — from the end of the
//! restore that did not reuse to the newest file saved — and what every hit reports of it
//! (`generation-seconds`, `time-saved`, the summary's line), `list`'s column and totals, and a
//! forged or absurd figure shown as not recorded. Times are planted where they can be (the
//! restore's record, the files' modification times); the generator that sleeps is the scenario.

use std::path::Path;
use std::time::Duration;

use exact_cache::archive::{Compression, SecretScanner, Stamp, inventory, write_archive_with};
use exact_cache::config::{CommandName, Config, RawInputs};
use exact_cache::env::Env;
use exact_cache::fingerprint::FingerprintRecord;
use exact_cache::manifest::Generation;

use crate::support::{NO_STATE, Step, StepResult, Store, assert_shown, noise, on_every_store, write};

const PREFIX: &str = "worth";
const PATH: &str = "fixtures";

fn inputs<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut inputs = vec![("path", PATH), ("native", "none"), ("prefix", PREFIX)];
    inputs.extend_from_slice(extra);
    inputs
}

fn seconds(r: &StepResult, output: &str) -> f64 {
    let text = r.output(output);
    text.parse().unwrap_or_else(|_| panic!("`{output}` = {text:?}\n{}", r.stdout))
}

fn set_mtime(path: &Path, ms: i64) {
    let t = filetime::FileTime::from_unix_time(ms.div_euclid(1000), (ms.rem_euclid(1000) * 1_000_000) as u32);
    filetime::set_file_mtime(path, t).unwrap();
}

/// Move the end of the restore this job's record holds `by` into the past, as if the job had
/// started that much earlier; the new end, in milliseconds since the epoch.
fn restore_ended_earlier(step: &Step, by: Duration) -> i64 {
    let dir = step.runner_temp.join("exact-cache");
    let record = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".restore.json"))
        .expect("the restore left its record");
    let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    let ended = json["ended_ms"].as_i64().expect("the record says when the restore ended") - by.as_millis() as i64;
    json["ended_ms"] = ended.into();
    std::fs::write(&record, serde_json::to_vec(&json).unwrap()).unwrap();
    ended
}

/// A generator that takes `secs`: a process that sleeps, then writes the fixtures.
fn sleeping_generator(step: &Step, secs: f64) {
    std::fs::create_dir_all(step.ws.join(PATH)).unwrap();
    let script =
        format!("sleep {secs}; head -c 65536 /dev/urandom > {PATH}/model.pth; echo ok > {PATH}/model.expected");
    let status = std::process::Command::new("sh").args(["-c", &script]).current_dir(&step.ws).status().unwrap();
    assert!(status.success());
}

/// A cold job whose generator sleeps a known time records about that time, and a warm job reports
/// it with the time saved: the generation time less its own restore, never below zero.
fn a_generator_of_known_length_is_what_a_hit_saves(store: Store) {
    const SLEEP: f64 = 2.0;
    let peer = store.start();
    let step = peer.step();
    let inputs = inputs(&[]);
    let cold = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(cold.output("cache-hit"), "false", "{}", cold.stdout);
    assert_eq!((cold.generation_seconds(), cold.time_saved()), (None, None));
    sleeping_generator(&step, SLEEP);
    let post = step.run(&["save", "--post"], &inputs, &cold.state);
    assert_eq!(post.output("save-result"), "saved", "{}", post.stdout);

    let warm_step = peer.step();
    let warm = warm_step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(warm.output("cache-hit"), "true", "{}", warm.stdout);
    let generation = seconds(&warm, "generation-seconds");
    // The sleep, and the few milliseconds of writing after it (a loaded machine: up to a second).
    assert!((SLEEP..SLEEP + 1.0).contains(&generation), "generation-seconds = {generation}\n{}", post.stdout);
    let saved = seconds(&warm, "time-saved");
    assert!(saved <= generation && saved >= generation - 1.5, "time-saved = {saved}, generation {generation}");
    // The summary's row and a line of the log say what the hit saves, what the generating run
    // took and when that was recorded.
    let row = warm.summary_row("time saved");
    assert!(warm.stdout.lines().any(|l| l == row), "the log says it too:\n{}", warm.stdout);
    assert_shown!(Path::new("[TMP]"), "what_a_generator_of_known_length_saves", without_the_ref(row));
}

/// A post step long after the generator (a slow test step between them) records the
/// generator's window, not the job's.
fn a_post_step_records_the_generators_window_not_the_jobs(store: Store) {
    let peer = store.start();
    let step = peer.step();
    let inputs = inputs(&[]);
    let cold = step.run(&["restore"], &inputs, NO_STATE);
    // The job began 30 minutes ago: the generator ran for 90 s, then the tests ran for the rest.
    let ended = restore_ended_earlier(&step, Duration::from_secs(30 * 60));
    write(&step.ws.join(PATH).join("model.pth"), &noise(32 << 10, 3));
    write(&step.ws.join(PATH).join("sub/model.expected"), b"expected\n");
    set_mtime(&step.ws.join(PATH).join("model.pth"), ended + 40_000);
    set_mtime(&step.ws.join(PATH).join("sub/model.expected"), ended + 90_000);
    let post = step.run(&["save", "--post"], &inputs, &cold.state);
    assert_eq!(post.output("save-result"), "saved", "{}", post.stdout);
    let warm = peer.step().run(&["restore"], &inputs, NO_STATE);
    assert_eq!(warm.generation_seconds(), Some(90.0), "{}", warm.stdout);
    let saved = seconds(&warm, "time-saved");
    assert!((85.0..=90.0).contains(&saved), "time-saved = {saved}");
    let row = crate::support::planted(warm.summary_row("time saved"), "1 min 30 s");
    assert_shown!(Path::new("[TMP]"), "a_post_step_records_the_generators_window", without_the_ref(&row));
}

/// `row` without the ref its figure was recorded on: the stores that keep refs name it.
fn without_the_ref(row: &str) -> String {
    row.replace(" on `refs/heads/main`", "")
}

on_every_store!(
    a_generator_of_known_length_is_what_a_hit_saves,
    a_post_step_records_the_generators_window_not_the_jobs
);

/// What `list` shows on every store that lists: each entry's figure (`--json` too), an entry saved
/// before figures were recorded as not recorded, and a totals line.
fn list_shows_each_entrys_generation_time_and_a_total(store: Store) {
    let peer = store.start();
    let step = peer.step();
    let catalog = peer.catalog_inputs();
    let with_catalog = |extra: &[(&'static str, &'static str)]| {
        let mut all: Vec<(&str, &str)> = vec![("prefix", PREFIX)];
        all.extend(catalog.iter().map(|(n, v)| (*n, v.as_str())));
        all.extend_from_slice(extra);
        all
    };
    // Two caches of the prefix: one measured (planted 75 s), one given by the input.
    let cold = step.run(&["restore"], &inputs(&[]), NO_STATE);
    let ended = restore_ended_earlier(&step, Duration::from_secs(600));
    write(&step.ws.join(PATH).join("a.pth"), b"a");
    set_mtime(&step.ws.join(PATH).join("a.pth"), ended + 75_000);
    let post = step.run(&["save", "--post"], &inputs(&[]), &cold.state);
    assert_eq!(post.output("save-result"), "saved", "{}", post.stdout);
    let other = [("path", "other"), ("native", "none"), ("prefix", PREFIX), ("generation-seconds", "30")];
    write(&step.ws.join("other/b.pth"), b"b");
    let saved = step.run(&["save"], &other, NO_STATE);
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);

    let list = step.run(&["list", "--all-refs"], &with_catalog(&[]), NO_STATE);
    assert_eq!(list.code, 0, "{}", list.stdout);
    let mut figures: Vec<String> = list.listed().into_iter().map(|row| row["generated in"].clone()).collect();
    figures.sort();
    assert_eq!(figures, ["1 min 15 s", "30.0 s"], "{}", list.stdout);
    assert!(
        list.stdout
            .contains("total generation time: `worth`: 1 min 45 s to generate the 2 entries with a recorded figure"),
        "{}",
        list.stdout
    );
    if store != Store::Local {
        return;
    }
    // `--json` is the command line's.
    let out = std::process::Command::new(crate::support::exe())
        .args(["list", &format!("--prefix={PREFIX}"), "--json", &format!("--workspace={}", step.ws.display())])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", &step.home)
        .envs(peer.env())
        .output()
        .unwrap();
    let json = String::from_utf8(out.stdout).unwrap();
    let entries: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let mut figures: Vec<f64> =
        entries.as_array().unwrap().iter().map(|e| e["generation_seconds"].as_f64().unwrap()).collect();
    figures.sort_by(f64::total_cmp);
    assert_eq!(figures, [30.0, 75.0]);
}

on_every_store!(where lists_entries: list_shows_each_entrys_generation_time_and_a_total);

/// The config and fingerprint of the step's last save of `PATH`, to write entries as a forger
/// (or an earlier exact-cache) would.
fn forge(step: &Step, inputs: &[(&str, &str)], generation: Option<Generation>) -> Vec<u8> {
    let mut raw = RawInputs::default();
    for (name, value) in inputs {
        raw.set(name, *value);
    }
    let env = Env::from_pairs([("HOME", step.home.to_str().unwrap())]);
    let config = Config::from_raw(&raw, &env, &step.ws, CommandName::Save).unwrap();
    let fingerprint_dir = step.runner_temp.join("exact-cache");
    let file = std::fs::read_dir(&fingerprint_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json") && !p.to_string_lossy().ends_with(".restore.json"))
        .unwrap();
    let record = FingerprintRecord::from_json(&std::fs::read(file).unwrap()).unwrap();
    let inv = inventory(&config.locate.paths).unwrap();
    let stamp = Stamp { stack: None, generation };
    write_archive_with(&inv, &record, Compression::Zstd, stamp, &SecretScanner::none(), Vec::new(), &mut |_| {})
        .unwrap()
        .0
}

/// Another job's step on `step`'s local store.
fn elsewhere(step: &Step) -> Step {
    let mut other = Step::new();
    other.set_env("EXACT_CACHE_DIR", step.cache.to_str().unwrap());
    other
}

/// A figure no job takes (negative, longer than three days) and a forged ref are shown as not
/// recorded, never as a saving and never as a log command; so is an entry saved before figures
/// were recorded.
#[test]
fn a_forged_or_absurd_figure_is_not_recorded() {
    let step = Step::new();
    let inputs = inputs(&[]);
    let cold = step.run(&["restore"], &inputs, NO_STATE);
    write(&step.ws.join(PATH).join("a.pth"), b"a");
    let post = step.run(&["save", "--post"], &inputs, &cold.state);
    assert_eq!(post.output("save-result"), "saved", "{}", post.stdout);
    let key = post.output("key").to_owned();
    let entry = std::fs::read_dir(step.cache.join("entries"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("{key}@")))
        .unwrap();
    let forged = |millis: i64| Generation {
        millis,
        recorded: 1_796_083_200,
        r#ref: Some("refs/heads/x\n::error::forged\u{202e}".into()),
        given: false,
    };
    let cases: [(&str, Option<Generation>); 4] = [
        ("negative", Some(forged(-5_000))),
        ("longer than three days", Some(forged(Generation::MAX_MILLIS + 1))),
        ("saved before figures were recorded", None),
        ("a forged ref with a figure", Some(forged(12_000))),
    ];
    for (what, generation) in cases {
        let shown = generation.as_ref().and_then(Generation::plausible).is_some();
        std::fs::write(&entry, forge(&step, &inputs, generation)).unwrap();
        let warm = elsewhere(&step).run(&["restore"], &inputs, NO_STATE);
        assert_eq!(warm.output("cache-hit"), "true", "{what}: {}", warm.stdout);
        let readable = warm.readable();
        assert!(!readable.lines().any(|l| l.trim_start().starts_with("::error::")), "{what}: {readable}");
        assert!(!readable.contains('\u{202e}'), "{what}: {readable}");
        if shown {
            assert_eq!(warm.generation_seconds(), Some(12.0), "{what}");
            assert!(!readable.contains("forged"), "{what}: the ref is left out: {readable}");
        } else {
            assert_eq!((warm.generation_seconds(), warm.time_saved()), (None, None), "{what}");
            // The summary says what the generating run took is not recorded.
            assert_shown!(Path::new("[TMP]"), "a_figure_not_recorded", warm.summary_row("time saved"));
        }
        let list = step.run(&["list"], &[("prefix", PREFIX)], NO_STATE);
        let column = if shown { "12.0 s" } else { "not recorded" };
        assert!(list.stdout.contains(column), "{what}: {}", list.stdout);
        assert!(!list.stdout.lines().any(|l| l.trim_start().starts_with("::error::")), "{what}: {}", list.stdout);
    }
    // The input, absurd: recorded as given, never shown as a saving.
    let given = [inputs.clone(), vec![("generation-seconds", "999999")]].concat();
    let other = Step::new();
    write(&other.ws.join(PATH).join("a.pth"), b"a");
    assert_eq!(other.run(&["save"], &given, NO_STATE).output("save-result"), "saved");
    std::fs::remove_dir_all(other.ws.join(PATH)).unwrap();
    let warm = other.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((warm.cache_hit(), warm.time_saved()), (true, None), "{}", warm.stdout);
}

/// With `grow`, a layer records the window of what it adds; a hit reports the base's and the
/// layer's together.
#[test]
fn a_layer_records_its_own_window_and_a_hit_reports_the_stack() {
    let step = Step::new();
    let inputs = inputs(&[("grow", "true")]);
    let cold = step.run(&["restore"], &inputs, NO_STATE);
    let ended = restore_ended_earlier(&step, Duration::from_secs(300));
    write(&step.ws.join(PATH).join("base.bin"), &noise(256 << 10, 1));
    set_mtime(&step.ws.join(PATH).join("base.bin"), ended + 60_000);
    let post = step.run(&["save", "--post"], &inputs, &cold.state);
    assert_eq!(post.output("save-result"), "saved", "{}", post.stdout);

    let warm = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(warm.generation_seconds(), Some(60.0), "{}", warm.stdout);
    let ended = restore_ended_earlier(&step, Duration::from_secs(120));
    write(&step.ws.join(PATH).join("added.bin"), b"added");
    set_mtime(&step.ws.join(PATH).join("added.bin"), ended + 20_000);
    let grown = step.run(&["save", "--post"], &inputs, &warm.state);
    assert_eq!(grown.output("save-result"), "layer", "{}", grown.stdout);

    let again = elsewhere(&step).run(&["restore"], &inputs, NO_STATE);
    assert_eq!((again.layers(), again.generation_seconds()), (1, Some(80.0)), "{}", again.stdout);
}

/// `verify-reuse` puts the measured saving beside what it says about the tree.
#[test]
fn verify_reuse_puts_the_saving_beside_its_verdict() {
    let step = Step::new();
    let inputs = inputs(&[("verify-reuse", "warn")]);
    let cold = step.run(&["restore"], &inputs, NO_STATE);
    let ended = restore_ended_earlier(&step, Duration::from_secs(100));
    write(&step.ws.join(PATH).join("a.pth"), b"a");
    set_mtime(&step.ws.join(PATH).join("a.pth"), ended + 42_000);
    step.run(&["save", "--post"], &inputs, &cold.state);
    let warm = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(warm.generation_seconds(), Some(42.0), "{}", warm.stdout);
    let saved = seconds(&warm, "time-saved");
    assert!((41.0..=42.0).contains(&saved), "time-saved = {saved}");
    let post = step.run(&["save", "--post"], &inputs, &warm.state);
    // The verdict (nothing changed), then what the hit saves and what the generating run took,
    // in the log and the summary.
    // The planted figure is shown as it is, past the redaction of times.
    let shown = post.brief().replace("run took 42.0 s,", "run took [PLANTED 42.0],");
    assert_shown!(step.dir.path(), "verify_reuse_puts_the_saving_beside_its_verdict", shown);
    // The save step's `time-saved` is a compile cache's figure: none here.
    assert_eq!(post.time_saved(), None, "{}", post.stdout);
}

/// `list` reads the figure from the archive's first bytes: the copy before the fingerprint
/// member, none in an archive saved before it, and a pax record that claims more than the
/// archive's head is cut, never held whole.
#[test]
fn the_figure_is_read_from_the_start_of_the_archive() {
    use exact_cache::archive::{GENERATION_PAX, Inventory, read_generation};
    let record = FingerprintRecord::new("p", &"v".into(), Default::default());
    let generation = Generation { millis: 20_700, recorded: 1_796_083_200, r#ref: None, given: false };
    let write = |generation: Option<Generation>, compression| {
        let stamp = Stamp { stack: None, generation };
        let inv = Inventory::default();
        write_archive_with(&inv, &record, compression, stamp, &SecretScanner::none(), Vec::new(), &mut |_| {})
            .unwrap()
            .0
    };
    for compression in [Compression::Zstd, Compression::Gzip, Compression::None] {
        let bytes = write(Some(generation.clone()), compression);
        assert_eq!(
            read_generation(&bytes[..bytes.len().min(132 << 10)], compression).unwrap(),
            Some(generation.clone())
        );
        assert_eq!(read_generation(&write(None, compression)[..], compression).unwrap(), None);
    }
    // A pax record of 16 MiB (a few KiB compressed), then the fingerprint.
    let mut tar = tar::Builder::new(Vec::new());
    let huge = vec![b'0'; 16 << 20];
    tar.append_pax_extensions([(GENERATION_PAX, &huge[..])]).unwrap();
    let mut header = tar::Header::new_ustar();
    header.set_size(0);
    header.set_path(".exact-cache/fingerprint.json").unwrap();
    header.set_cksum();
    tar.append(&header, &[][..]).unwrap();
    let plain = tar.into_inner().unwrap();
    drop(huge);
    let bomb = zstd::encode_all(&plain[..], 1).unwrap();
    assert!(bomb.len() < 1 << 20, "{}", bomb.len());
    assert!(read_generation(&bomb[..], Compression::Zstd).is_err());
}
