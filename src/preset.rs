//! Presets: ready-made configurations for well-known caches.
//!
//! `torch-inductor` (docs/usage.md says what it caches and fingerprints) picks TorchInductor's and
//! Triton's directories and adds the `torch`, `native`, `python` and `env` facts its kernels
//! depend on; explicit inputs add to it. The directories' paths must be stable (absolute paths
//! matter to torch); in the entry's version exact-cache's own directory is named
//! `<exact-cache-dir>`, wherever it is, so every runner of a pool shares the entries.

use crate::env::Env;
use crate::fingerprint::{EnvPatterns, Facet, FingerprintSpec};
use crate::paths::Locations;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    TorchInductor,
}

/// What a preset adds to the configuration.
#[derive(Clone, Debug)]
pub struct PresetPlan {
    pub preset: Preset,
    /// Appended to the `path` lines (absolute, stable across runs).
    pub path_lines: Vec<String>,
    pub exports: Vec<(String, String)>,
    /// exact-cache's own directory, where the default directories are, and its name in the
    /// version ([`crate::paths::VersionRoots`]).
    pub version_root: (PathBuf, &'static str),
}

/// How the version names exact-cache's own directory, whichever of its fallbacks it is.
pub const OWN_DIR_NAME: &str = "<exact-cache-dir>";

impl crate::choice::Named for Preset {
    const ALL: &'static [Self] = &[Preset::TorchInductor];

    fn name(self) -> &'static str {
        Preset::name(self)
    }
}

impl Preset {
    pub fn name(self) -> &'static str {
        match self {
            Preset::TorchInductor => "torch-inductor",
        }
    }

    pub fn plan(self, env: &Env, locations: &Locations) -> PresetPlan {
        match self {
            Preset::TorchInductor => {
                let own = own_dir(env, locations);
                let base = own.join("torch-inductor");
                let dir = |var: &str, default: PathBuf| {
                    let path = env
                        .non_empty(var)
                        .map(|v| locations.resolve(v).unwrap_or_else(|_| PathBuf::from(v)))
                        .unwrap_or(default);
                    (var.to_owned(), path.to_string_lossy().into_owned())
                };
                let exports = vec![
                    dir("TORCHINDUCTOR_CACHE_DIR", base.join("inductor")),
                    dir("TRITON_CACHE_DIR", base.join("triton")),
                ];
                let path_lines = exports.iter().map(|(_, p)| p.clone()).collect();
                PresetPlan { preset: self, path_lines, exports, version_root: (own, OWN_DIR_NAME) }
            }
        }
    }
}

/// exact-cache's own directory: the same on every run of this runner.
fn own_dir(env: &Env, locations: &Locations) -> PathBuf {
    let from_runner = env
        .non_empty("RUNNER_TEMP")
        .filter(|_| !env.is_true("ACT"))
        .and_then(|t| PathBuf::from(t).parent().map(|p| p.join("_exact-cache")));
    from_runner
        .or_else(|| locations.home.as_ref().map(|h| h.join(".cache").join("exact-cache")))
        .unwrap_or_else(|| std::env::temp_dir().join("exact-cache"))
}

/// Variables of these prefixes change torch's code generation …
const TORCH_ENV_PREFIXES: [&str; 3] = ["TORCHINDUCTOR_", "TORCH_", "TRITON_"];
/// … except paths …
const TORCH_ENV_PATH_SUFFIXES: [&str; 3] = ["_DIR", "_HOME", "_PATH"];
/// … and logging settings.
const TORCH_ENV_LOGGING: [&str; 2] = ["TORCH_LOGS", "TORCH_TRACE"];

fn torch_env_patterns() -> EnvPatterns {
    let owned = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
    EnvPatterns {
        prefixes: owned(&TORCH_ENV_PREFIXES),
        except_suffixes: owned(&TORCH_ENV_PATH_SUFFIXES),
        except_names: owned(&TORCH_ENV_LOGGING),
    }
}

/// The native facets TorchInductor's kernels depend on.
const TORCH_FACETS: [&str; 6] = ["os", "arch", "isa", "libc", "compiler", "gpu"];

impl PresetPlan {
    /// Add the preset's facts to a fingerprint spec.
    pub fn apply(&self, spec: &mut FingerprintSpec, env: &Env) {
        match self.preset {
            Preset::TorchInductor => {
                spec.native.extend(TORCH_FACETS.map(Facet::named));
                // Inductor compiles its C++ kernels with `$CXX`, else `g++` on Linux.
                if env.non_empty("CXX").is_none() && !spec.compilers.iter().any(|c| c == "g++") {
                    spec.compilers.push("g++".to_owned());
                }
                // Inductor picks different kernels for AMX and AVX-512 BF16/FP16/VNNI.
                spec.isa_extensions = true;
                spec.python.get_or_insert_with(|| "python3".to_owned());
                spec.torch = true;
                spec.env_patterns = torch_env_patterns();
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn directories_are_stable_and_respect_what_is_set() {
        let locations = Locations { workspace: "/w/r/r".into(), home: Some("/home/runner".into()) };
        let runner = Env::from_pairs([("RUNNER_TEMP", "/home/runner/work/_temp")]);
        let plan = Preset::TorchInductor.plan(&runner, &locations);
        assert_eq!(
            plan.path_lines,
            [
                "/home/runner/work/_exact-cache/torch-inductor/inductor",
                "/home/runner/work/_exact-cache/torch-inductor/triton"
            ]
        );
        assert_eq!(plan.exports[0].0, "TORCHINDUCTOR_CACHE_DIR");
        assert_eq!(plan.version_root, (PathBuf::from("/home/runner/work/_exact-cache"), OWN_DIR_NAME));
        let act = Env::from_pairs([("RUNNER_TEMP", "/root/.cache/act/0123/tmp"), ("ACT", "true")]);
        let under_act = Preset::TorchInductor.plan(&act, &locations);
        assert_eq!(under_act.path_lines[0], "/home/runner/.cache/exact-cache/torch-inductor/inductor");
        assert_eq!(under_act.version_root.0, PathBuf::from("/home/runner/.cache/exact-cache"));
        let homeless = Locations { home: None, ..locations.clone() };
        let no_home = Preset::TorchInductor.plan(&Env::from_pairs([("ACT", "true")]), &homeless);
        assert_eq!(no_home.version_root.0, std::env::temp_dir().join("exact-cache"));
        let set = Env::from_pairs([("TORCHINDUCTOR_CACHE_DIR", "/data/inductor")]);
        assert_eq!(Preset::TorchInductor.plan(&set, &locations).path_lines[0], "/data/inductor");
        let torch_env = torch_env_patterns();
        assert!(torch_env.matches("TORCHINDUCTOR_MAX_AUTOTUNE") && torch_env.matches("TRITON_DEBUG"));
        assert!(!torch_env.matches("TORCHINDUCTOR_CACHE_DIR") && !torch_env.matches("TORCH_LOGS"));
        assert!(!torch_env.matches("CUDA_HOME") && !torch_env.matches("TORCH_HOME"));
    }

    #[test]
    fn torch_variables_whose_values_are_paths_stay_out_of_the_key() {
        let env = Env::from_pairs([
            ("TORCH_PY", "/opt/runner-1/.venv-torch/bin/python"),
            ("TORCHINDUCTOR_MAX_AUTOTUNE", "1"),
            ("TORCH_EXTRA", "~/x:/opt/y"),
            ("TRITON_REL", "./build"),
            ("TORCH_CUDA_ARCH_LIST", "8.0;9.0"),
            ("TORCH_NUMBER", "3.5"),
        ]);
        let (entered, paths) = torch_env_patterns().select(&env);
        assert_eq!(
            entered,
            [("TORCHINDUCTOR_MAX_AUTOTUNE", "1"), ("TORCH_CUDA_ARCH_LIST", "8.0;9.0"), ("TORCH_NUMBER", "3.5")]
        );
        assert_eq!(paths, ["TORCH_EXTRA", "TORCH_PY", "TRITON_REL"]);
    }
}
