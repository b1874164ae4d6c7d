//! A slot of a stack and the names (key and version) its entry is stored under.
//!
//! In the stack of key `K` whose generation-0 base has version `V`:
//! * generation 0's base is `(K, V)`, as every entry saved before stacks existed;
//! * generation `g ≥ 1`'s base is `(K.g<g>, V)`, so that one lookup of the prefix `K.g` finds the
//!   newest base whatever generations exist. `K` ends in 64 hex digits, so only a prefix made to
//!   hold another key whole could start with `K.g`, and a lookup takes nothing but `K.g<g>`
//!   itself ([`generation_of`]). Every store keeps the mark as it is in names and URLs;
//! * layer `n ≥ 1` of generation `g` is `(K, SHA-256 hex of
//!   exact-cache-slot|<V>|generation=<g>|layer=<n>)`: the key stays, the version varies, so every
//!   layer is an exact lookup, also on act's server, which prefix-matches keys but never versions.

use crate::keys::{Key, Version};
use crate::manifest::{Manifest, StackSlot};
use sha2::{Digest, Sha256};
use std::fmt;

/// Generations a key may have: each replacement or compaction writes the generation above the
/// newest one. Reaching the newest costs the same whatever its number ([`super::reach`]).
pub const MAX_GENERATIONS: u32 = 10_000;
/// The most layers a generation may have (the bound of `grow-max-layers`).
pub const MAX_LAYERS: u32 = 16;
pub use crate::keys::GENERATION_MARK;

/// A slot of a key's stack: the base of a generation (`layer` 0) or one of its layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot {
    pub generation: u32,
    pub layer: u32,
}

pub fn generations_prefix(key: &Key) -> String {
    format!("{key}{GENERATION_MARK}")
}

/// Which generation's base key `found` is in `key`'s stack: 0 for `key` itself, `g` for
/// `<key>.g<g>` (`g` from 1 below [`MAX_GENERATIONS`], no leading zero); `None` for any other.
pub fn generation_of(key: &Key, found: &str) -> Option<u32> {
    if found == key.as_str() {
        return Some(0);
    }
    let digits = found.strip_prefix(key.as_str())?.strip_prefix(GENERATION_MARK)?;
    let well_formed = !digits.is_empty() && digits.len() <= 4 && digits.bytes().all(|b| b.is_ascii_digit());
    let generation: u32 = digits.parse().ok().filter(|_| well_formed && !digits.starts_with('0'))?;
    (generation < MAX_GENERATIONS).then_some(generation)
}

/// The key a base key of a later generation belongs to (`<key>.g<g>` → `<key>`), and the
/// generation; a key of generation 0 is its own.
pub fn split_generation(found: &Key) -> (Key, u32) {
    if let Some((key, _)) = found.rsplit_once(GENERATION_MARK) {
        let key = Key::from(key);
        if let Some(generation) = generation_of(&key, found) {
            return (key, generation);
        }
    }
    (found.clone(), 0)
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

    /// The base a save writes above every generation in `seen` (what the restore found and
    /// what the store answers now): the one place a new generation is numbered. `None` when
    /// every generation is used.
    pub fn next_base(seen: impl IntoIterator<Item = u32>) -> Option<Slot> {
        let next = seen.into_iter().max().map_or(1, |g| g + 1);
        (next < MAX_GENERATIONS).then_some(Slot::base(next))
    }

    pub fn names(self, key: &Key, base_version: &Version) -> (Key, Version) {
        match self {
            Slot { generation: 0, layer: 0 } => (key.clone(), base_version.clone()),
            Slot { generation, layer: 0 } => {
                (Key::from(format!("{}{generation}", generations_prefix(key))), base_version.clone())
            }
            Slot { generation, layer } => (key.clone(), layer_version(base_version, generation, layer)),
        }
    }

    /// A base's version is `base_version` itself: its key tells the generations apart.
    pub fn version(self, base_version: &Version) -> Version {
        match self.layer {
            0 => base_version.clone(),
            layer => layer_version(base_version, self.generation, layer),
        }
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

fn layer_version(base_version: &Version, generation: u32, layer: u32) -> Version {
    let text = format!("exact-cache-slot|{base_version}|generation={generation}|layer={layer}");
    Version::from(hex::encode(Sha256::digest(text.as_bytes())))
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

    fn key() -> Key {
        Key::from(format!("p-{}", "a".repeat(64)))
    }

    #[test]
    fn slots_keep_the_base_version_and_are_told_apart() {
        assert_eq!(Slot::FIRST_BASE.names(&key(), &BASE.into()), (key(), BASE.into()), "entries saved before layers");
        // printf 'exact-cache-slot|%s|generation=0|layer=1' "$base" | sha256sum
        assert_eq!(
            Slot::new(0, 1).version(&BASE.into()),
            "f66ca52452885bb538bc1a0334542669478523e275a7b64ced01616879ce3d48"
        );
        let (later, version) = Slot::base(12).names(&key(), &BASE.into());
        assert_eq!((later.as_str(), version.as_str()), (format!("{}.g12", key()).as_str(), BASE));
        assert_ne!(Slot::new(1, 1).version(&BASE.into()), Slot::new(0, 1).version(&BASE.into()));
    }

    #[test]
    fn only_well_formed_generation_keys_of_this_key_are_generations() {
        let k = key();
        assert_eq!(generation_of(&k, &k), Some(0));
        assert_eq!(generation_of(&k, &format!("{k}.g1")), Some(1));
        assert_eq!(generation_of(&k, &format!("{k}.g9999")), Some(9999));
        for not in [".g", ".g0", ".g01", ".g10000", ".g1x", ".g+1", ".g 1", "~h1", "x", "-1"] {
            assert_eq!(generation_of(&k, &format!("{k}{not}")), None, "{not}");
        }
        let other = Key::from(format!("p-{}", "b".repeat(64)));
        assert_eq!(generation_of(&k, &format!("{other}.g1")), None, "another fingerprint's");
        assert_eq!(split_generation(&Key::from(format!("{k}.g7"))), (k.clone(), 7));
        assert_eq!(split_generation(&k), (k.clone(), 0));
        let odd = Key::from(format!("{k}.g07"));
        assert_eq!(split_generation(&odd), (odd.clone(), 0), "not a generation: a key of its own");
        let longest = format!("{GENERATION_MARK}{}", MAX_GENERATIONS - 1);
        assert_eq!(longest.len(), crate::keys::GENERATION_ROOM, "a key leaves room for the longest mark");
    }

    #[test]
    fn the_next_base_is_above_every_generation_seen_until_they_are_used_up() {
        assert_eq!(Slot::next_base([]), Some(Slot::base(1)));
        assert_eq!(Slot::next_base([0, 5, 2]), Some(Slot::base(6)));
        assert_eq!(Slot::next_base([MAX_GENERATIONS - 2]), Some(Slot::base(MAX_GENERATIONS - 1)));
        assert_eq!(Slot::next_base([MAX_GENERATIONS - 1]), None);
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
    }
}
