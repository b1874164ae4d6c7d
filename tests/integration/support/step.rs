//! The `exact-cache` binary run the way the Actions runner runs a step.

use super::wine::Wine;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Runs its arguments and reports the child's peak RSS. A Python parent is used because
/// `ru_maxrss` survives fork and exec: a child forked straight from the (large) test process
/// would report the test's own memory.
pub const MEASURE_RSS: &str = "import resource, subprocess, sys\n\
    r = subprocess.run(sys.argv[1:])\n\
    sys.stderr.write('maxrss-kib=%d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n\
    sys.exit(r.returncode)";

/// The `exact-cache` binary run as an Actions step: fresh command files per run, inputs as
/// `INPUT_*`, state carried from the main step to the post step.
pub struct Step {
    pub dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub cache: PathBuf,
    pub home: PathBuf,
    pub runner_temp: PathBuf,
    pub extra_env: Vec<(String, String)>,
    /// Inputs every run gets before its own (which win): the store's, as `with:` would give them.
    pub standing_inputs: Vec<(String, String)>,
    /// Run the binary under a Python parent that reports its peak RSS (`StepResult::peak_rss_mib`).
    pub measure: bool,
    /// Run the binary as the last argument of this command line (e.g. `setpriv …` to drop
    /// privileges); empty for none.
    pub wrapper: Vec<String>,
    /// Run the Windows binary under wine instead, every path it is given as wine names it.
    pub wine: Option<&'static Wine>,
    runs: std::cell::Cell<usize>,
}

#[derive(Debug)]
pub struct StepResult {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub outputs: BTreeMap<String, String>,
    pub state: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
    pub summary: String,
    pub peak_rss_mib: Option<f64>,
    /// A restore's record for the save of its job (what it reused: the stack's generation and
    /// layers), as the restore wrote it beside its fingerprint file.
    pub restore_record: Option<serde_json::Value>,
}

impl StepResult {
    /// Everything a user or a log collector can read — the log without its `::add-mask::` lines
    /// (which is how values get masked), stderr, the summary and the outputs — to check that a
    /// secret appears nowhere.
    pub fn readable(&self) -> String {
        let log: Vec<&str> = self.stdout.lines().filter(|l| !l.starts_with("::add-mask::")).collect();
        let outputs: Vec<&String> = self.outputs.values().collect();
        format!("{}\n{}\n{}\n{outputs:?}", log.join("\n"), self.stderr, self.summary)
    }

    /// What a restore did, as its record tells the save: `{"outcome": "reused", "stack": …}`,
    /// `{"outcome": "unusable", "newest": 0}` or `{"outcome": "not-reused"}` (`null`: no record).
    pub fn restored(&self) -> serde_json::Value {
        self.restore_record.as_ref().map_or(serde_json::Value::Null, |r| r["restored"].clone())
    }

    /// The generation of the stack a restore reused, as its record says: the typed value behind
    /// the log's `stack: generation 1 base …` (`None`: nothing reused).
    pub fn reused_generation(&self) -> Option<u64> {
        let restored = self.restored();
        (restored["outcome"] == "reused").then(|| restored["stack"]["generation"].as_u64()).flatten()
    }

    pub fn output(&self, name: &str) -> &str {
        self.outputs.get(name).map(String::as_str).unwrap_or_else(|| panic!("output `{name}` is unset: {self:#?}"))
    }
}

/// The record a restore wrote for `key` beside its fingerprint file (`<key>.<version>.restore.json`):
/// the newest, when several versions have one.
fn restore_record(outputs: &BTreeMap<String, String>) -> Option<serde_json::Value> {
    let (key, file) = (outputs.get("key")?, Path::new(outputs.get("fingerprint-file")?));
    let prefix = format!("{key}.");
    let newest = std::fs::read_dir(file.parent()?)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".restore.json")))
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())?;
    serde_json::from_str(&std::fs::read_to_string(newest.path()).ok()?).ok()
}

/// The state a main step starts with: none (a post step gets the main step's `StepResult::state`).
pub const NO_STATE: &BTreeMap<String, String> = &BTreeMap::new();

pub fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_exact-cache")
}

/// Parse `name<<DELIM\nvalue\nDELIM\n` records.
fn parse_command_file(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let (name, delim) = line.split_once("<<").expect("heredoc record");
        let mut value = Vec::new();
        for l in lines.by_ref() {
            if l == delim {
                break;
            }
            value.push(l);
        }
        out.insert(name.to_owned(), value.join("\n"));
    }
    out
}

impl Step {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("work/repo/repo");
        let cache = dir.path().join("cache");
        let home = dir.path().join("home");
        let runner_temp = dir.path().join("runner-temp");
        for d in [&ws, &home, &runner_temp] {
            std::fs::create_dir_all(d).unwrap();
        }
        Self {
            dir,
            ws,
            cache,
            home,
            runner_temp,
            extra_env: Vec::new(),
            // Most tests cache a tree under the machine's facts alone; those about project
            // inputs set it back to `false`.
            standing_inputs: vec![("allow-machine-only-key".into(), "true".into())],
            measure: false,
            wrapper: Vec::new(),
            wine: None,
            runs: Default::default(),
        }
    }

    /// A step that runs the Windows binary under `wine`.
    pub fn under_wine(wine: &'static Wine) -> Self {
        Self { wine: Some(wine), ..Self::new() }
    }

    /// A step that reaches a cache service through `env` (`Services::v2_env` and the like),
    /// retrying 10 ms apart so that injected faults cost little time.
    pub fn against(env: Vec<(String, String)>) -> Self {
        let mut step = Self::new();
        step.extra_env = env;
        step.set_env("EXACT_CACHE_RETRY_BASE_MS", "10");
        step
    }

    /// Set `name` in the step's environment (after the runner's own variables).
    pub fn set_env(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.extra_env.push((name.into(), value.into()));
    }

    /// Give every run the input `name` (a run's own inputs come after it, and win).
    pub fn set_input(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.standing_inputs.push((name.into(), value.into()));
    }

    /// Run `args` (e.g. `["restore"]`) with `inputs`; `state` is what a post step receives.
    pub fn run(&self, args: &[&str], inputs: &[(&str, &str)], state: &BTreeMap<String, String>) -> StepResult {
        let n = self.runs.get();
        self.runs.set(n + 1);
        let files = self.dir.path().join(format!("run-{n}"));
        std::fs::create_dir_all(&files).unwrap();
        let (output, state_file, env_file, summary) =
            (files.join("output"), files.join("state"), files.join("env"), files.join("summary"));
        let mut cmd = if let Some(wine) = self.wine {
            wine.command(&wine.exe())
        } else if let Some((program, args)) = self.wrapper.split_first() {
            let mut c = std::process::Command::new(program);
            c.args(args).arg(exe());
            c
        } else if self.measure {
            let mut c = std::process::Command::new("python3");
            c.args(["-c", MEASURE_RSS, exe()]);
            c
        } else {
            std::process::Command::new(exe())
        };
        let seen = |path: &Path| match self.wine {
            Some(wine) => std::ffi::OsString::from(wine.path(path)),
            None => path.as_os_str().to_owned(),
        };
        cmd.args(args);
        // Wine leaves out variables whose names hold `-`: there the standing inputs are flags.
        if self.wine.is_some() && ["fingerprint", "restore", "save", "explain"].contains(&args[0]) {
            cmd.args(self.standing_inputs.iter().map(|(name, value)| format!("--{name}={value}")));
        }
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            // The switch of entries that share content passes through: the suite runs with it on
            // as `EXACT_CACHE_CONTENT=packs cargo test` (docs/content.md).
            .envs(std::env::var("EXACT_CACHE_CONTENT").ok().map(|v| ("EXACT_CACHE_CONTENT", v)))
            .envs(self.wine.map(Wine::env).unwrap_or_default())
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_WORKSPACE", seen(&self.ws))
            .env("GITHUB_OUTPUT", seen(&output))
            .env("GITHUB_STATE", seen(&state_file))
            .env("GITHUB_ENV", seen(&env_file))
            .env("GITHUB_STEP_SUMMARY", seen(&summary))
            .env("RUNNER_TEMP", seen(&self.runner_temp))
            .env("HOME", seen(&self.home))
            .env("EXACT_CACHE_DIR", seen(&self.cache))
            .current_dir(&self.ws);
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        let standing = self.standing_inputs.iter().map(|(name, value)| (name.as_str(), value.as_str()));
        for (name, value) in standing.chain(inputs.iter().copied()) {
            cmd.env(format!("INPUT_{}", name.to_uppercase()), value);
        }
        for (name, value) in state {
            cmd.env(format!("STATE_{name}"), value);
        }
        let out = cmd.output().unwrap();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let outputs = parse_command_file(&read(&output));
        let restore_record = (args.first() == Some(&"restore")).then(|| restore_record(&outputs)).flatten();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let peak_rss_mib = stderr
            .lines()
            .find_map(|l| l.strip_prefix("maxrss-kib="))
            .and_then(|k| k.parse::<f64>().ok())
            .map(|k| k / 1024.0);
        StepResult {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
            peak_rss_mib,
            outputs,
            state: parse_command_file(&read(&state_file)),
            env: parse_command_file(&read(&env_file)),
            summary: read(&summary),
            restore_record,
        }
    }

    /// Run `args` as a command-line tool outside Actions (no `GITHUB_*` files): in the step's
    /// workspace, with its home and local store.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        // As the standing inputs of [`Step::run`]: a key of the machine's facts is allowed.
        let computes_key = ["fingerprint", "restore", "save", "explain"].contains(&args[0]);
        std::process::Command::new(exe())
            .args(args)
            .args(computes_key.then_some("--allow-machine-only-key"))
            .arg(format!("--workspace={}", self.ws.display()))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("HOME", &self.home)
            .env("EXACT_CACHE_DIR", &self.cache)
            .output()
            .unwrap()
    }

    /// The single stored entry file of the local backend.
    pub fn stored_entry(&self) -> PathBuf {
        let entries: Vec<_> =
            std::fs::read_dir(self.cache.join("entries")).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(entries.len(), 1, "{entries:?}");
        entries.into_iter().next().unwrap()
    }
}
