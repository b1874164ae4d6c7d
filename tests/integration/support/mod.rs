//! What the integration tests share: files and trees, the binary run as an Actions step, hand-made
//! archives and manifest lines; the local cache services (`services`) and nektos/act (`act`).

use exact_cache::manifest::{EntryKind, ManifestEntry};
use sha2::Digest;
use std::collections::BTreeMap;
use std::path::Path;

pub mod act;
pub mod services;

pub fn write(path: &Path, data: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, data).unwrap();
}

/// `len` pseudo-random, barely compressible bytes (xorshift64 from `seed`).
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `words` little-endian `u32`s counting up from 0: compressible, yet no two words alike.
pub fn counting(words: u32) -> Vec<u8> {
    (0..words).flat_map(u32::to_le_bytes).collect()
}

/// `size` bytes from /dev/urandom in a new file `path`, streamed (sizes up to gigabytes).
pub fn random_file(path: &Path, size: u64) {
    use std::io::{Read, Write};
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut urandom = std::fs::File::open("/dev/urandom").unwrap().take(size);
    std::io::copy(&mut urandom, &mut f).unwrap();
    f.flush().unwrap();
}

/// What a generator leaves in `ws/out`: a model of `words` words and its expected output.
pub fn generate_model(ws: &Path, words: u32) {
    write(&ws.join("out/model.pth"), &counting(words));
    write(&ws.join("out/x.expected"), b"expected");
}

pub fn set_exec(path: &Path, exec: bool) {
    use std::os::unix::fs::PermissionsExt;
    let mode = if exec { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// What a tree holds: relative path → kind, mode and content (or link target).
pub fn snapshot(root: &Path) -> std::collections::BTreeMap<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = std::collections::BTreeMap::new();
    if std::fs::symlink_metadata(root).is_err() {
        return out;
    }
    for entry in walkdir::WalkDir::new(root).sort_by_file_name() {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let meta = entry.path().symlink_metadata().unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        let value = if meta.file_type().is_symlink() {
            format!("symlink -> {}", std::fs::read_link(entry.path()).unwrap().display())
        } else if meta.is_dir() {
            format!("dir {mode:o}")
        } else {
            use sha2::Digest;
            let mut hasher = sha2::Sha256::new();
            let mut file = std::fs::File::open(entry.path()).unwrap();
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = std::io::Read::read(&mut file, &mut buf).unwrap();
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
            }
            let digest = hex::encode(hasher.finalize());
            format!("file {mode:o} {} {digest}", meta.len())
        };
        out.insert(rel, value);
    }
    out
}

/// Raw tar bytes, written header by header so tests can make archives no honest packer would.
#[derive(Default)]
pub struct TarBuilder {
    pub bytes: Vec<u8>,
}

impl TarBuilder {
    pub fn entry(&mut self, name: &str, kind: tar::EntryType, mode: u32, data: &[u8], link: Option<&str>) -> &mut Self {
        self.entry_with_size(name, kind, mode, data, link, data.len() as u64)
    }

    /// An entry whose header claims `size` bytes, whatever `data` holds.
    pub fn entry_with_size(
        &mut self,
        name: &str,
        kind: tar::EntryType,
        mode: u32,
        data: &[u8],
        link: Option<&str>,
        size: u64,
    ) -> &mut Self {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_mtime(1_700_000_000);
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(link) = link {
            h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        h.set_cksum();
        self.bytes.extend_from_slice(h.as_bytes());
        self.bytes.extend_from_slice(data);
        let pad = (512 - data.len() % 512) % 512;
        self.bytes.extend(std::iter::repeat_n(0u8, pad));
        self
    }

    pub fn file(&mut self, name: &str, data: &[u8]) -> &mut Self {
        self.entry(name, tar::EntryType::Regular, 0o644, data, None)
    }

    pub fn finish(&mut self) -> Vec<u8> {
        let mut bytes = std::mem::take(&mut self.bytes);
        bytes.extend(std::iter::repeat_n(0u8, 1024));
        bytes
    }
}

/// Runs its arguments and reports the child's peak RSS. A Python parent is used because
/// `ru_maxrss` survives fork and exec: a child forked straight from the (large) test process
/// would report the test's own memory.
pub const MEASURE_RSS: &str = "import resource, subprocess, sys\n\
    r = subprocess.run(sys.argv[1:])\n\
    sys.stderr.write('maxrss-kib=%d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n\
    sys.exit(r.returncode)";

/// The `exact-cache` binary run as an Actions step: fresh command files per run, inputs as
/// `INPUT_*`, state carried from the main step to the post step.
pub struct Step {
    pub dir: tempfile::TempDir,
    pub ws: std::path::PathBuf,
    pub cache: std::path::PathBuf,
    pub home: std::path::PathBuf,
    pub runner_temp: std::path::PathBuf,
    pub extra_env: Vec<(String, String)>,
    /// Run the binary under a Python parent that reports its peak RSS (`StepResult::peak_rss_mib`).
    pub measure: bool,
    /// Run the binary as the last argument of this command line (e.g. `setpriv …` to drop
    /// privileges); empty for none.
    pub wrapper: Vec<String>,
    runs: std::cell::Cell<usize>,
}

#[derive(Debug)]
pub struct StepResult {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub outputs: std::collections::BTreeMap<String, String>,
    pub state: std::collections::BTreeMap<String, String>,
    pub env: std::collections::BTreeMap<String, String>,
    pub summary: String,
    pub peak_rss_mib: Option<f64>,
}

impl StepResult {
    /// Everything a user or a log collector can read — the log without its `::add-mask::` lines
    /// (which is how values get masked), stderr, the summary and the outputs — to check that a
    /// secret appears nowhere.
    pub fn readable(&self) -> String {
        let log: Vec<&str> = self.stdout.lines().filter(|l| !l.starts_with("::add-mask::")).collect();
        let outputs: Vec<&String> = self.outputs.values().collect();
        format!("{}\n{}\n{}\n{outputs:?}", log.join("\n"), self.stderr, self.summary)
    }

    pub fn output(&self, name: &str) -> &str {
        self.outputs.get(name).map(String::as_str).unwrap_or_else(|| panic!("output `{name}` is unset: {self:#?}"))
    }
}

/// Held by the tests that write gigabytes, so that no two of them fill the disk at once (they were
/// separate test binaries, which run one after another).
pub fn one_disk_heavy_test_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static DISK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    DISK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The state a main step starts with: none (a post step gets the main step's `StepResult::state`).
pub const NO_STATE: &BTreeMap<String, String> = &BTreeMap::new();

pub fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_exact-cache")
}

/// Parse `name<<DELIM\nvalue\nDELIM\n` records.
pub fn parse_command_file(text: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let (name, delim) = line.split_once("<<").expect("heredoc record");
        let mut value = Vec::new();
        for l in lines.by_ref() {
            if l == delim {
                break;
            }
            value.push(l);
        }
        out.insert(name.to_owned(), value.join("\n"));
    }
    out
}

impl Step {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("work/repo/repo");
        let cache = dir.path().join("cache");
        let home = dir.path().join("home");
        let runner_temp = dir.path().join("runner-temp");
        for d in [&ws, &home, &runner_temp] {
            std::fs::create_dir_all(d).unwrap();
        }
        Self {
            dir,
            ws,
            cache,
            home,
            runner_temp,
            extra_env: Vec::new(),
            measure: false,
            wrapper: Vec::new(),
            runs: Default::default(),
        }
    }

    /// A step that reaches a cache service through `env` (`Services::v2_env` and the like),
    /// retrying 10 ms apart so that injected faults cost little time.
    pub fn against(env: Vec<(String, String)>) -> Self {
        let mut step = Self::new();
        step.extra_env = env;
        step.extra_env.push(("EXACT_CACHE_RETRY_BASE_MS".into(), "10".into()));
        step
    }

    /// Run `args` (e.g. `["restore"]`) with `inputs`; `state` is what a post step receives.
    pub fn run(
        &self,
        args: &[&str],
        inputs: &[(&str, &str)],
        state: &std::collections::BTreeMap<String, String>,
    ) -> StepResult {
        let n = self.runs.get();
        self.runs.set(n + 1);
        let files = self.dir.path().join(format!("run-{n}"));
        std::fs::create_dir_all(&files).unwrap();
        let (output, state_file, env_file, summary) =
            (files.join("output"), files.join("state"), files.join("env"), files.join("summary"));
        let mut cmd = if let Some((program, args)) = self.wrapper.split_first() {
            let mut c = std::process::Command::new(program);
            c.args(args).arg(exe());
            c
        } else if self.measure {
            let mut c = std::process::Command::new("python3");
            c.args(["-c", MEASURE_RSS, exe()]);
            c
        } else {
            std::process::Command::new(exe())
        };
        cmd.args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_WORKSPACE", &self.ws)
            .env("GITHUB_OUTPUT", &output)
            .env("GITHUB_STATE", &state_file)
            .env("GITHUB_ENV", &env_file)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("RUNNER_TEMP", &self.runner_temp)
            .env("HOME", &self.home)
            .env("EXACT_CACHE_DIR", &self.cache)
            .current_dir(&self.ws);
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        for (name, value) in inputs {
            cmd.env(format!("INPUT_{}", name.to_uppercase()), value);
        }
        for (name, value) in state {
            cmd.env(format!("STATE_{name}"), value);
        }
        let out = cmd.output().unwrap();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let peak_rss_mib = stderr
            .lines()
            .find_map(|l| l.strip_prefix("maxrss-kib="))
            .and_then(|k| k.parse::<f64>().ok())
            .map(|k| k / 1024.0);
        StepResult {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
            peak_rss_mib,
            outputs: parse_command_file(&read(&output)),
            state: parse_command_file(&read(&state_file)),
            env: parse_command_file(&read(&env_file)),
            summary: read(&summary),
        }
    }

    /// The single stored entry file of the local backend.
    pub fn stored_entry(&self) -> std::path::PathBuf {
        let entries: Vec<_> =
            std::fs::read_dir(self.cache.join("entries")).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(entries.len(), 1, "{entries:?}");
        entries.into_iter().next().unwrap()
    }
}

/// The manifest line of a file member `path` holding `data` (mode 644).
pub fn file_entry(path: &str, data: &[u8]) -> ManifestEntry {
    ManifestEntry {
        path: path.into(),
        kind: EntryKind::File,
        mode: 0o644,
        size: data.len() as u64,
        sha256: Some(hex::encode(sha2::Sha256::digest(data))),
        target: None,
    }
}

/// The manifest line of a directory member `path` (mode 755).
pub fn dir_entry(path: &str) -> ManifestEntry {
    ManifestEntry { path: path.into(), kind: EntryKind::Dir, mode: 0o755, size: 0, sha256: None, target: None }
}

/// The manifest line of a symlink member `path` pointing at `target` (mode 777).
pub fn link_entry(path: &str, target: &str) -> ManifestEntry {
    ManifestEntry {
        path: path.into(),
        kind: EntryKind::Symlink,
        mode: 0o777,
        size: 0,
        sha256: None,
        target: Some(target.into()),
    }
}
