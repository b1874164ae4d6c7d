//! `explain-misses` and `exact-cache explain`: why is this a miss? List the entries with the
//! same prefix (REST, or the local store), take the newest (this ref's first), read its
//! fingerprint from the first bytes of its archive — one small ranged read, never the whole
//! entry — and name every component that differs from ours.

use super::Context;
use super::prune::ListedSlots;
use super::report::Shown;
use crate::archive::{Compression, UnpackError, read_fingerprint};
use crate::backend::{Backend, BackendError};
use crate::backend::{Catalog, CatalogError, Listed};
use crate::fingerprint::{Change, ComponentName, Fingerprint, FingerprintRecord, Value};
use crate::keys::{self, Key};
use crate::stack::Slot;
use crate::text::shorten;
use crate::units::count_of;

/// Bytes read from the start of an archive to find its fingerprint: a small read first, a
/// larger one for fingerprints with thousands of hashed files.
const PREFIX_READS: [u64; 2] = [1 << 20, 16 << 20];
/// Candidates tried before giving up (some may be unreadable from this ref's scope).
const CANDIDATES: usize = 5;
/// Changes listed before "… and N more".
pub(super) const SHOWN: usize = 25;
/// Characters of each value in a change.
const VALUE_CHARS: usize = 80;

pub(super) use crate::outcome::{Explanation, SameKey};

/// Why there is no explanation: nothing to compare with, or the entry to compare with could not
/// be read. Never a failure of the step.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("no earlier entry with prefix `{prefix}` to compare with")]
    NoEarlierEntry { prefix: String },
    #[error("`{key}` exists with this run's `path` lines and compression: a hit, or on a branch this run cannot read")]
    SameEntry { key: Key },
    #[error("cannot look up `{key}`")]
    Lookup {
        key: Key,
        #[source]
        source: BackendError,
    },
    #[error("`{key}` is listed but not readable from this run")]
    NotReadable { key: Key },
    #[error("cannot read `{key}`")]
    Read {
        key: Key,
        #[source]
        source: BackendError,
    },
    #[error("cannot read the fingerprint of `{key}`")]
    Fingerprint {
        key: Key,
        #[source]
        source: UnpackError,
    },
    #[error("`{key}` carries another key's fingerprint")]
    OtherKey { key: Key },
}

/// [`explain`] `ours` for this run (its refs; `shown`: `secret-env` values masked; `path_lines`:
/// ours, as the version names them) and log the result:
/// at most `limit` changes, or why there is no explanation (also returned) after `unexplained: `.
/// `asked`: the answer of the `explain` command, which `--quiet` keeps.
#[allow(clippy::too_many_arguments)]
pub(super) fn explain_and_log(
    ctx: &Context,
    (shown, path_lines): (&Shown, &[String]),
    backend: &dyn Backend,
    catalog: &dyn Catalog,
    ours: &FingerprintRecord,
    limit: usize,
    unexplained: &str,
    asked: bool,
) -> Result<Explanation, String> {
    let runner = ctx.runner;
    let env = runner.env();
    let refs = (env.non_empty("GITHUB_REF"), env.non_empty("GITHUB_BASE_REF"));
    match explain(shown, backend, catalog, ours, path_lines, refs) {
        Ok(explanation) => {
            super::report::log_explanation(runner, &explanation, limit, asked);
            Ok(explanation)
        }
        Err(reason) => {
            let why = match &reason {
                // As under act: there is nothing to ask, not a failed attempt.
                ExplainError::Catalog(missing @ CatalogError::NoCacheApi { .. }) => {
                    format!("skipped: {}", crate::text::error_line(missing))
                }
                _ => crate::text::error_line(&reason),
            };
            let line = format!("{unexplained}: {why}");
            if asked {
                runner.answer(&line)
            } else {
                runner.info(&line)
            }
            Err(why)
        }
    }
}

/// Compare `ours` with the newest other entry of its prefix. An entry with exactly our key but
/// another version comes first: it has our fingerprint, and was saved for other `path` lines or
/// another compression (`path_lines` are ours, to tell which).
pub(super) fn explain(
    shown: &Shown,
    backend: &dyn Backend,
    catalog: &dyn Catalog,
    ours: &FingerprintRecord,
    path_lines: &[String],
    (current_ref, base_ref): (Option<&str>, Option<&str>),
) -> Result<Explanation, ExplainError> {
    let all: Vec<Listed> =
        catalog.list(&format!("{}-", ours.prefix), None)?.into_iter().filter(|l| l.key.is_of(&ours.prefix)).collect();
    // Every entry of our key's stacks (later generations' bases have keys of their own).
    let slots = ListedSlots::new(&all, Some(&ours.version));
    let (same, mut listed): (Vec<Listed>, Vec<Listed>) = all.into_iter().partition(|l| slots.placed(l).key == ours.key);
    // A slot of our own stack says most (a base before a layer): prefer it to an entry of other
    // `path` lines.
    let slot = |l: &Listed| {
        let placed = slots.placed(l);
        (placed.base_version == ours.version && placed.slot != Slot::FIRST_BASE).then_some(placed.slot)
    };
    let theirs = same
        .iter()
        .find(|l| slot(l).is_some_and(Slot::is_base))
        .or_else(|| same.iter().find(|l| slot(l).is_some()))
        .or_else(|| same.iter().find(|l| l.version != ours.version));
    if let Some(theirs) = theirs {
        let same_key = SameKey {
            compression: keys::compression_of(&theirs.version, path_lines).map(str::to_owned),
            slot: slot(theirs),
        };
        return Ok(Explanation {
            against_key: theirs.key.clone(),
            against_ref: theirs.r#ref.clone(),
            changes: vec![super::words::same_key(&same_key)],
            same_key: Some(same_key),
        });
    }
    if listed.is_empty() {
        return Err(match same.into_iter().next() {
            Some(ours) => ExplainError::SameEntry { key: ours.key },
            None => ExplainError::NoEarlierEntry { prefix: ours.prefix.clone() },
        });
    }
    // What this run can read first: its own ref, then the base branch of a pull request, then
    // the newest of the rest (the default branch among them); newest first within each.
    let base = base_ref.map(|b| format!("refs/heads/{b}"));
    let rank = |l: &Listed| match l.r#ref.as_deref() {
        r if r.is_some() && r == current_ref => 0,
        r if r.is_some() && r == base.as_deref() => 1,
        _ => 2,
    };
    listed.sort_by(|a, b| rank(a).cmp(&rank(b)).then(b.created.cmp(&a.created)));
    let mut last_problem = None;
    for candidate in listed.into_iter().take(CANDIDATES) {
        match read_theirs(backend, &candidate) {
            Ok(theirs) => {
                let changes = render_all(&theirs.components, &ours.components, shown);
                return Ok(Explanation {
                    against_key: candidate.key,
                    against_ref: candidate.r#ref,
                    changes,
                    same_key: None,
                });
            }
            Err(problem) => last_problem = Some(problem),
        }
    }
    Err(last_problem.expect("at least one candidate was tried"))
}

fn read_theirs(backend: &dyn Backend, candidate: &Listed) -> Result<FingerprintRecord, ExplainError> {
    let key = || candidate.key.clone();
    let entry = backend
        .lookup(&candidate.key, &candidate.version)
        .map_err(|source| ExplainError::Lookup { key: key(), source })?
        .filter(|e| e.key == candidate.key)
        .ok_or_else(|| ExplainError::NotReadable { key: key() })?;
    let mut problem = None;
    for len in PREFIX_READS {
        let bytes = backend.read_prefix(&entry, len).map_err(|source| ExplainError::Read { key: key(), source })?;
        match read_fingerprint(&bytes[..], sniff(&bytes)) {
            Ok(record) if record.key == candidate.key => return Ok(record),
            Ok(_) => return Err(ExplainError::OtherKey { key: key() }),
            Err(source) => problem = Some(ExplainError::Fingerprint { key: key(), source }),
        }
        if (bytes.len() as u64) < len {
            break; // the whole entry was read
        }
    }
    Err(problem.expect("at least one read was tried"))
}

/// The compression of an archive, from its first bytes.
pub(super) fn sniff(bytes: &[u8]) -> Compression {
    match bytes {
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Compression::Zstd,
        [0x1f, 0x8b, ..] => Compression::Gzip,
        _ => Compression::None,
    }
}

/// One change as users read it: `python: torch 2.14.0 → 2.15.0`, `files: gen.py changed`,
/// `native.isa: x86-64-v4 → x86-64-v3`. Values read as [`Shown`] shows them.
/// Every difference from `theirs` to `ours`, one line each — but a component only one side has
/// is one line ("python: 94 packages added"), not one per value.
/// A module file reached through imports reads `files: <path> changed (imported by <file>)`;
/// its `imports` change is not a line of its own when its `files` line says it.
fn render_all(theirs: &Fingerprint, ours: &Fingerprint, shown: &Shown) -> Vec<String> {
    let changes = theirs.diff(ours);
    let (files, imports) = (ComponentName::Files.name(), ComponentName::Imports.name());
    let importers = |label: &str| {
        [ours, theirs].iter().find_map(|fp| fp.components.get(imports)?.get(label)?.as_text().map(str::to_owned))
    };
    let changed_files: std::collections::BTreeSet<&str> =
        changes.iter().filter(|c| c.component == files).map(|c| c.label.as_str()).collect();
    let mut lines = Vec::new();
    for group in changes.chunk_by(|a, b| a.component == b.component) {
        let component = group[0].component.as_str();
        if component == files || component == imports {
            for c in group.iter().filter(|c| component == files || !changed_files.contains(c.label.as_str())) {
                let by = importers(&c.label)
                    .filter(|_| component == files)
                    .map(|by| format!(" (imported by {})", shorten(&by, VALUE_CHARS)));
                lines.push(format!("{}{}", render(c, shown), by.unwrap_or_default()));
            }
            continue;
        }
        let added = !theirs.components.contains_key(component);
        let removed = !ours.components.contains_key(component);
        if group.len() > 1 && (added || removed) {
            let python = ComponentName::parse(component) == Some(ComponentName::PythonDists);
            let (name, noun) = if python { ("python", "package") } else { (component, "value") };
            let (verb, side) = if added { ("added", "the compared entry") } else { ("removed", "this run") };
            lines.push(format!(
                "{name}: {} {verb} ({side} has no `{component}` component)",
                count_of(group.len(), noun)
            ));
        } else {
            lines.extend(group.iter().map(|c| render(c, shown)));
        }
    }
    lines
}

/// Every difference from `theirs` to `ours`, as an explanation says them (one line each).
pub(super) fn changes(theirs: &Fingerprint, ours: &Fingerprint, shown: &Shown) -> Vec<String> {
    render_all(theirs, ours, shown)
}

pub(super) fn render(c: &Change, shown: &Shown) -> String {
    let (component, label) = (c.component.as_str(), c.label.as_str());
    let short = |v: &Value| shown.value(component, label, v, VALUE_CHARS);
    let known = ComponentName::parse(component);
    let single = known.is_some_and(|k| k.is_single_fact(label));
    let is_files = known == Some(ComponentName::Files);
    let name = match known {
        Some(ComponentName::PythonDists) => "python",
        _ => component,
    };
    match (&c.old, &c.new) {
        (Some(_), Some(_)) if is_files => format!("files: {label} changed"),
        // A `secret-env` value shows as `***` on both sides; a long one may differ past the cut.
        (Some(old), Some(new)) if short(old) == short(new) => format!("{name}: {label} changed"),
        (Some(old), Some(new)) if single => format!("{name}: {} → {}", short(old), short(new)),
        (Some(old), Some(new)) => format!("{name}: {label} {} → {}", short(old), short(new)),
        (None, Some(new)) if is_files || new == &Value::Absent => format!("{name}: {label} added"),
        (None, Some(new)) => format!("{name}: {label} added ({})", short(new)),
        (Some(_), None) => format!("{name}: {label} removed"),
        (None, None) => format!("{name}: {label}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::Component;

    fn change(component: &str, label: &str, old: Option<&str>, new: Option<&str>) -> Change {
        Change {
            component: component.into(),
            label: label.into(),
            old: old.map(Value::text),
            new: new.map(Value::text),
        }
    }

    fn render_plain(c: &Change) -> String {
        render(c, &Shown::plain())
    }

    #[test]
    fn a_component_only_one_side_has_is_one_line() {
        let dists = |n: usize| Component::from_iter((0..n).map(|i| (format!("pkg{i}"), Value::text("1.0"))));
        let mut theirs = Fingerprint::default();
        theirs.insert("variant", Component::from([("variant".to_owned(), Value::text("cpu"))]));
        let mut ours = theirs.clone();
        ours.insert("python.dists", dists(94));
        ours.insert("env", Component::from([("CC".to_owned(), Value::text("gcc"))]));
        let lines = render_all(&theirs, &ours, &Shown::plain());
        assert_eq!(
            lines,
            ["env: CC added (gcc)", "python: 94 packages added (the compared entry has no `python.dists` component)",]
        );
        assert_eq!(
            render_all(&ours, &theirs, &Shown::plain())[1],
            "python: 94 packages removed (this run has no `python.dists` component)"
        );
    }

    #[test]
    fn a_changed_import_names_who_imports_it() {
        let fp = |scale: &str| {
            let mut fp = Fingerprint::default();
            let files = [("tools/gen.py", "aa -"), ("tools/helpers/weights.py", scale)];
            fp.insert("files", Component::from_iter(files.map(|(l, v)| (l.to_owned(), Value::text(v)))));
            fp.insert(
                "imports",
                Component::from([("tools/helpers/weights.py".to_owned(), Value::text("tools/gen.py"))]),
            );
            fp
        };
        assert_eq!(
            render_all(&fp("bb -"), &fp("cc -"), &Shown::plain()),
            ["files: tools/helpers/weights.py changed (imported by tools/gen.py)"]
        );
        // An entry saved before imports were followed: the helper is new to the key.
        let mut before = fp("bb -");
        before.components.remove("imports");
        before.components.get_mut("files").unwrap().remove("tools/helpers/weights.py");
        assert_eq!(
            render_all(&before, &fp("bb -"), &Shown::plain()),
            ["files: tools/helpers/weights.py added (imported by tools/gen.py)"]
        );
        // Only who imports it changed: the `imports` line says so.
        let mut other = fp("bb -");
        other
            .components
            .get_mut("imports")
            .unwrap()
            .insert("tools/helpers/weights.py".into(), Value::text("tools/other.py"));
        assert_eq!(
            render_all(&fp("bb -"), &other, &Shown::plain()),
            ["imports: tools/helpers/weights.py tools/gen.py → tools/other.py"]
        );
    }

    #[test]
    fn changes_read_like_the_issue_says() {
        assert_eq!(
            render_plain(&change("python.dists", "torch", Some("2.14.0"), Some("2.15.0"))),
            "python: torch 2.14.0 → 2.15.0"
        );
        assert_eq!(
            render_plain(&change("files", "gen_model.py", Some("aa -"), Some("bb -"))),
            "files: gen_model.py changed"
        );
        assert_eq!(
            render_plain(&change("native.isa", "level", Some("x86-64-v4"), Some("x86-64-v3"))),
            "native.isa: x86-64-v4 → x86-64-v3"
        );
        assert_eq!(render_plain(&change("python.dists", "numpy", None, Some("2.0"))), "python: numpy added (2.0)");
        assert_eq!(render_plain(&change("env", "CUDA_ARCH", Some("8.0"), None)), "env: CUDA_ARCH removed");
        assert_eq!(
            render_plain(&change("native.arch", "arch", Some("x86_64"), Some("aarch64"))),
            "native.arch: x86_64 → aarch64"
        );
        assert_eq!(render_plain(&change("variant", "variant", Some("a"), Some("b"))), "variant: a → b");
        assert_eq!(render_plain(&change("files", "new.py", None, Some("aa -"))), "files: new.py added");
        assert_eq!(render_plain(&change("later.thing", "x", Some("1"), Some("2"))), "later.thing: x 1 → 2");
        assert_eq!(sniff(&[0x28, 0xb5, 0x2f, 0xfd, 0]), Compression::Zstd);
    }
}
