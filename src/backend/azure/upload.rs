//! A save to the Azure Blob store: a block blob ([`crate::backend::blob`]) whose every request
//! goes through the store's client (authorized, retried, its errors read as Azure's), created
//! only if no blob has its name yet (`If-None-Match: *`), with the entry's metadata.

use super::client::{Client, META};
use crate::backend::blob::{BlobRequest, BlobTarget, BlockBlob, Step};
use crate::backend::object::{NewEntry, ObjectClient};
use crate::backend::upload::{BlockUpload, BlockWriter, BoxFuture, CommitBlocks, Finished};
use crate::backend::{BackendError, Committed, ErrorKind, Upload};
use crate::keys::{Key, Version};
use reqwest::Method;
use reqwest::header::IF_NONE_MATCH;
use std::sync::Arc;

/// Start the save of `entry` as a blob.
pub(super) fn start(client: &Arc<Client>, entry: NewEntry) -> Box<dyn Upload> {
    let metadata = entry.metadata_headers(META);
    let NewEntry { name, key, version, .. } = entry;
    let creating = std::iter::once((IF_NONE_MATCH, "*".to_owned())).chain(metadata).collect();
    let blob = Arc::new(BlockBlob::new(Blob { client: Arc::clone(client), name }, creating));
    let writer = BlockWriter::new(Arc::clone(&client.http), blob.clone(), true);
    Box::new(BlockUpload::new(writer, Create { blob, key, version }))
}

/// One blob of the container, each request authorized by the client.
struct Blob {
    client: Arc<Client>,
    name: String,
}

impl BlobTarget for Blob {
    fn put<'a>(&'a self, request: BlobRequest<'a>) -> BoxFuture<'a, Result<(), BackendError>> {
        let BlobRequest { step, query, headers, body } = request;
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
        let Blob { client, name } = self.blob.target();
        let created = client.http.rt().block_on(self.blob.create(finished));
        match created {
            Ok(_) => Ok(Committed::Saved),
            Err(e) if matches!(e.kind, ErrorKind::Precondition | ErrorKind::AlreadyExists) => Ok(Committed::Exists),
            Err(e) => match client.http.rt().block_on(client.lookup(name, &self.key, &self.version)) {
                Ok(Some(_)) => Ok(Committed::Exists),
                _ => Err(e),
            },
        }
    }
}
