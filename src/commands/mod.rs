//! The commands — `fingerprint`, `restore`, `save` and the catalog's `explain`, `list` and
//! `prune` — as orchestration only: configuration in, a typed outcome ([`crate::outcome`])
//! out, which `publish` alone turns into outputs, state, exported variables and the step
//! summary. Commands see the cache only through [`Backend`](crate::backend::Backend) and the
//! machine only through [`System`]; what they say, `render` words.

mod catalog_commands;
mod content;
mod error;
mod explain;
mod fingerprint;
mod handoff;
mod prune;
mod publish;
mod reads;
mod render;
mod restore;
mod save;
mod services;
mod setup;
mod tracked;
mod verify;
mod worth;

pub use crate::stack::KeptStack;
pub use error::Error;
pub use handoff::{RestoreRecord, Restored};
use services::{BackendFactory, CatalogFactory, select_backend, select_catalog};
pub use verify::Kept;

use crate::cli::{Command, Invocation};
use crate::fingerprint::System;
use crate::outcome::Outcome;
use crate::runner::Runner;

/// What commands work with: the runner, the machine, and how to reach the cache.
struct Context<'a> {
    runner: &'a Runner,
    system: &'a dyn System,
    backend: &'a BackendFactory,
    catalog: &'a CatalogFactory,
}

/// Run one invocation with the real backends.
pub fn run(invocation: &Invocation, runner: &Runner, system: &dyn System) -> Result<(), Error> {
    let ctx = Context { runner, system, backend: &select_backend, catalog: &select_catalog };
    run_with(invocation, &ctx)
}

/// Run one invocation with the backends and the machine `ctx` gives.
fn run_with(invocation: &Invocation, ctx: &Context) -> Result<(), Error> {
    // `fingerprint` and `explain` answer with the fingerprint's values; the others summarize it.
    let details = matches!(invocation.command, Command::Fingerprint | Command::Explain);
    ctx.runner.set_verbose(invocation.verbose || details);
    if let Some(status) = setup::failed_job(invocation, ctx.runner) {
        render::save::failed_job(&status).say(ctx.runner);
        return Ok(());
    }
    let config = setup::configure(invocation, ctx.runner)?;
    // A failure that must fail the step only after the outcome is published.
    let mut deferred = None;
    let outcome = match &invocation.command {
        Command::Fingerprint => Outcome::Fingerprint(fingerprint::run(ctx, &config)?),
        Command::Restore => {
            let (outcome, clean_error) = restore::run(ctx, &config)?;
            deferred = clean_error.map(Error::Clean);
            Outcome::Restore(Box::new(outcome))
        }
        Command::Save { post } => Outcome::Save(Box::new(save::run(ctx, &config, *post)?)),
        Command::Explain => Outcome::Catalog(catalog_commands::explain(ctx, &config)?),
        Command::List { json, long, on_ref, all_refs } => {
            let refs = catalog_commands::refs(ctx, on_ref.as_deref(), *all_refs);
            Outcome::Catalog(catalog_commands::list(ctx, &config.locate, &refs, *long, *json)?)
        }
        Command::Prune { dry_run, older_than, on_ref, all_refs } => {
            let refs = catalog_commands::refs(ctx, on_ref.as_deref(), *all_refs);
            let rule = (*older_than, config.keep);
            Outcome::Catalog(catalog_commands::prune(ctx, &config.locate, &refs, rule, *dry_run)?)
        }
    };
    publish::publish(ctx.runner, &config, &outcome)?;
    match deferred {
        Some(error) => Err(error),
        None => verdict(config.strict, config.restore.fail_on_cache_miss, &outcome),
    }
}

/// Whether a published outcome fails the step: cache trouble under `strict`, a miss under
/// `fail-on-cache-miss`, changes under `verify-reuse: fail`.
fn verdict(strict: bool, fail_on_cache_miss: bool, outcome: &Outcome) -> Result<(), Error> {
    use crate::outcome::Attempt;
    match outcome {
        Outcome::Restore(restore) => {
            if let Attempt::Miss { reason, detail } = &restore.attempt
                && restore.attempt.is_trouble()
                && strict
            {
                return Err(Error::Strict(render::restore::strict(*reason, detail.as_deref())));
            }
            if fail_on_cache_miss && matches!(restore.attempt, Attempt::Miss { .. }) {
                let reason = restore.attempt.miss_reason();
                return Err(Error::FailOnMiss { key: restore.record.key.clone(), reason });
            }
            Ok(())
        }
        Outcome::Save(save) => {
            if save.trouble && strict {
                return Err(Error::Strict(render::save::strict(save.result, save.detail.as_deref())));
            }
            if save.result == crate::outcome::SaveResult::UncoveredReads {
                return Err(Error::UncoveredReads { count: save.uncovered.as_ref().map_or(0, |u| u.files.len()) });
            }
            match &save.verified {
                Some(verified) if verified.failed => Err(Error::VerifyFailed { count: verified.changed_files.len() }),
                _ => Ok(()),
            }
        }
        Outcome::Fingerprint(_) | Outcome::Catalog(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    //! Commands run in process through [`run_with`], with the backend a test hands in.

    use super::*;
    use crate::backend::CatalogError;
    use crate::backend::{Backend, BackendError, CacheEntry, ErrorKind, Reservation};
    use crate::config::{EntryPoint, Locate, OUTPUTS};
    use crate::env::Env;
    use crate::fingerprint::HostSystem;
    use crate::keys::{Key, Version};
    use crate::runner::Mode;
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    /// A scratch job: workspace, home, runner temp and the runner's files, all in one temp dir.
    struct Job {
        dir: tempfile::TempDir,
    }

    impl Job {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            for sub in ["ws", "home", "temp", "store"] {
                std::fs::create_dir(dir.path().join(sub)).unwrap();
            }
            Self { dir }
        }

        fn path(&self, rel: &str) -> PathBuf {
            self.dir.path().join(rel)
        }

        fn runner(&self) -> Runner {
            let var = |rel: &str| self.path(rel).to_string_lossy().into_owned();
            let env = Env::from_pairs([
                ("HOME", var("home")),
                ("GITHUB_WORKSPACE", var("ws")),
                ("RUNNER_TEMP", var("temp")),
                ("GITHUB_OUTPUT", var("outputs")),
                ("GITHUB_STATE", var("state")),
                ("GITHUB_ENV", var("env")),
            ]);
            Runner::new(Mode::Cli, env, Box::new(std::io::sink()), Box::new(std::io::sink()))
        }

        /// Run `args` (after `exact-cache`) with `backend`; the runner's files start empty.
        fn run(&self, args: &[&str], backend: &BackendFactory) -> Result<BTreeMap<String, String>, Error> {
            for file in ["outputs", "state", "env"] {
                let _ = std::fs::remove_file(self.path(file));
            }
            let invocation = crate::cli::parse(["exact-cache"].iter().chain(args)).unwrap();
            let runner = self.runner();
            let no_catalog = |_: &Locate, _: &Env| Err(CatalogError::Unavailable { reason: "not in this test".into() });
            let ctx = Context { runner: &runner, system: &HostSystem::default(), backend, catalog: &no_catalog };
            run_with(&invocation, &ctx).map(|()| key_values(&self.path("outputs")))
        }
    }

    /// The `name<<delimiter` records of a `$GITHUB_OUTPUT`-style file.
    fn key_values(path: &Path) -> BTreeMap<String, String> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut lines = text.lines();
        let mut values = BTreeMap::new();
        while let Some((name, delimiter)) = lines.next().and_then(|l| l.split_once("<<")) {
            let value: Vec<&str> = lines.by_ref().take_while(|l| *l != delimiter).collect();
            values.insert(name.to_owned(), value.join("\n"));
        }
        values
    }

    fn declared(entry: EntryPoint) -> Vec<&'static str> {
        OUTPUTS.iter().filter(|o| o.entries.contains(&entry)).map(|o| o.name()).collect()
    }

    fn names(outputs: &BTreeMap<String, String>) -> Vec<&str> {
        let mut names: Vec<&str> = outputs.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    fn sorted(mut names: Vec<&'static str>) -> Vec<&'static str> {
        names.sort_unstable();
        names
    }

    /// A service that times out on every call.
    struct TimingOut;

    impl Backend for TimingOut {
        fn describe(&self) -> String {
            "a service that times out".into()
        }
        fn lookup(&self, _: &Key, _: &Version) -> Result<Option<CacheEntry>, BackendError> {
            Err(BackendError::new(ErrorKind::Timeout, "no answer in 30 s"))
        }
        fn lookup_newest_or(&self, _: &str, _: &Key, _: &Version) -> Result<Option<CacheEntry>, BackendError> {
            Err(BackendError::new(ErrorKind::Timeout, "no answer in 30 s"))
        }
        fn open(&self, _: &CacheEntry) -> Result<Box<dyn std::io::Read + Send + '_>, BackendError> {
            unreachable!("nothing was found")
        }
        fn reserve(&self, _: &Key, _: &Version) -> Result<Reservation, BackendError> {
            Err(BackendError::new(ErrorKind::Timeout, "no answer in 30 s"))
        }
    }

    const ARGS: [&str; 4] = ["--path=out", "--prefix=in-process", "--native=none", "--allow-machine-only-key"];

    #[test]
    fn a_timeout_is_a_published_miss_and_fails_the_step_only_under_strict() {
        let job = Job::new();
        let timing_out = |_: &Locate, _: &Env, _| Box::new(TimingOut) as Box<dyn Backend>;
        let outputs = job.run(&[&["restore"][..], &ARGS].concat(), &timing_out).unwrap();
        assert_eq!(outputs["miss-reason"], "timeout");
        assert_eq!((outputs["cache-hit"].as_str(), outputs["reused"].as_str()), ("false", "false"));
        assert_eq!(names(&outputs), sorted(declared(EntryPoint::Restore)), "every restore output, and only those");
        assert_eq!(key_values(&job.path("state"))["skip-save"], "false");

        let strict = job.run(&[&["restore", "--strict"][..], &ARGS].concat(), &timing_out);
        assert!(matches!(&strict, Err(Error::Strict(detail)) if detail.starts_with("timeout: ")), "{strict:?}");
        // Published before the step fails: later steps and the post step still see the miss.
        assert_eq!(key_values(&job.path("outputs"))["miss-reason"], "timeout");

        std::fs::create_dir(job.path("ws/out")).unwrap();
        std::fs::write(job.path("ws/out/model.pt"), b"weights").unwrap();
        let saved = job.run(&[&["save"][..], &ARGS].concat(), &timing_out).unwrap();
        assert_eq!(saved["save-result"], "error");
        assert!(matches!(job.run(&[&["save", "--strict"][..], &ARGS].concat(), &timing_out), Err(Error::Strict(_))));
    }

    #[test]
    fn save_then_restore_in_process_publishes_every_declared_output() {
        let job = Job::new();
        let store = job.path("store");
        let local = move |_: &Locate, _: &Env, _| {
            Box::new(crate::backend::LocalBackend::new(store.clone())) as Box<dyn Backend>
        };
        std::fs::create_dir(job.path("ws/out")).unwrap();
        std::fs::write(job.path("ws/out/model.pt"), b"weights").unwrap();

        let fingerprint = job.run(&[&["fingerprint"][..], &ARGS].concat(), &local).unwrap();
        assert_eq!(names(&fingerprint), sorted(declared(EntryPoint::Fingerprint)));
        let saved = job.run(&[&["save"][..], &ARGS].concat(), &local).unwrap();
        assert_eq!((saved["saved"].as_str(), saved["save-result"].as_str()), ("true", "saved"));
        assert_eq!(saved["key"], fingerprint["key"]);
        assert_eq!(names(&saved), sorted(declared(EntryPoint::Save)));

        std::fs::remove_dir_all(job.path("ws/out")).unwrap();
        let restored = job.run(&[&["restore"][..], &ARGS].concat(), &local).unwrap();
        assert_eq!((restored["reused"].as_str(), restored["miss-reason"].as_str()), ("true", "none"));
        assert_eq!(restored["restored-files"], "1");
        assert_eq!(names(&restored), sorted(declared(EntryPoint::Restore)));
        assert_eq!(std::fs::read(job.path("ws/out/model.pt")).unwrap(), b"weights");
        let state = key_values(&job.path("state"));
        assert_eq!((state["key"].as_str(), state["skip-save"].as_str()), (saved["key"].as_str(), "true"));
    }
}
