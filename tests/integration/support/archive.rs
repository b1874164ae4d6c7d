//! Archives and manifest lines made by hand, for entries no honest packer would write.

use exact_cache::manifest::{EntryKind, ManifestEntry};
use sha2::Digest;

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

/// The manifest line of a file member `path` holding `data` (mode 644).
pub fn file_entry(path: &str, data: &[u8]) -> ManifestEntry {
    ManifestEntry {
        path: path.into(),
        kind: EntryKind::File,
        mode: 0o644,
        size: data.len() as u64,
        sha256: Some(hex::encode(sha2::Sha256::digest(data))),
        target: None,
    }
}

/// The manifest line of a directory member `path` (mode 755).
pub fn dir_entry(path: &str) -> ManifestEntry {
    ManifestEntry { path: path.into(), kind: EntryKind::Dir, mode: 0o755, size: 0, sha256: None, target: None }
}

/// The manifest line of a symlink member `path` pointing at `target` (mode 777).
pub fn link_entry(path: &str, target: &str) -> ManifestEntry {
    ManifestEntry {
        path: path.into(),
        kind: EntryKind::Symlink,
        mode: 0o777,
        size: 0,
        sha256: None,
        target: Some(target.into()),
    }
}
