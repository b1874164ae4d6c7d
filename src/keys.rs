//! Key and version recipes. The key and the version as types, and the checks of a prefix and a
//! key the user gives, are [`crate::ids`]'s (low in the layers, so every layer can carry them).
//!
//! * **Key** = `<prefix>-<64 lowercase hex>` (see [`crate::fingerprint`]). All keys of one
//!   prefix have the same length, so no key is a prefix of another.
//! * **Version** (the service's second key) = SHA-256 hex of
//!   `exact-cache|archive-format=<n>|compression=<name>|paths=<lines joined by \n>`, where the
//!   lines are the `path` input as written (trimmed, blank lines dropped, order kept, a preset's
//!   directories appended), except that an absolute line below the workspace, the home
//!   directory, `RUNNER_TEMP` or exact-cache's own directory is named by that place
//!   (workspace-relative, `~/…`, `<runner-temp>/…`, `<exact-cache-dir>/…`:
//!   [`crate::paths::VersionRoots`]), so that every runner of a pool has the same version. The
//!   `exact-cache` salt keeps our entries invisible to `actions/cache`, whose versions hash
//!   `paths|compression|1.0`.
//! * **Slots** (`grow`, replacements): an entry's stack is its bases and their layers: a later
//!   generation's base under a key of its own (`<key>~g<n>`), a layer under a version of its
//!   own: [`crate::stack`] owns slots and their names.

use crate::archive::{ARCHIVE_FORMAT, Compression};
use crate::choice::Named;
use crate::stack::Slot;
use sha2::{Digest, Sha256};

pub use crate::ids::{Key, Version, normalize_prefix};

/// `grow-max-layers` is at most this.
pub use crate::stack::MAX_LAYERS;

/// The key and version slot `(generation, layer)` of `key`'s stack is stored under, when its
/// generation-0 base has `base_version` ([`Slot::names`]; outside the crate, the tests plant
/// slots with it).
pub fn slot_names(key: &Key, base_version: &Version, generation: u32, layer: u32) -> (Key, Version) {
    Slot::new(generation, layer).names(key, base_version)
}

pub fn cache_version<S: AsRef<str>>(paths: &[S], compression: Compression) -> Version {
    let lines: Vec<&str> = paths.iter().map(|p| p.as_ref().trim()).filter(|p| !p.is_empty()).collect();
    let text = format!(
        "exact-cache|archive-format={ARCHIVE_FORMAT}|compression={}|paths={}",
        compression.name(),
        lines.join("\n")
    );
    Version::from(hex::encode(Sha256::digest(text.as_bytes())))
}

/// The compression an entry of `version` was saved with, when its version is that of
/// `paths` with some compression (`None`: its `path` lines, or its archive format, differ).
pub fn compression_of<S: AsRef<str>>(version: &Version, paths: &[S]) -> Option<&'static str> {
    Compression::ALL.iter().find(|c| cache_version(paths, **c) == *version).map(|c| c.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_recipe_is_frozen() {
        // printf 'exact-cache|archive-format=1|compression=zstd|paths=out\n~/.cache/x' | sha256sum
        assert_eq!(
            cache_version(&["out", " ~/.cache/x ", ""], Compression::Zstd),
            "314da7e86131f015ee05801b3f50a8394d4fe75ca1e4bdeb9cf32df2d99c440a"
        );
    }

    #[test]
    fn version_depends_on_paths_order_and_compression() {
        let a = cache_version(&["a", "b"], Compression::Zstd);
        assert_ne!(a, cache_version(&["b", "a"], Compression::Zstd));
        assert_ne!(a, cache_version(&["a", "b"], Compression::Gzip));
    }

    #[test]
    fn the_compression_of_a_version_is_found_for_the_same_paths_only() {
        let gzip = cache_version(&["out"], Compression::Gzip);
        assert_eq!(compression_of(&gzip, &["out"]), Some("gzip"));
        assert_eq!(compression_of(&gzip, &["other"]), None);
        assert_eq!(compression_of(&"not-a-version".into(), &["out"]), None);
    }
}
