//! From an invocation to a validated [`Config`]: the action's inputs under the command line's
//! flags, the workspace, and every token and `secret-env` value registered as a secret before
//! anything can print it.

use super::Error;
use crate::archive::MIN_SECRET_LEN;
use crate::cli::{Command, Invocation};
use crate::config::{self, Config, INPUTS, Locate, RawInputs};
use crate::env::Env;
use crate::runner::{Mode, Runner};
use std::path::PathBuf;

/// The variables holding the job's own tokens: masked from the start, and never saved.
const TOKEN_VARIABLES: [&str; 2] = ["ACTIONS_RUNTIME_TOKEN", "GITHUB_TOKEN"];

pub(super) fn configure(invocation: &Invocation, runner: &Runner) -> Result<Config, Error> {
    let env = runner.env();
    let mut raw = RawInputs::default();
    if runner.mode() == Mode::Actions {
        let entry = invocation.command.entry_point();
        if let Some(entry) = entry {
            for warning in config::check_input_names(&runner.given_input_names(), entry)? {
                runner.warning(&warning);
            }
        }
        for spec in INPUTS.iter().filter(|spec| entry.is_none_or(|e| spec.declared_by(e))) {
            if let Some(value) = runner.given_input(spec.name) {
                raw.set(spec.name, value);
            }
        }
    }
    raw.overlay(invocation.flags.clone());
    // Tokens never print, whatever path an error takes.
    for name in TOKEN_VARIABLES {
        if let Some(token) = env.non_empty(name) {
            runner.add_secret(token);
        }
    }
    let config = Config::from_raw(&raw, env, &workspace(invocation, env)?, invocation.command.name())?;
    if invocation.command.computes_key(config.save.key.is_some()) {
        config.check_key_inputs()?;
    }
    if let Some(token) = &config.locate.github_token {
        runner.add_secret(token);
    }
    for value in config.locate.store.secret_values(env) {
        runner.add_secret(&value);
    }
    // `secret-env` values are masked in every step, not only refused by saves: a `hash-env`
    // listing one would otherwise print it in the fingerprint and in explanations of misses.
    for name in &config.secret_env {
        if let Some(value) = env.non_empty(name).filter(|v| v.trim().len() >= MIN_SECRET_LEN) {
            runner.add_secret(value);
        }
    }
    Ok(config)
}

/// The root action's post step runs after every job (`post-if: always()`): after a failed or
/// cancelled job without `save-on-failure`, the job's status, which says why nothing is saved —
/// read before anything else, so an input error the main step reported is not reported again.
pub(super) fn failed_job(invocation: &Invocation, runner: &Runner) -> Option<String> {
    let mut raw = RawInputs::default();
    for input in [&config::defs::JOB_STATUS.spec, &config::defs::SAVE_ON_FAILURE.spec] {
        if let Some(value) = runner.given_input(input.name) {
            raw.set(input.name, value);
        }
    }
    raw.overlay(invocation.flags.clone());
    let succeeded = config::defs::JOB_STATUS.read(&raw).unwrap_or(true);
    let save_anyway = config::defs::SAVE_ON_FAILURE.read(&raw).unwrap_or(false);
    let status = raw.get(config::defs::JOB_STATUS.name()).unwrap_or_default().trim().to_owned();
    let post = invocation.command == Command::Save { post: true };
    (post && !succeeded && !save_anyway).then_some(status)
}

/// `--workspace`, else `GITHUB_WORKSPACE`, else the current directory; absolute and normalized.
fn workspace(invocation: &Invocation, env: &Env) -> Result<PathBuf, Error> {
    let workspace = match (&invocation.workspace, env.non_empty("GITHUB_WORKSPACE")) {
        (Some(dir), _) => dir.clone(),
        (None, Some(dir)) => PathBuf::from(dir),
        (None, None) => std::env::current_dir().map_err(Error::Workspace)?,
    };
    Ok(crate::paths::normalize(&std::path::absolute(&workspace).map_err(Error::Workspace)?))
}

/// What a save must never archive: the job's tokens, the `github-token` input, the values of
/// the variables named in `secret-env`, and the chosen store's credentials (S3's, Azure's).
pub(super) fn secret_values(secret_env: &[String], locate: &Locate, env: &Env) -> Vec<String> {
    TOKEN_VARIABLES
        .iter()
        .filter_map(|name| env.non_empty(name))
        .chain(locate.github_token.as_deref())
        .chain(secret_env.iter().filter_map(|name| env.non_empty(name)))
        .map(str::to_owned)
        .chain(locate.store.secret_values(env))
        .collect()
}
