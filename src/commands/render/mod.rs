//! What users read, one file per outcome: a fingerprint's, a restore's, a save's, an
//! explanation's, a listing's and a prune's log lines (each with its level), step summary and
//! `strict` error text. Commands decide typed values and hand them here; no other file of
//! `commands` words a log line. The restore's, save's and explanation's snapshots hold the words
//! of every value once. Causes from outside (an error chain, a path) are put in as given.

pub(super) mod content;
pub(super) mod explain;
pub(super) mod fingerprint;
pub(super) mod list;
pub(super) mod prune;
pub(super) mod restore;
pub(super) mod save;

use crate::config::Config;
use crate::fingerprint::Value;
use crate::outcome::Transfer;
use crate::runner::summary::{Inline, Markdown};
use crate::runner::{Redactor, Runner};
use crate::text::shorten;
use crate::units;

/// A log line and the level it is said at.
#[derive(Debug, PartialEq, Eq)]
pub enum Said {
    Info(String),
    Warning(String),
    Error(String),
    Notice(String),
    /// What a command answers (`explain`): kept under `--quiet`.
    Answer(String),
}

impl Said {
    pub fn say(&self, runner: &Runner) {
        match self {
            Said::Info(line) => runner.info(line),
            Said::Warning(line) => runner.warning(line),
            Said::Error(line) => runner.error(line),
            Said::Notice(line) => runner.notice(line),
            Said::Answer(line) => runner.answer(line),
        }
    }

    pub fn text(&self) -> &str {
        match self {
            Said::Info(line) | Said::Warning(line) | Said::Error(line) | Said::Notice(line) | Said::Answer(line) => {
                line
            }
        }
    }
}

pub fn say_all(runner: &Runner, lines: impl IntoIterator<Item = Said>) {
    lines.into_iter().for_each(|line| line.say(runner));
}

/// `backend: local directory `…``, before a restore or a save asks it.
pub fn backend(described: &str) -> Said {
    Said::Info(format!("backend: {described}"))
}

/// A restore or a save could not leave the marker a later `clean-on-miss` cleans a root by.
pub fn unmarked(dir: &std::path::Path, e: &std::io::Error) -> Said {
    Said::Warning(format!("cannot mark `{}` as exact-cache's own for `clean-on-miss`: {e}", dir.display()))
}

/// `ACTIONS_CACHE_MODE` holds none of its values: the job goes on as `write`.
pub fn unknown_cache_mode(value: &str) -> Said {
    Said::Warning(format!(
        "`ACTIONS_CACHE_MODE` is `{}`, none of {}: read as `write`",
        shorten(value, 40),
        crate::choice::names::<crate::backend::CacheMode>()
    ))
}

/// Files named in a line before "and N more".
const NAMED: usize = 5;
/// Rows of a list in the summary before "and N more".
const SUMMARY_ROWS: usize = 40;

/// At most [`NAMED`] names in code spans, then `and N more`.
fn named(names: &[String]) -> String {
    let mut shown: Vec<String> = names.iter().take(NAMED).map(|f| format!("`{}`", shorten(f, 120))).collect();
    if names.len() > NAMED {
        shown.push(format!("and {} more", names.len() - NAMED));
    }
    shown.join(", ")
}

/// Below this a step's time is mostly fixed costs, and a rate would say nothing.
const RATE_FROM: std::time::Duration = std::time::Duration::from_millis(100);

/// `3 files, 6.0 MiB (2.0 KiB compressed) in 21 ms`, with the content's rate when it means
/// something.
fn transfer(t: &Transfer) -> Inline {
    let mut line = format!(
        "{}, {} ({} compressed) in {}",
        units::count_of(t.files, "file"),
        units::bytes(t.content_bytes),
        units::bytes(t.archive_bytes),
        units::duration(t.elapsed),
    );
    if t.elapsed >= RATE_FROM {
        line.push_str(&format!(", {} of content", units::throughput(t.content_bytes, t.elapsed)));
    }
    Inline::ours(line)
}

/// Characters of a `path` line naming a cache in a summary's heading.
const NAME_CHARS: usize = 60;

/// How fingerprint values read in the log, the summary and explanations of misses: the value of
/// a `secret-env` variable is `***` (whatever its length, on either side of a change), other
/// registered secrets are redacted, and only then is the value cut, so no part of a secret
/// survives the cut. A summary's heading names its cache ([`cache_name`]).
pub struct Shown<'a> {
    redactor: Redactor,
    secret_env: &'a [String],
    cache: Option<String>,
    /// `save-on-failure` and `save-if`, for what a miss's summary says of the save.
    save_on_failure: bool,
    save_if: bool,
    /// Outside Actions, where a save is a command the user runs.
    cli: bool,
}

impl<'a> Shown<'a> {
    pub fn new(runner: &Runner, config: &'a Config) -> Self {
        Self {
            redactor: runner.redactor(),
            secret_env: &config.secret_env,
            cache: cache_name(config),
            save_on_failure: config.save.save_on_failure,
            save_if: config.save.save_if,
            cli: runner.mode() == crate::runner::Mode::Cli,
        }
    }

    #[cfg(test)]
    pub fn plain() -> Shown<'static> {
        Shown {
            redactor: Redactor::default(),
            secret_env: &[],
            cache: None,
            save_on_failure: false,
            save_if: true,
            cli: false,
        }
    }

    /// A summary headed `exact-cache <command>: <the cache's name>`.
    fn summary(&self, command: &str) -> Markdown {
        let mut md = self.markdown();
        let name = self.cache.as_deref().map(|name| format!(": {name}")).unwrap_or_default();
        md.heading(3, &format!("exact-cache {command}{name}"));
        md
    }

    fn is_secret(&self, component: &str, label: &str) -> bool {
        component == crate::fingerprint::ComponentName::Env.name() && self.secret_env.iter().any(|n| n == label)
    }

    /// `value` of `label` in `component`, as one line of at most `max` characters.
    pub fn value(&self, component: &str, label: &str, value: &Value, max: usize) -> String {
        if self.is_secret(component, label) && *value != Value::Absent {
            return "***".to_owned();
        }
        shorten(&self.redactor.redact(value.display()), max)
    }

    /// When a miss is saved: GitHub hides a skipped post step, so the restore says it.
    fn when_saved(&self) -> &'static str {
        if self.cli {
            return "when you run `exact-cache save` with the same inputs";
        }
        match (self.save_if, self.save_on_failure) {
            (false, _) => "nothing: `save-if` is false for this job",
            (true, false) => {
                "by the post step, only if the job succeeds (`save-on-failure: true` saves after a failure too); \
                 with the `restore` entry point, by your `save` step"
            }
            (true, true) => "by the post step, also if the job fails (`save-on-failure`)",
        }
    }

    pub fn markdown(&self) -> Markdown {
        Markdown::new(self.redactor.clone())
    }
}

/// What a job calls this cache: its `prefix`; with the default prefix, its preset, else its
/// first `path` line. A save given the restore's `key` goes by that key's prefix.
fn cache_name(config: &Config) -> Option<String> {
    let prefix = config.save.key.as_ref().and_then(|k| k.prefix()).unwrap_or(&config.locate.prefix);
    if prefix != crate::config::DEFAULT_PREFIX {
        return Some(prefix.to_owned());
    }
    if let Some(preset) = config.preset {
        return Some(preset.name().to_owned());
    }
    config.locate.path_lines.iter().find(|line| !line.starts_with('!')).map(|line| shorten(line, NAME_CHARS))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;
    use crate::fingerprint::{Change, Component, Fingerprint, FingerprintRecord};
    use crate::runner::Mode;

    /// A line as the words snapshots write it: its level, then its text.
    pub(super) fn said(s: &Said) -> String {
        let level = match s {
            Said::Info(_) => "info",
            Said::Warning(_) => "warning",
            Said::Error(_) => "error",
            Said::Notice(_) => "notice",
            Said::Answer(_) => "answer",
        };
        format!("{level}: {}", s.text())
    }

    pub(super) fn transfer(files: usize) -> Transfer {
        let elapsed = std::time::Duration::from_millis(1250);
        Transfer { files, content_bytes: 15 << 20, archive_bytes: 4 << 20, elapsed }
    }

    /// Longer than any cut, over several lines.
    fn long_secret() -> String {
        (0..5).map(|i| format!("line{i}-{}", "Zq7xK2mP9w".repeat(6))).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn secret_env_values_are_stars_and_secrets_are_redacted_before_the_cut() {
        let secret = long_secret();
        let runner = Runner::new(Mode::Cli, Env::default(), Box::new(std::io::sink()), Box::new(std::io::sink()));
        runner.add_secret(&secret);
        let names = ["DEPLOY_KEY".to_owned(), "PIN".to_owned()];
        let shown = Shown { redactor: runner.redactor(), secret_env: &names, ..Shown::plain() };
        const CHARS: usize = 160;
        assert_eq!(shown.value("env", "DEPLOY_KEY", &Value::text(&secret), CHARS), "***");
        assert_eq!(shown.value("env", "PIN", &Value::text("4711"), CHARS), "***", "however short");
        assert_eq!(shown.value("env", "PIN", &Value::Absent, CHARS), "absent");
        let echoed = shown.value("commands", "cat key", &Value::text(format!("key: {secret}\nend")), CHARS);
        assert_eq!(echoed, "key: *** ⏎ end");
        // An older entry's value (a rotated secret nobody registered) is masked all the same.
        let change = Change {
            component: "env".into(),
            label: "DEPLOY_KEY".into(),
            old: Some(Value::text(format!("old-{secret}"))),
            new: Some(Value::text(&secret)),
        };
        assert_eq!(explain::change(&change, &shown), "env: DEPLOY_KEY changed");

        let mut fp = Fingerprint::default();
        fp.insert("env", Component::from([("DEPLOY_KEY".to_owned(), Value::text(&secret))]));
        fp.insert("commands", Component::from([("cat key".to_owned(), Value::text(format!("k {secret}")))]));
        let summary = fingerprint::summary(&shown, &FingerprintRecord::new("p", &"v".into(), fp), &[]);
        let chars: Vec<char> = secret.chars().collect();
        for fragment in chars.windows(12).map(String::from_iter).filter(|f| !f.contains('\n')) {
            assert!(!summary.contains(&fragment), "`{fragment}` in\n{summary}");
        }
    }

    #[test]
    fn a_summary_heading_names_the_cache_by_prefix_preset_or_first_path_line() {
        let config = |pairs: &[(&str, &str)]| {
            let mut raw = crate::inputs::RawInputs::default();
            for (name, value) in pairs {
                raw.set(name, *value);
            }
            Config::from_raw(
                &raw,
                &Env::from_pairs([("HOME", "/home/u")]),
                std::path::Path::new("/ws"),
                crate::config::CommandName::Restore,
            )
            .unwrap()
        };
        let name = |pairs: &[(&str, &str)]| cache_name(&config(pairs));
        assert_eq!(name(&[("path", "!out/x\nout"), ("prefix", "fixtures-v1")]).as_deref(), Some("fixtures-v1"));
        assert_eq!(name(&[("path", "!out/x\nout/**")]).as_deref(), Some("out/**"), "the first line that is no `!`");
        let mut preset = config(&[("path", "out")]);
        preset.preset = Some(crate::preset::Preset::TorchInductor);
        assert_eq!(cache_name(&preset).as_deref(), Some("torch-inductor"));

        // A save given the restore's key is headed by that key's prefix, as the restore was.
        let key = format!("my-fixtures-v2-{}", "a".repeat(64));
        assert_eq!(name(&[("path", "fixtures"), ("key", &key)]).as_deref(), Some("my-fixtures-v2"));
        let default = format!("exact-cache-{}", "a".repeat(64));
        assert_eq!(name(&[("path", "fixtures"), ("key", &default)]).as_deref(), Some("fixtures"));

        let shown = Shown { cache: Some("out/**".to_owned()), ..Shown::plain() };
        let summary =
            fingerprint::summary(&shown, &FingerprintRecord::new("p", &"v".into(), Fingerprint::default()), &[]);
        assert!(summary.starts_with("### exact-cache fingerprint: out/\\*\\*\n"), "{summary}");
    }

    #[test]
    fn a_transfer_reads_as_content_in_time_with_a_rate_only_when_it_means_something() {
        use std::time::Duration;
        let t = |content: u64, archive: u64, elapsed: Duration| Transfer {
            files: 3,
            content_bytes: content,
            archive_bytes: archive,
            elapsed,
        };
        let mib = 1024 * 1024;
        assert_eq!(
            super::transfer(&t(6 * mib, 2048, Duration::from_millis(21))).to_string(),
            "3 files, 6.0 MiB (2.0 KiB compressed) in 21 ms"
        );
        assert_eq!(
            super::transfer(&t(300 * mib, 30 * mib, Duration::from_millis(1500))).to_string(),
            "3 files, 300.0 MiB (30.0 MiB compressed) in 1.5 s, 200.0 MiB/s of content"
        );
    }
}
