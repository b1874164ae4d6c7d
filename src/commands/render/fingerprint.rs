//! A fingerprint's words: its values in the log, and its summary (also part of a restore's).

use super::{Said, Shown};
use crate::fingerprint::{ComponentName, FingerprintRecord, ImportTrouble, Note, SCAN_LIMIT, Unfollowed, Value};
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

pub fn summary(shown: &Shown, record: &FingerprintRecord, notes: &[Note]) -> String {
    let mut md = shown.summary("fingerprint");
    let rows = [vec![Inline::ours("key"), md.code(&record.key)]];
    md.table(&["", ""], rows);
    notes_table(&mut md, notes);
    details(&mut md, shown, record);
    md.as_str().to_owned()
}

/// What collecting the fingerprint had to say, one row each: the files whose imports are not all
/// followed (what they load may be missing from the key) and the editable installs left out.
pub fn notes_table(md: &mut Markdown, notes: &[Note]) {
    if notes.is_empty() {
        return;
    }
    let rows: Vec<Vec<Inline>> = notes
        .iter()
        .take(super::SUMMARY_ROWS)
        .map(|n| {
            let said = note(n);
            let mark = if matches!(said, Said::Warning(_)) { "⚠️ " } else { "" };
            vec![Inline::ours(format!("{mark}{}", md.prose(said.text())))]
        })
        .collect();
    md.table(&["what the key leaves out"], rows);
    if notes.len() > super::SUMMARY_ROWS {
        md.paragraph(&Inline::ours(format!("… {} more", notes.len() - super::SUMMARY_ROWS)));
    }
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

/// Warnings of files whose imports are not all followed, logged one by one up to this many.
const NOTES_LOGGED: usize = 10;
/// Lines of one file a warning names.
const LINES_NAMED: usize = 8;

/// A note of the fingerprint: a warning for what the import follower could not follow (the key
/// may miss what it loads), a line for an editable install left out.
fn note(note: &Note) -> Said {
    match note {
        Note::Imports { file, trouble } => Said::Warning(import_trouble(file, trouble)),
        Note::EditableLeftOut { name, version, location } => Said::Info(format!(
            "python.dists: `{name}` {version} left out: installed in editable mode from the workspace (`{location}`), \
             its files enter the key through `hash-files` and imports; `python-keep-editable: true` keeps it"
        )),
    }
}

fn import_trouble(file: &str, trouble: &ImportTrouble) -> String {
    match trouble {
        ImportTrouble::Lines(lines) => {
            let mut parts = Vec::new();
            for (what, says) in [
                (Unfollowed::SysPath, "changes `sys.path` to a value that cannot be worked out without running it"),
                (Unfollowed::ComputedName, "imports a module by a name computed at run time"),
                (Unfollowed::TooLong, "is longer than the import follower reads"),
            ] {
                let at: Vec<String> =
                    lines.iter().filter(|(l, w)| *w == what && *l > 0).map(|(l, _)| l.to_string()).collect();
                let cut = lines.iter().any(|(l, w)| *w == what && *l == 0);
                if cut {
                    parts.push("its `sys.path` changes are more than the import follower keeps".to_owned());
                }
                let mut named = at.iter().take(LINES_NAMED).cloned().collect::<Vec<_>>().join(", ");
                if at.len() > LINES_NAMED {
                    named.push_str(&format!(" and {} more", at.len() - LINES_NAMED));
                }
                match at.len() {
                    0 => {}
                    1 => parts.push(format!("line {named} {says}")),
                    _ => parts.push(format!("lines {named} {}", plural_verb(says))),
                }
            }
            format!(
                "imports of `{file}` not all followed: {}. What that loads is not in the key: list those modules in \
                 `hash-files` (such as `lib/**/*.py`)",
                parts.join("; ")
            )
        }
        ImportTrouble::TooLarge(bytes) => format!(
            "imports of `{file}` not followed: it is {}, over the {} the import follower reads (the file is in the \
             key, what it imports is not): list the modules it imports in `hash-files`",
            units::bytes(*bytes),
            units::bytes(SCAN_LIMIT)
        ),
        ImportTrouble::NotRead(target) => format!(
            "`{file}` is not read for imports: it resolves to `{}`, outside the workspace or not a regular file \
             (an import of it does not enter the key)",
            target.display()
        ),
    }
}

/// `changes …` → `change …`, `imports …` → `import …`, `is …` → `are …`.
fn plural_verb(says: &str) -> String {
    let (verb, rest) = says.split_once(' ').unwrap_or((says, ""));
    let verb = match verb {
        "is" => "are",
        v => v.strip_suffix('s').unwrap_or(v),
    };
    format!("{verb} {rest}")
}

/// What a step logs of the fingerprint's notes: each editable install left out, and a warning per
/// file whose imports are not all followed, the first [`NOTES_LOGGED`] of them and then how many
/// more (the step summary lists them).
pub fn notes(notes: &[Note]) -> Vec<Said> {
    let warnings = notes.iter().filter(|n| matches!(n, Note::Imports { .. })).count();
    let mut said: Vec<Said> = notes.iter().filter(|n| !matches!(n, Note::Imports { .. })).map(note).collect();
    said.extend(notes.iter().filter(|n| matches!(n, Note::Imports { .. })).take(NOTES_LOGGED).map(note));
    if warnings > NOTES_LOGGED {
        said.push(Said::Warning(format!(
            "imports of {} not all followed either: the step summary lists them",
            units::count_of(warnings - NOTES_LOGGED, "more file")
        )));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::super::tests::said;
    use super::*;
    use crate::fingerprint::{Component, Fingerprint};
    use crate::runner::summary::gfm_cells;
    use std::fmt::Write;

    #[test]
    fn the_summary_lists_the_files_the_key_covers_by_origin() {
        let mut fp = Fingerprint::default();
        let files = [("tools/gen.py", "aa -"), ("tools/helpers/weights.py", "bb -")];
        fp.insert("files", Component::from_iter(files.map(|(l, v)| (l.to_owned(), Value::text(v)))));
        fp.insert("imports", Component::from([("tools/helpers/weights.py".to_owned(), Value::text("tools/gen.py"))]));
        let summary = summary(&Shown::plain(), &FingerprintRecord::new("p", &"v".into(), fp), &[]);
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
        let summary = summary(&Shown::plain(), &FingerprintRecord::new("p", &"v".into(), fp), &[]);
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

    /// Every note of the fingerprint, as the log says it (the summary's cell is the same words).
    #[test]
    fn words_of_a_fingerprint() {
        let mut out = String::new();
        let imports = |trouble| Note::Imports { file: "tools/gen.py".into(), trouble };
        let many: Vec<(u32, Unfollowed)> = (1..=10).map(|l| (l * 10, Unfollowed::ComputedName)).collect();
        let notes = [
            imports(ImportTrouble::Lines(vec![(3, Unfollowed::SysPath)])),
            imports(ImportTrouble::Lines(vec![
                (3, Unfollowed::SysPath),
                (5, Unfollowed::SysPath),
                (9, Unfollowed::ComputedName),
            ])),
            imports(ImportTrouble::Lines(many)),
            imports(ImportTrouble::Lines(vec![(2, Unfollowed::TooLong), (0, Unfollowed::TooLong)])),
            imports(ImportTrouble::TooLarge(50 << 20)),
            imports(ImportTrouble::NotRead("/proc/1/pagemap".into())),
            Note::EditableLeftOut {
                name: "deepmd-kit".into(),
                version: "3.1.3.dev12+gbc902da".into(),
                location: ".".into(),
            },
        ];
        for note in &notes {
            writeln!(out, "{}", said(&super::note(note))).unwrap();
        }
        let crowd: Vec<Note> = (0..12)
            .map(|i| Note::Imports {
                file: format!("m{i}.py"),
                trouble: ImportTrouble::Lines(vec![(1, Unfollowed::ComputedName)]),
            })
            .collect();
        let logged = super::notes(&crowd);
        writeln!(out, "12 files: {} lines, the last: {}", logged.len(), said(logged.last().unwrap())).unwrap();
        insta::assert_snapshot!(out);
    }
}
