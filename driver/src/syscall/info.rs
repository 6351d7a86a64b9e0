//! The operations that describe the driver and the machine: GETMODULEVERSION, GETCPUINFO,
//! GETDRIVERSTATS, GETPMCINFO, GETDYNEVENTINFO and GETCAPS.

use crate::abi::{
    Class, Disposition, PMC_VERSION, PmcDynEventDescr, PmcInfo, PmcOpCaps, PmcOpGetCpuInfo,
    PmcOpGetDriverStats, PmcOpGetPmcInfo,
};
use crate::book::Book;
use crate::class::RowCounter;
use crate::driver::Driver;
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, UserPtr};
use crate::machine::CpuStats;
use crate::refusal::{Cause, Refusal};
use crate::sync::AtomicU64;
use crate::text::FixedText;
use alloc::vec::Vec;
use core::fmt::Write;
use zerocopy::{FromZeros, IntoBytes};

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// GETMODULEVERSION: refuse a client whose major.minor is newer than ours, then tell it ours.
    pub(super) fn op_get_module_version(&self, arg: UserPtr) -> Result<(), Refusal> {
        let client: u32 = self.copy_in(arg)?;
        if client & 0xFFFF_0000 > PMC_VERSION & 0xFFFF_0000 {
            return Err(Cause::VersionMismatch.into());
        }
        self.copy_out(&PMC_VERSION, arg)
    }

    pub(super) fn op_get_cpu_info(&self, arg: UserPtr) -> Result<(), Refusal> {
        let mut info = PmcOpGetCpuInfo::new_zeroed();
        info.pm_cputype = self.cpu_type();
        info.pm_ncpu = self.kernel.cpu_count();
        info.pm_npmc = self.layout.rows();
        info.pm_nclass = self.layout.classes.len() as u32;
        for (out, class) in info.pm_classes.iter_mut().zip(&self.layout.classes) {
            out.pm_class = class.class.as_u32();
            out.pm_caps = class.caps.bits();
            out.pm_width = class.width;
            out.pm_num = class.rows;
        }
        self.copy_out(&info, arg)
    }

    pub(super) fn op_get_driver_stats(&self, arg: UserPtr) -> Result<(), Refusal> {
        use core::sync::atomic::Ordering::Relaxed;
        // The sum over every CPU; the ABI has 32-bit fields, so it saturates instead of wrapping.
        let get = |counter: fn(&CpuStats) -> &AtomicU64| {
            let total =
                self.machine.cpus().iter().map(|c| counter(&c.stats).load(Relaxed)).sum::<u64>();
            total.min(u64::from(u32::MAX)) as u32
        };
        let stats = PmcOpGetDriverStats {
            pm_intr_ignored: get(|s| &s.intr_ignored),
            pm_intr_processed: get(|s| &s.intr_processed),
            pm_intr_bufferfull: get(|s| &s.intr_bufferfull),
            pm_syscalls: get(|s| &s.syscalls),
            pm_syscall_errors: get(|s| &s.syscall_errors),
            pm_buffer_requests: get(|s| &s.buffer_requests),
            pm_buffer_requests_failed: get(|s| &s.buffer_requests_failed),
            pm_log_sweeps: get(|s| &s.log_sweeps),
        };
        self.copy_out(&stats, arg)
    }

    /// GETPMCINFO: one `pmc_info` per row of a CPU, after the 8-byte header.
    pub(super) fn op_get_pmc_info(&self, arg: UserPtr) -> Result<(), Refusal> {
        let head: PmcOpGetPmcInfo = self.copy_in(arg)?;
        let cpu = self.checked_cpu(head.pm_cpu)?;
        let infos: Vec<PmcInfo> = {
            let book = self.book.lock(&self.kernel);
            (0..self.layout.rows()).map(|row| self.row_info(&book, cpu, row)).collect()
        };
        let base = arg.offset(core::mem::size_of::<PmcOpGetPmcInfo>()).ok_or(Errno::Fault)?;
        Ok(self.kernel.copy_out(infos.as_bytes(), base)?)
    }

    fn row_info(&self, book: &Book, cpu: Cpu, row: u32) -> PmcInfo {
        let mut info = PmcInfo::new_zeroed();
        let Some(class) = self.layout.class_of_row(row) else { return info };
        write_row_name(&mut info.pm_name, class.class.name(), row - class.first_row);
        info.pm_class = class.class.as_u32();
        // A row of a counter this CPU lacks (a hybrid machine's P-core counter on an E-core)
        // is never usable here: shown disabled.
        let absent =
            self.machine.slot(cpu, row).is_some_and(|s| matches!(s.counter(), RowCounter::Absent));
        info.pm_enabled = i32::from(!book.is_disabled(cpu, row) && !absent);
        info.pm_rowdisp = match book.disposition(row) {
            0 => Disposition::Free,
            n if n > 0 => Disposition::Thread,
            _ => Disposition::Standalone,
        }
        .as_u32();
        info.pm_ownerpid = -1;
        let on_row = book
            .system_pmc_on(cpu, row)
            .or_else(|| self.machine.slot(cpu, row).and_then(|s| s.handle()));
        if let Some(pmc) = on_row.and_then(|h| book.pmc(h)) {
            info.pm_ownerpid = pmc.owner;
            info.pm_mode = pmc.mode().as_u32();
            info.pm_event = pmc.event;
            info.pm_flags = pmc.flags.bits();
            if pmc.mode().is_sampling() {
                info.pm_reloadcount = pmc.reload;
            }
        }
        info
    }

    /// GETDYNEVENTINFO: the registered software events (class SOFT only).
    pub(super) fn op_get_dyn_event_info(&self, arg: UserPtr) -> Result<(), Refusal> {
        let class: u32 = self.copy_in(arg)?;
        if class != Class::Soft.as_u32() {
            return Err(Cause::NoDynamicEvents.into());
        }
        let events: Vec<PmcDynEventDescr> = self
            .book
            .lock(&self.kernel)
            .soft_events()
            .iter()
            .map(|e| {
                let mut descr = PmcDynEventDescr::new_zeroed();
                let name = e.name.as_bytes();
                let len = name.len().min(descr.pm_ev_name.len() - 1);
                descr.pm_ev_name[..len].copy_from_slice(&name[..len]);
                descr.pm_ev_code = e.code;
                descr
            })
            .collect();
        let count = events.len() as u32;
        self.kernel.copy_out(events.as_bytes(), arg.offset(8).ok_or(Errno::Fault)?)?;
        Ok(self.kernel.copy_out(count.as_bytes(), arg.offset(4).ok_or(Errno::Fault)?)?)
    }

    pub(super) fn op_get_caps(&self, arg: UserPtr) -> Result<(), Refusal> {
        let mut request: PmcOpCaps = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let book = self.book.lock(&self.kernel);
        let handle = book.find(caller, request.pm_pmcid)?;
        request.pm_caps = book.pmc(handle).map_or(0, |p| p.caps.bits());
        drop(book);
        self.copy_out(&request, arg)
    }
}

/// `<CLASS>-<n>`, NUL-padded.
fn write_row_name(out: &mut [u8; 64], class: &str, index: u32) {
    let mut name = FixedText::<64>::new();
    // Writing into a fixed buffer cannot fail; it truncates.
    let _ = write!(name, "{class}-{index}");
    *out = name.field();
}
