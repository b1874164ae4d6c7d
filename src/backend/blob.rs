//! Azure block blobs, written the one way both of their writers write them: the GitHub cache
//! service v2 (at a signed URL) and the Azure Blob store. An archive that fits in one block goes
//! up as a single Put Blob, a larger one as Put Block (several in flight) and one Put Block List.
//! How one request reaches the blob is the writer's ([`BlobTarget`]); which requests, this
//! module's.
//!
//! Two writers racing on one name each stage their own blocks (uncommitted blocks belong to the
//! blob name, not to a writer; `BlockIds` differ per upload), so the winner's list never picks
//! up a block of the loser. Nothing is cleaned up after a failed or lost upload: Azure discards
//! uncommitted blocks when a list is committed, or after a week.

use super::BackendError;
use super::upload::{BlockIds, BlockSink, BoxFuture, Finished};
use bytes::Bytes;
use reqwest::header::{CONTENT_TYPE, HeaderName};

/// The Azure Blob REST version (`x-ms-version`) of every blob request, at a signed URL or not.
pub const AZURE_VERSION: &str = "2025-01-05";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    PutBlob,
    PutBlock,
    PutBlockList,
}

impl Step {
    /// The request's name in Azure's documentation.
    pub fn name(self) -> &'static str {
        match self {
            Step::PutBlob => "Put Blob",
            Step::PutBlock => "Put Block",
            Step::PutBlockList => "Put Block List",
        }
    }
}

/// One `PUT` to the blob.
pub struct BlobRequest<'a> {
    pub step: Step,
    /// Added to the blob's URL.
    pub query: &'a [(&'a str, &'a str)],
    /// Besides the `x-ms-version` and any authorization, which are the target's.
    pub headers: &'a [(HeaderName, &'a str)],
    pub body: Bytes,
}

/// Where a block blob's requests go: each sent, retried when transient; an error answer becomes
/// a [`BackendError`].
pub trait BlobTarget: Send + Sync + 'static {
    fn put<'a>(&'a self, request: BlobRequest<'a>) -> BoxFuture<'a, Result<(), BackendError>>;
}

/// One upload to one block blob: the `BlockSink` of its writer, then [`BlockBlob::create`].
pub struct BlockBlob<T: BlobTarget> {
    target: T,
    /// Headers the requests that create the blob carry besides their own: the Azure store's
    /// `If-None-Match: *` and metadata.
    creating: Vec<(HeaderName, String)>,
    /// Sets this upload's block ids apart from another writer's.
    ids: BlockIds,
}

impl<T: BlobTarget> BlockBlob<T> {
    pub fn new(target: T, creating: Vec<(HeaderName, String)>) -> Self {
        Self { target, creating, ids: BlockIds::new() }
    }

    pub fn target(&self) -> &T {
        &self.target
    }

    /// Create the blob from what the writer left: a small archive by Put Blob, else the blocks
    /// it staged by Put Block List. Its size in bytes.
    pub async fn create(&self, finished: Finished) -> Result<u64, BackendError> {
        match finished {
            Finished::Small(data) => {
                let size = data.len() as u64;
                let own = [
                    (HeaderName::from_static("x-ms-blob-type"), "BlockBlob"),
                    (CONTENT_TYPE, "application/octet-stream"),
                ];
                let headers = self.with_creating(&own);
                let request = BlobRequest { step: Step::PutBlob, query: &[], headers: &headers, body: data };
                self.target.put(request).await?;
                Ok(size)
            }
            Finished::Blocks { blocks, total } => {
                let mut xml = String::from(r#"<?xml version="1.0" encoding="utf-8"?><BlockList>"#);
                for index in 0..blocks {
                    xml.push_str(&format!("<Latest>{}</Latest>", self.ids.id(index)));
                }
                xml.push_str("</BlockList>");
                let headers = self.with_creating(&[(CONTENT_TYPE, "application/xml")]);
                let query = [("comp", "blocklist")];
                let body = Bytes::from(xml);
                self.target
                    .put(BlobRequest { step: Step::PutBlockList, query: &query, headers: &headers, body })
                    .await?;
                Ok(total)
            }
        }
    }

    /// A creating request's own headers, then [`BlockBlob::creating`].
    fn with_creating<'a>(&'a self, own: &[(HeaderName, &'a str)]) -> Vec<(HeaderName, &'a str)> {
        let creating = self.creating.iter().map(|(name, value)| (name.clone(), value.as_str()));
        own.iter().cloned().chain(creating).collect()
    }
}

impl<T: BlobTarget> BlockSink for BlockBlob<T> {
    fn put_block(&self, index: usize, _offset: u64, data: Bytes) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let id = self.ids.id(index);
            let query = [("comp", "block"), ("blockid", id.as_str())];
            self.target.put(BlobRequest { step: Step::PutBlock, query: &query, headers: &[], body: data }).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// One request a target was asked to send: the step, the query, the headers and the body.
    type Request = (Step, String, Vec<String>, Bytes);

    /// What a target was asked to send.
    #[derive(Default)]
    struct Recorded(Mutex<Vec<Request>>);

    impl BlobTarget for Recorded {
        fn put<'a>(&'a self, request: BlobRequest<'a>) -> BoxFuture<'a, Result<(), BackendError>> {
            let BlobRequest { step, query, headers, body } = request;
            let query = query.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
            let headers = headers.iter().map(|(n, v)| format!("{n}: {v}")).collect();
            self.0.lock().unwrap().push((step, query, headers, body));
            Box::pin(async { Ok(()) })
        }
    }

    fn block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
    }

    #[test]
    fn a_small_blob_is_one_put_blob_and_a_large_one_its_blocks_then_their_list() {
        let creating = vec![(reqwest::header::IF_NONE_MATCH, "*".to_owned())];
        let blob = BlockBlob::new(Recorded::default(), creating);
        assert_eq!(block_on(blob.create(Finished::Small(Bytes::from_static(b"abc")))).unwrap(), 3);
        block_on(blob.put_block(0, 0, Bytes::from_static(b"x"))).unwrap();
        block_on(blob.put_block(1, 1, Bytes::from_static(b"y"))).unwrap();
        assert_eq!(block_on(blob.create(Finished::Blocks { blocks: 2, total: 2 })).unwrap(), 2);
        let sent = blob.target().0.lock().unwrap();
        let (step, query, headers, body) = &sent[0];
        assert_eq!((*step, query.as_str(), body.as_ref()), (Step::PutBlob, "", &b"abc"[..]));
        assert_eq!(
            headers,
            &["x-ms-blob-type: BlockBlob", "content-type: application/octet-stream", "if-none-match: *"]
        );
        let (id0, id1) = (blob.ids.id(0), blob.ids.id(1));
        assert_eq!(
            (sent[1].0, sent[1].1.clone(), sent[1].2.len()),
            (Step::PutBlock, format!("comp=block&blockid={id0}"), 0)
        );
        assert_eq!(sent[2].1, format!("comp=block&blockid={id1}"));
        let (step, query, headers, body) = &sent[3];
        assert_eq!((*step, query.as_str()), (Step::PutBlockList, "comp=blocklist"));
        assert_eq!(headers, &["content-type: application/xml", "if-none-match: *"]);
        let list = format!(
            r#"<?xml version="1.0" encoding="utf-8"?><BlockList><Latest>{id0}</Latest><Latest>{id1}</Latest></BlockList>"#
        );
        assert_eq!(body.as_ref(), list.as_bytes());
    }
}
