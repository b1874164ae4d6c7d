//! `native.compiler`: each compiler command (`cc`, `c++`, `$CC`, or the `compilers` input) and
//! the identity its `--version` prints.

use super::{FacetDef, Probe, Unlabelled};
use crate::fingerprint::{Component, FingerprintError, Value};

pub(super) const FACET: FacetDef = FacetDef {
    component: "native.compiler",
    records: "each compiler command (`$CC` or `cc`, `$CXX` or `c++`, or those of `compilers`) → the first line of its \
              `--version` (and clang's `Target:`); absent when not installed, an error when named in `compilers`",
    default: true,
    unlabelled: Unlabelled::None,
    collect,
};

/// Each compiler command (e.g. `cc`, `c++`, or `$CC` as configured) → its `--version` output.
/// A compiler that is not installed is absent, unless the `compilers` input named it: a command
/// the workflow named and that does not exist is a mistake, not a fact.
fn collect(probe: &Probe) -> Result<Component, FingerprintError> {
    let named = &probe.spec.named_compilers;
    let mut c = Component::new();
    for command in &probe.spec.compilers {
        let mut words = command.split_whitespace();
        let Some(program) = words.next() else {
            continue;
        };
        let mut args: Vec<&str> = words.collect();
        args.push("--version");
        let value = match probe.sys.run(program, &args, probe.env, probe.cwd()) {
            Ok(Some(out)) if out.success => Value::Text(compiler_identity(&out.stdout)),
            Ok(Some(out)) => Value::Text(format!("`--version` failed: {}", out.failure_detail())),
            Ok(None) if named.contains(command) => {
                return Err(FingerprintError::CompilerNotFound { compiler: command.clone() });
            }
            Err(source) if named.contains(command) => {
                return Err(FingerprintError::CompilerSpawn { compiler: command.clone(), source });
            }
            Ok(None) | Err(_) => Value::Absent,
        };
        c.insert(command.clone(), value);
    }
    Ok(c)
}

/// The first line of `--version` output (name and version) and clang's `Target:` line; the
/// copyright text gcc adds is left out.
fn compiler_identity(stdout: &str) -> String {
    let mut lines = stdout.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut identity = lines.next().unwrap_or("").to_owned();
    if let Some(target) = lines.find(|l| l.starts_with("Target:")) {
        identity.push_str(&format!(" ({target})"));
    }
    identity
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiler_identity_keeps_name_version_and_target() {
        let gcc = "cc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.\n";
        assert_eq!(compiler_identity(gcc), "cc (Debian 12.2.0-14+deb12u1) 12.2.0");
        let clang = "clang version 17.0.6\nTarget: aarch64-apple-darwin23.5.0\nThread model: posix\n";
        assert_eq!(compiler_identity(clang), "clang version 17.0.6 (Target: aarch64-apple-darwin23.5.0)");
    }
}
