//! `save`: archive the `path` roots under the key, unless the entry is incomplete, exists, or
//! the cache is read-only. Service trouble ends as a warning unless `strict`.

use super::{Context, Error, bool_str, compute, fingerprint_path, read_fingerprint, report, write_fingerprint};
use crate::archive::{PackError, inventory, write_archive};
use crate::backend::{BackendError, Committed, ErrorKind, Reservation};
use crate::config::Config;
use crate::fingerprint::FingerprintRecord;
use crate::outcome::SaveResult;
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
            return finish(ctx, config, Some(&key), SaveReport::skipped(SaveResult::SkippedHit, "restored"));
        }
        let path =
            runner.state("fingerprint-file").map(PathBuf::from).unwrap_or_else(|| fingerprint_path(config, env, &key));
        read_fingerprint(&path, &key)?
    } else if let Some(key) = &config.key {
        let record = read_fingerprint(&fingerprint_path(config, env, key), key)?;
        if record.version != config.version() {
            return Err(Error::VersionMismatch { key: key.clone() });
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

    let backend = (ctx.backend)(config, env, runner.secret_sink());
    runner.info(&format!("backend: {}", backend.describe()));
    let report = upload(ctx, config, backend.as_ref(), &record, &inv)?;
    finish(ctx, config, Some(&key), report)
}

fn upload(
    ctx: &Context,
    config: &Config,
    backend: &dyn crate::backend::Backend,
    record: &FingerprintRecord,
    inv: &crate::archive::Inventory,
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
        SaveReport { trouble: true, ..SaveReport::skipped(result, &super::error_chain(e)) }
    };
    let upload = match backend.reserve(&record.key, &record.version, None) {
        Ok(Reservation::Reserved(upload)) => upload,
        Ok(Reservation::Exists) => {
            return Ok(SaveReport::skipped(SaveResult::Exists, "another job saved this entry already"));
        }
        Err(e) => return Ok(trouble(&e)),
    };
    let mut progress = runner.progress("archive", Some(inv.content_bytes()));
    let written =
        write_archive(inv, record, config.compression, CountingWriter { inner: upload, count: 0 }, &mut |n| {
            progress.add(n)
        });
    let (writer, stats) = match written {
        Ok(done) => done,
        Err(PackError::Write(io)) if BackendError::in_io(&io).is_some() => {
            return Ok(trouble(BackendError::in_io(&io).expect("checked")));
        }
        Err(other) => return Ok(pack_trouble(&other)),
    };
    progress.finish();
    let archive_bytes = writer.count;
    let mut report = SaveReport {
        result: SaveResult::Saved,
        detail: None,
        trouble: false,
        files: stats.files + stats.symlinks,
        content_bytes: stats.content_bytes,
        archive_bytes,
        elapsed: started.elapsed(),
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
    SaveReport { trouble: true, ..SaveReport::skipped(SaveResult::Error, &super::error_chain(e)) }
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
    fn skipped(result: SaveResult, detail: &str) -> Self {
        Self {
            result,
            detail: Some(detail.to_owned()),
            trouble: false,
            files: 0,
            content_bytes: 0,
            archive_bytes: 0,
            elapsed: Default::default(),
        }
    }
}

fn finish(ctx: &Context, config: &Config, key: Option<&str>, report: SaveReport) -> Result<(), Error> {
    let runner = ctx.runner;
    let saved = report.result == SaveResult::Saved;
    let trouble = report.trouble;
    match report.result {
        SaveResult::Exists => runner.info(&format!("entry exists: {}", report.detail.as_deref().unwrap_or(""))),
        _ if trouble => {
            runner.warning(&format!("not saved ({}): {}", report.result, report.detail.as_deref().unwrap_or("")))
        }
        _ => {}
    }
    runner.set_output("saved", bool_str(saved))?;
    runner.set_output("save-result", report.result.as_str())?;
    if let Some(key) = key {
        runner.set_output("key", key)?;
    }
    runner.append_summary(&report::save_summary(key, &report))?;
    if trouble && config.strict {
        return Err(Error::Strict(format!("{}: {}", report.result, report.detail.unwrap_or_default())));
    }
    Ok(())
}
