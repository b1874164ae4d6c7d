//! A key's stack (`grow`): its base and its layers, each an entry of the same key under a version
//! of its own, each with the same fingerprint and its own manifest. This module owns what a stack
//! is, as logic over values: the slots and their versions ([`Slot`], and [`SlotMap`] from a
//! version back to its slot), finding a stack, checking each slot a restore applies, merging a
//! layer's manifest onto the stack's, and planning what a save adds. Commands do the I/O: the
//! lookups ([`SlotLookup`]), downloads, placement and uploads.
//!
//! * **Finding** a stack costs rounds of exact lookups, each round at once: the bases of
//!   generations `0..8` (then `8..16` only if generation 7 exists, …; the newest that can be
//!   placed wins, a corrupt newer one falls back to the next), then layers
//!   `1..=grow-max-layers` of that generation (the run before the first missing one is
//!   applied). No listing, so it works with the runtime token alone and under act's server.
//!   Without `grow` a key is one base and its replacements: the first round asks for
//!   generations 0 and 1 only.
//! * **Healing**: an entry a restore found but could not use (corrupt, foreign, hostile,
//!   incomplete, not matching its manifest) is never written over; the save of the job that
//!   regenerated writes a replacement one generation above the highest that exists, which
//!   later restores find first — with or without `grow`.
//! * **Checking**: a slot's manifest says which slot it is, a layer names as its parent exactly
//!   what was applied below it, and it only adds ([`check_additions`], [`check_roots`]).
//! * **Growing**: after a warm restore, the post step saves the files the job added under `path`
//!   as the next layer — or, when the stack has `grow-max-layers` layers (or more than the
//!   restore looked for), when its layers outweigh `grow-max-share` of the base, or when a
//!   layer or a newer base could not be applied, a compacted base holding the stack and the new
//!   files, one generation above the highest that exists ([`plan`]). Layers only add: they never
//!   delete, never change a file below them, and a restore refuses one that would.

mod check;
mod find;
mod map;
mod plan;
mod slot;

pub use check::{check_additions, check_roots, check_slot, merge};
pub use find::{Answer, Gap, SlotLookup, ends_a_round, find_bases, find_layers};
pub use map::SlotMap;
pub use plan::{Added, Growth, KeptStack, Limits, plan};
pub use slot::{MAX_GENERATIONS, MAX_LAYERS, Slot};
