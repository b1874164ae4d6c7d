//! A prune's words: what the `prune` command deleted and kept, and what a save's prune did.

use super::super::prune::{ListedSlots, PruneReport, Rule};
use super::Said;
use crate::config::DEFAULT_PREFIX;
use crate::keys::Key;
use crate::outcome::Pruned;
use crate::stack::Slot;
use crate::units;

/// Why the default prefix is never pruned by count.
pub fn refusal() -> String {
    format!(
        "`{DEFAULT_PREFIX}` is the default prefix, shared by every workflow and job that sets none; not pruning it: \
         set `prefix` to name this cache"
    )
}

/// An entry as prune names it (and its `deleted` output): its key, and its slot unless it is a
/// generation-0 base.
pub fn named(key: &Key, slot: Slot) -> String {
    match slot {
        Slot::FIRST_BASE => key.to_string(),
        slot => format!("{key} ({slot})"),
    }
}

/// The `prune` command: each entry deleted (or with `dry_run` that would be), each that could
/// not be, then what `rule` kept.
pub fn report(report: &PruneReport, slots: &ListedSlots, rule: Rule, dry_run: bool) -> Vec<Said> {
    let verb = if dry_run { "would delete" } else { "deleted" };
    let deleted = report.deleted.iter().map(|e| Said::Info(format!("{verb} {}", named(&e.key, slots.slot(e)))));
    let failed = report.failed.iter().map(|(e, why)| Said::Warning(format!("could not delete {}: {why}", e.key)));
    let entries_kept = units::count_of(report.kept.len(), "entry");
    let kept = match rule {
        Rule::OlderThan { age, .. } => format!("kept {entries_kept} created or used within {}", units::span(age)),
        Rule::Newest { keep, .. } => {
            let keys = units::count_of(report.kept_keys, "key");
            let per_ref = match report.groups {
                1 => String::new(),
                refs => format!("; the newest {keep} of each of {refs} refs"),
            };
            format!("kept the newest {keys} ({entries_kept}{per_ref})")
        }
    };
    let summed = Said::Info(format!("{kept}, {verb} {}", report.deleted.len()));
    deleted.chain(failed).chain([summed]).collect()
}

/// A save's prune in the log.
pub fn after_save(pruned: &Pruned) -> Vec<Said> {
    let (failed, deleted) = match pruned {
        Pruned::Refused => return vec![Said::Warning(format!("prune: {}", refusal()))],
        Pruned::NoCatalog(why) => return vec![Said::Warning(format!("prune: skipped: {why}"))],
        Pruned::Failed(why) => return vec![Said::Warning(format!("prune: {why}"))],
        Pruned::Done { failed, deleted, .. } => (failed, deleted),
    };
    let failed = failed.iter().map(|(key, why)| Said::Warning(format!("prune: could not delete `{key}`: {why}")));
    let done = Said::Info(format!("prune: {}", after_save_cell(pruned)));
    let deleted = deleted.iter().map(|(key, slot)| Said::Info(format!("  deleted {}", named(key, *slot))));
    failed.chain([done]).chain(deleted).collect()
}

/// A save's prune in one line: what it kept and deleted, or why it did not prune.
pub fn after_save_cell(pruned: &Pruned) -> String {
    match pruned {
        Pruned::Refused => format!("skipped: {}", refusal()),
        Pruned::NoCatalog(why) => format!("skipped: {why}"),
        Pruned::Failed(why) => format!("failed: {why}"),
        Pruned::Done { prefix, on_ref, kept_keys, deleted, .. } => format!(
            "kept the newest {kept_keys}, deleted {} of `{prefix}`{}",
            units::count_of(deleted.len(), "older entry"),
            on_ref.as_deref().map(|r| format!(" on `{r}`")).unwrap_or_default()
        ),
    }
}
