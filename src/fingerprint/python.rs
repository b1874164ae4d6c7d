//! The Python facet: interpreter identity and installed distributions.
//!
//! One short script asks the `python` interpreter for its implementation, version, ABI tag,
//! every installed distribution in `sys.path` order, and where it looks for modules (for
//! following imports). Names are normalized as PEP 503 does; where a name appears twice the
//! first one wins, as it does for `import`. The interpreter is always one the workflow (or the
//! preset) named, so one that does not exist is an error, never `absent`. Distributions
//! installed in editable mode from the workspace are left out unless `python-keep-editable`
//! (docs/keys.md says why, and how they are recognized).

use super::imports::SearchPath;
use super::system::System;
use super::{Component, FingerprintError, Note, Value};
use crate::env::Env;
use crate::paths::Locations;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SCRIPT: &str = r#"
import json, os, platform, site, sys, sysconfig
try:
    from importlib import metadata
except ImportError:
    import importlib_metadata as metadata
try:
    from urllib.parse import unquote, urlparse
except ImportError:
    unquote = urlparse = None
installed = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
sites = set(v for k, v in sysconfig.get_paths().items() if k in ("purelib", "platlib"))
try:
    sites.update(site.getsitepackages())
    sites.add(site.getusersitepackages())
except Exception:
    pass
installed.update(sites)
installed.update(v for k, v in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib"))
sites = set(os.path.abspath(p) for p in sites if p)

def editable_source(d):
    try:
        direct = json.loads(d.read_text("direct_url.json") or "null") or {}
        url = direct.get("url") or ""
        if (direct.get("dir_info") or {}).get("editable") and url.startswith("file://") and urlparse:
            return unquote(urlparse(url).path)
    except Exception:
        pass
    where = getattr(d, "_path", None)
    if where is not None and str(where).endswith(".egg-info"):
        parent = os.path.dirname(os.path.abspath(str(where)))
        if parent not in sites:
            return parent
    return None

dists = []
for d in metadata.distributions():
    name = d.metadata["Name"]
    if name:
        dists.append([name, d.version or "", editable_source(d)])
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
    /// Name, version, and the sources of an editable install.
    dists: Vec<(String, String, Option<PathBuf>)>,
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

/// What the interpreter reported: the `python.interpreter` and `python.dists` components, where
/// it looks for modules, and the editable installs left out.
pub(super) struct Collected {
    pub interpreter: Component,
    pub dists: Component,
    pub search: SearchPath,
    pub left_out: Vec<Note>,
}

pub(super) fn collect(
    sys: &dyn System,
    env: &Env,
    locations: &Locations,
    python: &str,
    exclude: &[String],
    keep_editable: bool,
) -> Result<Collected, FingerprintError> {
    let cwd = &locations.workspace;
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
    let real_workspace = std::fs::canonicalize(cwd).ok();
    // Its label: where it lies in the workspace, links resolved or not.
    let in_workspace = |source: &Path| {
        let source = crate::paths::normalize(&cwd.join(source));
        if source.starts_with(cwd) {
            return Some(locations.display(&source));
        }
        let real = std::fs::canonicalize(&source).ok()?;
        let rel = real.strip_prefix(real_workspace.as_ref()?).ok()?;
        Some(locations.display(&cwd.join(rel)))
    };
    let editable = |source: &Path| if keep_editable { None } else { in_workspace(source) };
    let (interpreter, dists, left_out) = components(report, exclude, &editable);
    Ok(Collected { interpreter, dists, search, left_out })
}

/// The components, and the editable installs left out (`editable`: the label of an editable
/// install's sources when it leaves the list).
fn components(
    report: Report,
    exclude: &[String],
    editable: &dyn Fn(&Path) -> Option<String>,
) -> (Component, Component, Vec<Note>) {
    let interpreter: Component = [
        ("implementation".to_owned(), Value::Text(report.implementation)),
        ("version".to_owned(), Value::Text(report.version)),
        ("abi".to_owned(), Value::Text(report.abi)),
    ]
    .into();
    let excluded: BTreeSet<String> = exclude.iter().map(|n| normalize_name(n)).collect();
    let mut dists = Component::new();
    let mut left_out = Vec::new();
    let mut seen = BTreeSet::new();
    for (name, version, source) in report.dists {
        let name = normalize_name(&name);
        if excluded.contains(&name) || !seen.insert(name.clone()) {
            continue;
        }
        match source.as_deref().and_then(editable) {
            Some(location) => left_out.push(Note::EditableLeftOut { name, version, location }),
            None => {
                dists.insert(name, Value::Text(version));
            }
        }
    }
    (interpreter, dists, left_out)
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
                ("Torch".into(), "2.15.0".into(), None),
                ("torch".into(), "2.14.0".into(), None),
                ("My_Project".into(), "0.1".into(), None),
            ],
            path: Vec::new(),
            installed: Vec::new(),
        };
        let (interp, dists, _) = components(report, &["my.project".into()], &|_| None);
        assert_eq!(interp["version"], Value::text("3.11.7"));
        assert_eq!(dists.len(), 1);
        assert_eq!(dists["torch"], Value::text("2.15.0"));
    }

    #[test]
    fn an_editable_install_of_the_workspace_leaves_the_list_and_is_named() {
        let report = |version: &str| Report {
            implementation: "cpython".into(),
            version: "3.11.7".into(),
            abi: String::new(),
            dists: vec![
                ("deepmd-kit".into(), version.into(), Some("/ws".into())),
                ("elsewhere".into(), "1.0".into(), Some("/other".into())),
                ("numpy".into(), "2.0".into(), None),
            ],
            path: Vec::new(),
            installed: Vec::new(),
        };
        let inside = |p: &Path| p.starts_with("/ws").then(|| ".".to_owned());
        let (_, dists, left_out) = components(report("3.1.3.dev12+gbc902da"), &[], &inside);
        assert_eq!(dists.keys().collect::<Vec<_>>(), ["elsewhere", "numpy"]);
        assert_eq!(
            left_out,
            [Note::EditableLeftOut {
                name: "deepmd-kit".into(),
                version: "3.1.3.dev12+gbc902da".into(),
                location: ".".into()
            }]
        );
        let (_, kept, _) = components(report("3.1.3"), &[], &|_| None);
        assert_eq!(kept["deepmd-kit"], Value::text("3.1.3"));
    }
}
