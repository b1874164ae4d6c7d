//! Where a restore's entries land, across all `path` roots at once.
//!
//! Roots may overlap: `out` and `out/r`, or two globs based at the workspace (`**/*.pth` and
//! `**/*.pt2`). Each entry claims its real destination (the root's location with symlinks
//! resolved when the restore began, then the entry's name), and a claim is refused when it lies
//! beneath another entry that is not a directory (a link of one root cannot carry another
//! root's entries somewhere else), when something already lies beneath a non-directory claim,
//! or when two entries for one place disagree on what it is. Identical entries of two roots
//! (a file saved through both `out` and `out/r`) are allowed and placed once.
//!
//! This is the first line, judged on names; placement through directory handles that never
//! follow links ([`super::beneath`]) is what makes escaping impossible.

use crate::manifest::EntryKind;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// One claimed destination.
#[derive(Clone, Debug)]
struct Claim {
    kind: EntryKind,
    /// The entry's archive name (`0/sub/x`), or the root's location for an implicit claim.
    name: String,
    root: usize,
    /// Index of the staged entry; `None` for a root's own directory implied by its entries.
    index: Option<usize>,
}

/// The outcome of a claim that was granted.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Granted {
    New,
    /// A place an earlier entry of another root claims the same way: entry `index` (compare
    /// content once it is known) or a directory.
    Same {
        index: Option<usize>,
    },
}

#[derive(Default)]
pub(super) struct Claims {
    at: HashMap<PathBuf, Claim>,
    /// Every strict ancestor of a claimed place.
    parents: HashSet<PathBuf>,
}

impl Claims {
    /// Claim `dest` for entry `index` (named `name`) of `root`.
    pub fn claim(
        &mut self,
        dest: &Path,
        kind: EntryKind,
        name: &str,
        root: usize,
        index: Option<usize>,
    ) -> Result<Granted, String> {
        // Ancestors first: nothing may lie beneath a file or link of any root.
        for ancestor in dest.ancestors().skip(1) {
            if let Some(c) = self.at.get(ancestor)
                && c.kind != EntryKind::Dir
            {
                return Err(format!("lies beneath `{}`, which is not a directory", c.name));
            }
            if !self.parents.insert(ancestor.to_owned()) {
                // Its own ancestors were checked when it was first recorded.
                break;
            }
        }
        if kind != EntryKind::Dir && self.parents.contains(dest) {
            return Err(format!("is a {}, but other entries lie beneath it", kind_name(kind)));
        }
        match self.at.get(dest) {
            None => {
                self.at.insert(dest.to_owned(), Claim { kind, name: name.to_owned(), root, index });
                Ok(Granted::New)
            }
            Some(c) if c.root == root && c.index.is_some() && index.is_some() => Err("duplicate entry".into()),
            Some(c) if c.kind != kind => Err(format!(
                "is a {} here, but `{}` puts a {} at the same place",
                kind_name(kind),
                c.name,
                kind_name(c.kind)
            )),
            Some(c) => Ok(Granted::Same { index: c.index }),
        }
    }
}

pub(super) fn kind_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::Dir => "directory",
        EntryKind::File => "file",
        EntryKind::Symlink => "symlink",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn overlapping_roots_cannot_chain_links() {
        let mut c = Claims::default();
        c.claim(&p("/ws/out"), EntryKind::Dir, "0", 0, Some(0)).unwrap();
        c.claim(&p("/ws/out/r"), EntryKind::Dir, "0/r", 0, Some(1)).unwrap();
        c.claim(&p("/ws/out/r/a"), EntryKind::Symlink, "0/r/a", 0, Some(2)).unwrap();
        // Root 1 is `out/r`: its `a/a/a/l` lies beneath root 0's link `r/a`.
        let err = c.claim(&p("/ws/out/r/a/a/a/l"), EntryKind::Symlink, "1/a/a/a/l", 1, Some(3)).unwrap_err();
        assert!(err.contains("lies beneath `0/r/a`"), "{err}");
    }

    #[test]
    fn a_link_cannot_be_claimed_above_existing_entries() {
        let mut c = Claims::default();
        c.claim(&p("/ws/a.pth/x.pt2"), EntryKind::File, "1/a.pth/x.pt2", 1, Some(0)).unwrap();
        let err = c.claim(&p("/ws/a.pth"), EntryKind::Symlink, "0/a.pth", 0, Some(1)).unwrap_err();
        assert!(err.contains("other entries lie beneath it"), "{err}");
    }

    #[test]
    fn identical_places_of_two_roots_are_the_same_claim_and_conflicts_are_refused() {
        let mut c = Claims::default();
        assert_eq!(c.claim(&p("/ws/out/r/x"), EntryKind::File, "0/r/x", 0, Some(0)), Ok(Granted::New));
        assert_eq!(
            c.claim(&p("/ws/out/r/x"), EntryKind::File, "1/x", 1, Some(5)),
            Ok(Granted::Same { index: Some(0) })
        );
        assert!(c.claim(&p("/ws/out/r/x"), EntryKind::Symlink, "2/x", 2, Some(6)).is_err());
        assert_eq!(c.claim(&p("/ws/out/r/x"), EntryKind::File, "0/r/x", 0, Some(7)), Err("duplicate entry".into()));
    }
}
