//! Azurite, the Azure Blob emulator (npm `azurite`), started once per test process.
//!
//! It is spawned from a thread that lives as long as the process, with `PR_SET_PDEATHSIG`, so
//! it goes away with the tests. Account SAS tokens are computed here the way Azure defines them
//! (HMAC-SHA256 over the string-to-sign with the account key). Containers, blobs read and put
//! back, and uncommitted blobs are reached here directly, past the product's client.

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const ACCOUNT: &str = "devstoreaccount1";
/// Azurite's well-known development key (public, documented by Microsoft).
pub const ACCOUNT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const SAS_VERSION: &str = "2022-11-02";

pub struct Azurite {
    pub port: u16,
    _dir: tempfile::TempDir,
}

pub fn node_modules() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/node/node_modules")
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The shared Azurite of this test process.
/// The shared Azurite of this test process; with `EXACT_CACHE_AZURITE_PORT` set, an Azurite
/// already listening there (the benchmark starts its own on a fixed port).
pub fn azurite() -> &'static Azurite {
    let _ = rustls::crypto::ring::default_provider().install_default();
    static AZURITE: OnceLock<Azurite> = OnceLock::new();
    AZURITE.get_or_init(|| {
        if let Some(port) = std::env::var("EXACT_CACHE_AZURITE_PORT").ok().and_then(|p| p.parse().ok()) {
            return Azurite { port, _dir: tempfile::tempdir().unwrap() };
        }
        let bin = node_modules().join(".bin/azurite-blob");
        assert!(bin.exists(), "{} is missing: run `npm ci` in tests/node (scripts/test does)", bin.display());
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let location = dir.path().to_owned();
        let (tx, rx) = std::sync::mpsc::channel();
        // The spawning thread must outlive every test: PDEATHSIG fires when *it* exits.
        std::thread::spawn(move || {
            let mut cmd = Command::new(bin);
            cmd.args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string(), "--location"])
                .arg(&location)
                .args(["--skipApiVersionCheck", "--loose", "--silent", "--disableTelemetry"])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            #[cfg(target_os = "linux")]
            unsafe {
                use std::os::unix::process::CommandExt;
                // SAFETY: prctl is async-signal-safe and touches only this child.
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    Ok(())
                });
            }
            let child = cmd.spawn().expect("start azurite");
            tx.send(()).unwrap();
            let _child = child;
            loop {
                std::thread::park();
            }
        });
        rx.recv().unwrap();
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(30), "azurite did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Azurite { port, _dir: dir }
    })
}

impl Azurite {
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}/{ACCOUNT}", self.port)
    }
}

/// A new container in the shared Azurite, its name made of `purpose`, this process and a number
/// no other call of this process gets (tests run at once; a free port number could repeat).
pub fn container(purpose: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("{purpose}-{}-{number}", std::process::id());
    let status = request(
        reqwest::Method::PUT,
        &format!("{}/{name}?restype=container&{}", azurite().base(), account_sas()),
        |put| put.header("content-length", "0"),
    )
    .0;
    assert!(status.is_success(), "create container: {status}");
    name
}

/// The URL of `blob` in `container`, signed with the account SAS.
pub fn blob_url(container: &str, blob: &str) -> String {
    format!("{}/{container}/{blob}?{}", azurite().base(), account_sas())
}

/// Flip a byte in the middle of `blob`, as a broken disk would: its bytes read and put back
/// (Put Blob) with its metadata.
pub fn corrupt_blob(container: &str, blob: &str) {
    let url = blob_url(container, blob);
    let (status, headers, mut bytes) = request(reqwest::Method::GET, &url, |get| get);
    assert!(status.is_success(), "get {blob}: {status}");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    let metadata: Vec<_> = headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("x-ms-meta-"))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    let (status, ..) = request(reqwest::Method::PUT, &url, |put| {
        metadata.into_iter().fold(put.header("x-ms-blob-type", "BlockBlob"), |put, (n, v)| put.header(n, v)).body(bytes)
    });
    assert!(status.is_success(), "put {blob} back: {status}");
}

/// Change the metadata of `blob` (`x-ms-meta-<name>` → value) with `edit`, through Set Blob
/// Metadata, which replaces all of it and keeps the blob's bytes.
pub fn edit_metadata(container: &str, blob: &str, edit: impl FnOnce(&mut Vec<(String, String)>)) {
    let url = blob_url(container, blob);
    let (status, headers, _) = request(reqwest::Method::HEAD, &url, |head| head);
    assert!(status.is_success(), "properties of {blob}: {status}");
    let mut metadata: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(name, value)| {
            let name = name.as_str().strip_prefix("x-ms-meta-")?;
            Some((name.to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect();
    edit(&mut metadata);
    let (status, ..) = request(reqwest::Method::PUT, &format!("{url}&comp=metadata"), |put| {
        metadata.iter().fold(put.header("content-length", "0"), |put, (n, v)| put.header(format!("x-ms-meta-{n}"), v))
    });
    assert!(status.is_success(), "set the metadata of {blob}: {status}");
}

/// Blob names in `container` that have staged blocks and no committed blob: uploads stopped
/// before their Put Block List. (Blocks staged on the name of a committed blob do not show; a
/// commit discards them, or Azure after a week.)
pub fn uncommitted_blobs(container: &str) -> Vec<String> {
    let names = |include: &str| {
        let url = format!("{}/{container}?restype=container&comp=list{include}&{}", azurite().base(), account_sas());
        let (status, _, body) = request(reqwest::Method::GET, &url, |get| get);
        assert!(status.is_success(), "list {container}: {status}");
        let body = String::from_utf8(body).unwrap();
        body.split("<Name>").skip(1).map(|n| n.split("</Name>").next().unwrap().to_owned()).collect::<Vec<_>>()
    };
    let committed = names("");
    names("&include=uncommittedblobs").into_iter().filter(|n| !committed.contains(n)).collect()
}

/// One request to Azurite, as `build` completes it: the answer's status, headers and body.
fn request(
    method: reqwest::Method,
    url: &str,
    build: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
) -> (reqwest::StatusCode, reqwest::header::HeaderMap, Vec<u8>) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let answer = build(reqwest::Client::new().request(method, url)).send().await.unwrap();
        let (status, headers) = (answer.status(), answer.headers().clone());
        (status, headers, answer.bytes().await.unwrap().to_vec())
    })
}

const SAS_FIELDS: (&str, &str, &str, &str, &str) = ("rwdlac", "b", "sco", "2099-01-01T00:00:00Z", "https,http");

/// The signature of [`account_sas`] (base64, not URL-encoded): it must never be printed.
pub fn account_sas_signature() -> String {
    sas_signature(SAS_FIELDS.0)
}

/// The signature of an account SAS with the permissions `sp`.
fn sas_signature(sp: &str) -> String {
    let (_, ss, srt, se, spr) = SAS_FIELDS;
    let to_sign = format!("{ACCOUNT}\n{sp}\n{ss}\n{srt}\n\n{se}\n\n{spr}\n{SAS_VERSION}\n\n");
    let key = base64::engine::general_purpose::STANDARD.decode(ACCOUNT_KEY).unwrap();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(to_sign.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// An account SAS valid for every blob operation until 2099.
pub fn account_sas() -> String {
    account_sas_for(SAS_FIELDS.0)
}

/// An account SAS that may only read and list (`sp=rl`): what a job that must not write gets.
pub fn read_only_account_sas() -> String {
    account_sas_for("rl")
}

fn account_sas_for(sp: &str) -> String {
    let (_, ss, srt, se, spr) = SAS_FIELDS;
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let sig = sas_signature(sp);
    format!("sv={SAS_VERSION}&ss={ss}&srt={srt}&sp={sp}&se={}&spr={}&sig={}", enc(se), enc(spr), enc(&sig))
}
