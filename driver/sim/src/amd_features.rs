//! What an AMD CPU's CPUID says about its core performance counters (AMD64 APM vol. 3, CPUID
//! Fn8000_0001 ECX and Fn8000_0022): the feature bits a [`PmuModel`](crate::cpuid::PmuModel)
//! of an AMD CPU carries, and the extended leaves they make CPUID report.
//!
//! A leaf of the crate (it names no other module), so that the CPU model can hold AMD's
//! features and the AMD presets ([`crate::amd`]) can build models without the two modules
//! naming each other.

use raw_cpuid::CpuIdResult;

/// The vendor string of AMD CPUs.
pub const AUTHENTIC_AMD: [u8; 12] = *b"AuthenticAMD";
/// CPUID 8000_0001h ECX bit 23: PerfCtrExtCore.
pub const PERF_CTR_EXT_CORE: u32 = 1 << 23;
/// CPUID 8000_0022h EAX bit 0: PerfMonV2.
pub const PERFMON_V2: u32 = 1 << 0;

/// What an AMD CPU's CPUID says about its performance counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AmdFeatures {
    /// The highest extended leaf (8000_0000h EAX).
    pub max_extended_leaf: u32,
    /// 8000_0001h ECX: PerfCtrExtCore is bit 23 (also PerfCtrExtNB 24 and PerfCtrExtLLC 28,
    /// whose counters are not modelled).
    pub ext_features_ecx: u32,
    /// 8000_0022h EAX (PerfMonV2 bit 0, LbrExtV2 bit 1) and EBX (NumPerfCtrCore 3:0,
    /// LbrV2StackSz 9:4, NumPerfCtrNB 15:10), when the leaf exists.
    pub leaf_8000_0022: (u32, u32),
}

impl AmdFeatures {
    /// Whether the 6 core counters are at the extended addresses (PerfCtrExtCore).
    pub const fn perf_ctr_ext_core(&self) -> bool {
        self.ext_features_ecx & PERF_CTR_EXT_CORE != 0
    }

    /// Whether PerfCntrGlobalCtl, -Status, -StatusClr and -StatusSet exist (PerfMonV2).
    pub const fn perfmon_v2(&self) -> bool {
        self.max_extended_leaf >= 0x8000_0022 && self.leaf_8000_0022.0 & PERFMON_V2 != 0
    }

    /// The number of core counters the CPUID describes.
    pub const fn core_counters(&self) -> u8 {
        if self.perfmon_v2() {
            (self.leaf_8000_0022.1 & 0xF) as u8
        } else if self.perf_ctr_ext_core() {
            6
        } else {
            4
        }
    }

    /// CPUID extended leaf `leaf` (8000_0000h and above) of the AMD CPU with these features,
    /// vendor string `vendor` and signature `signature` (CPUID.1:EAX): the highest extended leaf
    /// and the vendor, the signature and feature bits, PerfMonV2's leaf; zero for every other
    /// leaf.
    pub const fn extended_leaf(&self, leaf: u32, vendor: &[u8; 12], signature: u32) -> CpuIdResult {
        let zero = CpuIdResult { eax: 0, ebx: 0, ecx: 0, edx: 0 };
        if leaf > self.max_extended_leaf {
            return zero;
        }
        let v = vendor;
        match leaf {
            0x8000_0000 => CpuIdResult {
                eax: self.max_extended_leaf,
                ebx: u32::from_le_bytes([v[0], v[1], v[2], v[3]]),
                edx: u32::from_le_bytes([v[4], v[5], v[6], v[7]]),
                ecx: u32::from_le_bytes([v[8], v[9], v[10], v[11]]),
            },
            0x8000_0001 => {
                CpuIdResult { eax: signature, ebx: 0, ecx: self.ext_features_ecx, edx: 0 }
            }
            0x8000_0022 => CpuIdResult {
                eax: self.leaf_8000_0022.0,
                ebx: self.leaf_8000_0022.1,
                ecx: 0,
                edx: 0,
            },
            _ => zero,
        }
    }
}
