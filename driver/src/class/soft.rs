//! The SOFT class: software events a kernel reports with
//! [`Driver::soft_event`](crate::Driver::soft_event), counted in the slot of their row.

use core::ops::Range;

use super::HwConfig;
use crate::abi::PmcOpPmcAllocate;
use crate::refusal::Cause;

/// Checks a SOFT allocation: the event must be registered (`registered`). Any SOFT row may hold
/// it.
pub(crate) fn configure(
    request: &PmcOpPmcAllocate,
    registered: bool,
    rows: Range<u32>,
) -> Result<(HwConfig, Range<u32>), Cause> {
    if !registered {
        return Err(Cause::UnknownSoftEvent);
    }
    Ok((HwConfig::Soft { event: request.pm_ev }, rows))
}
