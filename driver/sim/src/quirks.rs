//! What a CPU model does beyond the architectural register set of [`PmuModel`](crate::PmuModel): the real bits of
//! IA32_DEBUGCTL, Intel TSX's event-select bits, and the ways real parts and hypervisors depart
//! from the SDM's letter (a Core 2 whose CPUID hides its fixed counters, KVM truncating counter
//! writes and reserving AnyThread, reference cycles on a GP counter at another clock than the
//! TSC's). A [`PmuModel`](crate::PmuModel) carries its [`Quirks`], so CPUID and the registers agree.
//!
//! References: SDM Vol. 3B §18.4.1 (IA32_DEBUGCTL, Figure 18-3), §21.3.6.5 (Intel TSX and
//! performance monitoring: IN_TX and IN_TXCP, PERFEVTSELx bits 32 and 33); Linux
//! `arch/x86/events/intel/core.c` (`intel_pmu_init`: "v2 perfmon does not report fixed-purpose
//! events, so assume at least 3 events"); KVM `arch/x86/kvm/vmx/pmu_intel.c` (`intel_pmu_set_msr`
//! writes counters through `pmc_write_counter`, which masks to the width; AnyThread is reserved).

/// IA32_DEBUGCTL bits (SDM Vol. 3B Figure 18-3).
pub mod debugctl {
    /// LBR: record branches in the last-branch-record stack.
    pub const LBR: u64 = 1 << 0;
    /// BTF: single-step on branches.
    pub const BTF: u64 = 1 << 1;
    /// TR: send branch trace messages.
    pub const TR: u64 = 1 << 6;
    /// BTS: store branch trace messages in the BTS buffer.
    pub const BTS: u64 = 1 << 7;
    /// BTINT: interrupt when the BTS buffer is full.
    pub const BTINT: u64 = 1 << 8;
    /// BTS_OFF_OS: no branch trace at CPL 0.
    pub const BTS_OFF_OS: u64 = 1 << 9;
    /// BTS_OFF_USR: no branch trace at CPL > 0.
    pub const BTS_OFF_USR: u64 = 1 << 10;
    /// FREEZE_LBRS_ON_PMI: clear LBR on a PMI.
    pub const FREEZE_LBRS_ON_PMI: u64 = 1 << 11;
    /// FREEZE_PERFMON_ON_PMI: freeze the counters on a PMI (governed by
    /// [`PmuModel::freeze_on_pmi`](crate::PmuModel::freeze_on_pmi)(crate::PmuModel::freeze_on_pmi)).
    pub const FREEZE_PERFMON_ON_PMI: u64 = 1 << 12;
    /// FREEZE_WHILE_SMM.
    pub const FREEZE_WHILE_SMM: u64 = 1 << 14;
    /// RTM_DEBUG: advanced debugging of RTM transactions (TSX parts only).
    pub const RTM_DEBUG: u64 = 1 << 15;
    /// Every bit a bare-metal Core part implements besides the two that depend on the model
    /// (FREEZE_PERFMON_ON_PMI, RTM_DEBUG).
    pub const BARE_METAL: u64 = LBR
        | BTF
        | TR
        | BTS
        | BTINT
        | BTS_OFF_OS
        | BTS_OFF_USR
        | FREEZE_LBRS_ON_PMI
        | FREEZE_WHILE_SMM;
    /// What KVM lets a guest set (LBR virtualisation and BTF; no freeze).
    pub const KVM: u64 = LBR | BTF | FREEZE_LBRS_ON_PMI;
}

/// IA32_PERFEVTSELx bit 32, IN_TX: count only inside a transaction (TSX parts).
pub const EVTSEL_IN_TX: u64 = 1 << 32;
/// IA32_PERFEVTSELx bit 33, IN_TXCP: exclude aborted transactions (TSX parts).
pub const EVTSEL_IN_TXCP: u64 = 1 << 33;

/// How a model departs from the plain architectural register set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quirks {
    /// The IA32_DEBUGCTL bits the model implements besides FREEZE_PERFMON_ON_PMI (which
    /// [`PmuModel::freeze_on_pmi`](crate::PmuModel::freeze_on_pmi) governs) and RTM_DEBUG (which [`Quirks::tsx`] governs);
    /// writing any other bit raises #GP.
    pub debugctl: u64,
    /// Intel TSX: IA32_PERFEVTSELx bits 32 (IN_TX) and 33 (IN_TXCP) and DEBUGCTL.RTM_DEBUG exist.
    /// The simulated CPU runs no transaction, so a counter with IN_TX counts nothing.
    pub tsx: bool,
    /// A counter write wider than the counter is truncated to its width instead of raising #GP
    /// (KVM's `pmc_write_counter`).
    pub truncating_counter_writes: bool,
    /// AnyThread is reserved whatever the version (KVM).
    pub anythread_reserved: bool,
    /// The local APIC drops a PMI raised while its LVT entry is masked (KVM's emulated APIC)
    /// instead of holding it: the [`MaskedPmi`](crate::pmu::MaskedPmi) policy a CPU of the model
    /// starts with.
    pub drops_masked_pmis: bool,
    /// CPUID.0AH:EDX reports no fixed counter (EDX = 0) though the counters of
    /// [`PmuModel::fixed_counters`](crate::PmuModel::fixed_counters) exist and work (early Core 2 parts, which Linux works
    /// around by assuming three).
    pub cpuid_hides_fixed_counters: bool,
    /// Event 0x3C/0x01 (UnHalted Reference Cycles) on a GP counter counts a slower clock than
    /// the TSC and fixed counter 2: one per this many TSC ticks (the crystal or bus clock; 1:
    /// the TSC's rate).
    pub gp_ref_cycles_divisor: u32,
    /// CPUID.0AH:EAX\[15:8\] reports at most this many GP counters (0: all of them), while
    /// CPUID leaf 23H sub-leaf 1 enumerates every one: a part whose driver must take the
    /// counters from leaf 23H where it exists (as Linux's `update_pmu_cap` does).
    pub leaf_0a_gp_counters: u8,
}

impl Quirks {
    /// A bare-metal part without TSX: DEBUGCTL with its real bits, nothing else.
    pub const BARE_METAL: Quirks = Quirks {
        debugctl: debugctl::BARE_METAL,
        tsx: false,
        truncating_counter_writes: false,
        anythread_reserved: false,
        drops_masked_pmis: false,
        cpuid_hides_fixed_counters: false,
        gp_ref_cycles_divisor: 1,
        leaf_0a_gp_counters: 0,
    };

    /// The same with Intel TSX.
    pub const BARE_METAL_TSX: Quirks = Quirks { tsx: true, ..Quirks::BARE_METAL };

    /// No departure at all, and a DEBUGCTL of FREEZE_PERFMON_ON_PMI alone (the strictest model:
    /// every other DEBUGCTL bit raises #GP).
    pub const NONE: Quirks = Quirks { debugctl: 0, ..Quirks::BARE_METAL };

    /// KVM's emulated PMU: DEBUGCTL limited to LBR, BTF and FREEZE_LBRS_ON_PMI, counter writes
    /// truncated, AnyThread reserved, masked PMIs dropped.
    pub const KVM: Quirks = Quirks {
        debugctl: debugctl::KVM,
        truncating_counter_writes: true,
        anythread_reserved: true,
        drops_masked_pmis: true,
        ..Quirks::BARE_METAL
    };

    /// The IA32_DEBUGCTL bits a model with these quirks implements, given whether it implements
    /// FREEZE_PERFMON_ON_PMI.
    pub const fn debugctl_valid(&self, freeze_on_pmi: bool) -> u64 {
        let freeze = if freeze_on_pmi { debugctl::FREEZE_PERFMON_ON_PMI } else { 0 };
        let rtm = if self.tsx { debugctl::RTM_DEBUG } else { 0 };
        self.debugctl | freeze | rtm
    }

    /// The IA32_PERFEVTSELx bits above 31 a model with these quirks implements.
    pub const fn evtsel_high_valid(&self) -> u64 {
        if self.tsx { EVTSEL_IN_TX | EVTSEL_IN_TXCP } else { 0 }
    }
}

impl Default for Quirks {
    /// [`Quirks::BARE_METAL`].
    fn default() -> Self {
        Quirks::BARE_METAL
    }
}
