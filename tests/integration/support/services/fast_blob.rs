//! A minimal blob store speaking the part of the Azure Blob REST API both clients use — Put
//! Blob, Put Block, Put Block List, Get Blob (with `Range` or `x-ms-range`), Get Blob
//! Properties, Create Container — with blobs as files in a directory. The tests' default blob
//! store (behind the service's fault front), so that they need no outside tool; the benchmark
//! uses it to show client overhead where Azurite itself is the bottleneck. It checks no
//! signatures: tests of the real Azure Blob behaviour use Azurite (`#[needs(azurite)]`).

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;

pub fn router(dir: PathBuf) -> Router {
    Router::new()
        .route("/{container}", any(container))
        .route("/{container}/{*blob}", any(blob))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(Arc::new(dir))
}

async fn container(State(dir): State<Arc<PathBuf>>, Path(container): Path<String>) -> Response {
    let _ = std::fs::create_dir_all(dir.join(&container));
    StatusCode::CREATED.into_response()
}

fn azure_headers(len: u64) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    h.insert(header::ETAG, HeaderValue::from_static("\"0x8DCAFEBABE00001\""));
    h.insert(header::LAST_MODIFIED, HeaderValue::from_static("Sun, 01 Nov 2026 00:00:00 GMT"));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert("x-ms-blob-type", HeaderValue::from_static("BlockBlob"));
    h.insert("x-ms-version", HeaderValue::from_static("2025-01-05"));
    h.insert("x-ms-request-id", HeaderValue::from_static("00000000-0000-0000-0000-000000000000"));
    h.insert("x-ms-creation-time", HeaderValue::from_static("Sun, 01 Nov 2026 00:00:00 GMT"));
    h
}

fn block_file(dir: &std::path::Path, container: &str, blob: &str, id: &str) -> PathBuf {
    dir.join(container).join(".blocks").join(blob).join(hex::encode(id.as_bytes()))
}

async fn blob(
    State(dir): State<Arc<PathBuf>>,
    Path((container, blob)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = dir.join(&container).join(&blob);
    let result = tokio::task::spawn_blocking(move || -> std::io::Result<Response> {
        std::fs::create_dir_all(path.parent().unwrap())?;
        match (method, q.get("comp").map(String::as_str)) {
            (Method::PUT, Some("block")) => {
                let id = q.get("blockid").cloned().unwrap_or_default();
                let file = block_file(&dir, &container, &blob, &id);
                std::fs::create_dir_all(file.parent().unwrap())?;
                std::fs::write(file, &body)?;
                Ok(StatusCode::CREATED.into_response())
            }
            (Method::PUT, Some("blocklist")) => {
                let xml = String::from_utf8_lossy(&body).into_owned();
                let mut out = std::fs::File::create(&path)?;
                for part in xml.split('<').filter_map(|t| {
                    let (tag, rest) = t.split_once('>')?;
                    matches!(tag, "Latest" | "Committed" | "Uncommitted").then_some(rest)
                }) {
                    let mut block = std::fs::File::open(block_file(&dir, &container, &blob, part))?;
                    std::io::copy(&mut block, &mut out)?;
                }
                let _ = std::fs::remove_dir_all(dir.join(&container).join(".blocks").join(&blob));
                Ok(StatusCode::CREATED.into_response())
            }
            (Method::PUT, _) => {
                std::fs::write(&path, &body)?;
                Ok(StatusCode::CREATED.into_response())
            }
            (Method::HEAD, _) => {
                let len = std::fs::metadata(&path)?.len();
                Ok((StatusCode::OK, azure_headers(len)).into_response())
            }
            (Method::GET, _) => {
                let total = std::fs::metadata(&path)?.len();
                let range = headers
                    .get("x-ms-range")
                    .or_else(|| headers.get(header::RANGE))
                    .and_then(|v| v.to_str().ok())
                    .and_then(|r| r.strip_prefix("bytes="))
                    .and_then(|r| r.split_once('-'))
                    .map(|(a, b)| {
                        let a: u64 = a.parse().unwrap_or(0);
                        let b: u64 =
                            b.parse().map(|b: u64| b.min(total.saturating_sub(1))).unwrap_or(total.saturating_sub(1));
                        (a, b)
                    });
                let (status, start, end) = match range {
                    Some((a, b)) => (StatusCode::PARTIAL_CONTENT, a, b),
                    None => (StatusCode::OK, 0, total.saturating_sub(1)),
                };
                let len = if total == 0 { 0 } else { end - start + 1 };
                let mut h = azure_headers(len);
                if status == StatusCode::PARTIAL_CONTENT {
                    h.insert(
                        header::CONTENT_RANGE,
                        HeaderValue::from_str(&format!("bytes {start}-{end}/{total}")).unwrap(),
                    );
                }
                // Read in the blocking thread, stream in 1 MiB pieces.
                let mut file = std::fs::File::open(&path)?;
                file.seek(SeekFrom::Start(start))?;
                let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(4);
                std::thread::spawn(move || {
                    let mut left = len;
                    let mut buf = vec![0u8; 1 << 20];
                    while left > 0 {
                        let want = left.min(buf.len() as u64) as usize;
                        match file.read(&mut buf[..want]) {
                            Ok(0) => break,
                            Ok(n) => {
                                left -= n as u64;
                                if tx.blocking_send(Ok(Bytes::copy_from_slice(&buf[..n]))).is_err() {
                                    return;
                                }
                            }
                            Err(e) => {
                                let _ = tx.blocking_send(Err(e));
                                return;
                            }
                        }
                    }
                });
                let stream = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|i| (i, rx)) });
                Ok((status, h, Body::from_stream(stream)).into_response())
            }
            _ => Ok(StatusCode::METHOD_NOT_ALLOWED.into_response()),
        }
    })
    .await;
    match result {
        Ok(Ok(r)) => r,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            (StatusCode::NOT_FOUND, [("x-ms-error-code", "BlobNotFound")], "BlobNotFound").into_response()
        }
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
