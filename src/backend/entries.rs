//! How an entry is kept in object storage (S3, Azure Blob), the same way in every store: its
//! object name (`<prefix><key>/<first 16 hex digits of the version>`), its metadata, and bounded
//! listings.

use crate::backend::catalog::{CatalogError, Listed};
use crate::backend::http::Tuning;
use crate::backend::{BackendError, CacheEntry, ErrorKind};
use crate::keys::{Key, Version};
use reqwest::header::HeaderMap;
use std::future::Future;

/// Digits of the version in an object's name (the whole version is in its metadata).
const VERSION_CHARS: usize = 16;

/// The metadata fields (each store adds its own header prefix).
pub const VERSION: &str = "version";
pub const REF: &str = "ref";
pub const CREATED: &str = "created";

/// A key prefix inside the bucket or container: empty, or ending in `/`.
pub fn prefix(given: Option<&str>) -> String {
    let prefix = given.unwrap_or_default().trim_matches('/');
    if prefix.is_empty() { String::new() } else { format!("{prefix}/") }
}

/// The object name of an entry: the short version only keeps names short (s3s-fs, for one,
/// stores metadata in files named after them); a lookup checks the full version.
pub fn object_name(prefix: &str, key: &Key, version: &Version) -> String {
    let short: String = version.chars().take(VERSION_CHARS).collect();
    format!("{prefix}{key}/{short}")
}

/// The metadata saved with a new entry, as `(field, value)`: all ASCII (metadata must be), the
/// ref percent-encoded (`refs/heads/café`), the creation time in seconds since the epoch.
pub fn metadata(current_ref: Option<&str>, version: &str) -> [(&'static str, String); 3] {
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs().to_string())
        .unwrap_or_default();
    let saved_ref = url::form_urlencoded::byte_serialize(current_ref.unwrap_or_default().as_bytes()).collect();
    [(REF, saved_ref), (CREATED, created), (VERSION, version.to_owned())]
}

/// The metadata fields saved with an entry, as read back; an empty value is none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metadata {
    version: Option<String>,
    saved_ref: Option<String>,
    created: Option<String>,
}

impl Metadata {
    pub fn read(field: impl Fn(&str) -> Option<String>) -> Self {
        Self { version: field(VERSION), saved_ref: field(REF), created: field(CREATED) }
    }

    pub fn get(&self, name: &str) -> Option<String> {
        let value = match name {
            VERSION => &self.version,
            REF => &self.saved_ref,
            CREATED => &self.created,
            _ => &None,
        };
        value.clone().filter(|v| !v.is_empty())
    }
}

pub fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()).map(str::to_owned)
}

/// The entry an answer to a `HEAD` of `name` describes, if its metadata (headers named
/// `meta_prefix` + field) holds exactly `version`.
pub fn found(headers: &HeaderMap, meta_prefix: &str, name: &str, key: &Key, version: &Version) -> Option<CacheEntry> {
    if header(headers, &format!("{meta_prefix}{VERSION}")).as_deref() != Some(version) {
        return None;
    }
    let size = header(headers, reqwest::header::CONTENT_LENGTH.as_str()).and_then(|v| v.parse::<u64>().ok());
    Some(CacheEntry { key: key.to_owned(), version: version.to_owned(), size, location: name.to_owned() })
}

/// The key and short version in a listed object's name (under `prefix`, the store's prefix and
/// the listing's key prefix, which is `key_prefix`), or `None` for an object of another shape.
pub fn split_name<'a>(name: &'a str, prefix: &str, key_prefix: &str) -> Option<(String, &'a str)> {
    let rest = name.strip_prefix(prefix)?;
    let (key_rest, short_version) = rest.split_once('/')?;
    Some((format!("{key_prefix}{key_rest}"), short_version))
}

/// Of listed objects, the key of the newest one of `version` (by its name's short version): the
/// one modified last, the higher generation on a tie (the longer key, then the greater).
pub fn newest_key<'a>(objects: impl Iterator<Item = ((String, &'a str), i64)>, version: &Version) -> Option<Key> {
    let short: String = version.chars().take(VERSION_CHARS).collect();
    objects
        .filter(|((_, listed_short), _)| *listed_short == short)
        .max_by(|((a, _), a_time), ((b, _), b_time)| (a_time, a.len(), a).cmp(&(b_time, b.len(), b)))
        .map(|((key, _), _)| Key::from(key))
}

/// [`crate::backend::Backend::lookup_newest_or`] in object storage. A listing the credentials may
/// not make leaves `key` alone: such a store reaches no later generation.
pub fn newest_or(
    listing: Result<Vec<(String, i64)>, BackendError>,
    (prefix, newest_of): (&str, &str),
    (key, version): (&Key, &Version),
    lookup: impl Fn(&Key) -> Result<Option<CacheEntry>, BackendError>,
) -> Result<Option<CacheEntry>, BackendError> {
    match listing {
        Ok(objects) => {
            // Only our own later generations' names: a stray object under the prefix is no base.
            let named = objects
                .iter()
                .filter_map(|(name, modified)| Some((split_name(name, prefix, newest_of)?, *modified)))
                .filter(|((found, _), _)| crate::stack::generation_of(key, found).is_some());
            if let Some(newest) = newest_key(named, version)
                && let Some(entry) = lookup(&newest)?
            {
                return Ok(Some(entry));
            }
        }
        Err(e) if e.kind == ErrorKind::Forbidden => {}
        Err(e) => return Err(e),
    }
    lookup(key)
}

/// A listed entry from its name's parts and its metadata. An entry saved without a ref has the
/// empty ref: it belongs to runs without one, never to every ref.
pub fn listed(
    name: &str,
    (key, short_version): (String, &str),
    size: u64,
    modified: i64,
    meta: impl Fn(&str) -> Option<String>,
) -> Listed {
    let saved_ref = meta(REF)
        .map(|r| {
            url::form_urlencoded::parse(format!("r={r}").as_bytes()).map(|(_, v)| v.into_owned()).next().unwrap_or(r)
        })
        .unwrap_or_default();
    Listed {
        id: name.to_owned(),
        key: Key::from(key),
        version: Version::from(meta(VERSION).unwrap_or_else(|| short_version.to_owned())),
        r#ref: Some(saved_ref),
        created: meta(CREATED).and_then(|c| c.parse().ok()).unwrap_or(modified),
        last_used: None,
        size,
    }
}

/// A listing's entries on `r#ref` (every ref: `None`), newest first.
pub fn newest_on(mut found: Vec<Listed>, r#ref: Option<&str>) -> Vec<Listed> {
    found.retain(|l| l.is_on(r#ref));
    found.sort_by_key(|l| std::cmp::Reverse(l.created));
    found
}

/// The most items one page of a listing may hold: Azure's own limit (S3's is 1,000). A page is
/// counted before it is decoded, so a million empty `<Blob/>` elements cost only their text.
pub const PAGE_ITEMS: usize = 5000;

/// The most items a whole listing keeps.
pub const LISTED_ITEMS: usize = 100_000;

/// The most memory the items of a whole listing may take, as [`Weight`] counts it.
pub const LISTED_BYTES: usize = 64 << 20;

/// The memory an item of a listing takes: its own size and the text it holds.
pub trait Weight {
    fn weight(&self) -> usize;
}

impl Weight for (String, u64, i64) {
    fn weight(&self) -> usize {
        std::mem::size_of::<Self>() + self.0.len()
    }
}

impl Weight for crate::backend::wire::ListedBlob {
    fn weight(&self) -> usize {
        let m = &self.metadata;
        let text: usize =
            [&self.name, &m.version, &m.saved_ref, &m.created].iter().flat_map(|s| s.as_ref()).map(String::len).sum();
        std::mem::size_of::<Self>() + self.properties.last_modified.len() + text
    }
}

/// Every item of a paged listing: `page(marker)` fetches one page and says where the next starts
/// (`None`: the end). A listing past `list_pages` pages, `list_deadline`, or any of the limits
/// above is an error, never an endless loop.
pub async fn bounded_listing<T: Weight, F, Fut>(
    tuning: &Tuning,
    what: &str,
    mut page: F,
) -> Result<Vec<T>, BackendError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>), BackendError>>,
{
    let too_large = |detail: String| BackendError::new(ErrorKind::Fatal, format!("{what}: the listing {detail}"));
    let mut bytes = 0usize;
    let started = tokio::time::Instant::now();
    let unfinished =
        |detail: String| BackendError::new(ErrorKind::Fatal, format!("{what}: the listing did not end {detail}"));
    let mut items = Vec::new();
    let mut marker: Option<String> = None;
    for pages in 0..tuning.list_pages {
        let left = tuning.list_deadline.saturating_sub(started.elapsed());
        let Ok(answer) = tokio::time::timeout(left, page(marker.take())).await else {
            let within = crate::units::duration(tuning.list_deadline);
            return Err(unfinished(format!("within {within} ({pages} pages)")));
        };
        let (found, next) = answer?;
        if found.len() > PAGE_ITEMS {
            return Err(too_large(format!("holds more than {PAGE_ITEMS} items in one page")));
        }
        bytes += found.iter().map(Weight::weight).sum::<usize>();
        if items.len() + found.len() > LISTED_ITEMS || bytes > LISTED_BYTES {
            return Err(too_large(format!(
                "holds more than {LISTED_ITEMS} items or {} MiB: use a narrower prefix",
                LISTED_BYTES >> 20
            )));
        }
        items.extend(found);
        match next {
            Some(next) => marker = Some(next),
            None => return Ok(items),
        }
    }
    Err(unfinished(format!("after {} pages ({} objects)", tuning.list_pages, items.len())))
}

/// A catalog failure: [`CatalogError::Forbidden`] when the credentials may not do `what`
/// (`needs`: the permission or role), else the backend error itself.
pub fn forbidden(e: BackendError, what: String, needs: &'static str) -> CatalogError {
    match (e.kind, e.status) {
        (ErrorKind::Forbidden, status) => {
            CatalogError::Forbidden { what, status: status.unwrap_or(403), message: e.message, needs }
        }
        _ => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;
    use std::io;

    #[test]
    fn names_and_metadata_round_trip() {
        assert_eq!(prefix(Some("/ci/cache/")), "ci/cache/");
        assert_eq!(prefix(Some("/")), "");
        assert_eq!(prefix(None), "");
        let version = "0123456789abcdef0123456789abcdef";
        let name = object_name("ci/", &"build-linux-abc".into(), &version.into());
        assert_eq!(name, "ci/build-linux-abc/0123456789abcdef");
        let parts = split_name(&name, "ci/build-", "build-").unwrap();
        assert_eq!(parts, ("build-linux-abc".to_owned(), "0123456789abcdef"));
        assert_eq!(split_name("ci/stray", "ci/", ""), None);
        let saved = metadata(Some("refs/heads/café"), version);
        assert!(saved.iter().all(|(_, v)| v.is_ascii()), "{saved:?}");
        let meta = |field: &str| saved.iter().find(|(f, _)| *f == field).map(|(_, v)| v.clone());
        let entry = listed(&name, parts, 7, 1, meta);
        assert_eq!(entry.r#ref.as_deref(), Some("refs/heads/café"));
        assert_eq!((entry.version.as_str(), entry.size, entry.id.as_str()), (version, 7, name.as_str()));
        assert!(entry.created > 1, "the saved time, not the modification time");
        // No metadata: the short version, no ref (the empty ref), the modification time.
        let bare = listed(&name, split_name(&name, "ci/", "").unwrap(), 7, 42, |_| None);
        assert_eq!((bare.version.as_str(), bare.r#ref.as_deref(), bare.created), ("0123456789abcdef", Some(""), 42));
    }

    #[test]
    fn a_head_is_a_hit_only_with_the_whole_version() {
        let mut headers = HeaderMap::new();
        headers.insert("x-ms-meta-version", "v1-full".parse().unwrap());
        headers.insert(reqwest::header::CONTENT_LENGTH, "12".parse().unwrap());
        let hit = found(&headers, "x-ms-meta-", "p/k/v1-full", &"k".into(), &"v1-full".into()).unwrap();
        assert_eq!((hit.size, hit.location.as_str()), (Some(12), "p/k/v1-full"));
        assert!(found(&headers, "x-ms-meta-", "p/k/v1-full", &"k".into(), &"v1-other".into()).is_none());
        assert!(found(&headers, "x-amz-meta-", "p/k/v1-full", &"k".into(), &"v1-full".into()).is_none());
    }

    impl Weight for i32 {
        fn weight(&self) -> usize {
            4
        }
    }

    impl Weight for bool {
        fn weight(&self) -> usize {
            1
        }
    }

    #[test]
    fn a_listing_holds_a_bounded_number_of_items() {
        let tuning = Tuning::from_env(&Env::default());
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let crowded = rt.block_on(bounded_listing(&tuning, "x", |_| async { Ok((vec![0; PAGE_ITEMS + 1], None)) }));
        assert!(crowded.unwrap_err().message.contains("more than 5000 items in one page"));
        let many =
            rt.block_on(bounded_listing(&tuning, "x", |_| async { Ok((vec![0; PAGE_ITEMS], Some("m".into()))) }));
        assert!(many.unwrap_err().message.contains("more than 100000 items"));
    }

    #[test]
    fn the_newest_key_is_the_last_modified_of_the_version_then_the_higher_generation() {
        let v = Version::from(format!("{}{}", "a".repeat(16), "b".repeat(48)));
        let short = &v[..16];
        let objects = vec![
            (("k.g9".to_owned(), short), 5),
            (("k.g10".to_owned(), short), 5),
            (("k.g2".to_owned(), "cccccccccccccccc"), 9),
            (("k.g3".to_owned(), short), 1),
        ];
        assert_eq!(newest_key(objects.into_iter(), &v), Some(Key::from("k.g10")), "a tie: the higher generation");
        assert_eq!(newest_key(std::iter::empty(), &v), None);
    }

    #[test]
    fn a_listing_that_never_ends_is_an_error() {
        let tuning = Tuning::from_env(&Env::from_pairs([("EXACT_CACHE_LIST_PAGES", "3")]));
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let endless = rt.block_on(bounded_listing(&tuning, "list the container", |_| async {
            Ok((vec![1], Some("more".to_owned())))
        }));
        let e = endless.unwrap_err();
        assert_eq!(e.message, "list the container: the listing did not end after 3 pages (3 objects)");
        let markers = std::sync::Mutex::new(Vec::new());
        let two = rt.block_on(bounded_listing(&tuning, "x", |marker| {
            markers.lock().unwrap().push(marker.clone());
            async move { Ok((vec![marker.is_some()], (marker.is_none()).then(|| "m".to_owned()))) }
        }));
        assert_eq!(two.unwrap(), [false, true]);
        assert_eq!(*markers.lock().unwrap(), [None, Some("m".to_owned())]);
    }

    #[test]
    fn the_catalog_hears_forbidden_by_kind_and_keeps_other_errors_whole() {
        let denied = BackendError::new(ErrorKind::Forbidden, "list: access denied (HTTP 403)").with_status(403);
        match forbidden(denied, "list".into(), "s3:ListBucket") {
            CatalogError::Forbidden { status: 403, needs: "s3:ListBucket", message, .. } => {
                assert!(message.contains("access denied"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        // Words alone are not a refusal.
        let worded = BackendError::new(ErrorKind::Fatal, "access denied (HTTP 403)")
            .with_status(400)
            .with_source(io::Error::other("the cause"));
        let CatalogError::Storage { source } = forbidden(worded, "list".into(), "s3:ListBucket") else {
            panic!("not a storage error")
        };
        let kept = source.downcast_ref::<BackendError>().expect("the backend error itself");
        assert_eq!((kept.kind, kept.status), (ErrorKind::Fatal, Some(400)));
        assert_eq!(source.source().map(ToString::to_string).as_deref(), Some("the cause"));
    }
}
