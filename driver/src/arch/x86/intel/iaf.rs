//! The IAF class: Intel's fixed counters, each counting one event, configured by a field of
//! IA32_FIXED_CTR_CTRL.

use core::ops::Range;

use super::IntelConfig;
use super::discovery::IntelPmu;
use super::regs::{EvtSelFlags, FixedCtrField, FixedFlags, PerfEvtSel};
use crate::abi::{PmcFlags, event};
use crate::backend::{AllocateRequest, rings};
use crate::errno::Errno;

/// Checks an IAF allocation: FreeBSD's static IAF event, or a raw event select (PMC_F_EV_PMU)
/// naming a fixed counter's event; AnyThread only with the privilege. Only that counter's row
/// may hold it.
pub(super) fn configure(
    pmu: &IntelPmu,
    rows: u32,
    request: &AllocateRequest<'_>,
) -> Result<(IntelConfig, Range<u32>), Errno> {
    let (index, os, usr, any) = if request.flags.contains(PmcFlags::EV_PMU) {
        let raw = request.raw.pm_md.iap_config64();
        let sel = PerfEvtSel::new(raw, pmu.evtsel_valid()).ok_or(Errno::Inval)?;
        if sel.umask2() != 0 {
            return Err(Errno::Inval);
        }
        let index = fixed_counter_of(sel.event_select(), sel.umask()).ok_or(Errno::Inval)?;
        let (os, usr) = (sel.has(EvtSelFlags::OS), sel.has(EvtSelFlags::USR));
        (index, os, usr, sel.has(EvtSelFlags::ANY))
    } else {
        let index = match request.raw.pm_ev {
            event::IAF_INSTR_RETIRED_ANY => 0,
            event::IAF_CPU_CLK_UNHALTED_CORE => 1,
            event::IAF_CPU_CLK_UNHALTED_REF => 2,
            _ => return Err(Errno::Inval),
        };
        (index, false, false, false)
    };
    // A gap of the perfmon v5 bitmap (a fixed counter some CPU lacks) is a row with no counter.
    if u32::from(index) >= rows || !pmu.has_fixed(index) {
        return Err(Errno::Inval);
    }
    if any && !(request.any_thread_allowed)() {
        return Err(Errno::Perm);
    }
    let (os, usr) = rings(os, usr, request.caps);
    let mut flags = FixedFlags::empty();
    flags.set(FixedFlags::OS, os);
    flags.set(FixedFlags::USR, usr);
    flags.set(FixedFlags::ANY, any);
    let field = FixedCtrField::new(flags, pmu.fixed_field_valid()).ok_or(Errno::Inval)?;
    let row = u32::from(index);
    Ok((IntelConfig::Iaf { index, field }, row..row + 1))
}

/// The field as loading writes it: with a PMI at overflow (valid in every fixed-counter field,
/// so the field stays valid).
#[inline]
pub(super) fn armed(field: FixedCtrField) -> FixedCtrField {
    field.with_pmi()
}

/// An IAP-style config's fixed counter: INST_RETIRED.ANY (0xC0/0) is 0, CPU_CLK_UNHALTED.THREAD
/// (0x3C/0) is 1, CPU_CLK_UNHALTED.REF (0x3C/1) is 2, TOPDOWN.SLOTS (0xA4/1) is 3, and the fixed
/// pseudo-events (event 0, umask i + 1) are counter i.
fn fixed_counter_of(event_select: u8, umask: u8) -> Option<u8> {
    match (event_select, umask) {
        (0xC0, 0x00) => Some(0),
        (0x3C, 0x00) => Some(1),
        (0x3C, 0x01) => Some(2),
        (0xA4, 0x01) => Some(3),
        (0x00, u) if (1..=16).contains(&u) => Some(u - 1),
        _ => None,
    }
}
