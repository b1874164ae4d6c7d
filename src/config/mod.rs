//! Inputs → one validated [`Config`]. Each input is defined once in [`defs`]; [`INPUTS`] is their
//! registry, read as `INPUT_<NAME>` or `--<name>`, and `action.yml` and docs/inputs.md are made
//! from it. [`Config::from_raw`] also checks what spans several inputs.

pub mod defs;
mod names;
mod outputs;

pub use crate::inputs::{CommandName, EntryPoint, InputError, InputKind, RawInputs};
pub use defs::{DEFAULT_PREFIX, INPUTS, UncoveredReads, VerifyReuse};
pub use names::check_input_names;
pub use outputs::{OUTPUTS, OutputSpec};

use crate::archive::CleanGuard;
use crate::archive::Compression;
use crate::backend::Store;
use crate::env::Env;
use crate::fingerprint::FingerprintSpec;
use crate::inputs::Input;
use crate::keys;
use crate::paths::{Locations, PatternSet, VersionRoots};
use crate::preset::{Preset, PresetPlan};
use crate::stack::Limits;
use std::path::{Path, PathBuf};

/// Everything a command needs, validated, in parts; commands hand each layer below only its
/// part. The fields here are the settings more than one command reads.
#[derive(Clone, Debug)]
pub struct Config {
    pub fingerprint: FingerprintSpec,
    pub locate: Locate,
    pub restore: RestoreConfig,
    pub save: SaveConfig,
    pub strict: bool,
    /// Recorded from the restore (which installs the hook on a miss), judged by the save.
    pub uncovered_reads: UncoveredReads,
    /// Variables whose values never print and a save refuses to archive (besides the tokens).
    pub secret_env: Vec<String>,
    /// For the `prune` command (a save's own prune is [`SaveConfig::prune`]).
    pub keep: Keep,
    pub preset: Option<Preset>,
    pub allow_machine_only_key: bool,
}

/// What locates entries and the files around them; restore, save and the catalog commands all
/// read it.
#[derive(Clone, Debug)]
pub struct Locate {
    pub prefix: String,
    /// The `path` lines as the version names them (`version_lines`).
    pub path_lines: Vec<String>,
    pub paths: PatternSet,
    pub required: Vec<PathBuf>,
    pub compression: Compression,
    /// `None`: bases only.
    pub grow: Option<Limits>,
    pub store: Store,
    /// For the cache service's catalog (the REST API).
    pub github_token: Option<String>,
    /// `None`: the default place.
    pub fingerprint_file: Option<PathBuf>,
    pub clean_guard: CleanGuard,
}

/// What a restore does besides placing entries.
#[derive(Clone, Debug)]
pub struct RestoreConfig {
    /// Within [`Locate::clean_guard`].
    pub clean_on_miss: bool,
    pub reuse_env: Option<String>,
    pub lookup_only: bool,
    pub fail_on_cache_miss: bool,
    /// Variables exported to later steps on restore (a preset's cache directories).
    pub exports: Vec<(String, String)>,
    /// `None`: automatic (when listing is possible).
    pub explain_misses: Option<bool>,
}

/// What a save does besides writing an entry.
#[derive(Clone, Debug)]
pub struct SaveConfig {
    /// The restore's key, whose fingerprint file the save reads instead of computing one.
    pub key: Option<keys::Key>,
    pub save_on_failure: bool,
    pub save_if: bool,
    pub verify_reuse: VerifyReuse,
    pub generation_seconds: Option<f64>,
    pub prune: Option<Keep>,
}

/// `prune-keep`: how many of the newest keys a prune keeps on a ref.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keep {
    pub newest: usize,
}

fn fingerprint_spec(
    raw: &RawInputs,
    env: &Env,
    locations: &Locations,
    preset: Option<&PresetPlan>,
) -> Result<FingerprintSpec, InputError> {
    let mut fingerprint = FingerprintSpec::new(locations.clone());
    fingerprint.hash_files = defs::HASH_FILES.read(raw)?;
    fingerprint.follow_imports = defs::FOLLOW_IMPORTS.read(raw)?;
    fingerprint.hash_env = defs::HASH_ENV.read(raw)?;
    fingerprint.hash_commands = defs::HASH_COMMANDS.read(raw)?;
    fingerprint.native = defs::NATIVE.read(raw)?;
    fingerprint.compilers = defs::COMPILERS.read(raw)?;
    if defs::COMPILERS.given(raw) {
        fingerprint.named_compilers = fingerprint.compilers.iter().cloned().collect();
    } else {
        fingerprint.compilers =
            vec![env.non_empty("CC").unwrap_or("cc").to_owned(), env.non_empty("CXX").unwrap_or("c++").to_owned()];
    }
    fingerprint.python = defs::PYTHON.read(raw)?;
    fingerprint.python_exclude = defs::PYTHON_EXCLUDE.read(raw)?;
    fingerprint.python_keep_editable = defs::PYTHON_KEEP_EDITABLE.read(raw)?;
    fingerprint.variant = defs::VARIANT.read(raw)?;
    if let Some(plan) = preset {
        plan.apply(&mut fingerprint, env);
    }
    Ok(fingerprint)
}

/// The `required` paths, each under some `path` entry (else no entry could contain it).
fn required_paths(raw: &RawInputs, locations: &Locations, paths: &PatternSet) -> Result<Vec<PathBuf>, InputError> {
    let name = defs::REQUIRED.name();
    let mut required = Vec::new();
    for line in defs::REQUIRED.read(raw)? {
        let abs = locations.resolve(&line).map_err(|source| InputError::Path { name, source })?;
        let covered = paths.includes.iter().any(|p| {
            abs.starts_with(&p.base)
                && p.glob.as_ref().is_none_or(|g| {
                    // For a glob root the required path must be a match or lie under one.
                    abs.ancestors().take_while(|a| a.starts_with(&p.base)).any(|a| g.is_match(a))
                })
        });
        if !covered {
            return Err(InputError::Invalid {
                name,
                detail: format!("`{line}` is not under any `path` entry, so no entry could contain it"),
            });
        }
        required.push(abs);
    }
    Ok(required)
}

/// The `path` lines as they enter the version: an absolute line below a place each runner of a
/// pool has elsewhere (workspace, home, `RUNNER_TEMP`, exact-cache's own directory) is named by
/// that place, so that the runners share entries.
fn version_lines(lines: &[String], locations: &Locations, env: &Env, preset: Option<&PresetPlan>) -> Vec<String> {
    let mut roots = VersionRoots::of(locations);
    if let Some(temp) = env.non_empty("RUNNER_TEMP") {
        roots = roots.with(Path::new(temp), RUNNER_TEMP_NAME);
    }
    if let Some((dir, name)) = preset.map(|p| &p.version_root) {
        roots = roots.with(dir, name);
    }
    lines.iter().map(|line| roots.name(line)).collect()
}

/// How the version names `RUNNER_TEMP`.
const RUNNER_TEMP_NAME: &str = "<runner-temp>";

/// `clean-on-miss` is an input error for a `path` entry the guard would not clean.
fn check_cleanable(guard: &CleanGuard, paths: &PatternSet) -> Result<(), InputError> {
    for p in &paths.includes {
        if let Err(reason) = guard.check(p) {
            return Err(InputError::Invalid {
                name: defs::CLEAN_ON_MISS.name(),
                detail: format!(
                    "refusing to clean `{}`: {reason}. exact-cache cleans only beneath the workspace, `RUNNER_TEMP` \
                     or the home directory, a preset's cache directory, or a directory it restored into or saved \
                     from before; move the path there, or turn `clean-on-miss` off",
                    p.line
                ),
            });
        }
    }
    Ok(())
}

impl Config {
    /// Validate `raw` for `command`. `path` (or a preset) is required but by `list` and `prune`.
    pub fn from_raw(raw: &RawInputs, env: &Env, workspace: &Path, command: CommandName) -> Result<Self, InputError> {
        let locations = Locations { workspace: workspace.to_owned(), home: env.home_dir() };

        let preset = defs::PRESET.read(raw)?;
        let preset_plan = preset.map(|p| p.plan(env, &locations));
        let mut path_lines = defs::PATH.read(raw)?;
        if let Some(plan) = &preset_plan {
            path_lines.extend(plan.path_lines.iter().cloned());
        }
        let listing = matches!(command, CommandName::List | CommandName::Prune) && path_lines.is_empty();
        if path_lines.iter().all(|l| l.starts_with('!')) && !listing {
            return Err(InputError::Missing { name: defs::PATH.name() });
        }
        let paths = PatternSet::parse(&path_lines, &locations)
            .map_err(|source| InputError::Path { name: defs::PATH.name(), source })?;

        if defs::PREFIX.given_blank(raw) {
            return Err(InputError::Invalid {
                name: defs::PREFIX.name(),
                detail: format!(
                    "is empty: name this cache (e.g. `fixtures-v1`), or leave `prefix` out for the default \
                     `{DEFAULT_PREFIX}`"
                ),
            });
        }
        let prefix = defs::PREFIX.read(raw)?;
        let fingerprint = fingerprint_spec(raw, env, &locations, preset_plan.as_ref())?;
        let required = required_paths(raw, &locations, &paths)?;

        let clean_on_miss = defs::CLEAN_ON_MISS.read(raw)?;
        let preset_dirs: Vec<PathBuf> = preset_plan
            .as_ref()
            .map(|p| p.exports.iter().map(|(_, dir)| PathBuf::from(dir)).collect())
            .unwrap_or_default();
        let runner_temp = env.non_empty("RUNNER_TEMP").map(PathBuf::from);
        let clean_guard = CleanGuard::new(workspace, locations.home.as_deref(), runner_temp.as_deref(), &preset_dirs);
        if clean_on_miss {
            check_cleanable(&clean_guard, &paths)?;
        }

        let store = Store::configure(raw, &locations, env)?;

        let resolve = |input: &Input<Option<String>>| -> Result<Option<PathBuf>, InputError> {
            input
                .read(raw)?
                .map(|p| locations.resolve(&p).map_err(|source| InputError::Path { name: input.name(), source }))
                .transpose()
        };

        // Read in this order (the first bad input is the one reported), then grouped.
        let compression = defs::COMPRESSION.read(raw)?;
        let strict = defs::STRICT.read(raw)?;
        let reuse_env = defs::REUSE_ENV.read(raw)?;
        let lookup_only = defs::LOOKUP_ONLY.read(raw)?;
        let fail_on_cache_miss = defs::FAIL_ON_CACHE_MISS.read(raw)?;
        let key = defs::KEY.read(raw)?;
        let save_on_failure = defs::SAVE_ON_FAILURE.read(raw)?;
        // `job-status` is read by `commands::setup::failed_job`, before the rest: a failed job's
        // post step stops there.
        let fingerprint_file = resolve(&defs::FINGERPRINT_FILE)?;
        let verify_reuse = defs::VERIFY_REUSE.read(raw)?;
        let uncovered_reads = defs::UNCOVERED_READS.read(raw)?;
        let explain_misses = defs::EXPLAIN_MISSES.read(raw)?.decided();
        let grow = defs::GROW.read(raw)?.or_auto(preset == Some(Preset::TorchInductor));
        let limits =
            Limits { max_layers: defs::GROW_MAX_LAYERS.read(raw)?, max_share: defs::GROW_MAX_SHARE.read(raw)? };
        let save_if = defs::SAVE_IF.read(raw)?;
        let generation_seconds = defs::GENERATION_SECONDS.read(raw)?;
        let prune = defs::PRUNE.read(raw)?;
        let keep = Keep { newest: defs::PRUNE_KEEP.read(raw)? };
        let github_token = defs::GITHUB_TOKEN.read(raw)?;
        let secret_env = defs::SECRET_ENV.read(raw)?;
        let allow_machine_only_key = defs::ALLOW_MACHINE_ONLY_KEY.read(raw)?;

        Ok(Config {
            fingerprint,
            locate: Locate {
                prefix,
                path_lines: version_lines(&path_lines, &locations, env, preset_plan.as_ref()),
                paths,
                required,
                compression,
                grow: grow.then_some(limits),
                store,
                github_token,
                fingerprint_file,
                clean_guard,
            },
            restore: RestoreConfig {
                clean_on_miss,
                reuse_env,
                lookup_only,
                fail_on_cache_miss,
                exports: preset_plan.map(|p| p.exports).unwrap_or_default(),
                explain_misses,
            },
            save: SaveConfig {
                key,
                save_on_failure,
                save_if,
                verify_reuse,
                generation_seconds,
                prune: prune.then_some(keep),
            },
            strict,
            uncovered_reads,
            secret_env,
            keep,
            preset,
            allow_machine_only_key,
        })
    }

    /// A computed key must hold a project input unless `allow-machine-only-key`: without one, an
    /// entry is reused whatever the generator does (a misspelt `hash-files` leaves exactly that).
    pub fn check_key_inputs(&self) -> Result<(), InputError> {
        let f = &self.fingerprint;
        let project = !f.hash_files.is_empty()
            || !f.hash_env.is_empty()
            || !f.hash_commands.is_empty()
            || f.python.is_some()
            || self.preset.is_some();
        if project || self.allow_machine_only_key {
            return Ok(());
        }
        Err(InputError::Invalid {
            name: defs::HASH_FILES.name(),
            detail: "the key holds no project input, only the machine's facts, so an entry would be reused \
                     whatever your generator and its inputs do: list them in `hash-files` (e.g. `hash-files: \
                     tools/gen.py`), or add `hash-env`, `hash-commands`, `python` or `preset`; if a key of the \
                     machine alone is what you want, set `allow-machine-only-key: true`"
                .to_owned(),
        })
    }
}

impl Locate {
    /// The cache service version for these paths and this compression.
    pub fn version(&self) -> keys::Version {
        keys::cache_version(&self.path_lines, self.compression)
    }

    pub fn root_dirs(&self) -> Vec<PathBuf> {
        self.paths.includes.iter().map(|p| p.base.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::StoreKind;
    use crate::fingerprint::Facet;

    fn raw(pairs: &[(&str, &str)]) -> RawInputs {
        let mut r = RawInputs::default();
        for (k, v) in pairs {
            r.set(k, *v);
        }
        r
    }

    fn config(pairs: &[(&str, &str)]) -> Result<Config, InputError> {
        let env = Env::from_pairs([("HOME", "/home/u")]);
        Config::from_raw(&raw(pairs), &env, Path::new("/ws/repo"), CommandName::Restore)
    }

    #[test]
    fn bad_inputs_name_the_input() {
        let msg = |pairs: &[(&str, &str)]| config(pairs).unwrap_err().to_string();
        assert_eq!(msg(&[]), "input `path` is required");
        let facets = Facet::ALL.map(Facet::name).join(", ");
        let unknown = format!("input `native`: unknown facet `gpux`; known facets: {facets}");
        assert_eq!(msg(&[("path", "out"), ("native", "os,gpux")]), unknown);
        assert_eq!(
            msg(&[("path", "out"), ("compression", "lz4")]),
            "input `compression`: `lz4` is not one of `zstd`, `gzip`, `none`"
        );
        assert_eq!(msg(&[("path", "out"), ("strict", "yes")]), "input `strict`: `yes` is not `true` or `false`");
        assert!(msg(&[("path", "out"), ("prefix", "a,b")]).starts_with("input `prefix`: contains `,`"));
        assert!(msg(&[("path", "out"), ("required", "elsewhere/x")]).contains("not under any `path` entry"));
        assert!(msg(&[("path", "."), ("clean-on-miss", "true")]).contains("refusing to clean"));
        assert!(msg(&[("path", "~"), ("clean-on-miss", "true")]).contains("refusing to clean"));
        assert!(msg(&[("path", "*"), ("clean-on-miss", "true")]).contains("refusing to clean"));
        assert!(msg(&[("path", "**"), ("clean-on-miss", "true")]).contains("refusing to clean"));
        assert!(config(&[("path", "*.expected\nout"), ("clean-on-miss", "true")]).is_ok());
        assert!(msg(&[("path", "out"), ("reuse-env", "A-B")]).contains("not a variable name"));
        assert!(msg(&[("path", "out"), ("key", "Bad-KEY")]).starts_with("input `key`"));
    }

    #[test]
    fn defaults_and_lists() {
        let c = config(&[("path", "out\n\n models/*.pth \n"), ("hash-env", "B, A\nC"), ("native", "none")]).unwrap();
        assert_eq!(c.locate.path_lines, ["out", "models/*.pth"]);
        assert_eq!(c.locate.prefix, "exact-cache");
        assert_eq!(c.locate.compression, Compression::Zstd);
        assert_eq!(c.fingerprint.hash_env, ["B", "A", "C"]);
        assert!(c.fingerprint.native.is_empty());
        assert_eq!(c.locate.root_dirs(), [PathBuf::from("/ws/repo/out"), PathBuf::from("/ws/repo/models")]);
        let d =
            config(&[("path", "out"), ("required", "out/a.pth\nmodels/x.pth"), ("path", "out\nmodels/*.pth")]).unwrap();
        assert_eq!(d.locate.required.len(), 2);
        assert_eq!(d.fingerprint.native.len(), 5);
    }

    #[test]
    fn enumerated_inputs_ignore_case_and_name_what_they_accept() {
        let c = config(&[("path", "out"), ("backend", " GitHub "), ("verify-reuse", "WARN"), ("compression", "Gzip")])
            .unwrap();
        assert_eq!(
            (c.locate.store.kind(), c.save.verify_reuse, c.locate.compression),
            (StoreKind::Github, VerifyReuse::Warn, Compression::Gzip)
        );
        let c =
            config(&[("path", "out"), ("protocol", "V2"), ("explain-misses", "False"), ("preset", "Torch-Inductor")])
                .unwrap();
        assert_eq!((c.restore.explain_misses, c.preset), (Some(false), Some(Preset::TorchInductor)));
        assert!(c.locate.grow.is_some(), "the torch-inductor preset grows by default");
        let c = config(&[("path", "out"), ("preset", "torch-inductor"), ("grow", "FALSE")]).unwrap();
        assert!(c.locate.grow.is_none());
        let c = config(&[("path", "out"), ("grow", "true"), ("grow-max-layers", "16"), ("grow-max-share", "12.5%")])
            .unwrap();
        assert_eq!(c.locate.grow, Some(Limits { max_layers: 16, max_share: 0.125 }));
        assert_eq!(
            config(&[("path", "out"), ("grow", "true"), ("grow-max-share", "200")])
                .unwrap()
                .locate
                .grow
                .map(|l| l.max_share),
            Some(2.0)
        );

        let msg = |pairs: &[(&str, &str)]| config(pairs).unwrap_err().to_string();
        // Undocumented values are input errors, not silently mapped.
        let refused = [
            ("verify-reuse", "true", "`true` is not one of `off`, `warn`, `fail`"),
            ("preset", "inductor", "`inductor` is not one of `torch-inductor`"),
            ("preset", "none", "`none` is not one of `torch-inductor`"),
            ("grow", "yes", "`yes` is not one of `auto`, `true`, `false`"),
            ("grow-max-layers", "0", "`0` is not a whole number from 1 to 16"),
            ("grow-max-layers", "17", "`17` is not a whole number from 1 to 16"),
            ("grow-max-share", "-5%", "`-5%` is not a percentage above 0 (such as `50%`)"),
            ("grow-max-share", "half", "`half` is not a percentage above 0 (such as `50%`)"),
            ("explain-misses", "yes", "`yes` is not one of `auto`, `true`, `false`"),
            ("protocol", "v3", "`v3` is not one of `auto`, `v1`, `v2`"),
            ("secret-env", "OK 9BAD", "`9BAD` is not a variable name"),
        ];
        for (input, value, why) in refused {
            assert_eq!(msg(&[("path", "out"), (input, value)]), format!("input `{input}`: {why}"));
        }
    }

    #[test]
    fn s3_inputs_are_checked() {
        let msg = |pairs: &[(&str, &str)]| config(pairs).unwrap_err().to_string();
        assert_eq!(msg(&[("path", "out"), ("backend", "s3")]), "input `s3-bucket`: is required with `backend: s3`");
        assert!(msg(&[("path", "out"), ("s3-bucket", "Bad_Bucket")]).contains("is not a bucket name"));
        assert!(msg(&[("path", "out"), ("s3-bucket", "ab")]).contains("is not a bucket name"));
        assert!(
            msg(&[("path", "out"), ("s3-endpoint", "minio:9000")]).contains("is not an `http://` or `https://` URL")
        );
        assert!(msg(&[("path", "out"), ("s3-force-path-style", "yes")]).contains("is not `true` or `false`"));
        for prefix in ["ci~x/", "a//b/", "a/../b", "./ci"] {
            assert!(msg(&[("path", "out"), ("s3-prefix", prefix)]).contains("is not a key prefix"), "{prefix}");
        }
        assert!(config(&[("path", "out"), ("s3-prefix", "/ci/cache.v2/")]).is_ok());
        let c = config(&[
            ("path", "out"),
            ("backend", "s3"),
            ("s3-bucket", "ci-cache.v2"),
            ("s3-endpoint", "https://minio.internal:9000"),
            ("s3-force-path-style", "true"),
        ])
        .unwrap();
        assert_eq!(c.locate.store.kind(), StoreKind::S3);
    }

    #[test]
    fn defaults_come_from_inputs() {
        let c = config(&[("path", "out")]).unwrap();
        assert_eq!((c.locate.store.kind(), c.save.verify_reuse), (StoreKind::Local, VerifyReuse::Off));
        assert_eq!((c.restore.explain_misses, c.keep, c.save.prune, c.preset), (None, Keep { newest: 1 }, None, None));
        assert_eq!(c.locate.grow, None);
        let grown = config(&[("path", "out"), ("grow", "true")]).unwrap();
        assert_eq!(grown.locate.grow, Some(Limits { max_layers: 4, max_share: 0.5 }));
        assert_eq!(c.fingerprint.native, Facet::defaults().collect());
        assert!(!c.strict && !c.restore.lookup_only);
    }

    #[test]
    fn every_runner_of_a_pool_has_the_same_version() {
        let on_runner = |root: &str, lines: &str| {
            let env =
                Env::from_pairs([("HOME", format!("{root}/home")), ("RUNNER_TEMP", format!("{root}/_work/_temp"))]);
            let workspace = format!("{root}/_work/repo/repo");
            let raw = raw(&[("path", &lines.replace("<root>", root)), ("preset", "torch-inductor")]);
            Config::from_raw(&raw, &env, Path::new(&workspace), CommandName::Restore).unwrap()
        };
        let lines = "out\n<root>/_work/repo/repo/models\n~/.cache/x\n<root>/home/.cache/y\n<root>/_work/_temp/z";
        let (one, two) = (on_runner("/opt/runner-1", lines), on_runner("/opt/runner-2", lines));
        assert_eq!(
            one.locate.path_lines,
            [
                "out",
                "models",
                "~/.cache/x",
                "~/.cache/y",
                "<runner-temp>/z",
                "<exact-cache-dir>/torch-inductor/inductor",
                "<exact-cache-dir>/torch-inductor/triton"
            ]
        );
        assert_eq!(one.locate.version(), two.locate.version());
        // Each still restores to its own places.
        assert_eq!(
            one.locate.root_dirs()[5],
            PathBuf::from("/opt/runner-1/_work/_exact-cache/torch-inductor/inductor")
        );
        assert_eq!(two.locate.root_dirs()[1], PathBuf::from("/opt/runner-2/_work/repo/repo/models"));
    }

    #[test]
    fn a_key_without_project_inputs_is_an_input_error_naming_the_fix() {
        let err = config(&[("path", "out")]).unwrap().check_key_inputs().unwrap_err().to_string();
        assert!(err.starts_with("input `hash-files`: the key holds no project input"), "{err}");
        assert!(err.contains("`allow-machine-only-key: true`"), "{err}");
        // `native` and `variant` are not project inputs.
        let machine = config(&[("path", "out"), ("native", "os"), ("variant", "v1")]).unwrap();
        assert!(machine.check_key_inputs().is_err());
        let allowed = config(&[("path", "out"), ("allow-machine-only-key", "true")]).unwrap();
        assert!(allowed.check_key_inputs().is_ok());
        for project in [
            ("hash-files", "gen.py"),
            ("hash-env", "SEED"),
            ("hash-commands", "gcc --version"),
            ("python", "python3"),
            ("preset", "torch-inductor"),
        ] {
            assert!(config(&[("path", "out"), project]).unwrap().check_key_inputs().is_ok(), "{project:?}");
        }
    }

    #[test]
    fn an_empty_prefix_is_an_input_error() {
        for empty in ["", "  "] {
            let err = config(&[("path", "out"), ("prefix", empty)]).unwrap_err().to_string();
            assert!(err.starts_with("input `prefix`: is empty: name this cache"), "{err}");
        }
    }
}
