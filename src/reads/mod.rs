//! What the generating run reads: on a miss, a `sitecustomize` (an audit hook on `open`,
//! `hook.py`) in a directory of exact-cache's own, put first on `PYTHONPATH` for the job's
//! later steps, makes every Python process of the job append the files under the workspace it
//! opens (read or written) to a log; the save reads the log back and names the files read that
//! no input covers. The hook chains to the next `sitecustomize` on the path and takes its own
//! directory off `sys.path`, so the job's Python behaves as before. Processes that are not
//! Python are not seen.

use crate::env::Env;
use crate::paths::{Locations, PatternSet};
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

/// The variable that switches the hook on and names its log (exported to later steps).
pub const LOG_VAR: &str = "EXACT_CACHE_READS_LOG";

const HOOK: &str = include_str!("hook.py");
const ROOT_PLACEHOLDER: &str = "\"__EXACT_CACHE_ROOT__\"";

#[derive(Debug, thiserror::Error)]
pub enum ReadsError {
    #[error("cannot write `{}`", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read the reads log `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Write the hook into `dir` for `workspace` and start an empty log there: the variables that
/// make later steps' Python record their reads (`PYTHONPATH` keeps what `env` had after ours).
pub fn arrange(dir: &Path, workspace: &Path, env: &Env) -> Result<Vec<(String, String)>, ReadsError> {
    let write = |path: PathBuf, text: &str| {
        std::fs::write(&path, text).map_err(|source| ReadsError::Write { path: path.clone(), source })
    };
    std::fs::create_dir_all(dir).map_err(|source| ReadsError::Write { path: dir.to_owned(), source })?;
    let root = serde_json::to_string(&workspace.to_string_lossy()).expect("a string serializes");
    write(dir.join("sitecustomize.py"), &HOOK.replace(ROOT_PLACEHOLDER, &root))?;
    let log = dir.join("reads.log");
    write(log.clone(), "")?;
    let mut path = vec![dir.to_owned()];
    path.extend(env.non_empty("PYTHONPATH").map(|p| std::env::split_paths(p).collect::<Vec<_>>()).unwrap_or_default());
    let joined = std::env::join_paths(&path).map_err(|e| ReadsError::Write {
        path: dir.to_owned(),
        source: io::Error::new(io::ErrorKind::InvalidInput, e),
    })?;
    Ok(vec![
        ("PYTHONPATH".to_owned(), joined.to_string_lossy().into_owned()),
        (LOG_VAR.to_owned(), log.to_string_lossy().into_owned()),
    ])
}

/// What the log holds: files read, files written (absolute), and what the hooks said of
/// themselves (each once).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Log {
    pub read: BTreeSet<PathBuf>,
    pub written: BTreeSet<PathBuf>,
    pub notes: BTreeSet<String>,
}

impl Log {
    pub fn load(path: &Path) -> Result<Self, ReadsError> {
        let text = std::fs::read(path).map_err(|source| ReadsError::Read { path: path.to_owned(), source })?;
        Ok(Self::parse(&String::from_utf8_lossy(&text)))
    }

    /// One JSON pair per line: `["r", path]`, `["w", path]` or `["!", note]`; other lines (a
    /// process cut short mid-line) are skipped.
    pub fn parse(text: &str) -> Self {
        let mut log = Log::default();
        for line in text.lines() {
            let Ok((kind, value)) = serde_json::from_str::<(String, String)>(line) else { continue };
            match kind.as_str() {
                "r" => log.read.insert(PathBuf::from(value)),
                "w" => log.written.insert(PathBuf::from(value)),
                "!" => log.notes.insert(value),
                _ => false,
            };
        }
        log
    }

    /// The files read that nothing covers, as `locations` shows them: not written by the job,
    /// not under `path`, not among `covered` (the key's `files` labels: `hash-files` and
    /// imports), and still a regular file.
    pub fn uncovered(&self, locations: &Locations, paths: &PatternSet, covered: &BTreeSet<String>) -> Vec<String> {
        self.read
            .iter()
            .filter(|p| !self.written.contains(*p) && p.starts_with(&locations.workspace))
            .filter(|p| !under(paths, p))
            .map(|p| (p, locations.display(p)))
            .filter(|(p, label)| !covered.contains(label) && p.is_file())
            .map(|(_, label)| label)
            .collect()
    }
}

/// Whether `path` lies under a `path` line (and no `!` line excludes it).
fn under(paths: &PatternSet, path: &Path) -> bool {
    !paths.is_excluded(path)
        && paths.includes.iter().any(|p| {
            path.strip_prefix(&p.base).ok().and_then(Path::to_str).is_some_and(|rel| p.covers(&rel.replace('\\', "/")))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_read_leniently_and_reads_are_weighed_against_what_covers_them() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        for f in ["data/cases.txt", "tools/gen.py", "fixtures/old.expected", "scratch.txt", "notes.md"] {
            std::fs::create_dir_all(ws.join(f).parent().unwrap()).unwrap();
            std::fs::write(ws.join(f), f).unwrap();
        }
        let at = |rel: &str| ws.join(rel).to_string_lossy().into_owned();
        let line = |kind: &str, value: &str| serde_json::to_string(&(kind, value)).unwrap();
        let text = [
            line("r", &at("data/cases.txt")),
            line("r", &at("tools/gen.py")),
            line("r", &at("fixtures/old.expected")),
            line("w", &at("scratch.txt")),
            line("r", &at("scratch.txt")),
            line("r", &at("gone.txt")),
            line("r", "/elsewhere/x"),
            line("!", "Python 3.7 has no audit hooks (3.8 and later have): its reads are not seen"),
            "[\"r\", \"/cut/sh".to_owned(),
            line("r", &at("notes.md")),
        ]
        .join("\n");
        let log = Log::parse(&text);
        assert_eq!(log.notes.len(), 1);
        let locations = Locations { workspace: ws.clone(), home: None };
        let paths = PatternSet::parse(&["fixtures", "!fixtures/keep"], &locations).unwrap();
        let covered = BTreeSet::from(["tools/gen.py".to_owned()]);
        assert_eq!(log.uncovered(&locations, &paths, &covered), ["data/cases.txt", "notes.md"]);
    }

    #[cfg(unix)]
    #[test]
    fn arranging_keeps_the_users_pythonpath_after_ours() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::from_pairs([("PYTHONPATH", "/theirs/a:/theirs/b")]);
        let exports = arrange(&dir.path().join("reads"), Path::new("/ws/\"quoted\""), &env).unwrap();
        let reads = dir.path().join("reads");
        assert_eq!(exports[0], ("PYTHONPATH".into(), format!("{}:/theirs/a:/theirs/b", reads.display())));
        assert_eq!(exports[1], (LOG_VAR.into(), reads.join("reads.log").display().to_string()));
        let hook = std::fs::read_to_string(reads.join("sitecustomize.py")).unwrap();
        assert!(hook.contains(r#"ROOT = "/ws/\"quoted\"""#), "{hook}");
    }
}
