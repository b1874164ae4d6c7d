//! `restore`: compute the key, look it up exactly, download, verify, put in place — or report a
//! miss with its reason, clean stale files if asked, and let the job go on.

use super::{Context, Error, bool_str, compute, miss_reason, report, write_fingerprint};
use crate::archive::{RestorePlan, RestoreStats, UnpackError, clean, unpack};
use crate::backend::{Backend, BackendError};
use crate::config::{Config, VerifyReuse};
use crate::manifest::Manifest;
use crate::outcome::MissReason;
use crate::runner::ProgressReader;
use crate::units;
use std::time::{Duration, Instant};

/// Steps (by `GITHUB_ACTION`) whose post step saves even after a failed job, as `,id1,id2,`;
/// the root action's `post-if` reads it.
pub const SAVE_ON_FAILURE_ENV: &str = "EXACT_CACHE_SAVE_ON_FAILURE";

/// How a restore attempt ended.
#[derive(Debug)]
pub(super) enum Attempt {
    Reused {
        stats: RestoreStats,
        elapsed: Duration,
        archive_bytes: u64,
        manifest: Box<Manifest>,
    },
    /// `lookup-only` found the entry.
    Found,
    Miss {
        reason: MissReason,
        detail: Option<String>,
    },
}

impl Attempt {
    /// Misses that are cache trouble (warnings, failures under `strict`), not plain absence.
    fn is_trouble(&self) -> bool {
        matches!(self, Attempt::Miss { reason, .. }
            if !matches!(reason, MissReason::NotFound | MissReason::PrefixOnly | MissReason::LookupOnly))
    }
}

pub(super) fn run(ctx: &Context, config: &Config) -> Result<(), Error> {
    let runner = ctx.runner;
    let env = runner.env();
    let record = compute(ctx, config)?;
    let key = record.key.clone();
    let fingerprint_file = write_fingerprint(config, env, &record)?;
    runner.save_state("key", &key)?;
    runner.save_state("fingerprint-file", &fingerprint_file.to_string_lossy())?;
    // A preset's directories exist and are known to later steps whatever happens below.
    for (name, dir) in &config.exports {
        if let Err(e) = std::fs::create_dir_all(dir) {
            runner.warning(&format!("cannot create `{dir}` for `{name}`: {e}"));
        }
        runner.export_env(name, dir)?;
    }

    let backend = (ctx.backend)(config, env, runner.secret_sink());
    // For `verify-reuse`: what was already there is not "added" by the job later.
    let preexisting: Vec<String> = if config.verify_reuse == VerifyReuse::Off {
        Vec::new()
    } else {
        crate::archive::inventory(&config.paths)
            .map(|inv| {
                inv.entries
                    .iter()
                    .filter(|e| e.kind != crate::manifest::EntryKind::Dir)
                    .map(|e| config.fingerprint.locations.display(&e.abs))
                    .collect()
            })
            .unwrap_or_default()
    };
    let attempt = {
        let _group = runner.group(&format!("Restore {key}"));
        runner.info(&format!("backend: {}", backend.describe()));
        let attempt = attempt(ctx, config, backend.as_ref(), &key);
        match &attempt {
            Attempt::Reused { stats, elapsed, .. } => runner.info(&format!(
                "reused {} files ({}) in {}",
                units::count(stats.files as u64),
                units::bytes(stats.bytes),
                units::duration(*elapsed)
            )),
            Attempt::Found => runner.info("entry exists; `lookup-only` is set, so nothing was downloaded"),
            Attempt::Miss { reason, detail } => {
                let text = match detail {
                    Some(d) => format!("not reused ({reason}): {d}"),
                    None => format!("not reused ({reason})"),
                };
                if attempt.is_trouble() { runner.warning(&text) } else { runner.info(&text) }
            }
        }
        attempt
    };

    let explanation = match &attempt {
        Attempt::Miss { reason: MissReason::NotFound | MissReason::PrefixOnly, .. } => {
            super::explain_miss(ctx, config, backend.as_ref(), &record)
        }
        _ => None,
    };
    if let Attempt::Reused { manifest, .. } = &attempt {
        // For `verify-reuse` at save time.
        let path = super::manifest_path(config, env, &key);
        let kept = super::verify::Kept { manifest: manifest.as_ref().clone(), preexisting };
        match super::write_json_atomically(&path, &serde_json::to_string(&kept).expect("manifests serialize")) {
            Ok(()) => runner.save_state("manifest-file", &path.to_string_lossy())?,
            Err(e) => runner.warning(&format!("cannot keep the restored manifest for `verify-reuse`: {e}")),
        }
    }
    let reused = matches!(attempt, Attempt::Reused { .. });
    if let Attempt::Reused { manifest, .. } = &attempt {
        // Only the roots this entry put something into.
        let mut roots: Vec<usize> =
            manifest.entries.iter().filter_map(|e| e.path.split('/').next()?.parse().ok()).collect();
        roots.dedup();
        super::mark_owned(runner, config, &roots);
    }
    // An entry that was downloaded but failed verification is still a hit: it exists under
    // exactly this key; `reused` is what says whether it can be used.
    let hit = match &attempt {
        Attempt::Reused { .. } | Attempt::Found => true,
        Attempt::Miss { reason, .. } => reason.entry_was_downloaded(),
    };
    let reason = match &attempt {
        Attempt::Reused { .. } => MissReason::None,
        Attempt::Found => MissReason::LookupOnly,
        Attempt::Miss { reason, .. } => *reason,
    };
    let mut cleaned = None;
    if !reused && config.clean_on_miss && !matches!(attempt, Attempt::Found) {
        match clean(&config.paths, &config.clean_guard) {
            Ok(stats) => {
                runner.info(&format!(
                    "clean-on-miss: removed {} stale files and {} directories",
                    stats.removed_files, stats.removed_dirs
                ));
                cleaned = Some(stats);
            }
            Err(e) if config.strict => return Err(Error::Clean(e)),
            Err(e) => runner.warning(&format!("clean-on-miss did not finish: {}", super::error_chain(&e))),
        }
    }

    let (files, bytes) = match &attempt {
        Attempt::Reused { stats, .. } => (stats.files, stats.bytes),
        _ => (0, 0),
    };
    runner.set_output("cache-hit", bool_str(hit))?;
    runner.set_output("reused", bool_str(reused))?;
    runner.set_output("key", &key)?;
    runner.set_output("fingerprint-file", &fingerprint_file.to_string_lossy())?;
    runner.set_output("miss-reason", reason.as_str())?;
    runner.set_output("restored-files", &files.to_string())?;
    runner.set_output("restored-bytes", &bytes.to_string())?;
    if let Some(name) = &config.reuse_env {
        runner.export_env(name, if reused { "1" } else { "0" })?;
    }
    if config.save_on_failure {
        // `post-if` cannot read inputs: it reads this list of the steps that opted in.
        let step = env.non_empty("GITHUB_ACTION").unwrap_or("exact-cache");
        let listed = env.non_empty(SAVE_ON_FAILURE_ENV).unwrap_or(",");
        if !listed.contains(&format!(",{step},")) {
            let listed = if listed.starts_with(',') { listed.to_owned() } else { format!(",{listed}") };
            let listed = if listed.ends_with(',') { listed } else { format!("{listed},") };
            runner.export_env(SAVE_ON_FAILURE_ENV, &format!("{listed}{step},"))?;
        }
    }
    runner.save_state("reused", bool_str(reused))?;
    runner.save_state("skip-save", bool_str(reused || matches!(attempt, Attempt::Found)))?;
    runner.append_summary(&report::restore_summary(
        &report::Shown::new(runner, config),
        &record,
        backend.describe(),
        &attempt,
        cleaned,
        explanation.as_ref(),
    ))?;

    if attempt.is_trouble() && config.strict {
        let detail = match &attempt {
            Attempt::Miss { reason, detail } => {
                format!("{reason}: {}", detail.as_deref().unwrap_or(""))
            }
            _ => String::new(),
        };
        return Err(Error::Strict(detail));
    }
    if config.fail_on_cache_miss && !reused && !matches!(attempt, Attempt::Found) {
        return Err(Error::FailOnMiss { key, reason });
    }
    Ok(())
}

fn attempt(ctx: &Context, config: &Config, backend: &dyn Backend, key: &str) -> Attempt {
    let runner = ctx.runner;
    let version = config.version();
    let entry = match backend.lookup(key, &version) {
        Ok(Some(entry)) => entry,
        Ok(None) => {
            return Attempt::Miss { reason: MissReason::NotFound, detail: None };
        }
        Err(e) => {
            return Attempt::Miss { reason: miss_reason(e.kind), detail: Some(super::error_chain(&e)) };
        }
    };
    if entry.key != key {
        return Attempt::Miss {
            reason: MissReason::PrefixOnly,
            detail: Some(format!("the service offered `{}`, which is not this key; exact reuse only", entry.key)),
        };
    }
    if config.lookup_only {
        return Attempt::Found;
    }
    let started = Instant::now();
    let stream = match backend.open(&entry) {
        Ok(s) => s,
        Err(e) => {
            return Attempt::Miss { reason: miss_reason(e.kind), detail: Some(super::error_chain(&e)) };
        }
    };
    let mut reader = ProgressReader::new(stream, runner.progress("download", entry.size));
    let plan = RestorePlan { key, paths: &config.paths, required: &config.required, compression: config.compression };
    let staged = match unpack(&mut reader, &plan) {
        Ok(staged) => staged,
        Err(e) => {
            return Attempt::Miss { reason: classify(&e), detail: Some(super::error_chain(&e)) };
        }
    };
    reader.progress().finish();
    let archive_bytes = reader.progress().bytes();
    let manifest = Box::new(staged.manifest.clone());
    match staged.commit() {
        Ok(stats) => Attempt::Reused { stats, elapsed: started.elapsed(), archive_bytes, manifest },
        Err(e) => Attempt::Miss { reason: classify(&e), detail: Some(super::error_chain(&e)) },
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
