//! Every input of the action and the command line, one definition each (`Input`), and the
//! registry [`INPUTS`]. A store's inputs are defined with its store and join the registry
//! through [`StoreKind::inputs`]. Adding an input: its definition here, its line in [`INPUTS`],
//! and the code that reads it.

use crate::archive::Compression;
use crate::backend::{BACKEND, StoreKind};
use crate::choice::{self, Switch};
use crate::env;
use crate::fingerprint::{Facet, NATIVE_DEFAULT, NATIVE_DESCRIPTION};
use crate::inputs::{CommandName, Input, InputKind, InputSpec, Readers, split_list};
use crate::keys;
use crate::preset::Preset;
use crate::stack;
use std::collections::BTreeSet;
use std::sync::LazyLock;

/// The `prefix` of whoever does not set one: shared by every such workflow and job of the
/// repository, so `prune` refuses it.
pub const DEFAULT_PREFIX: &str = "exact-cache";

pub static PATH: Input<Vec<String>> = Input::lines(
    "path",
    Readers::FINGERPRINT.and_listing(),
    "Files, directories or globs to cache, one per line: workspace-relative, absolute, or `~/…`; `!` excludes. \
     Required unless `preset` is set (a preset adds its own directories). A save finding no file or symlink (nothing, or only empty directories) warns and \
     saves nothing (`save-result=incomplete`); if an empty result is right, put a marker file in `path`.",
);

pub static PREFIX: Input<String> = Input::new(
    "prefix",
    InputKind::Text,
    Readers::FINGERPRINT.and_listing(),
    DEFAULT_PREFIX,
    "Key namespace, e.g. `pt-cxx-fixtures-v4` (ASCII letters, digits, `-._`; lowercased); empty is an input error.",
    |value| keys::normalize_prefix(value.unwrap_or_default()),
);

pub static HASH_FILES: Input<Vec<String>> = Input::lines(
    "hash-files",
    Readers::FINGERPRINT,
    "Globs whose content and executable bit enter the fingerprint (generator scripts, inputs, lockfiles); a \
     pattern matching nothing is an error.",
);

pub static FOLLOW_IMPORTS: Input<bool> = Input::flag(
    "follow-imports",
    Readers::FINGERPRINT,
    true,
    "Follow the imports of the Python files `hash-files` selects (parsed, never run), transitively: each module file \
     inside the workspace they reach enters the fingerprint, with the files that import it. Modules outside the \
     workspace, the standard library and site-packages are not followed (`python` covers installed distributions). \
     `false`: only the files `hash-files` lists.",
);

pub static HASH_ENV: Input<Vec<String>> = Input::var_names(
    "hash-env",
    Readers::FINGERPRINT,
    "Names of environment variables whose values enter the fingerprint (unset ≠ empty).",
);

pub static HASH_COMMANDS: Input<Vec<String>> = Input::lines(
    "hash-commands",
    Readers::FINGERPRINT,
    "Commands whose stdout enters the fingerprint, one per line (e.g. `gcc --version`); a failing command is an \
     error.",
);

pub static NATIVE: LazyLock<Input<BTreeSet<Facet>>> = LazyLock::new(|| {
    let (default, description) = (NATIVE_DEFAULT.as_str(), NATIVE_DESCRIPTION.as_str());
    Input::new("native", InputKind::List, Readers::FINGERPRINT, default, description, parse_native)
});

pub static COMPILERS: Input<Vec<String>> = Input::lines(
    "compilers",
    Readers::FINGERPRINT,
    "Compiler commands for the `compiler` facet, one per line (default: `$CC` or `cc`, and `$CXX` or `c++`).",
)
.computed_default("`$CC` or `cc`, `$CXX` or `c++`");

pub static PYTHON: Input<Option<String>> = Input::text(
    "python",
    Readers::FINGERPRINT,
    "Python interpreter whose version and installed distributions enter the fingerprint (empty: none). With \
     `preset: torch-inductor` it must have torch (default `python3`).",
);

pub static PYTHON_EXCLUDE: Input<Vec<String>> = Input::list(
    "python-exclude",
    Readers::FINGERPRINT,
    "Distribution names left out of the Python facet (names normalized per PEP 503; e.g. a tool the generator \
     does not import). Editable installs of the workspace are left out already (`python-keep-editable`).",
);

pub static PYTHON_KEEP_EDITABLE: Input<bool> = Input::flag(
    "python-keep-editable",
    Readers::FINGERPRINT,
    false,
    "Keep in the Python facet the distributions installed in editable mode from the workspace (PEP 660 \
     `pip install -e`, or a legacy `.egg-link`/`.pth`). By default they are left out, and the log names them: \
     their files enter the fingerprint through `hash-files` and imports, and a version made from the commit (as \
     setuptools-scm makes) would change the key with every commit.",
);

pub static VARIANT: Input<Option<String>> =
    Input::text("variant", Readers::FINGERPRINT, "Free-form build variant (`cuda-debug`, `lsan`, …).");

pub static PRESET: Input<Option<Preset>> = Input::optional_choice(
    "preset",
    Readers::FINGERPRINT.and_listing(),
    "`torch-inductor`: cache TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR (exported to later steps) and add what \
     decides whether compiled kernels are valid to the fingerprint; `path` becomes optional.",
);

pub static ALLOW_MACHINE_ONLY_KEY: Input<bool> = Input::flag(
    "allow-machine-only-key",
    Readers::FINGERPRINT,
    false,
    "Allow a key that holds no project input (no `hash-files`, `hash-env`, `hash-commands`, `python` or `preset`): \
     only the machine's facts, so an entry is reused whatever the project's files do. Without it such a key is an \
     input error.",
);

pub static FINGERPRINT_FILE: Input<Option<String>> = Input::text(
    "fingerprint-file",
    Readers::FINGERPRINT,
    "Where to write the fingerprint JSON (default: `$RUNNER_TEMP/exact-cache/<key>.json`).",
)
.computed_default("`$RUNNER_TEMP/exact-cache/<key>.json`");

pub static REQUIRED: Input<Vec<String>> = Input::lines(
    "required",
    Readers::CACHE,
    "Paths that must exist for an entry to be complete, checked on save and on restore.",
);

pub static COMPRESSION: Input<Compression> = Input::choice(
    "compression",
    Readers::CACHE.and_listing(),
    "zstd",
    "Archive compression: `zstd` (multithreaded, no long mode), `gzip` or `none`. Files kept in shared packs \
     (the default, docs/content.md) are zstd frames whatever this says; `none` makes them at zstd's fastest level.",
);

pub static STRICT: Input<bool> = Input::flag(
    "strict",
    Readers::CACHE,
    false,
    "Turn cache trouble into step failures: service errors, timeouts, rate limits, corrupt or incomplete \
     entries, a runner without a binary, a `clean-on-miss` that could not finish (without it: warnings, and the \
     job goes on as on a miss). Input errors fail the step regardless.",
);

pub static VERIFY_REUSE: Input<VerifyReuse> = Input::choice(
    "verify-reuse",
    Readers::CACHE,
    "off",
    "At save time after a warm restore, report files under `path` added, changed or removed since the restore: \
     `off`, `warn` or `fail` (fails the step).",
);

pub static GROW: Input<Switch> = Input::choice(
    "grow",
    Readers::CACHE.and_listing(),
    "auto",
    "Keep what a warm run adds: on a hit, the post step saves the files the job added or changed under `path` as a \
     layer of the same exact key, and a restore applies the base and its layers in order. Only for \
     content-addressed caches (every file named by a hash of what made it). `auto` (on with `preset: \
     torch-inductor`), `true` or `false`.",
);

pub static GROW_MAX_LAYERS: Input<u32> = Input::new(
    "grow-max-layers",
    InputKind::Text,
    Readers::CACHE,
    "4",
    "With `grow`: how many layers a stack may have (1 to 16) before the next save compacts it into one new base.",
    |value| {
        let n = value.unwrap_or_default().trim();
        n.parse::<u32>()
            .ok()
            .filter(|n| (1..=stack::MAX_LAYERS).contains(n))
            .ok_or_else(|| format!("`{n}` is not a whole number from 1 to {}", stack::MAX_LAYERS))
    },
);

/// `50%`, `50` or `12.5%` → 0.5, 0.5, 0.125.
pub static GROW_MAX_SHARE: Input<f64> = Input::new(
    "grow-max-share",
    InputKind::Text,
    Readers::CACHE,
    "50%",
    "With `grow`: compact instead of adding a layer when the layers would hold more than this share of the base's \
     bytes (a percentage, e.g. `50%`).",
    |value| {
        let text = value.unwrap_or_default().trim();
        let number = text.strip_suffix('%').unwrap_or(text).trim();
        number
            .parse::<f64>()
            .ok()
            .filter(|p| p.is_finite() && *p > 0.0)
            .map(|p| p / 100.0)
            .ok_or_else(|| format!("`{text}` is not a percentage above 0 (such as `50%`)"))
    },
);

pub static UNCOVERED_READS: Input<UncoveredReads> = Input::choice(
    "uncovered-reads",
    Readers::CACHE,
    "warn",
    "On a miss, record the files under the workspace that the job's later Python processes open (an audit hook \
     loaded through `PYTHONPATH`), and at save name those the cache's generator (the processes that wrote under \
     `path`, what started them and what they started) read that no input covers (not under `path`, not in \
     `hash-files`, not an import, not written by the job): `warn` (a warning, the `uncovered-files` output and a \
     summary row), `fail` (an error: nothing is saved, `save-result=uncovered-reads`) or `off` (nothing \
     recorded). Processes that are not Python are not seen. After a hit of a compile cache the same hook reports \
     what torch's compile caches spared (the save's `time-saved`); `off` arms it for neither.",
);

pub static SAVE_IF: Input<bool> = Input::flag(
    "save-if",
    Readers::CACHE.but(CommandName::Restore),
    true,
    "Whether this job may write entries: `false` restores only, and the save writes nothing (no entry, no layer, \
     no prune; `save-result=disabled`), while `verify-reuse` still checks a reuse. Give it an expression, such as \
     one comparing `github.ref` with `'refs/heads/main'`, so that only chosen refs write entries.",
);

/// Seconds, `0` or more and finite; empty: measured.
pub static GENERATION_SECONDS: Input<Option<f64>> = Input::new(
    "generation-seconds",
    InputKind::Text,
    Readers::CACHE.but(CommandName::Restore),
    "",
    "How long the job took to generate what it saves, in seconds, for jobs that measure their generator \
     themselves. Empty (the default): the save measures it, from the end of the restore that did not reuse to the \
     newest modification time under `path`. Recorded in the entry; each hit reports it as `generation-seconds` and \
     `time-saved`.",
    |value| {
        let text = value.unwrap_or_default().trim();
        if text.is_empty() {
            return Ok(None);
        }
        text.parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Some)
            .ok_or_else(|| format!("`{text}` is not a number of seconds, 0 or more"))
    },
);

pub static PRUNE: Input<bool> = Input::flag(
    "prune",
    Readers::CACHE.but(CommandName::Restore),
    false,
    "After a save, delete older entries with the same prefix on this ref (needs `actions: write`); skipped with a \
     warning on the default prefix.",
);

pub static PRUNE_KEEP: Input<usize> = Input::new(
    "prune-keep",
    InputKind::Text,
    Readers::CACHE.but(CommandName::Restore).and(CommandName::Prune),
    "1",
    "How many of the newest entries `prune` keeps, the new one included.",
    |value| {
        let n = value.unwrap_or_default().trim();
        n.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| format!("`{n}` is not a whole number of at least 1"))
    },
);

pub static GITHUB_TOKEN: Input<Option<String>> = Input::new(
    "github-token",
    InputKind::Text,
    Readers::CACHE.and_listing(),
    "${{ github.token }}",
    "Token for the REST calls of `explain-misses` and `prune`.",
    // The default is an expression the runner fills in; unfilled (act, the CLI) it is no token.
    |value| Ok(value.map(str::trim).filter(|t| !t.is_empty() && !t.starts_with("${{")).map(str::to_owned)),
);

// Fingerprint scope: the fingerprint step prints `hash-env` values too, so it masks them.
pub static SECRET_ENV: Input<Vec<String>> = Input::var_names(
    "secret-env",
    Readers::FINGERPRINT,
    "Names of environment variables whose values must never be saved or printed: every step masks them, and a save \
     finding one in a file or in the fingerprint (as it does the runtime token, `GITHUB_TOKEN` and `github-token`) \
     refuses to save (`save-result=secret-found`), naming the file.",
);

pub static CLEAN_ON_MISS: Input<bool> = Input::flag(
    "clean-on-miss",
    Readers::RESTORE,
    false,
    "On a miss, remove stale files under `path` before generation starts, naming each (log, summary, \
     `cleaned-files`). Never a file the repository tracks (asked of git; without git or outside a work tree, the \
     log says so). Only beneath the workspace, `RUNNER_TEMP` or the home directory, in a preset's cache directory, \
     or in a directory exact-cache restored into or saved from before (it leaves a `.exact-cache-root` marker); \
     never the workspace, home or their parents. Anything else is an input error.",
);

pub static REUSE_ENV: Input<Option<String>> = Input::new(
    "reuse-env",
    InputKind::Text,
    Readers::RESTORE,
    "",
    "Name of an environment variable exported as `1` when reused, `0` otherwise.",
    |value| match value.map(str::trim) {
        Some(name) if !env::is_var_name(name) => Err(format!("`{name}` is not a variable name")),
        name => Ok(name.map(str::to_owned)),
    },
);

pub static LOOKUP_ONLY: Input<bool> =
    Input::flag("lookup-only", Readers::RESTORE, false, "Only check whether the entry exists; download nothing.");

pub static FAIL_ON_CACHE_MISS: Input<bool> =
    Input::flag("fail-on-cache-miss", Readers::RESTORE, false, "Fail the step when the entry is not reused.");

pub static EXPLAIN_MISSES: Input<Switch> = Input::choice(
    "explain-misses",
    Readers::RESTORE,
    "auto",
    "On a miss, diff the newest entry with the same prefix against this fingerprint: `auto` (when a token or the \
     local backend allows listing), `true` or `false`.",
);

pub static KEY: Input<Option<keys::Key>> = Input::new(
    "key",
    InputKind::Text,
    Readers::SAVE,
    "",
    "Save under this key (the restore step's `key` output, whose fingerprint file is embedded) instead of \
     computing it.",
    |value| match value.map(str::trim) {
        Some(key) => keys::Key::parse(key).map(Some).map_err(|detail| format!("`{key}` {detail}")),
        None => Ok(None),
    },
);

pub static SAVE_ON_FAILURE: Input<bool> = Input::flag(
    "save-on-failure",
    Readers::ROOT,
    false,
    "Also save in the post step when the job failed (by default only after a successful job).",
);

// The post step runs after every job (`post-if: always()`) and decides itself, so that a failed
// job leaves a line saying why nothing was saved; the runner fills this in as the post step runs.
pub static JOB_STATUS: Input<bool> = Input::new(
    "job-status",
    InputKind::Text,
    Readers::ROOT,
    "${{ job.status }}",
    "The job's status when the post step runs; leave the default. The post step saves only when it is `success`, \
     unless `save-on-failure` is true.",
    // Unfilled (the CLI, a runner that does not evaluate it) it is no status: as after a success.
    |value| Ok(value.map(str::trim).is_none_or(|s| s.is_empty() || s.starts_with("${{") || s == "success")),
);

crate::choice::named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum UncoveredReads {
        Off => "off",
        Warn => "warn",
        Fail => "fail",
    }
}

crate::choice::named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum VerifyReuse {
        Off => "off",
        Warn => "warn",
        Fail => "fail",
    }
}

fn parse_native(value: Option<&str>) -> Result<BTreeSet<Facet>, String> {
    let facets = split_list(value.unwrap_or_default());
    if facets.len() == 1 && facets[0].eq_ignore_ascii_case("none") {
        return Ok(BTreeSet::new());
    }
    let unknown = |n: &String| format!("unknown facet `{n}`; known facets: {}", Facet::ALL.map(Facet::name).join(", "));
    facets.iter().map(|n| choice::parse(n).ok_or_else(|| unknown(n))).collect()
}

/// Every input: those defined here (and `backend`), in the order documentation lists them, with
/// each store's after `backend`.
pub static INPUTS: LazyLock<Vec<&'static InputSpec>> = LazyLock::new(|| {
    let core = [
        &PATH.spec,
        &PREFIX.spec,
        &HASH_FILES.spec,
        &FOLLOW_IMPORTS.spec,
        &HASH_ENV.spec,
        &HASH_COMMANDS.spec,
        &NATIVE.spec,
        &COMPILERS.spec,
        &PYTHON.spec,
        &PYTHON_EXCLUDE.spec,
        &PYTHON_KEEP_EDITABLE.spec,
        &VARIANT.spec,
        &PRESET.spec,
        &ALLOW_MACHINE_ONLY_KEY.spec,
        &FINGERPRINT_FILE.spec,
        &REQUIRED.spec,
        &COMPRESSION.spec,
        &STRICT.spec,
        &BACKEND.spec,
        &VERIFY_REUSE.spec,
        &GROW.spec,
        &GROW_MAX_LAYERS.spec,
        &GROW_MAX_SHARE.spec,
        &UNCOVERED_READS.spec,
        &SAVE_IF.spec,
        &GENERATION_SECONDS.spec,
        &PRUNE.spec,
        &PRUNE_KEEP.spec,
        &GITHUB_TOKEN.spec,
        &SECRET_ENV.spec,
        &CLEAN_ON_MISS.spec,
        &REUSE_ENV.spec,
        &LOOKUP_ONLY.spec,
        &FAIL_ON_CACHE_MISS.spec,
        &EXPLAIN_MISSES.spec,
        &KEY.spec,
        &SAVE_ON_FAILURE.spec,
        &JOB_STATUS.spec,
    ];
    let mut all = Vec::new();
    for spec in core {
        all.push(spec);
        if spec.name == BACKEND.name() {
            all.extend(StoreKind::ALL.iter().flat_map(|kind| kind.inputs()));
        }
    }
    all
});

pub fn input_spec(name: &str) -> Option<&'static InputSpec> {
    INPUTS.iter().copied().find(|i| i.name == name)
}
