//! A slot of a stack and its version.
//!
//! Slot `(generation g, layer n)` of the stack whose generation-0 base has version `B` has the
//! version `B` itself for `(0, 0)` (so every entry saved before layers existed is a generation-0
//! base), else SHA-256 hex of `exact-cache-slot|<B>|generation=<g>|layer=<n>`. Keeping the key and
//! varying the version makes every slot an exact lookup, also on act's server, which
//! prefix-matches keys (a key `<key>.1` would be found by a lookup of `<key>`) but never versions.

use crate::ids::Version;
use crate::manifest::{Manifest, StackSlot};
use sha2::{Digest, Sha256};
use std::fmt;

/// Generations a stack may have: a compaction writes the generation above the highest one that
/// exists; a restore looks for bases [`GENERATION_ROUND`] generations at a time (one exact lookup
/// each, at once) and takes the newest.
pub const MAX_GENERATIONS: u32 = 64;
/// Bases looked up at once; the next round only when the last of a round exists.
pub const GENERATION_ROUND: u32 = 8;
/// The most layers a generation may have (`grow-max-layers` is at most this).
pub const MAX_LAYERS: u32 = 16;

/// A slot of a key's stack: the base of a generation (`layer` 0) or one of its layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot {
    pub generation: u32,
    pub layer: u32,
}

impl Slot {
    /// Generation 0's base: the entry a save without `grow` writes.
    pub const FIRST_BASE: Slot = Slot { generation: 0, layer: 0 };

    pub fn new(generation: u32, layer: u32) -> Slot {
        Slot { generation, layer }
    }

    /// The base of `generation`.
    pub fn base(generation: u32) -> Slot {
        Slot { generation, layer: 0 }
    }

    pub fn is_base(self) -> bool {
        self.layer == 0
    }

    /// Every slot the scheme allows: generations below [`MAX_GENERATIONS`], layers up to
    /// [`MAX_LAYERS`].
    pub fn all() -> impl Iterator<Item = Slot> {
        (0..MAX_GENERATIONS).flat_map(|generation| (0..=MAX_LAYERS).map(move |layer| Slot { generation, layer }))
    }

    /// This slot's version in the stack whose generation-0 base has `base_version`.
    pub fn version(self, base_version: &Version) -> Version {
        if self == Slot::FIRST_BASE {
            return base_version.clone();
        }
        let Slot { generation, layer } = self;
        let text = format!("exact-cache-slot|{base_version}|generation={generation}|layer={layer}");
        Version::from(hex::encode(Sha256::digest(text.as_bytes())))
    }

    /// The slot `manifest` says its entry sits in (a manifest that says nothing: generation 0's
    /// base).
    pub fn of(manifest: &Manifest) -> Slot {
        manifest.stack.as_ref().map_or(Slot::FIRST_BASE, Slot::from)
    }

    /// What the manifest of an entry in this slot records: nothing for generation 0's base (as
    /// before layers existed), else the slot and, for a layer, its `parent`.
    pub fn record(self, parent: Option<String>) -> Option<StackSlot> {
        (self != Slot::FIRST_BASE).then_some(StackSlot { generation: self.generation, layer: self.layer, parent })
    }
}

impl From<&StackSlot> for Slot {
    fn from(recorded: &StackSlot) -> Slot {
        Slot { generation: recorded.generation, layer: recorded.layer }
    }
}

/// `base`, `layer 2`, `generation 1 base`, `generation 1 layer 2`.
impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.generation != 0 {
            write!(f, "generation {} ", self.generation)?;
        }
        match self.layer {
            0 => f.write_str("base"),
            n => write!(f, "layer {n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "314da7e86131f015ee05801b3f50a8394d4fe75ca1e4bdeb9cf32df2d99c440a";

    #[test]
    fn slots_keep_the_base_version_and_are_told_apart() {
        assert_eq!(Slot::FIRST_BASE.version(&BASE.into()), BASE, "entries saved before layers are generation-0 bases");
        // printf 'exact-cache-slot|%s|generation=0|layer=1' "$base" | sha256sum
        assert_eq!(
            Slot::new(0, 1).version(&BASE.into()),
            "f66ca52452885bb538bc1a0334542669478523e275a7b64ced01616879ce3d48"
        );
        assert_ne!(Slot::base(1).version(&BASE.into()), Slot::new(0, 1).version(&BASE.into()));
    }

    #[test]
    fn slot_names_read_well() {
        assert_eq!(Slot::FIRST_BASE.to_string(), "base");
        assert_eq!(Slot::new(0, 3).to_string(), "layer 3");
        assert_eq!(Slot::base(2).to_string(), "generation 2 base");
        assert_eq!(Slot::new(1, 2).to_string(), "generation 1 layer 2");
    }

    #[test]
    fn a_manifest_records_every_slot_but_the_first_base() {
        assert_eq!(Slot::FIRST_BASE.record(None), None);
        let recorded = Slot::new(1, 2).record(Some("p".into())).unwrap();
        assert_eq!(recorded, StackSlot { generation: 1, layer: 2, parent: Some("p".into()) });
        assert_eq!(Slot::from(&recorded), Slot::new(1, 2));
        assert_eq!(Slot::all().count() as u32, MAX_GENERATIONS * (MAX_LAYERS + 1));
    }
}
