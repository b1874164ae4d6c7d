//! `clean-on-miss`: remove stale files under the `path` roots before generation starts, so a
//! miss begins from nothing rather than from leftovers of an older run.
//!
//! What it may clean at all is [`CleanGuard`]'s decision (guarantee 8 says where), judged on
//! real paths; a directory exact-cache restored into or saved from carries [`OWNED_MARKER`].
//! Never the workspace, the home directory (as `HOME` and as the password database say),
//! `RUNNER_TEMP`, or their ancestors — except for a glob that picks particular names
//! (`**/*.expected`), which removes only what it matches. Anything else is refused with the reason.
//!
//! The decision is made on what is removed through: each root (or the directory of a file
//! root) is opened from `/` one component at a time without following links, and that handle —
//! where the kernel says it is, and which directory it is — is judged again before anything
//! goes. A link swapped in after the check makes the open fail; it can never redirect it.
//!
//! Removal walks through directory handles and never follows a link: a link is removed as a
//! link. Excluded (`!`) paths are kept, and so are the directories that still hold them; so
//! are the files the repository tracks ([`Tracked`], answered by the command layer) and
//! nothing inside a `.git` directory is ever removed; read-only directories are opened for the
//! removal; leftover staging directories of crashed restores go too. What goes is named in
//! [`CleanStats::removed`].

use super::beneath;
use crate::paths::{OWNED_MARKER, Pattern, PatternSet, STAGING_PREFIX};
use cap_std::fs::Dir;
use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    #[error("refusing to clean `{line}`: {reason}")]
    Refused { line: String, reason: String },
    #[error("cannot open `{}` without following links (did it change?)", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot tell which files under `{}` the repository tracks: {reason}", path.display())]
    Tracked { path: PathBuf, reason: String },
    #[error("cannot remove `{}`", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanStats {
    pub removed_files: usize,
    pub removed_dirs: usize,
    /// Each file or link removed, as its `path` line spells it, in the order removed.
    pub removed: Vec<PathBuf>,
    /// Files (and submodules) left in place because the repository tracks them.
    pub kept_tracked: usize,
}

/// What the repository tracks: files `clean-on-miss` keeps whatever the `path` line covers.
/// The command layer answers (it asks git); the file-system walk only asks.
pub trait Tracked {
    /// The tracked files and links at or below the directory `real` (a real path), relative to
    /// it, `/`-separated; a directory named (a submodule) keeps everything below it. Empty where
    /// nothing can be tracked (no git, not a work tree). `Err`: there is a repository but it
    /// cannot tell, and nothing there may go.
    fn below(&self, real: &Path) -> Result<HashSet<String>, String>;
}

/// No repository anywhere: only guarantee 8's rules decide.
#[cfg(test)]
pub struct NothingTracked;

#[cfg(test)]
impl Tracked for NothingTracked {
    fn below(&self, _real: &Path) -> Result<HashSet<String>, String> {
        Ok(HashSet::new())
    }
}

/// The places `clean-on-miss` may and may not touch, as real paths.
#[derive(Clone, Debug, Default)]
pub struct CleanGuard {
    /// Never cleaned, nor any of their ancestors.
    protected: Vec<PathBuf>,
    /// Cleaned only strictly beneath.
    areas: Vec<PathBuf>,
    /// A preset's own directories: cleaned themselves and beneath.
    own: Vec<PathBuf>,
}

/// What a `path` line would clean.
#[derive(Debug, PartialEq, Eq)]
pub enum CleanTarget {
    Nothing,
    /// The contents of a directory (its real path), or what a glob picks beneath it.
    Dir(PathBuf),
    /// One file or link, at the real location of its directory entry.
    Entry(PathBuf),
}

impl CleanGuard {
    /// `workspace`, `home` (`HOME`), `runner_temp` as the environment gives them; the home
    /// directory of the password database is protected too, whatever `HOME` says.
    pub fn new(workspace: &Path, home: Option<&Path>, runner_temp: Option<&Path>, own: &[PathBuf]) -> Self {
        let real = |p: &Path| real_location(p);
        let account = account_home().map(|h| real(&h));
        let mut protected: Vec<PathBuf> =
            [Some(workspace), home, runner_temp].into_iter().flatten().map(real).collect();
        protected.extend(account.clone());
        // A place given as `/` or one level below it (`HOME=/` in a container, a preset
        // directory set to `/tmp`) would open most of the machine: it is never an area, unless
        // it is the account's own home (`/root`).
        let narrow = |p: &PathBuf| p.components().count() > 2 || account.as_ref() == Some(p);
        let areas = [Some(workspace), home, runner_temp].into_iter().flatten().map(real).filter(narrow).collect();
        let own = own.iter().map(|p| real(p)).filter(narrow).collect();
        Self { protected, areas, own }
    }

    /// Whether `pattern` may be cleaned, and what that would remove.
    pub fn check(&self, pattern: &Pattern) -> Result<CleanTarget, String> {
        let base = &pattern.base;
        let selective = picks_particular_names(pattern);
        // Protected places are refused whether or not they exist right now.
        let real = real_location(base);
        if !selective && let Some(p) = self.protected.iter().find(|p| p.starts_with(&real)) {
            return Err(format!("`{}` is {}", real.display(), self.describe_protected(&real, p)));
        }
        let meta = match std::fs::metadata(base) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // A dangling link is still an entry to remove.
                return match std::fs::symlink_metadata(base) {
                    Ok(_) if pattern.glob.is_none() => self.check_entry(base),
                    _ => Ok(CleanTarget::Nothing),
                };
            }
            Err(e) => return Err(format!("cannot read `{}`: {e}", base.display())),
        };
        if !meta.is_dir() {
            return if pattern.glob.is_none() { self.check_entry(base) } else { Ok(CleanTarget::Nothing) };
        }
        let real = std::fs::canonicalize(base).map_err(|e| format!("cannot resolve `{}`: {e}", base.display()))?;
        self.judge_dir(&real, selective, || is_marked(&real))?;
        Ok(CleanTarget::Dir(real))
    }

    /// Whether the directory at `real` may be cleaned (`selective`: only what a glob of
    /// particular names picks); `marked`: whether it carries the marker.
    fn judge_dir(&self, real: &Path, selective: bool, marked: impl FnOnce() -> bool) -> Result<(), String> {
        if selective {
            // Only what the glob names goes: the base may be the workspace or home itself.
            if self.areas.iter().chain(&self.own).any(|a| real.starts_with(a)) || marked() {
                return Ok(());
            }
            return Err(self.outside(real));
        }
        if let Some(p) = self.protected.iter().find(|p| p.starts_with(real)) {
            return Err(format!("`{}` is {}", real.display(), self.describe_protected(real, p)));
        }
        if self.allowed_without_marker(real) || marked() {
            return Ok(());
        }
        Err(self.outside(real))
    }

    /// A file or link root: its directory entry is what goes.
    fn check_entry(&self, base: &Path) -> Result<CleanTarget, String> {
        let parent = base.parent().ok_or_else(|| format!("`{}` has no parent", base.display()))?;
        let name = base.file_name().ok_or_else(|| format!("`{}` has no name", base.display()))?;
        let location = real_location(parent).join(name);
        let parent_real = location.parent().unwrap_or(&location);
        self.judge_entry(&location, || is_marked(parent_real))?;
        Ok(CleanTarget::Entry(location))
    }

    /// Whether the directory entry at `location` may be removed; `parent_marked`: whether its
    /// directory carries the marker.
    fn judge_entry(&self, location: &Path, parent_marked: impl FnOnce() -> bool) -> Result<(), String> {
        if self.areas.iter().chain(&self.own).any(|a| location.starts_with(a) && location != *a) || parent_marked() {
            return Ok(());
        }
        Err(self.outside(location))
    }

    /// Open the directory `real` that [`CleanGuard::check`] allowed, and judge what was opened:
    /// where it is now, which directory it is (never a protected one, by device and inode), and
    /// its marker, read through the handle.
    fn open_judged(&self, pattern: &Pattern, real: &Path) -> Result<Dir, CleanError> {
        let refused = |reason| CleanError::Refused { line: pattern.line.clone(), reason };
        let dir = beneath::open_real(real).map_err(|source| CleanError::Open { path: real.to_owned(), source })?;
        let now = opened_at(&dir, real).map_err(refused)?;
        let selective = picks_particular_names(pattern);
        if cfg!(unix)
            && !selective
            && let Ok(id) = beneath::identity(&dir)
        {
            let same = |p: &PathBuf| std::fs::metadata(p).is_ok_and(|m| meta_identity(&m) == id);
            if let Some(p) = self.protected.iter().find(|p| same(p)) {
                return Err(refused(format!("`{}` is {}", now.display(), self.describe_protected(p, p))));
            }
        }
        self.judge_dir(&now, selective, || marked_handle(&dir)).map_err(refused)?;
        Ok(dir)
    }

    /// Open the directory of the file or link root at `location`, judged as
    /// [`CleanGuard::open_judged`] judges a directory.
    fn open_parent_judged(&self, pattern: &Pattern, location: &Path) -> Result<Dir, CleanError> {
        let refused = |reason| CleanError::Refused { line: pattern.line.clone(), reason };
        let parent = location.parent().unwrap_or(location);
        let name = location.file_name().unwrap_or_default();
        let dir = beneath::open_real(parent).map_err(|source| CleanError::Open { path: parent.to_owned(), source })?;
        let now = opened_at(&dir, parent).map_err(refused)?;
        self.judge_entry(&now.join(name), || marked_handle(&dir)).map_err(refused)?;
        Ok(dir)
    }

    fn describe_protected(&self, real: &Path, protected: &Path) -> String {
        let what = if real == protected { "" } else { "a parent of " };
        format!("{what}the workspace, the home directory or `RUNNER_TEMP` (`{}`)", protected.display())
    }

    fn outside(&self, real: &Path) -> String {
        format!(
            "`{}` is outside the workspace, `RUNNER_TEMP` and the home directory, and exact-cache has not \
             restored into or saved from it (no `{OWNED_MARKER}` marker)",
            real.display()
        )
    }

    /// Whether `real` (a directory) is a place exact-cache may clean without a marker.
    fn allowed_without_marker(&self, real: &Path) -> bool {
        !self.protected.iter().any(|p| p.starts_with(real))
            && (self.areas.iter().any(|a| real.starts_with(a) && real != a)
                || self.own.iter().any(|o| real.starts_with(o)))
    }

    /// After a restore or save: leave the marker in each directory root it restored into or
    /// saved from (`roots`, by index) that `clean-on-miss` could not clean otherwise (not in the
    /// home, workspace or temp areas, and not protected).
    pub fn mark_owned(&self, set: &PatternSet, roots: &[usize]) -> Vec<(PathBuf, io::Error)> {
        let mut failures = Vec::new();
        let chosen = set.includes.iter().enumerate().filter(|(i, p)| roots.contains(i) && p.glob.is_none());
        for (_, pattern) in chosen {
            let Ok(real) = std::fs::canonicalize(&pattern.base) else { continue };
            if !real.is_dir()
                || self.allowed_without_marker(&real)
                || self.protected.iter().any(|p| p.starts_with(&real))
                || is_marked(&real)
            {
                continue;
            }
            let write = beneath::open_real(&real).and_then(|dir| dir.write(OWNED_MARKER, b"exact-cache\n"));
            if let Err(e) = write {
                failures.push((real, e));
            }
        }
        failures
    }
}

/// A glob that names what it takes by its last component: a literal name (`**/expected`) or a
/// literal extension (`**/*.pth`, `fixtures-*.pt2`) — not `*`, `[!e]*`, `.*` or `{a,b}`, which
/// could take anything. Only such a glob may start at the workspace or the home directory.
fn picks_particular_names(pattern: &Pattern) -> bool {
    let Some(glob) = &pattern.glob else { return false };
    let last = pattern.line.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
    let literal = |s: &str| !s.is_empty() && !crate::paths::has_glob_meta(s) && !s.contains(['!', ']', '}', '\\']);
    let named = if literal(last) {
        !matches!(last, "." | ".." | "~")
    } else {
        last.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty() && literal(ext) && ext.bytes().all(|b| b.is_ascii_alphanumeric() || b"_+-".contains(&b))
        })
    };
    let probe = pattern.base.join("exact-cache-probe");
    named && !glob.is_match(&probe) && !glob.is_match(probe.join("x"))
}

fn is_marked(real: &Path) -> bool {
    std::fs::symlink_metadata(real.join(OWNED_MARKER)).is_ok_and(|m| m.is_file())
}

fn marked_handle(dir: &Dir) -> bool {
    dir.symlink_metadata(OWNED_MARKER).is_ok_and(|m| m.is_file())
}

/// Where the directory opened at `real` is now: it must still be there (the kernel's name for
/// it; where the platform cannot tell, the walk that opened it without links vouches for it).
fn opened_at(dir: &Dir, real: &Path) -> Result<PathBuf, String> {
    match beneath::location(dir) {
        Some(now) if now != real => {
            Err(format!("`{}` moved while it was opened (it is now `{}`)", real.display(), now.display()))
        }
        _ => Ok(real.to_owned()),
    }
}

#[cfg(unix)]
fn meta_identity(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn meta_identity(_meta: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// `path` with symlinks resolved as far as it exists; the rest appended as written.
fn real_location(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while std::fs::symlink_metadata(&existing).is_err() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_owned());
                existing = parent.to_owned();
            }
            _ => break,
        }
    }
    let mut real = std::fs::canonicalize(&existing).unwrap_or(existing);
    real.extend(rest.iter().rev());
    real
}

/// The home directory the password database gives this user, whatever `HOME` says.
#[cfg(unix)]
fn account_home() -> Option<PathBuf> {
    use std::ffi::CStr;
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: getpwuid_r writes into `pwd` and `buf` (of the size given) only; `result` points
    // to `pwd` or is null, and the strings it holds live in `buf`, read before `buf` is dropped.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(libc::getuid(), &mut pwd, buf.as_mut_ptr().cast(), buf.len(), &mut result);
        if rc != 0 || result.is_null() || pwd.pw_dir.is_null() {
            return None;
        }
        let dir = CStr::from_ptr(pwd.pw_dir).to_bytes();
        (!dir.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(dir)))
    }
}

#[cfg(not(unix))]
fn account_home() -> Option<PathBuf> {
    None
}

/// [`clean_into`], from empty stats.
#[cfg(test)]
pub fn clean(set: &PatternSet, guard: &CleanGuard, tracked: &dyn Tracked) -> Result<CleanStats, CleanError> {
    let mut stats = CleanStats::default();
    clean_into(set, guard, tracked, &mut stats)?;
    Ok(stats)
}

/// Remove what each `path` line covers, as the module doc says, counting into `stats`: what
/// went before a failure is named too.
pub fn clean_into(
    set: &PatternSet,
    guard: &CleanGuard,
    tracked: &dyn Tracked,
    stats: &mut CleanStats,
) -> Result<(), CleanError> {
    for pattern in &set.includes {
        let target =
            guard.check(pattern).map_err(|reason| CleanError::Refused { line: pattern.line.clone(), reason })?;
        match target {
            CleanTarget::Nothing => {}
            CleanTarget::Entry(location) => {
                let parent = location.parent().unwrap_or(&location);
                let name = location.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                let dir = guard.open_parent_judged(pattern, &location)?;
                let kept =
                    tracked.below(parent).map_err(|reason| CleanError::Tracked { path: parent.to_owned(), reason })?;
                if kept.contains(name) {
                    stats.kept_tracked += 1;
                    continue;
                }
                let mut relaxed = None;
                let removed = remove_file(&dir, name, &mut relaxed);
                if let Some(mode) = relaxed {
                    let _ = beneath::set_dir_mode(&dir, mode);
                }
                match removed {
                    Ok(true) => {
                        stats.removed_files += 1;
                        stats.removed.push(pattern.base.clone());
                    }
                    Ok(false) => {}
                    Err(source) => return Err(CleanError::Remove { path: location, source }),
                }
            }
            CleanTarget::Dir(real) => {
                let dir = guard.open_judged(pattern, &real)?;
                let kept = tracked.below(&real).map_err(|reason| CleanError::Tracked { path: real.clone(), reason })?;
                super::staging::sweep_stale_in(&dir);
                if let Some(parent) = real.parent()
                    && let Ok(parent) = beneath::open_real(parent)
                {
                    super::staging::sweep_stale_in(&parent);
                }
                let mut walk = Walk { pattern, set, tracked, stats: &mut *stats };
                let asked = [Asked { at: String::new(), kept: &kept }];
                let here = Place { real: &real, lexical: &pattern.base, rel: "", asked: &asked };
                walk.clean_in(&dir, here, pattern.glob.is_none())?;
            }
        }
    }
    Ok(())
}

struct Walk<'a> {
    pattern: &'a Pattern,
    set: &'a PatternSet,
    tracked: &'a dyn Tracked,
    stats: &'a mut CleanStats,
}

/// What one repository that was asked tracks: the directory it was asked about, relative to the
/// root of the walk (`""` for the root), and its answer, relative to that directory.
#[derive(Clone)]
struct Asked<'p> {
    at: String,
    kept: &'p HashSet<String>,
}

/// A directory of the walk: its real path; the same place as the `path` line spells it (for
/// glob and `!` matching, and for naming what goes); its path relative to the root of the
/// walk; and every repository asked about it or a directory above it in the walk — the root's
/// and any nested one's. A nested repository only adds files to keep: what the outer one
/// tracks stays whatever a `.git` below it says.
#[derive(Clone, Copy)]
struct Place<'p> {
    real: &'p Path,
    lexical: &'p Path,
    rel: &'p str,
    asked: &'p [Asked<'p>],
}

impl Place<'_> {
    fn child_rel(&self, name: &str) -> String {
        if self.rel.is_empty() { name.to_owned() } else { format!("{}/{name}", self.rel) }
    }

    /// Whether any repository asked tracks `child_rel` (relative to the root of the walk).
    fn keeps(&self, child_rel: &str) -> bool {
        self.asked.iter().any(|a| {
            let rel = if a.at.is_empty() {
                Some(child_rel)
            } else {
                child_rel.strip_prefix(a.at.as_str()).and_then(|r| r.strip_prefix('/'))
            };
            rel.is_some_and(|r| a.kept.contains(r))
        })
    }
}

impl Walk<'_> {
    /// Clean the directory `dir` at `here`. `covered`: everything in it goes (but what is kept).
    fn clean_in(&mut self, dir: &Dir, here: Place<'_>, covered: bool) -> Result<(), CleanError> {
        // A read-only directory is opened for the removal and gets its mode back after.
        let mut relaxed = None;
        let result = self.clean_entries(dir, here, covered, &mut relaxed);
        if let Some(mode) = relaxed {
            let _ = beneath::set_dir_mode(dir, mode);
        }
        result
    }

    fn clean_entries(
        &mut self,
        dir: &Dir,
        here: Place<'_>,
        covered: bool,
        relaxed: &mut Option<u32>,
    ) -> Result<(), CleanError> {
        let fail = |path: &Path| {
            let path = path.to_owned();
            move |source| CleanError::Remove { path, source }
        };
        let mut names: Vec<(String, bool)> = Vec::new();
        for entry in dir.entries().map_err(fail(here.real))? {
            let entry = entry.map_err(fail(here.real))?;
            let Ok(name) = entry.file_name().into_string() else { continue };
            let is_dir = entry.file_type().map_err(fail(&here.real.join(&name)))?.is_dir();
            names.push((name, is_dir));
        }
        for (name, is_dir) in names {
            if name == ".git" || name == OWNED_MARKER || name.starts_with(STAGING_PREFIX) {
                continue;
            }
            let child_lexical = here.lexical.join(&name);
            let child_real = here.real.join(&name);
            if self.set.is_excluded(&child_lexical) {
                continue;
            }
            let child_rel = here.child_rel(&name);
            if here.keeps(&child_rel) {
                self.stats.kept_tracked += 1;
                continue;
            }
            let child_covered = covered || self.pattern.glob.as_ref().is_some_and(|g| g.is_match(&child_lexical));
            if is_dir {
                let sub = beneath::open_child(dir, &name).map_err(fail(&child_real))?;
                // A repository of its own (not a submodule of the one above): ask it too. What it
                // tracks is kept as well; what the repositories above track still stays.
                let nested = match beneath::kind_of(&sub, ".git") {
                    Ok(Some(_)) => Some(
                        self.tracked
                            .below(&child_real)
                            .map_err(|reason| CleanError::Tracked { path: child_real.clone(), reason })?,
                    ),
                    _ => None,
                };
                let with_nested;
                let asked = match &nested {
                    Some(kept) => {
                        with_nested = [here.asked, &[Asked { at: child_rel.clone(), kept }]].concat();
                        &with_nested[..]
                    }
                    None => here.asked,
                };
                let there = Place { real: &child_real, lexical: &child_lexical, rel: &child_rel, asked };
                self.clean_in(&sub, there, child_covered)?;
                drop(sub);
                // Directories still holding kept files are not empty and stay.
                if child_covered && remove_empty_dir(dir, &name, relaxed) {
                    self.stats.removed_dirs += 1;
                }
            } else if child_covered && remove_file(dir, &name, relaxed).map_err(fail(&child_real))? {
                self.stats.removed_files += 1;
                self.stats.removed.push(child_lexical);
            }
        }
        Ok(())
    }
}

/// Remove the file or link `name` from `dir`, opening a read-only `dir` if needed (its old mode
/// goes to `relaxed`); whether it was there.
fn remove_file(dir: &Dir, name: &str, relaxed: &mut Option<u32>) -> io::Result<bool> {
    let mut result = beneath::remove_file_or_link(dir, name);
    if result.as_ref().is_err_and(|e| e.kind() == io::ErrorKind::PermissionDenied) && relax(dir, relaxed) {
        result = beneath::remove_file_or_link(dir, name);
    }
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn remove_empty_dir(dir: &Dir, name: &str, relaxed: &mut Option<u32>) -> bool {
    dir.remove_dir(name).is_ok() || (relax(dir, relaxed) && dir.remove_dir(name).is_ok())
}

/// Make `dir` writable once, remembering its old mode; whether it is writable now.
fn relax(dir: &Dir, relaxed: &mut Option<u32>) -> bool {
    match beneath::make_writable(dir) {
        Ok(Some(old)) => {
            relaxed.get_or_insert(old);
            true
        }
        Ok(None) => true,
        Err(_) => false,
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::paths::Locations;
    use std::fs;

    struct Scratch {
        _dir: tempfile::TempDir,
        root: PathBuf,
    }

    fn scratch() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        for d in ["ws/out", "home/.cache/x", "temp/job", "elsewhere"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        Scratch { _dir: dir, root }
    }

    fn guard(s: &Scratch) -> CleanGuard {
        CleanGuard::new(&s.root.join("ws"), Some(&s.root.join("home")), Some(&s.root.join("temp")), &[])
    }

    fn pattern(s: &Scratch, line: &str) -> Pattern {
        let locations = Locations { workspace: s.root.join("ws"), home: Some(s.root.join("home")) };
        Pattern::parse(line, &locations).unwrap()
    }

    #[test]
    fn the_guard_allows_own_areas_and_refuses_everything_else() {
        let s = scratch();
        let g = guard(&s);
        for ok in [
            "out",
            "~/.cache/x",
            &format!("{}/temp/job", s.root.display()),
            "**/*.expected",
            "~/*.pth",
            "fixtures-*.pt2",
            "**/expected",
        ] {
            assert!(matches!(g.check(&pattern(&s, ok)), Ok(CleanTarget::Dir(_))), "{ok}");
        }
        for (bad, why) in [
            (".", "the workspace"),
            ("~", "the home directory"),
            ("..", "a parent of"),
            ("/", "a parent of"),
            (&format!("{}/temp", s.root.display()), "RUNNER_TEMP"),
            (&format!("{}/elsewhere", s.root.display()), "no `.exact-cache-root` marker"),
            ("**", "the workspace"),
            ("*[!e]", "the workspace"),
            ("[!e]*", "the workspace"),
            ("~/.*", "the home directory"),
            ("~/[!e]*", "the home directory"),
            ("*.{a,b}", "the workspace"),
            ("./*", "the workspace"),
        ] {
            let err = g.check(&pattern(&s, bad)).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        assert_eq!(g.check(&pattern(&s, "missing/dir")), Ok(CleanTarget::Nothing));
    }

    #[test]
    fn real_paths_decide() {
        let s = scratch();
        std::os::unix::fs::symlink(".", s.root.join("ws/zz")).unwrap();
        std::os::unix::fs::symlink(s.root.join("elsewhere"), s.root.join("ws/far")).unwrap();
        let g = guard(&s);
        assert!(g.check(&pattern(&s, "zz")).unwrap_err().contains("the workspace"));
        assert!(g.check(&pattern(&s, "far")).unwrap_err().contains("marker"));
        // A marker left by an earlier restore or save makes it exact-cache's own.
        let set = PatternSet::parse(&["far"], &Locations { workspace: s.root.join("ws"), home: None }).unwrap();
        assert!(g.mark_owned(&set, &[]).is_empty());
        assert!(g.check(&pattern(&s, "far")).is_err(), "only the roots named are marked");
        assert!(g.mark_owned(&set, &[0]).is_empty());
        assert_eq!(g.check(&pattern(&s, "far")), Ok(CleanTarget::Dir(s.root.join("elsewhere"))));
    }

    #[test]
    fn the_account_home_is_protected_whatever_home_says() {
        let Some(home) = account_home() else { return };
        let s = scratch();
        // HOME and the workspace both wrongly point above the real home.
        let g = CleanGuard::new(Path::new("/"), Some(Path::new("/")), None, &[]);
        let locations = Locations { workspace: s.root.join("ws"), home: None };
        for line in [home.to_string_lossy().into_owned(), "/".to_owned()] {
            let p = Pattern::parse(&line, &locations).unwrap();
            let err = g.check(&p).unwrap_err();
            assert!(err.contains("the workspace, the home directory"), "{line}: {err}");
        }
    }

    #[test]
    fn a_home_or_preset_directory_at_the_top_of_the_tree_opens_nothing() {
        let s = scratch();
        // HOME=/ (a container user without a passwd entry), a preset directory set to `/tmp`.
        let g = CleanGuard::new(&s.root.join("ws"), Some(Path::new("/")), None, &[PathBuf::from("/tmp")]);
        let locations = Locations { workspace: s.root.join("ws"), home: Some(PathBuf::from("/")) };
        for line in ["/usr/lib", "/etc", "~/**/*.so", "/**/*.conf", "/tmp"] {
            let p = Pattern::parse(line, &locations).unwrap();
            assert!(g.check(&p).is_err(), "{line} must be refused");
        }
        assert!(g.check(&Pattern::parse("out", &locations).unwrap()).is_ok());
    }

    #[test]
    fn clean_gives_read_only_directories_it_keeps_their_mode_back() {
        use std::os::unix::fs::PermissionsExt;
        let s = scratch();
        write_file(&s.root.join("ws/out/ro/a.pyc"));
        write_file(&s.root.join("ws/out/ro/keep.py"));
        fs::set_permissions(s.root.join("ws/out/ro"), fs::Permissions::from_mode(0o555)).unwrap();
        let set =
            PatternSet::parse(&["out/**/*.pyc"], &Locations { workspace: s.root.join("ws"), home: None }).unwrap();
        let stats = clean(&set, &guard(&s), &NothingTracked).unwrap();
        assert_eq!(stats.removed_files, 1);
        assert!(s.root.join("ws/out/ro/keep.py").exists());
        assert_eq!(fs::metadata(s.root.join("ws/out/ro")).unwrap().permissions().mode() & 0o777, 0o555);
    }

    struct FakeTracked {
        at: PathBuf,
        files: &'static [&'static str],
    }

    impl Tracked for FakeTracked {
        fn below(&self, real: &Path) -> Result<HashSet<String>, String> {
            let Ok(rel) = real.strip_prefix(&self.at) else { return Ok(HashSet::new()) };
            let rel = rel.to_str().unwrap();
            let files = self
                .files
                .iter()
                .filter_map(|f| if rel.is_empty() { Some(*f) } else { f.strip_prefix(rel)?.strip_prefix('/') });
            Ok(files.map(str::to_owned).collect())
        }
    }

    #[test]
    fn clean_keeps_what_the_repository_tracks_and_names_what_it_removes() {
        let s = scratch();
        let ws = s.root.join("ws");
        for f in ["out/gen.py", "out/config.yaml", "out/sub/model.pbtxt", "out/vendor/lib/x.c"] {
            write_file(&ws.join(f));
        }
        for f in ["out/stale.pb", "out/sub/stale.pb", "out/gen/a.bin", "out/gen/deep/b.bin"] {
            write_file(&ws.join(f));
        }
        // A submodule is listed as its directory: everything below it stays.
        let tracked = FakeTracked {
            at: ws.clone(),
            files: &["out/gen.py", "out/config.yaml", "out/sub/model.pbtxt", "out/vendor/lib"],
        };
        let set = PatternSet::parse(&["out"], &Locations { workspace: ws.clone(), home: None }).unwrap();
        let stats = clean(&set, &guard(&s), &tracked).unwrap();
        for kept in ["out/gen.py", "out/config.yaml", "out/sub/model.pbtxt", "out/vendor/lib/x.c"] {
            assert!(ws.join(kept).exists(), "{kept} is tracked and must stay");
        }
        let mut removed: Vec<String> =
            stats.removed.iter().map(|p| p.strip_prefix(&ws).unwrap().to_str().unwrap().to_owned()).collect();
        removed.sort();
        assert_eq!(removed, ["out/gen/a.bin", "out/gen/deep/b.bin", "out/stale.pb", "out/sub/stale.pb"]);
        assert_eq!((stats.removed_files, stats.removed_dirs, stats.kept_tracked), (4, 2, 4));
        assert!(!ws.join("out/gen").exists() && ws.join("out/sub").is_dir());

        // A file root the repository tracks stays too.
        let set = PatternSet::parse(&["out/gen.py"], &Locations { workspace: ws.clone(), home: None }).unwrap();
        let stats = clean(&set, &guard(&s), &tracked).unwrap();
        assert_eq!((stats.removed_files, stats.kept_tracked), (0, 1));
        assert!(ws.join("out/gen.py").exists());
    }

    /// A `.git` below the root (a nested `git init`, a `.git` file pointing anywhere) only adds
    /// files to keep.
    #[test]
    fn clean_keeps_what_the_outer_repository_tracks_below_a_nested_one() {
        struct Two {
            outer: FakeTracked,
            nested: FakeTracked,
        }
        impl Tracked for Two {
            fn below(&self, real: &Path) -> Result<HashSet<String>, String> {
                let which = if real.starts_with(&self.nested.at) { &self.nested } else { &self.outer };
                which.below(real)
            }
        }
        let s = scratch();
        let ws = s.root.join("ws");
        for f in ["out/kept.txt", "out/sub/important.c", "out/sub/deep/x.h", "out/sub/own.c"] {
            write_file(&ws.join(f));
        }
        for f in ["out/stale", "out/sub/stale.o", "out/sub/deep/stale.o"] {
            write_file(&ws.join(f));
        }
        fs::write(ws.join("out/sub/.git"), b"gitdir: /nowhere\n").unwrap();
        let tracked = Two {
            outer: FakeTracked { at: ws.clone(), files: &["out/kept.txt", "out/sub/important.c", "out/sub/deep/x.h"] },
            nested: FakeTracked { at: ws.join("out/sub"), files: &["own.c"] },
        };
        let set = PatternSet::parse(&["out"], &Locations { workspace: ws.clone(), home: None }).unwrap();
        let stats = clean(&set, &guard(&s), &tracked).unwrap();
        for kept in ["out/kept.txt", "out/sub/important.c", "out/sub/deep/x.h", "out/sub/own.c", "out/sub/.git"] {
            assert!(ws.join(kept).exists(), "{kept} must stay");
        }
        assert_eq!((stats.removed_files, stats.kept_tracked), (3, 4));
    }

    #[test]
    fn clean_stops_where_the_repository_cannot_tell() {
        struct Broken;
        impl Tracked for Broken {
            fn below(&self, _: &Path) -> Result<HashSet<String>, String> {
                Err("detected dubious ownership".to_owned())
            }
        }
        let s = scratch();
        write_file(&s.root.join("ws/out/maybe-committed.txt"));
        let set = PatternSet::parse(&["out"], &Locations { workspace: s.root.join("ws"), home: None }).unwrap();
        let err = clean(&set, &guard(&s), &Broken).unwrap_err();
        assert!(matches!(err, CleanError::Tracked { .. }), "{err}");
        assert!(s.root.join("ws/out/maybe-committed.txt").exists());
    }

    /// The root is judged again as opened: a link swapped in after the check (here, by hand
    /// between the two) makes the open fail, and what it points to is untouched.
    #[test]
    fn a_link_swapped_in_after_the_check_is_never_followed() {
        let s = scratch();
        write_file(&s.root.join("elsewhere/precious"));
        write_file(&s.root.join("ws/out/stale"));
        let g = guard(&s);
        let p = pattern(&s, "out");
        let Ok(CleanTarget::Dir(real)) = g.check(&p) else { panic!("out is cleanable") };
        fs::rename(s.root.join("ws/out"), s.root.join("ws/out.old")).unwrap();
        std::os::unix::fs::symlink(s.root.join("elsewhere"), s.root.join("ws/out")).unwrap();
        let err = g.open_judged(&p, &real).map(|_| ()).unwrap_err();
        assert!(matches!(err, CleanError::Open { .. }), "{err}");
        // A file root whose directory became a link: the same.
        let file = pattern(&s, "sub/f");
        write_file(&s.root.join("ws/sub/f"));
        let Ok(CleanTarget::Entry(location)) = g.check(&file) else { panic!("sub/f is cleanable") };
        fs::rename(s.root.join("ws/sub"), s.root.join("ws/sub.old")).unwrap();
        std::os::unix::fs::symlink(s.root.join("elsewhere"), s.root.join("ws/sub")).unwrap();
        assert!(g.open_parent_judged(&file, &location).is_err());
        assert!(s.root.join("elsewhere/precious").exists());
    }

    /// What was opened is judged again by where it is and which directory it is: a handle on
    /// the workspace itself is refused, one on a directory beneath it allowed.
    #[test]
    fn an_opened_directory_is_judged_again() {
        let s = scratch();
        let g = guard(&s);
        let err = g.open_judged(&pattern(&s, "out"), &s.root.join("ws")).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("the workspace"), "{err}");
        assert!(g.open_judged(&pattern(&s, "out"), &s.root.join("ws/out")).is_ok());
    }

    fn write_file(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, b"x").unwrap();
    }

    #[test]
    fn clean_removes_links_never_their_targets() {
        let s = scratch();
        fs::write(s.root.join("elsewhere/precious"), b"x").unwrap();
        std::os::unix::fs::symlink(s.root.join("elsewhere"), s.root.join("ws/out/link")).unwrap();
        std::os::unix::fs::symlink(s.root.join("elsewhere/precious"), s.root.join("ws/out/file-link")).unwrap();
        fs::create_dir_all(s.root.join("ws/out/sub")).unwrap();
        fs::write(s.root.join("ws/out/sub/stale"), b"x").unwrap();
        let set = PatternSet::parse(&["out"], &Locations { workspace: s.root.join("ws"), home: None }).unwrap();
        let stats = clean(&set, &guard(&s), &NothingTracked).unwrap();
        assert_eq!((stats.removed_files, stats.removed_dirs, stats.removed.len()), (3, 1, 3));
        assert!(s.root.join("elsewhere/precious").exists());
        assert_eq!(fs::read_dir(s.root.join("ws/out")).unwrap().count(), 0);
    }
}
