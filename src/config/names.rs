//! The names of the inputs an entry point was given, checked against what it declares: an
//! actions/cache input that means something else here is an error saying what to write
//! instead; an unknown name near a declared one (`hash-file`) is an error naming it, since its
//! value would silently be left out; any other undeclared name is a warning.

use super::defs::{INPUTS, input_spec};
use crate::inputs::{EntryPoint, ForeignInput, InputError};

/// Inputs of actions/cache that mean something else here: the name as the runner passes it
/// (`INPUT_<NAME>` lowercased), as written in a workflow, and what to do instead.
const ACTIONS_CACHE_INPUTS: [(&str, &str, &str); 5] = [
    (
        "key",
        "key",
        "the key is computed from the fingerprint here: move the files of your `hashFiles(...)` to `hash-files`, \
         the rest of the key to `prefix`, `hash-env` or `variant`, and remove `key`",
    ),
    (
        "restore-keys",
        "restore-keys",
        "exact-cache never falls back to another key: an entry is reused only under exactly this fingerprint; \
         remove `restore-keys` (`explain-misses` says why a key missed)",
    ),
    (
        "enablecrossosarchive",
        "enableCrossOsArchive",
        "the fingerprint (`native`: os, arch, …) decides which runners share an entry; remove it",
    ),
    ("upload-chunk-size", "upload-chunk-size", "exact-cache sizes its own uploads; remove it"),
    (
        "save-always",
        "save-always",
        "write `save-on-failure: true` on the root action, or run the `save` entry point with `if: always()`",
    ),
];

/// Check the names of the inputs an entry point was given (`(name, blank)`); the warnings are
/// returned. A blank actions/cache input only warns.
pub fn check_input_names(given: &[(String, bool)], entry: EntryPoint) -> Result<Vec<String>, InputError> {
    let declared: Vec<&str> = INPUTS.iter().filter(|i| i.declared_by(entry)).map(|i| i.name).collect();
    let mut foreign = Vec::new();
    let mut warnings = Vec::new();
    let mut given: Vec<&(String, bool)> = given.iter().collect();
    given.sort();
    for (name, blank) in given {
        if declared.contains(&name.as_str()) {
            continue;
        }
        if let Some(&(_, shown, hint)) = ACTIONS_CACHE_INPUTS.iter().find(|(n, _, _)| n == name) {
            if *blank {
                warnings.push(format!("input `{shown}` (from actions/cache) is empty and ignored: {hint}"));
            } else {
                foreign.push(ForeignInput { name: shown, hint });
            }
            continue;
        }
        let near = closest(name, &declared);
        if input_spec(name).is_none()
            && let Some(near) = near
        {
            return Err(InputError::Misspelt { name: name.clone(), near });
        }
        let mut message = if input_spec(name).is_some() {
            format!("input `{name}` is not an input of this entry point and is ignored")
        } else {
            format!("unknown input `{name}` is ignored")
        };
        if let Some(near) = near {
            message.push_str(&format!("; did you mean `{near}`?"));
        }
        warnings.push(message);
    }
    match foreign.is_empty() {
        true => Ok(warnings),
        false => Err(InputError::ActionsCacheInputs { inputs: foreign }),
    }
}

/// The name in `names` nearest to `name` by edit distance, when near enough to be a typo.
fn closest<'a>(name: &str, names: &[&'a str]) -> Option<&'a str> {
    let (distance, near) = names.iter().map(|n| (edit_distance(name, n), *n)).min()?;
    (distance <= (name.len() / 3).max(1)).then_some(near)
}

/// Levenshtein distance over characters, with `_` and `-` the same (the runner turns spaces
/// into `_`).
fn edit_distance(a: &str, b: &str) -> usize {
    let norm = |c: char| if c == '_' { '-' } else { c };
    let b: Vec<char> = b.chars().map(norm).collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().map(norm).enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(names: &[&str]) -> Vec<(String, bool)> {
        names.iter().map(|n| (n.to_string(), false)).collect()
    }

    #[test]
    fn actions_cache_inputs_are_errors_and_other_unknown_inputs_warnings() {
        let err =
            check_input_names(&given(&["path", "key", "restore-keys"]), EntryPoint::Root).unwrap_err().to_string();
        assert!(err.starts_with("input `key` (from actions/cache): the key is computed from the fingerprint"), "{err}");
        assert!(err.contains("; input `restore-keys` (from actions/cache): exact-cache never falls back"), "{err}");
        let err =
            check_input_names(&given(&["enablecrossosarchive"]), EntryPoint::Fingerprint).unwrap_err().to_string();
        assert!(err.starts_with("input `enableCrossOsArchive` (from actions/cache)"), "{err}");
        // `key` is an input of the save entry point; blank actions/cache inputs only warn.
        assert_eq!(check_input_names(&given(&["key"]), EntryPoint::Save).unwrap(), Vec::<String>::new());
        let blank = check_input_names(&[("upload-chunk-size".into(), true)], EntryPoint::Save).unwrap();
        assert_eq!(blank.len(), 1);

        let warnings = check_input_names(&given(&["lookup-only", "zzz"]), EntryPoint::Save).unwrap();
        assert_eq!(
            warnings,
            [
                "input `lookup-only` is not an input of this entry point and is ignored",
                "unknown input `zzz` is ignored",
            ]
        );
        assert_eq!(closest("hashfiles", &["hash-files", "hash-env"]), Some("hash-files"));
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn a_near_miss_of_an_input_name_is_an_error() {
        let err = check_input_names(&given(&["path", "hash-file"]), EntryPoint::Root).unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown input `hash-file`: did you mean `hash-files`? (as written, its value would be left out)"
        );
        let err = check_input_names(&given(&["hash_env"]), EntryPoint::Save).unwrap_err().to_string();
        assert!(err.starts_with("unknown input `hash_env`: did you mean `hash-env`?"), "{err}");
    }

    #[test]
    fn every_input_an_entry_point_declares_passes_unremarked() {
        for entry in EntryPoint::ALL {
            let declared: Vec<&str> = INPUTS.iter().filter(|i| i.declared_by(entry)).map(|i| i.name).collect();
            assert_eq!(check_input_names(&given(&declared), entry).unwrap(), Vec::<String>::new(), "{entry:?}");
        }
    }
}
