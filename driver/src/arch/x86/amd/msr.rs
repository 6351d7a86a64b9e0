//! The AMD performance-monitoring MSRs (AMD64 Architecture Programmer's Manual vol. 2 §13.2;
//! the PerfMonV2 registers from the PPRs of families 19h and 1Ah). The `x86` crate has none of
//! them, so they are written down here, once for the driver and the simulated machines.

/// PERF_CTL0 (legacy `PerfEvtSel0`): the control of core counter 0 in the legacy layout; 1–3
/// follow at +1.
pub const PERF_CTL0_LEGACY: u32 = 0xC001_0000;
/// PERF_CTR0 (legacy `PerfCtr0`): core counter 0 in the legacy layout; 1–3 follow at +1.
pub const PERF_CTR0_LEGACY: u32 = 0xC001_0004;
/// PERF_CTL0 in the extended layout (PerfCtrExtCore): counter `i`'s control is at `+ 2i`.
pub const PERF_CTL0: u32 = 0xC001_0200;
/// PERF_CTR0 in the extended layout (PerfCtrExtCore): counter `i` is at `+ 2i`.
pub const PERF_CTR0: u32 = 0xC001_0201;
/// PerfCntrGlobalStatus (PerfMonV2): one overflow bit per core counter. Read-only.
pub const PERF_CNTR_GLOBAL_STATUS: u32 = 0xC000_0300;
/// PerfCntrGlobalCtl (PerfMonV2): a core counter runs only when its bit here and its
/// PERF_CTL.EN are both set.
pub const PERF_CNTR_GLOBAL_CTL: u32 = 0xC000_0301;
/// PerfCntrGlobalStatusClr (PerfMonV2): writing 1 clears the status bit.
pub const PERF_CNTR_GLOBAL_STATUS_CLR: u32 = 0xC000_0302;
/// PerfCntrGlobalStatusSet (PerfMonV2): writing 1 sets the status bit.
pub const PERF_CNTR_GLOBAL_STATUS_SET: u32 = 0xC000_0303;

/// The most core counters the extended layout holds (C001_0200h–C001_020Bh; the L3 counters
/// follow at C001_0230h).
pub const MAX_CORE_COUNTERS: u8 = 6;
/// The core counters of the legacy layout.
pub const LEGACY_CORE_COUNTERS: u8 = 4;
/// The width of every AMD core counter, in bits.
pub const COUNTER_WIDTH: u8 = 48;

/// CPUID 8000_0001h ECX bit 23: PerfCtrExtCore (six core counters in the extended layout).
pub const CPUID_PERF_CTR_EXT_CORE: u32 = 1 << 23;
/// CPUID 8000_0022h EAX bit 0: PerfMonV2 (the global control and status registers).
pub const CPUID_PERFMON_V2: u32 = 1 << 0;
