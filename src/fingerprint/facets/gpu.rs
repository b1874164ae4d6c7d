//! `native.gpu`: each NVIDIA GPU as `nvidia-smi` lists it (name, compute capability, driver
//! major). The `nvidia-smi` run also serves the `torch` component.

use super::{FacetDef, Probe, Unlabelled};
use crate::env::Env;
use crate::fingerprint::system::System;
use crate::fingerprint::{Component, FingerprintError, Value};
use std::path::Path;

pub(super) const FACET: FacetDef = FacetDef {
    component: "native.gpu",
    records: "`gpu0`, `gpu1`, … → each NVIDIA GPU's name, compute capability and driver major (`nvidia-smi`, \
              whatever `CUDA_VISIBLE_DEVICES` says); `nvidia-smi` absent without one",
    default: false,
    unlabelled: Unlabelled::None,
    collect,
};

fn collect(probe: &Probe) -> Result<Component, FingerprintError> {
    Ok(gpu(probe.nvidia_gpus()))
}

/// One GPU as `nvidia-smi --query-gpu=name,compute_cap,driver_version,uuid --format=csv,noheader`
/// prints it (NVML's order: PCI bus).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::fingerprint) struct NvidiaGpu {
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
/// working `nvidia-smi`.
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
fn gpu(gpus: Option<&[NvidiaGpu]>) -> Component {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
