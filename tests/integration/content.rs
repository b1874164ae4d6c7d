//! Entries that share content (guarantee 14, docs/content.md), on every store of the matrix:
//! each store's packs (stored whole once, found, read by ranges, listed, evicted), and the
//! service's scoping of packs (one saved on a pull request's ref is not found from the default
//! branch).

use exact_cache::backend::http::Http;
use exact_cache::backend::{Backend, V1Backend, V2Backend};
use exact_cache::content::names::PACK_MARK;
use exact_cache::content::store::{PackStoreError, Ranged};
use exact_cache::content::{Hash, store::PackStore};
use exact_cache::runner::SecretSink;
use std::io::Read;
use std::sync::Arc;

use crate::support::services::{DEFAULT_REF, Services, TOKEN};
use crate::support::{Store, noise, on_every_store};

/// The bytes `range` of pack `name`, however the store gives them (a range, or the whole pack).
fn read_range(packs: &dyn PackStore, name: &Hash, range: std::ops::Range<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    match packs.read(name, range.clone()).unwrap() {
        Ranged::Range(mut r) => {
            r.read_to_end(&mut out).unwrap();
        }
        Ranged::Whole(mut r) => {
            r.read_to_end(&mut out).unwrap();
            out = out[range.start as usize..range.end as usize].to_vec();
        }
    }
    out
}

on_every_store!(a_store_keeps_finds_reads_and_evicts_packs);

/// A pack goes in whole under its name, a second put of it keeps it, it is found by name and
/// read by range; it is no entry; corrupt, it reads otherwise; once evicted it is missing, for
/// `exist` and for a read.
fn a_store_keeps_finds_reads_and_evicts_packs(store: Store) {
    let peer = store.start();
    let backend = peer.backend();
    let packs = backend.packs("p").expect("every store keeps packs");
    let bytes = noise(300_000, 7);
    let name = Hash::of(&bytes);
    let other = Hash::of(b"never stored");
    assert_eq!(packs.exist(&[name, other]).unwrap(), [false, false], "{}", packs.describe());
    packs.put(&name, bytes.len() as u64, &mut &bytes[..]).unwrap();
    packs.put(&name, bytes.len() as u64, &mut &bytes[..]).unwrap();
    assert_eq!(packs.exist(&[other, name]).unwrap(), [false, true]);
    assert!(packs.ranges(), "{} reads ranges", packs.describe());
    assert_eq!(read_range(packs.as_ref(), &name, 1000..2000), bytes[1000..2000]);
    assert_eq!(read_range(packs.as_ref(), &name, 299_990..300_000), bytes[299_990..]);
    // A range past its end brings what there is: a short read, which the fetch calls corrupt.
    assert_eq!(read_range(packs.as_ref(), &name, 299_990..300_100).len(), 10);
    assert!(matches!(packs.read(&other, 0..10), Err(PackStoreError::Missing(_))));
    let key = format!("p{PACK_MARK}{name}");
    assert_eq!(peer.packs("p"), [(key.clone(), bytes.len() as u64)]);
    assert!(peer.packs("q").is_empty(), "another prefix's packs are its own");
    assert_eq!(peer.entries(), 0, "a pack is no entry");
    // A short stream stores nothing.
    let short = Hash::of(b"short");
    assert!(packs.put(&short, 100, &mut &b"short"[..]).is_err());
    assert_eq!(packs.exist(&[short]).unwrap(), [false]);
    // Corrupt in the store: the bytes read are not the bytes put (the fetch's hash finds it).
    peer.corrupt_pack(&key);
    assert_ne!(read_range(packs.as_ref(), &name, 0..300_000), bytes, "corrupt in the store");
    peer.evict_pack(&key);
    let fresh = peer.backend().packs("p").unwrap();
    assert_eq!(fresh.exist(&[name]).unwrap(), [false]);
    assert!(matches!(fresh.read(&name, 0..10), Err(PackStoreError::Missing(_))));
    assert!(peer.packs("p").is_empty());
}

/// The cache service scopes packs as it scopes entries: saved on a pull request's ref, a pack
/// is found from that ref and not from the default branch; one saved on the default branch is
/// found from both.
#[test]
fn a_pull_requests_pack_is_invisible_to_the_default_branch() {
    let services = Services::start();
    let env = |pairs| exact_cache::env::Env::from_pairs(pairs);
    let http = |env: &exact_cache::env::Env| Arc::new(Http::new(env, SecretSink::detached()).unwrap());
    let (v1, v2) = (env(services.v1_env()), env(services.v2_env()));
    let token = || TOKEN.to_owned();
    let backends: [Box<dyn Backend>; 2] = [
        Box::new(V1Backend::new(http(&v1), v1.non_empty("ACTIONS_CACHE_URL").unwrap(), Some(token())).unwrap()),
        Box::new(V2Backend::new(http(&v2), v2.non_empty("ACTIONS_RESULTS_URL").unwrap(), token()).unwrap()),
    ];
    for (i, backend) in backends.iter().enumerate() {
        let pack = |what: &str| format!("{what} pack of protocol {i}").into_bytes();
        let (pr_bytes, main_bytes) = (pack("pr"), pack("main"));
        let (on_pr, on_main) = (Hash::of(&pr_bytes), Hash::of(&main_bytes));
        services.set_ref("refs/pull/7/merge");
        let packs = backend.packs("p").unwrap();
        packs.put(&on_pr, pr_bytes.len() as u64, &mut &pr_bytes[..]).unwrap();
        services.set_ref(DEFAULT_REF);
        packs.put(&on_main, main_bytes.len() as u64, &mut &main_bytes[..]).unwrap();
        let from_main = backend.packs("p").unwrap();
        assert_eq!(from_main.exist(&[on_pr, on_main]).unwrap(), [false, true], "{}", from_main.describe());
        assert!(matches!(from_main.read(&on_pr, 0..4), Err(PackStoreError::Missing(_))));
        services.set_ref("refs/pull/7/merge");
        let from_pr = backend.packs("p").unwrap();
        assert_eq!(from_pr.exist(&[on_pr, on_main]).unwrap(), [true, true]);
        assert_eq!(read_range(from_pr.as_ref(), &on_pr, 0..2), &pr_bytes[..2]);
        services.set_ref(DEFAULT_REF);
    }
}

// The archive of an entry whose content is in packs: written after its packs, read from either
// kind, files in place kept, every blob verified, nothing placed unless everything arrived.

mod archive_level {
    use crate::support::{noise, snapshot, write};
    use exact_cache::archive::{
        Compression, RestorePlan, RestoreStats, SecretScanner, Stamp, UnpackError, inventory, store_content, unpack,
        write_archive, write_content_archive,
    };
    use exact_cache::content::chunk::Chunking;
    use exact_cache::content::map::{CONTENT_NAME, ContentMap, PACKS_PAX};
    use exact_cache::content::pack::PackOptions;
    use exact_cache::content::save::{ContentIndex, ContentSaver, SaveStats};
    use exact_cache::content::store::{LocalPackStore, PackStore};
    use exact_cache::fingerprint::{Fingerprint, FingerprintRecord};
    use exact_cache::outcome::MissReason;
    use exact_cache::paths::{Locations, PatternSet};
    use std::io::Read;
    use std::path::Path;

    const LINES: [&str; 2] = ["out", "single.bin"];

    fn record() -> FingerprintRecord {
        FingerprintRecord::new("ct", &"v".into(), Fingerprint::default())
    }

    fn pattern_set(ws: &Path) -> PatternSet {
        PatternSet::parse(&LINES, &Locations { workspace: ws.to_owned(), home: None }).unwrap()
    }

    /// The regular files of [`tree`] (`files` of a restore counts its link too).
    const FILES: usize = 45;

    /// Files of many sizes (one large enough to be cut into chunks), an empty one, modes, links.
    fn tree(ws: &Path) {
        use std::os::unix::fs::PermissionsExt;
        for i in 0..40u64 {
            write(&ws.join(format!("out/d{}/f{i}.bin", i % 4)), &noise(1_000 + i as usize * 997, i + 1));
        }
        write(&ws.join("out/big/weights.bin"), &noise(9 << 20, 99));
        write(&ws.join("out/empty"), b"");
        write(&ws.join("out/copy.bin"), &noise(1_000, 1));
        write(&ws.join("out/bin/tool"), b"#!/bin/sh\necho hi\n");
        std::fs::set_permissions(ws.join("out/bin/tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("big/weights.bin", ws.join("out/latest")).unwrap();
        std::fs::create_dir_all(ws.join("out/empty-dir")).unwrap();
        write(&ws.join("single.bin"), &noise(5_000, 7));
    }

    /// Save the tree at `ws` into `packs`, reusing what `maps` hold: the archive, its content map
    /// and what the save uploaded.
    /// A source holding [`tree`], an empty destination and an empty store directory.
    fn dirs() -> (tempfile::TempDir, tempfile::TempDir, tempfile::TempDir) {
        let (src, dst, store) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        tree(src.path());
        (src, dst, store)
    }

    fn save(ws: &Path, packs: &dyn PackStore, maps: &[&ContentMap]) -> (Vec<u8>, ContentMap, SaveStats) {
        let inv = inventory(&pattern_set(ws)).unwrap();
        let index = ContentIndex::build(maps, &[], packs).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let content = std::thread::scope(|scope| {
            let saver =
                ContentSaver::new(scope, &index, packs, Chunking::DEFAULT, PackOptions::new(tmp.path())).unwrap();
            store_content(&inv, &SecretScanner::none(), saver, &mut |_| {}).unwrap()
        });
        let (bytes, _) =
            write_content_archive(&inv, &record(), Compression::Zstd, Stamp::default(), &content, Vec::new()).unwrap();
        (bytes, content.map.clone(), content.stats.clone())
    }

    fn restore(bytes: &[u8], ws: &Path, packs: Option<&dyn PackStore>) -> Result<RestoreStats, UnpackError> {
        let set = pattern_set(ws);
        let rec = record();
        let plan = RestorePlan { key: &rec.key, paths: &set, required: &[], compression: Compression::Zstd, packs };
        unpack(bytes, &plan)?.commit()
    }

    /// The members of an archive: (name, is a plain file), and its first pax record's keys.
    fn members(bytes: &[u8]) -> (Vec<(String, bool)>, Vec<String>) {
        let mut archive = tar::Archive::new(zstd::Decoder::new(bytes).unwrap());
        let mut out = Vec::new();
        let mut pax_keys = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            if out.is_empty()
                && let Some(pax) = entry.pax_extensions().unwrap()
            {
                pax_keys = pax.map(|e| e.unwrap().key().unwrap().to_owned()).collect();
            }
            let name = entry.path().unwrap().to_string_lossy().into_owned();
            out.push((name, entry.header().entry_type().is_file()));
            std::io::copy(&mut entry.by_ref(), &mut std::io::sink()).unwrap();
        }
        (out, pax_keys)
    }

    fn the_pack_file(store: &Path) -> std::path::PathBuf {
        let mut packs: Vec<_> = std::fs::read_dir(store).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(packs.len(), 1, "{packs:?}");
        packs.pop().unwrap()
    }

    /// A save stores the files in packs and the archive holds no file member, only the content
    /// map and the manifest; a restore into an empty tree is byte-identical, and a second
    /// restore onto that tree fetches nothing and writes nothing.
    #[test]
    fn an_entry_with_content_in_packs_restores_whole_and_a_full_tree_fetches_nothing() {
        let (src, dst, store) = dirs();
        let packs = LocalPackStore::new(store.path(), "ct");
        let (bytes, map, stats) = save(src.path(), &packs, &[]);
        assert!(stats.uploaded > 9 << 20, "incompressible: {stats:?}");
        assert_eq!(stats.found_blobs, 1, "the copy is found in this save: {stats:?}");
        let (members, pax) = members(&bytes);
        let files: Vec<&str> = members.iter().filter(|(_, f)| *f).map(|(n, _)| n.as_str()).collect();
        assert_eq!(files, [".exact-cache/fingerprint.json", CONTENT_NAME, ".exact-cache/manifest.json"]);
        assert!(pax.iter().any(|k| k == PACKS_PAX), "{pax:?}");
        assert!(members.iter().any(|(n, _)| n == "0/latest"), "links stay members");
        assert_eq!(map.packs.len(), 1);

        let restored = restore(&bytes, dst.path(), Some(&packs)).unwrap();
        assert_eq!(snapshot(&dst.path().join("out")), snapshot(&src.path().join("out")));
        assert_eq!(
            std::fs::read(dst.path().join("single.bin")).unwrap(),
            std::fs::read(src.path().join("single.bin")).unwrap()
        );
        assert!(restored.content && restored.fetched > 9 << 20 && restored.in_place == 0, "{restored:?}");

        let again = restore(&bytes, dst.path(), Some(&packs)).unwrap();
        assert_eq!(again.fetched, 0, "{again:?}");
        assert_eq!(again.in_place, FILES, "{again:?}");
        assert_eq!(snapshot(&dst.path().join("out")), snapshot(&src.path().join("out")));
    }

    /// A file in place whose bytes were changed behind the restore's back (size and times put
    /// back), or whose mode differs, is rewritten, never kept.
    #[test]
    fn a_tampered_file_in_place_is_rewritten() {
        use std::os::unix::fs::PermissionsExt;
        let (src, dst, store) = dirs();
        let packs = LocalPackStore::new(store.path(), "ct");
        let (bytes, _, _) = save(src.path(), &packs, &[]);
        restore(&bytes, dst.path(), Some(&packs)).unwrap();
        let victim = dst.path().join("out/d1/f5.bin");
        let before = std::fs::metadata(&victim).unwrap();
        let mut tampered = std::fs::read(&victim).unwrap();
        tampered[100] ^= 1;
        std::fs::write(&victim, &tampered).unwrap();
        let file = std::fs::File::options().write(true).open(&victim).unwrap();
        file.set_modified(before.modified().unwrap()).unwrap();
        drop(file);
        std::fs::set_permissions(dst.path().join("out/bin/tool"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let again = restore(&bytes, dst.path(), Some(&packs)).unwrap();
        assert_eq!(again.in_place, FILES - 2, "{again:?}");
        assert!(again.fetched > 0);
        assert_eq!(snapshot(&dst.path().join("out")), snapshot(&src.path().join("out")));
    }

    /// A pack evicted from the store, or corrupt in it: the restore is a miss `content-missing`
    /// that names the pack, and places nothing (the files in place stay as they were).
    #[test]
    fn a_missing_or_corrupt_pack_is_content_missing_and_places_nothing() {
        let (src, store) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        tree(src.path());
        let packs = LocalPackStore::new(store.path(), "ct");
        let (bytes, map, _) = save(src.path(), &packs, &[]);
        let pack = the_pack_file(store.path());
        let good = std::fs::read(&pack).unwrap();

        let mut corrupt = good.clone();
        let at = corrupt.len() / 2;
        corrupt[at] ^= 0x40;
        std::fs::write(&pack, &corrupt).unwrap();
        let dst = tempfile::tempdir().unwrap();
        write(&dst.path().join("out/d0/f0.bin"), b"what was here");
        let err = restore(&bytes, dst.path(), Some(&packs)).unwrap_err();
        assert_eq!(err.miss_reason(), MissReason::ContentMissing, "{err:?}");
        assert_eq!(err.bad_pack(), Some(map.packs[0]));
        assert_eq!(std::fs::read(dst.path().join("out/d0/f0.bin")).unwrap(), b"what was here");
        assert!(!dst.path().join("out/big").exists() && !dst.path().join("single.bin").exists());

        std::fs::remove_file(&pack).unwrap();
        let err = restore(&bytes, dst.path(), Some(&packs)).unwrap_err();
        assert_eq!(err.miss_reason(), MissReason::ContentMissing, "{err:?}");
        assert_eq!(err.bad_pack(), Some(map.packs[0]));
        assert!(!dst.path().join("out/big").exists());

        // Where no pack store is at hand, the entry is refused as corrupt, never half restored.
        std::fs::write(&pack, &good).unwrap();
        let err = restore(&bytes, dst.path(), None).unwrap_err();
        assert_eq!(err.miss_reason(), MissReason::Corrupt, "{err:?}");
        restore(&bytes, dst.path(), Some(&packs)).unwrap();
        assert_eq!(snapshot(&dst.path().join("out")), snapshot(&src.path().join("out")));
    }

    /// An archive of today's kind (files as members) restores as it always did, packs or not.
    #[test]
    fn an_old_entry_restores_beside_packs() {
        let (src, dst, store) = dirs();
        let inv = inventory(&pattern_set(src.path())).unwrap();
        let (bytes, _) =
            write_archive(&inv, &record(), Compression::Zstd, None, &SecretScanner::none(), Vec::new(), &mut |_| {})
                .unwrap();
        let packs = LocalPackStore::new(store.path(), "ct");
        let stats = restore(&bytes, dst.path(), Some(&packs)).unwrap();
        assert!(!stats.content && stats.fetched == 0, "{stats:?}");
        assert_eq!(snapshot(&dst.path().join("out")), snapshot(&src.path().join("out")));
    }

    /// A second key whose tree differs by 1% of its files uploads about 1% of the bytes: every
    /// other blob is referenced in the first entry's pack.
    #[test]
    fn a_one_percent_change_uploads_about_one_percent() {
        let (src, store) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let ws = src.path();
        for i in 0..200u64 {
            write(&ws.join(format!("out/d{}/f{i}", i % 9)), &noise(20_000 + (i as usize * 131) % 30_000, i + 3));
        }
        let packs = LocalPackStore::new(store.path(), "ct");
        let (_, first, one) = save(ws, &packs, &[]);
        for i in [17u64, 120] {
            write(&ws.join(format!("out/d{}/f{i}", i % 9)), &noise(25_000, 1_000 + i));
        }
        let (bytes, second, two) = save(ws, &packs, &[&first]);
        assert!(two.uploaded * 100 <= one.bytes * 3, "{two:?} of {one:?}");
        assert!(two.found_bytes * 100 >= two.bytes * 97, "{two:?}");
        assert_eq!(second.packs.len(), 2, "the first entry's pack and one new");
        let dst = tempfile::tempdir().unwrap();
        restore(&bytes, dst.path(), Some(&packs)).unwrap();
        assert_eq!(snapshot(&dst.path().join("out")), snapshot(&ws.join("out")));
    }
}

// The commands, on every store: a save stores its files in packs and reuses what the entries it
// reaches hold; a restore fetches only what is not in place; a pack evicted or corrupt makes
// the entry a miss `content-missing` that the next save heals.

mod commands {
    use crate::support::{NO_STATE, Peer, Step, StepResult, Store, noise, on_every_store, snapshot, write};
    use std::collections::BTreeMap;

    /// Blobs of files that barely compress are made at zstd's fast level, as a whole archive of
    /// them would be (at level 3, bench/run's 2 GB of weights saved in 0.98× the peer's time
    /// with packs against 0.71× whole).
    /// A small tree of noise too (its sample once took the same bytes 32 times over, which
    /// zstd found, so a tree under 4 MiB never got the fast level).
    #[test]
    fn blobs_of_data_that_barely_compresses_take_zstds_fast_level() {
        for size in [16 << 20, 2 << 20] {
            let step = Step::new();
            write(&step.ws.join("out/weights.bin"), &noise(size, 11));
            let inputs = [("path", "out"), ("native", "none")];
            let saved = step.run(&["save"], &inputs, NO_STATE);
            assert!(saved.saved(), "{}", saved.stdout);
            let log = saved.group("Save ");
            assert!(log.contains("compression: zstd's fast level"), "{size} bytes: {log}");
            let tree = snapshot(&step.ws.join("out"));
            std::fs::remove_dir_all(step.ws.join("out")).unwrap();
            assert!(step.run(&["restore"], &inputs, NO_STATE).reused());
            assert_eq!(snapshot(&step.ws.join("out")), tree);
        }
    }

    const PREFIX: &str = "shared";

    fn inputs<'a>(
        peer: &'a dyn Peer,
        variant: &'a str,
        catalog: &'a [(&'static str, String)],
    ) -> Vec<(&'a str, &'a str)> {
        let _ = peer;
        let mut inputs = vec![("path", "out"), ("native", "none"), ("prefix", PREFIX), ("variant", variant)];
        inputs.extend(catalog.iter().map(|(n, v)| (*n, v.as_str())));
        inputs
    }

    /// 200 files of 20–50 KB of noise (incompressible: bytes stored are bytes uploaded).
    fn generate(step: &Step, changed: &[u64]) {
        for i in 0..200u64 {
            let seed = if changed.contains(&i) { 10_000 + i } else { i + 3 };
            write(&step.ws.join(format!("out/d{}/f{i}", i % 9)), &noise(20_000 + (i as usize * 131) % 30_000, seed));
        }
    }

    fn tree_bytes() -> u64 {
        (0..200u64).map(|i| 20_000 + (i * 131) % 30_000).sum()
    }

    /// A step whose saves store content in packs.
    fn step(peer: &dyn Peer) -> Step {
        let mut step = peer.step();
        step.set_env("EXACT_CACHE_CONTENT", "packs");
        step
    }

    /// One job: restore, generate on a miss, save.
    fn job(peer: &dyn Peer, inputs: &[(&str, &str)], changed: &[u64]) -> (Step, StepResult, StepResult) {
        let step = step(peer);
        let restore = step.run(&["restore"], inputs, NO_STATE);
        assert_eq!(restore.code, 0, "{}", restore.stdout);
        if restore.output("cache-hit") != "true" {
            generate(&step, changed);
        }
        let save = step.run(&["save", "--post"], inputs, &restore.state);
        assert_eq!(save.code, 0, "{}", save.stdout);
        (step, restore, save)
    }

    /// The bytes of the `content: uploaded …` line's first figure, as the log prints them.
    fn log_line<'a>(r: &'a StepResult, start: &str) -> &'a str {
        r.stdout.lines().find(|l| l.contains(start)).unwrap_or_else(|| panic!("no `{start}` line: {}", r.stdout))
    }

    /// Each file's inode under `dir`, by its path there.
    fn inodes(dir: &std::path::Path) -> BTreeMap<String, u64> {
        use std::os::unix::fs::MetadataExt;
        let mut found = BTreeMap::new();
        for entry in walkdir::WalkDir::new(dir).into_iter().map(Result::unwrap).filter(|e| e.file_type().is_file()) {
            let rel = entry.path().strip_prefix(dir).unwrap().display().to_string();
            found.insert(rel, entry.metadata().unwrap().ino());
        }
        found
    }

    fn stored(peer: &dyn Peer) -> u64 {
        peer.packs(PREFIX).iter().map(|(_, size)| size).sum()
    }

    on_every_store!(where lists_entries: a_new_key_uploads_only_what_changed);

    /// A second key whose tree differs by 1% of its files uploads a small part of it (the
    /// rest is referenced in the first entry's pack); its restore into an empty tree is whole,
    /// and a restore onto the tree it put in place fetches nothing.
    fn a_new_key_uploads_only_what_changed(store: Store) {
        let peer = store.start();
        let catalog = peer.catalog_inputs();
        let (_, _, first) = job(peer.as_ref(), &inputs(peer.as_ref(), "1", &catalog), &[]);
        assert_eq!(first.output("save-result"), "saved", "{}", first.stdout);
        let one = stored(peer.as_ref());
        assert!(one > tree_bytes(), "the whole tree in packs: {one}");
        let (_, _, second) = job(peer.as_ref(), &inputs(peer.as_ref(), "2", &catalog), &[17, 120]);
        assert_eq!(second.output("save-result"), "saved", "{}", second.stdout);
        let added = stored(peer.as_ref()) - one;
        assert!(added * 100 <= tree_bytes() * 3, "a 1% change stored {added} more bytes: {}", second.stdout);
        log_line(&second, "content: uploaded");

        let step = step(peer.as_ref());
        let ins = inputs(peer.as_ref(), "2", &catalog);
        let cold = step.run(&["restore"], &ins, NO_STATE);
        assert_eq!(cold.output("cache-hit"), "true", "{}", cold.stdout);
        let expected = {
            let reference = peer.step();
            generate(&reference, &[17, 120]);
            snapshot(&reference.ws.join("out"))
        };
        assert_eq!(snapshot(&step.ws.join("out")), expected);
        let before = inodes(&step.ws.join("out"));
        let warm = step.run(&["restore"], &ins, NO_STATE);
        assert_eq!(warm.output("cache-hit"), "true", "{}", warm.stdout);
        // Every file was in place: none was written again (a written file is a new inode).
        assert_eq!(inodes(&step.ws.join("out")), before, "{}", warm.stdout);
        assert_eq!(snapshot(&step.ws.join("out")), expected);
    }

    on_every_store!(where records_refs: an_entry_whose_packs_are_reused_still_ages_out);

    /// A save that reads an older entry's content map does not count as a use of it: retention
    /// by age (`prune --older-than`) deletes the old entry, and the new one, whose files lie
    /// partly in the old entry's pack, still restores whole: the pack it references stays.
    fn an_entry_whose_packs_are_reused_still_ages_out(store: Store) {
        let peer = store.start();
        let catalog = peer.catalog_inputs();
        let (_, _, old) = job(peer.as_ref(), &inputs(peer.as_ref(), "old", &catalog), &[]);
        let old_key = old.output("key").to_owned();
        peer.backdate(&old_key, std::time::Duration::from_secs(3600));
        let new_inputs = inputs(peer.as_ref(), "new", &catalog);
        let packs_before = peer.packs(PREFIX).len();
        job(peer.as_ref(), &new_inputs, &[5]);
        assert_eq!(peer.packs(PREFIX).len(), packs_before + 1, "the new entry stores one new pack");
        let stored_before = stored(peer.as_ref());
        let step = step(peer.as_ref());
        let mut prune_inputs = vec![("prefix", PREFIX)];
        prune_inputs.extend(catalog.iter().map(|(n, v)| (*n, v.as_str())));
        let pruned = step.run(&["prune", "--older-than=30m"], &prune_inputs, NO_STATE);
        assert_eq!(pruned.code, 0, "{}", pruned.stdout);
        assert_eq!(pruned.output("deleted").lines().collect::<Vec<_>>(), [old_key.as_str()], "{}", pruned.stdout);
        assert_eq!(stored(peer.as_ref()), stored_before, "every pack is referenced: {}", pruned.stdout);
        let restored = step.run(&["restore"], &new_inputs, NO_STATE);
        assert_eq!(restored.output("cache-hit"), "true", "{}", restored.stdout);
        let expected = {
            let reference = peer.step();
            generate(&reference, &[5]);
            snapshot(&reference.ws.join("out"))
        };
        assert_eq!(snapshot(&step.ws.join("out")), expected);
    }

    /// A job that may not read the cache (`ACTIONS_CACHE_MODE=write-only`) stores its content
    /// in packs without asking the service anything: no earlier entry's map is read, no pack is
    /// looked up, though the catalog lists an entry it could reuse.
    #[test]
    fn a_write_only_save_asks_the_service_nothing() {
        use crate::support::services::{Fault, Op, REST_TOKEN, Services};
        let services = Services::start();
        let mut step = Step::against([services.v2_env(), services.rest_env()].concat());
        step.set_env("EXACT_CACHE_CONTENT", "packs");
        let with = |variant| {
            vec![
                ("path", "out"),
                ("native", "none"),
                ("prefix", PREFIX),
                ("variant", variant),
                ("github-token", REST_TOKEN),
            ]
        };
        generate(&step, &[]);
        let first = step.run(&["save"], &with("1"), NO_STATE);
        assert_eq!(first.output("save-result"), "saved", "{}", first.stdout);
        let lookups = services.faults.calls(Op::Lookup);
        services.faults.push(Op::Lookup, Fault::ReadDenied, 100);
        step.set_env("ACTIONS_CACHE_MODE", "write-only");
        let second = step.run(&["save"], &with("2"), NO_STATE);
        assert_eq!(second.output("save-result"), "saved", "{}", second.stdout);
        assert!(!second.stdout.contains("::warning::"), "{}", second.stdout);
        assert_eq!(services.faults.calls(Op::Lookup), lookups, "{}", second.stdout);
        assert!(log_line(&second, "content: uploaded").contains("found 0 B"), "{}", second.stdout);
    }

    on_every_store!(an_evicted_pack_is_a_miss_that_heals, a_corrupt_pack_is_refused_and_heals);

    fn heals(store: Store, damage: fn(&dyn Peer, &str)) {
        let peer = store.start();
        let catalog = peer.catalog_inputs();
        let ins = inputs(peer.as_ref(), "1", &catalog);
        let (_, _, first) = job(peer.as_ref(), &ins, &[]);
        assert_eq!(first.output("save-result"), "saved", "{}", first.stdout);
        let packs = peer.packs(PREFIX);
        assert_eq!(packs.len(), 1, "{packs:?}");
        damage(peer.as_ref(), &packs[0].0);

        let (step, refused, replaced) = job(peer.as_ref(), &ins, &[]);
        assert_eq!(refused.output("cache-hit"), "false", "{}", refused.stdout);
        assert_eq!(refused.output("miss-reason"), "content-missing", "{}", refused.stdout);
        assert_eq!(refused.output("entry-exists"), "true", "{}", refused.stdout);
        assert_eq!(replaced.output("save-result"), "saved", "{}", replaced.stdout);
        let generated: BTreeMap<String, String> = snapshot(&step.ws.join("out"));

        let (healed, hit, _) = job(peer.as_ref(), &ins, &[]);
        assert_eq!(hit.output("cache-hit"), "true", "the replacement heals it: {}", hit.stdout);
        assert_eq!(snapshot(&healed.ws.join("out")), generated);
    }

    fn an_evicted_pack_is_a_miss_that_heals(store: Store) {
        heals(store, |peer, key| peer.evict_pack(key));
    }

    fn a_corrupt_pack_is_refused_and_heals(store: Store) {
        heals(store, |peer, key| peer.corrupt_pack(key));
    }

    on_every_store!(where lists_entries: prune_deletes_only_the_packs_no_entry_references);

    /// Entries A, B (1% changed from A) and C (every file changed: it shares B's changed file);
    /// prune keeps the newest key. A's pack is then referenced by no entry: kept while within
    /// the grace period, named by a dry run with the bytes it would free, then deleted;
    /// B's pack stays (C references it), and C restores whole.
    fn prune_deletes_only_the_packs_no_entry_references(store: Store) {
        let peer = store.start();
        let catalog = peer.catalog_inputs();
        // A second between jobs: S3 and Azure record creation times in whole seconds, and prune
        // keeps the newest.
        let a_second = || std::thread::sleep(std::time::Duration::from_millis(1100));
        job(peer.as_ref(), &inputs(peer.as_ref(), "a", &catalog), &[]);
        let a_packs = peer.packs(PREFIX);
        assert_eq!(a_packs.len(), 1, "{a_packs:?}");
        a_second();
        job(peer.as_ref(), &inputs(peer.as_ref(), "b", &catalog), &[5]);
        a_second();
        let every_file: Vec<u64> = (0..200).collect();
        let c_inputs = inputs(peer.as_ref(), "c", &catalog);
        // C shares B's changed file (same index, same seed): B's pack stays referenced.
        job(peer.as_ref(), &c_inputs, &every_file);
        let before = peer.packs(PREFIX);
        assert_eq!(before.len(), 3, "{before:?}");

        let mut step = step(peer.as_ref());
        let mut prune_inputs = vec![("prefix", PREFIX), ("prune-keep", "1")];
        prune_inputs.extend(catalog.iter().map(|(n, v)| (*n, v.as_str())));
        // Every pack within the grace period (the v2 double's times are a month old).
        step.set_env("EXACT_CACHE_PACK_GRACE_SECONDS", "1000000000");
        let young = step.run(&["prune"], &prune_inputs, NO_STATE);
        assert_eq!(young.code, 0, "{}", young.stdout);
        assert_eq!(young.output("deleted").lines().count(), 2, "{}", young.stdout);
        assert_eq!(peer.packs(PREFIX), before, "A's pack is within the grace period");

        step.set_env("EXACT_CACHE_PACK_GRACE_SECONDS", "0");
        let dry = step.run(&["prune", "--dry-run"], &prune_inputs, NO_STATE);
        let a_size = exact_cache::units::bytes(a_packs[0].1);
        // What a dry run is for: what it would free.
        assert!(log_line(&dry, "packs: would delete 1 pack ").contains(&a_size), "{}", dry.stdout);
        assert_eq!(peer.packs(PREFIX), before, "a dry run deletes nothing");
        let pruned = step.run(&["prune"], &prune_inputs, NO_STATE);
        assert_eq!(pruned.code, 0, "{}", pruned.stdout);
        let after = peer.packs(PREFIX);
        assert_eq!(after.len(), 2, "{after:?}");
        assert!(!after.contains(&a_packs[0]), "A's pack is gone: {after:?}");

        let fresh = self::step(peer.as_ref());
        let restored = fresh.run(&["restore"], &c_inputs, NO_STATE);
        assert_eq!(restored.output("cache-hit"), "true", "{}", restored.stdout);
        let reference = peer.step();
        generate(&reference, &every_file);
        assert_eq!(snapshot(&fresh.ws.join("out")), snapshot(&reference.ws.join("out")));
    }

    on_every_store!(where lists_entries: list_shows_what_each_entry_owns_and_shares);

    /// `list` gives each entry whose files are in packs the bytes of the packs only it
    /// references and of those it shares.
    fn list_shows_what_each_entry_owns_and_shares(store: Store) {
        let peer = store.start();
        let catalog = peer.catalog_inputs();
        job(peer.as_ref(), &inputs(peer.as_ref(), "a", &catalog), &[]);
        let a_pack = peer.packs(PREFIX)[0].clone();
        job(peer.as_ref(), &inputs(peer.as_ref(), "b", &catalog), &[5]);
        let b_pack = peer.packs(PREFIX).into_iter().find(|p| *p != a_pack).expect("B's new pack");
        let step = step(peer.as_ref());
        let mut list_inputs = vec![("prefix", PREFIX)];
        list_inputs.extend(catalog.iter().map(|(n, v)| (*n, v.as_str())));
        let listed = step.run(&["list"], &list_inputs, NO_STATE);
        assert_eq!(listed.code, 0, "{}", listed.stdout);
        let mut shares: Vec<String> = listed.listed().into_iter().map(|row| row["in packs"].clone()).collect();
        shares.sort();
        let bytes = exact_cache::units::bytes;
        // A owns nothing (B references its pack too); B owns its new pack.
        let (a, b) = (bytes(a_pack.1), bytes(b_pack.1));
        assert_eq!(shares, [format!("0 B own, {a} shared"), format!("{b} own, {a} shared")], "{}", listed.stdout);
    }

    on_every_store!(where lists_entries: prunes_beside_saves_never_break_an_entry);

    /// Saves of new keys, each with a file changed from the key before, while prunes that keep
    /// only the newest key run at the same time: every key restores whole or is gone (a miss
    /// `not-found`), never `content-missing`, and the newest is kept. (The window the grace
    /// period covers, a save's packs stored and its manifest not yet, is too short here to be hit
    /// without it; `prune_deletes_only_the_packs_no_entry_references` shows the rule itself.)
    fn prunes_beside_saves_never_break_an_entry(store: Store) {
        let peer = store.start();
        let peer = peer.as_ref();
        let catalog = peer.catalog_inputs();
        let changed = |round: u64| (1..=round).map(|r| r * 7).collect::<Vec<u64>>();
        job(peer, &inputs(peer, "v0", &catalog), &[]);
        let mut prune_inputs = vec![("prefix", PREFIX), ("prune-keep", "1")];
        prune_inputs.extend(catalog.iter().map(|(n, v)| (*n, v.as_str())));
        for round in 1..=3u64 {
            let variant = format!("v{round}");
            std::thread::scope(|scope| {
                scope.spawn(|| job(peer, &inputs(peer, &variant, &catalog), &changed(round)));
                for _ in 0..2 {
                    scope.spawn(|| {
                        let pruned = step(peer).run(&["prune"], &prune_inputs, NO_STATE);
                        assert_eq!(pruned.code, 0, "{}", pruned.stdout);
                    });
                }
            });
        }
        for round in 0..=3u64 {
            let fresh = step(peer);
            let restored = fresh.run(&["restore"], &inputs(peer, &format!("v{round}"), &catalog), NO_STATE);
            if restored.output("cache-hit") != "true" {
                assert_eq!(restored.output("miss-reason"), "not-found", "v{round}: {}", restored.stdout);
                assert!(round < 3, "the newest key is kept: {}", restored.stdout);
                continue;
            }
            let reference = peer.step();
            generate(&reference, &changed(round));
            assert_eq!(snapshot(&fresh.ws.join("out")), snapshot(&reference.ws.join("out")), "v{round}");
        }
    }

    /// A restore of an entry of 3,000 files in packs, run with at most 256 open files (macOS's
    /// default limit): each file is open only while it is written.
    #[test]
    fn a_restore_of_thousands_of_files_keeps_few_open() {
        let peer = Store::Local.start();
        let saver = step(peer.as_ref());
        for i in 0..3_000u32 {
            write(&saver.ws.join(format!("out/d{}/f{i}", i % 7)), format!("file {i}\n").as_bytes());
        }
        let ins = inputs(peer.as_ref(), "many", &[]);
        let saved = saver.run(&["save"], &ins, NO_STATE);
        assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);
        let mut restorer = step(peer.as_ref());
        // Python, not a shell: `sh` drops the `INPUT_…` variables whose names hold a `-`.
        let limit = "import os, resource, sys\n\
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))\n\
            os.execv(sys.argv[1], sys.argv[1:])";
        restorer.wrapper = ["python3", "-c", limit].map(str::to_owned).to_vec();
        let restored = restorer.run(&["restore"], &ins, NO_STATE);
        assert_eq!(restored.output("cache-hit"), "true", "{}", restored.stdout);
        assert_eq!(snapshot(&restorer.ws.join("out")), snapshot(&saver.ws.join("out")));
    }

    on_every_store!(where lists_entries: a_replacement_reuses_every_pack_but_the_corrupt_one);

    /// Entry B holds A's pack and a small one of its own; its own pack is corrupted. B's restore
    /// is a miss `content-missing`, and its replacement stores only what the corrupt pack held
    /// (it still references A's pack), never the corrupt pack; the replacement restores whole.
    fn a_replacement_reuses_every_pack_but_the_corrupt_one(store: Store) {
        let peer = store.start();
        let catalog = peer.catalog_inputs();
        job(peer.as_ref(), &inputs(peer.as_ref(), "a", &catalog), &[]);
        let a_pack = peer.packs(PREFIX).remove(0);
        let b_inputs = inputs(peer.as_ref(), "b", &catalog);
        job(peer.as_ref(), &b_inputs, &[5]);
        let b_pack = peer.packs(PREFIX).into_iter().find(|p| *p != a_pack).expect("B's own pack");
        peer.corrupt_pack(&b_pack.0);

        let before = stored(peer.as_ref());
        let (_, refused, replaced) = job(peer.as_ref(), &b_inputs, &[5]);
        assert_eq!(refused.output("miss-reason"), "content-missing", "{}", refused.stdout);
        assert_eq!(replaced.output("save-result"), "saved", "{}", replaced.stdout);
        let added = stored(peer.as_ref()) - before;
        assert!(added * 100 <= tree_bytes() * 3, "the replacement stored {added} bytes: {}", replaced.stdout);

        let (healed, hit, _) = job(peer.as_ref(), &b_inputs, &[]);
        assert_eq!(hit.output("cache-hit"), "true", "{}", hit.stdout);
        let reference = peer.step();
        generate(&reference, &[5]);
        assert_eq!(snapshot(&healed.ws.join("out")), snapshot(&reference.ws.join("out")));
    }
}
