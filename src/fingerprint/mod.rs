//! The fingerprint: every fact that decides whether a cached native artifact is valid here,
//! as named components of labelled values, and the key derived from it.
//!
//! Components and their labels → values:
//!
//! - `files`: path → `<sha256> x|-`, or `symlink <target> -> <sha256> x|-` (the `hash-files`
//!   matches and the module files their imports reach). A path is workspace-relative, `~/…` or
//!   absolute; `x` / `-` is the executable bit.
//! - `imports`: module file reached through imports (not itself in `hash-files`) → the files that
//!   import it, `, `-separated; `(computed name)` after one that loads its package's every module
//!   by a computed name, `(import *)` after a `*` import of a package whose `__all__` is computed.
//! - `env`: variable name → value (absent when unset). `commands`: command line → its stdout.
//! - `native.<facet>`: one per facet the `native` input names (`facets/` says what each records).
//! - `python.interpreter`: `implementation`, `version`, `abi`; `python.dists`: normalized
//!   distribution name → version; `variant`: `variant`.
//! - `torch`: `torch`, `triton`, `cuda`, `hip`, `cxx11-abi`, `device<i>` (`torch-inductor`).
//!
//! Deliberately **not** included: mtimes, absolute checkout paths, directory or glob order, the
//! order of `hash-env`, and anything about exact-cache's own build.
//!
//! ## Canonical encoding (format 1)
//! Integers are u64 little-endian; `str(s)` is `len(s)` followed by the UTF-8 bytes.
//! ```text
//! str("exact-cache fingerprint v1")
//! u64(number of components)
//! for each component, sorted bytewise by name:
//!     str(name) u64(number of values)
//!     for each value, sorted bytewise by label:
//!         str(label) then 0x00 (absent) or 0x01 str(value)
//! ```
//! The digest is the SHA-256 of that encoding; the key is `<prefix>-<64 lowercase hex>`.
//! `tests/vectors/` freezes the encoding with digests computed by an independent Python
//! implementation; any change to what enters a key ships with a test.

pub mod collect;
mod facets;
mod files;
mod hwcaps;
mod imports;
mod pyscan;
mod python;
pub mod system;
mod torch;

pub use collect::{EnvPatterns, FingerprintSpec, collect, collect_noted, is_path_value};
pub use facets::{Facet, NATIVE_DEFAULT, NATIVE_DESCRIPTION, aarch64_isa, x86_64_level};
pub use files::sha256_file;
pub use hwcaps::HwCaps;
pub use imports::{SCAN_LIMIT, Trouble as ImportTrouble};
pub use pyscan::Unfollowed;
pub use system::{CommandOutput, CpuFacts, HostSystem, OsFacts, System};

use crate::keys::{Key, Version};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::PathBuf;

const ENCODING_MAGIC: &str = "exact-cache fingerprint v1";
/// Version of the fingerprint JSON document.
pub const RECORD_FORMAT: u32 = 1;

/// One value of a component: a recorded fact, or the fact that it is absent.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    Absent,
    Text(String),
}

impl Value {
    pub fn text(s: impl Into<String>) -> Self {
        Value::Text(s.into())
    }

    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Absent => None,
            Value::Text(s) => Some(s),
        }
    }

    /// How the value reads in logs and the summary.
    pub fn display(&self) -> &str {
        self.as_text().unwrap_or("absent")
    }
}

impl Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Absent => s.serialize_none(),
            Value::Text(t) => s.serialize_str(t),
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<String>::deserialize(d)? {
            None => Value::Absent,
            Some(t) => Value::Text(t),
        })
    }
}

/// What collecting a fingerprint has to say besides the values: typed, rendered by
/// `commands::render::fingerprint`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// A Python file (its label) whose imports are not all followed: a warning.
    Imports { file: String, trouble: ImportTrouble },
    /// A distribution installed in editable mode from the workspace (`location`, a label), left
    /// out of `python.dists`.
    EditableLeftOut { name: String, version: String, location: String },
}

pub type Component = BTreeMap<String, Value>;

/// The components exact-cache collects (as the module doc lists them). [`ComponentName::name`]
/// is the name in the JSON and the key; fingerprints of other versions may hold others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComponentName {
    Files,
    Imports,
    Env,
    Commands,
    Native(Facet),
    PythonInterpreter,
    PythonDists,
    Variant,
    Torch,
}

impl ComponentName {
    pub fn name(self) -> &'static str {
        match self {
            ComponentName::Files => "files",
            ComponentName::Imports => "imports",
            ComponentName::Env => "env",
            ComponentName::Commands => "commands",
            ComponentName::Native(facet) => facet.component_name(),
            ComponentName::PythonInterpreter => "python.interpreter",
            ComponentName::PythonDists => "python.dists",
            ComponentName::Variant => "variant",
            ComponentName::Torch => "torch",
        }
    }

    /// The component named `name`, if it is one of ours.
    pub fn parse(name: &str) -> Option<Self> {
        let fixed = [
            ComponentName::Files,
            ComponentName::Imports,
            ComponentName::Env,
            ComponentName::Commands,
            ComponentName::PythonInterpreter,
            ComponentName::PythonDists,
            ComponentName::Variant,
            ComponentName::Torch,
        ];
        fixed.into_iter().chain(Facet::ALL.map(ComponentName::Native)).find(|c| c.name() == name)
    }

    /// Whether `label` is the one fact of a single-fact component (`native.arch`'s `arch`, the
    /// ISA level), which reads without its label.
    pub fn is_single_fact(self, label: &str) -> bool {
        match self {
            ComponentName::Native(facet) => facet.shows_unlabelled(label),
            ComponentName::Variant => label == "variant",
            _ => false,
        }
    }
}

/// Named components; ordering is canonical by construction (B-tree maps).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fingerprint {
    pub components: BTreeMap<String, Component>,
}

impl Fingerprint {
    pub fn insert(&mut self, name: &str, component: Component) {
        self.components.insert(name.to_owned(), component);
    }

    /// The canonical byte encoding (see the module documentation).
    pub fn encode(&self) -> Vec<u8> {
        fn put_u64(out: &mut Vec<u8>, n: usize) {
            out.extend_from_slice(&(n as u64).to_le_bytes());
        }
        fn put_str(out: &mut Vec<u8>, s: &str) {
            put_u64(out, s.len());
            out.extend_from_slice(s.as_bytes());
        }
        let mut out = Vec::new();
        put_str(&mut out, ENCODING_MAGIC);
        put_u64(&mut out, self.components.len());
        for (name, values) in &self.components {
            put_str(&mut out, name);
            put_u64(&mut out, values.len());
            for (label, value) in values {
                put_str(&mut out, label);
                match value {
                    Value::Absent => out.push(0),
                    Value::Text(t) => {
                        out.push(1);
                        put_str(&mut out, t);
                    }
                }
            }
        }
        out
    }

    /// SHA-256 of the canonical encoding, 64 lowercase hex characters.
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.encode()))
    }

    /// Every value that differs between `self` (older) and `newer`, in canonical order.
    pub fn diff(&self, newer: &Fingerprint) -> Vec<Change> {
        let mut changes = Vec::new();
        let empty = Component::new();
        let names: std::collections::BTreeSet<&String> =
            self.components.keys().chain(newer.components.keys()).collect();
        for name in names {
            let old = self.components.get(name.as_str()).unwrap_or(&empty);
            let new = newer.components.get(name.as_str()).unwrap_or(&empty);
            let labels: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
            for label in labels {
                let (a, b) = (old.get(label.as_str()), new.get(label.as_str()));
                if a != b {
                    changes.push(Change {
                        component: name.to_string(),
                        label: label.to_string(),
                        old: a.cloned(),
                        new: b.cloned(),
                    });
                }
            }
        }
        changes
    }
}

/// One differing value between two fingerprints; `None` means the label is not there at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub component: String,
    pub label: String,
    pub old: Option<Value>,
    pub new: Option<Value>,
}

/// The fingerprint document written to `fingerprint-file` and carried first in every archive.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FingerprintRecord {
    pub exact_cache_fingerprint: u32,
    pub key: Key,
    pub prefix: String,
    pub digest: String,
    /// The entry's version (its `path` lines and compression).
    pub version: Version,
    /// Informational; never hashed.
    pub tool: String,
    pub components: Fingerprint,
}

impl FingerprintRecord {
    pub fn new(prefix: &str, version: &Version, fingerprint: Fingerprint) -> Self {
        let digest = fingerprint.digest();
        Self {
            exact_cache_fingerprint: RECORD_FORMAT,
            key: Key::of(prefix, &digest),
            prefix: prefix.to_owned(),
            digest,
            version: version.clone(),
            tool: concat!("exact-cache ", env!("CARGO_PKG_VERSION")).to_owned(),
            components: fingerprint,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("fingerprint records always serialize")
    }

    /// Parse a record and check that its digest and key match its components.
    pub fn from_json(bytes: &[u8]) -> Result<Self, FingerprintError> {
        let record: Self = serde_json::from_slice(bytes).map_err(FingerprintError::BadRecord)?;
        if record.exact_cache_fingerprint != RECORD_FORMAT {
            return Err(FingerprintError::RecordFormat(record.exact_cache_fingerprint));
        }
        let digest = record.components.digest();
        if digest != record.digest || record.key != Key::of(&record.prefix, &digest) {
            return Err(FingerprintError::RecordDigest { key: record.key });
        }
        Ok(record)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FingerprintError {
    #[error("in `hash-files`")]
    HashFilesPath(#[source] crate::paths::PathError),
    #[error("`hash-files` pattern `{pattern}` matched no files")]
    NoMatch { pattern: String },
    #[error("cannot read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`hash-commands` command `{command}` failed: {detail}")]
    CommandFailed { command: String, detail: String },
    #[error("cannot run `hash-commands` command `{command}`")]
    CommandSpawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("compiler `{compiler}` (named in `compilers`) not found")]
    CompilerNotFound { compiler: String },
    #[error("cannot run compiler `{compiler}` (named in `compilers`)")]
    CompilerSpawn {
        compiler: String,
        #[source]
        source: std::io::Error,
    },
    #[error("python interpreter `{python}` not found")]
    PythonNotFound { python: String },
    #[error("python interpreter `{python}` failed: {detail}")]
    PythonFailed { python: String, detail: String },
    #[error(
        "input `python`: interpreter `{python}` has no torch, and `preset: torch-inductor` fingerprints the torch \
         that compiles the kernels; set `python` to the interpreter that runs your torch code (such as \
         `.venv/bin/python`), or install torch into `{python}` before this step"
    )]
    TorchMissing { python: String },
    #[error("cannot run python interpreter `{python}`")]
    PythonSpawn {
        python: String,
        #[source]
        source: std::io::Error,
    },
    #[error("malformed fingerprint record")]
    BadRecord(#[source] serde_json::Error),
    #[error("fingerprint record format {0} is not supported")]
    RecordFormat(u32),
    #[error("fingerprint record for `{key}` does not match its own digest")]
    RecordDigest { key: Key },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_names_are_the_documented_strings() {
        for facet in Facet::ALL {
            let component = ComponentName::Native(facet);
            assert_eq!(component.name(), format!("native.{}", facet.name()));
            assert_eq!(ComponentName::parse(component.name()), Some(component));
        }
        for (component, name) in [
            (ComponentName::Files, "files"),
            (ComponentName::Imports, "imports"),
            (ComponentName::Env, "env"),
            (ComponentName::Commands, "commands"),
            (ComponentName::PythonInterpreter, "python.interpreter"),
            (ComponentName::PythonDists, "python.dists"),
            (ComponentName::Variant, "variant"),
            (ComponentName::Torch, "torch"),
        ] {
            assert_eq!(component.name(), name);
            assert_eq!(ComponentName::parse(name), Some(component));
        }
        assert_eq!(ComponentName::parse("native"), None);
    }

    fn component(pairs: &[(&str, Option<&str>)]) -> Component {
        pairs.iter().map(|(l, v)| (l.to_string(), v.map(Value::text).unwrap_or(Value::Absent))).collect()
    }

    #[test]
    fn encoding_is_length_prefixed_and_tagged() {
        let mut fp = Fingerprint::default();
        fp.insert("env", component(&[("A", Some("1")), ("B", None)]));
        let bytes = fp.encode();
        let mut expected = Vec::new();
        expected.extend_from_slice(&26u64.to_le_bytes());
        expected.extend_from_slice(b"exact-cache fingerprint v1");
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(&3u64.to_le_bytes());
        expected.extend_from_slice(b"env");
        expected.extend_from_slice(&2u64.to_le_bytes());
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(b"A");
        expected.push(1);
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(b"1");
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(b"B");
        expected.push(0);
        assert_eq!(bytes, expected);
    }

    #[test]
    fn absent_differs_from_empty_and_labels_cannot_run_together() {
        let a = Fingerprint { components: [("env".into(), component(&[("A", None)]))].into() };
        let b = Fingerprint { components: [("env".into(), component(&[("A", Some(""))]))].into() };
        assert_ne!(a.digest(), b.digest());
        let c = Fingerprint { components: [("x".into(), component(&[("ab", Some("c"))]))].into() };
        let d = Fingerprint { components: [("x".into(), component(&[("a", Some("bc"))]))].into() };
        assert_ne!(c.digest(), d.digest());
    }

    #[test]
    fn diff_names_each_changed_value() {
        let old = Fingerprint {
            components: [("python.dists".into(), component(&[("torch", Some("2.14.0")), ("numpy", Some("2.0"))]))]
                .into(),
        };
        let new = Fingerprint {
            components: [
                ("python.dists".into(), component(&[("torch", Some("2.15.0")), ("numpy", Some("2.0"))])),
                ("variant".into(), component(&[("variant", Some("cuda"))])),
            ]
            .into(),
        };
        let changes = old.diff(&new);
        assert_eq!(changes.len(), 2);
        assert_eq!(changes[0].label, "torch");
        assert_eq!(changes[0].old, Some(Value::text("2.14.0")));
        assert_eq!(changes[0].new, Some(Value::text("2.15.0")));
        assert_eq!(changes[1].component, "variant");
        assert_eq!(changes[1].old, None);
    }

    #[test]
    fn records_check_their_own_digest() {
        let mut fp = Fingerprint::default();
        fp.insert("variant", component(&[("variant", Some("x"))]));
        let record = FingerprintRecord::new("p", &"v".into(), fp);
        let parsed = FingerprintRecord::from_json(record.to_json().as_bytes()).unwrap();
        assert_eq!(parsed, record);
        let tampered = record.to_json().replace("\"x\"", "\"y\"");
        assert!(matches!(
            FingerprintRecord::from_json(tampered.as_bytes()),
            Err(FingerprintError::RecordDigest { .. })
        ));
    }
}
