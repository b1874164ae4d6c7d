//! Finding a stack: the bases in bounded rounds of exact lookups, then the layers of the
//! generation placed, all through [`SlotLookup`] (the caller does the lookups).

use super::slot::{GENERATION_ROUND, MAX_GENERATIONS, Slot};
use crate::ids::{Key, Version};

/// What one exact lookup of a slot's version answered.
#[derive(Debug)]
pub enum Answer<Entry> {
    /// An entry of exactly the stack's key.
    Ours(Entry),
    /// An entry of another key (a service that prefix-matches keys offered it).
    Offered(Key),
    Absent,
}

/// Exact lookups of the slots of one key's stack: the caller's I/O.
pub trait SlotLookup {
    type Entry;
    type Error;

    /// Look up each of `versions` under the stack's key (at once, as the caller sees fit);
    /// the answers in the same order.
    fn lookup_all(&self, versions: &[Version]) -> Vec<Result<Answer<Self::Entry>, Self::Error>>;

    /// A failed lookup, with its causes, for one log line.
    fn describe(&self, error: &Self::Error) -> String;
}

/// The bases a restore found.
#[derive(Debug)]
pub struct Bases<Entry, Error> {
    /// `(generation, entry)`, newest first.
    pub found: Vec<(u32, Entry)>,
    /// A lookup that failed (the first).
    pub error: Option<Error>,
    /// A key the service offered instead of ours (a prefix match).
    pub offered: Option<Key>,
}

/// The bases of the stack of `base_version`: generation 0 alone without `grow`; with it, rounds of
/// [`GENERATION_ROUND`] lookups at once, another round only when a round's last one exists.
pub fn find_bases<L: SlotLookup>(lookup: &L, base_version: &Version, grow: bool) -> Bases<L::Entry, L::Error> {
    let mut bases = Bases { found: Vec::new(), error: None, offered: None };
    let round = if grow { GENERATION_ROUND } else { 1 };
    let mut start = 0;
    while start < MAX_GENERATIONS {
        let generations: Vec<u32> = (start..(start + round).min(MAX_GENERATIONS)).collect();
        let versions: Vec<Version> = generations.iter().map(|g| Slot::base(*g).version(base_version)).collect();
        let mut last_found = false;
        for (g, answer) in generations.iter().zip(lookup.lookup_all(&versions)) {
            last_found = false;
            match answer {
                Ok(Answer::Ours(entry)) => {
                    bases.found.push((*g, entry));
                    last_found = true;
                }
                Ok(Answer::Offered(other)) => {
                    bases.offered.get_or_insert(other);
                }
                Ok(Answer::Absent) => {}
                Err(e) => {
                    bases.error.get_or_insert(e);
                }
            }
        }
        if !(grow && last_found) {
            break;
        }
        start += round;
    }
    bases.found.reverse();
    bases
}

/// Why layers past the applied ones are not applied.
#[derive(Debug, PartialEq, Eq)]
pub enum Gap {
    /// A later layer exists past a missing one.
    Missing(String),
    /// A lookup failed.
    Trouble(String),
}

/// The layers `1..=max_layers` of `generation` to apply, in order: those before the first one
/// that is not there; and why a later one is not applied, when one exists past a gap.
pub fn find_layers<L: SlotLookup>(
    lookup: &L,
    base_version: &Version,
    generation: u32,
    max_layers: u32,
) -> (Vec<L::Entry>, Option<Gap>) {
    let versions: Vec<Version> = (1..=max_layers).map(|n| Slot::new(generation, n).version(base_version)).collect();
    let mut found = Vec::new();
    let mut answers = lookup.lookup_all(&versions).into_iter().enumerate();
    for (i, answer) in answers.by_ref() {
        match answer {
            Ok(Answer::Ours(entry)) => found.push(entry),
            Ok(_) => break,
            Err(e) => {
                let why = format!("layer {} could not be looked up: {}", i + 1, lookup.describe(&e));
                return (found, Some(Gap::Trouble(why)));
            }
        }
    }
    let past_gap = answers.find_map(|(i, answer)| matches!(answer, Ok(Answer::Ours(_))).then_some(i + 1));
    let gap = past_gap.map(|later| {
        Gap::Missing(format!("layer {} is missing, so layer {later} and later are not applied", found.len() + 1))
    });
    (found, gap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    fn base() -> Version {
        Version::from("b")
    }

    /// Slots present (their version → the slot), and every round of versions asked for.
    struct Planted {
        present: HashMap<Version, Slot>,
        failing: Option<Slot>,
        asked: RefCell<Vec<usize>>,
    }

    impl Planted {
        fn new(slots: &[Slot]) -> Planted {
            let present = slots.iter().map(|s| (s.version(&base()), *s)).collect();
            Planted { present, failing: None, asked: RefCell::default() }
        }
    }

    impl SlotLookup for Planted {
        type Entry = Slot;
        type Error = String;

        fn lookup_all(&self, versions: &[Version]) -> Vec<Result<Answer<Slot>, String>> {
            self.asked.borrow_mut().push(versions.len());
            let failing = self.failing.map(|s| s.version(&base()));
            versions
                .iter()
                .map(|v| match self.present.get(v) {
                    _ if Some(v) == failing.as_ref() => Err("down".to_owned()),
                    Some(slot) => Ok(Answer::Ours(*slot)),
                    None => Ok(Answer::Absent),
                })
                .collect()
        }

        fn describe(&self, error: &String) -> String {
            format!("({error})")
        }
    }

    #[test]
    fn bases_are_looked_up_in_rounds_while_a_round_ends_found() {
        let planted = Planted::new(&(0..=7).map(Slot::base).chain([Slot::base(9)]).collect::<Vec<_>>());
        let bases = find_bases(&planted, &base(), true);
        let generations: Vec<u32> = bases.found.iter().map(|(g, _)| *g).collect();
        assert_eq!(generations, [9, 7, 6, 5, 4, 3, 2, 1, 0], "newest first");
        assert_eq!(*planted.asked.borrow(), [8, 8], "generation 7 exists, so a second round; 15 does not");
        let without_grow = Planted::new(&[Slot::base(0), Slot::base(1)]);
        assert_eq!(find_bases(&without_grow, &base(), false).found.len(), 1);
        assert_eq!(*without_grow.asked.borrow(), [1], "generation 0 alone");
    }

    #[test]
    fn layers_stop_at_the_first_gap_and_say_why() {
        let planted = Planted::new(&[Slot::new(1, 1), Slot::new(1, 2), Slot::new(1, 4), Slot::new(0, 3)]);
        let (layers, gap) = find_layers(&planted, &base(), 1, 5);
        assert_eq!(layers, [Slot::new(1, 1), Slot::new(1, 2)]);
        assert_eq!(gap, Some(Gap::Missing("layer 3 is missing, so layer 4 and later are not applied".into())));
        let mut failing = Planted::new(&[Slot::new(0, 1), Slot::new(0, 2)]);
        failing.failing = Some(Slot::new(0, 2));
        let (layers, gap) = find_layers(&failing, &base(), 0, 4);
        assert_eq!(layers, [Slot::new(0, 1)]);
        assert_eq!(gap, Some(Gap::Trouble("layer 2 could not be looked up: (down)".into())));
        assert_eq!(find_layers(&Planted::new(&[]), &base(), 0, 4), (vec![], None));
    }
}
