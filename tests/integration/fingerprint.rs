//! The fingerprint: frozen encoding, order independence, and each facet changing the key when
//! (and only when) its fact changes.

use crate::support::{set_exec, write};
use exact_cache::env::Env;
use exact_cache::fingerprint::{
    CommandOutput, CpuFacts, Facet, Fingerprint, FingerprintError, FingerprintSpec, HostSystem, HwCaps, OsFacts,
    System, Value, collect,
};
use exact_cache::paths::Locations;
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};

#[test]
fn frozen_vectors_match() {
    let text = std::fs::read_to_string("tests/vectors/fingerprint-vectors.json").unwrap();
    let cases: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    assert!(cases.len() >= 6);
    for case in cases {
        let fp: Fingerprint = serde_json::from_value(case["components"].clone()).unwrap();
        assert_eq!(fp.digest(), case["digest"].as_str().unwrap(), "vector `{}`", case["name"]);
    }
}

#[test]
fn independent_reference_implementation_agrees_with_the_vectors() {
    let out = std::process::Command::new("python3").args(["tests/vectors/reference.py", "--check"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// A machine whose facts tests set one at a time.
#[derive(Clone)]
struct FakeSystem {
    cpu: CpuFacts,
    os: OsFacts,
    libc: Option<String>,
    /// program → `--version`-style output; missing programs are not installed.
    programs: HashMap<String, String>,
    /// The files that exist.
    files: BTreeSet<PathBuf>,
}

impl FakeSystem {
    fn baseline() -> Self {
        let flags = "cx16 lahf_lm popcnt pni sse4_1 sse4_2 ssse3 avx avx2 bmi1 bmi2 f16c fma abm movbe xsave fpu";
        Self {
            cpu: CpuFacts { arch: "x86_64".into(), flags: flags.split(' ').map(str::to_owned).collect(), hwcaps: None },
            os: OsFacts { family: "linux".into(), distro: Some("ubuntu".into()), version: Some("24.04".into()) },
            libc: Some("glibc 2.39".into()),
            programs: [
                ("cc".to_owned(), "cc (Ubuntu 13.2.0) 13.2.0\nCopyright\n".to_owned()),
                ("c++".to_owned(), "c++ (Ubuntu 13.2.0) 13.2.0\n".to_owned()),
            ]
            .into(),
            files: BTreeSet::new(),
        }
    }
}

impl System for FakeSystem {
    fn run(&self, program: &str, _args: &[&str], _env: &Env, _cwd: &Path) -> io::Result<Option<CommandOutput>> {
        Ok(self.programs.get(program).map(|stdout| CommandOutput {
            success: true,
            code: Some(0),
            stdout: stdout.clone(),
            stderr: String::new(),
        }))
    }
    fn run_shell(&self, command: &str, env: &Env, cwd: &Path) -> io::Result<CommandOutput> {
        HostSystem::default().run_shell(command, env, cwd)
    }
    fn cpu(&self) -> CpuFacts {
        self.cpu.clone()
    }
    fn os(&self) -> OsFacts {
        self.os.clone()
    }
    fn libc(&self, _env: &Env) -> Option<String> {
        self.libc.clone()
    }
    fn is_file(&self, path: &Path) -> bool {
        self.files.contains(path)
    }
}

fn all_facets_spec(workspace: &Path) -> FingerprintSpec {
    let mut spec = FingerprintSpec::new(Locations { workspace: workspace.to_owned(), home: None });
    spec.native = Facet::ALL.into_iter().collect();
    spec
}

fn changed_components(a: &Fingerprint, b: &Fingerprint) -> BTreeSet<String> {
    a.diff(b).into_iter().map(|c| c.component).collect()
}

#[test]
fn each_native_facet_changes_only_its_component() {
    let dir = tempfile::tempdir().unwrap();
    let spec = all_facets_spec(dir.path());
    let env = Env::default();
    let base_sys = FakeSystem::baseline();
    let base = collect(&spec, &base_sys, &env).unwrap();
    assert_eq!(base.components["native.isa"]["level"], Value::text("x86-64-v3"));

    type Change = Box<dyn Fn(&mut FakeSystem)>;
    let cases: Vec<(&str, Change)> = vec![
        ("native.os", Box::new(|s| s.os.version = Some("22.04".into()))),
        ("native.libc", Box::new(|s| s.libc = Some("glibc 2.35".into()))),
        ("native.libc", Box::new(|s| s.libc = None)),
        (
            "native.compiler",
            Box::new(|s| {
                s.programs.insert("cc".into(), "cc (Ubuntu 14.1.0) 14.1.0\n".into());
            }),
        ),
        (
            "native.gpu",
            Box::new(|s| {
                s.programs.insert("nvidia-smi".into(), "NVIDIA H100 80GB HBM3, 9.0, 550.54.15\n".into());
            }),
        ),
        (
            "native.cuda",
            Box::new(|s| {
                s.programs.insert("nvcc".into(), "Cuda compilation tools, release 12.4, V12.4.131\n".into());
            }),
        ),
    ];
    for (component, change) in cases {
        let mut sys = base_sys.clone();
        change(&mut sys);
        let fp = collect(&spec, &sys, &env).unwrap();
        assert_ne!(fp.digest(), base.digest(), "{component}");
        assert_eq!(changed_components(&base, &fp), BTreeSet::from([component.to_owned()]), "{component}");
    }

    // Another architecture changes the ISA facet with it.
    let mut arm = base_sys.clone();
    arm.cpu.arch = "aarch64".into();
    let fp = collect(&spec, &arm, &env).unwrap();
    assert_eq!(changed_components(&base, &fp), BTreeSet::from(["native.arch".into(), "native.isa".into()]));

    // On arm64 the hardware capabilities name the features, whatever flags the (emulated)
    // /proc/cpuinfo shows: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics, and sve2.
    arm.cpu.hwcaps = Some(HwCaps { hwcap: 0x1ff, hwcap2: 0b10 });
    let fp = collect(&spec, &arm, &env).unwrap();
    assert_eq!(fp.components["native.isa"]["features"], Value::text("asimd sve2 atomics crc32 aes sha2"));
    assert_eq!(
        fp.components["native.cpu-flags"]["flags"],
        Value::text("aes asimd atomics crc32 evtstrm fp pmull sha1 sha2 sve2")
    );

    // AVX-512 raises the ISA level; the full flag list changes too (cpu-flags is on here).
    let mut v4 = base_sys.clone();
    v4.cpu.flags.extend(["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"].map(str::to_owned));
    let fp = collect(&spec, &v4, &env).unwrap();
    assert_eq!(fp.components["native.isa"]["level"], Value::text("x86-64-v4"));
    assert_eq!(changed_components(&base, &fp), BTreeSet::from(["native.cpu-flags".into(), "native.isa".into()]));

    // A flag that no ISA level uses changes only the opt-in cpu-flags facet…
    let mut extra_flag = base_sys.clone();
    extra_flag.cpu.flags.insert("rdrand".into());
    let fp = collect(&spec, &extra_flag, &env).unwrap();
    assert_eq!(changed_components(&base, &fp), BTreeSet::from(["native.cpu-flags".into()]));
    // …so with the default facets it does not change the key at all.
    let default_spec = FingerprintSpec::new(spec.locations.clone());
    assert_eq!(
        collect(&default_spec, &base_sys, &env).unwrap().digest(),
        collect(&default_spec, &extra_flag, &env).unwrap().digest()
    );
}

#[test]
fn two_job_containers_give_two_keys_and_the_same_one_the_same_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = FingerprintSpec::new(Locations { workspace: dir.path().to_owned(), home: None });
    spec.native.insert(Facet::named("container"));
    let in_docker = FakeSystem { files: [PathBuf::from("/.dockerenv")].into(), ..FakeSystem::baseline() };
    let declared = |image: &str| Env::from_pairs([("EXACT_CACHE_CONTAINER_IMAGE", image)]);
    let fingerprint = |sys: &FakeSystem, env: &Env| collect(&spec, sys, env).unwrap();

    let gcc13 = fingerprint(&in_docker, &declared("ghcr.io/org/build:gcc13@sha256:1111"));
    let gcc14 = fingerprint(&in_docker, &declared("ghcr.io/org/build:gcc14@sha256:2222"));
    assert_ne!(gcc13.digest(), gcc14.digest());
    assert_eq!(changed_components(&gcc13, &gcc14), BTreeSet::from(["native.container".into()]));
    assert_eq!(gcc13.components["native.container"]["image"], Value::text("ghcr.io/org/build:gcc13@sha256:1111"));
    assert_eq!(gcc13.components["native.container"]["marker"], Value::text("/.dockerenv"));
    assert_eq!(fingerprint(&in_docker, &declared("ghcr.io/org/build:gcc13@sha256:1111")).digest(), gcc13.digest());

    // With nothing declared, the marker still tells a container from the runner's own machine.
    let on_the_runner = fingerprint(&FakeSystem::baseline(), &Env::default());
    assert_eq!(on_the_runner.components["native.container"]["marker"], Value::Absent);
    assert_ne!(fingerprint(&in_docker, &Env::default()).digest(), on_the_runner.digest());

    // The facet is opt-in: by default the key does not depend on the container.
    let default_spec = FingerprintSpec::new(spec.locations.clone());
    assert_eq!(
        collect(&default_spec, &in_docker, &declared("ghcr.io/org/build:gcc13@sha256:1111")).unwrap().digest(),
        collect(&default_spec, &FakeSystem::baseline(), &Env::default()).unwrap().digest()
    );
}

#[test]
fn missing_tools_are_recorded_absent() {
    let dir = tempfile::tempdir().unwrap();
    let spec = all_facets_spec(dir.path());
    let mut sys = FakeSystem::baseline();
    sys.programs.clear();
    let fp = collect(&spec, &sys, &Env::default()).unwrap();
    assert_eq!(fp.components["native.compiler"]["cc"], Value::Absent);
    assert_eq!(fp.components["native.compiler"]["c++"], Value::Absent);
    assert_eq!(fp.components["native.gpu"]["nvidia-smi"], Value::Absent);
    assert_eq!(fp.components["native.cuda"]["nvcc"], Value::Absent);

    // The same on the real machine, for a compiler that does not exist.
    let mut real = FingerprintSpec::new(spec.locations.clone());
    real.native = [Facet::named("compiler"), Facet::named("gpu")].into();
    real.compilers = vec!["exact-cache-no-such-cc".into()];
    let fp = collect(&real, &HostSystem::default(), &Env::capture()).unwrap();
    assert_eq!(fp.components["native.compiler"]["exact-cache-no-such-cc"], Value::Absent);
}

#[test]
fn a_compiler_named_in_compilers_that_is_missing_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = FingerprintSpec::new(Locations { workspace: dir.path().to_owned(), home: None });
    spec.native = [Facet::named("compiler")].into();
    spec.compilers = vec!["cc".into(), "gcc-99".into()];
    spec.named_compilers = ["cc".to_owned(), "gcc-99".to_owned()].into();
    let err = collect(&spec, &FakeSystem::baseline(), &Env::default()).unwrap_err();
    assert!(matches!(&err, FingerprintError::CompilerNotFound { compiler } if compiler == "gcc-99"), "{err:?}");
    assert_eq!(err.to_string(), "compiler `gcc-99` (named in `compilers`) not found");

    // Only the named ones: a compiler a preset adds to the list is still a default probe.
    spec.named_compilers = ["cc".to_owned()].into();
    let fp = collect(&spec, &FakeSystem::baseline(), &Env::default()).unwrap();
    assert_eq!(fp.components["native.compiler"]["gcc-99"], Value::Absent);
    assert!(fp.components["native.compiler"]["cc"].as_text().unwrap().starts_with("cc (Ubuntu"));

    let mut real = spec.clone();
    real.compilers = vec!["exact-cache-no-such-cc".into()];
    real.named_compilers = real.compilers.iter().cloned().collect();
    let err = collect(&real, &HostSystem::default(), &Env::capture()).unwrap_err();
    assert_eq!(err.to_string(), "compiler `exact-cache-no-such-cc` (named in `compilers`) not found");
}

fn files_spec(workspace: &Path, patterns: &[&str]) -> FingerprintSpec {
    let mut spec = FingerprintSpec::new(Locations { workspace: workspace.to_owned(), home: None });
    spec.native.clear();
    spec.hash_files = patterns.iter().map(|p| p.to_string()).collect();
    spec
}

fn digest(spec: &FingerprintSpec) -> String {
    collect(spec, &HostSystem::default(), &Env::capture()).unwrap().digest()
}

#[test]
fn hash_files_content_and_exec_bit_enter_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(&ws.join("tools/gen.py"), b"print('model')\n");
    write(&ws.join("tools/data.bin"), &[0u8; 4096]);
    let spec = files_spec(ws, &["tools/**"]);
    let base = digest(&spec);

    set_exec(&ws.join("tools/gen.py"), true);
    let exec = digest(&spec);
    assert_ne!(exec, base, "exec bit flip");
    set_exec(&ws.join("tools/gen.py"), false);
    assert_eq!(digest(&spec), base, "flipping back restores the key");

    let mut data = vec![0u8; 4096];
    data[2048] = 1;
    write(&ws.join("tools/data.bin"), &data);
    let fp = collect(&spec, &HostSystem::default(), &Env::capture()).unwrap();
    assert_ne!(fp.digest(), base, "one byte of one file");
    let labels: Vec<String> = fp.components["files"].keys().cloned().collect();
    assert_eq!(labels, ["tools/data.bin", "tools/gen.py"], "per-file digests are kept, workspace-relative");
}

#[test]
fn directory_order_glob_order_and_checkout_path_do_not_matter() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let files = [("gen/z.py", "z"), ("gen/a.py", "a"), ("gen/sub/m.py", "m"), ("lock.txt", "l")];
    for (f, c) in files {
        write(&a.path().join(f), c.as_bytes());
    }
    for (f, c) in files.iter().rev() {
        write(&b.path().join(f), c.as_bytes());
    }
    let da = digest(&files_spec(a.path(), &["gen/**/*.py", "lock.txt"]));
    let db = digest(&files_spec(b.path(), &["lock.txt", "gen/**/*.py"]));
    assert_eq!(da, db);
    // Overlapping patterns hash each file once.
    assert_eq!(da, digest(&files_spec(a.path(), &["gen/**/*.py", "gen/*.py", "lock.txt"])));
}

#[test]
fn symlinks_are_hashed_as_links_and_by_what_they_resolve_to() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(&ws.join("d/target-a"), b"a");
    write(&ws.join("d/target-b"), b"a");
    std::os::unix::fs::symlink("target-a", ws.join("d/link")).unwrap();
    let spec = files_spec(ws, &["d/link"]);
    let fp = collect(&spec, &HostSystem::default(), &Env::capture()).unwrap();
    let a_digest = "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb";
    assert_eq!(fp.components["files"]["d/link"], Value::text(format!("symlink target-a -> {a_digest} -")));
    let before = fp.digest();
    // Another target with the same content: still a new key (the link is part of it).
    std::fs::remove_file(ws.join("d/link")).unwrap();
    std::os::unix::fs::symlink("target-b", ws.join("d/link")).unwrap();
    let retargeted = digest(&spec);
    assert_ne!(retargeted, before);
    // The content behind the link changes: a new key (requirements.txt -> reqs/base.txt).
    write(&ws.join("d/target-b"), b"changed");
    assert_ne!(digest(&spec), retargeted);
    std::fs::remove_file(ws.join("d/target-b")).unwrap();
    let fp = collect(&spec, &HostSystem::default(), &Env::capture()).unwrap();
    assert_eq!(fp.components["files"]["d/link"], Value::text("symlink target-b (dangling)"));
}

#[test]
fn hash_files_errors_name_the_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let err = collect(&files_spec(dir.path(), &["nothing/*.py"]), &HostSystem::default(), &Env::default()).unwrap_err();
    assert_eq!(err.to_string(), "`hash-files` pattern `nothing/*.py` matched no files");
    let err = collect(&files_spec(dir.path(), &["a/[b"]), &HostSystem::default(), &Env::default()).unwrap_err();
    assert!(matches!(err, FingerprintError::HashFilesPath(_)), "{err}");
}

#[test]
fn env_values_enter_the_key_whatever_their_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = FingerprintSpec::new(Locations { workspace: dir.path().to_owned(), home: None });
    spec.native.clear();
    spec.hash_env = vec!["A".into(), "B".into()];
    let sys = HostSystem::default();
    let d = |spec: &FingerprintSpec, env: &Env| collect(spec, &sys, env).unwrap().digest();
    let env1 = Env::from_pairs([("A", "1"), ("B", "2")]);
    let env2 = Env::from_pairs([("B", "2"), ("A", "1")]);
    let base = d(&spec, &env1);
    assert_eq!(base, d(&spec, &env2));
    let mut reversed = spec.clone();
    reversed.hash_env = vec!["B".into(), "A".into()];
    assert_eq!(base, d(&reversed, &env1));
    assert_ne!(base, d(&spec, &Env::from_pairs([("A", "1"), ("B", "3")])), "value change");
    let unset = d(&spec, &Env::from_pairs([("A", "1")]));
    let empty = d(&spec, &Env::from_pairs([("A", "1"), ("B", "")]));
    assert_ne!(unset, empty, "unset and empty differ");
    assert_eq!(
        d(&spec, &Env::from_pairs([("A", "1"), ("B", "2"), ("UNRELATED", "x")])),
        base,
        "other variables do not matter"
    );
}

#[test]
fn hash_commands_enter_the_key_and_a_failing_one_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = FingerprintSpec::new(Locations { workspace: dir.path().to_owned(), home: None });
    spec.native.clear();
    write(&dir.path().join("v.txt"), b"1");
    spec.hash_commands = vec!["cat v.txt".into()];
    let env = Env::capture();
    let base = collect(&spec, &HostSystem::default(), &env).unwrap();
    assert_eq!(base.components["commands"]["cat v.txt"], Value::text("1"));
    write(&dir.path().join("v.txt"), b"2");
    assert_ne!(collect(&spec, &HostSystem::default(), &env).unwrap().digest(), base.digest());

    spec.hash_commands = vec!["echo fine".into(), "echo oops >&2; exit 7".into()];
    let err = collect(&spec, &HostSystem::default(), &env).unwrap_err();
    assert_eq!(err.to_string(), "`hash-commands` command `echo oops >&2; exit 7` failed: exit status 7: oops");
}

/// A fake site-packages with one distribution per `(name, version)`.
fn site(dir: &Path, dists: &[(&str, &str)]) {
    let _ = std::fs::remove_dir_all(dir);
    for (name, version) in dists {
        let info = dir.join(format!("{}-{version}.dist-info", name.replace('-', "_")));
        write(&info.join("METADATA"), format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n").as_bytes());
    }
}

#[test]
fn python_distributions_enter_the_key_except_excluded_ones() {
    let dir = tempfile::tempdir().unwrap();
    let sitedir = dir.path().join("site");
    let mut env = Env::capture();
    env.set("PYTHONPATH", sitedir.to_str().unwrap());
    let mut spec = FingerprintSpec::new(Locations { workspace: dir.path().to_owned(), home: None });
    spec.native.clear();
    spec.python = Some("python3".into());
    spec.python_exclude = vec!["My_Project".into()];
    let sys = HostSystem::default();
    let fp = |dists: &[(&str, &str)]| {
        site(&sitedir, dists);
        collect(&spec, &sys, &env).unwrap()
    };
    let base = fp(&[("Exact-Cache-Fake-Torch", "2.14.0"), ("my-project", "0.1.0")]);
    assert_eq!(base.components["python.dists"]["exact-cache-fake-torch"], Value::text("2.14.0"));
    assert!(!base.components["python.dists"].contains_key("my-project"));
    assert!(base.components["python.interpreter"]["version"].as_text().unwrap().starts_with('3'));

    let bumped = fp(&[("Exact-Cache-Fake-Torch", "2.15.0"), ("my-project", "0.1.0")]);
    let changes = base.diff(&bumped);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].label, "exact-cache-fake-torch");

    let excluded_bump = fp(&[("Exact-Cache-Fake-Torch", "2.14.0"), ("my-project", "0.2.0")]);
    assert_eq!(excluded_bump.digest(), base.digest(), "an excluded distribution never changes the key");

    let mut missing = spec.clone();
    missing.python = Some("exact-cache-no-such-python".into());
    let err = collect(&missing, &sys, &env).unwrap_err();
    assert_eq!(err.to_string(), "python interpreter `exact-cache-no-such-python` not found");
}

#[test]
fn variant_and_preset_components_enter_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = FingerprintSpec::new(Locations { workspace: dir.path().to_owned(), home: None });
    spec.native.clear();
    let sys = FakeSystem::baseline();
    let none = collect(&spec, &sys, &Env::default()).unwrap().digest();
    spec.variant = Some("lsan".into());
    let lsan = collect(&spec, &sys, &Env::default()).unwrap().digest();
    spec.variant = Some("cuda-debug".into());
    let cuda = collect(&spec, &sys, &Env::default()).unwrap().digest();
    assert!(none != lsan && lsan != cuda && none != cuda);
}
