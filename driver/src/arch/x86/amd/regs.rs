//! Typed values of the AMD core performance-counter registers (AMD64 APM vol. 2 §13.2.1,
//! Figure 13-7 "Performance Event-Select Register (PerfEvtSeln)"; PerfMonV2's global registers
//! from the family 19h PPR).
//!
//! A [`PerfCtl`] can only hold bits the register defines: user configurations with any other bit
//! are refused when they are made, so no reserved bit reaches WRMSR (which would #GP).

use bitflags::bitflags;

bitflags! {
    /// The single-bit flags of PERF_CTL.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct PerfCtlFlags: u64 {
        /// Count in ring > 0.
        const USR = 1 << 16;
        /// Count in ring 0.
        const OS = 1 << 17;
        /// Count edges (deasserted to asserted transitions).
        const EDGE = 1 << 18;
        /// Raise an interrupt (APIC LVT performance-counter entry) at overflow.
        const INT = 1 << 20;
        /// Enable the counter.
        const EN = 1 << 22;
        /// Invert the counter-mask comparison.
        const INV = 1 << 23;
        /// Count only while a guest runs (SVM).
        const GUEST_ONLY = 1 << 40;
        /// Count only while the host runs (SVM).
        const HOST_ONLY = 1 << 41;
    }
}

/// PERF_CTL: a core counter's control register. Bits 19 (pin control on K8) and 21 are
/// reserved on the families this driver knows, as are 39:36 and 63:42.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct PerfCtl(u64);

impl PerfCtl {
    /// Event select bits 7:0.
    pub const EVENT_LOW: u64 = 0xFF;
    /// Unit mask, bits 15:8.
    pub const UMASK: u64 = 0xFF << 8;
    /// Counter mask (threshold), bits 31:24.
    pub const CMASK: u64 = 0xFF << 24;
    /// Event select bits 11:8, at bits 35:32.
    pub const EVENT_HIGH: u64 = 0xF << 32;
    /// Every bit the register defines.
    pub const VALID: u64 =
        Self::EVENT_LOW | Self::UMASK | Self::CMASK | Self::EVENT_HIGH | PerfCtlFlags::all().bits();

    /// A register value from raw bits; `None` if a reserved bit is set.
    pub const fn new(bits: u64) -> Option<Self> {
        if bits & !Self::VALID != 0 { None } else { Some(PerfCtl(bits)) }
    }
    /// The raw value.
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// The 12-bit event select (bits 35:32 then 7:0).
    pub const fn event(self) -> u16 {
        ((self.0 >> 24) & 0xF00 | self.0 & 0xFF) as u16
    }
    /// The unit mask.
    pub const fn umask(self) -> u8 {
        (self.0 >> 8) as u8
    }
    /// The counter mask.
    pub const fn cmask(self) -> u8 {
        (self.0 >> 24) as u8
    }
    /// Whether all of `flags` are set.
    pub const fn has(self, flags: PerfCtlFlags) -> bool {
        self.0 & flags.bits() == flags.bits()
    }
    /// The value with `flags` set or cleared (every flag is a defined bit, so the value stays
    /// valid).
    pub const fn with(self, flags: PerfCtlFlags, on: bool) -> Self {
        if on { PerfCtl(self.0 | flags.bits()) } else { PerfCtl(self.0 & !flags.bits()) }
    }
    /// The value from bits [`PerfCtl::bits`] returned (a cached image), so already valid.
    pub(crate) const fn from_built_bits(bits: u64) -> Self {
        PerfCtl(bits)
    }
}

/// A set of core counters: counter `i` at bit `i`, the layout of PerfCntrGlobalCtl, -Status and
/// -StatusClr. Only counters the CPU has are ever put in one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct CoreCounters(u64);

impl CoreCounters {
    /// No counter.
    pub const EMPTY: CoreCounters = CoreCounters(0);

    /// Counters `0..n`.
    pub const fn first(n: u8) -> Self {
        CoreCounters(crate::backend::low_bits(n as u32))
    }
    /// The counters of `bits` that are also in `existing`.
    pub const fn within(bits: u64, existing: CoreCounters) -> Self {
        CoreCounters(bits & existing.0)
    }
    /// A set from bits [`CoreCounters::bits`] returned for counters that exist (a cached copy).
    pub(crate) const fn from_built_bits(bits: u64) -> Self {
        CoreCounters(bits)
    }
    /// The raw bits.
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// Counters in either set.
    pub const fn union(self, other: CoreCounters) -> Self {
        CoreCounters(self.0 | other.0)
    }
    /// Counters of this set not in `other`.
    pub const fn minus(self, other: CoreCounters) -> Self {
        CoreCounters(self.0 & !other.0)
    }
    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The counter numbers in the set, lowest first.
    pub fn iter(self) -> impl Iterator<Item = u8> {
        let mut bits = self.0;
        core::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let index = bits.trailing_zeros() as u8;
            bits &= bits - 1;
            Some(index)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_ctl_refuses_reserved_bits() {
        for reserved in [1u64 << 19, 1 << 21, 1 << 36, 1 << 39, 1 << 42, 1 << 63] {
            assert!(PerfCtl::new(reserved).is_none(), "{reserved:#x}");
        }
        let all = PerfCtl::new(PerfCtl::VALID).expect("every defined bit");
        assert_eq!(all.bits(), 0x0000_030F_FFD7_FFFF);
    }

    #[test]
    fn perf_ctl_splits_the_twelve_bit_event_select() {
        // ls_not_halted_cyc 0x076, and a 12-bit event 0x1C7 with unit mask 0x3F.
        let cycles = PerfCtl::new(0x0003_0076).unwrap();
        assert_eq!((cycles.event(), cycles.umask()), (0x076, 0));
        assert!(cycles.has(PerfCtlFlags::USR | PerfCtlFlags::OS));
        let wide = PerfCtl::new(0x1_0A41_3FC7).unwrap();
        assert_eq!((wide.event(), wide.umask(), wide.cmask()), (0x1C7, 0x3F, 0x0A));
        assert!(wide.has(PerfCtlFlags::USR | PerfCtlFlags::EN) && !wide.has(PerfCtlFlags::INT));
        assert_eq!(wide.with(PerfCtlFlags::EN, false).bits(), 0x1_0A01_3FC7);
    }

    #[test]
    fn core_counter_sets_use_the_global_ctl_layout() {
        let six = CoreCounters::first(6);
        assert_eq!(six.bits(), 0x3F);
        assert_eq!(CoreCounters::within(0xFF | 1 << 58, six).bits(), 0x3F);
        let set = CoreCounters::within(0b10_0101, six);
        assert_eq!(set.iter().collect::<Vec<_>>(), [0, 2, 5]);
        assert_eq!(six.minus(set).bits(), 0b01_1010);
    }
}
