//! What the repository tracks, for `clean-on-miss`: git is asked for the files below a root
//! (`git ls-files`), so a committed file beside generated ones is never removed. Without git,
//! or where a root is outside any work tree, the log says so and guarantee 8's rules alone
//! decide.
//!
//! The authority is the **workspace's own repository**: the one git finds from
//! `GITHUB_WORKSPACE`, listed once, whose files at or below a root are kept whatever `.git`
//! sits between the workspace and the root (a `git init build`, a one-line `.git` file pointing
//! anywhere). A repository found from a root — in it, between it and the workspace, or nested
//! below it (the walk asks those) — is content, not authority: it can only add files to keep.
//! Git variables in the job's environment that name another repository, index or work tree,
//! or stop the search for one ([`REPOSITORY_VARS`]), are not passed on.
//!
//! Nothing a repository configures runs ([`hardened`]): every call has lazy fetching of
//! missing objects off, every transport refused, the ssh command, fsmonitor and hooks
//! neutralised, and a time bound of its own ([`GIT_WITHIN`]). `ls-files --sparse` reads a sparse
//! index as it is (a directory outside the sparse checkout is listed whole, kept whole) instead
//! of expanding it from tree objects that a partial clone may not have.

use crate::archive::Tracked;
use crate::env::Env;
use crate::fingerprint::{CommandOutput, System};
use crate::runner::Runner;
use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Variables that make git answer for a repository, index or work tree other than the one
/// around the directory it runs in, stop it looking upward for that one, or change what a
/// pathspec means (as `git rev-parse --local-env-vars` lists them, and a few more), or that
/// carry configuration or commands of the job's own. A job may set any of them for its own
/// reasons; none of them may decide what counts as tracked.
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
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_SSH",
    "GIT_PROXY_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
];

/// The variables every git call gets: no lazy fetch of a missing object (git 2.44 on; older
/// gits ignore it, and the transport rules below refuse the fetch), no transport at all (an
/// empty allow-list), an ssh command that runs nothing, no prompt, no lock on the index.
const HARDENED_VARS: &[(&str, &str)] = &[
    ("GIT_NO_LAZY_FETCH", "1"),
    ("GIT_ALLOW_PROTOCOL", ""),
    ("GIT_PROTOCOL_FROM_USER", "0"),
    ("GIT_SSH_COMMAND", "false"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_OPTIONAL_LOCKS", "0"),
    ("LC_ALL", "C"),
];

/// Options before every git command: configuration given on the command line wins over any a
/// repository carries.
const HARDENED_ARGS: &[&str] = &[
    "--no-pager",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.sshCommand=false",
    "-c",
    "protocol.allow=never",
    "-c",
    "fetch.recurseSubmodules=false",
];

/// How long one git call may take: listing the index of a large repository takes seconds; a
/// repository whose configuration includes a FIFO would wait for ever.
const GIT_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

fn hardened<'a>(args: &[&'a str]) -> Vec<&'a str> {
    HARDENED_ARGS.iter().copied().chain(args.iter().copied()).collect()
}

/// What git said about the workspace's own repository.
enum Workspace {
    /// Git is not installed, or the workspace is in no work tree.
    None,
    /// The work tree's top (a real path) and every path its index holds, relative to it
    /// (directories — submodules, sparse directories — without their trailing `/`).
    Repo { top: PathBuf, files: HashSet<String> },
    /// There is one, and it could not answer.
    Failed(String),
}

/// Asks git through the machine's [`System`], and notes in the log where it could not.
pub(super) struct GitTracked<'a> {
    runner: &'a Runner,
    system: &'a dyn System,
    env: Env,
    /// `GITHUB_WORKSPACE` (or the working directory): where the authority is found.
    workspace: PathBuf,
    /// Said once per run: git is missing.
    said_missing: Cell<bool>,
    authority: OnceCell<Workspace>,
    /// What each directory answered (a root may be asked about again).
    asked: RefCell<Vec<(PathBuf, HashSet<String>)>>,
}

impl<'a> GitTracked<'a> {
    pub fn new(runner: &'a Runner, system: &'a dyn System, workspace: &Path) -> Self {
        let mut env = runner.env().clone();
        for name in REPOSITORY_VARS {
            env.remove(name);
        }
        let numbered: Vec<String> = env
            .iter()
            .map(|(name, _)| name)
            .filter(|name| name.starts_with("GIT_CONFIG_KEY_") || name.starts_with("GIT_CONFIG_VALUE_"))
            .map(str::to_owned)
            .collect();
        for name in numbered {
            env.remove(&name);
        }
        for (name, value) in HARDENED_VARS {
            env.set(*name, *value);
        }
        Self {
            runner,
            system,
            env,
            workspace: std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned()),
            said_missing: Cell::new(false),
            authority: OnceCell::new(),
            asked: RefCell::new(Vec::new()),
        }
    }
}

impl Tracked for GitTracked<'_> {
    fn below(&self, real: &Path) -> Result<HashSet<String>, String> {
        if let Some((_, files)) = self.asked.borrow().iter().find(|(p, _)| p == real) {
            return Ok(files.clone());
        }
        let authority = self.authority_below(real)?;
        // Content: the repository git finds from the root, and the one around its parent asked
        // about it (a `.git` in the root must not hide what that one tracks). They only add.
        let own = self.ls_files(real)?;
        let mut files = authority.clone().unwrap_or_default();
        if let (Some(parent), Some(name)) = (real.parent(), real.file_name()) {
            let name = name.to_str().ok_or_else(|| format!("`{}` is not UTF-8", real.display()))?;
            files.extend(self.ls_files_of(parent, name)?);
        }
        match own {
            Some(own) => files.extend(own),
            None if authority.is_none() && !self.said_missing.get() => {
                super::render::restore::untracked_root(real).say(self.runner)
            }
            None => {}
        }
        self.asked.borrow_mut().push((real.to_owned(), files.clone()));
        Ok(files)
    }
}

/// Whether git said that it found no repository (or no work tree) where it ran.
fn no_work_tree(stderr: &str) -> bool {
    stderr.contains("not a git repository") || stderr.contains("must be run in a work tree")
}

/// The line of git's error output that says what went wrong (git may exit 0 after printing
/// `error: Could not read <object>` and leave entries out of a listing: that is a failure too).
fn error_line(out: &CommandOutput) -> Option<&str> {
    out.stderr.lines().map(str::trim).find(|l| l.starts_with("error:") || l.starts_with("fatal:"))
}

/// Why `out` is not a whole answer; `None` when it is.
fn failure(out: &CommandOutput) -> Option<String> {
    match (out.success, error_line(out)) {
        (true, None) => None,
        (_, Some(line)) => Some(match out.code {
            Some(c) => format!("exit status {c}: {line}"),
            None => format!("killed by a signal or timed out: {line}"),
        }),
        (false, None) => Some(out.failure_detail()),
    }
}

/// The paths of `ls-files -z` output (directories without their trailing `/`).
fn listed(stdout: &str) -> impl Iterator<Item = &str> {
    stdout.split('\0').map(|f| f.trim_end_matches('/')).filter(|f| !f.is_empty())
}

impl GitTracked<'_> {
    /// Run git hardened in `cwd`; `Ok(None)` where git is not installed (said once).
    fn git(&self, args: &[&str], cwd: &Path) -> Result<Option<CommandOutput>, String> {
        match self.system.run_within("git", &hardened(args), &self.env, cwd, GIT_WITHIN) {
            Ok(Some(out)) => Ok(Some(out)),
            Ok(None) => {
                if !self.said_missing.replace(true) {
                    super::render::restore::no_git().say(self.runner);
                }
                Ok(None)
            }
            Err(e) => Err(format!("cannot run git: {e}")),
        }
    }

    /// `ls-files -z --sparse` with `rest` in `cwd`: a sparse index read as it is. A git older
    /// than 2.35 does not know `--sparse` and expands the index itself (lazy fetching is off
    /// all the same).
    fn ls_files_run(&self, rest: &[&str], cwd: &Path) -> Result<Option<CommandOutput>, String> {
        // Names are names, never patterns (a global option: before the command).
        let mut args = vec!["--literal-pathspecs", "ls-files", "-z", "--sparse"];
        args.extend(rest);
        let out = self.git(&args, cwd)?;
        if let Some(out) = &out
            && out.code == Some(129)
            && out.stderr.contains("sparse")
        {
            args.retain(|a| *a != "--sparse");
            return self.git(&args, cwd);
        }
        Ok(out)
    }

    /// The workspace's repository, found from the workspace and listed once.
    fn workspace(&self) -> &Workspace {
        self.authority.get_or_init(|| {
            let top = match self.git(&["rev-parse", "--show-toplevel"], &self.workspace) {
                Ok(None) => return Workspace::None,
                Err(e) => return Workspace::Failed(e),
                Ok(Some(out)) => match failure(&out) {
                    Some(_) if no_work_tree(&out.stderr) => return Workspace::None,
                    Some(why) => {
                        let ws = self.workspace.display();
                        return Workspace::Failed(format!(
                            "git cannot find the workspace's repository from `{ws}` ({why})"
                        ));
                    }
                    None => out.stdout.trim_end_matches(['\n', '\r']).to_owned(),
                },
            };
            let top = std::fs::canonicalize(&top).unwrap_or_else(|_| PathBuf::from(top));
            match self.ls_files_run(&[], &top) {
                Ok(None) => Workspace::None,
                Err(e) => Workspace::Failed(e),
                Ok(Some(out)) => match failure(&out) {
                    Some(why) => Workspace::Failed(format!("git ls-files failed in `{}` ({why})", top.display())),
                    None => Workspace::Repo { files: listed(&out.stdout).map(str::to_owned).collect(), top },
                },
            }
        })
    }

    /// What the workspace's repository tracks at or below `real`, relative to it; `None` where
    /// `real` is outside it (or there is none). A root inside a path the index holds as a whole
    /// (a submodule, a directory outside the sparse checkout) cannot be told apart: an error.
    fn authority_below(&self, real: &Path) -> Result<Option<HashSet<String>>, String> {
        let (top, files) = match self.workspace() {
            Workspace::None => return Ok(None),
            Workspace::Failed(why) if real.starts_with(&self.workspace) => return Err(why.clone()),
            Workspace::Failed(_) => return Ok(None),
            Workspace::Repo { top, files } => (top, files),
        };
        let Ok(rel) = real.strip_prefix(top) else { return Ok(None) };
        let rel = rel.to_str().ok_or_else(|| format!("`{}` is not UTF-8", real.display()))?;
        if rel.is_empty() {
            return Ok(Some(files.clone()));
        }
        let mut whole = Path::new(rel).ancestors().filter(|a| !a.as_os_str().is_empty());
        if let Some(held) = whole.find(|a| a.to_str().is_some_and(|a| files.contains(a))) {
            return Err(format!(
                "the workspace's repository holds `{}` as a whole (a submodule, or a directory outside its sparse \
                 checkout), so it cannot say which files below it are its own",
                held.display()
            ));
        }
        let prefix = format!("{rel}/");
        Ok(Some(files.iter().filter_map(|f| f.strip_prefix(&prefix)).map(str::to_owned).collect()))
    }

    /// The files below `parent/name` that the repository around `parent` tracks, relative to
    /// `parent/name`; none where `parent` is in no work tree (it says nothing: the root's own
    /// answer is what the log speaks of).
    fn ls_files_of(&self, parent: &Path, name: &str) -> Result<HashSet<String>, String> {
        let Some(out) = self.ls_files_run(&["--", name], parent)? else {
            return Ok(HashSet::new());
        };
        if let Some(why) = failure(&out) {
            if no_work_tree(&out.stderr) {
                return Ok(HashSet::new());
            }
            return Err(format!("git ls-files failed in `{}` ({why})", parent.display()));
        }
        let prefix = format!("{name}/");
        Ok(listed(&out.stdout).filter_map(|f| f.strip_prefix(&prefix)).map(str::to_owned).collect())
    }

    /// What the repository git finds from `real` tracks below it; `None` where there is none.
    fn ls_files(&self, real: &Path) -> Result<Option<HashSet<String>>, String> {
        let Some(out) = self.ls_files_run(&[], real)? else { return Ok(None) };
        match failure(&out) {
            None => Ok(Some(listed(&out.stdout).map(str::to_owned).collect())),
            Some(_) if no_work_tree(&out.stderr) => Ok(None),
            Some(why) => Err(format!("git ls-files failed in `{}` ({why})", real.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::Mode;
    use std::io;

    /// A git that answers `rev-parse` with `top` and `ls-files` as `ls_files` says (given
    /// whether `--sparse` was asked), and records every call's arguments and variables.
    struct FakeGit {
        top: &'static str,
        ls_files: fn(bool) -> CommandOutput,
        calls: RefCell<Vec<(Vec<String>, Env)>>,
    }

    /// A planted repository whose configuration includes a FIFO holds a git call only until
    /// its own bound.
    #[test]
    fn every_git_call_has_a_short_time_bound() {
        struct Bounded(RefCell<Vec<std::time::Duration>>);
        impl System for Bounded {
            fn run(&self, _: &str, _: &[&str], _: &Env, _: &Path) -> io::Result<Option<CommandOutput>> {
                panic!("git without a bound of its own")
            }
            fn run_within(
                &self,
                _: &str,
                _: &[&str],
                _: &Env,
                _: &Path,
                limit: std::time::Duration,
            ) -> io::Result<Option<CommandOutput>> {
                self.0.borrow_mut().push(limit);
                Ok(Some(out(128, "", "fatal: not a git repository")))
            }
            crate::fingerprint::system::runs_programs_only!();
        }
        let runner = runner();
        let system = Bounded(RefCell::new(Vec::new()));
        let tracked = GitTracked::new(&runner, &system, Path::new("/nonexistent-ws"));
        assert!(tracked.below(Path::new("/nonexistent-ws/out")).unwrap().is_empty());
        let limits = system.0.borrow();
        assert!(!limits.is_empty() && limits.iter().all(|l| *l <= std::time::Duration::from_secs(30)), "{limits:?}");
    }

    fn out(code: i32, stdout: &str, stderr: &str) -> CommandOutput {
        CommandOutput { success: code == 0, code: Some(code), stdout: stdout.into(), stderr: stderr.into() }
    }

    impl System for FakeGit {
        fn run(&self, _program: &str, args: &[&str], env: &Env, cwd: &Path) -> io::Result<Option<CommandOutput>> {
            self.calls.borrow_mut().push((args.iter().map(|a| a.to_string()).collect(), env.clone()));
            // The workspace's repository answers at its top; nothing else is a repository.
            Ok(Some(match (args.contains(&"rev-parse"), cwd == Path::new(self.top)) {
                (true, _) => out(0, &format!("{}\n", self.top), ""),
                (false, true) => (self.ls_files)(args.contains(&"--sparse")),
                (false, false) => out(128, "", "fatal: not a git repository (or any of the parent directories): .git"),
            }))
        }
        crate::fingerprint::system::runs_programs_only!();
    }

    fn runner() -> Runner {
        let env = Env::from_pairs([
            ("GIT_DIR", "/elsewhere"),
            ("GIT_SSH_COMMAND", "touch /tmp/x"),
            ("GIT_CONFIG_KEY_0", "a"),
        ]);
        Runner::new(Mode::Cli, env, Box::new(io::sink()), Box::new(io::sink()))
    }

    /// Every call is hardened; an older git without `--sparse` is asked again without it; and
    /// an `error:` line makes an answer fail even when git exits 0 (a listing with holes).
    #[cfg(unix)]
    #[test]
    fn git_is_asked_hardened_and_a_listing_with_holes_is_no_answer() {
        let runner = runner();
        let old_git = FakeGit {
            top: "/nonexistent-ws",
            ls_files: |sparse| match sparse {
                true => out(129, "", "error: unknown option `sparse'\nusage: git ls-files [<options>]"),
                false => out(0, "out/keep.txt\0out/sub/\0", ""),
            },
            calls: RefCell::new(Vec::new()),
        };
        let tracked = GitTracked::new(&runner, &old_git, Path::new("/nonexistent-ws"));
        let kept = tracked.below(Path::new("/nonexistent-ws/out")).unwrap();
        assert_eq!(kept, HashSet::from(["keep.txt".to_owned(), "sub".to_owned()]));
        for (args, env) in old_git.calls.borrow().iter() {
            let joined = args.join(" ");
            for option in
                ["core.fsmonitor=false", "core.hooksPath=/dev/null", "protocol.allow=never", "core.sshCommand=false"]
            {
                assert!(joined.contains(option), "{joined}");
            }
            assert_eq!(env.get("GIT_NO_LAZY_FETCH"), Some("1"));
            assert_eq!(env.get("GIT_ALLOW_PROTOCOL"), Some(""));
            assert_eq!(env.get("GIT_SSH_COMMAND"), Some("false"));
            assert_eq!((env.get("GIT_DIR"), env.get("GIT_CONFIG_KEY_0")), (None, None));
        }

        let holes = FakeGit {
            top: "/nonexistent-ws",
            ls_files: |_| out(0, "out/keep.txt\0", "hint: expanding\nerror: Could not read 9668455a\n"),
            calls: RefCell::new(Vec::new()),
        };
        let tracked = GitTracked::new(&runner, &holes, Path::new("/nonexistent-ws"));
        let err = tracked.below(Path::new("/nonexistent-ws/out")).unwrap_err();
        assert!(err.contains("error: Could not read"), "{err}");

        // A root inside what the workspace's index holds whole (a submodule) is not guessed at.
        let submodule = FakeGit {
            top: "/nonexistent-ws",
            ls_files: |_| out(0, "vendor/lib\0README\0", ""),
            calls: RefCell::new(Vec::new()),
        };
        let tracked = GitTracked::new(&runner, &submodule, Path::new("/nonexistent-ws"));
        let err = tracked.below(Path::new("/nonexistent-ws/vendor/lib/build")).unwrap_err();
        assert!(err.contains("holds `vendor/lib` as a whole"), "{err}");
    }
}
