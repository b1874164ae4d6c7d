//! A save to the Azure Blob store: a block blob ([`crate::backend::blob`]) whose every request
//! goes through the store's client (authorized, retried, its errors read as Azure's), created
//! only if no blob has its name yet (`If-None-Match: *`), with the entry's metadata.

use super::client::{Client, META};
use crate::backend::blob::{BlobTarget, BlockBlob, Step};
use crate::backend::upload::{BlockUpload, BlockWriter, BoxFuture, CommitBlocks, Finished};
use crate::backend::{BackendError, Committed, ErrorKind, Upload, entries};
use crate::ids::{Key, Version};
use bytes::Bytes;
use reqwest::Method;
use reqwest::header::{HeaderName, IF_NONE_MATCH};
use std::sync::Arc;

/// Start the save of `key` and `version` as the blob `name`, saved on `current_ref`.
pub(super) fn start(
    client: &Arc<Client>,
    name: String,
    current_ref: Option<&str>,
    key: &Key,
    version: &Version,
) -> Box<dyn Upload> {
    let metadata = entries::metadata(current_ref, version).into_iter().map(|(field, value)| {
        let name = HeaderName::try_from(format!("{META}{field}")).expect("a metadata field is a header name");
        (name, value)
    });
    let creating = std::iter::once((IF_NONE_MATCH, "*".to_owned())).chain(metadata).collect();
    let blob = Arc::new(BlockBlob::new(Blob { client: Arc::clone(client), name }, creating));
    let writer = BlockWriter::new(Arc::clone(&client.http), blob.clone(), true);
    Box::new(BlockUpload::new(writer, Create { blob, key: key.to_owned(), version: version.to_owned() }))
}

/// One blob of the container, each request authorized by the client.
struct Blob {
    client: Arc<Client>,
    name: String,
}

impl BlobTarget for Blob {
    fn put<'a>(
        &'a self,
        step: Step,
        query: &'a [(&'a str, &'a str)],
        headers: &'a [(HeaderName, &'a str)],
        body: Bytes,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let what = match step {
            Step::PutBlob => "save the entry",
            Step::PutBlock => "upload a block",
            Step::PutBlockList => "commit the entry",
        };
        Box::pin(
            async move { self.client.call(what, Method::PUT, Some(&self.name), query, headers, body).await.map(drop) },
        )
    }
}

/// The blob's creation, the entry's commit.
struct Create {
    blob: Arc<BlockBlob<Blob>>,
    key: Key,
    version: Version,
}

impl CommitBlocks for Create {
    /// A refused condition (`412`, or `409 BlobAlreadyExists`) means another writer's entry is
    /// there. So does any other failure of the commit after which the entry exists: a writer
    /// that committed first discarded this upload's blocks, which Azure may report as an
    /// invalid block list rather than as the condition.
    fn commit(self, finished: Finished) -> Result<Committed, BackendError> {
        let client = &self.blob.target().client;
        let created = client.http.rt().block_on(self.blob.create(finished));
        match created {
            Ok(_) => Ok(Committed::Saved),
            Err(e) if matches!(e.kind, ErrorKind::Precondition | ErrorKind::AlreadyExists) => Ok(Committed::Exists),
            Err(e) => match client.http.rt().block_on(client.lookup(&self.key, &self.version)) {
                Ok(Some(_)) => Ok(Committed::Exists),
                _ => Err(e),
            },
        }
    }
}
