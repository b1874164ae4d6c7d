//! The GitHub REST API as the cache service's [`Catalog`] (octocrab; `GITHUB_API_URL`,
//! `GITHUB_REPOSITORY`, the `github-token` input): the cache service protocols themselves cannot
//! list or delete, and the runtime token does not work with REST.
//!
//! A call that finds no cache API where it asked (no answer, an error status other than a refused
//! token's or a rate limit, an answer that is no listing) names the URL: a runner pointed at a
//! self-hosted cache server still has `GITHUB_API_URL`, which cannot list or delete its entries.

use crate::backend::catalog::{Catalog, CatalogError, Listed};
use crate::backend::http::{MAX_ANSWER_BYTES, list_deadline};
use crate::env::Env;
use crate::keys::{Key, Version};
use http_body_util::BodyExt;
use std::time::Duration;

pub struct GithubCatalog {
    rt: tokio::runtime::Runtime,
    crab: octocrab::Octocrab,
    owner: String,
    repo: String,
    api: String,
    list_deadline: Duration,
}

const PER_PAGE: u8 = 100;
/// 10,000 entries: more than a repository's cache holds.
const MAX_PAGES: u32 = 100;

impl GithubCatalog {
    /// The API of `GITHUB_REPOSITORY` at `GITHUB_API_URL`, authenticated with `token`.
    pub fn from_env(env: &Env, token: Option<&str>) -> Result<Self, CatalogError> {
        if env.is_true("ACT") {
            return Err(CatalogError::UnderAct);
        }
        let token = token.filter(|t| !t.is_empty()).ok_or(CatalogError::NoToken)?;
        let repository = env.non_empty("GITHUB_REPOSITORY").ok_or(CatalogError::NoRepository)?;
        let (owner, repo) = repository
            .split_once('/')
            .ok_or_else(|| CatalogError::BadRepository { repository: repository.to_owned() })?;
        let api = env.non_empty("GITHUB_API_URL").unwrap_or("https://api.github.com").trim_end_matches('/').to_owned();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| CatalogError::Runtime { source })?;
        let crab = {
            let _guard = rt.enter();
            octocrab::Octocrab::builder()
                .base_uri(api.as_str())
                .map_err(|source| CatalogError::BadApiUrl { source })?
                .personal_token(token.to_owned())
                .set_connect_timeout(Some(std::time::Duration::from_secs(20)))
                .set_read_timeout(Some(std::time::Duration::from_secs(30)))
                .build()
                .map_err(|source| CatalogError::Client { source })?
        };
        let list_deadline = list_deadline(env);
        Ok(Self { rt, crab, owner: owner.to_owned(), repo: repo.to_owned(), api, list_deadline })
    }

    /// `GET` (or `DELETE`) `route`: the body of a success; an error status becomes the matching
    /// [`CatalogError`] (`needs`: the permission).
    async fn call(
        &self,
        what: &str,
        delete: bool,
        route: String,
        needs: &'static str,
    ) -> Result<Vec<u8>, CatalogError> {
        let url = format!("{}{}", self.api, route.split('?').next().unwrap_or_default());
        let missing = |source| CatalogError::NoCacheApi { url: url.clone(), source: Box::new(source) };
        let request = |source| CatalogError::Request { what: what.to_owned(), source };
        let response = if delete { self.crab._delete(route, None::<&()>).await } else { self.crab._get(route).await }
            .map_err(|e| missing(request(e)))?;
        let status = response.status().as_u16();
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        let mut cut = false;
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame.map_err(request)?.into_data() else { continue };
            if bytes.len() + data.len() > MAX_ANSWER_BYTES {
                cut = true;
                break;
            }
            bytes.extend_from_slice(&data);
        }
        if (200..300).contains(&status) {
            return if cut { Err(CatalogError::TooLarge { what: what.to_owned() }) } else { Ok(bytes) };
        }
        // GitHub's errors: `{"message": …}`.
        let message = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
            .unwrap_or_default();
        let what = what.to_owned();
        Err(match status {
            401 | 403 => CatalogError::Forbidden { what, status, message, needs },
            // A deleted entry is gone; a listing that is not found has no API to ask.
            404 if delete => CatalogError::NotFound { what, message },
            404 => missing(CatalogError::NotFound { what, message }),
            429 => CatalogError::Status { what, status, message },
            _ => missing(CatalogError::Status { what, status, message }),
        })
    }
}

impl Catalog for GithubCatalog {
    fn describe(&self) -> String {
        format!("GitHub REST API ({}, {}/{})", self.api, self.owner, self.repo)
    }

    fn list(&self, key_prefix: &str, r#ref: Option<&str>) -> Result<Vec<Listed>, CatalogError> {
        let mut found = Vec::new();
        // Pages shift when entries come and go between requests: keep each id once, and stop
        // after MAX_PAGES whatever `total_count` claims.
        let mut seen = std::collections::HashSet::new();
        let mut pages = 0u32;
        let listing = async {
            for page in 1u32..=MAX_PAGES {
                let mut query = url::form_urlencoded::Serializer::new(String::new());
                query
                    .append_pair("key", key_prefix)
                    .append_pair("sort", "created_at")
                    .append_pair("direction", "desc")
                    .append_pair("per_page", &PER_PAGE.to_string())
                    .append_pair("page", &page.to_string());
                // The empty ref (saves outside Actions) is never the service's: filtered below.
                if let Some(r) = r#ref.filter(|r| !r.is_empty()) {
                    query.append_pair("ref", r);
                }
                let route = format!("/repos/{}/{}/actions/caches?{}", self.owner, self.repo, query.finish());
                let body = self.call("list caches", false, route, "actions: read").await?;
                pages = page;
                let list: octocrab::models::actions::ActionsCacheList =
                    serde_json::from_slice(&body).map_err(|source| CatalogError::NoCacheApi {
                        url: format!("{}/repos/{}/{}/actions/caches", self.api, self.owner, self.repo),
                        source: Box::new(CatalogError::Unreadable { what: "list caches".into(), source }),
                    })?;
                let count = list.actions_caches.len();
                found.extend(list.actions_caches.into_iter().filter(|c| seen.insert(c.id)).map(|c| Listed {
                    id: c.id.to_string(),
                    key: Key::from(c.key),
                    version: Version::from(c.version),
                    r#ref: c.r#ref,
                    created: c.created_at.timestamp(),
                    last_used: Some(c.last_accessed_at.timestamp()),
                    size: c.size_in_bytes.max(0) as u64,
                }));
                if count < PER_PAGE as usize || found.len() as i64 >= list.total_count {
                    break;
                }
            }
            Ok::<(), CatalogError>(())
        };
        match self.rt.block_on(async { tokio::time::timeout(self.list_deadline, listing).await }) {
            Ok(done) => done?,
            Err(_) => {
                return Err(CatalogError::ListDeadline { within: crate::units::duration(self.list_deadline), pages });
            }
        }
        // The API matches prefixes; keep only what really starts with ours.
        found.retain(|l| l.key.starts_with(key_prefix) && l.is_on(r#ref));
        found.sort_by_key(|l| std::cmp::Reverse(l.created));
        Ok(found)
    }

    fn delete(&self, entry: &Listed) -> Result<(), CatalogError> {
        let id: i64 = entry.id.parse().map_err(|_| CatalogError::BadCacheId { id: entry.id.clone() })?;
        let route = format!("/repos/{}/{}/actions/caches/{id}", self.owner, self.repo);
        match self.rt.block_on(self.call(&format!("delete cache {id}"), true, route, "actions: write")) {
            Ok(_) => Ok(()),
            // Already gone (a concurrent prune): what was wanted.
            Err(CatalogError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
