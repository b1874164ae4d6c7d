//! `native.libc`: the C library and its version.

use super::{FacetDef, Probe, Unlabelled};
use crate::fingerprint::{Component, FingerprintError, Value};

pub(super) const FACET: FacetDef = FacetDef {
    component: "native.libc",
    records: "`libc`: `glibc 2.39`, `musl 1.2.4`, or absent (macOS, Windows)",
    default: true,
    unlabelled: Unlabelled::Label("libc"),
    collect,
};

fn collect(probe: &Probe) -> Result<Component, FingerprintError> {
    Ok([("libc".to_owned(), probe.sys.libc(probe.env).map(Value::Text).unwrap_or(Value::Absent))].into())
}
