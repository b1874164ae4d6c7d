//! Downloads as a plain `Read`: ranged GETs run several at a time on the HTTP runtime and are
//! handed to the reader in order, so the unpacker starts while later ranges are in flight, and
//! memory stays at (ranges in flight + 2) × range size.
//!
//! The first answer gives the total (a `206`) or is streamed whole (a `200`). Each range is
//! retried from where it broke off; the whole download has one deadline of network time
//! (`Clock`). The byte count must equal the size the server announced; a `200` without
//! `Content-Length` is the one answer whose end is checked only by the unpacker. No auth header
//! is ever sent: these URLs are signed or secret by themselves.

use super::http::{Check, Http, send, transport_error};
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

/// A reader over `url`'s bytes. A download that fails, or brings fewer or more bytes than the
/// server announced, ends in an error that wraps a [`BackendError`], never in a clean end.
pub fn open(http: Arc<Http>, url: String) -> Box<dyn Read + Send> {
    let (tx, rx) = mpsc::channel::<Chunk>(2);
    let task_http = Arc::clone(&http);
    let task = http.rt().spawn(async move {
        if let Err(e) = run(&task_http, &url, &tx).await {
            let _ = tx.send(Err(e)).await;
        }
    });
    Box::new(ChannelReader { rx, current: Bytes::new(), task, failure: None })
}

/// At most the first `len` bytes of `url`, with one ranged GET (retried).
pub fn read_prefix(http: &Http, url: &str, len: u64) -> Result<Vec<u8>, BackendError> {
    let fetch = async {
        http.retry(|| async {
            let range = format!("bytes=0-{}", len.saturating_sub(1));
            let mut r = match get_range(http, "read", url, range, &[StatusCode::OK, StatusCode::PARTIAL_CONTENT]).await
            {
                Err(e) if e.status == Some(StatusCode::RANGE_NOT_SATISFIABLE.as_u16()) => return Ok(Vec::new()),
                answer => answer?,
            };
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
    http.rt().block_on(async { Clock::new(http).net(fetch).await })
}

/// What [`open_range`] gives: the bytes asked for, or the whole blob from its start (a server
/// that answers a range request with `200`).
pub enum RangeRead {
    Range(Box<dyn Read + Send>),
    Whole(Box<dyn Read + Send>),
}

/// The bytes `range` of `url` (a pack's range), streamed: one ranged GET, its start retried; a
/// `206` may end early (the caller finds it short), a `200` is the whole blob, a `416` no bytes.
pub fn open_range(http: &Arc<Http>, url: &str, range: std::ops::Range<u64>) -> Result<RangeRead, BackendError> {
    let empty = || RangeRead::Range(Box::new(io::empty()));
    if range.is_empty() {
        return Ok(empty());
    }
    let first = http.rt().block_on(http.retry(|| async {
        let header = format!("bytes={}-{}", range.start, range.end - 1);
        let expected = [StatusCode::OK, StatusCode::PARTIAL_CONTENT];
        match get_range(http, "read a pack", url, header, &expected).await {
            Err(e) if e.status == Some(StatusCode::RANGE_NOT_SATISFIABLE.as_u16()) => Ok(None),
            answer => answer.map(Some),
        }
    }))?;
    let Some(response) = first else { return Ok(empty()) };
    if response.status() == StatusCode::OK {
        let announced = response.content_length();
        return Ok(RangeRead::Whole(stream_body(Arc::clone(http), response, announced)));
    }
    let announced = match content_range(&response).and_then(parse_content_range) {
        Some((start, last, _)) if start == range.start && last >= start && last < range.end => last - start + 1,
        _ => {
            let message = "read a pack: a `206` answer for other bytes than asked".to_owned();
            return Err(BackendError::new(ErrorKind::Fatal, message).with_status(206));
        }
    };
    Ok(RangeRead::Range(stream_body(Arc::clone(http), response, Some(announced))))
}

/// `bytes FIRST-LAST/TOTAL` (the total may be `*`).
fn parse_content_range(value: &str) -> Option<(u64, u64, Option<u64>)> {
    let (span, total) = value.strip_prefix("bytes ")?.split_once('/')?;
    let (first, last) = span.split_once('-')?;
    Some((first.trim().parse().ok()?, last.trim().parse().ok()?, total.trim().parse().ok()))
}

/// The body of `response` as a reader, fed by a task on the HTTP runtime; exactly `announced`
/// bytes when known (fewer is an error, more too).
fn stream_body(http: Arc<Http>, mut response: reqwest::Response, announced: Option<u64>) -> Box<dyn Read + Send> {
    let (tx, rx) = mpsc::channel::<Chunk>(2);
    let task = http.rt().spawn(async move {
        let mut n = 0u64;
        let failed = loop {
            match response.chunk().await {
                Ok(Some(c)) => {
                    n += c.len() as u64;
                    if announced.is_some_and(|want| n > want) {
                        break Some(BackendError::new(ErrorKind::Fatal, "read a pack: more bytes than announced"));
                    }
                    if tx.send(Ok(c)).await.is_err() {
                        return;
                    }
                }
                Ok(None) => match announced {
                    Some(want) if n != want => {
                        let message = format!("read a pack: received {n} of {want} bytes");
                        break Some(BackendError::new(ErrorKind::Transient, message));
                    }
                    _ => break None,
                },
                Err(e) => break Some(transport_error("read a pack", e)),
            }
        };
        if let Some(e) = failed {
            let _ = tx.send(Err(e)).await;
        }
    });
    Box::new(ChannelReader { rx, current: Bytes::new(), task, failure: None })
}

/// One ranged GET of `url`: the answer, if its status is one of `expected`.
async fn get_range(
    http: &Http,
    what: &str,
    url: &str,
    range: String,
    expected: &[StatusCode],
) -> Result<reqwest::Response, BackendError> {
    let request = http.download_client.get(url).header(reqwest::header::RANGE, range);
    let r = send(what, request).await?.check(what).await?;
    let status = r.status();
    if expected.contains(&status) {
        return Ok(r);
    }
    let message = format!("{what}: HTTP {status} to a range request");
    Err(BackendError::new(ErrorKind::Fatal, message).with_status(status.as_u16()))
}

fn deadline_error(deadline: Duration) -> BackendError {
    BackendError::new(
        ErrorKind::Timeout,
        format!("the download did not finish within {}", crate::units::duration(deadline)),
    )
}

/// The deadline of one download (`SEGMENT_DOWNLOAD_TIMEOUT_MINS`): network time only, summed
/// over every range and retry, so a slow unpacker never counts against it.
struct Clock {
    deadline: Duration,
    network: Duration,
}

impl Clock {
    fn new(http: &Http) -> Self {
        Self { deadline: http.tuning.download_deadline, network: Duration::ZERO }
    }

    /// `future` within what is left of the deadline; the time it takes counts.
    async fn net<T>(&mut self, future: impl Future<Output = Result<T, BackendError>>) -> Result<T, BackendError> {
        let started = Instant::now();
        let result = tokio::time::timeout(self.deadline.saturating_sub(self.network), future).await;
        self.network += started.elapsed();
        result.unwrap_or_else(|_| Err(deadline_error(self.deadline)))
    }
}

async fn run(http: &Http, url: &str, tx: &mpsc::Sender<Chunk>) -> Result<(), BackendError> {
    let mut clock = Clock::new(http);
    let chunk = http.tuning.download_chunk;
    let first_end = chunk - 1;
    let response = clock
        .net(http.retry(|| async {
            let range = format!("bytes=0-{first_end}");
            get_range(http, "download", url, range, &[StatusCode::OK, StatusCode::PARTIAL_CONTENT]).await
        }))
        .await?;

    if response.status() == StatusCode::OK {
        return stream_whole(&mut clock, response, tx).await;
    }
    // The first answer may be shorter than asked for: the blob is smaller than one range.
    let (FirstAnswer { total, len }, cut_off) =
        match wire::first_answer(content_range(&response), response.content_length(), first_end) {
            Ok(first) => (first, false),
            // Cut off: the range itself is fine, its body is not.
            Err(AnswerError::Length(_)) => {
                (wire::first_answer(content_range(&response), None, first_end).map_err(answer_error)?, true)
            }
            Err(e) => return Err(answer_error(e)),
        };
    let body = async {
        if cut_off {
            return Err(BackendError::new(ErrorKind::Transient, "download: a cut-off first range"));
        }
        read_body(response, len).await.map_err(|(_, e)| e)
    };
    let first = match clock.net(body).await {
        Ok(bytes) => bytes,
        // Broken off: fetch the first range again as any other (resuming is not worth it here).
        Err(e)
            if e.kind == ErrorKind::Transient || (e.kind == ErrorKind::Timeout && clock.network < clock.deadline) =>
        {
            clock.net(fetch_range(http, url, 0, len - 1, total)).await?
        }
        Err(e) => return Err(e),
    };
    if tx.send(Ok(first)).await.is_err() {
        return Ok(());
    }
    let mut ranges = futures_util::stream::iter(wire::later_ranges(len, total, chunk))
        .map(|(start, last)| fetch_range(http, url, start, last, total))
        .buffered(http.tuning.download_concurrency);
    // The ranges in flight advance only while the next one is awaited: that is network time.
    while let Some(bytes) = clock.net(async { Ok(ranges.next().await) }).await? {
        if tx.send(Ok(bytes?)).await.is_err() {
            return Ok(()); // the reader went away (the unpacker failed): stop downloading
        }
    }
    Ok(())
}

/// `start..=end` of a blob of `total` bytes, retried; a retry asks only for what is still missing.
async fn fetch_range(http: &Http, url: &str, start: u64, end: u64, total: u64) -> Result<Bytes, BackendError> {
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
            let range = format!("bytes={from}-{end}");
            let r = get_range(http, "download", url, range, &[StatusCode::PARTIAL_CONTENT]).await?;
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

/// A `200` answer: pass it on as it arrives, then check its length against `Content-Length`.
async fn stream_whole(
    clock: &mut Clock,
    mut r: reqwest::Response,
    tx: &mpsc::Sender<Chunk>,
) -> Result<(), BackendError> {
    let announced = r.content_length();
    let mut n = 0u64;
    while let Some(c) = clock.net(async { r.chunk().await.map_err(|e| transport_error("download", e)) }).await? {
        n += c.len() as u64;
        if tx.send(Ok(c)).await.is_err() {
            return Ok(());
        }
    }
    match announced {
        Some(want) if n != want => {
            Err(BackendError::new(ErrorKind::Transient, format!("download: received {n} of {want} bytes")))
        }
        _ => Ok(()),
    }
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
    /// After a failure every read fails with it, whole (never a clean end of file).
    failure: Option<BackendError>,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            if let Some(failure) = &self.failure {
                return Err(failure.clone().into_io());
            }
            match self.rx.blocking_recv() {
                Some(Ok(bytes)) => self.current = bytes,
                Some(Err(e)) => {
                    self.failure = Some(e.clone());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;
    use crate::runner::SecretSink;
    use std::io::Write;
    use std::net::TcpListener;

    /// The raw answer a test server gives to a request for `range` (`None`: no `Range` header).
    type Answer = fn(Option<(u64, u64)>) -> Vec<u8>;

    /// An HTTP/1.1 server on 127.0.0.1 that answers every request with `answer` and closes.
    fn serve(answer: Answer) -> String {
        serve_dripping(answer, Duration::ZERO)
    }

    /// [`serve`], each answer sent in five pieces `pause` apart.
    fn serve_dripping(answer: Answer, pause: Duration) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/blob", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut request = Vec::new();
                let mut byte = [0u8; 1];
                while !request.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    request.push(byte[0]);
                }
                let range = String::from_utf8_lossy(&request).lines().find_map(|line| {
                    let (first, last) = line.strip_prefix("range: bytes=")?.split_once('-')?;
                    Some((first.parse().ok()?, last.parse().ok()?))
                });
                let answer = answer(range);
                if pause.is_zero() {
                    let _ = stream.write_all(&answer);
                    continue;
                }
                for (i, piece) in answer.chunks(answer.len().div_ceil(5)).enumerate() {
                    if i > 0 {
                        std::thread::sleep(pause);
                    }
                    let _ = stream.write_all(piece).and_then(|()| stream.flush());
                }
            }
        });
        url
    }

    fn blob() -> Vec<u8> {
        (0..100_000u32).map(|i| (i % 251) as u8).collect()
    }

    /// A `206` for `first..=last` of [`blob`] announcing `total`, from a server that has only
    /// the first `have` bytes. Chunked, so nothing but the range says how long the body should be.
    fn ranged(first: u64, last: u64, total: u64, have: u64) -> Vec<u8> {
        let last = last.min(total - 1);
        let end = (last + 1).min(have).max(first);
        let body = &blob()[first as usize..end as usize];
        let mut out = format!(
            "HTTP/1.1 206 Partial Content\r\ncontent-range: bytes {first}-{last}/{total}\r\n\
             transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )
        .into_bytes();
        if !body.is_empty() {
            out.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
            out.extend_from_slice(body);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    }

    fn download(url: String) -> Result<Vec<u8>, BackendError> {
        download_with(url, &[])
    }

    fn download_with(url: String, extra: &[(&str, &str)]) -> Result<Vec<u8>, BackendError> {
        let env = Env::from_pairs(
            [
                ("EXACT_CACHE_ATTEMPTS", "2"),
                ("EXACT_CACHE_RETRY_BASE_MS", "1"),
                ("EXACT_CACHE_DOWNLOAD_CHUNK_MIB", "0.0625"),
            ]
            .into_iter()
            .chain(extra.iter().copied()),
        );
        let http = Arc::new(Http::new(&env, SecretSink::detached()).unwrap());
        let mut bytes = Vec::new();
        match open(http, url).read_to_end(&mut bytes) {
            Ok(_) => Ok(bytes),
            Err(e) => Err(BackendError::from_io(e).expect("a backend error")),
        }
    }

    fn assert_cut_short(e: BackendError) {
        assert_eq!(e.kind, ErrorKind::Transient);
        assert!(e.message.starts_with("download: body ended after "), "{}", e.message);
    }

    #[test]
    fn ranged_answers_that_bring_the_announced_total_are_joined() {
        let url = serve(|range| {
            let (first, last) = range.unwrap();
            ranged(first, last, 100_000, 100_000)
        });
        assert_eq!(download(url).unwrap(), blob());
    }

    #[test]
    fn ranged_answers_short_of_the_announced_total_are_an_error_not_the_end() {
        // The only range there is (the blob is smaller than one range) ends early.
        let url = serve(|range| {
            let (first, last) = range.unwrap();
            ranged(first, last, 100, 60)
        });
        assert_cut_short(download(url).unwrap_err());
        // A later range ends early.
        let url = serve(|range| {
            let (first, last) = range.unwrap();
            ranged(first, last, 100_000, 70_000)
        });
        assert_cut_short(download(url).unwrap_err());
    }

    #[test]
    fn a_whole_answer_shorter_than_its_length_is_an_error_not_the_end() {
        let url = serve(|_| {
            let mut out = b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\nconnection: close\r\n\r\n".to_vec();
            out.extend_from_slice(&blob()[..60_000]);
            out
        });
        assert_eq!(download(url).unwrap_err().kind, ErrorKind::Transient);
    }

    #[test]
    fn a_refusal_comes_out_of_the_reader_with_its_kind_and_status() {
        let url = serve(|_| {
            let body = "<?xml version=\"1.0\"?><Error><Code>AuthenticationFailed</Code></Error>";
            format!("HTTP/1.1 403 Forbidden\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len())
                .into_bytes()
        });
        let e = download(url).unwrap_err();
        assert_eq!((e.kind, e.status), (ErrorKind::Forbidden, Some(403)));
        assert_eq!(e.message, "download: HTTP 403: AuthenticationFailed");
        // A connection that closes without an answer: the transport error's source survives too.
        let e = download(serve(|_| Vec::new())).unwrap_err();
        assert_eq!((e.kind, e.status, e.message.as_str()), (ErrorKind::Transient, None, "download: connection failed"));
        let source = std::error::Error::source(&e).expect("the source survives the reader");
        assert!(source.downcast_ref::<reqwest::Error>().is_some(), "{source:?}");
    }

    #[test]
    fn a_prefix_of_an_empty_entry_is_empty() {
        let url =
            serve(|_| b"HTTP/1.1 416 Range Not Satisfiable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec());
        let http = Http::new(&Env::default(), SecretSink::detached()).unwrap();
        assert_eq!(read_prefix(&http, &url, 100).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn the_deadline_covers_the_whole_download_not_each_range() {
        // Two ranges, each dripped over 0.6 s: either is within the 1 s deadline, both are not.
        let url = serve_dripping(
            |range| {
                let (first, last) = range.unwrap();
                ranged(first, last, 100_000, 100_000)
            },
            Duration::from_millis(150),
        );
        let started = Instant::now();
        let slow = [("EXACT_CACHE_DOWNLOAD_DEADLINE_SECONDS", "1"), ("EXACT_CACHE_DOWNLOAD_CONCURRENCY", "1")];
        let e = download_with(url.clone(), &slow).expect_err("the whole download takes 1.2 s");
        assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Timeout, "the download did not finish within 1.0 s"));
        assert!(started.elapsed() < Duration::from_millis(1900), "{:?}", started.elapsed());
        // With room for both, the same server is fine.
        let e = download_with(url, &[("EXACT_CACHE_DOWNLOAD_DEADLINE_SECONDS", "5")]);
        assert_eq!(e.unwrap(), blob());
    }
}
