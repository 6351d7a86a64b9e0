//! The TSC class: the time-stamp counter, one shared row, system counting only.

use core::ops::Range;

use super::HwConfig;
use crate::abi::{Mode, PmcOpPmcAllocate, event};
use crate::refusal::Cause;

/// Checks a TSC allocation: system counting of `TSC_TSC` only.
pub(crate) fn configure(
    request: &PmcOpPmcAllocate,
    mode: Mode,
    rows: Range<u32>,
) -> Result<(HwConfig, Range<u32>), Cause> {
    if mode != Mode::SystemCounting || request.pm_ev != event::TSC_TSC {
        return Err(Cause::InvalidTscEvent);
    }
    Ok((HwConfig::Tsc, rows))
}
