//! Orchestration of `fingerprint`, `restore` and `save`: configuration in, outputs, state,
//! logs and summary out. Commands see the cache only through [`Backend`] and the machine only
//! through [`System`]; everything they say goes through the [`Runner`].

mod catalog_commands;
mod explain;
mod fingerprint;
mod prune;
mod report;
mod restore;
mod save;
mod verify;

use crate::archive::{CleanError, PackError};
use crate::backend::http::Http;
use crate::backend::{
    Backend, BackendError, CacheEntry, Choice, ErrorKind, LocalBackend, Reservation, V1Backend, V2Backend, choose,
};
use crate::cli::{CommandName, Invocation};
use crate::config::{Config, ConfigError, INPUTS, RawInputs};
use crate::env::Env;
use crate::fingerprint::{FingerprintError, FingerprintRecord, System};
use crate::github::{Catalog, CatalogError, GithubCatalog};
use crate::outcome::MissReason;
use crate::runner::SecretSink;
use crate::runner::{Mode, Runner, RunnerError};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot compute the fingerprint")]
    Fingerprint(#[from] FingerprintError),
    #[error(transparent)]
    Runner(#[from] RunnerError),
    #[error("cannot write the fingerprint file `{}`", path.display())]
    WriteFingerprint {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no fingerprint file for key `{key}` at `{}`: run the restore or fingerprint step first in this job, or pass `fingerprint-file`", path.display())]
    NoFingerprint { key: String, path: PathBuf },
    #[error("fingerprint file `{}` does not belong to key `{key}`", path.display())]
    WrongFingerprint { key: String, path: PathBuf },
    #[error(
        "key `{key}` was computed for other `path` lines or another `compression` than this save step's; give the save step the same `path` and `compression` as the restore step"
    )]
    VersionMismatch { key: String },
    #[error("the entry for `{key}` was not reused ({reason}) and `fail-on-cache-miss` is set")]
    FailOnMiss { key: String, reason: MissReason },
    #[error("cache trouble and `strict` is set: {0}")]
    Strict(String),
    #[error("cannot archive the `path` entries")]
    Pack(#[from] PackError),
    #[error("cannot remove stale files (`clean-on-miss`)")]
    Clean(#[from] CleanError),
    #[error("cannot determine the workspace directory")]
    Workspace(#[source] std::io::Error),
    #[error("{0}")]
    Catalog(#[from] CatalogError),
    #[error("`verify-reuse: fail`: {count} files under `path` changed since the restore")]
    VerifyFailed { count: usize },
}

/// Builds the backend a configuration asks for.
pub type BackendFactory = dyn Fn(&Config, &Env, SecretSink) -> Box<dyn Backend>;
/// Builds the catalog (REST or local) that lists and deletes entries.
pub type CatalogFactory = dyn Fn(&Config, &Env) -> Result<Box<dyn Catalog>, CatalogError>;

/// What commands work with.
pub struct Context<'a> {
    pub runner: &'a Runner,
    pub system: &'a dyn System,
    pub backend: &'a BackendFactory,
    pub catalog: &'a CatalogFactory,
}

/// Run one invocation with the real backends.
pub fn run(invocation: &Invocation, runner: &Runner, system: &dyn System) -> Result<(), Error> {
    let ctx = Context { runner, system, backend: &select_backend, catalog: &select_catalog };
    run_with(invocation, &ctx)
}

pub fn run_with(invocation: &Invocation, ctx: &Context) -> Result<(), Error> {
    let env = ctx.runner.env();
    let mut raw = RawInputs::default();
    if ctx.runner.mode() == Mode::Actions {
        for spec in INPUTS {
            if let Some(value) = ctx.runner.input(spec.name) {
                raw.set(spec.name, value);
            }
        }
    }
    raw.overlay(invocation.flags.clone());
    // Tokens never print, whatever path an error takes.
    for name in TOKEN_VARIABLES {
        if let Some(token) = env.non_empty(name) {
            ctx.runner.add_secret(token);
        }
    }
    let workspace = match (&invocation.workspace, env.non_empty("GITHUB_WORKSPACE")) {
        (Some(dir), _) => dir.clone(),
        (None, Some(dir)) => PathBuf::from(dir),
        (None, None) => std::env::current_dir().map_err(Error::Workspace)?,
    };
    let workspace = crate::paths::normalize(&std::path::absolute(&workspace).map_err(Error::Workspace)?);
    let config = Config::from_raw(&raw, env, &workspace)?;
    if let Some(token) = &config.github_token {
        ctx.runner.add_secret(token);
    }
    // `secret-env` values are masked in every step, not only refused by saves: a `hash-env`
    // listing one would otherwise print it in the fingerprint and in explanations of misses.
    for name in &config.secret_env {
        if let Some(value) = env.non_empty(name).filter(|v| v.trim().len() >= crate::archive::MIN_SECRET_LEN) {
            ctx.runner.add_secret(value);
        }
    }
    match invocation.command {
        CommandName::Fingerprint => fingerprint::run(ctx, &config),
        CommandName::Restore => restore::run(ctx, &config),
        CommandName::Save => save::run(ctx, &config, invocation.post),
        CommandName::Explain => catalog_commands::explain(ctx, &config),
        CommandName::List => catalog_commands::list(ctx, &config),
        CommandName::Prune => catalog_commands::prune(ctx, &config, invocation.dry_run),
    }
}

/// The variables holding the job's own tokens: masked from the start, and never saved.
const TOKEN_VARIABLES: [&str; 2] = ["ACTIONS_RUNTIME_TOKEN", "GITHUB_TOKEN"];

/// What a save must never archive: the job's tokens, the `github-token` input and the values of
/// the variables named in `secret-env`.
fn secret_values<'a>(config: &'a Config, env: &'a Env) -> impl Iterator<Item = &'a str> {
    TOKEN_VARIABLES
        .iter()
        .filter_map(|name| env.non_empty(name))
        .chain(config.github_token.as_deref())
        .chain(config.secret_env.iter().filter_map(|name| env.non_empty(name)))
}

/// The backend the configuration and the environment ask for (see [`crate::backend::select`]).
pub fn select_backend(config: &Config, env: &Env, secrets: SecretSink) -> Box<dyn Backend> {
    let dir = config.local_dir.clone().unwrap_or_else(|| LocalBackend::default_dir(env));
    let http = || Http::new(env, secrets.clone()).map(Arc::new);
    let built: Result<Box<dyn Backend>, BackendError> = match choose(config.backend, config.protocol, dir, env) {
        Choice::Local { dir } => Ok(Box::new(LocalBackend::new(dir))),
        Choice::V1 { cache_url, token } => {
            http().and_then(|h| Ok(Box::new(V1Backend::new(h, &cache_url, token)?) as _))
        }
        Choice::V2 { results_url, token } => {
            http().and_then(|h| Ok(Box::new(V2Backend::new(h, &results_url, token)?) as _))
        }
        Choice::Unavailable { reason } => Err(BackendError::new(ErrorKind::Fatal, reason)),
    };
    built.unwrap_or_else(|e| Box::new(Unavailable { reason: e.message }))
}

/// Where entries are listed and deleted: the local store for the local backend, else the GitHub
/// REST API (with `github-token`, or `GITHUB_TOKEN`).
pub fn select_catalog(config: &Config, env: &Env) -> Result<Box<dyn Catalog>, CatalogError> {
    let dir = config.local_dir.clone().unwrap_or_else(|| LocalBackend::default_dir(env));
    match choose(config.backend, config.protocol, dir, env) {
        Choice::Local { dir } => Ok(Box::new(LocalBackend::new(dir))),
        Choice::Unavailable { reason } => Err(CatalogError::Unavailable(reason)),
        Choice::V1 { .. } | Choice::V2 { .. } => {
            let token = config.github_token.as_deref().or_else(|| env.non_empty("GITHUB_TOKEN"));
            Ok(Box::new(GithubCatalog::from_env(env, token)?))
        }
    }
}

/// `explain-misses` on a miss: log why, and return it for the summary. Any trouble is one
/// informational line; it never affects the restore.
fn explain_miss(
    ctx: &Context,
    config: &Config,
    backend: &dyn Backend,
    ours: &FingerprintRecord,
) -> Option<explain::Explanation> {
    let runner = ctx.runner;
    if config.explain_misses == Some(false) {
        return None;
    }
    let _group = runner.group("Why this is a miss");
    let catalog = match (ctx.catalog)(config, runner.env()) {
        Ok(c) => c,
        Err(e) => {
            runner.info(&format!("explain-misses: skipped: {e}"));
            return None;
        }
    };
    match explain::explain(
        &report::Shown::new(runner, config),
        backend,
        catalog.as_ref(),
        ours,
        runner.env().non_empty("GITHUB_REF"),
        runner.env().non_empty("GITHUB_BASE_REF"),
    ) {
        Ok(explanation) => {
            let against = &explanation.against;
            runner.info(&format!(
                "compared with `{}`{}:",
                against.key,
                against.r#ref.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
            ));
            for line in explanation.changes.iter().take(explain::SHOWN) {
                runner.info(&format!("  {line}"));
            }
            if explanation.changes.len() > explain::SHOWN {
                runner.info(&format!("  … and {} more", explanation.changes.len() - explain::SHOWN));
            }
            if explanation.changes.is_empty() {
                runner.info("  no component differs: the other entry has other `path` lines or compression");
            }
            Some(explanation)
        }
        Err(reason) => {
            runner.info(&format!("explain-misses: {reason}"));
            None
        }
    }
}

/// Where the manifest of a restored entry is kept for `verify-reuse`.
fn manifest_path(config: &Config, env: &Env, key: &str) -> PathBuf {
    fingerprint_path(config, env, key).with_file_name(format!("{key}.manifest.json"))
}

/// Write `text` through a temporary file renamed into place: an existing file or symlink at
/// the path is replaced, never written through.
fn write_json_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let mut tmp = tempfile::NamedTempFile::new_in(parent)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// No cache service can be reached: every call is service trouble, with the reason.
struct Unavailable {
    reason: String,
}

impl Backend for Unavailable {
    fn describe(&self) -> String {
        "no cache service".to_owned()
    }

    fn lookup(&self, _key: &str, _version: &str) -> Result<Option<CacheEntry>, BackendError> {
        Err(BackendError::new(ErrorKind::Fatal, self.reason.clone()))
    }

    fn open(&self, _entry: &CacheEntry) -> Result<Box<dyn std::io::Read + Send + '_>, BackendError> {
        Err(BackendError::new(ErrorKind::Fatal, self.reason.clone()))
    }

    fn reserve(&self, _key: &str, _version: &str) -> Result<Reservation, BackendError> {
        Err(BackendError::new(ErrorKind::Fatal, self.reason.clone()))
    }
}

/// `message`, then one `caused by:` line per source.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(&format!("\n  caused by: {cause}"));
        source = cause.source();
    }
    text
}

/// Compute the fingerprint, log it, and return its record.
fn compute(ctx: &Context, config: &Config) -> Result<FingerprintRecord, Error> {
    let _group = ctx.runner.group("Fingerprint");
    let fingerprint = crate::fingerprint::collect(&config.fingerprint, ctx.system, ctx.runner.env())?;
    let record = FingerprintRecord::new(&config.prefix, &config.version(), fingerprint);
    report::log_fingerprint(ctx.runner, &report::Shown::new(ctx.runner, config), &record);
    Ok(record)
}

/// Where the fingerprint file of `key` lives unless `fingerprint-file` says otherwise.
/// `$RUNNER_TEMP/exact-cache/` on a runner (private to the job); otherwise a directory of the
/// user's own, never a shared and predictable `/tmp` path.
fn fingerprint_path(config: &Config, env: &Env, key: &str) -> PathBuf {
    config.fingerprint_file.clone().unwrap_or_else(|| {
        let dir = match env.non_empty("RUNNER_TEMP") {
            Some(temp) => PathBuf::from(temp).join("exact-cache"),
            None => LocalBackend::default_dir(env).join("fingerprints"),
        };
        dir.join(format!("{key}.json"))
    })
}

/// Written to a temporary file and renamed into place, so an existing file or symlink at the
/// path is replaced, never written through.
fn write_fingerprint(config: &Config, env: &Env, record: &FingerprintRecord) -> Result<PathBuf, Error> {
    let path = fingerprint_path(config, env, &record.key);
    write_json_atomically(&path, &record.to_json())
        .map_err(|source| Error::WriteFingerprint { path: path.clone(), source })?;
    Ok(path)
}

fn read_fingerprint(path: &Path, key: &str) -> Result<FingerprintRecord, Error> {
    let bytes = std::fs::read(path).map_err(|_| Error::NoFingerprint { key: key.to_owned(), path: path.to_owned() })?;
    let record = FingerprintRecord::from_json(&bytes)
        .map_err(|_| Error::WrongFingerprint { key: key.to_owned(), path: path.to_owned() })?;
    if record.key != key {
        return Err(Error::WrongFingerprint { key: key.to_owned(), path: path.to_owned() });
    }
    Ok(record)
}

/// The miss reason for a backend failure.
fn miss_reason(kind: ErrorKind) -> MissReason {
    match kind {
        ErrorKind::Timeout => MissReason::Timeout,
        ErrorKind::NotFound => MissReason::NotFound,
        _ => MissReason::ServiceError,
    }
}

fn bool_str(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// Leave the marker that lets a later `clean-on-miss` clean the directory roots (by index)
/// exact-cache has restored into or saved from (only where it could not clean otherwise).
fn mark_owned(runner: &crate::runner::Runner, config: &Config, roots: &[usize]) {
    for (dir, e) in config.clean_guard.mark_owned(&config.paths, roots) {
        runner.warning(&format!("cannot mark `{}` as exact-cache's own for `clean-on-miss`: {e}", dir.display()));
    }
}
