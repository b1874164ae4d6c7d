//! What users read: the fingerprint and explanations of misses in the log, and the step summary
//! of each command's outcome.

use super::words;
use crate::config::Config;
use crate::fingerprint::{ComponentName, FingerprintRecord, Note, Value};
use crate::outcome::{Attempt, Explanation, RestoreOutcome, SaveOutcome, Transfer};
use crate::runner::summary::{Inline, Markdown};
use crate::runner::{Redactor, Runner};
use crate::text::shorten;
use crate::units;

/// Values shown per component before "… and N more".
const LOG_VALUES: usize = 12;
const SUMMARY_VALUES: usize = 40;
/// Files `clean-on-miss` removed that the summary names; a step summary holds at most 1 MiB.
const CLEANED_SHOWN: usize = 2000;
/// Values per component in the summary's collapsible fingerprint section.
const FINGERPRINT_VALUES: usize = 500;
/// What a value of the `files` component is.
const FILES_NOTE: &str =
    "each file's value is the sha256 of its content, then `x` when it is executable or `-` when not";
/// Characters of a value shown in the log and the summary.
const VALUE_CHARS: usize = 160;
/// Characters of a `path` line naming a cache in a summary's heading.
const NAME_CHARS: usize = 60;

/// How fingerprint values read in the log, the summary and explanations of misses: the value of
/// a `secret-env` variable is `***` (whatever its length, and on either side of a change), other
/// registered secrets are redacted, and only then is the value cut to one short line, so no
/// part of a secret survives the cut. What enters the key is untouched. A summary's heading
/// names the cache it is about ([`cache_name`]), so that several caches in one job tell apart.
pub(super) struct Shown<'a> {
    redactor: Redactor,
    secret_env: &'a [String],
    cache: Option<String>,
    /// `save-on-failure` and `save-if`, for what a miss's summary says of the save.
    save_on_failure: bool,
    save_if: bool,
    /// Outside Actions, where a save is a command the user runs.
    cli: bool,
}

impl<'a> Shown<'a> {
    pub fn new(runner: &Runner, config: &'a Config) -> Self {
        Self {
            redactor: runner.redactor(),
            secret_env: &config.secret_env,
            cache: cache_name(config),
            save_on_failure: config.save.save_on_failure,
            save_if: config.save.save_if,
            cli: runner.mode() == crate::runner::Mode::Cli,
        }
    }

    /// Nothing secret, no cache named (tests).
    #[cfg(test)]
    pub fn plain() -> Shown<'static> {
        Shown {
            redactor: Redactor::default(),
            secret_env: &[],
            cache: None,
            save_on_failure: false,
            save_if: true,
            cli: false,
        }
    }

    /// A summary headed `exact-cache <command>: <the cache's name>`.
    fn summary(&self, command: &str) -> Markdown {
        let mut md = self.markdown();
        let name = self.cache.as_deref().map(|name| format!(": {name}")).unwrap_or_default();
        md.heading(3, &format!("exact-cache {command}{name}"));
        md
    }

    /// Whether `label` of `component` is a `secret-env` variable.
    fn is_secret(&self, component: &str, label: &str) -> bool {
        component == crate::fingerprint::ComponentName::Env.name() && self.secret_env.iter().any(|n| n == label)
    }

    /// `value` of `label` in `component`, as one line of at most `max` characters.
    pub fn value(&self, component: &str, label: &str, value: &Value, max: usize) -> String {
        if self.is_secret(component, label) && *value != Value::Absent {
            return "***".to_owned();
        }
        shorten(&self.redactor.redact(value.display()), max)
    }

    /// When a miss is saved: GitHub hides a skipped post step, so the restore says it.
    pub fn when_saved(&self) -> &'static str {
        if self.cli {
            return "when you run `exact-cache save` with the same inputs";
        }
        match (self.save_if, self.save_on_failure) {
            (false, _) => "nothing: `save-if` is false for this job",
            (true, false) => {
                "by the post step, only if the job succeeds (`save-on-failure: true` saves after a failure too); \
                 with the `restore` entry point, by your `save` step"
            }
            (true, true) => "by the post step, also if the job fails (`save-on-failure`)",
        }
    }

    pub fn markdown(&self) -> Markdown {
        Markdown::new(self.redactor.clone())
    }
}

/// What a job calls this cache: its `prefix`; with the default prefix, its preset, else its
/// first `path` line.
/// A save given the restore's `key` names the cache by that key's prefix, as the restore did.
fn cache_name(config: &Config) -> Option<String> {
    let prefix = config.save.key.as_ref().and_then(|k| k.prefix()).unwrap_or(&config.locate.prefix);
    if prefix != crate::config::DEFAULT_PREFIX {
        return Some(prefix.to_owned());
    }
    if let Some(preset) = config.preset {
        return Some(preset.name().to_owned());
    }
    config.locate.path_lines.iter().find(|line| !line.starts_with('!')).map(|line| shorten(line, NAME_CHARS))
}

/// The fingerprint in the log: each component's values where details are shown (Actions, in a
/// collapsed group; `--verbose`, `fingerprint` and `explain` on the command line), else one line.
pub(super) fn log_fingerprint(runner: &Runner, shown: &Shown, record: &FingerprintRecord) {
    if !runner.shows_details() {
        let components = &record.components.components;
        let names: Vec<&str> = components.keys().map(String::as_str).collect();
        let count: usize = components.values().map(|c| c.len()).sum();
        runner.info(&format!(
            "fingerprint: {}, {} ({}; `--verbose` lists them)",
            units::count_of(components.len(), "component"),
            units::count_of(count, "value"),
            names.join(", ")
        ));
        runner.info(&format!("key: {}", record.key));
        return;
    }
    for (name, values) in &record.components.components {
        runner.info(&format!("{name} ({})", units::count_of(values.len(), "value")));
        if name == ComponentName::Files.name() {
            runner.info(&format!("  ({FILES_NOTE}; {})", files_origin_counts(record)));
        }
        for (label, value) in values.iter().take(LOG_VALUES) {
            runner.info(&format!("  {label} = {}", shown.value(name, label, value, VALUE_CHARS)));
        }
        if values.len() > LOG_VALUES {
            runner.info(&format!(
                "  … and {} more (the step summary's collapsible fingerprint section lists up to {FINGERPRINT_VALUES})",
                values.len() - LOG_VALUES
            ));
        }
    }
    runner.info(&format!("key: {}", record.key));
}

/// Why a miss is a miss, in the log ([`words::explanation`]). `asked`: the answer of `explain`,
/// which `--quiet` keeps.
pub(super) fn log_explanation(runner: &Runner, explanation: &Explanation, limit: usize, asked: bool) {
    for line in words::explanation(explanation, limit) {
        if asked { runner.answer(&line) } else { runner.info(&line) }
    }
}

/// The files the key covers and where each comes from: `hash-files`, or an import (and who
/// imports it).
fn files_by_origin(md: &mut Markdown, record: &FingerprintRecord) {
    let components = &record.components.components;
    let Some(files) = components.get(ComponentName::Files.name()) else { return };
    let imports = components.get(ComponentName::Imports.name());
    let by = |label: &str| imports.and_then(|i| i.get(label)).and_then(Value::as_text);
    let mut inner = md.nested();
    let rows: Vec<Vec<Inline>> = files
        .keys()
        .take(FINGERPRINT_VALUES)
        .map(|label| {
            let origin = match by(label) {
                Some(importers) => Inline::ours(format!("import of {}", md.code(importers))),
                None => md.code("hash-files"),
            };
            vec![md.code(label), origin]
        })
        .collect();
    inner.table(&["file", "origin"], rows);
    if files.len() > FINGERPRINT_VALUES {
        inner.paragraph(&Inline::ours(format!("… {} more", files.len() - FINGERPRINT_VALUES)));
    }
    md.details(&format!("Files the key covers: {}", files_origin_counts(record)), &inner);
}

/// `2 from hash-files, 1 through imports`.
pub(super) fn files_origin_counts(record: &FingerprintRecord) -> String {
    let components = &record.components.components;
    let files = components.get(ComponentName::Files.name()).map_or(0, |c| c.len());
    let imported = components.get(ComponentName::Imports.name()).map_or(0, |c| c.len());
    format!("{} from hash-files, {} through imports", files - imported.min(files), imported)
}

fn fingerprint_details(md: &mut Markdown, shown: &Shown, record: &FingerprintRecord) {
    files_by_origin(md, record);
    let mut inner = md.nested();
    let mut rows = Vec::new();
    for (name, values) in &record.components.components {
        for (label, value) in values.iter().take(FINGERPRINT_VALUES) {
            rows.push(vec![md.code(name), md.code(label), md.code(&shown.value(name, label, value, VALUE_CHARS))]);
        }
        if values.len() > FINGERPRINT_VALUES {
            let more = Inline::ours(format!("… {} more", values.len() - FINGERPRINT_VALUES));
            rows.push(vec![md.code(name), more, Inline::default()]);
        }
    }
    inner.table(&["component", "label", "value"], rows);
    if record.components.components.contains_key(ComponentName::Files.name()) {
        inner.paragraph(&Inline::ours(format!("`files`: {FILES_NOTE}.")));
    }
    let count: usize = record.components.components.values().map(|c| c.len()).sum();
    let components = units::count_of(record.components.components.len(), "component");
    md.details(&format!("Fingerprint: {components}, {}", units::count_of(count, "value")), &inner);
}

/// What collecting the fingerprint had to say, one row each: the files whose imports are not all
/// followed (what they load may be missing from the key) and the editable installs left out.
fn fingerprint_notes(md: &mut Markdown, notes: &[Note]) {
    if notes.is_empty() {
        return;
    }
    let rows: Vec<Vec<Inline>> = notes
        .iter()
        .take(SUMMARY_VALUES)
        .map(|n| {
            let (mark, line) = match words::fingerprint_note(n) {
                words::Said::Warning(line) => ("⚠️ ", line),
                words::Said::Info(line) => ("", line),
            };
            vec![Inline::ours(format!("{mark}{}", md.prose(&line)))]
        })
        .collect();
    md.table(&["what the key leaves out"], rows);
    if notes.len() > SUMMARY_VALUES {
        md.paragraph(&Inline::ours(format!("… {} more", notes.len() - SUMMARY_VALUES)));
    }
}

pub(super) fn fingerprint_summary(shown: &Shown, record: &FingerprintRecord, notes: &[Note]) -> String {
    let mut md = shown.summary("fingerprint");
    let rows = [vec![Inline::ours("key"), md.code(&record.key)]];
    md.table(&["", ""], rows);
    fingerprint_notes(&mut md, notes);
    fingerprint_details(&mut md, shown, record);
    md.as_str().to_owned()
}

/// Below this a step's time is mostly fixed costs, and a rate would say nothing.
const RATE_FROM: std::time::Duration = std::time::Duration::from_millis(100);

/// Files, content and compressed sizes, time and the content's rate, on one line.
pub(super) fn transfer_line(t: &Transfer) -> String {
    let mut line = format!(
        "{}, {} ({} compressed) in {}",
        units::count_of(t.files, "file"),
        units::bytes(t.content_bytes),
        units::bytes(t.archive_bytes),
        units::duration(t.elapsed),
    );
    if t.elapsed >= RATE_FROM {
        line.push_str(&format!(", {} of content", units::throughput(t.content_bytes, t.elapsed)));
    }
    line
}

fn transfer(t: &Transfer) -> Inline {
    Inline::ours(transfer_line(t))
}

pub(super) fn restore_summary(shown: &Shown, outcome: &RestoreOutcome) -> String {
    let mut md = shown.summary("restore");
    let mut rows = vec![vec![Inline::ours("key"), md.code(&outcome.record.key)]];
    match &outcome.attempt {
        Attempt::Reused { restored, extra_files, stack, .. } => {
            rows.push(vec![Inline::ours("result"), Inline::ours(words::REUSED_CELL)]);
            rows.push(vec![Inline::ours("restored"), transfer(restored)]);
            if let Some(worth) = &outcome.worth {
                rows.push(vec![Inline::ours("time saved"), md.prose(&super::worth::sentence(worth))]);
            }
            if let Some(parts) = words::stack(stack) {
                rows.push(vec![Inline::ours("stack"), md.prose(&parts)]);
            }
            if let Some(why) = &stack.stopped {
                rows.push(vec![Inline::ours("stack stopped"), md.prose(&words::stack_stopped_cell(why))]);
            }
            if !extra_files.is_empty() {
                rows.push(vec![Inline::ours("kept"), md.prose(&words::extra_files(extra_files))]);
            }
        }
        Attempt::Found => rows.push(vec![Inline::ours("result"), Inline::ours(words::FOUND_CELL)]),
        Attempt::Miss { reason, detail } => {
            rows.push(vec![Inline::ours("result"), words::not_reused_cell(&md, *reason)]);
            if let Some(d) = detail {
                rows.push(vec![Inline::ours("why"), md.prose(d)]);
            }
            rows.push(vec![Inline::ours("saved"), Inline::ours(shown.when_saved())]);
            if let Some(slot) = outcome.replacement {
                rows.push(vec![Inline::ours("replacement"), md.prose(&words::replacement_cell(slot))]);
            }
        }
    }
    if outcome.clean_failed {
        rows.push(vec![Inline::ours("clean-on-miss"), Inline::ours(words::CLEAN_FAILED_CELL)]);
    }
    if let Some(c) = &outcome.cleaned {
        rows.push(vec![Inline::ours("clean-on-miss"), Inline::ours(words::cleaned_cell(c))]);
    }
    rows.push(vec![Inline::ours("backend"), md.prose(&outcome.backend)]);
    md.table(&["", ""], rows);
    if let Some(c) = outcome.cleaned.as_ref().filter(|c| !c.names.is_empty()) {
        let mut list = md.nested();
        let lines: Vec<Vec<Inline>> =
            c.names.iter().take(CLEANED_SHOWN).map(|n| vec![md.code(&shorten(n, 200))]).collect();
        list.table(&["removed by clean-on-miss"], lines);
        if c.names.len() > CLEANED_SHOWN {
            let more = format!("and {} more (the summary's size is limited)", c.names.len() - CLEANED_SHOWN);
            list.paragraph(&Inline::ours(more));
        }
        md.details(&format!("clean-on-miss removed {}", units::count_of(c.names.len(), "file")), &list);
    }
    if let Some(e) = &outcome.explanation {
        let intro = words::explanation_intro(&md, e);
        md.paragraph(&intro);
        // A change quotes their labels and values: code, which GitHub never links.
        let rows: Vec<Vec<Inline>> = e.changes.iter().take(SUMMARY_VALUES).map(|c| vec![md.code(c)]).collect();
        if rows.is_empty() {
            md.paragraph(&words::nothing_differs_cell());
        } else {
            md.table(&["what changed"], rows);
        }
    }
    if let Some(why) = &outcome.unexplained {
        let line = words::unexplained_cell(&md, why);
        md.paragraph(&line);
    }
    fingerprint_notes(&mut md, &outcome.notes);
    fingerprint_details(&mut md, shown, &outcome.record);
    md.as_str().to_owned()
}

/// `none`, or `⚠️ 2 files read that no input covers: `data/cases.txt`, …`.
fn uncovered_cell(md: &Markdown, uncovered: &[String]) -> Inline {
    if uncovered.is_empty() {
        return Inline::ours("none: every file the job's Python read under the workspace is covered");
    }
    let mut named: Vec<String> =
        uncovered.iter().take(SUMMARY_VALUES).map(|f| md.code(&shorten(f, 200)).to_string()).collect();
    if uncovered.len() > SUMMARY_VALUES {
        named.push(format!("and {} more", uncovered.len() - SUMMARY_VALUES));
    }
    Inline::ours(format!(
        "⚠️ {} read that no input covers: {}",
        units::count_of(uncovered.len(), "file"),
        named.join(", ")
    ))
}

pub(super) fn save_summary(shown: &Shown, outcome: &SaveOutcome) -> String {
    let mut md = shown.summary("save");
    let mut rows = Vec::new();
    if let Some(key) = &outcome.key {
        rows.push(vec![Inline::ours("key"), md.code(key)]);
    }
    rows.push(vec![Inline::ours("result"), words::save_result_cell(&md, outcome.result)]);
    if let Some(d) = &outcome.detail {
        rows.push(vec![Inline::ours("detail"), md.prose(d)]);
    }
    if let Some(archived) = outcome.archived.filter(|a| a.files > 0) {
        rows.push(vec![Inline::ours(words::saved_label(outcome.slot)), transfer(&archived)]);
        if outcome.is_saved() {
            let generation = words::time_to_generate_cell(outcome.generation);
            rows.push(vec![Inline::ours("time to generate"), Inline::ours(generation)]);
        }
    }
    if let Some(uncovered) = &outcome.uncovered {
        rows.push(vec![Inline::ours("uncovered reads"), uncovered_cell(&md, &uncovered.files)]);
    }
    if let Some(compile) = &outcome.compile {
        rows.push(vec![Inline::ours("time saved"), md.prose(&super::worth::compile_sentence(compile))]);
    }
    md.table(&["", ""], rows);
    if let Some(verified) = &outcome.verified {
        md.paragraph(&Inline::ours(format!("**verify-reuse**: {}", md.prose(&verified.verdict))));
        let files = &verified.changed_files;
        let mut list = md.nested();
        let lines: Vec<Vec<Inline>> = files.iter().take(SUMMARY_VALUES).map(|l| vec![md.code(l)]).collect();
        list.table(&["file"], lines);
        if !files.is_empty() {
            md.details(&units::count_of(files.len(), "file"), &list);
        }
    }
    if let Some(pruned) = &outcome.pruned {
        md.paragraph(&Inline::ours(format!("**prune**: {}", md.prose(pruned))));
    }
    md.as_str().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;
    use crate::fingerprint::{Change, Component, Fingerprint};
    use crate::runner::Mode;
    use crate::runner::summary::gfm_cells;

    /// Longer than any cut, over several lines.
    fn long_secret() -> String {
        (0..5).map(|i| format!("line{i}-{}", "Zq7xK2mP9w".repeat(6))).collect::<Vec<_>>().join("\n")
    }

    fn fragments(secret: &str) -> Vec<String> {
        let chars: Vec<char> = secret.chars().collect();
        chars.windows(12).map(|w| w.iter().collect::<String>()).filter(|f| !f.contains('\n')).collect()
    }

    #[test]
    fn secret_env_values_are_stars_and_secrets_are_redacted_before_the_cut() {
        let secret = long_secret();
        let runner = Runner::new(Mode::Cli, Env::default(), Box::new(std::io::sink()), Box::new(std::io::sink()));
        runner.add_secret(&secret);
        let names = ["DEPLOY_KEY".to_owned(), "PIN".to_owned()];
        let shown = Shown {
            redactor: runner.redactor(),
            secret_env: &names,
            cache: None,
            save_on_failure: false,
            save_if: true,
            cli: false,
        };
        assert_eq!(shown.value("env", "DEPLOY_KEY", &Value::text(&secret), VALUE_CHARS), "***");
        assert_eq!(shown.value("env", "PIN", &Value::text("4711"), VALUE_CHARS), "***", "however short");
        assert_eq!(shown.value("env", "PIN", &Value::Absent, VALUE_CHARS), "absent");
        let echoed = shown.value("commands", "cat key", &Value::text(format!("key: {secret}\nend")), VALUE_CHARS);
        assert_eq!(echoed, "key: *** ⏎ end");
        // An older entry's value (a rotated secret nobody registered) is masked all the same.
        let change = Change {
            component: "env".into(),
            label: "DEPLOY_KEY".into(),
            old: Some(Value::text(format!("old-{secret}"))),
            new: Some(Value::text(&secret)),
        };
        assert_eq!(super::super::explain::render(&change, &shown), "env: DEPLOY_KEY changed");

        let mut fp = Fingerprint::default();
        fp.insert("env", Component::from([("DEPLOY_KEY".to_owned(), Value::text(&secret))]));
        fp.insert("commands", Component::from([("cat key".to_owned(), Value::text(format!("k {secret}")))]));
        let summary = fingerprint_summary(&shown, &FingerprintRecord::new("p", &"v".into(), fp), &[]);
        for fragment in fragments(&secret) {
            assert!(!summary.contains(&fragment), "`{fragment}` in\n{summary}");
        }
    }

    #[test]
    fn a_summary_heading_names_the_cache_by_prefix_preset_or_first_path_line() {
        let config = |pairs: &[(&str, &str)]| {
            let mut raw = crate::inputs::RawInputs::default();
            for (name, value) in pairs {
                raw.set(name, *value);
            }
            Config::from_raw(
                &raw,
                &Env::from_pairs([("HOME", "/home/u")]),
                std::path::Path::new("/ws"),
                crate::config::CommandName::Restore,
            )
            .unwrap()
        };
        let name = |pairs: &[(&str, &str)]| cache_name(&config(pairs));
        assert_eq!(name(&[("path", "!out/x\nout"), ("prefix", "fixtures-v1")]).as_deref(), Some("fixtures-v1"));
        assert_eq!(name(&[("path", "!out/x\nout/**")]).as_deref(), Some("out/**"), "the first line that is no `!`");
        let mut preset = config(&[("path", "out")]);
        preset.preset = Some(crate::preset::Preset::TorchInductor);
        assert_eq!(cache_name(&preset).as_deref(), Some("torch-inductor"));

        // A save given the restore's key is headed by that key's prefix, as the restore was.
        let key = format!("my-fixtures-v2-{}", "a".repeat(64));
        assert_eq!(name(&[("path", "fixtures"), ("key", &key)]).as_deref(), Some("my-fixtures-v2"));
        let default = format!("exact-cache-{}", "a".repeat(64));
        assert_eq!(name(&[("path", "fixtures"), ("key", &default)]).as_deref(), Some("fixtures"));

        let mut shown = Shown::plain();
        shown.cache = Some("out/**".to_owned());
        let summary =
            fingerprint_summary(&shown, &FingerprintRecord::new("p", &"v".into(), Fingerprint::default()), &[]);
        assert!(summary.starts_with("### exact-cache fingerprint: out/\\*\\*\n"), "{summary}");
    }

    #[test]
    fn the_summary_lists_the_files_the_key_covers_by_origin() {
        let mut fp = Fingerprint::default();
        let files = [("tools/gen.py", "aa -"), ("tools/helpers/weights.py", "bb -")];
        fp.insert("files", Component::from_iter(files.map(|(l, v)| (l.to_owned(), Value::text(v)))));
        fp.insert("imports", Component::from([("tools/helpers/weights.py".to_owned(), Value::text("tools/gen.py"))]));
        let summary = fingerprint_summary(&Shown::plain(), &FingerprintRecord::new("p", &"v".into(), fp), &[]);
        assert!(summary.contains("Files the key covers: 1 from hash-files, 1 through imports"), "{summary}");
        assert!(summary.contains("| `tools/gen.py` | `hash-files` |"), "{summary}");
        assert!(summary.contains("| `tools/helpers/weights.py` | import of `tools/gen.py` |"), "{summary}");
    }

    #[test]
    fn a_transfer_reads_as_content_in_time_with_a_rate_only_when_it_means_something() {
        use std::time::Duration;
        let t = |content: u64, archive: u64, elapsed: Duration| Transfer {
            files: 3,
            content_bytes: content,
            archive_bytes: archive,
            elapsed,
        };
        let mib = 1024 * 1024;
        assert_eq!(
            transfer_line(&t(6 * mib, 2048, Duration::from_millis(21))),
            "3 files, 6.0 MiB (2.0 KiB compressed) in 21 ms"
        );
        assert_eq!(
            transfer_line(&t(300 * mib, 30 * mib, Duration::from_millis(1500))),
            "3 files, 300.0 MiB (30.0 MiB compressed) in 1.5 s, 200.0 MiB/s of content"
        );
    }

    #[test]
    fn labels_and_values_from_outside_keep_the_summary_table_whole() {
        let mut fp = Fingerprint::default();
        let hostile = "a|b\n| x | y |\r<img src=x onerror=alert(1)>`|`";
        fp.insert("files", Component::from([(hostile.to_owned(), Value::text("0123 -"))]));
        fp.insert("env", Component::from([("K".to_owned(), Value::text(format!("{hostile}\n# heading")))]));
        let summary = fingerprint_summary(&Shown::plain(), &FingerprintRecord::new("p", &"v".into(), fp), &[]);
        // Raw only inside the code spans of the label and the value, where HTML means nothing.
        assert_eq!(summary.matches("<img").count(), 3, "{summary}");
        assert!(
            summary.contains("| ``a\\|b ⏎ \\| x \\| y \\| ⏎ <img src=x onerror=alert(1)>`\\|` ⏎ # heading`` |"),
            "{summary}"
        );
        assert!(summary.contains("`` a\\|b⏎\\| x \\| y \\|⏎<img src=x onerror=alert(1)>`\\|` ``"), "{summary}");
        let rows: Vec<&str> = summary.lines().filter(|l| l.starts_with('|')).collect();
        // The key table (two columns, three rows), the files by origin (two columns) and the
        // fingerprint table (three columns).
        assert_eq!(
            rows.iter().map(|r| gfm_cells(r).len()).collect::<Vec<_>>(),
            [2, 2, 2, 2, 2, 2, 3, 3, 3, 3],
            "{summary}"
        );
    }
}
