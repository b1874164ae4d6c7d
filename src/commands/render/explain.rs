//! An explanation's words: each fingerprint change, rendered once where `explain` diffs (a
//! change is a pair of values of any component), why a miss is a miss in the log and the
//! summary, and why there is no explanation.

use super::super::explain::ExplainError;
use super::{Said, Shown};
use crate::backend::CatalogError;
use crate::fingerprint::{Change, ComponentName, Fingerprint, Value};
use crate::outcome::{Explanation, SameKey};
use crate::runner::summary::{Inline, Markdown};
use crate::text::{error_line, shorten};
use crate::units::count_of;

/// Changes the log lists before "… and N more" (the `explain` command lists all).
const SHOWN: usize = 25;
/// Characters of each value in a change.
const VALUE_CHARS: usize = 80;
const NOTHING_DIFFERS: &str = "no fingerprint component differs";

/// The log group of `explain-misses`.
pub const GROUP: &str = "Why this is a miss";

/// Every difference from `theirs` to `ours`, one line each; a component only one side has is
/// one line ("python: 94 packages added"). A module file reached through imports reads
/// `files: <path> changed (imported by <file>)`, and its `imports` change is then no line.
pub fn changes(theirs: &Fingerprint, ours: &Fingerprint, shown: &Shown) -> Vec<String> {
    let diff = theirs.diff(ours);
    let (files, imports) = (ComponentName::Files.name(), ComponentName::Imports.name());
    let importers = |label: &str| {
        [ours, theirs].iter().find_map(|fp| fp.components.get(imports)?.get(label)?.as_text().map(str::to_owned))
    };
    let changed_files: std::collections::BTreeSet<&str> =
        diff.iter().filter(|c| c.component == files).map(|c| c.label.as_str()).collect();
    let mut lines = Vec::new();
    for group in diff.chunk_by(|a, b| a.component == b.component) {
        let component = group[0].component.as_str();
        if component == files || component == imports {
            for c in group.iter().filter(|c| component == files || !changed_files.contains(c.label.as_str())) {
                let by = importers(&c.label)
                    .filter(|_| component == files)
                    .map(|by| format!(" (imported by {})", shorten(&by, VALUE_CHARS)));
                lines.push(format!("{}{}", change(c, shown), by.unwrap_or_default()));
            }
            continue;
        }
        let added = !theirs.components.contains_key(component);
        let removed = !ours.components.contains_key(component);
        if group.len() > 1 && (added || removed) {
            let python = ComponentName::parse(component) == Some(ComponentName::PythonDists);
            let (name, noun) = if python { ("python", "package") } else { (component, "value") };
            let (verb, side) = if added { ("added", "the compared entry") } else { ("removed", "this run") };
            lines.push(format!(
                "{name}: {} {verb} ({side} has no `{component}` component)",
                count_of(group.len(), noun)
            ));
        } else {
            lines.extend(group.iter().map(|c| change(c, shown)));
        }
    }
    lines
}

/// One change: `python: torch 2.14.0 → 2.15.0`, `files: gen.py changed`, `native.isa:
/// x86-64-v4 → x86-64-v3`, values as [`Shown`] shows them.
pub fn change(c: &Change, shown: &Shown) -> String {
    let (component, label) = (c.component.as_str(), c.label.as_str());
    let short = |v: &Value| shown.value(component, label, v, VALUE_CHARS);
    let known = ComponentName::parse(component);
    let single = known.is_some_and(|k| k.is_single_fact(label));
    let is_files = known == Some(ComponentName::Files);
    let name = match known {
        Some(ComponentName::PythonDists) => "python",
        _ => component,
    };
    match (&c.old, &c.new) {
        (Some(_), Some(_)) if is_files => format!("files: {label} changed"),
        // A `secret-env` value shows as `***` on both sides; a long one may differ past the cut.
        (Some(old), Some(new)) if short(old) == short(new) => format!("{name}: {label} changed"),
        (Some(old), Some(new)) if single => format!("{name}: {} → {}", short(old), short(new)),
        (Some(old), Some(new)) => format!("{name}: {label} {} → {}", short(old), short(new)),
        (None, Some(new)) if is_files || new == &Value::Absent => format!("{name}: {label} added"),
        (None, Some(new)) => format!("{name}: {label} added ({})", short(new)),
        (Some(_), None) => format!("{name}: {label} removed"),
        (None, None) => format!("{name}: {label}"),
    }
}

/// An entry with this very key (and fingerprint) but another version: one line for the log,
/// the summary, the `miss-reason` detail and `explain`'s `changes`.
pub fn same_key(same: &SameKey) -> String {
    if let Some(slot) = same.slot {
        return match slot.is_base() {
            true => format!(
                "this key's stack has a {slot} that this run's lookup did not find (saved on a ref this run \
                 cannot read, or since this run looked)"
            ),
            false => format!(
                "only {slot} of this key's stack exists: its base is gone (evicted or deleted), and a layer is \
                 never applied without it"
            ),
        };
    }
    match &same.compression {
        Some(c) => format!(
            "an entry with this key exists for other `path` lines or compression: it was saved with `compression: {c}`"
        ),
        None => "an entry with this key exists for other `path` lines or compression: it was saved with other \
                 `path` lines (or by an exact-cache of another archive format)"
            .to_owned(),
    }
}

/// Why a miss is a miss: the answer of `explain` (`asked`, every change), else log lines of
/// `explain-misses`.
pub fn explained(explanation: &Explanation, asked: bool) -> Vec<Said> {
    let lines = lines(explanation, if asked { usize::MAX } else { SHOWN });
    lines.into_iter().map(|line| if asked { Said::Answer(line) } else { Said::Info(line) }).collect()
}

/// The entry compared with (and its ref, when it has one) and at most `limit` changes.
fn lines(explanation: &Explanation, limit: usize) -> Vec<String> {
    let against_ref = match explanation.against_ref.as_deref() {
        Some("") => " (saved outside Actions)".to_owned(),
        Some(r) => format!(" ({r})"),
        None => String::new(),
    };
    let mut lines = vec![format!("compared with `{}`{against_ref}:", explanation.against_key)];
    lines.extend(explanation.changes.iter().take(limit).map(|line| format!("  {line}")));
    if explanation.changes.len() > limit {
        lines.push(format!("  … and {} more", explanation.changes.len() - limit));
    }
    if explanation.changes.is_empty() {
        lines.push(format!("  {NOTHING_DIFFERS}"));
    }
    lines
}

/// Why there is no explanation, as the summary and the log say it after `explain-misses:`.
pub fn why_not(reason: &ExplainError) -> String {
    match reason {
        // As under act: there is nothing to ask, not a failed attempt.
        ExplainError::Catalog(missing @ CatalogError::NoCacheApi { .. }) => skipped(missing),
        _ => error_line(reason),
    }
}

/// No catalog to ask.
pub fn skipped(catalog: &CatalogError) -> String {
    format!("skipped: {}", error_line(catalog))
}

/// `explain-misses: …`, or the `explain` command's answer `nothing to explain: …`.
pub fn unexplained(why: &str, asked: bool) -> Said {
    match asked {
        true => Said::Answer(format!("nothing to explain: {why}")),
        false => Said::Info(format!("explain-misses: {why}")),
    }
}

/// The summary's paragraphs: what the miss was compared with, then the changes.
pub fn summary(md: &mut Markdown, explanation: &Explanation) {
    let intro = intro(md, explanation);
    md.paragraph(&intro);
    // A change quotes labels and values: code, which GitHub never links.
    let rows: Vec<Vec<Inline>> =
        explanation.changes.iter().take(super::SUMMARY_ROWS).map(|c| vec![md.code(c)]).collect();
    if rows.is_empty() {
        md.paragraph(&Inline::ours(NOTHING_DIFFERS));
    } else {
        md.table(&["what changed"], rows);
    }
}

fn intro(md: &Markdown, explanation: &Explanation) -> Inline {
    let when = match explanation.against_ref.as_deref() {
        Some("") => " (saved outside Actions)".to_owned(),
        Some(r) => format!(" on {}", md.code(r)),
        None => String::new(),
    };
    let against = md.code(&explanation.against_key);
    Inline::ours(match explanation.same_key {
        Some(_) => format!("**Why this is a miss** — {against}{when} has this very key and fingerprint:"),
        None => format!("**Why this is a miss** — compared with the newest entry {against}{when}:"),
    })
}

/// The summary's paragraph when `explain-misses` explains nothing.
pub fn unexplained_cell(md: &Markdown, why: &str) -> Inline {
    Inline::ours(format!("**Why this is a miss** — `explain-misses`: {}", md.prose(why)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::Component;
    use crate::runner::Redactor;
    use crate::stack::Slot;
    use std::fmt::Write;

    /// Every kind of explanation, as the log and the summary say it.
    #[test]
    fn words_of_an_explanation() {
        let md = Markdown::new(Redactor::default());
        let mut out = String::new();
        for same in [
            SameKey { compression: Some("gzip".into()), slot: None },
            SameKey { compression: None, slot: None },
            SameKey { compression: None, slot: Some(Slot::base(1)) },
            SameKey { compression: None, slot: Some(Slot::new(0, 2)) },
        ] {
            writeln!(out, "{}", same_key(&same)).unwrap();
        }
        let changes = |n: usize| (1..=n).map(|i| format!("env: V{i} a → b")).collect();
        for (against_ref, changes, same_key) in [
            (Some("refs/heads/main"), changes(3), None),
            (Some(""), changes(0), None),
            (None, changes(1), Some(SameKey { compression: None, slot: None })),
        ] {
            let e = Explanation {
                against_key: "p-abc".into(),
                against_ref: against_ref.map(str::to_owned),
                changes,
                same_key,
            };
            writeln!(out, "{}\nsummary: {}", lines(&e, 2).join("\n"), intro(&md, &e)).unwrap();
        }
        writeln!(out, "summary: {NOTHING_DIFFERS}").unwrap();
        writeln!(out, "summary: {}", unexplained_cell(&md, "skipped: no catalog")).unwrap();
        insta::assert_snapshot!(out);
    }

    fn c(component: &str, label: &str, old: Option<&str>, new: Option<&str>) -> String {
        let c = Change {
            component: component.into(),
            label: label.into(),
            old: old.map(Value::text),
            new: new.map(Value::text),
        };
        change(&c, &Shown::plain())
    }

    #[test]
    fn a_component_only_one_side_has_is_one_line() {
        let dists = |n: usize| Component::from_iter((0..n).map(|i| (format!("pkg{i}"), Value::text("1.0"))));
        let mut theirs = Fingerprint::default();
        theirs.insert("variant", Component::from([("variant".to_owned(), Value::text("cpu"))]));
        let mut ours = theirs.clone();
        ours.insert("python.dists", dists(94));
        ours.insert("env", Component::from([("CC".to_owned(), Value::text("gcc"))]));
        let lines = changes(&theirs, &ours, &Shown::plain());
        assert_eq!(
            lines,
            ["env: CC added (gcc)", "python: 94 packages added (the compared entry has no `python.dists` component)",]
        );
        assert_eq!(
            changes(&ours, &theirs, &Shown::plain())[1],
            "python: 94 packages removed (this run has no `python.dists` component)"
        );
    }

    #[test]
    fn a_changed_import_names_who_imports_it() {
        let fp = |scale: &str| {
            let mut fp = Fingerprint::default();
            let files = [("tools/gen.py", "aa -"), ("tools/helpers/weights.py", scale)];
            fp.insert("files", Component::from_iter(files.map(|(l, v)| (l.to_owned(), Value::text(v)))));
            fp.insert(
                "imports",
                Component::from([("tools/helpers/weights.py".to_owned(), Value::text("tools/gen.py"))]),
            );
            fp
        };
        assert_eq!(
            changes(&fp("bb -"), &fp("cc -"), &Shown::plain()),
            ["files: tools/helpers/weights.py changed (imported by tools/gen.py)"]
        );
        // An entry saved before imports were followed: the helper is new to the key.
        let mut before = fp("bb -");
        before.components.remove("imports");
        before.components.get_mut("files").unwrap().remove("tools/helpers/weights.py");
        assert_eq!(
            changes(&before, &fp("bb -"), &Shown::plain()),
            ["files: tools/helpers/weights.py added (imported by tools/gen.py)"]
        );
        // Only who imports it changed: the `imports` line says so.
        let mut other = fp("bb -");
        other
            .components
            .get_mut("imports")
            .unwrap()
            .insert("tools/helpers/weights.py".into(), Value::text("tools/other.py"));
        assert_eq!(
            changes(&fp("bb -"), &other, &Shown::plain()),
            ["imports: tools/helpers/weights.py tools/gen.py → tools/other.py"]
        );
    }

    #[test]
    fn changes_read_like_the_issue_says() {
        assert_eq!(c("python.dists", "torch", Some("2.14.0"), Some("2.15.0")), "python: torch 2.14.0 → 2.15.0");
        assert_eq!(c("files", "gen_model.py", Some("aa -"), Some("bb -")), "files: gen_model.py changed");
        assert_eq!(c("native.isa", "level", Some("x86-64-v4"), Some("x86-64-v3")), "native.isa: x86-64-v4 → x86-64-v3");
        assert_eq!(c("python.dists", "numpy", None, Some("2.0")), "python: numpy added (2.0)");
        assert_eq!(c("env", "CUDA_ARCH", Some("8.0"), None), "env: CUDA_ARCH removed");
        assert_eq!(c("native.arch", "arch", Some("x86_64"), Some("aarch64")), "native.arch: x86_64 → aarch64");
        assert_eq!(c("variant", "variant", Some("a"), Some("b")), "variant: a → b");
        assert_eq!(c("files", "new.py", None, Some("aa -")), "files: new.py added");
        assert_eq!(c("later.thing", "x", Some("1"), Some("2")), "later.thing: x 1 → 2");
    }
}
