//! `save`: archive the `path` roots under the key, unless the entry is incomplete, exists, or
//! the cache is read-only. Service trouble ends as a warning unless `strict`.

use super::{
    Context, Error, bool_str, compute, fingerprint_path, read_fingerprint, report, secret_values, verify,
    write_fingerprint,
};
use crate::archive::{PackError, SecretScanner, inventory, write_archive};
use crate::backend::{BackendError, Committed, ErrorKind, Reservation};
use crate::config::{Config, VerifyReuse};
use crate::fingerprint::FingerprintRecord;
use crate::outcome::SaveResult;
use crate::preset::Preset;
use crate::units;
use std::path::PathBuf;
use std::time::Instant;

/// What the summary reports about a save.
pub(super) struct SaveReport {
    pub result: SaveResult,
    pub detail: Option<String>,
    /// Cache trouble: a warning, or a failure under `strict`.
    pub trouble: bool,
    pub files: usize,
    pub content_bytes: u64,
    pub archive_bytes: u64,
    pub elapsed: std::time::Duration,
    /// `verify-reuse`: a one-line verdict and the files that changed.
    pub changes: Option<(String, Vec<String>)>,
    /// `verify-reuse: fail` found changes.
    pub verify_failed: Option<usize>,
    /// `prune`: what happened.
    pub pruned: Option<String>,
}

pub(super) fn run(ctx: &Context, config: &Config, post: bool) -> Result<(), Error> {
    let runner = ctx.runner;
    let env = runner.env();

    let record = if post {
        let Some(key) = runner.state("key") else {
            runner.info("the restore step computed no key; nothing to save");
            return finish(ctx, config, None, SaveReport::skipped(SaveResult::Error, "no key from the restore step"));
        };
        if runner.state("skip-save").as_deref() == Some("true") {
            runner.info(&format!("entry `{key}` was found by the restore step; not saving"));
            let mut report = SaveReport::skipped(SaveResult::SkippedHit, "restored");
            verify(ctx, config, runner.state("manifest-file").map(PathBuf::from), &mut report);
            return finish(ctx, config, Some(&key), report);
        }
        let path =
            runner.state("fingerprint-file").map(PathBuf::from).unwrap_or_else(|| fingerprint_path(config, env, &key));
        read_fingerprint(&path, &key)?
    } else if let Some(key) = &config.key {
        let record = read_fingerprint(&fingerprint_path(config, env, key), key)?;
        if record.version != config.version() {
            return Err(Error::VersionMismatch { key: key.clone() });
        }
        // The restore step of this job reused the entry (it kept its manifest): check what
        // changed since, and do not save what exists.
        let restored = super::manifest_path(config, env, key);
        if restored.exists() {
            runner.info(&format!("entry `{key}` was reused in this job; not saving"));
            let mut report = SaveReport::skipped(SaveResult::SkippedHit, "restored in this job");
            verify(ctx, config, Some(restored), &mut report);
            return finish(ctx, config, Some(key), report);
        }
        record
    } else {
        let record = compute(ctx, config)?;
        write_fingerprint(config, env, &record)?;
        record
    };
    let key = record.key.clone();
    let _group = runner.group(&format!("Save {key}"));

    if let Some(mode) = env.non_empty("ACTIONS_CACHE_MODE").filter(|m| matches!(*m, "read" | "none")) {
        runner.info(&format!("`ACTIONS_CACHE_MODE` is `{mode}`: this job may not write to the cache"));
        return finish(ctx, config, Some(&key), SaveReport::skipped(SaveResult::ReadOnly, "cache mode is read-only"));
    }

    let inv = match inventory(&config.paths) {
        Ok(inv) => inv,
        Err(e) => return finish(ctx, config, Some(&key), pack_trouble(&e)),
    };
    if !inv.skipped.is_empty() {
        let list: Vec<String> = inv.skipped.iter().take(5).map(|p| format!("`{}`", p.display())).collect();
        runner.warning(&format!(
            "skipped {} special files (sockets, FIFOs, devices): {}",
            inv.skipped.len(),
            list.join(", ")
        ));
    }
    if let Some(missing) = config.required.iter().find(|r| !inv.contains(r)) {
        let msg = format!("required path `{}` does not exist; not saving an incomplete entry", missing.display());
        runner.warning(&msg);
        return finish(ctx, config, Some(&key), SaveReport::skipped(SaveResult::Incomplete, &msg));
    }
    if inv.entries.is_empty() {
        let msg = "nothing to save: no `path` entry exists".to_owned();
        runner.warning(&msg);
        return finish(ctx, config, Some(&key), SaveReport::skipped(SaveResult::Incomplete, &msg));
    }

    // The packer checks every byte against these before it goes into the archive.
    let secrets = SecretScanner::new(secret_values(config, env));
    if secrets.in_fingerprint(&record) {
        let msg = "the fingerprint (a `hash-env` or preset variable) holds the value of a token or of a `secret-env` \
                   variable (not shown); nothing was uploaded";
        let report = SaveReport::warning(SaveResult::SecretFound, msg);
        return finish(ctx, config, Some(&key), report);
    }
    if secrets.in_roots(&inv.roots).is_some() {
        let msg = "a `path` line holds the value of a token or of a `secret-env` variable (not shown); nothing was \
                   uploaded";
        return finish(ctx, config, Some(&key), SaveReport::warning(SaveResult::SecretFound, msg));
    }

    let backend = (ctx.backend)(config, env, runner.secret_sink());
    runner.info(&format!("backend: {}", backend.describe()));
    let report = upload(ctx, config, backend.as_ref(), &record, &inv, &secrets)?;
    finish(ctx, config, Some(&key), report)
}

fn upload(
    ctx: &Context,
    config: &Config,
    backend: &dyn crate::backend::Backend,
    record: &FingerprintRecord,
    inv: &crate::archive::Inventory,
    secrets: &SecretScanner,
) -> Result<SaveReport, Error> {
    let runner = ctx.runner;
    let started = Instant::now();
    let trouble = |e: &BackendError| {
        let result = match e.kind {
            ErrorKind::RateLimited { .. } => SaveResult::RateLimited,
            ErrorKind::ReadOnly => SaveResult::ReadOnly,
            ErrorKind::AlreadyExists => {
                return SaveReport::skipped(SaveResult::Exists, &super::error_chain(e));
            }
            _ => SaveResult::Error,
        };
        SaveReport::warning(result, &super::error_chain(e))
    };
    let upload = match backend.reserve(&record.key, &record.version) {
        Ok(Reservation::Reserved(upload)) => upload,
        Ok(Reservation::Exists) => {
            return Ok(SaveReport::skipped(SaveResult::Exists, "another job saved this entry already"));
        }
        Err(e) => return Ok(trouble(&e)),
    };
    let mut progress = runner.progress("archive", Some(inv.content_bytes()));
    let written =
        write_archive(inv, record, config.compression, secrets, CountingWriter { inner: upload, count: 0 }, &mut |n| {
            progress.add(n)
        });
    let (writer, stats) = match written {
        Ok(done) => done,
        Err(PackError::Write(io)) if BackendError::in_io(&io).is_some() => {
            return Ok(trouble(BackendError::in_io(&io).expect("checked")));
        }
        Err(PackError::Secret { path }) => {
            let shown = config.fingerprint.locations.display(&path);
            let msg = format!(
                "`{shown}` holds the value of a token or of a `secret-env` variable (not shown); the entry was not committed"
            );
            return Ok(SaveReport::warning(SaveResult::SecretFound, &msg));
        }
        Err(other) => return Ok(pack_trouble(&other)),
    };
    progress.finish();
    if stats.effort == crate::archive::Effort::Fast {
        runner.info(&format!(
            "compression: zstd's fast level (a sample of the files compressed only to {:.0}%)",
            stats.sample_ratio * 100.0
        ));
    }
    let archive_bytes = writer.count;
    let mut report = SaveReport {
        result: SaveResult::Saved,
        detail: None,
        trouble: false,
        files: stats.files + stats.symlinks,
        content_bytes: stats.content_bytes,
        archive_bytes,
        elapsed: started.elapsed(),
        changes: None,
        verify_failed: None,
        pruned: None,
    };
    match writer.inner.commit() {
        Ok(Committed::Saved { .. }) => {
            runner.info(&format!(
                "saved {} files ({}, {} compressed with {}) in {}",
                units::count(report.files as u64),
                units::bytes(report.content_bytes),
                units::bytes(archive_bytes),
                config.compression.name(),
                units::duration(report.elapsed)
            ));
        }
        Ok(Committed::Exists) => {
            report.result = SaveResult::Exists;
            report.detail = Some("another job saved this entry first".into());
        }
        Err(e) => return Ok(trouble(&e)),
    }
    Ok(report)
}

/// Local trouble while archiving (a link that cannot be cached, a file that vanished, a full
/// disk): nothing is saved, and the job goes on unless `strict`.
fn pack_trouble(e: &PackError) -> SaveReport {
    SaveReport::warning(SaveResult::Error, &super::error_chain(e))
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

impl SaveReport {
    /// Not saved, for a reason the user is warned about (an error with `strict`).
    fn warning(result: SaveResult, detail: &str) -> Self {
        Self { trouble: true, ..Self::skipped(result, detail) }
    }

    fn skipped(result: SaveResult, detail: &str) -> Self {
        Self {
            result,
            detail: Some(detail.to_owned()),
            trouble: false,
            files: 0,
            content_bytes: 0,
            archive_bytes: 0,
            elapsed: Default::default(),
            changes: None,
            verify_failed: None,
            pruned: None,
        }
    }
}

fn finish(ctx: &Context, config: &Config, key: Option<&str>, report: SaveReport) -> Result<(), Error> {
    let runner = ctx.runner;
    let saved = report.result == SaveResult::Saved;
    if saved {
        super::mark_owned(runner, config, &(0..config.paths.includes.len()).collect::<Vec<_>>());
    }
    let trouble = report.trouble;
    match report.result {
        SaveResult::Exists => runner.info(&format!("entry exists: {}", report.detail.as_deref().unwrap_or(""))),
        _ if trouble => {
            runner.warning(&format!("not saved ({}): {}", report.result, report.detail.as_deref().unwrap_or("")))
        }
        _ => {}
    }
    let mut report = report;
    if let (true, true, Some(key)) = (saved, config.prune, key) {
        report.pruned = Some(prune_after_save(ctx, config, key));
    }
    runner.set_output("saved", bool_str(saved))?;
    runner.set_output("save-result", report.result.as_str())?;
    runner.set_output("changed-files", &report.changes.as_ref().map(|c| c.1.join("\n")).unwrap_or_default())?;
    if let Some(key) = key {
        runner.set_output("key", key)?;
    }
    runner.append_summary(&report::save_summary(&report::Shown::new(runner, config), key, &report))?;
    if trouble && config.strict {
        return Err(Error::Strict(format!("{}: {}", report.result, report.detail.unwrap_or_default())));
    }
    if let Some(count) = report.verify_failed {
        return Err(Error::VerifyFailed { count });
    }
    Ok(())
}

/// `verify-reuse`: compare the tree with the manifest of the entry restored in this job.
fn verify(ctx: &Context, config: &Config, manifest_file: Option<PathBuf>, report: &mut SaveReport) {
    let runner = ctx.runner;
    if config.verify_reuse == VerifyReuse::Off {
        return;
    }
    let Some(path) = manifest_file else {
        runner.info("verify-reuse: the restore step kept no manifest; nothing to compare");
        return;
    };
    let kept: super::verify::Kept = match std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(m) => m,
        Err(e) => {
            runner.warning(&format!("verify-reuse: cannot read `{}`: {e}", path.display()));
            return;
        }
    };
    let changes = match verify::compare(&kept, config) {
        Ok(c) => c,
        Err(e) => {
            runner.warning(&format!("verify-reuse: {}", super::error_chain(&e)));
            return;
        }
    };
    if changes.is_empty() {
        runner.info("verify-reuse: nothing under `path` changed since the restore");
        report.changes = Some(("nothing under `path` changed since the restore".into(), Vec::new()));
        return;
    }
    let mut verdict = format!(
        "{} added, {} changed, {} removed under `path` since the restore",
        changes.added.len(),
        changes.changed.len(),
        changes.removed.len()
    );
    if config.preset == Some(Preset::TorchInductor) && !changes.added.is_empty() {
        verdict.push_str(": torch compiled graphs the restored cache did not hold, so it recompiled on this warm run");
    }
    let shown: Vec<String> = changes.lines().lines().take(10).map(str::to_owned).collect();
    let message = format!("verify-reuse: {verdict}\n{}", shown.join("\n"));
    if config.verify_reuse == VerifyReuse::Fail {
        runner.error(&message);
        report.verify_failed = Some(changes.count());
    } else {
        runner.warning(&message);
    }
    report.changes = Some((verdict, changes.lines().lines().map(str::to_owned).collect()));
}

/// `prune` after a successful save: a one-line account; trouble is a warning, never a failure.
fn prune_after_save(ctx: &Context, config: &Config, saved_key: &str) -> String {
    let runner = ctx.runner;
    let catalog = match (ctx.catalog)(config, runner.env()) {
        Ok(c) => c,
        Err(e) => {
            runner.warning(&format!("prune: skipped: {e}"));
            return format!("skipped: {e}");
        }
    };
    let current_ref = runner.env().non_empty("GITHUB_REF");
    // The prefix of the key saved (an explicit `key` carries the restore step's prefix).
    let prefix = saved_key.rsplit_once('-').map_or(config.prefix.as_str(), |(p, _)| p);
    match super::prune::prune(catalog.as_ref(), prefix, current_ref, config.prune_keep, false, Some(saved_key)) {
        Ok(report) => {
            for (entry, why) in &report.failed {
                runner.warning(&format!("prune: could not delete `{}`: {why}", entry.key));
            }
            let line = format!(
                "kept the newest {}, deleted {} older entries of `{}`{}",
                report.kept.len(),
                report.deleted.len(),
                prefix,
                current_ref.map(|r| format!(" on `{r}`")).unwrap_or_default()
            );
            runner.info(&format!("prune: {line}"));
            for entry in &report.deleted {
                runner.info(&format!("  deleted {}", entry.key));
            }
            line
        }
        Err(e) => {
            runner.warning(&format!("prune: {e}"));
            format!("failed: {e}")
        }
    }
}
