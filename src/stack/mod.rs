//! A key's stack (`grow`, and the replacements healing writes): its bases and their layers, each
//! an entry with the same fingerprint and its own manifest. This module owns what a stack is, as
//! logic over values: the slots and their names ([`Slot`]), what a restore reaches ([`reach`]),
//! finding a stack through the store's [`Backend`](crate::backend::Backend), checking each slot a
//! restore applies, and planning what a save adds ([`plan`]). Commands do the rest of the I/O.
//!
//! **Healing**: an entry a restore found but could not use is never written over; the save of
//! the job that regenerated writes a replacement above the newest generation
//! ([`Slot::next_base`]), which later restores find first, with or without `grow`.

mod check;
mod find;
mod plan;
pub mod reach;
mod slot;

pub use check::{check_additions, check_roots, check_slot, merge};
pub use find::{Gap, find_bases, find_layers};
pub use plan::{Added, CompactWhy, Growth, KeptStack, Limits, SkipWhy, plan};
pub use slot::{MAX_GENERATIONS, MAX_LAYERS, Slot, generation_of};
