//! The cache service itself (axum on its own runtime): v2 Twirp at
//! `/twirp/github.actions.results.api.v1.CacheService/<Method>`, v1 REST under
//! `/v1/<secret>/_apis/artifactcache/`, and the blob front at `/devstoreaccount1/…`, which
//! injects faults and forwards to the blob store behind it: the in-repo fast blob store by
//! default, Azurite where a test proves something against the real one.
//!
//! Matching follows the real service: among finalized entries with the same version in the
//! lookup's scope (saved on the current ref, [`Services::set_ref`], or on the default branch,
//! [`DEFAULT_REF`]), an exact key first, else the newest entry whose key starts with the
//! requested one. Packs are entries like any, so a pack saved on a pull request's ref is not
//! found from the default branch. Creating an existing (key, version) answers 409.
//!
//! [`Services::start_strict`] plays a strict self-hosted cache server instead, as
//! falcondev-oss/github-actions-cache-server behaves: Put Block takes only the Azure SDK's
//! block ids (base64 of a 36-character UUID and a 12-digit index; anything else is HTTP 400
//! "Invalid block id") and a block list must name the blocks in index order (the server orders
//! them by that index); a key being created is refused with `{"ok": false}` (v2) or
//! `200 {"cacheId": null}` (v1); a key that exists is accepted again, and the new upload
//! replaces the entry when it is finalized; there is no REST cache API (its routes answer 404).

use super::azurite::{self, ACCOUNT};
use super::{Fault, Faults, Op, QUOTA, READ_DENIED, WRITE_DENIED};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, patch, post};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const TOKEN: &str = "test-runtime-token-0123456789";
pub const V1_SECRET: &str = "0123456789abcdef0123456789abcdef";

#[derive(Clone, Debug)]
pub struct Entry {
    pub key: String,
    pub version: String,
    pub blob: String,
    pub size: u64,
    pub finalized: bool,
    pub seq: u64,
    /// The scope it was saved in (the token's ref).
    pub r#ref: String,
}

/// The token the fake REST API accepts.
pub const REST_TOKEN: &str = "rest-token-for-tests";

type V1Upload = (String, String, Option<u64>, BTreeMap<u64, Bytes>);

#[derive(Default)]
struct Store {
    entries: Vec<Entry>,
    seq: u64,
    /// v1: reserved id → (key, version, reserved cacheSize, chunks by offset).
    v1_uploads: HashMap<i64, V1Upload>,
    /// v1: committed id → archive bytes.
    v1_blobs: HashMap<i64, Bytes>,
}

/// Where v2 blobs live and how signed URLs address them.
#[derive(Clone, Debug)]
pub enum BlobStore {
    /// The fast blob store behind the fault-injecting front (the tests' default: no outside tool).
    FastFront,
    /// Azurite behind the fault-injecting front (tests that need the real Azure Blob behaviour).
    AzuriteFront,
    /// Azurite addressed host-style, `http://<host>/<container>/<blob>?<sas>`, with `host` like
    /// `devstoreaccount1.blob.core.windows.net:10000` mapped to 127.0.0.1 (the benchmark: the
    /// official client takes its parallel download path only for `*.blob.core.windows.net`).
    #[cfg_attr(test, expect(dead_code, reason = "only the benchmark (bench/service.rs) runs it"))]
    AzuriteHostStyle { host: String },
    /// A minimal blob store of our own (files in a directory), host-style at `<name>.blob.core.windows.net:<port>`.
    Fast { name: String },
}

struct Shared {
    blob_store: BlobStore,
    /// A strict self-hosted server ([`Services::start_strict`]).
    strict: bool,
    /// For `BlobStore::Fast` and `FastFront`: its directory, the host:port signed URLs name,
    /// and its port on 127.0.0.1 (where the front forwards).
    fast: Option<(std::path::PathBuf, String, u16)>,
    /// The ref new entries are saved under (what the runtime token's scope would be).
    current_ref: Mutex<String>,
    faults: Arc<Faults>,
    store: Mutex<Store>,
    container: String,
    front: String,
    client: reqwest::Client,
}

pub struct Services {
    rt: tokio::runtime::Runtime,
    /// The fast blob store's files, removed with the services.
    _fast_dir: Option<tempfile::TempDir>,
    pub url: String,
    pub faults: Arc<Faults>,
    shared: Arc<Shared>,
}

impl Services {
    /// The services with the fast blob store behind the front.
    pub fn start() -> Self {
        Self::start_with(BlobStore::FastFront)
    }

    pub fn start_with(blob_store: BlobStore) -> Self {
        Self::start_as(blob_store, false)
    }

    /// A strict self-hosted cache server (see the module's doc), its blobs in the fast blob store
    /// behind the front.
    pub fn start_strict() -> Self {
        Self::start_as(BlobStore::FastFront, true)
    }

    fn start_as(blob_store: BlobStore, strict: bool) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let container =
            format!("c{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos());
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::new();
        let mut fast = None;
        let mut fast_dir = None;
        if matches!(blob_store, BlobStore::Fast { .. } | BlobStore::FastFront) {
            let temp = tempfile::Builder::new().prefix("exact-cache-fast-blobs-").tempdir().unwrap();
            let dir = temp.path().to_owned();
            fast_dir = Some(temp);
            let fast_listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
            let port = fast_listener.local_addr().unwrap().port();
            let app = super::fast_blob::router(dir.clone());
            rt.spawn(async move { axum::serve(fast_listener, app).await.unwrap() });
            let host = match &blob_store {
                BlobStore::Fast { name } if !name.is_empty() => format!("{name}.blob.core.windows.net:{port}"),
                _ => format!("127.0.0.1:{port}"),
            };
            fast = Some((dir, host, port));
        } else {
            let azurite = azurite::azurite();
            let create = format!("{}/{container}?restype=container&{}", azurite.base(), azurite::account_sas());
            let status =
                rt.block_on(async { client.put(&create).header("content-length", "0").send().await.unwrap().status() });
            assert!(status.is_success(), "create container: {status}");
        }
        let faults = Arc::new(Faults::default());
        let shared = Arc::new(Shared {
            blob_store,
            strict,
            fast,
            current_ref: Mutex::new(DEFAULT_REF.into()),
            faults: Arc::clone(&faults),
            store: Mutex::default(),
            container,
            front: url.trim_end_matches('/').to_owned(),
            client,
        });
        let app = Router::new()
            .route("/twirp/github.actions.results.api.v1.CacheService/{method}", post(twirp))
            .route("/v1/{secret}/_apis/artifactcache/cache", get(v1_lookup))
            .route("/v1/{secret}/_apis/artifactcache/caches", post(v1_reserve))
            .route("/v1/{secret}/_apis/artifactcache/caches/{id}", patch(v1_upload).post(v1_commit))
            .route("/v1/{secret}/_apis/artifactcache/artifacts/{id}", get(v1_download))
            .route(&format!("/{ACCOUNT}/{{*path}}"), any(blob_front))
            .route("/repos/{owner}/{repo}/actions/caches", get(rest_list))
            .route("/repos/{owner}/{repo}/actions/caches/{id}", axum::routing::delete(rest_delete))
            .route("/bench/entries", get(bench_entries))
            .layer(axum::extract::DefaultBodyLimit::disable())
            .with_state(Arc::clone(&shared));
        rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Services { rt, url, faults, shared, _fast_dir: fast_dir }
    }

    /// Variables a runner gives a node action for v2.
    pub fn v2_env(&self) -> Vec<(String, String)> {
        [
            ("ACTIONS_CACHE_SERVICE_V2", "True"),
            ("ACTIONS_RESULTS_URL", self.url.as_str()),
            ("ACTIONS_RUNTIME_TOKEN", TOKEN),
            ("GITHUB_SERVER_URL", "https://github.com"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// Variables for v1 (as on GHES: no v2 flag, a cache URL with a trailing slash).
    pub fn v1_env(&self) -> Vec<(String, String)> {
        [
            ("ACTIONS_CACHE_URL", format!("{}v1/{V1_SECRET}/", self.url)),
            ("ACTIONS_RUNTIME_TOKEN", TOKEN.to_owned()),
            ("GITHUB_SERVER_URL", "https://github.com".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    pub fn entries(&self) -> Vec<Entry> {
        self.shared.store.lock().unwrap().entries.clone()
    }

    /// Variables for the REST API of `explain-misses` and `prune` (besides the `github-token`
    /// input, [`REST_TOKEN`]).
    pub fn rest_env(&self) -> Vec<(String, String)> {
        vec![
            ("GITHUB_API_URL".into(), self.url.trim_end_matches('/').to_owned()),
            ("GITHUB_REPOSITORY".into(), "acme/widgets".into()),
            ("GITHUB_REF".into(), self.shared.current_ref.lock().unwrap().clone()),
        ]
    }

    /// Drop the entry of `key` and `version`, as eviction would.
    pub fn forget(&self, key: &str, version: &str) {
        self.shared.store.lock().unwrap().entries.retain(|e| !(e.key == key && e.version == version));
    }

    /// Another job's upload of `key` and `version` under way, on both protocols: created (v2)
    /// and reserved (v1), never finished.
    pub fn plant_pending(&self, key: &str, version: &str) {
        let mut store = self.shared.store.lock().unwrap();
        store.seq += 1;
        let seq = store.seq;
        let r#ref = self.shared.current_ref.lock().unwrap().clone();
        let blob = format!("pending-{seq}");
        store.entries.push(Entry {
            key: key.into(),
            version: version.into(),
            blob,
            size: 0,
            finalized: false,
            seq,
            r#ref,
        });
        store.v1_uploads.insert(seq as i64, (key.into(), version.into(), None, BTreeMap::new()));
    }

    /// Entries saved from now on belong to `r`.
    pub fn set_ref(&self, r: &str) {
        *self.shared.current_ref.lock().unwrap() = r.to_owned();
    }

    /// A finalized entry that can be listed and deleted, without a blob (for REST tests).
    pub fn plant_listed(&self, key: &str, version: &str) {
        let mut store = self.shared.store.lock().unwrap();
        store.seq += 1;
        let seq = store.seq;
        let r#ref = self.shared.current_ref.lock().unwrap().clone();
        store.entries.push(Entry {
            key: key.into(),
            version: version.into(),
            blob: String::new(),
            size: 0,
            finalized: true,
            seq,
            r#ref,
        });
    }

    /// Store a committed v1 entry directly.
    pub fn plant_v1(&self, key: &str, version: &str, bytes: &[u8]) {
        let mut store = self.shared.store.lock().unwrap();
        store.seq += 1;
        let id = store.seq;
        store.v1_blobs.insert(id as i64, Bytes::from(bytes.to_vec()));
        store.entries.push(Entry {
            key: key.into(),
            version: version.into(),
            blob: format!("v1-{id}"),
            size: bytes.len() as u64,
            finalized: true,
            seq: id,
            r#ref: self.shared.current_ref.lock().unwrap().clone(),
        });
    }

    /// Flip a byte in the middle of the stored bytes of the entry of `key` and `version`, as a
    /// broken disk would.
    pub fn corrupt(&self, key: &str, version: &str) {
        let blob = {
            let store = self.shared.store.lock().unwrap();
            let entry = store.entries.iter().find(|e| e.key == key && e.version == version);
            entry.unwrap_or_else(|| panic!("no entry {key}@{version}")).blob.clone()
        };
        let flip = |bytes: &mut [u8]| bytes[bytes.len() / 2] ^= 0xff;
        if let Some(id) = blob.strip_prefix("v1-") {
            let mut store = self.shared.store.lock().unwrap();
            let stored = store.v1_blobs.get_mut(&id.parse().unwrap()).unwrap();
            let mut bytes = stored.to_vec();
            flip(&mut bytes);
            *stored = Bytes::from(bytes);
        } else if let Some((dir, ..)) = &self.shared.fast {
            let path = dir.join(&self.shared.container).join(&blob);
            let mut bytes = std::fs::read(&path).unwrap();
            flip(&mut bytes);
            std::fs::write(path, bytes).unwrap();
        } else {
            let mut bytes = self.rt.block_on(async {
                self.shared.client.get(self.azurite_url(&blob)).send().await.unwrap().bytes().await.unwrap().to_vec()
            });
            flip(&mut bytes);
            self.put_in_azurite(&blob, bytes);
        }
    }

    /// Uploads not finished: v2 entries created and never finalized, v1 caches reserved and never
    /// committed.
    pub fn unfinished(&self) -> Vec<String> {
        let store = self.shared.store.lock().unwrap();
        let v2 = store.entries.iter().filter(|e| !e.finalized).map(|e| format!("v2 {}@{}", e.key, e.version));
        let v1 = store.v1_uploads.values().map(|(key, version, ..)| format!("v1 {key}@{version}"));
        v2.chain(v1).collect()
    }

    /// The URL of `blob` in Azurite, signed with the account SAS.
    fn azurite_url(&self, blob: &str) -> String {
        azurite::blob_url(&self.shared.container, blob)
    }

    fn put_in_azurite(&self, blob: &str, bytes: Vec<u8>) {
        let status = self.rt.block_on(async {
            let put = self.shared.client.put(self.azurite_url(blob)).header("x-ms-blob-type", "BlockBlob");
            put.body(bytes).send().await.unwrap().status()
        });
        assert!(status.is_success(), "put {blob} in Azurite: {status}");
    }

    /// Store a finalized entry directly (e.g. one whose key has ours as a prefix, or a hostile
    /// archive made by hand), in Azurite or in the fast blob store's directory.
    pub fn plant(&self, key: &str, version: &str, bytes: &[u8]) {
        // One blob per slot: a test may plant several versions of one key.
        let blob = format!("planted-{key}-{}", &version[..16.min(version.len())]);
        if let Some((dir, ..)) = &self.shared.fast {
            let path = dir.join(&self.shared.container).join(&blob);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        } else {
            self.put_in_azurite(&blob, bytes.to_vec());
        }
        let mut store = self.shared.store.lock().unwrap();
        store.seq += 1;
        let seq = store.seq;
        store.entries.push(Entry {
            key: key.into(),
            version: version.into(),
            blob,
            size: bytes.len() as u64,
            finalized: true,
            seq,
            r#ref: self.shared.current_ref.lock().unwrap().clone(),
        });
    }
}

impl Shared {
    /// The signed URL of `blob` as the configured blob store is addressed.
    fn signed_url(&self, blob: &str, sas: &str) -> String {
        match (&self.blob_store, &self.fast) {
            (BlobStore::Fast { .. }, Some((_, host, _))) => format!("http://{host}/{}/{blob}?{sas}", self.container),
            (BlobStore::AzuriteHostStyle { host }, _) => format!("http://{host}/{}/{blob}?{sas}", self.container),
            _ => format!("{}/{ACCOUNT}/{}/{blob}?{sas}", self.front, self.container),
        }
    }
}

/// The entries and their sizes, for the benchmark's bytes-on-the-wire column.
async fn bench_entries(State(s): State<Arc<Shared>>) -> Response {
    let store = s.store.lock().unwrap();
    let list: Vec<serde_json::Value> = store
        .entries
        .iter()
        .map(|e| serde_json::json!({ "key": e.key, "version": e.version, "size": e.size, "finalized": e.finalized }))
        .collect();
    json(serde_json::Value::Array(list))
}

fn twirp_error(status: StatusCode, code: &str, msg: &str) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], serde_json::json!({ "code": code, "msg": msg }).to_string())
        .into_response()
}

fn fault_status(code: u16, retry_after: Option<u64>, msg: &str) -> Response {
    let status = StatusCode::from_u16(code).unwrap();
    let mut response = twirp_error(status, "injected", msg);
    if let Some(after) = retry_after {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_str(&after.to_string()).unwrap());
    }
    response
}

/// Apply a call-level fault; `Some` is the answer to give instead of the real one.
async fn strike(faults: &Faults, op: Op) -> (Option<Response>, Option<Fault>) {
    match faults.next(op) {
        Some(Fault::Status { code, retry_after, msg }) => (Some(fault_status(code, retry_after, msg)), None),
        Some(Fault::Stall { seconds }) => {
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            (None, None)
        }
        other => (None, other),
    }
}

fn json(value: serde_json::Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], value.to_string()).into_response()
}

/// The default branch: what every ref's lookups also see.
pub const DEFAULT_REF: &str = "refs/heads/main";

/// As GitHub scopes entries: a lookup from `current_ref` sees what was saved on that ref and on
/// the default branch, never another branch's or pull request's (a pack is an entry like any).
fn find<'a>(store: &'a Store, key: &str, version: &str, current_ref: &str) -> Option<&'a Entry> {
    let in_scope = |e: &&Entry| e.r#ref == current_ref || e.r#ref == DEFAULT_REF;
    let candidates = store.entries.iter().filter(|e| e.finalized && e.version == version).filter(in_scope);
    candidates
        .clone()
        .filter(|e| e.key == key)
        .max_by_key(|e| e.seq)
        .or_else(|| candidates.filter(|e| e.key.starts_with(key)).max_by_key(|e| e.seq))
}

async fn twirp(State(s): State<Arc<Shared>>, Path(method): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    if headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {TOKEN}")) {
        return twirp_error(StatusCode::UNAUTHORIZED, "unauthenticated", "missing or wrong bearer token");
    }
    let Ok(req) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return twirp_error(StatusCode::BAD_REQUEST, "malformed", "body is not JSON");
    };
    let key = req["key"].as_str().unwrap_or("").to_owned();
    let version = req["version"].as_str().unwrap_or("").to_owned();
    // As github.com: the key (an exact match first, then the newest it is a prefix of), then
    // each restore key as a prefix.
    let restore_keys: Vec<String> = req["restore_keys"]
        .as_array()
        .map(|keys| keys.iter().filter_map(|k| k.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let op = match method.as_str() {
        "GetCacheEntryDownloadURL" => Op::Lookup,
        "CreateCacheEntry" => Op::Create,
        "FinalizeCacheEntryUpload" => Op::Finalize,
        _ => return twirp_error(StatusCode::NOT_FOUND, "bad_route", "no such method"),
    };
    let (answer, fault) = strike(&s.faults, op).await;
    if let Some(answer) = answer {
        return answer;
    }
    let sas = azurite::account_sas();
    match op {
        Op::Lookup => {
            if matches!(fault, Some(Fault::ReadDenied)) {
                return twirp_error(StatusCode::FORBIDDEN, "permission_denied", READ_DENIED);
            }
            let store = s.store.lock().unwrap();
            let scope = s.current_ref.lock().unwrap().clone();
            let found = std::iter::once(&key).chain(&restore_keys).find_map(|k| find(&store, k, &version, &scope));
            let Some(entry) = found else { return json(serde_json::json!({})) };
            let matched = match fault {
                Some(Fault::WrongMatchedKey(other)) => other,
                _ => entry.key.clone(),
            };
            json(serde_json::json!({
                "ok": true,
                "signed_download_url": s.signed_url(&entry.blob, &sas),
                "matched_key": matched,
            }))
        }
        Op::Create => {
            match fault {
                Some(Fault::ReadOnly) => return json(serde_json::json!({ "ok": false, "message": WRITE_DENIED })),
                Some(Fault::Quota) => return json(serde_json::json!({ "ok": false, "message": QUOTA })),
                _ => {}
            }
            let mut store = s.store.lock().unwrap();
            let same = |e: &&Entry| e.key == key && e.version == version;
            if s.strict && store.entries.iter().filter(same).any(|e| !e.finalized) {
                return json(serde_json::json!({ "ok": false }));
            }
            if !s.strict && store.entries.iter().any(|e| e.key == key && e.version == version) {
                return twirp_error(
                    StatusCode::CONFLICT,
                    "already_exists",
                    "cache entry with the same key, version, and scope already exists",
                );
            }
            store.seq += 1;
            let seq = store.seq;
            let blob = format!("entry-{seq}");
            store.entries.push(Entry {
                key,
                version,
                blob: blob.clone(),
                size: 0,
                finalized: false,
                seq,
                r#ref: s.current_ref.lock().unwrap().clone(),
            });
            json(serde_json::json!({
                "ok": true,
                "signed_upload_url": s.signed_url(&blob, &sas),
            }))
        }
        Op::Finalize => {
            if matches!(fault, Some(Fault::Quota)) {
                return json(serde_json::json!({ "ok": false, "message": QUOTA }));
            }
            let size: u64 = match &req["size_bytes"] {
                serde_json::Value::String(v) => v.parse().unwrap_or(u64::MAX),
                serde_json::Value::Number(n) => n.as_u64().unwrap_or(u64::MAX),
                _ => u64::MAX,
            };
            let blob = {
                let store = s.store.lock().unwrap();
                match store.entries.iter().find(|e| e.key == key && e.version == version && !e.finalized) {
                    Some(e) => e.blob.clone(),
                    None => return json(serde_json::json!({ "ok": false, "message": "no reservation" })),
                }
            };
            let actual = if let Some((dir, ..)) = &s.fast {
                std::fs::metadata(dir.join(&s.container).join(&blob)).ok().map(|m| m.len())
            } else {
                let url = format!("{}/{}/{blob}?{sas}", azurite::azurite().base(), s.container);
                match s.client.head(&url).send().await {
                    // Not `content_length()`: a HEAD answer has no body, so that reports 0.
                    Ok(r) if r.status().is_success() => {
                        r.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                    }
                    _ => None,
                }
            };
            if actual != Some(size) {
                return json(
                    serde_json::json!({ "ok": false, "message": format!("blob has {actual:?} bytes, finalize says {size}") }),
                );
            }
            let mut store = s.store.lock().unwrap();
            // A strict server's second upload of a key replaces its entry.
            store.entries.retain(|e| !(e.key == key && e.version == version && e.finalized));
            let entry = store.entries.iter_mut().find(|e| e.blob == blob).unwrap();
            entry.finalized = true;
            entry.size = size;
            json(serde_json::json!({ "ok": true, "entry_id": entry.seq.to_string() }))
        }
        _ => unreachable!(),
    }
}

/// Forward to Azurite, injecting download and upload faults.
async fn blob_front(
    State(s): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let in_flight = super::InFlight::new(&s.faults);
    let (parts, body) = blob_front_answer(s, method, uri, headers, body).await.into_parts();
    // The body holds the count until it is sent.
    let body = futures_util::StreamExt::map(body.into_data_stream(), move |chunk| {
        let _held = &in_flight;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

async fn blob_front_answer(s: Arc<Shared>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    if headers.contains_key(header::AUTHORIZATION) {
        *s.faults.auth_to_blob.lock().unwrap() += 1;
    }
    let op = if method == Method::PUT { Op::BlobPut } else { Op::BlobGet };
    if op == Op::BlobPut {
        s.faults.blob_put_bytes.lock().unwrap().extend_from_slice(&body);
    }
    let (answer, fault) = strike(&s.faults, op).await;
    if let Some(answer) = answer {
        return answer;
    }
    if s.strict
        && op == Op::BlobPut
        && let Some(refused) = strict_blob_put(uri.query().unwrap_or(""), &body)
    {
        return refused;
    }
    let path_and_query = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    // Azurite takes the account as the path's first segment; the fast store has no accounts.
    let target = match &s.fast {
        Some((.., port)) => {
            format!(
                "http://127.0.0.1:{port}{}",
                path_and_query.strip_prefix(&format!("/{ACCOUNT}")).unwrap_or(path_and_query)
            )
        }
        None => format!("http://127.0.0.1:{}{path_and_query}", azurite::azurite().port),
    };
    let mut request = s.client.request(method.clone(), &target);
    for (name, value) in &headers {
        if !matches!(name.as_str(), "host" | "connection" | "content-length" | "transfer-encoding") {
            request = request.header(name, value);
        }
    }
    let upstream = match request.body(body).send().await {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = upstream.status();
    let mut out_headers = HeaderMap::new();
    for (name, value) in upstream.headers() {
        if !matches!(name.as_str(), "connection" | "transfer-encoding" | "keep-alive") {
            out_headers.insert(name, value.clone());
        }
    }
    match fault {
        Some(Fault::Reset { after }) => {
            let mut upstream = upstream;
            let stream = async_stream(move |tx| async move {
                let mut sent = 0usize;
                while let Ok(Some(chunk)) = upstream.chunk().await {
                    let take = chunk.len().min(after.saturating_sub(sent));
                    if take > 0 {
                        let _ = tx.send(Ok(chunk.slice(..take))).await;
                    }
                    sent += take;
                    if sent >= after {
                        break;
                    }
                }
                let _ = tx.send(Err(std::io::Error::other("injected reset"))).await;
            });
            (status, out_headers, Body::from_stream(stream)).into_response()
        }
        Some(Fault::Truncate { keep }) => {
            let full = upstream.bytes().await.unwrap_or_default();
            let short = full.slice(..keep.min(full.len()));
            out_headers.insert(header::CONTENT_LENGTH, HeaderValue::from(short.len()));
            (status, out_headers, short).into_response()
        }
        Some(Fault::WrongSize { extra }) => {
            let claimed = out_headers
                .get(header::CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.rsplit_once('/'))
                .and_then(|(range, total)| Some(format!("{range}/{}", total.parse::<u64>().ok()? + extra)));
            if let Some(claimed) = claimed {
                out_headers.insert(header::CONTENT_RANGE, HeaderValue::from_str(&claimed).unwrap());
            }
            let full = upstream.bytes().await.unwrap_or_default();
            (status, out_headers, full).into_response()
        }
        Some(Fault::Corrupt { offset }) => {
            let mut full = upstream.bytes().await.unwrap_or_default().to_vec();
            if offset < full.len() {
                full[offset] ^= 0x20;
            }
            (status, out_headers, full).into_response()
        }
        _ => {
            let mut upstream = upstream;
            let stream = async_stream(move |tx| async move {
                loop {
                    match upstream.chunk().await {
                        Ok(Some(chunk)) => {
                            if tx.send(Ok(chunk)).await.is_err() {
                                return;
                            }
                        }
                        Ok(None) => return,
                        Err(e) => {
                            let _ = tx.send(Err(std::io::Error::other(e))).await;
                            return;
                        }
                    }
                }
            });
            (status, out_headers, Body::from_stream(stream)).into_response()
        }
    }
}

/// The index in an Azure SDK block id (base64 of a 36-character UUID and a 12-digit index, 48
/// bytes), as a strict self-hosted server reads it; `None` for any other id.
fn sdk_block_index(id: &str) -> Option<usize> {
    use base64::Engine;
    let raw = base64::engine::general_purpose::STANDARD.decode(id).ok()?;
    let text = String::from_utf8(raw).ok().filter(|t| t.len() == 48)?;
    let (_, index) = text.split_at(36);
    index.bytes().all(|b| b.is_ascii_digit()).then(|| index.parse().ok())?
}

/// A strict server's checks of a Put Block (its id) and a Put Block List (its blocks in index
/// order, as the server assembles them): the refusal, if any.
fn strict_blob_put(query: &str, body: &[u8]) -> Option<Response> {
    let q: HashMap<String, String> = url::form_urlencoded::parse(query.as_bytes()).into_owned().collect();
    match q.get("comp").map(String::as_str) {
        Some("block") => {
            let id = q.get("blockid").map(String::as_str).unwrap_or("");
            sdk_block_index(id)
                .is_none()
                .then(|| (StatusCode::BAD_REQUEST, format!("Invalid block id: {id}")).into_response())
        }
        Some("blocklist") => {
            let xml = String::from_utf8_lossy(body);
            let ids = xml.split("<Latest>").skip(1).filter_map(|t| t.split_once("</Latest>").map(|(id, _)| id));
            let in_order = ids.enumerate().all(|(i, id)| sdk_block_index(id) == Some(i));
            (!in_order).then(|| (StatusCode::BAD_REQUEST, "block list not in index order").into_response())
        }
        _ => None,
    }
}

/// A stream fed by a task.
fn async_stream<F, Fut>(producer: F) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(producer(tx));
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
}

// ---- v1 ------------------------------------------------------------------------------------

fn v1_ok_secret(secret: &str) -> bool {
    secret == V1_SECRET
}

/// A v1 refusal as the service words it: the status and `{"message": …}`.
fn v1_error(status: StatusCode, message: &str) -> Response {
    (status, json(serde_json::json!({ "message": message }))).into_response()
}

async fn v1_lookup(
    State(s): State<Arc<Shared>>,
    Path(secret): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if !v1_ok_secret(&secret) {
        return StatusCode::NOT_FOUND.into_response();
    }
    let (answer, fault) = strike(&s.faults, Op::V1Lookup).await;
    if let Some(answer) = answer {
        return answer;
    }
    if matches!(fault, Some(Fault::ReadDenied)) {
        return v1_error(StatusCode::FORBIDDEN, READ_DENIED);
    }
    let version = q.get("version").cloned().unwrap_or_default();
    let store = s.store.lock().unwrap();
    let scope = s.current_ref.lock().unwrap().clone();
    for key in q.get("keys").map(|k| k.split(',').collect::<Vec<_>>()).unwrap_or_default() {
        if let Some(entry) = find(&store, key, &version, &scope) {
            let matched = match &fault {
                Some(Fault::WrongMatchedKey(other)) => other.clone(),
                _ => entry.key.clone(),
            };
            return json(serde_json::json!({
                "cacheKey": matched,
                "archiveLocation": format!("{}/v1/{V1_SECRET}/_apis/artifactcache/artifacts/{}", s.front, entry.seq),
            }));
        }
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn v1_reserve(State(s): State<Arc<Shared>>, Path(secret): Path<String>, body: Bytes) -> Response {
    if !v1_ok_secret(&secret) {
        return StatusCode::NOT_FOUND.into_response();
    }
    match strike(&s.faults, Op::V1Reserve).await {
        (Some(answer), _) => return answer,
        (None, Some(Fault::ReadOnly)) => return v1_error(StatusCode::FORBIDDEN, WRITE_DENIED),
        (None, Some(Fault::Quota)) => return v1_error(StatusCode::BAD_REQUEST, QUOTA),
        _ => {}
    }
    let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let key = req["key"].as_str().unwrap_or("").to_owned();
    let version = req["version"].as_str().unwrap_or("").to_owned();
    let mut store = s.store.lock().unwrap();
    let pending = store.v1_uploads.values().any(|(k, v, ..)| *k == key && *v == version);
    if s.strict && pending {
        return json(serde_json::json!({ "cacheId": null }));
    }
    // As GitHub's service: refused while the entry exists or another job is creating it.
    if !s.strict && (pending || store.entries.iter().any(|e| e.key == key && e.version == version)) {
        return (StatusCode::CONFLICT, json(serde_json::json!({ "message": "Cache already exists." }))).into_response();
    }
    store.seq += 1;
    let id = store.seq as i64;
    store.v1_uploads.insert(id, (key, version, req["cacheSize"].as_u64(), BTreeMap::new()));
    json(serde_json::json!({ "cacheId": id }))
}

async fn v1_upload(
    State(s): State<Arc<Shared>>,
    Path((secret, id)): Path<(String, i64)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !v1_ok_secret(&secret) {
        return StatusCode::NOT_FOUND.into_response();
    }
    if let (Some(answer), _) = strike(&s.faults, Op::V1Upload).await {
        return answer;
    }
    let range = headers.get(header::CONTENT_RANGE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let Some(start) =
        range.strip_prefix("bytes ").and_then(|r| r.split('-').next()).and_then(|n| n.parse::<u64>().ok())
    else {
        return (StatusCode::BAD_REQUEST, "bad Content-Range").into_response();
    };
    let mut store = s.store.lock().unwrap();
    match store.v1_uploads.get_mut(&id) {
        Some((_, _, _, chunks)) => {
            chunks.insert(start, body);
            StatusCode::OK.into_response()
        }
        None => (StatusCode::BAD_REQUEST, "unknown cache id").into_response(),
    }
}

async fn v1_commit(State(s): State<Arc<Shared>>, Path((secret, id)): Path<(String, i64)>, body: Bytes) -> Response {
    if !v1_ok_secret(&secret) {
        return StatusCode::NOT_FOUND.into_response();
    }
    if let (Some(answer), _) = strike(&s.faults, Op::V1Commit).await {
        return answer;
    }
    let size = serde_json::from_slice::<serde_json::Value>(&body).ok().and_then(|v| v["size"].as_u64());
    let mut store = s.store.lock().unwrap();
    let Some((key, version, reserved, chunks)) = store.v1_uploads.remove(&id) else {
        return (StatusCode::BAD_REQUEST, "unknown cache id").into_response();
    };
    let mut data = Vec::new();
    for (start, chunk) in chunks {
        if start != data.len() as u64 {
            return (StatusCode::BAD_REQUEST, "chunks do not join").into_response();
        }
        data.extend_from_slice(&chunk);
    }
    if size != Some(data.len() as u64) {
        return (StatusCode::BAD_REQUEST, "size does not match").into_response();
    }
    // As act does: the reserved cacheSize must match what arrived.
    if reserved.is_some_and(|r| r != data.len() as u64) {
        return (StatusCode::INTERNAL_SERVER_ERROR, format!("broken file: {} != {reserved:?}", data.len()))
            .into_response();
    }
    store.v1_blobs.insert(id, Bytes::from(data.clone()));
    // A strict server's second upload of a key replaces its entry.
    store.entries.retain(|e| !(e.key == key && e.version == version && e.finalized));
    store.entries.push(Entry {
        key,
        version,
        blob: format!("v1-{id}"),
        size: data.len() as u64,
        finalized: true,
        seq: id as u64,
        r#ref: s.current_ref.lock().unwrap().clone(),
    });
    StatusCode::OK.into_response()
}

async fn v1_download(
    State(s): State<Arc<Shared>>,
    Path((secret, id)): Path<(String, i64)>,
    headers: HeaderMap,
) -> Response {
    if !v1_ok_secret(&secret) {
        return StatusCode::NOT_FOUND.into_response();
    }
    if headers.contains_key(header::AUTHORIZATION) {
        *s.faults.auth_to_blob.lock().unwrap() += 1;
    }
    let (answer, fault) = strike(&s.faults, Op::V1Download).await;
    if let Some(answer) = answer {
        return answer;
    }
    let Some(data) = s.store.lock().unwrap().v1_blobs.get(&id).cloned() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let total = data.len();
    let range = headers.get(header::RANGE).and_then(|v| v.to_str().ok()).and_then(|r| r.strip_prefix("bytes="));
    let (status, start, end) = match range.and_then(|r| r.split_once('-')) {
        Some((a, b)) => {
            let a: usize = a.parse().unwrap_or(0);
            let b: usize = b.parse().map(|b: usize| b.min(total - 1)).unwrap_or(total - 1);
            (StatusCode::PARTIAL_CONTENT, a, b)
        }
        None => (StatusCode::OK, 0, total - 1),
    };
    let mut body = data.slice(start..=end).to_vec();
    let mut out = HeaderMap::new();
    if status == StatusCode::PARTIAL_CONTENT {
        out.insert(header::CONTENT_RANGE, HeaderValue::from_str(&format!("bytes {start}-{end}/{total}")).unwrap());
    }
    match fault {
        Some(Fault::Truncate { keep }) => body.truncate(keep),
        Some(Fault::Corrupt { offset }) if offset < body.len() => body[offset] ^= 0x20,
        Some(Fault::Reset { after }) => {
            let head = Bytes::from(body[..after.min(body.len())].to_vec());
            let stream = futures_util::stream::iter(vec![Ok(head), Err(std::io::Error::other("injected reset"))]);
            return (status, out, Body::from_stream(stream)).into_response();
        }
        _ => {}
    }
    (status, out, body).into_response()
}

// ---- REST (list and delete caches) -------------------------------------------------------------

fn rest_authorized(headers: &HeaderMap) -> bool {
    let auth = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
    auth == format!("Bearer {REST_TOKEN}") || auth == format!("token {REST_TOKEN}")
}

fn rest_error(status: StatusCode, message: &str) -> Response {
    (status, json(serde_json::json!({ "message": message, "documentation_url": "https://docs.github.com/rest" })))
        .into_response()
}

/// `GET /repos/{o}/{r}/actions/caches?key=&ref=&sort=created_at&direction=desc&per_page=&page=`
async fn rest_list(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if s.strict {
        return (StatusCode::NOT_FOUND, "Cannot find any route matching /repos").into_response();
    }
    if !rest_authorized(&headers) {
        return rest_error(StatusCode::UNAUTHORIZED, "Bad credentials");
    }
    if let Some(Fault::Status { code, msg, .. }) = s.faults.next(Op::RestList) {
        return rest_error(StatusCode::from_u16(code).unwrap(), msg);
    }
    let per_page: usize = q.get("per_page").and_then(|p| p.parse().ok()).unwrap_or(30).min(100);
    let page: usize = q.get("page").and_then(|p| p.parse().ok()).unwrap_or(1).max(1);
    let store = s.store.lock().unwrap();
    let mut found: Vec<&Entry> = store
        .entries
        .iter()
        .filter(|e| e.finalized)
        .filter(|e| q.get("key").is_none_or(|k| e.key.starts_with(k.as_str())))
        .filter(|e| q.get("ref").is_none_or(|r| &e.r#ref == r))
        .collect();
    found.sort_by_key(|e| std::cmp::Reverse(e.seq));
    let total = found.len();
    let caches: Vec<serde_json::Value> = found
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .map(|e| {
            // One entry per second from when the first listing was made, so `created_at` orders
            // like the sequence and is as recent as the service's own.
            static START: std::sync::LazyLock<i64> = std::sync::LazyLock::new(|| {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
                now.as_secs() as i64 - 3600
            });
            let at = chrono::DateTime::from_timestamp(*START + e.seq as i64, 0)
                .unwrap()
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            serde_json::json!({
                "id": e.seq, "ref": e.r#ref, "key": e.key, "version": e.version,
                "last_accessed_at": at, "created_at": at, "size_in_bytes": e.size,
            })
        })
        .collect();
    json(serde_json::json!({ "total_count": total, "actions_caches": caches }))
}

async fn rest_delete(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Path((_, _, id)): Path<(String, String, u64)>,
) -> Response {
    if s.strict {
        return (StatusCode::NOT_FOUND, "Cannot find any route matching /repos").into_response();
    }
    if !rest_authorized(&headers) {
        return rest_error(StatusCode::UNAUTHORIZED, "Bad credentials");
    }
    if let Some(Fault::Status { code, msg, .. }) = s.faults.next(Op::RestDelete) {
        return rest_error(StatusCode::from_u16(code).unwrap(), msg);
    }
    let mut store = s.store.lock().unwrap();
    let before = store.entries.len();
    store.entries.retain(|e| !(e.seq == id && e.finalized));
    if store.entries.len() == before {
        return rest_error(StatusCode::NOT_FOUND, "Not Found");
    }
    StatusCode::NO_CONTENT.into_response()
}
