//! The CPU the code runs on, for a kernel running on x86_64 hardware: RDMSR, WRMSR, RDPMC, RDTSC
//! and CPUID.

use super::msr;
use crate::hw::{CpuIdReader, CpuIdResult, Hardware, Lapic, Msrs};

/// The CPU the code runs on. RDMSR, WRMSR and RDPMC fault in user mode, so making one is
/// `unsafe` ([`NativeCpu::new`]): only ring-0 code may. The PMI entry is reached through the
/// x2APIC MSR; a kernel that runs its local APIC in xAPIC mode implements [`Lapic`] over its own
/// MMIO mapping instead.
#[derive(Debug)]
pub struct NativeCpu(());

impl NativeCpu {
    /// The hardware of the CPU the caller runs on.
    ///
    /// # Safety
    /// The caller runs in ring 0 with the local APIC in x2APIC mode, and hands the value to the
    /// driver alone: the driver owns the performance-monitoring MSRs from then on.
    pub unsafe fn new() -> NativeCpu {
        NativeCpu(())
    }
}

impl Msrs for NativeCpu {
    unsafe fn read_msr(&self, msr: u32) -> u64 {
        // SAFETY: the caller guarantees that `msr` exists; `NativeCpu::new` that we run in
        // ring 0, where RDMSR of an existing MSR has no side effects.
        unsafe { x86::msr::rdmsr(msr) }
    }

    unsafe fn write_msr(&self, msr: u32, value: u64) {
        // SAFETY: the caller guarantees a PMU MSR the driver owns, existing, with no reserved bit
        // set: such writes change only performance-monitoring state and cannot #GP.
        unsafe { x86::msr::wrmsr(msr, value) }
    }

    unsafe fn read_pmc(&self, index: u32) -> u64 {
        let (low, high): (u32, u32);
        // SAFETY: the caller guarantees the counter exists; RDPMC has no side effects and in
        // ring 0 (`NativeCpu::new`) CR4.PCE is irrelevant.
        unsafe {
            core::arch::asm!("rdpmc", in("ecx") index, out("eax") low, out("edx") high,
                options(nomem, nostack, preserves_flags));
        }
        u64::from(high) << 32 | u64::from(low)
    }
}

impl Lapic for NativeCpu {
    fn unmask_pmi(&self) {
        // SAFETY: the x2APIC LVT PMI entry exists in x2APIC mode (`NativeCpu::new`); NMI delivery
        // (0b100 << 8) with the mask bit 16 clear sets no reserved bit.
        unsafe { self.write_msr(msr::IA32_X2APIC_LVT_PMI, 4 << 8) }
    }

    fn mask_pmi(&self) {
        // SAFETY: as in `unmask_pmi`, with the mask bit set.
        unsafe { self.write_msr(msr::IA32_X2APIC_LVT_PMI, 4 << 8 | 1 << 16) }
    }
}

/// CPUID of the current CPU (any privilege level).
#[derive(Debug, Clone, Copy, Default)]
pub struct NativeCpuid;

impl CpuIdReader for NativeCpuid {
    fn cpuid2(&self, eax: u32, ecx: u32) -> CpuIdResult {
        let r = core::arch::x86_64::__cpuid_count(eax, ecx);
        CpuIdResult { eax: r.eax, ebx: r.ebx, ecx: r.ecx, edx: r.edx }
    }
}

/// RDTSC: the time-stamp counter of the current CPU (allowed at any privilege level unless the
/// kernel set CR4.TSD).
pub fn read_tsc() -> u64 {
    // SAFETY: RDTSC only reads the time-stamp counter.
    unsafe { core::arch::x86_64::_rdtsc() }
}

impl Hardware for NativeCpu {
    type Cpuid = NativeCpuid;

    fn cpuid(&self) -> NativeCpuid {
        NativeCpuid
    }

    fn read_tsc(&self) -> u64 {
        read_tsc()
    }
}
