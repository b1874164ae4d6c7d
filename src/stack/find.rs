//! Finding a stack, as [`super::reach`] says: the newest base in one call, then the layers of its
//! generation in one round — all through [`SlotLookup`] (the caller does the lookups).

use super::slot::{Slot, generation_of, generations_prefix};
use crate::keys::{Key, Version};

/// What one lookup answered.
#[derive(Debug)]
pub enum Answer<Entry> {
    /// An entry of the stack: the key it was found under, and the entry.
    Ours(Key, Entry),
    /// An entry of another key (a service that prefix-matches keys offered it).
    Offered(Key),
    Absent,
}

/// The lookups of one key's stack: the caller's I/O.
pub trait SlotLookup {
    type Entry;
    type Error;

    /// The newest entry of `version` whose key starts with `newest_of` (a later generation's
    /// base), else the entry of exactly `key`: one call where the store can.
    fn newest_or(&self, newest_of: &str, key: &Key, version: &Version) -> Result<Answer<Self::Entry>, Self::Error>;

    /// Look up each of `names` exactly (at once, as the caller sees fit); the answers in the
    /// same order.
    fn lookup_all(&self, names: &[(Key, Version)]) -> Vec<Result<Answer<Self::Entry>, Self::Error>>;

    /// A failed lookup, with its causes, for one log line.
    fn describe(&self, error: &Self::Error) -> String;
}

/// The base a restore tries first.
#[derive(Debug)]
pub struct Bases<Entry, Error> {
    /// `(generation, entry)`: the newest base.
    pub newest: Option<(u32, Entry)>,
    /// The lookup failed.
    pub error: Option<Error>,
    /// A key the service offered instead of ours (a prefix match).
    pub offered: Option<Key>,
}

/// The newest base of `key`'s stack: one lookup ([`SlotLookup::newest_or`]). Only a key of this
/// stack ([`generation_of`]) is ours; any other key a service offers is not.
pub fn find_bases<L: SlotLookup>(lookup: &L, key: &Key, base_version: &Version) -> Bases<L::Entry, L::Error> {
    let mut bases = Bases { newest: None, error: None, offered: None };
    match lookup.newest_or(&generations_prefix(key), key, base_version) {
        Ok(Answer::Ours(found, entry)) => match generation_of(key, &found) {
            Some(generation) => bases.newest = Some((generation, entry)),
            None => bases.offered = Some(found),
        },
        Ok(Answer::Offered(other)) => bases.offered = Some(other),
        Ok(Answer::Absent) => {}
        Err(e) => bases.error = Some(e),
    }
    bases
}

/// Why layers past the applied ones are not applied.
#[derive(Debug, PartialEq, Eq)]
pub enum Gap {
    /// Layer `later` exists past the missing layer `missing`.
    Missing { missing: u32, later: u32 },
    /// The lookup of layer `layer` failed: the service's answer, in words.
    Trouble { layer: u32, cause: String },
}

/// The layers `1..=max_layers` of `generation` to apply, in order: those before the first one
/// that is not there; and why a later one is not applied, when one exists past a gap.
pub fn find_layers<L: SlotLookup>(
    lookup: &L,
    key: &Key,
    base_version: &Version,
    generation: u32,
    max_layers: u32,
) -> (Vec<L::Entry>, Option<Gap>) {
    let names: Vec<(Key, Version)> =
        (1..=max_layers).map(|n| Slot::new(generation, n).names(key, base_version)).collect();
    let mut found = Vec::new();
    let ours = |answer: &Answer<L::Entry>| matches!(answer, Answer::Ours(k, _) if k == key);
    let mut answers = lookup.lookup_all(&names).into_iter().enumerate();
    for (i, answer) in answers.by_ref() {
        match answer {
            Ok(Answer::Ours(k, entry)) if k == *key => found.push(entry),
            Ok(_) => break,
            Err(e) => {
                let layer = i as u32 + 1;
                return (found, Some(Gap::Trouble { layer, cause: lookup.describe(&e) }));
            }
        }
    }
    let past_gap = answers.find_map(|(i, answer)| answer.as_ref().is_ok_and(ours).then_some(i + 1));
    let gap = past_gap.map(|later| Gap::Missing { missing: found.len() as u32 + 1, later: later as u32 });
    (found, gap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    fn key() -> Key {
        Key::from(format!("p-{}", "a".repeat(64)))
    }

    fn base() -> Version {
        Version::from("b")
    }

    /// Slots present (by their names, with a creation order), and every call made.
    struct Planted {
        present: HashMap<(Key, Version), (Slot, u32)>,
        failing: Option<Slot>,
        calls: RefCell<Vec<usize>>,
    }

    impl Planted {
        /// `slots` in the order they were created.
        fn new(slots: &[Slot]) -> Planted {
            let present = slots.iter().enumerate().map(|(i, s)| (s.names(&key(), &base()), (*s, i as u32))).collect();
            Planted { present, failing: None, calls: RefCell::default() }
        }

        fn answer(&self, name: &(Key, Version)) -> Result<Answer<Slot>, String> {
            match self.present.get(name) {
                _ if self.failing.map(|s| s.names(&key(), &base())).as_ref() == Some(name) => Err("down".to_owned()),
                Some((slot, _)) => Ok(Answer::Ours(name.0.clone(), *slot)),
                None => Ok(Answer::Absent),
            }
        }
    }

    impl SlotLookup for Planted {
        type Entry = Slot;
        type Error = String;

        fn newest_or(&self, newest_of: &str, key: &Key, version: &Version) -> Result<Answer<Slot>, String> {
            self.calls.borrow_mut().push(1);
            let newest = self
                .present
                .iter()
                .filter(|((k, v), _)| k.starts_with(newest_of) && v == version)
                .max_by_key(|(_, (_, created))| *created);
            match newest {
                Some(((k, _), (slot, _))) => Ok(Answer::Ours(k.clone(), *slot)),
                None => self.answer(&(key.clone(), version.clone())),
            }
        }

        fn lookup_all(&self, names: &[(Key, Version)]) -> Vec<Result<Answer<Slot>, String>> {
            self.calls.borrow_mut().push(names.len());
            names.iter().map(|n| self.answer(n)).collect()
        }

        fn describe(&self, error: &String) -> String {
            format!("({error})")
        }
    }

    #[test]
    fn the_newest_base_is_one_call_whatever_generations_exist_or_were_deleted() {
        let healthy = Planted::new(&[Slot::FIRST_BASE]);
        assert_eq!(find_bases(&healthy, &key(), &base()).newest.map(|(g, _)| g), Some(0));
        assert_eq!(*healthy.calls.borrow(), [1], "one call");
        // Generations 1 and 2 deleted or evicted: generation 3 is reached all the same.
        let gaps = Planted::new(&[Slot::FIRST_BASE, Slot::base(3)]);
        assert_eq!(find_bases(&gaps, &key(), &base()).newest.map(|(g, _)| g), Some(3));
        assert_eq!(*gaps.calls.borrow(), [1]);
        let far = Planted::new(&[Slot::base(9_999)]);
        assert_eq!(find_bases(&far, &key(), &base()).newest.map(|(g, _)| g), Some(9_999));
        assert!(find_bases(&Planted::new(&[]), &key(), &base()).newest.is_none());
    }

    #[test]
    fn a_key_that_is_not_a_generation_of_ours_is_offered_not_taken() {
        struct Offering(&'static str);
        impl SlotLookup for Offering {
            type Entry = ();
            type Error = String;
            fn newest_or(&self, newest_of: &str, _: &Key, _: &Version) -> Result<Answer<()>, String> {
                Ok(Answer::Ours(Key::from(format!("{newest_of}{}", self.0)), ()))
            }
            fn lookup_all(&self, _: &[(Key, Version)]) -> Vec<Result<Answer<()>, String>> {
                unreachable!()
            }
            fn describe(&self, e: &String) -> String {
                e.clone()
            }
        }
        for forged in ["", "0", "01", "1-x", "99999"] {
            let bases = find_bases(&Offering(forged), &key(), &base());
            assert!(bases.newest.is_none(), "{forged}");
            assert_eq!(bases.offered, Some(Key::from(format!("{}.g{forged}", key()))));
        }
    }

    #[test]
    fn layers_stop_at_the_first_gap_and_say_why() {
        let planted = Planted::new(&[Slot::new(1, 1), Slot::new(1, 2), Slot::new(1, 4), Slot::new(0, 3)]);
        let (layers, gap) = find_layers(&planted, &key(), &base(), 1, 5);
        assert_eq!(layers, [Slot::new(1, 1), Slot::new(1, 2)]);
        assert_eq!(gap, Some(Gap::Missing { missing: 3, later: 4 }));
        let mut failing = Planted::new(&[Slot::new(0, 1), Slot::new(0, 2)]);
        failing.failing = Some(Slot::new(0, 2));
        let (layers, gap) = find_layers(&failing, &key(), &base(), 0, 4);
        assert_eq!(layers, [Slot::new(0, 1)]);
        assert_eq!(gap, Some(Gap::Trouble { layer: 2, cause: "(down)".into() }));
        assert_eq!(find_layers(&Planted::new(&[]), &key(), &base(), 0, 4), (vec![], None));
    }
}
