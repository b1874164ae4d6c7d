//! Finding a stack, as [`super::reach`] says: the newest base in one call, then the layers of its
//! generation in one round of lookups at once, through the store's [`Backend`].

use super::slot::{Slot, generation_of, generations_prefix};
use crate::backend::{Backend, BackendError, CacheEntry};
use crate::keys::{Key, Version};

#[derive(Debug)]
pub struct Bases {
    /// `(generation, entry)`: the newest base.
    pub newest: Option<(u32, CacheEntry)>,
    pub error: Option<BackendError>,
    /// A key the service offered instead of ours (a prefix match).
    pub offered: Option<Key>,
}

/// The newest base of `key`'s stack: one lookup ([`Backend::lookup_newest_or`]). Only a key of
/// this stack ([`generation_of`]) is ours; any other key a service offers is not.
pub fn find_bases(backend: &dyn Backend, key: &Key, base_version: &Version) -> Bases {
    let mut bases = Bases { newest: None, error: None, offered: None };
    match backend.lookup_newest_or(&generations_prefix(key), key, base_version) {
        Ok(Some(entry)) => match generation_of(key, &entry.key) {
            Some(generation) => bases.newest = Some((generation, entry)),
            None => bases.offered = Some(entry.key),
        },
        Ok(None) => {}
        Err(e) => bases.error = Some(e),
    }
    bases
}

#[derive(Debug, PartialEq, Eq)]
pub enum Gap {
    /// Layer `later` exists past the missing layer `missing`.
    Missing { missing: u32, later: u32 },
    /// The lookup of layer `layer` failed: the service's answer, in words.
    Trouble { layer: u32, cause: String },
}

/// The layers `1..=max_layers` of `generation` to apply, in order: those before the first one
/// that is not there; and why a later one is not applied. A layer is ours only under exactly
/// `key` (a service may offer another key).
pub fn find_layers(
    backend: &dyn Backend,
    key: &Key,
    base_version: &Version,
    generation: u32,
    max_layers: u32,
) -> (Vec<CacheEntry>, Option<Gap>) {
    let names: Vec<(Key, Version)> =
        (1..=max_layers).map(|n| Slot::new(generation, n).names(key, base_version)).collect();
    let ours = |found: &Option<CacheEntry>| found.as_ref().is_some_and(|entry| entry.key == *key);
    let mut found = Vec::new();
    let mut answers = lookup_all(backend, &names).into_iter().enumerate();
    for (i, answer) in answers.by_ref() {
        match answer {
            Ok(Some(entry)) if entry.key == *key => found.push(entry),
            Ok(_) => break,
            Err(e) => {
                let layer = i as u32 + 1;
                return (found, Some(Gap::Trouble { layer, cause: crate::text::error_chain(&e) }));
            }
        }
    }
    let past_gap = answers.find_map(|(i, answer)| answer.as_ref().is_ok_and(ours).then_some(i + 1));
    let gap = past_gap.map(|later| Gap::Missing { missing: found.len() as u32 + 1, later: later as u32 });
    (found, gap)
}

/// Each of `names` looked up exactly, at once (one thread each); the answers in the same order.
fn lookup_all(backend: &dyn Backend, names: &[(Key, Version)]) -> Vec<Result<Option<CacheEntry>, BackendError>> {
    match names {
        [(key, version)] => vec![backend.lookup(key, version)],
        _ => std::thread::scope(|scope| {
            let lookups: Vec<_> = names.iter().map(|(k, v)| scope.spawn(move || backend.lookup(k, v))).collect();
            lookups.into_iter().map(|l| l.join().expect("a lookup thread panicked")).collect()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{ErrorKind, Reservation};
    use std::collections::HashMap;
    use std::sync::Mutex;

    fn key() -> Key {
        Key::from(format!("p-{}", "a".repeat(64)))
    }

    fn base() -> Version {
        Version::from("b")
    }

    fn entry((key, version): (Key, Version)) -> CacheEntry {
        CacheEntry { key, version, size: None, location: String::new() }
    }

    /// The versions `slots` of `key()` are stored under, to compare with what was found.
    fn versions(slots: &[Slot]) -> Vec<Version> {
        slots.iter().map(|s| s.names(&key(), &base()).1).collect()
    }

    /// Slots present (by their names, with a creation order), and how many calls were made.
    struct Planted {
        present: HashMap<(Key, Version), u32>,
        failing: Option<Slot>,
        calls: Mutex<usize>,
    }

    impl Planted {
        /// `slots` in the order they were created.
        fn new(slots: &[Slot]) -> Planted {
            let present = slots.iter().enumerate().map(|(i, s)| (s.names(&key(), &base()), i as u32)).collect();
            Planted { present, failing: None, calls: Mutex::default() }
        }
    }

    impl Backend for Planted {
        fn describe(&self) -> String {
            "planted slots".into()
        }

        fn lookup(&self, key: &Key, version: &Version) -> Result<Option<CacheEntry>, BackendError> {
            *self.calls.lock().unwrap() += 1;
            let name = (key.clone(), version.clone());
            if self.failing.map(|s| s.names(&self::key(), &base())) == Some(name.clone()) {
                return Err(BackendError::new(ErrorKind::Transient, "down"));
            }
            Ok(self.present.contains_key(&name).then(|| entry(name)))
        }

        fn lookup_newest_or(
            &self,
            newest_of: &str,
            key: &Key,
            version: &Version,
        ) -> Result<Option<CacheEntry>, BackendError> {
            let newest = self
                .present
                .iter()
                .filter(|((k, v), _)| k.starts_with(newest_of) && v == version)
                .max_by_key(|(_, created)| **created);
            match newest {
                Some((name, _)) => {
                    *self.calls.lock().unwrap() += 1;
                    Ok(Some(entry(name.clone())))
                }
                None => self.lookup(key, version),
            }
        }

        fn open(&self, _: &CacheEntry) -> Result<Box<dyn std::io::Read + Send + '_>, BackendError> {
            unreachable!("finding opens nothing")
        }

        fn reserve(&self, _: &Key, _: &Version) -> Result<Reservation, BackendError> {
            unreachable!("finding saves nothing")
        }
    }

    #[test]
    fn the_newest_base_is_one_call_whatever_generations_exist_or_were_deleted() {
        let healthy = Planted::new(&[Slot::FIRST_BASE]);
        assert_eq!(find_bases(&healthy, &key(), &base()).newest.map(|(g, _)| g), Some(0));
        assert_eq!(*healthy.calls.lock().unwrap(), 1, "one call");
        // Generations 1 and 2 deleted or evicted: generation 3 is reached all the same.
        let gaps = Planted::new(&[Slot::FIRST_BASE, Slot::base(3)]);
        assert_eq!(find_bases(&gaps, &key(), &base()).newest.map(|(g, _)| g), Some(3));
        assert_eq!(*gaps.calls.lock().unwrap(), 1);
        let far = Planted::new(&[Slot::base(9_999)]);
        assert_eq!(find_bases(&far, &key(), &base()).newest.map(|(g, _)| g), Some(9_999));
        assert!(find_bases(&Planted::new(&[]), &key(), &base()).newest.is_none());
    }

    #[test]
    fn a_key_that_is_not_a_generation_of_ours_is_offered_not_taken() {
        for forged in ["", "0", "01", "1-x", "99999"] {
            let mut offering = Planted::new(&[]);
            offering.present.insert((Key::from(format!("{}.g{forged}", key())), base()), 0);
            let bases = find_bases(&offering, &key(), &base());
            assert!(bases.newest.is_none(), "{forged}");
            assert_eq!(bases.offered, Some(Key::from(format!("{}.g{forged}", key()))));
        }
    }

    #[test]
    fn layers_stop_at_the_first_gap_and_say_why() {
        let found =
            |(layers, gap): (Vec<CacheEntry>, Option<Gap>)| (layers.into_iter().map(|e| e.version).collect(), gap);
        let planted = Planted::new(&[Slot::new(1, 1), Slot::new(1, 2), Slot::new(1, 4), Slot::new(0, 3)]);
        let (layers, gap) = found(find_layers(&planted, &key(), &base(), 1, 5));
        assert_eq!(layers, versions(&[Slot::new(1, 1), Slot::new(1, 2)]));
        assert_eq!(gap, Some(Gap::Missing { missing: 3, later: 4 }));
        let mut failing = Planted::new(&[Slot::new(0, 1), Slot::new(0, 2)]);
        failing.failing = Some(Slot::new(0, 2));
        let (layers, gap) = found(find_layers(&failing, &key(), &base(), 0, 4));
        assert_eq!(layers, versions(&[Slot::new(0, 1)]));
        assert_eq!(gap, Some(Gap::Trouble { layer: 2, cause: "down".into() }));
        assert_eq!(found(find_layers(&Planted::new(&[]), &key(), &base(), 0, 4)), (vec![], None));
    }
}
