//! `native.container`: the container the job's steps run in, as far as a step can tell. Opt-in.
//!
//! A step cannot see its job container's image: the runner passes nothing about it into the
//! container, and the `job.container` context holds only its `id` and `network`. So the facet
//! records two facts:
//!
//! - `image`: the image as the workflow declares it, from [`IMAGE_VARIABLE`], which a workflow
//!   sets from the same expression as `container.image`. A digest (`…@sha256:…`) names one
//!   image; a tag may be moved to another. Absent when unset or empty.
//! - `marker`: which marker files of container engines exist: `/.dockerenv` (Docker, which the
//!   runner and act use for `container:` jobs), `/run/.containerenv` (Podman, CRI-O). Absent on a
//!   runner's own machine, and in containers of engines that write neither (containerd, so
//!   Kubernetes without CRI-O).
//!
//! Images of other distributions or releases differ in the `os` facet too; images of one
//! release differ only in `image`.

use super::{FacetDef, Probe, Unlabelled};
use crate::fingerprint::{Component, FingerprintError, Value};
use std::path::Path;

pub(super) const FACET: FacetDef = FacetDef {
    component: "native.container",
    records: "`image`: the job container's image as the workflow declares it in `EXACT_CACHE_CONTAINER_IMAGE` (a \
              step cannot see it otherwise); `marker`: which of `/.dockerenv` (Docker) and `/run/.containerenv` \
              (Podman, CRI-O) exist; each absent when there is none",
    default: false,
    unlabelled: Unlabelled::None,
    collect,
};

/// The variable a workflow sets to the image of its job container.
const IMAGE_VARIABLE: &str = "EXACT_CACHE_CONTAINER_IMAGE";

/// Files container engines create in every container, in the order the value lists them.
const MARKERS: [&str; 2] = ["/.dockerenv", "/run/.containerenv"];

fn collect(probe: &Probe) -> Result<Component, FingerprintError> {
    let image = probe.env.get(IMAGE_VARIABLE).map(str::trim).filter(|image| !image.is_empty());
    let markers: Vec<&str> = MARKERS.into_iter().filter(|marker| probe.sys.is_file(Path::new(marker))).collect();
    let marker = (!markers.is_empty()).then(|| markers.join(" "));
    Ok([
        ("image".to_owned(), image.map(Value::text).unwrap_or(Value::Absent)),
        ("marker".to_owned(), marker.map(Value::Text).unwrap_or(Value::Absent)),
    ]
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;
    use crate::fingerprint::FingerprintSpec;
    use crate::fingerprint::system::{CommandOutput, CpuFacts, OsFacts, System};
    use crate::paths::Locations;
    use std::collections::BTreeSet;
    use std::io;
    use std::path::PathBuf;

    /// A machine that has only `files`.
    struct Files(BTreeSet<PathBuf>);

    impl System for Files {
        fn run(&self, _: &str, _: &[&str], _: &Env, _: &Path) -> io::Result<Option<CommandOutput>> {
            unreachable!("the container facet runs nothing")
        }
        fn run_shell(&self, _: &str, _: &Env, _: &Path) -> io::Result<CommandOutput> {
            unreachable!("the container facet runs nothing")
        }
        fn cpu(&self) -> CpuFacts {
            unreachable!("the container facet reads no CPU facts")
        }
        fn os(&self) -> OsFacts {
            unreachable!("the container facet reads no OS facts")
        }
        fn libc(&self, _: &Env) -> Option<String> {
            unreachable!("the container facet reads no libc")
        }
        fn is_file(&self, path: &Path) -> bool {
            self.0.contains(path)
        }
    }

    fn container(files: &[&str], env: &[(&str, &str)]) -> Component {
        let sys = Files(files.iter().map(PathBuf::from).collect());
        let env = Env::from_pairs(env.iter().copied());
        let spec = FingerprintSpec::new(Locations { workspace: PathBuf::from("/"), home: None });
        collect(&Probe::new(&sys, &env, &spec)).unwrap()
    }

    fn values(component: &Component) -> Vec<(&str, Option<&str>)> {
        component.iter().map(|(label, value)| (label.as_str(), value.as_text())).collect()
    }

    #[test]
    fn a_declared_image_and_the_engines_marker_are_recorded() {
        let image = "ghcr.io/org/build@sha256:0123";
        let c = container(&["/.dockerenv"], &[(IMAGE_VARIABLE, image)]);
        assert_eq!(values(&c), [("image", Some(image)), ("marker", Some("/.dockerenv"))]);
        let c = container(&["/run/.containerenv"], &[(IMAGE_VARIABLE, " debian:12 \n")]);
        assert_eq!(values(&c), [("image", Some("debian:12")), ("marker", Some("/run/.containerenv"))]);
        let c = container(&["/run/.containerenv", "/.dockerenv"], &[]);
        assert_eq!(values(&c), [("image", None), ("marker", Some("/.dockerenv /run/.containerenv"))]);
    }

    #[test]
    fn outside_a_container_with_nothing_declared_both_are_absent() {
        assert_eq!(values(&container(&[], &[])), [("image", None), ("marker", None)]);
        assert_eq!(container(&[], &[(IMAGE_VARIABLE, "  ")]), container(&[], &[]), "blank is not declared");
        assert_ne!(container(&["/.dockerenv"], &[]), container(&[], &[]), "in a container or not");
    }
}
