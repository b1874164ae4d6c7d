//! `explain-misses` and `exact-cache explain`: why is this a miss? List the entries with the
//! same prefix (REST, or the local store), take the newest (this ref's first), read its
//! fingerprint from the first bytes of its archive — one small ranged read, never the whole
//! entry — and name every component that differs from ours.

use super::report::Shown;
use crate::archive::{Compression, read_fingerprint};
use crate::backend::Backend;
use crate::fingerprint::{Change, FingerprintRecord, Value};
use crate::github::{Catalog, Listed};

/// Bytes read from the start of an archive to find its fingerprint: a small read first, a
/// larger one for fingerprints with thousands of hashed files.
const PREFIX_READS: [u64; 2] = [1 << 20, 16 << 20];
/// Candidates tried before giving up (some may be unreadable from this ref's scope).
const CANDIDATES: usize = 5;
/// Changes listed before "… and N more".
pub(super) const SHOWN: usize = 25;
/// Characters of each value in a change.
const VALUE_CHARS: usize = 80;

pub(super) use crate::outcome::Explanation;

/// Whether `key` is one of ours under `prefix`: `<prefix>-<64 lowercase hex>`.
pub(super) fn is_our_key(prefix: &str, key: &str) -> bool {
    key.strip_prefix(prefix).and_then(|rest| rest.strip_prefix('-')).is_some_and(|digest| {
        digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Compare `ours` with the newest other entry of its prefix. `Err` is a one-line reason.
pub(super) fn explain(
    shown: &Shown,
    backend: &dyn Backend,
    catalog: &dyn Catalog,
    ours: &FingerprintRecord,
    current_ref: Option<&str>,
    base_ref: Option<&str>,
) -> Result<Explanation, String> {
    let mut listed: Vec<Listed> = catalog
        .list(&format!("{}-", ours.prefix), None)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|l| is_our_key(&ours.prefix, &l.key) && l.key != ours.key)
        .collect();
    if listed.is_empty() {
        return Err(format!("no earlier entry with prefix `{}` to compare with", ours.prefix));
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
    let mut last_problem = String::new();
    for candidate in listed.into_iter().take(CANDIDATES) {
        match read_theirs(backend, &candidate) {
            Ok(theirs) => {
                let changes = theirs.components.diff(&ours.components).iter().map(|c| render(c, shown)).collect();
                return Ok(Explanation { against_key: candidate.key, against_ref: candidate.r#ref, changes });
            }
            Err(problem) => last_problem = problem,
        }
    }
    Err(last_problem)
}

fn read_theirs(backend: &dyn Backend, candidate: &Listed) -> Result<FingerprintRecord, String> {
    let entry = backend
        .lookup(&candidate.key, &candidate.version)
        .map_err(|e| format!("cannot look up `{}`: {e}", candidate.key))?
        .filter(|e| e.key == candidate.key)
        .ok_or_else(|| format!("`{}` is listed but not readable from this run", candidate.key))?;
    let mut problem = String::new();
    for len in PREFIX_READS {
        let bytes = backend.read_prefix(&entry, len).map_err(|e| format!("cannot read `{}`: {e}", candidate.key))?;
        match read_fingerprint(&bytes[..], sniff(&bytes)) {
            Ok(record) if record.key == candidate.key => return Ok(record),
            Ok(_) => return Err(format!("`{}` carries another key's fingerprint", candidate.key)),
            Err(e) => problem = format!("cannot read the fingerprint of `{}`: {e}", candidate.key),
        }
        if (bytes.len() as u64) < len {
            break; // the whole entry was read
        }
    }
    Err(problem)
}

/// The compression of an archive, from its first bytes.
fn sniff(bytes: &[u8]) -> Compression {
    match bytes {
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Compression::Zstd,
        [0x1f, 0x8b, ..] => Compression::Gzip,
        _ => Compression::None,
    }
}

/// One change as users read it: `python: torch 2.14.0 → 2.15.0`, `files: gen.py changed`,
/// `native.isa: x86-64-v4 → x86-64-v3`. Values read as [`Shown`] shows them.
pub(super) fn render(c: &Change, shown: &Shown) -> String {
    let (component, label) = (c.component.as_str(), c.label.as_str());
    let short = |v: &Value| shown.value(component, label, v, VALUE_CHARS);
    let single = matches!(
        (component, label),
        ("native.arch", "arch")
            | ("native.isa", _)
            | ("native.libc", "libc")
            | ("native.cpu-flags", "flags")
            | ("variant", "variant")
    );
    let name = match component {
        "python.dists" => "python",
        other => other,
    };
    match (&c.old, &c.new) {
        (Some(_), Some(_)) if component == "files" => format!("files: {label} changed"),
        // A `secret-env` value shows as `***` on both sides; a long one may differ past the cut.
        (Some(old), Some(new)) if short(old) == short(new) => format!("{name}: {label} changed"),
        (Some(old), Some(new)) if single => format!("{name}: {} → {}", short(old), short(new)),
        (Some(old), Some(new)) => format!("{name}: {label} {} → {}", short(old), short(new)),
        (None, Some(new)) if component == "files" || new == &Value::Absent => format!("{name}: {label} added"),
        (None, Some(new)) => format!("{name}: {label} added ({})", short(new)),
        (Some(_), None) => format!("{name}: {label} removed"),
        (None, None) => format!("{name}: {label}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(is_our_key("p", &format!("p-{}", "a".repeat(64))));
        assert!(!is_our_key("p", &format!("p-x-{}", "a".repeat(64))), "a longer prefix is not ours");
        assert_eq!(sniff(&[0x28, 0xb5, 0x2f, 0xfd, 0]), Compression::Zstd);
    }
}
