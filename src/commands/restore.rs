//! `restore`: compute the key, look it up exactly, download, verify, put in place — or report a
//! miss with its reason, clean stale files if asked, and let the job go on.

use super::fingerprint::compute_noted;
use super::handoff::{RestoreRecord, Restored};
use super::render::{self, Shown, restore as words};
use super::{Context, Error, explain, handoff, worth};
use crate::archive::{
    CleanError, CleanStats, PackError, RestorePlan, RestoreStats, Staged, UnpackError, clean_into, unpack,
};
use crate::backend::{Backend, BackendError, CacheEntry, ErrorKind};
use crate::config::{Config, Locate, RestoreConfig};
use crate::content::PackName;
use crate::fingerprint::FingerprintRecord;
use crate::keys::Key;
use crate::manifest::{EntryKind, Generation, Manifest};
use crate::outcome::{
    Attempt, Cleaned, Explanation, HitRecord, MissReason, RestoreOutcome, StackApplied, StackStop, Transfer,
};
use crate::paths::Locations;
use crate::preset::Preset;
use crate::reads::Record;
use crate::runner::ProgressReader;
use crate::stack::{self, Gap, KeptStack, Slot};
use crate::text::error_chain;
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

/// The outcome, and the `clean-on-miss` failure that fails the step under `strict` once the
/// outcome is published.
pub(super) fn run(ctx: &Context, config: &Config) -> Result<(RestoreOutcome, Option<CleanError>), Error> {
    let runner = ctx.runner;
    let started = Instant::now();
    let (record, notes) = compute_noted(ctx, config)?;
    let locate = &config.locate;
    let fingerprint_file = handoff::write_fingerprint(locate.fingerprint_file.as_deref(), runner.env(), &record)?;
    // A preset's directories exist and are known to later steps whatever happens below.
    for (name, dir) in &config.restore.exports {
        if let Err(e) = std::fs::create_dir_all(dir) {
            words::export_failed(dir, name, &e).say(runner);
        }
    }
    let backend = (ctx.backend)(locate, runner.env(), runner.secret_sink());
    let mode = super::services::cache_mode(runner);
    let (tried, replacement) = {
        let _group = runner.group(&words::group(&record.key));
        render::backend(&backend.describe()).say(runner);
        let places = Places { locate, locations: &config.fingerprint.locations };
        let tried = match mode.readable() {
            true => reuse(ctx, places, config.restore.lookup_only, backend.as_ref(), &record.key),
            false => Err(miss(MissReason::CacheMode, words::cache_mode_no_reads(mode))),
        };
        log_attempt(ctx, &tried);
        let replacement = replacement(ctx, &tried);
        (tried, replacement)
    };
    let version = locate.version();
    let store = backend.describe();
    let keep = |restored: Restored, hit: Option<HitRecord>| {
        let (key, version, store) = (record.key.clone(), version.clone(), store.clone());
        let ended_ms = Some(worth::now_ms());
        let inputs = Some(config.fingerprint.inputs_digest());
        let kept = RestoreRecord { key, version, store, written_at: handoff::now(), restored, ended_ms, hit, inputs };
        handoff::write_record(locate.fingerprint_file.as_deref(), runner.env(), &kept)
            .map_err(|e| words::record_failed(&e).say(runner))
            .ok()
    };
    let mut hit_worth = None;
    let mut attempt = match tried {
        Ok(reuse) => {
            let compile_cache = is_compile_cache(config.preset, &reuse.manifest);
            let worth = worth::of_stack(&reuse.generations, started.elapsed(), compile_cache);
            words::worth(&worth).say(runner);
            let hit = HitRecord {
                generation_ms: worth.generation.map(|g| g.as_millis() as i64),
                restore_ms: worth.restore.as_millis() as i64,
            };
            hit_worth = Some(worth);
            // Only the roots this entry put something into.
            let mut roots: Vec<usize> =
                reuse.manifest.entries.iter().filter_map(|e| Some(e.entry_path()?.root)).collect();
            roots.sort_unstable();
            roots.dedup();
            // What was there before and is not in the entry is not "added" by the job later.
            let kept = super::verify::Kept {
                manifest: reuse.manifest,
                preexisting: reuse.preexisting,
                stack: Some(reuse.kept),
            };
            let manifest_file = keep(Restored::Reused(Box::new(kept)), Some(hit));
            handoff::mark_owned(runner, locate, &roots);
            Attempt::Reused {
                restored: reuse.restored,
                stack: reuse.stack,
                extra_files: reuse.extra_files,
                manifest_file,
            }
        }
        Err(other) => {
            keep(
                match &other {
                    NotReused::Unusable { newest, bad_pack, .. } => {
                        Restored::Unusable { newest: *newest, bad_packs: bad_pack.iter().map(|p| p.to_hex()).collect() }
                    }
                    _ => Restored::NotReused,
                },
                None,
            );
            other.into()
        }
    };
    let (explanation, unexplained) = match &attempt {
        Attempt::Miss { reason: MissReason::NotFound | MissReason::PrefixOnly, .. } => {
            match explain_miss(ctx, config, backend.as_ref(), &record) {
                Some(Ok(explanation)) => (Some(explanation), None),
                Some(Err(why)) => (None, Some(why)),
                None => (None, None),
            }
        }
        _ => (None, None),
    };
    if let (Attempt::Miss { detail: detail @ None, .. }, Some(same)) =
        (&mut attempt, explanation.as_ref().and_then(|e| e.same_key.as_ref()))
    {
        *detail = Some(render::explain::same_key(same));
    }
    if let Attempt::Miss { .. } = attempt {
        words::when_saved(&Shown::new(runner, config)).say(runner);
    }
    let (cleaned, clean_error) = match attempt {
        Attempt::Miss { .. } if config.restore.clean_on_miss => {
            clean_stale(ctx, locate, &config.fingerprint.locations, config.strict)
        }
        _ => (None, None),
    };
    let clean_failed = clean_error.is_some();
    let mut exports = exports(&config.restore, attempt.reused());
    let workspace = &config.fingerprint.locations.workspace;
    // What the generator reads matters to a save, which a job that may not write never makes.
    if matches!(attempt, Attempt::Miss { .. }) && !clean_failed && mode.writable() {
        exports.extend(super::reads::arrange(ctx, config.uncovered_reads, workspace, Record::Reads));
    }
    // What a compile cache's hit saved, torch says as the job's Python ends.
    if hit_worth.as_ref().is_some_and(|w: &crate::outcome::Worth| w.compile_cache) {
        exports.extend(super::reads::arrange(ctx, config.uncovered_reads, workspace, Record::Torch));
    }
    let backend = backend.describe();
    let outcome = RestoreOutcome {
        record,
        notes,
        fingerprint_file,
        backend,
        attempt,
        cleaned,
        clean_failed,
        replacement,
        explanation,
        unexplained,
        exports,
        worth: hit_worth,
    };
    Ok((outcome, clean_error))
}

/// Whether what a hit saved is torch's figure: `preset: torch-inductor`, or an entry that holds
/// TorchInductor's directories.
pub(super) fn is_compile_cache(preset: Option<Preset>, manifest: &Manifest) -> bool {
    preset == Some(Preset::TorchInductor) || crate::reads::torch::holds_compile_cache(manifest)
}

/// Files under `path` not in the entry just placed: they were there before and are kept. Each
/// as its entry path (what the save step matches) and as shown (`~/…`).
fn extra_files(places: Places, manifest: &Manifest) -> Result<Vec<(String, String)>, PackError> {
    let ours: HashSet<&str> = manifest.entries.iter().map(|e| e.path.as_str()).collect();
    let inventory = crate::archive::inventory(&places.locate.paths)?;
    Ok(inventory
        .entries
        .iter()
        .filter(|e| e.kind != EntryKind::Dir)
        .map(|e| (e.entry_path().to_string(), e))
        .filter(|(path, _)| !ours.contains(path.as_str()))
        .map(|(path, e)| (path, places.locations.display(&e.abs)))
        .collect())
}

/// Where a reuse puts things: what locates entries, and how paths are shown.
#[derive(Clone, Copy)]
struct Places<'a> {
    locate: &'a Locate,
    locations: &'a Locations,
}

/// A stack put in place: the base, then each layer, each whole.
struct Reuse {
    /// Files and bytes in place (each counted once), archive bytes and time over every slot.
    restored: Transfer,
    stack: StackApplied,
    /// Every entry of the base and its layers (a later layer's entry replaces an earlier one's).
    manifest: Manifest,
    kept: KeptStack,
    /// Files under `path` not in the entry: as shown, and (`preexisting`) as entry paths.
    extra_files: Vec<String>,
    preexisting: Vec<String>,
    /// What each slot put in place took to generate (the base's first), as its save recorded it.
    generations: Vec<Option<Generation>>,
}

enum NotReused {
    /// `lookup-only` found it.
    Found,
    Miss {
        reason: MissReason,
        detail: Option<String>,
    },
    /// The bases found could not be used for what they hold: the save of this job, which
    /// regenerates, writes a replacement above the newest generation, `newest`.
    Unusable {
        reason: MissReason,
        detail: Option<String>,
        newest: u32,
        /// The pack found missing or corrupt, where that was the trouble.
        bad_pack: Option<PackName>,
    },
}

impl From<NotReused> for Attempt {
    fn from(not_reused: NotReused) -> Self {
        match not_reused {
            NotReused::Found => Attempt::Found,
            NotReused::Miss { reason, detail } | NotReused::Unusable { reason, detail, .. } => {
                Attempt::Miss { reason, detail }
            }
        }
    }
}

fn miss(reason: MissReason, detail: String) -> NotReused {
    NotReused::Miss { reason, detail: Some(detail) }
}

/// Look the key up, download, verify and place the base — and with `grow`, its layers — as
/// [`stack::reach`] says.
fn reuse(
    ctx: &Context,
    places: Places,
    lookup_only: bool,
    backend: &dyn Backend,
    key: &Key,
) -> Result<Reuse, NotReused> {
    let locate = places.locate;
    let bases = stack::find_bases(backend, key, &locate.version());
    let slots = Slots { backend, key };
    let Some((newest, entry)) = bases.newest else {
        return Err(match (bases.error, bases.offered) {
            (Some(e), _) => miss(miss_reason(e.kind), error_chain(&e)),
            (None, Some(other)) => miss(MissReason::PrefixOnly, words::prefix_only(&other)),
            (None, None) => NotReused::Miss { reason: MissReason::NotFound, detail: None },
        });
    };
    if lookup_only {
        return Err(NotReused::Found);
    }
    let (generation, base, mut manifest, roots) =
        place_base(ctx, locate, &slots, (newest, entry)).map_err(|failed| match failed {
            SlotFailure { reason, detail, bad_pack } if reason.calls_for_replacement() => {
                NotReused::Unusable { reason, detail: Some(detail), newest, bad_pack }
            }
            SlotFailure { reason, detail, .. } => miss(reason, detail),
        })?;
    let mut kept = KeptStack {
        generation,
        highest: newest,
        probed: locate.grow.map_or(0, |limits| limits.max_layers),
        base_bytes: base.content_bytes,
        top: manifest.digest(),
        ..KeptStack::default()
    };
    let mut applied = StackApplied { generation, base, layers: Vec::new(), stopped: None };
    let mut generations = vec![manifest.generation.clone()];
    if let Some(limits) = locate.grow {
        let below = Below { manifest: &mut manifest, roots: &roots, generations: &mut generations };
        apply_layers(ctx, locate, limits.max_layers, &slots, (&mut applied, &mut kept), below);
    }
    kept.stopped = applied.stopped.is_some() && !kept.trouble;
    let (preexisting, extra_files) =
        extra_files(places, &manifest).map(|e| e.into_iter().unzip()).unwrap_or_else(|e| {
            words::extra_unlisted(&e).say(ctx.runner);
            Default::default()
        });
    // What is in place: a later layer's file replaces nothing (layers only add), so count the
    // merged manifest; bytes moved and time are the sum over slots.
    let moved = applied.total();
    let in_place = manifest.entries.iter().filter(|e| e.kind != EntryKind::Dir);
    let restored = Transfer {
        files: in_place.clone().count(),
        content_bytes: in_place.map(|e| e.size).sum(),
        archive_bytes: moved.archive_bytes,
        elapsed: moved.elapsed,
    };
    Ok(Reuse { restored, stack: applied, manifest, kept, extra_files, preexisting, generations })
}

/// Where a stack's slots come from: the store, and the key every slot's manifest names.
struct Slots<'a> {
    backend: &'a dyn Backend,
    key: &'a Key,
}

/// The base placed: its generation, what it put in place, its manifest, and where each root
/// landed.
type PlacedBase = (u32, Transfer, Manifest, Vec<PathBuf>);

/// Place the newest base: the only one a restore uses ([`stack::reach`]).
fn place_base(
    ctx: &Context,
    locate: &Locate,
    slots: &Slots,
    (newest, entry): (u32, CacheEntry),
) -> Result<PlacedBase, SlotFailure> {
    let (base, manifest, roots) = place_slot(ctx, locate, slots, &entry, &locate.required, Staged::commit, |m, _| {
        stack::check_slot(m, Slot::base(newest), None).map_err(|why| SlotFailure::corrupt(why.to_string()))
    })?;
    Ok((newest, base, manifest, roots))
}

struct SlotFailure {
    reason: MissReason,
    detail: String,
    /// The pack found missing or corrupt (`content-missing`), which a replacement leaves out.
    bad_pack: Option<PackName>,
}

impl SlotFailure {
    fn corrupt(detail: String) -> SlotFailure {
        SlotFailure { reason: MissReason::Corrupt, detail, bad_pack: None }
    }

    fn unpacking(err: &UnpackError) -> SlotFailure {
        SlotFailure { reason: classify(err), detail: error_chain(err), bad_pack: err.bad_pack() }
    }

    /// The service's trouble, not the entry's.
    fn is_trouble(&self) -> bool {
        matches!(self.reason, MissReason::Timeout | MissReason::ServiceError | MissReason::ReadDenied)
    }
}

/// What lies below the next layer: the stack's merged manifest, and where each root landed when
/// the base was placed.
struct Below<'a> {
    manifest: &'a mut Manifest,
    roots: &'a [PathBuf],
    /// Each layer applied adds what it took to generate.
    generations: &'a mut Vec<Option<Generation>>,
}

/// Apply the layers of the stack's generation in order, stopping at the first that cannot be:
/// one that is corrupt, foreign or would change what is below it (or on disk) makes the next
/// save compact; service trouble only stops this run's growth.
fn apply_layers(
    ctx: &Context,
    locate: &Locate,
    max_layers: u32,
    slots: &Slots,
    (applied, kept): (&mut StackApplied, &mut KeptStack),
    below: Below<'_>,
) {
    let Below { manifest, roots: base_roots, generations } = below;
    let generation = applied.generation;
    let (layers, gap) = stack::find_layers(slots.backend, slots.key, &locate.version(), generation, max_layers);
    let lines: Vec<&str> = locate.paths.includes.iter().map(|p| p.line.as_str()).collect();
    for (i, layer) in layers.iter().enumerate() {
        let n = i as u32 + 1;
        let top = kept.top.clone();
        let below: &Manifest = manifest;
        let placed = place_slot(ctx, locate, slots, layer, &[], Staged::commit_layer, |m, roots| {
            stack::check_slot(m, Slot::new(generation, n), Some(&top))
                .and_then(|()| stack::check_additions(m, below))
                .and_then(|()| stack::check_roots(&lines, roots, base_roots))
                .map_err(|why| SlotFailure::corrupt(why.to_string()))
        });
        match placed {
            Ok((transfer, layer_manifest, _)) => {
                kept.top = layer_manifest.digest();
                kept.layers = n;
                kept.layer_bytes += transfer.content_bytes;
                generations.push(layer_manifest.generation.clone());
                stack::merge(manifest, &layer_manifest);
                applied.layers.push(transfer);
            }
            Err(failed) => {
                let why = StackStop::NotApplied { layer: n, reason: failed.reason, detail: failed.detail.clone() };
                words::stack_stops(&why, Slot::new(generation, n - 1)).say(ctx.runner);
                // Only the service's trouble skips growth; anything else about the layer (what
                // it holds, or what is in its way here) makes the next save compact.
                kept.trouble = failed.is_trouble();
                applied.stopped = Some(why);
                return;
            }
        }
    }
    let stop = match gap {
        Some(Gap::Missing { missing, later }) => StackStop::Missing { missing, later },
        Some(Gap::Trouble { layer, cause }) => {
            kept.trouble = true;
            StackStop::Trouble { layer, cause }
        }
        None => return,
    };
    words::stack_gap(&stop).say(ctx.runner);
    applied.stopped = Some(stop);
}

/// Download one slot of the stack, verify it, `check` its manifest and where its roots land, and
/// put it in place whole with `commit` (a layer's only adds). What it put in place, its
/// manifest, and where its roots landed.
fn place_slot(
    ctx: &Context,
    locate: &Locate,
    slots: &Slots,
    entry: &CacheEntry,
    required: &[PathBuf],
    commit: fn(Staged) -> Result<RestoreStats, UnpackError>,
    check: impl FnOnce(&Manifest, &[PathBuf]) -> Result<(), SlotFailure>,
) -> Result<(Transfer, Manifest, Vec<PathBuf>), SlotFailure> {
    let failure = |reason, detail| SlotFailure { reason, detail, bad_pack: None };
    let started = Instant::now();
    let stream = slots.backend.open(entry).map_err(|e| failure(miss_reason(e.kind), error_chain(&e)))?;
    let mut reader = ProgressReader::new(stream, ctx.runner.progress("download", entry.size));
    // Every slot's manifest names the stack's key (a later generation's base is stored under a
    // key of its own). An entry whose files are in packs reads them from its prefix's packs.
    let packs = slots.key.prefix().and_then(|prefix| slots.backend.packs(prefix));
    let plan = RestorePlan {
        key: slots.key,
        paths: &locate.paths,
        required,
        compression: locate.compression,
        packs: packs.as_deref(),
    };
    let staged = unpack(&mut reader, &plan).map_err(|e| SlotFailure::unpacking(&e))?;
    reader.progress().finish();
    let archive_bytes = reader.progress().bytes();
    let roots = staged.root_locations();
    check(&staged.manifest, &roots)?;
    if let Some(note) = staged.not_kept_here() {
        render::Said::Warning(note).say(ctx.runner);
    }
    let manifest = staged.manifest.clone();
    let stats = commit(staged).map_err(|e| SlotFailure::unpacking(&e))?;
    if stats.content {
        ctx.runner.info(&super::render::content::restored(&stats));
    }
    // What came from the store: the archive, and what was fetched from packs.
    let archive_bytes = archive_bytes + stats.fetched;
    let placed = Transfer { files: stats.files, content_bytes: stats.bytes, archive_bytes, elapsed: started.elapsed() };
    Ok((placed, manifest, roots))
}

fn log_attempt(ctx: &Context, tried: &Result<Reuse, NotReused>) {
    let runner = ctx.runner;
    match tried {
        Ok(Reuse { restored, stack, extra_files, .. }) => {
            words::reused(restored).say(runner);
            render::say_all(runner, words::stack_line(stack));
            if !extra_files.is_empty() {
                words::kept(extra_files).say(runner);
            }
        }
        Err(NotReused::Found) => words::found().say(runner),
        Err(NotReused::Miss { reason, detail } | NotReused::Unusable { reason, detail, .. }) => {
            words::not_reused(*reason, detail.as_deref()).say(runner)
        }
    }
}

/// The replacement this job's save writes after [`NotReused::Unusable`], as the log and the
/// summary name it (the save numbers it again against the store: [`Slot::next_base`]).
fn replacement(ctx: &Context, tried: &Result<Reuse, NotReused>) -> Option<Slot> {
    let Err(NotReused::Unusable { newest, .. }) = tried else { return None };
    let slot = Slot::next_base([*newest]);
    words::replacement(slot).say(ctx.runner);
    slot
}

fn miss_reason(kind: ErrorKind) -> MissReason {
    match kind {
        ErrorKind::Timeout => MissReason::Timeout,
        ErrorKind::NotFound => MissReason::NotFound,
        ErrorKind::ReadDenied => MissReason::ReadDenied,
        _ => MissReason::ServiceError,
    }
}

/// A stream error caused by the service (reset, timeout) is service trouble, not corruption.
fn classify(err: &UnpackError) -> MissReason {
    if let UnpackError::Corrupt { source: Some(io), .. } = err
        && let Some(backend) = BackendError::in_io(io)
    {
        return miss_reason(backend.kind);
    }
    err.miss_reason()
}

/// `clean-on-miss`: remove stale files under `path`. Trouble is a warning, or under `strict`
/// the error that fails the step.
fn clean_stale(
    ctx: &Context,
    locate: &Locate,
    locations: &Locations,
    strict: bool,
) -> (Option<Cleaned>, Option<CleanError>) {
    let tracked = super::tracked::GitTracked::new(ctx.runner, ctx.system, &locations.workspace);
    let mut stats = CleanStats::default();
    let result = clean_into(&locate.paths, &locate.clean_guard, &tracked, &mut stats);
    let names: Vec<String> = stats.removed.iter().map(|p| locations.display(p)).collect();
    let cleaned =
        Cleaned { files: stats.removed_files, dirs: stats.removed_dirs, names, kept_tracked: stats.kept_tracked };
    match result {
        Ok(()) => {
            words::cleaned(&cleaned, false).say(ctx.runner);
            (Some(cleaned), None)
        }
        Err(e) => {
            // What went before the failure is named all the same.
            let cleaned = (cleaned.files + cleaned.dirs > 0).then(|| {
                words::cleaned(&cleaned, true).say(ctx.runner);
                cleaned
            });
            if strict {
                return (cleaned, Some(e));
            }
            words::clean_unfinished(&e).say(ctx.runner);
            (cleaned, None)
        }
    }
}

/// `explain-misses` on a miss: log why, and return it (or why there is no explanation) for the
/// summary; `None` when `explain-misses` is off. Any trouble is one informational line; it
/// never affects the restore.
fn explain_miss(
    ctx: &Context,
    config: &Config,
    backend: &dyn Backend,
    ours: &FingerprintRecord,
) -> Option<Result<Explanation, String>> {
    let runner = ctx.runner;
    if config.restore.explain_misses == Some(false) {
        return None;
    }
    let _group = runner.group(render::explain::GROUP);
    let catalog = match (ctx.catalog)(&config.locate, runner.env()) {
        Ok(c) => c,
        Err(e) => {
            let why = render::explain::skipped(&e);
            render::explain::unexplained(&why, false).say(runner);
            return Some(Err(why));
        }
    };
    let shown = Shown::new(runner, config);
    let asked = (&shown, &config.locate.path_lines[..], false);
    Some(explain::explain_and_log(ctx, asked, backend, catalog.as_ref(), ours))
}

/// What later steps are told: a preset's directories and `reuse-env`.
fn exports(restore: &RestoreConfig, reused: bool) -> Vec<(String, String)> {
    let mut exports = restore.exports.clone();
    if let Some(name) = &restore.reuse_env {
        exports.push((name.clone(), if reused { "1" } else { "0" }.to_owned()));
    }
    exports
}
