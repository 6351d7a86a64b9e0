//! The K8 class: FreeBSD's class for every AMD core counter, configured by a PERF_CTL image in
//! `struct pmc_md_amd_op_pmcallocate` (`pm_amd_config`, and `pm_amd_sub_class`: 0 core,
//! 1 L3 cache, 2 data fabric).

use core::ops::Range;

use super::regs::{PerfCtl, PerfCtlFlags};
use crate::abi::PmcFlags;
use crate::backend::{AllocateRequest, rings};
use crate::refusal::Cause;

/// `pm_amd_sub_class` of the core counters (FreeBSD's `PMC_AMD_SUB_CLASS_CORE`).
pub const SUB_CLASS_CORE: u32 = 0;
/// `PMC_AMD_SUB_CLASS_L3_CACHE`: the L3 counters, shared by a CCX.
pub const SUB_CLASS_L3_CACHE: u32 = 1;
/// `PMC_AMD_SUB_CLASS_DATA_FABRIC`: the data-fabric counters, shared by a die.
pub const SUB_CLASS_DATA_FABRIC: u32 = 2;

/// Checks a K8 allocation: a raw PERF_CTL image (PMC_F_EV_PMU, as FreeBSD's libpmc sends every
/// AMD event today) for the core sub-class, with no reserved bit. The L3 and data-fabric
/// sub-classes are refused with EINVAL: their counters are shared by several CPUs and this
/// driver does not drive them yet. EN and INT are the driver's to set. Any core row may hold it.
pub(super) fn configure(
    rows: u32,
    request: &AllocateRequest<'_>,
) -> Result<(PerfCtl, Range<u32>), Cause> {
    if !request.flags.contains(PmcFlags::EV_PMU) {
        return Err(Cause::AmdNeedsEvPmu);
    }
    if request.raw.pm_md.amd_sub_class() != SUB_CLASS_CORE {
        return Err(Cause::AmdSubClass);
    }
    let ctl = PerfCtl::new(request.raw.pm_md.amd_config()).ok_or(Cause::AmdConfigBits)?;
    let ctl = ctl.with(PerfCtlFlags::EN | PerfCtlFlags::INT, false);
    let (os, usr) = rings(ctl.has(PerfCtlFlags::OS), ctl.has(PerfCtlFlags::USR), request.caps);
    let ctl = ctl.with(PerfCtlFlags::OS, os).with(PerfCtlFlags::USR, usr);
    Ok((ctl, 0..rows))
}

/// The control as loading writes it: enabled, interrupting at overflow (counting PMCs too: the
/// handler folds and reloads at every overflow).
#[inline]
pub(super) fn armed(ctl: PerfCtl) -> PerfCtl {
    ctl.with(PerfCtlFlags::EN | PerfCtlFlags::INT, true)
}
