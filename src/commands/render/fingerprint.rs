//! A fingerprint's words: its values in the log, and its summary (also part of a restore's).

use super::{Said, Shown};
use crate::fingerprint::{ComponentName, FingerprintRecord, Value};
use crate::preset::Preset;
use crate::runner::Runner;
use crate::runner::summary::{Inline, Markdown};
use crate::units;
use std::path::Path;

/// Values shown per component in the log before "… and N more".
const LOG_VALUES: usize = 12;
/// Values per component in the summary's collapsible fingerprint section.
const SUMMARY_VALUES: usize = 500;
const FILES_NOTE: &str =
    "each file's value is the sha256 of its content, then `x` when it is executable or `-` when not";
/// Characters of a value shown in the log and the summary.
const VALUE_CHARS: usize = 160;

/// The log group the fingerprint is computed in.
pub const GROUP: &str = "Fingerprint";

/// `torch-inductor: variables in the key: …; left out, their values being paths: …`.
pub fn preset_variables(preset: Preset, entered: &[&str], paths: &[&str]) -> Said {
    let entered = if entered.is_empty() { "none".to_owned() } else { entered.join(", ") };
    let mut line = format!("{}: variables in the key: {entered}", preset.name());
    if !paths.is_empty() {
        line.push_str(&format!("; left out, their values being paths: {}", paths.join(", ")));
    }
    Said::Info(line)
}

pub fn file(path: &Path) -> Said {
    Said::Info(format!("fingerprint file: {}", path.display()))
}

/// Each component's values where details are shown (Actions, in a collapsed group;
/// `--verbose`, `fingerprint` and `explain` on the command line), else one line; then the key.
pub fn log(runner: &Runner, shown: &Shown, record: &FingerprintRecord) {
    let components = &record.components.components;
    if !runner.shows_details() {
        let names: Vec<&str> = components.keys().map(String::as_str).collect();
        let count: usize = components.values().map(|c| c.len()).sum();
        runner.info(&format!(
            "fingerprint: {}, {} ({}; `--verbose` lists them)",
            units::count_of(components.len(), "component"),
            units::count_of(count, "value"),
            names.join(", ")
        ));
    } else {
        for (name, values) in components {
            runner.info(&format!("{name} ({})", units::count_of(values.len(), "value")));
            if name == ComponentName::Files.name() {
                runner.info(&format!("  ({FILES_NOTE}; {})", origin_counts(record)));
            }
            for (label, value) in values.iter().take(LOG_VALUES) {
                runner.info(&format!("  {label} = {}", shown.value(name, label, value, VALUE_CHARS)));
            }
            if values.len() > LOG_VALUES {
                runner.info(&format!(
                    "  … and {} more (the step summary's collapsible fingerprint section lists up to {SUMMARY_VALUES})",
                    values.len() - LOG_VALUES
                ));
            }
        }
    }
    runner.info(&format!("key: {}", record.key));
}

pub fn summary(shown: &Shown, record: &FingerprintRecord) -> String {
    let mut md = shown.summary("fingerprint");
    let rows = [vec![Inline::ours("key"), md.code(&record.key)]];
    md.table(&["", ""], rows);
    details(&mut md, shown, record);
    md.as_str().to_owned()
}

/// `2 from hash-files, 1 through imports`.
fn origin_counts(record: &FingerprintRecord) -> String {
    let components = &record.components.components;
    let files = components.get(ComponentName::Files.name()).map_or(0, |c| c.len());
    let imported = components.get(ComponentName::Imports.name()).map_or(0, |c| c.len());
    format!("{} from hash-files, {} through imports", files - imported.min(files), imported)
}

/// The files the key covers and where each comes from (`hash-files`, or an import and who
/// imports it), then every value, each in a collapsed section.
pub fn details(md: &mut Markdown, shown: &Shown, record: &FingerprintRecord) {
    let components = &record.components.components;
    if let Some(files) = components.get(ComponentName::Files.name()) {
        let imports = components.get(ComponentName::Imports.name());
        let by = |label: &str| imports.and_then(|i| i.get(label)).and_then(Value::as_text);
        let mut inner = md.nested();
        let rows: Vec<Vec<Inline>> = files
            .keys()
            .take(SUMMARY_VALUES)
            .map(|label| {
                let origin = match by(label) {
                    Some(importers) => Inline::ours(format!("import of {}", md.code(importers))),
                    None => md.code("hash-files"),
                };
                vec![md.code(label), origin]
            })
            .collect();
        inner.table(&["file", "origin"], rows);
        if files.len() > SUMMARY_VALUES {
            inner.paragraph(&Inline::ours(format!("… {} more", files.len() - SUMMARY_VALUES)));
        }
        md.details(&format!("Files the key covers: {}", origin_counts(record)), &inner);
    }
    let mut inner = md.nested();
    let mut rows = Vec::new();
    for (name, values) in components {
        for (label, value) in values.iter().take(SUMMARY_VALUES) {
            rows.push(vec![md.code(name), md.code(label), md.code(&shown.value(name, label, value, VALUE_CHARS))]);
        }
        if values.len() > SUMMARY_VALUES {
            let more = Inline::ours(format!("… {} more", values.len() - SUMMARY_VALUES));
            rows.push(vec![md.code(name), more, Inline::default()]);
        }
    }
    inner.table(&["component", "label", "value"], rows);
    if components.contains_key(ComponentName::Files.name()) {
        inner.paragraph(&Inline::ours(format!("`files`: {FILES_NOTE}.")));
    }
    let count: usize = components.values().map(|c| c.len()).sum();
    let counted = units::count_of(components.len(), "component");
    md.details(&format!("Fingerprint: {counted}, {}", units::count_of(count, "value")), &inner);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::{Component, Fingerprint};
    use crate::runner::summary::gfm_cells;

    #[test]
    fn the_summary_lists_the_files_the_key_covers_by_origin() {
        let mut fp = Fingerprint::default();
        let files = [("tools/gen.py", "aa -"), ("tools/helpers/weights.py", "bb -")];
        fp.insert("files", Component::from_iter(files.map(|(l, v)| (l.to_owned(), Value::text(v)))));
        fp.insert("imports", Component::from([("tools/helpers/weights.py".to_owned(), Value::text("tools/gen.py"))]));
        let summary = summary(&Shown::plain(), &FingerprintRecord::new("p", &"v".into(), fp));
        assert!(summary.contains("Files the key covers: 1 from hash-files, 1 through imports"), "{summary}");
        assert!(summary.contains("| `tools/gen.py` | `hash-files` |"), "{summary}");
        assert!(summary.contains("| `tools/helpers/weights.py` | import of `tools/gen.py` |"), "{summary}");
    }

    #[test]
    fn labels_and_values_from_outside_keep_the_summary_table_whole() {
        let mut fp = Fingerprint::default();
        let hostile = "a|b\n| x | y |\r<img src=x onerror=alert(1)>`|`";
        fp.insert("files", Component::from([(hostile.to_owned(), Value::text("0123 -"))]));
        fp.insert("env", Component::from([("K".to_owned(), Value::text(format!("{hostile}\n# heading")))]));
        let summary = summary(&Shown::plain(), &FingerprintRecord::new("p", &"v".into(), fp));
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
