//! The CPU's identity, from CPUID leaves 0 and 1: what names it for libpmc's event tables.

use crate::hw::CpuIdReader;
use crate::text::CpuIdString;
use core::fmt::Write;

/// The CPU's vendor, family, model and stepping, as CPUID leaves 0 and 1 report them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CpuSignature {
    /// The vendor string, e.g. `GenuineIntel`.
    pub vendor: [u8; 12],
    /// Display family (base family plus extended family for family 0xF).
    pub family: u32,
    /// Display model (with the extended model for families 6 and 0xF).
    pub model: u32,
    /// Stepping.
    pub stepping: u32,
}

impl CpuSignature {
    /// Reads CPUID leaves 0 and 1.
    ///
    /// Decoded here rather than through raw-cpuid's `FeatureInfo`: that view adds the extended
    /// family in a `u8`, which overflows (a panic in a debug build) when a hypervisor reports an
    /// extended family above 0xF0, and it decodes unknown vendors differently from Intel and AMD.
    /// The display family and model are defined the same way by both vendors' manuals.
    pub fn read<R: CpuIdReader>(cpuid: &R) -> Self {
        let leaf0 = cpuid.cpuid1(0);
        let mut vendor = [0; 12];
        vendor[0..4].copy_from_slice(&leaf0.ebx.to_le_bytes());
        vendor[4..8].copy_from_slice(&leaf0.edx.to_le_bytes());
        vendor[8..12].copy_from_slice(&leaf0.ecx.to_le_bytes());
        let eax = cpuid.cpuid1(1).eax;
        let base_family = eax >> 8 & 0xF;
        let base_model = eax >> 4 & 0xF;
        let family =
            if base_family == 0xF { base_family + (eax >> 20 & 0xFF) } else { base_family };
        let model = if base_family == 0x6 || base_family == 0xF {
            (eax >> 16 & 0xF) << 4 | base_model
        } else {
            base_model
        };
        CpuSignature { vendor, family, model, stepping: eax & 0xF }
    }

    /// Whether this is an Intel CPU.
    pub fn is_intel(&self) -> bool {
        &self.vendor == b"GenuineIntel"
    }

    /// Whether this is an AMD CPU (or a Hygon one, which has AMD's PMU).
    pub fn is_amd(&self) -> bool {
        &self.vendor == b"AuthenticAMD" || &self.vendor == b"HygonGenuine"
    }

    /// The `kern.hwpmc.cpuid` string libpmc uses to choose its event tables:
    /// `GenuineIntel-6-55` (vendor, decimal family, two upper-case hex digits of model).
    pub fn cpuid_string(&self) -> CpuIdString {
        let mut out = CpuIdString::new();
        let vendor_len = self.vendor.iter().position(|&b| b == 0).unwrap_or(12);
        let vendor = core::str::from_utf8(&self.vendor[..vendor_len]).unwrap_or("Unknown");
        // Writing into a fixed buffer cannot fail; it truncates.
        let _ = write!(out, "{vendor}-{}-{:02X}", self.family, self.model);
        out
    }
}

/// The `pmc_cputype` for a CPU (`has_pmu`: it has a PMU the driver drives). It names the CPU for
/// libpmc's event tables; it never decides whether the CPU is supported.
pub(crate) fn cpu_type_of(signature: &CpuSignature, has_pmu: bool) -> u32 {
    use crate::abi::cpu_type;
    if signature.is_intel() && has_pmu && signature.family == 6 {
        match signature.model {
            0x0F | 0x17 => return cpu_type::INTEL_CORE2,
            0x4E | 0x5E | 0x8E | 0x9E | 0xA5 | 0xA6 => return cpu_type::INTEL_SKYLAKE,
            0x55 => return cpu_type::INTEL_SKYLAKE_XEON,
            _ => {}
        }
    }
    if signature.is_amd() {
        return cpu_type::AMD_K8;
    }
    cpu_type::GENERIC
}

#[cfg(test)]
mod tests {
    use super::CpuSignature;
    use raw_cpuid::CpuIdResult;

    fn skylake(eax: u32, _ecx: u32) -> CpuIdResult {
        match eax {
            0 => CpuIdResult {
                eax: 0x16,
                ebx: u32::from_le_bytes(*b"Genu"),
                edx: u32::from_le_bytes(*b"ineI"),
                ecx: u32::from_le_bytes(*b"ntel"),
            },
            1 => CpuIdResult { eax: 0x0005_06E3, ebx: 0, ecx: 0, edx: 0 },
            _ => CpuIdResult { eax: 0, ebx: 0, ecx: 0, edx: 0 },
        }
    }

    #[test]
    fn the_largest_extended_family_does_not_overflow() {
        let reader = |eax: u32, ecx: u32| match eax {
            1 => CpuIdResult { eax: 0x0FFF_0F00, ebx: 0, ecx: 0, edx: 0 },
            _ => skylake(eax, ecx),
        };
        let signature = CpuSignature::read(&reader);
        assert_eq!((signature.family, signature.model), (0xF + 0xFF, 0xF0));
    }

    #[test]
    fn cpuid_string_is_vendor_family_and_hex_model() {
        let signature = CpuSignature::read(&skylake);
        assert_eq!((signature.family, signature.model, signature.stepping), (6, 0x5E, 3));
        assert_eq!(signature.cpuid_string().as_bytes(), b"GenuineIntel-6-5E");
    }
}
