//! The local store's catalog: its `entries/` directory listed (each entry with the ref and last
//! use its record keeps; only plain files, never opened) and deleted from, record and all.

use super::LocalBackend;
use super::meta;
use crate::backend::Backend;
use crate::backend::catalog::{Catalog, CatalogError, Listed};
use crate::keys::{Key, Version};
use std::fs;
use std::io;
use std::time::{Duration, SystemTime};

fn seconds(t: SystemTime) -> Duration {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default()
}

impl Catalog for LocalBackend {
    fn describe(&self) -> String {
        Backend::describe(self)
    }

    /// Every entry of the prefix (on `r#ref` when given), newest first by creation, which is
    /// its file's modification time (an entry is never written again).
    fn list(&self, key_prefix: &str, r#ref: Option<&str>) -> Result<Vec<Listed>, CatalogError> {
        let dir = self.root().join("entries");
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(CatalogError::Local { what: "list", path: dir, source }),
        };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some((key, version)) = name.split_once('@') else { continue };
            if !key.starts_with(key_prefix) {
                continue;
            }
            // A link, a FIFO or a directory is nothing a save made: never opened, not listed.
            if !entry.file_type().is_ok_and(|t| t.is_file()) {
                crate::runner::warn_later(&format!(
                    "local cache `{}`: ignoring `entries/{name}`, which is not a plain file of the store",
                    self.root().display()
                ));
                continue;
            }
            let file = entry.metadata().ok();
            let modified = file.as_ref().and_then(|m| m.modified().ok()).map(seconds).unwrap_or_default();
            let record = meta::read(self.root(), &name);
            let listed = Listed {
                id: name.clone(),
                key: Key::from(key),
                version: Version::from(version),
                r#ref: record.saved_ref,
                created: modified.as_secs() as i64,
                last_used: record.last_used.map(|t| seconds(t).as_secs() as i64),
                size: file.map_or(0, |m| m.len()),
            };
            if listed.is_on(r#ref) {
                found.push((modified, listed));
            }
        }
        // Newest first, by the full-precision modification time.
        found.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
        Ok(found.into_iter().map(|(_, listed)| listed).collect())
    }

    fn delete(&self, entry: &Listed) -> Result<(), CatalogError> {
        if entry.id.contains('/') || entry.id.starts_with('.') {
            return Err(CatalogError::NotLocalEntry { id: entry.id.clone() });
        }
        let path = self.root().join("entries").join(&entry.id);
        fs::remove_file(&path).map_err(|source| CatalogError::Local { what: "delete", path, source })?;
        meta::remove(self.root(), &entry.id);
        Ok(())
    }
}
