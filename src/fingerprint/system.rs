//! Access to the machine for the fingerprint collectors: running tools, CPU and OS facts.
//!
//! Collectors depend on the [`System`] trait, so tests can change one fact at a time (a GPU
//! appears, glibc moves, a compiler is missing) and check that exactly that facet changes.
//! [`HostSystem`] is the real machine.

use super::hwcaps::HwCaps;
use crate::env::Env;
use std::collections::BTreeSet;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The rest of a test's fake [`System`] that only runs programs: no shell, a blank machine, no files.
#[cfg(test)]
macro_rules! runs_programs_only {
    () => {
        fn run_shell(
            &self,
            _: &str,
            _: &$crate::env::Env,
            _: &std::path::Path,
        ) -> std::io::Result<$crate::fingerprint::CommandOutput> {
            unreachable!("this fake runs no shell")
        }
        fn cpu(&self) -> $crate::fingerprint::CpuFacts {
            Default::default()
        }
        fn os(&self) -> $crate::fingerprint::OsFacts {
            Default::default()
        }
        fn libc(&self, _: &$crate::env::Env) -> Option<String> {
            None
        }
        fn is_file(&self, _: &std::path::Path) -> bool {
            false
        }
    };
}
#[cfg(test)]
pub(crate) use runs_programs_only;

/// What a finished command printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandOutput {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CommandOutput {
    /// `exit status 2: <first stderr line>`, for error messages.
    pub fn failure_detail(&self) -> String {
        let status = match self.code {
            Some(c) => format!("exit status {c}"),
            None => "killed by a signal or timed out".to_owned(),
        };
        match self.stderr.lines().map(str::trim).find(|l| !l.is_empty()) {
            Some(line) => format!("{status}: {line}"),
            None => status,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuFacts {
    /// `std::env::consts::ARCH` (`x86_64`, `aarch64`, …).
    pub arch: String,
    /// CPU feature flags, named as Linux's `/proc/cpuinfo` names them: its `flags` line on x86,
    /// its `Features` line on arm (never the other architecture's line).
    pub flags: BTreeSet<String>,
    /// On arm64 Linux, the hardware capability words, which name the features when present.
    pub hwcaps: Option<HwCaps>,
}

impl CpuFacts {
    /// The CPU's features by their Linux names: from the hardware capabilities where there are
    /// some (arm64 Linux), else `flags`.
    pub fn features(&self) -> BTreeSet<String> {
        match self.hwcaps {
            Some(caps) if self.arch == "aarch64" => caps.names(),
            _ => self.flags.clone(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OsFacts {
    /// `linux`, `macos`, `windows`, …
    pub family: String,
    /// Distribution id (`ubuntu`, `debian`, `macos`), when known.
    pub distro: Option<String>,
    /// Distribution or OS version (`24.04`, `14.5`), when known.
    pub version: Option<String>,
}

pub trait System {
    /// Run `program` with `args` (no shell) in `cwd` with exactly the variables of `env`.
    /// `Ok(None)` when the program does not exist.
    fn run(&self, program: &str, args: &[&str], env: &Env, cwd: &Path) -> io::Result<Option<CommandOutput>>;

    /// [`System::run`] within `limit` as well as the machine's own time bound.
    fn run_within(
        &self,
        program: &str,
        args: &[&str],
        env: &Env,
        cwd: &Path,
        limit: Duration,
    ) -> io::Result<Option<CommandOutput>> {
        let _ = limit;
        self.run(program, args, env, cwd)
    }

    /// Run a command line through the platform shell (`sh -c`, or `cmd /C` on Windows).
    fn run_shell(&self, command: &str, env: &Env, cwd: &Path) -> io::Result<CommandOutput>;

    fn cpu(&self) -> CpuFacts;

    fn os(&self) -> OsFacts;

    /// `glibc 2.36`, `musl 1.2.4`, or `None` where there is no such libc.
    fn libc(&self, env: &Env) -> Option<String>;

    /// Whether a regular file exists at `path`. No default: a fake machine says which files it
    /// has, rather than reading the real one.
    fn is_file(&self, path: &Path) -> bool;
}

/// The real machine.
#[derive(Clone, Debug)]
pub struct HostSystem {
    pub timeout: Duration,
}

impl Default for HostSystem {
    fn default() -> Self {
        Self { timeout: Duration::from_secs(120) }
    }
}

impl System for HostSystem {
    fn run(&self, program: &str, args: &[&str], env: &Env, cwd: &Path) -> io::Result<Option<CommandOutput>> {
        self.run_within(program, args, env, cwd, self.timeout)
    }

    fn run_within(
        &self,
        program: &str,
        args: &[&str],
        env: &Env,
        cwd: &Path,
        limit: Duration,
    ) -> io::Result<Option<CommandOutput>> {
        let Some(resolved) = find_program(program, env) else {
            return Ok(None);
        };
        let mut cmd = Command::new(resolved);
        cmd.args(args);
        match run_with_timeout(cmd, env, cwd, limit.min(self.timeout)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            other => other.map(Some),
        }
    }

    fn run_shell(&self, command: &str, env: &Env, cwd: &Path) -> io::Result<CommandOutput> {
        let (shell, flag) = if cfg!(windows) {
            (PathBuf::from("cmd"), "/C")
        } else {
            (find_program("sh", env).unwrap_or_else(|| PathBuf::from("/bin/sh")), "-c")
        };
        let mut cmd = Command::new(shell);
        cmd.args([flag, command]);
        run_with_timeout(cmd, env, cwd, self.timeout)
    }

    fn cpu(&self) -> CpuFacts {
        let arch = std::env::consts::ARCH.to_owned();
        let flags = proc_cpuinfo_flags(&arch).unwrap_or_else(detected_flags);
        CpuFacts { arch, flags, hwcaps: HwCaps::of_this_process() }
    }

    fn os(&self) -> OsFacts {
        let family = std::env::consts::OS.to_owned();
        let (distro, version) = match family.as_str() {
            "linux" => {
                std::fs::read_to_string("/etc/os-release").map(|text| parse_os_release(&text)).unwrap_or_default()
            }
            "macos" => {
                let version = Command::new("sw_vers")
                    .arg("-productVersion")
                    .output()
                    .ok()
                    .filter(|o| o.status.success())
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
                (Some("macos".to_owned()), version)
            }
            "windows" => windows_version(),
            _ => (None, None),
        };
        OsFacts { family, distro, version }
    }

    fn libc(&self, env: &Env) -> Option<String> {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let _ = env;
            // SAFETY: gnu_get_libc_version returns a pointer to a static NUL-terminated string.
            let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
            Some(format!("glibc {}", version.to_string_lossy()))
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        {
            if !cfg!(target_os = "linux") {
                return None;
            }
            // Ask `ldd`: musl prints "musl libc (x86_64)\nVersion 1.2.4" on stderr, glibc
            // prints "ldd (GNU libc) 2.39" or "ldd (Ubuntu GLIBC 2.39-0ubuntu8) 2.39".
            let out = self.run("ldd", &["--version"], env, Path::new("/")).ok().flatten()?;
            parse_ldd_version(&format!("{}{}", out.stdout, out.stderr))
        }
    }

    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }
}

/// `windows` or `windows-server`, and `major.minor.build` (`10.0.20348` is Server 2022,
/// `10.0.26100` Server 2025) as the kernel reports it, whatever the program's manifest says.
/// The monthly update revision is left out, as `/etc/os-release` leaves out package updates.
#[cfg(windows)]
fn windows_version() -> (Option<String>, Option<String>) {
    use windows_sys::Wdk::System::SystemServices::RtlGetVersion;
    use windows_sys::Win32::System::SystemInformation::{OSVERSIONINFOEXW, OSVERSIONINFOW};
    // SAFETY: OSVERSIONINFOEXW is plain data, valid when zeroed.
    let mut info: OSVERSIONINFOEXW = unsafe { std::mem::zeroed() };
    info.dwOSVersionInfoSize = std::mem::size_of::<OSVERSIONINFOEXW>() as u32;
    // SAFETY: `info` is an OSVERSIONINFOEXW whose size field says so, which RtlGetVersion fills.
    if unsafe { RtlGetVersion((&raw mut info).cast::<OSVERSIONINFOW>()) } != 0 {
        return (Some("windows".to_owned()), None);
    }
    const VER_NT_WORKSTATION: u8 = 1;
    let distro = if info.wProductType == VER_NT_WORKSTATION { "windows" } else { "windows-server" };
    let version = format!("{}.{}.{}", info.dwMajorVersion, info.dwMinorVersion, info.dwBuildNumber);
    (Some(distro.to_owned()), Some(version))
}

#[cfg(not(windows))]
fn windows_version() -> (Option<String>, Option<String>) {
    (None, None)
}

/// The libc named by `ldd --version` output.
pub fn parse_ldd_version(text: &str) -> Option<String> {
    if text.contains("musl") {
        let version = text.lines().find_map(|l| l.trim().strip_prefix("Version "))?;
        return Some(format!("musl {}", version.trim()));
    }
    let first = text.lines().next()?;
    if first.contains("GLIBC") || first.contains("GNU libc") {
        return first.split_whitespace().last().map(|v| format!("glibc {v}"));
    }
    None
}

/// Parse `ID` and `VERSION_ID` from `/etc/os-release`.
pub fn parse_os_release(text: &str) -> (Option<String>, Option<String>) {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
            .map(|v| v.trim().trim_matches('"').to_owned())
            .filter(|v| !v.is_empty())
    };
    (field("ID"), field("VERSION_ID"))
}

fn proc_cpuinfo_flags(arch: &str) -> Option<BTreeSet<String>> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    parse_cpuinfo_flags(&text, arch)
}

/// The first line of `/proc/cpuinfo` that lists `arch`'s features: `flags` on x86, `Features` on
/// arm. An emulator (qemu-user) shows the host's file, so the other architecture's line is
/// never read.
pub fn parse_cpuinfo_flags(text: &str, arch: &str) -> Option<BTreeSet<String>> {
    let field = match arch {
        "x86_64" | "x86" => "flags",
        "aarch64" | "arm" => "Features",
        _ => return None,
    };
    let line = text.lines().find(|l| l.split(':').next().unwrap_or("").trim() == field)?;
    let (_, values) = line.split_once(':')?;
    Some(values.split_whitespace().map(str::to_owned).collect())
}

/// Features detected by the standard library, named as `/proc/cpuinfo` names them.
fn detected_flags() -> BTreeSet<String> {
    #[allow(unused_mut)]
    let mut flags = BTreeSet::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! x86 {
            ($($feature:tt => $name:literal),* $(,)?) => {
                $(if std::arch::is_x86_feature_detected!($feature) { flags.insert($name.to_owned()); })*
            };
        }
        x86!(
            "sse3" => "pni", "ssse3" => "ssse3", "sse4.1" => "sse4_1", "sse4.2" => "sse4_2",
            "popcnt" => "popcnt", "cmpxchg16b" => "cx16", "avx" => "avx", "avx2" => "avx2",
            "bmi1" => "bmi1", "bmi2" => "bmi2", "f16c" => "f16c", "fma" => "fma", "lzcnt" => "abm",
            "movbe" => "movbe", "xsave" => "xsave", "avx512f" => "avx512f", "avx512bw" => "avx512bw",
            "avx512cd" => "avx512cd", "avx512dq" => "avx512dq", "avx512vl" => "avx512vl",
            "avx512vnni" => "avx512_vnni", "avx512bf16" => "avx512_bf16", "avx512fp16" => "avx512_fp16",
            "aes" => "aes", "pclmulqdq" => "pclmulqdq", "sha" => "sha_ni", "adx" => "adx",
        );
        // Every CPU with CMPXCHG16B has LAHF/SAHF in 64-bit mode; the standard library has no
        // detector for it.
        if flags.contains("cx16") {
            flags.insert("lahf_lm".to_owned());
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        macro_rules! arm {
            ($($feature:tt => $name:literal),* $(,)?) => {
                $(if std::arch::is_aarch64_feature_detected!($feature) { flags.insert($name.to_owned()); })*
            };
        }
        arm!(
            "neon" => "asimd", "fp16" => "asimdhp", "fhm" => "asimdfhm", "dotprod" => "asimddp",
            "i8mm" => "i8mm", "bf16" => "bf16", "sve" => "sve", "sve2" => "sve2",
            "lse" => "atomics", "rcpc" => "lrcpc", "crc" => "crc32", "aes" => "aes",
            "sha2" => "sha2", "sha3" => "sha3",
        );
        // No "sme": its detection is unstable in Rust 1.95 and would not compile (Linux reads it
        // from /proc/cpuinfo anyway).
    }
    flags
}

/// Look a program up like the shell would, using the captured `PATH`.
pub fn find_program(program: &str, env: &Env) -> Option<PathBuf> {
    let candidate = Path::new(program);
    if candidate.components().count() > 1 || candidate.is_absolute() {
        return candidate.is_file().then(|| candidate.to_owned());
    }
    let path = env.get("PATH")?;
    let exts: Vec<String> = if cfg!(windows) {
        env.get("PATHEXT").unwrap_or(".EXE;.CMD;.BAT").split(';').map(str::to_owned).collect()
    } else {
        vec![String::new()]
    };
    std::env::split_paths(path)
        .find_map(|dir| exts.iter().map(|ext| dir.join(format!("{program}{ext}"))).find(|p| is_executable(p)))
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

fn run_with_timeout(mut cmd: Command, env: &Env, cwd: &Path, timeout: Duration) -> io::Result<CommandOutput> {
    cmd.env_clear()
        .envs(env.iter())
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = out_reader.join().unwrap_or_default();
    let mut stderr = err_reader.join().unwrap_or_default();
    if status.is_none() {
        stderr.extend_from_slice(format!("timed out after {} s", timeout.as_secs()).as_bytes());
    }
    Ok(CommandOutput {
        success: status.is_some_and(|s| s.success()),
        code: status.and_then(|s| s.code()),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_os_release_and_cpuinfo() {
        let (id, version) = parse_os_release("NAME=\"Ubuntu\"\nID=ubuntu\nVERSION_ID=\"24.04\"\n");
        assert_eq!(id.as_deref(), Some("ubuntu"));
        assert_eq!(version.as_deref(), Some("24.04"));
        let x86 = "processor\t: 0\nflags\t\t: fpu sse2 avx2\nbugs\t: x\n";
        let flags = parse_cpuinfo_flags(x86, "x86_64").unwrap();
        assert!(flags.contains("avx2") && flags.contains("fpu"));
        let arm = "processor\t: 0\nFeatures\t: fp asimd aes\nCPU implementer\t: 0x41\n";
        assert_eq!(parse_cpuinfo_flags(arm, "aarch64").unwrap(), ["aes", "asimd", "fp"].map(str::to_owned).into());
    }

    #[test]
    fn an_emulated_cpu_never_reads_the_hosts_line() {
        // qemu-aarch64 on an x86 host shows the host's /proc/cpuinfo.
        let x86 = "processor\t: 0\nflags\t\t: fpu sse2 avx512f aes\n";
        assert_eq!(parse_cpuinfo_flags(x86, "aarch64"), None);
        assert_eq!(parse_cpuinfo_flags("Features\t: fp asimd\n", "x86_64"), None);
        assert_eq!(parse_cpuinfo_flags(x86, "riscv64"), None);
    }

    #[test]
    fn arm64_features_come_from_the_hardware_capabilities() {
        let cpu = CpuFacts {
            arch: "aarch64".into(),
            flags: ["avx512f".to_owned()].into(),
            hwcaps: Some(HwCaps { hwcap: 0b11, hwcap2: 0 }),
        };
        assert_eq!(cpu.features(), ["asimd", "fp"].map(str::to_owned).into());
        let without = CpuFacts { hwcaps: None, ..cpu.clone() };
        assert_eq!(without.features(), without.flags);
        // Words on another architecture are not arm64's.
        let x86 = CpuFacts { arch: "x86_64".into(), ..cpu };
        assert_eq!(x86.features(), x86.flags);
    }

    #[test]
    fn parses_ldd_for_glibc_and_musl() {
        assert_eq!(
            parse_ldd_version("ldd (Ubuntu GLIBC 2.39-0ubuntu8.3) 2.39\nCopyright").as_deref(),
            Some("glibc 2.39")
        );
        assert_eq!(parse_ldd_version("ldd (GNU libc) 2.28\n").as_deref(), Some("glibc 2.28"));
        assert_eq!(parse_ldd_version("musl libc (x86_64)\nVersion 1.2.4\n").as_deref(), Some("musl 1.2.4"));
        assert_eq!(parse_ldd_version("something else"), None);
    }

    #[cfg(unix)]
    #[test]
    fn missing_programs_are_none_and_failures_are_reported() {
        let env = Env::capture();
        let sys = HostSystem::default();
        let cwd = std::env::temp_dir();
        assert_eq!(sys.run("exact-cache-no-such-tool", &["--version"], &env, &cwd).unwrap(), None);
        let out = sys.run_shell("echo out; echo err >&2; exit 3", &env, &cwd).unwrap();
        assert!(!out.success);
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.failure_detail(), "exit status 3: err");
    }

    #[cfg(unix)]
    #[test]
    fn commands_time_out() {
        let env = Env::capture();
        let sys = HostSystem { timeout: Duration::from_millis(200) };
        let out = sys.run_shell("sleep 5", &env, &std::env::temp_dir()).unwrap();
        assert!(!out.success);
        assert!(out.stderr.contains("timed out"));
        // A call's own bound is kept within the machine's.
        let sys = HostSystem { timeout: Duration::from_secs(60) };
        let started = Instant::now();
        let out = sys.run_within("sleep", &["5"], &env, &std::env::temp_dir(), Duration::from_millis(200)).unwrap();
        assert!(out.is_some_and(|o| !o.success && o.stderr.contains("timed out")));
        assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    }
}
