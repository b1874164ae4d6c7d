//! The GitHub cache service v2: Twirp JSON calls to `ACTIONS_RESULTS_URL` with the runtime
//! token, and Azure Blob signed URLs for the bytes (never sent the token).
//!
//! Twirp JSON uses the protobuf field names in snake_case (responses are decoded in
//! [`crate::backend::wire`]); int64 goes out as a string. Restore keys are never sent.
//!
//! Saves: an exact lookup first, since self-hosted servers (falcondev-oss/github-actions-cache-
//! server) accept a second `CreateCacheEntry` for an entry that exists and let its upload replace
//! it, where github.com answers 409. Then the block blob at the signed URL
//! ([`crate::backend::blob`]); then, after a second exact lookup, `FinalizeCacheEntryUpload`
//! with the exact byte count. A job whose `ACTIONS_CACHE_MODE` forbids reads asks no lookup.

use crate::backend::blob::{AZURE_VERSION, BlobRequest, BlobTarget, BlockBlob};
use crate::backend::download;
use crate::backend::http::{Check, Http, kind_in_words, one_line, read_answer, send, urlencode};
use crate::backend::upload::{BlockUpload, BlockWriter, BoxFuture, CommitBlocks, Finished};
use crate::backend::wire::{self, CreateResponse, DownloadUrlResponse, FinalizeResponse};
use crate::backend::{Backend, BackendError, CacheEntry, CacheMode, Committed, ErrorKind, Reservation};
use crate::keys::{Key, Version};
use serde::de::DeserializeOwned;
use std::io::Read;
use std::sync::Arc;

const SERVICE: &str = "/twirp/github.actions.results.api.v1.CacheService/";

pub struct V2Backend {
    twirp: Arc<Twirp>,
}

/// The Twirp side: where to call and with which token, and whether the job may read.
struct Twirp {
    http: Arc<Http>,
    origin: url::Url,
    token: String,
    /// `ACTIONS_CACHE_MODE` lets the job read: otherwise a save does not ask whether its entry
    /// exists (the service would refuse the lookup; its Create refuses a key that exists).
    readable: bool,
}

impl V2Backend {
    pub fn new(http: Arc<Http>, results_url: &str, token: String) -> Result<Self, BackendError> {
        let origin = url::Url::parse(results_url)
            .map_err(|_| BackendError::new(ErrorKind::Fatal, "`ACTIONS_RESULTS_URL` is not a URL"))?;
        http.secrets.add(&token);
        Ok(Self { twirp: Arc::new(Twirp { http, origin, token, readable: true }) })
    }

    pub fn with_mode(self, mode: CacheMode) -> Self {
        let twirp = Arc::into_inner(self.twirp).expect("not shared before it is configured");
        Self { twirp: Arc::new(Twirp { readable: mode.readable(), ..twirp }) }
    }
}

impl Twirp {
    /// One Twirp call, retried when transient. The method path replaces any path of the base
    /// URL, as the official client resolves it.
    async fn call<T: DeserializeOwned>(&self, method: &str, body: serde_json::Value) -> Result<T, BackendError> {
        let url = self.origin.join(&format!("{SERVICE}{method}")).expect("a fixed path joins");
        let what = method.to_owned();
        self.http
            .retry(|| async {
                let request = self
                    .http
                    .client
                    .post(url.clone())
                    .timeout(self.http.tuning.call_timeout)
                    .bearer_auth(&self.token)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.to_string());
                let response = send(&what, request).await?.check(&what).await?;
                let text = read_answer(&what, response).await?;
                // An unreadable success body is as good as a broken connection: retry.
                wire::decode(&text).map_err(|e| {
                    BackendError::new(ErrorKind::Transient, format!("{what}: unreadable response")).with_source(e)
                })
            })
            .await
    }

    async fn lookup(&self, key: &Key, version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        self.lookup_with(key, &[], version).await
    }

    /// One GetCacheEntryDownloadURL of `key` (and `restore_keys`, sent only when there are some)
    /// at `version`.
    async fn lookup_with(
        &self,
        key: &str,
        restore_keys: &[&str],
        version: &Version,
    ) -> Result<Option<CacheEntry>, BackendError> {
        let mut body = serde_json::json!({ "key": key, "version": version });
        if !restore_keys.is_empty() {
            body["restore_keys"] = serde_json::json!(restore_keys);
        }
        let r: DownloadUrlResponse = self.call("GetCacheEntryDownloadURL", body).await?;
        if !r.ok || r.signed_download_url.is_empty() {
            return Ok(None);
        }
        self.http.mask_url(&r.signed_download_url);
        Ok(Some(CacheEntry {
            // No matched key is no proof of an exact match: the caller treats it as a miss.
            key: Key::from(r.matched_key),
            version: version.to_owned(),
            size: None,
            location: r.signed_download_url,
        }))
    }

    /// Whether an entry with exactly this key and version exists, as far as the job may know:
    /// `false` when it may not read (the service's Create refuses a key that exists).
    async fn exists(&self, key: &Key, version: &Version) -> Result<bool, BackendError> {
        if !self.readable {
            return Ok(false);
        }
        match self.lookup(key, version).await {
            Ok(found) => Ok(found.is_some_and(|entry| entry.key == *key)),
            Err(e) if e.kind == ErrorKind::ReadDenied => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl Backend for V2Backend {
    fn describe(&self) -> String {
        format!("GitHub cache service v2 ({})", self.twirp.origin.host_str().unwrap_or("?"))
    }

    fn lookup(&self, key: &Key, version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        self.twirp.http.rt().block_on(self.twirp.lookup(key, version))
    }

    /// `newest_of` as the key and, as restore keys (each matched as a prefix, the newest
    /// first), `newest_of` and then `key`.
    fn lookup_newest_or(
        &self,
        newest_of: &str,
        key: &Key,
        version: &Version,
    ) -> Result<Option<CacheEntry>, BackendError> {
        self.twirp.http.rt().block_on(self.twirp.lookup_with(newest_of, &[newest_of, key.as_str()], version))
    }

    fn open(&self, entry: &CacheEntry) -> Result<Box<dyn Read + Send + '_>, BackendError> {
        Ok(download::open(Arc::clone(&self.twirp.http), entry.location.clone()))
    }

    fn read_prefix(&self, entry: &CacheEntry, len: u64) -> Result<Vec<u8>, BackendError> {
        download::read_prefix(&self.twirp.http, &entry.location, len)
    }

    /// Each pack an entry of the service (`super::packs`).
    fn packs(&self, prefix: &str) -> Option<Box<dyn crate::content::store::PackStore>> {
        let same = V2Backend { twirp: Arc::clone(&self.twirp) };
        Some(Box::new(super::packs::ServicePacks::new(Box::new(same), Arc::clone(&self.twirp.http), prefix)))
    }

    fn reserve(&self, key: &Key, version: &Version) -> Result<Reservation, BackendError> {
        let twirp = &self.twirp;
        let rt = twirp.http.rt();
        if rt.block_on(twirp.exists(key, version))? {
            return Ok(Reservation::Exists);
        }
        let body = serde_json::json!({ "key": key, "version": version });
        let r: CreateResponse = match rt.block_on(twirp.call("CreateCacheEntry", body)) {
            Ok(r) => r,
            Err(e) if matches!(e.kind, ErrorKind::AlreadyExists | ErrorKind::Precondition) => {
                return Ok(Reservation::Exists);
            }
            Err(e) => return Err(e),
        };
        if !r.ok {
            // Without a message, a self-hosted server's "another job is creating it"; the
            // official client reads every refusal so. A message says why, never "exists".
            if r.message.trim().is_empty() || r.message.to_ascii_lowercase().contains("already exists") {
                return Ok(Reservation::Exists);
            }
            let kind = kind_in_words(&r.message).unwrap_or(ErrorKind::Fatal);
            return Err(BackendError::new(kind, format!("CreateCacheEntry: {}", one_line(&r.message))));
        }
        if r.signed_upload_url.is_empty() {
            return Err(BackendError::new(ErrorKind::Fatal, "CreateCacheEntry: an answer without an upload URL"));
        }
        twirp.http.mask_url(&r.signed_upload_url);
        let signed = SignedUrl { http: Arc::clone(&twirp.http), url: r.signed_upload_url };
        let blob = Arc::new(BlockBlob::new(signed, Vec::new()));
        let writer = BlockWriter::new(Arc::clone(&twirp.http), blob.clone(), true);
        let finalize = Finalize { twirp: Arc::clone(twirp), key: key.to_owned(), version: version.to_owned(), blob };
        Ok(Reservation::Reserved(Box::new(BlockUpload::new(writer, finalize))))
    }
}

/// A block blob at the signed URL the service handed out: it authorizes every request itself.
struct SignedUrl {
    http: Arc<Http>,
    url: String,
}

impl BlobTarget for SignedUrl {
    fn put<'a>(&'a self, request: BlobRequest<'a>) -> BoxFuture<'a, Result<(), BackendError>> {
        let BlobRequest { step, query, headers, body } = request;
        Box::pin(async move {
            let what = step.name();
            let url = with_query(&self.url, query);
            self.http
                .retry(|| async {
                    let mut request = self
                        .http
                        .client
                        .put(url.as_str())
                        .timeout(self.http.tuning.upload_timeout(body.len()))
                        .header("x-ms-version", AZURE_VERSION)
                        .body(body.clone());
                    for (name, value) in headers {
                        request = request.header(name.clone(), *value);
                    }
                    send(what, request).await?.check(what).await.map(drop)
                })
                .await
        })
    }
}

/// `url` with `query` added after what query it has (the signature's).
fn with_query(url: &str, query: &[(&str, &str)]) -> String {
    if query.is_empty() {
        return url.to_owned();
    }
    let sep = if url.contains('?') { '&' } else { '?' };
    let pairs: Vec<String> = query.iter().map(|(name, value)| format!("{name}={}", urlencode(value))).collect();
    format!("{url}{sep}{}", pairs.join("&"))
}

/// The end of a save once its blob is written: `FinalizeCacheEntryUpload`.
struct Finalize {
    twirp: Arc<Twirp>,
    key: Key,
    version: Version,
    blob: Arc<BlockBlob<SignedUrl>>,
}

impl CommitBlocks for Finalize {
    fn commit(self, finished: Finished) -> Result<Committed, BackendError> {
        let http = Arc::clone(&self.twirp.http);
        let size = http.rt().block_on(self.blob.create(finished))?;
        // A server that re-accepts keys took this upload also if another job's entry was
        // finalized after the lookup before it: only an entry that is still missing is finalized.
        if http.rt().block_on(self.twirp.exists(&self.key, &self.version))? {
            return Ok(Committed::Exists);
        }
        let body = serde_json::json!({ "key": self.key, "version": self.version, "size_bytes": size.to_string() });
        let r: FinalizeResponse = match http.rt().block_on(self.twirp.call("FinalizeCacheEntryUpload", body)) {
            Ok(r) => r,
            Err(e) if matches!(e.kind, ErrorKind::AlreadyExists | ErrorKind::Precondition) => {
                return Ok(Committed::Exists);
            }
            Err(e) => return Err(e),
        };
        if !r.ok {
            let detail =
                if r.message.is_empty() { "the entry was not committed".to_owned() } else { one_line(&r.message) };
            // A cache over its quota (or a token refused writes) says so here too.
            let kind = kind_in_words(&r.message).unwrap_or(ErrorKind::Fatal);
            return Err(BackendError::new(kind, format!("FinalizeCacheEntryUpload: {detail}")));
        }
        let _ = r.entry_id;
        Ok(Committed::Saved)
    }
}
