//! What users read: the fingerprint in the log, and the step summary of each command.

use super::explain::Explanation;
use super::restore::Attempt;
use super::save::SaveReport;
use crate::archive::CleanStats;
use crate::fingerprint::FingerprintRecord;
use crate::runner::Runner;
use crate::runner::summary::{Markdown, code};
use crate::units;

/// Values shown per component before "… and N more".
const LOG_VALUES: usize = 12;
const SUMMARY_VALUES: usize = 40;
const VALUE_CHARS: usize = 160;

fn shorten(s: &str) -> String {
    let one_line = s.trim().replace('\n', " ⏎ ");
    if one_line.chars().count() <= VALUE_CHARS {
        one_line
    } else {
        format!("{}…", one_line.chars().take(VALUE_CHARS).collect::<String>())
    }
}

pub(super) fn log_fingerprint(runner: &Runner, record: &FingerprintRecord) {
    for (name, values) in &record.components.components {
        let plural = if values.len() == 1 { "value" } else { "values" };
        runner.info(&format!("{name} ({} {plural})", values.len()));
        for (label, value) in values.iter().take(LOG_VALUES) {
            runner.info(&format!("  {label} = {}", shorten(value.display())));
        }
        if values.len() > LOG_VALUES {
            runner.info(&format!("  … and {} more (see the fingerprint file)", values.len() - LOG_VALUES));
        }
    }
    runner.info(&format!("key: {}", record.key));
}

fn fingerprint_details(md: &mut Markdown, record: &FingerprintRecord) {
    let mut inner = Markdown::new();
    let mut rows = Vec::new();
    for (name, values) in &record.components.components {
        for (label, value) in values.iter().take(SUMMARY_VALUES) {
            rows.push(vec![code(name), code(label), shorten(value.display())]);
        }
        if values.len() > SUMMARY_VALUES {
            rows.push(vec![code(name), format!("… {} more", values.len() - SUMMARY_VALUES), String::new()]);
        }
    }
    inner.table(&["component", "label", "value"], rows);
    let count: usize = record.components.components.values().map(|c| c.len()).sum();
    md.details(&format!("Fingerprint: {} components, {count} values", record.components.components.len()), &inner);
}

pub(super) fn fingerprint_summary(record: &FingerprintRecord) -> String {
    let mut md = Markdown::new();
    md.heading(3, "exact-cache fingerprint");
    md.table(&["", ""], [vec!["key".to_owned(), code(&record.key)]]);
    fingerprint_details(&mut md, record);
    md.as_str().to_owned()
}

pub(super) fn restore_summary(
    record: &FingerprintRecord,
    backend: String,
    attempt: &Attempt,
    cleaned: Option<CleanStats>,
    explanation: Option<&Explanation>,
) -> String {
    let mut md = Markdown::new();
    md.heading(3, "exact-cache restore");
    let mut rows = vec![vec!["key".to_owned(), code(&record.key)]];
    match attempt {
        Attempt::Reused { stats, elapsed, archive_bytes, .. } => {
            rows.push(vec!["result".into(), "✅ reused".into()]);
            rows.push(vec![
                "restored".into(),
                format!(
                    "{} files, {} ({} archive) in {}, {}",
                    units::count(stats.files as u64),
                    units::bytes(stats.bytes),
                    units::bytes(*archive_bytes),
                    units::duration(*elapsed),
                    units::throughput(*archive_bytes, *elapsed)
                ),
            ]);
        }
        Attempt::Found => {
            rows.push(vec!["result".into(), "☑️ entry exists (`lookup-only`; nothing downloaded)".into()])
        }
        Attempt::Miss { reason, detail } => {
            rows.push(vec!["result".into(), format!("❌ not reused: `{reason}`")]);
            if let Some(d) = detail {
                rows.push(vec!["why".into(), d.clone()]);
            }
        }
    }
    if let Some(c) = cleaned {
        rows.push(vec![
            "clean-on-miss".into(),
            format!("removed {} files, {} directories", c.removed_files, c.removed_dirs),
        ]);
    }
    rows.push(vec!["backend".into(), backend]);
    md.table(&["", ""], rows);
    if let Some(e) = explanation {
        let against = &e.against;
        let when = against.r#ref.as_deref().map(|r| format!(" on `{r}`")).unwrap_or_default();
        md.paragraph(&format!("**Why this is a miss** — compared with the newest entry {}{when}:", code(&against.key)));
        let rows: Vec<Vec<String>> = e.changes.iter().take(SUMMARY_VALUES).map(|c| vec![c.clone()]).collect();
        if rows.is_empty() {
            md.paragraph("no fingerprint component differs (the other entry has other `path` lines or compression)");
        } else {
            md.table(&["what changed"], rows);
        }
    }
    fingerprint_details(&mut md, record);
    md.as_str().to_owned()
}

pub(super) fn save_summary(key: Option<&str>, report: &SaveReport) -> String {
    let mut md = Markdown::new();
    md.heading(3, "exact-cache save");
    let mut rows = Vec::new();
    if let Some(key) = key {
        rows.push(vec!["key".to_owned(), code(key)]);
    }
    rows.push(vec!["result".into(), format!("`{}`", report.result)]);
    if let Some(d) = &report.detail {
        rows.push(vec!["detail".into(), d.clone()]);
    }
    if report.files > 0 {
        rows.push(vec![
            "saved".into(),
            format!(
                "{} files, {} ({} archive) in {}, {}",
                units::count(report.files as u64),
                units::bytes(report.content_bytes),
                units::bytes(report.archive_bytes),
                units::duration(report.elapsed),
                units::throughput(report.archive_bytes, report.elapsed)
            ),
        ]);
    }
    md.table(&["", ""], rows);
    if let Some(changes) = &report.changes {
        md.paragraph(&format!("**verify-reuse**: {}", changes.0));
        let mut list = Markdown::new();
        let lines: Vec<Vec<String>> = changes.1.iter().take(SUMMARY_VALUES).map(|l| vec![code(l)]).collect();
        list.table(&["file"], lines);
        if !changes.1.is_empty() {
            md.details(&format!("{} files", changes.1.len()), &list);
        }
    }
    if let Some(pruned) = &report.pruned {
        md.paragraph(&format!("**prune**: {pruned}"));
    }
    md.as_str().to_owned()
}
