//! The committed portable binaries in dist/: their checksums, what each needs from the system it
//! runs on (the Linux ones: glibc ≤ 2.17 and only base system libraries, the right machine, and
//! on aarch64 LOAD segments aligned for 64 KiB pages; the Windows one: AMD64, only system DLLs),
//! that the native one runs, and that they are what the current sources build: each one's
//! digest of its build's inputs (`dist/SOURCES`, `scripts/build-dist --check-sources`), and the
//! native one rebuilt bit for bit (`scripts/build-dist --check`). The emulated runs of the others
//! are in `tests/integration/emulated.rs`.
//!
//! A crate of its own, not a module of tests/integration: it checks the committed artifacts, not
//! the library, and its slow test is a from-scratch release (LTO) build that takes every core and
//! gigabytes of disk for minutes, which the integration tests' sub-second read
//! timeouts and gigabyte round trips should not run beside.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a committed binary must be, by its target.
enum Format {
    Elf {
        /// `e_machine`.
        machine: u16,
        interpreter: &'static str,
        /// The least alignment of every LOAD segment: aarch64 kernels may use 64 KiB pages
        /// (NVIDIA Grace), and a segment aligned for less does not load there.
        load_align: u64,
    },
    Pe {
        /// The COFF header's `Machine`.
        machine: u16,
    },
}

/// Every binary scripts/build-dist builds and dist/ carries.
const BINARIES: &[(&str, Format)] = &[
    (
        "exact-cache-x86_64-unknown-linux-gnu",
        Format::Elf { machine: EM_X86_64, interpreter: "/lib64/ld-linux-x86-64.so.2", load_align: 4096 },
    ),
    (
        "exact-cache-aarch64-unknown-linux-gnu",
        Format::Elf { machine: EM_AARCH64, interpreter: "/lib/ld-linux-aarch64.so.1", load_align: 65536 },
    ),
    ("exact-cache-x86_64-pc-windows-gnu.exe", Format::Pe { machine: IMAGE_FILE_MACHINE_AMD64 }),
];
/// Binaries the release workflow builds natively on macOS runners (Mach-O, `cputype`); dist/ may
/// carry them, and nothing here can rebuild or run them.
const MACOS_BINARIES: &[(&str, u32)] =
    &[("exact-cache-aarch64-apple-darwin", 0x0100_000c), ("exact-cache-x86_64-apple-darwin", 0x0100_0007)];

const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;
const IMAGE_FILE_MACHINE_AMD64: u16 = 0x8664;

/// The oldest glibc the Linux binaries support (`--target <arch>-unknown-linux-gnu.2.17`).
const MAX_GLIBC: (u32, u32) = (2, 17);
/// Libraries every glibc system has; a Linux binary may need these and nothing else.
const SYSTEM_LIBS: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
    "libgcc_s.so.1",
];
/// DLLs every supported Windows (10, Server 2016 and later) has; the Windows binary may import
/// these (compared in lowercase), the API sets of the universal C runtime and the Windows core
/// (`api-ms-win-crt-*`, `api-ms-win-core-*`), and nothing else: no MinGW runtime DLL
/// (`libgcc_s_seh-1.dll`, `libwinpthread-1.dll`) and no Visual C++ redistributable.
const SYSTEM_DLLS: &[&str] = &[
    "advapi32.dll",
    "bcrypt.dll",
    "bcryptprimitives.dll",
    "combase.dll",
    "crypt32.dll",
    "iphlpapi.dll",
    "kernel32.dll",
    "msvcrt.dll",
    "ncrypt.dll",
    "ntdll.dll",
    "ole32.dll",
    "oleaut32.dll",
    "secur32.dll",
    "shell32.dll",
    "ucrtbase.dll",
    "user32.dll",
    "userenv.dll",
    "ws2_32.dll",
];
const SYSTEM_DLL_PREFIXES: &[&str] = &["api-ms-win-crt-", "api-ms-win-core-"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn binary(artifact: &str) -> PathBuf {
    root().join("dist").join(artifact)
}

fn read_binary(artifact: &str) -> Vec<u8> {
    let path = binary(artifact);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run scripts/build-dist)", path.display()))
}

/// `dist/SHA256SUMS` as (file name, digest) pairs, in file order.
fn sums() -> Vec<(String, String)> {
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
    entries
}

#[test]
fn committed_binaries_match_sha256sums() {
    let entries = sums();
    let mut sorted = entries.clone();
    sorted.sort();
    assert_eq!(entries, sorted, "dist/SHA256SUMS is not sorted by file name");
    for (artifact, _) in BINARIES {
        let lines = entries.iter().filter(|(name, _)| name == artifact).count();
        assert_eq!(lines, 1, "dist/SHA256SUMS must have exactly one line for {artifact}");
    }
    for (name, sum) in &entries {
        let known = BINARIES.iter().any(|(artifact, _)| artifact == name)
            || MACOS_BINARIES.iter().any(|(artifact, _)| artifact == name);
        assert!(known, "dist/SHA256SUMS lists {name}, which no build makes");
        assert_eq!(&hex::encode(Sha256::digest(read_binary(name))), sum, "dist/{name} does not match dist/SHA256SUMS");
    }
    // Every binary in dist/ is listed: the shim runs none that is not.
    for file in std::fs::read_dir(root().join("dist")).unwrap() {
        let name = file.unwrap().file_name().into_string().unwrap();
        if name.starts_with("exact-cache-") {
            assert!(entries.iter().any(|(listed, _)| *listed == name), "dist/{name} is not in dist/SHA256SUMS");
        }
    }
}

#[test]
fn linux_binaries_need_only_glibc_2_17_and_base_system_libraries() {
    for (artifact, format) in BINARIES {
        let Format::Elf { machine, interpreter, load_align } = format else { continue };
        let elf = Elf::parse(read_binary(artifact));
        assert_eq!(elf.machine, *machine, "{artifact}: ELF machine");
        assert_eq!(elf.interpreter.as_deref(), Some(*interpreter), "{artifact}");
        for (offset, align) in &elf.load_aligns {
            assert!(
                align >= load_align,
                "{artifact}: the LOAD segment at {offset:#x} is aligned to {align}, not {load_align}"
            );
        }
        assert!(!elf.load_aligns.is_empty(), "{artifact}: no LOAD segment");
        check_glibc_needs(artifact, &elf);
    }
}

fn check_glibc_needs(artifact: &str, elf: &Elf) {
    assert!(
        elf.needed.contains(&"libc.so.6".to_owned()),
        "{artifact}: not dynamically linked against glibc: {:?}",
        elf.needed
    );
    for lib in &elf.needed {
        assert!(SYSTEM_LIBS.contains(&lib.as_str()), "{artifact} needs {lib}, which is not a base system library");
    }
    let mut max = (0, 0);
    for (file, version) in &elf.version_needs {
        assert!(elf.needed.contains(file), "{artifact}: version {version} from {file}, which is not DT_NEEDED");
        if let Some(number) = version.strip_prefix("GLIBC_") {
            let mut parts = number.split('.').map(|p| p.parse::<u32>().unwrap_or_else(|_| panic!("version {version}")));
            let v = (parts.next().unwrap(), parts.next().unwrap_or(0));
            assert!(v <= MAX_GLIBC, "{artifact}: {file} symbol version {version} is newer than GLIBC_2.17");
            max = max.max(v);
        } else {
            assert!(
                file == "libgcc_s.so.1" && version.starts_with("GCC_"),
                "{artifact}: unexpected symbol version {version} ({file})"
            );
        }
    }
    assert!(max >= (2, 2), "{artifact}: no GLIBC symbol versions found: {:?}", elf.version_needs);
}

#[test]
fn the_windows_binary_is_amd64_and_imports_only_system_dlls() {
    for (artifact, format) in BINARIES {
        let Format::Pe { machine } = format else { continue };
        let pe = Pe::parse(read_binary(artifact));
        assert_eq!(pe.machine, *machine, "{artifact}: COFF machine {:#x}", pe.machine);
        assert_eq!(pe.subsystem, IMAGE_SUBSYSTEM_WINDOWS_CUI, "{artifact}: not a console program");
        assert!(pe.imports.iter().any(|dll| dll == "kernel32.dll"), "{artifact}: imports {:?}", pe.imports);
        for dll in &pe.imports {
            let system = SYSTEM_DLLS.contains(&dll.as_str()) || SYSTEM_DLL_PREFIXES.iter().any(|p| dll.starts_with(p));
            assert!(system, "{artifact} imports {dll}, which is not a system DLL (all: {:?})", pe.imports);
        }
    }
}

#[test]
fn macos_binaries_if_any_are_mach_o_for_their_cpu() {
    for (artifact, cputype) in MACOS_BINARIES {
        if !binary(artifact).exists() {
            continue;
        }
        let data = read_binary(artifact);
        assert_eq!(u32_at(&data, 0), 0xfeed_facf, "{artifact}: not a 64-bit Mach-O file");
        assert_eq!(u32_at(&data, 4), *cputype, "{artifact}: Mach-O cputype");
    }
}

#[test]
fn the_native_binary_runs_and_reports_the_crate_version() {
    let out = Command::new(binary("exact-cache-x86_64-unknown-linux-gnu")).arg("--version").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), format!("exact-cache {}", env!("CARGO_PKG_VERSION")));
}

/// `scripts/smoke-binary`, which the release workflow runs on macOS, passes on the native binary.
#[test]
fn the_smoke_test_passes_on_the_native_binary() {
    let out = Command::new(root().join("scripts/smoke-binary"))
        .arg(binary("exact-cache-x86_64-unknown-linux-gnu"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// `scripts/build-dist` with `args` in `dir`: (exit status, stderr).
fn build_dist(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(dir.join("scripts/build-dist")).args(args).current_dir(dir).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Every committed binary was built from the sources as they are (its `dist/SOURCES` digest):
/// what makes a stale binary fail CI. Left out of a plain `cargo test`, where every source edit
/// would fail it until the binaries are rebuilt.
#[test]
#[ignore = "release check: fails after any source change until scripts/build-dist runs; scripts/test runs it"]
fn every_binary_was_built_from_these_sources() {
    let (ok, log) = build_dist(root(), &["--check-sources"]);
    assert!(ok, "scripts/build-dist --check-sources failed:\n{log}");
}

/// `dist/SOURCES` has one line for each binary dist/ carries (the macOS ones where present),
/// sorted by name as SHA256SUMS is.
#[test]
fn sources_has_a_line_for_every_binary() {
    let text = std::fs::read_to_string(root().join("dist/SOURCES")).unwrap();
    let names: Vec<&str> = text.lines().map(|line| line.split_once("  ").map_or("", |(_, name)| name)).collect();
    let macos = MACOS_BINARIES.iter().map(|(artifact, _)| *artifact).filter(|artifact| binary(artifact).exists());
    let mut binaries: Vec<&str> = BINARIES.iter().map(|(artifact, _)| *artifact).chain(macos).collect();
    binaries.sort();
    assert_eq!(names, binaries, "dist/SOURCES:\n{text}");
}

/// The digest check fails for every binary once any input changes: an edited or new file in
/// `src/`, the lock file, the build script. In a scratch repository holding copies of the
/// inputs, with a `dist/SOURCES` recording their digest.
#[test]
fn a_change_to_any_input_makes_every_binary_stale() {
    let (ok, listed) = build_dist(root(), &["--inputs"]);
    assert!(ok, "{listed}");
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    for file in listed.lines() {
        let to = dir.join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(root().join(file), &to).unwrap();
    }
    let git = |args: &[&str]| {
        let out = Command::new("git").args(args).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    let (ok, digest) = build_dist(dir, &["--inputs-digest"]);
    assert!(ok && digest.trim().len() == 64, "{digest}");
    // Lines for the binaries the scratch dist/ carries (the macOS one once it is there).
    let macos = MACOS_BINARIES[0].0;
    let record = |digest: &str| {
        let present = dir.join("dist").join(macos).exists().then_some(macos);
        let lines: String = BINARIES
            .iter()
            .map(|(artifact, _)| *artifact)
            .chain(present)
            .map(|artifact| format!("{digest}  {artifact}\n"))
            .collect();
        write_file(&dir.join("dist/SOURCES"), &lines);
    };
    record(digest.trim());
    let (ok, log) = build_dist(dir, &["--check-sources"]);
    assert!(ok, "unchanged inputs are current:\n{log}");

    // A macOS binary the release workflow committed is checked too, by its own line.
    write_file(&dir.join("dist").join(macos), "a Mach-O binary");
    let (ok, log) = build_dist(dir, &["--check-sources"]);
    let stale = format!("dist/{macos} is stale: it was built from other sources than these; run the release workflow");
    assert!(!ok && log.contains(&stale), "a macOS binary without its line:\n{log}");
    append(&dir.join("dist/SOURCES"), &format!("{}  {macos}\n", digest.trim()));
    let (ok, log) = build_dist(dir, &["--check-sources"]);
    assert!(ok, "with its line:\n{log}");

    // The input listed last: removed but still tracked, it is where a listing that stops at a
    // missing file would end.
    let last = listed.lines().last().unwrap().to_owned();
    let changes: [(&str, &dyn Fn()); 5] = [
        ("an edited source", &|| append(&dir.join("src/lib.rs"), "// edited\n")),
        ("a new source file, not yet tracked", &|| write_file(&dir.join("src/new.rs"), "")),
        ("the lock file", &|| append(&dir.join("Cargo.lock"), "\n")),
        ("the build script", &|| append(&dir.join("scripts/build-dist"), "# edited\n")),
        ("a source removed but still tracked", &|| std::fs::remove_file(dir.join(&last)).unwrap()),
    ];
    for (change, make) in changes {
        let (_, before) = build_dist(dir, &["--inputs-digest"]);
        record(before.trim());
        make();
        let (ok, log) = build_dist(dir, &["--check-sources"]);
        assert!(!ok, "{change}: the check passed:\n{log}");
        for artifact in BINARIES.iter().map(|(artifact, _)| *artifact).chain([macos]) {
            assert!(log.contains(&format!("dist/{artifact} is stale")), "{change}: {artifact} not reported:\n{log}");
        }
        let (_, one) = build_dist(dir, &["--check-sources", "x86_64-unknown-linux-gnu"]);
        assert_eq!(one.matches(" is stale").count(), 1, "{change}: only the named target is checked:\n{one}");
    }
}

/// `--check`'s test of what a build read (the dependency list cargo writes beside the binary):
/// a project file outside the digest's inputs is named and fails it; a generated file under the
/// target directory, or a registry's, does not count; a missing list, or one that does not name
/// `src/main.rs` (relative paths, say), fails it rather than passing for an empty one.
#[test]
fn a_build_that_read_a_file_outside_the_inputs_fails_the_check() {
    let project = std::fs::canonicalize(root()).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let check = |files: &[String]| {
        let list = scratch.path().join("exact-cache.d");
        write_file(&list, &format!("{}/target/x/release/exact-cache: {}\n", project.display(), files.join(" ")));
        build_dist(root(), &["--outside-inputs", list.to_str().unwrap()])
    };
    let at = |file: &str| format!("{}/{file}", project.display());
    let inputs = [
        at("src/main.rs"),
        at("src/lib.rs"),
        at("target/x/build/out/generated.rs"),
        "/cargo/registry/zstd/lib.rs".into(),
    ];
    assert_eq!(check(&inputs), (true, String::new()));
    let (ok, log) = check(&[&inputs[..], &[at("docs/fault-matrix.md"), at("README.md")]].concat());
    assert!(!ok && log == "README.md\ndocs/fault-matrix.md\n", "{log}");
    let (ok, log) = check(&["src/main.rs".into(), "src/lib.rs".into()]);
    assert!(!ok && log.contains("does not name"), "relative paths: {log}");
    let (ok, log) = build_dist(root(), &["--outside-inputs", scratch.path().join("missing.d").to_str().unwrap()]);
    assert!(!ok && log.contains("no dependency list"), "{log}");
}

fn write_file(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    std::fs::OpenOptions::new().append(true).open(path).unwrap().write_all(text.as_bytes()).unwrap();
}

/// The native binary is exactly what these sources build, bit for bit, and its build read no
/// project file outside the digest's inputs: what shows that `dist/SOURCES` stands for the
/// binaries. SLOW: a release (LTO) build from scratch in a temporary directory, minutes; on a
/// fresh clone the script also installs its pinned tools (the Rust targets, cargo-zigbuild into
/// .tools/, zig into .venv) first. The CI workflow's `dist` job rebuilds every target.
#[test]
#[ignore = "slow: an LTO release rebuild (minutes); scripts/test runs it"]
fn the_native_binary_rebuilds_bit_for_bit() {
    let (ok, log) = build_dist(root(), &["--check", "x86_64-unknown-linux-gnu"]);
    assert!(ok, "scripts/build-dist --check x86_64-unknown-linux-gnu failed:\n{log}");
}

/// What a dynamically linked ELF64 little-endian executable needs from the system, read from its
/// section headers (present even in a stripped binary) and program headers.
struct Elf {
    /// `e_machine`.
    machine: u16,
    interpreter: Option<String>,
    /// (file offset, `p_align`) of each LOAD segment.
    load_aligns: Vec<(u64, u64)>,
    /// DT_NEEDED entries.
    needed: Vec<String>,
    /// (library, version) pairs from .gnu.version_r, e.g. ("libc.so.6", "GLIBC_2.14").
    version_needs: Vec<(String, String)>,
}

impl Elf {
    fn parse(data: Vec<u8>) -> Elf {
        const PT_LOAD: u32 = 1;
        const PT_INTERP: u32 = 3;
        const SHT_DYNAMIC: u32 = 6;
        const SHT_GNU_VERNEED: u32 = 0x6fff_fffe;
        const DT_NEEDED: u64 = 1;

        let d = &data[..];
        assert_eq!(&d[..4], b"\x7fELF", "not an ELF file");
        assert_eq!((d[4], d[5]), (2, 1), "not a 64-bit little-endian ELF file");
        let machine = u16_at(d, 18);

        let (phoff, phentsize, phnum) = (u64_at(d, 32) as usize, u16_at(d, 54) as usize, u16_at(d, 56) as usize);
        let mut interpreter = None;
        let mut load_aligns = Vec::new();
        for i in 0..phnum {
            // Elf64_Phdr { p_type: u32, p_flags: u32, p_offset: u64, p_vaddr: u64, p_paddr: u64,
            //              p_filesz: u64, p_memsz: u64, p_align: u64 }
            let ph = phoff + i * phentsize;
            match u32_at(d, ph) {
                PT_INTERP => {
                    let (offset, size) = (u64_at(d, ph + 8) as usize, u64_at(d, ph + 32) as usize);
                    interpreter = Some(c_str(d, offset, offset + size));
                }
                PT_LOAD => load_aligns.push((u64_at(d, ph + 8), u64_at(d, ph + 48))),
                _ => {}
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
        Elf { machine, interpreter, load_aligns, needed, version_needs }
    }
}

const IMAGE_SUBSYSTEM_WINDOWS_CUI: u16 = 3;

/// What a PE32+ executable needs from Windows, read from its headers and import tables.
struct Pe {
    /// The COFF header's `Machine`.
    machine: u16,
    /// The optional header's `Subsystem`.
    subsystem: u16,
    /// The DLLs of the import and the delay-load import tables, in lowercase.
    imports: Vec<String>,
}

impl Pe {
    fn parse(data: Vec<u8>) -> Pe {
        const PE32_PLUS: u16 = 0x20b;
        const IMPORT_DIRECTORY: usize = 1;
        const DELAY_IMPORT_DIRECTORY: usize = 13;

        let d = &data[..];
        assert_eq!(&d[..2], b"MZ", "not a PE file");
        let pe = u32_at(d, 0x3c) as usize;
        assert_eq!(&d[pe..pe + 4], b"PE\0\0", "no PE signature");
        // COFF header: Machine u16, NumberOfSections u16, TimeDateStamp u32, PointerToSymbolTable
        // u32, NumberOfSymbols u32, SizeOfOptionalHeader u16, Characteristics u16.
        let coff = pe + 4;
        let (machine, sections, optional_size) = (u16_at(d, coff), u16_at(d, coff + 2), u16_at(d, coff + 16));
        let optional = coff + 20;
        assert_eq!(u16_at(d, optional), PE32_PLUS, "not a PE32+ (64-bit) image");
        let subsystem = u16_at(d, optional + 68);
        let directories = u32_at(d, optional + 108) as usize;
        let directory = |index: usize| {
            let at = optional + 112 + index * 8;
            (index < directories).then(|| (u32_at(d, at), u32_at(d, at + 4))).filter(|(rva, _)| *rva != 0)
        };

        // Section headers (40 bytes): Name [u8; 8], VirtualSize u32, VirtualAddress u32,
        // SizeOfRawData u32, PointerToRawData u32, …
        let table = optional + optional_size as usize;
        let sections: Vec<(u32, u32, u32)> = (0..sections as usize)
            .map(|i| {
                let s = table + i * 40;
                (u32_at(d, s + 12), u32_at(d, s + 8).max(u32_at(d, s + 16)), u32_at(d, s + 20))
            })
            .collect();
        let offset = |rva: u32| -> usize {
            let (va, _, raw) = sections
                .iter()
                .find(|(va, size, _)| (*va..va + size).contains(&rva))
                .unwrap_or_else(|| panic!("RVA {rva:#x} is in no section"));
            (rva - va + raw) as usize
        };

        let mut imports = Vec::new();
        // Import descriptors (20 bytes): OriginalFirstThunk, TimeDateStamp, ForwarderChain, Name,
        // FirstThunk; delay-load descriptors (32 bytes): Attributes, DllNameRVA, …; both end with
        // an all-zero descriptor.
        for (index, size, name_at) in [(IMPORT_DIRECTORY, 20, 12), (DELAY_IMPORT_DIRECTORY, 32, 4)] {
            let Some((rva, _)) = directory(index) else { continue };
            let mut descriptor = offset(rva);
            while d[descriptor..descriptor + size].iter().any(|&b| b != 0) {
                let name = offset(u32_at(d, descriptor + name_at));
                imports.push(c_str(d, name, d.len()).to_ascii_lowercase());
                descriptor += size;
            }
        }
        assert!(!imports.is_empty(), "no import table");
        Pe { machine, subsystem, imports }
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
