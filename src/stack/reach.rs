//! The one rule for which entries of a key a restore uses. Restore, save, prune, list and explain
//! all ask it, so none of them can disagree about what is live.
//!
//! A restore of key `K` (base version `V`) asks the store once for the newest base
//! ([`super::find_bases`]): the newest entry whose key starts with `K.g`, else generation 0's
//! `(K, V)`. It uses that base or nothing, then the layers of its generation, in one round. So a
//! restore **reaches** one base, the newest, and its layers: deleting or evicting any other
//! generation changes nothing a restore does.
//!
//! "Newest" is the store's: the cache services answer the newest entry a prefix matches; the
//! stores that list pick the newest by creation time, the higher generation on a tie. A save
//! numbers a new generation above the newest it finds, so the highest generation is the newest
//! unless an entry was planted.

use super::slot::{MAX_LAYERS, Slot, split_generation};
use crate::keys::{Key, Version};
use std::collections::{HashMap, HashSet};

/// Where a listed entry sits: the stack (its key and generation-0 version) and the slot.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Placed {
    pub key: Key,
    pub base_version: Version,
    pub slot: Slot,
}

/// Generations whose layers are named from a `known` base version alone (their base may be gone).
const KNOWN_GENERATIONS: u32 = 64;

/// Which stack and slot each listed `(key, version)` is: a base of the stack of its version
/// unless it is a layer of a base the listing holds, or of the `known` base version (the `path`
/// lines'). A layer whose base is not listed reads as a base of its own version (no restore
/// reaches it; it is kept or deleted with its key).
pub fn classify(entries: &[(&Key, &Version)], known: Option<&Version>) -> Vec<Placed> {
    let bases: Vec<Placed> = entries
        .iter()
        .map(|(key, version)| {
            let (key, generation) = split_generation(key);
            Placed { key, base_version: (*version).clone(), slot: Slot::base(generation) }
        })
        .collect();
    // The layers every listed base can have, by (key, version): 16 digests per base.
    let mut layers: HashMap<(&Key, Version), Placed> = HashMap::new();
    let mut seen: HashSet<(&Key, &Version, u32)> = HashSet::new();
    for base in &bases {
        if !seen.insert((&base.key, &base.base_version, base.slot.generation)) {
            continue;
        }
        for n in 1..=MAX_LAYERS {
            let slot = Slot::new(base.slot.generation, n);
            let placed = Placed { slot, ..base.clone() };
            layers.insert((&base.key, slot.version(&base.base_version)), placed);
        }
    }
    // A layer's version does not depend on its key: one map for every key.
    let known_layers: HashMap<Version, Slot> = known
        .map(|v| {
            (0..KNOWN_GENERATIONS)
                .flat_map(|g| (1..=MAX_LAYERS).map(move |n| Slot::new(g, n)))
                .map(|slot| (slot.version(v), slot))
                .collect()
        })
        .unwrap_or_default();
    entries
        .iter()
        .zip(&bases)
        .map(|((key, version), base)| {
            if base.slot.generation != 0 {
                return base.clone();
            }
            if let Some(layer) = layers.get(&(*key, (*version).clone())) {
                return layer.clone();
            }
            match (known, known_layers.get(*version)) {
                (Some(known), Some(slot)) => Placed { key: base.key.clone(), base_version: known.clone(), slot: *slot },
                _ => base.clone(),
            }
        })
        .collect()
}

/// Which of one stack's entries (`slots`, each with its creation time) a restore reaches: the
/// highest later generation's base, and any created after it (a planted one, which a cache
/// service would answer), else generation 0's; and the layers of those generations.
pub fn reached(slots: &[(Slot, i64)]) -> Vec<bool> {
    let later: Vec<(u32, i64)> =
        slots.iter().filter(|(s, _)| s.is_base() && s.generation > 0).map(|(s, c)| (s.generation, *c)).collect();
    let live: HashSet<u32> = match later.iter().max_by_key(|(generation, _)| *generation) {
        None => HashSet::from([0]),
        Some(&(highest, highest_created)) => {
            let newest = later.iter().map(|(_, created)| *created).max().unwrap_or(highest_created);
            later
                .iter()
                .filter(|(generation, created)| {
                    *generation == highest || (newest > highest_created && *created == newest)
                })
                .map(|(generation, _)| *generation)
                .collect()
        }
    };
    slots.iter().map(|(s, _)| live.contains(&s.generation)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key::from(format!("p-{}", "a".repeat(64)))
    }

    #[test]
    fn a_listing_names_bases_by_key_and_layers_by_version() {
        let (k, v) = (key(), Version::from("v"));
        let names: Vec<(Key, Version)> =
            [Slot::FIRST_BASE, Slot::new(0, 2), Slot::base(3), Slot::new(3, 1), Slot::new(5, 1)]
                .iter()
                .map(|s| s.names(&k, &v))
                .chain([(k.clone(), Version::from("w"))])
                .collect();
        let refs: Vec<(&Key, &Version)> = names.iter().map(|(k, v)| (k, v)).collect();
        let placed = classify(&refs, None);
        let slots: Vec<Slot> = placed.iter().map(|p| p.slot).collect();
        // Generation 5 has no listed base: its layer reads as a base of a version of its own.
        assert_eq!(
            slots,
            [Slot::FIRST_BASE, Slot::new(0, 2), Slot::base(3), Slot::new(3, 1), Slot::FIRST_BASE, Slot::FIRST_BASE]
        );
        assert!(placed.iter().take(4).all(|p| p.key == k && p.base_version == v), "one stack");
        assert_eq!(placed[4].base_version, Slot::new(5, 1).version(&v));
        assert_eq!(placed[5].base_version, "w", "another stack of the same key");
        // With the `path` lines' version known, the lone layer is named all the same.
        assert_eq!(classify(&refs, Some(&v))[4].slot, Slot::new(5, 1));
    }

    #[test]
    fn a_restore_reaches_the_newest_base_and_its_layers_only() {
        let slots = [
            (Slot::FIRST_BASE, 10),
            (Slot::new(0, 1), 11),
            (Slot::base(1), 20),
            (Slot::new(1, 1), 21),
            (Slot::base(2), 30),
            (Slot::new(2, 1), 31),
        ];
        assert_eq!(reached(&slots), [false, false, false, false, true, true]);
        // Generation 0 re-saved after a later one: a restore still asks for the later one first.
        assert_eq!(reached(&[(Slot::base(2), 5), (Slot::FIRST_BASE, 9)]), [true, false]);
        // A lower generation created later (planted): a service would answer it; both are kept.
        let late = [(Slot::base(4), 50), (Slot::base(3), 60), (Slot::base(2), 40)];
        assert_eq!(reached(&late), [true, true, false]);
        // Created in the same second: the higher generation, as the stores that list pick it.
        assert_eq!(reached(&[(Slot::base(1), 5), (Slot::base(2), 5), (Slot::FIRST_BASE, 1)]), [false, true, false]);
        assert_eq!(reached(&[(Slot::FIRST_BASE, 1), (Slot::new(0, 3), 1)]), [true, true], "no later base");
    }
}
