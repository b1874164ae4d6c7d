//! What to fingerprint ([`FingerprintSpec`], built from the inputs) and the collection itself.

use super::facets::{Facet, Probe};
use super::system::System;
use super::{Component, ComponentName, Fingerprint, FingerprintError, Note, Value, files, imports, python};
use crate::env::Env;
use crate::paths::Locations;
use std::collections::{BTreeMap, BTreeSet};

/// Everything that decides which facts enter the fingerprint.
#[derive(Clone, Debug)]
pub struct FingerprintSpec {
    pub locations: Locations,
    pub hash_files: Vec<String>,
    /// Follow the imports of the Python files `hash-files` selects (`follow-imports`).
    pub follow_imports: bool,
    pub hash_env: Vec<String>,
    pub hash_commands: Vec<String>,
    pub native: BTreeSet<Facet>,
    /// Compiler commands for the `compiler` facet (default: `$CC` or `cc`, `$CXX` or `c++`).
    pub compilers: Vec<String>,
    /// Those of `compilers` that the `compilers` input named: one that is not installed is an
    /// error, where a compiler probed by default is recorded as absent.
    pub named_compilers: BTreeSet<String>,
    pub python: Option<String>,
    pub python_exclude: Vec<String>,
    /// Keep the distributions installed in editable mode from the workspace in `python.dists`
    /// (`python-keep-editable`).
    pub python_keep_editable: bool,
    pub variant: Option<String>,
    /// Components added by a preset, merged last.
    pub extra: BTreeMap<String, Component>,
    /// The `torch` component (the `torch-inductor` preset), from the `python` interpreter.
    pub torch: bool,
    /// `native.isa` also lists the x86 extensions that change generated kernels.
    pub isa_extensions: bool,
    /// Set variables that enter the `env` component by their names (a preset's).
    pub env_patterns: EnvPatterns,
}

/// Variables chosen by name pattern rather than listed: every set variable whose name starts
/// with one of `prefixes`, except those ending with one of `except_suffixes` or named in
/// `except_names`, and those whose value is a path ([`is_path_value`]): runners whose
/// directories sit in different places would otherwise never share an entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvPatterns {
    pub prefixes: Vec<String>,
    pub except_suffixes: Vec<String>,
    pub except_names: Vec<String>,
}

impl EnvPatterns {
    pub fn matches(&self, name: &str) -> bool {
        self.prefixes.iter().any(|p| name.starts_with(p.as_str()))
            && !self.except_suffixes.iter().any(|s| name.ends_with(s.as_str()))
            && !self.except_names.iter().any(|n| n == name)
    }

    /// The set variables these patterns name: those that enter the key, and those left out
    /// because their values are paths; each sorted by name.
    pub fn select<'e>(&self, env: &'e Env) -> (Vec<(&'e str, &'e str)>, Vec<&'e str>) {
        let (mut entered, mut paths) = (Vec::new(), Vec::new());
        for (name, value) in env.iter() {
            if !self.matches(name) {
                continue;
            }
            match is_path_value(value) {
                true => paths.push(name),
                false => entered.push((name, value)),
            }
        }
        entered.sort();
        paths.sort();
        (entered, paths)
    }
}

/// Whether a variable's value names places on this machine: an absolute path, `~/…`, `./…`,
/// `../…`, or a `:`/`;`-separated list of such.
pub fn is_path_value(value: &str) -> bool {
    let one = |part: &str| {
        let part = part.trim();
        std::path::Path::new(part).is_absolute()
            || part.starts_with('/')
            || ["~", "./", "../", ".\\", "..\\"].iter().any(|p| part.starts_with(p))
    };
    let parts: Vec<&str> = value.split([':', ';']).filter(|p| !p.trim().is_empty()).collect();
    // `C:\x` splits at its drive colon: whole, it is absolute.
    one(value) || (!parts.is_empty() && parts.iter().all(|p| one(p)))
}

/// A `hash-env` value as it enters the key: without the directories exact-cache itself put on a
/// path list (its reads hook on `PYTHONPATH`, [`crate::paths::is_hook_dir`]), so a key does not
/// change with whether another cache of the job missed. The rest stays byte for byte; a value
/// that held nothing else reads as unset (what it was before the hook's directory was put first).
fn without_hook_dirs(value: &str, env: &Env) -> Value {
    let Some(temp) = env.non_empty("RUNNER_TEMP").map(std::path::Path::new) else { return Value::text(value) };
    let separator = if cfg!(windows) { ';' } else { ':' };
    let kept: Vec<&str> =
        value.split(separator).filter(|entry| !crate::paths::is_hook_dir(std::path::Path::new(entry), temp)).collect();
    match kept.join(&separator.to_string()) {
        rest if rest.len() == value.len() => Value::text(value),
        rest if rest.is_empty() => Value::Absent,
        rest => Value::text(rest),
    }
}

impl FingerprintSpec {
    pub fn new(locations: Locations) -> Self {
        Self {
            locations,
            hash_files: Vec::new(),
            follow_imports: true,
            hash_env: Vec::new(),
            hash_commands: Vec::new(),
            native: Facet::defaults().collect(),
            compilers: vec!["cc".into(), "c++".into()],
            named_compilers: BTreeSet::new(),
            python: None,
            python_exclude: Vec::new(),
            python_keep_editable: false,
            variant: None,
            extra: BTreeMap::new(),
            torch: false,
            isa_extensions: false,
            env_patterns: EnvPatterns::default(),
        }
    }
}

impl FingerprintSpec {
    /// What the step's inputs ask of the fingerprint, as one digest: which files, variables,
    /// commands, facets, interpreter and variant enter it — none of their values, nothing read
    /// from the environment. Two steps of a job with one digest (and one prefix, `path` lines
    /// and compression) fingerprint the same cache; a fingerprint that differs between them was
    /// changed by the job's own steps.
    pub fn inputs_digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let patterns = &self.env_patterns;
        let inputs = serde_json::json!({
            "hash_files": self.hash_files,
            "follow_imports": self.follow_imports,
            "hash_env": self.hash_env,
            "hash_commands": self.hash_commands,
            "native": self.native.iter().map(|f| f.name()).collect::<Vec<_>>(),
            "compilers": self.named_compilers,
            "python": self.python,
            "python_exclude": self.python_exclude,
            "variant": self.variant,
            "extra": self.extra.keys().collect::<Vec<_>>(),
            "torch": self.torch,
            "isa_extensions": self.isa_extensions,
            "env_patterns": [&patterns.prefixes, &patterns.except_suffixes, &patterns.except_names],
        });
        hex::encode(Sha256::digest(inputs.to_string()))
    }
}

/// Gather every configured fact. Commands run in the workspace with exactly `env`.
pub fn collect(spec: &FingerprintSpec, sys: &dyn System, env: &Env) -> Result<Fingerprint, FingerprintError> {
    collect_noted(spec, sys, env).map(|(fp, _)| fp)
}

/// [`collect`], and what the collection has to say (imports not followed, distributions left out).
pub fn collect_noted(
    spec: &FingerprintSpec,
    sys: &dyn System,
    env: &Env,
) -> Result<(Fingerprint, Vec<Note>), FingerprintError> {
    let cwd = &spec.locations.workspace;
    let mut fp = Fingerprint::default();
    let mut notes = Vec::new();
    let mut search = imports::SearchPath::default();
    if let Some(python) = &spec.python {
        let python::Collected { interpreter, dists, search: path, left_out } =
            python::collect(sys, env, &spec.locations, python, &spec.python_exclude, spec.python_keep_editable)?;
        fp.insert(ComponentName::PythonInterpreter.name(), interpreter);
        fp.insert(ComponentName::PythonDists.name(), dists);
        notes.extend(left_out);
        search = path;
    }
    if !spec.hash_files.is_empty() {
        let (mut component, hashed) = files::hash_files(&spec.hash_files, &spec.locations)?;
        if spec.follow_imports {
            let (imported, unfollowed) = files::imported(&hashed, &spec.locations, &search, &mut component)?;
            notes.extend(unfollowed);
            if !imported.is_empty() {
                fp.insert(ComponentName::Imports.name(), imported);
            }
        }
        fp.insert(ComponentName::Files.name(), component);
    }
    let mut env_component: Component = spec
        .hash_env
        .iter()
        .map(|name| (name.clone(), env.get(name).map_or(Value::Absent, |value| without_hook_dirs(value, env))))
        .collect();
    for (name, value) in spec.env_patterns.select(env).0 {
        env_component.insert(name.to_owned(), Value::text(value));
    }
    if !env_component.is_empty() {
        fp.insert(ComponentName::Env.name(), env_component);
    }
    if !spec.hash_commands.is_empty() {
        let mut component = Component::new();
        for command in &spec.hash_commands {
            let out = sys
                .run_shell(command, env, cwd)
                .map_err(|source| FingerprintError::CommandSpawn { command: command.clone(), source })?;
            if !out.success {
                return Err(FingerprintError::CommandFailed { command: command.clone(), detail: out.failure_detail() });
            }
            component.insert(command.clone(), Value::Text(out.stdout));
        }
        fp.insert(ComponentName::Commands.name(), component);
    }
    let probe = Probe::new(sys, env, spec);
    for facet in &spec.native {
        fp.insert(facet.component().name(), facet.collect(&probe)?);
    }
    if spec.torch {
        let python = spec.python.as_deref().unwrap_or("python3");
        fp.insert(ComponentName::Torch.name(), super::torch::collect(sys, env, cwd, python, || probe.nvidia_gpus())?);
    }
    if let Some(variant) = &spec.variant {
        fp.insert(ComponentName::Variant.name(), [("variant".to_owned(), Value::text(variant))].into());
    }
    for (name, component) in &spec.extra {
        fp.components.entry(name.clone()).or_default().extend(component.clone());
    }
    Ok((fp, notes))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_inputs_digest_names_what_enters_not_its_values() {
        let spec = |variant: &str, env: &[&str]| {
            let mut spec = FingerprintSpec::new(Locations { workspace: "/ws".into(), home: None });
            spec.variant = Some(variant.to_owned());
            spec.hash_env = env.iter().map(|n| n.to_string()).collect();
            spec
        };
        let digest = spec("a", &["X"]).inputs_digest();
        assert_eq!(digest, spec("a", &["X"]).inputs_digest());
        assert_ne!(digest, spec("b", &["X"]).inputs_digest(), "another variant is another cache");
        assert_ne!(digest, spec("a", &["X", "Y"]).inputs_digest());
        // Compilers probed by default come from `$CC`, which a step may export: not an input.
        let mut probed = spec("a", &["X"]);
        probed.compilers = vec!["clang".into()];
        assert_eq!(probed.inputs_digest(), digest);
    }

    #[test]
    fn the_hook_directories_of_this_job_are_left_out_of_an_env_value() {
        let env = Env::from_pairs([("RUNNER_TEMP", "/runner/_temp/")]);
        let value = |v: &str| without_hook_dirs(v, &env);
        // What the reads hook's export makes of an unset, a set and a later-extended PYTHONPATH.
        assert_eq!(value("/runner/_temp/exact-cache/reads"), Value::Absent);
        assert_eq!(value("/runner/_temp/exact-cache/reads:/a:/b"), Value::text("/a:/b"));
        assert_eq!(value("/x:/runner/_temp/exact-cache/reads-2:/y"), Value::text("/x:/y"));
        assert_eq!(value("/runner/_temp//exact-cache/./reads/:/a"), Value::text("/a"));
        // Anything else stays byte for byte: other directories of ours, the same shape elsewhere,
        // empty entries, relative ones.
        for kept in [
            "/runner/_temp/exact-cache",
            "/runner/_temp/exact-cache/other",
            "/runner/_temp/exact-cache/reads/sub",
            "/elsewhere/exact-cache/reads",
            "exact-cache/reads",
            "/a::/b:",
            "",
        ] {
            assert_eq!(value(kept), Value::text(kept), "{kept}");
        }
        // Without `RUNNER_TEMP` nothing is ours.
        let outside = Env::default();
        assert_eq!(
            without_hook_dirs("/runner/_temp/exact-cache/reads", &outside),
            Value::text("/runner/_temp/exact-cache/reads")
        );
    }
}
