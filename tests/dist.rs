//! The committed portable binary in dist/: its checksum, what it needs from the system it runs
//! on (glibc ≤ 2.17, only base system libraries), that it runs, and that it is what the current
//! sources build (`scripts/build-dist --check`).
//!
//! A crate of its own, not a module of tests/integration: it checks the committed artifact, not the
//! library, and its slow test is a from-scratch release (LTO) build that takes every core and
//! gigabytes of disk for minutes, which the integration tests' sub-second read timeouts and
//! gigabyte round trips should not run beside.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

const ARTIFACT: &str = "exact-cache-x86_64-unknown-linux-gnu";
/// The oldest glibc the binary supports (`--target x86_64-unknown-linux-gnu.2.17`).
const MAX_GLIBC: (u32, u32) = (2, 17);
/// Libraries every glibc system has; the binary may need these and nothing else.
const SYSTEM_LIBS: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "ld-linux-x86-64.so.2",
    "libgcc_s.so.1",
];
const INTERPRETER: &str = "/lib64/ld-linux-x86-64.so.2";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn binary() -> PathBuf {
    root().join("dist").join(ARTIFACT)
}

fn read_binary() -> Vec<u8> {
    let path = binary();
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run scripts/build-dist)", path.display()))
}

#[test]
fn committed_binary_matches_sha256sums() {
    let sums = std::fs::read_to_string(root().join("dist/SHA256SUMS")).unwrap();
    let mut entries = Vec::new();
    for line in sums.lines() {
        // `<sha256>  <name>`, or `<sha256> *<name>` (binary mode), as sha256sum writes them.
        let (sum, name) = line
            .split_once("  ")
            .or_else(|| line.split_once(" *"))
            .unwrap_or_else(|| panic!("malformed SHA256SUMS line {line:?}"));
        assert!(sum.len() == 64 && sum.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{line:?}");
        entries.push((name.to_owned(), sum.to_owned()));
    }
    let mut sorted = entries.clone();
    sorted.sort();
    assert_eq!(entries, sorted, "dist/SHA256SUMS is not sorted by file name");
    let expected: Vec<&str> =
        entries.iter().filter(|(name, _)| name == ARTIFACT).map(|(_, sum)| sum.as_str()).collect();
    assert_eq!(expected.len(), 1, "dist/SHA256SUMS must have exactly one line for {ARTIFACT}");
    assert_eq!(
        hex::encode(Sha256::digest(read_binary())),
        expected[0],
        "dist/{ARTIFACT} does not match dist/SHA256SUMS"
    );
}

#[test]
fn needs_only_glibc_2_17_and_base_system_libraries() {
    let elf = Elf::parse(read_binary());
    assert_eq!(elf.interpreter.as_deref(), Some(INTERPRETER));

    assert!(elf.needed.contains(&"libc.so.6".to_owned()), "not dynamically linked against glibc: {:?}", elf.needed);
    for lib in &elf.needed {
        assert!(SYSTEM_LIBS.contains(&lib.as_str()), "needs {lib}, which is not a base system library");
    }

    let mut max = (0, 0);
    for (file, version) in &elf.version_needs {
        assert!(elf.needed.contains(file), "version {version} from {file}, which is not DT_NEEDED");
        if let Some(number) = version.strip_prefix("GLIBC_") {
            let mut parts = number.split('.').map(|p| p.parse::<u32>().unwrap_or_else(|_| panic!("version {version}")));
            let v = (parts.next().unwrap(), parts.next().unwrap_or(0));
            assert!(v <= MAX_GLIBC, "{file} symbol version {version} is newer than GLIBC_2.17");
            max = max.max(v);
        } else {
            assert!(
                file == "libgcc_s.so.1" && version.starts_with("GCC_"),
                "unexpected symbol version {version} ({file})"
            );
        }
    }
    assert!(max >= (2, 2), "no GLIBC symbol versions found: {:?}", elf.version_needs);
}

#[test]
fn runs_and_reports_the_crate_version() {
    let out = Command::new(binary()).arg("--version").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), format!("exact-cache {}", env!("CARGO_PKG_VERSION")));
}

/// The committed binary is exactly what the current sources build. SLOW: a full release (LTO)
/// build from scratch in a temporary directory, a few minutes; on a fresh clone the script also
/// installs its pinned tools (cargo-zigbuild into .tools/, zig into .venv) first.
#[test]
#[ignore = "slow: an LTO release rebuild (minutes); scripts/test runs it"]
fn dist_is_up_to_date_with_the_sources() {
    let out = Command::new(root().join("scripts/build-dist")).arg("--check").output().unwrap();
    assert!(
        out.status.success(),
        "scripts/build-dist --check failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What a dynamically linked ELF64 little-endian executable needs from the system, read from its
/// section headers (present even in a stripped binary) and program headers.
struct Elf {
    interpreter: Option<String>,
    /// DT_NEEDED entries.
    needed: Vec<String>,
    /// (library, version) pairs from .gnu.version_r, e.g. ("libc.so.6", "GLIBC_2.14").
    version_needs: Vec<(String, String)>,
}

impl Elf {
    fn parse(data: Vec<u8>) -> Elf {
        const PT_INTERP: u32 = 3;
        const SHT_DYNAMIC: u32 = 6;
        const SHT_GNU_VERNEED: u32 = 0x6fff_fffe;
        const DT_NEEDED: u64 = 1;

        let d = &data[..];
        assert_eq!(&d[..4], b"\x7fELF", "not an ELF file");
        assert_eq!((d[4], d[5]), (2, 1), "not a 64-bit little-endian ELF file");
        assert_eq!(u16_at(d, 18), 62, "not an x86-64 ELF file");

        let (phoff, phentsize, phnum) = (u64_at(d, 32) as usize, u16_at(d, 54) as usize, u16_at(d, 56) as usize);
        let mut interpreter = None;
        for i in 0..phnum {
            let ph = phoff + i * phentsize;
            if u32_at(d, ph) == PT_INTERP {
                let (offset, size) = (u64_at(d, ph + 8) as usize, u64_at(d, ph + 32) as usize);
                interpreter = Some(c_str(d, offset, offset + size));
            }
        }

        let (shoff, shentsize, shnum) = (u64_at(d, 40) as usize, u16_at(d, 58) as usize, u16_at(d, 60) as usize);
        assert!(shnum > 0, "no section headers");
        struct Section {
            kind: u32,
            offset: usize,
            size: usize,
            link: usize,
            info: usize,
        }
        let sections: Vec<Section> = (0..shnum)
            .map(|i| {
                let sh = shoff + i * shentsize;
                Section {
                    kind: u32_at(d, sh + 4),
                    offset: u64_at(d, sh + 24) as usize,
                    size: u64_at(d, sh + 32) as usize,
                    link: u32_at(d, sh + 40) as usize,
                    info: u32_at(d, sh + 44) as usize,
                }
            })
            .collect();
        let string = |strtab: usize, index: usize| {
            let s = &sections[strtab];
            c_str(d, s.offset + index, s.offset + s.size)
        };

        let mut needed = Vec::new();
        let mut version_needs = Vec::new();
        for s in &sections {
            match s.kind {
                SHT_DYNAMIC => {
                    for entry in (s.offset..s.offset + s.size).step_by(16) {
                        if u64_at(d, entry) == DT_NEEDED {
                            needed.push(string(s.link, u64_at(d, entry + 8) as usize));
                        }
                    }
                }
                SHT_GNU_VERNEED => {
                    // Elf64_Verneed { vn_version: u16, vn_cnt: u16, vn_file: u32, vn_aux: u32, vn_next: u32 }
                    // Elf64_Vernaux { vna_hash: u32, vna_flags: u16, vna_other: u16, vna_name: u32, vna_next: u32 }
                    let mut need = s.offset;
                    for _ in 0..s.info {
                        let file = string(s.link, u32_at(d, need + 4) as usize);
                        let mut aux = need + u32_at(d, need + 8) as usize;
                        for _ in 0..u16_at(d, need + 2) {
                            version_needs.push((file.clone(), string(s.link, u32_at(d, aux + 8) as usize)));
                            aux += u32_at(d, aux + 12) as usize;
                        }
                        need += u32_at(d, need + 12) as usize;
                    }
                }
                _ => {}
            }
        }
        assert!(!version_needs.is_empty(), "no .gnu.version_r section");
        Elf { interpreter, needed, version_needs }
    }
}

fn u16_at(d: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(d[at..at + 2].try_into().unwrap())
}

fn u32_at(d: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(d[at..at + 4].try_into().unwrap())
}

fn u64_at(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}

fn c_str(d: &[u8], start: usize, end: usize) -> String {
    let bytes = &d[start..end];
    let len = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8(bytes[..len].to_vec()).unwrap()
}
