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
//!
//! Its files are every store's: this one, its `s3-*` inputs (checked here) and [`connect`];
//! [`settings`], where entries live and who we are there; [`client`], each request signed and
//! sent, S3's answers read (its [`ObjectClient`](crate::backend::object::ObjectClient), under
//! the backend and catalog every object store shares, [`ObjectBackend`]); [`upload`], its saves.

mod client;
mod settings;
mod upload;

pub use settings::{S3Inputs, S3Settings};

use crate::backend::http::Http;
use crate::backend::object::{ObjectBackend, endpoint_input, prefix_input};
use crate::backend::{BackendError, ErrorKind};
use crate::env::Env;
use crate::inputs::{Input, InputError, InputKind, InputSpec, RawInputs, Readers, parse_optional_bool};
use crate::runner::SecretSink;
use client::Client;
use std::sync::Arc;

pub static S3_BUCKET: Input<Option<String>> = Input::new(
    "s3-bucket",
    InputKind::Text,
    Readers::CACHE.and_listing(),
    "",
    "With `backend: s3`: the bucket (required). Credentials come only from the standard AWS environment (keys and \
     session token, a web-identity role such as GitHub OIDC, instance metadata), never from inputs.",
    parse_bucket,
);

pub static S3_PREFIX: Input<Option<String>> =
    prefix_input("s3-prefix", "With `backend: s3`: a key prefix inside the bucket (e.g. `ci-cache/`).");

pub static S3_REGION: Input<Option<String>> = Input::text(
    "s3-region",
    Readers::CACHE.and_listing(),
    "With `backend: s3`: the bucket's region (default: `AWS_REGION`, `AWS_DEFAULT_REGION`, else `us-east-1`).",
);

pub static S3_ENDPOINT: Input<Option<String>> = endpoint_input(
    "s3-endpoint",
    "With `backend: s3`: an S3-compatible endpoint such as `https://minio.internal:9000` (default: \
     `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, else AWS).",
);

pub static S3_FORCE_PATH_STYLE: Input<Option<bool>> = Input::new(
    "s3-force-path-style",
    InputKind::Text,
    Readers::CACHE.and_listing(),
    "",
    "With `backend: s3`: `true` to address the bucket as `<endpoint>/<bucket>` instead of `<bucket>.<endpoint>` \
     (default: `AWS_S3_FORCE_PATH_STYLE`; always for an IP address or `localhost`).",
    parse_optional_bool,
);

pub(super) static INPUTS: [&InputSpec; 5] =
    [&S3_BUCKET.spec, &S3_PREFIX.spec, &S3_REGION.spec, &S3_ENDPOINT.spec, &S3_FORCE_PATH_STYLE.spec];

impl S3Inputs {
    /// The `s3-*` inputs, checked: a bucket name S3 accepts, an endpoint that is an `http(s)` URL.
    pub fn read(raw: &RawInputs) -> Result<S3Inputs, InputError> {
        Ok(S3Inputs {
            bucket: S3_BUCKET.read(raw)?,
            prefix: S3_PREFIX.read(raw)?,
            region: S3_REGION.read(raw)?,
            endpoint: S3_ENDPOINT.read(raw)?,
            force_path_style: S3_FORCE_PATH_STYLE.read(raw)?,
        })
    }
}

/// The S3 store's backend, which is also its catalog.
pub type S3Backend = ObjectBackend<Client>;

/// The backend of the bucket `inputs` and `env` name, with the credentials of `env` (masked
/// through `secrets` before any request).
pub fn connect(inputs: &S3Inputs, env: &Env, secrets: SecretSink) -> Result<S3Backend, BackendError> {
    let settings = S3Settings::resolve(inputs, env).map_err(|reason| BackendError::new(ErrorKind::Fatal, reason))?;
    let http = Arc::new(Http::new(env, secrets)?);
    let prefix = settings.prefix.clone();
    Ok(ObjectBackend::over(Arc::clone(&http), prefix, Client::connect(http, settings, env)?, env))
}

/// A bucket name S3 accepts.
fn parse_bucket(value: Option<&str>) -> Result<Option<String>, String> {
    let Some(b) = value.map(str::trim).filter(|b| !b.is_empty()) else { return Ok(None) };
    let valid = (3..=63).contains(&b.len())
        && b.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
        && b.starts_with(|c: char| c.is_ascii_alphanumeric())
        && b.ends_with(|c: char| c.is_ascii_alphanumeric());
    match valid {
        true => Ok(Some(b.to_owned())),
        false => Err(format!("`{b}` is not a bucket name (3 to 63 lowercase letters, digits, `.` and `-`)")),
    }
}
