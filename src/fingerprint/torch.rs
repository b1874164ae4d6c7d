//! The `torch` component of the `torch-inductor` preset: what the `python` interpreter's torch
//! says about itself (torch, triton, CUDA runtime, HIP, the C++11 ABI, each visible GPU's
//! compute capability). A missing torch or triton is recorded as absent.

use super::system::System;
use super::{Component, FingerprintError, Value};
use crate::env::Env;
use std::collections::BTreeMap;
use std::path::Path;

const SCRIPT: &str = r#"
import json
info = {"torch": None, "triton": None, "cuda": None, "hip": None, "cxx11-abi": None}
try:
    import torch
    info["torch"] = torch.__version__
    info["cuda"] = torch.version.cuda
    info["hip"] = getattr(torch.version, "hip", None)
    info["cxx11-abi"] = str(bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(i)
            info["device%d" % i] = "%s, sm_%d%d" % (torch.cuda.get_device_name(i), major, minor)
except ImportError:
    pass
except Exception as e:  # installed but broken (a missing libcudart, …): recorded, not fatal
    info["torch-error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
try:
    import triton
    info["triton"] = triton.__version__
except ImportError:
    pass
except Exception as e:
    info["triton-error"] = type(e).__name__
print(json.dumps(info))
"#;

pub(super) fn collect(sys: &dyn System, env: &Env, cwd: &Path, python: &str) -> Result<Component, FingerprintError> {
    let mut words = python.split_whitespace();
    let program = words.next().unwrap_or(python);
    let mut args: Vec<&str> = words.collect();
    args.extend(["-c", SCRIPT]);
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
