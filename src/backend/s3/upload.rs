//! A save to the S3 store: a multipart upload to the entry's final name, its parts several in
//! flight, completed only if no object has the name yet (`If-None-Match: *`), and aborted on
//! every path that does not complete it.

use super::client::{Client, META};
use crate::backend::object::NewEntry;
use crate::backend::upload::{BlockSink, BlockUpload, BlockWriter, BoxFuture, CommitBlocks, Finished};
use crate::backend::wire::{self, InitiateMultipartUploadResult};
use crate::backend::{BackendError, Committed, ErrorKind, Upload};
use bytes::Bytes;
use object_store::path::Path as StorePath;
use reqwest::Method;
use std::sync::{Arc, Mutex};

/// S3's smallest part but the last.
const MIN_PART: usize = 5 << 20;

/// Start the save of `entry`: the multipart upload at its name, with its metadata.
pub(super) async fn start(client: &Arc<Client>, entry: NewEntry) -> Result<Box<dyn Upload>, BackendError> {
    let metadata = entry.metadata_headers(META);
    let headers: Vec<_> = metadata.iter().map(|(name, value)| (name.clone(), value.as_str())).collect();
    let path = StorePath::from(entry.name);
    let (_, body) =
        client.call("start the upload", Method::POST, &path, &[("uploads", "")], &headers, Bytes::new()).await?;
    let started: InitiateMultipartUploadResult = wire::decode_xml(&body)
        .map_err(|e| BackendError::new(ErrorKind::Fatal, "start the upload: unreadable answer").with_source(e))?;
    if started.upload_id.is_empty() {
        return Err(BackendError::new(ErrorKind::Fatal, "start the upload: no UploadId in the answer"));
    }
    let sink = Arc::new(PartSink {
        client: Arc::clone(client),
        path,
        upload_id: started.upload_id,
        etags: Mutex::new(Vec::new()),
    });
    let mut writer = BlockWriter::new(Arc::clone(&client.http), sink.clone(), false);
    writer.set_block_size(client.http.tuning.upload_block.max(MIN_PART));
    Ok(Box::new(BlockUpload::new(writer, Complete { sink, done: false })))
}

/// The parts of one multipart upload.
struct PartSink {
    client: Arc<Client>,
    path: StorePath,
    upload_id: String,
    /// `(part number, ETag)` of each part uploaded.
    etags: Mutex<Vec<(usize, String)>>,
}

impl BlockSink for PartSink {
    fn put_block(&self, index: usize, _offset: u64, data: Bytes) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let number = (index + 1).to_string();
            let query = [("partNumber", number.as_str()), ("uploadId", self.upload_id.as_str())];
            let (headers, _) = self.client.call("upload a part", Method::PUT, &self.path, &query, &[], data).await?;
            let etag = headers
                .get(reqwest::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| BackendError::new(ErrorKind::Fatal, "upload a part: no ETag in the answer"))?;
            self.etags.lock().unwrap().push((index + 1, etag.to_owned()));
            Ok(())
        })
    }
}

impl PartSink {
    /// Complete the upload only if no object has the name yet: a refused condition (`412`) or a
    /// concurrent completion (`409`) means another writer's entry is there, or about to be.
    async fn complete(&self) -> Result<Committed, BackendError> {
        let mut parts = self.etags.lock().unwrap().clone();
        parts.sort();
        let mut xml = String::from("<CompleteMultipartUpload>");
        for (number, etag) in &parts {
            xml.push_str(&format!("<Part><PartNumber>{number}</PartNumber><ETag>{etag}</ETag></Part>"));
        }
        xml.push_str("</CompleteMultipartUpload>");
        let query = [("uploadId", self.upload_id.as_str())];
        let headers = [(reqwest::header::IF_NONE_MATCH, "*")];
        match self
            .client
            .call("complete the upload", Method::POST, &self.path, &query, &headers, Bytes::from(xml))
            .await
        {
            Ok(_) => Ok(Committed::Saved),
            Err(e) if matches!(e.kind, ErrorKind::Precondition | ErrorKind::AlreadyExists) => Ok(Committed::Exists),
            Err(e) => Err(e),
        }
    }

    /// Abort the upload, so that its parts do not linger (best effort: a lifecycle rule for
    /// incomplete uploads catches what a killed process leaves).
    async fn abort(&self) {
        let query = [("uploadId", self.upload_id.as_str())];
        let _ = self.client.call("abort the upload", Method::DELETE, &self.path, &query, &[], Bytes::new()).await;
    }
}

/// The completion of the upload, or, on every other path, its abort.
struct Complete {
    sink: Arc<PartSink>,
    /// Completed or aborted.
    done: bool,
}

impl CommitBlocks for Complete {
    fn commit(mut self, finished: Finished) -> Result<Committed, BackendError> {
        if let Finished::Small(_) = finished {
            unreachable!("S3 uploads always go in parts");
        }
        let http = Arc::clone(&self.sink.client.http);
        let completed = http.rt().block_on(self.sink.complete());
        if !matches!(completed, Ok(Committed::Saved)) {
            http.rt().block_on(self.sink.abort());
        }
        self.done = true;
        completed
    }
}

impl Drop for Complete {
    /// A save abandoned (its writer already stopped) or whose writer failed.
    fn drop(&mut self) {
        if !self.done {
            let http = Arc::clone(&self.sink.client.http);
            http.rt().block_on(self.sink.abort());
        }
    }
}
