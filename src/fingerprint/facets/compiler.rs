//! `native.compiler`: each compiler command (`cc`, `c++`, `$CC`, or the `compilers` input; on
//! Windows MSVC's `cl` too) and the identity its `--version` (`cl`: its banner) prints.

use super::{FacetDef, Probe, Unlabelled};
use crate::fingerprint::{Component, FingerprintError, Value};

pub(super) const FACET: FacetDef = FacetDef {
    component: "native.compiler",
    records: "each compiler command (`$CC` or `cc`, `$CXX` or `c++`, and on Windows `cl`; or those of `compilers`) → the \
              first line of its `--version` (and clang's `Target:`; MSVC `cl`: its banner line); absent when not \
              installed, an error when named in `compilers`",
    default: true,
    unlabelled: Unlabelled::None,
    collect,
};

/// A compiler that is not installed is absent, unless the `compilers` input named it: a command
/// the workflow named and that does not exist is a mistake, not a fact.
fn collect(probe: &Probe) -> Result<Component, FingerprintError> {
    let named = &probe.spec.named_compilers;
    let mut commands: Vec<&str> = probe.spec.compilers.iter().map(String::as_str).collect();
    if cfg!(windows) && named.is_empty() && !commands.iter().any(|c| is_msvc(c)) {
        commands.push(MSVC);
    }
    let mut c = Component::new();
    for command in commands {
        let mut words = command.split_whitespace();
        let Some(program) = words.next() else {
            continue;
        };
        let mut args: Vec<&str> = words.collect();
        let msvc = is_msvc(program);
        if !msvc {
            args.push("--version");
        }
        let value = match probe.sys.run(program, &args, probe.env, probe.cwd()) {
            Ok(Some(out)) if msvc => Value::Text(msvc_banner(&out.stderr)),
            Ok(Some(out)) if out.success => Value::Text(compiler_identity(&out.stdout)),
            Ok(Some(out)) => Value::Text(format!("`--version` failed: {}", out.failure_detail())),
            Ok(None) if named.contains(command) => {
                return Err(FingerprintError::CompilerNotFound { compiler: command.to_owned() });
            }
            Err(source) if named.contains(command) => {
                return Err(FingerprintError::CompilerSpawn { compiler: command.to_owned(), source });
            }
            Ok(None) | Err(_) => Value::Absent,
        };
        c.insert(command.to_owned(), value);
    }
    Ok(c)
}

/// MSVC's compiler driver, probed by default on Windows.
const MSVC: &str = "cl";

/// Whether `program` is MSVC's `cl` (`cl`, `cl.exe`, or a path to it), which has no
/// `--version`: run without arguments, it prints its banner on stderr.
fn is_msvc(program: &str) -> bool {
    let name = program.rsplit(['/', '\\']).next().unwrap_or(program);
    name.eq_ignore_ascii_case(MSVC) || name.eq_ignore_ascii_case("cl.exe")
}

/// The banner's first line:
/// `Microsoft (R) C/C++ Optimizing Compiler Version 19.40.33811 for x64`.
fn msvc_banner(stderr: &str) -> String {
    stderr.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("").to_owned()
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

    #[test]
    fn msvc_is_known_by_its_name_and_read_from_its_banner() {
        assert!(is_msvc("cl") && is_msvc("CL.EXE") && is_msvc(r"C:\VS\bin\cl.exe") && !is_msvc("clang"));
        let banner = "Microsoft (R) C/C++ Optimizing Compiler Version 19.40.33811 for x64\r\nCopyright (C) Microsoft \
                      Corporation.  All rights reserved.\r\n\r\nusage: cl [ option... ] filename... [ /link linkoption... ]\r\n";
        assert_eq!(msvc_banner(banner), "Microsoft (R) C/C++ Optimizing Compiler Version 19.40.33811 for x64");
    }
}
