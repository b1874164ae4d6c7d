//! The committed aarch64 binary (`dist/exact-cache-aarch64-unknown-linux-gnu`) run under
//! qemu-user on this x86_64 machine: a local-store save → restore round trip, the fingerprint, and
//! a workflow under nektos/act on a runner that says it is Linux/ARM64.
//!
//! These run the committed binary, which tests/dist.rs proves was built from these sources,
//! not a build of their own: the release build is the expensive part.
//! They need Debian's `qemu-user` (`qemu-aarch64`) and `libc6-arm64-cross` (an aarch64 glibc in
//! `/usr/aarch64-linux-gnu`, the `-L` root qemu loads the binary's libraries from): `#[needs(qemu)]`,
//! which scripts/test installs.

use crate::support::act::{git_repo, run_act};
use crate::support::needs;
use crate::support::{NO_STATE, Step, snapshot, write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const AARCH64_BINARY: &str = "dist/exact-cache-aarch64-unknown-linux-gnu";
const SYSROOT: &str = "/usr/aarch64-linux-gnu";

/// The committed aarch64 binary, once qemu-user and the aarch64 glibc are there.
fn aarch64_binary() -> PathBuf {
    let qemu = Command::new("qemu-aarch64").arg("--version").output();
    assert!(
        qemu.is_ok_and(|o| o.status.success()) && Path::new(SYSROOT).join("lib/ld-linux-aarch64.so.1").exists(),
        "the aarch64 tests need qemu-user and an aarch64 glibc: apt-get install qemu-user libc6-arm64-cross"
    );
    let binary = Path::new(env!("CARGO_MANIFEST_DIR")).join(AARCH64_BINARY);
    assert!(binary.is_file(), "{}: missing (run scripts/build-dist)", binary.display());
    binary
}

/// A step whose runs execute the aarch64 binary under qemu. `Step`'s wrapper is handed the
/// native test binary as its first argument, which this one drops.
fn emulated_step() -> Step {
    let binary = aarch64_binary();
    let mut step = Step::new();
    // The native binary's path comes first (dropped); a shell would also drop the variables whose
    // names hold `-` (`INPUT_ALLOW-MACHINE-ONLY-KEY`), which the runner's node passes on.
    let exec = format!(
        "import os, sys; os.execvp('qemu-aarch64', ['qemu-aarch64', '-L', '{SYSROOT}', '{}'] + sys.argv[2:])",
        binary.display()
    );
    step.wrapper = ["python3", "-c", &exec].map(str::to_owned).to_vec();
    step
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[needs(qemu)]
fn the_aarch64_binary_runs_under_qemu() {
    let out =
        Command::new("qemu-aarch64").args(["-L", SYSROOT]).arg(aarch64_binary()).arg("--version").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), format!("exact-cache {}", env!("CARGO_PKG_VERSION")));
}

#[needs(qemu)]
fn the_aarch64_binary_saves_and_restores_a_tree_byte_identical_under_qemu() {
    let step = emulated_step();
    let inputs = [("path", "out\nmore/deep"), ("native", "os,arch,isa,libc"), ("prefix", "emulated")];
    write(&step.ws.join("out/top.txt"), b"top\n");
    write(&step.ws.join("out/nested/a/b/c/leaf.bin"), &(0..=255u8).cycle().take(70_000).collect::<Vec<_>>());
    write(&step.ws.join("out/nested/a/sibling.txt"), b"sibling\n");
    write(&step.ws.join("out/tool.sh"), b"#!/bin/sh\necho tool\n");
    set_mode(&step.ws.join("out/tool.sh"), 0o755);
    write(&step.ws.join("out/frozen.txt"), b"read only\n");
    set_mode(&step.ws.join("out/frozen.txt"), 0o444);
    std::fs::create_dir_all(step.ws.join("out/empty")).unwrap();
    write(&step.ws.join("more/deep/x.txt"), b"x\n");
    let saved_tree = (snapshot(&step.ws.join("out")), snapshot(&step.ws.join("more")));

    let save = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!((save.code, save.output("save-result")), (0, "saved"), "{}{}", save.stdout, save.stderr);

    // `out` goes away entirely and `more` holds only its parent: the restore creates both.
    set_mode(&step.ws.join("out/frozen.txt"), 0o644);
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    std::fs::remove_dir_all(step.ws.join("more/deep")).unwrap();
    let restore = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((restore.code, restore.output("cache-hit")), (0, "true"), "{}{}", restore.stdout, restore.stderr);
    assert_eq!(restore.output("key"), save.output("key"), "the same machine facts under qemu give the same key");
    assert_eq!((snapshot(&step.ws.join("out")), snapshot(&step.ws.join("more"))), saved_tree);

    // One flipped byte in the stored entry: refused, the tree left as it is.
    let entry = step.stored_entry();
    let mut bytes = std::fs::read(&entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&entry, &bytes).unwrap();
    set_mode(&step.ws.join("out/frozen.txt"), 0o644);
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    let refused = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!((refused.code, refused.output("cache-hit")), (0, "false"), "{}", refused.stdout);
    let reason = refused.output("miss-reason");
    assert!(reason == "corrupt" || reason == "manifest-mismatch", "{reason}: {}", refused.stdout);
    assert!(!step.ws.join("out").exists(), "a refused entry places nothing");
}

#[needs(qemu)]
fn the_aarch64_fingerprint_has_arm64_isa_facts_under_qemu() {
    let step = emulated_step();
    let inputs = [("path", "out"), ("native", "arch,isa,cpu-flags,libc")];
    let run = step.run(&["fingerprint"], &inputs, NO_STATE);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.output("fingerprint-file")).unwrap()).unwrap();
    let fact = |component: &str, label: &str| {
        record["components"][component][label]
            .as_str()
            .unwrap_or_else(|| panic!("{component} {label}: {record:#}"))
            .to_owned()
    };
    assert_eq!(fact("native.arch", "arch"), "aarch64");
    let isa = fact("native.isa", "features");
    let flags = fact("native.cpu-flags", "flags");
    for feature in ["asimd", "aes", "sha2"] {
        assert!(isa.split(' ').any(|f| f == feature), "isa features {isa:?} lack {feature}");
    }
    // The emulated /proc/cpuinfo is this x86 host's: none of its flags may leak in.
    for x86 in ["sse2", "sse4_2", "avx", "avx2", "pni", "fpu"] {
        assert!(!flags.split(' ').any(|f| f == x86), "x86 flag {x86} in {flags:?}");
    }
    assert!(fact("native.libc", "libc").starts_with("glibc 2."), "{record:#}");
}

/// A workflow that restores `out`, generates it on a miss, saves it in the post step, and prints
/// what the fingerprint says the machine is.
const ARM64_WORKFLOW: &str = r#"name: arm64
on: push
permissions: {}
jobs:
  cache:
    runs-on: ubuntu-latest
    steps:
      - run: cp -a "$SRC"/. .
      # act in host mode sets RUNNER_ARCH from its own machine (`--env` does not override it);
      # the step's env does, for the shim.
      - id: cache
        uses: ./
        env:
          RUNNER_ARCH: ARM64
        with:
          prefix: arm64
          path: out
          hash-files: .github/workflows/arm64.yml
          native: arch,isa
          reuse-env: REUSED
      - if: env.REUSED != '1'
        run: |
          mkdir -p out/nested/dir
          printf 'data\n' > out/nested/dir/file.txt
          printf '#!/bin/sh\necho restored-script-ran\n' > out/run.sh && chmod +x out/run.sh
      - env:
          FINGERPRINT: ${{ steps.cache.outputs.fingerprint-file }}
        run: |
          out/run.sh
          python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))["components"]; print("fingerprint-arch=" + c["native.arch"]["arch"])' "$FINGERPRINT"
"#;

/// What a runner on Linux/ARM64 checks out: the action's files, and dist/ with only the aarch64
/// binary. This x86_64 kernel cannot execute an aarch64 ELF (that takes a binfmt_misc handler,
/// a machine-wide setting tests do not make), so the file the shim verifies and runs is a shell
/// stand-in that runs the committed aarch64 binary under qemu-user; its sum replaces the
/// binary's in the scratch SHA256SUMS.
fn arm64_release(binary: &Path) -> tempfile::TempDir {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<(String, String)> = Vec::new();
    for f in ["action.yml", "restore/action.yml", "save/action.yml", "fingerprint/action.yml"] {
        files.push((f.to_owned(), std::fs::read_to_string(root.join(f)).unwrap()));
    }
    for entry in std::fs::read_dir(root.join("dist")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "js") {
            let name = format!("dist/{}", path.file_name().unwrap().to_string_lossy());
            files.push((name, std::fs::read_to_string(&path).unwrap()));
        }
    }
    // Python, not a shell: a shell drops the variables whose names hold `-` (`INPUT_HASH-FILES`).
    let stand_in = format!(
        "#!/usr/bin/env python3\nimport os, sys\nprint('aarch64 binary under qemu-aarch64', file=sys.stderr)\n\
         os.execvp('qemu-aarch64', ['qemu-aarch64', '-L', '{SYSROOT}', '{}'] + sys.argv[1:])\n",
        binary.display()
    );
    use sha2::Digest;
    let sum = hex::encode(sha2::Sha256::digest(stand_in.as_bytes()));
    files.push(("dist/exact-cache-aarch64-unknown-linux-gnu".into(), stand_in));
    files.push(("dist/SHA256SUMS".into(), format!("{sum}  exact-cache-aarch64-unknown-linux-gnu\n")));
    files.push((".github/workflows/arm64.yml".into(), ARM64_WORKFLOW.into()));
    let borrowed: Vec<(&str, &str)> = files.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    git_repo(&borrowed)
}

#[needs(qemu, act)]
fn an_act_workflow_on_linux_arm64_runs_the_aarch64_binary_through_the_shim() {
    let repo = arm64_release(&aarch64_binary());
    let storage = tempfile::tempdir().unwrap();
    let workflow = repo.path().join(".github/workflows/arm64.yml");
    let src = repo.path().to_string_lossy().into_owned();
    let env = [("SRC", src.as_str())];

    let cold = run_act(repo.path(), &workflow, storage.path(), &env);
    assert!(cold.success, "{}", cold.log);
    assert!(cold.log.contains("aarch64 binary under qemu-aarch64"), "the shim chose the aarch64 binary:\n{}", cold.log);
    assert_eq!(cold.output("cache", "miss-reason"), "not-found", "{}", cold.log);
    assert!(cold.log.contains("fingerprint-arch=aarch64"), "{}", cold.log);
    assert_eq!(cold.output("cache", "save-result"), "saved", "the post step saved:\n{}", cold.log);

    let warm = run_act(repo.path(), &workflow, storage.path(), &env);
    assert!(warm.success, "{}", warm.log);
    assert_eq!(warm.output("cache", "cache-hit"), "true", "{}", warm.log);
    assert_eq!(warm.output("cache", "key"), cold.output("cache", "key"));
    assert!(warm.log.contains("restored-script-ran"), "the restored script kept its exec bit:\n{}", warm.log);
}
