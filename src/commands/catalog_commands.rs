//! The CLI's `explain`, `list` and `prune`: the same catalog operations the action uses on a
//! miss (explain) and after a save (prune), run by hand, on the refs chosen ([`Refs`]), and
//! for `prune` also by age ([`Rule::OlderThan`]).

use super::fingerprint::compute;
use super::prune::{ListedSlots, Refs, Rule};
use super::{Context, Error, explain, prune as pruning, worth};
use crate::archive::read_generation;
use crate::backend::{Backend, Listed};
use crate::config::{Config, DEFAULT_PREFIX, InputError, Keep, Locate, defs};
use crate::manifest::Generation;
use crate::outcome::{CatalogOutcome, ListedEntry};
use crate::runner::Mode;
use crate::units;
use std::time::Duration;

/// Entries whose generation time `list` reads, the newest first: each costs a lookup and a ranged
/// read of the archive's first bytes (the record is copied there, before the fingerprint).
const GENERATION_READS: usize = 20;
/// Bytes read from the start of an archive for it: the first zstd block whole (at most 128 KiB
/// and its header), which holds the tar's first members.
const GENERATION_READ_BYTES: u64 = 132 << 10;

pub(super) fn explain(ctx: &Context, config: &Config) -> Result<CatalogOutcome, Error> {
    let runner = ctx.runner;
    let record = compute(ctx, config)?;
    let backend = (ctx.backend)(&config.locate, runner.env(), runner.secret_sink());
    let catalog = (ctx.catalog)(&config.locate, runner.env())?;
    let shown = super::report::Shown::new(runner, config);
    let explanation = explain::explain_and_log(
        ctx,
        (&shown, &config.locate.path_lines),
        backend.as_ref(),
        catalog.as_ref(),
        &record,
        usize::MAX,
        "nothing to explain",
        true,
    )
    .ok();
    Ok(CatalogOutcome::Explain { key: record.key, explanation })
}

pub(super) fn list(
    ctx: &Context,
    locate: &Locate,
    refs: &Refs,
    long: bool,
    json: bool,
) -> Result<CatalogOutcome, Error> {
    let runner = ctx.runner;
    let catalog = (ctx.catalog)(locate, runner.env())?;
    let entries = pruning::ours(catalog.as_ref(), &locate.prefix, refs)?;
    runner.info(&format!("{} {}", heading(&locate.prefix, refs, entries.len()), catalog.describe()));
    let slots = ListedSlots::new(&entries, known_version(locate).as_ref());
    let backend = (ctx.backend)(locate, runner.env(), runner.secret_sink());
    let mut newest: Vec<usize> = (0..entries.len()).collect();
    newest.sort_by_key(|&i| std::cmp::Reverse(entries[i].created));
    let mut figures: Vec<Result<Option<Generation>, String>> =
        vec![Err(format!("not read: `list` reads the newest {GENERATION_READS}")); entries.len()];
    for &i in newest.iter().take(GENERATION_READS) {
        figures[i] = recorded_generation(backend.as_ref(), &entries[i]);
    }
    let entries: Vec<ListedEntry> = entries
        .into_iter()
        .zip(figures)
        .map(|(e, figure)| ListedEntry {
            generation_seconds: figure
                .as_ref()
                .ok()
                .and_then(|g| g.as_ref()?.plausible())
                .map(|d| (d.as_secs_f64() * 10.0).round() / 10.0),
            generation_note: match &figure {
                Ok(Some(g)) if g.plausible().is_some() => None,
                Ok(_) => Some("not recorded".to_owned()),
                Err(why) => Some(why.clone()),
            },
            slot: Some(slots.slot(&e)),
            created: iso_time(e.created),
            last_used: e.last_used.map(iso_time),
            key: e.key,
            size: e.size,
            r#ref: e.r#ref,
            version: e.version,
        })
        .collect();
    let lines = match entries.is_empty() {
        true => vec![format!("no entries of `{}` {} in {}", locate.prefix, refs.describe(), catalog.describe())],
        false => table(&entries, long),
    };
    // On the command line the table is the command's output; in a job's log, lines of it.
    match runner.mode() {
        Mode::Cli if !json => runner.set_document(lines.join("\n")),
        Mode::Cli => {}
        Mode::Actions => lines.iter().for_each(|line| runner.info(&format!("  {line}"))),
    }
    let figures: Vec<Option<f64>> = entries.iter().map(|e| e.generation_seconds).collect();
    let uses = entries.iter().any(|e| e.last_used.is_some());
    runner.info(&format!("total generation time: {}", worth::totals_line(&locate.prefix, &figures, uses)));
    Ok(CatalogOutcome::List { entries, json })
}

/// The generation time `listed`'s save recorded, from the first bytes of its archive: `Ok(None)`
/// when it has none (saved before it was recorded); why it could not be read.
fn recorded_generation(backend: &dyn Backend, listed: &Listed) -> Result<Option<Generation>, String> {
    let not_read = |why: String| format!("not read: {why}");
    let entry = backend
        .lookup(&listed.key, &listed.version)
        .map_err(|e| not_read(crate::text::error_line(&e)))?
        .filter(|e| e.key == listed.key)
        .ok_or_else(|| not_read("not readable from this run".to_owned()))?;
    let bytes =
        backend.read_prefix(&entry, GENERATION_READ_BYTES).map_err(|e| not_read(crate::text::error_line(&e)))?;
    read_generation(&bytes[..], explain::sniff(&bytes)).map_err(|e| not_read(crate::text::error_line(&e)))
}

/// `--all-refs`, `--ref`, else the run's own ref, else every ref.
pub(super) fn refs(ctx: &Context, on_ref: Option<&str>, all_refs: bool) -> Refs {
    Refs::chosen(on_ref, all_refs, ctx.runner.env().non_empty("GITHUB_REF"))
}

/// The version of the key's stacks when `path` or `preset` says it (`list` and `prune` need
/// neither).
fn known_version(locate: &Locate) -> Option<crate::keys::Version> {
    (!locate.path_lines.is_empty()).then(|| locate.version())
}

/// `2 entries of `models` on every ref in` (the store follows).
fn heading(prefix: &str, refs: &Refs, count: usize) -> String {
    let default = if prefix == DEFAULT_PREFIX { " (the default prefix; `--prefix` names another)" } else { "" };
    let listed = units::count_of(count, "entry");
    format!("{listed} of `{prefix}`{default} {} in", refs.describe())
}

/// `<prefix>-<first 12 hex>…` (and a later generation's `.g<n>`), as `git` shortens commits.
fn short_key(key: &crate::keys::Key) -> String {
    let Some(prefix) = key.prefix() else { return key.to_string() };
    let rest = &key[prefix.len() + 1..];
    let generation = rest.find('.').map_or("", |i| &rest[i..]);
    format!("{prefix}-{}…{generation}", &rest[..12])
}

/// Seconds since the epoch as `2026-11-30T18:51:06Z`.
fn iso_time(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| seconds.to_string())
}

/// `list`'s table: a header, then one aligned row per entry (the key's digest cut to 12 digits
/// unless `long`; the version cut to 12 digits; the last use `-` where the store does not
/// record it; the ref `-` when the entry was saved outside Actions or its ref is not known; the
/// slot `-` when it is not known).
fn table(entries: &[ListedEntry], long: bool) -> Vec<String> {
    let header = ["key", "size", "created", "used", "ref", "version", "generated in", "slot"];
    let or_dash = |value: Option<&str>| value.filter(|v| !v.is_empty()).unwrap_or("-").to_owned();
    let rows: Vec<[String; 8]> = std::iter::once(header.map(str::to_owned))
        .chain(entries.iter().map(|e| {
            [
                if long { e.key.to_string() } else { short_key(&e.key) },
                units::bytes(e.size),
                e.created.clone(),
                or_dash(e.last_used.as_deref()),
                or_dash(e.r#ref.as_deref()),
                e.version.chars().take(12).collect(),
                match e.generation_seconds {
                    Some(s) => units::duration(std::time::Duration::from_secs_f64(s)),
                    None if e.generation_note.as_deref().is_some_and(|n| n.starts_with("not read")) => {
                        "not read".to_owned()
                    }
                    None => "not recorded".to_owned(),
                },
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

/// Prune by age (`--older-than`), else keeping the newest `keep`.
pub(super) fn prune(
    ctx: &Context,
    locate: &Locate,
    refs: &Refs,
    (older_than, keep): (Option<Duration>, Keep),
    dry_run: bool,
) -> Result<CatalogOutcome, Error> {
    let runner = ctx.runner;
    let rule = match older_than {
        Some(age) => Rule::OlderThan { age, now: chrono::Utc::now().timestamp() },
        None => Rule::Newest { keep: keep.newest, just_saved: None },
    };
    // By age, the default prefix loses only what nobody used: retention, not someone else's loss.
    let by_count = matches!(rule, Rule::Newest { .. });
    if let Some(detail) = pruning::refusal(&locate.prefix).filter(|_| by_count && !dry_run) {
        return Err(InputError::Invalid { name: defs::PREFIX.name(), detail }.into());
    }
    let catalog = (ctx.catalog)(locate, runner.env())?;
    let entries = pruning::ours(catalog.as_ref(), &locate.prefix, refs)?;
    runner.info(&format!("{} {}", heading(&locate.prefix, refs, entries.len()), catalog.describe()));
    let slots = ListedSlots::new(&entries, known_version(locate).as_ref());
    let report = pruning::delete(catalog.as_ref(), entries, refs, rule, &slots, dry_run)?;
    let verb = if dry_run { "would delete" } else { "deleted" };
    let name = |e: &Listed| pruning::named(e, slots.slot(e));
    for e in &report.deleted {
        runner.info(&format!("{verb} {}", name(e)));
    }
    for (e, why) in &report.failed {
        runner.warning(&format!("could not delete {}: {why}", e.key));
    }
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
    runner.info(&format!("{kept}, {verb} {}", report.deleted.len()));
    let deleted = report.deleted.iter().map(name).collect();
    Ok(CatalogOutcome::Prune { deleted, dry_run })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str) -> ListedEntry {
        ListedEntry {
            slot: None,
            created: "2026-12-01T10:00:00Z".into(),
            last_used: None,
            key: key.into(),
            size: 2048,
            r#ref: Some(String::new()),
            version: "f".repeat(64).into(),
            generation_seconds: None,
            generation_note: None,
        }
    }

    #[test]
    fn the_table_shows_short_keys_unless_long() {
        let key = format!("fixtures-{}", "0123456789ab".repeat(5) + "cdef");
        let entries = [entry(&key), entry(&format!("{key}.g2")), entry("someone-elses")];
        let short = table(&entries, false);
        assert_eq!(
            short[0].split_whitespace().collect::<Vec<_>>(),
            ["key", "size", "created", "used", "ref", "version", "generated", "in", "slot"]
        );
        assert!(short[1].starts_with("fixtures-0123456789ab…  "), "{short:?}");
        assert!(short[2].starts_with("fixtures-0123456789ab….g2  "), "{short:?}");
        assert!(short[3].starts_with("someone-elses  "), "{short:?}");
        assert!(short.iter().all(|l| l.chars().count() < 110), "{short:?}");
        let long = table(&entries, true);
        assert!(long[1].starts_with(&format!("{key}  ")), "{long:?}");
    }
}
