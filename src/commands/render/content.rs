//! The words of content stored once (docs/content.md): what a save reused or could not, what it
//! uploaded, and what a restore fetched. Info lines only: content is never a reason to warn.

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
