//! Discovering an AMD CPU's core performance counters from CPUID (AMD64 APM vol. 2 §13.2 and
//! vol. 3, CPUID Fn8000_0001 and Fn8000_0022).
//!
//! * Every AMD CPU of family 0Fh (K8) or later has the 4 legacy counters (PERF_CTL0–3 at
//!   C001_0000h, PERF_CTR0–3 at C001_0004h): no CPUID bit announces them.
//! * PerfCtrExtCore (CPUID 8000_0001h ECX bit 23): 6 counters, control at C001_0200h + 2i and
//!   counter at C001_0201h + 2i.
//! * PerfMonV2 (CPUID 8000_0022h EAX bit 0): the global control and status registers
//!   (C000_0300h–C000_0303h), and EBX\[3:0\] gives the number of core counters.
//!
//! Every counter is 48 bits wide. A hypervisor that offers no vPMU usually accepts the legacy
//! MSRs and counts nothing (KVM without a PMU ignores them), so under a hypervisor (CPUID.1:ECX
//! bit 31) the counters are trusted only when CPUID advertises PerfCtrExtCore or PerfMonV2,
//! which a hypervisor sets only when it virtualises the counters. A CPU the driver cannot drive
//! is described as having no PMU: the driver then offers SOFT and TSC only, and never touches
//! a counter MSR.

use super::msr;
use crate::arch::x86::cpuid::CpuSignature;
use crate::hw::CpuIdReader;

/// The core counters of one AMD CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AmdPmu {
    /// Number of core counters (4 legacy, or up to 6).
    pub counters: u8,
    /// Whether the counters are at the extended addresses (PerfCtrExtCore).
    pub extended: bool,
    /// Whether PerfCntrGlobalCtl / Status / StatusClr exist (PerfMonV2).
    pub perfmon_v2: bool,
    /// Width of the counters in bits.
    pub width: u8,
}

impl AmdPmu {
    /// Describes the core counters of the CPU whose CPUID `cpuid` answers for; `None` if it is
    /// not an AMD (or Hygon) CPU of family 0Fh or later, or a guest whose hypervisor advertises
    /// no counters.
    pub fn discover<R: CpuIdReader>(cpuid: &R) -> Option<AmdPmu> {
        let signature = CpuSignature::read(cpuid);
        if !signature.is_amd() || signature.family < 0xF {
            return None;
        }
        let max_extended = cpuid.cpuid1(0x8000_0000).eax;
        let extended = max_extended >= 0x8000_0001
            && cpuid.cpuid1(0x8000_0001).ecx & msr::CPUID_PERF_CTR_EXT_CORE != 0;
        let leaf_22 = (max_extended >= 0x8000_0022).then(|| cpuid.cpuid1(0x8000_0022));
        let perfmon_v2 = leaf_22.is_some_and(|leaf| leaf.eax & msr::CPUID_PERFMON_V2 != 0);
        let hypervisor = cpuid.cpuid1(1).ecx & (1 << 31) != 0;
        if hypervisor && !extended && !perfmon_v2 {
            return None;
        }
        let counters = match leaf_22 {
            // PerfMonV2 counts its core counters; the extended layout holds at most 6.
            Some(leaf) if perfmon_v2 => (leaf.ebx & 0xF) as u8,
            _ if extended => msr::MAX_CORE_COUNTERS,
            _ => msr::LEGACY_CORE_COUNTERS,
        };
        let counters = counters.min(msr::MAX_CORE_COUNTERS);
        // PerfMonV2 without the extended layout is not a combination AMD makes: drive such a
        // CPU through the legacy registers alone.
        let perfmon_v2 = perfmon_v2 && extended;
        let counters = if extended { counters } else { counters.min(msr::LEGACY_CORE_COUNTERS) };
        if counters == 0 {
            return None;
        }
        Some(AmdPmu { counters, extended, perfmon_v2, width: msr::COUNTER_WIDTH })
    }

    /// The PERF_CTL MSR of counter `index` (below [`AmdPmu::counters`]).
    pub const fn ctl_msr(&self, index: u8) -> u32 {
        if self.extended {
            msr::PERF_CTL0 + 2 * index as u32
        } else {
            msr::PERF_CTL0_LEGACY + index as u32
        }
    }

    /// The PERF_CTR MSR of counter `index` (below [`AmdPmu::counters`]).
    pub const fn ctr_msr(&self, index: u8) -> u32 {
        if self.extended {
            msr::PERF_CTR0 + 2 * index as u32
        } else {
            msr::PERF_CTR0_LEGACY + index as u32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raw_cpuid::CpuIdResult;

    /// CPUID of an AMD CPU: family 19h model 11h (Zen 4, EPYC 9004), with the given
    /// 8000_0001h ECX, 8000_0022h EAX/EBX and hypervisor bit.
    fn amd(
        ext_ecx: u32,
        leaf_22: (u32, u32),
        hypervisor: bool,
    ) -> impl Fn(u32, u32) -> CpuIdResult + Clone {
        move |eax, _| {
            let zero = CpuIdResult { eax: 0, ebx: 0, ecx: 0, edx: 0 };
            match eax {
                0 => CpuIdResult {
                    eax: 0x10,
                    ebx: u32::from_le_bytes(*b"Auth"),
                    edx: u32::from_le_bytes(*b"enti"),
                    ecx: u32::from_le_bytes(*b"cAMD"),
                },
                1 => CpuIdResult { eax: 0x00A1_0F11, ecx: u32::from(hypervisor) << 31, ..zero },
                0x8000_0000 => CpuIdResult { eax: 0x8000_0028, ..zero },
                0x8000_0001 => CpuIdResult { ecx: ext_ecx, ..zero },
                0x8000_0022 => CpuIdResult { eax: leaf_22.0, ebx: leaf_22.1, ..zero },
                _ => zero,
            }
        }
    }

    #[test]
    fn perfmon_v2_gives_the_counters_of_leaf_8000_0022() {
        let pmu = AmdPmu::discover(&amd(1 << 23, (1, 6), false)).unwrap();
        assert_eq!(pmu, AmdPmu { counters: 6, extended: true, perfmon_v2: true, width: 48 });
        assert_eq!((pmu.ctl_msr(5), pmu.ctr_msr(5)), (0xC001_020A, 0xC001_020B));
    }

    #[test]
    fn perf_ctr_ext_core_gives_six_counters_without_global_registers() {
        let pmu = AmdPmu::discover(&amd(1 << 23, (0, 0), false)).unwrap();
        assert_eq!(pmu, AmdPmu { counters: 6, extended: true, perfmon_v2: false, width: 48 });
    }

    #[test]
    fn no_feature_bit_gives_the_four_legacy_counters() {
        let pmu = AmdPmu::discover(&amd(0, (0, 0), false)).unwrap();
        assert_eq!(pmu.counters, 4);
        assert_eq!((pmu.ctl_msr(3), pmu.ctr_msr(3)), (0xC001_0003, 0xC001_0007));
    }

    #[test]
    fn a_guest_without_advertised_counters_has_no_pmu() {
        assert_eq!(AmdPmu::discover(&amd(0, (0, 0), true)), None);
        assert!(AmdPmu::discover(&amd(1 << 23, (0, 0), true)).is_some());
    }

    #[test]
    fn intel_cpus_are_not_amd_pmus() {
        let intel = |eax: u32, _: u32| match eax {
            0 => CpuIdResult {
                eax: 0x16,
                ebx: u32::from_le_bytes(*b"Genu"),
                edx: u32::from_le_bytes(*b"ineI"),
                ecx: u32::from_le_bytes(*b"ntel"),
            },
            _ => CpuIdResult { eax: 0x0005_06E3, ebx: 0, ecx: 1 << 23, edx: 0 },
        };
        assert_eq!(AmdPmu::discover(&intel), None);
    }
}
