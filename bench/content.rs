//! The content core's benchmark (issue 43), at the core level on the local pack store, side by
//! side in one run:
//!
//!   cargo run --release --example bench-content            # everything (~3 GB of tmpfs, minutes)
//!   cargo run --release --example bench-content -- --quick # smaller data, a quick look
//!
//! 1. Chunking: a 200 MB file, then the same with 1 MiB overwritten in the middle, and with 1 MiB
//!    inserted there: the bytes a second save must upload, for several chunk sizes.
//! 2. A 2,000-file, 84 MB tree saved under ten keys, each with 1% of its files changed from the
//!    key before: bytes uploaded per key against the tree (target ≤ 3%), and the store after ten
//!    keys against one entry (target ≤ 1.3×), beside what today's whole archives would take.
//! 3. Restores of the last key: into an empty directory (1 and 4 writing threads), onto a tree
//!    that holds every file (target ≥ 5× faster than into an empty directory) and onto one
//!    missing 10% of its files. Medians of 3.
//!
//! Work goes to `$EXACT_CACHE_BENCH_DIR/content` (default `/dev/shm/exact-cache-bench/content`):
//! tmpfs measures the code, not the disk's neighbours (bench/README.md).

use exact_cache::content::Hash;
use exact_cache::content::chunk::Chunking;
use exact_cache::content::map::ContentMap;
use exact_cache::content::pack::PackOptions;
use exact_cache::content::restore::{FetchPlan, FileSink, Reads, Wanted, fetch, in_place_all};
use exact_cache::content::save::{ContentIndex, ContentSaver, SaveStats};
use exact_cache::content::store::{LocalPackStore, PackStore};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MB: u64 = 1_000_000;
const MIB: usize = 1 << 20;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let base = std::env::var_os("EXACT_CACHE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/shm/exact-cache-bench"))
        .join("content");
    let _ = fs::remove_dir_all(&base);
    fs::create_dir_all(&base).unwrap();
    println!("# bench-content{}\n", if quick { " --quick" } else { "" });
    chunking(&base, if quick { 40 } else { 200 });
    let files = if quick { 400 } else { 2000 };
    let bytes = if quick { 17 * MB } else { 84 * MB };
    trees(&base, files, bytes);
    let _ = fs::remove_dir_all(&base);
}

/// `len` bytes of xorshift noise from `seed`.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend(x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Weights-like bytes: float32s of small values (zstd makes ~0.85 of them).
fn weights(seed: u64, len: usize) -> Vec<u8> {
    let raw = noise(seed, len);
    raw.chunks(4)
        .flat_map(|c| {
            let v =
                (u32::from_le_bytes([c[0], c[1], c.get(2).copied().unwrap_or(0), 0]) as f32 / 16_777_216.0 - 0.5) * 0.2;
            v.to_le_bytes().into_iter().take(c.len())
        })
        .collect()
}

fn options(dir: &Path) -> PackOptions {
    PackOptions::new(dir)
}

/// Save `files` into `store`, referencing what `maps` hold; the map, the files' hashes and sizes,
/// the figures and the time.
fn save(
    store: &dyn PackStore,
    maps: &[&ContentMap],
    chunking: Chunking,
    tmp: &Path,
    files: &[(String, Vec<u8>)],
) -> (ContentMap, Vec<Wanted>, SaveStats, Duration) {
    let start = Instant::now();
    let index = ContentIndex::build(maps, &[], store).unwrap();
    let (map, wanted, stats) = std::thread::scope(|scope| {
        let mut saver = ContentSaver::new(scope, &index, store, chunking, options(tmp)).unwrap();
        let wanted: Vec<Wanted> = files
            .iter()
            .map(|(_, bytes)| {
                let (hash, size) = saver.add_file(&bytes[..], bytes.len() as u64).unwrap();
                Wanted { hash, size }
            })
            .collect();
        let (map, stats) = saver.finish().unwrap();
        (map, wanted, stats)
    });
    (map, wanted, stats, start.elapsed())
}

fn pct(part: u64, whole: u64) -> String {
    format!("{:.2}%", part as f64 * 100.0 / whole as f64)
}

fn mb(n: u64) -> String {
    format!("{:.1} MB", n as f64 / MB as f64)
}

fn chunking(base: &Path, size_mb: usize) {
    println!("## A {size_mb} MB file, then 1 MiB changed in its middle\n");
    println!(
        "| chunking (min/avg/max) | blobs | map | save 1 | overwritten: new bytes | uploaded | inserted: new bytes | uploaded |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let original = weights(1, size_mb * MB as usize);
    let mid = original.len() / 2;
    let mut overwritten = original.clone();
    overwritten[mid..mid + MIB].copy_from_slice(&weights(2, MIB));
    let mut inserted = original.clone();
    inserted.splice(mid..mid, weights(3, MIB));
    let candidates = [
        ("whole file", Chunking { whole_file_max: u64::MAX, ..Chunking::DEFAULT }),
        ("64 KiB / 256 KiB / 1 MiB", Chunking { whole_file_max: 1 << 20, min: 64 << 10, avg: 256 << 10, max: 1 << 20 }),
        ("256 KiB / 1 MiB / 4 MiB (default)", Chunking::DEFAULT),
        ("1 MiB / 4 MiB / 16 MiB", Chunking { whole_file_max: 16 << 20, min: 1 << 20, avg: 4 << 20, max: 16 << 20 }),
    ];
    for (name, chunking) in candidates {
        let dir = base.join("chunking");
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("tmp")).unwrap();
        let store = LocalPackStore::new(dir.join("packs"), "bench");
        let one = |data: &Vec<u8>| vec![("f".to_owned(), data.clone())];
        let (map, _, _, took) = save(&store, &[], chunking, &dir.join("tmp"), &one(&original));
        let (_, _, over, _) = save(&store, &[&map], chunking, &dir.join("tmp"), &one(&overwritten));
        let (_, _, ins, _) = save(&store, &[&map], chunking, &dir.join("tmp"), &one(&inserted));
        println!(
            "| {name} | {} | {} KB | {:.2} s | {} | {} | {} | {} |",
            map.blobs.len(),
            map.to_vec().len() / 1000,
            took.as_secs_f64(),
            mb(over.new_bytes),
            mb(over.uploaded),
            mb(ins.new_bytes),
            mb(ins.uploaded),
        );
        let _ = fs::remove_dir_all(&dir);
    }
    println!();
}

/// A tree of `n` files of `total` bytes: lognormal-ish sizes, 60% generated text, 40% half noise,
/// in Inductor's two-hex-digit directories.
fn tree(n: usize, total: u64) -> Vec<(String, Vec<u8>)> {
    let shape: Vec<f64> = noise(7, n * 8)
        .chunks(8)
        .map(|c| {
            let u = (u64::from_le_bytes(c.try_into().unwrap()) >> 11) as f64 / (1u64 << 53) as f64;
            // Roughly lognormal: exp of a sum of uniforms.
            (u * 4.0 - 2.0).exp() * (1.0 + u * u * 6.0)
        })
        .collect();
    let scale = total as f64 / shape.iter().sum::<f64>();
    shape
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let size = ((s * scale) as usize).max(1);
            (format!("{:02x}/c{i}.{}", i % 256, if i % 5 < 3 { "py" } else { "bin" }), content(i as u64, 0, size))
        })
        .collect()
}

/// File `i`'s content in version `v`.
fn content(i: u64, v: u64, size: usize) -> Vec<u8> {
    if i % 5 < 3 {
        let line = format!("def kernel_{i}_{v}(in_ptr0, out_ptr0, xnumel): # {}\n", i * 31 + v);
        let mut text = line.repeat(size / line.len() + 1).into_bytes();
        text.truncate(size);
        // Some variety, so that it compresses like source, not like one repeated line.
        for (k, b) in noise(i * 1000 + v, size / 16).into_iter().enumerate() {
            text[(k * 16 + 7) % size] = b'a' + b % 26;
        }
        text
    } else {
        let mut bytes = noise(i * 1000 + v, size);
        for b in bytes.iter_mut().skip(1).step_by(2) {
            *b = 0;
        }
        bytes
    }
}

/// What the entry itself costs besides packs: its content map and its manifest, compressed.
fn entry_bytes(map: &ContentMap, files: &[(String, Vec<u8>)], wanted: &[Wanted]) -> u64 {
    let manifest: Vec<serde_json::Value> = files
        .iter()
        .zip(wanted)
        .map(|((path, _), w)| {
            serde_json::json!({"path": format!("0/{path}"), "kind": "file", "mode": 420, "size": w.size, "sha256": w.hash.to_hex()})
        })
        .collect();
    let manifest = serde_json::to_vec(&serde_json::json!({"entries": manifest})).unwrap();
    (zstd::bulk::compress(&map.to_vec(), 3).unwrap().len() + zstd::bulk::compress(&manifest, 3).unwrap().len()) as u64
}

fn dir_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir).map_or(0, |d| d.flatten().map(|e| e.metadata().unwrap().len()).sum())
}

fn trees(base: &Path, n: usize, total: u64) {
    let dir = base.join("tree");
    fs::create_dir_all(dir.join("tmp")).unwrap();
    let store = LocalPackStore::new(dir.join("packs"), "bench");
    let mut files = tree(n, total);
    let tree_bytes: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
    let today: u64 = {
        // Today's entry: the whole tree in one zstd stream (the tar headers aside).
        let mut all = Vec::with_capacity(tree_bytes as usize);
        files.iter().for_each(|(_, b)| all.extend_from_slice(b));
        zstd::bulk::compress(&all, 3).unwrap().len() as u64
    };
    println!("## A tree of {n} files, {}: ten keys, each with 1% of the files changed\n", mb(tree_bytes));
    println!("| key | changed files | uploaded | of the tree | found stored | save | store (packs + entries) |");
    println!("|---|---|---|---|---|---|---|");
    let mut maps: Vec<ContentMap> = Vec::new();
    let mut entries = 0u64;
    let mut first_store = 0;
    let mut last = None;
    let changed_per_key = n / 100;
    for key in 1..=10u64 {
        let mut changed = 0;
        if key > 1 {
            for k in 0..changed_per_key {
                let i = ((key as usize * 7919 + k * 104_729) % n) as u64;
                let size = files[i as usize].1.len();
                files[i as usize].1 = content(i, key, size);
                changed += 1;
            }
        }
        let previous: Vec<&ContentMap> = maps.last().into_iter().collect();
        let (map, wanted, stats, took) = save(&store, &previous, Chunking::DEFAULT, &dir.join("tmp"), &files);
        entries += entry_bytes(&map, &files, &wanted);
        let stored = dir_bytes(&dir.join("packs")) + entries;
        if key == 1 {
            first_store = stored;
        }
        println!(
            "| {key} | {changed} | {} | {} | {} | {:.2} s | {} |",
            mb(stats.uploaded),
            pct(stats.uploaded, tree_bytes),
            mb(stats.found_bytes),
            took.as_secs_f64(),
            mb(stored)
        );
        last = Some((map.clone(), wanted));
        maps.push(map);
    }
    let store_now = dir_bytes(&dir.join("packs")) + entries;
    println!(
        "\nStore after ten keys: {} = {:.2}× one entry ({}); today's whole archives: ten of {} = {}.\n",
        mb(store_now),
        store_now as f64 / first_store as f64,
        mb(first_store),
        mb(today),
        mb(10 * today)
    );
    let (map, wanted) = last.unwrap();
    restores(&dir, &store, &map, &wanted, &files);
    let _ = fs::remove_dir_all(&dir);
}

/// Restore `files` (`wanted`) into `target`: files in place kept, the rest fetched into staging
/// beside them and moved into place; the files fetched.
fn restore(
    store: &dyn PackStore,
    map: &ContentMap,
    wanted: &[Wanted],
    files: &[(String, Vec<u8>)],
    target: &Path,
    threads: usize,
) -> usize {
    let open = |i: usize| match fs::File::open(target.join(&files[i].0)) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    };
    let kept = in_place_all(wanted, threads, &open).unwrap();
    let needed: Vec<usize> = (0..wanted.len()).filter(|&i| !kept[i]).collect();
    if needed.is_empty() {
        return 0;
    }
    let want: Vec<Wanted> = needed.iter().map(|&i| wanted[i]).collect();
    let plan = FetchPlan::new(map, &want, store.ranges(), Reads::DEFAULT).unwrap();
    fs::create_dir_all(target).unwrap();
    let staging = target.join(".staging");
    fs::create_dir_all(&staging).unwrap();
    // Staged as the archive stages: the tree's own directories, beside the target.
    let dirs: std::collections::BTreeSet<&Path> =
        needed.iter().filter_map(|&i| Path::new(&files[i].0).parent()).collect();
    for d in &dirs {
        fs::create_dir_all(staging.join(d)).unwrap();
    }
    let sink = FileSink::new(want.len(), |k| {
        fs::OpenOptions::new().read(true).write(true).create_new(true).open(staging.join(&files[needed[k]].0))
    });
    fetch(store, map, &plan, &sink, threads).unwrap();
    drop(sink);
    for d in &dirs {
        fs::create_dir_all(target.join(d)).unwrap();
    }
    for &i in &needed {
        fs::rename(staging.join(&files[i].0), target.join(&files[i].0)).unwrap();
    }
    fs::remove_dir_all(&staging).unwrap();
    needed.len()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn restores(dir: &Path, store: &dyn PackStore, map: &ContentMap, wanted: &[Wanted], files: &[(String, Vec<u8>)]) {
    println!("## Restores of the last key ({} files)\n", files.len());
    println!("| restore | threads | files fetched | median of 3 | vs into an empty directory |");
    println!("|---|---|---|---|---|");
    let target = dir.join("target");
    let check = |t: &Path| {
        for (path, bytes) in files {
            assert!(fs::read(t.join(path)).unwrap() == *bytes, "{path} differs");
        }
    };
    let mut empty_time = Duration::ZERO;
    for threads in [1, 4] {
        let mut times = Vec::new();
        let mut fetched = 0;
        for _ in 0..3 {
            let _ = fs::remove_dir_all(&target);
            let start = Instant::now();
            fetched = restore(store, map, wanted, files, &target, threads);
            times.push(start.elapsed());
            check(&target);
        }
        let t = median(times);
        if threads == 4 {
            empty_time = t;
        }
        println!("| into an empty directory | {threads} | {fetched} | {:.3} s | |", t.as_secs_f64());
    }
    for threads in [1, 4] {
        let mut times = Vec::new();
        for _ in 0..3 {
            let start = Instant::now();
            assert_eq!(restore(store, map, wanted, files, &target, threads), 0);
            times.push(start.elapsed());
        }
        let full = median(times);
        println!(
            "| onto a tree holding every file | {threads} | 0 | {:.3} s | {:.1}× faster |",
            full.as_secs_f64(),
            empty_time.as_secs_f64() / full.as_secs_f64()
        );
    }
    let mut times = Vec::new();
    let mut fetched = 0;
    for round in 0..3 {
        for (k, (path, _)) in files.iter().enumerate() {
            if (k + round) % 10 == 0 {
                let _ = fs::remove_file(target.join(path));
            }
        }
        let start = Instant::now();
        fetched = restore(store, map, wanted, files, &target, 4);
        times.push(start.elapsed());
        check(&target);
    }
    let some = median(times);
    println!(
        "| onto a tree missing 10% | 4 | {fetched} | {:.3} s | {:.1}× faster |",
        some.as_secs_f64(),
        empty_time.as_secs_f64() / some.as_secs_f64()
    );
    // The floor of a check that hashes every byte: SHA-256 of the tree's bytes in memory.
    let mut times = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        for (_, bytes) in files {
            std::hint::black_box(Hash::of(bytes));
        }
        times.push(start.elapsed());
    }
    println!("\nSHA-256 of the tree's bytes in memory, one thread: {:.3} s.\n", median(times).as_secs_f64());
}
