//! The `torch` component (the `torch-inductor` preset) read from files by a real interpreter:
//! hand-made torch and triton packages that fail if imported, and the installed `.venv-torch`,
//! where it must equal what importing torch says.

use crate::support::needs;
use crate::support::{torch_venv, write};
use exact_cache::env::Env;
use exact_cache::fingerprint::{FingerprintSpec, HostSystem, Value, collect};
use exact_cache::paths::Locations;
use std::collections::BTreeMap;
use std::path::Path;

/// What the preset ran before it stopped importing torch: torch's own answers (the benchmark
/// times the same file).
const IMPORTING: &str = include_str!("../../bench/torch_import_reference.py");

const VERSION_PY: &str = "from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n\
                          __version__ = '2.15.0+cu132'\ndebug = False\ncuda: Optional[str] = '13.2'\n\
                          git_version = 'd0f2af8b66b20da4baa50644c0cd3f887a2eae2e'\nhip: Optional[str] = None\n";
const IMPORTED: &str = "raise SystemExit('imported')\n";
const NEW_ABI: &str = "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE";
const OLD_ABI: &str = "_ZN3c105ErrorC2ENS_14SourceLocationESs";

/// A little-endian ELF64 file whose only content is a dynamic symbol table naming `names`.
fn elf_naming(names: &[&str]) -> Vec<u8> {
    let mut strings = vec![0u8];
    for name in names {
        strings.extend_from_slice(name.as_bytes());
        strings.push(0);
    }
    let mut elf = vec![0u8; 64];
    elf[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
    elf[0x28..0x30].copy_from_slice(&64u64.to_le_bytes());
    elf[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
    elf[0x3C..0x3E].copy_from_slice(&3u16.to_le_bytes());
    let section = |kind: u32, offset: u64, size: u64, link: u32| {
        let mut s = vec![0u8; 64];
        s[4..8].copy_from_slice(&kind.to_le_bytes());
        s[0x18..0x20].copy_from_slice(&offset.to_le_bytes());
        s[0x20..0x28].copy_from_slice(&size.to_le_bytes());
        s[0x28..0x2C].copy_from_slice(&link.to_le_bytes());
        s
    };
    let data_at = 64 + 3 * 64;
    elf.extend(section(0, 0, 0, 0));
    elf.extend(section(11, data_at, 0, 2));
    elf.extend(section(3, data_at, strings.len() as u64, 0));
    elf.extend(strings);
    elf
}

/// The `torch` component collected by `python` with `workspace` as its working directory (first
/// on `sys.path`, as for `python -c`).
fn torch_component(workspace: &Path, python: &str) -> BTreeMap<String, Value> {
    let mut spec = FingerprintSpec::new(Locations { workspace: workspace.to_owned(), home: None });
    spec.native.clear();
    spec.python = Some(python.to_owned());
    spec.torch = true;
    let mut env = Env::capture();
    env.set("PYTHONDONTWRITEBYTECODE", "1");
    let mut fp = collect(&spec, &HostSystem::default(), &env).unwrap();
    fp.components.remove("torch").unwrap()
}

fn text(s: &str) -> Value {
    Value::text(s)
}

#[test]
fn torch_and_triton_are_read_from_their_files_without_importing_them() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(&root.join("torch/__init__.py"), IMPORTED.as_bytes());
    write(&root.join("torch/version.py"), VERSION_PY.as_bytes());
    write(&root.join("torch/lib/libc10.so"), &elf_naming(&["_ZN3c106detail14torchCheckFailEPKc", NEW_ABI]));
    write(&root.join("triton/__init__.py"), format!("\"\"\"doc\"\"\"\n__version__ = '3.9.0'\n{IMPORTED}").as_bytes());
    let c = torch_component(root, "python3");
    let expected: BTreeMap<String, Value> = [
        ("torch", text("2.15.0+cu132")),
        ("triton", text("3.9.0")),
        ("cuda", text("13.2")),
        ("hip", Value::Absent),
        ("cxx11-abi", text(if cfg!(target_os = "linux") { "True" } else { "False" })),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(c, expected);

    // The pre-C++11 ABI (torch ≤ 2.6 wheels); a ROCm build (the one case that asks torch for its
    // devices: this torch refuses to import, which is recorded); no triton.
    write(&root.join("torch/lib/libc10.so"), &elf_naming(&[OLD_ABI]));
    let rocm =
        VERSION_PY.replace("'13.2'", "None").replace("hip: Optional[str] = None", "hip: Optional[str] = '7.1.25424'");
    write(&root.join("torch/version.py"), rocm.as_bytes());
    std::fs::remove_dir_all(root.join("triton")).unwrap();
    let c = torch_component(root, "python3");
    if cfg!(target_os = "linux") {
        assert_eq!(c["cxx11-abi"], text("False"));
    }
    assert_eq!((&c["cuda"], &c["hip"], &c["triton"]), (&Value::Absent, &text("7.1.25424"), &Value::Absent));
    assert_eq!(c["devices-error"], text("SystemExit"));

    // Newer torch hard-codes the flag: where libc10 is not an ELF file that is what counts.
    write(&root.join("torch/lib/libc10.so"), b"not an ELF file");
    let init = format!(
        "{IMPORTED}\ndef compiled_with_cxx11_abi() -> builtins.bool:\n    r\"\"\"Returns whether PyTorch was built with \
         _GLIBCXX_USE_CXX11_ABI=1\"\"\"\n    return True\n\n\ndef other():\n    return _C.x\n"
    );
    write(&root.join("torch/__init__.py"), init.as_bytes());
    assert_eq!(torch_component(root, "python3")["cxx11-abi"], text("True"));
}

#[test]
fn unreadable_versions_are_reported_without_paths() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(&root.join("torch/__init__.py"), IMPORTED.as_bytes());
    write(&root.join("torch/version.py"), b"__version__ = compute()\ncuda = None\n");
    write(&root.join("triton/__init__.py"), b"from .version import __version__\n");
    let c = torch_component(root, "python3");
    assert_eq!(c["torch"], Value::Absent);
    assert_eq!(c["torch-error"], text("torch/version.py has no literal `__version__`"));
    assert_eq!(c["triton-error"], text("triton/__init__.py has no literal `__version__`"));

    // No version.py at all; triton's version from its distribution's metadata.
    std::fs::remove_file(root.join("torch/version.py")).unwrap();
    write(
        &root.join("pytorch_triton-3.1.0.dist-info/METADATA"),
        b"Metadata-Version: 2.1\nName: pytorch-triton\nVersion: 3.1.0\n",
    );
    let c = torch_component(root, "python3");
    assert_eq!(c["torch-error"], text("cannot read torch/version.py (No such file or directory)"));
    assert_eq!(c["triton"], text("3.1.0"));
    assert!(!c.contains_key("triton-error"));
}

/// Needs `.venv-torch` (scripts/test installs it): the new way must record exactly what
/// importing torch and triton reports, or keys made before and after the change would differ.
#[needs(torch)]
#[ignore = "slow: imports real torch"]
fn the_torch_component_equals_what_importing_torch_says() {
    let python = torch_venv().join("bin/python");
    let ws = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(&python).args(["-c", IMPORTING]).current_dir(ws.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let line = String::from_utf8(out.stdout).unwrap();
    let imported: BTreeMap<String, Option<String>> = serde_json::from_str(line.trim()).unwrap();
    let imported: BTreeMap<String, Value> =
        imported.into_iter().map(|(k, v)| (k, v.map(Value::Text).unwrap_or(Value::Absent))).collect();
    assert!(imported["torch"].as_text().is_some(), "{imported:?}");
    assert_eq!(torch_component(ws.path(), python.to_str().unwrap()), imported);
}
