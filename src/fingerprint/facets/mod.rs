//! The native facets (the `native.<facet>` components): one file per facet, and [`REGISTRY`],
//! the one list of them.
//!
//! A facet's file owns its name, what it records, whether it is on by default, and its
//! collector, which reads the machine only through [`System`] and the environment (so tests
//! fake the machine). Everything else is derived from the registry: [`Facet::ALL`],
//! [`Facet::DEFAULT`], the names the `native` input accepts, its default ([`NATIVE_DEFAULT`]) and
//! description ([`NATIVE_DESCRIPTION`]), the component names, and the facets table of docs/keys.md
//! (`tests/integration/action_yml.rs` checks it). A new facet is a file here, its `mod` line and
//! its line in [`REGISTRY`]. New facets are opt-in: one on by default changes every user's key.

mod arch;
mod compiler;
mod container;
mod cpu_flags;
mod cuda;
pub(super) mod gpu;
mod isa;
mod libc;
mod os;

pub use isa::{aarch64_isa, x86_64_level};

use super::collect::FingerprintSpec;
use super::system::{CpuFacts, System};
use super::{Component, ComponentName, FingerprintError};
use crate::env::Env;
use std::cell::OnceCell;
use std::path::Path;

/// Every native facet, in the order documentation lists them and collection runs them.
const REGISTRY: &[&FacetDef] = &[
    &os::FACET,
    &arch::FACET,
    &isa::FACET,
    &cpu_flags::FACET,
    &libc::FACET,
    &compiler::FACET,
    &gpu::FACET,
    &cuda::FACET,
    &container::FACET,
];

/// One facet, as its file defines it.
struct FacetDef {
    /// `native.<name>`, where the name is what the `native` input takes.
    component: &'static str,
    /// What it records, one line of Markdown for the facets table of docs/keys.md.
    records: &'static str,
    /// On when the `native` input is not given.
    default: bool,
    /// Which of its values a difference shows without their label.
    unlabelled: Unlabelled,
    collect: fn(&Probe) -> Result<Component, FingerprintError>,
}

const COMPONENT_PREFIX: &str = "native.";

/// Which values of a facet a difference shows without their label: a facet of one fact reads
/// `native.arch: x86_64 → aarch64`, others `native.compiler: cc <old> → <new>`.
enum Unlabelled {
    None,
    Label(&'static str),
    Every,
}

/// A native facet, as the `native` input names it; ordered as [`REGISTRY`] lists them.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Facet(usize);

impl Facet {
    pub const ALL: [Facet; REGISTRY.len()] = {
        let mut all = [Facet(0); REGISTRY.len()];
        let mut i = 0;
        while i < all.len() {
            all[i] = Facet(i);
            i += 1;
        }
        all
    };

    /// The facets on when the `native` input is not given.
    pub const DEFAULT: [Facet; default_count()] = {
        let mut defaults = [Facet(0); default_count()];
        let (mut i, mut n) = (0, 0);
        while i < REGISTRY.len() {
            if REGISTRY[i].default {
                defaults[n] = Facet(i);
                n += 1;
            }
            i += 1;
        }
        defaults
    };

    /// The facet named `name`, for names written in code: in a `const`, an unknown name does not
    /// compile. Names read at run time go through [`crate::choice::parse`].
    pub const fn named(name: &str) -> Facet {
        let mut i = 0;
        while i < REGISTRY.len() {
            if bytes_eq(name_of(REGISTRY[i]), name.as_bytes()) {
                return Facet(i);
            }
            i += 1;
        }
        panic!("no such native facet")
    }

    fn def(self) -> &'static FacetDef {
        REGISTRY[self.0]
    }

    /// The name the `native` input takes (`cpu-flags`).
    pub fn name(self) -> &'static str {
        &self.def().component[COMPONENT_PREFIX.len()..]
    }

    /// What the facet records (Markdown).
    pub fn records(self) -> &'static str {
        self.def().records
    }

    /// Whether it is on when the `native` input is not given.
    pub fn is_default(self) -> bool {
        self.def().default
    }

    /// Its component, `native.<facet>`.
    pub fn component(self) -> ComponentName {
        ComponentName::Native(self)
    }

    pub(super) fn component_name(self) -> &'static str {
        self.def().component
    }

    /// Whether a difference shows its value `label` without the label.
    pub(super) fn shows_unlabelled(self, label: &str) -> bool {
        match self.def().unlabelled {
            Unlabelled::None => false,
            Unlabelled::Label(only) => label == only,
            Unlabelled::Every => true,
        }
    }

    pub(super) fn collect(self, probe: &Probe) -> Result<Component, FingerprintError> {
        (self.def().collect)(probe)
    }
}

impl std::fmt::Debug for Facet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Facet({})", self.name())
    }
}

impl crate::choice::Named for Facet {
    const ALL: &'static [Self] = &Facet::ALL;

    fn name(self) -> &'static str {
        Facet::name(self)
    }
}

/// The `native` input's default: the default facets, comma-separated.
pub const NATIVE_DEFAULT: &str = as_str(&DEFAULT_BYTES);
const DEFAULT_LISTING: Listing = Listing { before: "", separator: ",", after: "", defaults_only: true };
const DEFAULT_BYTES: [u8; DEFAULT_LISTING.write(&mut [])] = DEFAULT_LISTING.bytes();

/// The `native` input's description, naming every facet.
pub const NATIVE_DESCRIPTION: &str = as_str(&DESCRIPTION_BYTES);
const DESCRIPTION_LISTING: Listing =
    Listing { before: "Native facets to include: ", separator: ", ", after: " (or `none`).", defaults_only: false };
const DESCRIPTION_BYTES: [u8; DESCRIPTION_LISTING.write(&mut [])] = DESCRIPTION_LISTING.bytes();

/// Facet names joined between two texts, built at compile time: the input table that holds
/// the `native` input's default and description is a `const`.
struct Listing {
    before: &'static str,
    separator: &'static str,
    after: &'static str,
    defaults_only: bool,
}

impl Listing {
    const fn bytes<const N: usize>(&self) -> [u8; N] {
        let mut out = [0; N];
        self.write(&mut out);
        out
    }

    /// Writes what fits of the text into `out`; returns the length of the whole text.
    const fn write(&self, out: &mut [u8]) -> usize {
        let mut len = copy(self.before.as_bytes(), out, 0);
        let mut listed = 0;
        let mut i = 0;
        while i < REGISTRY.len() {
            if REGISTRY[i].default || !self.defaults_only {
                if listed > 0 {
                    len = copy(self.separator.as_bytes(), out, len);
                }
                len = copy(name_of(REGISTRY[i]), out, len);
                listed += 1;
            }
            i += 1;
        }
        copy(self.after.as_bytes(), out, len)
    }
}

const fn default_count() -> usize {
    let (mut i, mut n) = (0, 0);
    while i < REGISTRY.len() {
        if REGISTRY[i].default {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The facet's name, its component name without `native.`.
const fn name_of(def: &FacetDef) -> &[u8] {
    def.component.as_bytes().split_at(COMPONENT_PREFIX.len()).1
}

const fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Copies what fits of `bytes` into `out` at `at`; returns where the copy ends.
const fn copy(bytes: &[u8], out: &mut [u8], at: usize) -> usize {
    let mut i = 0;
    while i < bytes.len() {
        if at + i < out.len() {
            out[at + i] = bytes[i];
        }
        i += 1;
    }
    at + bytes.len()
}

const fn as_str(bytes: &'static [u8]) -> &'static str {
    match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(_) => panic!("facet names are UTF-8"),
    }
}

/// What the collectors of one collection read: the machine, the environment and the spec.
/// Facts that several collectors use (the CPU, `nvidia-smi`) are read once, when first asked for.
pub(super) struct Probe<'a> {
    sys: &'a dyn System,
    env: &'a Env,
    spec: &'a FingerprintSpec,
    cpu: OnceCell<CpuFacts>,
    nvidia: OnceCell<Option<Vec<gpu::NvidiaGpu>>>,
}

impl<'a> Probe<'a> {
    pub(super) fn new(sys: &'a dyn System, env: &'a Env, spec: &'a FingerprintSpec) -> Self {
        Self { sys, env, spec, cpu: OnceCell::new(), nvidia: OnceCell::new() }
    }

    /// Where commands run: the workspace.
    fn cwd(&self) -> &Path {
        &self.spec.locations.workspace
    }

    fn cpu(&self) -> &CpuFacts {
        self.cpu.get_or_init(|| self.sys.cpu())
    }

    /// Every NVIDIA GPU `nvidia-smi` lists; one run serves the `gpu` facet and the `torch`
    /// component.
    pub(super) fn nvidia_gpus(&self) -> Option<&[gpu::NvidiaGpu]> {
        self.nvidia.get_or_init(|| gpu::nvidia_smi(self.sys, self.env, self.cwd())).as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::choice;
    use std::collections::BTreeSet;

    #[test]
    fn the_registry_derives_names_defaults_and_the_native_input() {
        let names: Vec<&str> = Facet::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(names, ["os", "arch", "isa", "cpu-flags", "libc", "compiler", "gpu", "cuda", "container"]);
        assert_eq!(Facet::DEFAULT.map(Facet::name), ["os", "arch", "isa", "libc", "compiler"]);
        assert_eq!(NATIVE_DEFAULT, "os,arch,isa,libc,compiler");
        assert_eq!(
            NATIVE_DESCRIPTION,
            "Native facets to include: os, arch, isa, cpu-flags, libc, compiler, gpu, cuda, container (or `none`)."
        );
        assert_eq!(Facet::named("cpu-flags").component_name(), "native.cpu-flags");
    }

    #[test]
    fn every_facet_is_well_formed() {
        let mut seen = BTreeSet::new();
        for facet in Facet::ALL {
            let def = facet.def();
            assert!(def.component.starts_with(COMPONENT_PREFIX), "{}", def.component);
            let name = facet.name();
            assert!(seen.insert(name), "`{name}` is registered twice");
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'), "`{name}`");
            assert_eq!(choice::parse::<Facet>(&name.to_uppercase()), Some(facet));
            assert_eq!(Facet::named(name), facet);
            // One line of a Markdown table.
            assert!(!def.records.is_empty() && !def.records.contains(['|', '\n']), "`{name}`");
        }
    }

    #[test]
    fn facets_are_ordered_as_registered() {
        let set: BTreeSet<Facet> = ["container", "cuda", "os", "isa"].map(Facet::named).into();
        let names: Vec<&str> = set.into_iter().map(Facet::name).collect();
        assert_eq!(names, ["os", "isa", "cuda", "container"]);
    }
}
