//! Content stored once, for the commands (docs/content.md): what a save may reuse (the content
//! maps of the newest entries of its prefix that its own lookups reach, [`reusable_maps`]) and the
//! save of an entry whose files go into packs ([`write_with_content`]). Their words are
//! `render::content`'s.

use super::Context;
use super::explain::sniff;
use super::render::content as words;
use crate::archive::{
    Compression, Content, Effort, Inventory, PackError, SecretScanner, Stamp, effort_of, read_content_map, read_packs,
    store_content, write_content_archive,
};
use crate::backend::{Backend, Catalog, Listed};
use crate::config::Locate;
use crate::content::PackName;
use crate::content::chunk::Chunking;
use crate::content::map::ContentMap;
use crate::content::pack::PackOptions;
use crate::content::prune::{GRACE_SECONDS, freed, prunable, sizes};
use crate::content::save::{ContentIndex, ContentSaver, SaveError, SaveStats};
use crate::content::store::{ListedPack, PackStore};
use crate::fingerprint::FingerprintRecord;
use crate::outcome::PackShare;
use crate::text::error_line;
use std::io::Write;

/// The switch that makes saves write whole archives again, as before content was shared:
/// `EXACT_CACHE_CONTENT=whole` (for a pool whose runners still hold binaries that cannot read
/// entries of packs, while they are updated; see docs/content.md).
pub(super) const SWITCH: &str = "EXACT_CACHE_CONTENT";

/// Whether saves store content in packs: unless [`SWITCH`] says `whole`.
pub(super) fn enabled(env: &crate::env::Env) -> bool {
    env.non_empty(SWITCH).is_none_or(|v| v.trim() != "whole")
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

/// Store the files of `inv` in `packs`, reusing what `maps` hold but the `bad` packs, then write
/// the archive that names them into `out`; what the save uploaded and found. Packs gone from the store while the
/// save ran, or an entry that would reference more than [`MAX_PACKS`], make it store its content
/// anew (referencing nothing), once.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_with_content<W: Write>(
    ctx: &Context,
    packs: &dyn PackStore,
    (maps, bad): (&[ContentMap], &[PackName]),
    (inv, record, compression, stamp): (&Inventory, &FingerprintRecord, Compression, Stamp),
    secrets: &SecretScanner,
    out: W,
    on_bytes: &mut dyn FnMut(u64),
) -> Result<(W, crate::archive::PackStats, SaveStats), PackError> {
    let runner = ctx.runner;
    // Blobs are zstd frames whatever `compression` says (a restore reads each one alone): at
    // the level a whole archive of these files would take (zstd's fastest for data that
    // barely compresses), and the fastest where `compression` is `none`.
    let (effort, sample_ratio) = match compression {
        Compression::Zstd => effort_of(inv),
        _ => (Effort::Normal, 0.0),
    };
    let level = if compression == Compression::None { Effort::Fast } else { effort }.zstd_level();
    let refs: Vec<&ContentMap> = maps.iter().collect();
    let index = match ContentIndex::build(&refs, bad, packs) {
        Ok(index) => index,
        Err(e) => {
            runner.info(&words::not_reusing_packs(&error_line(&e)));
            ContentIndex::default()
        }
    };
    if !index.left_out.is_empty() {
        runner.info(&words::packs_no_longer_stored(index.left_out.len()));
    }
    if !index.repacked.is_empty() {
        runner.info(&words::repacking_small_packs(index.repacked.len()));
    }
    let mut content = match store_once(packs, &index, (inv, level), secrets, on_bytes) {
        Err(PackError::Content(SaveError::Gone(gone))) => {
            runner.info(&words::packs_gone_while_saving(gone.len()));
            store_once(packs, &ContentIndex::default(), (inv, level), secrets, on_bytes)?
        }
        other => other?,
    };
    if content.map.packs.len() > MAX_PACKS {
        runner.info(&words::too_many_packs(content.map.packs.len()));
        content = store_once(packs, &ContentIndex::default(), (inv, level), secrets, on_bytes)?;
    }
    let stats = content.stats.clone();
    let (out, mut pack_stats) = write_content_archive(inv, record, compression, stamp, &content, out)?;
    (pack_stats.effort, pack_stats.sample_ratio) = (effort, sample_ratio);
    Ok((out, pack_stats, stats))
}

/// Store `inv`'s content in packs, its blobs compressed at zstd level `level`.
fn store_once(
    packs: &dyn PackStore,
    index: &ContentIndex,
    (inv, level): (&Inventory, i32),
    secrets: &SecretScanner,
    on_bytes: &mut dyn FnMut(u64),
) -> Result<Content, PackError> {
    let scratch = tempfile::tempdir().map_err(PackError::Write)?;
    let mut options = PackOptions::new(scratch.path());
    options.target = PackOptions::target_for(inv.content_bytes());
    options.level = level;
    std::thread::scope(|scope| {
        let saver = ContentSaver::new(scope, index, packs, Chunking::DEFAULT, options).map_err(PackError::Write)?;
        store_content(inv, secrets, saver, on_bytes)
    })
}

/// Seconds an unreferenced pack is kept after it was stored: `EXACT_CACHE_PACK_GRACE_SECONDS`,
/// else [`GRACE_SECONDS`] (longer than any save takes between its first pack and its commit).
const GRACE: &str = "EXACT_CACHE_PACK_GRACE_SECONDS";

/// What a prune did with the packs of its prefix.
#[derive(Debug)]
pub(crate) enum PacksPruned {
    /// The store keeps none of the prefix.
    None,
    /// None deleted, because an entry's references could not be read or the packs not listed.
    Kept { why: String },
    Done {
        deleted: Vec<ListedPack>,
        /// Their bytes.
        freed: u64,
        /// Unreferenced, but stored within the grace period.
        young: usize,
        /// Packs the store would not delete, with why.
        failed: Vec<(PackName, String)>,
        grace: i64,
    },
}

/// Delete the packs of `prefix` that no entry of it references, on any ref, once they are older
/// than the grace period (`content::prune`'s rule); `gone`: entries a dry run would have
/// deleted, whose references no longer count. Every entry's references are read from its
/// archive's first bytes as this run's lookup reaches it: one this run cannot read (another
/// ref's scope on the cache service, a damaged head) keeps every pack.
pub(super) fn prune_packs(
    ctx: &Context,
    (locate, backend, catalog): (&Locate, &dyn Backend, &dyn Catalog),
    prefix: &str,
    (gone, dry_run): (&[Listed], bool),
) -> PacksPruned {
    let kept = |why: String| PacksPruned::Kept { why };
    let packs = match pack_store(ctx, locate, prefix) {
        Ok(packs) => packs,
        Err(why) => return kept(words::packs_not_listed(&why)),
    };
    // Listed before the references are read: a pack stored after this is not considered.
    let listed = match packs.list() {
        Ok(listed) if listed.is_empty() => return PacksPruned::None,
        Ok(listed) => listed,
        Err(e) => return kept(words::packs_not_listed(&error_line(&e))),
    };
    let entries = match catalog.list(&format!("{prefix}-"), None) {
        Ok(entries) => entries,
        Err(e) => return kept(words::packs_not_listed(&error_line(&e))),
    };
    let mut references = Vec::new();
    for entry in entries.iter().filter(|l| l.key.is_of(prefix) && !gone.iter().any(|g| g.id == l.id)) {
        match packs_of(backend, entry) {
            Ok(names) => references.push(Some(names)),
            Err(why) => return kept(words::references_unread(&entry.key.to_string(), &why)),
        }
    }
    let grace = ctx.runner.env().non_empty(GRACE).and_then(|g| g.trim().parse().ok()).unwrap_or(GRACE_SECONDS);
    let now = chrono::Utc::now().timestamp();
    let names = prunable(&references, &listed, now, grace);
    let unreferenced = prunable(&references, &listed, i64::MAX, 0).len();
    let mut failed = Vec::new();
    if !dry_run {
        for name in &names {
            if let Err(e) = packs.delete(name) {
                failed.push((*name, error_line(&e)));
            }
        }
    }
    let deleted: Vec<ListedPack> =
        listed.into_iter().filter(|p| names.contains(&p.name) && !failed.iter().any(|(f, _)| *f == p.name)).collect();
    let freed = freed(&names, &deleted);
    PacksPruned::Done { young: unreferenced - names.len(), deleted, freed, failed, grace }
}

/// The packs `listed`'s archive references, read from its first bytes (none: its files are
/// members); an error where this run cannot read them.
fn packs_of(backend: &dyn Backend, listed: &Listed) -> Result<Vec<PackName>, String> {
    let entry = backend.lookup(&listed.key, &listed.version).map_err(|e| error_line(&e))?;
    let entry = entry.filter(|e| e.key == listed.key).ok_or_else(words::not_reached)?;
    let head = backend.read_prefix(&entry, HEAD_BYTES).map_err(|e| error_line(&e))?;
    Ok(read_packs(&head[..], sniff(&head)).map_err(|e| error_line(&e))?.unwrap_or_default())
}

/// The most entries whose references `list` reads for their packs' sizes (a lookup and a ranged
/// read each); a prefix with more shows none.
const SHARE_READS: usize = 200;

/// For each of `entries` (of `prefix`), the bytes of the packs it references that are its own and
/// shared with another of them; `None` for an entry whose files are members or whose references
/// could not be read, and for all where the store keeps no packs of the prefix.
pub(super) fn pack_shares(
    ctx: &Context,
    (locate, backend): (&Locate, &dyn Backend),
    prefix: &str,
    entries: &[Listed],
) -> Vec<Option<PackShare>> {
    let none = vec![None; entries.len()];
    let Ok(packs) = pack_store(ctx, locate, prefix) else { return none };
    let listed = match packs.list() {
        Ok(listed) if !listed.is_empty() && entries.len() <= SHARE_READS => listed,
        _ => return none,
    };
    let references: Vec<Option<Vec<PackName>>> =
        entries.iter().map(|e| packs_of(backend, e).ok().filter(|names| !names.is_empty())).collect();
    let shares = sizes(&references, &listed);
    references
        .iter()
        .zip(shares)
        .map(|(refs, (own_bytes, shared_bytes))| refs.as_ref().map(|_| PackShare { own_bytes, shared_bytes }))
        .collect()
}

/// The packs of `prefix` in the chosen store, with what lists and deletes them (the REST API's
/// token, on the cache service).
fn pack_store(ctx: &Context, locate: &Locate, prefix: &str) -> Result<Box<dyn PackStore>, String> {
    let runner = ctx.runner;
    let token = locate.github_token.as_deref();
    locate.store.packs(runner.env(), runner.secret_sink(), token, prefix).map_err(|e| error_line(&e))
}
