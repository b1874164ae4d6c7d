//! From a version back to its slot: the map of every slot the scheme allows for one base version,
//! built once per base version and shared, so naming the slots of a listing is one look-up per
//! entry instead of a search through the recipe.

use super::slot::Slot;
use crate::ids::Version;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The maps of the base versions used last. A process works with one base version (its `path`
/// lines and compression); a few more cost nothing and keep a test run from rebuilding.
const KEPT: usize = 4;

static MAPS: Mutex<Vec<Arc<SlotMap>>> = Mutex::new(Vec::new());

/// Every slot of the stack of one base version, by its version.
#[derive(Debug)]
pub struct SlotMap {
    base_version: Version,
    slots: HashMap<Version, Slot>,
}

impl SlotMap {
    /// The map of `base_version`'s stack: built on first use, shared after.
    pub fn of(base_version: &Version) -> Arc<SlotMap> {
        let mut maps = MAPS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(map) = maps.iter().find(|m| m.base_version == *base_version) {
            return Arc::clone(map);
        }
        let map = Arc::new(SlotMap::build(base_version));
        if maps.len() == KEPT {
            maps.remove(0);
        }
        maps.push(Arc::clone(&map));
        map
    }

    fn build(base_version: &Version) -> SlotMap {
        let slots = Slot::all().map(|slot| (slot.version(base_version), slot)).collect();
        SlotMap { base_version: base_version.clone(), slots }
    }

    /// Which slot an entry of `version` is, if it is one of this stack's.
    pub fn slot(&self, version: &Version) -> Option<Slot> {
        self.slots.get(version).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slot_round_trips_through_its_version() {
        let base = Version::from("a".repeat(64));
        let map = SlotMap::of(&base);
        for slot in Slot::all() {
            assert_eq!(map.slot(&slot.version(&base)), Some(slot), "{slot}");
        }
        assert_eq!(map.slot(&base), Some(Slot::FIRST_BASE));
        assert_eq!(map.slots.len(), Slot::all().count(), "no two slots share a version");
    }

    #[test]
    fn versions_of_other_stacks_are_no_slot() {
        let map = SlotMap::of(&"b".repeat(64).into());
        assert_eq!(map.slot(&"c".repeat(64).into()), None);
        assert_eq!(map.slot(&Slot::new(0, 1).version(&"c".repeat(64).into())), None, "a slot of another base version");
        assert_eq!(map.slot(&"".into()), None);
        assert_eq!(map.slot(&Slot::new(crate::stack::MAX_GENERATIONS, 0).version(&"b".repeat(64).into())), None);
    }

    #[test]
    fn a_map_is_built_once_per_base_version() {
        let base = Version::from("d".repeat(64));
        let first = SlotMap::of(&base);
        assert!(Arc::ptr_eq(&first, &SlotMap::of(&base)), "the same map, not a second build");
        let other = SlotMap::of(&"e".repeat(64).into());
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(other.base_version, *"e".repeat(64));
    }
}
