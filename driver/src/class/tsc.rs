//! The TSC class: the time-stamp counter, one shared row, system counting only.

use core::ops::Range;

use super::HwConfig;
use crate::abi::{Mode, PmcOpPmcAllocate, event};
use crate::errno::Errno;

/// Checks a TSC allocation: system counting of `TSC_TSC` only.
pub(crate) fn configure(
    request: &PmcOpPmcAllocate,
    mode: Mode,
    rows: Range<u32>,
) -> Result<(HwConfig, Range<u32>), Errno> {
    if mode != Mode::SystemCounting || request.pm_ev != event::TSC_TSC {
        return Err(Errno::Inval);
    }
    Ok((HwConfig::Tsc, rows))
}
