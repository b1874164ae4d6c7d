//! What the repository tracks, for `clean-on-miss`: git is asked for the files below a root
//! (`git ls-files -z`), so a committed file beside generated ones is never removed. Without git,
//! or where a root is outside any work tree, the log says so and guarantee 8's rules alone
//! decide.

use crate::archive::Tracked;
use crate::env::Env;
use crate::fingerprint::System;
use crate::runner::Runner;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Asks git through the machine's [`System`], and notes in the log where it could not.
pub(super) struct GitTracked<'a> {
    runner: &'a Runner,
    system: &'a dyn System,
    env: Env,
    /// Said once per run: git is missing.
    said_missing: Cell<bool>,
    /// What each directory answered (a root may be asked about again).
    asked: RefCell<Vec<(PathBuf, HashSet<String>)>>,
}

impl<'a> GitTracked<'a> {
    pub fn new(runner: &'a Runner, system: &'a dyn System) -> Self {
        let mut env = runner.env().clone();
        // Messages as this code reads them; no lock taken on the index of the job's repository.
        env.set("LC_ALL", "C");
        env.set("GIT_OPTIONAL_LOCKS", "0");
        Self { runner, system, env, said_missing: Cell::new(false), asked: RefCell::new(Vec::new()) }
    }
}

impl Tracked for GitTracked<'_> {
    fn below(&self, real: &Path) -> Result<HashSet<String>, String> {
        if let Some((_, files)) = self.asked.borrow().iter().find(|(p, _)| p == real) {
            return Ok(files.clone());
        }
        // `ls-files` reads the index only; no hook or fsmonitor of the repository runs.
        let args = ["-c", "core.fsmonitor=false", "ls-files", "-z"];
        let out = match self.system.run("git", &args, &self.env, real) {
            Ok(Some(out)) => out,
            Ok(None) => {
                if !self.said_missing.replace(true) {
                    self.runner.info(
                        "clean-on-miss: git is not installed, so files the repository tracks cannot be told from \
                         stale ones; only the places guarantee 8 allows limit what is removed",
                    );
                }
                return Ok(HashSet::new());
            }
            Err(e) => return Err(format!("cannot run git: {e}")),
        };
        let files: HashSet<String> = if out.success {
            out.stdout.split('\0').filter(|f| !f.is_empty()).map(|f| f.trim_end_matches('/').to_owned()).collect()
        } else if out.stderr.contains("not a git repository") || out.stderr.contains("must be run in a work tree") {
            self.runner.info(&format!(
                "clean-on-miss: `{}` is not in a git work tree; only the places guarantee 8 allows limit what is removed",
                real.display()
            ));
            HashSet::new()
        } else {
            return Err(format!("git ls-files failed ({})", out.failure_detail()));
        };
        self.asked.borrow_mut().push((real.to_owned(), files.clone()));
        Ok(files)
    }
}
