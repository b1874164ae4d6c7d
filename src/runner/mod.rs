//! The only code that talks to the GitHub Actions runner: inputs, outputs, state, exported
//! variables, the step summary and log commands. Outside Actions ([`Mode::Cli`]) the same calls
//! print plain text to stderr, and outputs as `name=value` lines on stdout at the end.
//!
//! Every line written is redacted ([`Runner::redact`]), also where the runner's own masking does
//! not apply (CLI mode, a value printed before masking), and before it is cut short anywhere.
//! Outside text can never start a workflow command: `Log::text` is the one writer of plain
//! lines, and our own commands carry text only as escaped data (`Log::command`).

mod forms;
// The tests' model of how the runner reads a step's output, shared with the integration tests.
#[cfg(test)]
#[path = "../../tests/integration/support/log_model.rs"]
mod log_model;
mod progress;
pub mod summary;
mod visible;
mod workflow_command;

pub use progress::{Progress, ProgressReader};
pub use visible::{escape_invisible, escape_list_item, unescape_list_item};
pub use workflow_command::escape_data;

use crate::env::Env;
use crate::outcome::{Output, State};
use std::fs::OpenOptions;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("cannot write to `{path}` ({what})")]
    Write {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("`{name}` is not a valid environment variable name")]
    BadEnvName { name: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Running as a step of a GitHub Actions job (`GITHUB_ACTIONS=true`).
    Actions,
    Cli,
}

/// An output as the command line prints it at the end.
enum CliValue {
    /// `name=value`, line breaks escaped.
    One(String),
    /// A list output: `name=item`, one line per item (`name=` for none).
    List(Vec<String>),
}

pub struct Runner {
    mode: Mode,
    env: Env,
    log: Arc<Log>,
    stdout: Mutex<Box<dyn Write + Send>>,
    redactor: Redactor,
    cli_outputs: Mutex<Vec<(String, CliValue)>>,
    /// Printed on stdout instead of the outputs' `name=value` lines (`list --json`).
    cli_document: Mutex<Option<String>>,
    /// `--quiet`: informational lines are dropped (CLI mode only).
    quiet: std::sync::atomic::AtomicBool,
    /// `--verbose`, or a command whose answer is the detail (CLI mode only).
    verbose: std::sync::atomic::AtomicBool,
    progress_interval: Duration,
}

impl Runner {
    pub fn from_env(env: &Env) -> Self {
        let mode = if env.is_true("GITHUB_ACTIONS") { Mode::Actions } else { Mode::Cli };
        let log: Box<dyn Write + Send> = match mode {
            Mode::Actions => Box::new(io::stdout()),
            Mode::Cli => Box::new(io::stderr()),
        };
        Self::new(mode, env.clone(), log, Box::new(io::stdout()))
    }

    /// A runner writing its log to `log` and CLI outputs to `stdout` (tests use buffers).
    pub fn new(mode: Mode, env: Env, log: Box<dyn Write + Send>, stdout: Box<dyn Write + Send>) -> Self {
        let progress_interval = env
            .non_empty("EXACT_CACHE_PROGRESS_SECONDS")
            .and_then(|s| s.parse::<f64>().ok())
            .map(Duration::from_secs_f64)
            .unwrap_or(Duration::from_secs(5));
        Self {
            mode,
            env,
            log: Arc::new(Log { mode, out: Mutex::new(log) }),
            stdout: Mutex::new(stdout),
            redactor: Redactor::default(),
            cli_outputs: Mutex::new(Vec::new()),
            cli_document: Mutex::new(None),
            quiet: Default::default(),
            verbose: Default::default(),
            progress_interval,
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The action input `name` (`INPUT_<NAME>`), or `None` when unset or blank.
    pub fn input(&self, name: &str) -> Option<String> {
        self.given_input(name).filter(|v| !v.is_empty())
    }

    /// The action input `name`, trimmed, blank included: `Some("")` when the variable is set
    /// but blank (the runner fills in a default only for an input left out of `with:`).
    pub fn given_input(&self, name: &str) -> Option<String> {
        let var = format!("INPUT_{}", name.replace(' ', "_").to_uppercase());
        self.env.get(&var).map(|v| v.trim().to_owned())
    }

    /// Every input the step was given, as the runner names them (`INPUT_<NAME>` lowercased:
    /// case and spaces are lost), with whether its value is blank.
    pub fn given_input_names(&self) -> Vec<(String, bool)> {
        self.env
            .iter()
            .filter_map(|(var, value)| {
                let name = var.strip_prefix("INPUT_").filter(|n| !n.is_empty())?;
                Some((name.to_lowercase(), value.trim().is_empty()))
            })
            .collect()
    }

    /// State saved by the main step, read in the post step (`STATE_<name>`).
    pub fn state(&self, key: State) -> Option<String> {
        self.env.non_empty(&format!("STATE_{}", key.name())).map(str::to_owned)
    }

    /// Set a step output. Secrets are redacted here too: an output can quote a file name.
    pub fn set_output(&self, output: Output, value: &str) -> Result<(), RunnerError> {
        let value = self.redact(value);
        self.write_output(output, &value)?;
        self.keep_cli_output(output, CliValue::One(value));
        Ok(())
    }

    /// Set a step output that lists `items`, one per line, each escaped by
    /// [`escape_list_item`] after redaction: a file name holding a line break stays one item.
    pub fn set_list_output<S: AsRef<str>>(&self, output: Output, items: &[S]) -> Result<(), RunnerError> {
        let lines: Vec<String> = items.iter().map(|i| escape_list_item(&self.redact(i.as_ref()))).collect();
        self.write_output(output, &lines.join("\n"))?;
        self.keep_cli_output(output, CliValue::List(lines));
        Ok(())
    }

    fn write_output(&self, output: Output, value: &str) -> Result<(), RunnerError> {
        match self.env.non_empty("GITHUB_OUTPUT") {
            Some(path) => append_key_value(Path::new(path), "outputs", output.name(), value),
            None => Ok(()),
        }
    }

    fn keep_cli_output(&self, output: Output, value: CliValue) {
        if self.mode == Mode::Cli {
            self.cli_outputs.lock().unwrap().push((output.name().to_owned(), value));
        }
    }

    pub fn save_state(&self, key: State, value: &str) -> Result<(), RunnerError> {
        if let Some(path) = self.env.non_empty("GITHUB_STATE") {
            append_key_value(Path::new(path), "state", key.name(), value)?;
        }
        Ok(())
    }

    /// Export `name=value` to the steps after this one (`$GITHUB_ENV`).
    pub fn export_env(&self, name: &str, value: &str) -> Result<(), RunnerError> {
        if !crate::env::is_var_name(name) {
            return Err(RunnerError::BadEnvName { name: name.to_owned() });
        }
        match self.env.non_empty("GITHUB_ENV") {
            Some(path) => append_key_value(Path::new(path), "environment", name, value),
            None => {
                if self.mode == Mode::Cli {
                    self.cli_outputs.lock().unwrap().push((format!("env.{name}"), CliValue::One(value.to_owned())));
                }
                Ok(())
            }
        }
    }

    /// Append Markdown to the step summary (ignored outside Actions). Build it with
    /// [`summary::Markdown`]; redacting the whole again here is a second net.
    pub fn append_summary(&self, markdown: &str) -> Result<(), RunnerError> {
        let Some(path) = self.env.non_empty("GITHUB_STEP_SUMMARY") else {
            return Ok(());
        };
        let text = self.redact(markdown);
        let write = || -> io::Result<()> {
            let mut f = OpenOptions::new().create(true).append(true).open(path)?;
            f.write_all(text.as_bytes())?;
            if !text.ends_with('\n') {
                f.write_all(b"\n")?;
            }
            Ok(())
        };
        write().map_err(|source| RunnerError::Write { path: path.into(), what: "step summary", source })
    }

    /// In CLI mode, print the collected outputs on stdout.
    pub fn finish(&self) {
        self.say_pending();
        if self.mode != Mode::Cli {
            return;
        }
        let outputs = std::mem::take(&mut *self.cli_outputs.lock().unwrap());
        let mut out = self.stdout.lock().unwrap();
        if let Some(document) = self.cli_document.lock().unwrap().take() {
            let _ = writeln!(out, "{}", self.redact(&document));
            let _ = out.flush();
            return;
        }
        for (name, value) in outputs {
            let lines = match value {
                CliValue::One(value) => vec![self.redact(&value).replace('\r', "\\r").replace('\n', "\\n")],
                CliValue::List(items) if items.is_empty() => vec![String::new()],
                CliValue::List(items) => items.iter().map(|item| self.redact(item)).collect(),
            };
            for line in lines {
                let _ = writeln!(out, "{name}={line}");
            }
        }
        let _ = out.flush();
    }

    /// Register a secret: masked by the runner and removed from everything this process prints.
    pub fn add_secret(&self, secret: &str) {
        self.secret_sink().add(secret);
    }

    /// A handle other threads (backends) use to register secrets, such as signed-URL signatures.
    pub fn secret_sink(&self) -> SecretSink {
        SecretSink { redactor: self.redactor.clone(), log: (self.mode == Mode::Actions).then(|| Arc::clone(&self.log)) }
    }

    /// What removes the registered secrets (those registered later too) from text.
    pub fn redactor(&self) -> Redactor {
        self.redactor.clone()
    }

    /// `text` with every registered secret replaced by `***`.
    pub fn redact(&self, text: &str) -> String {
        self.redactor.redact(text)
    }

    pub fn info(&self, message: &str) {
        self.say_pending();
        if !self.is_quiet() {
            self.log.text(&self.redact(message));
        }
    }

    /// `--quiet`: from now on only warnings, errors and outputs (ignored in Actions mode, whose
    /// log is read after the fact).
    pub fn set_quiet(&self, quiet: bool) {
        self.quiet.store(quiet && self.mode == Mode::Cli, std::sync::atomic::Ordering::Relaxed);
    }

    fn is_quiet(&self) -> bool {
        self.quiet.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `--verbose`: details such as the fingerprint's table are logged (in Actions mode they
    /// always are, in a collapsed group).
    pub fn set_verbose(&self, verbose: bool) {
        self.verbose.store(verbose, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether details are logged: always in Actions mode, else with `--verbose`.
    pub fn shows_details(&self) -> bool {
        self.mode == Mode::Actions || self.verbose.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A line the user asked for (`explain`'s answer): logged even under `--quiet`.
    pub fn answer(&self, message: &str) {
        self.log.text(&self.redact(message));
    }

    /// In CLI mode, print `document` on stdout at the end instead of the outputs.
    pub fn set_document(&self, document: String) {
        if self.mode == Mode::Cli {
            *self.cli_document.lock().unwrap() = Some(document);
        }
    }

    /// Send this process's panic messages through the log, redacted and unable to start a
    /// workflow command, instead of raw to stderr (a message can quote a file name).
    pub fn route_panics(&self) {
        let (log, redactor) = (Arc::clone(&self.log), self.redactor());
        std::panic::set_hook(Box::new(move |info| log.text(&redactor.redact(&format!("exact-cache: {info}")))));
    }

    pub fn warning(&self, message: &str) {
        self.annotate("warning", message);
    }

    /// Say the warnings [`warn_later`] kept, each once.
    fn say_pending(&self) {
        let pending: Vec<String> = std::mem::take(&mut *pending_warnings().lock().unwrap_or_else(|e| e.into_inner()));
        for message in pending {
            self.annotate_now("warning", &message);
        }
    }

    /// A line the run's annotations show (`::notice::`), such as why nothing was saved.
    pub fn notice(&self, message: &str) {
        self.annotate("notice", message);
    }

    pub fn error(&self, message: &str) {
        self.annotate("error", message);
    }

    fn annotate(&self, level: &'static str, message: &str) {
        self.say_pending();
        self.annotate_now(level, message);
    }

    fn annotate_now(&self, level: &'static str, message: &str) {
        let message = self.redact(message);
        let message = cut_annotation(&message);
        match self.mode {
            Mode::Actions => self.log.command(level, &message),
            Mode::Cli => {
                let lines: Vec<String> = runner_lines(&message)
                    .enumerate()
                    .map(|(i, line)| if i == 0 { format!("{level}: {line}") } else { format!("  {line}") })
                    .collect();
                self.log.text(&lines.join("\n"));
            }
        }
    }

    /// Open a collapsible log group; it closes when the guard drops.
    pub fn group(&self, title: &str) -> Group<'_> {
        let title = self.redact(title);
        match self.mode {
            Mode::Actions => self.log.command("group", &title),
            Mode::Cli if self.is_quiet() => {}
            Mode::Cli => self.log.text(&format!("── {title}")),
        }
        Group { runner: self }
    }

    /// A progress reporter that prints a line at most every few seconds, and a final line.
    pub fn progress(&self, verb: &'static str, total: Option<u64>) -> Progress<'_> {
        Progress::new(self, verb, total, self.progress_interval)
    }
}

/// The step's log. Everything this process prints goes through [`Log::command`] (our own
/// workflow commands) or [`Log::text`] (everything else); nothing else writes to it.
struct Log {
    mode: Mode,
    out: Mutex<Box<dyn Write + Send>>,
}

impl Log {
    /// One of our own workflow commands, `::name::data` (Actions mode only). Invisible characters
    /// are shown escaped ([`escape_invisible`]), except in a mask, which must match exactly.
    fn command(&self, name: &'static str, data: &str) {
        debug_assert_eq!(self.mode, Mode::Actions);
        let data = if name == "add-mask" { data.into() } else { escape_invisible(data) };
        self.write(&[format!("::{name}::{}", escape_data(&data))]);
    }

    /// Plain text, split where the runner splits lines ([`runner_lines`]). In Actions mode a line
    /// the runner could read as a command ([`could_be_command`]) goes between
    /// `::stop-commands::<token>` and `::<token>::` with a fresh token, all under one lock so no
    /// other thread's line lands while commands are stopped. Invisible characters are escaped.
    fn text(&self, text: &str) {
        let mut lines = Vec::new();
        for line in runner_lines(text) {
            let escaped = escape_invisible(line);
            let line = escaped.as_ref();
            if self.mode == Mode::Actions && could_be_command(line) {
                let mut token = random_token();
                while line.to_ascii_lowercase().contains(&token) {
                    token = random_token();
                }
                lines.push(format!("::stop-commands::{token}"));
                lines.push(line.to_owned());
                lines.push(format!("::{token}::"));
            } else {
                lines.push(line.to_owned());
            }
        }
        self.write(&lines);
    }

    fn write(&self, lines: &[String]) {
        let mut out = self.out.lock().unwrap();
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    }
}

/// The most characters of an annotation. One quoting outside text at length (a hostile entry
/// name) is cut here, after redaction, so no part of a secret is left.
const MAX_ANNOTATION_CHARS: usize = 4_000;

/// `message`, cut after [`MAX_ANNOTATION_CHARS`] characters, saying how much was left out.
fn cut_annotation(message: &str) -> std::borrow::Cow<'_, str> {
    match message.char_indices().nth(MAX_ANNOTATION_CHARS) {
        None => message.into(),
        Some((end, _)) => {
            let left_out = message[end..].chars().count();
            format!("{}… ({left_out} more characters not shown)", &message[..end]).into()
        }
    }
}

/// The lines of `text` as the runner reads a step's output (.NET `StreamReader.ReadLine`): a
/// line ends at `\n`, `\r` or `\r\n`; a break at the very end starts no further line.
pub(crate) fn runner_lines(text: &str) -> impl Iterator<Item = &str> {
    let text = text.strip_suffix("\r\n").or_else(|| text.strip_suffix(['\r', '\n'])).unwrap_or(text);
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let s = rest?;
        match s.find(['\r', '\n']) {
            Some(i) => {
                let next = if s[i..].starts_with("\r\n") { i + 2 } else { i + 1 };
                rest = Some(&s[next..]);
                Some(&s[..i])
            }
            None => {
                rest = None;
                Some(s)
            }
        }
    })
}

/// Whether the runner could read `line` as a workflow command: `::` after leading whitespace
/// (v2), or `##[` anywhere (v1). Leading control and invisible format characters count as
/// whitespace here, a wider net than the runner's `TrimStart`.
fn could_be_command(line: &str) -> bool {
    let invisible = |c: char| {
        c.is_whitespace()
            || c.is_control()
            || matches!(c, '\u{180e}' | '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}')
    };
    line.trim_start_matches(invisible).starts_with("::") || line.contains("##[")
}

/// Removes registered secrets from text; cheap to clone, and sees secrets registered later.
/// A secret is found raw, URL-encoded in any way (`forms::redact_url_encoded`), and in every
/// fixed form `forms::forms` gives (JSON-escaped, base64).
#[derive(Clone, Default)]
pub struct Redactor {
    patterns: Arc<Mutex<Vec<Pattern>>>,
}

/// What a [`Redactor`] looks for: a secret (read raw or percent-decoded), or a fixed form of one.
enum Pattern {
    Secret(String),
    Form(String),
}

impl Pattern {
    fn text(&self) -> &str {
        match self {
            Pattern::Secret(s) | Pattern::Form(s) => s,
        }
    }
}

impl Redactor {
    /// `text` with every registered secret replaced by `***`, the longest first (so a secret
    /// that contains another is not left half shown).
    pub fn redact(&self, text: &str) -> String {
        let patterns = self.patterns.lock().unwrap();
        let mut out = text.to_owned();
        for pattern in patterns.iter() {
            match pattern {
                Pattern::Secret(secret) => {
                    if let Some(redacted) = forms::redact_url_encoded(&out, secret) {
                        out = redacted;
                    }
                }
                Pattern::Form(form) => {
                    if out.contains(form.as_str()) {
                        out = out.replace(form.as_str(), "***");
                    }
                }
            }
        }
        out
    }

    /// Whether `secret` itself has been registered.
    fn holds(&self, secret: &str) -> bool {
        self.patterns.lock().unwrap().iter().any(|p| matches!(p, Pattern::Secret(s) if s == secret))
    }

    /// Hold `secret` and its other forms; whether it was new.
    fn insert(&self, secret: &str) -> bool {
        let mut patterns = self.patterns.lock().unwrap();
        if patterns.iter().any(|p| matches!(p, Pattern::Secret(s) if s == secret)) {
            return false;
        }
        // A fixed form of another secret that is this one gives way to the secret.
        patterns.retain(|p| p.text() != secret);
        patterns.push(Pattern::Secret(secret.to_owned()));
        for form in forms::forms(secret) {
            if !patterns.iter().any(|p| p.text() == form) {
                patterns.push(Pattern::Form(form));
            }
        }
        patterns.sort_by_key(|p| std::cmp::Reverse(p.text().len()));
        true
    }
}

/// Every secret registered in this process, through any runner or sink.
fn registered() -> &'static Redactor {
    static REGISTERED: std::sync::OnceLock<Redactor> = std::sync::OnceLock::new();
    REGISTERED.get_or_init(Redactor::default)
}

/// `text` with every secret registered in this process replaced by `***`, for code without a
/// [`Runner`] at hand. Call it before cutting text short: a cut secret would no longer match.
pub fn redact_registered(text: &str) -> String {
    registered().redact(text)
}

/// Warnings of code without a runner at hand, said before the next line the runner writes.
fn pending_warnings() -> &'static Mutex<Vec<String>> {
    static PENDING: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    PENDING.get_or_init(|| Mutex::new(Vec::new()))
}

/// Say `message` as a warning from code that has no [`Runner`] at hand: before the next line
/// the runner writes, once per process however often it is said.
pub fn warn_later(message: &str) {
    static SAID: OnceLock<Mutex<std::collections::HashSet<String>>> = OnceLock::new();
    let said = SAID.get_or_init(|| Mutex::new(std::collections::HashSet::new()));
    if said.lock().unwrap_or_else(|e| e.into_inner()).insert(message.to_owned()) {
        pending_warnings().lock().unwrap_or_else(|e| e.into_inner()).push(message.to_owned());
    }
}

/// Registers secrets with the runner from anywhere; cheap to clone.
#[derive(Clone)]
pub struct SecretSink {
    redactor: Redactor,
    log: Option<Arc<Log>>,
}

impl SecretSink {
    /// A sink that only remembers (for tests and for code running without a runner).
    pub fn detached() -> Self {
        Self { redactor: Redactor::default(), log: None }
    }

    /// Whether `secret` has been registered.
    pub fn contains(&self, secret: &str) -> bool {
        self.redactor.holds(secret)
    }

    /// Register `secret`; a multi-line one is registered whole and line by line too, so that
    /// one line of it printed alone (a key file's body, a command's output) is masked as well.
    pub fn add(&self, secret: &str) {
        let lines: Vec<&str> = crate::runner::runner_lines(secret.trim()).collect();
        if lines.len() > 1 {
            for line in lines {
                self.add_one(line);
            }
        }
        self.add_one(secret);
    }

    fn add_one(&self, secret: &str) {
        let secret = secret.trim();
        if secret.len() < 4 {
            return;
        }
        registered().insert(secret);
        if !self.redactor.insert(secret) {
            return;
        }
        if let Some(log) = &self.log {
            log.command("add-mask", secret);
        }
    }
}

impl std::fmt::Debug for SecretSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretSink")
    }
}

pub struct Group<'a> {
    runner: &'a Runner,
}

impl Drop for Group<'_> {
    fn drop(&mut self) {
        if self.runner.mode == Mode::Actions {
            self.runner.log.command("endgroup", "");
        }
    }
}

/// A random token (32 hex digits) for heredoc delimiters, `stop-commands` and temporary names.
pub fn random_token() -> String {
    let a = std::collections::hash_map::RandomState::new().build_hasher().finish();
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    h.write_u32(std::process::id());
    format!("{:016x}{:016x}", a, h.finish())
}

/// Append `name<<DELIM\nvalue\nDELIM\n` to one of the runner's command files.
fn append_key_value(path: &Path, what: &'static str, name: &str, value: &str) -> Result<(), RunnerError> {
    let mut delimiter = format!("ghadelimiter_{}", random_token());
    while value.contains(&delimiter) || name.contains(&delimiter) {
        delimiter = format!("ghadelimiter_{}", random_token());
    }
    let record = format!("{name}<<{delimiter}\n{value}\n{delimiter}\n");
    let write = || -> io::Result<()> {
        let mut f = OpenOptions::new().create(true).append(true).open(path)?;
        f.write_all(record.as_bytes())
    };
    write().map_err(|source| RunnerError::Write { path: path.to_owned(), what, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Clone, Default)]
    pub(crate) struct Buffer(pub Arc<Mutex<Vec<u8>>>);
    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    impl Buffer {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    #[test]
    fn outputs_are_multiline_safe_and_secrets_never_print() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let env = Env::from_pairs([("GITHUB_OUTPUT", out.to_str().unwrap()), ("GITHUB_ACTIONS", "true")]);
        let log = Buffer::default();
        let runner = Runner::new(Mode::Actions, env, Box::new(log.clone()), Box::new(io::sink()));
        runner.set_output(Output::ChangedFiles, "a\nb").unwrap();
        runner.add_secret("s3cr3t-value");
        runner.warning("token s3cr3t-value leaked\nsecond line");
        let text = std::fs::read_to_string(&out).unwrap();
        let mut lines = text.lines();
        let first = lines.next().unwrap();
        let delim = first.strip_prefix("changed-files<<").unwrap();
        assert!(delim.starts_with("ghadelimiter_"));
        assert_eq!(lines.collect::<Vec<_>>(), ["a", "b", delim]);
        let logged = log.text();
        assert!(logged.contains("::add-mask::s3cr3t-value"));
        assert!(logged.contains("::warning::token *** leaked%0Asecond line"));
        assert_eq!(logged.matches("s3cr3t-value").count(), 1, "only the mask command names it: {logged}");
    }

    #[test]
    fn a_long_annotation_is_cut_at_a_character_after_redaction() {
        let (runner, log) = actions_runner();
        runner.add_secret("s3cr3t-value");
        // A note from outside: ours at its head, a secret just past the cut, 10,000 `é` (two
        // bytes each, so a byte cut would split one).
        let note =
            format!("uncovered-reads: {}s3cr3t-value{}", "é".repeat(MAX_ANNOTATION_CHARS - 20), "x".repeat(5_000));
        runner.warning(&note);
        runner.warning("short and whole");
        let text = log.text();
        let warnings: Vec<String> =
            log_model::commands(&text).into_iter().filter(|c| c.name == "warning").map(|c| c.data).collect();
        assert_eq!(warnings.len(), 2, "{text}");
        let (head, tail) = warnings[0].split_once('…').expect("cut with an ellipsis");
        assert_eq!(head.chars().count(), MAX_ANNOTATION_CHARS);
        // Redacted before the cut: the mask fills the last characters.
        assert!(head.starts_with("uncovered-reads: éé") && head.ends_with("é***"), "{head}");
        assert!(!warnings[0].contains("s3cr3t"));
        assert_eq!(tail, " (5000 more characters not shown)");
        assert_eq!(warnings[1], "short and whole");
    }

    fn actions_runner() -> (Runner, Buffer) {
        let log = Buffer::default();
        let env = Env::from_pairs([("GITHUB_ACTIONS", "true")]);
        (Runner::new(Mode::Actions, env, Box::new(log.clone()), Box::new(io::sink())), log)
    }

    /// Lines the runner would obey if they were printed as they are.
    const PAYLOADS: [&str; 7] = [
        "label\n::error title=pwned::injected",
        "x\r::add-mask::backend",
        "a\r\n  ::set-output name=a::b",
        "value ##[add-mask]backend",
        "v\r\t\u{2028}::error title=pwned::sep",
        "\u{feff}::warning::bom",
        "::pwned-token::",
    ];

    #[test]
    fn text_from_outside_never_starts_a_command() {
        let (runner, log) = actions_runner();
        {
            let _group = runner.group("files\n::error title=pwned::in a title");
            for payload in PAYLOADS {
                runner.info(&format!("  {payload} = 1"));
                runner.info(payload);
            }
            runner.warning("not saved:\n::error title=pwned::x\r##[add-mask]backend");
        }
        let text = log.text();
        let commands: Vec<(String, String)> = log_model::commands(&text)
            .into_iter()
            .map(|c| {
                assert!(c.properties.is_empty(), "{c:?} in\n{text}");
                (c.name, c.data)
            })
            .collect();
        assert_eq!(
            commands,
            [
                ("group".to_owned(), "files\n::error title=pwned::in a title".to_owned()),
                ("warning".to_owned(), "not saved:\n::error title=pwned::x\r##[add-mask]backend".to_owned()),
                ("endgroup".to_owned(), String::new()),
            ],
            "{text}"
        );
        // Nothing is lost: each payload reads as text, split where the runner splits lines,
        // its invisible characters shown escaped.
        let shown = log_model::text(&text);
        for payload in PAYLOADS {
            for line in runner_lines(payload) {
                let line = escape_invisible(line);
                assert!(shown.iter().any(|s| *s == line), "`{line}` not shown in\n{text}");
            }
        }
        assert!(shown.iter().any(|s| s == "\\u{feff}::warning::bom"), "{text}");
    }

    #[test]
    fn lines_split_where_the_runner_splits_them() {
        let split = |s| runner_lines(s).collect::<Vec<_>>();
        assert_eq!(split("a\rb\r\nc\n\nd\r\n"), ["a", "b", "c", "", "d"]);
        assert_eq!(split("a\n\r"), ["a", ""]);
        assert_eq!(split(""), [""]);
        assert!(could_be_command(" \t::x::") && could_be_command("\u{200b}::x::") && could_be_command("a ##[x]"));
        assert!(!could_be_command("a ::x::") && !could_be_command("#[x]"));
    }

    #[test]
    fn other_threads_never_land_inside_stopped_commands() {
        let (runner, log) = actions_runner();
        std::thread::scope(|s| {
            for t in 0..4 {
                let runner = &runner;
                s.spawn(move || {
                    for i in 0..200 {
                        if (t + i) % 2 == 0 {
                            runner.info(&format!("::error title=pwned::{t}-{i}"));
                        } else {
                            runner.info(&format!("progress {t}-{i}"));
                        }
                    }
                });
            }
        });
        let text = log.text();
        assert_eq!(log_model::commands(&text), []);
        let lines = log_model::read(&text);
        for (i, line) in lines.iter().enumerate() {
            if let log_model::Line::Text(t) = line
                && t.starts_with("::error")
            {
                let before = &lines[i - 1];
                assert!(
                    matches!(before, log_model::Line::Command(c) if c.name == "stop-commands"),
                    "{t} follows {before:?}"
                );
            }
        }
    }

    #[test]
    fn a_secret_holding_another_is_redacted_whole() {
        let (runner, log) = actions_runner();
        runner.add_secret("abcdefgh");
        runner.add_secret("abcdefgh-long-secret");
        runner.info("x abcdefgh-long-secret y");
        assert!(log.text().ends_with("x *** y\n"), "{}", log.text());
    }

    #[test]
    fn a_secret_is_redacted_however_a_text_url_encodes_it() {
        let (runner, log) = actions_runner();
        runner.add_secret("Tok3n+Sess/ion=Val");
        runner.add_secret("pass phrase (it's)!");
        for (line, redacted) in [
            ("mixed Tok3n%2BSess%2fion%3DVal.log", "mixed ***.log"),
            ("path Tok3n+Sess%2Fion=Val.log", "path ***.log"),
            ("component q=pass%20phrase%20(it's)!&x", "component q=***&x"),
            ("form body=pass+phrase+%28it%27s%29%21", "form body=***"),
            ("json {\"t\":\"Tok3n+Sess/ion=Val\"}", "json {\"t\":\"***\"}"),
            ("plain Tok3n Sess ion Val, 100% done", "plain Tok3n Sess ion Val, 100% done"),
        ] {
            runner.info(line);
            assert!(log.text().ends_with(&format!("{redacted}\n")), "{line}:\n{}", log.text());
        }
        assert_eq!(redact_registered("Tok3n%2bSess%2Fion=Val"), "***");
    }

    #[test]
    fn each_line_of_a_multi_line_secret_is_masked_and_outputs_are_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let outputs = dir.path().join("output");
        let env = Env::from_pairs([("GITHUB_ACTIONS", "true"), ("GITHUB_OUTPUT", outputs.to_str().unwrap())]);
        let log = Buffer::default();
        let runner = Runner::new(Mode::Actions, env, Box::new(log.clone()), Box::new(io::sink()));
        runner.add_secret("-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEF\n-----END KEY-----");
        runner.info("line two alone: MIIEvQIBADANBgkqhkiG9w0BAQEF");
        runner.set_output(Output::ChangedFiles, "out/leak-MIIEvQIBADANBgkqhkiG9w0BAQEF.txt").unwrap();
        let text = log.text();
        assert!(text.contains("::add-mask::MIIEvQIBADANBgkqhkiG9w0BAQEF\n"), "{text}");
        assert!(text.contains("line two alone: ***"), "{text}");
        let written = std::fs::read_to_string(&outputs).unwrap();
        assert!(written.contains("out/leak-***.txt") && !written.contains("MIIEvQ"), "{written}");
    }

    #[test]
    fn inputs_follow_the_runner_naming() {
        let env = Env::from_pairs([("INPUT_HASH-FILES", " gen.py \n"), ("INPUT_PREFIX", "  ")]);
        let runner = Runner::new(Mode::Actions, env, Box::new(io::sink()), Box::new(io::sink()));
        assert_eq!(runner.input("hash-files").as_deref(), Some("gen.py"));
        assert_eq!(runner.input("prefix"), None);
        assert_eq!(runner.given_input("prefix").as_deref(), Some(""));
        assert_eq!(runner.given_input("variant"), None);
        let mut names = runner.given_input_names();
        names.sort();
        assert_eq!(names, [("hash-files".to_owned(), false), ("prefix".to_owned(), true)]);
    }

    #[test]
    fn export_env_rejects_bad_names() {
        let runner = Runner::new(Mode::Cli, Env::default(), Box::new(io::sink()), Box::new(io::sink()));
        assert!(runner.export_env("BAD NAME", "1").is_err());
        assert!(runner.export_env("1X", "1").is_err());
        assert!(runner.export_env("GOOD_NAME", "1").is_ok());
    }
}
