//! The manifest: every entry of an archive (path, kind, mode, size, sha256, link target), and
//! its verification against what was actually unpacked.
//!
//! Entry paths are `<root>` or `<root>/<relative path>`, where `<root>` is the index of the
//! `path` line the entry belongs to. The manifest is the last member of the archive, so it can
//! be written in the same pass that hashes the files; a truncated archive therefore has none.
//! A restore parses it as it streams, bounded by what the archive carried
//! ([`Manifest::from_reader_bounded`]).

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

pub const MANIFEST_FORMAT: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
        }
    }
}

/// How a `path` line resolved when the entry was saved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RootKind {
    Dir,
    File,
    Glob,
    Missing,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootRecord {
    pub line: String,
    pub kind: RootKind,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    pub path: String,
    pub kind: EntryKind,
    /// Permission bits only (`0o777` mask); setuid, setgid and sticky bits are never stored.
    pub mode: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub exact_cache_manifest: u32,
    pub key: String,
    pub roots: Vec<RootRecord>,
    pub entries: Vec<ManifestEntry>,
    /// Where the entry sits in its key's stack (`grow`); absent for a generation-0 base, so
    /// manifests of entries saved before layers existed read as bases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<StackSlot>,
    /// How long what this entry adds took to make; absent in entries saved before it was
    /// recorded ("not recorded"), and read as absent when it is not a [`Generation`] at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<Generation>,
}

/// What an entry took to make, as its save measured it (or the `generation-seconds` input said).
/// A step could write anything into an entry: [`Generation::plausible`] is what may be shown as
/// a saving.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generation {
    pub millis: i64,
    /// When the save recorded it, in seconds since the epoch.
    pub recorded: i64,
    /// The ref of the job that saved it, when it ran on Actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#ref: Option<String>,
    /// `true` when the `generation-seconds` input gave it, rather than the save measuring it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub given: bool,
}

impl Generation {
    /// The longest generation time shown as a saving: longer is not a measurement of one job.
    pub const MAX_MILLIS: i64 = 3 * 24 * 3600 * 1000;

    /// The duration, when it can be one job's generation time (0 to [`Self::MAX_MILLIS`]).
    pub fn plausible(&self) -> Option<std::time::Duration> {
        (0..=Self::MAX_MILLIS).contains(&self.millis).then(|| std::time::Duration::from_millis(self.millis as u64))
    }

    /// The ref, when it reads as one: at most 255 characters, none of them a control character
    /// (a forged ref is left out rather than shown).
    pub fn plausible_ref(&self) -> Option<&str> {
        self.r#ref.as_deref().filter(|r| !r.is_empty() && r.len() <= 255 && !r.chars().any(char::is_control))
    }

    /// Read leniently: a value that is not a generation record is no record, never a damaged
    /// entry. A record is an object (serde would also read an array such as `[1,2]` as one,
    /// field by field: that is no figure).
    pub fn from_value(value: serde_json::Value) -> Option<Generation> {
        value.is_object().then(|| serde_json::from_value(value).ok()).flatten()
    }
}

/// The record of a slot of a stack (the base of a generation, `layer` 0, or one of its layers), as
/// a manifest carries it; `crate::stack::Slot` is the slot itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackSlot {
    pub generation: u32,
    pub layer: u32,
    /// A layer's parent: the [`Manifest::digest`] of the slot below it, so a layer applies only
    /// on top of exactly what it was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// Where an entry lies: the index of the `path` root it belongs to, and its path relative to
/// that root (empty for the root itself). As text (the manifest's `path`, the archive member's
/// name) it is `<root>` or `<root>/<rel>`: [`EntryPath::parse`] reads it, `Display` writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryPath<'a> {
    pub root: usize,
    pub rel: &'a str,
}

impl<'a> EntryPath<'a> {
    /// The most digits a root index has in an entry path.
    const MAX_ROOT_DIGITS: usize = 6;

    pub fn new(root: usize, rel: &'a str) -> Self {
        Self { root, rel }
    }

    /// `<root>` or `<root>/<rel>`, where `<root>` is 1 to 6 ASCII digits; `None` otherwise. The
    /// relative path is not checked here (an archive's names are, in `archive`).
    pub fn parse(text: &'a str) -> Option<Self> {
        let (root, rel) = text.split_once('/').unwrap_or((text, ""));
        if root.is_empty() || root.len() > Self::MAX_ROOT_DIGITS || !root.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(Self { root: root.parse().expect("digits"), rel })
    }
}

impl fmt::Display for EntryPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rel.is_empty() { write!(f, "{}", self.root) } else { write!(f, "{}/{}", self.root, self.rel) }
    }
}

impl ManifestEntry {
    /// Where the entry lies; `None` for a path no archive could name (a manifest checked
    /// against its archive has none).
    pub fn entry_path(&self) -> Option<EntryPath<'_>> {
        EntryPath::parse(&self.path)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error("`{path}` is in the archive but not in the manifest")]
    Extra { path: String },
    #[error("`{path}` is listed in the manifest but missing from the archive")]
    Missing { path: String },
    #[error("`{path}`: {field} is {actual} in the archive but {expected} in the manifest")]
    Differs { path: String, field: &'static str, expected: String, actual: String },
    #[error("manifest lists `{path}` twice")]
    Duplicate { path: String },
    #[error("manifest is for key `{manifest}`, expected `{expected}`")]
    Key { manifest: String, expected: String },
    #[error("manifest has {manifest} path roots, expected {expected}")]
    Roots { manifest: usize, expected: usize },
    #[error("manifest format {0} is not supported")]
    Format(u32),
}

impl Manifest {
    /// Parse a manifest from `reader` as it streams (never the whole text in memory), refusing
    /// it as soon as it lists more than `max_entries` entries; room for `max_entries` is
    /// reserved at once, so a manifest of that many entries never reallocates.
    pub fn from_reader_bounded(reader: impl std::io::Read, max_entries: usize) -> serde_json::Result<Manifest> {
        let mut de = serde_json::Deserializer::from_reader(reader);
        let manifest = Bounded { max_entries }.deserialize(&mut de)?;
        de.end()?;
        Ok(manifest)
    }

    /// SHA-256 hex of the manifest as serialized: a layer's [`StackSlot::parent`].
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(serde_json::to_vec(self).expect("manifests always serialize")))
    }

    /// Check the manifest's own header against what the restore expects.
    pub fn check_header(&self, key: &str, roots: usize) -> Result<(), Mismatch> {
        if self.exact_cache_manifest != MANIFEST_FORMAT {
            return Err(Mismatch::Format(self.exact_cache_manifest));
        }
        if self.key != key {
            return Err(Mismatch::Key { manifest: self.key.clone(), expected: key.to_owned() });
        }
        if self.roots.len() != roots {
            return Err(Mismatch::Roots { manifest: self.roots.len(), expected: roots });
        }
        Ok(())
    }

    /// Every entry of `actual` must be in the manifest with identical fields, and every
    /// manifest entry must be in `actual`.
    pub fn verify(&self, actual: &[ManifestEntry]) -> Result<(), Mismatch> {
        let mut expected: HashMap<&str, &ManifestEntry> = HashMap::with_capacity(self.entries.len());
        for e in &self.entries {
            if expected.insert(e.path.as_str(), e).is_some() {
                return Err(Mismatch::Duplicate { path: e.path.clone() });
            }
        }
        for a in actual {
            let Some(e) = expected.remove(a.path.as_str()) else {
                return Err(Mismatch::Extra { path: a.path.clone() });
            };
            let differs = |field, expected: String, actual: String| Mismatch::Differs {
                path: a.path.clone(),
                field,
                expected,
                actual,
            };
            if e.kind != a.kind {
                return Err(differs("kind", e.kind.as_str().into(), a.kind.as_str().into()));
            }
            if e.mode != a.mode {
                return Err(differs("mode", format!("{:o}", e.mode), format!("{:o}", a.mode)));
            }
            if e.size != a.size {
                return Err(differs("size", e.size.to_string(), a.size.to_string()));
            }
            if e.sha256 != a.sha256 {
                let show = |s: &Option<String>| s.clone().unwrap_or_else(|| "none".into());
                return Err(differs("sha256", show(&e.sha256), show(&a.sha256)));
            }
            if e.target != a.target {
                let show = |s: &Option<String>| s.clone().unwrap_or_else(|| "none".into());
                return Err(differs("link target", show(&e.target), show(&a.target)));
            }
        }
        if let Some(missing) = self.entries.iter().find(|e| expected.contains_key(e.path.as_str())) {
            return Err(Mismatch::Missing { path: missing.path.clone() });
        }
        Ok(())
    }
}

/// A manifest of at most `max_entries` entries (the top level by hand, every part below by its
/// derived `Deserialize`).
struct Bounded {
    max_entries: usize,
}

impl<'de> DeserializeSeed<'de> for Bounded {
    type Value = Manifest;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Manifest, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Bounded {
    type Value = Manifest;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a manifest object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Manifest, A::Error> {
        let (mut format, mut key, mut roots, mut entries, mut stack) = (None, None, None, None, None);
        let mut generation = None;
        fn once<T, E: de::Error>(slot: &mut Option<T>, name: &'static str, value: T) -> Result<(), E> {
            if slot.replace(value).is_some() {
                return Err(E::duplicate_field(name));
            }
            Ok(())
        }
        while let Some(name) = map.next_key::<String>()? {
            match name.as_str() {
                "exact_cache_manifest" => once(&mut format, "exact_cache_manifest", map.next_value()?)?,
                "key" => once(&mut key, "key", map.next_value()?)?,
                "roots" => once(&mut roots, "roots", map.next_value()?)?,
                "entries" => once(&mut entries, "entries", map.next_value_seed(Entries(self.max_entries))?)?,
                "stack" => once(&mut stack, "stack", map.next_value::<Option<StackSlot>>()?)?,
                "generation" => once(&mut generation, "generation", map.next_value::<serde_json::Value>()?)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let missing = de::Error::missing_field;
        Ok(Manifest {
            exact_cache_manifest: format.ok_or_else(|| missing("exact_cache_manifest"))?,
            key: key.ok_or_else(|| missing("key"))?,
            roots: roots.ok_or_else(|| missing("roots"))?,
            entries: entries.ok_or_else(|| missing("entries"))?,
            stack: stack.flatten(),
            generation: generation.and_then(Generation::from_value),
        })
    }
}

/// The `entries` array, at most `.0` of them.
struct Entries(usize);

impl<'de> DeserializeSeed<'de> for Entries {
    type Value = Vec<ManifestEntry>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Entries {
    type Value = Vec<ManifestEntry>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "at most {} entries", self.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::with_capacity(self.0);
        while let Some(entry) = seq.next_element::<ManifestEntry>()? {
            if entries.len() == self.0 {
                return Err(de::Error::custom(format_args!(
                    "it lists more than {} entries, and the archive holds {}",
                    self.0,
                    self.0.saturating_sub(1)
                )));
            }
            entries.push(entry);
        }
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, sha: &str) -> ManifestEntry {
        ManifestEntry {
            path: path.into(),
            kind: EntryKind::File,
            mode: 0o644,
            size: 3,
            sha256: Some(sha.into()),
            target: None,
        }
    }

    fn manifest(entries: Vec<ManifestEntry>) -> Manifest {
        Manifest {
            exact_cache_manifest: MANIFEST_FORMAT,
            key: "k".into(),
            roots: vec![],
            entries,
            stack: None,
            generation: None,
        }
    }

    #[test]
    fn an_entry_path_reads_back_what_it_writes() {
        for (root, rel, text) in [(0, "", "0"), (3, "a/b.txt", "3/a/b.txt")] {
            assert_eq!(EntryPath::new(root, rel).to_string(), text);
            assert_eq!(EntryPath::parse(text), Some(EntryPath::new(root, rel)));
        }
        for bad in ["", "/a", "x/a", "+1/a", "1234567/a"] {
            assert_eq!(EntryPath::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn verify_names_extras_missing_and_differences() {
        let m = manifest(vec![file("0/a", "aa"), file("0/b", "bb")]);
        assert_eq!(m.verify(&[file("0/a", "aa"), file("0/b", "bb")]), Ok(()));
        assert_eq!(m.verify(&[file("0/a", "aa")]), Err(Mismatch::Missing { path: "0/b".into() }));
        assert_eq!(
            m.verify(&[file("0/a", "aa"), file("0/b", "bb"), file("0/c", "cc")]),
            Err(Mismatch::Extra { path: "0/c".into() })
        );
        let err = m.verify(&[file("0/a", "aa"), file("0/b", "xx")]).unwrap_err();
        assert_eq!(err.to_string(), "`0/b`: sha256 is xx in the archive but bb in the manifest");
        let mut exec = file("0/a", "aa");
        exec.mode = 0o755;
        assert!(matches!(m.verify(&[exec, file("0/b", "bb")]), Err(Mismatch::Differs { field: "mode", .. })));
        let dup = manifest(vec![file("0/a", "aa"), file("0/a", "aa")]);
        assert!(matches!(dup.verify(&[]), Err(Mismatch::Duplicate { .. })));
    }

    #[test]
    fn a_bounded_parse_reads_what_serde_writes_and_no_more_entries_than_allowed() {
        let mut m = manifest(vec![file("0/a", "aa"), file("0/b", "bb")]);
        m.roots = vec![RootRecord { line: "out".into(), kind: RootKind::Dir }];
        m.stack = Some(StackSlot { generation: 1, layer: 2, parent: Some("p".into()) });
        let json = serde_json::to_vec(&m).unwrap();
        assert_eq!(Manifest::from_reader_bounded(&json[..], 2).unwrap(), m);
        assert_eq!(Manifest::from_reader_bounded(&json[..], 2).unwrap().entries.capacity(), 2);
        let e = Manifest::from_reader_bounded(&json[..], 1).unwrap_err();
        assert!(e.to_string().starts_with("it lists more than 1 entries, and the archive holds 0"), "{e}");
        // Unknown fields are skipped, as by the derived form; missing and repeated ones are errors.
        let extra = br#"{"exact_cache_manifest":1,"key":"k","roots":[],"entries":[],"later":{"x":[1]}}"#;
        assert_eq!(Manifest::from_reader_bounded(&extra[..], 0).unwrap(), manifest(vec![]));
        assert!(Manifest::from_reader_bounded(&br#"{"key":"k","roots":[],"entries":[]}"#[..], 0).is_err());
        let twice = br#"{"exact_cache_manifest":1,"key":"k","key":"j","roots":[],"entries":[]}"#;
        assert!(Manifest::from_reader_bounded(&twice[..], 0).is_err());
        assert!(Manifest::from_reader_bounded(&b"{\"exact_cache_manifest\":1} x"[..], 0).is_err());
    }

    #[test]
    fn a_generation_reads_back_and_a_forged_one_is_no_record() {
        let mut m = manifest(vec![]);
        m.generation = Some(Generation { millis: 20_700, recorded: 1_796_000_000, r#ref: None, given: false });
        let json = serde_json::to_vec(&m).unwrap();
        assert_eq!(Manifest::from_reader_bounded(&json[..], 0).unwrap(), m);
        let plausible = m.generation.as_ref().unwrap().plausible();
        assert_eq!(plausible, Some(std::time::Duration::from_millis(20_700)));
        // Not a record at all: the manifest still reads, without one.
        let odd = br#"{"exact_cache_manifest":1,"key":"k","roots":[],"entries":[],"generation":"4 days"}"#;
        assert_eq!(Manifest::from_reader_bounded(&odd[..], 0).unwrap().generation, None);
        // Nor an array (serde reads one as a struct, field by field), nor a figure that is no
        // integer.
        for not_a_record in ["[1,2]", "[20700,1796000000]", r#"{"millis":1.5,"recorded":0}"#, r#"{"millis":[1]}"#] {
            let json = format!(
                r#"{{"exact_cache_manifest":1,"key":"k","roots":[],"entries":[],"generation":{not_a_record}}}"#
            );
            assert_eq!(Manifest::from_reader_bounded(json.as_bytes(), 0).unwrap().generation, None, "{not_a_record}");
            assert_eq!(Generation::from_value(serde_json::from_str(not_a_record).unwrap()), None, "{not_a_record}");
        }
        for absurd in [-1, Generation::MAX_MILLIS + 1, i64::MAX] {
            let g = Generation {
                millis: absurd,
                recorded: 0,
                r#ref: Some("refs/heads/x\n::warning::".into()),
                given: true,
            };
            assert_eq!(g.plausible(), None, "{absurd}");
        }
        let forged =
            Generation { millis: 1, recorded: 0, r#ref: Some("refs/heads/a\n::error::x".into()), given: false };
        assert_eq!(forged.plausible_ref(), None);
    }
}
