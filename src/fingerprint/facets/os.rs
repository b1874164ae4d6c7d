//! `native.os`: the operating system family, distribution and version.

use super::{FacetDef, Probe, Unlabelled};
use crate::fingerprint::{Component, FingerprintError, Value};

pub(super) const FACET: FacetDef = FacetDef {
    component: "native.os",
    records: "`family` (`linux`, `macos`, `windows`), `distro` and `version` (`ID` and `VERSION_ID` of \
              `/etc/os-release`; on macOS `macos` and the `sw_vers` version; on Windows `windows` or `windows-server` \
              and `major.minor.build`, e.g. `10.0.20348`)",
    default: true,
    unlabelled: Unlabelled::None,
    collect,
};

fn collect(probe: &Probe) -> Result<Component, FingerprintError> {
    let facts = probe.sys.os();
    let mut c = Component::new();
    c.insert("family".into(), Value::Text(facts.family));
    c.insert("distro".into(), facts.distro.map(Value::Text).unwrap_or(Value::Absent));
    c.insert("version".into(), facts.version.map(Value::Text).unwrap_or(Value::Absent));
    Ok(c)
}
