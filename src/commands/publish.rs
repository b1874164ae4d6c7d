//! The one place a command's outcome becomes what the runner keeps: step outputs, state for the
//! post step, variables for later steps, and the step summary.

use super::render::{self, Shown};
use crate::config::Config;
use crate::outcome::{Attempt, CatalogOutcome, Outcome, Output, RestoreOutcome, SaveOutcome, State};
use crate::runner::{Runner, RunnerError};

/// State [`State::SkipSave`] when `clean-on-miss` could not remove stale files.
pub(super) const SKIP_SAVE_STALE: &str = "stale";

pub(super) fn publish(runner: &Runner, config: &Config, outcome: &Outcome) -> Result<(), RunnerError> {
    let shown = Shown::new(runner, config);
    match outcome {
        Outcome::Fingerprint(fingerprint) => {
            runner.set_output(Output::Key, &fingerprint.record.key)?;
            runner.set_output(Output::FingerprintFile, &fingerprint.file.to_string_lossy())?;
            runner.append_summary(&render::fingerprint::summary(&shown, &fingerprint.record, &fingerprint.notes))
        }
        Outcome::Restore(restore) => publish_restore(runner, &shown, restore),
        Outcome::Save(save) => publish_save(runner, &shown, save),
        Outcome::Catalog(catalog) => publish_catalog(runner, catalog),
    }
}

fn publish_restore(runner: &Runner, shown: &Shown, outcome: &RestoreOutcome) -> Result<(), RunnerError> {
    let attempt = &outcome.attempt;
    let key = &outcome.record.key;
    let fingerprint_file = outcome.fingerprint_file.to_string_lossy();
    runner.save_state(State::Key, key)?;
    runner.save_state(State::FingerprintFile, &fingerprint_file)?;
    if let Attempt::Reused { manifest_file: Some(path), .. } = attempt {
        runner.save_state(State::ManifestFile, &path.to_string_lossy())?;
    }
    let skip_save = match attempt {
        _ if outcome.clean_failed => SKIP_SAVE_STALE,
        Attempt::Reused { .. } | Attempt::Found => "true",
        Attempt::Miss { .. } => "false",
    };
    runner.save_state(State::SkipSave, skip_save)?;
    for (name, value) in &outcome.exports {
        runner.export_env(name, value)?;
    }
    let (files, bytes, extra, layers) = match attempt {
        Attempt::Reused { restored, extra_files, stack, .. } => {
            (restored.files, restored.content_bytes, extra_files.len(), stack.layers.len())
        }
        _ => (0, 0, 0, 0),
    };
    runner.set_output(Output::CacheHit, flag(attempt.hit()))?;
    runner.set_output(Output::Reused, flag(attempt.reused()))?;
    runner.set_output(Output::EntryExists, flag(attempt.entry_exists()))?;
    runner.set_output(Output::Key, key)?;
    runner.set_output(Output::FingerprintFile, &fingerprint_file)?;
    runner.set_output(Output::MissReason, attempt.miss_reason().name())?;
    runner.set_output(Output::RestoredFiles, &files.to_string())?;
    runner.set_output(Output::RestoredBytes, &bytes.to_string())?;
    runner.set_output(Output::ExtraFiles, &extra.to_string())?;
    runner.set_output(Output::Layers, &layers.to_string())?;
    let cleaned = outcome.cleaned.as_ref().map_or(0, |c| c.files);
    runner.set_output(Output::CleanedFiles, &cleaned.to_string())?;
    let worth = outcome.worth.as_ref();
    let generation = worth.and_then(|w| w.generation).map(super::worth::seconds).unwrap_or_default();
    let saved = worth.and_then(|w| w.up_to()).map(super::worth::seconds).unwrap_or_default();
    runner.set_output(Output::GenerationSeconds, &generation)?;
    runner.set_output(Output::TimeSaved, &saved)?;
    runner.append_summary(&render::restore::summary(shown, outcome))
}

fn publish_save(runner: &Runner, shown: &Shown, outcome: &SaveOutcome) -> Result<(), RunnerError> {
    runner.set_output(Output::Saved, flag(outcome.is_saved()))?;
    runner.set_output(Output::SaveResult, outcome.result.name())?;
    let changed = outcome.verified.as_ref().map(|v| v.changed_files.as_slice()).unwrap_or_default();
    runner.set_list_output(Output::ChangedFiles, changed)?;
    let uncovered = outcome.uncovered.as_ref().map(|u| u.files.as_slice()).unwrap_or_default();
    runner.set_list_output(Output::UncoveredFiles, uncovered)?;
    if let Some(key) = &outcome.key {
        runner.set_output(Output::Key, key)?;
    }
    let saved = outcome.compile.as_ref().and_then(|c| c.saved()).map(super::worth::seconds).unwrap_or_default();
    runner.set_output(Output::TimeSaved, &saved)?;
    runner.append_summary(&render::save::summary(shown, outcome))
}

fn publish_catalog(runner: &Runner, outcome: &CatalogOutcome) -> Result<(), RunnerError> {
    match outcome {
        CatalogOutcome::Explain { key, explanation } => {
            if let Some(explanation) = explanation {
                runner.set_output(Output::Against, &explanation.against_key)?;
                runner.set_list_output(Output::Changes, &explanation.changes)?;
            }
            runner.set_output(Output::Key, key)
        }
        CatalogOutcome::List { entries, json } => {
            if *json {
                runner.set_document(serde_json::to_string_pretty(entries).expect("entries serialize"));
            }
            let keys: Vec<&str> = entries.iter().map(|e| e.key.as_str()).collect();
            runner.set_list_output(Output::Keys, &keys)
        }
        CatalogOutcome::Prune { deleted, dry_run } => {
            let named: Vec<String> = deleted.iter().map(|(key, slot)| render::prune::named(key, *slot)).collect();
            runner.set_list_output(if *dry_run { Output::WouldDelete } else { Output::Deleted }, &named)
        }
    }
}

fn flag(value: bool) -> &'static str {
    if value { "true" } else { "false" }
}
