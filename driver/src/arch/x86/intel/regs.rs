//! Typed values of the Intel architectural performance-monitoring registers.
//!
//! Each type can only hold bits that are defined for the PMU it was built for: constructors take
//! the CPU's [`IntelPmu`](super::discovery::IntelPmu) description (or a mask derived from it) and either
//! refuse reserved bits (for values that come from users) or never set them (for values the driver
//! builds). Writing a reserved bit raises #GP, so nothing reaches an MSR without passing through
//! these types. References are to the Intel SDM Vol. 3B, chapter 21 ("Performance Monitoring").

use bitflags::bitflags;

bitflags! {
    /// The single-bit flags of IA32_PERFEVTSELx (SDM Vol. 3B §21.2.1.1, Figure 21-1; AnyThread
    /// from §21.2.3).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct EvtSelFlags: u64 {
        /// Count in ring > 0.
        const USR = 1 << 16;
        /// Count in ring 0.
        const OS = 1 << 17;
        /// Count edges (deasserted to asserted transitions).
        const EDGE = 1 << 18;
        /// Pin control.
        const PC = 1 << 19;
        /// Raise a PMI on overflow.
        const INT = 1 << 20;
        /// Count on both hyperthreads of the core (v3–v4, when CPUID does not deprecate it;
        /// privileged here).
        const ANY = 1 << 21;
        /// Enable the counter.
        const EN = 1 << 22;
        /// Invert the counter-mask comparison.
        const INV = 1 << 23;
    }
}

/// IA32_PERFEVTSELx: the event select register of a GP counter (SDM Vol. 3B §21.2.1.1, Figure
/// 21-1; bit 21 AnyThread from §21.2.3, deprecated from perfmon v5 when CPUID.0AH:EDX\[15\]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct PerfEvtSel(u64);

impl PerfEvtSel {
    /// Event select, bits 7:0.
    pub const EVENT_SELECT: u64 = 0xFF;
    /// Unit mask, bits 15:8.
    pub const UMASK: u64 = 0xFF << 8;
    /// [`EvtSelFlags::USR`]'s bit, for encoders.
    pub const USR: u64 = EvtSelFlags::USR.bits();
    /// [`EvtSelFlags::OS`]'s bit.
    pub const OS: u64 = EvtSelFlags::OS.bits();
    /// [`EvtSelFlags::EDGE`]'s bit.
    pub const EDGE: u64 = EvtSelFlags::EDGE.bits();
    /// [`EvtSelFlags::PC`]'s bit.
    pub const PC: u64 = EvtSelFlags::PC.bits();
    /// [`EvtSelFlags::INT`]'s bit.
    pub const INT: u64 = EvtSelFlags::INT.bits();
    /// [`EvtSelFlags::ANY`]'s bit.
    pub const ANY: u64 = EvtSelFlags::ANY.bits();
    /// [`EvtSelFlags::EN`]'s bit.
    pub const EN: u64 = EvtSelFlags::EN.bits();
    /// [`EvtSelFlags::INV`]'s bit.
    pub const INV: u64 = EvtSelFlags::INV.bits();
    /// Counter mask (threshold), bits 31:24.
    pub const CMASK: u64 = 0xFF << 24;
    /// Second unit mask, bits 47:40 (CPUID.23H.0:EBX\[0\]; SDM Vol. 3B §21.2.8 "Architectural
    /// Performance Monitoring Version 6").
    pub const UMASK2: u64 = 0xFF << 40;
    /// The bits every architectural PMU defines (all of 31:0 but AnyThread).
    pub const ARCHITECTURAL: u64 = 0xFFFF_FFFF & !Self::ANY;

    /// A register value from raw bits; `None` if any bit outside `valid` is set. The only way
    /// to a value with AnyThread.
    pub const fn new(bits: u64, valid: u64) -> Option<Self> {
        if bits & !valid != 0 { None } else { Some(PerfEvtSel(bits)) }
    }

    /// The raw value.
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// Event select.
    pub const fn event_select(self) -> u8 {
        self.0 as u8
    }
    /// Unit mask.
    pub const fn umask(self) -> u8 {
        (self.0 >> 8) as u8
    }
    /// Counter mask.
    pub const fn cmask(self) -> u8 {
        (self.0 >> 24) as u8
    }
    /// Second unit mask.
    pub const fn umask2(self) -> u8 {
        (self.0 >> 40) as u8
    }
    /// Whether all of `flags` are set.
    pub const fn has(self, flags: EvtSelFlags) -> bool {
        self.0 & flags.bits() == flags.bits()
    }
    /// The value with `flags` set or cleared. AnyThread, the one flag some PMUs lack, is never
    /// set this way (only [`PerfEvtSel::new`] checks it against the PMU), so the value stays
    /// valid for the PMU it was built for.
    pub const fn with(self, flags: EvtSelFlags, on: bool) -> Self {
        if on {
            PerfEvtSel(self.0 | flags.difference(EvtSelFlags::ANY).bits())
        } else {
            PerfEvtSel(self.0 & !flags.bits())
        }
    }
}

bitflags! {
    /// The bits of one counter's 4-bit field in IA32_FIXED_CTR_CTRL (SDM Vol. 3B §21.2.2,
    /// Figure 21-2).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct FixedFlags: u8 {
        /// Count in ring 0.
        const OS = 0x1;
        /// Count in ring > 0.
        const USR = 0x2;
        /// AnyThread (v3–v4).
        const ANY = 0x4;
        /// PMI on overflow.
        const PMI = 0x8;
    }
}

/// One counter's 4-bit field in IA32_FIXED_CTR_CTRL (SDM Vol. 3B §21.2.2, Figure 21-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct FixedCtrField(FixedFlags);

impl FixedCtrField {
    /// A field of `flags`; `None` if a flag outside `valid` (what the PMU defines) is set.
    pub const fn new(flags: FixedFlags, valid: FixedFlags) -> Option<Self> {
        if flags.difference(valid).is_empty() { Some(FixedCtrField(flags)) } else { None }
    }
    /// The field with a PMI at overflow (defined in every field of every PMU with fixed
    /// counters, so the field stays valid).
    pub const fn with_pmi(self) -> Self {
        FixedCtrField(self.0.union(FixedFlags::PMI))
    }
    /// The flags.
    pub const fn flags(self) -> FixedFlags {
        self.0
    }
    /// The raw nibble.
    pub const fn bits(self) -> u8 {
        self.0.bits()
    }
    /// Whether the field enables counting at all (OS or USR).
    pub const fn is_enabled(self) -> bool {
        self.0.intersects(FixedFlags::OS.union(FixedFlags::USR))
    }
}

/// IA32_FIXED_CTR_CTRL: a 4-bit field per fixed counter at bit `4 * i` (SDM Vol. 3B §21.2.2).
/// Only counters that exist can be given a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct FixedCtrCtrl(u64);

impl FixedCtrCtrl {
    /// A value from raw bits, keeping only the fields of the counters in `existing` (bit `i` for
    /// fixed counter `i`) and only the field bits in `field_valid`.
    pub const fn from_bits_within(bits: u64, existing: u32, field_valid: FixedFlags) -> Self {
        // One nibble of `field_valid` per existing counter (bits 0..16 only).
        let mut counters = existing & 0xFFFF;
        let mut mask = 0u64;
        while counters != 0 {
            mask |= (field_valid.bits() as u64) << (4 * counters.trailing_zeros());
            counters &= counters - 1;
        }
        FixedCtrCtrl(bits & mask)
    }
    /// A value from bits that [`FixedCtrCtrl::bits`] returned for a value built for the same
    /// PMU (a cached image), so already valid.
    pub(crate) const fn from_built_bits(bits: u64) -> Self {
        FixedCtrCtrl(bits)
    }
    /// The raw value.
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// Counter `index`'s field.
    pub const fn field(self, index: u8) -> FixedCtrField {
        // The image holds only fields built from `FixedFlags`.
        FixedCtrField(FixedFlags::from_bits_truncate((self.0 >> (4 * index as u32)) as u8))
    }
    /// The value with counter `index`'s field replaced; `None` if the counter is not in
    /// `existing` (bit `i` for fixed counter `i`; v5 CPUs may have gaps).
    pub const fn with_field(self, index: u8, existing: u32, field: FixedCtrField) -> Option<Self> {
        if index >= 16 || existing >> index & 1 == 0 {
            return None;
        }
        Some(self.with_known_field(index, field))
    }
    /// The value with counter `index`'s field replaced, for an `index` already known to be one
    /// of the PMU's fixed counters (checked once, where the caller got it).
    pub(crate) const fn with_known_field(self, index: u8, field: FixedCtrField) -> Self {
        let shift = 4 * (index as u32 % 16);
        FixedCtrCtrl(self.0 & !(0xF << shift) | (field.bits() as u64) << shift)
    }
}

/// IA32_PERF_GLOBAL_CTRL: an enable bit per GP counter (bits 0..n) and per fixed counter
/// (bits 32..32+m) (SDM Vol. 3B §21.2.2, Figure 21-3). Perfmon v2 and later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct GlobalCtrl(u64);

impl GlobalCtrl {
    /// Nothing enabled.
    pub const NONE: GlobalCtrl = GlobalCtrl(0);

    /// The raw value.
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// Every counter in `counters` enabled (a [`CounterSet`] holds only counters that exist).
    pub const fn from_counters(counters: CounterSet) -> Self {
        GlobalCtrl(counters.0)
    }
    /// The enabled counters.
    pub const fn counters(self) -> CounterSet {
        CounterSet(self.0)
    }
}

/// A set of counters in the GLOBAL_CTRL / GLOBAL_STATUS bit layout: GP counter `i` at bit `i`,
/// fixed counter `i` at bit `32 + i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct CounterSet(u64);

impl CounterSet {
    /// No counter.
    pub const EMPTY: CounterSet = CounterSet(0);

    /// GP counters `0..gp` and the fixed counters whose bits are set in `fixed_mask`.
    pub const fn new(gp: u8, fixed_mask: u32) -> Self {
        CounterSet(low_bits(gp as u32) | (fixed_mask as u64) << 32)
    }
    /// A set from bits that [`CounterSet::bits`] returned for a set of existing counters (a
    /// cached copy), so already valid.
    pub(crate) const fn from_built_bits(bits: u64) -> Self {
        CounterSet(bits)
    }
    /// The counters of `bits` (GLOBAL_CTRL layout) that are in `existing`.
    pub const fn from_bits_within(bits: u64, existing: CounterSet) -> Self {
        CounterSet(bits & existing.0)
    }
    /// The set plus `counter`.
    pub const fn with(self, counter: Counter) -> Self {
        CounterSet(self.0 | counter.bit())
    }
    /// The set without `counter`.
    pub const fn without(self, counter: Counter) -> Self {
        CounterSet(self.0 & !counter.bit())
    }
    /// Whether `counter` is in the set.
    pub const fn contains(self, counter: Counter) -> bool {
        self.0 & counter.bit() != 0
    }
    /// Counters in either set.
    pub const fn union(self, other: CounterSet) -> Self {
        CounterSet(self.0 | other.0)
    }
    /// Counters of this set that are not in `other`.
    pub const fn minus(self, other: CounterSet) -> Self {
        CounterSet(self.0 & !other.0)
    }
    /// Whether any fixed counter is in the set.
    pub const fn has_fixed(self) -> bool {
        self.0 >> 32 != 0
    }
    /// Counters in both sets.
    pub const fn intersection(self, other: CounterSet) -> Self {
        CounterSet(self.0 & other.0)
    }
    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The raw bits.
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// The counters in the set, fixed counters first (as FreeBSD's PMI handler visits them).
    pub fn iter(self) -> impl Iterator<Item = Counter> {
        let mut fixed = (self.0 >> 32) as u32;
        let mut gp = self.0 as u32;
        core::iter::from_fn(move || {
            if fixed != 0 {
                let index = fixed.trailing_zeros() as u8;
                fixed &= fixed - 1;
                return Some(Counter::Fixed(index));
            }
            if gp != 0 {
                let index = gp.trailing_zeros() as u8;
                gp &= gp - 1;
                return Some(Counter::Gp(index));
            }
            None
        })
    }
}

/// A hardware counter of an Intel PMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Counter {
    /// GP counter `i` (IA32_PMCi).
    Gp(u8),
    /// Fixed counter `i` (IA32_FIXED_CTRi).
    Fixed(u8),
}

impl Counter {
    /// Its bit in the GLOBAL_CTRL and GLOBAL_STATUS layout.
    pub(crate) const fn bit(self) -> u64 {
        match self {
            Counter::Gp(i) => 1 << (i as u32 & 31),
            Counter::Fixed(i) => 1 << (32 + (i as u32 & 31)),
        }
    }
    /// The RDPMC index: `i` for GP counters, `1 << 30 | i` for fixed counters.
    pub const fn rdpmc_index(self) -> u32 {
        match self {
            Counter::Gp(i) => i as u32,
            Counter::Fixed(i) => 1 << 30 | i as u32,
        }
    }
}

/// IA32_PERF_GLOBAL_STATUS as read (SDM Vol. 3B §21.2.2 and §21.2.4, Figures 21-3 and 21-13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct GlobalStatus(u64);

bitflags! {
    /// The IA32_PERF_GLOBAL_STATUS bits that are not a counter's overflow (SDM Vol. 3B Figures
    /// 21-3 and 21-13).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct StatusFlags: u64 {
        /// v4: Intel PT ToPA PMI.
        const TRACE_TOPA_PMI = 1 << 55;
        /// v4: LBRs are frozen.
        const LBR_FRZ = 1 << 58;
        /// v4: counters are frozen (streamlined freeze on PMI).
        const CTR_FRZ = 1 << 59;
        /// v4: ASCI.
        const ASCI = 1 << 60;
        /// v3: uncore overflow.
        const OVF_UNCORE = 1 << 61;
        /// DS buffer overflow.
        const OVF_BUF = 1 << 62;
        /// Condition changed.
        const COND_CHGD = 1 << 63;
    }
}

impl GlobalStatus {
    /// Wraps a value read from the MSR.
    pub const fn from_bits(bits: u64) -> Self {
        GlobalStatus(bits)
    }
    /// The raw value.
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// The overflowed counters among `existing` (bits of counters that do not exist are ignored).
    pub const fn overflowed(self, existing: CounterSet) -> CounterSet {
        CounterSet(self.0 & existing.0)
    }
    /// Whether v4 streamlined freeze froze the counters.
    pub const fn counters_frozen(self) -> bool {
        self.0 & StatusFlags::CTR_FRZ.bits() != 0
    }
    /// Whether v4 streamlined freeze froze the counters at the request of whoever owns the
    /// status bits `owned` (the freeze is theirs only if CTR_FRZ is among them).
    pub const fn counters_frozen_for(self, owned: u64) -> bool {
        self.0 & owned & StatusFlags::CTR_FRZ.bits() != 0
    }
}

/// A value for IA32_PERF_GLOBAL_OVF_CTRL (v4: GLOBAL_STATUS_RESET): 1 clears the status bit.
/// Only bits the PMU's version defines can be set (SDM Vol. 3B Figures 21-4 and 21-14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct GlobalStatusReset(u64);

impl GlobalStatusReset {
    /// Clears the bits of `status` that `valid` (the PMU's reset mask) allows.
    pub const fn clearing(status: GlobalStatus, valid: u64) -> Self {
        GlobalStatusReset(status.0 & valid)
    }
    /// Clears `counters`' overflow bits.
    pub const fn counters(counters: CounterSet) -> Self {
        GlobalStatusReset(counters.0)
    }
    /// The raw value.
    pub const fn bits(self) -> u64 {
        self.0
    }
}

pub(crate) use crate::backend::low_bits;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfevtsel_refuses_bits_outside_the_valid_mask() {
        let valid = PerfEvtSel::ARCHITECTURAL;
        assert!(PerfEvtSel::new(0x0043_00C0, valid).is_some());
        assert!(PerfEvtSel::new(PerfEvtSel::ANY, valid).is_none());
        assert!(PerfEvtSel::new(1 << 32, valid).is_none());
        let sel = PerfEvtSel::new(0x1A_43_01_3C, valid).unwrap();
        assert_eq!((sel.event_select(), sel.umask(), sel.cmask()), (0x3C, 0x01, 0x1A));
        assert!(sel.has(EvtSelFlags::USR | EvtSelFlags::EN) && !sel.has(EvtSelFlags::INT));
        assert_eq!(sel.with(EvtSelFlags::EN, false).bits(), 0x1A_03_01_3C);
    }

    #[test]
    fn perfevtsel_flags_cannot_add_anythread_a_pmu_may_lack() {
        let sel = PerfEvtSel::new(0x00C0, PerfEvtSel::ARCHITECTURAL).unwrap();
        let set = sel.with(EvtSelFlags::ANY | EvtSelFlags::INT, true);
        assert_eq!(set.bits(), 0x10_00C0, "INT set, AnyThread left out");
        let with_any = PerfEvtSel::new(0x20_00C0, PerfEvtSel::ARCHITECTURAL | PerfEvtSel::ANY);
        assert_eq!(with_any.unwrap().with(EvtSelFlags::ANY, false).bits(), 0x00C0, "clearing it");
    }

    #[test]
    fn fixed_ctr_ctrl_places_nibbles_and_refuses_missing_counters() {
        let valid = FixedFlags::OS | FixedFlags::USR | FixedFlags::PMI;
        let os_usr = FixedCtrField::new(FixedFlags::OS | FixedFlags::USR, valid).unwrap();
        let ctrl = FixedCtrCtrl::default().with_field(1, 0b111, os_usr).unwrap();
        assert_eq!(ctrl.bits(), 0x30);
        assert_eq!(ctrl.field(1), os_usr);
        assert!(ctrl.with_field(3, 0b111, os_usr).is_none());
        assert!(ctrl.with_field(2, 0b1011, os_usr).is_none(), "v5 gap: counter 2 is absent");
        assert_eq!(FixedCtrCtrl::from_bits_within(0xFFFF, 0b1011, valid).bits(), 0xB0BB);
        assert!(FixedCtrField::new(FixedFlags::ANY, valid).is_none());
        assert_eq!(os_usr.with_pmi().bits(), 0xB);
    }

    #[test]
    fn counter_sets_use_the_global_ctrl_layout() {
        let all = CounterSet::new(4, 0b111);
        assert_eq!(all.bits(), 0x7_0000_000F);
        assert_eq!(GlobalCtrl::from_counters(all).bits(), 0x7_0000_000F);
        let set = CounterSet::EMPTY.with(Counter::Gp(1)).with(Counter::Fixed(2));
        assert_eq!(set.iter().collect::<Vec<_>>(), [Counter::Fixed(2), Counter::Gp(1)]);
        assert_eq!(Counter::Fixed(1).rdpmc_index(), 0x4000_0001);
        let frozen = StatusFlags::CTR_FRZ.bits();
        let status = GlobalStatus::from_bits(frozen | 0x4_0000_0002 | 1 << 20);
        assert_eq!(
            status.overflowed(all),
            CounterSet::EMPTY.with(Counter::Gp(1)).with(Counter::Fixed(2))
        );
        assert!(status.counters_frozen());
        let reset = GlobalStatusReset::clearing(status, all.bits() | frozen);
        assert_eq!(reset.bits(), frozen | 0x4_0000_0002);
    }
}
