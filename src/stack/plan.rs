//! Planning what a save after a warm restore adds to the stack: the next layer, or a compaction
//! into a new base.

use super::slot::Slot;
use crate::manifest::{EntryKind, Manifest};
use std::collections::{HashMap, HashSet};

/// What the restore step keeps about the stack it applied, for the save step's growth.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KeptStack {
    pub generation: u32,
    /// The newest generation whose base the restore found (above `generation` when it could not
    /// be placed): a compaction goes above it (`Slot::next_base`).
    #[serde(default)]
    pub highest: u32,
    /// Layers the restore looked for: a layer number above it may exist unseen.
    #[serde(default)]
    pub probed: u32,
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

/// How far a stack grows before it is compacted; `max_share` is a fraction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    pub max_layers: u32,
    pub max_share: f64,
}

/// What the job added since the restore: entry paths (`<root>/<rel>`) of files and links, and
/// their bytes.
#[derive(Clone, Copy, Debug)]
pub struct Added<'a> {
    pub paths: &'a [String],
    pub bytes: u64,
}

/// What the save step writes after a warm restore with `grow`.
#[derive(Debug, PartialEq)]
pub enum Growth {
    /// Nothing was added.
    Nothing,
    /// Not this run: why.
    Skip(SkipWhy),
    /// The next layer, made on top of `parent` (the [`Manifest::digest`] of the slot below): these
    /// entry paths (and the directories above them, which keep the modes `stack_dirs` gives the
    /// stack's directories).
    Layer { slot: Slot, parent: String, paths: HashSet<String>, stack_dirs: HashMap<String, u32> },
    /// A new base (the save numbers it: [`Slot::next_base`]), holding what the stack held and
    /// what the job added (nothing that was there before the restore and not in the stack); why.
    Compact { paths: HashSet<String>, why: CompactWhy },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipWhy {
    /// A layer could not be read in the restore step (the service's trouble): the stack may be
    /// whole, so neither a layer nor a compaction.
    LayerUnread,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CompactWhy {
    /// A layer of the stack could not be applied.
    Stopped,
    /// The stack has `layers` layers, `grow-max-layers`.
    Full { layers: u32 },
    /// The restore looked for `probed` layers only, so the next one may exist.
    Unprobed { probed: u32 },
    /// The layers would hold more than `max_share` (a fraction) of the base's bytes.
    Heavy { layer_bytes: u64, base_bytes: u64, max_share: f64 },
}

/// What to save of `added` on top of the stack the restore applied.
pub fn plan(limits: Limits, stack: &KeptStack, manifest: &Manifest, added: Added) -> Growth {
    if added.paths.is_empty() {
        return Growth::Nothing;
    }
    if stack.trouble {
        return Growth::Skip(SkipWhy::LayerUnread);
    }
    match compaction(limits, stack, added.bytes) {
        Some(why) => {
            let mut paths: HashSet<String> =
                manifest.entries.iter().filter(|e| e.kind != EntryKind::Dir).map(|e| e.path.clone()).collect();
            paths.extend(added.paths.iter().cloned());
            Growth::Compact { paths, why }
        }
        None => Growth::Layer {
            slot: Slot::new(stack.generation, stack.layers + 1),
            parent: stack.top.clone(),
            paths: added.paths.iter().cloned().collect(),
            stack_dirs: manifest
                .entries
                .iter()
                .filter(|e| e.kind == EntryKind::Dir)
                .map(|e| (e.path.clone(), e.mode))
                .collect(),
        },
    }
}

/// Why the stack is compacted rather than given another layer of `new_bytes`, if it is.
fn compaction(limits: Limits, stack: &KeptStack, new_bytes: u64) -> Option<CompactWhy> {
    if stack.stopped {
        Some(CompactWhy::Stopped)
    } else if stack.layers >= limits.max_layers {
        Some(CompactWhy::Full { layers: stack.layers })
    } else if stack.layers >= stack.probed {
        Some(CompactWhy::Unprobed { probed: stack.probed })
    } else if (stack.layer_bytes + new_bytes) as f64 > limits.max_share * stack.base_bytes as f64 {
        let (layer_bytes, base_bytes) = (stack.layer_bytes + new_bytes, stack.base_bytes);
        Some(CompactWhy::Heavy { layer_bytes, base_bytes, max_share: limits.max_share })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{MANIFEST_FORMAT, ManifestEntry};

    const LIMITS: Limits = Limits { max_layers: 4, max_share: 0.5 };

    fn stack() -> KeptStack {
        KeptStack {
            generation: 1,
            highest: 2,
            probed: 4,
            layers: 1,
            base_bytes: 1000,
            layer_bytes: 100,
            top: "t".into(),
            ..KeptStack::default()
        }
    }

    fn manifest() -> Manifest {
        let dir =
            ManifestEntry { path: "0".into(), kind: EntryKind::Dir, mode: 0o700, size: 0, sha256: None, target: None };
        let file = ManifestEntry {
            path: "0/a".into(),
            kind: EntryKind::File,
            mode: 0o644,
            size: 1,
            sha256: Some("1".into()),
            target: None,
        };
        Manifest {
            exact_cache_manifest: MANIFEST_FORMAT,
            key: "k".into(),
            roots: vec![],
            entries: vec![dir, file],
            stack: None,
            generation: None,
        }
    }

    fn plan_adding(stack: &KeptStack, bytes: u64) -> Growth {
        plan(LIMITS, stack, &manifest(), Added { paths: &["0/b".to_owned()], bytes })
    }

    #[test]
    fn what_was_added_goes_into_the_next_layer_on_top_of_the_last() {
        let Growth::Layer { slot, parent, paths, stack_dirs } = plan_adding(&stack(), 10) else { panic!() };
        assert_eq!((slot, parent.as_str()), (Slot::new(1, 2), "t"));
        assert_eq!(paths, HashSet::from(["0/b".to_owned()]));
        assert_eq!(stack_dirs, HashMap::from([("0".to_owned(), 0o700)]));
        assert_eq!(plan(LIMITS, &stack(), &manifest(), Added { paths: &[], bytes: 0 }), Growth::Nothing);
        let trouble = KeptStack { trouble: true, ..stack() };
        assert_eq!(plan_adding(&trouble, 10), Growth::Skip(SkipWhy::LayerUnread));
    }

    #[test]
    fn a_stack_compacts_when_it_is_full_heavy_or_stopped() {
        let compacted = |stack: KeptStack, bytes: u64| match plan_adding(&stack, bytes) {
            Growth::Compact { paths, why } => {
                assert_eq!(paths, HashSet::from(["0/a".to_owned(), "0/b".to_owned()]), "the stack and what was added");
                why
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(compacted(KeptStack { layers: 4, ..stack() }, 10), CompactWhy::Full { layers: 4 });
        assert_eq!(compacted(KeptStack { probed: 1, ..stack() }, 10), CompactWhy::Unprobed { probed: 1 });
        let heavy = CompactWhy::Heavy { layer_bytes: 501, base_bytes: 1000, max_share: 0.5 };
        assert_eq!(compacted(stack(), 401), heavy);
        assert!(matches!(plan_adding(&stack(), 400), Growth::Layer { .. }), "at the limit, a layer");
        assert_eq!(compacted(KeptStack { stopped: true, ..stack() }, 10), CompactWhy::Stopped);
    }
}
