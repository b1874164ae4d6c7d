//! Placement: move a verified, staged archive into its roots, or undo every step.
//!
//! Every step goes through directory handles that never follow a link ([`super::beneath`]).
//! Where an entry's parent path holds something that is not a directory — a symlink left by
//! an earlier job, or a file — it is *replaced* by a directory (the old one is kept in staging
//! until the restore succeeds, and put back if it fails); it is never followed. A directory
//! that is already there is merged into; a file or link at an entry's own place is replaced.
//! Overlapping roots are placed root by root through their own handles; [`super::claims`] has
//! already refused entries of one root beneath another root's link, and identical entries of
//! two roots are placed once.

use super::beneath::{self, Kind, Tree};
use super::claims::kind_name;
use super::unpack::{RestoreStats, Site, Stage, Staged, StagedEntry, UnpackError, staged_rel};
use crate::manifest::EntryKind;
use cap_std::fs::Dir;
use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One step of placement, recorded so it can be undone.
enum Undo {
    /// `parent/name` came from `staged_parent/staged_name`.
    Placed {
        parent: Arc<Dir>,
        name: String,
        staged_parent: Arc<Dir>,
        staged_name: String,
        path: PathBuf,
    },
    /// What was at `parent/name` is kept as `backup` in a staging directory.
    Backup {
        parent: Arc<Dir>,
        name: String,
        holder: Arc<Dir>,
        backup: String,
        path: PathBuf,
    },
    CreatedDir {
        parent: Arc<Dir>,
        name: String,
        path: PathBuf,
    },
    Mode {
        dir: Arc<Dir>,
        mode: u32,
        path: PathBuf,
    },
}

/// A directory opened for writing: its handle, old mode, identity and path (for messages).
struct Relaxed {
    dir: Arc<Dir>,
    mode: u32,
    id: (u64, u64),
    path: PathBuf,
}

#[derive(Default)]
struct Journal {
    steps: Vec<Undo>,
    backups: usize,
    /// Directories opened for writing: their handle and old mode.
    relaxed: Vec<Relaxed>,
    /// Handles checked already (by address: each handle is checked once).
    checked: HashSet<*const Dir>,
    /// Keeps every checked handle alive, so no other directory reuses its address.
    keep: Vec<Arc<Dir>>,
}

impl Journal {
    /// Give `dir` owner write permission when it lacks it (a read-only directory from an
    /// earlier restore), recording the old mode; checked once per directory.
    fn relax(&mut self, dir: &Arc<Dir>, path: &std::path::Path) -> Result<(), UnpackError> {
        if !self.checked.insert(Arc::as_ptr(dir)) {
            return Ok(());
        }
        self.keep.push(Arc::clone(dir));
        if let Some(old) = beneath::make_writable(dir).map_err(UnpackError::io(path))? {
            self.steps.push(Undo::Mode { dir: Arc::clone(dir), mode: old, path: path.to_owned() });
            let id = beneath::identity(dir).map_err(UnpackError::io(path))?;
            self.relaxed.push(Relaxed { dir: Arc::clone(dir), mode: old, id, path: path.to_owned() });
        }
        Ok(())
    }

    /// Move what is at `parent/name` into `stage` as a backup.
    fn backup(&mut self, parent: &Arc<Dir>, name: &str, stage: &Arc<Dir>, path: PathBuf) -> Result<(), UnpackError> {
        let backup = format!("backup-{}", self.backups);
        self.backups += 1;
        parent.rename(name, stage, &backup).map_err(UnpackError::io(&path))?;
        self.steps.push(Undo::Backup {
            parent: Arc::clone(parent),
            name: name.to_owned(),
            holder: Arc::clone(stage),
            backup,
            path,
        });
        Ok(())
    }

    fn create_dir(&mut self, parent: &Arc<Dir>, name: &str, path: PathBuf) -> Result<(), UnpackError> {
        parent.create_dir(name).map_err(UnpackError::io(&path))?;
        self.steps.push(Undo::CreatedDir { parent: Arc::clone(parent), name: name.to_owned(), path });
        Ok(())
    }

    /// Undo every step, newest first; the failures. The handles kept only for checks are
    /// closed first: on Windows an open handle in a directory keeps it from being moved back.
    fn roll_back(self) -> Vec<String> {
        let Journal { steps, relaxed, keep, .. } = self;
        drop((relaxed, keep));
        steps.into_iter().rev().filter_map(|step| undo(step).err()).collect()
    }
}

/// How an entry meets what is already at its places.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placing {
    /// A base: a file or link at an entry's own place is replaced, and so is a link or file on
    /// a parent path that its `path` line covers.
    Replacing,
    /// A layer of a stack (`grow`): it only adds. Any file, link or empty directory in its way
    /// fails the placement, and a directory it merges into keeps its mode (else it fails).
    OnlyAdding,
}

impl Staged {
    /// What of this entry the platform cannot keep as it was saved (on Windows: exec bits and
    /// links to directories), as one log line; `None` when nothing is lost.
    pub fn not_kept_here(&self) -> Option<String> {
        if cfg!(windows) { not_kept_on_windows(&self.entries) } else { None }
    }

    /// Move everything into place. On failure every completed step is undone, so the targets
    /// are exactly as they were, and the error is returned. Should undoing fail too, the
    /// staging directory (holding the previous files) is kept and the error names it.
    pub fn commit(self) -> Result<RestoreStats, UnpackError> {
        self.place(Placing::Replacing)
    }

    /// [`Staged::commit`] for a layer of a stack: nothing already there is replaced, and no
    /// directory already there changes its mode; anything in the way fails (and undoes) it.
    pub fn commit_layer(self) -> Result<RestoreStats, UnpackError> {
        self.place(Placing::OnlyAdding)
    }

    fn place(mut self, placing: Placing) -> Result<RestoreStats, UnpackError> {
        let mut journal = Journal::default();
        // Until placement has finished or been undone, staging holds what it replaced: a panic
        // half way must not delete that.
        self.keep_staging = true;
        match self.place_all(&mut journal, placing) {
            Ok(()) => {
                self.keep_staging = false;
                Ok(self.stats)
            }
            Err(cause) => {
                let failures = journal.roll_back();
                if failures.is_empty() {
                    self.keep_staging = false;
                    return Err(cause);
                }
                let kept = self
                    .stages
                    .iter()
                    .flatten()
                    .map(|s| format!("`{}`", s.path().display()))
                    .collect::<Vec<_>>()
                    .join(", ");
                Err(UnpackError::RollbackFailed { cause: Box::new(cause), kept, failures: failures.join("; ") })
            }
        }
    }

    fn place_all(&mut self, journal: &mut Journal, placing: Placing) -> Result<(), UnpackError> {
        let Staged { sites, stages, entries, .. } = self;
        let mut dests: Vec<Option<Tree>> = sites.iter().map(|_| None).collect();
        let mut dir_modes: Vec<(usize, &str, u32)> = Vec::new();
        // Directories of the entry that were already there (merged into), by root.
        let mut merged: HashSet<(usize, &str)> = HashSet::new();
        for (i, site) in sites.iter().enumerate() {
            let Some(stage) = stages[i].as_mut() else { continue };
            // Directories moved into place whole: what lies beneath them is in place already,
            // in whatever order the archive lists it.
            let mut moved: HashSet<&str> = HashSet::new();
            for e in entries.iter().filter(|e| e.root == i) {
                if e.kind == EntryKind::Dir {
                    dir_modes.push((i, &e.rel, e.mode));
                }
                if !moved.is_empty() && ancestors(&e.rel).any(|a| moved.contains(a)) {
                    continue;
                }
                if e.duplicate_of.is_some() || e.in_place {
                    continue;
                }
                if e.rel.is_empty() && e.kind == EntryKind::Dir && site.missing.is_empty() {
                    // The root is an existing directory (perhaps through the user's own link):
                    // merge into the handle opened when the restore began.
                    dests[i].get_or_insert_with(|| Tree::new(Arc::clone(&site.anchor)));
                    merged.insert((i, &e.rel));
                    continue;
                }
                let dest_path = if e.rel.is_empty() { site.real.clone() } else { site.real.join(&e.rel) };
                let (parent, name) = if e.rel.is_empty() {
                    root_parent(site, journal)?
                } else {
                    let tree = dest_tree(&mut dests[i], site, stage, journal, placing)?;
                    let (parent_rel, name) = beneath::split_last(&e.rel);
                    let stage_dir = Arc::clone(stage.tree.base());
                    let parent = tree
                        .dir_with(parent_rel, &mut |p, rel, found| {
                            let name = beneath::split_last(rel).1;
                            make_dir_room(p, name, site, rel, found, &stage_dir, journal, placing)
                                .map_err(io::Error::other)
                        })
                        .map_err(|source| UnpackError::Io { path: site.real.join(parent_rel), source })?;
                    (parent, name.to_owned())
                };
                journal.relax(&parent, dest_path.parent().unwrap_or(&dest_path))?;
                match beneath::kind_of(&parent, &name).map_err(UnpackError::io(&dest_path))? {
                    Some(Kind::Dir) if e.kind == EntryKind::Dir => {
                        if e.rel.is_empty() {
                            // Made by an earlier, overlapping root.
                            let dir = beneath::open_child(&parent, &name).map_err(UnpackError::io(&dest_path))?;
                            dests[i] = Some(Tree::new(Arc::new(dir)));
                        }
                        merged.insert((i, &e.rel));
                        continue; // merge into it
                    }
                    Some(kind) => {
                        if placing == Placing::OnlyAdding {
                            return Err(UnpackError::InTheWay {
                                path: dest_path,
                                detail: format!(
                                    "a layer holds a {} here, and a layer never replaces what is already there",
                                    kind_name(e.kind)
                                ),
                            });
                        }
                        make_way(site, e, kind, &parent, &name, &dest_path)?;
                        if kind == Kind::Dir
                            && let Some(tree) = dests[i].as_mut()
                        {
                            tree.forget(&e.rel);
                        }
                        journal.backup(&parent, &name, stage.tree.base(), dest_path.clone())?;
                    }
                    None => {}
                }
                let staged = staged_rel(&e.rel);
                let (staged_parent_rel, staged_name) = beneath::split_last(&staged);
                let staged_parent = stage
                    .tree
                    .dir(staged_parent_rel)
                    .map_err(|source| UnpackError::Io { path: stage.path(), source })?;
                // Windows refuses to move a directory while a handle is open in it (cap-std
                // opens directories without `FILE_SHARE_DELETE`): close staging's own first.
                stage.tree.forget(&staged);
                staged_parent.rename(staged_name, &parent, &name).map_err(UnpackError::io(&dest_path))?;
                journal.steps.push(Undo::Placed {
                    parent,
                    name,
                    staged_parent,
                    staged_name: staged_name.to_owned(),
                    path: dest_path,
                });
                if e.kind == EntryKind::Dir {
                    moved.insert(&e.rel);
                }
            }
        }

        set_dir_modes(sites, stages, &mut dests, &dir_modes, (placing, &merged), journal)
    }
}

/// [`Staged::not_kept_here`] on Windows.
fn not_kept_on_windows(entries: &[StagedEntry]) -> Option<String> {
    let count = |kind: EntryKind, lost: fn(u32) -> bool| {
        entries.iter().filter(|e| e.kind == kind && e.duplicate_of.is_none() && lost(e.mode)).count()
    };
    let executables = count(EntryKind::File, |mode| mode & 0o111 != 0);
    let links = count(EntryKind::Symlink, |_| true);
    let mut lost = Vec::new();
    if executables > 0 {
        lost.push(format!("the exec bits of {executables} file(s) (Windows has none)"));
    }
    if links > 0 {
        lost.push(format!("{links} symlink(s) are made as file links (one to a directory does not work on Windows)"));
    }
    (!lost.is_empty()).then(|| format!("not as saved on Windows: {}", lost.join("; ")))
}

/// Whether what is at `dest_path` (of `kind`) may give way to entry `e`: never another root's
/// own location, and a directory only when it is empty — what is in a directory is never
/// removed by a restore.
fn make_way(
    site: &Site,
    e: &StagedEntry,
    kind: Kind,
    parent: &Dir,
    name: &str,
    dest_path: &Path,
) -> Result<(), UnpackError> {
    if let Some(line) = site.root_location_at(&e.rel) {
        return Err(UnpackError::InTheWay {
            path: dest_path.to_owned(),
            detail: format!("`path` line `{line}` is here, and a restore never replaces a root"),
        });
    }
    if kind == Kind::Dir {
        let empty = beneath::open_child(parent, name)
            .and_then(|d| d.entries().map(|mut it| it.next().is_none()))
            .map_err(UnpackError::io(dest_path))?;
        if !empty {
            return Err(UnpackError::InTheWay {
                path: dest_path.to_owned(),
                detail: format!("the entry holds a {}, and this directory is not empty", kind_name(e.kind)),
            });
        }
    }
    Ok(())
}

/// Directory modes last, once everything is in place (a read-only directory would block
/// placing into it), in reverse archive order: children before their parents. Directories that
/// were opened for writing and are not part of the entry get their own mode back. For a layer,
/// a directory of the entry that was already there (`merged`) must already have the entry's
/// mode: a layer never changes one.
fn set_dir_modes(
    sites: &[Site],
    stages: &mut [Option<Stage>],
    dests: &mut [Option<Tree>],
    dir_modes: &[(usize, &str, u32)],
    (placing, merged): (Placing, &HashSet<(usize, &str)>),
    journal: &mut Journal,
) -> Result<(), UnpackError> {
    // By device and inode: one directory may be reached through several handles.
    let mut entry_dirs: HashSet<(u64, u64)> = HashSet::new();
    for &(i, rel, mode) in dir_modes.iter().rev() {
        let site = &sites[i];
        let stage = stages[i].as_mut().expect("a root with entries is staged");
        let path = site.real.join(rel);
        let tree = dest_tree(&mut dests[i], site, stage, journal, placing)?;
        let dir = tree.dir(rel).map_err(UnpackError::io(&path))?;
        let id = beneath::identity(&dir).map_err(UnpackError::io(&path))?;
        entry_dirs.insert(id);
        let old = beneath::dir_mode(&dir).map_err(UnpackError::io(&path))?;
        if placing == Placing::OnlyAdding && merged.contains(&(i, rel)) {
            let was = journal.relaxed.iter().find(|r| r.id == id).map_or(old, |r| r.mode);
            if was != mode {
                return Err(UnpackError::InTheWay {
                    path,
                    detail: format!(
                        "a layer would change this directory's mode from {was:03o} to {mode:03o}, and a layer never \
                         changes what is already there"
                    ),
                });
            }
        }
        if old != mode {
            beneath::set_dir_mode(&dir, mode).map_err(UnpackError::io(&path))?;
            journal.steps.push(Undo::Mode { dir: Arc::clone(&dir), mode: old, path });
        }
    }
    for r in journal.relaxed.iter().rev() {
        if !entry_dirs.contains(&r.id) {
            beneath::set_dir_mode(&r.dir, r.mode).map_err(UnpackError::io(&r.path))?;
        }
    }
    Ok(())
}

/// The strict ancestors of `rel` within its root, nearest first, ending with the root (`""`).
fn ancestors(rel: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(rel);
    std::iter::from_fn(move || {
        let r = rest?;
        let parent = if r.is_empty() { None } else { Some(beneath::split_last(r).0) };
        rest = parent;
        parent
    })
}

/// The directory holding root `site`'s destination, and the destination's name there. Missing
/// directories above the destination are created, never through a link.
fn root_parent(site: &Site, journal: &mut Journal) -> Result<(Arc<Dir>, String), UnpackError> {
    if site.missing.is_empty() {
        let name = site.real.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        return Ok((super::unpack::above(site)?, name));
    }
    let (last, above) = site.missing.split_last().expect("not empty");
    let mut dir = Arc::clone(&site.anchor);
    let mut path = site.anchor_path().to_owned();
    for name in above {
        path.push(name);
        match beneath::kind_of(&dir, name) {
            Ok(Some(Kind::Dir)) => {}
            Ok(None) => {
                journal.relax(&dir, path.parent().unwrap_or(&path))?;
                journal.create_dir(&dir, name, path.clone())?;
            }
            Ok(Some(_)) => {
                let source = io::Error::new(io::ErrorKind::NotADirectory, "not a directory (above a `path` root)");
                return Err(UnpackError::Io { path, source });
            }
            Err(source) => return Err(UnpackError::Io { path, source }),
        }
        dir = Arc::new(beneath::open_child(&dir, name).map_err(UnpackError::io(&path))?);
    }
    Ok((dir, last.clone()))
}

/// Handles beneath root `site`'s directory, which is made when it does not exist yet (a root
/// without an entry of its own: a glob's base).
fn dest_tree<'t>(
    tree: &'t mut Option<Tree>,
    site: &Site,
    stage: &Stage,
    journal: &mut Journal,
    placing: Placing,
) -> Result<&'t mut Tree, UnpackError> {
    if tree.is_none() {
        let root = if site.missing.is_empty() {
            Arc::clone(&site.anchor)
        } else {
            let (parent, name) = root_parent(site, journal)?;
            let found = beneath::kind_of(&parent, &name).map_err(UnpackError::io(&site.real))?;
            if found != Some(Kind::Dir) {
                make_dir_room(&parent, &name, site, "", found, stage.tree.base(), journal, placing)?;
            }
            Arc::new(beneath::open_child(&parent, &name).map_err(UnpackError::io(&site.real))?)
        };
        *tree = Some(Tree::new(root));
    }
    Ok(tree.as_mut().expect("just set"))
}

/// Make the directory `rel` (named `name`) of root `site` exist in `parent`: keep what is there
/// (a link or a file) as a backup, then create it. Only a place the root's `path` line covers
/// is replaced; anything else in the way fails the restore.
#[allow(clippy::too_many_arguments)]
fn make_dir_room(
    parent: &Arc<Dir>,
    name: &str,
    site: &Site,
    rel: &str,
    found: Option<Kind>,
    stage: &Arc<Dir>,
    journal: &mut Journal,
    placing: Placing,
) -> Result<(), UnpackError> {
    let path = if rel.is_empty() { site.real.clone() } else { site.real.join(rel) };
    journal.relax(parent, path.parent().unwrap_or(&path))?;
    if let Some(kind) = found {
        if placing == Placing::OnlyAdding {
            return Err(UnpackError::InTheWay {
                path,
                detail: format!(
                    "a layer needs a directory here, and a layer never replaces the {} that is here",
                    if kind == Kind::Symlink { "symlink" } else { "file" }
                ),
            });
        }
        if let Some(line) = site.root_location_at(rel) {
            return Err(UnpackError::InTheWay {
                path,
                detail: format!("`path` line `{line}` is here or below, and a restore never replaces it"),
            });
        }
        if !site.covers(rel) {
            return Err(UnpackError::InTheWay {
                path,
                detail: format!(
                    "the entry needs a directory here, and this {} is not covered by `path` line `{}`",
                    if kind == Kind::Symlink { "symlink" } else { "file" },
                    site.pattern.line
                ),
            });
        }
        journal.backup(parent, name, stage, path.clone())?;
    }
    journal.create_dir(parent, name, path)
}

fn undo(step: Undo) -> Result<(), String> {
    let fail = |what: &str, path: &PathBuf, e: io::Error| Err(format!("could not {what} `{}`: {e}", path.display()));
    match step {
        Undo::Placed { parent, name, staged_parent, staged_name, path } => {
            if parent.rename(&name, &staged_parent, &staged_name).is_err()
                && let Err(e) = beneath::remove_tree(&parent, &name)
            {
                return fail("remove the restored", &path, e);
            }
            Ok(())
        }
        Undo::Backup { parent, name, holder, backup, path } => match holder.rename(&backup, &parent, &name) {
            Ok(()) => Ok(()),
            Err(e) => fail("put back the previous", &path, e),
        },
        Undo::CreatedDir { parent, name, path } => match parent.remove_dir(&name) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => fail("remove the created directory", &path, e),
            _ => Ok(()),
        },
        Undo::Mode { dir, mode, path } => match beneath::set_dir_mode(&dir, mode) {
            Ok(()) => Ok(()),
            Err(e) => fail("reset the mode of", &path, e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(rel: &str, kind: EntryKind, mode: u32) -> StagedEntry {
        let rel = rel.to_owned();
        StagedEntry {
            root: 0,
            rel,
            kind,
            mode,
            size: 0,
            sha256: None,
            target: None,
            duplicate_of: None,
            in_place: false,
        }
    }

    #[test]
    fn windows_reports_exec_bits_and_symlinks_it_cannot_keep() {
        let plain = [entry("d", EntryKind::Dir, 0o755), entry("d/f", EntryKind::File, 0o444)];
        assert_eq!(not_kept_on_windows(&plain), None);
        let lossy = [entry("run.sh", EntryKind::File, 0o755), entry("to-d", EntryKind::Symlink, 0o777)];
        let line = not_kept_on_windows(&lossy).unwrap();
        assert!(line.contains("exec bits of 1 file(s)") && line.contains("1 symlink(s)"), "{line}");
    }
}
