//! `exact-cache fingerprint`: compute the key, write the fingerprint file; no network. Also
//! the fingerprint computation every command that needs a key starts with.

use super::{Context, Error, handoff, report, words};
use crate::config::Config;
use crate::fingerprint::{FingerprintRecord, Note};
use crate::outcome::FingerprintOutcome;

pub(super) fn run(ctx: &Context, config: &Config) -> Result<FingerprintOutcome, Error> {
    let (record, notes) = compute_noted(ctx, config)?;
    let file = handoff::write_fingerprint(config.locate.fingerprint_file.as_deref(), ctx.runner.env(), &record)?;
    ctx.runner.info(&format!("fingerprint file: {}", file.display()));
    Ok(FingerprintOutcome { record, file, notes })
}

/// Compute the fingerprint, log it and its notes, and return its record.
pub(super) fn compute(ctx: &Context, config: &Config) -> Result<FingerprintRecord, Error> {
    compute_noted(ctx, config).map(|(record, _)| record)
}

/// [`compute`], and the notes (logged already) for the step summary.
pub(super) fn compute_noted(ctx: &Context, config: &Config) -> Result<(FingerprintRecord, Vec<Note>), Error> {
    let _group = ctx.runner.group("Fingerprint");
    // What exact-cache's own probes (the interpreter's report, `hash-commands`) read is no read of
    // the generating run.
    let mut env = ctx.runner.env().clone();
    env.remove(crate::reads::LOG_VAR);
    let (fingerprint, notes) = crate::fingerprint::collect_noted(&config.fingerprint, ctx.system, &env)?;
    if let Some(preset) = config.preset {
        let (entered, paths) = config.fingerprint.env_patterns.select(ctx.runner.env());
        let names: Vec<&str> = entered.iter().map(|(name, _)| *name).collect();
        let mut line = format!("{}: variables in the key: {}", preset.name(), list_or_none(&names));
        if !paths.is_empty() {
            line.push_str(&format!("; left out, their values being paths: {}", paths.join(", ")));
        }
        ctx.runner.info(&line);
    }
    let record = FingerprintRecord::new(&config.locate.prefix, &config.locate.version(), fingerprint);
    report::log_fingerprint(ctx.runner, &report::Shown::new(ctx.runner, config), &record);
    for said in words::fingerprint_notes(&notes) {
        said.say(ctx.runner);
    }
    Ok((record, notes))
}

fn list_or_none(names: &[&str]) -> String {
    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
}
