//! A real S3 server for the tests: `s3s-fs` (a filesystem-backed S3 implementation that checks
//! SigV4 signatures), installed by `scripts/test` into `.tools/`, one process per test on a free
//! port with its own directory, stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ACCESS_KEY: &str = "AKIAEXACTCACHETEST01";
pub const SECRET_KEY: &str = "s3-secret-key-for-tests-0123456789abcdef";
pub const BUCKET: &str = "ci-cache";

pub struct S3Server {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Option<Child>,
}

fn s3s_fs() -> PathBuf {
    let binary = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/s3s-fs");
    assert!(binary.exists(), "{} is missing: scripts/test installs it (cargo install s3s-fs)", binary.display());
    binary
}

impl S3Server {
    /// A server with an empty bucket [`BUCKET`].
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(BUCKET)).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut server = Self { dir, port, child: None };
        server.restart();
        server
    }

    /// Start (again) on the same port and directory.
    pub fn restart(&mut self) {
        let child = Command::new(s3s_fs())
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(20), "s3s-fs did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stop the server at once (a crash, as far as clients can tell).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The credentials, as the AWS tools read them.
    pub fn env(&self) -> Vec<(String, String)> {
        credentials()
    }

    /// The inputs of a step that uses this server, with entries under `ci/`.
    pub fn inputs(&self) -> Vec<(&'static str, String)> {
        self.inputs_at("ci")
    }

    /// The inputs of a step that uses this server, with entries under `<prefix>/`.
    pub fn inputs_at(&self, prefix: &str) -> Vec<(&'static str, String)> {
        vec![
            ("backend", "s3".into()),
            ("s3-bucket", BUCKET.into()),
            ("s3-endpoint", self.endpoint()),
            ("s3-prefix", prefix.into()),
        ]
    }

    /// Every stored object (files under the bucket's directory), as paths inside the bucket.
    pub fn objects(&self) -> Vec<PathBuf> {
        let bucket = self.dir.path().join(BUCKET);
        walkdir::WalkDir::new(&bucket)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
            .map(|e| e.path().strip_prefix(&bucket).unwrap().to_owned())
            .collect()
    }

    /// The file holding an object's bytes.
    pub fn object_file(&self, object: &Path) -> PathBuf {
        self.dir.path().join(BUCKET).join(object)
    }

    /// Change the user metadata (`x-amz-meta-<name>`) of `object` with `edit`, where s3s-fs
    /// keeps it: `.bucket-<name>.object-<name>.metadata.json` (names in unpadded URL-safe
    /// base64) beside the bucket.
    pub fn edit_metadata(&self, object: &Path, edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
        use base64::Engine;
        let encode = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let name = format!(".bucket-{}.object-{}.metadata.json", encode(BUCKET), encode(&object.to_string_lossy()));
        let file = self.dir.path().join(name);
        let text = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let mut attributes: serde_json::Value = serde_json::from_slice(&text).unwrap();
        let metadata = attributes["user_metadata"].as_object_mut().expect("the object has user metadata");
        edit(metadata);
        std::fs::write(&file, serde_json::to_vec(&attributes).unwrap()).unwrap();
    }

    /// The parts of multipart uploads neither completed nor aborted.
    pub fn unfinished_uploads(&self) -> Vec<String> {
        std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".upload_id-"))
            .collect()
    }
}

/// The credentials every S3 server and double here accepts, as the AWS tools read them.
pub fn credentials() -> Vec<(String, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID".into(), ACCESS_KEY.into()),
        ("AWS_SECRET_ACCESS_KEY".into(), SECRET_KEY.into()),
        ("AWS_REGION".into(), "us-east-1".into()),
    ]
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A hostile S3 endpoint: `HEAD` finds nothing (404), so a lookup goes on to list the bucket;
/// every other request is answered `400` with `n` characters of padding, then the request's
/// target, signed query string included (`X-Amz-Security-Token`, `X-Amz-Signature`), where `n`
/// is the number in the listing's prefix (`s3-prefix: p<n>`).
pub struct EchoingS3 {
    pub port: u16,
}

impl EchoingS3 {
    pub fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || echo(stream));
            }
        });
        Self { port }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn echo(mut stream: std::net::TcpStream) {
    use std::io::{Read, Write};
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut request = head.lines().next().unwrap_or_default().split(' ');
    let (method, target) = (request.next().unwrap_or_default(), request.next().unwrap_or_default());
    let empty = "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>";
    let answer = if method == "HEAD" {
        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned()
    } else if target.contains(".g&") {
        // The listing of a key's later generations: none, so the restore goes on to the
        // bucket check, whose signed request (with the short prefix) is echoed.
        format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{empty}", empty.len())
    } else {
        let digits: String =
            target.split("prefix=p").nth(1).unwrap_or_default().chars().take_while(char::is_ascii_digit).collect();
        let body = format!("{}{target}", "x".repeat(digits.parse().unwrap_or(0)));
        format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let _ = stream.write_all(answer.as_bytes());
}

/// One request a [`RacedS3`] received: method, target (path and query) and its
/// `If-None-Match` header.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub if_none_match: Option<String>,
}

/// An S3 endpoint where another writer wins every race: `HEAD` finds no object and the bucket
/// lists empty, so a save starts its multipart upload; the parts are taken; and the object
/// appears before the completion arrives. The completion is refused with `refusal` (`412`, as
/// S3 answers a failed `If-None-Match: *`, or `409 ConditionalRequestConflict`, its answer while
/// another completion is in flight) only when it carries `If-None-Match: *` — without it, the
/// completion succeeds, overwriting the other writer's entry as S3 would. Every request is
/// recorded. Signatures are not checked (s3s-fs does that in the other tests).
pub struct RacedS3 {
    pub port: u16,
    pub requests: std::sync::Arc<std::sync::Mutex<Vec<Request>>>,
}

impl RacedS3 {
    pub fn start(refusal: u16) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = std::sync::Arc::default();
        let recorded = std::sync::Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let recorded = std::sync::Arc::clone(&recorded);
                std::thread::spawn(move || race(stream, refusal, &recorded));
            }
        });
        Self { port, requests }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

/// Answer one request (its body read whole first) as [`RacedS3`] does, and close.
fn race(mut stream: std::net::TcpStream, refusal: u16, recorded: &std::sync::Mutex<Vec<Request>>) {
    use std::io::{Read, Write};
    let mut received = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    let head_end = loop {
        if let Some(at) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => received.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&received[..head_end]).into_owned();
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_owned())
        })
    };
    let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    while received.len() < head_end + length {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => received.extend_from_slice(&buf[..n]),
        }
    }
    let mut first = head.lines().next().unwrap_or_default().split(' ');
    let (method, target) = (first.next().unwrap_or_default().to_owned(), first.next().unwrap_or_default().to_owned());
    let if_none_match = header("if-none-match");
    recorded.lock().unwrap().push(Request { method: method.clone(), target: target.clone(), if_none_match });
    let query = target.split_once('?').map_or("", |(_, q)| q);
    let has = |name: &str| query.split('&').any(|pair| pair == name || pair.starts_with(&format!("{name}=")));
    let xml = |status: &str, body: &str| (status.to_owned(), "", body.to_owned());
    let (status, extra, body) = match method.as_str() {
        "HEAD" => ("404 Not Found".to_owned(), "", String::new()),
        "GET" if has("list-type") => {
            xml("200 OK", "<ListBucketResult><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>")
        }
        "POST" if has("uploads") => xml(
            "200 OK",
            "<InitiateMultipartUploadResult><Bucket>b</Bucket><UploadId>raced-1</UploadId></InitiateMultipartUploadResult>",
        ),
        "PUT" if has("partNumber") => ("200 OK".to_owned(), "etag: \"part-etag\"\r\n", String::new()),
        "POST" if has("uploadId") && header("if-none-match").as_deref() == Some("*") => match refusal {
            412 => xml(
                "412 Precondition Failed",
                "<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified \
                 did not hold</Message><Condition>If-None-Match</Condition></Error>",
            ),
            _ => xml(
                "409 Conflict",
                "<Error><Code>ConditionalRequestConflict</Code><Message>A conflicting conditional operation is \
                 currently in progress against this resource.</Message></Error>",
            ),
        },
        "POST" if has("uploadId") => {
            xml("200 OK", "<CompleteMultipartUploadResult><ETag>x</ETag></CompleteMultipartUploadResult>")
        }
        "DELETE" => ("204 No Content".to_owned(), "", String::new()),
        _ => xml("400 Bad Request", "<Error><Code>NotSupportedByTheDouble</Code></Error>"),
    };
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/xml\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes());
}
