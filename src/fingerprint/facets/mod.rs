//! The native facets (the `native.<facet>` components): one file per facet, and [`REGISTRY`],
//! the one list of them.
//!
//! A facet's file owns its name, what it records, whether it is on by default, and its
//! collector, which reads the machine only through [`System`] and the environment (so tests
//! fake the machine). Everything else is derived from the registry: [`Facet::ALL`],
//! [`Facet::defaults`], the names the `native` input accepts, its default ([`NATIVE_DEFAULT`]) and
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
use std::sync::LazyLock;

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

/// A native facet, as the `native` input names it; ordered as `REGISTRY` lists them.
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

    pub fn defaults() -> impl Iterator<Item = Facet> {
        Facet::ALL.into_iter().filter(|f| f.is_default())
    }

    /// The facet named `name`, for names written in code. Names read at run time go through
    /// [`crate::choice::parse`].
    pub fn named(name: &str) -> Facet {
        Facet::ALL.into_iter().find(|f| f.name() == name).unwrap_or_else(|| panic!("no native facet `{name}`"))
    }

    fn def(self) -> &'static FacetDef {
        REGISTRY[self.0]
    }

    pub fn name(self) -> &'static str {
        &self.def().component[COMPONENT_PREFIX.len()..]
    }

    pub fn records(self) -> &'static str {
        self.def().records
    }

    pub fn is_default(self) -> bool {
        self.def().default
    }

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
pub static NATIVE_DEFAULT: LazyLock<String> =
    LazyLock::new(|| Facet::defaults().map(Facet::name).collect::<Vec<_>>().join(","));

/// The `native` input's description, naming every facet.
pub static NATIVE_DESCRIPTION: LazyLock<String> =
    LazyLock::new(|| format!("Native facets to include: {} (or `none`).", Facet::ALL.map(Facet::name).join(", ")));

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
        assert_eq!(Facet::defaults().map(Facet::name).collect::<Vec<_>>(), ["os", "arch", "isa", "libc", "compiler"]);
        assert_eq!(*NATIVE_DEFAULT, "os,arch,isa,libc,compiler");
        assert_eq!(
            *NATIVE_DESCRIPTION,
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
