//! `prune` and `exact-cache list` / `exact-cache prune`: after a save, delete the older entries
//! of the same prefix on the same ref, keeping the newest `prune-keep`. Only keys of exactly our
//! form (`<prefix>-<64 hex>`) are touched, so a longer prefix that starts with ours is never
//! someone else's loss, and entries of other refs are never deleted. The entry a save just
//! created is never deleted. Matrix jobs that share a prefix and a ref each save their own
//! entry: give them `prune-keep` of at least the matrix size, or a prefix each. The default
//! prefix is never pruned ([`refusal`]).

use crate::config::DEFAULT_PREFIX;
use crate::github::{Catalog, CatalogError, Listed};
use crate::keys;

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

pub(super) struct PruneReport {
    pub kept: Vec<Listed>,
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
        .filter(|l| keys::is_key_of(prefix, &l.key))
        .filter(|l| l.r#ref.is_none() || l.r#ref.as_deref() == current_ref)
        .collect())
}

pub(super) fn prune(
    catalog: &dyn Catalog,
    prefix: &str,
    current_ref: Option<&str>,
    keep: usize,
    dry_run: bool,
    just_saved: Option<&str>,
) -> Result<PruneReport, CatalogError> {
    let mut entries = ours(catalog, prefix, current_ref)?;
    // The entry this step saved is always kept and counts among those kept, whatever the
    // listing order says (clock ties, a concurrent job's newer entry).
    let saved = just_saved.and_then(|key| entries.iter().position(|e| e.key == key)).map(|i| entries.remove(i));
    let room = keep.saturating_sub(saved.is_some() as usize);
    let older = entries.split_off(room.min(entries.len()));
    let mut kept: Vec<Listed> = saved.into_iter().collect();
    kept.extend(entries);
    let mut report = PruneReport { kept, deleted: Vec::new(), failed: Vec::new() };
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
