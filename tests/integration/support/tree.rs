//! Files and trees: writing them, content to fill them with, and a tree's full record (kind, mode,
//! size and digest of every path) to compare before and after.

use std::collections::BTreeMap;
use std::path::Path;

pub fn write(path: &Path, data: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, data).unwrap();
}

/// `len` pseudo-random, barely compressible bytes (xorshift64 from `seed`).
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `words` little-endian `u32`s counting up from 0: compressible, yet no two words alike.
pub fn counting(words: u32) -> Vec<u8> {
    (0..words).flat_map(u32::to_le_bytes).collect()
}

/// `size` bytes from /dev/urandom in a new file `path`, streamed (sizes up to gigabytes).
pub fn random_file(path: &Path, size: u64) {
    use std::io::{Read, Write};
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut urandom = std::fs::File::open("/dev/urandom").unwrap().take(size);
    std::io::copy(&mut urandom, &mut f).unwrap();
    f.flush().unwrap();
}

/// What a generator leaves in `ws/out`: a model of `words` words and its expected output.
pub fn generate_model(ws: &Path, words: u32) {
    write(&ws.join("out/model.pth"), &counting(words));
    write(&ws.join("out/x.expected"), b"expected");
}

pub fn set_exec(path: &Path, exec: bool) {
    use std::os::unix::fs::PermissionsExt;
    let mode = if exec { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// What a tree holds: relative path → kind, mode and content (or link target).
pub fn snapshot(root: &Path) -> BTreeMap<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    if std::fs::symlink_metadata(root).is_err() {
        return out;
    }
    for entry in walkdir::WalkDir::new(root).sort_by_file_name() {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let meta = entry.path().symlink_metadata().unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        let value = if meta.file_type().is_symlink() {
            format!("symlink -> {}", std::fs::read_link(entry.path()).unwrap().display())
        } else if meta.is_dir() {
            format!("dir {mode:o}")
        } else {
            use sha2::Digest;
            let mut hasher = sha2::Sha256::new();
            let mut file = std::fs::File::open(entry.path()).unwrap();
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = std::io::Read::read(&mut file, &mut buf).unwrap();
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
            }
            let digest = hex::encode(hasher.finalize());
            format!("file {mode:o} {} {digest}", meta.len())
        };
        out.insert(rel, value);
    }
    out
}

/// Held by the tests that write gigabytes, so that no two of them fill the disk at once (they were
/// separate test binaries, which run one after another). A test that writes about `gib` GiB
/// under the temporary directory fails at once, saying so, where less is free: a full disk
/// otherwise fails it later with a message about something else.
pub fn one_disk_heavy_test_at_a_time(gib: u64) -> std::sync::MutexGuard<'static, ()> {
    static DISK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = DISK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let tmp = std::env::temp_dir();
    if let Some(free) = free_gib(&tmp) {
        assert!(
            free >= gib as f64,
            "this test writes about {gib} GiB under {}: only {free:.1} GiB are free",
            tmp.display()
        );
    }
    guard
}

/// The space free to this user under `dir` (`df`'s answer; `None` where `df` gives none).
pub fn free_gib(dir: &Path) -> Option<f64> {
    let out = std::process::Command::new("df").args(["-Pk"]).arg(dir).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let kib: f64 = text.lines().nth(1)?.split_whitespace().nth(3)?.parse().ok()?;
    Some(kib / (1024.0 * 1024.0))
}

/// Clears the immutable flag it set, whatever the test does.
pub struct Immutable(std::path::PathBuf);

impl Immutable {
    pub fn set(path: &Path) -> Option<Self> {
        let ok = std::process::Command::new("chattr").arg("+i").arg(path).status().is_ok_and(|s| s.success());
        ok.then(|| Immutable(path.to_owned()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}
