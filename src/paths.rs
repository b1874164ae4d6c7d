//! Path lines as users write them (`path`, `hash-files`, `required`) → absolute locations.
//!
//! A line is workspace-relative, absolute, or `~/…`, optionally with glob characters
//! (`* ? [ {`, and `**` across directories); a line starting with `!` excludes what it matches.
//! A pattern's *base* is its longest literal directory prefix: walks start there, and archive
//! entries are stored relative to it. Paths are normalized lexically (`.`/`..`), never through
//! symlinks, so the same line resolves the same way on every machine with the same layout.
//! [`VersionRoots`] names a line as the entry's version does, alike on machines whose layouts
//! differ only in where the workspace, home and runner directories are.

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};
use std::fs::{FileType, Metadata};
use std::io;
use std::path::{Component, Path, PathBuf};

/// Directories exact-cache creates next to restore targets; walks never descend into them.
pub const STAGING_PREFIX: &str = ".exact-cache-staging-";
/// The file exact-cache leaves in a directory root it restored into or saved from, when that
/// directory is outside the places `clean-on-miss` may clean anyway; walks skip it.
pub const OWNED_MARKER: &str = ".exact-cache-root";

/// Where the reads hook's directories on `PYTHONPATH` lie: `<RUNNER_TEMP>/exact-cache/reads…`
/// (the hook's side keeps to this shape); `hash-env` values leave them out ([`is_hook_dir`]).
pub const HOOK_DIRS: (&str, &str) = ("exact-cache", "reads");

/// Whether `entry` (one entry of a path list such as `PYTHONPATH`) is one of exact-cache's own
/// hook directories of this job ([`HOOK_DIRS`]) under `runner_temp`, compared lexically.
pub fn is_hook_dir(entry: &Path, runner_temp: &Path) -> bool {
    let (entry, temp) = (normalize(entry), normalize(runner_temp));
    entry.is_absolute()
        && entry.parent() == Some(temp.join(HOOK_DIRS.0).as_path())
        && entry.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(HOOK_DIRS.1))
}

#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("`{line}`: `~user` paths are not supported, use `~/…` or an absolute path")]
    TildeUser { line: String },
    #[error("`{line}`: `~` needs a home directory and none is known (set `HOME`)")]
    NoHome { line: String },
    #[error("invalid glob `{line}`")]
    BadGlob {
        line: String,
        #[source]
        source: globset::Error,
    },
    #[error("cannot list `{}`", path.display())]
    Walk {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{}`: file names must be valid UTF-8", path.display())]
    NonUtf8 { path: PathBuf },
}

/// Where relative and `~` paths point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Locations {
    pub workspace: PathBuf,
    pub home: Option<PathBuf>,
}

impl Locations {
    /// An absolute, lexically normalized path for a line without glob characters.
    pub fn resolve(&self, line: &str) -> Result<PathBuf, PathError> {
        let line = line.trim();
        let path = if line == "~" || line.starts_with("~/") || line.starts_with("~\\") {
            let home = self.home.as_ref().ok_or_else(|| PathError::NoHome { line: line.to_owned() })?;
            home.join(line[1..].trim_start_matches(['/', '\\']))
        } else if line.starts_with('~') {
            return Err(PathError::TildeUser { line: line.to_owned() });
        } else if Path::new(line).is_absolute() {
            PathBuf::from(line)
        } else {
            self.workspace.join(line)
        };
        Ok(normalize(&path))
    }

    /// How a path reads in labels: workspace-relative (`/`-separated), `~/…`, or absolute.
    pub fn display(&self, abs: &Path) -> String {
        if let Ok(rel) = abs.strip_prefix(&self.workspace) {
            return if rel.as_os_str().is_empty() { ".".to_owned() } else { slash(rel) };
        }
        if let Some(rel) = self.home.as_ref().and_then(|h| abs.strip_prefix(h).ok()) {
            return if rel.as_os_str().is_empty() { "~".to_owned() } else { format!("~/{}", slash(rel)) };
        }
        abs.to_string_lossy().into_owned()
    }
}

/// Places each machine of a runner pool has at its own absolute location (its workspace, its
/// home, …), each with the name an entry's version gives it, so that the runners of a pool name
/// one `path` line alike and share its entries.
#[derive(Clone, Debug, Default)]
pub struct VersionRoots {
    roots: Vec<(PathBuf, String)>,
}

impl VersionRoots {
    /// The workspace (what lies below it is named workspace-relative) and the home directory
    /// (`~/…`).
    pub fn of(locations: &Locations) -> Self {
        let mut roots = vec![(normalize(&locations.workspace), String::new())];
        roots.extend(locations.home.as_deref().map(|home| (normalize(home), "~".to_owned())));
        Self { roots }
    }

    /// Also name what lies below `dir` by `name`.
    pub fn with(mut self, dir: &Path, name: &str) -> Self {
        self.roots.push((normalize(dir), name.to_owned()));
        self
    }

    /// How `line` enters the version: as written, except an absolute line below one of the
    /// roots, which is named by the deepest such root (a `!` line likewise).
    ///
    /// A root's symbolic name (`~`, `<runner-temp>`, …) never equals what a literal path says:
    /// a workspace-relative name that begins with `~` or `<` (a relative line `<runner-temp>/gen`,
    /// an absolute `$GITHUB_WORKSPACE/~/cfg`) is written `./<runner-temp>/gen`, `./~/cfg` — what
    /// the line `./~/cfg` is named too, the same place.
    pub fn name(&self, line: &str) -> String {
        let line = line.trim();
        let (bang, pattern) = match line.strip_prefix('!') {
            Some(negated) => ("!", negated.trim()),
            None => ("", line),
        };
        if !Path::new(pattern).is_absolute() {
            return match pattern.starts_with('<') {
                true => format!("{bang}./{pattern}"),
                false => line.to_owned(),
            };
        }
        let path = normalize(Path::new(pattern));
        let deepest = self
            .roots
            .iter()
            .filter_map(|(dir, name)| Some((dir.components().count(), name, path.strip_prefix(dir).ok()?)))
            .max_by_key(|(depth, _, _)| *depth);
        match deepest {
            None => line.to_owned(),
            Some((_, name, rel)) => {
                let rel = slash(rel);
                let named = match (name.is_empty(), rel.is_empty()) {
                    (true, true) => ".".to_owned(),
                    (true, false) if rel.starts_with(['~', '<']) => format!("./{rel}"),
                    (true, false) => rel,
                    (false, true) => name.clone(),
                    (false, false) => format!("{name}/{rel}"),
                };
                format!("{bang}{named}")
            }
        }
    }
}

/// `a/./b/../c` → `a/c`, without touching the filesystem.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn slash(rel: &Path) -> String {
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

pub fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', '{'])
}

/// One resolved line: its literal base, and a matcher when the line has glob characters.
#[derive(Clone, Debug)]
pub struct Pattern {
    pub line: String,
    pub base: PathBuf,
    pub glob: Option<GlobMatcher>,
}

impl Pattern {
    /// Whether this line covers `rel` (relative to its base, `/`-separated): everything beneath
    /// a literal line; under a glob, what matches and what lies beneath a match — never the
    /// glob's base or the directories that only lead to a match. `!` lines are not consulted.
    pub fn covers(&self, rel: &str) -> bool {
        let Some(glob) = &self.glob else { return true };
        !rel.is_empty()
            && self.base.join(rel).ancestors().take_while(|a| *a != self.base.as_path()).any(|a| glob.is_match(a))
    }

    pub fn parse(line: &str, locations: &Locations) -> Result<Self, PathError> {
        let line = line.trim();
        if !has_glob_meta(line) {
            return Ok(Self { line: line.to_owned(), base: locations.resolve(line)?, glob: None });
        }
        // Split at the first component with glob characters; the literal part resolves normally.
        // On Windows `\` separates components too (and escapes nothing).
        let separated = if cfg!(windows) { line.replace('\\', "/") } else { line.to_owned() };
        let parts: Vec<&str> = separated.split('/').collect();
        let first_glob = parts.iter().position(|p| has_glob_meta(p)).unwrap_or(parts.len());
        let literal = parts[..first_glob].join("/");
        let base = if literal.is_empty() && separated.starts_with('/') {
            PathBuf::from("/")
        } else if literal.is_empty() {
            locations.workspace.clone()
        } else {
            locations.resolve(&literal)?
        };
        let rest = parts[first_glob..].join("/");
        let full = format!("{}/{}", glob_literal(&base).trim_end_matches('/'), rest);
        let glob = GlobBuilder::new(&full)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|source| PathError::BadGlob { line: line.to_owned(), source })?
            .compile_matcher();
        Ok(Self { line: line.to_owned(), base, glob: Some(glob) })
    }
}

/// A glob that matches exactly `path`: its glob characters escaped, and on Windows its
/// components joined with `/`, which is how globset matches a Windows path.
fn glob_literal(path: &Path) -> String {
    let text = path.to_string_lossy();
    globset::escape(&if cfg!(windows) { text.replace('\\', "/") } else { text.into_owned() })
}

/// Include patterns and `!` excludes from one multi-line input.
#[derive(Clone, Debug)]
pub struct PatternSet {
    pub includes: Vec<Pattern>,
    excludes: GlobSet,
    has_excludes: bool,
}

impl PatternSet {
    pub fn parse<S: AsRef<str>>(lines: &[S], locations: &Locations) -> Result<Self, PathError> {
        let mut includes = Vec::new();
        let mut excludes = GlobSetBuilder::new();
        let mut has_excludes = false;
        for line in lines.iter().map(|l| l.as_ref().trim()).filter(|l| !l.is_empty()) {
            if let Some(negated) = line.strip_prefix('!') {
                let p = Pattern::parse(negated.trim(), locations)?;
                let glob = match p.glob {
                    Some(m) => m.glob().clone(),
                    None => Glob::new(&glob_literal(&p.base))
                        .map_err(|source| PathError::BadGlob { line: line.to_owned(), source })?,
                };
                excludes.add(glob);
                has_excludes = true;
            } else {
                includes.push(Pattern::parse(line, locations)?);
            }
        }
        let excludes = excludes.build().map_err(|source| PathError::BadGlob { line: "!…".to_owned(), source })?;
        Ok(Self { includes, excludes, has_excludes })
    }

    pub fn is_excluded(&self, abs: &Path) -> bool {
        self.has_excludes && self.excludes.is_match(abs)
    }
}

/// One path found under a pattern.
#[derive(Debug)]
pub struct Found {
    pub abs: PathBuf,
    /// Relative to the pattern's base, `/`-separated; empty for the base itself.
    pub rel: String,
    /// The type without following symlinks (the base itself is followed).
    pub file_type: FileType,
    pub metadata: Metadata,
}

/// Everything a pattern covers, parents before children, siblings sorted by name. A literal
/// line covers its path and, for a directory, everything below it; a glob covers each match
/// and everything below matched directories. Excluded paths and their subtrees are skipped.
/// A base that does not exist yields nothing. A literal base that is a symlink is followed
/// when `follow_base` is set (cache roots), and reported as the link otherwise (hashing).
pub fn walk(pattern: &Pattern, set: &PatternSet, follow_base: bool) -> Result<Vec<Found>, PathError> {
    let base = &pattern.base;
    let stat = if follow_base || pattern.glob.is_some() { std::fs::metadata } else { std::fs::symlink_metadata };
    let base_meta = match stat(base) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(PathError::Walk { path: base.clone(), source });
        }
    };
    let mut found = Vec::new();
    if pattern.glob.is_none() {
        if set.is_excluded(base) {
            return Ok(found);
        }
        found.push(Found {
            abs: base.clone(),
            rel: String::new(),
            file_type: base_meta.file_type(),
            metadata: base_meta.clone(),
        });
        if !base_meta.is_dir() {
            return Ok(found);
        }
    } else if !base_meta.is_dir() {
        return Ok(found);
    }
    let mut matched_dir: Option<PathBuf> = None;
    let mut it = walkdir::WalkDir::new(base).follow_links(false).min_depth(1).sort_by_file_name().into_iter();
    while let Some(entry) = it.next() {
        let entry = entry.map_err(|e| {
            let path = e.path().unwrap_or(base).to_owned();
            PathError::Walk { path, source: e.into() }
        })?;
        let abs = entry.path();
        let name = entry.file_name().to_string_lossy();
        if name.starts_with(STAGING_PREFIX) || name == OWNED_MARKER || set.is_excluded(abs) {
            if entry.file_type().is_dir() {
                it.skip_current_dir();
            }
            continue;
        }
        let included = match &pattern.glob {
            None => true,
            Some(glob) => {
                if matched_dir.as_ref().is_some_and(|d| abs.starts_with(d)) {
                    true
                } else if glob.is_match(abs) {
                    matched_dir = entry.file_type().is_dir().then(|| abs.to_owned());
                    true
                } else {
                    false
                }
            }
        };
        if !included {
            continue;
        }
        let rel_path = abs.strip_prefix(base).expect("walk stays under its base");
        let rel = rel_path.to_str().ok_or_else(|| PathError::NonUtf8 { path: abs.to_owned() })?;
        let metadata = entry.metadata().map_err(|e| PathError::Walk { path: abs.to_owned(), source: e.into() })?;
        found.push(Found { abs: abs.to_owned(), rel: rel.replace('\\', "/"), file_type: entry.file_type(), metadata });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locations() -> Locations {
        Locations { workspace: PathBuf::from("/ws/repo"), home: Some(PathBuf::from("/home/u")) }
    }

    #[test]
    fn resolves_relative_absolute_and_home_lines() {
        let l = locations();
        assert_eq!(l.resolve("out/./a/../b").unwrap(), PathBuf::from("/ws/repo/out/b"));
        assert_eq!(l.resolve("/abs/x").unwrap(), PathBuf::from("/abs/x"));
        assert_eq!(l.resolve("~/.cache/t").unwrap(), PathBuf::from("/home/u/.cache/t"));
        assert_eq!(l.resolve("~").unwrap(), PathBuf::from("/home/u"));
        assert!(matches!(l.resolve("~bob/x"), Err(PathError::TildeUser { .. })));
        assert_eq!(l.display(Path::new("/ws/repo/a/b")), "a/b");
        assert_eq!(l.display(Path::new("/ws/repo")), ".");
        assert_eq!(l.display(Path::new("/home/u/.cache")), "~/.cache");
        assert_eq!(l.display(Path::new("/opt/x")), "/opt/x");
    }

    #[cfg(unix)]
    #[test]
    fn version_names_are_the_same_on_every_machine_of_a_pool() {
        let on = |root: &str| {
            let locations =
                Locations { workspace: PathBuf::from(format!("{root}/_work/r/r")), home: Some(PathBuf::from(root)) };
            VersionRoots::of(&locations).with(Path::new(&format!("{root}/_work/_exact-cache")), "<exact-cache-dir>")
        };
        let (one, two) = (on("/opt/runner-1"), on("/opt/runner-2"));
        for (written, named) in [
            ("/opt/runner-N/_work/r/r/out/./x", "out/x"),
            ("/opt/runner-N/_work/r/r", "."),
            ("/opt/runner-N/.cache/t", "~/.cache/t"),
            ("/opt/runner-N", "~"),
            ("/opt/runner-N/_work/_exact-cache/torch-inductor/inductor", "<exact-cache-dir>/torch-inductor/inductor"),
            ("!/opt/runner-N/_work/r/r/out/*.log", "!out/*.log"),
        ] {
            assert_eq!(one.name(&written.replace("runner-N", "runner-1")), named);
            assert_eq!(two.name(&written.replace("runner-N", "runner-2")), named);
        }
        // What is not absolute, or lies outside every root, is named as written.
        for line in ["out/./x", "~/.cache/t", "/data/inductor", "!out/*.log", "/opt/runner-10/x", "./~/cfg"] {
            assert_eq!(one.name(line), line);
        }
    }

    /// A workspace directory named `~` or `<runner-temp>` is not the home or `RUNNER_TEMP`.
    #[cfg(unix)]
    #[test]
    fn a_symbolic_name_never_equals_what_a_literal_line_says() {
        let locations = Locations { workspace: PathBuf::from("/r/_work/r/r"), home: Some(PathBuf::from("/home/u")) };
        let roots = VersionRoots::of(&locations).with(Path::new("/r/_work/_temp"), "<runner-temp>");
        let places = [
            ("~/cfg", "/home/u/cfg"),
            ("/home/u/cfg", "/home/u/cfg"),
            ("/r/_work/r/r/~/cfg", "/r/_work/r/r/~/cfg"),
            ("./~/cfg", "/r/_work/r/r/~/cfg"),
            ("/r/_work/_temp/gen", "/r/_work/_temp/gen"),
            ("<runner-temp>/gen", "/r/_work/r/r/<runner-temp>/gen"),
            ("/r/_work/r/r/<runner-temp>/gen", "/r/_work/r/r/<runner-temp>/gen"),
            ("!<runner-temp>/gen", "!/r/_work/r/r/<runner-temp>/gen"),
            ("!/r/_work/_temp/gen", "!/r/_work/_temp/gen"),
        ];
        for (a, place_a) in places {
            for (b, place_b) in places {
                let same = roots.name(a) == roots.name(b);
                assert_eq!(same, place_a == place_b, "`{a}` ({}) and `{b}` ({})", roots.name(a), roots.name(b));
            }
        }
        assert_eq!(roots.name("/r/_work/r/r/~/cfg"), "./~/cfg");
        assert_eq!(roots.name("<runner-temp>/gen"), "./<runner-temp>/gen");
        assert_eq!(roots.name("/r/_work/_temp/gen"), "<runner-temp>/gen");
    }

    #[cfg(unix)]
    #[test]
    fn glob_bases_are_the_literal_prefix() {
        let l = locations();
        let p = Pattern::parse("models/**/*.pth", &l).unwrap();
        assert_eq!(p.base, PathBuf::from("/ws/repo/models"));
        let g = p.glob.unwrap();
        assert!(g.is_match("/ws/repo/models/a/b/c.pth"));
        assert!(g.is_match("/ws/repo/models/c.pth"));
        assert!(!g.is_match("/ws/repo/models/c.pt"));
        let star = Pattern::parse("*.expected", &l).unwrap();
        assert_eq!(star.base, PathBuf::from("/ws/repo"));
        assert!(!star.glob.unwrap().is_match("/ws/repo/sub/x.expected"), "`*` does not cross `/`");
    }

    #[cfg(windows)]
    #[test]
    fn windows_glob_lines_take_backslashes_as_separators() {
        let l = Locations { workspace: PathBuf::from(r"C:\ws\repo"), home: None };
        let p = Pattern::parse(r"models\**\*.pth", &l).unwrap();
        assert_eq!(p.base, PathBuf::from(r"C:\ws\repo\models"));
        let g = p.glob.as_ref().unwrap();
        assert!(g.is_match(r"C:\ws\repo\models\a\b\c.pth"));
        assert!(!g.is_match(r"C:\ws\repo\models\c.pt"));
        assert!(p.covers("a/c.pth"));
        let set = PatternSet::parse(&[r"C:\ws\repo\out\*.bin", r"!out\skip.bin"], &l).unwrap();
        assert_eq!(set.includes[0].base, PathBuf::from(r"C:\ws\repo\out"));
        assert!(set.is_excluded(Path::new(r"C:\ws\repo\out\skip.bin")));
        assert!(!set.is_excluded(Path::new(r"C:\ws\repo\out\keep.bin")));
    }

    #[cfg(unix)]
    #[test]
    fn walks_in_sorted_order_with_excludes_and_matched_subtrees() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        for f in ["b/2.pth", "b/1.pth", "a.pth", "keep/x.txt", "keep/y/z.txt", "skip.pth", "other.txt"] {
            let p = ws.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, f).unwrap();
        }
        let l = Locations { workspace: ws.to_owned(), home: None };
        let set = PatternSet::parse(&["**/*.pth", "kee?", "!skip.pth"], &l).unwrap();
        let rels =
            |i: usize| walk(&set.includes[i], &set, true).unwrap().into_iter().map(|f| f.rel).collect::<Vec<_>>();
        assert_eq!(rels(0), ["a.pth", "b/1.pth", "b/2.pth"]);
        assert_eq!(rels(1), ["keep", "keep/x.txt", "keep/y", "keep/y/z.txt"]);
        let literal = PatternSet::parse(&["keep"], &l).unwrap();
        let found: Vec<_> = walk(&literal.includes[0], &literal, true).unwrap().into_iter().map(|f| f.rel).collect();
        assert_eq!(found, ["", "x.txt", "y", "y/z.txt"]);
        let missing = PatternSet::parse(&["nope/*"], &l).unwrap();
        assert!(walk(&missing.includes[0], &missing, true).unwrap().is_empty());
    }
}
