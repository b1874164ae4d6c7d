//! A save and a restore through the content core, end to end, on a pack store in memory with
//! faults and on the local directory's: what is uploaded, what is fetched, what is written.

use super::chunk::Chunking;
use super::map::ContentMap;
use super::pack::PackOptions;
use super::restore::{FetchError, FetchPlan, FetchStats, FileSink, Reads, Wanted, fetch, in_place_all};
use super::save::{ContentIndex, ContentSaver, SaveStats};
use super::store::{LocalPackStore, PackStore};
use super::testing::{MemoryPackStore, noise};
use super::{Hash, PackName};
use std::fs;
use std::path::Path;

/// Small chunks and packs, so that small trees exercise every path.
const CHUNKING: Chunking = Chunking { whole_file_max: 64 << 10, min: 4 << 10, avg: 16 << 10, max: 64 << 10 };

/// What a manifest says of a file: its path, hash and size.
type Listed = Vec<(String, Hash, u64)>;

fn options(dir: &Path) -> PackOptions {
    PackOptions { dir: dir.to_owned(), target: 256 << 10, level: 3, threads: 2 }
}

/// Save `files` into `store`, reusing what `maps` hold.
fn save(
    store: &dyn PackStore,
    maps: &[&ContentMap],
    bad: &[PackName],
    files: &[(String, Vec<u8>)],
) -> (ContentMap, Listed, SaveStats) {
    let tmp = tempfile::tempdir().unwrap();
    let index = ContentIndex::build(maps, bad, store).unwrap();
    std::thread::scope(|scope| {
        let mut saver = ContentSaver::new(scope, &index, store, CHUNKING, options(tmp.path())).unwrap();
        let mut listed = Vec::new();
        for (path, bytes) in files {
            let (hash, n) = saver.add_file(&bytes[..], bytes.len() as u64).unwrap();
            assert_eq!((hash, n), (Hash::of(bytes), bytes.len() as u64));
            listed.push((path.clone(), hash, n));
        }
        let (map, stats) = saver.finish().unwrap();
        (ContentMap::from_slice(&map.to_vec()).unwrap(), listed, stats)
    })
}

/// A tree of `n` files of lognormal-ish sizes (a few large ones, many small), some compressible.
fn tree(seed: u64, n: usize) -> Vec<(String, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let size = match i % 10 {
                0 => 200_000 + i * 100,
                1..=3 => 20_000 + i * 10,
                _ => 500 + i * 3,
            };
            let bytes = if i % 2 == 0 {
                noise(seed * 10_000 + i as u64, size)
            } else {
                format!("def kernel_{i}(x): return x * {i}\n").repeat(size / 30 + 1).into_bytes()
            };
            (format!("d{}/f{i}", i % 7), bytes)
        })
        .collect()
}

/// Restore `listed` into `target` as the core does: files in place kept, the rest fetched into
/// staging beside them, then moved into place, only when everything arrived.
fn restore(
    store: &dyn PackStore,
    map: &ContentMap,
    listed: &Listed,
    target: &Path,
) -> Result<(FetchStats, usize), FetchError> {
    let all: Vec<Wanted> = listed.iter().map(|(_, hash, size)| Wanted { hash: *hash, size: *size }).collect();
    let open = |i: usize| match fs::File::open(target.join(&listed[i].0)) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    };
    let kept = in_place_all(&all, 2, &open).unwrap();
    let mut wanted = Vec::new();
    let mut paths = Vec::new();
    for (i, (path, _, _)) in listed.iter().enumerate() {
        if !kept[i] {
            wanted.push(all[i]);
            paths.push(path);
        }
    }
    let plan = FetchPlan::new(map, &wanted, store.ranges(), Reads::DEFAULT)?;
    fs::create_dir_all(target).unwrap();
    let staging = tempfile::tempdir_in(target).unwrap();
    let sink = FileSink::new(wanted.len(), |i| {
        fs::OpenOptions::new().read(true).write(true).create_new(true).open(staging.path().join(i.to_string()))
    });
    let stats = fetch(store, map, &plan, &sink, 3)?;
    drop(sink);
    for (i, path) in paths.iter().enumerate() {
        let dest = target.join(path);
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::rename(staging.path().join(i.to_string()), dest).unwrap();
    }
    Ok((stats, listed.len() - wanted.len()))
}

/// Every file of `files` is at its path in `target` with its bytes.
fn assert_tree(target: &Path, files: &[(String, Vec<u8>)]) {
    for (path, bytes) in files {
        assert!(fs::read(target.join(path)).unwrap() == *bytes, "{path} differs");
    }
}

/// The tree's files and their contents, as they are now (to show a failed restore changed nothing).
fn snapshot(target: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(target)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
        .map(|e| (e.path().strip_prefix(target).unwrap().display().to_string(), fs::read(e.path()).unwrap()))
        .collect();
    out.sort();
    out
}

#[test]
fn a_save_of_a_tree_with_one_percent_changed_uploads_only_the_changed_blobs() {
    let store = MemoryPackStore::new();
    let first = tree(1, 300);
    let (map1, _, stats1) = save(&store, &[], &[], &first);
    let total: u64 = first.iter().map(|(_, b)| b.len() as u64).sum();
    assert_eq!(stats1.bytes, total);
    assert_eq!(stats1.found_bytes, 0);
    let stored1 = store.bytes_stored();
    assert_eq!(stats1.uploaded, stored1);
    // 3 files of 300 changed: one large (one chunk edited in place), two small ones replaced.
    let mut second = first.clone();
    let changed = [0usize, 14, 25];
    second[0].1[100_000..100_010].copy_from_slice(b"0123456789");
    second[14].1 = noise(77, second[14].1.len());
    second[25].1 = noise(78, second[25].1.len());
    let changed_bytes: u64 = changed.iter().map(|&i| second[i].1.len() as u64).sum();
    let (map2, listed2, stats2) = save(&store, &[&map1], &[], &second);
    // Uploaded: the two replaced files and the large file's chunk around the edit, no more.
    assert!(stats2.new_bytes <= changed_bytes, "{} new of {changed_bytes} changed", stats2.new_bytes);
    assert!(stats2.new_bytes <= (second[14].1.len() + second[25].1.len()) as u64 + 3 * (64 << 10));
    assert!(stats2.uploaded < total / 20, "uploaded {} of {total}", stats2.uploaded);
    assert_eq!(stats2.found_bytes + stats2.new_bytes, total);
    assert_eq!(store.bytes_stored(), stored1 + stats2.uploaded);
    // The new entry's map references the first save's packs and its own.
    assert!(map1.packs.iter().all(|p| map2.packs.contains(p)));
    let target = tempfile::tempdir().unwrap();
    restore(&store, &map2, &listed2, target.path()).unwrap();
    assert_tree(target.path(), &second);
    // The same tree again: nothing new at all, no pack written.
    let (_, _, again) = save(&store, &[&map2], &[], &second);
    assert_eq!((again.new_blobs, again.packs, again.uploaded), (0, 0, 0));
}

#[test]
fn identical_files_and_chunks_within_one_save_are_stored_once() {
    let store = MemoryPackStore::new();
    let big = noise(5, 300_000);
    let files = vec![
        ("a".to_owned(), big.clone()),
        ("b".to_owned(), big.clone()),
        ("c".to_owned(), b"same".to_vec()),
        ("d".to_owned(), b"same".to_vec()),
        ("empty".to_owned(), Vec::new()),
    ];
    let (map, listed, stats) = save(&store, &[], &[], &files);
    assert_eq!(stats.new_bytes, 300_004);
    assert_eq!(stats.found_bytes, 300_004);
    let target = tempfile::tempdir().unwrap();
    restore(&store, &map, &listed, target.path()).unwrap();
    assert_tree(target.path(), &files);
}

#[test]
fn a_pack_the_store_lost_or_a_restore_found_bad_is_never_referenced_again() {
    let store = MemoryPackStore::new();
    let files = tree(2, 60);
    let (map1, _, _) = save(&store, &[], &[], &files);
    assert!(map1.packs.len() >= 2);
    let (evicted, bad) = (map1.packs[0], map1.packs[1]);
    store.faults.lock().unwrap().missing.insert(evicted);
    let index = ContentIndex::build(&[&map1], &[bad], &store).unwrap();
    let mut left_out = index.left_out.clone();
    left_out.sort();
    let mut expected = vec![evicted, bad];
    expected.sort();
    assert_eq!(left_out, expected);
    let (map2, listed2, stats) = save(&store, &[&map1], &[bad], &files);
    assert!(!map2.packs.contains(&evicted) && !map2.packs.contains(&bad));
    assert!(stats.new_blobs > 0);
    // The replacement restores whole although both packs stay unusable.
    store.faults.lock().unwrap().corrupt.push((bad, 100));
    let target = tempfile::tempdir().unwrap();
    restore(&store, &map2, &listed2, target.path()).unwrap();
    assert_tree(target.path(), &files);
}

#[test]
fn a_restore_onto_a_tree_that_holds_everything_fetches_and_writes_nothing() {
    let store = MemoryPackStore::new();
    let files = tree(3, 100);
    let (map, listed, _) = save(&store, &[], &[], &files);
    let target = tempfile::tempdir().unwrap();
    let (cold, kept) = restore(&store, &map, &listed, target.path()).unwrap();
    assert_eq!((cold.files, kept), (100, 0));
    store.reads.lock().unwrap().clear();
    let (warm, kept) = restore(&store, &map, &listed, target.path()).unwrap();
    assert_eq!((warm.files, warm.fetched, warm.written, kept), (0, 0, 0, 100));
    assert!(store.reads.lock().unwrap().is_empty());
    // One file missing and one grown: only those two are fetched.
    fs::remove_file(target.path().join(&files[5].0)).unwrap();
    let mut grown = files[6].1.clone();
    grown.push(b'x');
    fs::write(target.path().join(&files[6].0), &grown).unwrap();
    let (some, kept) = restore(&store, &map, &listed, target.path()).unwrap();
    assert_eq!((some.files, kept), (2, 98));
    assert_tree(target.path(), &files);
}

#[test]
fn a_tampered_file_in_place_is_fetched_and_rewritten_never_kept() {
    let store = MemoryPackStore::new();
    let files = tree(4, 30);
    let (map, listed, _) = save(&store, &[], &[], &files);
    let target = tempfile::tempdir().unwrap();
    restore(&store, &map, &listed, target.path()).unwrap();
    // Same size, one byte changed, times put back: only its content tells.
    let path = target.path().join(&files[3].0);
    let before = fs::metadata(&path).unwrap();
    let mut tampered = files[3].1.clone();
    tampered[10] ^= 1;
    fs::write(&path, &tampered).unwrap();
    filetime::set_file_mtime(&path, filetime::FileTime::from_last_modification_time(&before)).unwrap();
    let (stats, kept) = restore(&store, &map, &listed, target.path()).unwrap();
    assert_eq!((stats.files, kept), (1, 29));
    assert_eq!(fs::read(&path).unwrap(), files[3].1);
}

#[test]
fn a_missing_or_corrupt_pack_is_content_missing_and_changes_nothing() {
    let store = MemoryPackStore::new();
    let files = tree(5, 80);
    let (map, listed, _) = save(&store, &[], &[], &files);
    let target = tempfile::tempdir().unwrap();
    fs::create_dir_all(target.path().join("d1")).unwrap();
    fs::write(target.path().join(&files[1].0), b"an older file").unwrap();
    let before = snapshot(target.path());
    let last = *map.packs.last().unwrap();
    store.faults.lock().unwrap().missing.insert(last);
    let err = restore(&store, &map, &listed, target.path()).unwrap_err();
    assert!(matches!(err, FetchError::Missing(p) if p == last), "{err}");
    assert!(err.content_missing());
    assert_eq!(err.bad_pack(), Some(last));
    assert_eq!(snapshot(target.path()), before, "nothing changed");
    // A flipped byte inside a blob's frame: refused by the blob's hash (or its frame).
    let first_blob = map.blobs.iter().find(|b| b.pack == 0).unwrap();
    let at = first_blob.offset + first_blob.compressed / 2;
    let mut faults = store.faults.lock().unwrap();
    faults.missing.clear();
    faults.corrupt.push((map.packs[0], at));
    drop(faults);
    let err = restore(&store, &map, &listed, target.path()).unwrap_err();
    assert!(matches!(&err, FetchError::Corrupt { pack, .. } if *pack == map.packs[0]), "{err}");
    assert!(err.content_missing());
    assert_eq!(snapshot(target.path()), before, "nothing changed");
    // The store down is no fault of the entry's.
    let mut faults = store.faults.lock().unwrap();
    faults.corrupt.clear();
    faults.down = true;
    drop(faults);
    let err = restore(&store, &map, &listed, target.path()).unwrap_err();
    assert!(!err.content_missing(), "{err}");
    assert_eq!(snapshot(target.path()), before, "nothing changed");
}

#[test]
fn a_map_that_lies_about_a_file_is_caught() {
    let store = MemoryPackStore::new();
    let big = noise(9, 200_000);
    let files = vec![("big".to_owned(), big.clone())];
    let (mut map, listed, _) = save(&store, &[], &[], &files);
    // The chunks of the file, in another order: every blob verifies, the file does not.
    let chunks = map.chunked.values_mut().next().unwrap();
    assert!(chunks.len() > 2);
    chunks.swap(0, 1);
    let target = tempfile::tempdir().unwrap();
    let err = restore(&store, &map, &listed, target.path()).unwrap_err();
    assert!(matches!(err, FetchError::Assembled { .. }), "{err}");
    assert!(err.content_missing());
}

#[test]
fn a_map_that_names_another_blob_for_a_file_is_caught() {
    let store = MemoryPackStore::new();
    let (a, b) = (noise(10, 5000), noise(11, 5000));
    let files = vec![("a".to_owned(), a), ("b".to_owned(), b)];
    let (mut map, listed, _) = save(&store, &[], &[], &files);
    // File a's hash mapped to file b's blob, of the same size; the map's own check refuses a
    // "chunked" file of one blob, so this one is built past it.
    let b_index = map.blobs.iter().position(|x| x.hash == listed[1].1).unwrap() as u32;
    map.chunked.insert(listed[0].1, vec![b_index]);
    assert!(map.check().is_err());
    let target = tempfile::tempdir().unwrap();
    let err = restore(&store, &map, &listed, target.path()).unwrap_err();
    assert!(matches!(err, FetchError::Assembled { hash } if hash == listed[0].1), "{err}");
    assert!(!target.path().join("a").exists(), "nothing placed");
}

#[test]
fn where_ranges_are_refused_each_pack_is_read_once_whole() {
    let store = MemoryPackStore::new();
    let files = tree(6, 80);
    let (map, listed, _) = save(&store, &[], &[], &files);
    store.faults.lock().unwrap().refuse_ranges = true;
    let target = tempfile::tempdir().unwrap();
    let (stats, _) = restore(&store, &map, &listed, target.path()).unwrap();
    assert_tree(target.path(), &files);
    assert_eq!(stats.reads, map.packs.len() as u64);
    let reads = store.reads.lock().unwrap();
    let mut packs: Vec<PackName> = reads.iter().map(|(p, _)| *p).collect();
    packs.sort();
    packs.dedup();
    assert_eq!(packs.len(), reads.len(), "one read per pack");
}

#[test]
fn near_blobs_are_read_in_one_range_and_far_ones_apart() {
    let store = MemoryPackStore::new();
    // One pack of 20 blobs of ~10 kB each.
    let files: Vec<(String, Vec<u8>)> = (0..20).map(|i| (format!("f{i}"), noise(100 + i, 10_000))).collect();
    let (map, listed, _) = save(&store, &[], &[], &files);
    assert_eq!(map.packs.len(), 1);
    let wanted = |which: &[usize]| -> Vec<Wanted> {
        which.iter().map(|&i| Wanted { hash: listed[i].1, size: listed[i].2 }).collect()
    };
    let close = Reads { gap: 15_000, max: 1 << 20 };
    // Every other file: the gaps are one blob wide, joined.
    let plan = FetchPlan::new(&map, &wanted(&[0, 2, 4, 6]), true, close).unwrap();
    assert_eq!(plan.reads.len(), 1);
    assert_eq!(plan.reads[0].blobs.len(), 4);
    // Files 0 and 18 are far apart: two reads, each exactly its blob.
    let plan = FetchPlan::new(&map, &wanted(&[0, 18]), true, close).unwrap();
    assert_eq!(plan.reads.len(), 2);
    for read in &plan.reads {
        let b = &map.blobs[read.blobs[0] as usize];
        assert_eq!(read.range, b.offset..b.offset + b.compressed);
    }
    // A read stops growing at its limit.
    let plan =
        FetchPlan::new(&map, &wanted(&(0..20).collect::<Vec<_>>()), true, Reads { gap: 0, max: 50_000 }).unwrap();
    assert!(plan.reads.len() >= 4, "{} reads", plan.reads.len());
    assert!(plan.reads.iter().all(|r| r.range.end - r.range.start <= 50_000));
    assert_eq!(plan.reads.iter().map(|r| r.blobs.len()).sum::<usize>(), 20);
    // Without ranges: the pack from its start, once.
    let plan = FetchPlan::new(&map, &wanted(&[3, 18]), false, close).unwrap();
    assert_eq!(plan.reads.len(), 1);
    assert_eq!(plan.reads[0].range.start, 0);
    // Fetching a plan brings exactly what it reads.
    let target = tempfile::tempdir().unwrap();
    let (stats, _) = restore(&store, &map, &listed, target.path()).unwrap();
    assert_eq!(stats.fetched, store.bytes_read());
}

#[test]
fn the_local_pack_store_carries_a_save_and_a_restore() {
    let scratch = tempfile::tempdir().unwrap();
    let store = LocalPackStore::new(scratch.path().join("packs"), "p");
    let first = tree(7, 120);
    let (map1, _, _) = save(&store, &[], &[], &first);
    let mut second = first.clone();
    second[2].1[5] ^= 0xff;
    let (map2, listed2, stats) = save(&store, &[&map1], &[], &second);
    assert!(stats.packs >= 1 && stats.uploaded < 300_000, "{stats:?}");
    let target = scratch.path().join("target");
    restore(&store, &map2, &listed2, &target).unwrap();
    assert_tree(&target, &second);
    // Prune with only the second entry listed: the first save's packs stay (still referenced)
    // but for those old enough and unreferenced.
    let listed = store.list().unwrap();
    assert_eq!(listed.len(), map1.packs.len() + stats.packs as usize);
    let refs = vec![Some(map2.packs.clone())];
    let now = listed.iter().map(|p| p.created).max().unwrap();
    assert!(super::prune::prunable(&refs, &listed, now, super::prune::GRACE_SECONDS).is_empty(), "all young");
    let old = super::prune::prunable(&refs, &listed, now + super::prune::GRACE_SECONDS, super::prune::GRACE_SECONDS);
    assert!(old.iter().all(|p| !map2.packs.contains(p)));
    for p in &old {
        store.delete(p).unwrap();
    }
    // What the second entry references survived: it still restores into an empty directory.
    let again = scratch.path().join("again");
    restore(&store, &map2, &listed2, &again).unwrap();
    assert_tree(&again, &second);
}

#[test]
fn a_pack_gone_while_a_save_ran_fails_the_save_which_runs_again_without_it() {
    let store = MemoryPackStore::new();
    let files = tree(8, 40);
    let (map1, _, _) = save(&store, &[], &[], &files);
    let tmp = tempfile::tempdir().unwrap();
    let index = ContentIndex::build(&[&map1], &[], &store).unwrap();
    let gone = map1.packs[0];
    let err = std::thread::scope(|scope| {
        let mut saver = ContentSaver::new(scope, &index, &store, CHUNKING, options(tmp.path())).unwrap();
        for (_, bytes) in &files {
            saver.add_file(&bytes[..], bytes.len() as u64).unwrap();
        }
        // Pruned (or evicted) after the index was built, before the save finished.
        store.delete(&gone).unwrap();
        saver.finish().unwrap_err()
    });
    assert!(matches!(&err, super::save::SaveError::Gone(packs) if packs == &vec![gone]), "{err}");
    let (map2, listed2, _) = save(&store, &[&map1], &[gone], &files);
    assert!(!map2.packs.contains(&gone));
    let target = tempfile::tempdir().unwrap();
    restore(&store, &map2, &listed2, target.path()).unwrap();
    assert_tree(target.path(), &files);
}

#[test]
fn a_prune_while_a_save_is_storing_its_packs_keeps_them() {
    let scratch = tempfile::tempdir().unwrap();
    let store = LocalPackStore::new(scratch.path().join("packs"), "p");
    let files = tree(9, 40);
    // The save stored its packs; its manifest is not listed yet (not committed).
    let (map, listed, _) = save(&store, &[], &[], &files);
    let packs = store.list().unwrap();
    let now = packs.iter().map(|p| p.created).max().unwrap() + 60;
    let entries: Vec<Option<Vec<PackName>>> = vec![Some(vec![])];
    assert!(super::prune::prunable(&entries, &packs, now, super::prune::GRACE_SECONDS).is_empty());
    // The save commits; a later prune lists its entry and keeps its packs however old.
    let entries = vec![Some(map.packs.clone())];
    let later = now + 10 * super::prune::GRACE_SECONDS;
    assert!(super::prune::prunable(&entries, &packs, later, super::prune::GRACE_SECONDS).is_empty());
    let target = tempfile::tempdir().unwrap();
    restore(&store, &map, &listed, target.path()).unwrap();
    assert_tree(target.path(), &files);
}

#[test]
fn a_long_line_of_keys_keeps_each_entry_to_few_packs() {
    let store = MemoryPackStore::new();
    let mut files = tree(7, 60);
    let (mut map, mut listed, _) = save(&store, &[], &[], &files);
    let (mut most, mut repacking_saves) = (map.packs.len(), 0);
    for key in 1..70u64 {
        // One small file changed: each save adds one small pack.
        let i = (key as usize * 7) % files.len();
        files[i].1 = noise(1_000_000 + key, 3_000);
        let reused = map.packs.len();
        let (next, next_listed, stats) = save(&store, &[&map], &[], &files);
        if reused > ContentIndex::REPACK_ABOVE {
            repacking_saves += 1;
            assert!(stats.new_bytes > 3_000, "key {key}: the small packs' blobs stored anew");
            assert!(next.packs.len() <= ContentIndex::REPACK_KEEP + 1, "key {key}: {} packs", next.packs.len());
        } else {
            assert_eq!(stats.new_bytes, 3_000, "key {key}: only the changed file");
        }
        most = most.max(next.packs.len());
        (map, listed) = (next, next_listed);
    }
    assert!(repacking_saves >= 2, "{repacking_saves} saves re-packed");
    assert!(most <= ContentIndex::REPACK_ABOVE + 1, "an entry referenced {most} packs");
    // The last entry restores whole.
    let target = tempfile::tempdir().unwrap();
    restore(&store, &map, &listed, target.path()).unwrap();
    assert_tree(target.path(), &files);
}
