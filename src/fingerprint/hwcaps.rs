//! arm64 hardware capabilities: the `AT_HWCAP` and `AT_HWCAP2` words of the auxiliary vector, and
//! their feature names as Linux prints them in the `Features` line of `/proc/cpuinfo`
//! (`arch/arm64/kernel/cpuinfo.c`, `hwcap_str`; bit numbers from
//! `arch/arm64/include/uapi/asm/hwcap.h`).
//!
//! The words are what the kernel (or an emulator such as qemu-user) tells the process about the
//! CPU it runs on, so they are read in preference to `/proc/cpuinfo`, which under emulation is
//! the host's.

use std::collections::BTreeSet;

/// The two hardware capability words of an arm64 Linux process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HwCaps {
    /// `getauxval(AT_HWCAP)`.
    pub hwcap: u64,
    /// `getauxval(AT_HWCAP2)`.
    pub hwcap2: u64,
}

/// `AT_HWCAP` bit → name (bits 0..=31).
const HWCAP_NAMES: [&str; 32] = [
    "fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2", "crc32", "atomics", "fphp", "asimdhp", "cpuid",
    "asimdrdm", "jscvt", "fcma", "lrcpc", "dcpop", "sha3", "sm3", "sm4", "asimddp", "sha512", "sve", "asimdfhm", "dit",
    "uscat", "ilrcpc", "flagm", "ssbs", "sb", "paca", "pacg",
];

/// `AT_HWCAP2` bit → name (bits 0..=46).
const HWCAP2_NAMES: [&str; 47] = [
    "dcpodp",
    "sve2",
    "sveaes",
    "svepmull",
    "svebitperm",
    "svesha3",
    "svesm4",
    "flagm2",
    "frint",
    "svei8mm",
    "svef32mm",
    "svef64mm",
    "svebf16",
    "i8mm",
    "bf16",
    "dgh",
    "rng",
    "bti",
    "mte",
    "ecv",
    "afp",
    "rpres",
    "mte3",
    "sme",
    "smei16i64",
    "smef64f64",
    "smei8i32",
    "smef16f32",
    "smeb16f32",
    "smef32f32",
    "smefa64",
    "wfxt",
    "ebf16",
    "sveebf16",
    "cssc",
    "rprfm",
    "sve2p1",
    "sme2",
    "sme2p1",
    "smei16i32",
    "smebi32i32",
    "smeb16b16",
    "smef16f16",
    "mops",
    "hbc",
    "sveb16b16",
    "lrcpc3",
];

impl HwCaps {
    /// Every feature whose bit is set, by its kernel name; a bit this table does not name yet
    /// (a newer kernel's) as `hwcap_<bit>` or `hwcap2_<bit>`, so it still shows.
    pub fn names(self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for (word, table, unnamed) in
            [(self.hwcap, &HWCAP_NAMES[..], "hwcap"), (self.hwcap2, &HWCAP2_NAMES[..], "hwcap2")]
        {
            for bit in (0..64).filter(|bit| word & (1 << bit) != 0) {
                names.insert(table.get(bit).map_or_else(|| format!("{unnamed}_{bit}"), |name| (*name).to_owned()));
            }
        }
        names
    }

    /// This process's words, where the kernel gives them (arm64 Linux).
    pub fn of_this_process() -> Option<HwCaps> {
        #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
        {
            // SAFETY: getauxval only reads the auxiliary vector; an absent entry reads as 0.
            let (hwcap, hwcap2) = unsafe { (libc::getauxval(libc::AT_HWCAP), libc::getauxval(libc::AT_HWCAP2)) };
            (hwcap != 0).then_some(HwCaps { hwcap, hwcap2 })
        }
        #[cfg(not(all(target_os = "linux", target_arch = "aarch64")))]
        {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_named_as_the_kernel_names_them() {
        // fp asimd aes sha2 atomics sve | sve2 i8mm bf16 sme lrcpc3
        let caps = HwCaps {
            hwcap: 1 | 1 << 1 | 1 << 3 | 1 << 6 | 1 << 8 | 1 << 22,
            hwcap2: 1 << 1 | 1 << 13 | 1 << 14 | 1 << 23 | 1 << 46,
        };
        let names: Vec<String> = caps.names().into_iter().collect();
        assert_eq!(names, ["aes", "asimd", "atomics", "bf16", "fp", "i8mm", "lrcpc3", "sha2", "sme", "sve", "sve2"]);
    }

    #[test]
    fn bits_without_a_name_yet_still_show() {
        let caps = HwCaps { hwcap: 1 << 31 | 1 << 40, hwcap2: 1 << 63 };
        let names: Vec<String> = caps.names().into_iter().collect();
        assert_eq!(names, ["hwcap2_63", "hwcap_40", "pacg"]);
    }

    #[test]
    fn no_words_off_arm64_linux() {
        if !cfg!(all(target_os = "linux", target_arch = "aarch64")) {
            assert_eq!(HwCaps::of_this_process(), None);
        }
    }
}
