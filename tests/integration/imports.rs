//! The key covers what the generator reads: the imports of `hash-files`' Python files are
//! followed into the key, and the generating run names the files its Python read that no input
//! covers (the scenario, run as Actions steps on the local store, with real `python3`).

use crate::support::{NO_STATE, Step, StepResult, assert_shown, write};
use exact_cache::env::Env;
use exact_cache::fingerprint::{FingerprintSpec, HostSystem, Value, collect};
use exact_cache::outcome::{MissReason, SaveResult};
use exact_cache::paths::Locations;
use std::path::Path;

const GENERATOR: &str = "import pathlib, sys\n\
    from helpers.weights import SCALE\n\
    cases = pathlib.Path('data/cases.txt').read_text().split()\n\
    out = pathlib.Path('fixtures')\n\
    out.mkdir(exist_ok=True)\n\
    (out / 'water.expected').write_text(str(int(cases[0]) * SCALE) + '\\n')\n\
    print('GENERATED', (out / 'water.expected').read_text().strip())\n";

fn project(step: &Step) {
    write(&step.ws.join("tools/gen.py"), GENERATOR.as_bytes());
    write(&step.ws.join("tools/helpers/weights.py"), b"SCALE = 1\n");
    write(&step.ws.join("data/cases.txt"), b"5\n");
}

fn inputs() -> Vec<(&'static str, &'static str)> {
    vec![("path", "fixtures"), ("prefix", "fixtures-v1"), ("hash-files", "tools/gen.py"), ("native", "none")]
}

/// Run the generator `script` as a later step of the job: the runner's environment plus what
/// the restore exported.
fn generate(step: &Step, restore: &StepResult, script: &str) -> String {
    let out = std::process::Command::new("python3")
        .arg(script)
        .current_dir(&step.ws)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .envs(&restore.env)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The post step of a job whose restore exported `restore.env`.
fn post(step: &mut Step, restore: &StepResult, inputs: &[(&str, &str)]) -> StepResult {
    let standing = step.extra_env.clone();
    step.extra_env.extend(restore.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let post = step.run(&["save", "--post"], inputs, &restore.state);
    step.extra_env = standing;
    post
}

#[test]
fn a_helper_change_is_a_miss_and_the_data_file_is_named_on_the_generating_run() {
    let mut step = Step::new();
    project(&step);

    // Run 1: a miss; the job generates; the save names the data file the generator read.
    let first = step.run(&["restore"], &inputs(), NO_STATE);
    assert_eq!(first.miss_reason(), MissReason::NotFound, "{}", first.stdout);
    assert!(first.env["PYTHONPATH"].contains("exact-cache/reads"), "{:?}", first.env);
    let components = first.fingerprint().components.components;
    assert!(matches!(components["files"]["tools/helpers/weights.py"], Value::Text(_)), "{components:?}");
    assert_eq!(components["imports"]["tools/helpers/weights.py"], Value::Text("tools/gen.py".into()));
    assert_eq!(generate(&step, &first, "tools/gen.py"), "GENERATED 5\n");
    let saved = post(&mut step, &first, &inputs());
    assert_eq!(saved.save_result(), SaveResult::Saved, "{}", saved.stdout);
    assert_eq!(saved.uncovered_files(), ["data/cases.txt"], "the script and its import are covered");
    assert_eq!(saved.warnings().len(), 1, "{}", saved.stdout);

    // Run 2: a hit; nothing is recorded.
    let second = step.run(&["restore"], &inputs(), NO_STATE);
    assert_eq!(second.output("reused"), "true", "{}", second.stdout);
    assert!(!second.env.contains_key("PYTHONPATH"), "a hit arranges nothing: {:?}", second.env);

    // Run 3: the helper changed: a miss, and the explanation names the helper and who imports it.
    // Another size: Python would take its cached bytecode of a same-size file written within the second.
    write(&step.ws.join("tools/helpers/weights.py"), b"SCALE = 2  # doubled\n");
    std::fs::remove_dir_all(step.ws.join("fixtures")).unwrap();
    let third = step.run(&["restore"], &inputs(), NO_STATE);
    assert_eq!(third.miss_reason(), MissReason::NotFound, "{}", third.stdout);
    assert_eq!(generate(&step, &third, "tools/gen.py"), "GENERATED 10\n");
    // The restore's summary counts the files the key covers (1 from hash-files, 1 through
    // imports); the save's warning and summary name the data file; the miss names the helper and
    // who imports it.
    let said = format!(
        "--- restore\n{}--- save\n{}--- helper changed\n{}",
        first.brief(),
        saved.brief(),
        third.group("Why this is a miss")
    );
    assert_shown!(step.dir.path(), "a_helper_change_and_the_data_file", said);

    // The one line that covers the data file: no file is left uncovered.
    let mut covered = inputs();
    covered[2] = ("hash-files", "tools/gen.py\ndata/cases.txt");
    let fourth = step.run(&["restore"], &covered, NO_STATE);
    generate(&step, &fourth, "tools/gen.py");
    let saved = post(&mut step, &fourth, &covered);
    assert_eq!((saved.output("save-result"), saved.output("uncovered-files")), ("saved", ""), "{}", saved.stdout);
    assert!(!saved.stdout.contains("::warning::"), "{}", saved.stdout);
}

#[test]
fn uncovered_reads_fail_refuses_the_save_and_off_records_nothing() {
    let mut step = Step::new();
    project(&step);
    let mut failing = inputs();
    failing.push(("uncovered-reads", "fail"));
    let restore = step.run(&["restore"], &failing, NO_STATE);
    generate(&step, &restore, "tools/gen.py");
    let refused = post(&mut step, &restore, &failing);
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert_eq!((refused.output("save-result"), refused.output("saved")), ("uncovered-reads", "false"));
    assert_eq!(refused.output("uncovered-files"), "data/cases.txt");
    assert_shown!(step.dir.path(), "uncovered_reads_fail_refuses_the_save", refused.said());
    assert!(
        !step.cache.join("entries").exists() || std::fs::read_dir(step.cache.join("entries")).unwrap().count() == 0
    );

    let mut off = inputs();
    off.push(("uncovered-reads", "off"));
    let restore = step.run(&["restore"], &off, NO_STATE);
    assert!(!restore.env.contains_key("PYTHONPATH") && !restore.env.contains_key("EXACT_CACHE_READS_LOG"));
}

#[test]
fn reads_under_path_in_hash_files_or_written_by_the_job_are_covered_and_a_users_sitecustomize_still_runs() {
    let mut step = Step::new();
    write(&step.ws.join("fixtures/previous.bin"), b"old");
    write(&step.ws.join("inputs/table.csv"), b"1,2\n");
    write(&step.ws.join("notes/readme.txt"), b"read me\n");
    write(&step.ws.join("notes/child.txt"), b"read by a child process\n");
    write(
        &step.ws.join("gen.py"),
        b"import pathlib, sitecustomize, sys\n\
          print('USER', sitecustomize.MARK)\n\
          print('OURS ON SYS.PATH', any('exact-cache' in p for p in sys.path))\n\
          pathlib.Path('fixtures/previous.bin').read_bytes()\n\
          pathlib.Path('inputs/table.csv').read_text()\n\
          pathlib.Path('scratch.txt').write_text('x')\n\
          pathlib.Path('scratch.txt').read_text()\n\
          pathlib.Path('notes/readme.txt').read_text()\n\
          pathlib.Path('fixtures/new.bin').write_bytes(b'new')\n\
          import subprocess\n\
          subprocess.run([sys.executable, '-c', \"open('notes/child.txt').read()\"], check=True)\n",
    );
    // The user's own sitecustomize, on the user's PYTHONPATH.
    let theirs = step.dir.path().join("theirs");
    write(&theirs.join("sitecustomize.py"), b"MARK = 'their sitecustomize ran'\n");
    step.set_env("PYTHONPATH", theirs.to_string_lossy());
    let inputs = [("path", "fixtures"), ("hash-files", "gen.py\ninputs/*.csv"), ("native", "none")];
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert!(restore.env["PYTHONPATH"].ends_with(&format!(":{}", theirs.display())), "{:?}", restore.env);
    let stdout = generate(&step, &restore, "gen.py");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.contains(&"USER their sitecustomize ran"), "{stdout}");
    assert!(lines.contains(&"OURS ON SYS.PATH False"), "{stdout}");
    let saved = post(&mut step, &restore, &inputs);
    assert_eq!(saved.output("uncovered-files"), "notes/child.txt\nnotes/readme.txt", "{}", saved.stdout);
}

#[test]
fn without_a_sitecustomize_of_their_own_python_runs_as_before() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"");
    let restore = step.run(&["restore"], &[("path", "out"), ("hash-files", "gen.py"), ("native", "none")], NO_STATE);
    let probe = "import sys\ntry:\n    import sitecustomize\n    print('sitecustomize', sitecustomize.__file__)\n\
                 except ImportError as e:\n    print('none', e.name)\nprint(sys.path[1:])\n";
    let run = |env: &std::collections::BTreeMap<String, String>| {
        let out = std::process::Command::new("python3")
            .args(["-c", probe])
            .current_dir(&step.ws)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .envs(env)
            .output()
            .unwrap();
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert!(restore.env.contains_key("PYTHONPATH"));
    assert_eq!(run(&restore.env), run(&Default::default()), "sys.path and sitecustomize as without the hook");
}

fn fingerprint(ws: &Path, follow: bool, python: Option<&str>) -> exact_cache::fingerprint::Fingerprint {
    let mut spec = FingerprintSpec::new(Locations { workspace: ws.to_owned(), home: None });
    spec.native.clear();
    spec.hash_files = vec!["tools/gen.py".into()];
    spec.follow_imports = follow;
    spec.python = python.map(str::to_owned);
    collect(&spec, &HostSystem::default(), &Env::from_pairs([("PATH", std::env::var("PATH").unwrap())])).unwrap()
}

#[test]
fn follow_imports_false_hashes_the_listed_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("tools/gen.py"), b"from helpers.weights import SCALE\n");
    write(&dir.path().join("tools/helpers/weights.py"), b"SCALE = 1\n");
    let on = fingerprint(dir.path(), true, None);
    let off = fingerprint(dir.path(), false, None);
    assert_eq!(off.components["files"].keys().collect::<Vec<_>>(), ["tools/gen.py"]);
    assert!(!off.components.contains_key("imports"));
    assert_eq!(on.components["imports"]["tools/helpers/weights.py"], Value::text("tools/gen.py"));
    write(&dir.path().join("tools/helpers/weights.py"), b"SCALE = 2\n");
    assert_ne!(fingerprint(dir.path(), true, None).digest(), on.digest());
    assert_eq!(fingerprint(dir.path(), false, None).digest(), off.digest());
}

#[test]
fn with_python_its_search_path_is_used_and_its_own_modules_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("tools/gen.py"), b"import colorsys\nimport src_pkg.mod\n");
    // `colorsys` is the standard library's, though the workspace root has one.
    write(&dir.path().join("colorsys.py"), b"");
    // A directory of the interpreter's search path inside the workspace (`PYTHONPATH=src`).
    write(&dir.path().join("src/src_pkg/__init__.py"), b"");
    write(&dir.path().join("src/src_pkg/mod.py"), b"");
    let mut spec = FingerprintSpec::new(Locations { workspace: dir.path().to_owned(), home: None });
    spec.native.clear();
    spec.hash_files = vec!["tools/gen.py".into()];
    spec.python = Some("python3".into());
    let env = Env::from_pairs([
        ("PATH", std::env::var("PATH").unwrap()),
        ("PYTHONPATH", dir.path().join("src").to_string_lossy().into_owned()),
    ]);
    let fp = collect(&spec, &HostSystem::default(), &env).unwrap();
    let imported: Vec<&String> = fp.components["imports"].keys().collect();
    assert_eq!(imported, ["src/src_pkg/__init__.py", "src/src_pkg/mod.py"]);
}

/// The budget: a generator that imports torch costs a warm fingerprint less than 0.2 s
/// more than one that does not, with torch's venv inside the workspace (as a checkout's `.venv`).
#[crate::support::needs(torch)]
fn a_torch_import_is_not_followed_and_costs_a_warm_fingerprint_little() {
    let venv = crate::support::torch_venv();
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(std::fs::canonicalize(&venv).unwrap(), dir.path().join(".venv-torch")).unwrap();
    write(&dir.path().join("tools/helpers/weights.py"), b"SCALE = 1\n");
    write(&dir.path().join("tools/plain.py"), b"import json\nfrom helpers.weights import SCALE\n");
    write(
        &dir.path().join("tools/torch_gen.py"),
        b"import json\nimport torch\nimport torch.nn.functional as F\nfrom helpers.weights import SCALE\n",
    );
    let spec = |script: &str| {
        let mut spec = FingerprintSpec::new(Locations { workspace: dir.path().to_owned(), home: None });
        spec.native.clear();
        spec.hash_files = vec![format!("tools/{script}")];
        spec.python = Some(".venv-torch/bin/python".into());
        spec
    };
    let env = Env::from_pairs([("PATH", std::env::var("PATH").unwrap())]);
    let timed = |script: &str| {
        let started = std::time::Instant::now();
        let fp = collect(&spec(script), &HostSystem::default(), &env).unwrap();
        (started.elapsed().as_secs_f64(), fp)
    };
    let (_, fp) = timed("torch_gen.py");
    let imported: Vec<&String> = fp.components["imports"].keys().collect();
    assert_eq!(imported, ["tools/helpers/weights.py"], "torch lies in the interpreter's site-packages: not followed");
    let median = |script: &str| {
        let mut times: Vec<f64> = (0..5).map(|_| timed(script).0).collect();
        times.sort_by(f64::total_cmp);
        times[2]
    };
    let (plain, torch) = (median("plain.py"), median("torch_gen.py"));
    assert!(torch - plain < 0.2, "torch import: {torch:.3} s, without: {plain:.3} s");
}

#[test]
fn where_the_hook_cannot_work_the_save_says_so_once_and_goes_on() {
    let mut step = Step::new();
    project(&step);
    let restore = step.run(&["restore"], &inputs(), NO_STATE);
    // Two processes of a Python without audit hooks (before 3.8) each left the same note.
    let note = "! Python 3.7 has no audit hooks (3.8 and later have): its reads are not seen\n";
    std::fs::write(&restore.env["EXACT_CACHE_READS_LOG"], note.repeat(2)).unwrap();
    write(&step.ws.join("fixtures/water.expected"), b"5\n");
    let saved = post(&mut step, &restore, &inputs());
    assert_eq!((saved.code, saved.output("save-result")), (0, "saved"), "{}", saved.stdout);
    assert_eq!(saved.stdout.matches("Python 3.7 has no audit hooks").count(), 1, "{}", saved.stdout);
}
