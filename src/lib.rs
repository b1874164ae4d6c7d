//! exact-cache: persist expensive generated CI artifacts between jobs and reuse them **only**
//! under an exact fingerprint of the environment that made them.
//!
//! Data flow: [`cli`]/[`runner`] inputs → [`config::Config`] → [`fingerprint`] (key) →
//! [`commands`] → [`backend`] (where entries live) and [`archive`] (what an entry is, with its
//! [`manifest`]). Only [`runner`] talks to the GitHub Actions runner.

pub mod archive;
pub mod backend;
pub(crate) mod choice;
pub mod cli;
pub mod commands;
pub mod config;
pub mod content;
pub mod env;
pub(crate) mod file_mode;
pub mod fingerprint;
pub mod ids;
pub(crate) mod inputs;
pub mod keys;
pub mod manifest;
pub mod outcome;
pub mod paths;
pub(crate) mod preset;
pub(crate) mod process;
pub mod reads;
pub mod runner;
pub(crate) mod stack;
pub mod text;
pub(crate) mod units;

#[cfg(test)]
mod layering {
    //! The module layering of `docs/architecture.md`, checked against every `crate::…` path.

    use std::collections::BTreeMap;
    use std::path::Path;

    /// Layer of each module, from the numbered list of the doc's "Layers" section.
    fn layers() -> BTreeMap<String, usize> {
        let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md")).unwrap();
        let list = doc.split("<!-- layers").nth(1).expect("the doc marks its list of layers");
        let mut layers = BTreeMap::new();
        for line in list.lines().take_while(|l| !l.starts_with('#')) {
            let Some((number, rest)) = line.split_once(". ") else { continue };
            let Ok(layer) = number.parse::<usize>() else { continue };
            let names = rest.split('—').next().unwrap();
            for name in names.split('`').skip(1).step_by(2) {
                assert!(layers.insert(name.to_owned(), layer).is_none(), "`{name}` is listed twice");
            }
        }
        layers
    }

    /// The modules each top-level module's files name as `crate::<module>`, comments aside.
    fn uses(src: &Path) -> BTreeMap<String, Vec<(String, String)>> {
        let mut uses = BTreeMap::new();
        for entry in std::fs::read_dir(src).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            if name == "lib" || name == "main" {
                continue;
            }
            let files = rust_files(&path);
            let mut used = Vec::new();
            for file in files.iter().filter(|f| f.extension().is_some_and(|e| e == "rs")) {
                let text = std::fs::read_to_string(file).unwrap();
                for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
                    for after in line.split("crate::").skip(1) {
                        let target: String =
                            after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                        assert!(!target.is_empty(), "{}: name one module per `crate::` path", file.display());
                        if target != name {
                            used.push((target, file.display().to_string()));
                        }
                    }
                }
            }
            uses.insert(name, used);
        }
        uses
    }

    /// `path` itself, or every file beneath it.
    fn rust_files(path: &Path) -> Vec<std::path::PathBuf> {
        if !path.is_dir() {
            return vec![path.to_owned()];
        }
        std::fs::read_dir(path).unwrap().flat_map(|e| rust_files(&e.unwrap().path())).collect()
    }

    #[test]
    fn modules_use_only_lower_layers() {
        let layers = layers();
        let uses = uses(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
        let listed: Vec<&String> = layers.keys().collect();
        let present: Vec<&String> = uses.keys().collect();
        assert_eq!(listed, present, "docs/architecture.md lists exactly the modules of src/");
        let mut breaks = Vec::new();
        for (module, used) in &uses {
            for (target, file) in used {
                if layers[target] >= layers[module] {
                    breaks.push(format!(
                        "{file}: `{module}` (layer {}) uses `{target}` (layer {})",
                        layers[module], layers[target]
                    ));
                }
            }
        }
        breaks.dedup();
        assert!(breaks.is_empty(), "layering broken:\n{}", breaks.join("\n"));
    }
}
