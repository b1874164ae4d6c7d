//! `uncovered-reads`: on a miss, arrange that the job's later Python processes record the files
//! they read ([`crate::reads`]); at the save after the miss, name those that the cache's
//! generator read and no input covers. On a hit of a compile cache, arrange that they report
//! what torch's compile caches spared ([`crate::reads::torch`]), which the save reads back.

use super::Context;
use super::render::{self, say_all};
use super::verify::Kept;
use crate::config::{Locate, UncoveredReads};
use crate::fingerprint::{ComponentName, FingerprintRecord};
use crate::outcome::{CompileWorth, Uncovered};
use crate::paths::{Locations, PatternSet};
use crate::reads::{self, Log, Record};
use crate::text::error_chain;
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

/// The variables that make the job's later Python processes record `what`; nothing under `off`,
/// when another exact-cache step of the job armed it already for `what`, or where it cannot work
/// (said once). A hook armed for something else records `what` too from then on. A directory or
/// log planted where ours go is a warning, and nothing is armed.
pub(super) fn arrange(
    ctx: &Context,
    uncovered_reads: UncoveredReads,
    workspace: &Path,
    what: Record,
) -> Vec<(String, String)> {
    let runner = ctx.runner;
    let env = runner.env();
    if uncovered_reads == UncoveredReads::Off {
        say_all(runner, render::restore::hook_off(what));
        return Vec::new();
    }
    let armed = Record::armed(env);
    match armed {
        Some(records) if records.contains(&what) => return Vec::new(),
        Some(mut records) => {
            records.push(what);
            render::restore::hook_armed(what).say(runner);
            return vec![(reads::RECORD_VAR.to_owned(), Record::value(&records))];
        }
        None => {}
    }
    let (Some(temp), Some(_)) = (env.non_empty("RUNNER_TEMP"), env.non_empty("GITHUB_ENV")) else {
        render::restore::hook_outside_actions(what).say(runner);
        return Vec::new();
    };
    match reads::arrange(Path::new(temp), workspace, env, &[what]) {
        Ok(exports) => {
            render::restore::hook_armed(what).say(runner);
            exports
        }
        Err(e) => {
            render::restore::hook_failed(what, &e).say(runner);
            Vec::new()
        }
    }
}

/// After a hit of a compile cache: what torch's caches reported in the job's Python processes,
/// and what the files the restore put in place (`kept`, under `locate`'s roots) spared.
pub(super) fn compile_worth(ctx: &Context, kept: &Kept, locate: &Locate) -> CompileWorth {
    let env = ctx.runner.env();
    if !Record::armed(env).is_some_and(|records| records.contains(&Record::Torch)) {
        return CompileWorth::NotRecorded;
    }
    let Some(path) = env.non_empty(reads::LOG_VAR) else { return CompileWorth::NotRecorded };
    let log = match Log::load(Path::new(path)) {
        Ok(log) => log,
        Err(e) => return CompileWorth::Unreadable(error_chain(&e)),
    };
    let restored = restored_files(kept, locate);
    let saving = log.torch.saving(|file| {
        restored.contains(file) || std::fs::canonicalize(file).is_ok_and(|real| restored.contains(&real))
    });
    CompileWorth::Reported(saving)
}

/// Where the files of the restored entry are, as given and with links resolved.
fn restored_files(kept: &Kept, locate: &Locate) -> HashSet<PathBuf> {
    let roots: Vec<(PathBuf, Option<PathBuf>)> = locate
        .paths
        .includes
        .iter()
        .map(|p| (p.base.clone(), std::fs::canonicalize(&p.base).ok().filter(|real| *real != p.base)))
        .collect();
    let mut files = HashSet::new();
    for entry in kept.manifest.entries.iter().filter(|e| e.kind == crate::manifest::EntryKind::File) {
        let Some(at) = entry.entry_path() else { continue };
        let Some((base, real)) = roots.get(at.root) else { continue };
        files.insert(base.join(at.rel));
        if let Some(real) = real {
            files.insert(real.join(at.rel));
        }
    }
    files
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
        render::save::reads_not_recorded().say(runner);
        return None;
    };
    let log = match Log::load(Path::new(path)) {
        Ok(log) => log,
        Err(e) => {
            render::save::reads_unreadable(&e).say(runner);
            return None;
        }
    };
    say_all(runner, render::save::reads_notes(log.notes.iter()));
    if log.cut > 0 {
        render::save::reads_cut(log.cut).say(runner);
    }
    if log.truncated {
        render::save::reads_truncated().say(runner);
    }
    let covered: BTreeSet<String> = record
        .components
        .components
        .get(ComponentName::Files.name())
        .map(|files| files.keys().cloned().collect())
        .unwrap_or_default();
    let weighed = log.weigh(locations, paths, &covered);
    render::save::reads_weighed(&weighed.generator).say(runner);
    let uncovered = Uncovered { files: weighed.files, libraries: weighed.libraries };
    if uncovered.files.is_empty() {
        if weighed.generator != (reads::Generator::NotSeen { processes: 0 }) {
            render::save::reads_covered(weighed.read).say(runner);
        }
    } else {
        render::save::uncovered_said(&uncovered, uncovered_reads == UncoveredReads::Fail).say(runner);
    }
    Some(uncovered)
}
