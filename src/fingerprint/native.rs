//! Native facets: OS, architecture, vector ISA level, CPU flags, libc, compilers, GPUs, CUDA.
//!
//! The ISA facet records what compiled kernels depend on: the x86-64 micro-architecture level
//! (psABI levels v1..v4) or, on aarch64, the set of SIMD/atomics features. The full flag list is
//! the separate, opt-in `cpu-flags` facet, because it changes with every CPU stepping.

use super::system::{CpuFacts, System};
use super::{Component, FingerprintError, Value};
use crate::env::Env;
use std::collections::BTreeSet;
use std::path::Path;

/// The x86-64 psABI level implied by `/proc/cpuinfo`-style flags.
pub fn x86_64_level(flags: &BTreeSet<String>) -> &'static str {
    const V2: &[&str] = &["cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"];
    const V3: &[&str] = &["avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"];
    const V4: &[&str] = &["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"];
    let has = |set: &[&str]| set.iter().all(|f| flags.contains(*f));
    if !has(V2) {
        "x86-64-v1"
    } else if !has(V3) {
        "x86-64-v2"
    } else if !has(V4) {
        "x86-64-v3"
    } else {
        "x86-64-v4"
    }
}

/// The aarch64 features that change generated code, present in `flags`, space-separated.
pub fn aarch64_isa(flags: &BTreeSet<String>) -> String {
    const RELEVANT: &[&str] = &[
        "asimd", "asimdhp", "asimdfhm", "asimddp", "i8mm", "bf16", "sve", "sve2", "sme", "atomics", "lrcpc", "crc32",
        "aes", "sha2", "sha3",
    ];
    let present: Vec<&str> = RELEVANT.iter().copied().filter(|f| flags.contains(*f)).collect();
    present.join(" ")
}

pub(super) fn os(sys: &dyn System) -> Component {
    let facts = sys.os();
    let mut c = Component::new();
    c.insert("family".into(), Value::Text(facts.family));
    c.insert("distro".into(), facts.distro.map(Value::Text).unwrap_or(Value::Absent));
    c.insert("version".into(), facts.version.map(Value::Text).unwrap_or(Value::Absent));
    c
}

pub(super) fn arch(cpu: &CpuFacts) -> Component {
    [("arch".to_owned(), Value::text(&cpu.arch))].into()
}

/// x86 extensions beyond the psABI levels that change generated kernels (TorchInductor picks
/// AMX and AVX-512 BF16/FP16/VNNI code paths).
const X86_EXTENSIONS: [&str; 7] =
    ["amx_bf16", "amx_int8", "amx_tile", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni"];

pub(super) fn isa(cpu: &CpuFacts, extensions: bool) -> Component {
    match cpu.arch.as_str() {
        "x86_64" if extensions => {
            let present: Vec<&str> = X86_EXTENSIONS.iter().copied().filter(|f| cpu.flags.contains(*f)).collect();
            [
                ("level".to_owned(), Value::text(x86_64_level(&cpu.flags))),
                ("extensions".to_owned(), Value::text(present.join(" "))),
            ]
            .into()
        }
        "x86_64" => [("level".to_owned(), Value::text(x86_64_level(&cpu.flags)))].into(),
        "aarch64" => [("features".to_owned(), Value::text(aarch64_isa(&cpu.flags)))].into(),
        _ => [("level".to_owned(), Value::Absent)].into(),
    }
}

pub(super) fn cpu_flags(cpu: &CpuFacts) -> Component {
    let flags: Vec<&str> = cpu.flags.iter().map(String::as_str).collect();
    [("flags".to_owned(), Value::text(flags.join(" ")))].into()
}

pub(super) fn libc(sys: &dyn System, env: &Env) -> Component {
    [("libc".to_owned(), sys.libc(env).map(Value::Text).unwrap_or(Value::Absent))].into()
}

/// Each compiler command (e.g. `cc`, `c++`, or `$CC` as configured) → its `--version` output.
/// A compiler that is not installed is absent, unless it is one of `named` (the `compilers`
/// input): a command the workflow named and that does not exist is a mistake, not a fact.
pub(super) fn compiler(
    sys: &dyn System,
    env: &Env,
    cwd: &Path,
    commands: &[String],
    named: &BTreeSet<String>,
) -> Result<Component, FingerprintError> {
    let mut c = Component::new();
    for command in commands {
        let mut words = command.split_whitespace();
        let Some(program) = words.next() else {
            continue;
        };
        let mut args: Vec<&str> = words.collect();
        args.push("--version");
        let value = match sys.run(program, &args, env, cwd) {
            Ok(Some(out)) if out.success => Value::Text(compiler_identity(&out.stdout)),
            Ok(Some(out)) => Value::Text(format!("`--version` failed: {}", out.failure_detail())),
            Ok(None) if named.contains(command) => {
                return Err(FingerprintError::CompilerNotFound { compiler: command.clone() });
            }
            Err(source) if named.contains(command) => {
                return Err(FingerprintError::CompilerSpawn { compiler: command.clone(), source });
            }
            Ok(None) | Err(_) => Value::Absent,
        };
        c.insert(command.clone(), value);
    }
    Ok(c)
}

/// The first line of `--version` output (name and version) and clang's `Target:` line; the
/// copyright text gcc adds is left out.
fn compiler_identity(stdout: &str) -> String {
    let mut lines = stdout.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut identity = lines.next().unwrap_or("").to_owned();
    if let Some(target) = lines.find(|l| l.starts_with("Target:")) {
        identity.push_str(&format!(" ({target})"));
    }
    identity
}

/// One GPU as `nvidia-smi --query-gpu=name,compute_cap,driver_version,uuid --format=csv,noheader`
/// prints it (NVML's order: PCI bus).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct NvidiaGpu {
    /// The line without its UUID: `NVIDIA H100 80GB HBM3, 9.0, 550.54.15`.
    pub described: String,
    /// `GPU-…`, when the line ends with one. Never enters the fingerprint: it names one card.
    pub uuid: Option<String>,
}

impl NvidiaGpu {
    pub fn parse(line: &str) -> Self {
        let line = line.trim();
        match line.rsplit_once(',') {
            Some((rest, uuid)) if uuid.trim().starts_with("GPU-") => {
                Self { described: rest.trim().to_owned(), uuid: Some(uuid.trim().to_owned()) }
            }
            _ => Self { described: line.to_owned(), uuid: None },
        }
    }

    /// `(name, compute capability, driver version)` when the line has exactly those fields.
    pub fn fields(&self) -> Option<(&str, &str, &str)> {
        let fields: Vec<&str> = self.described.split(',').map(str::trim).collect();
        match fields.as_slice() {
            [name, cap, driver] => Some((name, cap, driver)),
            _ => None,
        }
    }
}

/// Every NVIDIA GPU on the machine (whatever `CUDA_VISIBLE_DEVICES` says); `None` without a
/// working `nvidia-smi`. One run serves both the `gpu` facet and the `torch` component.
pub(super) fn nvidia_smi(sys: &dyn System, env: &Env, cwd: &Path) -> Option<Vec<NvidiaGpu>> {
    let args = ["--query-gpu=name,compute_cap,driver_version,uuid", "--format=csv,noheader"];
    match sys.run("nvidia-smi", &args, env, cwd) {
        Ok(Some(out)) if out.success => {
            Some(out.stdout.lines().filter(|l| !l.trim().is_empty()).map(NvidiaGpu::parse).collect())
        }
        _ => None,
    }
}

/// Each NVIDIA GPU → `name, compute <cap>, driver <major>`; `nvidia-smi` → absent when
/// the tool is missing, cannot talk to a driver or lists no GPU.
pub(super) fn gpu(gpus: Option<&[NvidiaGpu]>) -> Component {
    let mut c = Component::new();
    for (i, gpu) in gpus.unwrap_or_default().iter().enumerate() {
        let value = match gpu.fields() {
            Some((name, cap, driver)) => {
                let major = driver.split('.').next().unwrap_or(driver);
                format!("{name}, compute {cap}, driver {major}")
            }
            None => gpu.described.clone(),
        };
        c.insert(format!("gpu{i}"), Value::Text(value));
    }
    if c.is_empty() {
        c.insert("nvidia-smi".to_owned(), Value::Absent);
    }
    c
}

/// `nvcc` → the CUDA toolkit version (`12.4.131`), absent without a toolkit.
pub(super) fn cuda(sys: &dyn System, env: &Env, cwd: &Path) -> Component {
    let mut candidates = vec!["nvcc".to_owned()];
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = env.non_empty(var) {
            candidates.push(Path::new(home).join("bin").join("nvcc").to_string_lossy().into_owned());
        }
    }
    candidates.push("/usr/local/cuda/bin/nvcc".to_owned());
    for program in &candidates {
        if let Ok(Some(out)) = sys.run(program, &["--version"], env, cwd)
            && out.success
        {
            return [("nvcc".to_owned(), Value::Text(parse_nvcc_version(&out.stdout)))].into();
        }
    }
    [("nvcc".to_owned(), Value::Absent)].into()
}

/// `Cuda compilation tools, release 12.4, V12.4.131` → `12.4.131`; otherwise the last line.
fn parse_nvcc_version(stdout: &str) -> String {
    let release_line = stdout.lines().find(|l| l.contains("release"));
    if let Some(line) = release_line {
        if let Some(v) = line.rsplit(", V").next().filter(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit())) {
            return v.trim().to_owned();
        }
        return line.trim().to_owned();
    }
    stdout.lines().last().unwrap_or("").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(s: &str) -> BTreeSet<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    const V2: &str = "cx16 lahf_lm popcnt pni sse4_1 sse4_2 ssse3";
    const V3: &str = "avx avx2 bmi1 bmi2 f16c fma abm movbe xsave";
    const V4: &str = "avx512f avx512bw avx512cd avx512dq avx512vl";

    #[test]
    fn x86_levels_follow_the_psabi() {
        assert_eq!(x86_64_level(&flags("sse2 fpu")), "x86-64-v1");
        assert_eq!(x86_64_level(&flags(V2)), "x86-64-v2");
        assert_eq!(x86_64_level(&flags(&format!("{V2} {V3}"))), "x86-64-v3");
        assert_eq!(x86_64_level(&flags(&format!("{V2} {V3} {V4}"))), "x86-64-v4");
        // One missing v3 feature caps the level at v2, whatever else is there.
        let no_fma = format!("{V2} {V3} {V4}").replace(" fma", "");
        assert_eq!(x86_64_level(&flags(&no_fma)), "x86-64-v2");
    }

    #[test]
    fn isa_extensions_are_listed_only_when_asked_for() {
        let cpu =
            CpuFacts { arch: "x86_64".into(), flags: flags(&format!("{V2} {V3} {V4} amx_tile avx512_bf16 rdrand")) };
        assert_eq!(isa(&cpu, false).len(), 1);
        assert_eq!(isa(&cpu, true)["extensions"], Value::text("amx_tile avx512_bf16"));
    }

    #[test]
    fn aarch64_isa_keeps_only_codegen_features_in_a_fixed_order() {
        assert_eq!(aarch64_isa(&flags("fp cpuid sve asimd evtstrm asimddp")), "asimd asimddp sve");
    }

    #[test]
    fn compiler_identity_keeps_name_version_and_target() {
        let gcc = "cc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.\n";
        assert_eq!(compiler_identity(gcc), "cc (Debian 12.2.0-14+deb12u1) 12.2.0");
        let clang = "clang version 17.0.6\nTarget: aarch64-apple-darwin23.5.0\nThread model: posix\n";
        assert_eq!(compiler_identity(clang), "clang version 17.0.6 (Target: aarch64-apple-darwin23.5.0)");
    }

    #[test]
    fn the_gpu_facet_leaves_the_uuid_out() {
        let lines = "NVIDIA H100 80GB HBM3, 9.0, 550.54.15, GPU-8932f937-d72c-4106-c12f-20bd9faed9f6\n\n\
                     A, name, with, commas, 8.6, 535.1, GPU-1c1e\nNVIDIA A10G, 8.6, 535.104.05\n";
        let gpus: Vec<NvidiaGpu> = lines.lines().filter(|l| !l.trim().is_empty()).map(NvidiaGpu::parse).collect();
        let c = gpu(Some(&gpus));
        assert_eq!(c["gpu0"], Value::text("NVIDIA H100 80GB HBM3, compute 9.0, driver 550"));
        assert_eq!(c["gpu1"], Value::text("A, name, with, commas, 8.6, 535.1"));
        assert_eq!(c["gpu2"], Value::text("NVIDIA A10G, compute 8.6, driver 535"));
        assert_eq!(gpu(None), [("nvidia-smi".to_owned(), Value::Absent)].into());
        assert_eq!(gpu(Some(&[])), gpu(None));
    }

    #[test]
    fn nvcc_versions_are_parsed() {
        let out = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.4, V12.4.131\n\
                   Build cuda_12.4.r12.4/compiler.34097967_0\n";
        assert_eq!(parse_nvcc_version(out), "12.4.131");
        assert_eq!(parse_nvcc_version("Cuda compilation tools, release 9.0\n"), "Cuda compilation tools, release 9.0");
    }
}
