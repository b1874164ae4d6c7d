//! `native.isa`: what compiled kernels depend on — the x86-64 micro-architecture level (psABI
//! levels v1..v4) or, on aarch64, the set of SIMD/atomics features (from the hardware
//! capabilities, [`CpuFacts::features`]). The full flag list is the separate, opt-in `cpu-flags`
//! facet, because it changes with every CPU stepping.

use super::{FacetDef, Probe, Unlabelled};
use crate::fingerprint::system::CpuFacts;
use crate::fingerprint::{Component, FingerprintError, Value};
use std::collections::BTreeSet;

pub(super) const FACET: FacetDef = FacetDef {
    component: "native.isa",
    records: "`level`: the x86-64 psABI level (`x86-64-v1` … `x86-64-v4`), or `features`: the aarch64 SIMD and \
              atomics features; with `preset: torch-inductor` also `extensions` (AMX, AVX-512 BF16/FP16/VNNI)",
    default: true,
    unlabelled: Unlabelled::Every,
    collect,
};

fn collect(probe: &Probe) -> Result<Component, FingerprintError> {
    Ok(isa(probe.cpu(), probe.spec.isa_extensions))
}

/// The x86-64 psABI level implied by `/proc/cpuinfo`-style flags.
pub fn x86_64_level(flags: &BTreeSet<String>) -> &'static str {
    const V2: &[&str] = &["cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"];
    const V3: &[&str] = &["avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"];
    const V4: &[&str] = &["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"];
    let has = |set: &[&str]| set.iter().all(|f| flags.contains(*f));
    if !has(V2) {
        "x86-64-v1"
    } else if !has(V3) {
        "x86-64-v2"
    } else if !has(V4) {
        "x86-64-v3"
    } else {
        "x86-64-v4"
    }
}

/// The aarch64 features that change generated code, present in `flags`, space-separated.
pub fn aarch64_isa(flags: &BTreeSet<String>) -> String {
    const RELEVANT: &[&str] = &[
        "asimd", "asimdhp", "asimdfhm", "asimddp", "i8mm", "bf16", "sve", "sve2", "sme", "atomics", "lrcpc", "crc32",
        "aes", "sha2", "sha3",
    ];
    let present: Vec<&str> = RELEVANT.iter().copied().filter(|f| flags.contains(*f)).collect();
    present.join(" ")
}

/// x86 extensions beyond the psABI levels that change generated kernels (TorchInductor picks
/// AMX and AVX-512 BF16/FP16/VNNI code paths).
const X86_EXTENSIONS: [&str; 7] =
    ["amx_bf16", "amx_int8", "amx_tile", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni"];

fn isa(cpu: &CpuFacts, extensions: bool) -> Component {
    match cpu.arch.as_str() {
        "x86_64" if extensions => {
            let present: Vec<&str> = X86_EXTENSIONS.iter().copied().filter(|f| cpu.flags.contains(*f)).collect();
            [
                ("level".to_owned(), Value::text(x86_64_level(&cpu.flags))),
                ("extensions".to_owned(), Value::text(present.join(" "))),
            ]
            .into()
        }
        "x86_64" => [("level".to_owned(), Value::text(x86_64_level(&cpu.flags)))].into(),
        "aarch64" => [("features".to_owned(), Value::text(aarch64_isa(&cpu.features())))].into(),
        _ => [("level".to_owned(), Value::Absent)].into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(s: &str) -> BTreeSet<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    const V2: &str = "cx16 lahf_lm popcnt pni sse4_1 sse4_2 ssse3";
    const V3: &str = "avx avx2 bmi1 bmi2 f16c fma abm movbe xsave";
    const V4: &str = "avx512f avx512bw avx512cd avx512dq avx512vl";

    #[test]
    fn x86_levels_follow_the_psabi() {
        assert_eq!(x86_64_level(&flags("sse2 fpu")), "x86-64-v1");
        assert_eq!(x86_64_level(&flags(V2)), "x86-64-v2");
        assert_eq!(x86_64_level(&flags(&format!("{V2} {V3}"))), "x86-64-v3");
        assert_eq!(x86_64_level(&flags(&format!("{V2} {V3} {V4}"))), "x86-64-v4");
        // One missing v3 feature caps the level at v2, whatever else is there.
        let no_fma = format!("{V2} {V3} {V4}").replace(" fma", "");
        assert_eq!(x86_64_level(&flags(&no_fma)), "x86-64-v2");
    }

    #[test]
    fn isa_extensions_are_listed_only_when_asked_for() {
        let cpu = CpuFacts {
            arch: "x86_64".into(),
            flags: flags(&format!("{V2} {V3} {V4} amx_tile avx512_bf16 rdrand")),
            hwcaps: None,
        };
        assert_eq!(isa(&cpu, false).len(), 1);
        assert_eq!(isa(&cpu, true)["extensions"], Value::text("amx_tile avx512_bf16"));
    }

    #[test]
    fn aarch64_isa_keeps_only_codegen_features_in_a_fixed_order() {
        assert_eq!(aarch64_isa(&flags("fp cpuid sve asimd evtstrm asimddp")), "asimd asimddp sve");
    }

    #[test]
    fn aarch64_features_come_from_the_hardware_capabilities_not_an_x86_flags_line() {
        // What qemu-aarch64 on an x86 host shows: the host's flags, the emulated CPU's words.
        let cpu = CpuFacts {
            arch: "aarch64".into(),
            flags: flags(&format!("{V2} {V3} {V4} aes")),
            // fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics | sve2
            hwcaps: Some(crate::fingerprint::HwCaps { hwcap: 0x1ff, hwcap2: 0b10 }),
        };
        assert_eq!(isa(&cpu, true)["features"], Value::text("asimd sve2 atomics crc32 aes sha2"));
        assert_eq!(isa(&cpu, true).len(), 1);
    }
}
