//! The words of content stored once (docs/content.md): what a save reused or could not, what it
//! uploaded, what a restore fetched, and what a prune did with packs. Info lines only, but for a
//! pack prune could not delete: content is never a reason to warn.

use super::super::content::PacksPruned;
use super::Said;
use crate::archive::RestoreStats;
use crate::content::save::SaveStats;
use crate::units;

/// Why a save shares content with no earlier entry: its catalog could not be read.
pub fn no_earlier_entry(cause: &str) -> String {
    format!("content: no earlier entry to share content with: {cause}")
}

pub fn not_reusing_entry(key: &str, cause: &str) -> String {
    format!("content: not reusing `{key}`: {cause}")
}

pub fn not_reusing_packs(cause: &str) -> String {
    format!("content: not reusing earlier entries' packs: {cause}")
}

pub fn packs_no_longer_stored(packs: usize) -> String {
    format!("content: {} referenced by earlier entries no longer stored", units::count_of(packs, "pack"))
}

pub fn repacking_small_packs(packs: usize) -> String {
    format!(
        "content: storing the blobs of {} anew, so that the entry references few packs",
        units::count_of(packs, "small pack")
    )
}

pub fn packs_gone_while_saving(packs: usize) -> String {
    format!("content: {} gone while saving; storing anew", units::count_of(packs, "pack"))
}

pub fn too_many_packs(packs: usize) -> String {
    format!("content: {} referenced; storing anew", units::count_of(packs, "pack"))
}

/// The save's line: what it uploaded, and what it found already stored.
pub fn saved(stats: &SaveStats) -> String {
    format!(
        "content: uploaded {} in {} ({} new), found {} already stored ({})",
        units::bytes(stats.uploaded),
        units::count_of(stats.packs, "new pack"),
        units::bytes(stats.new_bytes),
        units::bytes(stats.found_bytes),
        units::count_of(stats.found_blobs, "blob"),
    )
}

/// The restore's line: what it fetched, and what was already in place.
pub fn restored(stats: &RestoreStats) -> String {
    format!(
        "content: fetched {} from packs; {} ({}) already in place",
        units::bytes(stats.fetched),
        units::count_of(stats.in_place, "file"),
        units::bytes(stats.in_place_bytes),
    )
}

/// Why prune kept every pack: the packs or the entries could not be listed.
pub fn packs_not_listed(cause: &str) -> String {
    format!("packs not listed: {cause}")
}

/// Why prune kept every pack: an entry's references could not be read.
pub fn references_unread(key: &str, cause: &str) -> String {
    format!("the packs `{key}` references could not be read: {cause}")
}

/// Why an entry's references could not be read: this run's lookup does not reach it.
pub fn not_reached() -> String {
    "this run's lookup does not reach it (another ref's scope, or deleted meanwhile)".to_owned()
}

/// What a prune did with its prefix's packs (nothing said where the store keeps none).
pub fn pruned(pruned: &PacksPruned, dry_run: bool) -> Vec<Said> {
    let (deleted, freed, young, failed, grace) = match pruned {
        PacksPruned::None => return Vec::new(),
        PacksPruned::Kept { why } => return vec![Said::Info(format!("packs: kept every pack: {why}"))],
        PacksPruned::Done { deleted, freed, young, failed, grace } => (deleted, *freed, *young, failed, *grace),
    };
    let verb = if dry_run { "would delete" } else { "deleted" };
    let mut said: Vec<Said> =
        failed.iter().map(|(name, why)| Said::Warning(format!("packs: could not delete pack {name}: {why}"))).collect();
    let young = match young {
        0 => String::new(),
        n => format!(
            "; kept {} no entry references, stored within {}",
            units::count_of(n, "pack"),
            units::span(std::time::Duration::from_secs(grace.max(0) as u64))
        ),
    };
    let what = units::count_of(deleted.len(), "pack");
    let freed =
        if dry_run { format!("would free {}", units::bytes(freed)) } else { format!("{} freed", units::bytes(freed)) };
    said.push(Said::Info(format!("packs: {verb} {what} no entry references ({freed}){young}")));
    said
}
