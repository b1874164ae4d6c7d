//! The Windows binary (`x86_64-pc-windows-gnu`) run under wine: built from the current sources
//! with cargo-zigbuild (or taken from `EXACT_CACHE_WINDOWS_EXE`, e.g. what the dist check
//! built), next to a test-only `bcryptprimitives.dll` that wine 8 lacks
//! (`tests/wine/bcryptprimitives.c`), in a wine prefix of its own under the target directory.
//! They are `#[needs(wine)]` tests: a plain `cargo test` skips them; scripts/test installs wine and
//! runs them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const TARGET: &str = "x86_64-pc-windows-gnu";

/// wine, a prefix, and a folder holding the Windows exe beside the stub DLL.
pub struct Wine {
    wine: PathBuf,
    prefix: PathBuf,
    bin: PathBuf,
}

impl Wine {
    /// The shared set-up, made once per test run.
    pub fn get() -> &'static Wine {
        static WINE: OnceLock<Wine> = OnceLock::new();
        WINE.get_or_init(|| {
            let wine = ["wine", "wine64"].into_iter().find_map(on_path);
            Wine::prepare(wine.expect("wine is missing: scripts/test installs it (apt-get install wine64)"))
        })
    }

    fn prepare(wine: PathBuf) -> Wine {
        let dir = target_dir().join("wine");
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let exe = std::env::var_os("EXACT_CACHE_WINDOWS_EXE").map_or_else(build_exe, PathBuf::from);
        std::fs::copy(&exe, bin.join("exact-cache.exe")).unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
        build_stub_dll(&bin.join("bcryptprimitives.dll"), &dir.join("zig-cache"));
        let wine = Wine { wine, prefix: dir.join("prefix"), bin };
        // The prefix is made by the first run; made here, once, not by parallel tests at once.
        let status = wine.command(Path::new("cmd")).args(["/c", "exit"]).status().unwrap();
        assert!(status.success(), "wine could not create its prefix in {}", wine.prefix.display());
        wine
    }

    /// The Windows exe under test.
    pub fn exe(&self) -> PathBuf {
        self.bin.join("exact-cache.exe")
    }

    /// `program` run under wine, with only wine's own variables set.
    pub fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new(&self.wine);
        cmd.arg(program).env_clear().envs(self.env());
        cmd
    }

    /// What wine itself needs: its prefix, quiet logs, a `PATH` to find its own tools.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("WINEPREFIX".into(), self.prefix.display().to_string()),
            ("WINEDEBUG".into(), "-all".into()),
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ]
    }

    /// How the Windows program names a path of this machine: wine maps `Z:` to `/`.
    pub fn path(&self, path: &Path) -> String {
        format!("Z:{}", path.display()).replace('/', "\\")
    }

    /// The path of this machine that the Windows program's `Z:\…` names.
    pub fn unix_path(&self, windows: &str) -> PathBuf {
        let path = windows.strip_prefix("Z:").unwrap_or_else(|| panic!("`{windows}` is not on wine's `Z:`"));
        PathBuf::from(path.replace('\\', "/"))
    }
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(program)).find(|p| p.is_file())
}

/// The integration tests' target directory (`<target>/debug/exact-cache` is the Linux binary).
fn target_dir() -> PathBuf {
    Path::new(super::exe()).ancestors().nth(2).expect("the binary lies in <target>/<profile>/").to_owned()
}

/// Build the Windows binary from the current sources (a no-op when it is up to date), the way
/// scripts/build-dist drives cargo-zigbuild (zig from the project's `.venv`), in debug.
fn build_exe() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let zigbuild = root.join(".tools/bin/cargo-zigbuild");
    let python = root.join(".venv/bin/python");
    assert!(
        zigbuild.is_file() && python.is_file(),
        "cargo-zigbuild in .tools/ and ziglang in .venv: scripts/test installs them"
    );
    let target = target_dir();
    let status = Command::new(&zigbuild)
        .args(["zigbuild", "--locked", "--bin", "exact-cache", "--target", TARGET, "--target-dir"])
        .arg(&target)
        .env("CARGO_ZIGBUILD_PYTHON_PATH", &python)
        .current_dir(root)
        .status()
        .unwrap();
    assert!(status.success(), "cargo-zigbuild could not build the Windows binary");
    target.join(TARGET).join("debug/exact-cache.exe")
}

/// `zig cc` the stub (no C runtime: a few seconds, even with an empty cache).
fn build_stub_dll(out: &Path, zig_cache: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new(root.join(".venv/bin/python"))
        .args(["-m", "ziglang", "cc", "-target", "x86_64-windows-gnu", "-shared", "-nostdlib", "-O2", "-o"])
        .arg(out)
        .arg(root.join("tests/wine/bcryptprimitives.c"))
        .arg("-ladvapi32")
        .env("ZIG_GLOBAL_CACHE_DIR", zig_cache)
        .env("ZIG_LOCAL_CACHE_DIR", zig_cache)
        .status()
        .unwrap();
    assert!(status.success(), "zig cc could not build the test-only bcryptprimitives.dll");
}
