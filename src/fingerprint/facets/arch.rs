//! `native.arch`: the CPU architecture.

use super::{FacetDef, Probe, Unlabelled};
use crate::fingerprint::{Component, FingerprintError, Value};

pub(super) const FACET: FacetDef = FacetDef {
    component: "native.arch",
    records: "`arch`: the CPU architecture (`x86_64`, `aarch64`)",
    default: true,
    unlabelled: Unlabelled::Label("arch"),
    collect,
};

fn collect(probe: &Probe) -> Result<Component, FingerprintError> {
    Ok([("arch".to_owned(), Value::text(&probe.cpu().arch))].into())
}
