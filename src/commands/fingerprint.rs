//! `exact-cache fingerprint`: compute the key, write the fingerprint file; no network. Also
//! the fingerprint computation every command that needs a key starts with.

use super::render::{self, Shown};
use super::{Context, Error, handoff};
use crate::config::Config;
use crate::fingerprint::{FingerprintRecord, Note};
use crate::outcome::FingerprintOutcome;

pub(super) fn run(ctx: &Context, config: &Config) -> Result<FingerprintOutcome, Error> {
    let (record, notes) = compute_noted(ctx, config)?;
    let file = handoff::write_fingerprint(config.locate.fingerprint_file.as_deref(), ctx.runner.env(), &record)?;
    render::fingerprint::file(&file).say(ctx.runner);
    Ok(FingerprintOutcome { record, file, notes })
}

/// Compute the fingerprint, log it and its notes, and return its record.
pub(super) fn compute(ctx: &Context, config: &Config) -> Result<FingerprintRecord, Error> {
    compute_noted(ctx, config).map(|(record, _)| record)
}

/// [`compute`], and the notes (logged already) for the step summary.
pub(super) fn compute_noted(ctx: &Context, config: &Config) -> Result<(FingerprintRecord, Vec<Note>), Error> {
    let _group = ctx.runner.group(render::fingerprint::GROUP);
    // What exact-cache's own probes (the interpreter's report, `hash-commands`) read is no read of
    // the generating run.
    let mut env = ctx.runner.env().clone();
    env.remove(crate::reads::LOG_VAR);
    let (fingerprint, notes) = crate::fingerprint::collect_noted(&config.fingerprint, ctx.system, &env)?;
    if let Some(preset) = config.preset {
        let (entered, paths) = config.fingerprint.env_patterns.select(ctx.runner.env());
        let names: Vec<&str> = entered.iter().map(|(name, _)| *name).collect();
        render::fingerprint::preset_variables(preset, &names, &paths).say(ctx.runner);
    }
    let record = FingerprintRecord::new(&config.locate.prefix, &config.locate.version(), fingerprint);
    render::fingerprint::log(ctx.runner, &Shown::new(ctx.runner, config), &record);
    render::say_all(ctx.runner, render::fingerprint::notes(&notes));
    Ok((record, notes))
}
