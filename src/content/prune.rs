//! Prune's rule for packs, as a pure function: a pack is deleted only when no listed entry
//! references it and it is older than a grace period; and nothing at all when any listed entry's
//! references are unknown.
//!
//! The grace period covers a save in progress: its new packs are stored before its manifest,
//! so until the manifest lands nothing references them; and a save references old packs that
//! the entries it read name. The caller lists the entries whose references count — every entry
//! of the prefix on every ref whose restores can read these packs (on the cache service, a
//! default branch's packs are read from every ref) — and the packs with their creation times,
//! then asks [`prunable`]. What stays exposed: a save that read an entry, which prune then deletes
//! with the last reference to an old pack, before the save commits; that entry misses once
//! (`content-missing`) and its replacement heals it, as when the service evicts a pack.
//!
//! The caller is the one place that decides what a restore reaches (`stack::reach` for
//! entries): the packs of the entries it keeps are what it keeps.

use super::PackName;
use super::store::ListedPack;
use std::collections::{HashMap, HashSet};

/// A pack younger than this is kept, referenced or not: longer than any save takes between
/// storing its first pack and committing its manifest (a job runs at most 6 hours on
/// GitHub-hosted runners; 24 hours leaves room for slow self-hosted ones).
pub const GRACE_SECONDS: i64 = 24 * 60 * 60;

/// The packs to delete: of `packs` (listed, with creation times in seconds), those no entry's
/// references name and created at least `grace` seconds before `now`. `references` holds, for
/// each listed entry, the packs it references (`None`: they could not be read; then no pack is
/// deleted, since it might be one of them).
pub fn prunable(references: &[Option<Vec<PackName>>], packs: &[ListedPack], now: i64, grace: i64) -> Vec<PackName> {
    if references.iter().any(Option::is_none) {
        return Vec::new();
    }
    let referenced: HashSet<&PackName> = references.iter().flatten().flatten().collect();
    packs
        .iter()
        .filter(|p| !referenced.contains(&p.name) && p.created <= now.saturating_sub(grace))
        .map(|p| p.name)
        .collect()
}

/// What each entry holds in packs: its own bytes (packs no other entry references) and its
/// shared bytes (packs others reference too), for `list`; by whole packs, as prune frees them.
/// Packs a listing does not hold count for nothing.
pub fn sizes(references: &[Option<Vec<PackName>>], packs: &[ListedPack]) -> Vec<(u64, u64)> {
    let size: HashMap<&PackName, u64> = packs.iter().map(|p| (&p.name, p.size)).collect();
    let mut users: HashMap<&PackName, usize> = HashMap::new();
    for refs in references.iter().flatten() {
        let distinct: HashSet<&PackName> = refs.iter().collect();
        for p in distinct {
            *users.entry(p).or_default() += 1;
        }
    }
    references
        .iter()
        .map(|refs| {
            let distinct: HashSet<&PackName> = refs.iter().flatten().collect();
            distinct.into_iter().fold((0, 0), |(own, shared), p| {
                let bytes = size.get(p).copied().unwrap_or(0);
                if users[p] == 1 { (own + bytes, shared) } else { (own, shared + bytes) }
            })
        })
        .collect()
}

/// The bytes deleting `names` frees.
pub fn freed(names: &[PackName], packs: &[ListedPack]) -> u64 {
    let names: HashSet<&PackName> = names.iter().collect();
    packs.iter().filter(|p| names.contains(&p.name)).map(|p| p.size).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::Hash;

    const NOW: i64 = 1_800_000_000;

    fn pack(n: u8, age: i64, size: u64) -> ListedPack {
        ListedPack { name: Hash::of(&[n]), size, created: NOW - age }
    }

    fn name(n: u8) -> PackName {
        Hash::of(&[n])
    }

    #[test]
    fn only_old_packs_no_entry_references_are_pruned() {
        let day = GRACE_SECONDS;
        let packs = [pack(1, 2 * day, 10), pack(2, 2 * day, 20), pack(3, day - 1, 30), pack(4, day, 40)];
        let refs = vec![Some(vec![name(1)]), Some(vec![]), Some(vec![name(1), name(9)])];
        // 2 is unreferenced and old; 3 is unreferenced but young (a save in progress may be about
        // to reference it); 4 is exactly as old as the grace period.
        assert_eq!(prunable(&refs, &packs, NOW, day), [name(2), name(4)]);
        assert_eq!(freed(&prunable(&refs, &packs, NOW, day), &packs), 60);
        // Every pack referenced: nothing goes, however old.
        let all = vec![Some(vec![name(1), name(2)]), Some(vec![name(3), name(4)])];
        assert!(prunable(&all, &packs, NOW, day).is_empty());
        // No entries at all: every old pack goes.
        assert_eq!(prunable(&[], &packs, NOW, day), [name(1), name(2), name(4)]);
        // An entry whose references could not be read: nothing is deleted.
        let unknown = vec![Some(vec![name(1)]), None];
        assert!(prunable(&unknown, &packs, NOW, day).is_empty());
    }

    #[test]
    fn an_entry_owns_the_packs_no_other_references() {
        let packs = [pack(1, 0, 10), pack(2, 0, 20), pack(3, 0, 30)];
        let refs = vec![Some(vec![name(1), name(2), name(2)]), Some(vec![name(2), name(3), name(8)]), None];
        assert_eq!(sizes(&refs, &packs), [(10, 20), (30, 20), (0, 0)]);
    }
}
