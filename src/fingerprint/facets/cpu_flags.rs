//! `native.cpu-flags`: every CPU flag. Opt-in, because the list changes with every CPU stepping;
//! the `isa` facet records what compiled code depends on.

use super::{FacetDef, Probe, Unlabelled};
use crate::fingerprint::{Component, FingerprintError, Value};

pub(super) const FACET: FacetDef = FacetDef {
    component: "native.cpu-flags",
    records: "`flags`: every CPU flag, as `/proc/cpuinfo` names them (on arm64, from the hardware capabilities; \
              opt-in: it changes with every CPU stepping)",
    default: false,
    unlabelled: Unlabelled::Label("flags"),
    collect,
};

fn collect(probe: &Probe) -> Result<Component, FingerprintError> {
    let flags: Vec<String> = probe.cpu().features().into_iter().collect();
    Ok([("flags".to_owned(), Value::text(flags.join(" ")))].into())
}
