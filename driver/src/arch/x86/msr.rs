//! The model-specific registers the driver and the simulated machines use, by their SDM names.
//!
//! The numbers come from the `x86` crate (SDM Vol. 4, "Model-Specific Registers"), so they are
//! written down once for the whole workspace; the two that crate lacks are defined here from the
//! SDM.

pub use x86::msr::{
    IA32_A_PMC0, IA32_DEBUGCTL, IA32_FIXED_CTR_CTRL, IA32_FIXED_CTR0, IA32_PERF_CAPABILITIES,
    IA32_PERF_GLOBAL_CTRL, IA32_PERF_GLOBAL_OVF_CTRL, IA32_PERFEVTSEL0, IA32_PMC0,
    IA32_TIME_STAMP_COUNTER, IA32_X2APIC_LVT_PMI, MSR_OFFCORE_RSP_0, MSR_OFFCORE_RSP_1,
};

/// IA32_PERF_GLOBAL_STATUS (the `x86` crate spells it `IA32_PERF_GLOBAL_STAUS`).
pub const IA32_PERF_GLOBAL_STATUS: u32 = x86::msr::IA32_PERF_GLOBAL_STAUS;
/// IA32_PERF_GLOBAL_STATUS_SET (perfmon v4+; SDM Vol. 4 Table 2-2). Not in the `x86` crate.
pub const IA32_PERF_GLOBAL_STATUS_SET: u32 = 0x391;
/// IA32_PERF_GLOBAL_INUSE (perfmon v4+; SDM Vol. 4 Table 2-2). Not in the `x86` crate.
pub const IA32_PERF_GLOBAL_INUSE: u32 = 0x392;
