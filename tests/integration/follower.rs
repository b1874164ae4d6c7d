//! The import follower on workspaces of our own: what enters the key (a package loaded by a
//! computed name, `*` imports, each `sys.path` idiom), what is said where it cannot follow (a
//! warning in the log and the step summary), editable installs of the workspace left out of
//! `python.dists` (a real venv, a real interpreter), and every hostile source of trust round 5
//! ending in bounded time and memory.

use crate::support::{NO_STATE, Step, write};
use exact_cache::env::Env;
use exact_cache::fingerprint::{Fingerprint, FingerprintSpec, HostSystem, Note, collect, collect_noted};
use exact_cache::paths::Locations;
use std::path::Path;
use std::time::{Duration, Instant};

fn spec(ws: &Path, hash_files: &[&str]) -> FingerprintSpec {
    let mut spec = FingerprintSpec::new(Locations { workspace: ws.to_owned(), home: None });
    spec.native.clear();
    spec.hash_files = hash_files.iter().map(|s| s.to_string()).collect();
    spec
}

fn env() -> Env {
    Env::from_pairs([("PATH", std::env::var("PATH").unwrap())])
}

fn fingerprint(ws: &Path, hash_files: &[&str]) -> Fingerprint {
    collect(&spec(ws, hash_files), &HostSystem::default(), &env()).unwrap()
}

fn imported(fp: &Fingerprint) -> Vec<(String, String)> {
    let imports = fp.components.get("imports").cloned().unwrap_or_default();
    imports.into_iter().map(|(k, v)| (k, v.display().to_owned())).collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

/// deepmd-kit's `deepmd/backend/__init__.py`: its directory's modules are loaded by computed name;
/// each enters the key, noted so, and a change to one changes the key.
#[test]
fn a_package_loaded_by_computed_name_enters_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(&ws.join("gen.py"), b"import deepmd.backend\n");
    write(&ws.join("deepmd/__init__.py"), b"");
    write(
        &ws.join("deepmd/backend/__init__.py"),
        b"from importlib import import_module\nfrom pathlib import Path\nPACKAGE_BASE = \"deepmd.backend\"\n\
          for module_file in Path(__file__).parent.glob(\"*.py\"):\n    if module_file.name != \"__init__.py\":\n\
          \x20       module_name = f\".{module_file.stem}\"\n        import_module(module_name, PACKAGE_BASE)\n",
    );
    write(&ws.join("deepmd/backend/pytorch.py"), b"BACKEND = 'pt'\n");
    write(&ws.join("deepmd/backend/jax.py"), b"BACKEND = 'jax'\n");
    let before = fingerprint(ws, &["gen.py"]);
    assert_eq!(
        imported(&before),
        pairs(&[
            ("deepmd/__init__.py", "deepmd/backend/__init__.py, gen.py"),
            ("deepmd/backend/__init__.py", "gen.py"),
            ("deepmd/backend/jax.py", "deepmd/backend/__init__.py (computed name)"),
            ("deepmd/backend/pytorch.py", "deepmd/backend/__init__.py (computed name)"),
        ])
    );
    write(&ws.join("deepmd/backend/pytorch.py"), b"BACKEND = 'pt2'\n");
    assert_ne!(fingerprint(ws, &["gen.py"]).digest(), before.digest());
}

/// `from pkg import *` loads the names of a literal `__all__` (so editing one changes the key, and
/// editing a module it leaves out does not), or the whole package when `__all__` is computed.
#[test]
fn star_imports_follow_all() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(&ws.join("gen.py"), b"from pkg import *\nfrom computed import *\n");
    write(&ws.join("pkg/__init__.py"), b"__all__ = [\"a\", \"b\"]\n");
    for m in ["a", "b", "c"] {
        write(&ws.join(format!("pkg/{m}.py")), b"X = 1\n");
    }
    write(&ws.join("computed/__init__.py"), b"from .names import NAMES\n__all__ = list(NAMES)\n");
    write(&ws.join("computed/names.py"), b"NAMES = ['x']\n");
    write(&ws.join("computed/x.py"), b"");
    let before = fingerprint(ws, &["gen.py"]);
    assert_eq!(
        imported(&before),
        pairs(&[
            ("computed/__init__.py", "gen.py"),
            ("computed/names.py", "computed/__init__.py, gen.py (import *)"),
            ("computed/x.py", "gen.py (import *)"),
            ("pkg/__init__.py", "gen.py"),
            ("pkg/a.py", "gen.py"),
            ("pkg/b.py", "gen.py"),
        ])
    );
    write(&ws.join("pkg/c.py"), b"X = 2\n");
    assert_eq!(fingerprint(ws, &["gen.py"]).digest(), before.digest(), "pkg/c.py is not in `__all__`");
    write(&ws.join("pkg/a.py"), b"X = 2\n");
    assert_ne!(fingerprint(ws, &["gen.py"]).digest(), before.digest(), "pkg/a.py is");
}

/// Each `sys.path` idiom of deepmd-kit's generators and their neighbours makes the helper beside
/// the script's parent importable; each such helper enters the key.
#[test]
fn each_sys_path_idiom_reaches_its_helper() {
    let idioms = [
        "sys.path.insert(0, os.path.abspath(os.path.dirname(__file__) + \"/..\"))",
        "sys.path.insert(0, os.path.join(os.path.dirname(__file__), \"..\"))",
        "sys.path[:0] = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]",
        "sys.path.insert(0, os.environ.get(\"GEN_HELPERS\", os.path.dirname(__file__) + \"/..\"))",
        "sys.path.insert(0, str(Path(__file__).resolve().parents[1]))",
        "ROOT = Path(__file__).parent.parent\nsys.path.append(str(ROOT))",
        "HERE = os.path.dirname(os.path.abspath(__file__))\nsys.path += [os.path.join(HERE, os.pardir)]",
    ];
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(&ws.join("source/tests/gen_common.py"), b"import dpa4_fixtures\n");
    write(&ws.join("source/tests/dpa4_fixtures.py"), b"");
    let mut roots = Vec::new();
    for (i, idiom) in idioms.iter().enumerate() {
        let script = format!("source/tests/infer/gen_{i}.py");
        let text = format!("import os, sys\nfrom pathlib import Path\n{idiom}\nfrom gen_common import write\n");
        write(&ws.join(&script), text.as_bytes());
        roots.push(script);
    }
    for root in &roots {
        let fp = fingerprint(ws, &[root]);
        assert_eq!(
            imported(&fp),
            pairs(&[
                ("source/tests/dpa4_fixtures.py", "source/tests/gen_common.py"),
                ("source/tests/gen_common.py", root),
            ]),
            "{}",
            std::fs::read_to_string(ws.join(root)).unwrap()
        );
    }
}

/// A `sys.path` change the follower cannot evaluate and an import by a computed name: one warning
/// for the file, naming its lines and what to list, in the log and in the step summary.
#[test]
fn what_cannot_be_followed_is_a_warning_in_the_log_and_the_summary() {
    let step = Step::new();
    write(
        &step.ws.join("tools/gen.py"),
        b"import importlib, os, sys\n\nsys.path.insert(0, os.environ[\"HELPERS\"])\nimport helpers\n\
          plugin = importlib.import_module(sys.argv[1])\n",
    );
    let inputs = [("path", "out"), ("hash-files", "tools/gen.py"), ("native", "none")];
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(restore.code, 0, "{}", restore.stdout);
    // One warning naming both lines, and the summary's row of what the key leaves out.
    let table = restore.summary.lines().skip_while(|l| *l != "| what the key leaves out |");
    let warned = format!("{}\n{}", restore.said(), table.collect::<Vec<_>>().join("\n"));
    crate::support::assert_shown!(step.dir.path(), "what_cannot_be_followed", warned);
    // The command line's `fingerprint` says the same.
    let out = step.cli(&["fingerprint", "--path=out", "--hash-files=tools/gen.py", "--native=none"]);
    let warning = restore.warnings().remove(0);
    assert!(out.stderr.lines().any(|l| l.strip_prefix("warning: ") == Some(&warning)), "{out:?}");
}

/// A distribution installed in editable mode from the workspace leaves `python.dists` — its version
/// may change and the key does not — and the log says which and why; a regular distribution's
/// version still changes the key; `python-keep-editable` keeps the editable one. A real venv of
/// `python3` and its interpreter: the legacy install (`setup.py develop`: an `.egg-link` and
/// `easy-install.pth`) when setuptools is in the venv, and a PEP 660 install as pip writes it
/// (`direct_url.json` with `dir_info.editable`, a `.pth`) written by hand — pip builds one only
/// with `wheel`, which an offline machine may not have.
#[test]
fn an_editable_install_of_the_workspace_leaves_the_python_facet() {
    let step = Step::new();
    let ws = step.ws.clone();
    let venv = step.dir.path().join("venv");
    let ok = std::process::Command::new("python3").args(["-m", "venv"]).arg(&venv).status().unwrap();
    assert!(ok.success());
    let python = venv.join("bin/python");
    let site = {
        let out = std::process::Command::new(&python)
            .args(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
            .output()
            .unwrap();
        std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    };
    // PEP 660: `pip install -e ws/modern` as pip records it.
    write(&ws.join("modern/src/modern/__init__.py"), b"");
    let pep660 = |version: &str| {
        let info = site.join("modern_proj-0.dist-info");
        let _ = std::fs::remove_dir_all(&info);
        write(
            &info.join("METADATA"),
            format!("Metadata-Version: 2.1\nName: modern-proj\nVersion: {version}\n").as_bytes(),
        );
        let url = format!("file://{}", ws.join("modern").display());
        write(
            &info.join("direct_url.json"),
            format!("{{\"dir_info\": {{\"editable\": true}}, \"url\": \"{url}\"}}").as_bytes(),
        );
        write(&info.join("RECORD"), b"");
        write(
            &site.join("__editable__.modern_proj-0.pth"),
            format!("{}\n", ws.join("modern/src").display()).as_bytes(),
        );
    };
    // A regular distribution.
    let regular = |version: &str| {
        let info = site.join("plain_dist-0.dist-info");
        let _ = std::fs::remove_dir_all(&info);
        write(
            &info.join("METADATA"),
            format!("Metadata-Version: 2.1\nName: plain-dist\nVersion: {version}\n").as_bytes(),
        );
    };
    // Legacy: `setup.py develop`, by setuptools itself when the venv has it, else as it writes it.
    write(&ws.join("legacy/src/legacy/__init__.py"), b"");
    let legacy = |version: &str| {
        let info = ws.join("legacy/src/legacy_proj.egg-info");
        let _ = std::fs::remove_dir_all(&info);
        write(
            &info.join("PKG-INFO"),
            format!("Metadata-Version: 2.1\nName: legacy-proj\nVersion: {version}\n").as_bytes(),
        );
        write(&site.join("legacy-proj.egg-link"), format!("{}\n.", ws.join("legacy/src").display()).as_bytes());
        write(&site.join("easy-install.pth"), format!("{}\n", ws.join("legacy/src").display()).as_bytes());
    };
    let with_setuptools =
        std::process::Command::new(&python).args(["-c", "import setuptools"]).status().is_ok_and(|s| s.success());
    if with_setuptools {
        write(
            &ws.join("legacy/setup.py"),
            b"from setuptools import setup\nsetup(name='legacy-proj', version='1.0', package_dir={'': 'src'}, packages=['legacy'])\n",
        );
        let out = std::process::Command::new(&python)
            .args(["setup.py", "develop"])
            .current_dir(ws.join("legacy"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(site.join("legacy-proj.egg-link").is_file());
    } else {
        legacy("1.0");
    }
    pep660("1.0.dev1+g1111111");
    regular("2.0");
    write(&ws.join("gen.py"), b"import modern, legacy\n");
    let collect_with = |keep: bool| {
        let mut spec = spec(&ws, &["gen.py"]);
        spec.python = Some(python.to_string_lossy().into_owned());
        spec.python_keep_editable = keep;
        collect_noted(&spec, &HostSystem::default(), &env()).unwrap()
    };
    let (before, notes) = collect_with(false);
    let dists = &before.components["python.dists"];
    assert!(dists.contains_key("plain-dist"), "{dists:?}");
    assert!(!dists.contains_key("modern-proj") && !dists.contains_key("legacy-proj"), "{dists:?}");
    let mut left_out: Vec<(&str, &str)> = notes
        .iter()
        .filter_map(|n| match n {
            Note::EditableLeftOut { name, location, .. } => Some((name.as_str(), location.as_str())),
            _ => None,
        })
        .collect();
    left_out.sort();
    assert_eq!(left_out, [("legacy-proj", "legacy/src"), ("modern-proj", "modern")]);
    // The editable project's files enter through imports.
    assert!(before.components["imports"].contains_key("modern/src/modern/__init__.py"), "{before:?}");
    // A new commit: the editable versions change, the key does not.
    pep660("1.0.dev2+g2222222");
    legacy("1.1");
    assert_eq!(collect_with(false).0.digest(), before.digest());
    // Another version of a regular distribution changes it.
    regular("2.1");
    assert_ne!(collect_with(false).0.digest(), before.digest());
    // `python-keep-editable` keeps them.
    let (kept, notes) = collect_with(true);
    let dists = &kept.components["python.dists"];
    assert_eq!(dists.len(), before.components["python.dists"].len() + 2, "{dists:?}");
    assert_eq!(dists["modern-proj"].display(), "1.0.dev2+g2222222");
    assert!(notes.is_empty(), "{notes:?}");
    // The log says which and why.
    let python = python.to_string_lossy().into_owned();
    let inputs = [("path", "out"), ("hash-files", "gen.py"), ("native", "none"), ("python", python.as_str())];
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert!(
        restore.stdout.contains(
            "python.dists: `modern-proj` 1.0.dev2+g2222222 left out: installed in editable mode from the workspace \
             (`modern`), its files enter the key through `hash-files` and imports; `python-keep-editable: true` keeps it"
        ),
        "{}",
        restore.stdout
    );
}

/// What one hostile workspace costs a `fingerprint`: its time, its peak memory, its log.
struct Attack {
    elapsed: Duration,
    rss_mib: f64,
    log: String,
    /// What the step said: its exit status and annotations.
    said: String,
    key: String,
}

/// A `fingerprint` of `hash_files` in `step` (which measures its memory).
fn attack(step: &Step, hash_files: &str) -> Attack {
    assert!(step.measure);
    let inputs = [("path", "out"), ("hash-files", hash_files), ("native", "none")];
    let started = Instant::now();
    let run = step.run(&["fingerprint"], &inputs, NO_STATE);
    let elapsed = started.elapsed();
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let said = run.said();
    Attack {
        elapsed,
        rss_mib: run.peak_rss_mib.unwrap(),
        log: run.stdout.clone(),
        said,
        key: run.output("key").to_owned(),
    }
}

fn measured() -> Step {
    let mut step = Step::new();
    step.measure = true;
    step
}

/// The issue's bound, each attack: under 2 s and 100 MiB — for an optimized binary. `cargo test`'s
/// is not, and scans about ten times slower: it is given 10 s (`bench/follower_attacks.py` times
/// the release binary).
fn bounded(name: &str, a: &Attack) {
    let limit = Duration::from_secs(if cfg!(debug_assertions) { 10 } else { 2 });
    assert!(a.elapsed < limit, "{name}: {:?}", a.elapsed);
    assert!(a.rss_mib < 100.0, "{name}: {:.1} MiB", a.rss_mib);
    assert!(!a.key.is_empty(), "{name}");
}

#[test]
fn deep_nesting_a_huge_index_and_a_link_to_a_special_file_are_bounded() {
    let step = measured();
    let ws = &step.ws;
    write(
        &ws.join("nested.py"),
        format!("import helper_a\nx = {}1{}\nimport helper_b\n", "(".repeat(20_000), ")".repeat(20_000)).as_bytes(),
    );
    write(&ws.join("helper_a.py"), b"");
    write(&ws.join("helper_b.py"), b"");
    let nested = attack(&step, "nested.py");
    bounded("20,000 nested parentheses", &nested);
    write(
        &ws.join("index.py"),
        b"import sys\nfrom pathlib import Path\nROOT = Path(__file__).parents[18446744073709551615]\nsys.path.insert(0, str(ROOT))\n",
    );
    let index = attack(&step, "index.py");
    bounded("parents[2**64 - 1]", &index);
    insta::assert_snapshot!("parents_of_a_huge_index", index.said);
    write(&ws.join("linked.py"), b"import helper\n");
    std::os::unix::fs::symlink("/proc/self/pagemap", ws.join("helper.py")).unwrap();
    let linked = attack(&step, "linked.py");
    bounded("a link to /proc/self/pagemap", &linked);
    insta::with_settings!({ filters => vec![(r"/proc/\d+/", "/proc/[PID]/")] }, {
        insta::assert_snapshot!("a_link_to_a_special_file", linked.said);
    });
}

#[test]
fn a_big_file_and_a_long_line_are_bounded() {
    let step = measured();
    let ws = &step.ws;
    // 50 MiB: hashed, not scanned, said.
    let mut big = b"import helper\n".to_vec();
    big.extend(std::iter::repeat_n(b"x = 1\n", (50 << 20) / 6).flatten());
    write(&ws.join("big.py"), &big);
    write(&ws.join("helper.py"), b"");
    let a = attack(&step, "big.py");
    bounded("a 50 MiB .py", &a);
    insta::assert_snapshot!("a_50_mib_file", a.said);
    // Just under the limit, one line: scanned, in little memory.
    let line = format!("import helper; x = [{}]\n", "1, ".repeat(((4 << 20) - 64) / 3));
    write(&ws.join("long.py"), line.as_bytes());
    let a = attack(&step, "long.py");
    bounded("a 4 MiB line", &a);
    assert!(!a.log.contains("::warning::"), "{}", a.log);
}

/// The quadratic shapes of trust round 5, at sizes that showed them.
#[test]
fn the_quadratic_shapes_are_linear() {
    let step = measured();
    let ws = &step.ws;
    // 1,000 modules importing one another, all in `hash-files`.
    for i in 0..1000 {
        let imports: String = (0..1000).step_by(7).map(|j| format!("import m{}\n", (i + j) % 1000)).collect();
        write(&ws.join(format!("pkg/m{i}.py")), imports.as_bytes());
    }
    bounded("1,000 modules importing each other", &attack(&step, "pkg/*.py"));
    // 4,000 modules each putting their directory first on `sys.path`.
    for i in 0..4000 {
        let text = format!(
            "import os, sys\nsys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\nimport n{}\n",
            (i + 1) % 4000
        );
        write(&ws.join(format!("many/n{i}.py")), text.as_bytes());
    }
    bounded("4,000 sys.path inserts", &attack(&step, "many/n0.py"));
    let params: String = (0..80_000).map(|i| format!("a{i}: int = {i}, ")).collect();
    write(&ws.join("params.py"), format!("def f({params}):\n    import helper\n").as_bytes());
    write(&ws.join("helper.py"), b"");
    bounded("a def of 80,000 parameters", &attack(&step, "params.py"));
    let chain = format!("from pathlib import Path\na = Path(__file__)\n{}", "a = a / \"x\"\n".repeat(937 * 1024 / 12));
    write(&ws.join("chain.py"), chain.as_bytes());
    bounded("937 KiB of `a = a / \"x\"`", &attack(&step, "chain.py"));
}
