//! Content stored once: the blobs of an entry's files in content-addressed packs, shared by every
//! entry that holds them (guarantee 14, docs/content.md).
//!
//! This module owns the content core, independent of any store:
//! - what a blob is ([`Hash`]: the SHA-256 of its uncompressed bytes) and how files become blobs
//!   ([`chunk`]: whole files, and content-defined chunks within large ones);
//! - the pack format and its writer ([`pack`]: each blob one zstd frame, packs of ~64 MiB named
//!   by the SHA-256 of their bytes) and the names a pack is stored under ([`names`]);
//! - an entry's content map ([`map`]: where each blob of its files lies), written beside its
//!   manifest, which stays the authority on what the files are;
//! - what a save uploads ([`save`]: the blobs no readable entry's live pack holds) and what a
//!   restore fetches and writes ([`restore`]: what is not already in place, by byte ranges,
//!   verified blob by blob, all or nothing);
//! - what every store must offer for packs ([`store::PackStore`]), with the local directory's
//!   implementation;
//! - prune's rule for packs ([`prune`]: a pack goes only when no entry references it and no save
//!   in progress can).
//!
//! It knows nothing of archives, stores' protocols or commands: the archive writes and reads the
//! content map as a member, each store implements [`store::PackStore`], and the commands decide
//! which manifests a save may reuse content from.

pub mod chunk;
#[cfg(test)]
mod flow_tests;
pub mod map;
pub mod names;
pub mod pack;
pub mod prune;
pub mod restore;
pub mod save;
pub mod store;
#[cfg(test)]
pub(crate) mod testing;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};
use std::fmt;

/// A SHA-256 digest: a blob's (of its uncompressed bytes), a file's, or a pack's (of its bytes).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hash(pub [u8; 32]);

impl Hash {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Hash {
        Hash(Sha256::digest(bytes).into())
    }

    /// The digest of the empty content: an empty file needs no blob.
    pub fn empty() -> Hash {
        Hash::of(&[])
    }

    /// 64 lowercase hex digits, or `None`.
    pub fn parse(hex_text: &str) -> Option<Hash> {
        if hex_text.len() != 64 || !hex_text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return None;
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_text, &mut out).ok()?;
        Some(Hash(out))
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl From<Sha256> for Hash {
    fn from(hasher: Sha256) -> Hash {
        Hash(hasher.finalize().into())
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}…", &self.to_hex()[..12])
    }
}

impl Serialize for Hash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Hash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Hash, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Hash::parse(&text).ok_or_else(|| serde::de::Error::custom("not a SHA-256 digest (64 lowercase hex digits)"))
    }
}

/// A pack's name: the SHA-256 of its bytes.
pub type PackName = Hash;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_reads_back_only_what_it_writes() {
        let h = Hash::of(b"abc");
        assert_eq!(h.to_hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(Hash::parse(&h.to_hex()), Some(h));
        assert_eq!(serde_json::from_str::<Hash>(&serde_json::to_string(&h).unwrap()).unwrap(), h);
        for bad in ["", "abc", &h.to_hex().to_uppercase(), &format!("{}0", h.to_hex())] {
            assert_eq!(Hash::parse(bad), None, "{bad}");
        }
        assert!(serde_json::from_str::<Hash>("\"zz\"").is_err());
    }
}
