//! What the remote backends share: HTTP clients on a small Tokio runtime, tuning knobs, the one
//! place an answer's status becomes an error ([`Check`]) of an [`ErrorKind`], bounded retries,
//! and the run's one wait for a rate limit ([`Http::retry`]).
//!
//! Timeouts: downloads use a per-read idle timeout; calls and uploads get a whole-request budget
//! instead, because reqwest's read timeout also runs while a request body is being sent.
//!
//! Signed URLs are secrets: errors are stripped of URLs (`reqwest::Error::without_url`) and
//! signatures are registered with the runner's [`SecretSink`] as soon as a URL arrives.

use super::{BackendError, ErrorKind, wire};
use crate::env::Env;
use crate::runner::SecretSink;
use reqwest::header::HeaderMap;
use reqwest::{Response, StatusCode};
use std::future::Future;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub const USER_AGENT: &str = concat!("exact-cache/", env!("CARGO_PKG_VERSION"));

/// The most bytes read of an answer that is not archive data, so an endless body costs a few
/// MiB. The largest legitimate one, an S3 listing page of 1,000 objects, is well under 1 MiB.
pub const MAX_ANSWER_BYTES: usize = 8 << 20;

/// The longest one listing (all its pages) may take.
pub fn list_deadline(env: &Env) -> Duration {
    let secs = env.non_empty("EXACT_CACHE_LIST_DEADLINE_SECONDS").and_then(|v| v.trim().parse::<f64>().ok());
    Duration::try_from_secs_f64(secs.unwrap_or(300.0).clamp(0.0, 1e7)).unwrap_or(Duration::ZERO)
}

/// Sizes, parallelism and timeouts; each has an `EXACT_CACHE_*` override for tests and tuning.
#[derive(Clone, Debug)]
pub struct Tuning {
    /// Attempts per call for transient failures.
    pub attempts: u32,
    /// First backoff; doubles per retry, with jitter.
    pub retry_base: Duration,
    /// Longest wait for the next bytes of a download.
    pub read_timeout: Duration,
    pub connect_timeout: Duration,
    /// Longest one control call (Twirp, REST) may take, answer included.
    pub call_timeout: Duration,
    /// Slowest upload rate accepted, in bytes per second (sets each upload's budget).
    pub min_upload_rate: f64,
    /// Longest network time of one whole download, every range and retry included
    /// (`SEGMENT_DOWNLOAD_TIMEOUT_MINS`). Time spent waiting for the unpacker does not count.
    pub download_deadline: Duration,
    /// Longest time one listing (S3 `ListObjectsV2`, the REST cache list) may take, all pages.
    pub list_deadline: Duration,
    /// Most pages one listing may take.
    pub list_pages: usize,
    /// Bytes per ranged GET.
    pub download_chunk: u64,
    /// Ranged GETs in flight.
    pub download_concurrency: usize,
    /// Bytes per uploaded block (v2) or chunk (v1).
    pub upload_block: usize,
    /// Blocks in flight.
    pub upload_concurrency: usize,
    /// Largest archive sent as one Put Blob (v2).
    pub single_put_limit: usize,
    /// The longest `Retry-After` a run waits out (once), capped by [`Tuning::call_timeout`].
    pub rate_limit_wait: Duration,
}

impl Tuning {
    pub fn from_env(env: &Env) -> Self {
        let num = |name: &str| env.non_empty(name).and_then(|v| v.trim().parse::<f64>().ok()).filter(|v| *v >= 0.0);
        // Clamped, so no setting can overflow a Duration.
        let secs = |name: &str, default: f64| duration(num(name).unwrap_or(default));
        let mib = |name: &str, default: f64| (num(name).unwrap_or(default) * 1024.0 * 1024.0) as usize;
        // The toolkit's SEGMENT_DOWNLOAD_TIMEOUT_MINS: here it bounds the whole download.
        let deadline_default = num("SEGMENT_DOWNLOAD_TIMEOUT_MINS").map(|m| m * 60.0).unwrap_or(10.0 * 60.0);
        Self {
            attempts: num("EXACT_CACHE_ATTEMPTS").map(|n| n.max(1.0) as u32).unwrap_or(4),
            retry_base: Duration::from_millis(num("EXACT_CACHE_RETRY_BASE_MS").unwrap_or(1000.0) as u64),
            read_timeout: secs("EXACT_CACHE_READ_TIMEOUT_SECONDS", 30.0),
            connect_timeout: secs("EXACT_CACHE_CONNECT_TIMEOUT_SECONDS", 30.0),
            call_timeout: secs("EXACT_CACHE_CALL_TIMEOUT_SECONDS", 300.0),
            min_upload_rate: num("EXACT_CACHE_MIN_UPLOAD_KIB_PER_SECOND").unwrap_or(64.0).max(1.0) * 1024.0,
            download_deadline: secs("EXACT_CACHE_DOWNLOAD_DEADLINE_SECONDS", deadline_default),
            list_deadline: list_deadline(env),
            list_pages: num("EXACT_CACHE_LIST_PAGES").map(|n| n.max(1.0) as usize).unwrap_or(100),
            download_chunk: mib("EXACT_CACHE_DOWNLOAD_CHUNK_MIB", 8.0).max(64 * 1024) as u64,
            download_concurrency: num("EXACT_CACHE_DOWNLOAD_CONCURRENCY").map(|n| n.max(1.0) as usize).unwrap_or(6),
            upload_block: mib("EXACT_CACHE_UPLOAD_BLOCK_MIB", 16.0).max(64 * 1024),
            upload_concurrency: num("EXACT_CACHE_UPLOAD_CONCURRENCY").map(|n| n.max(1.0) as usize).unwrap_or(4),
            single_put_limit: mib("EXACT_CACHE_SINGLE_PUT_MIB", 16.0),
            rate_limit_wait: secs("EXACT_CACHE_RATE_LIMIT_WAIT_SECONDS", 60.0),
        }
    }

    /// The whole-request budget of an upload of `len` bytes.
    pub fn upload_timeout(&self, len: usize) -> Duration {
        self.call_timeout.min(Duration::from_secs(60)) + duration(len as f64 / self.min_upload_rate)
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let base = self.retry_base.as_secs_f64() * 2f64.powi(attempt.saturating_sub(1) as i32);
        // ±25% jitter from the clock: enough to spread parallel jobs apart.
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let jitter = 0.75 + (nanos % 1000) as f64 / 2000.0;
        duration(base * jitter)
    }
}

/// Seconds as a Duration, clamped to [0, ~115 days]; never panics.
fn duration(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs.clamp(0.0, 1e7)).unwrap_or(Duration::ZERO)
}

/// The HTTP side of a remote backend. Tasks hold it through an `Arc`, so its last owner may be
/// a task on its own runtime: `Drop` shuts the runtime down without blocking, which is allowed
/// there (dropping a runtime inside itself would panic).
pub struct Http {
    rt: Option<tokio::runtime::Runtime>,
    /// Calls and uploads: no idle timeout; each request carries its own budget.
    pub client: reqwest::Client,
    /// Downloads: an idle timeout between reads.
    pub download_client: reqwest::Client,
    pub tuning: Tuning,
    pub secrets: SecretSink,
    /// The first rate-limit answer of this run that was not waited out: every later call is
    /// refused, naming it.
    rate_limited: OnceLock<BackendError>,
    /// The run's one wait for a rate limit: when it ends, once begun.
    rate_wait: Mutex<Option<Instant>>,
}

impl Http {
    pub fn new(env: &Env, secrets: SecretSink) -> Result<Self, BackendError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let tuning = Tuning::from_env(env);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("exact-cache-http")
            .enable_all()
            .build()
            .map_err(|e| BackendError::new(ErrorKind::Fatal, "cannot start the HTTP runtime").with_source(e))?;
        let build = |read_timeout: Option<Duration>| {
            let mut builder = reqwest::Client::builder().user_agent(USER_AGENT).connect_timeout(tuning.connect_timeout);
            if let Some(t) = read_timeout {
                builder = builder.read_timeout(t);
            }
            builder.build().map_err(|e| {
                BackendError::new(ErrorKind::Fatal, "cannot build the HTTP client").with_source(e.without_url())
            })
        };
        let client = build(None)?;
        let download_client = build(Some(tuning.read_timeout))?;
        Ok(Self {
            rt: Some(rt),
            client,
            download_client,
            tuning,
            secrets,
            rate_limited: OnceLock::new(),
            rate_wait: Mutex::new(None),
        })
    }

    pub fn rt(&self) -> &tokio::runtime::Runtime {
        self.rt.as_ref().expect("the runtime lives as long as Http")
    }

    /// Register the content (at most 64 KiB) of the token file the variable `name` names: a
    /// token endpoint may echo it. A name that is not a plain file is an error before any request
    /// (a FIFO would stall the credential client).
    pub fn mask_token_file(&self, env: &Env, name: &str) -> Result<(), BackendError> {
        use std::io::Read;
        let Some(path) = env.non_empty(name) else { return Ok(()) };
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
        // A file that is missing or unreadable is the credential client's to report.
        let Ok(file) = options.open(path) else { return Ok(()) };
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(BackendError::new(
                ErrorKind::Fatal,
                format!("`{name}` names `{path}`, which is not a plain file"),
            ));
        }
        let mut text = String::new();
        if file.take(64 << 10).read_to_string(&mut text).is_ok() {
            self.secrets.add(&text);
        }
        Ok(())
    }

    /// Register the signature of a signed URL (Azure's `sig`, S3's `X-Amz-Signature`, and S3's
    /// session token), or the whole query when there is none.
    pub fn mask_url(&self, url: &str) {
        if let Ok(parsed) = url::Url::parse(url) {
            let mut found = false;
            for (name, value) in parsed.query_pairs() {
                let secret = ["sig", "signature", "x-amz-signature", "x-amz-security-token"];
                if secret.iter().any(|s| name.eq_ignore_ascii_case(s)) {
                    self.secrets.add(&value);
                    self.secrets.add(&urlencode(&value));
                    found = true;
                }
            }
            if !found && let Some(query) = parsed.query() {
                self.secrets.add(query);
            }
        }
    }

    /// Run `call` until it succeeds, fails for good, or runs out of attempts; transient failures
    /// and timeouts back off. A rate limit is waited out once (`Http::rate_limit_wait`); a
    /// second one, or one that cannot be waited out, stops every later call of the run.
    pub async fn retry<T, F, Fut>(&self, mut call: F) -> Result<T, BackendError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        let mut attempt = 1;
        let mut waited = false;
        loop {
            if let Some(first) = self.rate_limited.get() {
                // Lookups run at once: whichever is refused here names the answer that tripped
                // the breaker, so the log says the same whatever the order.
                let message = format!(
                    "the cache service rate-limited an earlier call ({}); no more calls in this run",
                    first.message
                );
                return Err(BackendError::new(first.kind, message));
            }
            match call().await {
                Ok(v) => return Ok(v),
                Err(e) if matches!(e.kind, ErrorKind::RateLimited { .. }) => {
                    if !waited && let Some(until) = self.rate_limit_wait(e.kind) {
                        waited = true;
                        tokio::time::sleep_until(until.into()).await;
                        continue;
                    }
                    let _ = self.rate_limited.set(BackendError::new(e.kind, e.message.clone()));
                    return Err(e);
                }
                // A conflict (or a refused condition) after a retried request may be our own
                // first attempt: that is not "another job saved it", and nothing was saved by us.
                Err(e) if matches!(e.kind, ErrorKind::AlreadyExists | ErrorKind::Precondition) && attempt > 1 => {
                    let message =
                        format!("{} (after a retried request; its first attempt may hold the entry)", e.message);
                    return Err(BackendError { kind: ErrorKind::Fatal, message, ..e });
                }
                Err(e)
                    if matches!(e.kind, ErrorKind::Transient | ErrorKind::Timeout)
                        && attempt < self.tuning.attempts =>
                {
                    tokio::time::sleep(self.tuning.backoff(attempt)).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// When a rate-limited call may be made again: after the run's one wait of the `Retry-After`
    /// asked for, if short enough. Calls answered 429 during that wait share it; after it, or for
    /// a `Retry-After` too long or absent, `None`.
    fn rate_limit_wait(&self, rate_limited: ErrorKind) -> Option<Instant> {
        let ErrorKind::RateLimited { retry_after: Some(after) } = rate_limited else { return None };
        let mut wait = self.rate_wait.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        match *wait {
            Some(until) => (now < until).then_some(until),
            None if after <= self.tuning.rate_limit_wait.min(self.tuning.call_timeout) => {
                *wait = Some(now + after);
                *wait
            }
            None => None,
        }
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

pub fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Send `request`: its answer whatever its status (check it with [`Check`]), or the transport
/// failure named `what`.
pub async fn send(what: &str, request: reqwest::RequestBuilder) -> Result<Response, BackendError> {
    request.send().await.map_err(|e| transport_error(what, e))
}

/// The one check of an answer's status; the error keeps a short, redacted excerpt of the body.
pub trait Check: Sized {
    /// The answer when its status is a success; otherwise the error [`status_error`] reads.
    fn check(self, what: &str) -> impl Future<Output = Result<Self, BackendError>> + Send;

    /// [`Check::check`] with another reading of a failed answer (its status, headers and at
    /// most [`MAX_ANSWER_BYTES`] of its body). The error keeps the status either way.
    fn check_with<F>(self, refused: F) -> impl Future<Output = Result<Self, BackendError>> + Send
    where
        F: FnOnce(StatusCode, &HeaderMap, &str) -> BackendError + Send;
}

impl Check for Response {
    fn check(self, what: &str) -> impl Future<Output = Result<Self, BackendError>> + Send {
        self.check_with(move |status, headers, body| status_error(what, status, headers, body))
    }

    async fn check_with<F>(self, refused: F) -> Result<Self, BackendError>
    where
        F: FnOnce(StatusCode, &HeaderMap, &str) -> BackendError + Send,
    {
        let status = self.status();
        if status.is_success() {
            return Ok(self);
        }
        let headers = self.headers().clone();
        let (body, _) = read_bounded(self).await;
        Err(refused(status, &headers, &String::from_utf8_lossy(&body)).with_status(status.as_u16()))
    }
}

/// How reading a bounded body ended.
enum Ended {
    Whole,
    /// More than [`MAX_ANSWER_BYTES`]: the rest was never read.
    Cut,
    Broken(reqwest::Error),
}

async fn read_bounded(mut response: Response) -> (Vec<u8>, Ended) {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = MAX_ANSWER_BYTES - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if chunk.len() > room {
                    return (body, Ended::Cut);
                }
            }
            Ok(None) => return (body, Ended::Whole),
            Err(e) => return (body, Ended::Broken(e)),
        }
    }
}

/// The body of an answer that is not archive data, as text, or an error naming the limit.
pub async fn read_answer(what: &str, response: Response) -> Result<String, BackendError> {
    let too_large = || {
        BackendError::new(
            ErrorKind::Fatal,
            format!("{what}: the answer was larger than {} MiB", MAX_ANSWER_BYTES >> 20),
        )
    };
    if response.content_length().is_some_and(|n| n > MAX_ANSWER_BYTES as u64) {
        return Err(too_large());
    }
    match read_bounded(response).await {
        (body, Ended::Whole) => Ok(String::from_utf8_lossy(&body).into_owned()),
        (_, Ended::Cut) => Err(too_large()),
        (_, Ended::Broken(e)) => Err(transport_error(what, e)),
    }
}

/// What a client is told when its TLS handshake was answered in plain HTTP.
pub const NOT_TLS: &str = "the endpoint does not speak TLS";

/// A transport failure (no HTTP status): worth retrying unless [`answered_in_plain_http`].
pub fn transport_error(what: &str, e: reqwest::Error) -> BackendError {
    let e = e.without_url();
    if answered_in_plain_http(&e) {
        return BackendError::new(ErrorKind::Fatal, format!("{what}: {NOT_TLS}: use `http://…`")).with_source(e);
    }
    let kind = if e.is_timeout() { ErrorKind::Timeout } else { ErrorKind::Transient };
    let detail = if e.is_timeout() { "timed out" } else { "connection failed" };
    BackendError::new(kind, format!("{what}: {detail}")).with_source(e)
}

/// Whether `error` (or one of its causes) is a TLS handshake answered by a server that speaks
/// plain HTTP: rustls reads `HTTP/1.1 …` as a record of no known content type. An `https://`
/// URL for a plain-HTTP server fails this way on every attempt, so it is never retried.
pub fn answered_in_plain_http(error: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(error), |e| cause(*e)).any(|e| {
        matches!(
            e.downcast_ref::<rustls::Error>(),
            Some(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType))
        )
    })
}

/// The next cause of `error`: an `io::Error`'s `source` skips the error it wraps, so step into
/// that instead.
fn cause<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a (dyn std::error::Error + 'static)> {
    match error.downcast_ref::<std::io::Error>() {
        Some(io) => io.get_ref().map(|inner| inner as &(dyn std::error::Error + 'static)),
        None => error.source(),
    }
}

/// The error an HTTP error status stands for. `body` may be a Twirp error (`{"code","msg"}`), an
/// Azure DevOps error (`{"message","typeKey"}`) or an XML `<Error>` document (Azure Blob, S3).
pub fn status_error(what: &str, status: StatusCode, headers: &HeaderMap, body: &str) -> BackendError {
    let detail = error_detail(body);
    let lower = detail.to_ascii_lowercase();
    let kind = match status.as_u16() {
        429 => ErrorKind::RateLimited { retry_after: retry_after(headers) },
        code => kind_in_words(&detail).unwrap_or(match code {
            404 => ErrorKind::NotFound,
            409 => ErrorKind::AlreadyExists,
            408 | 500 | 502 | 503 | 504 => ErrorKind::Transient,
            _ if lower.contains("already exists") => ErrorKind::AlreadyExists,
            403 => ErrorKind::Forbidden,
            412 => ErrorKind::Precondition,
            _ => ErrorKind::Fatal,
        }),
    };
    let mut message = format!("{what}: HTTP {}", status.as_u16());
    if let ErrorKind::RateLimited { retry_after: Some(after) } = kind {
        message.push_str(&format!(" (retry after {} s)", after.as_secs()));
    }
    if !detail.is_empty() {
        message.push_str(&format!(": {detail}"));
    }
    BackendError::new(kind, message).with_status(status.as_u16())
}

/// The kind a cache service's message names, where its status cannot (a 403 is a refused read
/// as well as a bad token; a quota arrives as a 400, or as `ok: false` with a message). Matching
/// the message is done here, in the decoding layer, and only for GitHub's stable prefixes and
/// phrases (as the official toolkit matches them); everything past this point goes by the kind.
pub fn kind_in_words(message: &str) -> Option<ErrorKind> {
    let lower = message.to_ascii_lowercase();
    if lower.contains("cache read denied:") {
        Some(ErrorKind::ReadDenied)
    } else if lower.contains("cache write denied:") {
        Some(ErrorKind::ReadOnly)
    } else if lower.contains("insufficient usage") || lower.contains("quota") {
        Some(ErrorKind::QuotaExceeded)
    } else {
        None
    }
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// A short human-readable detail from an error body, never longer than one line of text.
fn error_detail(body: &str) -> String {
    let text = match serde_json::from_str::<serde_json::Value>(body) {
        Ok(json) => ["msg", "message", "error"]
            .iter()
            .find_map(|k| json.get(k).and_then(|v| v.as_str()).map(str::to_owned))
            .unwrap_or_default(),
        Err(_) => body.lines().next().unwrap_or("").to_owned(),
    };
    let text = text.trim();
    if text.starts_with('<') {
        // XML errors (Azure, S3): keep the code.
        return wire::error_document(body).map(|doc| one_line(&doc.code)).unwrap_or_default();
    }
    one_line(text)
}

/// A server's words as one short line: control characters (a line break could start a workflow
/// command) become spaces. Redacted before the cut, so no part of an echoed token is left.
pub fn one_line(text: &str) -> String {
    let text = crate::runner::redact_registered(text);
    let line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).take(300).collect();
    line.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn statuses_map_to_kinds() {
        let mut headers = HeaderMap::new();
        let e = status_error(
            "create",
            StatusCode::CONFLICT,
            &headers,
            r#"{"code":"already_exists","msg":"cache entry exists"}"#,
        );
        assert_eq!((e.kind, e.status), (ErrorKind::AlreadyExists, Some(409)));
        assert_eq!(e.message, "create: HTTP 409: cache entry exists");
        headers.insert(reqwest::header::RETRY_AFTER, "60".parse().unwrap());
        let e = status_error("create", StatusCode::TOO_MANY_REQUESTS, &headers, "");
        assert_eq!(e.kind, ErrorKind::RateLimited { retry_after: Some(Duration::from_secs(60)) });
        assert_eq!(e.message, "create: HTTP 429 (retry after 60 s)");
        let e = status_error("x", StatusCode::BAD_GATEWAY, &HeaderMap::new(), "<html>bad gateway</html>");
        assert_eq!(e.kind, ErrorKind::Transient);
        let e = status_error(
            "x",
            StatusCode::BAD_REQUEST,
            &HeaderMap::new(),
            r#"{"code":"invalid_argument","msg":"insufficient usage to create cache entry"}"#,
        );
        assert_eq!(e.kind, ErrorKind::QuotaExceeded);
        let e = status_error(
            "put",
            StatusCode::FORBIDDEN,
            &HeaderMap::new(),
            "<?xml version=\"1.0\"?><Error><Code>AuthenticationFailed</Code><Message>x</Message></Error>",
        );
        assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Forbidden, "put: HTTP 403: AuthenticationFailed"));
        // Found by the `wire` fuzz target: a line break inside <Code> reached the message.
        let broken = "<?xml version=\"1.0\"?><Error><Code>Auth\n::error::x</Code></Error>";
        let e = status_error("put", StatusCode::FORBIDDEN, &HeaderMap::new(), broken);
        assert_eq!(e.message, "put: HTTP 403: Auth ::error::x");
        // XML that is no `<Error>` document shows no detail.
        let e = status_error("put", StatusCode::FORBIDDEN, &HeaderMap::new(), "<?xml><Code>Auth</Code>");
        assert_eq!(e.message, "put: HTTP 403");
        let e = status_error("x", StatusCode::BAD_REQUEST, &HeaderMap::new(), r#"{"msg":"a\r\nb"}"#);
        assert_eq!(e.message, "x: HTTP 400: a  b");
    }

    #[test]
    fn the_status_decides_the_kind_and_is_kept() {
        let cases = [
            (403, ErrorKind::Forbidden),
            (412, ErrorKind::Precondition),
            (409, ErrorKind::AlreadyExists),
            (404, ErrorKind::NotFound),
            (401, ErrorKind::Fatal),
            (400, ErrorKind::Fatal),
            (503, ErrorKind::Transient),
            (429, ErrorKind::RateLimited { retry_after: None }),
        ];
        for (status, kind) in cases {
            let e = status_error("x", StatusCode::from_u16(status).unwrap(), &HeaderMap::new(), "");
            assert_eq!((e.kind, e.status), (kind, Some(status)), "HTTP {status}");
        }
        // A service's words decide only where the status cannot.
        let exists = r#"{"msg":"cache entry already exists"}"#;
        assert_eq!(status_error("x", StatusCode::FORBIDDEN, &HeaderMap::new(), exists).kind, ErrorKind::AlreadyExists);
        let quota = r#"{"msg":"quota exceeded"}"#;
        assert_eq!(status_error("x", StatusCode::FORBIDDEN, &HeaderMap::new(), quota).kind, ErrorKind::QuotaExceeded);
        // Our own words never do.
        let words = "access denied (HTTP 403)";
        assert_eq!(status_error("x", StatusCode::BAD_REQUEST, &HeaderMap::new(), words).kind, ErrorKind::Fatal);
    }

    #[test]
    fn githubs_refusals_are_told_apart_by_their_words_where_the_status_cannot() {
        let twirp = |msg: &str| format!(r#"{{"code":"permission_denied","msg":"{msg}"}}"#);
        let v1 = |msg: &str| format!(r#"{{"message":"{msg}"}}"#);
        let cases = [
            (403, twirp("cache read denied: the token has no readable cache scopes"), ErrorKind::ReadDenied),
            (403, v1("cache read denied: no scopes"), ErrorKind::ReadDenied),
            (403, v1("cache write denied: token has no writable scopes"), ErrorKind::ReadOnly),
            (400, v1("Cache storage quota exceeded for repository"), ErrorKind::QuotaExceeded),
            (403, twirp("Resource not accessible by integration"), ErrorKind::Forbidden),
            // A rate limit is one whatever it says.
            (429, v1("quota of requests exceeded"), ErrorKind::RateLimited { retry_after: None }),
        ];
        for (status, body, kind) in cases {
            let e = status_error("x", StatusCode::from_u16(status).unwrap(), &HeaderMap::new(), &body);
            assert_eq!((e.kind, e.status), (kind, Some(status)), "{body}");
        }
        // And in an `ok: false` answer's message.
        assert_eq!(kind_in_words("Cache storage quota exceeded for repository"), Some(ErrorKind::QuotaExceeded));
        assert_eq!(kind_in_words("cache write denied: x"), Some(ErrorKind::ReadOnly));
        assert_eq!(kind_in_words("another job is creating this cache"), None);
    }

    /// A call that answers 429 (with `after`) `limited` times, then succeeds; how many calls it
    /// took, and the result.
    fn limited(http: &Http, limited: u32, after: Option<Duration>) -> (u32, Result<(), BackendError>) {
        let calls = std::sync::atomic::AtomicU32::new(0);
        let result = http.rt().block_on(http.retry(|| async {
            if calls.fetch_add(1, Ordering::Relaxed) < limited {
                return Err(BackendError::new(ErrorKind::RateLimited { retry_after: after }, "x: HTTP 429"));
            }
            Ok(())
        }));
        (calls.load(Ordering::Relaxed), result)
    }

    #[test]
    fn a_rate_limit_is_waited_out_once_in_a_run_then_stops_every_call() {
        let short = Some(Duration::from_millis(200));
        let env = Env::from_pairs([("EXACT_CACHE_RATE_LIMIT_WAIT_SECONDS", "1")]);
        // One 429: waited out, then the call succeeds.
        let http = Http::new(&env, SecretSink::detached()).unwrap();
        let started = Instant::now();
        let (calls, result) = limited(&http, 1, short);
        assert_eq!((calls, result.is_ok()), (2, true));
        assert!(started.elapsed() >= Duration::from_millis(200), "{:?}", started.elapsed());
        // The run's one wait is spent: the next 429 stops this call and every later one.
        let (calls, result) = limited(&http, 1, short);
        assert_eq!((calls, result.unwrap_err().kind), (1, ErrorKind::RateLimited { retry_after: short }));
        let (calls, result) = limited(&http, 0, None);
        assert_eq!(calls, 0, "the breaker refuses without a call");
        assert!(result.unwrap_err().message.contains("rate-limited an earlier call"));

        // Still limited after the wait: never a loop.
        let http = Http::new(&env, SecretSink::detached()).unwrap();
        let (calls, result) = limited(&http, 100, short);
        assert_eq!((calls, result.is_err()), (2, true));
        // Longer than the step waits, or no `Retry-After`: not waited for at all.
        for after in [Some(Duration::from_secs(5)), None] {
            let http = Http::new(&env, SecretSink::detached()).unwrap();
            let started = Instant::now();
            let (calls, result) = limited(&http, 1, after);
            assert_eq!((calls, result.is_err()), (1, true), "{after:?}");
            assert!(started.elapsed() < Duration::from_secs(1));
        }
    }

    #[test]
    fn calls_limited_during_the_wait_share_it() {
        let env = Env::from_pairs([("EXACT_CACHE_RATE_LIMIT_WAIT_SECONDS", "1")]);
        let http = Http::new(&env, SecretSink::detached()).unwrap();
        let after = Some(Duration::from_millis(300));
        let calls = std::sync::atomic::AtomicU32::new(0);
        let started = Instant::now();
        let call = || async {
            // Each of the two is limited on its first call only.
            if calls.fetch_add(1, Ordering::Relaxed) < 2 {
                return Err(BackendError::new(ErrorKind::RateLimited { retry_after: after }, "x: HTTP 429"));
            }
            Ok(())
        };
        let (a, b) = http.rt().block_on(async { tokio::join!(http.retry(call), http.retry(call)) });
        assert!(a.is_ok() && b.is_ok(), "{a:?} {b:?}");
        assert_eq!(calls.load(Ordering::Relaxed), 4);
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(300) && took < Duration::from_millis(550), "one wait: {took:?}");
    }

    #[test]
    fn a_conflict_after_a_retry_is_not_another_writers_entry() {
        let env = Env::from_pairs([("EXACT_CACHE_RETRY_BASE_MS", "1")]);
        let http = Http::new(&env, SecretSink::detached()).unwrap();
        for refusal in [ErrorKind::AlreadyExists, ErrorKind::Precondition] {
            let calls = std::sync::atomic::AtomicU32::new(0);
            let e = http
                .rt()
                .block_on(http.retry(|| async {
                    let first = calls.fetch_add(1, Ordering::Relaxed) == 0;
                    let kind = if first { ErrorKind::Transient } else { refusal };
                    Err::<(), _>(BackendError::new(kind, "complete").with_status(412))
                }))
                .unwrap_err();
            assert_eq!((e.kind, e.status), (ErrorKind::Fatal, Some(412)), "{refusal:?}");
            assert!(e.message.starts_with("complete (after a retried request"), "{}", e.message);
        }
    }

    /// A server that answers every connection in plain HTTP, as an S3 test server does.
    fn plain_http_server() -> u16 {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let _ = stream.read(&mut [0u8; 4096]);
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            }
        });
        port
    }

    #[test]
    fn an_https_url_on_a_plain_http_server_is_named_and_never_retried() {
        let env = Env::from_pairs([("EXACT_CACHE_RETRY_BASE_MS", "1")]);
        let http = Http::new(&env, SecretSink::detached()).unwrap();
        let url = format!("https://127.0.0.1:{}/bucket", plain_http_server());
        let calls = std::sync::atomic::AtomicU32::new(0);
        let e = http
            .rt()
            .block_on(http.retry(|| async {
                calls.fetch_add(1, Ordering::Relaxed);
                send("list the bucket", http.client.get(&url)).await
            }))
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Fatal, "{e:?}");
        assert_eq!(e.message, "list the bucket: the endpoint does not speak TLS: use `http://…`");
        assert!(answered_in_plain_http(&e), "the cause is kept");
        assert_eq!(calls.load(Ordering::Relaxed), 1, "never retried");
        // Any other connection failure is still worth retrying.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let e = http.rt().block_on(send("x", http.client.get(format!("https://127.0.0.1:{closed}/")))).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Transient, "{e:?}");
        assert!(!answered_in_plain_http(&e));
    }

    #[test]
    fn signatures_are_registered_as_secrets() {
        let env = Env::default();
        let sink = SecretSink::detached();
        let http = Http::new(&env, sink.clone()).unwrap();
        http.mask_url("https://acct.blob.core.windows.net/c/b?sv=2020&sig=abc%2Bdef%3D&se=x");
        assert!(sink.contains("abc+def="));
    }
}
