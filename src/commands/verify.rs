//! `verify-reuse`: at save time after a warm restore, compare what is under `path` now with the
//! manifest of the restored entry, and name what was added, changed or removed. For a
//! TorchInductor cache, new files on a warm run mean torch compiled graphs the cache did not
//! hold — the restore did not save that work. With `grow`, files added and kept in the layer (or
//! compacted base) the post step saved are that work saved: reported, never a warning.

use crate::archive::{PackError, inventory};
use crate::config::Locate;
use crate::manifest::{EntryKind, Manifest, ManifestEntry};
use crate::paths::Locations;
use std::collections::HashMap;

/// What the restore step keeps for the save step: the restored manifest, and the files that
/// were under `path` before the restore (not "added" by the job).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Kept {
    pub manifest: Manifest,
    /// Their entry paths (`<root>/<rel>`), matched with what is there at save time; how they
    /// are shown (`~/…`) is for people only.
    #[serde(default)]
    pub preexisting: Vec<String>,
    /// The stack applied (`grow`).
    #[serde(default)]
    pub stack: Option<crate::stack::KeptStack>,
}

#[derive(Debug, Default)]
pub(super) struct TreeChanges {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
    /// Files that were under `path` before the restore and are not in the entry (kept, and
    /// reported by the restore step as `extra-files`): not changes, but counted.
    pub kept_extras: usize,
    /// Entry paths (`<root>/<rel>`) of the files and links added since the restore, and their
    /// bytes: what a layer holds (a layer never changes what is below it).
    pub layer_paths: Vec<String>,
    pub layer_bytes: u64,
    /// Files added beneath what was a file or link of the entry: reported, never in a layer.
    pub not_layered: usize,
}

impl TreeChanges {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }

    /// Whether `verify-reuse` has nothing to warn about: nothing changed, or files were only
    /// added and `grow` kept them all (`additions_kept`: the post step saved them).
    pub fn is_fine(&self, additions_kept: bool) -> bool {
        self.is_empty()
            || (additions_kept && self.changed.is_empty() && self.removed.is_empty() && self.not_layered == 0)
    }

    /// Every path, sorted (the `changed-files` output).
    pub fn paths(&self) -> Vec<String> {
        let mut all: Vec<String> = self.added.iter().chain(&self.changed).chain(&self.removed).cloned().collect();
        all.sort_unstable();
        all
    }
}

/// Compare what is under `path` now (`locate`'s roots, shown through `locations`) with what the
/// restore kept.
pub(super) fn compare(kept: &Kept, locate: &Locate, locations: &Locations) -> Result<TreeChanges, PackError> {
    let manifest = &kept.manifest;
    let preexisting: std::collections::HashSet<&str> = kept.preexisting.iter().map(String::as_str).collect();
    let inv = inventory(&locate.paths)?;
    let mut expected: HashMap<&str, &ManifestEntry> =
        manifest.entries.iter().filter(|e| e.kind != EntryKind::Dir).map(|e| (e.path.as_str(), e)).collect();
    // A file now beneath what was a file or link of the entry cannot go into a layer (a layer
    // never puts anything beneath what is below it); it is still reported as added.
    let not_dirs: std::collections::HashSet<&str> = expected.keys().copied().collect();
    let beneath_a_file = |path: &str| {
        let mut above = path;
        std::iter::from_fn(|| {
            let (parent, _) = above.rsplit_once('/')?;
            above = parent;
            Some(parent)
        })
        .any(|p| not_dirs.contains(p))
    };
    let mut changes = TreeChanges::default();
    for now in inv.entries.iter().filter(|e| e.kind != EntryKind::Dir) {
        let shown = locations.display(&now.abs);
        let path = now.entry_path().to_string();
        match expected.remove(path.as_str()) {
            None if preexisting.contains(path.as_str()) => changes.kept_extras += 1,
            None => {
                changes.added.push(shown);
                if beneath_a_file(&path) {
                    changes.not_layered += 1;
                } else {
                    changes.layer_paths.push(path);
                    changes.layer_bytes += now.size;
                }
            }
            Some(was) => {
                let differs = was.kind != now.kind
                    || was.mode != now.mode
                    || was.size != now.size
                    || was.target != now.target
                    || (now.kind == EntryKind::File
                        && crate::fingerprint::sha256_file(&now.abs)
                            .map_err(|source| PackError::Read { path: now.abs.clone(), source })?
                            != was.sha256.clone().unwrap_or_default());
                if differs {
                    changes.changed.push(shown);
                }
            }
        }
    }
    let bases: Vec<_> = locate.root_dirs();
    for gone in expected.into_values() {
        let shown = match gone.entry_path().and_then(|p| Some((bases.get(p.root)?, p.rel))) {
            Some((base, "")) => locations.display(base),
            Some((base, rel)) => locations.display(&base.join(rel)),
            None => gone.path.clone(),
        };
        changes.removed.push(shown);
    }
    changes.added.sort();
    changes.changed.sort();
    changes.removed.sort();
    Ok(changes)
}
