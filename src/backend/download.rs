//! Downloads as a plain `Read`: ranged GETs run several at a time on the HTTP runtime and are
//! handed to the reader in order, so the unpacker starts while later ranges are still in
//! flight, and memory stays at (ranges in flight + 2) × range size.
//!
//! The first request asks for the first range; a `206` with `Content-Range: bytes 0-n/TOTAL`
//! gives the total and the rest follows in parallel, while a `200` (a server without range
//! support) is streamed as it arrives. Each range is retried, resuming after the bytes already
//! received; each read waits at most `read_timeout`; each range (retries included) has a
//! deadline of network time, so a slow unpacker never counts against it; and the byte count
//! must equal the total (and the size the service announced). No auth header is ever sent
//! here: these URLs are signed or secret by themselves.

use super::http::{Http, status_error, transport_error};
use super::wire::{self, AnswerError, FirstAnswer};
use super::{BackendError, ErrorKind};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use reqwest::StatusCode;
use std::io::{self, Read};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

type Chunk = Result<Bytes, BackendError>;

/// A reader over `url`'s bytes; `expected` is the size the service announced, if any.
pub fn open(http: Arc<Http>, url: String, expected: Option<u64>) -> Box<dyn Read + Send> {
    let (tx, rx) = mpsc::channel::<Chunk>(2);
    let task_http = Arc::clone(&http);
    let task = http.rt().spawn(async move {
        if let Err(e) = run(&task_http, &url, expected, &tx).await {
            let _ = tx.send(Err(e)).await;
        }
    });
    Box::new(ChannelReader { rx, current: Bytes::new(), task, failure: None })
}

/// At most the first `len` bytes of `url`, with one ranged GET (retried): what explaining a
/// miss reads of another entry, never the whole blob.
pub fn read_prefix(http: &Http, url: &str, len: u64) -> Result<Vec<u8>, BackendError> {
    let fetch = async {
        http.retry(|| async {
            let mut r = http
                .download_client
                .get(url)
                .header(reqwest::header::RANGE, format!("bytes=0-{}", len.saturating_sub(1)))
                .send()
                .await
                .map_err(|e| transport_error("read", e))?;
            match r.status() {
                StatusCode::OK | StatusCode::PARTIAL_CONTENT => {}
                StatusCode::RANGE_NOT_SATISFIABLE => return Ok(Vec::new()),
                status => {
                    let headers = r.headers().clone();
                    return Err(status_error("read", status, &headers, &r.text().await.unwrap_or_default()));
                }
            }
            // A server that ignores the range answers 200 with everything: stop at `len`.
            let mut bytes = Vec::new();
            while (bytes.len() as u64) < len {
                match r.chunk().await.map_err(|e| transport_error("read", e))? {
                    Some(c) => bytes.extend_from_slice(&c[..c.len().min((len - bytes.len() as u64) as usize)]),
                    None => break,
                }
            }
            Ok(bytes)
        })
        .await
    };
    http.rt().block_on(within(http, fetch))
}

fn deadline_error(deadline: Duration) -> BackendError {
    BackendError::new(
        ErrorKind::Timeout,
        format!("a range of the download did not finish within {}", crate::units::duration(deadline)),
    )
}

/// `future` within the range deadline.
async fn within<T>(http: &Http, future: impl Future<Output = Result<T, BackendError>>) -> Result<T, BackendError> {
    let deadline = http.tuning.range_deadline;
    tokio::time::timeout(deadline, future).await.unwrap_or_else(|_| Err(deadline_error(deadline)))
}

async fn run(http: &Http, url: &str, expected: Option<u64>, tx: &mpsc::Sender<Chunk>) -> Result<(), BackendError> {
    let chunk = http.tuning.download_chunk;
    let first_end = expected.map_or(chunk, |e| e.min(chunk)).saturating_sub(1);
    let response = within(
        http,
        http.retry(|| async {
            let r = http
                .download_client
                .get(url)
                .header(reqwest::header::RANGE, format!("bytes=0-{first_end}"))
                .send()
                .await
                .map_err(|e| transport_error("download", e))?;
            match r.status() {
                StatusCode::OK | StatusCode::PARTIAL_CONTENT => Ok(r),
                // An empty blob answers a range request with 416.
                StatusCode::RANGE_NOT_SATISFIABLE if expected == Some(0) => Ok(r),
                status => {
                    let headers = r.headers().clone();
                    Err(status_error("download", status, &headers, &r.text().await.unwrap_or_default()))
                }
            }
        }),
    )
    .await?;

    if response.status() == StatusCode::RANGE_NOT_SATISFIABLE {
        return Ok(());
    }
    if response.status() == StatusCode::OK {
        return stream_whole(http, response, expected, tx).await;
    }
    // The first answer may be shorter than asked for: the blob is smaller than one range.
    let (FirstAnswer { total, len }, cut_off) =
        match wire::first_answer(content_range(&response), response.content_length(), first_end, expected) {
            Ok(first) => (first, false),
            // Cut off: the range itself is fine, its body is not.
            Err(AnswerError::Length(_)) => {
                (wire::first_answer(content_range(&response), None, first_end, expected).map_err(answer_error)?, true)
            }
            Err(e) => return Err(answer_error(e)),
        };
    let body = async {
        if cut_off {
            return Err(BackendError::new(ErrorKind::Transient, "download: a cut-off first range"));
        }
        read_body(response, len).await.map_err(|(_, e)| e)
    };
    let first = match within(http, body).await {
        Ok(bytes) => bytes,
        // Broken off: fetch the first range again as any other (resuming is not worth it here).
        Err(e) if matches!(e.kind, ErrorKind::Transient | ErrorKind::Timeout) => {
            within(http, fetch_range(http, url, 0, len - 1, Some(total))).await?
        }
        Err(e) => return Err(e),
    };
    if tx.send(Ok(first)).await.is_err() {
        return Ok(());
    }
    let mut ranges = futures_util::stream::iter(wire::later_ranges(len, total, chunk))
        .map(|(start, last)| within(http, fetch_range(http, url, start, last, Some(total))))
        .buffered(http.tuning.download_concurrency);
    while let Some(bytes) = ranges.next().await {
        if tx.send(Ok(bytes?)).await.is_err() {
            return Ok(()); // the reader went away (the unpacker failed): stop downloading
        }
    }
    Ok(())
}

/// `start..=end` of a blob of `total` bytes, retried; a retry asks only for what is still missing.
async fn fetch_range(http: &Http, url: &str, start: u64, end: u64, total: Option<u64>) -> Result<Bytes, BackendError> {
    let want = end - start + 1;
    let got = std::sync::Mutex::new(BytesMut::with_capacity(want as usize));
    http.retry(|| {
        let already = got.lock().unwrap().len() as u64;
        let got = &got;
        async move {
            if already == want {
                return Ok(()); // everything arrived before the connection broke
            }
            let from = start + already;
            let r = http
                .download_client
                .get(url)
                .header(reqwest::header::RANGE, format!("bytes={from}-{end}"))
                .send()
                .await
                .map_err(|e| transport_error("download", e))?;
            if r.status() != StatusCode::PARTIAL_CONTENT {
                let (status, headers) = (r.status(), r.headers().clone());
                if status.is_success() {
                    return Err(BackendError::new(
                        ErrorKind::Fatal,
                        format!("download: HTTP {status} to a range request"),
                    ));
                }
                return Err(status_error("download", status, &headers, &r.text().await.unwrap_or_default()));
            }
            wire::range_answer(content_range(&r), r.content_length(), from, end, total).map_err(answer_error)?;
            match read_body(r, want - already).await {
                Ok(bytes) => {
                    got.lock().unwrap().extend_from_slice(&bytes);
                    Ok(())
                }
                Err((partial, e)) => {
                    got.lock().unwrap().extend_from_slice(&partial);
                    Err(e)
                }
            }
        }
    })
    .await?;
    Ok(got.into_inner().unwrap().freeze())
}

/// Exactly `len` bytes of a body, or what arrived before it broke off, with the error.
async fn read_body(mut r: reqwest::Response, len: u64) -> Result<Bytes, (Bytes, BackendError)> {
    let mut buf = BytesMut::with_capacity(len as usize);
    loop {
        match r.chunk().await {
            Ok(Some(c)) => {
                if buf.len() as u64 + c.len() as u64 > len {
                    return Err((
                        Bytes::new(),
                        BackendError::new(ErrorKind::Fatal, "download: more bytes than asked for"),
                    ));
                }
                buf.extend_from_slice(&c);
            }
            Ok(None) => break,
            Err(e) => return Err((buf.freeze(), transport_error("download", e))),
        }
    }
    if (buf.len() as u64) < len {
        let got = buf.len();
        return Err((
            buf.freeze(),
            BackendError::new(ErrorKind::Transient, format!("download: body ended after {got} of {len} bytes")),
        ));
    }
    Ok(buf.freeze())
}

/// A `200` answer: pass it on as it arrives, then check its length. Only the time spent
/// waiting for the network counts against the deadline, not the time the reader takes.
async fn stream_whole(
    http: &Http,
    mut r: reqwest::Response,
    expected: Option<u64>,
    tx: &mpsc::Sender<Chunk>,
) -> Result<(), BackendError> {
    let deadline = http.tuning.range_deadline;
    let announced = r.content_length();
    let mut n = 0u64;
    let mut network = Duration::ZERO;
    loop {
        let started = Instant::now();
        let next = tokio::time::timeout(deadline.saturating_sub(network), r.chunk()).await;
        network += started.elapsed();
        match next {
            Err(_) => return Err(deadline_error(deadline)),
            Ok(Ok(Some(c))) => {
                n += c.len() as u64;
                if tx.send(Ok(c)).await.is_err() {
                    return Ok(());
                }
            }
            Ok(Ok(None)) => break,
            Ok(Err(e)) => return Err(transport_error("download", e)),
        }
    }
    for want in [announced, expected].into_iter().flatten() {
        if n != want {
            return Err(BackendError::new(ErrorKind::Transient, format!("download: received {n} of {want} bytes")));
        }
    }
    Ok(())
}

fn answer_error(e: AnswerError) -> BackendError {
    let kind = match e {
        AnswerError::Wrong(_) => ErrorKind::Fatal,
        AnswerError::Length(_) => ErrorKind::Transient,
    };
    BackendError::new(kind, format!("download: {e}"))
}

fn content_range(r: &reqwest::Response) -> Option<&str> {
    r.headers().get(reqwest::header::CONTENT_RANGE).map(|v| v.to_str().unwrap_or(""))
}

struct ChannelReader {
    rx: mpsc::Receiver<Chunk>,
    current: Bytes,
    task: tokio::task::JoinHandle<()>,
    /// After a failure every read fails the same way (never a clean end of file).
    failure: Option<(ErrorKind, String)>,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            if let Some((kind, message)) = &self.failure {
                return Err(BackendError::new(*kind, message.clone()).into_io());
            }
            match self.rx.blocking_recv() {
                Some(Ok(bytes)) => self.current = bytes,
                Some(Err(e)) => {
                    self.failure = Some((e.kind, e.message.clone()));
                    return Err(e.into_io());
                }
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

impl Drop for ChannelReader {
    fn drop(&mut self) {
        // Stop downloading what nobody will read.
        self.task.abort();
    }
}
