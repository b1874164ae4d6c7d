//! Local peers for the cache-service tests: a GitHub cache service (v2 Twirp and v1 REST) on
//! 127.0.0.1, storing v2 blobs in Azurite through real SAS-signed URLs, with scriptable
//! faults, and a strict self-hosted mode that behaves as falcondev-oss/github-actions-cache-server
//! does (`Services::start_strict`). The official `@actions/cache` client is run against it in both
//! modes to prove it speaks the real protocol (tests/integration/official_client.rs,
//! tests/integration/self_hosted.rs).

pub mod azurite;
mod fast_blob;
mod server;

pub use server::{BlobStore, DEFAULT_REF, REST_TOKEN, Services, TOKEN, V1_SECRET};

/// What the service says when it refuses a read ([`Fault::ReadDenied`]), as GitHub words it.
pub const READ_DENIED: &str = "cache read denied: the token has no readable cache scopes";
/// What the service says when it refuses a write ([`Fault::ReadOnly`]).
pub const WRITE_DENIED: &str = "cache write denied: token has no writable scopes";
/// What the service says when the repository is over its cache quota ([`Fault::Quota`]).
pub const QUOTA: &str = "Cache storage quota exceeded for repository";

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Where a fault strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// v2 `GetCacheEntryDownloadURL`
    Lookup,
    /// v2 `CreateCacheEntry`
    Create,
    /// v2 `FinalizeCacheEntryUpload`
    Finalize,
    /// Azure Put Blob / Put Block / Put Block List through the blob front
    BlobPut,
    /// Azure GET through the blob front
    BlobGet,
    /// v1 `GET cache`
    V1Lookup,
    /// v1 `POST caches`
    V1Reserve,
    /// v1 `PATCH caches/<id>`
    V1Upload,
    /// v1 `POST caches/<id>`
    V1Commit,
    /// v1 archive download
    V1Download,
    /// REST `GET /repos/{o}/{r}/actions/caches`
    RestList,
    /// REST `DELETE /repos/{o}/{r}/actions/caches/{id}`
    RestDelete,
}

#[derive(Clone, Debug)]
pub enum Fault {
    /// Answer with this HTTP status (and `Retry-After`, and a Twirp-style error body).
    Status { code: u16, retry_after: Option<u64>, msg: &'static str },
    /// Downloads: send this many bytes of the body, then reset the connection.
    Reset { after: usize },
    /// Downloads: a well-formed answer with only this many bytes of body.
    Truncate { keep: usize },
    /// Wait this long before answering.
    Stall { seconds: f64 },
    /// Lookups: answer with this key instead (a prefix match of another entry).
    WrongMatchedKey(String),
    /// Lookups (v2 `GetCacheEntryDownloadURL`, v1 `GET cache`): refused as for a token with no
    /// readable cache scope — v2 a Twirp `permission_denied` (HTTP 403), v1 HTTP 403 with a
    /// `message` — the message beginning `cache read denied:` ([`READ_DENIED`]).
    ReadDenied,
    /// v2 `CreateCacheEntry`: `ok: false`; v1 `POST caches`: HTTP 403 with a `message`: as for a
    /// read-only token, the message beginning `cache write denied:` ([`WRITE_DENIED`]).
    ReadOnly,
    /// v2 `CreateCacheEntry` and `FinalizeCacheEntryUpload`: `ok: false`; v1 `POST caches`:
    /// HTTP 400 with a `message`: the repository is over its cache storage quota ([`QUOTA`]).
    Quota,
    /// Downloads: flip one byte at this offset of the body.
    Corrupt { offset: usize },
    /// Downloads: a `Content-Range` total this many bytes larger than the blob.
    WrongSize { extra: u64 },
}

#[derive(Default)]
pub struct Faults {
    queued: Mutex<HashMap<Op, VecDeque<Fault>>>,
    calls: Mutex<HashMap<Op, usize>>,
    /// Requests to the blob front that carried an `Authorization` header (must stay 0).
    pub auth_to_blob: Mutex<usize>,
    /// Every byte PUT to the blob front (blocks, blobs and block lists), in arrival order.
    pub blob_put_bytes: Mutex<Vec<u8>>,
    /// Requests the blob front is answering now, their bodies not yet sent (a stalled one among
    /// them).
    pub blob_in_flight: std::sync::atomic::AtomicUsize,
}

/// Counts a blob front request in [`Faults::blob_in_flight`] while it lives: held by the
/// answer's body, so until the body is sent (or the client went away).
pub(crate) struct InFlight(std::sync::Arc<Faults>);

impl InFlight {
    pub(crate) fn new(faults: &std::sync::Arc<Faults>) -> Self {
        faults.blob_in_flight.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self(std::sync::Arc::clone(faults))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.blob_in_flight.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Faults {
    /// Strike the next `times` calls of `op`.
    pub fn push(&self, op: Op, fault: Fault, times: usize) {
        let mut q = self.queued.lock().unwrap();
        let queue = q.entry(op).or_default();
        for _ in 0..times {
            queue.push_back(fault.clone());
        }
    }

    pub fn clear(&self) {
        self.queued.lock().unwrap().clear();
    }

    /// Count a call of `op` and hand out its fault, if one is queued.
    pub fn next(&self, op: Op) -> Option<Fault> {
        *self.calls.lock().unwrap().entry(op).or_default() += 1;
        self.queued.lock().unwrap().get_mut(&op).and_then(VecDeque::pop_front)
    }

    /// Wait until the blob front answers no request (at most `limit`); whether it got there.
    pub fn wait_until_blob_front_is_idle(&self, limit: std::time::Duration) -> bool {
        let start = std::time::Instant::now();
        while self.blob_in_flight.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            if start.elapsed() > limit {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        true
    }

    pub fn calls(&self, op: Op) -> usize {
        self.calls.lock().unwrap().get(&op).copied().unwrap_or(0)
    }
}
