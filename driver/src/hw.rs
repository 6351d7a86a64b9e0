//! The hardware the driver touches, behind narrow traits: model-specific registers, CPUID and the
//! local APIC's performance-counter interrupt entry, all of the CPU the caller runs on.
//!
//! Everything in the driver is generic over [`Hardware`], so all of it runs against the simulated
//! machine in `cargo test`. Reading or writing an MSR, or reading a counter, is `unsafe`: naming
//! an MSR or a counter that does not exist, or writing a reserved bit, raises #GP in ring 0, and
//! writing another subsystem's MSR breaks it. Only the vendor backends of [`crate::arch`] call
//! these methods, with values built by their typed registers; the native implementation for
//! x86_64 is [`crate::arch::x86::native`].

pub use raw_cpuid::{CpuIdReader, CpuIdResult};

/// Reads and writes model-specific registers of the current CPU.
pub trait Msrs {
    /// RDMSR.
    ///
    /// # Safety
    /// `msr` exists on the current CPU (its PMU description, from CPUID, says so).
    unsafe fn read_msr(&self, msr: u32) -> u64;
    /// WRMSR.
    ///
    /// # Safety
    /// `msr` is a performance-monitoring MSR the driver owns that exists on the current CPU,
    /// and `value` has none of its reserved bits set (it was built by the register's typed
    /// value for this CPU).
    unsafe fn write_msr(&self, msr: u32, value: u64);
    /// RDPMC: GP counter `index`, or fixed counter `i` as `1 << 30 | i`.
    ///
    /// # Safety
    /// The counter exists on the current CPU.
    unsafe fn read_pmc(&self, index: u32) -> u64;
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
