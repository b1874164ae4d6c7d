//! What the repository tracks, for `clean-on-miss`: git is asked for the files below a root
//! (`git ls-files -z`), so a committed file beside generated ones is never removed. Without git,
//! or where a root is outside any work tree, the log says so and guarantee 8's rules alone
//! decide.
//!
//! Git finds the repository from the directory it runs in, so a `.git` written into the root
//! itself (a `git init`, a one-line `.git` file pointing anywhere) would answer instead of the
//! repository around it: the root's parent directory is asked about the root too, and a file
//! either tracks is kept. Git variables in the job's environment that name another repository,
//! index or work tree, or stop the search for one ([`REPOSITORY_VARS`]), are not passed on.

use crate::archive::Tracked;
use crate::env::Env;
use crate::fingerprint::System;
use crate::runner::Runner;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Variables that make git answer for a repository, index or work tree other than the one
/// around the directory it runs in, stop it looking upward for that one, or change what a
/// pathspec means (as `git rev-parse --local-env-vars` lists them, and a few more). A job may
/// set any of them for its own reasons; none of them may decide what counts as tracked.
const REPOSITORY_VARS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_PREFIX",
    "GIT_CONFIG",
    "GIT_GRAFT_FILE",
    "GIT_SHALLOW_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_LITERAL_PATHSPECS",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
    "GIT_ICASE_PATHSPECS",
];

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
        for name in REPOSITORY_VARS {
            env.remove(name);
        }
        Self { runner, system, env, said_missing: Cell::new(false), asked: RefCell::new(Vec::new()) }
    }
}

impl Tracked for GitTracked<'_> {
    fn below(&self, real: &Path) -> Result<HashSet<String>, String> {
        if let Some((_, files)) = self.asked.borrow().iter().find(|(p, _)| p == real) {
            return Ok(files.clone());
        }
        let mut files = self.ls_files(real)?;
        // The repository around the root, asked from outside it: a `.git` in the root (written
        // by anything that can write there) must not hide what that one tracks.
        if let (Some(parent), Some(name)) = (real.parent(), real.file_name()) {
            let name = name.to_str().ok_or_else(|| format!("`{}` is not UTF-8", real.display()))?;
            files.extend(self.ls_files_of(parent, name)?);
        }
        self.asked.borrow_mut().push((real.to_owned(), files.clone()));
        Ok(files)
    }
}

/// Whether git said that it found no repository (or no work tree) where it ran.
fn no_work_tree(stderr: &str) -> bool {
    stderr.contains("not a git repository") || stderr.contains("must be run in a work tree")
}

impl GitTracked<'_> {
    /// The files below `parent/name` that the repository around `parent` tracks, relative to
    /// `parent/name`; none where `parent` is in no work tree (it says nothing: the root's own
    /// answer is what the log speaks of).
    fn ls_files_of(&self, parent: &Path, name: &str) -> Result<HashSet<String>, String> {
        let args = ["--literal-pathspecs", "-c", "core.fsmonitor=false", "ls-files", "-z", "--", name];
        let out = match self.system.run("git", &args, &self.env, parent) {
            Ok(Some(out)) => out,
            Ok(None) => return Ok(HashSet::new()),
            Err(e) => return Err(format!("cannot run git: {e}")),
        };
        if !out.success {
            if no_work_tree(&out.stderr) {
                return Ok(HashSet::new());
            }
            return Err(format!("git ls-files failed in `{}` ({})", parent.display(), out.failure_detail()));
        }
        let prefix = format!("{name}/");
        Ok(out
            .stdout
            .split('\0')
            .filter_map(|f| f.strip_prefix(&prefix))
            .map(|f| f.trim_end_matches('/'))
            .filter(|f| !f.is_empty())
            .map(str::to_owned)
            .collect())
    }

    /// What the repository git finds from `real` tracks below it.
    fn ls_files(&self, real: &Path) -> Result<HashSet<String>, String> {
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
        } else if no_work_tree(&out.stderr) {
            self.runner.info(&format!(
                "clean-on-miss: `{}` is not in a git work tree; only the places guarantee 8 allows limit what is removed",
                real.display()
            ));
            HashSet::new()
        } else {
            return Err(format!("git ls-files failed ({})", out.failure_detail()));
        };
        Ok(files)
    }
}
