//! The commands — `fingerprint`, `restore`, `save` and the catalog's `explain`, `list` and
//! `prune` — as orchestration only: configuration in, a typed outcome ([`crate::outcome`])
//! out, which [`publish`] alone turns into outputs, state, exported variables and the step
//! summary. Commands see the cache only through [`Backend`](crate::backend::Backend) and the
//! machine only through [`System`]; everything they say goes through the [`Runner`].

mod catalog_commands;
mod error;
mod explain;
mod fingerprint;
mod handoff;
mod lookups;
mod prune;
mod publish;
mod reads;
mod report;
mod restore;
mod save;
mod services;
mod setup;
mod tracked;
mod verify;
mod words;
mod worth;

pub use error::Error;
pub use services::{BackendFactory, CatalogFactory, select_backend, select_catalog};

use crate::cli::{CommandName, Invocation};
use crate::fingerprint::System;
use crate::outcome::Outcome;
use crate::runner::Runner;

/// What commands work with: the runner, the machine, and how to reach the cache.
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

/// Run one invocation with the backends and the machine `ctx` gives.
pub fn run_with(invocation: &Invocation, ctx: &Context) -> Result<(), Error> {
    // `fingerprint` and `explain` answer with the fingerprint's values; the others summarize it.
    let details = matches!(invocation.command, CommandName::Fingerprint | CommandName::Explain);
    ctx.runner.set_verbose(invocation.verbose || details);
    if let Some(line) = setup::failed_job(invocation, ctx.runner) {
        ctx.runner.notice(&line);
        return Ok(());
    }
    let config = setup::configure(invocation, ctx.runner)?;
    // A failure that must fail the step only after the outcome is published.
    let mut deferred = None;
    let outcome = match invocation.command {
        CommandName::Fingerprint => Outcome::Fingerprint(fingerprint::run(ctx, &config)?),
        CommandName::Restore => {
            let (outcome, clean_error) = restore::run(ctx, &config)?;
            deferred = clean_error.map(Error::Clean);
            Outcome::Restore(Box::new(outcome))
        }
        CommandName::Save => Outcome::Save(save::run(ctx, &config, invocation.post)?),
        CommandName::Explain => Outcome::Catalog(catalog_commands::explain(ctx, &config)?),
        CommandName::List => {
            Outcome::Catalog(catalog_commands::list(ctx, &config.locate, &invocation.catalog, invocation.json)?)
        }
        CommandName::Prune => Outcome::Catalog(catalog_commands::prune(
            ctx,
            (&config.locate, config.keep),
            &invocation.catalog,
            invocation.dry_run,
        )?),
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
                return Err(Error::Strict(words::strict_restore(*reason, detail.as_deref())));
            }
            if fail_on_cache_miss && matches!(restore.attempt, Attempt::Miss { .. }) {
                let reason = restore.attempt.miss_reason();
                return Err(Error::FailOnMiss { key: restore.record.key.clone(), reason });
            }
            Ok(())
        }
        Outcome::Save(save) => {
            if save.trouble && strict {
                return Err(Error::Strict(words::strict_save(save.result, save.detail.as_deref())));
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
    use crate::ids::{Key, Version};
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

#[cfg(test)]
mod config_parts {
    //! Which part of [`Config`](crate::config::Config) each file of `src/` (but `config`'s own)
    //! reads (docs/architecture.md, "Config"), checked against the code: `Config` (the whole
    //! type), a part's type in a signature (`Locate`, `RestoreConfig`, `SaveConfig`, `Keep`), or
    //! `config.<field>` read of the whole. A file absent from [`READS`] names none of them; a
    //! change in what a file reads changes this table, deliberately.

    use std::collections::BTreeSet;
    use std::path::Path;

    const READS: &[(&str, &[&str])] = &[
        // The whole: the commands take it and hand each layer below its part.
        ("commands/mod.rs", &["keep", "locate", "restore", "strict"]),
        ("commands/setup.rs", &["Config", "Locate", "check_key_inputs", "locate", "save", "secret_env"]),
        ("commands/fingerprint.rs", &["Config", "fingerprint", "locate", "preset"]),
        (
            "commands/restore.rs",
            &[
                "Config",
                "Locate",
                "RestoreConfig",
                "fingerprint",
                "locate",
                "preset",
                "restore",
                "strict",
                "uncovered_reads",
            ],
        ),
        (
            "commands/save.rs",
            &[
                "Config",
                "Keep",
                "Locate",
                "SaveConfig",
                "fingerprint",
                "locate",
                "preset",
                "save",
                "secret_env",
                "uncovered_reads",
            ],
        ),
        ("commands/catalog_commands.rs", &["Config", "Keep", "Locate", "locate"]),
        // What users read names the cache and masks values: the whole, read for that alone.
        ("commands/publish.rs", &["Config"]),
        ("commands/report.rs", &["Config", "locate", "preset", "save", "secret_env"]),
        // Only what locates entries.
        ("commands/handoff.rs", &["Locate"]),
        ("commands/reads.rs", &["Locate"]),
        ("commands/services.rs", &["Locate"]),
        ("commands/verify.rs", &["Locate"]),
    ];

    /// What `text` (tests and comments aside) names of `Config` and its parts.
    fn named(text: &str) -> BTreeSet<String> {
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let mut found = BTreeSet::new();
        let fields = [
            "fingerprint",
            "locate",
            "restore",
            "save",
            "strict",
            "uncovered_reads",
            "secret_env",
            "keep",
            "preset",
            "allow_machine_only_key",
            "check_key_inputs",
        ];
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices(|c: char| c.is_ascii_uppercase() || c == 'c') {
                if line[..i].chars().next_back().is_some_and(word) {
                    continue;
                }
                let ident: String = line[i..].chars().take_while(|c| word(*c)).collect();
                let after = &line[i + ident.len()..];
                match ident.as_str() {
                    // `Config(…)` is an error's variant, not the type.
                    "Config" if !after.starts_with('(') => found.insert(ident),
                    "Locate" | "RestoreConfig" | "SaveConfig" | "Keep" => found.insert(ident),
                    "config" if after.starts_with('.') => {
                        let field: String = after[1..].chars().take_while(|c| word(*c)).collect();
                        fields.contains(&field.as_str()) && found.insert(field)
                    }
                    _ => false,
                };
            }
        }
        found
    }

    #[test]
    fn each_file_reads_only_its_part_of_the_config() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut wrong = Vec::new();
        for path in rust_files(&src) {
            let file = path.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
            if file.starts_with("config/") {
                continue;
            }
            let found = named(&std::fs::read_to_string(&path).unwrap());
            let listed: BTreeSet<String> = READS
                .iter()
                .find(|(name, _)| *name == file)
                .map(|(_, reads)| reads.iter().map(|r| r.to_string()).collect())
                .unwrap_or_default();
            if found != listed {
                wrong.push(format!("{file}: reads {found:?}, listed {listed:?}"));
            }
        }
        assert!(wrong.is_empty(), "what commands read of the config changed:\n{}", wrong.join("\n"));
    }

    /// The scan above sees reads of the whole through a binding named `config` only: every
    /// binding of the whole type (a parameter, a field, a `let` with its type) is named so.
    #[test]
    fn the_whole_config_is_always_bound_as_config() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut wrong = Vec::new();
        for path in rust_files(&src) {
            let text = std::fs::read_to_string(&path).unwrap();
            for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for (i, _) in line.match_indices("Config") {
                    let after = line[i + "Config".len()..].chars().next();
                    if after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '(') {
                        continue;
                    }
                    let before = line[..i].trim_end_matches(['&', ' ']).trim_end_matches("'a").trim_end();
                    let Some(binding) = before.strip_suffix(':') else { continue };
                    let name: String = binding
                        .chars()
                        .rev()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    if !name.is_empty() && name != "config" {
                        wrong.push(format!("{}: `{name}: …Config`", path.display()));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "bind the whole config as `config`:\n{}", wrong.join("\n"));
    }

    /// Every `.rs` file beneath `dir`.
    fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files.extend(rust_files(&path));
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
        files
    }
}
