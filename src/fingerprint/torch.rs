//! The `torch` component of the `torch-inductor` preset: torch, triton, CUDA runtime and HIP
//! versions, the C++11 ABI flag, and each GPU torch would see with its compute capability. A
//! missing triton is recorded as absent; a `python` without torch is an error (the wrong
//! interpreter), and a torch whose files cannot be read is recorded with `torch-error`.
//!
//! Nothing here imports torch or triton: that cost every restore 2–7 s and a CUDA context on
//! every GPU. One short Python process (`torch_facts.py`, standard library only) finds the files
//! through the interpreter's `sys.path` and reads them (reading them in Rust would still need
//! that process, and would re-implement Python's literal syntax):
//!
//! - **torch, cuda, hip**: the literal assignments of `torch/version.py`.
//! - **triton**: the literal `__version__` of `triton/__init__.py`, else the version of the
//!   `triton`, `pytorch-triton`, `pytorch-triton-rocm` or `pytorch-triton-xpu` distribution.
//! - **cxx11-abi**: on Linux, whether `torch/lib/libc10.so` has C++11-ABI symbol names
//!   (`__cxx11`); elsewhere `True` where `compiled_with_cxx11_abi()` is `return True` (torch 2.10
//!   and later), else `False` (libc++ and MSVC builds).
//! - **device\<i\>**: `<name>, sm_<major><minor>` from the `gpu` facet's `nvidia-smi` run, for a
//!   CUDA build, filtered and numbered as torch does under `CUDA_VISIBLE_DEVICES` (`visible`). A
//!   ROCm build still imports torch for its devices only ([`ROCM_DEVICES`]): nothing confirmed
//!   that `rocm-smi` names them as torch does, and a key without the GPU could reuse another's
//!   kernels.
//!
//! Where this can differ from importing torch: a torch or triton that fails to import is recorded
//! with its versions; a `MIG-` UUID records no device; with a driver too old for torch's CUDA
//! runtime torch sees no GPU but `nvidia-smi` lists them; GPUs of different models can be numbered
//! differently (`CUDA_DEVICE_ORDER=FASTEST_FIRST` against PCI order); `cxx11-abi` is absent on
//! Linux when no `libc10.so` is found and torch does not hard-code the flag.

use super::facets::gpu::NvidiaGpu;
use super::system::System;
use super::{Component, FingerprintError, Value};
use crate::env::Env;
use std::collections::BTreeMap;
use std::path::Path;

const SCRIPT: &str = include_str!("torch_facts.py");

/// ROCm only: each device as torch names it, exactly as the preset recorded it when it imported
/// torch (so keys stay comparable); a failure is recorded, never a silent "no GPU".
const ROCM_DEVICES: &str = r#"
import json
info = {}
try:
    import torch
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(i)
            info["device%d" % i] = "%s, sm_%d%d" % (torch.cuda.get_device_name(i), major, minor)
except BaseException as e:  # a broken torch (even one that exits) is recorded, not fatal
    info["devices-error"] = type(e).__name__
print(json.dumps(info))
"#;

/// The component; `gpus` runs (or reuses) the `nvidia-smi` query, only for a CUDA build.
pub(super) fn collect<'a>(
    sys: &dyn System,
    env: &Env,
    cwd: &Path,
    python: &str,
    gpus: impl FnOnce() -> Option<&'a [NvidiaGpu]>,
) -> Result<Component, FingerprintError> {
    let mut component = run_script(sys, env, cwd, python, SCRIPT)?;
    let text = |label: &str| component.get(label).and_then(Value::as_text).is_some();
    if !text("torch") && !component.contains_key("torch-error") {
        return Err(FingerprintError::TorchMissing { python: python.to_owned() });
    }
    if text("torch") && text("hip") {
        component.extend(run_script(sys, env, cwd, python, ROCM_DEVICES)?);
    } else if text("torch") && text("cuda") {
        let visible = visible(gpus().unwrap_or_default(), env.get("CUDA_VISIBLE_DEVICES"));
        for (i, gpu) in visible.into_iter().enumerate() {
            component.insert(format!("device{i}"), Value::Text(device(gpu)));
        }
    }
    Ok(component)
}

/// Run `script` with the `python` interpreter; its last line is a JSON object of labels.
fn run_script(
    sys: &dyn System,
    env: &Env,
    cwd: &Path,
    python: &str,
    script: &str,
) -> Result<Component, FingerprintError> {
    let mut words = python.split_whitespace();
    let program = words.next().unwrap_or(python);
    let mut args: Vec<&str> = words.collect();
    args.extend(["-c", script]);
    let out = sys
        .run(program, &args, env, cwd)
        .map_err(|source| FingerprintError::PythonSpawn { python: python.to_owned(), source })?
        .ok_or_else(|| FingerprintError::PythonNotFound { python: python.to_owned() })?;
    if !out.success {
        return Err(FingerprintError::PythonFailed { python: python.to_owned(), detail: out.failure_detail() });
    }
    let line = out.stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or("");
    let info: BTreeMap<String, Option<String>> = serde_json::from_str(line).map_err(|e| {
        FingerprintError::PythonFailed { python: python.to_owned(), detail: format!("unexpected torch report ({e})") }
    })?;
    Ok(info.into_iter().map(|(k, v)| (k, v.map(Value::Text).unwrap_or(Value::Absent))).collect())
}

/// `NVIDIA H100 80GB HBM3, sm_90`, as torch's name and `sm_<major><minor>`.
fn device(gpu: &NvidiaGpu) -> String {
    let Some((name, cap, _)) = gpu.fields() else {
        return gpu.described.clone();
    };
    match cap.split_once('.') {
        Some((major, minor))
            if [major, minor].iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) =>
        {
            format!("{name}, sm_{major}{minor}")
        }
        _ => format!("{name}, {cap}"),
    }
}

/// The GPUs CUDA shows under `CUDA_VISIBLE_DEVICES`, in its order, as torch parses the variable
/// (`torch.cuda._parse_visible_devices`): unset → all; indices (read like `strtoul`, so `1gpu`
/// is 1) or `GPU-` UUID prefixes, up to the first invalid, out-of-range or ambiguous entry;
/// a repeated entry → none; empty, `-1` or `MIG-…` → none.
fn visible<'a>(gpus: &'a [NvidiaGpu], var: Option<&str>) -> Vec<&'a NvidiaGpu> {
    let Some(var) = var else {
        return gpus.iter().collect();
    };
    let mut chosen: Vec<usize> = Vec::new();
    if var.starts_with("GPU-") {
        let mut seen: Vec<&str> = Vec::new();
        for entry in var.split(',') {
            if seen.contains(&entry) {
                return Vec::new();
            }
            if !entry.starts_with("GPU-") {
                break;
            }
            seen.push(entry);
        }
        for entry in seen {
            let mut matches =
                (0..gpus.len()).filter(|&i| gpus[i].uuid.as_deref().is_some_and(|u| u.starts_with(entry)));
            let (Some(i), None) = (matches.next(), matches.next()) else {
                break;
            };
            if chosen.contains(&i) {
                return Vec::new();
            }
            chosen.push(i);
        }
    } else if !var.starts_with("MIG-") {
        for entry in var.split(',') {
            let Some(i) = leading_index(entry.trim()) else {
                break;
            };
            if chosen.contains(&i) {
                return Vec::new();
            }
            chosen.push(i);
        }
        if let Some(end) = chosen.iter().position(|&i| i >= gpus.len()) {
            chosen.truncate(end);
        }
    }
    chosen.into_iter().map(|i| &gpus[i]).collect()
}

/// The number an entry starts with, as `strtoul` reads it (`+2` → 2, `1gpu` → 1, `-0` → 0);
/// `None` for a negative number or no number at all.
fn leading_index(entry: &str) -> Option<usize> {
    let (negative, digits) = match entry.as_bytes().first() {
        Some(b'-') => (true, &entry[1..]),
        Some(b'+') => (false, &entry[1..]),
        _ => (false, entry),
    };
    let end = digits.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len());
    if end == 0 {
        return None;
    }
    let value = digits[..end].parse().unwrap_or(usize::MAX);
    (!negative || value == 0).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::system::CommandOutput;
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::io;

    /// Programs answer with fixed output; every run is recorded.
    #[derive(Default)]
    struct FakeSystem {
        outputs: HashMap<String, String>,
        runs: RefCell<Vec<String>>,
    }

    impl System for FakeSystem {
        fn run(&self, program: &str, args: &[&str], _env: &Env, _cwd: &Path) -> io::Result<Option<CommandOutput>> {
            // The ROCm devices script answers as `<program> rocm`.
            let program = match args.last() {
                Some(&script) if script == ROCM_DEVICES => format!("{program} rocm"),
                _ => program.to_owned(),
            };
            self.runs.borrow_mut().push(program.clone());
            Ok(self.outputs.get(&program).map(|stdout| CommandOutput {
                success: true,
                code: Some(0),
                stdout: stdout.clone(),
                stderr: String::new(),
            }))
        }
        crate::fingerprint::system::runs_programs_only!();
    }

    const CUDA_TORCH: &str =
        r#"{"torch": "2.15.0+cu132", "triton": "3.9.0", "cuda": "13.2", "hip": null, "cxx11-abi": "True"}"#;
    const SMI: &str = "NVIDIA H100 80GB HBM3, 9.0, 550.54.15, GPU-8932f937-d72c-4106-c12f-20bd9faed9f6\n\
                       NVIDIA GeForce RTX 3090, 8.6, 550.54.15, GPU-1c1e3f0a-0000-0000-0000-000000000000\n";

    fn gpus() -> Vec<NvidiaGpu> {
        SMI.lines().map(NvidiaGpu::parse).collect()
    }

    fn names(var: Option<&str>) -> Vec<String> {
        let gpus = gpus();
        visible(&gpus, var).into_iter().map(device).collect()
    }

    fn torch(report: &str, env: &Env) -> (Component, Vec<String>) {
        let rocm = r#"{"device0": "AMD Instinct MI300X, sm_94"}"#;
        let sys = FakeSystem {
            outputs: [
                ("python3".to_owned(), format!("warning: x\n{report}\n")),
                ("python3 rocm".to_owned(), rocm.to_owned()),
            ]
            .into(),
            ..Default::default()
        };
        let gpus = gpus();
        let asked = std::cell::Cell::new(false);
        let component = collect(&sys, env, Path::new("/"), "python3", || {
            asked.set(true);
            Some(&gpus[..])
        })
        .unwrap();
        let mut runs = sys.runs.take();
        if asked.get() {
            runs.push("nvidia-smi".into());
        }
        (component, runs)
    }

    #[test]
    fn nvidia_smi_lines_become_torch_device_names() {
        let gpus = gpus();
        assert_eq!(gpus[0].uuid.as_deref(), Some("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"));
        assert_eq!(gpus[0].described, "NVIDIA H100 80GB HBM3, 9.0, 550.54.15");
        assert_eq!(device(&gpus[0]), "NVIDIA H100 80GB HBM3, sm_90");
        assert_eq!(device(&NvidiaGpu::parse("NVIDIA B200, 10.0, 570.1, GPU-x")), "NVIDIA B200, sm_100");
        assert_eq!(device(&NvidiaGpu::parse("NVIDIA X, [N/A], 570.1, GPU-x")), "NVIDIA X, [N/A]");
        assert_eq!(device(&NvidiaGpu::parse("odd line")), "odd line");
    }

    #[test]
    fn cuda_visible_devices_filters_and_renumbers_as_torch_does() {
        let h100 = "NVIDIA H100 80GB HBM3, sm_90";
        let rtx = "NVIDIA GeForce RTX 3090, sm_86";
        assert_eq!(names(None), [h100, rtx]);
        assert_eq!(names(Some("1")), [rtx]);
        assert_eq!(names(Some("1,0")), [rtx, h100]);
        assert_eq!(names(Some(" 1 , 0")), [rtx, h100]);
        assert_eq!(names(Some("1gpu,+0")), [rtx, h100]);
        assert_eq!(names(Some("1,-1,0")), [rtx]);
        assert_eq!(names(Some("0,7,1")), [h100]);
        assert_eq!(names(Some("0,7,0")), Vec::<String>::new());
        assert_eq!(names(Some("-0,1")), [h100, rtx]);
        assert_eq!(names(Some("0,0")), Vec::<String>::new());
        assert_eq!(names(Some("")), Vec::<String>::new());
        assert_eq!(names(Some("-1")), Vec::<String>::new());
        assert_eq!(names(Some("GPU-1c1e")), [rtx]);
        assert_eq!(names(Some("GPU-1c1e,GPU-8932f937-d72c-4106-c12f-20bd9faed9f6")), [rtx, h100]);
        // An ambiguous or unknown UUID prefix ends the list; a repeated one empties it.
        assert_eq!(names(Some("GPU-1c1e,GPU-,GPU-8932")), [rtx]);
        assert_eq!(names(Some("GPU-1c1e,GPU-ffff,GPU-8932")), [rtx]);
        assert_eq!(names(Some("GPU-1c1e,GPU-1c1e")), Vec::<String>::new());
        assert_eq!(names(Some("GPU-1c1e,GPU-1c1e3")), Vec::<String>::new());
        assert_eq!(names(Some("GPU-1c1e,1")), [rtx]);
        assert_eq!(names(Some("MIG-5f4d1c11-0000")), Vec::<String>::new());
    }

    #[test]
    fn a_cuda_build_records_the_report_and_the_visible_devices() {
        let mut env = Env::default();
        let (c, runs) = torch(CUDA_TORCH, &env);
        assert_eq!(runs, ["python3", "nvidia-smi"]);
        assert_eq!(c["torch"], Value::text("2.15.0+cu132"));
        assert_eq!(c["triton"], Value::text("3.9.0"));
        assert_eq!(c["cuda"], Value::text("13.2"));
        assert_eq!(c["hip"], Value::Absent);
        assert_eq!(c["cxx11-abi"], Value::text("True"));
        assert_eq!(c["device0"], Value::text("NVIDIA H100 80GB HBM3, sm_90"));
        assert_eq!(c["device1"], Value::text("NVIDIA GeForce RTX 3090, sm_86"));
        assert_eq!(c.len(), 7);
        env.set("CUDA_VISIBLE_DEVICES", "1");
        let (c, _) = torch(CUDA_TORCH, &env);
        assert_eq!(c["device0"], Value::text("NVIDIA GeForce RTX 3090, sm_86"));
        assert!(!c.contains_key("device1"));
    }

    #[test]
    fn cpu_and_missing_torch_record_no_devices_and_rocm_asks_torch_for_its_devices() {
        let env = Env::default();
        let cpu = r#"{"torch": "2.15.0+cpu", "triton": null, "cuda": null, "hip": null, "cxx11-abi": "True"}"#;
        let (c, runs) = torch(cpu, &env);
        assert_eq!(runs, ["python3"]);
        assert_eq!(c.len(), 5);
        let rocm =
            r#"{"torch": "2.15.0+rocm7.1", "triton": "3.9.0", "cuda": null, "hip": "7.1.0", "cxx11-abi": "True"}"#;
        let (c, runs) = torch(rocm, &env);
        assert_eq!(runs, ["python3", "python3 rocm"], "no nvidia-smi on ROCm");
        assert_eq!(c["device0"], Value::text("AMD Instinct MI300X, sm_94"));
        let broken = r#"{"torch": null, "triton": null, "cuda": null, "hip": null, "cxx11-abi": null,
                        "torch-error": "torch/version.py has no literal `__version__`"}"#
            .replace('\n', "");
        let (c, _) = torch(&broken, &env);
        assert_eq!(c["torch-error"], Value::text("torch/version.py has no literal `__version__`"));
    }

    #[test]
    fn a_missing_or_failing_interpreter_is_an_error() {
        let sys = FakeSystem::default();
        let err = collect(&sys, &Env::default(), Path::new("/"), "python3", || None).unwrap_err();
        assert!(matches!(err, FingerprintError::PythonNotFound { .. }), "{err}");
        let sys = FakeSystem { outputs: [("python3".to_owned(), "not json".to_owned())].into(), ..Default::default() };
        let err = collect(&sys, &Env::default(), Path::new("/"), "python3", || None).unwrap_err();
        assert!(err.to_string().contains("unexpected torch report"), "{err}");
    }

    #[test]
    fn an_interpreter_without_torch_is_an_error_naming_it_and_the_fix() {
        let none = r#"{"torch": null, "triton": null, "cuda": null, "hip": null, "cxx11-abi": null}"#;
        let sys = FakeSystem { outputs: [("python3".to_owned(), none.to_owned())].into(), ..Default::default() };
        let err = collect(&sys, &Env::default(), Path::new("/"), "python3", || None).unwrap_err().to_string();
        assert!(err.starts_with("input `python`: interpreter `python3` has no torch"), "{err}");
        assert!(err.contains("set `python` to the interpreter"), "{err}");
    }
}
