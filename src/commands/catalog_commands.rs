//! The CLI's `explain`, `list` and `prune`: the same catalog operations the action uses on a
//! miss (explain) and after a save (prune), run by hand, on the refs chosen ([`Refs`]), and
//! for `prune` also by age ([`Rule::OlderThan`]).

use super::fingerprint::compute;
use super::prune::{ListedSlots, Refs, Rule};
use super::render::{self, Shown};
use super::{Context, Error, content, explain, prune as pruning};
use crate::archive::read_generation;
use crate::backend::{Backend, Listed};
use crate::config::{Config, InputError, Keep, Locate, defs};
use crate::manifest::Generation;
use crate::outcome::{CatalogOutcome, ListedEntry};
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
    let shown = Shown::new(runner, config);
    let asked = (&shown, &config.locate.path_lines[..], true);
    let explanation = explain::explain_and_log(ctx, asked, backend.as_ref(), catalog.as_ref(), &record).ok();
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
    let store = catalog.describe();
    render::list::heading(&locate.prefix, refs, entries.len(), &store).say(runner);
    let slots = ListedSlots::new(&entries, known_version(locate).as_ref());
    let backend = (ctx.backend)(locate, runner.env(), runner.secret_sink());
    let mut newest: Vec<usize> = (0..entries.len()).collect();
    newest.sort_by_key(|&i| std::cmp::Reverse(entries[i].created));
    // `None`: not read.
    let mut figures: Vec<Option<Option<Generation>>> = vec![None; entries.len()];
    for &i in newest.iter().take(GENERATION_READS) {
        figures[i] = recorded_generation(backend.as_ref(), &entries[i]);
    }
    let shares = content::pack_shares(ctx, (locate, backend.as_ref()), &locate.prefix, &entries);
    let entries: Vec<ListedEntry> = entries
        .into_iter()
        .zip(figures)
        .zip(shares)
        .map(|((e, figure), packs)| ListedEntry {
            packs,
            generation_seconds: figure
                .as_ref()
                .and_then(|g| g.as_ref()?.plausible())
                .map(|d| (d.as_secs_f64() * 10.0).round() / 10.0),
            generation_read: figure.is_some(),
            slot: Some(slots.slot(&e)),
            created: iso_time(e.created),
            last_used: e.last_used.map(iso_time),
            key: e.key,
            size: e.size,
            r#ref: e.r#ref,
            version: e.version,
        })
        .collect();
    render::list::listing(runner, (&locate.prefix, refs, &store), &entries, long, json);
    Ok(CatalogOutcome::List { entries, json })
}

/// The generation time `listed`'s save recorded, from the first bytes of its archive: `Some(None)`
/// when it has none (saved before it was recorded); `None` when it could not be read.
fn recorded_generation(backend: &dyn Backend, listed: &Listed) -> Option<Option<Generation>> {
    let entry = backend.lookup(&listed.key, &listed.version).ok()?.filter(|e| e.key == listed.key)?;
    let bytes = backend.read_prefix(&entry, GENERATION_READ_BYTES).ok()?;
    read_generation(&bytes[..], explain::sniff(&bytes)).ok()
}

pub(super) fn refs(ctx: &Context, on_ref: Option<&str>, all_refs: bool) -> Refs {
    Refs::chosen(on_ref, all_refs, ctx.runner.env().non_empty("GITHUB_REF"))
}

/// The version of the key's stacks when `path` or `preset` says it (`list` and `prune` need
/// neither).
fn known_version(locate: &Locate) -> Option<crate::keys::Version> {
    (!locate.path_lines.is_empty()).then(|| locate.version())
}

/// Seconds since the epoch as `2026-11-30T18:51:06Z`.
fn iso_time(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| seconds.to_string())
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
    if pruning::refused(&locate.prefix) && by_count && !dry_run {
        return Err(InputError::Invalid { name: defs::PREFIX.name(), detail: render::prune::refusal() }.into());
    }
    let catalog = (ctx.catalog)(locate, runner.env())?;
    let entries = pruning::ours(catalog.as_ref(), &locate.prefix, refs)?;
    render::list::heading(&locate.prefix, refs, entries.len(), &catalog.describe()).say(runner);
    let slots = ListedSlots::new(&entries, known_version(locate).as_ref());
    let report = pruning::delete(catalog.as_ref(), entries, refs, rule, &slots, dry_run)?;
    render::say_all(runner, render::prune::report(&report, &slots, rule, dry_run));
    let backend = (ctx.backend)(locate, runner.env(), runner.secret_sink());
    let gone = if dry_run { &report.deleted[..] } else { &[] };
    let packs =
        content::prune_packs(ctx, (locate, backend.as_ref(), catalog.as_ref()), &locate.prefix, (gone, dry_run));
    render::say_all(runner, render::content::pruned(&packs, dry_run));
    let deleted = report.deleted.iter().map(|e| (e.key.clone(), slots.slot(e))).collect();
    Ok(CatalogOutcome::Prune { deleted, dry_run })
}
