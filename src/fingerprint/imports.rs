//! The `imports` component, and the module files it adds to `files`: every Python file that
//! `hash-files` selects is followed through its imports ([`super::pyscan`]: parsed, never run),
//! transitively, and each module file inside the workspace that it reaches enters the key.
//!
//! A module is looked for as the interpreter would look for it: in the importing script's own
//! directory (and the `sys.path` entries it inserts, where [`super::pyscan`] can work them out),
//! then in the `python` interpreter's `sys.path` (when the `python` input names one), then in
//! the workspace itself (for generators run as `python -m tools.gen`). In each directory a
//! package (`name/__init__.py`) comes before a module (`name.py`), and a directory without
//! `__init__.py` is a namespace package. The first place that has the module wins; when that
//! place is outside the workspace, or is the interpreter's own (its prefixes, the standard
//! library, `site-packages` — also a virtual environment inside the workspace), the module is not
//! followed: the `python.dists` component covers installed distributions. A module found nowhere
//! is no error (an optional import).

use super::pyscan::{self, Import, Scan};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::path::{Component, Path, PathBuf};

/// Where the `python` interpreter looks for modules, as it reported it: its `sys.path`, and the
/// places its installation owns (prefixes, standard library, site-packages).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchPath {
    pub entries: Vec<PathBuf>,
    pub installed: Vec<PathBuf>,
}

/// Module files (absolute) → the files (absolute) that import them.
pub type Reached = BTreeMap<PathBuf, BTreeSet<PathBuf>>;

/// Whether `path` is a Python file: `*.py`, `*.pyw`, or a script whose first line names python.
pub fn is_python(path: &Path) -> bool {
    if path.extension().is_some_and(|e| e == "py" || e == "pyw") {
        return true;
    }
    let mut head = [0u8; 128];
    let n = std::fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut head)).unwrap_or(0);
    let first = head[..n].split(|b| *b == b'\n').next().unwrap_or_default();
    first.starts_with(b"#!") && first.windows(6).any(|w| w == b"python")
}

/// Every module file inside `workspace` that `roots` (Python files) reach through their
/// imports, with the files that import it.
pub fn follow(roots: &[PathBuf], workspace: &Path, search: &SearchPath) -> Reached {
    let installed =
        search.installed.iter().filter(|p| !workspace.starts_with(p)).map(|p| crate::paths::normalize(p)).collect();
    let mut follower = Follower { workspace, search, installed, scans: HashMap::new() };
    let mut reached = Reached::new();
    for root in roots {
        follower.follow_root(root, &mut reached);
    }
    reached
}

enum Found {
    Module(PathBuf),
    Package { dir: PathBuf, init: PathBuf },
    Namespace(Vec<PathBuf>),
}

struct Follower<'a> {
    workspace: &'a Path,
    search: &'a SearchPath,
    installed: Vec<PathBuf>,
    scans: HashMap<PathBuf, Scan>,
}

impl Follower<'_> {
    /// Follow one script: its own `sys.path` (its directory, and what it and the modules it
    /// reaches insert) applies to everything it reaches.
    fn follow_root(&mut self, root: &Path, reached: &mut Reached) {
        let script_dir = root.parent().unwrap_or(root).to_owned();
        let (mut front, mut back): (Vec<PathBuf>, Vec<PathBuf>) = (Vec::new(), Vec::new());
        let mut seen: HashSet<PathBuf> = HashSet::from([root.to_owned()]);
        let mut queue = VecDeque::from([root.to_owned()]);
        while let Some(file) = queue.pop_front() {
            let scan = self.scan(&file);
            front.extend(scan.inserted.iter().cloned());
            back.extend(scan.appended.iter().cloned());
            let dirs: Vec<PathBuf> = front
                .iter()
                .rev()
                .cloned()
                .chain([script_dir.clone()])
                .chain(self.search.entries.iter().cloned())
                .chain(back.iter().cloned())
                .chain([self.workspace.to_owned()])
                .collect();
            for import in &scan.imports {
                for module in self.resolve(import, &file, &dirs) {
                    reached.entry(module.clone()).or_default().insert(file.clone());
                    if seen.insert(module.clone()) {
                        queue.push_back(module);
                    }
                }
            }
        }
    }

    fn scan(&mut self, file: &Path) -> Scan {
        if let Some(scan) = self.scans.get(file) {
            return scan.clone();
        }
        let scan = match std::fs::read(file) {
            Ok(bytes) => pyscan::scan(&String::from_utf8_lossy(&bytes), file, self.workspace),
            Err(_) => Scan::default(),
        };
        self.scans.insert(file.to_owned(), scan.clone());
        scan
    }

    /// Inside the workspace, and not the interpreter's own.
    fn followable(&self, path: &Path) -> bool {
        let Ok(rel) = path.strip_prefix(self.workspace) else { return false };
        let owned =
            rel.components().any(|c| matches!(c, Component::Normal(n) if n == "site-packages" || n == "dist-packages"));
        !owned && !self.installed.iter().any(|p| path.starts_with(p))
    }

    /// The module files `import` loads, from `file`, looking in `dirs`.
    fn resolve(&self, import: &Import, file: &Path, dirs: &[PathBuf]) -> Vec<PathBuf> {
        let mut files = Vec::new();
        let package_dirs = if import.level == 0 {
            self.dotted(&import.module, dirs, &mut files)
        } else {
            let mut base = file.parent().unwrap_or(file).to_owned();
            for _ in 1..import.level {
                base = base.parent().map(Path::to_owned).unwrap_or(base);
            }
            if import.module.is_empty() {
                let init = base.join("__init__.py");
                if init.is_file() && self.followable(&init) {
                    files.push(init);
                }
                self.followable(&base).then(|| vec![base])
            } else {
                self.dotted(&import.module, &[base], &mut files)
            }
        };
        // `from package import name`: a name may be a submodule.
        if let Some(package_dirs) = package_dirs {
            for name in &import.names {
                match find(name, &package_dirs) {
                    Some(Found::Module(f)) | Some(Found::Package { init: f, .. }) if self.followable(&f) => {
                        files.push(f)
                    }
                    _ => {}
                }
            }
        }
        files
    }

    /// Load `a.b.c` from `dirs`: each package's `__init__.py` and the module, pushed on `files`;
    /// the directories of the last part when it is a package.
    fn dotted(&self, parts: &[String], dirs: &[PathBuf], files: &mut Vec<PathBuf>) -> Option<Vec<PathBuf>> {
        let mut dirs = dirs.to_vec();
        for part in parts {
            match find(part, &dirs)? {
                Found::Module(f) => {
                    if self.followable(&f) {
                        files.push(f);
                    }
                    return None;
                }
                Found::Package { dir, init } => {
                    if !self.followable(&init) {
                        return None;
                    }
                    files.push(init);
                    dirs = vec![dir];
                }
                Found::Namespace(portions) => {
                    dirs = portions.into_iter().filter(|p| self.followable(p)).collect();
                    if dirs.is_empty() {
                        return None;
                    }
                }
            }
        }
        Some(dirs)
    }
}

/// Where `name` is in `dirs`, as the interpreter's path finder looks: the first directory with
/// a package or a module wins; directories of that name without `__init__.py` are the portions
/// of a namespace package when no directory has more.
fn find(name: &str, dirs: &[PathBuf]) -> Option<Found> {
    let mut portions = Vec::new();
    for dir in dirs {
        let base = dir.join(name);
        let init = base.join("__init__.py");
        if init.is_file() {
            return Some(Found::Package { dir: base, init });
        }
        let module = dir.join(format!("{name}.py"));
        if module.is_file() {
            return Some(Found::Module(module));
        }
        if base.is_dir() {
            portions.push(base);
        }
    }
    (!portions.is_empty()).then_some(Found::Namespace(portions))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace of `(path, text)` files; the reached modules as workspace-relative paths, each
    /// with its importers.
    fn reached(files: &[(&str, &str)], roots: &[&str], search: impl Fn(&Path) -> SearchPath) -> Vec<(String, String)> {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let roots: Vec<PathBuf> = roots.iter().map(|r| ws.join(r)).collect();
        let rel = |p: &Path| p.strip_prefix(&ws).unwrap().to_string_lossy().into_owned();
        follow(&roots, &ws, &search(dir.path()))
            .into_iter()
            .map(|(m, by)| (rel(&m), by.iter().map(|p| rel(p)).collect::<Vec<_>>().join(", ")))
            .collect()
    }

    fn none(_: &Path) -> SearchPath {
        SearchPath::default()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn each_import_form_reaches_its_module_file() {
        let files = [
            (
                "ws/tools/gen.py",
                "import a.b\nfrom . import sibling\nfrom pkg import mod\nfrom helpers.weights import SCALE\n\
                 def f():\n    import infunc\ntry:\n    import intry\nexcept ImportError:\n    pass\n\
                 import importlib\nm = importlib.import_module(\"dyn.target\")\n",
            ),
            ("ws/tools/a/__init__.py", ""),
            ("ws/tools/a/b.py", ""),
            ("ws/tools/sibling.py", ""),
            ("ws/tools/pkg/__init__.py", ""),
            ("ws/tools/pkg/mod.py", ""),
            ("ws/tools/helpers/weights.py", "SCALE = 1\n"),
            ("ws/tools/infunc.py", ""),
            ("ws/tools/intry.py", ""),
            ("ws/tools/dyn/target.py", ""),
        ];
        assert_eq!(
            reached(&files, &["tools/gen.py"], none),
            pairs(&[
                ("tools/a/__init__.py", "tools/gen.py"),
                ("tools/a/b.py", "tools/gen.py"),
                ("tools/dyn/target.py", "tools/gen.py"),
                ("tools/helpers/weights.py", "tools/gen.py"),
                ("tools/infunc.py", "tools/gen.py"),
                ("tools/intry.py", "tools/gen.py"),
                ("tools/pkg/__init__.py", "tools/gen.py"),
                ("tools/pkg/mod.py", "tools/gen.py"),
                ("tools/sibling.py", "tools/gen.py"),
            ])
        );
    }

    #[test]
    fn imports_are_followed_transitively_through_cycles_and_package_inits() {
        let files = [
            ("ws/gen.py", "import lib.one\n"),
            ("ws/lib/__init__.py", "from .shared import CONSTANT\n"),
            ("ws/lib/shared.py", "CONSTANT = 1\n"),
            ("ws/lib/one.py", "from . import two\n"),
            ("ws/lib/two.py", "from lib import one  # a cycle\nfrom .. import top\n"),
            ("ws/top.py", ""),
        ];
        assert_eq!(
            reached(&files, &["gen.py"], none),
            pairs(&[
                ("lib/__init__.py", "gen.py, lib/one.py, lib/two.py"),
                ("lib/one.py", "gen.py, lib/two.py"),
                ("lib/shared.py", "lib/__init__.py"),
                ("lib/two.py", "lib/one.py"),
                ("top.py", "lib/two.py"),
            ])
        );
    }

    #[test]
    fn modules_outside_the_workspace_or_installed_are_not_followed_and_missing_ones_are_no_error() {
        let files = [
            (
                "ws/tools/gen.py",
                "import sys\nsys.path.insert(0, \"../outside\")\nimport far\nimport torch\nimport not_there\n\
                 from not_there_either import x\nimport json\nimport local\n",
            ),
            ("outside/far.py", "import local_to_far\n"),
            ("outside/local_to_far.py", ""),
            ("ws/.venv/lib/python3.12/site-packages/torch/__init__.py", "import torch.nn\n"),
            ("ws/.venv/lib/python3.12/site-packages/torch/nn.py", ""),
            ("stdlib/json/__init__.py", ""),
            ("ws/json.py", "# the standard library's comes first"),
            ("ws/tools/local.py", ""),
        ];
        let search = |root: &Path| SearchPath {
            entries: vec![root.join("stdlib"), root.join("ws/.venv/lib/python3.12/site-packages")],
            installed: vec![root.join("stdlib"), root.join("ws/.venv")],
        };
        let local = pairs(&[("tools/local.py", "tools/gen.py")]);
        assert_eq!(reached(&files, &["tools/gen.py"], search), local);
        // Without the interpreter's own places, site-packages is still never followed.
        let only_path = |root: &Path| SearchPath { installed: vec![root.join("stdlib")], ..search(root) };
        assert_eq!(reached(&files, &["tools/gen.py"], only_path), local);
    }

    #[test]
    fn the_scripts_directory_comes_first_and_a_regular_package_beats_a_namespace() {
        let files = [
            ("ws/tools/gen.py", "import helpers\nimport ns.mod\n"),
            ("ws/tools/helpers.py", ""),
            ("ws/helpers.py", ""),
            ("ws/tools/ns/mod.py", ""),
            ("ws/ns/__init__.py", ""),
            ("ws/ns/mod.py", ""),
        ];
        assert_eq!(
            reached(&files, &["tools/gen.py"], none),
            pairs(&[
                ("ns/__init__.py", "tools/gen.py"),
                ("ns/mod.py", "tools/gen.py"),
                ("tools/helpers.py", "tools/gen.py")
            ])
        );
    }

    #[test]
    fn python_files_are_found_by_suffix_or_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).unwrap();
            dir.path().join(name)
        };
        assert!(is_python(&write("a.py", "")));
        assert!(is_python(&write("gen", "#!/usr/bin/env python3\nimport x\n")));
        assert!(!is_python(&write("run.sh", "#!/bin/sh\npython3 gen.py\n")));
    }
}
