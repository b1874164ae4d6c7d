//! The Python facet: interpreter identity and installed distributions.
//!
//! The interpreter named by the `python` input is asked (one short script) for its
//! implementation, version, ABI tag and every installed distribution in `sys.path` order.
//! Names are normalized as PEP 503 does (`Foo_Bar.baz` → `foo-bar-baz`); where a name appears
//! twice the first one wins, as it does for `import`. `python-exclude` names leave the list.
//! The interpreter is always one the workflow (or the preset) named, so one that does not exist is
//! an error, never `absent`. The same script reports where the interpreter looks for modules
//! (its `sys.path` and the places its installation owns), for following imports: one run.

use super::imports::SearchPath;
use super::system::System;
use super::{Component, FingerprintError, Value};
use crate::env::Env;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SCRIPT: &str = r#"
import json, os, platform, site, sys, sysconfig
try:
    from importlib import metadata
except ImportError:
    import importlib_metadata as metadata
dists = []
for d in metadata.distributions():
    name = d.metadata["Name"]
    if name:
        dists.append([name, d.version or ""])
installed = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
installed.update(v for k, v in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib"))
try:
    installed.update(site.getsitepackages())
    installed.add(site.getusersitepackages())
except Exception:
    pass
print(json.dumps({
    "implementation": sys.implementation.name,
    "version": platform.python_version(),
    "abi": sysconfig.get_config_var("SOABI") or "",
    "dists": dists,
    "path": [os.path.abspath(p) for p in sys.path if p],
    "installed": sorted(os.path.abspath(p) for p in installed if p),
}))
"#;

#[derive(serde::Deserialize)]
struct Report {
    implementation: String,
    version: String,
    abi: String,
    dists: Vec<(String, String)>,
    #[serde(default)]
    path: Vec<PathBuf>,
    #[serde(default)]
    installed: Vec<PathBuf>,
}

/// PEP 503 normalization: lowercase, runs of `-`, `_`, `.` become one `-`.
pub fn normalize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.trim().chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.extend(c.to_lowercase());
            in_run = false;
        }
    }
    out
}

/// `(python.interpreter, python.dists)` components, and where the interpreter looks for modules.
pub(super) fn collect(
    sys: &dyn System,
    env: &Env,
    cwd: &Path,
    python: &str,
    exclude: &[String],
) -> Result<(Component, Component, SearchPath), FingerprintError> {
    let mut words = python.split_whitespace();
    let program = words.next().unwrap_or(python);
    let mut args: Vec<&str> = words.collect();
    args.extend(["-c", SCRIPT]);
    let mut env = env.clone();
    // The report must not depend on the caller's interpreter tweaks that change output format.
    env.set("PYTHONIOENCODING", "utf-8");
    let out = sys
        .run(program, &args, &env, cwd)
        .map_err(|source| FingerprintError::PythonSpawn { python: python.to_owned(), source })?
        .ok_or_else(|| FingerprintError::PythonNotFound { python: python.to_owned() })?;
    if !out.success {
        return Err(FingerprintError::PythonFailed { python: python.to_owned(), detail: out.failure_detail() });
    }
    let last_line = out.stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or("");
    let report: Report = serde_json::from_str(last_line).map_err(|e| FingerprintError::PythonFailed {
        python: python.to_owned(),
        detail: format!("unexpected report ({e})"),
    })?;
    let search = SearchPath { entries: report.path.clone(), installed: report.installed.clone() };
    let (interpreter, dists) = components(report, exclude);
    Ok((interpreter, dists, search))
}

fn components(report: Report, exclude: &[String]) -> (Component, Component) {
    let interpreter: Component = [
        ("implementation".to_owned(), Value::Text(report.implementation)),
        ("version".to_owned(), Value::Text(report.version)),
        ("abi".to_owned(), Value::Text(report.abi)),
    ]
    .into();
    let excluded: BTreeSet<String> = exclude.iter().map(|n| normalize_name(n)).collect();
    let mut dists = Component::new();
    for (name, version) in report.dists {
        let name = normalize_name(&name);
        if !excluded.contains(&name) {
            dists.entry(name).or_insert(Value::Text(version));
        }
    }
    (interpreter, dists)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalized_per_pep_503() {
        assert_eq!(normalize_name("Foo_Bar.baz"), "foo-bar-baz");
        assert_eq!(normalize_name("a--_.b"), "a-b");
        assert_eq!(normalize_name("torch"), "torch");
    }

    #[test]
    fn first_distribution_wins_and_excludes_apply_after_normalization() {
        let report = Report {
            implementation: "cpython".into(),
            version: "3.11.7".into(),
            abi: "cpython-311-x86_64-linux-gnu".into(),
            dists: vec![
                ("Torch".into(), "2.15.0".into()),
                ("torch".into(), "2.14.0".into()),
                ("My_Project".into(), "0.1".into()),
            ],
            path: Vec::new(),
            installed: Vec::new(),
        };
        let (interp, dists) = components(report, &["my.project".into()]);
        assert_eq!(interp["version"], Value::text("3.11.7"));
        assert_eq!(dists.len(), 1);
        assert_eq!(dists["torch"], Value::text("2.15.0"));
    }
}
