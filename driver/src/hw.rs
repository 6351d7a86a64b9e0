//! The hardware the driver touches, behind narrow traits: model-specific registers, CPUID and the
//! local APIC's performance-counter interrupt entry, all of the CPU the caller runs on.
//!
//! Everything else in the driver is generic over [`Hardware`], so all of it runs against the
//! simulated machine in `cargo test`. The native implementations for x86_64 ([`native`]) are the
//! only `unsafe` code of the driver.

pub use raw_cpuid::{CpuIdReader, CpuIdResult};

/// Reads and writes model-specific registers of the current CPU.
///
/// The driver only writes values built by the typed registers of [`crate::regs`], which clear
/// reserved bits, and only to MSRs the CPU's PMU description says exist.
pub trait Msrs {
    /// RDMSR.
    fn read_msr(&self, msr: u32) -> u64;
    /// WRMSR.
    fn write_msr(&self, msr: u32, value: u64);
    /// RDPMC: GP counter `index`, or fixed counter `i` as `1 << 30 | i`.
    fn read_pmc(&self, index: u32) -> u64;
}

/// The local APIC's LVT performance-monitoring-counter entry of the current CPU.
pub trait Lapic {
    /// Programs the entry for NMI delivery, unmasked. The APIC masks it again each time it
    /// delivers a PMI.
    fn unmask_pmi(&self);
    /// Masks the entry (driver unload).
    fn mask_pmi(&self);
}

/// The CPU the caller runs on: its MSRs, its CPUID and its local APIC.
pub trait Hardware: Msrs + Lapic {
    /// The CPUID reader type.
    type Cpuid: CpuIdReader;
    /// A CPUID reader for the current CPU (CPUID answers for the CPU that executes it, which
    /// differs between core types of a hybrid CPU).
    fn cpuid(&self) -> Self::Cpuid;
    /// RDTSC.
    fn read_tsc(&self) -> u64;
}

/// MSR numbers the driver uses (Intel SDM Vol. 4, "Architectural MSRs").
pub mod msr {
    /// IA32_PMC0: GP counter 0; legacy writes take 32 bits, sign-extended from bit 31.
    pub const IA32_PMC0: u32 = 0x0C1;
    /// IA32_PERFEVTSEL0.
    pub const IA32_PERFEVTSEL0: u32 = 0x186;
    /// IA32_DEBUGCTL (bit 12: FREEZE_PERFMON_ON_PMI).
    pub const IA32_DEBUGCTL: u32 = 0x1D9;
    /// IA32_FIXED_CTR0.
    pub const IA32_FIXED_CTR0: u32 = 0x309;
    /// IA32_PERF_CAPABILITIES (when CPUID.1:ECX.PDCM).
    pub const IA32_PERF_CAPABILITIES: u32 = 0x345;
    /// IA32_FIXED_CTR_CTRL.
    pub const IA32_FIXED_CTR_CTRL: u32 = 0x38D;
    /// IA32_PERF_GLOBAL_STATUS.
    pub const IA32_PERF_GLOBAL_STATUS: u32 = 0x38E;
    /// IA32_PERF_GLOBAL_CTRL.
    pub const IA32_PERF_GLOBAL_CTRL: u32 = 0x38F;
    /// IA32_PERF_GLOBAL_OVF_CTRL, called IA32_PERF_GLOBAL_STATUS_RESET from v4 on.
    pub const IA32_PERF_GLOBAL_OVF_CTRL: u32 = 0x390;
    /// IA32_A_PMC0: the full-width write alias of GP counter 0 (PERF_CAPABILITIES.FW_WRITE).
    pub const IA32_A_PMC0: u32 = 0x4C1;
    /// IA32_TIME_STAMP_COUNTER.
    pub const IA32_TIME_STAMP_COUNTER: u32 = 0x010;
    /// The x2APIC LVT performance-monitoring entry.
    pub const IA32_X2APIC_LVT_PMI: u32 = 0x834;
}

/// Native implementations for a kernel running on x86_64 hardware.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub mod native {
    use super::{CpuIdReader, CpuIdResult, Hardware, Lapic, Msrs, msr};

    /// The CPU the code runs on, accessed with RDMSR, WRMSR, RDPMC, RDTSC and CPUID. Must be used
    /// in ring 0: the instructions fault in user mode. The PMI entry is reached through the
    /// x2APIC MSR; a kernel that runs its local APIC in xAPIC mode implements [`Lapic`] over its
    /// own MMIO mapping instead.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct NativeCpu;

    impl Msrs for NativeCpu {
        fn read_msr(&self, msr: u32) -> u64 {
            // SAFETY: the driver reads only MSRs that the CPU's PMU description (from CPUID)
            // says exist, in ring 0, where RDMSR of an existing MSR has no side effects.
            unsafe { x86::msr::rdmsr(msr) }
        }

        fn write_msr(&self, msr: u32, value: u64) {
            // SAFETY: the driver writes only PMU MSRs that CPUID says exist, with values built by
            // the typed registers of `crate::regs`, whose reserved bits are clear; such writes
            // change only performance-monitoring state and cannot #GP.
            unsafe { x86::msr::wrmsr(msr, value) }
        }

        fn read_pmc(&self, index: u32) -> u64 {
            let (low, high): (u32, u32);
            // SAFETY: RDPMC reads a counter that CPUID says exists (the driver computes `index`
            // from the PMU description) and has no side effects; in ring 0 CR4.PCE is irrelevant.
            unsafe {
                core::arch::asm!("rdpmc", in("ecx") index, out("eax") low, out("edx") high,
                    options(nomem, nostack, preserves_flags));
            }
            u64::from(high) << 32 | u64::from(low)
        }
    }

    impl Lapic for NativeCpu {
        fn unmask_pmi(&self) {
            // NMI delivery mode (0b100 << 8), mask bit 16 clear.
            self.write_msr(msr::IA32_X2APIC_LVT_PMI, 4 << 8);
        }

        fn mask_pmi(&self) {
            self.write_msr(msr::IA32_X2APIC_LVT_PMI, 4 << 8 | 1 << 16);
        }
    }

    /// CPUID of the current CPU.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct NativeCpuid;

    impl CpuIdReader for NativeCpuid {
        fn cpuid2(&self, eax: u32, ecx: u32) -> CpuIdResult {
            let r = core::arch::x86_64::__cpuid_count(eax, ecx);
            CpuIdResult { eax: r.eax, ebx: r.ebx, ecx: r.ecx, edx: r.edx }
        }
    }

    impl Hardware for NativeCpu {
        type Cpuid = NativeCpuid;

        fn cpuid(&self) -> NativeCpuid {
            NativeCpuid
        }

        fn read_tsc(&self) -> u64 {
            // SAFETY: RDTSC only reads the time-stamp counter.
            unsafe { core::arch::x86_64::_rdtsc() }
        }
    }
}
