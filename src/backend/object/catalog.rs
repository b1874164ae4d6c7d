//! An object store's catalog, written once over its client: the entries of one listing (their
//! metadata from the listing where it carries it, else from each object), newest first, and a
//! delete of one object; a refusal names the permission the store's credentials lack.

use super::backend::ObjectBackend;
use super::client::ObjectClient;
use crate::backend::catalog::{Catalog, CatalogError, Listed};
use crate::backend::entries::{self, forbidden};
use crate::backend::{Backend, ErrorKind};

impl<C: ObjectClient> Catalog for ObjectBackend<C> {
    fn describe(&self) -> String {
        Backend::describe(self)
    }

    /// Every entry whose key starts with `key_prefix` (on `r#ref` when given), newest first, with
    /// the ref and creation time it was saved with.
    fn list(&self, key_prefix: &str, r#ref: Option<&str>) -> Result<Vec<Listed>, CatalogError> {
        let client = self.client();
        let refused = |e| forbidden(e, "list".into(), C::NEEDS.list);
        let prefix = format!("{}{key_prefix}", self.prefix());
        let mut found = Vec::new();
        // Packs are no entries (a key never holds a `/`).
        let packs = format!("{}{}", self.prefix(), super::PACKS_DIR);
        for object in self.block_on(client.list(&prefix)).map_err(refused)? {
            if object.name.starts_with(&packs) {
                continue;
            }
            let Some(parts) = entries::split_name(&object.name, &prefix, key_prefix) else { continue };
            let metadata = match object.metadata {
                Some(metadata) => metadata,
                None => match self.block_on(client.metadata(&object.name)) {
                    Ok(Some(metadata)) => metadata,
                    Ok(None) => continue,
                    Err(e) => return Err(refused(e)),
                },
            };
            found.push(entries::listed(&object.name, parts, object.size, object.modified, |f| metadata.get(f)));
        }
        Ok(entries::newest_on(found, r#ref))
    }

    fn delete(&self, entry: &Listed) -> Result<(), CatalogError> {
        let client = self.client();
        if !entry.id.starts_with(self.prefix()) {
            return Err(CatalogError::NotLocalEntry { id: entry.id.clone() });
        }
        match self.block_on(client.delete(&entry.id)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(forbidden(e, format!("delete `{}`", entry.id), C::NEEDS.delete)),
        }
    }
}
