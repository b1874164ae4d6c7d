//! What the cache services and blob stores answer, decoded without any I/O (Twirp and REST
//! bodies, S3 and Azure XML, ranged downloads' headers), so the fuzz targets can feed it anything
//! a hostile server might send.
//!
//! Twirp JSON omits default values (`{}` means `ok: false`) and writes int64 as strings; every
//! field is defaulted and int64 is accepted as a string or a number. XML elements are matched by
//! name, entities decoded, unknown elements ignored.

use serde::Deserialize;
use serde::de::DeserializeOwned;

pub fn decode<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    serde_json::from_str(text)
}

/// v2 `GetCacheEntryDownloadURL`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct DownloadUrlResponse {
    pub ok: bool,
    pub signed_download_url: String,
    pub matched_key: String,
}

/// v2 `CreateCacheEntry`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct CreateResponse {
    pub ok: bool,
    pub signed_upload_url: String,
    pub message: String,
}

/// v2 `FinalizeCacheEntryUpload`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct FinalizeResponse {
    pub ok: bool,
    #[serde(deserialize_with = "int64")]
    pub entry_id: i64,
    pub message: String,
}

fn int64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Int {
        N(i64),
        S(String),
    }
    match Int::deserialize(d)? {
        Int::N(n) => Ok(n),
        Int::S(s) => s.parse().map_err(serde::de::Error::custom),
    }
}

/// v1 `GET cache` (a hit).
#[derive(Debug, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct LookupAnswer {
    pub cache_key: String,
    pub archive_location: String,
}

/// v1 `POST caches`. `cacheId` must be there; `null` is a self-hosted server's (falcondev's)
/// "another job is creating this entry".
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReserveAnswer {
    #[serde(deserialize_with = "Option::deserialize")]
    pub cache_id: Option<i64>,
}

/// An XML answer body as `T` (the root element's name is not checked: see [`error_document`]).
pub fn decode_xml<T: DeserializeOwned>(text: &str) -> Result<T, quick_xml::DeError> {
    quick_xml::de::from_str(text)
}

/// S3 `ListObjectsV2` (`<ListBucketResult>`): one page.
#[derive(Debug, Deserialize, Default)]
#[serde(default, rename_all = "PascalCase")]
pub struct ListBucketResult {
    #[serde(rename = "Contents")]
    pub objects: Vec<ListedObject>,
    pub is_truncated: bool,
    pub next_continuation_token: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(default, rename_all = "PascalCase")]
pub struct ListedObject {
    pub key: Option<String>,
    pub size: u64,
    /// RFC 3339.
    pub last_modified: String,
}

/// S3 `CreateMultipartUpload` (`<InitiateMultipartUploadResult>`).
#[derive(Debug, Deserialize, Default)]
#[serde(default, rename_all = "PascalCase")]
pub struct InitiateMultipartUploadResult {
    pub upload_id: String,
}

/// Azure Blob `List Blobs` (`<EnumerationResults>`): one page.
#[derive(Debug, Deserialize, Default)]
#[serde(default, rename_all = "PascalCase")]
pub struct EnumerationResults {
    pub blobs: Blobs,
    /// Where the next page starts; absent or empty on the last page.
    pub next_marker: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Blobs {
    #[serde(rename = "Blob")]
    pub blobs: Vec<ListedBlob>,
}

/// One `<Blob>` of a listing (asked with `include=metadata`).
#[derive(Debug, Deserialize, Default)]
#[serde(default, rename_all = "PascalCase")]
pub struct ListedBlob {
    pub name: Option<String>,
    pub properties: BlobProperties,
    pub metadata: BlobMetadata,
}

/// The metadata fields of a listed blob that exact-cache saves (without `x-ms-meta-`); any
/// other field is skipped unread, so a blob with a million of them costs nothing.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct BlobMetadata {
    pub version: Option<String>,
    #[serde(rename = "ref")]
    pub saved_ref: Option<String>,
    pub created: Option<String>,
}

impl BlobMetadata {
    /// The field `name` (`VERSION`, `REF`, `CREATED`).
    pub fn get(&self, name: &str) -> Option<&String> {
        match name {
            "version" => self.version.as_ref(),
            "ref" => self.saved_ref.as_ref(),
            "created" => self.created.as_ref(),
            _ => None,
        }
    }
}

/// How many elements named `name` an XML text holds, at any depth, counted up to `limit + 1`
/// without decoding anything; `None` for text that is not well-formed XML.
pub fn count_items(text: &str, name: &str, limit: usize) -> Option<usize> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(text);
    let mut count = 0;
    loop {
        match reader.read_event().ok()? {
            Event::Start(e) | Event::Empty(e) if e.local_name().as_ref() == name.as_bytes() => {
                count += 1;
                if count > limit {
                    return Some(count);
                }
            }
            Event::Eof => return Some(count),
            _ => {}
        }
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct BlobProperties {
    #[serde(rename = "Content-Length")]
    pub content_length: u64,
    /// RFC 1123.
    #[serde(rename = "Last-Modified")]
    pub last_modified: String,
}

/// An `<Error>` document of S3 or Azure Blob.
#[derive(Debug, Deserialize, Default, PartialEq, Eq)]
#[serde(default, rename_all = "PascalCase")]
pub struct ErrorDocument {
    pub code: String,
    pub message: String,
    /// S3: the bucket's region, in answers to a request sent to the wrong one.
    pub region: Option<String>,
}

/// The body as an `<Error>` document; `None` for anything else.
pub fn error_document(text: &str) -> Option<ErrorDocument> {
    (root_element(text)? == "Error").then(|| decode_xml(text).ok()).flatten()
}

/// The local name of the first element of an XML text.
fn root_element(text: &str) -> Option<String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(text);
    loop {
        match reader.read_event().ok()? {
            Event::Start(e) | Event::Empty(e) => {
                return Some(String::from_utf8_lossy(e.local_name().as_ref()).into_owned());
            }
            Event::Eof => return None,
            _ => {}
        }
    }
}

/// `bytes FIRST-LAST/TOTAL` with `FIRST ≤ LAST < TOTAL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContentRange {
    pub first: u64,
    pub last: u64,
    pub total: u64,
}

/// A satisfied byte range with a known total (RFC 9110 §14.4); anything else is `None`,
/// including `*` totals, signs, spaces inside numbers and ranges past the total.
pub fn parse_content_range(value: &str) -> Option<ContentRange> {
    let (unit, rest) = value.trim().split_once(' ')?;
    if !unit.eq_ignore_ascii_case("bytes") {
        return None;
    }
    let (range, total) = rest.trim_start().split_once('/')?;
    let (first, last) = range.split_once('-')?;
    let number = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    let (first, last, total) = (number(first)?, number(last)?, number(total)?);
    (first <= last && last < total).then_some(ContentRange { first, last, total })
}

/// What the answer to the first request (`bytes=0-ASKED_LAST`) says about the blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstAnswer {
    /// The blob's size.
    pub total: u64,
    /// Bytes in this answer's body: the next range starts here.
    pub len: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// Not the bytes asked for: a broken server or proxy.
    #[error("{0}")]
    Wrong(String),
    /// A `Content-Length` that disagrees with the range: a cut-off answer, worth another try.
    #[error("{0}")]
    Length(String),
}

/// Check a `206` to `bytes=0-asked_last`. A server may send less than asked (the rest comes in
/// later ranges), never more, never from elsewhere, never a disagreeing `Content-Length`.
pub fn first_answer(
    content_range: Option<&str>,
    content_length: Option<u64>,
    asked_last: u64,
) -> Result<FirstAnswer, AnswerError> {
    let Some(range) = content_range.and_then(parse_content_range) else {
        return Err(AnswerError::Wrong("a ranged answer without a valid total length".into()));
    };
    if range.first != 0 || range.last > asked_last {
        return Err(AnswerError::Wrong(format!("asked for bytes 0-{asked_last}, got {}-{}", range.first, range.last)));
    }
    let len = range.last + 1;
    if let Some(announced) = content_length.filter(|n| *n != len) {
        return Err(AnswerError::Length(format!(
            "Content-Length {announced} disagrees with the range 0-{}",
            range.last
        )));
    }
    Ok(FirstAnswer { total: range.total, len })
}

/// Check a `206` to `bytes=from-last` of a blob of `total` bytes. A missing `Content-Range`
/// is tolerated (the body length is checked anyway); a different one is not.
pub fn range_answer(
    content_range: Option<&str>,
    content_length: Option<u64>,
    from: u64,
    last: u64,
    total: u64,
) -> Result<(), AnswerError> {
    if let Some(value) = content_range {
        let got = parse_content_range(value);
        let fits = got.is_some_and(|r| r.first == from && r.last == last && r.total == total);
        if !fits {
            let got = got.map_or("an unreadable range".to_owned(), |r| format!("{}-{}/{}", r.first, r.last, r.total));
            return Err(AnswerError::Wrong(format!("asked for bytes {from}-{last}, got {got}")));
        }
    }
    let Some(len) = last.checked_sub(from).and_then(|d| d.checked_add(1)) else {
        return Err(AnswerError::Wrong(format!("an empty range {from}-{last} was asked for")));
    };
    if let Some(announced) = content_length.filter(|n| *n != len) {
        return Err(AnswerError::Length(format!("Content-Length {announced} for the bytes {from}-{last}")));
    }
    Ok(())
}

/// The ranges `(first, last)` still to fetch after `from`, at most `chunk` bytes each, lazily:
/// a bogus total must not allocate a range list up front.
pub fn later_ranges(from: u64, total: u64, chunk: u64) -> impl Iterator<Item = (u64, u64)> {
    let chunk = chunk.max(1);
    (from..total).step_by(usize::try_from(chunk).unwrap_or(usize::MAX)).map(move |start| {
        let last = start.saturating_add(chunk).min(total) - 1;
        (start, last)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_default_every_field_and_accept_int64_either_way() {
        let r: FinalizeResponse = decode(r#"{"ok":true,"entry_id":"9876"}"#).unwrap();
        assert_eq!((r.ok, r.entry_id), (true, 9876));
        let r: FinalizeResponse = decode(r#"{"ok":true,"entry_id":42}"#).unwrap();
        assert_eq!(r.entry_id, 42);
        assert!(decode::<FinalizeResponse>(r#"{"entry_id":"x"}"#).is_err());
        let r: DownloadUrlResponse = decode("{}").unwrap();
        assert!(!r.ok);
        assert!(decode::<ReserveAnswer>("{}").is_err());
        assert_eq!(decode::<ReserveAnswer>(r#"{"cacheId":null}"#).unwrap().cache_id, None);
        assert_eq!(decode::<ReserveAnswer>(r#"{"cacheId":7}"#).unwrap().cache_id, Some(7));
    }

    #[test]
    fn s3_answers_decode_by_element_name() {
        let page = r#"<?xml version="1.0" encoding="UTF-8"?>
            <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
              <Name>ci-cache</Name><Prefix>ci/</Prefix><KeyCount>2</KeyCount><IsTruncated>true</IsTruncated>
              <Contents><Key>ci/a&amp;b/0123</Key><LastModified>2026-01-02T03:04:05.000Z</LastModified>
                <ETag>&quot;x&quot;</ETag><Size>42</Size><StorageClass>STANDARD</StorageClass></Contents>
              <Contents><Key>ci/c/4567</Key><Size>7</Size></Contents>
              <NextContinuationToken>t&lt;1&gt;</NextContinuationToken>
            </ListBucketResult>"#;
        let page: ListBucketResult = decode_xml(page).unwrap();
        assert!(page.is_truncated);
        assert_eq!(page.next_continuation_token.as_deref(), Some("t<1>"));
        let keys: Vec<_> = page.objects.iter().map(|o| (o.key.as_deref().unwrap(), o.size)).collect();
        assert_eq!(keys, [("ci/a&b/0123", 42), ("ci/c/4567", 7)]);
        assert_eq!(page.objects[0].last_modified, "2026-01-02T03:04:05.000Z");
        let empty: ListBucketResult =
            decode_xml("<ListBucketResult><KeyCount>0</KeyCount></ListBucketResult>").unwrap();
        assert!(empty.objects.is_empty() && !empty.is_truncated && empty.next_continuation_token.is_none());
        let started: InitiateMultipartUploadResult = decode_xml(
            "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>u-1</UploadId>\
             </InitiateMultipartUploadResult>",
        )
        .unwrap();
        assert_eq!(started.upload_id, "u-1");
    }

    #[test]
    fn azure_listings_decode_by_element_name() {
        let page = r#"<?xml version="1.0" encoding="utf-8"?>
<EnumerationResults ServiceEndpoint="http://127.0.0.1:10000/devstoreaccount1" ContainerName="c">
  <Prefix>ci/</Prefix><Blobs>
    <Blob><Name>ci/k-1/0123</Name><Properties><Last-Modified>Tue, 02 Jan 2024 03:04:05 GMT</Last-Modified>
      <Content-Length>42</Content-Length><BlobType>BlockBlob</BlobType></Properties>
      <Metadata><version>0123abcd</version><ref>refs%2Fheads%2Fmain</ref><created>1700000000</created></Metadata>
    </Blob>
    <Blob><Name>ci/k-2/4567</Name><Properties><Content-Length>7</Content-Length></Properties><Metadata /></Blob>
  </Blobs><NextMarker>2!96!next</NextMarker></EnumerationResults>"#;
        let listing: EnumerationResults = decode_xml(page).unwrap();
        let [first, second] = &listing.blobs.blobs[..] else { panic!("{listing:?}") };
        assert_eq!(first.name.as_deref(), Some("ci/k-1/0123"));
        assert_eq!(
            (first.properties.content_length, first.properties.last_modified.as_str()),
            (42, "Tue, 02 Jan 2024 03:04:05 GMT")
        );
        assert_eq!(first.metadata.get("ref").map(String::as_str), Some("refs%2Fheads%2Fmain"));
        let m = &first.metadata;
        assert_eq!((m.version.as_deref(), m.created.as_deref()), (Some("0123abcd"), Some("1700000000")));
        assert!(second.metadata.get("version").is_none() && second.metadata.get("ref").is_none());
        // Fields exact-cache never saves are skipped; a page is counted before it is decoded.
        let odd: EnumerationResults = decode_xml(
            "<EnumerationResults><Blobs><Blob><Metadata><a/><b>x</b><version>v</version></Metadata></Blob></Blobs>\
             </EnumerationResults>",
        )
        .unwrap();
        assert_eq!(odd.blobs.blobs[0].metadata.version.as_deref(), Some("v"));
        assert_eq!(count_items(page, "Blob", 10), Some(2));
        assert_eq!(count_items(&"<Blob/>".repeat(100), "Blob", 10), Some(11), "counting stops past the limit");
        assert_eq!(listing.next_marker.as_deref(), Some("2!96!next"));
        let last: EnumerationResults =
            decode_xml("<EnumerationResults><Blobs /><NextMarker /></EnumerationResults>").unwrap();
        assert!(last.blobs.blobs.is_empty());
        assert!(last.next_marker.is_none_or(|m| m.is_empty()));
    }

    #[test]
    fn only_an_error_root_is_an_error_document() {
        let doc = error_document(
            "<?xml version=\"1.0\"?><Error><Code>AuthorizationHeaderMalformed</Code><Message>m</Message>\
             <Region>eu-west-2</Region><RequestId>r</RequestId></Error>",
        )
        .unwrap();
        assert_eq!(
            (doc.code.as_str(), doc.message.as_str(), doc.region.as_deref()),
            ("AuthorizationHeaderMalformed", "m", Some("eu-west-2"))
        );
        for other in [
            "<ListBucketResult><Contents><Key>&lt;Error&gt;</Key></Contents></ListBucketResult>",
            "<html>bad gateway</html>",
            "<?xml><Code>Auth</Code>",
            "not xml",
            "",
            "<Error><Code>x</Error>",
        ] {
            assert_eq!(error_document(other), None, "{other}");
        }
    }

    #[test]
    fn content_ranges_are_strict() {
        assert_eq!(parse_content_range("bytes 0-9/10"), Some(ContentRange { first: 0, last: 9, total: 10 }));
        assert_eq!(parse_content_range("Bytes  5-5/6").map(|r| r.first), Some(5));
        for bad in [
            "bytes 0-9/*",
            "bytes */10",
            "bytes 0-10/10",
            "bytes 5-4/10",
            "bytes -1-3/10",
            "bytes +0-3/10",
            "0-3/10",
            "items 0-3/10",
            "",
        ] {
            assert_eq!(parse_content_range(bad), None, "{bad}");
        }
    }

    #[test]
    fn answers_are_checked_against_what_was_asked() {
        assert_eq!(first_answer(Some("bytes 0-99/1000"), Some(100), 99), Ok(FirstAnswer { total: 1000, len: 100 }));
        // Less than asked is fine; the rest comes in later ranges.
        assert_eq!(first_answer(Some("bytes 0-49/1000"), None, 99).unwrap().len, 50);
        assert!(first_answer(Some("bytes 1-99/1000"), None, 99).is_err());
        assert!(first_answer(Some("bytes 0-199/1000"), None, 99).is_err());
        assert!(first_answer(Some("bytes 0-99/1000"), Some(99), 99).is_err());
        assert!(first_answer(None, Some(100), 99).is_err());
        assert!(range_answer(Some("bytes 100-199/1000"), Some(100), 100, 199, 1000).is_ok());
        assert!(range_answer(None, None, 100, 199, 1000).is_ok());
        assert!(range_answer(Some("bytes 0-99/1000"), None, 100, 199, 1000).is_err());
        assert!(range_answer(Some("bytes 100-199/2000"), None, 100, 199, 1000).is_err());
        assert!(range_answer(None, Some(5), 100, 199, 1000).is_err());
        // A range past its end is never asked for; if it were, it is refused, not an underflow.
        assert!(range_answer(None, Some(5), 200, 199, 1000).is_err());
    }

    #[test]
    fn later_ranges_cover_the_rest_exactly() {
        let ranges: Vec<_> = later_ranges(100, 1000, 300).collect();
        assert_eq!(ranges, vec![(100, 399), (400, 699), (700, 999)]);
        assert_eq!(later_ranges(1000, 1000, 300).count(), 0);
        assert_eq!(
            later_ranges(u64::MAX - 1, u64::MAX, u64::MAX).collect::<Vec<_>>(),
            vec![(u64::MAX - 1, u64::MAX - 1)]
        );
    }
}
