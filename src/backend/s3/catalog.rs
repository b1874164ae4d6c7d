//! The S3 store's catalog: its entries listed (one listing, then a `HEAD` of each for the
//! metadata a listing does not carry) and deleted one object at a time.

use super::S3Backend;
use super::client::META;
use crate::backend::catalog::{Catalog, CatalogError, Listed};
use crate::backend::entries::{self, forbidden};
use crate::backend::{Backend, BackendError, ErrorKind};
use bytes::Bytes;
use object_store::path::Path as StorePath;
use reqwest::Method;

impl Catalog for S3Backend {
    fn describe(&self) -> String {
        Backend::describe(self)
    }

    /// Every entry whose key starts with `key_prefix` (on `r#ref` when given), newest first, with
    /// the ref and creation time it was saved with (one `HEAD` each).
    fn list(&self, key_prefix: &str, r#ref: Option<&str>) -> Result<Vec<Listed>, CatalogError> {
        let client = self.client();
        let catalog_error = |e: BackendError| forbidden(e, "list".into(), "s3:ListBucket");
        let prefix = format!("{}{key_prefix}", client.settings.prefix);
        let objects = client.http.rt().block_on(client.list_objects(&prefix)).map_err(catalog_error)?;
        let mut found = Vec::new();
        for (location, size, modified) in objects {
            let Some(parts) = entries::split_name(&location, &prefix, key_prefix) else { continue };
            let path = StorePath::from(location.as_str());
            let head = client.http.rt().block_on(client.call(
                "read the entry's metadata",
                Method::HEAD,
                &path,
                &[],
                &[],
                Bytes::new(),
            ));
            let headers = match head {
                Ok((headers, _)) => headers,
                Err(e) if e.kind == ErrorKind::NotFound => continue,
                Err(e) => return Err(catalog_error(e)),
            };
            let meta = |field: &str| entries::header(&headers, &format!("{META}{field}"));
            found.push(entries::listed(&location, parts, size, modified, meta));
        }
        Ok(entries::newest_on(found, r#ref))
    }

    fn delete(&self, entry: &Listed) -> Result<(), CatalogError> {
        let client = self.client();
        if !entry.id.starts_with(&client.settings.prefix) {
            return Err(CatalogError::NotLocalEntry { id: entry.id.clone() });
        }
        let path = StorePath::from(entry.id.as_str());
        match client.http.rt().block_on(client.call("delete", Method::DELETE, &path, &[], &[], Bytes::new())) {
            Ok(_) => Ok(()),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(forbidden(e, format!("delete `{}`", entry.id), "s3:DeleteObject")),
        }
    }
}
