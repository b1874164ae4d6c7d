//! `explain-misses` and `exact-cache explain`: why is this a miss? List the entries with the
//! same prefix (the store's catalog), take the newest (this ref's first), read its fingerprint
//! from the first bytes of its archive — one small ranged read, never the whole entry — and
//! name every component that differs from ours.

use super::Context;
use super::prune::ListedSlots;
use super::render::{Shown, explain as words, say_all};
use crate::archive::{Compression, UnpackError, read_fingerprint};
use crate::backend::{Backend, BackendError};
use crate::backend::{Catalog, CatalogError, Listed};
use crate::fingerprint::FingerprintRecord;
use crate::keys::{self, Key};
use crate::stack::Slot;

/// Bytes read from the start of an archive to find its fingerprint: a small read first, a
/// larger one for fingerprints with thousands of hashed files.
const PREFIX_READS: [u64; 2] = [1 << 20, 16 << 20];
/// Candidates tried before giving up (some may be unreadable from this ref's scope).
const CANDIDATES: usize = 5;

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
/// ours, as the version names them) and log why, or why there is no explanation (returned).
/// `asked`: the answer of the `explain` command, not `explain-misses`.
pub(super) fn explain_and_log(
    ctx: &Context,
    (shown, path_lines, asked): (&Shown, &[String], bool),
    backend: &dyn Backend,
    catalog: &dyn Catalog,
    ours: &FingerprintRecord,
) -> Result<Explanation, String> {
    let runner = ctx.runner;
    let env = runner.env();
    let refs = (env.non_empty("GITHUB_REF"), env.non_empty("GITHUB_BASE_REF"));
    match explain(shown, backend, catalog, ours, path_lines, refs) {
        Ok(explanation) => {
            say_all(runner, words::explained(&explanation, asked));
            Ok(explanation)
        }
        Err(reason) => {
            let why = words::why_not(&reason);
            words::unexplained(&why, asked).say(runner);
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
            changes: vec![words::same_key(&same_key)],
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
                let changes = words::changes(&theirs.components, &ours.components, shown);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_says_its_compression_in_its_first_bytes() {
        assert_eq!(sniff(&[0x28, 0xb5, 0x2f, 0xfd, 0]), Compression::Zstd);
        assert_eq!(sniff(&[0x1f, 0x8b, 8]), Compression::Gzip);
        assert_eq!(sniff(b"ustar"), Compression::None);
    }
}
