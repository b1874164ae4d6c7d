//! `uncovered-reads`: on a miss, arrange that the job's later Python processes record the files
//! they read ([`crate::reads`]); at the save after the miss, name those that the cache's
//! generator read and no input covers.

use super::{Context, words};
use crate::config::UncoveredReads;
use crate::fingerprint::{ComponentName, FingerprintRecord};
use crate::outcome::Uncovered;
use crate::paths::{Locations, PatternSet};
use crate::reads::{self, Log};
use crate::text::error_chain;
use std::collections::BTreeSet;
use std::path::Path;

/// The variables that make the job's later Python record its reads; nothing under `off`, when
/// another exact-cache step of the job arranged it already, or where it cannot work (said once).
/// A directory or log planted where ours go is a warning, and nothing is armed.
pub(super) fn arrange(ctx: &Context, uncovered_reads: UncoveredReads, workspace: &Path) -> Vec<(String, String)> {
    let runner = ctx.runner;
    let env = runner.env();
    if uncovered_reads == UncoveredReads::Off || env.non_empty(reads::LOG_VAR).is_some() {
        return Vec::new();
    }
    let (Some(temp), Some(_)) = (env.non_empty("RUNNER_TEMP"), env.non_empty("GITHUB_ENV")) else {
        runner.info(
            "uncovered-reads: the generating run's reads are not recorded: without `GITHUB_ENV` and `RUNNER_TEMP` \
             (outside Actions) later steps cannot be told",
        );
        return Vec::new();
    };
    match reads::arrange(Path::new(temp), workspace, env) {
        Ok(exports) => {
            runner.info(
                "uncovered-reads: the job's later Python processes record the files they read under the workspace \
                 (an audit hook loaded through `PYTHONPATH`; processes that are not Python are not seen)",
            );
            exports
        }
        Err(e) => {
            runner
                .warning(&format!("uncovered-reads: the generating run's reads are not recorded: {}", error_chain(&e)));
            Vec::new()
        }
    }
}

/// After a miss: the files the cache's generator read that no input covers, logged (a warning,
/// or an error under `fail`); `None` when nothing was recorded.
/// `locations` and `paths`: where the workspace is, and what is saved (no input of the key).
pub(super) fn check(
    ctx: &Context,
    uncovered_reads: UncoveredReads,
    (locations, paths): (&Locations, &PatternSet),
    record: &FingerprintRecord,
) -> Option<Uncovered> {
    let runner = ctx.runner;
    if uncovered_reads == UncoveredReads::Off {
        return None;
    }
    let Some(path) = runner.env().non_empty(reads::LOG_VAR) else {
        runner.info("uncovered-reads: this job's reads were not recorded (no restore step of the job arranged it)");
        return None;
    };
    let log = match Log::load(Path::new(path)) {
        Ok(log) => log,
        Err(e) => {
            runner.warning(&format!("uncovered-reads: {}", error_chain(&e)));
            return None;
        }
    };
    for note in words::reads_notes(log.notes.iter()) {
        runner.warning(&note);
    }
    if log.cut > 0 {
        runner.warning(&words::reads_cut(log.cut));
    }
    if log.truncated {
        runner.warning(&words::reads_truncated());
    }
    let covered: BTreeSet<String> = record
        .components
        .components
        .get(ComponentName::Files.name())
        .map(|files| files.keys().cloned().collect())
        .unwrap_or_default();
    let weighed = log.weigh(locations, paths, &covered);
    runner.info(&words::reads_weighed(&weighed.generator));
    let uncovered = Uncovered { files: weighed.files, libraries: weighed.libraries };
    if uncovered.files.is_empty() {
        if weighed.generator != (reads::Generator::NotSeen { processes: 0 }) {
            runner.info(&words::reads_covered(weighed.read));
        }
    } else if uncovered_reads == UncoveredReads::Fail {
        runner.error(&words::uncovered_refused(&uncovered));
    } else {
        runner.warning(&words::uncovered(&uncovered));
    }
    Some(uncovered)
}
