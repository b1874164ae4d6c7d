//! Shared helpers for integration tests: files, trees, the binary, and hand-made archives.
#![allow(dead_code)]

use std::path::Path;

pub fn write(path: &Path, data: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, data).unwrap();
}

pub fn set_exec(path: &Path, exec: bool) {
    use std::os::unix::fs::PermissionsExt;
    let mode = if exec { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// What a tree holds: relative path → kind, mode and content (or link target).
pub fn snapshot(root: &Path) -> std::collections::BTreeMap<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = std::collections::BTreeMap::new();
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
            let digest = hex::encode(sha2::Sha256::digest(std::fs::read(entry.path()).unwrap()));
            format!("file {mode:o} {} {digest}", meta.len())
        };
        out.insert(rel, value);
    }
    out
}

/// Raw tar bytes, written header by header so tests can make archives no honest packer would.
#[derive(Default)]
pub struct TarBuilder {
    pub bytes: Vec<u8>,
}

impl TarBuilder {
    pub fn entry(&mut self, name: &str, kind: tar::EntryType, mode: u32, data: &[u8], link: Option<&str>) -> &mut Self {
        self.entry_with_size(name, kind, mode, data, link, data.len() as u64)
    }

    /// An entry whose header claims `size` bytes, whatever `data` holds.
    pub fn entry_with_size(
        &mut self,
        name: &str,
        kind: tar::EntryType,
        mode: u32,
        data: &[u8],
        link: Option<&str>,
        size: u64,
    ) -> &mut Self {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_mtime(1_700_000_000);
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(link) = link {
            h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        h.set_cksum();
        self.bytes.extend_from_slice(h.as_bytes());
        self.bytes.extend_from_slice(data);
        let pad = (512 - data.len() % 512) % 512;
        self.bytes.extend(std::iter::repeat_n(0u8, pad));
        self
    }

    pub fn file(&mut self, name: &str, data: &[u8]) -> &mut Self {
        self.entry(name, tar::EntryType::Regular, 0o644, data, None)
    }

    pub fn finish(&mut self) -> Vec<u8> {
        let mut bytes = std::mem::take(&mut self.bytes);
        bytes.extend(std::iter::repeat_n(0u8, 1024));
        bytes
    }
}
