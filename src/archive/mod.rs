//! Archives: one pax tar per entry, compressed with zstd (multithreaded, no long mode), gzip, or
//! nothing.
//!
//! Layout, in order:
//! 1. `.exact-cache/fingerprint.json`: the [`FingerprintRecord`], first, so a later miss can be
//!    explained from a small ranged read at the start of the blob; before it, in a pax record,
//!    a copy of the manifest's generation record, which `list` reads the same way;
//! 2. the entries of each `path` root `i`, named `i` (a file root) or `i/<relative path>`,
//!    parents before children (directory names end in `/`);
//! 3. `.exact-cache/manifest.json`: the [`Manifest`] of every entry, last, so the files are
//!    read and hashed once, while they are written.
//!
//! Restore ([`unpack`]) extracts into a staging directory beside each root (same filesystem),
//! verifies everything against the manifest, and only then moves entries into place, undoing
//! every move if one fails. Restore, rollback and clean touch the file system only through
//! directory handles that never follow links (`beneath`). Every archive is read through
//! `records`, which bounds each header record (pax, GNU long names) before the tar reader
//! holds it.
//!
//! [`FingerprintRecord`]: crate::fingerprint::FingerprintRecord
//! [`Manifest`]: crate::manifest::Manifest

mod beneath;
mod claims;
mod clean;
mod codec;
mod fetch;
mod pack;
mod place;
mod records;
mod safety;
mod secrets;
mod staging;
mod unpack;
mod writers;

pub use clean::{CleanError, CleanGuard, CleanStats, Tracked, clean_into};
pub use codec::{Compression, Effort};
pub use pack::{
    Content, GENERATION_PAX, Inventory, PackError, PackStats, Stamp, effort_of, inventory, store_content,
    write_archive, write_archive_with, write_content_archive,
};
pub use safety::check_symlink_target;
pub use secrets::{MIN_SECRET_LEN, SecretScanner};
pub use unpack::{
    RestorePlan, RestoreStats, Staged, UnpackError, read_content_map, read_fingerprint, read_generation, read_packs,
    unpack,
};

/// Name of the fingerprint member (first).
pub const FINGERPRINT_NAME: &str = ".exact-cache/fingerprint.json";
/// Name of the manifest member (last).
pub const MANIFEST_NAME: &str = ".exact-cache/manifest.json";
/// Format version of the archive layout; part of the cache version string.
pub const ARCHIVE_FORMAT: u32 = 1;
