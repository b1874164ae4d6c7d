//! `grow`: a key's stack. The base and each layer are entries of the same key, each under its
//! own version ([`keys::slot_version`]), each with the same fingerprint and its own manifest.
//!
//! * **Finding** a stack costs rounds of exact lookups, each round at once: the bases of
//!   generations `0..8` (then `8..16` only if generation 7 exists, …; the newest that can be
//!   placed wins, a corrupt newer one falls back to the next), then layers
//!   `1..=grow-max-layers` of that generation (the run before the first missing one is
//!   applied). No listing, so it works with the runtime token alone and under act's server.
//! * **Growing**: after a warm restore, the post step saves the files the job added under `path`
//!   as the next layer — or, when the stack has `grow-max-layers` layers (or more than the
//!   restore looked for), when its layers outweigh `grow-max-share` of the base, or when a
//!   layer or a newer base could not be applied, a compacted base holding the stack and the new
//!   files, one generation above the highest that exists. Layers only add: they never delete,
//!   never change a file below them, and a restore refuses one that would.

use super::verify::{Kept, TreeChanges};
use crate::backend::{Backend, BackendError, CacheEntry};
use crate::config::Config;
use crate::keys::{self, GENERATION_ROUND, MAX_GENERATIONS};
use crate::manifest::{EntryKind, Manifest, ManifestEntry, StackSlot};
pub(super) use crate::outcome::slot_name;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

/// What the restore step keeps about the stack it applied, for the save step's growth.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct KeptStack {
    pub generation: u32,
    /// The highest generation whose base exists (above `generation` when a newer one could not
    /// be placed): a compaction goes one above it.
    #[serde(default)]
    pub highest: u32,
    /// Layers the restore looked for: a layer number above it may exist unseen.
    #[serde(default)]
    pub probed: u32,
    /// Layers applied on top of the base.
    pub layers: u32,
    /// Bytes of file content of the base, and of the layers together.
    pub base_bytes: u64,
    pub layer_bytes: u64,
    /// [`Manifest::digest`] of the last slot applied: the next layer's parent.
    pub top: String,
    /// A layer or a newer base that exists could not be applied: the next save compacts.
    pub stopped: bool,
    /// A layer could not be read for service trouble: this run does not grow the stack.
    #[serde(default)]
    pub trouble: bool,
}

/// The bases a restore found.
pub(super) struct Bases {
    /// `(generation, entry)`, newest first.
    pub found: Vec<(u32, CacheEntry)>,
    /// A lookup that failed (the first).
    pub error: Option<BackendError>,
    /// A key the service offered instead of ours (a prefix match).
    pub offered: Option<String>,
}

/// The bases of the stack: generation 0 alone without `grow`; with it, rounds of
/// [`GENERATION_ROUND`] lookups at once, another round only when a round's last one exists.
pub(super) fn find_bases(backend: &dyn Backend, config: &Config, key: &str) -> Bases {
    let mut bases = Bases { found: Vec::new(), error: None, offered: None };
    let round = if config.grow { GENERATION_ROUND } else { 1 };
    let base_version = config.version();
    let mut start = 0;
    while start < MAX_GENERATIONS {
        let generations: Vec<u32> = (start..(start + round).min(MAX_GENERATIONS)).collect();
        let versions: Vec<String> = generations.iter().map(|g| keys::slot_version(&base_version, *g, 0)).collect();
        let mut last_found = false;
        for (g, result) in generations.iter().zip(lookup_all(backend, key, &versions)) {
            last_found = false;
            match result {
                Ok(Some(entry)) if entry.key == key => {
                    bases.found.push((*g, entry));
                    last_found = true;
                }
                Ok(Some(other)) => {
                    bases.offered.get_or_insert(other.key);
                }
                Ok(None) => {}
                Err(e) => {
                    bases.error.get_or_insert(e);
                }
            }
        }
        if !(config.grow && last_found) {
            break;
        }
        start += round;
    }
    bases.found.reverse();
    bases
}

/// Why layers past the applied ones are not applied.
pub(super) enum Gap {
    /// A later layer exists past a missing one.
    Missing(String),
    /// A lookup failed.
    Trouble(String),
}

/// Look `versions` up at once (one thread each); results in the same order.
pub(super) fn lookup_all(
    backend: &dyn Backend,
    key: &str,
    versions: &[String],
) -> Vec<Result<Option<CacheEntry>, BackendError>> {
    if let [version] = versions {
        return vec![backend.lookup(key, version)];
    }
    std::thread::scope(|scope| {
        let lookups: Vec<_> = versions.iter().map(|v| scope.spawn(move || backend.lookup(key, v))).collect();
        lookups.into_iter().map(|l| l.join().expect("a lookup thread panicked")).collect()
    })
}

/// The layers of `generation` to apply, in order: those before the first one that is not
/// there; and why a later one is not applied, when one exists past a gap.
pub(super) fn find_layers(
    backend: &dyn Backend,
    config: &Config,
    key: &str,
    generation: u32,
) -> (Vec<CacheEntry>, Option<Gap>) {
    let base_version = config.version();
    let versions: Vec<String> =
        (1..=config.grow_max_layers).map(|n| keys::slot_version(&base_version, generation, n)).collect();
    let mut found = Vec::new();
    let mut results = lookup_all(backend, key, &versions).into_iter().enumerate();
    for (i, result) in results.by_ref() {
        match result {
            Ok(Some(entry)) if entry.key == key => found.push(entry),
            Ok(_) => break,
            Err(e) => {
                let why = format!("layer {} could not be looked up: {}", i + 1, crate::text::error_chain(&e));
                return (found, Some(Gap::Trouble(why)));
            }
        }
    }
    let past_gap = results.find_map(|(i, r)| matches!(r, Ok(Some(ref e)) if e.key == key).then_some(i + 1));
    let gap = past_gap.map(|later| {
        Gap::Missing(format!("layer {} is missing, so layer {later} and later are not applied", found.len() + 1))
    });
    (found, gap)
}

/// Whether `manifest`, found at slot `(generation, layer)`, belongs there: it says so, and a
/// layer names as its parent exactly what was applied below it.
pub(super) fn check_slot(manifest: &Manifest, generation: u32, layer: u32, parent: Option<&str>) -> Result<(), String> {
    if manifest.slot() != (generation, layer) {
        let (g, n) = manifest.slot();
        return Err(format!("the entry at slot {} says it is slot {}", slot_name(generation, layer), slot_name(g, n)));
    }
    let named = manifest.stack.as_ref().and_then(|s| s.parent.as_deref());
    if layer > 0 && named != parent {
        return Err(format!("layer {layer} was made on top of another base or layer than the one restored"));
    }
    Ok(())
}

/// A layer only adds: each of its entries lands where the stack below has nothing, or, for a
/// directory, on a directory of the same mode; none lies beneath a file or link of the stack.
/// (A content-addressed cache never changes a file; a layer that would is not ours to trust.)
pub(super) fn check_additions(layer: &Manifest, below: &Manifest) -> Result<(), String> {
    let below: HashMap<&str, &ManifestEntry> = below.entries.iter().map(|e| (e.path.as_str(), e)).collect();
    for entry in &layer.entries {
        match below.get(entry.path.as_str()) {
            None => {}
            Some(was) if was.kind == EntryKind::Dir && entry.kind == EntryKind::Dir && was.mode == entry.mode => {}
            Some(was) if was.kind == EntryKind::Dir && entry.kind == EntryKind::Dir => {
                return Err(format!(
                    "it would change the mode of `{}` from {:03o} to {:03o}, which is below it; layers only add files",
                    entry.path, was.mode, entry.mode
                ));
            }
            Some(was) => {
                return Err(format!(
                    "it would change `{}` (a {} below it) into a {}; layers only add files",
                    entry.path,
                    was.kind.as_str(),
                    entry.kind.as_str()
                ));
            }
        }
        let mut above = entry.path.as_str();
        while let Some((parent, _)) = above.rsplit_once('/') {
            if let Some(was) = below.get(parent).filter(|was| was.kind != EntryKind::Dir) {
                return Err(format!(
                    "it would put `{}` beneath `{parent}`, a {} below it; layers only add files",
                    entry.path,
                    was.kind.as_str()
                ));
            }
            above = parent;
        }
    }
    Ok(())
}

/// A layer's roots land where the base's did: a link the stack placed (`out/r -> inner`, with
/// `path` lines `out` and `out/r`) must not carry a layer's root elsewhere, where the manifest
/// check by entry path cannot see what lies below it.
pub(super) fn check_roots(config: &Config, layer: &[PathBuf], base: &[PathBuf]) -> Result<(), String> {
    for (i, (now, then)) in layer.iter().zip(base).enumerate() {
        if now != then {
            let line = config.paths.includes.get(i).map_or("?", |p| p.line.as_str());
            return Err(format!(
                "`path` line `{line}` now leads to `{}`, not to `{}` as when the base was placed (a link of the \
                 stack is on its way); layers only add files",
                now.display(),
                then.display()
            ));
        }
    }
    Ok(())
}

/// `upper` applied on top of `lower`: its entries replace those of the same path.
pub(super) fn merge(lower: &mut Manifest, upper: &Manifest) {
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

/// What the save step writes after a warm restore with `grow`.
pub(super) enum Growth {
    /// Nothing was added.
    Nothing,
    /// Not this run: why.
    Skip(String),
    /// The next layer: these entry paths (and the directories above them, which keep the
    /// modes `stack_dirs` gives the stack's directories).
    Layer { slot: StackSlot, paths: HashSet<String>, stack_dirs: HashMap<String, u32> },
    /// A base one generation above the highest that exists, holding what the stack held and
    /// what the job added (nothing that was there before the restore and not in the stack); why.
    Compact { slot: StackSlot, paths: HashSet<String>, why: String },
    /// Every generation is used up.
    Full,
}

pub(super) fn plan(config: &Config, kept: &Kept, changes: &TreeChanges) -> Growth {
    if changes.layer_paths.is_empty() {
        return Growth::Nothing;
    }
    let stack = kept.stack.clone().unwrap_or_default();
    if stack.trouble {
        return Growth::Skip("a layer could not be read in the restore step (service trouble)".to_owned());
    }
    let new_bytes: u64 = changes.layer_bytes;
    let layers = |n: u32| crate::units::count_of(n as usize, "layer");
    let why = if stack.stopped {
        Some("a layer or a newer base of the stack could not be applied".to_owned())
    } else if stack.layers >= config.grow_max_layers {
        Some(format!("the stack has {} (`grow-max-layers`)", layers(stack.layers)))
    } else if stack.layers >= stack.probed {
        Some(format!("the restore looked for {} only, so the next one may exist", layers(stack.probed)))
    } else if (stack.layer_bytes + new_bytes) as f64 > config.grow_max_share * stack.base_bytes as f64 {
        Some(format!(
            "its layers would hold {} against a base of {} (`grow-max-share` {:.0}%)",
            crate::units::bytes(stack.layer_bytes + new_bytes),
            crate::units::bytes(stack.base_bytes),
            config.grow_max_share * 100.0
        ))
    } else {
        None
    };
    let target = stack.highest.max(stack.generation) + 1;
    match why {
        Some(_) if target >= MAX_GENERATIONS => Growth::Full,
        Some(why) => {
            let mut paths: HashSet<String> =
                kept.manifest.entries.iter().filter(|e| e.kind != EntryKind::Dir).map(|e| e.path.clone()).collect();
            paths.extend(changes.layer_paths.iter().cloned());
            Growth::Compact { slot: StackSlot { generation: target, layer: 0, parent: None }, paths, why }
        }
        None => Growth::Layer {
            slot: StackSlot { generation: stack.generation, layer: stack.layers + 1, parent: Some(stack.top) },
            paths: changes.layer_paths.iter().cloned().collect(),
            stack_dirs: kept
                .manifest
                .entries
                .iter()
                .filter(|e| e.kind == EntryKind::Dir)
                .map(|e| (e.path.clone(), e.mode))
                .collect(),
        },
    }
}

/// The version of a slot of this configuration's stack.
pub(super) fn version_of(config: &Config, slot: &StackSlot) -> String {
    keys::slot_version(&config.version(), slot.generation, slot.layer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::MANIFEST_FORMAT;

    fn entry(path: &str, sha: &str) -> ManifestEntry {
        ManifestEntry {
            path: path.into(),
            kind: EntryKind::File,
            mode: 0o644,
            size: 1,
            sha256: Some(sha.into()),
            target: None,
        }
    }

    fn manifest(entries: Vec<ManifestEntry>, stack: Option<StackSlot>) -> Manifest {
        Manifest { exact_cache_manifest: MANIFEST_FORMAT, key: "k".into(), roots: vec![], entries, stack }
    }

    #[test]
    fn a_layer_replaces_and_adds_entries_in_order() {
        let mut base = manifest(vec![entry("0/a", "1"), entry("0/b", "2")], None);
        merge(&mut base, &manifest(vec![entry("0/b", "3"), entry("0/c", "4")], None));
        let got: Vec<(&str, &str)> =
            base.entries.iter().map(|e| (e.path.as_str(), e.sha256.as_deref().unwrap())).collect();
        assert_eq!(got, [("0/a", "1"), ("0/b", "3"), ("0/c", "4")]);
    }

    #[test]
    fn a_slot_must_say_where_it_belongs_and_name_its_parent() {
        let base = manifest(vec![entry("0/a", "1")], None);
        assert_eq!(check_slot(&base, 0, 0, None), Ok(()));
        assert!(check_slot(&base, 1, 0, None).unwrap_err().contains("says it is slot base"));
        let parent = base.digest();
        let layer = |p: Option<&str>| {
            manifest(vec![entry("0/b", "2")], Some(StackSlot { generation: 0, layer: 1, parent: p.map(str::to_owned) }))
        };
        assert_eq!(check_slot(&layer(Some(&parent)), 0, 1, Some(&parent)), Ok(()));
        assert!(check_slot(&layer(Some("other")), 0, 1, Some(&parent)).unwrap_err().contains("on top of another"));
        assert!(check_slot(&layer(None), 0, 1, Some(&parent)).is_err());
        assert!(
            check_slot(&layer(Some(&parent)), 0, 2, Some(&parent)).unwrap_err().contains("says it is slot layer 1")
        );
    }

    #[test]
    fn slot_names_read_well() {
        assert_eq!(slot_name(0, 0), "base");
        assert_eq!(slot_name(0, 3), "layer 3");
        assert_eq!(slot_name(2, 0), "generation 2 base");
    }
}
