//! `save`: archive the `path` roots under the key, unless the entry is incomplete, exists, or
//! the cache is read-only. Service trouble ends as a warning unless `strict`.

use super::fingerprint::compute;
use super::handoff::{self, RestoreTimes, Restored, fingerprint_path, read_fingerprint};
use super::publish::SKIP_SAVE_STALE;
use super::render::{self, Shown, save as words};
use super::{Context, Error, setup::secret_values, verify, worth};
use crate::archive::{Inventory, PackError, SecretScanner, Stamp, inventory, write_archive_with};
use crate::backend::{Backend, BackendError, CacheMode, Committed, ErrorKind, Reservation};
use crate::config::{Config, Keep, Locate, SaveConfig, UncoveredReads, VerifyReuse};
use crate::content::PackName;
use crate::content::save::SaveError;
use crate::fingerprint::FingerprintRecord;
use crate::keys::Key;
use crate::manifest::{EntryKind, Generation};
use crate::outcome::{CompileWorth, HitRecord, Pruned, SaveOutcome, SaveResult, State, Transfer, Verified};
use crate::paths::Locations;
use crate::preset::Preset;
use crate::stack::{self, Added, CompactWhy, Growth, Limits, Slot};
use crate::text::{error_chain, error_line};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

pub(super) fn run(ctx: &Context, config: &Config, post: bool) -> Result<SaveOutcome, Error> {
    let outcome = attempt(ctx, config, post)?;
    Ok(finish(ctx, &config.locate, config.save.prune, outcome))
}

/// Which key to save under (the restore step's, `key`'s, or computed here), what the restore of
/// that key and version did in this job ([`handoff::read_record`]), then the save.
fn attempt(ctx: &Context, config: &Config, post: bool) -> Result<SaveOutcome, Error> {
    let runner = ctx.runner;
    let env = runner.env();
    let locate = &config.locate;
    let fingerprint_file = locate.fingerprint_file.as_deref();
    let version = locate.version();
    let mut record = if post {
        let Some(key) = runner.state(State::Key).map(Key::from) else {
            words::no_key().say(runner);
            return Ok(SaveOutcome::skipped(None, SaveResult::Error, words::NO_KEY));
        };
        if runner.state(State::SkipSave).as_deref() == Some(SKIP_SAVE_STALE) {
            let stale = words::stale();
            stale.say(runner);
            return Ok(SaveOutcome::skipped(Some(&key), SaveResult::Incomplete, stale.text()));
        }
        let path = runner
            .state(State::FingerprintFile)
            .map(PathBuf::from)
            .unwrap_or_else(|| fingerprint_path(fingerprint_file, env, &key));
        read_fingerprint(&path, &key)?
    } else if let Some(key) = &config.save.key {
        let record = read_fingerprint(&fingerprint_path(fingerprint_file, env, key), key)?;
        if record.version != version {
            return Err(Error::VersionMismatch { key: key.clone() });
        }
        record
    } else {
        let record = compute(ctx, config)?;
        check_restored_key(ctx, config, &record)?;
        handoff::write_fingerprint(fingerprint_file, env, &record)?;
        record
    };
    // Two caches of one key (other `path` lines) share its fingerprint file: this save's version
    // is its own `path` lines'.
    record.version = version;
    let store = store_name(ctx, locate);
    // Said once: what the job may do is read again where it matters.
    super::services::cache_mode(runner);
    let (restored, times) = handoff::read_record(fingerprint_file, env, (&record.key, &record.version), &store)
        .unwrap_or_else(|why| {
            words::record_unused(&why).say(runner);
            None
        })
        .map_or((None, RestoreTimes::default()), |(restored, times)| (Some(restored), times));
    let writing = Writing {
        locate,
        locations: &config.fingerprint.locations,
        secret_env: &config.secret_env,
        generation_seconds: config.save.generation_seconds,
    };
    let after = |hit| after_hit(ctx, &config.save, config.preset, writing, hit);
    let mut bad_packs = Vec::new();
    let place = match restored {
        Some(Restored::Reused(kept)) => {
            return after(Hit { record: &record, kept: Some(*kept), post, times });
        }
        // `lookup-only` found it, or the restore could not leave its record.
        _ if post && runner.state(State::SkipSave).as_deref() == Some("true") => {
            return after(Hit { record: &record, kept: None, post, times });
        }
        Some(Restored::Unusable { newest, bad_packs: bad }) => {
            words::replacing().say(runner);
            // A name that is no pack's (a step could write anything here) names nothing.
            bad_packs = bad.iter().filter_map(|hex| PackName::parse(hex)).collect();
            Place::Above { seen: newest, replacing: true }
        }
        Some(Restored::NotReused) | None => Place::First,
    };
    // The run that generated what this save keeps: what its Python read and nothing covers.
    let saved = (&config.fingerprint.locations, &locate.paths);
    let uncovered = super::reads::check(ctx, config.uncovered_reads, saved, &record).map(Box::new);
    let with_uncovered = |outcome: SaveOutcome| SaveOutcome { uncovered: uncovered.clone(), ..outcome };
    if let Some(may_not) = may_not_write(ctx, Some(&record.key)) {
        return Ok(with_uncovered(may_not));
    }
    if !config.save.save_if {
        words::disabled(&record.key).say(runner);
        let disabled = SaveOutcome::skipped(Some(&record.key), SaveResult::Disabled, words::DISABLED);
        return Ok(with_uncovered(disabled));
    }
    let refusing = config.uncovered_reads == UncoveredReads::Fail;
    if let Some(refused) = uncovered.as_deref().filter(|u| refusing && !u.files.is_empty()) {
        let detail = words::uncovered(refused);
        return Ok(with_uncovered(SaveOutcome::skipped(Some(&record.key), SaveResult::UncoveredReads, &detail)));
    }
    let target = Target { bad_packs, ..Target::whole(place) };
    Ok(with_uncovered(save(ctx, writing, &record, &target, times)))
}

/// The store as the restore's record names it.
fn store_name(ctx: &Context, locate: &Locate) -> String {
    (ctx.backend)(locate, ctx.runner.env(), ctx.runner.secret_sink()).describe()
}

/// A save without `key` computes the fingerprint after the job's steps, which may have changed
/// what enters it. When this job's restore of the same cache computed another key, no restore
/// would look for this entry: refused, naming what changed and the key to pass.
fn check_restored_key(ctx: &Context, config: &Config, record: &FingerprintRecord) -> Result<(), Error> {
    let locate = &config.locate;
    let env = ctx.runner.env();
    let inputs = config.fingerprint.inputs_digest();
    let what = (locate.prefix.as_str(), &locate.version(), inputs.as_str());
    let restored = handoff::restored_keys(locate.fingerprint_file.as_deref(), env, what, &store_name(ctx, locate));
    if restored.is_empty() || restored.contains(&record.key) {
        return Ok(());
    }
    let theirs = &restored[0];
    let path = fingerprint_path(locate.fingerprint_file.as_deref(), env, theirs);
    let changes = match read_fingerprint(&path, theirs) {
        Ok(restore) => {
            let shown = Shown::new(ctx.runner, config);
            render::explain::changes(&restore.components, &record.components, &shown)
        }
        Err(_) => Vec::new(),
    };
    Err(Error::KeyChangedSinceRestore {
        restored: theirs.clone(),
        computed: record.key.clone(),
        changes: words::changed_since_restore(&changes),
    })
}

/// What writing an entry reads: what locates it and what it holds, how paths are shown, the
/// variables whose values it must never hold, and `generation-seconds`.
#[derive(Clone, Copy)]
struct Writing<'a> {
    locate: &'a Locate,
    locations: &'a Locations,
    secret_env: &'a [String],
    generation_seconds: Option<f64>,
}

/// An entry restored earlier in the job.
struct Hit<'a> {
    record: &'a FingerprintRecord,
    /// What the restore kept: the manifest of what it put in place, and its stack.
    kept: Option<verify::Kept>,
    /// The post step's (the restore step found it), else a save's after a restore in this job.
    post: bool,
    /// When the restore ended and what the reuse was worth.
    times: RestoreTimes,
}

/// After a hit: `verify-reuse`, then with `grow` a layer (or a compacted base) of what the job
/// added; otherwise nothing is saved. Both read one comparison of the tree with what the
/// restore kept.
fn after_hit(
    ctx: &Context,
    save: &SaveConfig,
    preset: Option<Preset>,
    writing: Writing,
    hit: Hit,
) -> Result<SaveOutcome, Error> {
    let runner = ctx.runner;
    let key = &hit.record.key;
    let verifying = save.verify_reuse != VerifyReuse::Off;
    let grow = writing.locate.grow;
    let compared = match &hit.kept {
        None if verifying || grow.is_some() => {
            let what = if verifying { "verify-reuse" } else { "grow" };
            words::no_manifest_kept(what).say(runner);
            None
        }
        Some(kept) if verifying || grow.is_some() => {
            let what = if verifying { "verify-reuse" } else { "grow" };
            match verify::compare(kept, writing.locate, writing.locations) {
                Ok(changes) => Some((kept, changes)),
                Err(e) => {
                    words::not_compared(what, &e).say(runner);
                    None
                }
            }
        }
        _ => None,
    };
    if grow.is_some() && !save.save_if {
        words::disabled_layer().say(runner);
    }
    let grown = match &compared {
        Some((kept, changes)) if save.save_if => {
            grow.and_then(|limits| grow_stack(ctx, limits, writing, &hit, (kept, changes)))
        }
        _ => None,
    };
    let additions_kept = grown.as_ref().is_some_and(SaveOutcome::is_saved);
    // A compile cache put in place (not one `lookup-only` found): what the hit saved, as torch
    // reported it in the job's Python.
    let kept_compile_cache = hit.kept.as_ref().filter(|kept| super::restore::is_compile_cache(preset, &kept.manifest));
    let compile_cache = kept_compile_cache.is_some();
    let compile = kept_compile_cache.map(|kept| super::reads::compile_worth(ctx, kept, writing.locate));
    if let Some(compile) = &compile {
        words::time_saved(compile).say(runner);
    }
    let worth = (hit.times.hit, compile.as_ref());
    let verified = compared.as_ref().filter(|_| verifying).map(|(_, changes)| {
        // A compile cache found by its directories reads as the preset's: added files are graphs.
        let torch = compile_cache || preset == Some(Preset::TorchInductor);
        reuse_verdict(ctx, save.verify_reuse, (torch, grow.is_some()), changes, (additions_kept, worth))
    });
    if let Some(mut grown) = grown {
        grown.verified = verified;
        grown.compile = compile;
        return Ok(grown);
    }
    words::hit_not_saved(key, hit.post).say(runner);
    let mut outcome = SaveOutcome::skipped(Some(key), SaveResult::SkippedHit, words::RESTORED);
    outcome.verified = verified;
    outcome.compile = compile;
    Ok(outcome)
}

/// `grow`: save what the job added since the restore as the next layer, or compact; `None`
/// when there is nothing to add.
fn grow_stack(
    ctx: &Context,
    limits: Limits,
    writing: Writing,
    hit: &Hit,
    (kept, changes): (&verify::Kept, &verify::TreeChanges),
) -> Option<SaveOutcome> {
    let runner = ctx.runner;
    if !changes.removed.is_empty() {
        words::grow_removed(changes.removed.len()).say(runner);
    }
    if !changes.changed.is_empty() {
        words::grow_changed(changes.changed.len()).say(runner);
    }
    let applied = kept.stack.clone().unwrap_or_default();
    let added = Added { paths: &changes.layer_paths, bytes: changes.layer_bytes };
    let target = match stack::plan(limits, &applied, &kept.manifest, added) {
        Growth::Nothing => {
            words::grow_nothing().say(runner);
            return None;
        }
        Growth::Skip(why) => {
            words::grow_skipped(why).say(runner);
            return None;
        }
        Growth::Layer { slot, parent, paths, stack_dirs } => {
            words::grow_layer(paths.len(), changes.layer_bytes, slot).say(runner);
            Target { parent: Some(parent), only: Some(paths), stack_dirs, ..Target::whole(Place::Slot(slot)) }
        }
        Growth::Compact { paths, why } => {
            let seen = applied.highest.max(applied.generation);
            let compacting = Some(why);
            Target { only: Some(paths), compacting, ..Target::whole(Place::Above { seen, replacing: false }) }
        }
    };
    Some(save(ctx, writing, hit.record, &target, hit.times))
}

/// Where in the key's stack a save writes.
#[derive(Clone, Copy, Debug)]
enum Place {
    /// Generation 0's base, after a restore that used nothing (or none in this job) — unless the
    /// store answers a base of the key already: then the entry exists.
    First,
    /// A layer on top of what the restore applied.
    Slot(Slot),
    /// A new base above the newest generation — a replacement of what the restore could not use
    /// (`replacing`), or a compaction — numbered by [`next_base`] against the store.
    Above { seen: u32, replacing: bool },
}

/// Which slot of the key's stack a save writes, and which entries go into it.
struct Target {
    place: Place,
    /// A replacement: the packs the restore found missing or corrupt, which it never references.
    bad_packs: Vec<PackName>,
    /// A layer's parent: the digest of the manifest of the slot below.
    parent: Option<String>,
    /// A layer or a compacted base: only these entry paths, and the directories above them.
    only: Option<HashSet<String>>,
    /// A layer: the modes of the stack's directories, which its own directory entries keep (a
    /// restore refuses a layer that would change one).
    stack_dirs: HashMap<String, u32>,
    /// A compaction: why (the log says it once the slot is known).
    compacting: Option<CompactWhy>,
}

impl Target {
    fn whole(place: Place) -> Target {
        Target { place, parent: None, only: None, stack_dirs: HashMap::new(), compacting: None, bad_packs: Vec::new() }
    }
}

/// The one place a save decides which slot it writes: a fixed slot as it is; a new base above
/// the newest base the store answers now ([`Slot::next_base`]) — what the restore saw
/// (`seen`, from its record, which a step could have written) only when the store cannot be
/// asked. A replacement that another job already wrote (the store's newest is above `seen`) is
/// `exists`; a key whose generations are used up saves nothing.
fn next_base(
    ctx: &Context,
    backend: &dyn Backend,
    record: &FingerprintRecord,
    place: Place,
) -> Result<Slot, Box<SaveOutcome>> {
    let key = &record.key;
    let (seen, replacing) = match place {
        Place::Slot(slot) => return Ok(slot),
        Place::First => {
            return match newest_base(ctx, backend, record).0 {
                // A file in the way here, service trouble in the restore, a save with no restore
                // before it: the key has an entry all the same.
                Some(generation) => {
                    let detail = words::base_exists(Slot::base(generation));
                    Err(Box::new(SaveOutcome::skipped(Some(key), SaveResult::Exists, &detail)))
                }
                None => Ok(Slot::FIRST_BASE),
            };
        }
        Place::Above { seen, replacing } => (seen, replacing),
    };
    let (now, failed) = newest_base(ctx, backend, record);
    if let Some(now) = now.filter(|now| replacing && *now > seen) {
        let detail = words::replaced_by_another(Slot::base(now));
        return Err(Box::new(SaveOutcome::skipped(Some(key), SaveResult::Exists, &detail)));
    }
    let basis = if failed { now.or(Some(seen)) } else { now };
    Slot::next_base(basis).ok_or_else(|| {
        let used_up = words::generations_used_up();
        used_up.say(ctx.runner);
        Box::new(SaveOutcome::skipped(Some(key), SaveResult::SkippedHit, used_up.text()))
    })
}

/// `read-only` when the runner's `ACTIONS_CACHE_MODE` does not let this job write (`read`,
/// `none`): nothing is saved, and that is no trouble.
fn may_not_write(ctx: &Context, key: Option<&Key>) -> Option<SaveOutcome> {
    let mode = CacheMode::from_env(ctx.runner.env()).0;
    (!mode.writable()).then(|| {
        words::cache_mode(mode).say(ctx.runner);
        SaveOutcome::skipped(key, SaveResult::ReadOnly, words::READ_ONLY)
    })
}

/// The generation of the newest base the store answers for the key (one lookup, as a restore
/// makes it), and whether the lookup failed (said in the log) or was not made (the job may not
/// read: `ACTIONS_CACHE_MODE` is `write-only`).
fn newest_base(ctx: &Context, backend: &dyn Backend, record: &FingerprintRecord) -> (Option<u32>, bool) {
    if !CacheMode::from_env(ctx.runner.env()).0.readable() {
        return (None, true);
    }
    let key = &record.key;
    let bases = stack::find_bases(backend, key, &record.version);
    if let Some(e) = &bases.error {
        words::lookup_failed(e).say(ctx.runner);
    }
    (bases.newest.map(|(generation, _)| generation), bases.error.is_some())
}

/// Keep only a layer's entries: `paths` and the directories above them, those of the stack
/// with the stack's modes (`stack_dirs`).
fn keep_only(inv: &mut Inventory, paths: &HashSet<String>, stack_dirs: &HashMap<String, u32>) {
    let mut above: HashSet<String> = HashSet::new();
    for path in paths {
        let mut end = 0;
        while let Some(i) = path[end..].find('/') {
            end += i;
            above.insert(path[..end].to_owned());
            end += 1;
        }
    }
    inv.entries.retain_mut(|e| {
        let path = e.entry_path().to_string();
        if e.kind == EntryKind::Dir
            && let Some(mode) = stack_dirs.get(&path)
        {
            e.mode = *mode;
        }
        paths.contains(&path) || (e.kind == EntryKind::Dir && above.contains(&path))
    });
}

/// Archive the `path` roots (or a layer's part of them) and upload them as `target`.
fn save(
    ctx: &Context,
    writing: Writing,
    record: &FingerprintRecord,
    target: &Target,
    times: RestoreTimes,
) -> SaveOutcome {
    let runner = ctx.runner;
    let env = runner.env();
    let key = Some(&record.key);
    let _group = runner.group(&words::group(&record.key));

    if let Some(may_not) = may_not_write(ctx, key) {
        return may_not;
    }

    let locate = writing.locate;
    let mut inv = match inventory(&locate.paths) {
        Ok(inv) => inv,
        Err(e) => return pack_trouble(key, &e),
    };
    if let Some(paths) = &target.only {
        keep_only(&mut inv, paths, &target.stack_dirs);
    }
    if !inv.skipped.is_empty() {
        words::special_files(&inv.skipped).say(runner);
    }
    let is_layer = matches!(target.place, Place::Slot(slot) if !slot.is_base());
    let required: &[PathBuf] = if is_layer { &[] } else { &locate.required };
    if let Some(missing) = required.iter().find(|r| !inv.contains(r)) {
        let missing = words::required_missing(missing);
        missing.say(runner);
        return SaveOutcome::skipped(key, SaveResult::Incomplete, missing.text());
    }
    // An existing directory root is an entry of its own: empty directories alone hold nothing.
    if !inv.entries.iter().any(|e| e.kind != EntryKind::Dir) {
        let none = inv.entries.is_empty();
        words::not_saving_empty(none).say(runner);
        return SaveOutcome::skipped(key, SaveResult::Incomplete, words::nothing_to_save(none));
    }

    // The packer checks every byte against these before it goes into the archive.
    let secrets = SecretScanner::new(secret_values(writing.secret_env, locate, env));
    if secrets.in_fingerprint(record) {
        return SaveOutcome::trouble(key, SaveResult::SecretFound, words::SECRET_IN_FINGERPRINT);
    }
    if secrets.in_roots(&inv.roots).is_some() {
        return SaveOutcome::trouble(key, SaveResult::SecretFound, words::SECRET_IN_PATH);
    }

    let generation = generation(ctx, writing.generation_seconds, target, &inv, times);
    let backend = (ctx.backend)(locate, env, runner.secret_sink());
    render::backend(&backend.describe()).say(runner);
    let slot = match next_base(ctx, backend.as_ref(), record, target.place) {
        Ok(slot) => slot,
        Err(settled) => return *settled,
    };
    match (&target.compacting, target.place) {
        (Some(why), _) => words::compacting(slot, *why).say(runner),
        (None, Place::Above { replacing: true, .. }) => words::saving_replacement(slot).say(runner),
        _ => {}
    }
    let mut outcome =
        upload(ctx, writing, backend.as_ref(), record, (slot, target, generation.clone()), &inv, &secrets);
    if outcome.is_saved() {
        outcome.generation = generation.as_ref().and_then(Generation::plausible);
        words::time_to_generate(generation.as_ref(), writing.generation_seconds.is_some()).say(runner);
    }
    outcome
}

/// What this save records as the entry's generation time ([`worth::measure`]): the window
/// from the end of this job's restore of the key (its record) to the newest file saved; a
/// compaction adds what the stack it replaces took, and records nothing when that is not known.
fn generation(
    ctx: &Context,
    given: Option<f64>,
    target: &Target,
    inv: &Inventory,
    times: RestoreTimes,
) -> Option<Generation> {
    let env = ctx.runner.env();
    let since = times.ended_ms;
    let compacting = matches!(target.place, Place::Above { replacing: false, .. });
    let below = times.hit.and_then(|h| h.generation_ms);
    match (compacting, below) {
        (true, None) if given.is_none() => None,
        _ => worth::measure(given, env, inv, since, below.filter(|_| compacting), worth::now_ms()),
    }
}

fn upload(
    ctx: &Context,
    writing: Writing,
    backend: &dyn Backend,
    record: &FingerprintRecord,
    (slot, target, generation): (Slot, &Target, Option<Generation>),
    inv: &Inventory,
    secrets: &SecretScanner,
) -> SaveOutcome {
    let runner = ctx.runner;
    let key = Some(&record.key);
    let started = Instant::now();
    let trouble = |e: &BackendError| {
        let result = match e.kind {
            ErrorKind::RateLimited { .. } => SaveResult::RateLimited,
            // The service refuses the write: a read-only token, a cache over its quota.
            ErrorKind::ReadOnly | ErrorKind::QuotaExceeded => SaveResult::ReadOnly,
            ErrorKind::AlreadyExists | ErrorKind::Precondition => {
                return SaveOutcome::skipped(key, SaveResult::Exists, &error_chain(e));
            }
            _ => SaveResult::Error,
        };
        SaveOutcome::trouble(key, result, &error_chain(e))
    };
    let (written, upload) = match reserve(ctx, backend, record, (slot, target.place)) {
        Ok(reserved) => reserved,
        Err(NotReserved::Settled(outcome)) => return *outcome,
        Err(NotReserved::Failed(e)) => return trouble(&e),
    };
    // As the log names it, unless it is the generation-0 base every save without `grow` writes.
    let slot = (written != Slot::FIRST_BASE).then_some(written);
    let mut progress = runner.progress("archive", Some(inv.content_bytes()));
    let stamp = Stamp { stack: written.record(target.parent.clone()), generation };
    let out = CountingWriter { inner: upload, count: 0 };
    let compression = writing.locate.compression;
    // Where the store keeps packs and the switch is on, the files' content goes into them
    // (docs/content.md); a restore reads either kind whatever the switch says.
    let packs = super::content::enabled(runner.env()).then(|| backend.packs(&record.prefix)).flatten();
    let mut content_stats = None;
    let written = match packs.as_deref() {
        Some(packs) => {
            // A replacement references what the entries it reaches hold but the packs the
            // restore found missing or corrupt; where it could not say which, nothing earlier.
            let replacing = matches!(target.place, Place::Above { replacing: true, .. });
            // A job that may not read the cache (`write-only`) asks it nothing.
            let readable = CacheMode::from_env(runner.env()).0.readable();
            let maps = if (replacing && target.bad_packs.is_empty()) || !readable {
                Vec::new()
            } else {
                super::content::reusable_maps(ctx, writing.locate, backend, record)
            };
            let parts = (inv, record, compression, stamp);
            let refs = (&maps[..], &target.bad_packs[..]);
            super::content::write_with_content(ctx, packs, refs, parts, secrets, out, &mut |n| progress.add(n)).map(
                |(out, stats, saved)| {
                    content_stats = Some(saved);
                    (out, stats)
                },
            )
        }
        None => write_archive_with(inv, record, compression, stamp, secrets, out, &mut |n| progress.add(n)),
    };
    let (writer, stats) = match written {
        Ok(done) => done,
        Err(PackError::Write(io)) if BackendError::in_io(&io).is_some() => {
            return trouble(BackendError::in_io(&io).expect("checked"));
        }
        Err(PackError::Content(SaveError::Store(e))) if crate::backend::backend_error(&e).is_some() => {
            return trouble(crate::backend::backend_error(&e).expect("checked"));
        }
        Err(PackError::Secret { path }) => {
            let shown = writing.locations.display(&path);
            return SaveOutcome::trouble(key, SaveResult::SecretFound, &words::secret_in_file(&shown));
        }
        Err(other) => return pack_trouble(key, &other),
    };
    progress.finish();
    if stats.effort == crate::archive::Effort::Fast {
        words::fast_compression(stats.sample_ratio).say(runner);
    }
    if let Some(saved) = &content_stats {
        runner.info(&super::render::content::saved(saved));
    }
    let archived = Transfer {
        files: stats.files + stats.symlinks,
        content_bytes: stats.content_bytes,
        // What went to the store: the archive, and the new packs.
        archive_bytes: writer.count + content_stats.as_ref().map_or(0, |s| s.uploaded),
        elapsed: started.elapsed(),
    };
    match writer.inner.commit() {
        Ok(Committed::Saved) => {
            words::saved(slot, &archived, writing.locate.compression.name()).say(runner);
            match slot {
                Some(slot) if !slot.is_base() => SaveOutcome::layer(key, archived, slot),
                _ => SaveOutcome { slot, ..SaveOutcome::saved(key, archived) },
            }
        }
        Ok(Committed::Exists) => SaveOutcome {
            archived: Some(archived),
            ..SaveOutcome::skipped(key, SaveResult::Exists, words::SAVED_FIRST)
        },
        Ok(Committed::Creating) => {
            SaveOutcome { archived: Some(archived), ..SaveOutcome::skipped(key, SaveResult::Exists, words::CREATING) }
        }
        Err(e) => trouble(&e),
    }
}

enum NotReserved {
    /// The save ends without an upload (`exists`).
    Settled(Box<SaveOutcome>),
    Failed(BackendError),
}

/// How many generations above the first choice a new base may go when each exists where this
/// run's lookups do not reach it.
const ABOVE_TRIES: u32 = 8;

/// Reserve `slot`. A new base ([`Place::Above`]) that exists already, while the store's newest
/// base is below it (it exists where a restore's lookup does not reach: another scope of the
/// cache service, a listing whose times say otherwise), goes one generation up, at most
/// [`ABOVE_TRIES`] times; once the store answers a base at least as new, another job saved it.
fn reserve(
    ctx: &Context,
    backend: &dyn Backend,
    record: &FingerprintRecord,
    (mut slot, place): (Slot, Place),
) -> Result<(Slot, Box<dyn crate::backend::Upload>), NotReserved> {
    let key = Some(&record.key);
    for _ in 0..ABOVE_TRIES {
        let (entry_key, entry_version) = slot.names(&record.key, &record.version);
        match backend.reserve(&entry_key, &entry_version).map_err(NotReserved::Failed)? {
            Reservation::Reserved(upload) => return Ok((slot, upload)),
            Reservation::Exists if matches!(place, Place::Above { .. }) => {
                let (newest, _) = newest_base(ctx, backend, record);
                let next = Slot::next_base([slot.generation]);
                match next.filter(|_| newest.is_none_or(|n| n < slot.generation)) {
                    Some(next) => {
                        words::out_of_reach(slot, next).say(ctx.runner);
                        slot = next;
                    }
                    None => break,
                }
            }
            Reservation::Exists => break,
        }
    }
    let detail = words::reserved_by_another(slot);
    Err(NotReserved::Settled(Box::new(SaveOutcome::skipped(key, SaveResult::Exists, &detail))))
}

/// Local trouble while archiving (a link that cannot be cached, a file that vanished, a full
/// disk): nothing is saved, and the job goes on unless `strict`.
fn pack_trouble(key: Option<&Key>, e: &PackError) -> SaveOutcome {
    SaveOutcome::trouble(key, SaveResult::Error, &error_chain(e))
}

struct CountingWriter<W> {
    inner: W,
    count: u64,
}

impl<W: std::io::Write> std::io::Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Mark the roots of a saved entry as exact-cache's own, say how it ended, and `prune`.
fn finish(ctx: &Context, locate: &Locate, prune: Option<Keep>, mut outcome: SaveOutcome) -> SaveOutcome {
    let runner = ctx.runner;
    render::say_all(runner, words::ended(&outcome));
    if outcome.is_saved() {
        handoff::mark_owned(runner, locate, &(0..locate.paths.includes.len()).collect::<Vec<_>>());
        if let (Some(keep), Some(key)) = (prune, &outcome.key) {
            outcome.pruned = Some(prune_after_save(ctx, locate, keep, key));
        }
    }
    outcome
}

/// `verify-reuse`: what changed in the tree since the restore (`additions_kept`: `grow` saved
/// what was added), with what the hit was worth (for a compile cache, `compile`: what torch
/// reported). `why`: whether added files are torch's graphs, and whether `grow` is on.
fn reuse_verdict(
    ctx: &Context,
    verify_reuse: VerifyReuse,
    (torch, growing): (bool, bool),
    changes: &verify::TreeChanges,
    (additions_kept, (hit, compile)): (bool, (Option<HitRecord>, Option<&CompileWorth>)),
) -> Verified {
    let fine = changes.is_fine(additions_kept);
    let verified = Verified {
        added: changes.added.len(),
        changed: changes.changed.len(),
        removed: changes.removed.len(),
        kept_extras: changes.kept_extras,
        torch,
        growing,
        additions_kept,
        hit,
        changed_files: changes.paths(),
        fine,
        failed: !fine && verify_reuse == VerifyReuse::Fail,
    };
    words::verified(&verified, compile).say(ctx.runner);
    verified
}

/// `prune` after a successful save; trouble is a warning, never a failure.
fn prune_after_save(ctx: &Context, locate: &Locate, keep: Keep, saved_key: &Key) -> Pruned {
    let runner = ctx.runner;
    // The prefix of the key saved (an explicit `key` carries the restore step's prefix).
    let prefix = saved_key.rsplit_once('-').map_or(locate.prefix.as_str(), |(p, _)| p);
    let current_ref = runner.env().non_empty("GITHUB_REF");
    let mut packs = super::content::PacksPruned::None;
    let pruned = if super::prune::refused(prefix) {
        Pruned::Refused
    } else {
        match (ctx.catalog)(locate, runner.env()) {
            Err(e) => Pruned::NoCatalog(error_line(&e)),
            Ok(catalog) => {
                match super::prune::prune(catalog.as_ref(), prefix, current_ref, keep.newest, false, Some(saved_key)) {
                    Ok((report, slots)) => {
                        // Entries deleted may leave packs no entry references.
                        if !report.deleted.is_empty() {
                            let backend = (ctx.backend)(locate, runner.env(), runner.secret_sink());
                            let gone = (&[][..], false);
                            packs = super::content::prune_packs(
                                ctx,
                                (locate, backend.as_ref(), catalog.as_ref()),
                                prefix,
                                gone,
                            );
                        }
                        Pruned::Done {
                            prefix: prefix.to_owned(),
                            on_ref: current_ref.map(str::to_owned),
                            kept_keys: report.kept_keys,
                            deleted: report.deleted.iter().map(|e| (e.key.clone(), slots.slot(e))).collect(),
                            failed: report.failed.into_iter().map(|(e, why)| (e.key, why)).collect(),
                        }
                    }
                    Err(e) => Pruned::Failed(error_line(&e)),
                }
            }
        }
    };
    render::say_all(runner, render::prune::after_save(&pruned));
    render::say_all(runner, render::content::pruned(&packs, false));
    pruned
}
