//! `prune` and `exact-cache list` / `exact-cache prune`: which entries of a prefix they work on
//! ([`Refs`]), and which of those a prune deletes ([`Rule`]).
//!
//! After a save, prune deletes the older entries of the same prefix on the same ref, keeping the
//! newest `prune-keep`. Only keys of exactly our form (`<prefix>-<64 hex>`) are touched, so a
//! longer prefix that starts with ours is never someone else's loss, and entries of other refs
//! are never deleted unless asked (`--all-refs`): without a ref (a workstation), the command
//! line keeps the newest of each ref on its own. An entry whose ref is not known (the local
//! store's, saved before it recorded refs) belongs to no ref: only a prune of every ref touches
//! it. The entry a save just created is never deleted. Matrix jobs that share a prefix and a ref
//! each save their own entry: give them `prune-keep` of at least the matrix size, or a prefix
//! each. The default prefix is never pruned by count ([`refusal`]).
//!
//! With `--older-than`, the rule is age instead of count: an entry neither created nor used
//! (where the store records uses) within that time is deleted, whether or not it is its ref's
//! newest — retention where nothing evicts.
//!
//! A key is a stack of entries (a base and its layers, one version each; without `grow`, a base
//! and its replacements): prune counts keys, never deletes a layer of a kept key's live base,
//! and deletes the slots of older generations once a newer base holds what they did (when it
//! knows which slot each entry is: [`ListedSlots`]) — except a base at the end of a round of
//! lookups, which a restore steps through to reach the newer one ([`stack::ends_a_round`]).

use crate::backend::{Catalog, CatalogError, Listed};
use crate::config::DEFAULT_PREFIX;
use crate::ids::{Key, Version};
use crate::stack::{self, Slot, SlotMap};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// Why `prune` refuses `prefix`, if it does: the default prefix is shared by every workflow
/// and job of the repository that sets none, so pruning it would delete their entries.
pub(super) fn refusal(prefix: &str) -> Option<String> {
    (prefix == DEFAULT_PREFIX).then(|| {
        format!(
            "`{DEFAULT_PREFIX}` is the default prefix, shared by every workflow and job that sets none; not pruning \
             it: set `prefix` to name this cache"
        )
    })
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

    /// As the output says it: ``on `refs/heads/main` ``, `on every ref`.
    pub(super) fn describe(&self) -> String {
        match self {
            Refs::One(one) if one.is_empty() => "saved without a ref".to_owned(),
            Refs::One(one) => format!("on `{one}`"),
            Refs::Each => "on every ref".to_owned(),
            Refs::All => "on all refs, as one".to_owned(),
        }
    }
}

/// Which of the entries a prune works on it deletes.
#[derive(Clone, Copy, Debug)]
pub(super) enum Rule<'a> {
    /// All but the newest `keep` keys (in each group of [`Refs`]) and their stacks; the key a
    /// save just wrote is always kept; the slots of generations older than a kept key's newest
    /// base go too, but for the bases that end a round of lookups.
    Newest { keep: usize, just_saved: Option<&'a Key> },
    /// Every entry neither created nor used in the `age` before `now` (seconds since the epoch).
    OlderThan { age: Duration, now: i64 },
}

/// Which slot of which stack each listed entry is: the slots of the stack of the version given
/// (the `path` lines' and compression's, when they are known), and of every listed version
/// whose slots are other listed versions — a stack found from the listing alone. Naming them
/// from the listing costs one map of 1,088 slot versions (SHA-256 each, about a millisecond) per
/// listed version not yet named, and no request. A generation that lost its generation-0 base
/// (pruned after a compaction) cannot be named without the `path` lines.
pub(super) struct ListedSlots {
    maps: Vec<Arc<SlotMap>>,
}

impl ListedSlots {
    pub(super) fn new(entries: &[Listed], known: Option<&Version>) -> Self {
        let mut maps: Vec<Arc<SlotMap>> = known.map(SlotMap::of).into_iter().collect();
        let versions: BTreeSet<&Version> = entries.iter().map(|e| &e.version).collect();
        for candidate in &versions {
            if maps.iter().any(|m| m.slot(candidate).is_some()) {
                continue;
            }
            let map = SlotMap::of(candidate);
            if versions.iter().any(|v| v != candidate && map.slot(v).is_some()) {
                maps.push(map);
            }
        }
        Self { maps }
    }

    /// The slot of an entry of `version`, when it is known.
    pub(super) fn slot(&self, version: &Version) -> Option<Slot> {
        self.maps.iter().find_map(|m| m.slot(version))
    }
}

/// An entry as prune's log names it: its key, and its slot unless it is a generation-0 base (or
/// not known).
pub(super) fn named(entry: &Listed, slot: Option<Slot>) -> String {
    match slot {
        Some(Slot::FIRST_BASE) | None => entry.key.to_string(),
        Some(slot) => format!("{} ({slot})", entry.key),
    }
}

/// [`named`], the slot from the stack of `slots`.
pub(super) fn entry_name(entry: &Listed, slots: &SlotMap) -> String {
    named(entry, slots.slot(&entry.version))
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
    slots: &SlotMap,
) -> Result<PruneReport, CatalogError> {
    let entries = ours(catalog, prefix, &Refs::of_save(current_ref))?;
    let rule = Rule::Newest { keep, just_saved };
    delete(catalog, entries, &Refs::of_save(current_ref), rule, &|v| slots.slot(v), dry_run)
}

/// Delete what `rule` does not keep of `entries` (newest first, of `refs`).
pub(super) fn delete(
    catalog: &dyn Catalog,
    entries: Vec<Listed>,
    refs: &Refs,
    rule: Rule,
    slot: &dyn Fn(&Version) -> Option<Slot>,
    dry_run: bool,
) -> Result<PruneReport, CatalogError> {
    let mut groups: HashMap<Option<&str>, Vec<usize>> = HashMap::new();
    for (i, entry) in entries.iter().enumerate() {
        groups.entry(refs.group(entry)).or_default().push(i);
    }
    let group_count = groups.len().max(1);
    let keeps = match rule {
        Rule::Newest { keep, just_saved } => {
            let mut keeps = vec![false; entries.len()];
            for members in groups.values() {
                let group: Vec<&Listed> = members.iter().map(|&i| &entries[i]).collect();
                for (kept, &i) in newest(&group, keep, just_saved, slot).into_iter().zip(members) {
                    keeps[i] = kept;
                }
            }
            keeps
        }
        Rule::OlderThan { age, now } => {
            let cutoff = now.saturating_sub(i64::try_from(age.as_secs()).unwrap_or(i64::MAX));
            entries.iter().map(|e| e.last_touched() >= cutoff).collect()
        }
    };
    let (mut kept, mut older) = (Vec::new(), Vec::new());
    for (entry, keep) in entries.into_iter().zip(keeps) {
        if keep { kept.push(entry) } else { older.push(entry) }
    }
    let kept_keys = kept.iter().map(|e| &e.key).collect::<BTreeSet<_>>().len();
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

/// Which of `entries` (one group, newest first) [`Rule::Newest`] keeps.
fn newest(
    entries: &[&Listed],
    keep: usize,
    just_saved: Option<&Key>,
    slot: &dyn Fn(&Version) -> Option<Slot>,
) -> Vec<bool> {
    // Keys, newest first; the key this step saved is always kept and counts among those kept,
    // whatever the listing order says (clock ties, a concurrent job's newer entry).
    let mut keys: Vec<&Key> = Vec::new();
    for entry in entries {
        if !keys.contains(&&entry.key) {
            keys.push(&entry.key);
        }
    }
    if let Some(i) = just_saved.and_then(|saved| keys.iter().position(|k| *k == saved)) {
        let saved = keys.remove(i);
        keys.insert(0, saved);
    }
    keys.truncate(keep);
    // A kept key's entries stay — its base and every layer — except the slots of generations
    // older than its newest base: that base holds everything they did.
    let mut newest_base: HashMap<&str, u32> = HashMap::new();
    for (entry, slot) in entries.iter().filter_map(|e| Some((e, slot(&e.version)?))) {
        if slot.is_base() {
            let newest = newest_base.entry(&entry.key).or_insert(slot.generation);
            *newest = slot.generation.max(*newest);
        }
    }
    let superseded = |e: &Listed| match (slot(&e.version), newest_base.get(e.key.as_str())) {
        (Some(slot), Some(newest)) => {
            slot.generation < *newest && !(slot.is_base() && stack::ends_a_round(slot.generation))
        }
        _ => false,
    };
    entries.iter().map(|e| keys.contains(&&e.key) && !superseded(e)).collect()
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

    /// A catalog of fixed entries that records what is deleted.
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
        let report = delete(catalog, entries, &refs, rule, &|_| None, false).unwrap();
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
        let other = Version::from("c".repeat(64));
        let layer = Slot::new(0, 1).version(&base);
        let next = Slot::base(1).version(&base);
        let entries =
            [listed(&key(1), &base, None, 1), listed(&key(1), &layer, None, 2), listed(&key(2), &next, None, 3)];
        let slots = ListedSlots::new(&entries, None);
        assert_eq!(slots.slot(&base), Some(Slot::FIRST_BASE));
        assert_eq!(slots.slot(&layer), Some(Slot::new(0, 1)));
        assert_eq!(slots.slot(&next), Some(Slot::base(1)));
        assert_eq!(slots.slot(&other), None);
        // A lone entry is no stack's, unless its version is known.
        let lone = [listed(&key(3), &other, None, 1)];
        assert_eq!(ListedSlots::new(&lone, None).slot(&other), None);
        assert_eq!(ListedSlots::new(&lone, Some(&other)).slot(&other), Some(Slot::FIRST_BASE));
        assert_eq!(named(&entries[1], slots.slot(&layer)), format!("{} (layer 1)", key(1)));
    }
}
