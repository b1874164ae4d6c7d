//! The two names an entry is stored under, as types, and their recipes. A [`Key`] and a
//! [`Version`] travel together, so the compiler catches a swapped pair; serde reads and writes
//! each as a plain string. Names that others made (a store's listing, a service's answer) are
//! taken as they are ([`From`]); a key from the user is checked ([`Key::parse`]).
//!
//! * **Key** = `<prefix>-<64 lowercase hex>` (see [`crate::fingerprint`]). All keys of one
//!   prefix have the same length, so no key is a prefix of another.
//! * **Version** (the service's second key) = SHA-256 hex of
//!   `exact-cache|archive-format=<n>|compression=<name>|paths=<lines joined by \n>`, where the
//!   lines are the `path` input as written (trimmed, blank lines dropped, order kept, a preset's
//!   directories appended), except that an absolute line below a place each runner of a pool has
//!   elsewhere is named by that place ([`crate::paths::VersionRoots`]). The `exact-cache` salt
//!   keeps our entries invisible to `actions/cache`, whose versions hash `paths|compression|1.0`.
//! * **Slots** (`grow`, replacements): a later generation's base is stored under a key of its
//!   own (`<key>.g<n>`), a layer under a version of its own; `crate::stack` owns slots.

use crate::archive::{ARCHIVE_FORMAT, Compression};
use crate::choice::Named;
use crate::stack::Slot;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::ops::Deref;

/// What the key of a later generation's base adds to its key, before the generation's number
/// (`crate::stack` owns generations).
pub const GENERATION_MARK: &str = ".g";
/// Room a key leaves for a later generation's mark and number (`.g9999`).
pub const GENERATION_ROOM: usize = 6;
/// Longest prefix that keeps a key, and a later generation's key, within the service's 512
/// characters.
pub const MAX_PREFIX_LEN: usize = 512 - 1 - 64 - GENERATION_ROOM;

/// An entry's key: ours are `<prefix>-<64 lowercase hex>`; a store may name others.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Key(String);

/// An entry's version: the SHA-256 hex of what the `path` lines and the compression make (or of
/// a slot of a stack).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Version(String);

impl Key {
    /// `<prefix>-<digest>`, the recipe's key.
    pub fn of(prefix: &str, digest: &str) -> Key {
        Key(format!("{prefix}-{digest}"))
    }

    /// A key given by the user (the `key` input): valid, or why not.
    pub fn parse(text: &str) -> Result<Key, String> {
        check_key(text)?;
        Ok(Key(text.to_owned()))
    }

    /// Whether this is a key of exactly `prefix`: `<prefix>-<64 lowercase hex>`, or a later
    /// generation's base key of one (`.g` and 1 to 4 digits after it); so not a key of a longer
    /// prefix that starts with `prefix`.
    pub fn is_of(&self, prefix: &str) -> bool {
        is_key_of(prefix, &self.0)
    }

    /// The prefix of one of our keys (`<prefix>-<64 hex>`, or a later generation's).
    pub fn prefix(&self) -> Option<&str> {
        let (prefix, _) = self.0.rsplit_once('-')?;
        is_key_of(prefix, &self.0).then_some(prefix)
    }
}

/// `as_str`, `Display`, `Deref` to `str`, and taking text as it is, for both names.
macro_rules! text_name {
    ($name:ident) => {
        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> Self {
                Self(text)
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                Self(text.to_owned())
            }
        }

        impl From<&String> for $name {
            fn from(text: &String) -> Self {
                Self(text.clone())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

text_name!(Key);
text_name!(Version);

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
fn is_digest(digest: &str) -> bool {
    digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `key` is a key of exactly `prefix` ([`Key::is_of`]).
fn is_key_of(prefix: &str, key: &str) -> bool {
    let Some(rest) = key.strip_prefix(prefix).and_then(|rest| rest.strip_prefix('-')) else { return false };
    let (digest, generation) = match rest.split_once(GENERATION_MARK) {
        Some((digest, n)) => (digest, Some(n)),
        None => (rest, None),
    };
    is_digest(digest) && generation.is_none_or(|n| (1..=4).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A valid explicit key: a valid prefix, `-`, and 64 lowercase hex characters.
fn check_key(key: &str) -> Result<(), String> {
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

/// The key and version slot `(generation, layer)` of `key`'s stack is stored under, when its
/// generation-0 base has `base_version` (`Slot::names`; outside the crate, the tests plant
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
    fn prefixes_and_keys_are_validated() {
        assert_eq!(normalize_prefix(" PT-Fixtures_v4.1 ").unwrap(), "pt-fixtures_v4.1");
        assert!(normalize_prefix("a,b").unwrap_err().contains("`,`"));
        assert!(normalize_prefix("a b").is_err());
        assert!(normalize_prefix(&"x".repeat(MAX_PREFIX_LEN + 1)).is_err());
        let key = format!("p-{}", "a".repeat(64));
        assert!(check_key(&key).is_ok());
        assert_eq!(Key::parse(&key).unwrap(), Key::of("p", &"a".repeat(64)));
        assert!(check_key(&key.to_uppercase()).is_err());
        assert!(Key::parse("p-abc").is_err());
        assert!(Key::from(key.as_str()).is_of("p"));
        assert!(!Key::from(format!("p-x-{}", "a".repeat(64))).is_of("p"), "a longer prefix is not ours");
        assert!(!Key::from(key.to_uppercase()).is_of("p"));
        assert!(Key::from(format!("{key}.g12")).is_of("p"), "a later generation's base");
        assert!(!Key::from(format!("{key}.g")).is_of("p"));
        assert!(!Key::from(format!("{key}.g12345")).is_of("p"));
    }

    #[test]
    fn keys_and_versions_are_plain_strings_in_json() {
        let key = Key::from("p-1");
        assert_eq!(serde_json::to_string(&key).unwrap(), r#""p-1""#);
        assert_eq!(serde_json::from_str::<Version>(r#""v""#).unwrap(), Version::from("v"));
        assert_eq!((key.as_str(), key.to_string()), ("p-1", "p-1".to_owned()));
    }

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
