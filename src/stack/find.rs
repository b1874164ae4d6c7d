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

/// The rounds of generations a restore looks up, each at once, in order: `grow` asks for
/// [`GENERATION_ROUND`] generations a round; a key without `grow` is mostly one entry and its
/// rare replacements, so its first round asks for generation 0 and its first replacement only,
/// its second for the rest of the first `grow` round. Another round only when the last
/// generation of a round exists ([`ends_a_round`]).
fn rounds(grow: bool) -> impl Iterator<Item = std::ops::Range<u32>> {
    // Without `grow`, the first round is split in two: generations 0 and 1, then 2..8.
    let split = if grow { 0 } else { 2 };
    let first = [0..split, split..GENERATION_ROUND].into_iter().filter(|round| !round.is_empty());
    let later = (1..MAX_GENERATIONS / GENERATION_ROUND).map(|r| r * GENERATION_ROUND..(r + 1) * GENERATION_ROUND);
    first.chain(later)
}

/// Whether a restore looks past `generation` only when its base exists: the last generation of
/// a round, with or without `grow`. Pruning keeps such a base even when a newer one holds what
/// it did, so the newer one stays reachable.
pub fn ends_a_round(generation: u32) -> bool {
    [true, false].into_iter().flat_map(rounds).any(|round| round.end - 1 == generation)
}

/// The bases of the stack of `base_version`, in rounds of exact lookups at once ([`rounds`]).
pub fn find_bases<L: SlotLookup>(lookup: &L, base_version: &Version, grow: bool) -> Bases<L::Entry, L::Error> {
    let mut bases = Bases { found: Vec::new(), error: None, offered: None };
    for round in rounds(grow) {
        let generations: Vec<u32> = round.collect();
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
        if !last_found {
            break;
        }
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
    }

    #[test]
    fn without_grow_a_restore_asks_for_the_entry_and_its_first_replacement() {
        let healthy = Planted::new(&[Slot::base(0)]);
        assert_eq!(find_bases(&healthy, &base(), false).found.len(), 1);
        assert_eq!(*healthy.asked.borrow(), [2], "generation 0 and 1 at once, nothing more");
        let replaced = Planted::new(&[Slot::base(0), Slot::base(1), Slot::base(2)]);
        let generations: Vec<u32> = find_bases(&replaced, &base(), false).found.iter().map(|(g, _)| *g).collect();
        assert_eq!(generations, [2, 1, 0], "the newest replacement first");
        assert_eq!(*replaced.asked.borrow(), [2, 6], "generation 1 exists: the rest of the first round");
        let far = Planted::new(&[Slot::base(1), Slot::base(7), Slot::base(9)]);
        let generations: Vec<u32> = find_bases(&far, &base(), false).found.iter().map(|(g, _)| *g).collect();
        assert_eq!(generations, [9, 7, 1], "older generations pruned, the ends of rounds kept");
        assert_eq!(*far.asked.borrow(), [2, 6, 8]);
    }

    #[test]
    fn the_ends_of_rounds_are_the_same_with_and_without_grow_past_the_first() {
        let ends: Vec<u32> = (0..24).filter(|g| ends_a_round(*g)).collect();
        assert_eq!(ends, [1, 7, 15, 23]);
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
