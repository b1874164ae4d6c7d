//! Content stored once, for the commands (docs/content.md): what a save may reuse (the content
//! maps of the newest entries of its prefix that its own lookups reach, [`reusable_maps`]) and the
//! save of an entry whose files go into packs ([`write_with_content`]). Their words are
//! `render::content`'s.

use super::Context;
use super::explain::sniff;
use super::render::content as words;
use crate::archive::{
    Compression, Content, Inventory, PackError, SecretScanner, Stamp, read_content_map, read_packs, store_content,
    write_content_archive,
};
use crate::backend::{Backend, Listed};
use crate::config::Locate;
use crate::content::chunk::Chunking;
use crate::content::map::ContentMap;
use crate::content::pack::PackOptions;
use crate::content::save::{ContentIndex, ContentSaver, SaveError, SaveStats};
use crate::content::store::PackStore;
use crate::fingerprint::FingerprintRecord;
use crate::text::error_line;
use std::io::Write;

/// The switch that makes saves store their files' content in packs: `EXACT_CACHE_CONTENT=packs`.
/// Off by default until the transport tests written for whole entries (chunked uploads, ranged
/// downloads, racing saves, request counts) are rewritten for entries that share content.
pub(super) const SWITCH: &str = "EXACT_CACHE_CONTENT";

/// Whether saves store content in packs ([`SWITCH`]).
pub(super) fn enabled(env: &crate::env::Env) -> bool {
    env.non_empty(SWITCH).is_some_and(|v| v.trim() == "packs")
}

/// How much of an entry's start is read to learn whether its files are in packs (its packs
/// record lies before its fingerprint member).
const HEAD_BYTES: u64 = 64 << 10;

/// The largest archive of an entry whose files are in packs that a save reads for its content
/// map (its map and manifest, compressed: a tree of millions of files).
const MAX_ARCHIVE_BYTES: u64 = 256 << 20;

/// The most packs one entry references: its packs record stays within the bounds every reader
/// keeps (a pax record of at most 64 KiB). A save that would reference more stores its content
/// anew, in few packs.
const MAX_PACKS: usize = 512;

/// The content maps of the entries of `record`'s prefix a save may reference: the newest that
/// its own lookups reach on its own ref, on a pull request's base branch and elsewhere (the
/// default branch), whose files are in packs. Trouble only means less to reuse: it is logged.
pub(super) fn reusable_maps(
    ctx: &Context,
    locate: &Locate,
    backend: &dyn Backend,
    record: &FingerprintRecord,
) -> Vec<ContentMap> {
    let runner = ctx.runner;
    let env = runner.env();
    let catalog = match (ctx.catalog)(locate, env) {
        Ok(catalog) => catalog,
        Err(e) => {
            runner.info(&words::no_earlier_entry(&error_line(&e)));
            return Vec::new();
        }
    };
    let prefix = &record.prefix;
    let listed = match catalog.list(&format!("{prefix}-"), None) {
        Ok(listed) => listed,
        Err(e) => {
            runner.info(&words::no_earlier_entry(&error_line(&e)));
            return Vec::new();
        }
    };
    let mut listed: Vec<Listed> = listed.into_iter().filter(|l| l.key.is_of(prefix)).collect();
    let current = env.non_empty("GITHUB_REF");
    let base = env.non_empty("GITHUB_BASE_REF").map(|b| format!("refs/heads/{b}"));
    let rank = |l: &Listed| match l.r#ref.as_deref() {
        r if r.is_some() && r == current => 0,
        r if r.is_some() && r == base.as_deref() => 1,
        _ => 2,
    };
    listed.sort_by(|a, b| rank(a).cmp(&rank(b)).then(b.created.cmp(&a.created)));
    let mut maps = Vec::new();
    let mut ranks_done = [false; 3];
    for candidate in &listed {
        let r = rank(candidate);
        if ranks_done[r] {
            continue;
        }
        match map_of(backend, candidate) {
            Ok(Some(map)) => {
                ranks_done[r] = true;
                maps.push(map);
            }
            // An entry whose files are members, or one this run cannot read: the next one.
            Ok(None) => {}
            Err(why) => runner.info(&words::not_reusing_entry(&candidate.key.to_string(), &why)),
        }
        if ranks_done.iter().all(|d| *d) {
            break;
        }
    }
    maps
}

/// The content map of `listed` as this run's lookup reaches it (so scope follows the store's);
/// `None` when the lookup does not find it or its files are members.
fn map_of(backend: &dyn Backend, listed: &Listed) -> Result<Option<ContentMap>, String> {
    let Some(entry) = backend.lookup(&listed.key, &listed.version).map_err(|e| error_line(&e))? else {
        return Ok(None);
    };
    if entry.key != listed.key {
        return Ok(None);
    }
    let head = backend.read_prefix(&entry, HEAD_BYTES).map_err(|e| error_line(&e))?;
    let compression = sniff(&head);
    if read_packs(&head[..], compression).map_err(|e| error_line(&e))?.is_none() {
        return Ok(None);
    }
    // Read as `explain` reads an entry, never opened as a restore opens it: the stores that
    // record uses (the local directory) must not count this as one, or no entry whose packs a
    // later save reuses would ever age out.
    let archive = backend.read_prefix(&entry, MAX_ARCHIVE_BYTES).map_err(|e| error_line(&e))?;
    read_content_map(&archive[..], compression).map_err(|e| error_line(&e))
}

/// Store the files of `inv` in `packs`, reusing what `maps` hold, then write the archive that
/// names them into `out`; what the save uploaded and found. Packs gone from the store while the
/// save ran, or an entry that would reference more than [`MAX_PACKS`], make it store its content
/// anew (referencing nothing), once.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_with_content<W: Write>(
    ctx: &Context,
    packs: &dyn PackStore,
    maps: &[ContentMap],
    (inv, record, compression, stamp): (&Inventory, &FingerprintRecord, Compression, Stamp),
    secrets: &SecretScanner,
    out: W,
    on_bytes: &mut dyn FnMut(u64),
) -> Result<(W, crate::archive::PackStats, SaveStats), PackError> {
    let runner = ctx.runner;
    let refs: Vec<&ContentMap> = maps.iter().collect();
    let index = match ContentIndex::build(&refs, &[], packs) {
        Ok(index) => index,
        Err(e) => {
            runner.info(&words::not_reusing_packs(&error_line(&e)));
            ContentIndex::default()
        }
    };
    if !index.left_out.is_empty() {
        runner.info(&words::packs_no_longer_stored(index.left_out.len()));
    }
    let mut content = match store_once(packs, &index, inv, secrets, on_bytes) {
        Err(PackError::Content(SaveError::Gone(gone))) => {
            runner.info(&words::packs_gone_while_saving(gone.len()));
            store_once(packs, &ContentIndex::default(), inv, secrets, on_bytes)?
        }
        other => other?,
    };
    if content.map.packs.len() > MAX_PACKS {
        runner.info(&words::too_many_packs(content.map.packs.len()));
        content = store_once(packs, &ContentIndex::default(), inv, secrets, on_bytes)?;
    }
    let stats = content.stats.clone();
    let (out, pack_stats) = write_content_archive(inv, record, compression, stamp, &content, out)?;
    Ok((out, pack_stats, stats))
}

fn store_once(
    packs: &dyn PackStore,
    index: &ContentIndex,
    inv: &Inventory,
    secrets: &SecretScanner,
    on_bytes: &mut dyn FnMut(u64),
) -> Result<Content, PackError> {
    let scratch = tempfile::tempdir().map_err(PackError::Write)?;
    std::thread::scope(|scope| {
        let saver = ContentSaver::new(scope, index, packs, Chunking::DEFAULT, PackOptions::new(scratch.path()))
            .map_err(PackError::Write)?;
        store_content(inv, secrets, saver, on_bytes)
    })
}
