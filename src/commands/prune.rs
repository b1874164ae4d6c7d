//! `prune` and `exact-cache list` / `exact-cache prune`: which entries of a prefix they work on
//! ([`Refs`]), and which of those a prune deletes ([`Rule`]).
//!
//! docs/usage.md gives the rules as users see them. Only keys of exactly our form
//! (`<prefix>-<64 hex>`) are touched, so a longer prefix that starts with ours is never someone
//! else's loss; an entry whose ref is not known belongs to no ref, and only a prune of every ref
//! touches it; the entry a save just created is never deleted; the default prefix is never
//! pruned by count ([`refused`]). Matrix jobs that share a prefix and a ref each save their own
//! entry: give them `prune-keep` of at least the matrix size, or a prefix each.
//!
//! A key is a stack of entries (its bases and their layers; without `grow`, a base and its
//! replacements), named from the listing alone ([`ListedSlots`]): prune counts keys and, of each
//! stack of a kept key, keeps exactly what a restore reaches ([`stack::reach::reached`]) and
//! deletes the rest — the rule the restore itself follows, so nothing it keeps depends on
//! anything it deletes.

use crate::backend::{Catalog, CatalogError, Listed};
use crate::config::DEFAULT_PREFIX;
use crate::keys::{Key, Version};
use crate::stack::Slot;
use crate::stack::reach::{self, Placed};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// Whether `prune` by count refuses `prefix`: the default prefix is shared by every workflow
/// and job of the repository that sets none, so pruning it would delete their entries.
pub(super) fn refused(prefix: &str) -> bool {
    prefix == DEFAULT_PREFIX
}

/// Which refs' entries a catalog command works on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Refs {
    /// The entries saved on one ref (the empty ref: saved outside Actions).
    One(String),
    /// Every ref's, each on its own: a prune keeps the newest of each.
    Each,
    /// Every ref's as one: a prune keeps the newest whatever their ref.
    All,
}

impl Refs {
    /// `--all-refs`, else `--ref`, else the run's own ref (`GITHUB_REF`), else every ref, each on
    /// its own.
    pub(super) fn chosen(given: Option<&str>, all_refs: bool, current: Option<&str>) -> Refs {
        match (all_refs, given.or(current)) {
            (true, _) => Refs::All,
            (false, Some(one)) => Refs::One(one.to_owned()),
            (false, None) => Refs::Each,
        }
    }

    /// What a save prunes: the entries of its own ref.
    pub(super) fn of_save(current: Option<&str>) -> Refs {
        Refs::One(current.unwrap_or_default().to_owned())
    }

    fn only(&self) -> Option<&str> {
        match self {
            Refs::One(one) => Some(one),
            Refs::Each | Refs::All => None,
        }
    }

    /// The group a prune counts `entry` in.
    fn group<'a>(&self, entry: &'a Listed) -> Option<&'a str> {
        match self {
            Refs::Each => entry.r#ref.as_deref(),
            Refs::One(_) | Refs::All => None,
        }
    }
}

/// Which of the entries a prune works on it deletes.
#[derive(Clone, Copy, Debug)]
pub(super) enum Rule<'a> {
    /// All but the newest `keep` keys (in each group of [`Refs`]) and their stacks; the key a
    /// save just wrote is always kept; of a kept key's stacks, what no restore reaches goes too.
    Newest { keep: usize, just_saved: Option<&'a Key> },
    /// Every entry neither created nor used in the `age` before `now` (seconds since the epoch),
    /// and what no restore reaches; never the base of a layer that stays.
    OlderThan { age: Duration, now: i64 },
}

/// Which stack and slot each listed entry is ([`reach::classify`]): bases by their key, layers
/// by their version among the layers of the listed bases (16 digests per base, no request).
pub(super) struct ListedSlots {
    placed: HashMap<(Key, Version), Placed>,
}

impl ListedSlots {
    /// `known`: the `path` lines' version, when they were given (names the layers of its stacks
    /// whose base is gone).
    pub(super) fn new(entries: &[Listed], known: Option<&Version>) -> Self {
        let names: Vec<(&Key, &Version)> = entries.iter().map(|e| (&e.key, &e.version)).collect();
        let placed =
            names.iter().map(|(k, v)| ((*k).clone(), (*v).clone())).zip(reach::classify(&names, known)).collect();
        Self { placed }
    }

    /// Where `entry` sits (an entry not in the listing this was made of: a base of its own).
    pub(super) fn placed(&self, entry: &Listed) -> Placed {
        self.placed
            .get(&(entry.key.clone(), entry.version.clone()))
            .cloned()
            .unwrap_or_else(|| reach::classify(&[(&entry.key, &entry.version)], None).remove(0))
    }

    pub(super) fn slot(&self, entry: &Listed) -> Slot {
        self.placed(entry).slot
    }
}

pub(super) struct PruneReport {
    /// Entries kept: every slot of the newest keys' stacks.
    pub kept: Vec<Listed>,
    /// How many keys they belong to.
    pub kept_keys: usize,
    /// How many groups the newest were counted in: refs, with [`Refs::Each`]; else 1.
    pub groups: usize,
    pub deleted: Vec<Listed>,
    pub failed: Vec<(Listed, String)>,
}

/// The entries of `prefix` on `refs`, newest first.
pub(super) fn ours(catalog: &dyn Catalog, prefix: &str, refs: &Refs) -> Result<Vec<Listed>, CatalogError> {
    let only = refs.only();
    // The catalog filters by ref; checked again, as every catalog's answer is.
    Ok(catalog
        .list(&format!("{prefix}-"), only)?
        .into_iter()
        .filter(|l| l.key.is_of(prefix) && l.is_on(only))
        .collect())
}

/// A save's prune: the entries of its own ref (`current_ref`), all but the newest `keep` keys.
pub(super) fn prune(
    catalog: &dyn Catalog,
    prefix: &str,
    current_ref: Option<&str>,
    keep: usize,
    dry_run: bool,
    just_saved: Option<&Key>,
) -> Result<(PruneReport, ListedSlots), CatalogError> {
    let entries = ours(catalog, prefix, &Refs::of_save(current_ref))?;
    let slots = ListedSlots::new(&entries, None);
    let rule = Rule::Newest { keep, just_saved };
    Ok((delete(catalog, entries, &Refs::of_save(current_ref), rule, &slots, dry_run)?, slots))
}

/// Delete what `rule` does not keep of `entries` (newest first, of `refs`).
pub(super) fn delete(
    catalog: &dyn Catalog,
    entries: Vec<Listed>,
    refs: &Refs,
    rule: Rule,
    slots: &ListedSlots,
    dry_run: bool,
) -> Result<PruneReport, CatalogError> {
    let mut groups: HashMap<Option<&str>, Vec<usize>> = HashMap::new();
    for (i, entry) in entries.iter().enumerate() {
        groups.entry(refs.group(entry)).or_default().push(i);
    }
    let group_count = groups.len().max(1);
    let placed: Vec<Placed> = entries.iter().map(|e| slots.placed(e)).collect();
    let mut keeps = match rule {
        Rule::Newest { keep, just_saved } => {
            let mut keeps = vec![false; entries.len()];
            for members in groups.values() {
                let kept: Vec<&Key> = newest_keys(members.iter().map(|&i| &placed[i].key), keep, just_saved)
                    .into_iter()
                    .map(|first| &placed[members[first]].key)
                    .collect();
                for &i in members {
                    keeps[i] = kept.contains(&&placed[i].key);
                }
            }
            keeps
        }
        Rule::OlderThan { age, now } => {
            let cutoff = now.saturating_sub(i64::try_from(age.as_secs()).unwrap_or(i64::MAX));
            entries.iter().map(|e| e.last_touched() >= cutoff).collect()
        }
    };
    // A restore reads its own ref's entries first (the cache service's scopes): what it reaches
    // is counted ref by ref, whatever refs the rule counts keys over.
    let group_of: Vec<Option<&str>> = entries.iter().map(|e| e.r#ref.as_deref()).collect();
    keep_what_restores_reach(&entries, (&placed, &group_of), &mut keeps);
    let (mut kept, mut older) = (Vec::new(), Vec::new());
    for (entry, keep) in entries.into_iter().zip(keeps) {
        if keep { kept.push(entry) } else { older.push(entry) }
    }
    let kept_keys = kept.iter().map(|e| slots.placed(e).key).collect::<BTreeSet<_>>().len();
    let mut report = PruneReport { kept, kept_keys, groups: group_count, deleted: Vec::new(), failed: Vec::new() };
    for entry in older {
        if dry_run {
            report.deleted.push(entry);
            continue;
        }
        match catalog.delete(&entry) {
            Ok(()) => report.deleted.push(entry),
            Err(e @ CatalogError::Forbidden { .. }) => return Err(e),
            Err(e) => report.failed.push((entry, crate::text::error_line(&e))),
        }
    }
    Ok(report)
}

/// Of `keys` (one per entry of a group, newest first), the positions of the first entry of each
/// of the newest `keep` keys: the key this step saved is always among them, whatever the
/// listing order says (clock ties, a concurrent job's newer entry).
fn newest_keys<'a>(keys: impl Iterator<Item = &'a Key>, keep: usize, just_saved: Option<&Key>) -> Vec<usize> {
    let mut firsts: Vec<(usize, &Key)> = Vec::new();
    for (i, key) in keys.enumerate() {
        if !firsts.iter().any(|(_, k)| *k == key) {
            firsts.push((i, key));
        }
    }
    if let Some(i) = just_saved.and_then(|saved| firsts.iter().position(|(_, k)| *k == saved)) {
        let saved = firsts.remove(i);
        firsts.insert(0, saved);
    }
    firsts.truncate(keep);
    firsts.into_iter().map(|(i, _)| i).collect()
}

/// Of each stack (on each ref), what the rule keeps stays only if a restore reaches it
/// ([`reach::reached`]); a generation's base stays while a layer of it does.
fn keep_what_restores_reach(entries: &[Listed], (placed, group_of): (&[Placed], &[Option<&str>]), keeps: &mut [bool]) {
    let mut stacks: HashMap<(Option<&str>, &Key, &Version), Vec<usize>> = HashMap::new();
    for (i, p) in placed.iter().enumerate() {
        stacks.entry((group_of[i], &p.key, &p.base_version)).or_default().push(i);
    }
    for members in stacks.values() {
        let slots: Vec<(Slot, i64)> = members.iter().map(|&i| (placed[i].slot, entries[i].created)).collect();
        for (&i, reached) in members.iter().zip(reach::reached(&slots)) {
            keeps[i] &= reached;
        }
        let layered: Vec<u32> = members
            .iter()
            .filter(|&&i| keeps[i] && !placed[i].slot.is_base())
            .map(|&i| placed[i].slot.generation)
            .collect();
        for &i in members {
            if placed[i].slot.is_base() && layered.contains(&placed[i].slot.generation) {
                keeps[i] = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(key: &str, version: &Version, r#ref: Option<&str>, created: i64) -> Listed {
        Listed {
            id: format!("{key}@{version}@{}", r#ref.unwrap_or("?")),
            key: Key::from(key),
            version: version.clone(),
            r#ref: r#ref.map(str::to_owned),
            created,
            last_used: None,
            size: 1,
        }
    }

    fn key(n: u8) -> String {
        format!("p-{}", format!("{n:x}").repeat(64).get(..64).unwrap())
    }

    struct Fixed(Vec<Listed>, std::cell::RefCell<Vec<String>>);

    impl Catalog for Fixed {
        fn describe(&self) -> String {
            "fixed".into()
        }
        fn list(&self, _: &str, r#ref: Option<&str>) -> Result<Vec<Listed>, CatalogError> {
            Ok(self.0.iter().filter(|l| l.is_on(r#ref)).cloned().collect())
        }
        fn delete(&self, entry: &Listed) -> Result<(), CatalogError> {
            self.1.borrow_mut().push(entry.id.clone());
            Ok(())
        }
    }

    fn deleted_keys(catalog: &Fixed, refs: Refs, rule: Rule) -> Vec<String> {
        let entries = ours(catalog, "p", &refs).unwrap();
        let slots = ListedSlots::new(&entries, None);
        let report = delete(catalog, entries, &refs, rule, &slots, false).unwrap();
        report.deleted.iter().map(|e| format!("{}@{}", &e.key[..4], e.r#ref.as_deref().unwrap_or("?"))).collect()
    }

    #[test]
    fn each_ref_keeps_its_newest_and_only_all_refs_counts_them_as_one() {
        let v = Version::from("a".repeat(64));
        let entries = vec![
            listed(&key(1), &v, Some("refs/heads/feature"), 40),
            listed(&key(2), &v, Some("refs/heads/main"), 30),
            listed(&key(3), &v, Some("refs/heads/main"), 20),
            listed(&key(4), &v, None, 10),
        ];
        let keep_one = Rule::Newest { keep: 1, just_saved: None };
        let catalog = || Fixed(entries.clone(), Default::default());
        assert_eq!(deleted_keys(&catalog(), Refs::One("refs/heads/main".into()), keep_one), ["p-33@refs/heads/main"]);
        assert_eq!(deleted_keys(&catalog(), Refs::One("refs/heads/feature".into()), keep_one), Vec::<String>::new());
        assert_eq!(
            deleted_keys(&catalog(), Refs::Each, keep_one),
            ["p-33@refs/heads/main"],
            "unknown: a ref of its own"
        );
        let mut all = deleted_keys(&catalog(), Refs::All, keep_one);
        all.sort();
        assert_eq!(all, ["p-22@refs/heads/main", "p-33@refs/heads/main", "p-44@?"]);
    }

    #[test]
    fn older_than_counts_from_the_last_use_where_there_is_one() {
        let v = Version::from("a".repeat(64));
        let mut used = listed(&key(1), &v, Some("r"), 100);
        used.last_used = Some(950);
        let entries = vec![listed(&key(2), &v, Some("r"), 960), used, listed(&key(3), &v, Some("r"), 100)];
        let catalog = Fixed(entries, Default::default());
        let rule = Rule::OlderThan { age: Duration::from_secs(100), now: 1000 };
        assert_eq!(deleted_keys(&catalog, Refs::Each, rule), ["p-33@r"], "the newest of its ref goes too");
    }

    #[test]
    fn a_stack_is_named_from_the_listing_alone() {
        let base = Version::from("b".repeat(64));
        let k = Key::from(key(1));
        let at = |slot: Slot, created| {
            let (key, version) = slot.names(&k, &base);
            listed(&key, &version, None, created)
        };
        let entries = [at(Slot::FIRST_BASE, 1), at(Slot::new(0, 1), 2), at(Slot::base(4), 3), at(Slot::new(4, 2), 4)];
        let slots = ListedSlots::new(&entries, None);
        let named: Vec<Slot> = entries.iter().map(|e| slots.slot(e)).collect();
        assert_eq!(named, [Slot::FIRST_BASE, Slot::new(0, 1), Slot::base(4), Slot::new(4, 2)]);
        assert!(entries.iter().all(|e| slots.placed(e).key == k), "one key: a later generation's is its own");
        let line = super::super::render::prune::named(&entries[2].key, named[2]);
        assert_eq!(line, format!("{}.g4 (generation 4 base)", key(1)));
    }

    #[test]
    fn prune_keeps_what_a_restore_reaches_and_deletes_what_it_never_would() {
        let base = Version::from("b".repeat(64));
        let other_paths = Version::from("c".repeat(64));
        let k = Key::from(key(1));
        let at = |slot: Slot, version: &Version, created| {
            let (key, version) = slot.names(&k, version);
            listed(&key, &version, Some("r"), created)
        };
        // Newest first, as catalogs list.
        let entries = vec![
            at(Slot::new(3, 1), &base, 60),
            at(Slot::base(3), &base, 50),
            at(Slot::base(2), &base, 40),
            at(Slot::new(1, 1), &base, 31),
            at(Slot::base(1), &base, 30),
            at(Slot::new(0, 1), &base, 11),
            at(Slot::FIRST_BASE, &base, 10),
            // A cache of the same key for other `path` lines: a stack of its own, whose
            // generation 1 is its newest, whatever the first stack holds.
            at(Slot::base(1), &other_paths, 9),
            at(Slot::FIRST_BASE, &other_paths, 8),
        ];
        let catalog = Fixed(entries.clone(), Default::default());
        let slots = ListedSlots::new(&entries, None);
        let rule = Rule::Newest { keep: 1, just_saved: None };
        let report = delete(&catalog, entries.clone(), &Refs::One("r".into()), rule, &slots, false).unwrap();
        let deleted: Vec<&Listed> = report.deleted.iter().collect();
        let expected: Vec<&Listed> = [2, 3, 4, 5, 6, 8].iter().map(|&i| &entries[i]).collect();
        assert_eq!(deleted, expected, "every base but the newest of each stack, and their layers");
        assert_eq!(report.kept.len(), 3);
        // Every ref as one: a pull request's later generation never makes main's base go (main's
        // restores do not read the pull request's scope).
        let on = |slot: Slot, r#ref: &str, created| {
            let (key, version) = slot.names(&k, &base);
            listed(&key, &version, Some(r#ref), created)
        };
        let scopes = vec![on(Slot::base(1), "refs/pull/7/merge", 20), on(Slot::FIRST_BASE, "refs/heads/main", 10)];
        let catalog = Fixed(scopes.clone(), Default::default());
        let slots = ListedSlots::new(&scopes, None);
        let rule = Rule::OlderThan { age: Duration::from_secs(50), now: 30 };
        let report = delete(&catalog, scopes.clone(), &Refs::All, rule, &slots, false).unwrap();
        assert!(report.deleted.is_empty(), "{:?}", report.deleted);
        let rule = Rule::Newest { keep: 1, just_saved: None };
        let report = delete(&catalog, scopes, &Refs::All, rule, &slots, false).unwrap();
        assert!(report.deleted.is_empty(), "{:?}", report.deleted);
        // By age: the old base of a layer that stays, stays.
        let aged = vec![at(Slot::new(0, 1), &base, 100), at(Slot::FIRST_BASE, &base, 10)];
        let catalog = Fixed(aged.clone(), Default::default());
        let slots = ListedSlots::new(&aged, None);
        let rule = Rule::OlderThan { age: Duration::from_secs(50), now: 120 };
        let report = delete(&catalog, aged, &Refs::Each, rule, &slots, false).unwrap();
        assert!(report.deleted.is_empty(), "{:?}", report.deleted);
    }
}
