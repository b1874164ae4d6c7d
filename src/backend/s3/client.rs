//! Requests to one bucket, each at a URL `object_store` pre-signs with the AWS environment's
//! credentials, and S3's error answers as [`BackendError`]s.

use super::settings::{CREDENTIAL_VARS, CredentialSource, S3Settings};
use super::upload;
use crate::backend::entries::{self, Metadata, bounded_listing};
use crate::backend::http::{Check, Http, NOT_TLS, answered_in_plain_http, one_line, read_answer, send, status_error};
use crate::backend::object::{Needs, NewEntry, Object, ObjectClient};
use crate::backend::wire::{self, ListBucketResult};
use crate::backend::{BackendError, CacheEntry, ErrorKind, Upload};
use crate::env::Env;
use crate::keys::{Key, Version};
use bytes::Bytes;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as StorePath;
use object_store::signer::{SignedUrlOptions, Signer};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use std::sync::Arc;
use std::time::Duration;

/// How long a pre-signed URL lives: one request (a part, a range) at a time uses it.
const SIGNED_FOR: Duration = Duration::from_secs(3600);
/// The longest wait for credentials (the instance metadata service may never answer, as in a
/// container on EC2 with an IMDSv2 hop limit of 1).
const CREDENTIALS_WITHIN: Duration = Duration::from_secs(20);
pub(super) const META: &str = "x-amz-meta-";

pub struct Client {
    pub(super) http: Arc<Http>,
    store: AmazonS3,
    settings: S3Settings,
    /// The bucket was found to exist (checked once, on the first miss).
    bucket_exists: std::sync::OnceLock<()>,
    credentials: CredentialSource,
}

impl Client {
    /// The client of `settings` with the credentials of `env`, its secrets masked first.
    pub(super) fn connect(http: Arc<Http>, settings: S3Settings, env: &Env) -> Result<Self, BackendError> {
        for secret in S3Settings::secrets(env) {
            http.secrets.add(&secret);
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
        Ok(Self { http, store, settings, bucket_exists: std::sync::OnceLock::new(), credentials })
    }
}

impl Client {
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

    /// One signed request with its body, retried when transient; the answer's headers and body.
    pub(super) async fn call(
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

    /// Every object whose name starts with `prefix` (ListObjectsV2): its name, size and
    /// modification time (seconds since the epoch).
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

    /// Whether the bucket exists: asked once a lookup finds nothing, so that a missing bucket is
    /// an error, not an endless series of misses. A policy that forbids listing leaves it open.
    async fn check_bucket(&self) -> Result<(), BackendError> {
        let root = StorePath::from("");
        let query = [("list-type", "2"), ("max-keys", "1"), ("prefix", self.settings.prefix.as_str())];
        match self.call("list the bucket", Method::GET, &root, &query, &[], Bytes::new()).await {
            Err(e) if e.kind == ErrorKind::Forbidden => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

impl ObjectClient for Client {
    const NEEDS: Needs = Needs { list: "s3:ListBucket", delete: "s3:DeleteObject" };

    fn describe(&self) -> String {
        let s = &self.settings;
        let at = s.endpoint.as_deref().map(|e| format!(" at {e}")).unwrap_or_default();
        format!(
            "S3 bucket `{}`{}{at} ({})",
            s.bucket,
            if s.prefix.is_empty() { String::new() } else { format!(", prefix `{}`", s.prefix) },
            s.region
        )
    }

    /// A `HEAD` of the entry's object; the first miss checks that the bucket exists.
    async fn lookup(&self, name: &str, key: &Key, version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        let path = StorePath::from(name);
        match self.call("look up the entry", Method::HEAD, &path, &[], &[], Bytes::new()).await {
            Ok((headers, _)) => Ok(entries::found(&headers, META, path.as_ref(), key, version)),
            Err(e) if e.kind == ErrorKind::NotFound => {
                if self.bucket_exists.get().is_none() {
                    self.check_bucket().await?;
                    let _ = self.bucket_exists.set(());
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// A listing without the metadata (S3's carries none): [`ObjectClient::metadata`] reads it.
    async fn list(&self, prefix: &str) -> Result<Vec<Object>, BackendError> {
        let objects = self.list_objects(prefix).await?;
        Ok(objects.into_iter().map(|(name, size, modified)| Object { name, size, modified, metadata: None }).collect())
    }

    async fn metadata(&self, name: &str) -> Result<Option<Metadata>, BackendError> {
        let path = StorePath::from(name);
        match self.call("read the entry's metadata", Method::HEAD, &path, &[], &[], Bytes::new()).await {
            Ok((headers, _)) => Ok(Some(Metadata::read(|field| entries::header(&headers, &format!("{META}{field}"))))),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn download_url(&self, name: &str) -> Result<String, BackendError> {
        self.sign(Method::GET, &StorePath::from(name), &[], &[]).await
    }

    async fn delete(&self, name: &str) -> Result<(), BackendError> {
        self.call("delete", Method::DELETE, &StorePath::from(name), &[], &[], Bytes::new()).await.map(drop)
    }

    async fn upload(self: &Arc<Self>, entry: NewEntry) -> Result<Box<dyn Upload>, BackendError> {
        upload::start(self, entry).await
    }
}

/// An S3 error answer: its `<Code>`, and what to do about the common ones. The kind comes from
/// the status and the code, never from words.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::s3::S3Inputs;
    use crate::env::Env;

    #[test]
    fn s3_answers_become_clear_errors() {
        let inputs = S3Inputs { bucket: Some("ci-cache".into()), ..S3Inputs::default() };
        let s = S3Settings::resolve(&inputs, &Env::default()).unwrap();
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
