//! The offcore-response MSRs of the simulated CPU: MSR_OFFCORE_RSP_0 and MSR_OFFCORE_RSP_1
//! (1A6h, 1A7h; SDM Vol. 4, per model), and the OFFCORE_RESPONSE events that read them
//! (0xB7/0x01 through RSP_0, 0xBB/0x01 through RSP_1: the layout of Intel's Core models from
//! Westmere to Ice Lake, which every preset has).
//!
//! What an offcore request is, and which requests a request/response value selects, is not
//! modelled: a [`Work`] lists offcore requests by the exact MSR value that selects them
//! ([`OffcoreCount`]), and an OFFCORE_RESPONSE counter counts those whose value equals its MSR's.
//! That is enough for a test to see that the driver wrote the value it was given, to the MSR the
//! event reads, while the counter counted.

pub use crate::work::OffcoreCount;
use crate::work::Work;

/// The (event select, unit mask) counting through MSR_OFFCORE_RSP_0 and _1.
pub const EVENTS: [(u8, u8); 2] = [(0xB7, 0x01), (0xBB, 0x01)];

/// MSR_OFFCORE_RSP_0's address.
pub const MSR_OFFCORE_RSP_0: u32 = 0x1A6;

/// Which offcore-response MSR `address` is, if it is one.
pub(crate) fn msr_index(address: u32) -> Option<usize> {
    let i = address.checked_sub(MSR_OFFCORE_RSP_0)? as usize;
    (i < 2).then_some(i)
}

/// Offcore requests of one execution of `work` that the event (`event_select`, `umask`) counts,
/// with the MSRs holding `msrs` (a model without MSR `i` has `valid[i] == 0`).
pub(crate) fn events(work: &Work, msrs: [u64; 2], valid: [u64; 2], event: (u8, u8)) -> u64 {
    let Some(i) = (0..2).find(|&i| valid[i] != 0 && EVENTS[i] == event) else { return 0 };
    work.offcore
        .iter()
        .filter(|o| o.response == msrs[i])
        .fold(0, |sum, o| sum.saturating_add(o.count))
}
