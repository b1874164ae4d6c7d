//! Inputs → one validated [`Config`].
//!
//! [`INPUTS`] is the single list of inputs: action mode reads each as `INPUT_<NAME>`, the CLI
//! offers each as `--<name>`, and tests check `action.yml` and the README against it. Raw
//! values ([`RawInputs`]) are strings as users typed them; [`Config::from_raw`] parses and
//! validates them, and every error names the input and what is wrong with it.
//!
//! Rules for values: a default is written once, in [`INPUTS`]; an enumerated input accepts its
//! documented names only, with surrounding whitespace ignored and ASCII case not significant
//! ([`crate::choice`]); a boolean is `true`, `True`, `TRUE`, `false`, `False` or `FALSE`, as the
//! official toolkit's `getBooleanInput` reads it.

use crate::archive::{CleanGuard, Compression};
use crate::backend::{BackendChoice, Protocol, S3Inputs};
use crate::choice::{self, Named};
use crate::env::{self, Env};
use crate::fingerprint::{Facet, FingerprintSpec};
use crate::keys;
use crate::outcome::Output;
use crate::paths::{Locations, PathError, PatternSet};
use crate::preset::{Preset, PresetPlan};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// Newline-separated lines.
    Lines,
    /// Names separated by commas, spaces or newlines.
    List,
    Bool,
    Text,
}

/// Which entry points take an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// fingerprint, restore and save.
    Fingerprint,
    /// restore and save.
    Cache,
    Restore,
    Save,
    /// Only the root action (read by its restore step and its post step).
    Root,
}

/// The CLI's commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandName {
    Fingerprint,
    Restore,
    Save,
    Explain,
    List,
    Prune,
}

/// What reads inputs: an entry point of the action, or a command of the CLI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    Action(Entry),
    Cli(CommandName),
}

impl Scope {
    /// Whether `reader` takes the inputs of this scope.
    pub fn taken_by(self, reader: Reader) -> bool {
        use CommandName as C;
        use Reader::{Action, Cli};
        match self {
            Scope::Fingerprint => true,
            Scope::Cache => !matches!(reader, Action(Entry::Fingerprint) | Cli(C::Fingerprint)),
            Scope::Restore => matches!(reader, Action(Entry::Root | Entry::Restore) | Cli(C::Restore | C::Explain)),
            Scope::Save => matches!(reader, Action(Entry::Save) | Cli(C::Save)),
            // The root action's restore (main) and save (post) steps both read these.
            Scope::Root => matches!(reader, Action(Entry::Root) | Cli(C::Restore | C::Save)),
        }
    }
}

/// The action's entry points (`action.yml` files).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// `uses: owner/exact-cache@sha`: restore in `main`, save in `post`.
    Root,
    Restore,
    Save,
    Fingerprint,
}

impl Entry {
    pub const ALL: [Entry; 4] = [Entry::Root, Entry::Restore, Entry::Save, Entry::Fingerprint];

    /// The directory of its `action.yml`, relative to the repository root.
    pub fn dir(self) -> &'static str {
        match self {
            Entry::Root => ".",
            Entry::Restore => "restore",
            Entry::Save => "save",
            Entry::Fingerprint => "fingerprint",
        }
    }

    /// Whether this entry point declares an input of `scope`.
    pub fn takes(self, scope: Scope) -> bool {
        scope.taken_by(Reader::Action(self))
    }

    /// Whether this entry point declares the input `name`.
    pub fn declares(self, name: &str) -> bool {
        input_spec(name).is_some_and(|spec| self.takes(spec.scope))
    }
}

#[derive(Clone, Copy, Debug)]
pub struct OutputSpec {
    pub output: Output,
    pub entries: &'static [Entry],
    pub description: &'static str,
}

impl OutputSpec {
    pub const fn name(&self) -> &'static str {
        self.output.name()
    }
}

const RESTORING: &[Entry] = &[Entry::Root, Entry::Restore];

/// Every step output, and which entry points set it.
pub const OUTPUTS: &[OutputSpec] = &[
    OutputSpec {
        output: Output::CacheHit,
        entries: RESTORING,
        description: "`true` when an entry with exactly this key exists (and, unless `lookup-only`, was downloaded).",
    },
    OutputSpec {
        output: Output::Reused,
        entries: RESTORING,
        description: "`true` when the entry was restored, its manifest verified, and every file is in place.",
    },
    OutputSpec {
        output: Output::Key,
        entries: &[Entry::Root, Entry::Restore, Entry::Save, Entry::Fingerprint],
        description: "The full key, `<prefix>-<64 lowercase hex>`.",
    },
    OutputSpec {
        output: Output::FingerprintFile,
        entries: &[Entry::Root, Entry::Restore, Entry::Fingerprint],
        description: "Path of a JSON file with every fingerprint component and its value.",
    },
    OutputSpec {
        output: Output::MissReason,
        entries: RESTORING,
        description: "`none`, `not-found`, `prefix-only`, `manifest-mismatch`, `corrupt`, `incomplete`, `timeout`, \
             `service-error`, `lookup-only`, `io-error`, or `unsupported-platform` (the runner has no exact-cache \
             binary: the action warns and goes on).",
    },
    OutputSpec {
        output: Output::RestoredFiles,
        entries: RESTORING,
        description: "Number of files and symlinks put in place.",
    },
    OutputSpec {
        output: Output::RestoredBytes,
        entries: RESTORING,
        description: "Bytes of file content put in place.",
    },
    OutputSpec {
        output: Output::ExtraFiles,
        entries: RESTORING,
        description: "On a reuse: number of files that were already under `path`, are not in the entry, and were \
                      kept (the log and the summary name the first few); `0` otherwise.",
    },
    OutputSpec {
        output: Output::Layers,
        entries: RESTORING,
        description: "With `grow`: how many layers were applied on top of the base (the log and the summary show \
                      each with its size); `0` otherwise.",
    },
    OutputSpec {
        output: Output::CleanedFiles,
        entries: RESTORING,
        description: "With `clean-on-miss`, on a miss: number of stale files and links removed under `path` (the log \
                      names the first few, the summary all of them); `0` otherwise.",
    },
    OutputSpec {
        output: Output::Saved,
        entries: &[Entry::Save],
        description: "`true` when this step created an entry (a base, or with `grow` a layer).",
    },
    OutputSpec {
        output: Output::SaveResult,
        entries: &[Entry::Save],
        description: "`saved`, `layer` (`grow` saved what the job added as a layer of the restored stack), \
                      `exists`, `skipped-hit`, `read-only`, `rate-limited`, `incomplete`, `secret-found`, \
                      `error`, or `unsupported-platform` (the runner has no exact-cache binary: nothing saved).",
    },
    OutputSpec {
        output: Output::ChangedFiles,
        entries: &[Entry::Save],
        description: "With `verify-reuse`: the files under `path` added, changed or removed since a warm \
                      restore, one per line.",
    },
];

#[derive(Clone, Copy, Debug)]
pub struct InputSpec {
    pub name: &'static str,
    pub kind: InputKind,
    pub scope: Scope,
    pub default: &'static str,
    pub description: &'static str,
}

const fn input(
    name: &'static str,
    kind: InputKind,
    scope: Scope,
    default: &'static str,
    description: &'static str,
) -> InputSpec {
    InputSpec { name, kind, scope, default, description }
}

use InputKind::*;
use Scope::*;

pub const INPUTS: &[InputSpec] = &[
    input(
        "path",
        Lines,
        Fingerprint,
        "",
        "Files, directories or globs to cache, one per line: workspace-relative, absolute, or `~/…`; `!` excludes. \
         Optional with a `preset`.",
    ),
    input(
        "prefix",
        Text,
        Fingerprint,
        DEFAULT_PREFIX,
        "Key namespace, e.g. `pt-cxx-fixtures-v4` (ASCII letters, digits, `-._`; lowercased).",
    ),
    input(
        "hash-files",
        Lines,
        Fingerprint,
        "",
        "Globs whose content and executable bit enter the fingerprint (generator scripts, inputs, lockfiles).",
    ),
    input("hash-env", List, Fingerprint, "", "Names of environment variables whose values enter the fingerprint."),
    input(
        "hash-commands",
        Lines,
        Fingerprint,
        "",
        "Commands whose stdout enters the fingerprint, one per line (e.g. `gcc --version`); a failing command is an \
         error.",
    ),
    input(
        "native",
        List,
        Fingerprint,
        "os,arch,isa,libc,compiler",
        "Native facets to include: os, arch, isa, cpu-flags, libc, compiler, gpu, cuda (or `none`).",
    ),
    input(
        "compilers",
        Lines,
        Fingerprint,
        "",
        "Compiler commands for the `compiler` facet, one per line (default: `$CC` or `cc`, and `$CXX` or `c++`).",
    ),
    input(
        "python",
        Text,
        Fingerprint,
        "",
        "Python interpreter whose version and installed distributions enter the fingerprint (empty: none).",
    ),
    input(
        "python-exclude",
        List,
        Fingerprint,
        "",
        "Distribution names left out of the Python facet (e.g. the editable project whose source is hashed already).",
    ),
    input("variant", Text, Fingerprint, "", "Free-form build variant (`cuda-debug`, `lsan`, …)."),
    input(
        "preset",
        Text,
        Fingerprint,
        "",
        "`torch-inductor`: cache TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR (exported to later steps) and add what \
         decides whether compiled kernels are valid to the fingerprint.",
    ),
    input(
        "fingerprint-file",
        Text,
        Fingerprint,
        "",
        "Where to write the fingerprint JSON (default: `$RUNNER_TEMP/exact-cache/<key>.json`).",
    ),
    input(
        "required",
        Lines,
        Cache,
        "",
        "Paths that must exist for an entry to be complete, checked on save and on restore.",
    ),
    input("compression", Text, Cache, "zstd", "Archive compression: `zstd`, `gzip` or `none`."),
    input(
        "strict",
        Bool,
        Cache,
        "false",
        "Turn cache-service trouble (errors, timeouts, rate limits) into step failures.",
    ),
    input("backend", Text, Cache, "auto", "`auto`, `github`, `local` or `s3`."),
    input(
        "protocol",
        Text,
        Cache,
        "auto",
        "Cache service protocol: `auto`, `v1` or `v2` (`auto` follows the official client's choice).",
    ),
    input(
        "local-dir",
        Text,
        Cache,
        "",
        "Directory of the local backend (default: `$EXACT_CACHE_DIR`, else the user cache directory).",
    ),
    input(
        "s3-bucket",
        Text,
        Cache,
        "",
        "With `backend: s3`: the bucket. Credentials come only from the standard AWS environment (keys and session \
         token, a web-identity role such as GitHub OIDC, instance metadata), never from inputs.",
    ),
    input("s3-prefix", Text, Cache, "", "With `backend: s3`: a key prefix inside the bucket (e.g. `ci-cache/`)."),
    input(
        "s3-region",
        Text,
        Cache,
        "",
        "With `backend: s3`: the bucket's region (default: `AWS_REGION`, `AWS_DEFAULT_REGION`, else `us-east-1`).",
    ),
    input(
        "s3-endpoint",
        Text,
        Cache,
        "",
        "With `backend: s3`: an S3-compatible endpoint such as `https://minio.internal:9000` (default: \
         `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, else AWS).",
    ),
    input(
        "s3-force-path-style",
        Text,
        Cache,
        "",
        "With `backend: s3`: `true` to address the bucket as `<endpoint>/<bucket>` instead of \
         `<bucket>.<endpoint>` (default: `AWS_S3_FORCE_PATH_STYLE`; always for an IP address or `localhost`).",
    ),
    input(
        "verify-reuse",
        Text,
        Cache,
        "off",
        "At save time after a warm restore, report files under `path` that changed since the restore: `off`, `warn` \
         or `fail` (fails the step).",
    ),
    input(
        "grow",
        Text,
        Cache,
        "auto",
        "Keep what a warm run adds: on a hit, the post step saves the files the job added or changed under `path` \
         as a layer of the same exact key, and a restore applies the base and its layers in order. Only for \
         content-addressed caches (every file named by a hash of what made it). `auto` (on with `preset: \
         torch-inductor`), `true` or `false`.",
    ),
    input(
        "grow-max-layers",
        Text,
        Cache,
        "4",
        "With `grow`: how many layers a stack may have (1 to 16) before the next save compacts it into one new base.",
    ),
    input(
        "grow-max-share",
        Text,
        Cache,
        "50%",
        "With `grow`: compact instead of adding a layer when the layers would hold more than this share of the \
         base's bytes (a percentage, e.g. `50%`).",
    ),
    input(
        "prune",
        Bool,
        Cache,
        "false",
        "After a save, delete older entries with the same prefix on this ref (needs `actions: write`).",
    ),
    input("prune-keep", Text, Cache, "1", "How many of the newest entries `prune` keeps, the new one included."),
    input(
        "github-token",
        Text,
        Cache,
        "${{ github.token }}",
        "Token for the REST calls of `explain-misses` and `prune`.",
    ),
    // Fingerprint scope: the fingerprint step prints `hash-env` values too, so it masks them.
    input(
        "secret-env",
        List,
        Fingerprint,
        "",
        "Names of environment variables whose values must never be saved or printed: every step masks them, and a \
         save finding one in a file (as it does the runtime token and `GITHUB_TOKEN`) refuses to save \
         (`save-result=secret-found`).",
    ),
    input(
        "clean-on-miss",
        Bool,
        Restore,
        "false",
        "On a miss, remove stale files under `path` before generation starts, naming each. Never a file the \
         repository tracks (asked of git; without git or outside a work tree, the log says so). Only beneath the \
         workspace, `RUNNER_TEMP` or the home directory, in a preset's cache directory, or in a directory \
         exact-cache restored into or saved from before (it leaves a `.exact-cache-root` marker); never the \
         workspace, home or their parents. Anything else is an input error.",
    ),
    input(
        "reuse-env",
        Text,
        Restore,
        "",
        "Name of an environment variable exported as `1` when reused, `0` otherwise.",
    ),
    input("lookup-only", Bool, Restore, "false", "Only check whether the entry exists; download nothing."),
    input("fail-on-cache-miss", Bool, Restore, "false", "Fail the step when the entry is not reused."),
    input(
        "explain-misses",
        Text,
        Restore,
        "auto",
        "On a miss, diff the newest entry with the same prefix against this fingerprint: `auto` (when a token or the \
         local backend allows listing), `true` or `false`.",
    ),
    input("key", Text, Save, "", "Save under this key (the restore step's `key` output) instead of computing it."),
    input(
        "save-on-failure",
        Bool,
        Root,
        "false",
        "Also save in the post step when the job failed (by default only after a successful job).",
    ),
];

/// The `prefix` of whoever does not set one: shared by every such workflow and job of the
/// repository, so `prune` refuses it.
pub const DEFAULT_PREFIX: &str = "exact-cache";

pub fn input_spec(name: &str) -> Option<&'static InputSpec> {
    INPUTS.iter().find(|i| i.name == name)
}

/// Inputs of actions/cache that mean something else here: the name as the runner passes it
/// (`INPUT_<NAME>` lowercased), as written in a workflow, and what to do instead.
const ACTIONS_CACHE_INPUTS: [(&str, &str, &str); 5] = [
    (
        "key",
        "key",
        "the key is computed from the fingerprint here: move the files of your `hashFiles(...)` to `hash-files`, \
         the rest of the key to `prefix`, `hash-env` or `variant`, and remove `key`",
    ),
    (
        "restore-keys",
        "restore-keys",
        "exact-cache never falls back to another key: an entry is reused only under exactly this fingerprint; \
         remove `restore-keys` (`explain-misses` says why a key missed)",
    ),
    (
        "enablecrossosarchive",
        "enableCrossOsArchive",
        "the fingerprint (`native`: os, arch, …) decides which runners share an entry; remove it",
    ),
    ("upload-chunk-size", "upload-chunk-size", "exact-cache sizes its own uploads; remove it"),
    (
        "save-always",
        "save-always",
        "write `save-on-failure: true` on the root action, or run the `save` entry point with `if: always()`",
    ),
];

/// An actions/cache input given to an entry point that does not declare it.
#[derive(Debug)]
pub struct ForeignInput {
    pub name: &'static str,
    pub hint: &'static str,
}

fn foreign_inputs_message(inputs: &[ForeignInput]) -> String {
    let each: Vec<String> =
        inputs.iter().map(|i| format!("input `{}` (from actions/cache): {}", i.name, i.hint)).collect();
    each.join("; ")
}

/// Check the names of the inputs an entry point was given (`(name, blank)` as
/// [`Runner::given_input_names`](crate::runner::Runner::given_input_names) reports them): an
/// actions/cache input with a value that this entry point does not declare is an error; any
/// other undeclared input is ignored, with a warning (returned) naming the closest one declared.
pub fn check_input_names(given: &[(String, bool)], entry: Entry) -> Result<Vec<String>, ConfigError> {
    let declared: Vec<&str> = INPUTS.iter().filter(|i| entry.takes(i.scope)).map(|i| i.name).collect();
    let mut foreign = Vec::new();
    let mut warnings = Vec::new();
    let mut given: Vec<&(String, bool)> = given.iter().collect();
    given.sort();
    for (name, blank) in given {
        if declared.contains(&name.as_str()) {
            continue;
        }
        if let Some(&(_, shown, hint)) = ACTIONS_CACHE_INPUTS.iter().find(|(n, _, _)| n == name) {
            if *blank {
                warnings.push(format!("input `{shown}` (from actions/cache) is empty and ignored: {hint}"));
            } else {
                foreign.push(ForeignInput { name: shown, hint });
            }
            continue;
        }
        let mut message = if input_spec(name).is_some() {
            format!("input `{name}` is not an input of this entry point and is ignored")
        } else {
            format!("unknown input `{name}` is ignored")
        };
        if let Some(near) = closest(name, &declared) {
            message.push_str(&format!("; did you mean `{near}`?"));
        }
        warnings.push(message);
    }
    match foreign.is_empty() {
        true => Ok(warnings),
        false => Err(ConfigError::ActionsCacheInputs { inputs: foreign }),
    }
}

/// The name in `names` nearest to `name` by edit distance, when near enough to be a typo.
fn closest<'a>(name: &str, names: &[&'a str]) -> Option<&'a str> {
    let (distance, near) = names.iter().map(|n| (edit_distance(name, n), *n)).min()?;
    (distance <= (name.len() / 3).max(1)).then_some(near)
}

/// Levenshtein distance over characters, with `_` and `-` the same (the runner turns spaces
/// into `_`).
fn edit_distance(a: &str, b: &str) -> usize {
    let norm = |c: char| if c == '_' { '-' } else { c };
    let b: Vec<char> = b.chars().map(norm).collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().map(norm).enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("input `{name}` is required")]
    Missing { name: &'static str },
    #[error("input `{name}`: {detail}")]
    Invalid { name: &'static str, detail: String },
    #[error("input `{name}`")]
    Path {
        name: &'static str,
        #[source]
        source: PathError,
    },
    #[error("{}", foreign_inputs_message(inputs))]
    ActionsCacheInputs { inputs: Vec<ForeignInput> },
}

/// Input values as given, by input name. Unset and blank inputs are absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawInputs {
    values: BTreeMap<String, String>,
}

impl RawInputs {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str).filter(|v| !v.trim().is_empty())
    }

    pub fn set(&mut self, name: &str, value: impl Into<String>) {
        self.values.insert(name.to_owned(), value.into());
    }

    /// Whether `name` was given, but blank (`--prefix=`, or `prefix: ''` in a workflow).
    fn given_blank(&self, name: &str) -> bool {
        self.values.get(name).is_some_and(|v| v.trim().is_empty())
    }

    /// `other`'s values replace ours.
    pub fn overlay(&mut self, other: RawInputs) {
        self.values.extend(other.values);
    }

    fn lines(&self, name: &str) -> Vec<String> {
        self.get(name)
            .map(|v| v.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default()
    }

    fn list(&self, name: &str) -> Vec<String> {
        self.get(name).map(split_list).unwrap_or_default()
    }

    /// The value, else the input's default from [`INPUTS`]; `None` when both are blank.
    fn value_or_default(&self, name: &str) -> Option<&str> {
        self.get(name).or_else(|| input_spec(name).map(|spec| spec.default).filter(|d| !d.trim().is_empty()))
    }

    /// An enumerated input that may be left unset (no default).
    fn optional_choice<T: Named>(&self, name: &'static str) -> Result<Option<T>, ConfigError> {
        let Some(value) = self.value_or_default(name).map(str::trim) else {
            return Ok(None);
        };
        choice::parse(value).map(Some).ok_or_else(|| ConfigError::Invalid {
            name,
            detail: format!("`{value}` is not one of {}", choice::names::<T>()),
        })
    }

    /// An enumerated input with a default.
    fn choice<T: Named>(&self, name: &'static str) -> Result<T, ConfigError> {
        Ok(self.optional_choice(name)?.expect("enumerated inputs with a default in INPUTS"))
    }

    /// Names of environment variables.
    fn var_names(&self, name: &'static str) -> Result<Vec<String>, ConfigError> {
        let names = self.list(name);
        match names.iter().find(|n| !env::is_var_name(n)) {
            Some(bad) => Err(ConfigError::Invalid { name, detail: format!("`{bad}` is not a variable name") }),
            None => Ok(names),
        }
    }

    fn text(&self, name: &str) -> Option<String> {
        self.get(name).map(|v| v.trim().to_owned())
    }

    fn bool(&self, name: &'static str) -> Result<bool, ConfigError> {
        match self.value_or_default(name).map(str::trim) {
            None => Ok(false),
            Some("true" | "True" | "TRUE") => Ok(true),
            Some("false" | "False" | "FALSE") => Ok(false),
            Some(other) => Err(ConfigError::Invalid { name, detail: format!("`{other}` is not `true` or `false`") }),
        }
    }
}

/// Everything a command needs, validated.
#[derive(Clone, Debug)]
pub struct Config {
    pub fingerprint: FingerprintSpec,
    pub prefix: String,
    /// The `path` lines as written (they enter the version).
    pub path_lines: Vec<String>,
    pub paths: PatternSet,
    pub required: Vec<PathBuf>,
    pub compression: Compression,
    pub strict: bool,
    pub backend: BackendChoice,
    pub protocol: Protocol,
    pub local_dir: Option<PathBuf>,
    /// The `s3-*` inputs (resolved against the environment when the backend is built).
    pub s3: S3Inputs,
    pub clean_on_miss: bool,
    /// What `clean-on-miss` may touch.
    pub clean_guard: CleanGuard,
    pub reuse_env: Option<String>,
    pub lookup_only: bool,
    pub fail_on_cache_miss: bool,
    pub key: Option<String>,
    pub save_on_failure: bool,
    pub fingerprint_file: Option<PathBuf>,
    pub preset: Option<Preset>,
    /// Variables exported to later steps on restore (a preset's cache directories).
    pub exports: Vec<(String, String)>,
    pub verify_reuse: VerifyReuse,
    /// `None`: automatic (when listing is possible).
    pub explain_misses: Option<bool>,
    /// `grow`: restore applies layers, and the post step of a warm run saves one.
    pub grow: bool,
    pub grow_max_layers: u32,
    /// `grow-max-share` as a fraction.
    pub grow_max_share: f64,
    pub prune: bool,
    pub prune_keep: usize,
    pub github_token: Option<String>,
    /// Variables whose values a save refuses to archive (besides the job's tokens).
    pub secret_env: Vec<String>,
}

/// Names separated by commas, spaces or newlines.
fn split_list(value: &str) -> Vec<String> {
    value.split([',', ' ', '\t', '\n', '\r']).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

crate::choice::named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum VerifyReuse {
        Off => "off",
        Warn => "warn",
        Fail => "fail",
    }
}

crate::choice::named_enum! {
    /// The `grow` input; [`Config::grow`] holds it resolved.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Grow {
        Auto => "auto",
        True => "true",
        False => "false",
    }
}

crate::choice::named_enum! {
    /// The `explain-misses` input; [`Config::explain_misses`] holds it as `None` (auto) or a bool.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum ExplainMisses {
        Auto => "auto",
        True => "true",
        False => "false",
    }
}

/// What enters the fingerprint: the `hash-*` inputs, the native facets, Python, the variant,
/// and what a preset adds.
fn fingerprint_spec(
    raw: &RawInputs,
    env: &Env,
    locations: &Locations,
    preset: Option<&PresetPlan>,
) -> Result<FingerprintSpec, ConfigError> {
    let mut fingerprint = FingerprintSpec::new(locations.clone());
    fingerprint.hash_files = raw.lines("hash-files");
    fingerprint.hash_env = raw.var_names("hash-env")?;
    fingerprint.hash_commands = raw.lines("hash-commands");
    fingerprint.native = native_facets(raw)?;
    fingerprint.compilers = match raw.get("compilers") {
        Some(_) => raw.lines("compilers"),
        None => vec![env.non_empty("CC").unwrap_or("cc").to_owned(), env.non_empty("CXX").unwrap_or("c++").to_owned()],
    };
    if raw.get("compilers").is_some() {
        fingerprint.named_compilers = fingerprint.compilers.iter().cloned().collect();
    }
    fingerprint.python = raw.text("python");
    fingerprint.python_exclude = raw.list("python-exclude");
    fingerprint.variant = raw.text("variant");
    if let Some(plan) = preset {
        plan.apply(&mut fingerprint, env);
    }
    Ok(fingerprint)
}

/// The `native` input: facet names, or `none`.
fn native_facets(raw: &RawInputs) -> Result<BTreeSet<Facet>, ConfigError> {
    let facets = split_list(raw.value_or_default("native").unwrap_or_default());
    if facets.len() == 1 && facets[0].eq_ignore_ascii_case("none") {
        return Ok(BTreeSet::new());
    }
    let unknown = |n: &String| ConfigError::Invalid {
        name: "native",
        detail: format!("unknown facet `{n}`; known facets: {}", Facet::ALL.map(Facet::name).join(", ")),
    };
    facets.iter().map(|n| choice::parse(n).ok_or_else(|| unknown(n))).collect()
}

/// The `required` paths, each under some `path` entry (else no entry could contain it).
fn required_paths(raw: &RawInputs, locations: &Locations, paths: &PatternSet) -> Result<Vec<PathBuf>, ConfigError> {
    let mut required = Vec::new();
    for line in raw.lines("required") {
        let abs = locations.resolve(&line).map_err(|source| ConfigError::Path { name: "required", source })?;
        let covered = paths.includes.iter().any(|p| {
            abs.starts_with(&p.base)
                && p.glob.as_ref().is_none_or(|g| {
                    // For a glob root the required path must be a match or lie under one.
                    abs.ancestors().take_while(|a| a.starts_with(&p.base)).any(|a| g.is_match(a))
                })
        });
        if !covered {
            return Err(ConfigError::Invalid {
                name: "required",
                detail: format!("`{line}` is not under any `path` entry, so no entry could contain it"),
            });
        }
        required.push(abs);
    }
    Ok(required)
}

/// `clean-on-miss` is an input error for a `path` entry the guard would not clean.
fn check_cleanable(guard: &CleanGuard, paths: &PatternSet) -> Result<(), ConfigError> {
    for p in &paths.includes {
        if let Err(reason) = guard.check(p) {
            return Err(ConfigError::Invalid {
                name: "clean-on-miss",
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

/// `prune-keep`: a whole number of at least 1.
/// The `s3-*` inputs, checked: a bucket name S3 accepts, an endpoint that is an `http(s)` URL.
fn s3_inputs(raw: &RawInputs) -> Result<S3Inputs, ConfigError> {
    let text = |name: &str| raw.text(name).filter(|v| !v.is_empty());
    let bucket = text("s3-bucket");
    if let Some(b) = &bucket {
        let valid = (3..=63).contains(&b.len())
            && b.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
            && b.starts_with(|c: char| c.is_ascii_alphanumeric())
            && b.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !valid {
            return Err(ConfigError::Invalid {
                name: "s3-bucket",
                detail: format!("`{b}` is not a bucket name (3 to 63 lowercase letters, digits, `.` and `-`)"),
            });
        }
    }
    let endpoint = text("s3-endpoint");
    if let Some(e) = &endpoint {
        let parsed = url::Url::parse(e).ok().filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
        if parsed.is_none() {
            return Err(ConfigError::Invalid {
                name: "s3-endpoint",
                detail: format!("`{e}` is not an `http://` or `https://` URL"),
            });
        }
    }
    let prefix = text("s3-prefix");
    if let Some(p) = &prefix {
        let segments: Vec<&str> = p.trim_matches('/').split('/').collect();
        let valid = p.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'/'))
            && segments.iter().all(|s| !s.is_empty() && *s != "." && *s != "..");
        if !valid {
            return Err(ConfigError::Invalid {
                name: "s3-prefix",
                detail: format!(
                    "`{p}` is not a key prefix: use ASCII letters, digits, `-`, `_`, `.` and `/` between non-empty \
                     segments other than `.` and `..`"
                ),
            });
        }
    }
    let force_path_style = match text("s3-force-path-style") {
        None => None,
        Some(_) => Some(raw.bool("s3-force-path-style")?),
    };
    Ok(S3Inputs { bucket, prefix, region: text("s3-region"), endpoint, force_path_style })
}

fn grow_max_layers(raw: &RawInputs) -> Result<u32, ConfigError> {
    let n = raw.value_or_default("grow-max-layers").unwrap_or_default().trim();
    n.parse::<u32>().ok().filter(|n| (1..=keys::MAX_LAYERS).contains(n)).ok_or_else(|| ConfigError::Invalid {
        name: "grow-max-layers",
        detail: format!("`{n}` is not a whole number from 1 to {}", keys::MAX_LAYERS),
    })
}

/// `50%`, `50` or `12.5%` → 0.5, 0.5, 0.125.
fn grow_max_share(raw: &RawInputs) -> Result<f64, ConfigError> {
    let text = raw.value_or_default("grow-max-share").unwrap_or_default().trim();
    let number = text.strip_suffix('%').unwrap_or(text).trim();
    number.parse::<f64>().ok().filter(|p| p.is_finite() && *p > 0.0).map(|p| p / 100.0).ok_or_else(|| {
        ConfigError::Invalid {
            name: "grow-max-share",
            detail: format!("`{text}` is not a percentage above 0 (such as `50%`)"),
        }
    })
}

fn prune_keep(raw: &RawInputs) -> Result<usize, ConfigError> {
    let n = raw.value_or_default("prune-keep").unwrap_or_default().trim();
    n.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| ConfigError::Invalid {
        name: "prune-keep",
        detail: format!("`{n}` is not a whole number of at least 1"),
    })
}

impl Config {
    /// Validate `raw`. `workspace` is where relative paths point.
    pub fn from_raw(raw: &RawInputs, env: &Env, workspace: &Path) -> Result<Self, ConfigError> {
        let locations = Locations { workspace: workspace.to_owned(), home: env.home_dir() };

        let preset: Option<Preset> = raw.optional_choice("preset")?;
        let preset_plan = preset.map(|p| p.plan(env, &locations));
        let mut path_lines = raw.lines("path");
        if let Some(plan) = &preset_plan {
            path_lines.extend(plan.path_lines.iter().cloned());
        }
        if path_lines.iter().all(|l| l.starts_with('!')) {
            return Err(ConfigError::Missing { name: "path" });
        }
        let paths =
            PatternSet::parse(&path_lines, &locations).map_err(|source| ConfigError::Path { name: "path", source })?;

        if raw.given_blank("prefix") {
            return Err(ConfigError::Invalid {
                name: "prefix",
                detail: format!(
                    "is empty: name this cache (e.g. `fixtures-v1`), or leave `prefix` out for the default \
                     `{DEFAULT_PREFIX}`"
                ),
            });
        }
        let prefix = keys::normalize_prefix(raw.value_or_default("prefix").unwrap_or_default())
            .map_err(|detail| ConfigError::Invalid { name: "prefix", detail })?;

        let compression: Compression = raw.choice("compression")?;
        let fingerprint = fingerprint_spec(raw, env, &locations, preset_plan.as_ref())?;
        let required = required_paths(raw, &locations, &paths)?;

        let clean_on_miss = raw.bool("clean-on-miss")?;
        let preset_dirs: Vec<PathBuf> = preset_plan
            .as_ref()
            .map(|p| p.exports.iter().map(|(_, dir)| PathBuf::from(dir)).collect())
            .unwrap_or_default();
        let runner_temp = env.non_empty("RUNNER_TEMP").map(PathBuf::from);
        let clean_guard = CleanGuard::new(workspace, locations.home.as_deref(), runner_temp.as_deref(), &preset_dirs);
        if clean_on_miss {
            check_cleanable(&clean_guard, &paths)?;
        }

        let reuse_env = raw.text("reuse-env");
        if let Some(name) = reuse_env.as_deref().filter(|n| !env::is_var_name(n)) {
            return Err(ConfigError::Invalid { name: "reuse-env", detail: format!("`{name}` is not a variable name") });
        }

        let backend: BackendChoice = raw.choice("backend")?;
        let protocol: Protocol = raw.choice("protocol")?;
        let s3 = s3_inputs(raw)?;
        if backend == BackendChoice::S3 && s3.bucket.is_none() {
            return Err(ConfigError::Invalid { name: "s3-bucket", detail: "is required with `backend: s3`".into() });
        }

        let key = raw.text("key");
        if let Some(k) = &key {
            keys::check_key(k)
                .map_err(|detail| ConfigError::Invalid { name: "key", detail: format!("`{k}` {detail}") })?;
        }

        let resolve_opt = |name: &'static str| -> Result<Option<PathBuf>, ConfigError> {
            raw.text(name)
                .map(|p| locations.resolve(&p).map_err(|source| ConfigError::Path { name, source }))
                .transpose()
        };

        Ok(Config {
            fingerprint,
            prefix,
            path_lines: path_lines.clone(),
            paths,
            required,
            compression,
            strict: raw.bool("strict")?,
            backend,
            protocol,
            local_dir: resolve_opt("local-dir")?,
            s3,
            clean_on_miss,
            clean_guard,
            reuse_env,
            lookup_only: raw.bool("lookup-only")?,
            fail_on_cache_miss: raw.bool("fail-on-cache-miss")?,
            key,
            save_on_failure: raw.bool("save-on-failure")?,
            fingerprint_file: resolve_opt("fingerprint-file")?,
            preset,
            exports: preset_plan.map(|p| p.exports).unwrap_or_default(),
            verify_reuse: raw.choice("verify-reuse")?,
            explain_misses: match raw.choice("explain-misses")? {
                ExplainMisses::Auto => None,
                ExplainMisses::True => Some(true),
                ExplainMisses::False => Some(false),
            },
            grow: match raw.choice("grow")? {
                Grow::Auto => preset == Some(Preset::TorchInductor),
                Grow::True => true,
                Grow::False => false,
            },
            grow_max_layers: grow_max_layers(raw)?,
            grow_max_share: grow_max_share(raw)?,
            prune: raw.bool("prune")?,
            prune_keep: prune_keep(raw)?,
            github_token: raw.text("github-token").filter(|t| !t.starts_with("${{")),
            secret_env: raw.var_names("secret-env")?,
        })
    }

    /// The cache service version for these paths and this compression.
    pub fn version(&self) -> String {
        keys::cache_version(&self.path_lines, self.compression)
    }

    /// Destination of each `path` root.
    pub fn root_dirs(&self) -> Vec<PathBuf> {
        self.paths.includes.iter().map(|p| p.base.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(pairs: &[(&str, &str)]) -> RawInputs {
        let mut r = RawInputs::default();
        for (k, v) in pairs {
            r.set(k, *v);
        }
        r
    }

    fn config(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_raw(&raw(pairs), &Env::from_pairs([("HOME", "/home/u")]), Path::new("/ws/repo"))
    }

    #[test]
    fn bad_inputs_name_the_input() {
        let msg = |pairs: &[(&str, &str)]| config(pairs).unwrap_err().to_string();
        assert_eq!(msg(&[]), "input `path` is required");
        assert_eq!(
            msg(&[("path", "out"), ("native", "os,gpux")]),
            "input `native`: unknown facet `gpux`; known facets: os, arch, isa, cpu-flags, libc, compiler, gpu, cuda"
        );
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
        assert_eq!(c.path_lines, ["out", "models/*.pth"]);
        assert_eq!(c.prefix, "exact-cache");
        assert_eq!(c.compression, Compression::Zstd);
        assert_eq!(c.fingerprint.hash_env, ["B", "A", "C"]);
        assert!(c.fingerprint.native.is_empty());
        assert_eq!(c.root_dirs(), [PathBuf::from("/ws/repo/out"), PathBuf::from("/ws/repo/models")]);
        let d =
            config(&[("path", "out"), ("required", "out/a.pth\nmodels/x.pth"), ("path", "out\nmodels/*.pth")]).unwrap();
        assert_eq!(d.required.len(), 2);
        assert_eq!(d.fingerprint.native.len(), 5);
    }

    #[test]
    fn enumerated_inputs_ignore_case_and_name_what_they_accept() {
        let c = config(&[("path", "out"), ("backend", " GitHub "), ("verify-reuse", "WARN"), ("compression", "Gzip")])
            .unwrap();
        assert_eq!(
            (c.backend, c.verify_reuse, c.compression),
            (BackendChoice::Github, VerifyReuse::Warn, Compression::Gzip)
        );
        let c =
            config(&[("path", "out"), ("protocol", "V2"), ("explain-misses", "False"), ("preset", "Torch-Inductor")])
                .unwrap();
        assert_eq!((c.protocol, c.explain_misses, c.preset), (Protocol::V2, Some(false), Some(Preset::TorchInductor)));
        assert!(c.grow, "the torch-inductor preset grows by default");
        let c = config(&[("path", "out"), ("preset", "torch-inductor"), ("grow", "FALSE")]).unwrap();
        assert!(!c.grow);
        let c = config(&[("path", "out"), ("grow", "true"), ("grow-max-layers", "16"), ("grow-max-share", "12.5%")])
            .unwrap();
        assert_eq!((c.grow, c.grow_max_layers, c.grow_max_share), (true, 16, 0.125));
        assert_eq!(config(&[("path", "out"), ("grow-max-share", "200")]).unwrap().grow_max_share, 2.0);

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
            ("backend", "gcs", "`gcs` is not one of `auto`, `github`, `local`, `s3`"),
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
        assert_eq!(c.backend, BackendChoice::S3);
        assert_eq!(c.s3.bucket.as_deref(), Some("ci-cache.v2"));
        assert_eq!(c.s3.force_path_style, Some(true));
        assert_eq!(config(&[("path", "out")]).unwrap().s3, S3Inputs::default());
    }

    #[test]
    fn defaults_come_from_inputs() {
        let c = config(&[("path", "out")]).unwrap();
        assert_eq!((c.backend, c.protocol, c.verify_reuse), (BackendChoice::Auto, Protocol::Auto, VerifyReuse::Off));
        assert_eq!((c.explain_misses, c.prune_keep, c.preset), (None, 1, None));
        assert_eq!((c.grow, c.grow_max_layers, c.grow_max_share), (false, 4, 0.5));
        assert_eq!(c.fingerprint.native, Facet::DEFAULT.into_iter().collect());
        assert!(!c.strict && !c.prune && !c.lookup_only);
    }

    fn given(names: &[&str]) -> Vec<(String, bool)> {
        names.iter().map(|n| (n.to_string(), false)).collect()
    }

    #[test]
    fn actions_cache_inputs_are_errors_and_other_unknown_inputs_warnings() {
        let err = check_input_names(&given(&["path", "key", "restore-keys"]), Entry::Root).unwrap_err().to_string();
        assert!(err.starts_with("input `key` (from actions/cache): the key is computed from the fingerprint"), "{err}");
        assert!(err.contains("; input `restore-keys` (from actions/cache): exact-cache never falls back"), "{err}");
        let err = check_input_names(&given(&["enablecrossosarchive"]), Entry::Fingerprint).unwrap_err().to_string();
        assert!(err.starts_with("input `enableCrossOsArchive` (from actions/cache)"), "{err}");
        // `key` is an input of the save entry point; blank actions/cache inputs only warn.
        assert_eq!(check_input_names(&given(&["key"]), Entry::Save).unwrap(), Vec::<String>::new());
        let blank = check_input_names(&[("upload-chunk-size".into(), true)], Entry::Save).unwrap();
        assert_eq!(blank.len(), 1);

        let warnings =
            check_input_names(&given(&["hash-file", "lookup-only", "zzz", "hash_env"]), Entry::Save).unwrap();
        assert_eq!(
            warnings,
            [
                "unknown input `hash-file` is ignored; did you mean `hash-files`?",
                "unknown input `hash_env` is ignored; did you mean `hash-env`?",
                "input `lookup-only` is not an input of this entry point and is ignored",
                "unknown input `zzz` is ignored",
            ]
        );
        assert_eq!(closest("hashfiles", &["hash-files", "hash-env"]), Some("hash-files"));
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn every_input_an_entry_point_declares_passes_unremarked() {
        for entry in Entry::ALL {
            let declared: Vec<&str> = INPUTS.iter().filter(|i| entry.takes(i.scope)).map(|i| i.name).collect();
            assert_eq!(check_input_names(&given(&declared), entry).unwrap(), Vec::<String>::new(), "{entry:?}");
        }
    }

    #[test]
    fn an_empty_prefix_is_an_input_error() {
        for empty in ["", "  "] {
            let err = config(&[("path", "out"), ("prefix", empty)]).unwrap_err().to_string();
            assert!(err.starts_with("input `prefix`: is empty: name this cache"), "{err}");
        }
    }

    #[test]
    fn scopes_decide_which_entry_points_and_commands_take_an_input() {
        use CommandName as C;
        let scopes = |reader: Reader| -> Vec<Scope> {
            [Fingerprint, Cache, Restore, Save, Root].into_iter().filter(|s| s.taken_by(reader)).collect()
        };
        assert_eq!(scopes(Reader::Action(Entry::Root)), [Fingerprint, Cache, Restore, Root]);
        assert_eq!(scopes(Reader::Action(Entry::Restore)), [Fingerprint, Cache, Restore]);
        assert_eq!(scopes(Reader::Action(Entry::Save)), [Fingerprint, Cache, Save]);
        assert_eq!(scopes(Reader::Action(Entry::Fingerprint)), [Fingerprint]);
        assert_eq!(scopes(Reader::Cli(C::Restore)), [Fingerprint, Cache, Restore, Root]);
        assert_eq!(scopes(Reader::Cli(C::Save)), [Fingerprint, Cache, Save, Root]);
        assert_eq!(scopes(Reader::Cli(C::Explain)), [Fingerprint, Cache, Restore]);
        assert_eq!(scopes(Reader::Cli(C::Fingerprint)), [Fingerprint]);
        assert_eq!(scopes(Reader::Cli(C::List)), [Fingerprint, Cache]);
        assert_eq!(scopes(Reader::Cli(C::Prune)), [Fingerprint, Cache]);
    }
}
