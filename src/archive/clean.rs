//! `clean-on-miss`: remove stale files under the `path` roots before generation starts, so a
//! miss begins from nothing rather than from leftovers of an older run.
//!
//! What it may clean at all is [`CleanGuard`]'s decision (guarantee 8), judged on real paths
//! (symlinks resolved): beneath the workspace, `RUNNER_TEMP`, or a strict subdirectory of the
//! home directory; a preset's own cache directory; or a directory exact-cache restored into or
//! saved from before, which carries the marker [`OWNED_MARKER`]. Never the workspace, the home
//! directory (as `HOME` says, and as the password database says), `RUNNER_TEMP`, or any of their
//! ancestors — except for a glob that picks particular names (`**/*.expected`), which removes
//! only what it matches. Anything else is refused with the reason.
//!
//! Removal walks through directory handles and never follows a link: a link is removed as a
//! link. Excluded (`!`) paths are kept, and so are the directories that still hold them;
//! nothing inside a `.git` directory is ever removed; read-only directories are opened for the
//! removal; leftover staging directories of crashed restores go too.

use super::beneath;
use crate::paths::{OWNED_MARKER, Pattern, PatternSet, STAGING_PREFIX};
use cap_std::fs::Dir;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    #[error("refusing to clean `{line}`: {reason}")]
    Refused { line: String, reason: String },
    #[error("cannot remove `{}`", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanStats {
    pub removed_files: usize,
    pub removed_dirs: usize,
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
    /// Nothing is there.
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
        if selective {
            // Only what the glob names goes: the base may be the workspace or home itself.
            if self.areas.iter().chain(&self.own).any(|a| real.starts_with(a)) || is_marked(&real) {
                return Ok(CleanTarget::Dir(real));
            }
            return Err(self.outside(&real));
        }
        // Protected places were refused above (the same real path, resolved as far as it exists).
        if self.allowed_without_marker(&real) || is_marked(&real) {
            return Ok(CleanTarget::Dir(real));
        }
        Err(self.outside(&real))
    }

    /// A file or link root: its directory entry is what goes.
    fn check_entry(&self, base: &Path) -> Result<CleanTarget, String> {
        let parent = base.parent().ok_or_else(|| format!("`{}` has no parent", base.display()))?;
        let name = base.file_name().ok_or_else(|| format!("`{}` has no name", base.display()))?;
        let location = real_location(parent).join(name);
        let parent_real = location.parent().unwrap_or(&location);
        if self.areas.iter().chain(&self.own).any(|a| location.starts_with(a) && location != *a)
            || is_marked(parent_real)
        {
            return Ok(CleanTarget::Entry(location));
        }
        Err(self.outside(&location))
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
            let write = beneath::open_trusted(&real).and_then(|dir| dir.write(OWNED_MARKER, b"exact-cache\n"));
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

/// Remove what each `path` line covers, after [`CleanGuard::check`] allows it.
pub fn clean(set: &PatternSet, guard: &CleanGuard) -> Result<CleanStats, CleanError> {
    let mut stats = CleanStats::default();
    for pattern in &set.includes {
        let target =
            guard.check(pattern).map_err(|reason| CleanError::Refused { line: pattern.line.clone(), reason })?;
        match target {
            CleanTarget::Nothing => {}
            CleanTarget::Entry(location) => {
                let parent = location.parent().unwrap_or(&location);
                let name = location.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                let removed = beneath::open_trusted(parent).and_then(|dir| {
                    let mut relaxed = None;
                    let removed = remove_file(&dir, name, &mut relaxed);
                    if let Some(mode) = relaxed {
                        let _ = beneath::set_dir_mode(&dir, mode);
                    }
                    removed
                });
                match removed {
                    Ok(true) => stats.removed_files += 1,
                    Ok(false) => {}
                    Err(source) => return Err(CleanError::Remove { path: location, source }),
                }
            }
            CleanTarget::Dir(real) => {
                let dir =
                    beneath::open_trusted(&real).map_err(|source| CleanError::Remove { path: real.clone(), source })?;
                super::staging::sweep_stale_in(&dir);
                if let Some(parent) = real.parent() {
                    super::staging::sweep_stale(parent);
                }
                let walk = Walk { pattern, set, stats: &mut stats };
                walk.clean_dir(&dir, &real, &pattern.base, pattern.glob.is_none())?;
            }
        }
    }
    Ok(stats)
}

struct Walk<'a> {
    pattern: &'a Pattern,
    set: &'a PatternSet,
    stats: &'a mut CleanStats,
}

impl Walk<'_> {
    /// Clean the directory `dir` (at `real`; `lexical` is the same place as the `path` line
    /// spells it, for glob and `!` matching). `covered`: everything in it goes.
    fn clean_dir(mut self, dir: &Dir, real: &Path, lexical: &Path, covered: bool) -> Result<(), CleanError> {
        self.clean_in(dir, real, lexical, covered)
    }

    fn clean_in(&mut self, dir: &Dir, real: &Path, lexical: &Path, covered: bool) -> Result<(), CleanError> {
        // A read-only directory is opened for the removal and gets its mode back after.
        let mut relaxed = None;
        let result = self.clean_entries(dir, real, lexical, covered, &mut relaxed);
        if let Some(mode) = relaxed {
            let _ = beneath::set_dir_mode(dir, mode);
        }
        result
    }

    fn clean_entries(
        &mut self,
        dir: &Dir,
        real: &Path,
        lexical: &Path,
        covered: bool,
        relaxed: &mut Option<u32>,
    ) -> Result<(), CleanError> {
        let fail = |path: &Path| {
            let path = path.to_owned();
            move |source| CleanError::Remove { path, source }
        };
        let mut names: Vec<(String, bool)> = Vec::new();
        for entry in dir.entries().map_err(fail(real))? {
            let entry = entry.map_err(fail(real))?;
            let Ok(name) = entry.file_name().into_string() else { continue };
            let is_dir = entry.file_type().map_err(fail(&real.join(&name)))?.is_dir();
            names.push((name, is_dir));
        }
        for (name, is_dir) in names {
            if name == ".git" || name == OWNED_MARKER || name.starts_with(STAGING_PREFIX) {
                continue;
            }
            let child_lexical = lexical.join(&name);
            let child_real = real.join(&name);
            if self.set.is_excluded(&child_lexical) {
                continue;
            }
            let child_covered = covered || self.pattern.glob.as_ref().is_some_and(|g| g.is_match(&child_lexical));
            if is_dir {
                let sub = beneath::open_child(dir, &name).map_err(fail(&child_real))?;
                self.clean_in(&sub, &child_real, &child_lexical, child_covered)?;
                drop(sub);
                // Directories still holding excluded files are not empty and stay.
                if child_covered && remove_empty_dir(dir, &name, relaxed) {
                    self.stats.removed_dirs += 1;
                }
            } else if child_covered && remove_file(dir, &name, relaxed).map_err(fail(&child_real))? {
                self.stats.removed_files += 1;
            }
        }
        Ok(())
    }
}

/// Remove the file or link `name` from `dir`, opening a read-only `dir` if needed (its old mode
/// goes to `relaxed`); whether it was there.
fn remove_file(dir: &Dir, name: &str, relaxed: &mut Option<u32>) -> io::Result<bool> {
    use cap_fs_ext::DirExt;
    let mut result = dir.remove_file_or_symlink(name);
    if result.as_ref().is_err_and(|e| e.kind() == io::ErrorKind::PermissionDenied) && relax(dir, relaxed) {
        result = dir.remove_file_or_symlink(name);
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
        let stats = clean(&set, &guard(&s)).unwrap();
        assert_eq!(stats.removed_files, 1);
        assert!(s.root.join("ws/out/ro/keep.py").exists());
        assert_eq!(fs::metadata(s.root.join("ws/out/ro")).unwrap().permissions().mode() & 0o777, 0o555);
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
        let stats = clean(&set, &guard(&s)).unwrap();
        assert_eq!(stats, CleanStats { removed_files: 3, removed_dirs: 1 });
        assert!(s.root.join("elsewhere/precious").exists());
        assert_eq!(fs::read_dir(s.root.join("ws/out")).unwrap().count(), 0);
    }
}
