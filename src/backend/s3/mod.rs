//! S3-compatible object storage (`backend: s3`): AWS S3, MinIO, Ceph RGW, R2, GCS's
//! interoperability endpoint.
//!
//! `object_store` (apache arrow-rs) holds the credentials (the standard AWS environment only)
//! and signs. Every data request is a pre-signed URL sent with our own HTTP client ([`Http`]), so
//! S3 gets the same retries, timeouts, ranged downloads and block uploads as the GitHub service.
//! Entries are laid out as `crate::backend::entries` says, and appear atomically and only once
//! (`upload`).

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

pub type S3Backend = ObjectBackend<Client>;

/// The backend of the bucket `inputs` and `env` name; its secrets are masked through `secrets`
/// before any request.
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
