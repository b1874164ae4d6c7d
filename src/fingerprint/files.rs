//! The `files` component: content and executable bit of every file `hash-files` matches.
//!
//! Labels are paths as [`Locations::display`] writes them, so the component does not depend on
//! where the checkout lives, on directory order, or on the order of the patterns. A symlink is
//! hashed as its target text and what it resolves to (`symlink_value`). The Python files among
//! them are followed through their imports ([`imported`]).

use super::imports::{self, SearchPath};
use super::{Component, FingerprintError, Note, Value};
use crate::paths::{Locations, PatternSet, walk};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The `files` component, and the regular files it hashed (absolute).
pub(super) fn hash_files(
    patterns: &[String],
    locations: &Locations,
) -> Result<(Component, Vec<std::path::PathBuf>), FingerprintError> {
    let set = PatternSet::parse(patterns, locations).map_err(FingerprintError::HashFilesPath)?;
    let mut component = Component::new();
    let mut hashed = Vec::new();
    for pattern in &set.includes {
        let found = walk(pattern, &set, false).map_err(FingerprintError::HashFilesPath)?;
        let mut matched = 0usize;
        for f in found {
            let value = if f.file_type.is_symlink() {
                if f.abs.is_file() {
                    hashed.push(f.abs.clone());
                }
                symlink_value(&f.abs)?
            } else if f.metadata.is_file() {
                hashed.push(f.abs.clone());
                file_value(&f.abs, &f.metadata)?
            } else {
                continue;
            };
            matched += 1;
            component.insert(locations.display(&f.abs), Value::Text(value));
        }
        if matched == 0 {
            return Err(FingerprintError::NoMatch { pattern: pattern.line.clone() });
        }
    }
    Ok((component, hashed))
}

/// `<sha256> x|-` of a regular file.
fn file_value(path: &Path, meta: &std::fs::Metadata) -> Result<String, FingerprintError> {
    let digest = sha256_file(path).map_err(|source| FingerprintError::Read { path: path.to_owned(), source })?;
    Ok(format!("{digest} {}", if is_executable(meta) { "x" } else { "-" }))
}

/// Follow the imports of the Python files among `hashed`: every module file inside the
/// workspace they reach that `files` does not hold yet enters it, and the `imports` component
/// (returned) names the files that import it, `, `-separated (with how, when a computed name or a
/// `*` import of a computed `__all__` reached it); and what was not followed.
pub(super) fn imported(
    hashed: &[std::path::PathBuf],
    locations: &Locations,
    search: &SearchPath,
    files: &mut Component,
) -> Result<(Component, Vec<Note>), FingerprintError> {
    let roots: Vec<_> = hashed.iter().filter(|p| imports::is_python(p)).cloned().collect();
    let followed = imports::follow(&roots, &locations.workspace, search);
    let mut labels: Vec<Option<String>> = vec![None; followed.paths.len()];
    let mut label = |i: usize| labels[i].get_or_insert_with(|| locations.display(&followed.paths[i])).clone();
    let mut component = Component::new();
    for (module, importers) in &followed.reached {
        let label_of_module = label(*module);
        if files.contains_key(&label_of_module) {
            continue;
        }
        let path = &followed.paths[*module];
        let meta = std::fs::metadata(path).map_err(|source| FingerprintError::Read { path: path.clone(), source })?;
        files.insert(label_of_module.clone(), Value::Text(file_value(path, &meta)?));
        let by: BTreeSet<String> = importers
            .iter()
            .map(|(p, via)| {
                let how = match via {
                    imports::Via::Import => "",
                    imports::Via::ComputedName => " (computed name)",
                    imports::Via::Star => " (import *)",
                };
                format!("{}{how}", label(*p))
            })
            .collect();
        component.insert(label_of_module, Value::Text(by.into_iter().collect::<Vec<_>>().join(", ")));
    }
    let notes = followed
        .troubles
        .into_iter()
        .map(|(file, trouble)| Note::Imports { file: locations.display(&file), trouble })
        .collect();
    Ok((component, notes))
}

/// A symlink is hashed as a link — its target text — plus what it resolves to, so a change to
/// the file behind it changes the key too: `symlink <target> -> <sha256> x|-`, or
/// `… (directory)` / `… (dangling)`.
fn symlink_value(path: &Path) -> Result<String, FingerprintError> {
    let read = |source| FingerprintError::Read { path: path.to_owned(), source };
    let target = std::fs::read_link(path).map_err(read)?;
    let link = format!("symlink {}", target.to_string_lossy());
    Ok(match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {
            let digest = sha256_file(path).map_err(read)?;
            format!("{link} -> {digest} {}", if is_executable(&meta) { "x" } else { "-" })
        }
        Ok(meta) if meta.is_dir() => format!("{link} (directory)"),
        Ok(_) => format!("{link} (special file)"),
        Err(e) if e.kind() == io::ErrorKind::NotFound => format!("{link} (dangling)"),
        Err(source) => return Err(read(source)),
    })
}

/// SHA-256 of a file's content, lowercase hex.
pub fn sha256_file(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

fn is_executable(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}
