//! A save as a block blob: a small archive in one Put Blob, a larger one as Put Block (several
//! in flight) and one Put Block List, each creating the blob only if it does not exist
//! (`If-None-Match: *`), with the entry's metadata.
//!
//! Block ids are the Azure SDK's ([`BlockIds`]), with a random UUID per upload: two writers
//! racing on one name each stage their own blocks (uncommitted blocks belong to the blob name,
//! not to a writer), so the winner's list never picks up a block of the loser. Nothing is cleaned up after a failed or
//! lost upload: Azure discards uncommitted blocks when a list is committed, or after a week.

use super::client::Client;
use crate::backend::upload::{BlockIds, BlockSink, BlockWriter, BoxFuture, Finished};
use crate::backend::{BackendError, Committed, ErrorKind, Upload};
use crate::ids::{Key, Version};
use bytes::Bytes;
use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, HeaderName, IF_NONE_MATCH};
use std::io::{self, Write};
use std::sync::Arc;

/// The blocks of one upload to one blob name.
pub(super) struct BlobSink {
    client: Arc<Client>,
    name: String,
    /// `x-ms-meta-*` headers and their values.
    metadata: Vec<(HeaderName, String)>,
    /// Sets this upload's block ids apart from another writer's.
    ids: BlockIds,
}

impl BlobSink {
    pub fn new(client: Arc<Client>, name: String, metadata: Vec<(HeaderName, String)>) -> Self {
        Self { client, name, metadata, ids: BlockIds::new() }
    }

    fn block_id(&self, index: usize) -> String {
        self.ids.id(index)
    }

    /// Create the blob from `body` (Put Blob with `query` empty, or Put Block List), only if
    /// no blob has its name yet.
    async fn create(
        &self,
        what: &str,
        query: &[(&str, &str)],
        content_type: &str,
        body: Bytes,
    ) -> Result<(), BackendError> {
        let mut headers: Vec<(HeaderName, &str)> = vec![(IF_NONE_MATCH, "*"), (CONTENT_TYPE, content_type)];
        if query.is_empty() {
            headers.push((HeaderName::from_static("x-ms-blob-type"), "BlockBlob"));
        }
        headers.extend(self.metadata.iter().map(|(name, value)| (name.clone(), value.as_str())));
        self.client.call(what, Method::PUT, Some(&self.name), query, &headers, body).await.map(drop)
    }

    async fn put_blob(&self, data: Bytes) -> Result<(), BackendError> {
        self.create("save the entry", &[], "application/octet-stream", data).await
    }

    async fn put_block_list(&self, blocks: usize) -> Result<(), BackendError> {
        let mut xml = String::from(r#"<?xml version="1.0" encoding="utf-8"?><BlockList>"#);
        for index in 0..blocks {
            xml.push_str(&format!("<Latest>{}</Latest>", self.block_id(index)));
        }
        xml.push_str("</BlockList>");
        self.create("commit the entry", &[("comp", "blocklist")], "application/xml", Bytes::from(xml)).await
    }
}

impl BlockSink for BlobSink {
    fn put_block(&self, index: usize, _offset: u64, data: Bytes) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let id = self.block_id(index);
            let query = [("comp", "block"), ("blockid", id.as_str())];
            self.client.call("upload a block", Method::PUT, Some(&self.name), &query, &[], data).await.map(drop)
        })
    }
}

pub(super) struct AzureUpload {
    pub sink: Arc<BlobSink>,
    pub writer: Option<BlockWriter>,
    pub key: Key,
    pub version: Version,
}

impl Write for AzureUpload {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.as_mut().expect("open until commit").write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Upload for AzureUpload {
    /// A refused condition (`412`, or `409 BlobAlreadyExists`) means another writer's entry is
    /// there. So does any other failure of the commit after which the entry exists: a writer
    /// that committed first discarded this upload's blocks, which Azure may report as an
    /// invalid block list rather than as the condition.
    fn commit(mut self: Box<Self>) -> Result<Committed, BackendError> {
        let writer = self.writer.take().expect("committed once");
        let http = Arc::clone(&self.sink.client.http);
        let created = match writer.finish()? {
            Finished::Small(data) => http.rt().block_on(self.sink.put_blob(data)),
            Finished::Blocks { blocks, .. } => http.rt().block_on(self.sink.put_block_list(blocks)),
        };
        match created {
            Ok(()) => Ok(Committed::Saved),
            Err(e) if matches!(e.kind, ErrorKind::Precondition | ErrorKind::AlreadyExists) => Ok(Committed::Exists),
            Err(e) => match http.rt().block_on(self.sink.client.lookup(&self.key, &self.version)) {
                Ok(Some(_)) => Ok(Committed::Exists),
                _ => Err(e),
            },
        }
    }
}
