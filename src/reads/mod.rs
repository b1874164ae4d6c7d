//! What the generating run reads: on a miss, a `sitecustomize` (an audit hook, `hook.py`) in a
//! directory of exact-cache's own, put first on `PYTHONPATH` for the job's later steps, makes
//! every Python process of the job (3.8 and later) append to a log the files under the workspace
//! it opens, reads (bytecode as its source), writes and loads as shared libraries, each process
//! with the processes it descends from. The save names the files its generator read that no
//! input covers ([`Log::weigh`]). The hook chains to the next `sitecustomize` and takes its own
//! directory off `sys.path`, so the job's Python behaves as before; on a Python without audit
//! hooks it does nothing; processes that are not Python are not seen. After a hit of a compile
//! cache the same hook, armed for [`Record::Torch`], reports what torch's caches spared.
//!
//! Our files are ours: the directory and the log are created fresh (a new directory of a random
//! name, mode 0700, checked to be this user's, in `RUNNER_TEMP/exact-cache`, itself checked),
//! never through a link; the save reads the log as [`Log::load`] says.

use crate::env::Env;
use crate::paths::{Locations, PatternSet};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

pub mod torch;

/// The variable that switches the hook on and names its log (exported to later steps).
pub const LOG_VAR: &str = "EXACT_CACHE_READS_LOG";

/// The variable that says what the hook records ([`Record`], comma-separated; unset: `reads`).
pub const RECORD_VAR: &str = "EXACT_CACHE_RECORD";

/// What the hook records in a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// The files under the workspace it opens (a miss: what the generator reads).
    Reads,
    /// What torch's compile caches report as it ends (a hit on a compile cache: what it saved).
    Torch,
}

impl Record {
    pub fn name(self) -> &'static str {
        match self {
            Record::Reads => "reads",
            Record::Torch => "torch",
        }
    }

    /// What the hook armed in `env` records: `None` when none is armed.
    pub fn armed(env: &Env) -> Option<Vec<Record>> {
        env.non_empty(LOG_VAR)?;
        let names = env.non_empty(RECORD_VAR).unwrap_or("reads");
        let names: Vec<&str> = names.split(',').map(str::trim).collect();
        Some([Record::Reads, Record::Torch].into_iter().filter(|r| names.contains(&r.name())).collect())
    }

    /// `RECORD_VAR`'s value for `records`.
    pub fn value(records: &[Record]) -> String {
        records.iter().map(|r| r.name()).collect::<Vec<_>>().join(",")
    }
}

/// The most of the log a save reads.
pub const LOG_CAP: u64 = 64 << 20;

/// The most files one process records (`_CAP` in `hook.py`): its memory stays bounded.
pub const HOOK_CAP: usize = 100_000;

/// The most distinct notes of the hooks a save says (each a warning).
const MAX_NOTES: usize = 8;

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
    /// Something in the way that exact-cache did not make: a planted directory or log.
    #[error("`{}` is {why}", path.display())]
    NotOurs { path: PathBuf, why: String },
}

/// Write the hook for `workspace` into a new directory of ours under `temp` (`RUNNER_TEMP`) and
/// start an empty log there: the variables that make later steps' Python record `records`
/// (`PYTHONPATH` keeps what `env` had after ours).
pub fn arrange(
    temp: &Path,
    workspace: &Path,
    env: &Env,
    records: &[Record],
) -> Result<Vec<(String, String)>, ReadsError> {
    let hook = HOOK.replace(ROOT_PLACEHOLDER, &format!("\"{}\"", hex::encode(path_bytes(workspace))));
    let dir = own::create(temp, &hook)?;
    let log = dir.join("reads.log");
    let mut path = vec![dir.clone()];
    path.extend(env.non_empty("PYTHONPATH").map(|p| std::env::split_paths(p).collect::<Vec<_>>()).unwrap_or_default());
    let joined = std::env::join_paths(&path)
        .map_err(|e| ReadsError::Write { path: dir.clone(), source: io::Error::new(io::ErrorKind::InvalidInput, e) })?;
    Ok(vec![
        ("PYTHONPATH".to_owned(), joined.to_string_lossy().into_owned()),
        (LOG_VAR.to_owned(), log.to_string_lossy().into_owned()),
        (RECORD_VAR.to_owned(), Record::value(records)),
    ])
}

#[cfg(unix)]
fn path_bytes(path: &Path) -> Vec<u8> {
    std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec()
}

#[cfg(not(unix))]
fn path_bytes(path: &Path) -> Vec<u8> {
    path.to_string_lossy().into_owned().into_bytes()
}

#[cfg(unix)]
fn path_from(bytes: &[u8]) -> PathBuf {
    PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(bytes))
}

#[cfg(not(unix))]
fn path_from(bytes: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
}

/// A name no one can guess: `reads-` and 16 hex digits.
fn fresh_name() -> String {
    use sha2::Digest;
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    hasher.write_u128(now.as_nanos());
    let digest = sha2::Sha256::digest(hasher.finish().to_le_bytes());
    format!("reads-{}", hex::encode(&digest[..8]))
}

/// Creating our directory and files, never through a link and never in a place another user
/// controls.
#[cfg(unix)]
mod own {
    use super::{ReadsError, fresh_name};
    use cap_fs_ext::DirExt;
    use cap_std::fs::{Dir, DirBuilder, DirBuilderExt, MetadataExt, OpenOptions, OpenOptionsExt};
    use std::io::{self, Write};
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};

    pub(super) fn euid() -> u32 {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() }
    }

    fn not_ours(path: PathBuf, why: impl Into<String>) -> ReadsError {
        ReadsError::NotOurs { path, why: why.into() }
    }

    fn write_error(path: &Path) -> impl FnOnce(io::Error) -> ReadsError + '_ {
        move |source| ReadsError::Write { path: path.to_owned(), source }
    }

    /// Who may own a directory we use, and what we do when others may write in it.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Owner {
        /// `RUNNER_TEMP`: ours or root's; writable by every user only with the sticky bit.
        UsOrRoot,
        /// `exact-cache/` (shared with the fingerprint files): ours, writable by us alone (the
        /// group's and others' right to write, if any, is taken away first).
        Us,
        /// Our reads directory, just made: ours, and nobody else's to enter.
        UsAlone,
    }

    /// A directory that no other user can change.
    fn check(dir: &Dir, path: &Path, owner: Owner) -> Result<(), ReadsError> {
        let meta = dir.dir_metadata().map_err(write_error(path))?;
        if meta.uid() != euid() && !(owner == Owner::UsOrRoot && meta.uid() == 0) {
            return Err(not_ours(path.to_owned(), format!("owned by another user (uid {})", meta.uid())));
        }
        let (mode, sticky) = (meta.mode() & 0o7777, meta.mode() & 0o1000 != 0);
        match owner {
            Owner::UsOrRoot if mode & 0o002 != 0 && !sticky => Err(not_ours(path.to_owned(), "writable by every user")),
            Owner::Us if mode & 0o022 != 0 && !sticky => Err(not_ours(path.to_owned(), "writable by others")),
            Owner::UsAlone if mode & 0o077 != 0 => Err(not_ours(path.to_owned(), format!("mode {mode:o}, not 700"))),
            _ => Ok(()),
        }
    }

    /// Open `name` in `dir` as a directory, never through a link.
    fn open_dir(dir: &Dir, name: &str, path: &Path) -> Result<Dir, ReadsError> {
        dir.open_dir_nofollow(name).map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => not_ours(path.to_owned(), "a link or not a directory"),
            _ => ReadsError::Write { path: path.to_owned(), source: e },
        })
    }

    /// `temp/exact-cache/reads-<random>`, new, with `sitecustomize.py` holding `hook` and an
    /// empty `reads.log`.
    pub(super) fn create(temp: &Path, hook: &str) -> Result<PathBuf, ReadsError> {
        // `RUNNER_TEMP` is followed as given; what lies in it is not.
        let temp = std::fs::canonicalize(temp).map_err(write_error(temp))?;
        let temp_dir = Dir::open_ambient_dir(&temp, cap_std::ambient_authority()).map_err(write_error(&temp))?;
        check(&temp_dir, &temp, Owner::UsOrRoot)?;
        let base = temp.join("exact-cache");
        match temp_dir.create_dir("exact-cache") {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(write_error(&base)(e)),
            _ => {}
        }
        let mut base_dir = open_dir(&temp_dir, "exact-cache", &base)?;
        if let Err(ReadsError::NotOurs { why, .. }) = check(&base_dir, &base, Owner::Us)
            && why == "writable by others"
        {
            // Ours, but others may write in it: no longer. Checked again once changed.
            let mode = base_dir.dir_metadata().map_err(write_error(&base))?.mode() & 0o7777 & !0o022;
            let keep = cap_std::fs::Permissions::from_std(std::fs::Permissions::from_mode(mode));
            temp_dir.set_permissions("exact-cache", keep).map_err(write_error(&base))?;
            base_dir = open_dir(&temp_dir, "exact-cache", &base)?;
        }
        check(&base_dir, &base, Owner::Us)?;
        let name = fresh_name();
        let path = base.join(&name);
        let mut builder = DirBuilder::new();
        builder.mode(0o700);
        base_dir.create_dir_with(&name, &builder).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => not_ours(path.clone(), "there already"),
            _ => write_error(&path)(e),
        })?;
        let dir = open_dir(&base_dir, &name, &path)?;
        check(&dir, &path, Owner::UsAlone)?;
        for (file, text) in [("sitecustomize.py", hook), ("reads.log", "")] {
            let mut options = OpenOptions::new();
            options.write(true).create_new(true).mode(0o600);
            let at = path.join(file);
            let mut created = dir.open_with(file, &options).map_err(write_error(&at))?;
            created.write_all(text.as_bytes()).map_err(write_error(&at))?;
        }
        Ok(path)
    }
}

#[cfg(not(unix))]
mod own {
    use super::{ReadsError, fresh_name};
    use std::io::{self, Write};
    use std::path::{Path, PathBuf};

    /// As the unix `create`.
    pub(super) fn create(temp: &Path, hook: &str) -> Result<PathBuf, ReadsError> {
        let write_error = |path: &Path| {
            let path = path.to_owned();
            move |source| ReadsError::Write { path, source }
        };
        let base = temp.join("exact-cache");
        std::fs::create_dir_all(&base).map_err(write_error(&base))?;
        let path = base.join(fresh_name());
        std::fs::create_dir(&path).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => ReadsError::NotOurs { path: path.clone(), why: "there already".into() },
            _ => write_error(&path)(e),
        })?;
        for (file, text) in [("sitecustomize.py", hook), ("reads.log", "")] {
            let at = path.join(file);
            let mut created = std::fs::File::create_new(&at).map_err(write_error(&at))?;
            created.write_all(text.as_bytes()).map_err(write_error(&at))?;
        }
        Ok(path)
    }
}

/// What a record says a process did with a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Did {
    Read,
    Wrote,
    /// Loaded it as a shared library (`ctypes`, an extension module).
    Loaded,
}

/// A Python process of the log: its name (`<pid>-<start>`) and the processes it descends from,
/// nearest first (`<pid>-<start>`, or `<pid>` alone where the start is unknown).
#[derive(Debug, Default)]
struct Process {
    name: String,
    ancestors: Vec<String>,
    /// Where its line is in the log (a `<pid>` ancestor is the latest process of that pid before).
    line: usize,
}

/// What the log holds: the processes, what each did with which file, and what the hooks said.
#[derive(Debug, Default)]
pub struct Log {
    processes: Vec<Process>,
    by_name: HashMap<String, usize>,
    paths: Vec<PathBuf>,
    path_ids: HashMap<PathBuf, usize>,
    /// (what, process, path)
    records: Vec<(Did, usize, usize)>,
    /// What the hooks said of themselves (each once, at most `MAX_NOTES`).
    pub notes: BTreeSet<String>,
    /// Processes whose record was cut (the hook's cap).
    pub cut: usize,
    /// The log was longer than [`LOG_CAP`]: only its beginning was read.
    pub truncated: bool,
    /// What torch's compile caches reported.
    pub torch: torch::Compiles,
}

impl Log {
    /// Read the log at `path`: a plain file of this user's, opened without following a link and
    /// without blocking, at most [`LOG_CAP`] of it.
    pub fn load(path: &Path) -> Result<Self, ReadsError> {
        let read_error = |source| ReadsError::Read { path: path.to_owned(), source };
        let not_ours = |why: String| ReadsError::NotOurs { path: path.to_owned(), why };
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(
            &mut options,
            libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        );
        #[cfg(not(unix))]
        if std::fs::symlink_metadata(path).map_err(read_error)?.file_type().is_symlink() {
            return Err(not_ours("a link".into()));
        }
        let file = options.open(path).map_err(|e| {
            #[cfg(unix)]
            if e.raw_os_error() == Some(libc::ELOOP) {
                return not_ours("a link".into());
            }
            read_error(e)
        })?;
        let meta = file.metadata().map_err(read_error)?;
        if !meta.is_file() {
            return Err(not_ours("not a plain file: a FIFO, a device or a directory".into()));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if meta.uid() != own::euid() {
                return Err(not_ours(format!("owned by another user (uid {})", meta.uid())));
            }
        }
        let mut bytes = Vec::new();
        file.take(LOG_CAP + 1).read_to_end(&mut bytes).map_err(read_error)?;
        let truncated = bytes.len() as u64 > LOG_CAP;
        if truncated {
            // Up to the last whole line within the cap.
            bytes.truncate(LOG_CAP as usize);
            let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            bytes.truncate(end);
        }
        Ok(Self { truncated, ..Self::parse(&bytes) })
    }

    /// One record a line (see `hook.py`); lines that are not records (a process cut short
    /// mid-line) are skipped.
    pub fn parse(text: &[u8]) -> Self {
        let mut log = Log::default();
        for (at, line) in text.split(|b| *b == b'\n').enumerate() {
            let mut fields = line.splitn(3, |b| *b == b' ');
            let (Some(kind), Some(second)) = (fields.next(), fields.next()) else { continue };
            let rest = fields.next();
            match kind {
                b"!" if log.notes.len() < MAX_NOTES => {
                    let note = rest.map_or_else(|| second.to_vec(), |rest| [second, rest].join(&b' '));
                    log.notes.insert(String::from_utf8_lossy(&note).into_owned());
                }
                b"p" => {
                    let Ok(name) = std::str::from_utf8(second) else { continue };
                    let ancestors = rest
                        .map(|r| {
                            String::from_utf8_lossy(r).split(' ').filter(|a| !a.is_empty()).map(str::to_owned).collect()
                        })
                        .unwrap_or_default();
                    let id = log.process(name);
                    log.processes[id].ancestors = ancestors;
                    log.processes[id].line = at;
                }
                b"c" => log.cut += 1,
                b"t" | b"s" | b"g" | b"G" => log.torch.parse(kind, second, rest),
                b"r" | b"w" | b"l" | b"R" | b"W" | b"L" => {
                    let (Ok(name), Some(path)) = (std::str::from_utf8(second), rest) else { continue };
                    let path = if kind[0].is_ascii_uppercase() {
                        let Ok(bytes) = hex::decode(path) else { continue };
                        path_from(&bytes)
                    } else {
                        path_from(path)
                    };
                    if path.as_os_str().is_empty() {
                        continue;
                    }
                    let did = match kind[0].to_ascii_lowercase() {
                        b'r' => Did::Read,
                        b'w' => Did::Wrote,
                        _ => Did::Loaded,
                    };
                    let process = log.process(name);
                    let next = log.paths.len();
                    let id = *log.path_ids.entry(path.clone()).or_insert(next);
                    if id == next {
                        log.paths.push(path);
                    }
                    log.records.push((did, process, id));
                }
                _ => {}
            }
        }
        log
    }

    /// The process named `name`, known from here on.
    fn process(&mut self, name: &str) -> usize {
        if let Some(id) = self.by_name.get(name) {
            return *id;
        }
        let id = self.processes.len();
        self.processes.push(Process { name: name.to_owned(), ancestors: Vec::new(), line: usize::MAX });
        self.by_name.insert(name.to_owned(), id);
        id
    }

    /// Each process's ancestors among the log's processes, transitively.
    fn ancestry(&self) -> Vec<HashSet<usize>> {
        let pid = |name: &str| name.split('-').next().and_then(|p| p.parse::<u64>().ok());
        let mut by_pid: HashMap<u64, Vec<(usize, usize)>> = HashMap::new();
        for (id, p) in self.processes.iter().enumerate() {
            if let Some(pid) = pid(&p.name) {
                by_pid.entry(pid).or_default().push((p.line, id));
            }
        }
        for list in by_pid.values_mut() {
            list.sort_unstable();
        }
        let parents: Vec<Vec<usize>> = self
            .processes
            .iter()
            .map(|p| {
                p.ancestors
                    .iter()
                    .filter_map(|a| match a.contains('-') {
                        true => self.by_name.get(a).copied(),
                        // Only the pid: the latest process of that pid whose line came before.
                        false => {
                            let list = by_pid.get(&a.parse::<u64>().ok()?)?;
                            list.iter().take_while(|(line, _)| *line < p.line).last().map(|(_, id)| *id)
                        }
                    })
                    .collect()
            })
            .collect();
        (0..self.processes.len())
            .map(|id| {
                let mut seen = HashSet::new();
                let mut todo = parents[id].clone();
                while let Some(next) = todo.pop() {
                    if next != id && seen.insert(next) {
                        todo.extend(&parents[next]);
                    }
                }
                seen
            })
            .collect()
    }

    /// For the cache whose `paths` the save keeps: the reads and loads of its [`Generator`] that
    /// nothing covers, as `locations` shows them. Covered: not written by the job (reads), not
    /// under `paths`, among `covered` (the key's `files` labels: `hash-files` and imports), or
    /// gone; a library is also covered when the key holds a native source or build file (it
    /// cannot be told which library those build).
    pub fn weigh(&self, locations: &Locations, paths: &PatternSet, covered: &BTreeSet<String>) -> Weighed {
        let in_workspace = |p: &Path| p.starts_with(&locations.workspace);
        let writers: HashSet<usize> = self
            .records
            .iter()
            .filter(|(did, _, path)| *did == Did::Wrote && under(paths, &self.paths[*path]))
            .map(|(_, process, _)| *process)
            .collect();
        let generator: HashSet<usize> = if writers.is_empty() {
            (0..self.processes.len()).collect()
        } else {
            let ancestry = self.ancestry();
            let mut generator = writers.clone();
            for (id, ancestors) in ancestry.iter().enumerate() {
                if writers.contains(&id) {
                    generator.extend(ancestors);
                } else if ancestors.iter().any(|a| writers.contains(a)) {
                    generator.insert(id);
                }
            }
            generator
        };
        let written: HashSet<usize> =
            self.records.iter().filter(|(did, ..)| *did == Did::Wrote).map(|(_, _, path)| *path).collect();
        let native = covered.iter().any(|label| is_native_input(label));
        let (mut read, mut files, mut libraries) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for (did, _, id) in
            self.records.iter().filter(|(did, process, _)| *did != Did::Wrote && generator.contains(process))
        {
            let path = &self.paths[*id];
            if !in_workspace(path) || under(paths, path) {
                continue;
            }
            if *did == Did::Read {
                read.insert(*id);
                if written.contains(id) {
                    continue;
                }
            }
            let label = locations.display(path);
            if covered.contains(&label) || (*did == Did::Loaded && native) || !path.is_file() {
                continue;
            }
            if *did == Did::Loaded {
                libraries.insert(label.clone());
            }
            files.insert(label);
        }
        Weighed {
            files: files.into_iter().collect(),
            libraries: libraries.into_iter().collect(),
            generator: match writers.is_empty() {
                true => Generator::NotSeen { processes: self.processes.len() },
                false => Generator::Wrote { processes: generator.len(), of: self.processes.len() },
            },
            read: read.len(),
        }
    }
}

/// What the save weighs of the log for one cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Weighed {
    /// The files read or loaded that no input covers, as the log shows paths (sorted).
    pub files: Vec<String>,
    /// Those of `files` loaded as shared libraries.
    pub libraries: Vec<String>,
    /// Whose reads were weighed.
    pub generator: Generator,
    /// How many files under the workspace the generator read.
    pub read: usize,
}

/// Whose reads a save weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generator {
    /// The processes that wrote under the cache's `path`, with their ancestors and descendants:
    /// `processes` of the `of` Python processes of the job.
    Wrote { processes: usize, of: usize },
    /// No Python process was seen writing under `path` (it was not Python, or wrote through
    /// native code, as `torch.save` does): every process's reads, `processes` of them.
    NotSeen { processes: usize },
}

/// A native source or build file (`source/CMakeLists.txt`, `op/kernel.cc`): the key covers how
/// a workspace library is built.
fn is_native_input(label: &str) -> bool {
    let name = label.rsplit('/').next().unwrap_or(label);
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    matches!(
        name,
        "CMakeLists.txt" | "Makefile" | "GNUmakefile" | "meson.build" | "build.ninja" | "BUILD" | "BUILD.bazel"
    ) || ext.is_some_and(|e| {
        ["c", "cc", "cpp", "cxx", "cu", "cuh", "h", "hh", "hpp", "hxx", "cmake", "mk", "f90", "rs"]
            .contains(&e.as_str())
    })
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

    fn line(kind: &str, proc: &str, path: &Path) -> String {
        format!("{kind} {proc} {}", path.display())
    }

    fn project() -> (tempfile::TempDir, PathBuf, Locations) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        for f in
            ["data/cases.txt", "tools/gen.py", "fixtures/old.expected", "scratch.txt", "notes.md", "tests/expected.txt"]
        {
            std::fs::create_dir_all(ws.join(f).parent().unwrap()).unwrap();
            std::fs::write(ws.join(f), f).unwrap();
        }
        let locations = Locations { workspace: ws.clone(), home: None };
        (dir, ws, locations)
    }

    #[test]
    fn the_log_is_read_leniently_and_reads_are_weighed_against_what_covers_them() {
        let (_dir, ws, locations) = project();
        let text = [
            "p 10-5 1-1".to_owned(),
            line("r", "10-5", &ws.join("data/cases.txt")),
            line("r", "10-5", &ws.join("tools/gen.py")),
            line("r", "10-5", &ws.join("fixtures/old.expected")),
            line("w", "10-5", &ws.join("scratch.txt")),
            line("r", "10-5", &ws.join("scratch.txt")),
            line("r", "10-5", &ws.join("gone.txt")),
            line("r", "10-5", Path::new("/elsewhere/x")),
            "! Python 3.7 has no audit hooks (3.8 and later have): its reads are not seen".to_owned(),
            format!("r 10-5 {}", ws.join("notes.md").display()),
            "r 10-5".to_owned(),
            "x what".to_owned(),
            format!("r 10-5 {}", &ws.join("tests").display().to_string()[..4]),
        ]
        .join("\n");
        let log = Log::parse(text.as_bytes());
        assert_eq!(log.notes.len(), 1);
        let paths = PatternSet::parse(&["fixtures", "!fixtures/keep"], &locations).unwrap();
        let covered = BTreeSet::from(["tools/gen.py".to_owned()]);
        let weighed = log.weigh(&locations, &paths, &covered);
        assert_eq!(weighed.files, ["data/cases.txt", "notes.md"]);
        assert_eq!(weighed.generator, Generator::NotSeen { processes: 1 }, "nothing was written under `fixtures`");
        let notes: String = (0..20).map(|i| format!("! note {i}\n")).collect();
        assert_eq!(Log::parse(notes.as_bytes()).notes.len(), MAX_NOTES, "a log cannot fill the save with warnings");
    }

    /// The generator is whoever wrote under `path`, with its ancestors (the runner script that
    /// started it) and descendants (a helper it started); a later test step and another cache's
    /// generator are not.
    #[test]
    fn reads_count_for_the_processes_that_wrote_under_path_and_their_family() {
        let (_dir, ws, locations) = project();
        for f in ["other/in.txt", "run.cfg", "helper.txt"] {
            std::fs::create_dir_all(ws.join(f).parent().unwrap()).unwrap();
            std::fs::write(ws.join(f), f).unwrap();
        }
        let text = [
            // The step's shell (1-1, not Python) runs run_all.py (20-7), which starts gen.py (21-8)
            // through a shell (30-8, not Python); gen.py starts a helper (22-9).
            "p 20-7 1-1".to_owned(),
            line("r", "20-7", &ws.join("run.cfg")),
            "p 21-8 30-8 20-7 1-1".to_owned(),
            line("r", "21-8", &ws.join("data/cases.txt")),
            line("w", "21-8", &ws.join("fixtures")),
            "p 22-9 21-8 30-8 20-7 1-1".to_owned(),
            line("r", "22-9", &ws.join("helper.txt")),
            // Another cache's generator and a later test step, beside them under the runner.
            "p 40-10 1-1".to_owned(),
            line("r", "40-10", &ws.join("other/in.txt")),
            line("w", "40-10", &ws.join("other/out.bin")),
            "p 50-11 2-2 1-1".to_owned(),
            line("r", "50-11", &ws.join("tests/expected.txt")),
        ]
        .join("\n");
        let log = Log::parse(text.as_bytes());
        let none = BTreeSet::new();
        let fixtures = PatternSet::parse(&["fixtures"], &locations).unwrap();
        let weighed = log.weigh(&locations, &fixtures, &none);
        assert_eq!(weighed.files, ["data/cases.txt", "helper.txt", "run.cfg"]);
        assert_eq!(weighed.generator, Generator::Wrote { processes: 3, of: 5 });
        let other = PatternSet::parse(&["other/*.bin"], &locations).unwrap();
        assert_eq!(log.weigh(&locations, &other, &none).files, ["other/in.txt"]);
    }

    /// Where /proc gives no start time.
    #[test]
    fn an_ancestor_known_by_pid_alone_is_the_latest_of_that_pid_before() {
        let (_dir, ws, locations) = project();
        let text = [
            "p 7-t01 1".to_owned(),
            line("r", "7-t01", &ws.join("notes.md")),
            "p 7-t02 1".to_owned(),
            line("r", "7-t02", &ws.join("data/cases.txt")),
            "p 8-t03 7".to_owned(),
            line("w", "8-t03", &ws.join("fixtures/a")),
        ]
        .join("\n");
        let log = Log::parse(text.as_bytes());
        let paths = PatternSet::parse(&["fixtures"], &locations).unwrap();
        assert_eq!(log.weigh(&locations, &paths, &BTreeSet::new()).files, ["data/cases.txt"]);
    }

    #[test]
    fn a_loaded_library_is_uncovered_until_the_key_holds_how_it_is_built() {
        let (_dir, ws, locations) = project();
        std::fs::create_dir_all(ws.join("build")).unwrap();
        std::fs::write(ws.join("build/libop.so"), b"\x7fELF").unwrap();
        let text = [
            "p 3-3".to_owned(),
            line("l", "3-3", &ws.join("build/libop.so")),
            line("w", "3-3", &ws.join("fixtures/x")),
        ]
        .join("\n");
        let log = Log::parse(text.as_bytes());
        let paths = PatternSet::parse(&["fixtures"], &locations).unwrap();
        let weighed = log.weigh(&locations, &paths, &BTreeSet::from(["tools/gen.py".to_owned()]));
        assert_eq!(
            (weighed.files.as_slice(), weighed.libraries.as_slice()),
            (&["build/libop.so".to_owned()][..], &["build/libop.so".to_owned()][..])
        );
        let built = BTreeSet::from(["tools/gen.py".to_owned(), "source/CMakeLists.txt".to_owned()]);
        assert!(log.weigh(&locations, &paths, &built).files.is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn a_name_that_is_not_utf8_survives_and_a_line_break_comes_in_hex() {
        use std::os::unix::ffi::OsStrExt;
        let (_dir, ws, locations) = project();
        let odd = ws.join(std::ffi::OsStr::from_bytes(b"caf\xe9 data.txt"));
        let broken = ws.join("two\nlines.txt");
        std::fs::write(&odd, b"x").unwrap();
        std::fs::write(&broken, b"x").unwrap();
        let mut text = b"p 1-1\nr 1-1 ".to_vec();
        text.extend(odd.as_os_str().as_bytes());
        text.extend(format!("\nR 1-1 {}\n", hex::encode(broken.as_os_str().as_bytes())).as_bytes());
        let log = Log::parse(&text);
        assert!(log.paths.contains(&odd) && log.paths.contains(&broken), "{:?}", log.paths);
        let paths = PatternSet::parse(&["fixtures"], &locations).unwrap();
        assert_eq!(log.weigh(&locations, &paths, &BTreeSet::new()).files.len(), 2);
    }

    #[test]
    fn the_hooks_cap_is_the_one_the_save_names() {
        assert!(HOOK.contains(&format!("\n_CAP = {HOOK_CAP}\n")));
    }

    #[cfg(unix)]
    #[test]
    fn arranging_makes_a_fresh_private_directory_and_keeps_the_users_pythonpath_after_ours() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let env = Env::from_pairs([("PYTHONPATH", "/theirs/a:/theirs/b")]);
        let exports = arrange(dir.path(), Path::new("/ws/\"quoted\""), &env, &[Record::Reads]).unwrap();
        let again = arrange(dir.path(), Path::new("/ws"), &env, &[Record::Reads]).unwrap();
        let ours = PathBuf::from(exports[0].1.split(':').next().unwrap());
        assert_ne!(exports[0].1, again[0].1, "each arranging makes a directory of its own");
        assert_eq!(ours.parent().unwrap(), std::fs::canonicalize(dir.path()).unwrap().join("exact-cache"));
        assert_eq!(exports[0].1, format!("{}:/theirs/a:/theirs/b", ours.display()));
        assert_eq!(exports[1], (LOG_VAR.into(), ours.join("reads.log").display().to_string()));
        assert_eq!(std::fs::metadata(&ours).unwrap().permissions().mode() & 0o777, 0o700);
        let hook = std::fs::read_to_string(ours.join("sitecustomize.py")).unwrap();
        assert!(hook.contains(&format!("ROOT = \"{}\"", hex::encode("/ws/\"quoted\""))), "{hook}");
        assert!(hook.is_ascii(), "Python 2.7 reads a file without a coding line as ASCII");
    }

    #[cfg(unix)]
    #[test]
    fn a_planted_directory_or_log_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let env = Env::default();
        // `exact-cache` a link to a directory elsewhere.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let temp = dir.path().join("temp");
        std::fs::create_dir(&temp).unwrap();
        std::os::unix::fs::symlink(&elsewhere, temp.join("exact-cache")).unwrap();
        let e = arrange(&temp, Path::new("/ws"), &env, &[Record::Reads]).unwrap_err();
        assert!(matches!(e, ReadsError::NotOurs { .. }), "{e}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        // A `RUNNER_TEMP` every user may write without the sticky bit.
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(
            arrange(&open, Path::new("/ws"), &env, &[Record::Reads])
                .unwrap_err()
                .to_string()
                .contains("writable by every user")
        );
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(arrange(&open, Path::new("/ws"), &env, &[Record::Reads]).is_ok(), "sticky, as /tmp");
        // Our own `exact-cache/` that others may write in: they may no longer.
        std::fs::set_permissions(open.join("exact-cache"), std::fs::Permissions::from_mode(0o777)).unwrap();
        arrange(&open, Path::new("/ws"), &env, &[Record::Reads]).unwrap();
        assert_eq!(std::fs::metadata(open.join("exact-cache")).unwrap().permissions().mode() & 0o777, 0o755);

        // The log: a link, a FIFO, a directory.
        let log = dir.path().join("log");
        std::os::unix::fs::symlink("/dev/zero", &log).unwrap();
        assert!(Log::load(&log).unwrap_err().to_string().contains("a link"));
        std::fs::remove_file(&log).unwrap();
        let fifo = std::ffi::CString::new(log.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        assert!(Log::load(&log).unwrap_err().to_string().contains("not a plain file"));
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "never blocks on a FIFO");
    }
}
