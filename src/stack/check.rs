//! Checking each slot a restore applies, and merging a layer's manifest onto the stack's.

use super::slot::Slot;
use crate::manifest::{EntryKind, Manifest, ManifestEntry};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// Why a slot is not applied: it is not where it says, or a layer would do more than add.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error("the entry at slot {found_at} says it is slot {says}")]
    Misplaced { found_at: Slot, says: Slot },
    #[error("layer {layer} was made on top of another base or layer than the one restored")]
    OtherParent { layer: u32 },
    #[error(
        "it would change the mode of `{path}` from {was:03o} to {now:03o}, which is below it; layers only add files"
    )]
    Mode { path: String, was: u32, now: u32 },
    #[error("it would change `{path}` (a {} below it) into a {}; layers only add files", .was.as_str(), .now.as_str())]
    Kind { path: String, was: EntryKind, now: EntryKind },
    #[error("it would put `{path}` beneath `{parent}`, a {} below it; layers only add files", .was.as_str())]
    Beneath { path: String, parent: String, was: EntryKind },
    #[error(
        "`path` line `{line}` now leads to `{}`, not to `{}` as when the base was placed (a link of the stack is on \
         its way); layers only add files",
        .now.display(),
        .then.display()
    )]
    RootMoved { line: String, now: PathBuf, then: PathBuf },
}

/// Whether `manifest`, found at `slot`, belongs there: it says so, and a layer names as its
/// parent exactly what was applied below it.
pub fn check_slot(manifest: &Manifest, slot: Slot, parent: Option<&str>) -> Result<(), CheckError> {
    let says = Slot::of(manifest);
    if says != slot {
        return Err(CheckError::Misplaced { found_at: slot, says });
    }
    let named = manifest.stack.as_ref().and_then(|s| s.parent.as_deref());
    if !slot.is_base() && named != parent {
        return Err(CheckError::OtherParent { layer: slot.layer });
    }
    Ok(())
}

/// A layer only adds: each of its entries lands where the stack below has nothing, or, for a
/// directory, on a directory of the same mode; none lies beneath a file or link of the stack.
/// (A content-addressed cache never changes a file; a layer that would is not ours to trust.)
pub fn check_additions(layer: &Manifest, below: &Manifest) -> Result<(), CheckError> {
    let below: HashMap<&str, &ManifestEntry> = below.entries.iter().map(|e| (e.path.as_str(), e)).collect();
    for entry in &layer.entries {
        let path = || entry.path.clone();
        match below.get(entry.path.as_str()) {
            None => {}
            Some(was) if was.kind == EntryKind::Dir && entry.kind == EntryKind::Dir && was.mode == entry.mode => {}
            Some(was) if was.kind == EntryKind::Dir && entry.kind == EntryKind::Dir => {
                return Err(CheckError::Mode { path: path(), was: was.mode, now: entry.mode });
            }
            Some(was) => return Err(CheckError::Kind { path: path(), was: was.kind, now: entry.kind }),
        }
        let mut above = entry.path.as_str();
        while let Some((parent, _)) = above.rsplit_once('/') {
            if let Some(was) = below.get(parent).filter(|was| was.kind != EntryKind::Dir) {
                return Err(CheckError::Beneath { path: path(), parent: parent.to_owned(), was: was.kind });
            }
            above = parent;
        }
    }
    Ok(())
}

/// A layer's roots land where the base's did: a link the stack placed (`out/r -> inner`, with
/// `path` lines `out` and `out/r`) must not carry a layer's root elsewhere, where the manifest
/// check by entry path cannot see what lies below it.
pub fn check_roots(lines: &[&str], layer: &[PathBuf], base: &[PathBuf]) -> Result<(), CheckError> {
    for (i, (now, then)) in layer.iter().zip(base).enumerate() {
        if now != then {
            let line = lines.get(i).copied().unwrap_or("?").to_owned();
            return Err(CheckError::RootMoved { line, now: now.clone(), then: then.clone() });
        }
    }
    Ok(())
}

/// `upper` applied on top of `lower`: its entries replace those of the same path.
pub fn merge(lower: &mut Manifest, upper: &Manifest) {
    let mut by_path: BTreeMap<String, usize> =
        lower.entries.iter().enumerate().map(|(i, e)| (e.path.clone(), i)).collect();
    for entry in &upper.entries {
        match by_path.get(&entry.path) {
            Some(&i) => lower.entries[i] = entry.clone(),
            None => {
                by_path.insert(entry.path.clone(), lower.entries.len());
                lower.entries.push(entry.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{MANIFEST_FORMAT, StackSlot};

    fn entry(path: &str, kind: EntryKind, mode: u32) -> ManifestEntry {
        let sha256 = (kind == EntryKind::File).then(|| "1".to_owned());
        ManifestEntry { path: path.into(), kind, mode, size: 1, sha256, target: None }
    }

    fn file(path: &str, sha: &str) -> ManifestEntry {
        ManifestEntry { sha256: Some(sha.into()), ..entry(path, EntryKind::File, 0o644) }
    }

    fn manifest(entries: Vec<ManifestEntry>, stack: Option<StackSlot>) -> Manifest {
        Manifest {
            exact_cache_manifest: MANIFEST_FORMAT,
            key: "k".into(),
            roots: vec![],
            entries,
            stack,
            generation: None,
        }
    }

    #[test]
    fn a_layer_replaces_and_adds_entries_in_order() {
        let mut base = manifest(vec![file("0/a", "1"), file("0/b", "2")], None);
        merge(&mut base, &manifest(vec![file("0/b", "3"), file("0/c", "4")], None));
        let got: Vec<(&str, &str)> =
            base.entries.iter().map(|e| (e.path.as_str(), e.sha256.as_deref().unwrap())).collect();
        assert_eq!(got, [("0/a", "1"), ("0/b", "3"), ("0/c", "4")]);
    }

    #[test]
    fn a_slot_must_say_where_it_belongs_and_name_its_parent() {
        let base = manifest(vec![file("0/a", "1")], None);
        assert_eq!(check_slot(&base, Slot::FIRST_BASE, None), Ok(()));
        assert!(check_slot(&base, Slot::base(1), None).unwrap_err().to_string().contains("says it is slot base"));
        let parent = base.digest();
        let layer = |p: Option<&str>| manifest(vec![file("0/b", "2")], Slot::new(0, 1).record(p.map(str::to_owned)));
        assert_eq!(check_slot(&layer(Some(&parent)), Slot::new(0, 1), Some(&parent)), Ok(()));
        let other = check_slot(&layer(Some("other")), Slot::new(0, 1), Some(&parent)).unwrap_err();
        assert!(other.to_string().contains("on top of another"));
        assert!(check_slot(&layer(None), Slot::new(0, 1), Some(&parent)).is_err());
        let misplaced = check_slot(&layer(Some(&parent)), Slot::new(0, 2), Some(&parent)).unwrap_err();
        assert_eq!(misplaced.to_string(), "the entry at slot layer 2 says it is slot layer 1");
    }

    #[test]
    fn a_layer_only_adds() {
        let below = manifest(vec![entry("0", EntryKind::Dir, 0o755), file("0/a", "1")], None);
        let adds = manifest(vec![entry("0", EntryKind::Dir, 0o755), file("0/b", "2")], None);
        assert_eq!(check_additions(&adds, &below), Ok(()));
        let mode = manifest(vec![entry("0", EntryKind::Dir, 0o700)], None);
        assert_eq!(
            check_additions(&mode, &below).unwrap_err().to_string(),
            "it would change the mode of `0` from 755 to 700, which is below it; layers only add files"
        );
        let kind = manifest(vec![entry("0/a", EntryKind::Dir, 0o755)], None);
        assert_eq!(
            check_additions(&kind, &below).unwrap_err().to_string(),
            "it would change `0/a` (a file below it) into a dir; layers only add files"
        );
        let beneath = manifest(vec![file("0/a/x", "2")], None);
        assert_eq!(
            check_additions(&beneath, &below).unwrap_err().to_string(),
            "it would put `0/a/x` beneath `0/a`, a file below it; layers only add files"
        );
    }

    #[test]
    fn a_layer_root_lands_where_the_base_root_did() {
        let base = [PathBuf::from("/w/out"), PathBuf::from("/w/inner")];
        assert_eq!(check_roots(&["out", "out/r"], &base, &base), Ok(()));
        let moved = [PathBuf::from("/w/out"), PathBuf::from("/w/elsewhere")];
        assert_eq!(
            check_roots(&["out", "out/r"], &moved, &base).unwrap_err().to_string(),
            "`path` line `out/r` now leads to `/w/elsewhere`, not to `/w/inner` as when the base was placed (a link \
             of the stack is on its way); layers only add files"
        );
    }
}
