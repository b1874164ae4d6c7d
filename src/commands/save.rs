//! `save`: archive the `path` roots under the key, unless the entry is incomplete, exists, or
//! the cache is read-only. Service trouble ends as a warning unless `strict`.

use super::fingerprint::compute;
use super::handoff::{self, fingerprint_path, read_fingerprint};
use super::lookups::KeyLookups;
use super::publish::SKIP_SAVE_STALE;
use super::{Context, Error, setup::secret_values, verify};
use crate::archive::{Inventory, PackError, SecretScanner, inventory, write_archive};
use crate::backend::{Backend, BackendError, Committed, ErrorKind, Reservation};
use crate::config::{Config, VerifyReuse};
use crate::fingerprint::FingerprintRecord;
use crate::ids::{Key, Version};
use crate::manifest::EntryKind;
use crate::outcome::{SaveOutcome, SaveResult, State, Transfer, Verified};
use crate::stack::{self, Added, Growth, Limits, MAX_GENERATIONS, Slot, SlotMap};
use crate::text::{error_chain, error_line};
use crate::units;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

pub(super) fn run(ctx: &Context, config: &Config, post: bool) -> Result<SaveOutcome, Error> {
    let outcome = attempt(ctx, config, post)?;
    Ok(finish(ctx, config, outcome))
}

/// Which key to save under (the restore step's, `key`'s, or computed here), then the save.
fn attempt(ctx: &Context, config: &Config, post: bool) -> Result<SaveOutcome, Error> {
    let runner = ctx.runner;
    let env = runner.env();
    let record = if post {
        let Some(key) = runner.state(State::Key).map(Key::from) else {
            runner.info("the restore step computed no key; nothing to save");
            return Ok(SaveOutcome::skipped(None, SaveResult::Error, "no key from the restore step"));
        };
        let fingerprint_file = || {
            runner
                .state(State::FingerprintFile)
                .map(PathBuf::from)
                .unwrap_or_else(|| fingerprint_path(config, env, &key))
        };
        match runner.state(State::SkipSave).as_deref() {
            Some("true") => {
                let hit = Hit {
                    key: &key,
                    manifest_file: runner.state(State::ManifestFile).map(PathBuf::from),
                    fingerprint_file: fingerprint_file(),
                    found_by: "was found by the restore step",
                };
                return after_hit(ctx, config, hit);
            }
            Some(SKIP_SAVE_STALE) => {
                let detail = "`clean-on-miss` could not remove stale files in the restore step; not saving them";
                runner.warning(detail);
                return Ok(SaveOutcome::skipped(Some(&key), SaveResult::Incomplete, detail));
            }
            _ => {}
        }
        read_fingerprint(&fingerprint_file(), &key)?
    } else if let Some(key) = &config.key {
        let path = fingerprint_path(config, env, key);
        let record = read_fingerprint(&path, key)?;
        if record.version != config.version() {
            return Err(Error::VersionMismatch { key: key.clone() });
        }
        // The restore step of this job reused the entry (it kept its manifest): check what
        // changed since, and do not save what exists.
        let restored = handoff::manifest_path(config, env, key);
        if restored.exists() {
            let hit =
                Hit { key, manifest_file: Some(restored), fingerprint_file: path, found_by: "was reused in this job" };
            return after_hit(ctx, config, hit);
        }
        record
    } else {
        let record = compute(ctx, config)?;
        handoff::write_fingerprint(config, env, &record)?;
        record
    };
    if !config.save_if {
        runner.info(&format!("`save-if` is false: not saving `{}`", record.key));
        return Ok(SaveOutcome::skipped(Some(&record.key), SaveResult::Disabled, "`save-if` is false"));
    }
    let slot = handoff::replacement(config, env, &record.key).unwrap_or(Slot::FIRST_BASE);
    if slot != Slot::FIRST_BASE {
        runner.info(&format!("the restore step could not use this key's entry: saving {slot} to replace it"));
    }
    let target = Target::base(slot.version(&record.version), slot);
    Ok(save(ctx, config, &record, &target))
}

/// An entry restored earlier in the job.
struct Hit<'a> {
    key: &'a Key,
    /// What the restore kept: the manifest of what it put in place, and its stack.
    manifest_file: Option<PathBuf>,
    fingerprint_file: PathBuf,
    /// `was found by the restore step`, …
    found_by: &'static str,
}

/// After a hit: `verify-reuse`, then with `grow` a layer (or a compacted base) of what the job
/// added; otherwise nothing is saved. Both read one comparison of the tree with what the
/// restore kept.
fn after_hit(ctx: &Context, config: &Config, hit: Hit) -> Result<SaveOutcome, Error> {
    let runner = ctx.runner;
    let verifying = config.verify_reuse != VerifyReuse::Off;
    let compared = if verifying || config.grow {
        compare_with_restore(ctx, config, hit.manifest_file.as_deref(), if verifying { "verify-reuse" } else { "grow" })
    } else {
        None
    };
    if config.grow && !config.save_if {
        runner.info("`save-if` is false: what the job added is not saved as a layer");
    }
    let grown = match &compared {
        Some((kept, changes)) if config.grow && config.save_if => grow_stack(ctx, config, &hit, kept, changes)?,
        _ => None,
    };
    let additions_kept = grown.as_ref().is_some_and(SaveOutcome::is_saved);
    let verified =
        compared.as_ref().filter(|_| verifying).map(|(_, changes)| reuse_verdict(ctx, config, changes, additions_kept));
    if let Some(mut grown) = grown {
        grown.verified = verified;
        return Ok(grown);
    }
    runner.info(&format!("entry `{}` {}; not saving", hit.key, hit.found_by));
    let mut outcome = SaveOutcome::skipped(Some(hit.key), SaveResult::SkippedHit, "restored");
    outcome.verified = verified;
    Ok(outcome)
}

/// What the restore kept, and how the tree under `path` differs from it now; `None` (said in
/// the log under `what`) when the restore kept nothing or the tree cannot be read.
fn compare_with_restore(
    ctx: &Context,
    config: &Config,
    manifest_file: Option<&std::path::Path>,
    what: &str,
) -> Option<(verify::Kept, verify::TreeChanges)> {
    let runner = ctx.runner;
    let Some(path) = manifest_file else {
        runner.info(&format!("{what}: the restore step kept no manifest; nothing to compare with"));
        return None;
    };
    let kept = read_kept(ctx, path, what)?;
    match verify::compare(&kept, config) {
        Ok(changes) => Some((kept, changes)),
        Err(e) => {
            runner.warning(&format!("{what}: {}", error_chain(&e)));
            None
        }
    }
}

/// `grow`: save what the job added since the restore as the next layer, or compact; `None`
/// when there is nothing to add.
fn grow_stack(
    ctx: &Context,
    config: &Config,
    hit: &Hit,
    kept: &verify::Kept,
    changes: &verify::TreeChanges,
) -> Result<Option<SaveOutcome>, Error> {
    let runner = ctx.runner;
    if !changes.removed.is_empty() {
        runner.info(&format!(
            "grow: {} removed since the restore; layers never delete (a content-addressed cache needs no deletions)",
            units::count_of(changes.removed.len(), "file")
        ));
    }
    if !changes.changed.is_empty() {
        runner.info(&format!(
            "grow: {} changed since the restore, not kept: layers only add files (a content-addressed cache never \
             changes one)",
            units::count_of(changes.changed.len(), "file")
        ));
    }
    let limits = Limits { max_layers: config.grow_max_layers, max_share: config.grow_max_share };
    let applied = kept.stack.clone().unwrap_or_default();
    let added = Added { paths: &changes.layer_paths, bytes: changes.layer_bytes };
    let (target, slot_line) = match stack::plan(limits, &applied, &kept.manifest, added) {
        Growth::Nothing => {
            runner.info("grow: no file was added under `path` since the restore");
            return Ok(None);
        }
        Growth::Skip(why) => {
            runner.info(&format!("grow: not this run: {why}"));
            return Ok(None);
        }
        Growth::Full => {
            let detail = format!(
                "the stack of this key has used all {MAX_GENERATIONS} generations; what this job added is not kept \
                 until the fingerprint changes"
            );
            runner.warning(&format!("grow: {detail}"));
            return Ok(Some(SaveOutcome::skipped(Some(hit.key), SaveResult::SkippedHit, &detail)));
        }
        Growth::Layer { slot, parent, paths, stack_dirs } => {
            let line = format!(
                "grow: saving {} added since the restore ({}) as {slot}",
                units::count_of(paths.len(), "file"),
                units::bytes(changes.layer_bytes),
            );
            let version = slot.version(&config.version());
            (Target { version, slot, parent: Some(parent), only: Some(paths), stack_dirs }, line)
        }
        Growth::Compact { slot, paths, why } => {
            let line = format!("grow: compacting the stack into {slot}: {why}");
            (Target { only: Some(paths), ..Target::base(slot.version(&config.version()), slot) }, line)
        }
    };
    runner.info(&slot_line);
    let record = read_fingerprint(&hit.fingerprint_file, hit.key)?;
    Ok(Some(save(ctx, config, &record, &target)))
}

/// What the restore step kept; `None` with a warning naming `what` wanted it.
fn read_kept(ctx: &Context, path: &std::path::Path, what: &str) -> Option<verify::Kept> {
    match std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(kept) => Some(kept),
        Err(e) => {
            ctx.runner.warning(&format!("{what}: cannot read `{}`: {e}", path.display()));
            None
        }
    }
}

/// Which slot of the key's stack a save writes, and which entries go into it.
struct Target {
    version: Version,
    slot: Slot,
    /// A layer's parent: the digest of the manifest of the slot below.
    parent: Option<String>,
    /// A layer or a compacted base: only these entry paths, and the directories above them.
    only: Option<HashSet<String>>,
    /// A layer: the modes of the stack's directories, which its own directory entries keep (a
    /// restore refuses a layer that would change one).
    stack_dirs: HashMap<String, u32>,
}

impl Target {
    /// Everything under `path` as the base `slot`, whose version is `version`.
    fn base(version: Version, slot: Slot) -> Target {
        Target { version, slot, parent: None, only: None, stack_dirs: HashMap::new() }
    }

    /// The slot as the log names it, unless it is the generation-0 base every save without
    /// `grow` writes.
    fn named_slot(&self) -> Option<Slot> {
        (self.slot != Slot::FIRST_BASE).then_some(self.slot)
    }
}

/// With `grow`, a base saved after a miss goes one generation above the highest base that exists
/// (the restore missed because it could not place one, which cannot be replaced); `None`: the
/// target stands.
fn base_above_existing(
    ctx: &Context,
    config: &Config,
    backend: &dyn Backend,
    record: &FingerprintRecord,
    target: &Target,
) -> Option<Target> {
    if !config.grow || target.slot != Slot::FIRST_BASE {
        return None;
    }
    let lookups = KeyLookups { backend, key: &record.key };
    let highest = stack::find_bases(&lookups, &config.version(), config.grow).found.first()?.0;
    let slot = Slot::base(highest + 1);
    if slot.generation >= MAX_GENERATIONS {
        return None;
    }
    ctx.runner.info(&format!("grow: {} exists but was not restored; saving {slot}", Slot::base(highest)));
    Some(Target::base(slot.version(&config.version()), slot))
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
fn save(ctx: &Context, config: &Config, record: &FingerprintRecord, target: &Target) -> SaveOutcome {
    let runner = ctx.runner;
    let env = runner.env();
    let key = Some(&record.key);
    let _group = runner.group(&format!("Save {}", record.key));

    if let Some(mode) = env.non_empty("ACTIONS_CACHE_MODE").filter(|m| matches!(*m, "read" | "none")) {
        runner.info(&format!("`ACTIONS_CACHE_MODE` is `{mode}`: this job may not write to the cache"));
        return SaveOutcome::skipped(key, SaveResult::ReadOnly, "cache mode is read-only");
    }

    let mut inv = match inventory(&config.paths) {
        Ok(inv) => inv,
        Err(e) => return pack_trouble(key, &e),
    };
    if let Some(paths) = &target.only {
        keep_only(&mut inv, paths, &target.stack_dirs);
    }
    if !inv.skipped.is_empty() {
        let list: Vec<String> = inv.skipped.iter().take(5).map(|p| format!("`{}`", p.display())).collect();
        runner.warning(&format!(
            "skipped {} special files (sockets, FIFOs, devices): {}",
            inv.skipped.len(),
            list.join(", ")
        ));
    }
    let is_layer = !target.slot.is_base();
    let required: &[PathBuf] = if is_layer { &[] } else { &config.required };
    if let Some(missing) = required.iter().find(|r| !inv.contains(r)) {
        let msg = format!("required path `{}` does not exist; not saving an incomplete entry", missing.display());
        runner.warning(&msg);
        return SaveOutcome::skipped(key, SaveResult::Incomplete, &msg);
    }
    // An existing directory root is an entry of its own: empty directories alone hold nothing.
    if !inv.entries.iter().any(|e| e.kind != EntryKind::Dir) {
        let msg = match inv.entries.is_empty() {
            true => "nothing to save: no `path` entry exists",
            false => "nothing to save: `path` holds only empty directories, no files",
        };
        runner.warning(&format!(
            "{msg}; not saving an empty entry (if an empty result is right, put a marker file in `path`)"
        ));
        return SaveOutcome::skipped(key, SaveResult::Incomplete, msg);
    }

    // The packer checks every byte against these before it goes into the archive.
    let secrets = SecretScanner::new(secret_values(config, env));
    if secrets.in_fingerprint(record) {
        let msg = "the fingerprint (a `hash-env` or preset variable) holds the value of a token or of a `secret-env` \
                   variable (not shown); nothing was uploaded";
        return SaveOutcome::trouble(key, SaveResult::SecretFound, msg);
    }
    if secrets.in_roots(&inv.roots).is_some() {
        let msg = "a `path` line holds the value of a token or of a `secret-env` variable (not shown); nothing was \
                   uploaded";
        return SaveOutcome::trouble(key, SaveResult::SecretFound, msg);
    }

    let backend = (ctx.backend)(config, env, runner.secret_sink());
    runner.info(&format!("backend: {}", backend.describe()));
    let above = base_above_existing(ctx, config, backend.as_ref(), record, target);
    upload(ctx, config, backend.as_ref(), record, above.as_ref().unwrap_or(target), &inv, &secrets)
}

fn upload(
    ctx: &Context,
    config: &Config,
    backend: &dyn Backend,
    record: &FingerprintRecord,
    target: &Target,
    inv: &Inventory,
    secrets: &SecretScanner,
) -> SaveOutcome {
    let runner = ctx.runner;
    let key = Some(&record.key);
    let started = Instant::now();
    let trouble = |e: &BackendError| {
        let result = match e.kind {
            ErrorKind::RateLimited { .. } => SaveResult::RateLimited,
            ErrorKind::ReadOnly => SaveResult::ReadOnly,
            ErrorKind::AlreadyExists | ErrorKind::Precondition => {
                return SaveOutcome::skipped(key, SaveResult::Exists, &error_chain(e));
            }
            _ => SaveResult::Error,
        };
        SaveOutcome::trouble(key, result, &error_chain(e))
    };
    let slot = target.named_slot();
    let upload = match backend.reserve(&record.key, &target.version) {
        Ok(Reservation::Reserved(upload)) => upload,
        Ok(Reservation::Exists) => {
            let detail = match slot {
                Some(slot) => format!("{slot} of this key exists already (saved by another job)"),
                None => "an entry with this key and version exists already (saved earlier, or being saved by another \
                         job)"
                    .to_owned(),
            };
            return SaveOutcome::skipped(key, SaveResult::Exists, &detail);
        }
        Err(e) => return trouble(&e),
    };
    let mut progress = runner.progress("archive", Some(inv.content_bytes()));
    let written = write_archive(
        inv,
        record,
        config.compression,
        target.slot.record(target.parent.clone()),
        secrets,
        CountingWriter { inner: upload, count: 0 },
        &mut |n| progress.add(n),
    );
    let (writer, stats) = match written {
        Ok(done) => done,
        Err(PackError::Write(io)) if BackendError::in_io(&io).is_some() => {
            return trouble(BackendError::in_io(&io).expect("checked"));
        }
        Err(PackError::Secret { path }) => {
            let shown = config.fingerprint.locations.display(&path);
            let msg = format!(
                "`{shown}` holds the value of a token or of a `secret-env` variable (not shown); the entry was not \
                 committed"
            );
            return SaveOutcome::trouble(key, SaveResult::SecretFound, &msg);
        }
        Err(other) => return pack_trouble(key, &other),
    };
    progress.finish();
    if stats.effort == crate::archive::Effort::Fast {
        runner.info(&format!(
            "compression: zstd's fast level (the files compress poorly: a sample kept {:.0}% of its size)",
            stats.sample_ratio * 100.0
        ));
    }
    let archived = Transfer {
        files: stats.files + stats.symlinks,
        content_bytes: stats.content_bytes,
        archive_bytes: writer.count,
        elapsed: started.elapsed(),
    };
    match writer.inner.commit() {
        Ok(Committed::Saved) => {
            runner.info(&format!(
                "saved {}{} ({}, {} compressed with {}) in {}",
                slot.map(|slot| format!("{slot}: ")).unwrap_or_default(),
                units::count_of(archived.files, "file"),
                units::bytes(archived.content_bytes),
                units::bytes(archived.archive_bytes),
                config.compression.name(),
                units::duration(archived.elapsed)
            ));
            match slot {
                Some(slot) if !slot.is_base() => SaveOutcome::layer(key, archived, slot),
                _ => SaveOutcome { slot, ..SaveOutcome::saved(key, archived) },
            }
        }
        Ok(Committed::Exists) => SaveOutcome {
            archived: Some(archived),
            ..SaveOutcome::skipped(key, SaveResult::Exists, "another job saved this entry first")
        },
        Ok(Committed::Creating) => SaveOutcome {
            archived: Some(archived),
            ..SaveOutcome::skipped(key, SaveResult::Exists, "another job is creating this entry")
        },
        Err(e) => trouble(&e),
    }
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
fn finish(ctx: &Context, config: &Config, mut outcome: SaveOutcome) -> SaveOutcome {
    let runner = ctx.runner;
    match outcome.result {
        SaveResult::Exists => runner.info(&format!("entry exists: {}", outcome.detail.as_deref().unwrap_or(""))),
        result if outcome.trouble => {
            runner.warning(&format!("not saved ({result}): {}", outcome.detail.as_deref().unwrap_or("")))
        }
        _ => {}
    }
    if outcome.is_saved() {
        handoff::mark_owned(runner, config, &(0..config.paths.includes.len()).collect::<Vec<_>>());
        if let (true, Some(key)) = (config.prune, &outcome.key) {
            outcome.pruned = Some(prune_after_save(ctx, config, key));
        }
    }
    outcome
}

/// `verify-reuse`: what changed in the tree since the restore, as a verdict (`additions_kept`:
/// `grow` saved what was added).
fn reuse_verdict(ctx: &Context, config: &Config, changes: &verify::TreeChanges, additions_kept: bool) -> Verified {
    let runner = ctx.runner;
    let extras = match changes.kept_extras {
        0 => String::new(),
        n => format!(" ({} not in the entry, there before the restore, kept)", units::count_of(n, "file")),
    };
    let verdict = changes.verdict(config, additions_kept, &extras);
    let changed_files = changes.paths();
    if changes.is_fine(additions_kept) {
        runner.info(&format!("verify-reuse: {verdict}"));
        return Verified { verdict, changed_files, failed: false };
    }
    let shown: Vec<&str> = changed_files.iter().take(10).map(String::as_str).collect();
    let message = format!("verify-reuse: {verdict}\n{}", shown.join("\n"));
    let failed = config.verify_reuse == VerifyReuse::Fail;
    if failed {
        runner.error(&message)
    } else {
        runner.warning(&message)
    }
    Verified { verdict, changed_files, failed }
}

/// `prune` after a successful save: a one-line account; trouble is a warning, never a failure.
fn prune_after_save(ctx: &Context, config: &Config, saved_key: &Key) -> String {
    let runner = ctx.runner;
    // The prefix of the key saved (an explicit `key` carries the restore step's prefix).
    let prefix = saved_key.rsplit_once('-').map_or(config.prefix.as_str(), |(p, _)| p);
    if let Some(why) = super::prune::refusal(prefix) {
        runner.warning(&format!("prune: {why}"));
        return format!("skipped: {why}");
    }
    let catalog = match (ctx.catalog)(config, runner.env()) {
        Ok(c) => c,
        Err(e) => {
            let e = error_line(&e);
            runner.warning(&format!("prune: skipped: {e}"));
            return format!("skipped: {e}");
        }
    };
    let current_ref = runner.env().non_empty("GITHUB_REF");
    let slots = SlotMap::of(&config.version());
    let pruned =
        super::prune::prune(catalog.as_ref(), prefix, current_ref, config.prune_keep, false, Some(saved_key), &slots);
    match pruned {
        Ok(report) => {
            for (entry, why) in &report.failed {
                runner.warning(&format!("prune: could not delete `{}`: {why}", entry.key));
            }
            let line = format!(
                "kept the newest {}, deleted {} of `{}`{}",
                report.kept_keys,
                units::count_of(report.deleted.len(), "older entry"),
                prefix,
                current_ref.map(|r| format!(" on `{r}`")).unwrap_or_default()
            );
            runner.info(&format!("prune: {line}"));
            for entry in &report.deleted {
                runner.info(&format!("  deleted {}", super::prune::entry_name(entry, &slots)));
            }
            line
        }
        Err(e) => {
            let e = error_line(&e);
            runner.warning(&format!("prune: {e}"));
            format!("failed: {e}")
        }
    }
}
