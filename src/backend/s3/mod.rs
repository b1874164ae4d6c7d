//! S3-compatible object storage (`backend: s3`): its `s3-*` inputs, checked here, and the
//! client ([`S3Backend`], which is also its catalog). Credentials come only from the standard
//! AWS environment, never from inputs.

mod client;

pub use client::{S3Backend, S3Inputs, S3Settings};

use super::catalog::{Catalog, CatalogError};
use super::entries::{parse_endpoint, parse_prefix};
use super::http::Http;
use super::store::{Configured, Store};
use super::{Backend, BackendError, ErrorKind};
use crate::env::Env;
use crate::inputs::{
    Catalog as Listing, Input, InputError, InputKind, InputSpec, RawInputs, Scope, parse_optional_bool,
};
use crate::paths::Locations;
use crate::runner::SecretSink;
use std::sync::Arc;

pub static S3_BUCKET: Input<Option<String>> = Input::new(
    "s3-bucket",
    InputKind::Text,
    Scope::Cache,
    "",
    "With `backend: s3`: the bucket (required). Credentials come only from the standard AWS environment (keys and \
     session token, a web-identity role such as GitHub OIDC, instance metadata), never from inputs.",
    parse_bucket,
)
.catalog(Listing::Both);

pub static S3_PREFIX: Input<Option<String>> = Input::new(
    "s3-prefix",
    InputKind::Text,
    Scope::Cache,
    "",
    "With `backend: s3`: a key prefix inside the bucket (e.g. `ci-cache/`).",
    parse_prefix,
)
.catalog(Listing::Both);

pub static S3_REGION: Input<Option<String>> = Input::text(
    "s3-region",
    Scope::Cache,
    "With `backend: s3`: the bucket's region (default: `AWS_REGION`, `AWS_DEFAULT_REGION`, else `us-east-1`).",
)
.catalog(Listing::Both);

pub static S3_ENDPOINT: Input<Option<String>> = Input::new(
    "s3-endpoint",
    InputKind::Text,
    Scope::Cache,
    "",
    "With `backend: s3`: an S3-compatible endpoint such as `https://minio.internal:9000` (default: \
     `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, else AWS).",
    parse_endpoint,
)
.catalog(Listing::Both);

pub static S3_FORCE_PATH_STYLE: Input<Option<bool>> = Input::new(
    "s3-force-path-style",
    InputKind::Text,
    Scope::Cache,
    "",
    "With `backend: s3`: `true` to address the bucket as `<endpoint>/<bucket>` instead of `<bucket>.<endpoint>` \
     (default: `AWS_S3_FORCE_PATH_STYLE`; always for an IP address or `localhost`).",
    parse_optional_bool,
)
.catalog(Listing::Both);

/// The AWS variables holding secrets: masked in every step with `backend: s3`, never saved.
pub const SECRET_VARS: [&str; 2] = ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"];

pub struct S3Store;

pub static S3: S3Store = S3Store;

impl Store for S3Store {
    fn name(&self) -> &'static str {
        "s3"
    }

    fn inputs(&self) -> &'static [&'static InputSpec] {
        static INPUTS: [&InputSpec; 5] =
            [&S3_BUCKET.spec, &S3_PREFIX.spec, &S3_REGION.spec, &S3_ENDPOINT.spec, &S3_FORCE_PATH_STYLE.spec];
        &INPUTS
    }

    fn configure(&self, raw: &RawInputs, _: &Locations, chosen: bool) -> Result<Arc<dyn Configured>, InputError> {
        let inputs = read_inputs(raw)?;
        if chosen && inputs.bucket.is_none() {
            return Err(InputError::Invalid {
                name: S3_BUCKET.name(),
                detail: "is required with `backend: s3`".into(),
            });
        }
        Ok(Arc::new(S3Config { inputs }))
    }
}

/// The `s3-*` inputs, checked: a bucket name S3 accepts, an endpoint that is an `http(s)` URL.
fn read_inputs(raw: &RawInputs) -> Result<S3Inputs, InputError> {
    Ok(S3Inputs {
        bucket: S3_BUCKET.read(raw)?,
        prefix: S3_PREFIX.read(raw)?,
        region: S3_REGION.read(raw)?,
        endpoint: S3_ENDPOINT.read(raw)?,
        force_path_style: S3_FORCE_PATH_STYLE.read(raw)?,
    })
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

#[derive(Debug)]
struct S3Config {
    inputs: S3Inputs,
}

impl S3Config {
    fn client(&self, env: &Env, secrets: SecretSink) -> Result<S3Backend, BackendError> {
        let settings =
            S3Settings::resolve(&self.inputs, env).map_err(|reason| BackendError::new(ErrorKind::Fatal, reason))?;
        S3Backend::new(Arc::new(Http::new(env, secrets)?), settings, env)
    }
}

impl Configured for S3Config {
    fn backend(&self, env: &Env, secrets: SecretSink) -> Result<Box<dyn Backend>, BackendError> {
        Ok(Box::new(self.client(env, secrets)?))
    }

    fn catalog(&self, env: &Env, _token: Option<&str>) -> Result<Box<dyn Catalog>, CatalogError> {
        // Listing needs no secret of its own: the same credentials as the backend's.
        Ok(Box::new(self.client(env, SecretSink::detached())?))
    }

    fn secret_values(&self, env: &Env) -> Vec<String> {
        SECRET_VARS.iter().filter_map(|name| env.non_empty(name)).map(str::to_owned).collect()
    }
}
