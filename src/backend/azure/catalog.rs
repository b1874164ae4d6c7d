//! The Azure Blob store's catalog: its entries listed from one listing (the metadata comes with
//! it, `include=metadata`) and deleted one blob at a time.

use super::AzureBlobBackend;
use crate::backend::catalog::{Catalog, CatalogError, Listed};
use crate::backend::{Backend, ErrorKind, entries};
use bytes::Bytes;
use reqwest::Method;

impl Catalog for AzureBlobBackend {
    fn describe(&self) -> String {
        Backend::describe(self)
    }

    /// Every entry whose key starts with `key_prefix` (on `r#ref` when given), newest first, with
    /// the ref and creation time it was saved with (from the listing's metadata).
    fn list(&self, key_prefix: &str, r#ref: Option<&str>) -> Result<Vec<Listed>, CatalogError> {
        let client = self.client();
        let prefix = format!("{}{key_prefix}", client.settings.prefix);
        let blobs = self
            .block_on(client.list_blobs(&prefix))
            .map_err(|e| entries::forbidden(e, "list".into(), "Storage Blob Data Reader"))?;
        let found: Vec<Listed> = blobs
            .into_iter()
            .filter_map(|blob| {
                let name = blob.name?;
                let parts = entries::split_name(&name, &prefix, key_prefix)?;
                let modified =
                    chrono::DateTime::parse_from_rfc2822(&blob.properties.last_modified).map_or(0, |t| t.timestamp());
                let meta = |field: &str| blob.metadata.get(field).filter(|v| !v.is_empty()).cloned();
                Some(entries::listed(&name, parts, blob.properties.content_length, modified, meta))
            })
            .collect();
        Ok(entries::newest_on(found, r#ref))
    }

    fn delete(&self, entry: &Listed) -> Result<(), CatalogError> {
        let client = self.client();
        if !entry.id.starts_with(&client.settings.prefix) {
            return Err(CatalogError::NotLocalEntry { id: entry.id.clone() });
        }
        let deleted = self.block_on(client.call("delete", Method::DELETE, Some(&entry.id), &[], &[], Bytes::new()));
        match deleted {
            Ok(_) => Ok(()),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(entries::forbidden(e, format!("delete `{}`", entry.id), "Storage Blob Data Contributor")),
        }
    }
}
