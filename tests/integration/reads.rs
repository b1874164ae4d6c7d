//! The reads hook (`uncovered-reads`) against what trust round 5 tried: it is invisible in the
//! user's Python on every interpreter the machine has (2.7 through 3.13), keeps no descriptor
//! across the user's code, bounds its memory, records paths exactly (bytecode as its source,
//! shared libraries loaded), arms itself only in files it created, and blames only the
//! generator of each cache. Each a job of Actions steps on the local store, with real Pythons.

use crate::support::{NO_STATE, Step, StepResult, assert_shown, needs, write};
use exact_cache::outcome::SaveResult;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A program run as a later step of the job: the runner's environment plus `env` (what the
/// restore exported), in the workspace, within 300 s (torch's first import is slow).
fn python(python: &Path, step: &Step, env: &BTreeMap<String, String>, program: &str) -> Output {
    let out = Command::new("timeout")
        .arg("300")
        .arg(python)
        .args(["-c", program])
        .current_dir(&step.ws)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .envs(env)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(124), "timed out: {program}");
    out
}

/// [`python`] with `python3`, which must succeed; its stdout.
fn run(step: &Step, restore: &StepResult, program: &str) -> String {
    let out = python(Path::new("python3"), step, &restore.env, program);
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

fn log_of(restore: &StepResult) -> Vec<u8> {
    std::fs::read(&restore.env["EXACT_CACHE_READS_LOG"]).unwrap()
}

/// Every Python the machine has, one per version, oldest first: `pythonX.Y` and `python3` on
/// `PATH`, and pyenv's installs (`$PYENV_ROOT` or `~/.pyenv`).
fn interpreters() -> Vec<(String, PathBuf)> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    let names =
        ["python2.7".to_owned(), "python3".to_owned()].into_iter().chain((6..=14).map(|m| format!("python3.{m}")));
    let names: Vec<String> = names.collect();
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        candidates.extend(names.iter().map(|n| dir.join(n)));
    }
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")));
    if let Some(Ok(versions)) = pyenv.map(|p| std::fs::read_dir(p.join("versions"))) {
        candidates.extend(versions.flatten().map(|v| v.path().join("bin/python")));
    }
    let mut found = BTreeMap::new();
    for exe in candidates.into_iter().filter(|c| c.is_file()) {
        let Ok(out) = Command::new(&exe)
            .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .output()
        else {
            continue;
        };
        let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if out.status.success() && !version.is_empty() {
            let (major, minor) = version.split_once('.').unwrap();
            let order = (major.parse::<u32>().unwrap(), minor.parse::<u32>().unwrap());
            found.entry(order).or_insert((version, exe));
        }
    }
    found.into_values().collect()
}

/// What a user's program sees of its Python: the sitecustomize that ran, the search path, a
/// read, and anything printed on the way. Python 2.7 and 3.x alike.
const PROBE: &str = "import sys\n\
    import sitecustomize\n\
    print(getattr(sitecustomize, 'MARK', None))\n\
    print([p for p in sys.path if 'exact-cache' in p])\n\
    print(open('data.txt').read().strip())\n\
    sys.stderr.write('done\\n')\n";

#[test]
fn every_python_of_the_machine_runs_as_before_and_3_8_and_later_record_their_reads() {
    let mut step = Step::new();
    write(&step.ws.join("data.txt"), b"the data\n");
    write(&step.ws.join("gen.py"), b"");
    let theirs = step.dir.path().join("theirs");
    write(&theirs.join("sitecustomize.py"), b"MARK = 'their sitecustomize ran'\n");
    step.set_env("PYTHONPATH", theirs.to_string_lossy());
    let restore = step.run(&["restore"], &[("path", "out"), ("hash-files", "gen.py"), ("native", "none")], NO_STATE);
    assert!(restore.env["PYTHONPATH"].ends_with(&format!(":{}", theirs.display())), "{:?}", restore.env);
    let without = BTreeMap::from([("PYTHONPATH".to_owned(), theirs.to_string_lossy().into_owned())]);
    let pythons = interpreters();
    eprintln!("interpreters: {pythons:?}");
    assert!(pythons.iter().any(|(v, _)| v.starts_with("3.")), "python3 is needed");
    let mut recorded = 0;
    for (version, exe) in &pythons {
        let before = log_of(&restore).len();
        let started = Instant::now();
        let hooked = python(exe, &step, &restore.env, PROBE);
        let elapsed = started.elapsed();
        let plain = python(exe, &step, &without, PROBE);
        assert!(hooked.status.success(), "{version}: {}", String::from_utf8_lossy(&hooked.stderr));
        assert_eq!(
            (String::from_utf8_lossy(&hooked.stdout), String::from_utf8_lossy(&hooked.stderr)),
            (String::from_utf8_lossy(&plain.stdout), String::from_utf8_lossy(&plain.stderr)),
            "{version}: the same output with and without the hook"
        );
        assert!(String::from_utf8_lossy(&hooked.stdout).starts_with("their sitecustomize ran\n[]\nthe data"));
        assert!(elapsed < Duration::from_secs(10), "{version}: {elapsed:?}");
        let added = String::from_utf8_lossy(&log_of(&restore)[before..]).into_owned();
        let (major, minor) = version.split_once('.').unwrap();
        if (major.parse::<u32>().unwrap(), minor.parse::<u32>().unwrap()) >= (3, 8) {
            let read = format!(" {}\n", step.ws.join("data.txt").display());
            assert!(added.starts_with("p ") && added.contains(&read), "{version}: {added}");
            recorded += 1;
        } else {
            assert_eq!(
                added,
                format!("! Python {version} has no audit hooks (3.8 and later have): its reads are not seen\n")
            );
        }
    }
    assert!(recorded >= 1);
}

/// Armed for torch's figures (after a compile cache's hit), alone or with reads, the hook changes
/// nothing either on any interpreter, and a process that never imports torch adds nothing to the
/// log for them.
#[test]
fn armed_for_torch_every_python_runs_as_before_and_without_torch_reports_nothing() {
    let mut step = Step::new();
    write(&step.ws.join("data.txt"), b"the data\n");
    let theirs = step.dir.path().join("theirs");
    write(&theirs.join("sitecustomize.py"), b"MARK = 'their sitecustomize ran'\n");
    step.set_env("PYTHONPATH", theirs.to_string_lossy());
    let restore = step.run(&["restore"], &[("path", "out"), ("native", "none")], NO_STATE);
    let without = BTreeMap::from([("PYTHONPATH".to_owned(), theirs.to_string_lossy().into_owned())]);
    for (version, exe) in &interpreters() {
        for record in ["torch", "reads,torch"] {
            let mut env = restore.env.clone();
            env.insert("EXACT_CACHE_RECORD".into(), record.into());
            let before = log_of(&restore).len();
            let hooked = python(exe, &step, &env, PROBE);
            let plain = python(exe, &step, &without, PROBE);
            assert!(hooked.status.success(), "{version} {record}: {}", String::from_utf8_lossy(&hooked.stderr));
            assert_eq!(
                (String::from_utf8_lossy(&hooked.stdout), String::from_utf8_lossy(&hooked.stderr)),
                (String::from_utf8_lossy(&plain.stdout), String::from_utf8_lossy(&plain.stderr)),
                "{version} {record}: the same output with and without the hook"
            );
            let added = String::from_utf8_lossy(&log_of(&restore)[before..]).into_owned();
            let torch_said = |l: &str| l.starts_with("t ") || l.starts_with("! the torch hook");
            assert!(!added.lines().any(torch_said), "{version} {record}: {added}");
            if record == "torch" {
                assert_eq!(added, "", "{version}: nothing recorded without torch");
            }
        }
    }
}

/// Daemonizing code closes every descriptor and opens its own: the hook's log never lands in
/// them, since the hook keeps none open (it appends, then closes). The hook writes its log
/// before (a child is started) and after the descriptors are closed.
#[test]
fn after_closerange_the_users_file_on_descriptor_3_gets_only_the_users_data() {
    let step = Step::new();
    for i in 0..600 {
        write(&step.ws.join(format!("data/many/{i}.txt")), b"x");
    }
    write(&step.ws.join("data/a.txt"), b"a");
    let restore = step.run(&["restore"], &[("path", "fixtures"), ("native", "none")], NO_STATE);
    let out = run(
        &step,
        &restore,
        "import os, subprocess, sys\n\
         open('data/a.txt').read()\n\
         subprocess.run([sys.executable, '-c', 'pass'], check=True)\n\
         os.closerange(3, 256)\n\
         os.makedirs('fixtures', exist_ok=True)\n\
         f = open('fixtures/out.txt', 'w')\n\
         print(f.fileno())\n\
         for i in range(600):\n    open('data/many/%d.txt' % i).read()\n\
         subprocess.run([sys.executable, '-c', 'pass'], check=True)\n\
         f.write('USER DATA\\n')\n\
         f.close()\n",
    );
    assert_eq!(out, "3\n");
    assert_eq!(std::fs::read_to_string(step.ws.join("fixtures/out.txt")).unwrap(), "USER DATA\n");
    let log = String::from_utf8(log_of(&restore)).unwrap();
    assert!(log.contains(&format!("{}\n", step.ws.join("data/many/599.txt").display())), "{log}");
}

/// A process's record is capped: a million distinct opens cost the user's process a bounded
/// amount of memory, and the save says the record was cut.
#[test]
fn the_hooks_memory_is_capped_and_the_cut_is_said() {
    let mut step = Step::new();
    let restore = step.run(&["restore"], &[("path", "fixtures"), ("native", "none")], NO_STATE);
    let program = "import resource\n\
         for i in range(300000):\n    try:\n        open('missing/%d.txt' % i)\n    except OSError:\n        pass\n\
         print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n";
    let rss = |env: &BTreeMap<String, String>| {
        let out = python(Path::new("python3"), &step, env, program);
        String::from_utf8_lossy(&out.stdout).trim().parse::<f64>().unwrap() / 1024.0
    };
    let started = Instant::now();
    let (with, without) = (rss(&restore.env), rss(&BTreeMap::new()));
    assert!(with - without < 32.0, "the hook grew the process by {:.1} MiB", with - without);
    assert!(started.elapsed() < Duration::from_secs(60), "{:?}", started.elapsed());
    let log = String::from_utf8(log_of(&restore)).unwrap();
    assert_eq!(log.lines().filter(|l| l.starts_with("r ")).count(), 100_000);
    assert!(log.lines().any(|l| l.starts_with("c ")), "a note that the record was cut");
    let saved = post(&mut step, &restore, &[("path", "fixtures"), ("native", "none")]);
    // The warning says the record of one Python process was cut at 100,000 files.
    assert_shown!(step.dir.path(), "a_record_cut_at_its_limit", saved.said());
}

/// The workspace of a repository named `site-packages-tools` is recorded (only the
/// interpreter's own places are skipped), and a name that is not UTF-8 reaches the save.
#[test]
fn a_workspace_named_site_packages_and_a_name_not_utf8_are_recorded() {
    use std::os::unix::ffi::OsStrExt;
    let mut step = Step::new();
    step.ws = step.dir.path().join("work/site-packages-tools/site-packages-tools");
    std::fs::create_dir_all(&step.ws).unwrap();
    write(&step.ws.join("gen.py"), b"");
    write(&step.ws.join("data/plain.txt"), b"p");
    write(&step.ws.join(std::ffi::OsStr::from_bytes(b"data/caf\xe9.txt")), b"c");
    let inputs = [("path", "fixtures"), ("hash-files", "gen.py"), ("native", "none")];
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    run(
        &step,
        &restore,
        "import os\n\
         open('data/plain.txt').read()\n\
         open(b'data/caf\\xe9.txt').read()\n\
         os.makedirs('fixtures')\n\
         open('fixtures/out', 'w').write('x')\n",
    );
    let saved = post(&mut step, &restore, &inputs);
    assert_eq!(saved.output("uncovered-files"), "data/caf\u{FFFD}.txt\ndata/plain.txt", "{}", saved.stdout);
}

/// A module Python loads from its bytecode (current in `__pycache__`, so the source is never
/// opened) is recorded as its source file.
#[test]
fn a_module_loaded_from_its_bytecode_is_recorded_as_its_source() {
    let mut step = Step::new();
    write(&step.ws.join("gen.py"), b"");
    write(&step.ws.join("lib/helper.py"), b"VALUE = 1\n");
    // An earlier step (or job) compiled it.
    let compiled = Command::new("python3")
        .args(["-m", "compileall", "-q", "lib"])
        .current_dir(&step.ws)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .status()
        .unwrap();
    assert!(compiled.success());
    // The same size and time, other content: what runs shows that the bytecode was loaded.
    let mtime =
        filetime::FileTime::from_last_modification_time(&std::fs::metadata(step.ws.join("lib/helper.py")).unwrap());
    write(&step.ws.join("lib/helper.py"), b"VALUE = 2\n");
    filetime::set_file_mtime(step.ws.join("lib/helper.py"), mtime).unwrap();
    let inputs = [("path", "fixtures"), ("hash-files", "gen.py"), ("native", "none")];
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    let out = run(
        &step,
        &restore,
        "import os, sys\n\
         sys.path.insert(0, 'lib')\n\
         import helper\n\
         print(helper.VALUE)\n\
         os.makedirs('fixtures')\n\
         open('fixtures/out', 'w').write('x')\n",
    );
    assert_eq!(out, "1\n", "the bytecode ran, not the source");
    let saved = post(&mut step, &restore, &inputs);
    assert_eq!(saved.uncovered_files(), ["lib/helper.py"], "{}", saved.stdout);
}

/// A tiny shared library built with the C compiler cargo links with.
fn build_library(ws: &Path) {
    write(&ws.join("op/op.c"), b"int answer(void) { return 42; }\n");
    write(&ws.join("op/CMakeLists.txt"), b"add_library(op SHARED op.c)\n");
    std::fs::create_dir_all(ws.join("build")).unwrap();
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o", "build/libop.so", "op/op.c"])
        .current_dir(ws)
        .status()
        .unwrap();
    assert!(built.success());
}

/// `ctypes.CDLL` of a workspace library is recorded; the save asks for the sources it is built
/// from, and is satisfied once `hash-files` lists them.
#[test]
fn a_library_loaded_through_ctypes_asks_for_its_sources() {
    let mut step = Step::new();
    build_library(&step.ws);
    write(&step.ws.join("gen.py"), b"");
    let generate = "import ctypes, os\n\
        print(ctypes.CDLL('build/libop.so').answer())\n\
        os.makedirs('fixtures', exist_ok=True)\n\
        open('fixtures/out', 'w').write('42')\n";
    let inputs = [("path", "fixtures"), ("hash-files", "gen.py"), ("native", "none"), ("uncovered-reads", "fail")];
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(run(&step, &restore, generate), "42\n");
    let refused = post(&mut step, &restore, &inputs);
    assert_eq!(
        (refused.output("save-result"), refused.output("uncovered-files")),
        ("uncovered-reads", "build/libop.so")
    );
    // The error names the library and the inputs that would say how it is built.
    assert_shown!(step.dir.path(), "a_workspace_library_refused", refused.said());
    let listed =
        [("path", "fixtures"), ("hash-files", "gen.py\nop/**"), ("native", "none"), ("uncovered-reads", "fail")];
    std::fs::remove_dir_all(step.ws.join("fixtures")).unwrap();
    let restore = step.run(&["restore"], &listed, NO_STATE);
    run(&step, &restore, generate);
    let saved = post(&mut step, &restore, &listed);
    assert_eq!((saved.output("save-result"), saved.output("uncovered-files")), ("saved", ""), "{}", saved.stdout);
}

/// What deepmd-kit's custom ops do: `torch.ops.load_library` of a workspace library.
#[needs(torch)]
fn a_library_loaded_by_torch_ops_load_library_is_recorded() {
    let venv = crate::support::torch_venv();
    let mut step = Step::new();
    build_library(&step.ws);
    write(&step.ws.join("gen.py"), b"");
    let inputs = [("path", "fixtures"), ("hash-files", "gen.py"), ("native", "none")];
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    let out = python(
        &venv.join("bin/python"),
        &step,
        &restore.env,
        "import os, torch\n\
         torch.ops.load_library('build/libop.so')\n\
         os.makedirs('fixtures', exist_ok=True)\n\
         open('fixtures/out', 'w').write('x')\n",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let saved = post(&mut step, &restore, &inputs);
    assert_eq!(saved.uncovered_files(), ["build/libop.so"], "{}", saved.stdout);
}

const GENERATOR: &str = "import os\n\
    cases = open('data/cases.txt').read()\n\
    os.makedirs('fixtures', exist_ok=True)\n\
    open('fixtures/water.expected', 'w').write(cases)\n";

/// A later `python -m unittest` step reads its own files: under `uncovered-reads: fail` the save
/// still saves, since only the generator's reads count.
#[test]
fn a_later_test_step_is_not_the_generator() {
    let mut step = Step::new();
    write(&step.ws.join("tools/gen.py"), GENERATOR.as_bytes());
    write(&step.ws.join("data/cases.txt"), b"5\n");
    write(&step.ws.join("tests/__init__.py"), b"");
    write(
        &step.ws.join("tests/test_water.py"),
        b"import unittest\n\
          class T(unittest.TestCase):\n    def test(self):\n        \
          self.assertEqual(open('fixtures/water.expected').read(), open('tests/expected.txt').read())\n",
    );
    write(&step.ws.join("tests/expected.txt"), b"5\n");
    let inputs = [
        ("path", "fixtures"),
        ("hash-files", "tools/gen.py\ndata/cases.txt"),
        ("native", "none"),
        ("uncovered-reads", "fail"),
    ];
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    run(&step, &restore, "exec(open('tools/gen.py').read())");
    let tested = python(
        Path::new("python3"),
        &step,
        &restore.env,
        "import unittest; unittest.main(module=None, argv=['x', 'discover'])",
    );
    assert!(tested.status.success(), "{}", String::from_utf8_lossy(&tested.stderr));
    let saved = post(&mut step, &restore, &inputs);
    assert_eq!(
        (saved.code, saved.output("save-result"), saved.output("uncovered-files")),
        (0, "saved", ""),
        "{}",
        saved.stdout
    );
    // The log says it weighs the reads of 1 of the job's 2 Python processes.
    assert_shown!(step.dir.path(), "the_generators_reads_are_weighed", saved.brief());
}

/// Two caches of one job share the log: each save weighs its own generator's reads.
#[test]
fn two_caches_do_not_blame_each_others_generator() {
    let mut step = Step::new();
    for c in ["a", "b"] {
        write(&step.ws.join(format!("gen_{c}.py")), format!("import os\nv = open('{c}/in.txt').read()\nos.makedirs('out_{c}', exist_ok=True)\nopen('out_{c}/x', 'w').write(v)\n").as_bytes());
        write(&step.ws.join(format!("{c}/in.txt")), c.as_bytes());
    }
    let inputs = |c: &'static str| {
        let hash_files: &'static str = if c == "a" { "gen_a.py\na/in.txt" } else { "gen_b.py\nb/in.txt" };
        let path: &'static str = if c == "a" { "out_a" } else { "out_b" };
        vec![("path", path), ("prefix", c), ("hash-files", hash_files), ("native", "none"), ("uncovered-reads", "fail")]
    };
    let a = step.run(&["restore"], &inputs("a"), NO_STATE);
    // The second restore runs with what the first exported, as a later step does.
    step.extra_env.extend(a.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let b = step.run(&["restore"], &inputs("b"), NO_STATE);
    assert!(b.env.is_empty() || !b.env.contains_key("EXACT_CACHE_READS_LOG"), "armed once: {:?}", b.env);
    let exported = StepResult { env: a.env.clone(), ..b };
    run(&step, &exported, "exec(open('gen_a.py').read())");
    run(&step, &exported, "exec(open('gen_b.py').read())");
    for c in ["b", "a"] {
        let restored = if c == "a" { &a } else { &exported };
        let saved = step.run(&["save", "--post"], &inputs(c), &restored.state);
        assert_eq!(
            (saved.code, saved.output("save-result"), saved.output("uncovered-files")),
            (0, "saved", ""),
            "{c}: {}",
            saved.stdout
        );
    }
}

/// A FIFO planted at the log hangs nothing: not the user's Python, not the save.
#[test]
fn a_fifo_at_the_log_hangs_nothing() {
    let mut step = Step::new();
    write(&step.ws.join("data.txt"), b"x");
    let inputs = [("path", "fixtures"), ("native", "none")];
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    let log = PathBuf::from(&restore.env["EXACT_CACHE_READS_LOG"]);
    std::fs::remove_file(&log).unwrap();
    assert!(Command::new("mkfifo").arg(&log).status().unwrap().success());
    let started = Instant::now();
    run(
        &step,
        &restore,
        "import os\nopen('data.txt').read()\nos.makedirs('fixtures')\nopen('fixtures/x', 'w').write('x')\n",
    );
    let saved = post(&mut step, &restore, &inputs);
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert_eq!(saved.save_result(), SaveResult::Saved);
    // The warning says the log is not a plain file.
    assert_shown!(step.dir.path(), "a_log_that_is_a_fifo", saved.said());
}

/// A log linked to `/dev/zero` is refused at once: the save neither follows it nor grows.
#[test]
fn a_log_linked_to_dev_zero_is_refused() {
    let mut step = Step::new();
    step.measure = true;
    let inputs = [("path", "fixtures"), ("native", "none")];
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    let log = PathBuf::from(&restore.env["EXACT_CACHE_READS_LOG"]);
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &log).unwrap();
    write(&step.ws.join("fixtures/x"), b"x");
    let started = Instant::now();
    let saved = post(&mut step, &restore, &inputs);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(saved.peak_rss_mib.unwrap() < 100.0, "{:?}", saved.peak_rss_mib);
    let linked = saved.said();
    // The same variable pointing at the device itself.
    let mut pointed = restore;
    pointed.env.insert("EXACT_CACHE_READS_LOG".into(), "/dev/zero".into());
    let saved = post(&mut step, &pointed, &inputs);
    // The warnings: the log is a link; `/dev/zero` is not a plain file.
    let said = format!("--- linked\n{linked}--- the device\n{}", saved.said());
    assert_shown!(step.dir.path(), "a_log_linked_to_dev_zero", said);
}

/// A log longer than the save reads (64 MiB) is read to that much, with a note.
#[test]
fn a_log_longer_than_the_cap_is_read_to_the_cap_and_said() {
    let mut step = Step::new();
    step.measure = true;
    let inputs = [("path", "fixtures"), ("native", "none")];
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    let log = std::fs::OpenOptions::new().append(true).open(&restore.env["EXACT_CACHE_READS_LOG"]).unwrap();
    log.set_len((64 << 20) + 4096).unwrap();
    write(&step.ws.join("fixtures/x"), b"x");
    let started = Instant::now();
    let saved = post(&mut step, &restore, &inputs);
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
    assert!(saved.peak_rss_mib.unwrap() < 200.0, "{:?}", saved.peak_rss_mib);
    // The warning says only the first 64.0 MiB of the log were read.
    assert_shown!(step.dir.path(), "a_log_longer_than_the_cap", saved.said());
}

/// Another user pre-creates `exact-cache/` in a shared `RUNNER_TEMP`, with a sitecustomize of
/// theirs and a log linked to a victim file: the restore warns and arms nothing, the victim file
/// is untouched and their code never runs. The same where `RUNNER_TEMP` itself lets every user
/// replace what is in it (no sticky bit). Another owner needs root to make: elsewhere only the
/// second case runs.
#[test]
fn a_planted_reads_directory_is_refused_and_its_code_never_runs() {
    use std::os::unix::fs::PermissionsExt;
    let root = unsafe { libc::geteuid() } == 0;
    for other_user in [false, true].into_iter().filter(|other| !other || root) {
        let step = Step::new();
        let planted = step.runner_temp.join("exact-cache");
        write(&planted.join("reads/sitecustomize.py"), b"print('PLANTED CODE RAN')\n");
        let victim = step.dir.path().join("victim.txt");
        write(&victim, b"precious\n");
        std::os::unix::fs::symlink(&victim, planted.join("reads/reads.log")).unwrap();
        for dir in [&planted, &planted.join("reads")] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        let why = if other_user {
            for p in [&planted, &planted.join("reads"), &planted.join("reads/sitecustomize.py")] {
                std::os::unix::fs::lchown(p, Some(65534), Some(65534)).unwrap();
            }
            "owned by another user (uid 65534)"
        } else {
            std::fs::set_permissions(&step.runner_temp, std::fs::Permissions::from_mode(0o777)).unwrap();
            "writable by every user"
        };
        write(&step.ws.join("gen.py"), b"");
        let restore =
            step.run(&["restore"], &[("path", "fixtures"), ("hash-files", "gen.py"), ("native", "none")], NO_STATE);
        assert!(
            restore.stdout.contains("::warning::uncovered-reads: the generating run's reads are not recorded: ")
                && restore.stdout.contains(why),
            "{}",
            restore.stdout
        );
        assert!(!restore.env.contains_key("PYTHONPATH") && !restore.env.contains_key("EXACT_CACHE_READS_LOG"));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert_eq!(run(&step, &restore, "print('mine')"), "mine\n");
    }
    if !root {
        eprintln!("not root: a directory of another user cannot be made here; only the open RUNNER_TEMP ran");
    }
}
