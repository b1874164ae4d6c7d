//! The legacy cache service v1 REST API: GHES, nektos/act, Gitea and Forgejo runners.
//!
//! `GET cache?keys=&version=` (204 = miss), `POST caches` → `cacheId`, `PATCH caches/<id>` with
//! `Content-Range: bytes a-b/*` (several in flight), `POST caches/<id>` with the size, and a
//! download from `archiveLocation` without any auth header. Quirks handled: act lowercases keys
//! (ours are lowercase already) and prefix-matches even the primary key (the caller compares
//! keys); act never answers 409 and checks the commit against the reserved `cacheSize`.
//!
//! The reservation must carry the exact `cacheSize` (GHES checks its size limit with it), so a
//! save first spools the archive (`SPOOL_IN_MEMORY`), then reserves, uploads and commits. An
//! exact lookup comes before packing, before the reservation and before the commit, since
//! self-hosted servers (act, falcondev) accept a reservation for an entry that exists and let its
//! commit replace it. A job whose `ACTIONS_CACHE_MODE` forbids reads makes none of them.

use crate::backend::download;
use crate::backend::http::{Check, Http, read_answer, send};
use crate::backend::upload::{BlockSink, BlockWriter, BoxFuture, Finished};
use crate::backend::wire::{self, LookupAnswer, ReserveAnswer};
use crate::backend::{Backend, BackendError, CacheEntry, CacheMode, Committed, ErrorKind, Reservation, Upload};
use crate::keys::{Key, Version};
use bytes::Bytes;
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::sync::Arc;

const ACCEPT: &str = "application/json;api-version=6.0-preview.1";
/// Archives up to this size are spooled in memory; larger ones in a temporary file.
const SPOOL_IN_MEMORY: usize = 64 << 20;

pub struct V1Backend {
    api: Arc<Api>,
}

struct Api {
    http: Arc<Http>,
    base: url::Url,
    token: Option<String>,
    /// `ACTIONS_CACHE_MODE` lets the job read: otherwise a save does not ask whether its entry
    /// exists (the service would refuse the lookup; its reservation refuses a key that exists).
    readable: bool,
}

struct Answer {
    status: StatusCode,
    text: String,
}

impl Api {
    fn url(&self, resource: &str) -> url::Url {
        self.base.join(&format!("_apis/artifactcache/{resource}")).expect("relative paths join")
    }

    /// One call, retried when transient; any 2xx (and 204) comes back, other statuses are errors.
    async fn call(
        &self,
        what: &str,
        method: Method,
        url: url::Url,
        body: Option<Bytes>,
        range: Option<String>,
    ) -> Result<Answer, BackendError> {
        self.http
            .retry(|| async {
                let budget = match (&range, &body) {
                    (Some(_), Some(body)) => self.http.tuning.upload_timeout(body.len()),
                    _ => self.http.tuning.call_timeout,
                };
                let mut request = self
                    .http
                    .client
                    .request(method.clone(), url.clone())
                    .timeout(budget)
                    .header(reqwest::header::ACCEPT, ACCEPT);
                if let Some(token) = &self.token {
                    request = request.bearer_auth(token);
                }
                if let Some(range) = &range {
                    request = request
                        .header(reqwest::header::CONTENT_RANGE, range.as_str())
                        .header(reqwest::header::CONTENT_TYPE, "application/octet-stream");
                } else if body.is_some() {
                    request = request.header(reqwest::header::CONTENT_TYPE, "application/json");
                }
                if let Some(body) = &body {
                    request = request.body(body.clone());
                }
                let response = send(what, request).await?.check(what).await?;
                Ok(Answer { status: response.status(), text: read_answer(what, response).await? })
            })
            .await
    }

    async fn lookup(&self, key: &Key, version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        self.lookup_keys(&[key.as_str()], version).await
    }

    /// One lookup of `keys` (joined with commas; none holds one) at `version`: the service tries
    /// each in order, an exact match first, then the newest entry the key is a prefix of.
    async fn lookup_keys(&self, keys: &[&str], version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        let mut url = self.url("cache");
        url.query_pairs_mut().append_pair("keys", &keys.join(",")).append_pair("version", version);
        let answer = self.call("lookup", Method::GET, url, None, None).await?;
        if answer.status == StatusCode::NO_CONTENT || answer.text.trim().is_empty() {
            return Ok(None);
        }
        let found: LookupAnswer = Api::json("lookup", &answer.text)?;
        if found.archive_location.is_empty() {
            return Err(BackendError::new(ErrorKind::Fatal, "lookup: a hit without `archiveLocation`"));
        }
        self.http.mask_url(&found.archive_location);
        Ok(Some(CacheEntry {
            key: Key::from(found.cache_key),
            version: version.to_owned(),
            size: None,
            location: found.archive_location,
        }))
    }

    /// Whether an entry with exactly this key and version exists, as far as the job may know:
    /// `false` when it may not read.
    fn exists(&self, key: &Key, version: &Version) -> Result<bool, BackendError> {
        if !self.readable {
            return Ok(false);
        }
        match self.http.rt().block_on(self.lookup(key, version)) {
            Ok(found) => Ok(found.is_some_and(|entry| entry.key == *key)),
            Err(e) if e.kind == ErrorKind::ReadDenied => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn json<T: for<'de> Deserialize<'de>>(what: &str, text: &str) -> Result<T, BackendError> {
        wire::decode(text)
            .map_err(|e| BackendError::new(ErrorKind::Fatal, format!("{what}: unreadable response")).with_source(e))
    }
}

impl V1Backend {
    pub fn new(http: Arc<Http>, cache_url: &str, token: Option<String>) -> Result<Self, BackendError> {
        let with_slash = if cache_url.ends_with('/') { cache_url.to_owned() } else { format!("{cache_url}/") };
        let base = url::Url::parse(&with_slash)
            .map_err(|_| BackendError::new(ErrorKind::Fatal, "`ACTIONS_CACHE_URL` is not a URL"))?;
        // The cache URL itself can carry a secret (act puts one in its path).
        http.secrets.add(base.path().trim_matches('/'));
        if let Some(token) = &token {
            http.secrets.add(token);
        }
        Ok(Self { api: Arc::new(Api { http, base, token, readable: true }) })
    }

    pub fn with_mode(self, mode: CacheMode) -> Self {
        let api = Arc::into_inner(self.api).expect("not shared before it is configured");
        Self { api: Arc::new(Api { readable: mode.readable(), ..api }) }
    }
}

impl Backend for V1Backend {
    fn describe(&self) -> String {
        format!("GitHub cache service v1 ({})", self.api.base.host_str().unwrap_or("?"))
    }

    fn lookup(&self, key: &Key, version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        self.api.http.rt().block_on(self.api.lookup_keys(&[key.as_str()], version))
    }

    /// `keys=<newest_of>,<key>`, as `Api::lookup_keys` sends them.
    fn lookup_newest_or(
        &self,
        newest_of: &str,
        key: &Key,
        version: &Version,
    ) -> Result<Option<CacheEntry>, BackendError> {
        self.api.http.rt().block_on(self.api.lookup_keys(&[newest_of, key.as_str()], version))
    }

    fn open(&self, entry: &CacheEntry) -> Result<Box<dyn Read + Send + '_>, BackendError> {
        Ok(download::open(Arc::clone(&self.api.http), entry.location.clone()))
    }

    fn read_prefix(&self, entry: &CacheEntry, len: u64) -> Result<Vec<u8>, BackendError> {
        download::read_prefix(&self.api.http, &entry.location, len)
    }

    /// Each pack an entry of the service (`super::packs`).
    fn packs(&self, prefix: &str) -> Option<Box<dyn crate::content::store::PackStore>> {
        let same = V1Backend { api: Arc::clone(&self.api) };
        Some(Box::new(super::packs::ServicePacks::new(Box::new(same), Arc::clone(&self.api.http), prefix)))
    }

    fn reserve(&self, key: &Key, version: &Version) -> Result<Reservation, BackendError> {
        if self.api.exists(key, version)? {
            return Ok(Reservation::Exists);
        }
        Ok(Reservation::Reserved(Box::new(V1Upload {
            api: Arc::clone(&self.api),
            key: key.to_owned(),
            version: version.to_owned(),
            spool: tempfile::spooled_tempfile(SPOOL_IN_MEMORY),
        })))
    }
}

struct ChunkSink {
    api: Arc<Api>,
    id: i64,
}

impl BlockSink for ChunkSink {
    fn put_block(&self, _index: usize, offset: u64, data: Bytes) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let range = format!("bytes {offset}-{}/*", offset + data.len() as u64 - 1);
            let url = self.api.url(&format!("caches/{}", self.id));
            self.api.call("upload", Method::PATCH, url, Some(data), Some(range)).await.map(|_| ())
        })
    }
}

struct V1Upload {
    api: Arc<Api>,
    key: Key,
    version: Version,
    spool: tempfile::SpooledTempFile,
}

impl Write for V1Upload {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.spool.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Upload for V1Upload {
    fn commit(mut self: Box<Self>) -> Result<Committed, BackendError> {
        let local = |e: io::Error| BackendError::new(ErrorKind::Fatal, "cannot spool the archive").with_source(e);
        let size = self.spool.seek(SeekFrom::End(0)).map_err(local)?;
        self.spool.seek(SeekFrom::Start(0)).map_err(local)?;
        let api = &self.api;
        // Packing took a while: another job may have saved the entry meanwhile.
        if api.exists(&self.key, &self.version)? {
            return Ok(Committed::Exists);
        }
        let body = serde_json::json!({ "key": self.key, "version": self.version, "cacheSize": size }).to_string();
        let answer =
            match api.http.rt().block_on(api.call("reserve", Method::POST, api.url("caches"), Some(body.into()), None))
            {
                Ok(a) => a,
                Err(e) if matches!(e.kind, ErrorKind::AlreadyExists | ErrorKind::Precondition) => {
                    return Ok(Committed::Exists);
                }
                Err(e) => return Err(e),
            };
        let Some(id) = Api::json::<ReserveAnswer>("reserve", &answer.text)?.cache_id else {
            return Ok(Committed::Creating);
        };
        let sink = Arc::new(ChunkSink { api: Arc::clone(api), id });
        let mut writer = BlockWriter::new(Arc::clone(&api.http), sink, false);
        if let Err(e) = io::copy(&mut self.spool, &mut writer) {
            return Err(BackendError::from_io(e).unwrap_or_else(local));
        }
        match writer.finish()? {
            Finished::Blocks { total, .. } if total == size => {}
            _ => return Err(BackendError::new(ErrorKind::Fatal, "upload: the spooled archive changed size")),
        }
        // A reservation accepted for an entry that exists (see the module's doc) is not committed.
        if api.exists(&self.key, &self.version)? {
            return Ok(Committed::Exists);
        }
        let body = serde_json::json!({ "size": size }).to_string();
        let url = api.url(&format!("caches/{id}"));
        match api.http.rt().block_on(api.call("commit", Method::POST, url, Some(body.into()), None)) {
            Ok(_) => Ok(Committed::Saved),
            Err(e) if matches!(e.kind, ErrorKind::AlreadyExists | ErrorKind::Precondition) => Ok(Committed::Exists),
            Err(e) => Err(e),
        }
    }
}
