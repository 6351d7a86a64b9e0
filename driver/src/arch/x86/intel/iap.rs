//! The IAP class: Intel's programmable (GP) counters, configured by an IA32_PERFEVTSEL value.

use core::ops::Range;

use super::IntelConfig;
use super::discovery::IntelPmu;
use super::offcore::Offcore;
use super::regs::{EvtSelFlags, PerfEvtSel};
use crate::abi::PmcFlags;
use crate::backend::{AllocateRequest, rings};
use crate::errno::Errno;

/// Checks an IAP allocation: a raw event select (PMC_F_EV_PMU) with no bit the PMU leaves
/// undefined, a response value (`pm_iap_rsp`) only for an offcore-response event of the CPU's
/// model and with no bit its MSR leaves undefined, AnyThread only with the privilege. Any GP row
/// may hold it.
pub(super) fn configure(
    pmu: &IntelPmu,
    rows: u32,
    request: &AllocateRequest<'_>,
) -> Result<(IntelConfig, Range<u32>), Errno> {
    if !request.flags.contains(PmcFlags::EV_PMU) {
        return Err(Errno::Inval);
    }
    let raw = request.raw.pm_md.iap_config64();
    let evtsel = PerfEvtSel::new(raw, pmu.evtsel_valid()).ok_or(Errno::Inval)?;
    let offcore = Offcore::new(pmu.offcore.as_ref(), evtsel, request.raw.pm_md.iap_rsp())?;
    if evtsel.has(EvtSelFlags::ANY) && !(request.any_thread_allowed)() {
        return Err(Errno::Perm);
    }
    let evtsel = evtsel.with(EvtSelFlags::EN | EvtSelFlags::INT, false);
    let (os, usr) = rings(evtsel.has(EvtSelFlags::OS), evtsel.has(EvtSelFlags::USR), request.caps);
    let evtsel = evtsel.with(EvtSelFlags::OS, os).with(EvtSelFlags::USR, usr);
    Ok((IntelConfig::Iap { evtsel, offcore }, 0..rows))
}

/// Checks the second core type's encoding of a PMC (`raw`, see
/// [`crate::abi::PmcMdOpPmcAllocate::iap_config_atom`]) against that type's PMU: no bit it leaves
/// undefined, AnyThread only with the privilege, no offcore-response event (its response value
/// would be the other core type's). It counts in the rings of the PMC's first encoding,
/// `primary`, whatever its own OS and USR bits say.
pub(super) fn configure_like(
    pmu: &IntelPmu,
    raw: u64,
    primary: PerfEvtSel,
    request: &AllocateRequest<'_>,
) -> Result<IntelConfig, Errno> {
    let evtsel = PerfEvtSel::new(raw, pmu.evtsel_valid()).ok_or(Errno::Inval)?;
    if pmu.offcore.as_ref().and_then(|layout| layout.msr_of(evtsel)).is_some() {
        return Err(Errno::Inval);
    }
    if evtsel.has(EvtSelFlags::ANY) && !(request.any_thread_allowed)() {
        return Err(Errno::Perm);
    }
    let evtsel = evtsel
        .with(EvtSelFlags::EN | EvtSelFlags::INT, false)
        .with(EvtSelFlags::OS, primary.has(EvtSelFlags::OS))
        .with(EvtSelFlags::USR, primary.has(EvtSelFlags::USR));
    Ok(IntelConfig::Iap { evtsel, offcore: None })
}

/// The event select as loading writes it: enabled (EN), with an interrupt at overflow (INT).
/// Counting PMCs interrupt too: the handler folds and reloads at every overflow.
#[inline]
pub(super) fn armed(evtsel: PerfEvtSel) -> PerfEvtSel {
    evtsel.with(EvtSelFlags::INT | EvtSelFlags::EN, true)
}
