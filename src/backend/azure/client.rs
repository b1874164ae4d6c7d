//! Requests to one container, each authorized by `object_store`'s [`AzureAuthorizer`] with the
//! current credential (Shared Key, a bearer token, or a SAS), and Azure's error answers as
//! [`BackendError`]s.

use super::AzureSettings;
use super::upload;
use crate::backend::blob::AZURE_VERSION;
use crate::backend::entries::{self, Metadata, bounded_listing};
use crate::backend::http::{Check, Http, one_line, read_answer, send, status_error};
use crate::backend::object::{Needs, NewEntry, Object, ObjectClient};
use crate::backend::wire::{self, EnumerationResults, ListedBlob};
use crate::backend::{BackendError, CacheEntry, ErrorKind, Upload};
use crate::env::Env;
use crate::keys::{Key, Version};
use bytes::Bytes;
use object_store::azure::{AzureAuthorizer, AzureCredential, MicrosoftAzure};
use object_store::client::{HttpRequest, HttpRequestBody};
use object_store::path::Path as StorePath;
use object_store::signer::Signer;
use reqwest::header::{CONTENT_LENGTH, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use std::sync::Arc;
use std::time::Duration;

/// How long a download's SAS lives: one download (every range and retry) uses it.
const SIGNED_FOR: Duration = Duration::from_secs(3600);
/// The longest wait for credentials (a managed identity endpoint may never answer).
const CREDENTIALS_WITHIN: Duration = Duration::from_secs(20);
pub(super) const META: &str = "x-ms-meta-";

pub struct Client {
    pub(super) http: Arc<Http>,
    store: MicrosoftAzure,
    settings: AzureSettings,
    endpoint: url::Url,
}

impl Client {
    /// The client of `settings` with the credentials of `env`, its secrets masked first.
    pub(super) fn connect(http: Arc<Http>, settings: AzureSettings, env: &Env) -> Result<Self, BackendError> {
        for secret in AzureSettings::secrets(env) {
            http.secrets.add(&secret);
        }
        http.mask_token_file(env, "AZURE_FEDERATED_TOKEN_FILE")?;
        let store = settings.builder(env).build().map_err(|e| {
            BackendError::new(
                ErrorKind::Fatal,
                format!("cannot configure the Azure Blob client: {}", one_line(&e.to_string())),
            )
        })?;
        Self::new(http, store, settings)
    }

    fn new(http: Arc<Http>, store: MicrosoftAzure, settings: AzureSettings) -> Result<Self, BackendError> {
        let endpoint = url::Url::parse(&settings.endpoint).map_err(|_| {
            BackendError::new(ErrorKind::Fatal, format!("`azure-endpoint` `{}` is not a URL", settings.endpoint))
        })?;
        Ok(Self { http, store, settings, endpoint })
    }

    /// The URL of the container, or of a blob in it, as `object_store` builds it (so a SAS it
    /// signs is for the same URL).
    fn url(&self, blob: Option<&str>, query: &[(&str, &str)]) -> url::Url {
        let mut url = self.endpoint.clone();
        {
            let mut segments = url.path_segments_mut().expect("an http(s) URL has a path");
            segments.push(&self.settings.container);
            if let Some(name) = blob {
                segments.extend(StorePath::from(name).parts());
            }
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// The current credential (fetched, or refreshed, by `object_store`), within
    /// [`CREDENTIALS_WITHIN`]; a token is masked from now on.
    async fn credential(&self) -> Result<Arc<AzureCredential>, BackendError> {
        let fetched = tokio::time::timeout(CREDENTIALS_WITHIN, self.store.credentials().get_credential()).await;
        let credential = match fetched {
            Ok(Ok(credential)) => credential,
            Ok(Err(e)) => return Err(credential_error(&e.to_string())),
            Err(_) => return Err(credential_error(&format!("none within {} s", CREDENTIALS_WITHIN.as_secs()))),
        };
        if let AzureCredential::BearerToken(token) = credential.as_ref() {
            self.http.secrets.add(token);
        }
        Ok(credential)
    }

    /// `headers` with the date, the version and the authorization for `method` on `url`; the
    /// URL itself gains the query of a SAS token (its signature masked).
    async fn authorize(
        &self,
        method: &Method,
        url: url::Url,
        headers: HeaderMap,
    ) -> Result<(String, HeaderMap), BackendError> {
        let credential = self.credential().await?;
        let mut request = HttpRequest::new(HttpRequestBody::empty());
        *request.method_mut() = method.clone();
        *request.uri_mut() =
            url.as_str().parse().map_err(|_| BackendError::new(ErrorKind::Fatal, "a blob URL that is not a URI"))?;
        *request.headers_mut() = headers;
        AzureAuthorizer::new(&credential, &self.settings.account)
            .try_authorize(&mut request)
            .map_err(|e| credential_error(&e.to_string()))?;
        let url = request.uri().to_string();
        if matches!(credential.as_ref(), AzureCredential::SASToken(_)) {
            self.http.mask_url(&url);
        }
        // The Shared Key signature made for this request is a secret too (a server may echo it).
        let authorization = request.headers().get(reqwest::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        if let Some(signature) =
            authorization.and_then(|a| a.strip_prefix("SharedKey ")).and_then(|a| a.split_once(':'))
        {
            self.http.secrets.add(signature.1);
        }
        Ok((url, std::mem::take(request.headers_mut())))
    }

    /// One authorized request with its body, retried when transient: the answer's headers and body.
    pub(super) async fn call(
        &self,
        what: &str,
        method: Method,
        blob: Option<&str>,
        query: &[(&str, &str)],
        headers: &[(HeaderName, &str)],
        body: Bytes,
    ) -> Result<(HeaderMap, String), BackendError> {
        let refused =
            |status, headers: &HeaderMap, text: &str| azure_error(what, status, headers, text, &self.settings);
        let mut request_headers = HeaderMap::new();
        request_headers.insert("x-ms-version", HeaderValue::from_static(AZURE_VERSION));
        for (name, value) in headers {
            let value = HeaderValue::from_str(value).map_err(|_| BackendError::new(ErrorKind::Fatal, "bad header"))?;
            request_headers.insert(name.clone(), value);
        }
        // Shared Key signs the length; reqwest would add the same one unsigned.
        if !body.is_empty() {
            request_headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
        }
        self.http
            .retry(|| async {
                let (url, signed) = self.authorize(&method, self.url(blob, query), request_headers.clone()).await?;
                let request = self
                    .http
                    .client
                    .request(method.clone(), url)
                    .timeout(self.http.tuning.upload_timeout(body.len()))
                    .headers(signed)
                    .body(body.clone());
                let response = send(what, request).await?.check_with(refused).await?;
                let answer_headers = response.headers().clone();
                let text = read_answer(what, response).await?;
                Ok((answer_headers, text))
            })
            .await
    }

    /// Every blob whose name starts with `prefix`, with its metadata (List Blobs).
    async fn list_blobs(&self, prefix: &str) -> Result<Vec<ListedBlob>, BackendError> {
        let what = "list the container";
        bounded_listing(&self.http.tuning, what, |marker| async move {
            let mut query = vec![
                ("restype", "container"),
                ("comp", "list"),
                ("prefix", prefix),
                ("include", "metadata"),
                ("maxresults", "5000"),
            ];
            if let Some(m) = &marker {
                query.push(("marker", m.as_str()));
            }
            let (_, body) = self.call(what, Method::GET, None, &query, &[], Bytes::new()).await?;
            if wire::count_items(&body, "Blob", entries::PAGE_ITEMS).is_some_and(|n| n > entries::PAGE_ITEMS) {
                let more = format!("{what}: the listing holds more than {} items in one page", entries::PAGE_ITEMS);
                return Err(BackendError::new(ErrorKind::Fatal, more));
            }
            let page: EnumerationResults = wire::decode_xml(&body).map_err(|e| {
                BackendError::new(ErrorKind::Fatal, format!("{what}: unreadable answer")).with_source(e)
            })?;
            Ok((page.blobs.blobs, page.next_marker.filter(|m| !m.is_empty())))
        })
        .await
    }
}

impl ObjectClient for Client {
    const NEEDS: Needs = Needs { list: "Storage Blob Data Reader", delete: "Storage Blob Data Contributor" };

    fn describe(&self) -> String {
        let s = &self.settings;
        let prefix = if s.prefix.is_empty() { String::new() } else { format!(", prefix `{}`", s.prefix) };
        let at = if s.custom_endpoint { format!(" at {}", s.endpoint) } else { String::new() };
        format!("Azure Blob container `{}` of account `{}`{prefix}{at}", s.container, s.account)
    }

    async fn lookup(&self, name: &str, key: &Key, version: &Version) -> Result<Option<CacheEntry>, BackendError> {
        match self.call("look up the entry", Method::HEAD, Some(name), &[], &[], Bytes::new()).await {
            Ok((headers, _)) => Ok(entries::found(&headers, META, name, key, version)),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A listing with the metadata (`include=metadata`): no request per entry.
    async fn list(&self, prefix: &str) -> Result<Vec<Object>, BackendError> {
        let blobs = self.list_blobs(prefix).await?;
        let object = |blob: ListedBlob| {
            let modified =
                chrono::DateTime::parse_from_rfc2822(&blob.properties.last_modified).map_or(0, |t| t.timestamp());
            let metadata = Metadata::read(|field| blob.metadata.get(field).cloned());
            Some(Object { name: blob.name?, size: blob.properties.content_length, modified, metadata: Some(metadata) })
        };
        Ok(blobs.into_iter().filter_map(object).collect())
    }

    async fn metadata(&self, name: &str) -> Result<Option<Metadata>, BackendError> {
        match self.call("read the entry's metadata", Method::HEAD, Some(name), &[], &[], Bytes::new()).await {
            Ok((headers, _)) => Ok(Some(Metadata::read(|field| entries::header(&headers, &format!("{META}{field}"))))),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A URL that reads `blob` by itself, for the download machinery (which sends no
    /// authorization): a service SAS signed with the account key, a user delegation SAS for an
    /// Azure AD identity, or the SAS token given. Its signature is masked.
    async fn download_url(&self, blob: &str) -> Result<String, BackendError> {
        let url = match self.credential().await?.as_ref() {
            AzureCredential::SASToken(pairs) => {
                let mut url = self.url(Some(blob), &[]);
                url.query_pairs_mut().extend_pairs(pairs);
                url
            }
            _ => {
                let path = StorePath::from(blob);
                let signed = self.store.signed_url(Method::GET, &path, SIGNED_FOR);
                match tokio::time::timeout(CREDENTIALS_WITHIN, signed).await {
                    Ok(Ok(url)) => url,
                    Ok(Err(e)) => return Err(credential_error(&e.to_string())),
                    Err(_) => return Err(credential_error("no user delegation key within the time allowed")),
                }
            }
        };
        let url = url.to_string();
        self.http.mask_url(&url);
        Ok(url)
    }

    async fn delete(&self, name: &str) -> Result<(), BackendError> {
        self.call("delete", Method::DELETE, Some(name), &[], &[], Bytes::new()).await.map(drop)
    }

    async fn upload(self: &Arc<Self>, entry: NewEntry) -> Result<Box<dyn Upload>, BackendError> {
        Ok(upload::start(self, entry))
    }
}

/// An Azure error answer: its code (the `x-ms-error-code` header, which a `HEAD` answer carries
/// too, or the `<Error>` document), and what to do about the common ones. The kind comes from
/// the status and the code, never from words.
pub(super) fn azure_error(
    what: &str,
    status: StatusCode,
    headers: &HeaderMap,
    body: &str,
    settings: &AzureSettings,
) -> BackendError {
    let code = headers
        .get("x-ms-error-code")
        .and_then(|v| v.to_str().ok())
        .map(one_line)
        .or_else(|| wire::error_document(body).map(|d| one_line(&d.code)));
    let error =
        |kind, message: String| BackendError::new(kind, format!("{what}: {message}")).with_status(status.as_u16());
    let with_code = |code: Option<&str>| code.map(|c| format!(" {c}")).unwrap_or_default();
    let (account, container) = (&settings.account, &settings.container);
    match (status.as_u16(), code.as_deref()) {
        (401 | 403, code) => error(
            ErrorKind::Forbidden,
            format!(
                "access denied (HTTP {}{}): check the credentials (`AZURE_STORAGE_ACCOUNT_KEY`, a SAS token, the \
                 identity and its role, such as Storage Blob Data Contributor) for container `{container}` of \
                 account `{account}`",
                status.as_u16(),
                with_code(code)
            ),
        ),
        (404, Some("ContainerNotFound")) => error(
            ErrorKind::Fatal,
            format!("container `{container}` does not exist in account `{account}` (HTTP 404 ContainerNotFound)"),
        ),
        (409, Some("BlobAlreadyExists")) => {
            error(ErrorKind::AlreadyExists, "the blob exists already (HTTP 409 BlobAlreadyExists)".to_owned())
        }
        (412, code) => error(ErrorKind::Precondition, format!("the blob exists already (HTTP 412{})", with_code(code))),
        // Any other conflict (a lease, a container being deleted) is no other writer's entry.
        (409, code) => error(ErrorKind::Fatal, format!("HTTP 409{}", with_code(code))),
        _ => status_error(what, status, headers, body),
    }
}

/// A failure to get credentials or sign: fatal (never retried here), with object_store's words.
fn credential_error(detail: &str) -> BackendError {
    BackendError::new(
        ErrorKind::Fatal,
        format!(
            "no usable Azure credentials (an account key, a SAS token, a client secret, workload or managed \
             identity): {}",
            one_line(detail)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;

    fn settings() -> AzureSettings {
        let inputs = super::super::AzureInputs { container: Some("ci-cache".into()), ..Default::default() };
        AzureSettings::resolve(&inputs, &Env::from_pairs([("AZURE_STORAGE_ACCOUNT_NAME", "acct")])).unwrap()
    }

    #[test]
    fn azure_answers_become_clear_errors() {
        let s = settings();
        let coded = |code: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("x-ms-error-code", HeaderValue::from_str(code).unwrap());
            headers
        };
        let e = azure_error("look up", StatusCode::FORBIDDEN, &coded("AuthenticationFailed"), "", &s);
        assert_eq!((e.kind, e.status), (ErrorKind::Forbidden, Some(403)), "403 is never a miss");
        assert!(e.message.contains("access denied (HTTP 403 AuthenticationFailed)"), "{}", e.message);
        assert_eq!(azure_error("x", StatusCode::UNAUTHORIZED, &HeaderMap::new(), "", &s).kind, ErrorKind::Forbidden);
        let e = azure_error("look up", StatusCode::NOT_FOUND, &coded("ContainerNotFound"), "", &s);
        assert_eq!(e.kind, ErrorKind::Fatal);
        assert!(e.message.contains("container `ci-cache` does not exist in account `acct`"), "{}", e.message);
        let e = azure_error("look up", StatusCode::NOT_FOUND, &coded("BlobNotFound"), "", &s);
        assert_eq!(e.kind, ErrorKind::NotFound);
        let body = "<?xml version=\"1.0\"?><Error><Code>BlobAlreadyExists</Code></Error>";
        let e = azure_error("commit", StatusCode::CONFLICT, &HeaderMap::new(), body, &s);
        assert_eq!((e.kind, e.status), (ErrorKind::AlreadyExists, Some(409)));
        let e = azure_error("commit", StatusCode::CONFLICT, &coded("LeaseIdMissing"), "", &s);
        assert_eq!(e.kind, ErrorKind::Fatal);
        let e = azure_error("commit", StatusCode::PRECONDITION_FAILED, &coded("ConditionNotMet"), "", &s);
        assert_eq!((e.kind, e.status), (ErrorKind::Precondition, Some(412)));
        let e = azure_error("x", StatusCode::SERVICE_UNAVAILABLE, &coded("ServerBusy"), "", &s);
        assert_eq!(e.kind, ErrorKind::Transient);
    }
}
