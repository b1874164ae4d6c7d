//! The `exact-cache` binary run the way the Actions runner runs a step.

use super::log_model;
use super::wine::Wine;
use exact_cache::choice::{self, Named};
use exact_cache::commands::{KeptStack, RestoreRecord, Restored};
use exact_cache::fingerprint::FingerprintRecord;
use exact_cache::keys::Key;
use exact_cache::outcome::{MissReason, Output, SaveResult};
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
    pub restore_record: Option<RestoreRecord>,
}

/// The outputs as the product's own types: what a test asserts instead of the log's sentences.
impl StepResult {
    /// Everything a user or a log collector can read — the log without its `::add-mask::` lines
    /// (which is how values get masked), stderr, the summary and the outputs — to check that a
    /// secret appears nowhere.
    pub fn readable(&self) -> String {
        let log: Vec<&str> = self.stdout.lines().filter(|l| !l.starts_with("::add-mask::")).collect();
        let outputs: Vec<&String> = self.outputs.values().collect();
        format!("{}\n{}\n{}\n{outputs:?}", log.join("\n"), self.stderr, self.summary)
    }

    pub fn output(&self, name: &str) -> &str {
        self.outputs.get(name).map(String::as_str).unwrap_or_else(|| panic!("output `{name}` is unset: {self:#?}"))
    }

    /// The output `name`, one value per line (empty: none).
    pub fn output_lines(&self, name: Output) -> Vec<&str> {
        self.output(name.name()).lines().collect()
    }

    fn named<T: Named>(&self, name: Output) -> T {
        let value = self.output(name.name());
        choice::parse(value).unwrap_or_else(|| panic!("`{name}` is `{value}`, none of {}", choice::names::<T>()))
    }

    fn flag(&self, name: Output) -> bool {
        match self.output(name.name()) {
            "true" => true,
            "false" => false,
            other => panic!("`{name}` is `{other}`, not `true` or `false`"),
        }
    }

    fn number<T: std::str::FromStr>(&self, name: Output) -> T {
        let value = self.output(name.name());
        value.parse().unwrap_or_else(|_| panic!("`{name}` is `{value}`, not a number"))
    }

    /// `generation-seconds`, `time-saved`: a number of seconds, or empty for none.
    fn seconds(&self, name: Output) -> Option<f64> {
        Some(self.output(name.name())).filter(|v| !v.is_empty()).map(|_| self.number(name))
    }

    pub fn key(&self) -> Key {
        self.output(Output::Key.name()).into()
    }

    pub fn cache_hit(&self) -> bool {
        self.flag(Output::CacheHit)
    }

    pub fn reused(&self) -> bool {
        self.flag(Output::Reused)
    }

    pub fn entry_exists(&self) -> bool {
        self.flag(Output::EntryExists)
    }

    pub fn saved(&self) -> bool {
        self.flag(Output::Saved)
    }

    pub fn miss_reason(&self) -> MissReason {
        self.named(Output::MissReason)
    }

    pub fn save_result(&self) -> SaveResult {
        self.named(Output::SaveResult)
    }

    pub fn restored_files(&self) -> u64 {
        self.number(Output::RestoredFiles)
    }

    pub fn restored_bytes(&self) -> u64 {
        self.number(Output::RestoredBytes)
    }

    pub fn extra_files(&self) -> u64 {
        self.number(Output::ExtraFiles)
    }

    pub fn cleaned_files(&self) -> u64 {
        self.number(Output::CleanedFiles)
    }

    /// The layers a restore applied on top of its base.
    pub fn layers(&self) -> u32 {
        self.number(Output::Layers)
    }

    pub fn changed_files(&self) -> Vec<&str> {
        self.output_lines(Output::ChangedFiles)
    }

    pub fn uncovered_files(&self) -> Vec<&str> {
        self.output_lines(Output::UncoveredFiles)
    }

    pub fn generation_seconds(&self) -> Option<f64> {
        self.seconds(Output::GenerationSeconds)
    }

    pub fn time_saved(&self) -> Option<f64> {
        self.seconds(Output::TimeSaved)
    }

    /// `prune`: the entries deleted (`would-delete` with `--dry-run`), as the output names them.
    pub fn deleted(&self) -> Vec<&str> {
        let dry = self.outputs.contains_key(Output::WouldDelete.name());
        self.output_lines(if dry { Output::WouldDelete } else { Output::Deleted })
    }

    /// The fingerprint record the step wrote to its `fingerprint-file`.
    pub fn fingerprint(&self) -> FingerprintRecord {
        let path = self.output(Output::FingerprintFile.name());
        let text = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The record this restore wrote for the save of its job; panics when it wrote none.
    pub fn restore_record(&self) -> &RestoreRecord {
        self.restore_record.as_ref().unwrap_or_else(|| panic!("no restore record:\n{}", self.stdout))
    }

    /// What a restore did, as its record tells the save: reused a stack, found only unusable
    /// entries, or reused nothing.
    pub fn restored(&self) -> &Restored {
        &self.restore_record().restored
    }

    /// The stack a restore reused, as its record says (`None`: nothing reused).
    pub fn reused_stack(&self) -> Option<&KeptStack> {
        match self.restore_record.as_ref().map(|r| &r.restored) {
            Some(Restored::Reused(kept)) => kept.stack.as_ref(),
            _ => None,
        }
    }

    /// The generation of the stack a restore reused: the typed value behind the log's
    /// `stack: generation 1 base …` (`None`: nothing reused).
    pub fn reused_generation(&self) -> Option<u32> {
        self.reused_stack().map(|s| s.generation)
    }

    /// `Restored::Unusable`'s `newest`: the newest base found and not usable.
    pub fn unusable_newest(&self) -> Option<u32> {
        match self.restored() {
            Restored::Unusable { newest, .. } => Some(*newest),
            _ => None,
        }
    }

    /// The workflow commands the runner obeys in the log (`log_model`), `add-mask` left out.
    pub fn annotations(&self) -> Vec<(String, String)> {
        log_model::commands(&self.stdout)
            .into_iter()
            .filter(|c| ["error", "warning", "notice"].contains(&c.name.as_str()))
            .map(|c| (c.name, c.data))
            .collect()
    }

    fn annotated(&self, name: &str) -> Vec<String> {
        self.annotations().into_iter().filter(|(n, _)| n == name).map(|(_, data)| data).collect()
    }

    pub fn warnings(&self) -> Vec<String> {
        self.annotated("warning")
    }

    pub fn errors(&self) -> Vec<String> {
        self.annotated("error")
    }

    pub fn notices(&self) -> Vec<String> {
        self.annotated("notice")
    }

    /// What the step said to draw attention, for a snapshot: its exit status and its errors,
    /// warnings and notices, one per line.
    pub fn said(&self) -> String {
        let lines: Vec<String> = self.annotations().into_iter().map(|(name, data)| format!("{name}: {data}")).collect();
        format!("exit: {}\n{}\n", self.code, lines.join("\n"))
    }

    /// The cell of the summary's row `name` (`| name | cell |`); panics when it has none.
    pub fn summary_row(&self, name: &str) -> &str {
        let head = format!("| {name} | ");
        let row = self.summary.lines().find_map(|l| l.strip_prefix(&head)?.strip_suffix(" |"));
        row.unwrap_or_else(|| panic!("no summary row `{name}`:\n{}", self.summary))
    }

    /// The rows of the table a `list` step logged ([`list_table`]).
    pub fn listed(&self) -> Vec<BTreeMap<String, String>> {
        list_table(&self.stdout)
    }

    /// The lines of the log group whose title starts with `title` (`Why this is a miss`), for
    /// a snapshot, without its `::add-mask::` lines (stores that sign URLs mask signatures);
    /// panics when there is none.
    pub fn group(&self, title: &str) -> String {
        let mut lines =
            self.stdout.lines().skip_while(|l| !l.strip_prefix("::group::").is_some_and(|t| t.starts_with(title)));
        let heading = lines.next().unwrap_or_else(|| panic!("no group `{title}`:\n{}", self.stdout));
        let body: Vec<&str> =
            lines.take_while(|l| *l != "::endgroup::").filter(|l| !l.starts_with("::add-mask::")).collect();
        format!("{heading}\n{}\n", body.join("\n"))
    }

    /// What [`StepResult::shown`] shows, less the fingerprint's values (the machine's facts, a
    /// Python's distributions): the log's `Fingerprint` group keeps its `key:` line, the
    /// summary's fingerprint table goes.
    pub fn brief(&self) -> String {
        let (mut log, mut in_fingerprint) = (String::new(), false);
        for line in self.stdout.lines() {
            if line == "::group::Fingerprint" {
                in_fingerprint = true;
            } else if in_fingerprint && line == "::endgroup::" {
                in_fingerprint = false;
            } else if !in_fingerprint || line.starts_with("key: ") {
                log.push_str(line);
                log.push('\n');
            }
        }
        let (mut summary, mut in_table) = (String::new(), false);
        for line in self.summary.lines() {
            if line.starts_with("<details><summary>Fingerprint") {
                in_table = true;
            } else if in_table && line == "</details>" {
                in_table = false;
            } else if !in_table {
                summary.push_str(line);
                summary.push('\n');
            }
        }
        let outputs: Vec<String> = self.outputs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("exit: {}\n--- outputs\n{}\n--- log\n{log}--- summary\n{summary}", self.code, outputs.join("\n"))
    }

    /// Everything the step showed, for a snapshot: exit status, outputs, log and summary.
    pub fn shown(&self) -> String {
        let outputs: Vec<String> = self.outputs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let (log, summary) = (&self.stdout, &self.summary);
        format!("exit: {}\n--- outputs\n{}\n--- log\n{log}--- summary\n{summary}", self.code, outputs.join("\n"))
    }
}

/// The record a restore wrote for `key` beside its fingerprint file (`<key>.<version>.restore.json`):
/// the newest, when several versions have one.
fn restore_record(outputs: &BTreeMap<String, String>) -> Option<RestoreRecord> {
    let (key, file) = (outputs.get("key")?, Path::new(outputs.get("fingerprint-file")?));
    let prefix = format!("{key}.");
    let newest = std::fs::read_dir(file.parent()?)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".restore.json")))
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())?;
    let text = std::fs::read_to_string(newest.path()).ok()?;
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", newest.path().display())))
}

/// The rows of the table `list` prints in `text` (its log, or its stdout on the command line):
/// each a map from column name (`key`, `size`, `ref`, `generated in`, …) to value.
pub fn list_table(text: &str) -> Vec<BTreeMap<String, String>> {
    let header = |l: &str| l.trim_start().starts_with("key ") && (l.ends_with(" slot") || l.ends_with(" in packs"));
    let mut lines = text.lines().skip_while(|l| !header(l));
    let Some(header) = lines.next() else { return Vec::new() };
    let indent = header.len() - header.trim_start().len();
    let header: Vec<char> = header.chars().collect();
    // Columns start where a name starts after two spaces (`generated in` is one name).
    let starts: Vec<usize> = (indent..header.len())
        .filter(|&i| header[i] != ' ' && (i == indent || (i >= 2 && header[i - 1] == ' ' && header[i - 2] == ' ')))
        .collect();
    let cell = |chars: &[char], n: usize| -> String {
        let end = starts.get(n + 1).copied().unwrap_or(chars.len()).min(chars.len());
        chars[starts[n].min(end)..end].iter().collect::<String>().trim().to_owned()
    };
    let names: Vec<String> = (0..starts.len()).map(|n| cell(&header, n)).collect();
    lines
        .take_while(|l| l.len() > indent && l[..indent].trim().is_empty() && !l[indent..].starts_with(' '))
        .map(|l| {
            let chars: Vec<char> = l.chars().collect();
            names.iter().enumerate().map(|(n, name)| (name.clone(), cell(&chars, n))).collect()
        })
        .collect()
}

/// The binary run as a command-line tool: outputs are `name=value` lines on stdout (one per item
/// of a list output), the log is stderr.
#[derive(Debug)]
pub struct CliRun {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<std::process::Output> for CliRun {
    fn from(out: std::process::Output) -> Self {
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("UTF-8");
        CliRun { code: out.status.code(), stdout: text(out.stdout), stderr: text(out.stderr) }
    }
}

impl CliRun {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// Every line the output `name` printed: its value, or one item of a list output each.
    pub fn outputs(&self, name: Output) -> Vec<&str> {
        let prefix = format!("{name}=");
        self.stdout.lines().filter_map(|l| l.strip_prefix(&prefix)).collect()
    }

    /// The output `name`, printed once.
    pub fn output(&self, name: Output) -> &str {
        match self.outputs(name)[..] {
            [value] => value,
            _ => panic!("`{name}` is not printed once:\n{}", self.stdout),
        }
    }

    /// The errors, warnings and notices as the command line prints them (`warning: …`, further
    /// lines indented).
    fn annotations(&self) -> Vec<String> {
        let (mut said, mut open): (Vec<String>, bool) = (Vec::new(), false);
        for line in self.stderr.lines() {
            if ["error: ", "warning: ", "notice: "].iter().any(|level| line.starts_with(level)) {
                said.push(line.to_owned());
                open = true;
            } else if let (true, Some(last), Some(more)) = (open, said.last_mut(), line.strip_prefix("  ")) {
                last.push('\n');
                last.push_str(more);
            } else {
                open = false;
            }
        }
        said
    }

    pub fn warnings(&self) -> Vec<String> {
        self.annotations().into_iter().filter_map(|a| a.strip_prefix("warning: ").map(str::to_owned)).collect()
    }

    /// What the run said to draw attention, for a snapshot: its exit status and its errors,
    /// warnings and notices.
    pub fn said(&self) -> String {
        format!("exit: {:?}\n{}\n", self.code, self.annotations().join("\n"))
    }
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
    pub fn cli(&self, args: &[&str]) -> CliRun {
        // As the standing inputs of [`Step::run`]: a key of the machine's facts is allowed.
        let computes_key = ["fingerprint", "restore", "save", "explain"].contains(&args[0]);
        let out = std::process::Command::new(exe())
            .args(args)
            .args(computes_key.then_some("--allow-machine-only-key"))
            .arg(format!("--workspace={}", self.ws.display()))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("HOME", &self.home)
            .env("EXACT_CACHE_DIR", &self.cache)
            .output()
            .unwrap();
        CliRun::from(out)
    }

    /// The single stored entry file of the local backend.
    pub fn stored_entry(&self) -> PathBuf {
        let entries: Vec<_> =
            std::fs::read_dir(self.cache.join("entries")).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(entries.len(), 1, "{entries:?}");
        entries.into_iter().next().unwrap()
    }
}
