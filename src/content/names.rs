//! The names a pack is stored under, on every store: its key is `<prefix>-pack.<64 hex>` (the
//! hex is the pack's [`PackName`], the SHA-256 of its bytes), and on the cache services its
//! version is [`pack_version`], the same for every pack.
//!
//! No entry is ever mistaken for a pack, nor a pack for an entry:
//! - an entry's key is `<prefix>-<64 hex>` (or a later generation's `….g<n>`), with a prefix of
//!   `[a-z0-9._-]`; after its last `-` a pack key has `pack.` and 64 hex digits, which is
//!   neither, so no prefix's [`Key::is_of`] takes a pack key (`list`, `prune`, `explain` keep to
//!   `is_of`), and a pack key starts with no entry's key (a restore's lookups match keys that
//!   start with `<key>.g` or are `<key>`);
//! - the pack version is no entry's version (those hash `exact-cache|archive-format=…` or a
//!   stack slot's text), so even a lookup by a pack's key could not answer an entry.
//!
//! Packs are a prefix's own: prune of a prefix lists the prefix's entries and its packs
//! (`<prefix>-pack.`), and never another prefix's. The key uses only characters every store
//! keeps as they are (as entries' keys do).

use super::PackName;
use crate::keys::{Key, Version};
use sha2::{Digest, Sha256};

/// What a pack key adds to its prefix before the pack's hash.
pub const PACK_MARK: &str = "-pack.";

/// Format of the packs and content maps; part of [`pack_version`].
pub const PACK_FORMAT: u32 = 1;

/// `<prefix>-pack.<hex>`.
pub fn pack_key(prefix: &str, pack: &PackName) -> Key {
    Key::from(format!("{prefix}{PACK_MARK}{pack}"))
}

/// What every pack key of `prefix` starts with: the listing filter for its packs.
pub fn pack_key_start(prefix: &str) -> String {
    format!("{prefix}{PACK_MARK}")
}

/// The pack a key of `prefix` names, if it is a pack key of exactly that prefix.
pub fn pack_of(prefix: &str, key: &str) -> Option<PackName> {
    super::Hash::parse(key.strip_prefix(prefix)?.strip_prefix(PACK_MARK)?)
}

/// The version of every pack on the cache services: SHA-256 hex of
/// `exact-cache|pack-format=<n>`.
pub fn pack_version() -> Version {
    Version::from(hex::encode(Sha256::digest(format!("exact-cache|pack-format={PACK_FORMAT}").as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::Hash;

    #[test]
    fn pack_names_are_frozen() {
        let pack = Hash::of(b"pack");
        let key = pack_key("models", &pack);
        assert_eq!(key, format!("models-pack.{}", pack.to_hex()).as_str());
        // printf 'exact-cache|pack-format=1' | sha256sum
        assert_eq!(pack_version(), "2e35daebfda3ce119dc3a53bc1f53770371966b5332496e02954f8e3a3224b33");
        assert_eq!(pack_of("models", &key), Some(pack));
        assert_eq!(pack_of("model", &key), None);
        assert_eq!(pack_of("models", &format!("models-pack.{}x", pack.to_hex())), None);
        assert!(key.starts_with(&pack_key_start("models")));
    }

    #[test]
    fn no_prefix_takes_a_pack_key_for_an_entry_key_and_no_entry_key_starts_one() {
        let pack = Hash::of(b"pack");
        let digest = "a".repeat(64);
        for prefix in ["p", "p-pack", "p-pack.", "p.pack", "x-p", "a-b-c", "..", "-"] {
            let key = pack_key(prefix, &pack);
            // Every prefix a pack key could be split at, and the prefixes of other shapes.
            for cut in key.char_indices().map(|(i, _)| &key[..i]).chain([prefix, "p-pack"]) {
                assert!(!key.is_of(cut), "`{key}` read as an entry of `{cut}`");
            }
            let entry = Key::of(prefix, &digest);
            assert!(!key.starts_with(entry.as_str()) && !key.starts_with(&format!("{entry}.g")));
            assert_eq!(pack_of(prefix, &entry), None, "an entry key is no pack key");
        }
    }
}
