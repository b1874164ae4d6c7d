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
        vec![
            ("AWS_ACCESS_KEY_ID".into(), ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY".into(), SECRET_KEY.into()),
            ("AWS_REGION".into(), "us-east-1".into()),
        ]
    }

    /// The inputs of a step that uses this server.
    pub fn inputs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("backend", "s3".into()),
            ("s3-bucket", BUCKET.into()),
            ("s3-endpoint", self.endpoint()),
            ("s3-prefix", "ci".into()),
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
    let answer = if method == "HEAD" {
        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned()
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
