//! Key and version recipes, and validation of user-supplied prefixes and keys.
//!
//! * **Key** = `<prefix>-<64 lowercase hex>` (see [`crate::fingerprint`]). All keys of one
//!   prefix have the same length, so no key is a prefix of another.
//! * **Version** (the service's second key) = SHA-256 hex of
//!   `exact-cache|archive-format=<n>|compression=<name>|paths=<lines joined by \n>`, where the
//!   lines are the `path` input as written (trimmed, blank lines dropped, order kept). The
//!   `exact-cache` salt keeps our entries invisible to `actions/cache`, whose versions hash
//!   `paths|compression|1.0`.
//! * **Slots** (`grow`): an entry's stack is the base and its layers, all under the same key, each
//!   under a version of its own: [`crate::stack`] owns slots and their versions.

use crate::archive::{ARCHIVE_FORMAT, Compression};
use crate::choice::Named;
use crate::stack::Slot;
use sha2::{Digest, Sha256};

/// `grow-max-layers` is at most this.
pub use crate::stack::MAX_LAYERS;

/// The version of slot `(generation, layer)` of the stack whose generation-0 base has
/// `base_version` ([`Slot::version`]; outside the crate, the tests plant slots with it).
pub fn slot_version(base_version: &str, generation: u32, layer: u32) -> String {
    Slot::new(generation, layer).version(base_version)
}

/// Longest prefix that keeps a key within the service's 512 characters.
pub const MAX_PREFIX_LEN: usize = 512 - 1 - 64;

pub fn cache_version<S: AsRef<str>>(paths: &[S], compression: Compression) -> String {
    let lines: Vec<&str> = paths.iter().map(|p| p.as_ref().trim()).filter(|p| !p.is_empty()).collect();
    let text = format!(
        "exact-cache|archive-format={ARCHIVE_FORMAT}|compression={}|paths={}",
        compression.name(),
        lines.join("\n")
    );
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The compression an entry of `version` was saved with, when its version is that of
/// `paths` with some compression (`None`: its `path` lines, or its archive format, differ).
pub fn compression_of<S: AsRef<str>>(version: &str, paths: &[S]) -> Option<&'static str> {
    Compression::ALL.iter().find(|c| cache_version(paths, **c) == version).map(|c| c.name())
}

/// A valid, lowercased prefix, or why not.
pub fn normalize_prefix(prefix: &str) -> Result<String, String> {
    let prefix = prefix.trim();
    if prefix.is_empty() {
        return Err("is empty".into());
    }
    if prefix.len() > MAX_PREFIX_LEN {
        return Err(format!("is {} characters long; the limit is {MAX_PREFIX_LEN}", prefix.len()));
    }
    if let Some(bad) = prefix.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))) {
        return Err(format!("contains `{bad}`; use ASCII letters, digits, `-`, `.` and `_`"));
    }
    Ok(prefix.to_ascii_lowercase())
}

/// Whether `digest` is a fingerprint digest: 64 lowercase hex characters.
pub fn is_digest(digest: &str) -> bool {
    digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `key` is a key of exactly `prefix`: `<prefix>-<64 lowercase hex>` (so not a key of a
/// longer prefix that starts with `prefix`).
pub fn is_key_of(prefix: &str, key: &str) -> bool {
    key.strip_prefix(prefix).and_then(|rest| rest.strip_prefix('-')).is_some_and(is_digest)
}

/// A valid explicit key: a valid prefix, `-`, and 64 lowercase hex characters.
pub fn check_key(key: &str) -> Result<(), String> {
    let Some((prefix, digest)) = key.rsplit_once('-') else {
        return Err("is not of the form `<prefix>-<64 hex>`".into());
    };
    if !is_digest(digest) {
        return Err("does not end in `-<64 lowercase hex>`".into());
    }
    let normalized = normalize_prefix(prefix)?;
    if normalized != prefix {
        return Err("must be lowercase".into());
    }
    Ok(())
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
        assert_eq!(compression_of("not-a-version", &["out"]), None);
    }

    #[test]
    fn prefixes_and_keys_are_validated() {
        assert_eq!(normalize_prefix(" PT-Fixtures_v4.1 ").unwrap(), "pt-fixtures_v4.1");
        assert!(normalize_prefix("a,b").unwrap_err().contains("`,`"));
        assert!(normalize_prefix("a b").is_err());
        assert!(normalize_prefix(&"x".repeat(MAX_PREFIX_LEN + 1)).is_err());
        let key = format!("p-{}", "a".repeat(64));
        assert!(check_key(&key).is_ok());
        assert!(check_key(&key.to_uppercase()).is_err());
        assert!(check_key("p-abc").is_err());
        assert!(is_key_of("p", &key));
        assert!(!is_key_of("p", &format!("p-x-{}", "a".repeat(64))), "a longer prefix is not ours");
        assert!(!is_key_of("p", &key.to_uppercase()));
    }
}
