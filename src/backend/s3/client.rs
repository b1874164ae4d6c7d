//! S3-compatible object storage (`backend: s3`): AWS S3, MinIO, Ceph RGW, R2, GCS's
//! interoperability endpoint.
//!
//! `object_store` (apache arrow-rs) holds the credentials — the standard AWS environment only:
//! keys and session token, a web-identity role (`AWS_ROLE_ARN` + `AWS_WEB_IDENTITY_TOKEN_FILE`,
//! GitHub OIDC), container credentials, instance metadata — and signs. Every data request is a
//! pre-signed URL sent with our own HTTP client ([`Http`]), so S3 gets the same retries,
//! timeouts, parallel ranged downloads and block uploads as the GitHub service, and a signed URL
//! never reaches a log (its signature and session token are registered as secrets).
//!
//! Layout: `<s3-prefix><key>/<first 16 hex digits of the version>`, one object per entry, with
//! the full version, the ref that saved it and its creation time as object metadata
//! (`x-amz-meta-version`, `-ref`, `-created`). A lookup checks the full version, so the short
//! name only keeps object names short (s3s-fs, for one, stores metadata in files named after
//! them).
//!
//! An entry appears atomically and only once: the archive is streamed as a multipart upload to
//! its final name, and `CompleteMultipartUpload` carries `If-None-Match: *` — until it
//! completes, the object does not exist for any reader; a second saver's completion is refused
//! (`412`, or `409` while another completion is in flight) and reported as `exists`. Every path
//! that does not complete aborts the multipart upload, so no parts are left behind (and a
//! lifecycle rule for incomplete uploads is the backstop for a killed process).

use super::SECRET_VARS;
use crate::backend::catalog::{Catalog, CatalogError, Listed};
use crate::backend::download;
use crate::backend::entries::{self, bounded_listing, forbidden};
use crate::backend::http::{Check, Http, NOT_TLS, answered_in_plain_http, one_line, read_answer, send, status_error};
use crate::backend::upload::{BlockSink, BlockWriter, BoxFuture, Finished};
use crate::backend::wire::{self, InitiateMultipartUploadResult, ListBucketResult};
use crate::backend::{Backend, BackendError, CacheEntry, Committed, ErrorKind, Reservation, Upload};
use crate::env::Env;
use crate::ids::{Key, Version};

use bytes::Bytes;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as StorePath;
use object_store::signer::{SignedUrlOptions, Signer};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a pre-signed URL lives: one request (a part, a range) at a time uses it.
const SIGNED_FOR: Duration = Duration::from_secs(3600);
/// The longest wait for credentials (the instance metadata service may never answer, as in a
/// container on EC2 with an IMDSv2 hop limit of 1).
const CREDENTIALS_WITHIN: Duration = Duration::from_secs(20);
/// S3's smallest part but the last.
const MIN_PART: usize = 5 << 20;
/// The header prefix of an object's metadata.
const META: &str = "x-amz-meta-";

/// Where entries live, resolved from the inputs and the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Settings {
    pub bucket: String,
    /// Key prefix inside the bucket: empty, or ending in `/`.
    pub prefix: String,
    pub region: String,
    /// `None`: AWS.
    pub endpoint: Option<String>,
    pub path_style: bool,
}

/// The `s3-*` inputs as given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct S3Inputs {
    pub bucket: Option<String>,
    pub prefix: Option<String>,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub force_path_style: Option<bool>,
}

impl S3Settings {
    /// Inputs first, then the variables the AWS tools read: `AWS_REGION`, `AWS_DEFAULT_REGION`
    /// (else `us-east-1`); `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`; `AWS_S3_FORCE_PATH_STYLE`.
    /// An endpoint on an IP address or `localhost`, and a bucket name with a `.`, are always
    /// addressed path-style (the bucket cannot be a subdomain there).
    pub fn resolve(inputs: &S3Inputs, env: &Env) -> Result<Self, String> {
        let bucket = inputs.bucket.clone().ok_or("`backend: s3` needs `s3-bucket`")?;
        let region = inputs
            .region
            .clone()
            .or_else(|| env.non_empty("AWS_REGION").map(str::to_owned))
            .or_else(|| env.non_empty("AWS_DEFAULT_REGION").map(str::to_owned))
            .unwrap_or_else(|| "us-east-1".to_owned());
        let endpoint = inputs
            .endpoint
            .clone()
            .or_else(|| env.non_empty("AWS_ENDPOINT_URL_S3").map(str::to_owned))
            .or_else(|| env.non_empty("AWS_ENDPOINT_URL").map(str::to_owned))
            .map(|e| e.trim_end_matches('/').to_owned());
        let host_needs_paths = endpoint.as_deref().and_then(|e| url::Url::parse(e).ok()).is_some_and(|u| {
            matches!(u.host(), Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)))
                || u.host_str().is_some_and(|h| h == "localhost" || h.ends_with(".localhost"))
        });
        // A dotted bucket name does not fit the `*.s3.amazonaws.com` certificate as a subdomain.
        let path_style = inputs.force_path_style.unwrap_or_else(|| env.is_true("AWS_S3_FORCE_PATH_STYLE"))
            || host_needs_paths
            || bucket.contains('.');
        let prefix = entries::prefix(inputs.prefix.as_deref());
        Ok(Self { bucket, prefix, region, endpoint, path_style })
    }
}

/// The AWS variables that say who we are (never where: the inputs and [`S3Settings`] do that).
const CREDENTIAL_VARS: [&str; 11] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ENDPOINT_URL_STS",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_METADATA_ENDPOINT",
];

/// Where the credentials come from, as the AWS variables say (object_store's order: keys, a
/// web-identity role, container credentials, else the instance metadata service).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CredentialSource {
    /// A variable names a source.
    Named,
    /// No variable does: only the instance metadata service is left to ask.
    InstanceMetadata,
}

/// The variables that come in pairs: half a pair is a mistake, said before any request
/// (object_store would say only `Missing AccessKeyId`, or skip a half-set role and ask the
/// instance metadata service).
const CREDENTIAL_PAIRS: [(&str, &str, &str); 2] = [
    ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "an access key"),
    ("AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "a web-identity role"),
];

impl CredentialSource {
    fn from_env(env: &Env) -> Result<Self, BackendError> {
        for (first, second, what) in CREDENTIAL_PAIRS {
            match (env.non_empty(first), env.non_empty(second)) {
                (Some(_), Some(_)) => return Ok(Self::Named),
                (None, None) => {}
                (given, _) => {
                    let (set, unset) = if given.is_some() { (first, second) } else { (second, first) };
                    return Err(BackendError::new(
                        ErrorKind::Fatal,
                        format!("no usable AWS credentials: `{set}` is set but `{unset}` is not: set both ({what})"),
                    ));
                }
            }
        }
        let container = ["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"];
        let named = container.iter().any(|name| env.non_empty(name).is_some());
        Ok(if named { Self::Named } else { Self::InstanceMetadata })
    }
}

pub struct S3Backend {
    inner: Arc<Inner>,
}

struct Inner {
    http: Arc<Http>,
    store: AmazonS3,
    settings: S3Settings,
    /// The ref saved with each entry.
    current_ref: Option<String>,
    /// The bucket was found to exist (checked once, on the first miss).
    bucket_exists: std::sync::OnceLock<()>,
    credentials: CredentialSource,
}

impl S3Backend {
    pub fn new(http: Arc<Http>, settings: S3Settings, env: &Env) -> Result<Self, BackendError> {
        for name in SECRET_VARS {
            if let Some(value) = env.non_empty(name) {
                http.secrets.add(value);
            }
        }
        for name in ["AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] {
            http.mask_token_file(env, name)?;
        }
        let credentials = CredentialSource::from_env(env)?;
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&settings.bucket)
            .with_region(&settings.region)
            .with_virtual_hosted_style_request(!settings.path_style);
        for name in CREDENTIAL_VARS {
            if let (Some(value), Ok(key)) =
                (env.non_empty(name), name.to_ascii_lowercase().parse::<AmazonS3ConfigKey>())
            {
                builder = builder.with_config(key, value);
            }
        }
        if let Some(endpoint) = &settings.endpoint {
            let url = url::Url::parse(endpoint)
                .map_err(|_| BackendError::new(ErrorKind::Fatal, format!("`s3-endpoint` `{endpoint}` is not a URL")))?;
            // Virtual-hosted style wants the endpoint with the bucket in it.
            let endpoint = if settings.path_style {
                endpoint.clone()
            } else {
                let host = url.host_str().unwrap_or_default();
                let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
                format!("{}://{}.{host}{port}", url.scheme(), settings.bucket)
            };
            builder = builder.with_endpoint(endpoint).with_allow_http(url.scheme() == "http");
        }
        let store = builder.build().map_err(|e| {
            BackendError::new(ErrorKind::Fatal, format!("cannot configure the S3 client: {}", one_line(&e.to_string())))
        })?;
        let current_ref = env.non_empty("GITHUB_REF").map(str::to_owned);
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                store,
                settings,
                current_ref,
                bucket_exists: std::sync::OnceLock::new(),
                credentials,
            }),
        })
    }

    fn path(&self, key: &Key, version: &Version) -> StorePath {
        StorePath::from(entries::object_name(&self.inner.settings.prefix, key, version))
    }
}

impl Inner {
    /// A pre-signed URL for one request (its signature and session token masked from now on).
    async fn sign(
        &self,
        method: Method,
        path: &StorePath,
        query: &[(&str, &str)],
        headers: &[(HeaderName, &str)],
    ) -> Result<String, BackendError> {
        let mut options = SignedUrlOptions::new().with_query(query.iter().map(|(k, v)| (*k, *v)));
        for (name, value) in headers {
            let value = HeaderValue::from_str(value).map_err(|_| BackendError::new(ErrorKind::Fatal, "bad header"))?;
            options = options.with_signed_header(name.clone(), value);
        }
        // Signing may first fetch credentials (web identity, containers, instance metadata),
        // which object_store retries itself: bounded here, and never retried again by us.
        let signed =
            tokio::time::timeout(CREDENTIALS_WITHIN, self.store.signed_url_opts(method, path, SIGNED_FOR, &options));
        let url = match signed.await {
            Ok(Ok(url)) => url.to_string(),
            Ok(Err(e)) => return Err(credential_error(e, self.credentials)),
            Err(_) => {
                return Err(BackendError::new(
                    ErrorKind::Fatal,
                    format!(
                        "no AWS credentials within {} s: set `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, or a role \
                         (`AWS_ROLE_ARN` + `AWS_WEB_IDENTITY_TOKEN_FILE`); the instance metadata service did not answer",
                        CREDENTIALS_WITHIN.as_secs()
                    ),
                ));
            }
        };
        self.http.mask_url(&url);
        Ok(url)
    }

    /// One signed request with its body, retried when transient; the answer's headers and
    /// body (an S3 error answer becomes a [`BackendError`] named `what`, as [`s3_error`] reads it).
    async fn call(
        &self,
        what: &str,
        method: Method,
        path: &StorePath,
        query: &[(&str, &str)],
        headers: &[(HeaderName, &str)],
        body: Bytes,
    ) -> Result<(HeaderMap, String), BackendError> {
        let refused = |status, headers: &HeaderMap, text: &str| s3_error(what, status, headers, text, &self.settings);
        self.http
            .retry(|| async {
                let url = self.sign(method.clone(), path, query, headers).await?;
                let mut request =
                    self.http.client.request(method.clone(), &url).timeout(self.http.tuning.upload_timeout(body.len()));
                for (name, value) in headers {
                    request = request.header(name.clone(), *value);
                }
                let response = send(what, request.body(body.clone())).await.map_err(|e| self.transport(what, e))?;
                let response = response.check_with(refused).await?;
                let answer_headers = response.headers().clone();
                let text = read_answer(what, response).await?;
                // CompleteMultipartUpload may fail with `200` and an error document.
                if wire::error_document(&text).is_some() {
                    return Err(refused(StatusCode::OK, &answer_headers, &text).with_status(200));
                }
                Ok((answer_headers, text))
            })
            .await
    }

    /// A connection failure ([`send`]'s only error): for an `https://` endpoint that speaks
    /// plain HTTP, the endpoint to use instead; with a custom endpoint addressed virtual-hosted
    /// style, the hint that `<bucket>.<host>` may not be served.
    fn transport(&self, what: &str, mut error: BackendError) -> BackendError {
        let plain = self.settings.endpoint.as_deref().and_then(|e| e.strip_prefix("https://"));
        if let (true, Some(rest)) = (answered_in_plain_http(&error), plain) {
            error.message = format!("{what}: {NOT_TLS}: use `http://{rest}`");
            return error;
        }
        if let (false, Some(endpoint)) = (self.settings.path_style, &self.settings.endpoint) {
            error.message.push_str(&format!(
                " (the bucket is addressed as `{}.` + the host of `{endpoint}`; if the endpoint does not serve \
                 that name, set `s3-force-path-style: true`)",
                self.settings.bucket
            ));
        }
        error
    }

    /// Every object whose name starts with `prefix` (ListObjectsV2, page by page): its name,
    /// size and modification time (seconds since the epoch). A listing that has not ended
    /// after `list_pages` pages or `list_deadline` (a server that always says `IsTruncated`) is
    /// an error, never an endless loop.
    async fn list_objects(&self, prefix: &str) -> Result<Vec<(String, u64, i64)>, BackendError> {
        let root = StorePath::from("");
        bounded_listing(&self.http.tuning, "list the bucket", |token| {
            let root = &root;
            async move {
                let mut query = vec![("list-type", "2"), ("prefix", prefix)];
                if let Some(t) = &token {
                    query.push(("continuation-token", t.as_str()));
                }
                let (_, body) = self.call("list the bucket", Method::GET, root, &query, &[], Bytes::new()).await?;
                if wire::count_items(&body, "Contents", entries::PAGE_ITEMS).is_some_and(|n| n > entries::PAGE_ITEMS) {
                    let more = format!(
                        "list the bucket: the listing holds more than {} items in one page",
                        entries::PAGE_ITEMS
                    );
                    return Err(BackendError::new(ErrorKind::Fatal, more));
                }
                let listing: ListBucketResult = wire::decode_xml(&body).map_err(|e| {
                    BackendError::new(ErrorKind::Fatal, "list the bucket: unreadable answer").with_source(e)
                })?;
                let objects = listing.objects.into_iter().filter_map(|object| {
                    let modified =
                        chrono::DateTime::parse_from_rfc3339(&object.last_modified).map_or(0, |t| t.timestamp());
                    Some((object.key?, object.size, modified))
                });
                let next = listing.next_continuation_token.filter(|_| listing.is_truncated);
                Ok((objects.collect(), next))
            }
        })
        .await
    }

    /// Whether the bucket exists: asked once a lookup finds nothing, so that a missing bucket
    /// is an error, not an endless series of misses.
    /// A policy that does not allow listing leaves the question open: then it is a plain miss.
    async fn check_bucket(&self) -> Result<(), BackendError> {
        let root = StorePath::from("");
        let query = [("list-type", "2"), ("max-keys", "1"), ("prefix", self.settings.prefix.as_str())];
        match self.call("list the bucket", Method::GET, &root, &query, &[], Bytes::new()).await {
            Err(e) if e.kind == ErrorKind::Forbidden => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

/// An S3 error answer: its `<Code>`, and what to do about the common ones. The kind comes from
/// the status and the code, never from words: `403` is [`ErrorKind::Forbidden`], `412` (an
/// `If-None-Match: *` refused) [`ErrorKind::Precondition`].
fn s3_error(what: &str, status: StatusCode, headers: &HeaderMap, body: &str, settings: &S3Settings) -> BackendError {
    let document = wire::error_document(body);
    let code = document.as_ref().map(|d| one_line(&d.code));
    let region = headers
        .get("x-amz-bucket-region")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| document.as_ref().and_then(|d| d.region.as_deref()).map(one_line));
    let bucket = &settings.bucket;
    let error =
        |kind, message: String| BackendError::new(kind, format!("{what}: {message}")).with_status(status.as_u16());
    let fatal = |message| error(ErrorKind::Fatal, message);
    match (status.as_u16(), code.as_deref()) {
        (301 | 307 | 400, _) if region.as_deref().is_some_and(|r| r != settings.region) => fatal(format!(
            "bucket `{bucket}` is in region `{}`, not `{}`: set `s3-region: {}`",
            region.as_deref().unwrap_or_default(),
            settings.region,
            region.as_deref().unwrap_or_default()
        )),
        (301, _) => fatal(format!(
            "HTTP 301: the bucket `{bucket}` must be addressed another way (set `s3-region`, or `s3-force-path-style`)"
        )),
        (403, code) => error(
            ErrorKind::Forbidden,
            format!(
                "access denied (HTTP 403{}): check the credentials (`AWS_ACCESS_KEY_ID`, the role) and the bucket \
                 policy for `{bucket}`",
                code.map(|c| format!(" {c}")).unwrap_or_default()
            ),
        ),
        (404, Some("NoSuchBucket")) => fatal(format!("bucket `{bucket}` does not exist (HTTP 404 NoSuchBucket)")),
        (412, _) => error(ErrorKind::Precondition, "the object exists already (HTTP 412)".to_owned()),
        (409, Some("ConditionalRequestConflict")) => {
            error(ErrorKind::AlreadyExists, "another writer is completing the same object (HTTP 409)".to_owned())
        }
        (503, Some("SlowDown")) => error(ErrorKind::Transient, "HTTP 503 SlowDown".to_owned()),
        (200, Some(code)) => {
            let kind =
                if code == "InternalError" || code == "SlowDown" { ErrorKind::Transient } else { ErrorKind::Fatal };
            error(kind, code.to_owned())
        }
        _ => status_error(what, status, headers, body),
    }
}

/// A failure to get credentials or sign: fatal (never retried here), with object_store's words;
/// when no variable named a source, the variables to set.
fn credential_error(e: object_store::Error, source: CredentialSource) -> BackendError {
    let detail = one_line(&e.to_string());
    let message = match source {
        CredentialSource::InstanceMetadata => format!(
            "no AWS credentials: set `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (or a role: `AWS_ROLE_ARN` + \
             `AWS_WEB_IDENTITY_TOKEN_FILE`); none is set, and the instance metadata service gave none ({detail})"
        ),
        CredentialSource::Named => format!(
            "no usable AWS credentials (keys, a web-identity role, container or instance credentials): {detail}"
        ),
    };
    BackendError::new(ErrorKind::Fatal, message)
}

impl Backend for S3Backend {
    fn describe(&self) -> String {
        let s = &self.inner.settings;
        let at = s.endpoint.as_deref().map(|e| format!(" at {e}")).unwrap_or_default();
        format!(
            "S3 bucket `{}`{}{at} ({})",
            s.bucket,
            if s.prefix.is_empty() { String::new() } else { format!(", prefix `{}`", s.prefix) },
            s.region
        )
    }

    fn lookup(&self, key: &Key, version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        let inner = &self.inner;
        let path = self.path(key, version);
        let head =
            inner.http.rt().block_on(inner.call("look up the entry", Method::HEAD, &path, &[], &[], Bytes::new()));
        match head {
            Ok((headers, _)) => Ok(entries::found(&headers, META, path.as_ref(), key, version)),
            Err(e) if e.kind == ErrorKind::NotFound => {
                if inner.bucket_exists.get().is_none() {
                    inner.http.rt().block_on(inner.check_bucket())?;
                    let _ = inner.bucket_exists.set(());
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// One listing of the objects named `<newest_of>…`, then a lookup of the newest; a policy
    /// that does not allow listing leaves generation 0 (`s3:ListBucket` reaches later ones).
    fn lookup_newest_or(
        &self,
        newest_of: &str,
        key: &Key,
        version: &Version,
    ) -> Result<Option<CacheEntry>, BackendError> {
        let inner = &self.inner;
        let prefix = format!("{}{newest_of}", inner.settings.prefix);
        let listing = inner.http.rt().block_on(inner.list_objects(&prefix));
        let named = listing.map(|objects| objects.into_iter().map(|(name, _, modified)| (name, modified)).collect());
        entries::newest_or(named, (&prefix, newest_of), (key, version), |k| self.lookup(k, version))
    }

    fn open(&self, entry: &CacheEntry) -> Result<Box<dyn Read + Send + '_>, BackendError> {
        let inner = &self.inner;
        let path = StorePath::from(entry.location.as_str());
        let url = inner.http.rt().block_on(inner.sign(Method::GET, &path, &[], &[]))?;
        Ok(download::open(Arc::clone(&inner.http), url))
    }

    fn read_prefix(&self, entry: &CacheEntry, len: u64) -> Result<Vec<u8>, BackendError> {
        let inner = &self.inner;
        let path = StorePath::from(entry.location.as_str());
        let url = inner.http.rt().block_on(inner.sign(Method::GET, &path, &[], &[]))?;
        download::read_prefix(&inner.http, &url, len)
    }

    fn reserve(&self, key: &Key, version: &Version) -> Result<Reservation, BackendError> {
        let inner = &self.inner;
        let path = self.path(key, version);
        // An existing entry is `exists` before anything is uploaded.
        if self.lookup(key, version)?.is_some() {
            return Ok(Reservation::Exists);
        }
        let metadata = entries::metadata(inner.current_ref.as_deref(), version);
        let headers: Vec<_> = metadata
            .iter()
            .map(|(field, value)| {
                let name = HeaderName::try_from(format!("{META}{field}")).expect("a metadata field is a header name");
                (name, value.as_str())
            })
            .collect();
        let (_, body) = inner.http.rt().block_on(inner.call(
            "start the upload",
            Method::POST,
            &path,
            &[("uploads", "")],
            &headers,
            Bytes::new(),
        ))?;
        let started: InitiateMultipartUploadResult = wire::decode_xml(&body)
            .map_err(|e| BackendError::new(ErrorKind::Fatal, "start the upload: unreadable answer").with_source(e))?;
        if started.upload_id.is_empty() {
            return Err(BackendError::new(ErrorKind::Fatal, "start the upload: no UploadId in the answer"));
        }
        let upload_id = started.upload_id;
        let sink = Arc::new(PartSink {
            inner: Arc::clone(inner),
            path: path.clone(),
            upload_id,
            etags: Mutex::new(Vec::new()),
        });
        let mut writer = BlockWriter::new(Arc::clone(&inner.http), sink.clone(), false);
        writer.set_block_size(inner.http.tuning.upload_block.max(MIN_PART));
        Ok(Reservation::Reserved(Box::new(S3Upload { sink, writer: Some(writer), done: false })))
    }
}

/// The parts of one multipart upload.
struct PartSink {
    inner: Arc<Inner>,
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
            let (headers, _) = self.inner.call("upload a part", Method::PUT, &self.path, &query, &[], data).await?;
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
        match self.inner.call("complete the upload", Method::POST, &self.path, &query, &headers, Bytes::from(xml)).await
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
        let _ = self.inner.call("abort the upload", Method::DELETE, &self.path, &query, &[], Bytes::new()).await;
    }
}

struct S3Upload {
    sink: Arc<PartSink>,
    writer: Option<BlockWriter>,
    /// Completed or aborted.
    done: bool,
}

impl Write for S3Upload {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.as_mut().expect("open until commit").write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Upload for S3Upload {
    fn commit(mut self: Box<Self>) -> Result<Committed, BackendError> {
        let writer = self.writer.take().expect("committed once");
        let http = Arc::clone(&self.sink.inner.http);
        if let Finished::Small(_) = writer.finish()? {
            unreachable!("S3 uploads always go in parts");
        }
        let completed = http.rt().block_on(self.sink.complete());
        if !matches!(completed, Ok(Committed::Saved)) {
            http.rt().block_on(self.sink.abort());
        }
        self.done = true;
        completed
    }
}

impl Drop for S3Upload {
    fn drop(&mut self) {
        if !self.done {
            drop(self.writer.take());
            let http = Arc::clone(&self.sink.inner.http);
            http.rt().block_on(self.sink.abort());
        }
    }
}

impl Catalog for S3Backend {
    fn describe(&self) -> String {
        Backend::describe(self)
    }

    /// Every entry whose key starts with `key_prefix` (on `r#ref` when given), newest first, with
    /// the ref and creation time it was saved with (one `HEAD` each).
    fn list(&self, key_prefix: &str, r#ref: Option<&str>) -> Result<Vec<Listed>, CatalogError> {
        let inner = &self.inner;
        let catalog_error = |e: BackendError| forbidden(e, "list".into(), "s3:ListBucket");
        let prefix = format!("{}{key_prefix}", inner.settings.prefix);
        let objects = inner.http.rt().block_on(inner.list_objects(&prefix)).map_err(catalog_error)?;
        let mut found = Vec::new();
        for (location, size, modified) in objects {
            let Some(parts) = entries::split_name(&location, &prefix, key_prefix) else { continue };
            let path = StorePath::from(location.as_str());
            let head = inner.http.rt().block_on(inner.call(
                "read the entry's metadata",
                Method::HEAD,
                &path,
                &[],
                &[],
                Bytes::new(),
            ));
            let headers = match head {
                Ok((headers, _)) => headers,
                Err(e) if e.kind == ErrorKind::NotFound => continue,
                Err(e) => return Err(catalog_error(e)),
            };
            let meta = |field: &str| entries::header(&headers, &format!("{META}{field}"));
            found.push(entries::listed(&location, parts, size, modified, meta));
        }
        Ok(entries::newest_on(found, r#ref))
    }

    fn delete(&self, entry: &Listed) -> Result<(), CatalogError> {
        let inner = &self.inner;
        if !entry.id.starts_with(&inner.settings.prefix) {
            return Err(CatalogError::NotLocalEntry { id: entry.id.clone() });
        }
        let path = StorePath::from(entry.id.as_str());
        match inner.http.rt().block_on(inner.call("delete", Method::DELETE, &path, &[], &[], Bytes::new())) {
            Ok(_) => Ok(()),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(forbidden(e, format!("delete `{}`", entry.id), "s3:DeleteObject")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(inputs: S3Inputs, env: &[(&str, &str)]) -> S3Settings {
        S3Settings::resolve(&inputs, &Env::from_pairs(env.iter().copied())).unwrap()
    }

    fn bucket(name: &str) -> S3Inputs {
        S3Inputs { bucket: Some(name.into()), ..S3Inputs::default() }
    }

    #[test]
    fn inputs_come_before_the_aws_variables() {
        let env = [
            ("AWS_REGION", "eu-west-1"),
            ("AWS_DEFAULT_REGION", "us-west-2"),
            ("AWS_ENDPOINT_URL", "https://generic.example"),
            ("AWS_ENDPOINT_URL_S3", "https://s3.example/"),
        ];
        let s = settings(bucket("b1"), &env);
        assert_eq!((s.region.as_str(), s.endpoint.as_deref()), ("eu-west-1", Some("https://s3.example")));
        assert!(!s.path_style, "a named host is addressed virtual-hosted style unless asked");
        let given = S3Inputs {
            region: Some("ap-south-1".into()),
            endpoint: Some("https://minio.internal:9000".into()),
            prefix: Some("/ci/cache/".into()),
            force_path_style: Some(true),
            ..bucket("b1")
        };
        let s = settings(given, &env);
        assert_eq!(s.region, "ap-south-1");
        assert_eq!(s.endpoint.as_deref(), Some("https://minio.internal:9000"));
        assert_eq!(s.prefix, "ci/cache/");
        assert!(s.path_style);
        assert_eq!(settings(bucket("b1"), &[("AWS_DEFAULT_REGION", "us-west-2")]).region, "us-west-2");
        assert_eq!(settings(bucket("b1"), &[]).region, "us-east-1");
        assert!(settings(bucket("b1"), &[("AWS_S3_FORCE_PATH_STYLE", "true")]).path_style);
        assert!(settings(bucket("ci-cache.v2"), &[]).path_style, "a dotted bucket is never a subdomain");
        assert!(S3Settings::resolve(&S3Inputs::default(), &Env::default()).is_err());
    }

    #[test]
    fn an_endpoint_on_an_address_or_localhost_is_always_path_style() {
        for endpoint in
            ["http://127.0.0.1:9000", "http://[::1]:9000", "http://localhost:9000", "http://minio.localhost"]
        {
            let s = settings(S3Inputs { endpoint: Some(endpoint.into()), ..bucket("b1") }, &[]);
            assert!(s.path_style, "{endpoint}");
        }
    }

    #[test]
    fn half_a_credential_pair_names_the_missing_variable() {
        let source = |pairs: &[(&str, &str)]| CredentialSource::from_env(&Env::from_pairs(pairs.iter().copied()));
        let e = source(&[("AWS_SECRET_ACCESS_KEY", "s")]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Fatal);
        assert!(e.message.contains("`AWS_SECRET_ACCESS_KEY` is set but `AWS_ACCESS_KEY_ID` is not"), "{}", e.message);
        let e = source(&[("AWS_ACCESS_KEY_ID", "k")]).unwrap_err();
        assert!(e.message.contains("`AWS_ACCESS_KEY_ID` is set but `AWS_SECRET_ACCESS_KEY` is not"), "{}", e.message);
        let e = source(&[("AWS_ROLE_ARN", "arn:aws:iam::1:role/ci")]).unwrap_err();
        assert!(e.message.contains("`AWS_WEB_IDENTITY_TOKEN_FILE` is not"), "{}", e.message);
        // Keys win over a half-set role, as object_store reads them.
        let keys = [("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s"), ("AWS_ROLE_ARN", "r")];
        assert_eq!(source(&keys).unwrap(), CredentialSource::Named);
        assert_eq!(source(&[("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2")]).unwrap(), CredentialSource::Named);
        assert_eq!(source(&[]).unwrap(), CredentialSource::InstanceMetadata);
    }

    #[test]
    fn s3_answers_become_clear_errors() {
        let s = settings(bucket("ci-cache"), &[]);
        let mut headers = HeaderMap::new();
        let e = s3_error("look up", StatusCode::FORBIDDEN, &headers, "", &s);
        assert_eq!((e.kind, e.status), (ErrorKind::Forbidden, Some(403)), "403 is never a miss");
        assert!(e.message.contains("access denied (HTTP 403)"), "{}", e.message);
        let e = s3_error("x", StatusCode::FORBIDDEN, &headers, "<Error><Code>SignatureDoesNotMatch</Code></Error>", &s);
        assert!(e.message.contains("HTTP 403 SignatureDoesNotMatch"), "{}", e.message);
        let e = s3_error("x", StatusCode::NOT_FOUND, &headers, "<Error><Code>NoSuchBucket</Code></Error>", &s);
        assert_eq!(e.message, "x: bucket `ci-cache` does not exist (HTTP 404 NoSuchBucket)");
        assert_eq!(s3_error("x", StatusCode::NOT_FOUND, &headers, "", &s).kind, ErrorKind::NotFound);
        headers.insert("x-amz-bucket-region", HeaderValue::from_static("eu-central-1"));
        let e = s3_error("x", StatusCode::MOVED_PERMANENTLY, &headers, "", &s);
        assert!(e.message.contains("is in region `eu-central-1`, not `us-east-1`: set `s3-region: eu-central-1`"));
        let malformed = "<Error><Code>AuthorizationHeaderMalformed</Code><Region>eu-west-2</Region></Error>";
        let e = s3_error("x", StatusCode::BAD_REQUEST, &HeaderMap::new(), malformed, &s);
        assert!(e.message.contains("set `s3-region: eu-west-2`"), "{}", e.message);
        let refused = s3_error("x", StatusCode::PRECONDITION_FAILED, &HeaderMap::new(), "", &s);
        assert_eq!((refused.kind, refused.status), (ErrorKind::Precondition, Some(412)));
        let conflict = "<Error><Code>ConditionalRequestConflict</Code></Error>";
        assert_eq!(s3_error("x", StatusCode::CONFLICT, &HeaderMap::new(), conflict, &s).kind, ErrorKind::AlreadyExists);
        let slow = "<Error><Code>SlowDown</Code></Error>";
        assert_eq!(
            s3_error("x", StatusCode::SERVICE_UNAVAILABLE, &HeaderMap::new(), slow, &s).kind,
            ErrorKind::Transient
        );
        // CompleteMultipartUpload can fail inside a 200.
        let inside = "<Error><Code>InternalError</Code></Error>";
        assert_eq!(s3_error("x", StatusCode::OK, &HeaderMap::new(), inside, &s).kind, ErrorKind::Transient);
    }
}
