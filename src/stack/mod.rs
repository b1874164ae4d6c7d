//! A key's stack (`grow`, and the replacements healing writes): its bases and their layers, each
//! an entry with the same fingerprint and its own manifest. This module owns what a stack is, as
//! logic over values: the slots and the names their entries are stored under ([`Slot`]), the one
//! rule for what a restore reaches ([`reach`]: restore, save, prune, list and explain all ask
//! it), finding a stack, checking each slot a restore applies, merging a layer's manifest onto
//! the stack's, and planning what a save adds. Finding asks the store's
//! [`Backend`](crate::backend::Backend); commands do the rest of the I/O: downloads, placement
//! and uploads.
//!
//! * **Finding** a stack: one lookup answers the newest base (the newest later generation's, or
//!   generation 0's), the only base a restore uses; then layers `1..=grow-max-layers` of its
//!   generation, at once (the run before the first missing one is applied). No listing on the cache services, so it works with the
//!   runtime token alone and under act's server.
//! * **Healing**: an entry a restore found but could not use (corrupt, foreign, hostile,
//!   incomplete, not matching its manifest) is never written over; the save of the job that
//!   regenerated writes a replacement above the newest generation ([`Slot::next_base`]), which
//!   later restores find first — with or without `grow`.
//! * **Checking**: a slot's manifest says which slot it is, a layer names as its parent exactly
//!   what was applied below it, and it only adds ([`check_additions`], [`check_roots`]).
//! * **Growing**: after a warm restore, the post step saves the files the job added under `path`
//!   as the next layer — or, when the stack has `grow-max-layers` layers (or more than the
//!   restore looked for), when its layers outweigh `grow-max-share` of the base, or when a
//!   layer could not be applied, a compacted base holding the stack and the new files, above
//!   the newest generation ([`plan`]). Layers only add: they never delete, never
//!   change a file below them, and a restore refuses one that would.

mod check;
mod find;
mod plan;
pub mod reach;
mod slot;

pub use check::{check_additions, check_roots, check_slot, merge};
pub use find::{Gap, find_bases, find_layers};
pub use plan::{Added, CompactWhy, Growth, KeptStack, Limits, SkipWhy, plan};
pub use slot::{MAX_GENERATIONS, MAX_LAYERS, Slot, generation_of};
