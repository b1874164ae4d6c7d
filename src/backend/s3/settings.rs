//! Where S3 entries live (bucket, prefix, region, endpoint, addressing) from the inputs and the
//! variables the AWS tools read, and who we are there: the credential variables `object_store`
//! reads, which of them hold secrets, and where the credentials come from.

use crate::backend::{BackendError, ErrorKind, entries};
use crate::env::Env;

/// Masked in every step with `backend: s3`, never saved.
pub const SECRET_VARS: [&str; 2] = ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Settings {
    pub bucket: String,
    /// Empty, or ending in `/`.
    pub prefix: String,
    pub region: String,
    /// `None`: AWS.
    pub endpoint: Option<String>,
    pub path_style: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct S3Inputs {
    pub bucket: Option<String>,
    pub prefix: Option<String>,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub force_path_style: Option<bool>,
}

impl S3Settings {
    /// The secrets of `env`: each secret variable's value.
    pub fn secrets(env: &Env) -> Vec<String> {
        SECRET_VARS.iter().filter_map(|name| env.non_empty(name)).map(str::to_owned).collect()
    }

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
pub(super) const CREDENTIAL_VARS: [&str; 11] = [
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
pub(super) enum CredentialSource {
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
    pub(super) fn from_env(env: &Env) -> Result<Self, BackendError> {
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
}
