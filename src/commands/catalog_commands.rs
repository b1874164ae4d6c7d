//! The CLI's `explain`, `list` and `prune`: the same catalog operations the action uses on a
//! miss (explain) and after a save (prune), run by hand.

use super::fingerprint::compute;
use super::{Context, Error, explain, prune as pruning};
use crate::config::{Config, DEFAULT_PREFIX, InputError, defs};
use crate::outcome::{CatalogOutcome, ListedEntry};
use crate::stack::SlotMap;
use crate::units;

pub(super) fn explain(ctx: &Context, config: &Config) -> Result<CatalogOutcome, Error> {
    let runner = ctx.runner;
    let record = compute(ctx, config)?;
    let backend = (ctx.backend)(config, runner.env(), runner.secret_sink());
    let catalog = (ctx.catalog)(config, runner.env())?;
    let explanation = explain::explain_and_log(
        ctx,
        config,
        backend.as_ref(),
        catalog.as_ref(),
        &record,
        usize::MAX,
        "nothing to explain",
    )
    .ok();
    Ok(CatalogOutcome::Explain { key: record.key, explanation })
}

pub(super) fn list(ctx: &Context, config: &Config, json: bool) -> Result<CatalogOutcome, Error> {
    let runner = ctx.runner;
    let catalog = (ctx.catalog)(config, runner.env())?;
    let current_ref = runner.env().non_empty("GITHUB_REF");
    let entries = pruning::ours(catalog.as_ref(), &config.prefix, current_ref)?;
    let default = if config.prefix == DEFAULT_PREFIX { " (the default prefix; `--prefix` names another)" } else { "" };
    let listed = units::count_of(entries.len(), "entry");
    runner.info(&format!("{listed} of `{}`{default} in {}", config.prefix, catalog.describe()));
    let slots = SlotMap::of(&config.version());
    let entries: Vec<ListedEntry> = entries
        .into_iter()
        .map(|e| ListedEntry {
            created: iso_time(e.created),
            key: e.key,
            size: e.size,
            r#ref: e.r#ref,
            slot: slots.slot(&e.version),
            version: e.version,
        })
        .collect();
    for line in table(&entries) {
        runner.info(&format!("  {line}"));
    }
    Ok(CatalogOutcome::List { entries, json })
}

/// Seconds since the epoch as `2026-11-30T18:51:06Z`.
fn iso_time(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| seconds.to_string())
}

/// `list`'s table: a header, then one aligned row per entry (the version cut to 12 digits; the
/// slot `-` when the version is not one of this `path` and `compression`).
fn table(entries: &[ListedEntry]) -> Vec<String> {
    let header = ["key", "size", "created", "ref", "version", "slot"];
    let rows: Vec<[String; 6]> = std::iter::once(header.map(str::to_owned))
        .chain(entries.iter().map(|e| {
            [
                e.key.to_string(),
                units::bytes(e.size),
                e.created.clone(),
                e.r#ref.clone().unwrap_or_else(|| "-".to_owned()),
                e.version.chars().take(12).collect(),
                e.slot.map_or_else(|| "-".to_owned(), |slot| slot.to_string()),
            ]
        }))
        .collect();
    let widths: Vec<usize> =
        (0..header.len()).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
            cells.join("  ").trim_end().to_owned()
        })
        .collect()
}

pub(super) fn prune(ctx: &Context, config: &Config, dry_run: bool) -> Result<CatalogOutcome, Error> {
    let runner = ctx.runner;
    if let Some(detail) = pruning::refusal(&config.prefix).filter(|_| !dry_run) {
        return Err(InputError::Invalid { name: defs::PREFIX.name(), detail }.into());
    }
    let catalog = (ctx.catalog)(config, runner.env())?;
    let current_ref = runner.env().non_empty("GITHUB_REF");
    let slots = SlotMap::of(&config.version());
    let report =
        pruning::prune(catalog.as_ref(), &config.prefix, current_ref, config.prune_keep, dry_run, None, &slots)?;
    let verb = if dry_run { "would delete" } else { "deleted" };
    for e in &report.deleted {
        runner.info(&format!("{verb} {}", pruning::entry_name(e, &slots)));
    }
    for (e, why) in &report.failed {
        runner.warning(&format!("could not delete {}: {why}", e.key));
    }
    runner.info(&format!(
        "kept the newest {} ({}), {verb} {}",
        units::count_of(report.kept_keys, "key"),
        units::count_of(report.kept.len(), "entry"),
        report.deleted.len()
    ));
    let deleted = report.deleted.iter().map(|e| pruning::entry_name(e, &slots)).collect();
    Ok(CatalogOutcome::Prune { deleted })
}
