//! `prune` and `exact-cache list` / `exact-cache prune`: after a save, delete the older entries
//! of the same prefix on the same ref, keeping the newest `prune-keep`. Only keys of exactly our
//! form (`<prefix>-<64 hex>`) are touched, so a longer prefix that starts with ours is never
//! someone else's loss, and entries of other refs are never deleted. The entry a save just
//! created is never deleted. Matrix jobs that share a prefix and a ref each save their own
//! entry: give them `prune-keep` of at least the matrix size, or a prefix each. The default
//! prefix is never pruned ([`refusal`]).
//!
//! A key is a stack of entries (a base and its layers, one version each; without `grow`, a base
//! and its replacements): prune counts keys, never deletes a layer of a kept key's live base,
//! and deletes the slots of older generations once a newer base holds what they did (when it
//! knows the `path` lines and compression that tell slots apart: the [`SlotMap`] of their base
//! version) — except a base at the end of a round of lookups, which a restore steps through
//! to reach the newer one ([`stack::ends_a_round`]).

use crate::backend::{Catalog, CatalogError, Listed};
use crate::config::DEFAULT_PREFIX;
use crate::ids::Key;
use crate::stack::{self, Slot, SlotMap};
use std::collections::HashMap;

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

/// An entry as prune's log names it: its key, and its slot (in the stacks of `slots`) unless it
/// is a generation-0 base.
pub(super) fn entry_name(entry: &Listed, slots: &SlotMap) -> String {
    match slots.slot(&entry.version) {
        Some(Slot::FIRST_BASE) | None => entry.key.to_string(),
        Some(slot) => format!("{} ({slot})", entry.key),
    }
}

pub(super) struct PruneReport {
    /// Entries kept: every slot of the newest keys' stacks.
    pub kept: Vec<Listed>,
    /// How many keys they belong to.
    pub kept_keys: usize,
    pub deleted: Vec<Listed>,
    pub failed: Vec<(Listed, String)>,
}

/// The entries of `prefix` on `current_ref` (all of them when the catalog has no refs), newest
/// first.
pub(super) fn ours(
    catalog: &dyn Catalog,
    prefix: &str,
    current_ref: Option<&str>,
) -> Result<Vec<Listed>, CatalogError> {
    Ok(catalog
        .list(&format!("{prefix}-"), current_ref)?
        .into_iter()
        .filter(|l| l.key.is_of(prefix))
        // `None`: a catalog without refs. An entry saved without a ref has the empty one, and
        // belongs to runs without one.
        .filter(|l| l.r#ref.as_deref().is_none_or(|r| r == current_ref.unwrap_or("")))
        .collect())
}

pub(super) fn prune(
    catalog: &dyn Catalog,
    prefix: &str,
    current_ref: Option<&str>,
    keep: usize,
    dry_run: bool,
    just_saved: Option<&Key>,
    slots: &SlotMap,
) -> Result<PruneReport, CatalogError> {
    let entries = ours(catalog, prefix, current_ref)?;
    // Keys, newest first; the key this step saved is always kept and counts among those kept,
    // whatever the listing order says (clock ties, a concurrent job's newer entry).
    let mut keys: Vec<&Key> = Vec::new();
    for entry in &entries {
        if !keys.contains(&&entry.key) {
            keys.push(&entry.key);
        }
    }
    if let Some(i) = just_saved.and_then(|saved| keys.iter().position(|k| *k == saved)) {
        let saved = keys.remove(i);
        keys.insert(0, saved);
    }
    keys.truncate(keep);
    let kept_keys: Vec<Key> = keys.into_iter().cloned().collect();
    // A kept key's entries stay — its base and every layer — except the slots of generations
    // older than its newest base: that base holds everything they did.
    let mut newest_base: HashMap<&str, u32> = HashMap::new();
    for (entry, slot) in entries.iter().filter_map(|e| Some((e, slots.slot(&e.version)?))) {
        if slot.is_base() {
            let newest = newest_base.entry(&entry.key).or_insert(slot.generation);
            *newest = slot.generation.max(*newest);
        }
    }
    let superseded = |e: &Listed| match (slots.slot(&e.version), newest_base.get(e.key.as_str())) {
        (Some(slot), Some(newest)) => {
            slot.generation < *newest && !(slot.is_base() && stack::ends_a_round(slot.generation))
        }
        _ => false,
    };
    let (kept, older): (Vec<Listed>, Vec<Listed>) =
        entries.iter().cloned().partition(|e| kept_keys.contains(&e.key) && !superseded(e));
    let mut report = PruneReport { kept, kept_keys: kept_keys.len(), deleted: Vec::new(), failed: Vec::new() };
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
