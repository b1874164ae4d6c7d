//! `native.cuda`: the CUDA toolkit version, from `nvcc`.

use super::{FacetDef, Probe, Unlabelled};
use crate::fingerprint::{Component, FingerprintError, Value};
use std::path::Path;

pub(super) const FACET: FacetDef = FacetDef {
    component: "native.cuda",
    records: "`nvcc` → the CUDA toolkit version (`12.4.131`; `nvcc` on `PATH`, under `CUDA_HOME`, `CUDA_PATH` or \
              `/usr/local/cuda`), absent without one",
    default: false,
    unlabelled: Unlabelled::None,
    collect,
};

/// `nvcc` → the CUDA toolkit version (`12.4.131`), absent without a toolkit.
fn collect(probe: &Probe) -> Result<Component, FingerprintError> {
    let mut candidates = vec!["nvcc".to_owned()];
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = probe.env.non_empty(var) {
            candidates.push(Path::new(home).join("bin").join("nvcc").to_string_lossy().into_owned());
        }
    }
    candidates.push("/usr/local/cuda/bin/nvcc".to_owned());
    for program in &candidates {
        if let Ok(Some(out)) = probe.sys.run(program, &["--version"], probe.env, probe.cwd())
            && out.success
        {
            return Ok([("nvcc".to_owned(), Value::Text(parse_nvcc_version(&out.stdout)))].into());
        }
    }
    Ok([("nvcc".to_owned(), Value::Absent)].into())
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

    #[test]
    fn nvcc_versions_are_parsed() {
        let out = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.4, V12.4.131\n\
                   Build cuda_12.4.r12.4/compiler.34097967_0\n";
        assert_eq!(parse_nvcc_version(out), "12.4.131");
        assert_eq!(parse_nvcc_version("Cuda compilation tools, release 9.0\n"), "Cuda compilation tools, release 9.0");
    }
}
