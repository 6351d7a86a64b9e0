//! The records the driver's operations and hooks emit into their owners' logs.

use pmclog::{MapIn, PmcAllocate, PmcAllocateDyn, PmcAttach, PmcDetach, ProcCsw, ProcExit, Record};

use crate::book::Pmc;
use crate::class::HwConfig;
use crate::driver::Driver;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, Pid, Tid};

/// Longest executable path a record carries (`PATH_MAX` with its NUL).
const PATH_MAX: usize = pmclog::PATH_MAX - 1;

/// `path` as a record carries it: at most [`PATH_MAX`] bytes, cut at the first NUL.
pub(crate) fn record_path(path: &[u8]) -> &[u8] {
    let path = &path[..path.len().min(PATH_MAX)];
    &path[..path.iter().position(|&b| b == 0).unwrap_or(path.len())]
}

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Whether `owner` has a log.
    pub(crate) fn has_log(&self, owner: Pid) -> bool {
        self.logs.lock(&self.kernel).owners.contains_key(&owner)
    }

    /// Appends `record` to `owner`'s log, if it has one, on the current CPU; wakes the writer
    /// when a buffer filled. Returns false if the owner has a log and the record was lost.
    pub(crate) fn log_record(&self, owner: Pid, record: &Record<'_>) -> bool {
        self.log_record_at(owner, self.kernel.current_cpu(), record, self.hw.read_tsc())
    }

    /// [`Self::log_record`] into `cpu`'s buffer with timestamp `tsc` (a sample's own).
    pub(crate) fn log_record_at(
        &self,
        owner: Pid,
        cpu: Cpu,
        record: &Record<'_>,
        tsc: u64,
    ) -> bool {
        let mut logs = self.logs.lock(&self.kernel);
        let Some(log) = logs.owners.get_mut(&owner) else { return true };
        let appended = log.append(cpu, record, tsc);
        if !appended {
            self.local_stats()
                .buffer_requests_failed
                .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        }
        self.local_stats().buffer_requests.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        let wake = log.has_full();
        drop(logs);
        if wake {
            self.kernel.wake_log_writer();
        }
        appended
    }

    /// The PMCALLOCATE (or, for SOFT, PMCALLOCATEDYN) record of `pmc`.
    pub(crate) fn log_allocation(&self, pmc: &Pmc) {
        let pmcid = pmc.id.to_u32();
        let rate = if pmc.mode().is_sampling() { pmc.reload } else { pmc.value };
        if let HwConfig::Soft { event } = pmc.config {
            let name = self.soft_event_name(event);
            let record = Record::PmcAllocateDyn(PmcAllocateDyn {
                pmcid,
                event,
                flags: pmc.flags.bits(),
                rate,
                name: name.as_bytes(),
                layout: pmclog::DynLayout::Kernel,
            });
            self.log_record(pmc.owner, &record);
        } else {
            let record = Record::PmcAllocate(PmcAllocate {
                pmcid,
                event: pmc.event,
                flags: pmc.flags.bits(),
                rate,
            });
            self.log_record(pmc.owner, &record);
        }
    }

    fn soft_event_name(&self, event: u32) -> alloc::string::String {
        let book = self.book.lock(&self.kernel);
        let name = book.soft_events().iter().find(|e| e.code == event).map(|e| e.name.as_str());
        // Names fit a PMCALLOCATEDYN record's 56 bytes (registration limits them to 63).
        let name = name.unwrap_or("");
        alloc::string::String::from(&name[..name.len().min(56)])
    }

    /// The PMCATTACH record of `pmc` attaching to `pid`.
    pub(crate) fn log_attach(&self, pmc: &Pmc, pid: Pid) {
        let mut path = [0u8; PATH_MAX];
        let len = self.kernel.process_path(pid, &mut path).min(PATH_MAX);
        let path = record_path(&path[..len]);
        let record = Record::PmcAttach(PmcAttach { pmcid: pmc.id.to_u32(), pid, path });
        self.log_record(pmc.owner, &record);
    }

    /// MAP_IN records for every executable mapping of process `pid`, in `owner`'s log.
    pub(crate) fn log_mappings(&self, owner: Pid, pid: Pid) {
        let mut records = alloc::vec::Vec::new();
        self.kernel.for_each_executable_mapping(pid, &mut |start, _end, path| {
            records.push((start, alloc::vec::Vec::from(record_path(path))));
        });
        for (start, path) in records {
            self.log_record(owner, &Record::MapIn(MapIn { pid, start, path: &path }));
        }
    }

    /// Whether `owner` has a log whose one-time `flag` is not set yet; sets it.
    fn first_in_log(&self, owner: Pid, flag: fn(&mut crate::log::OwnerLog) -> &mut bool) -> bool {
        let mut logs = self.logs.lock(&self.kernel);
        logs.owners.get_mut(&owner).is_some_and(|log| !core::mem::replace(flag(log), true))
    }

    /// MAP_IN records for every process's executable mappings, the first time `owner` starts a
    /// system-sampling PMC while it has a log.
    pub(crate) fn log_initial_mappings(&self, owner: Pid) {
        if !self.first_in_log(owner, |log| &mut log.mappings_logged) {
            return;
        }
        let mut pids = alloc::vec::Vec::new();
        self.kernel.for_each_process(&mut |pid| pids.push(pid));
        for pid in pids {
            self.log_mappings(owner, pid);
        }
    }

    /// MAP_IN records of process −1 for the kernel's images, the first time `owner` starts a
    /// sampling PMC while it has a log (FreeBSD's `pmc_log_kernel_mappings`), so that kernel
    /// addresses in its samples can be named.
    pub(crate) fn log_kernel_images(&self, owner: Pid) {
        if !self.first_in_log(owner, |log| &mut log.kernel_logged) {
            return;
        }
        let mut images = alloc::vec::Vec::new();
        self.kernel.for_each_kernel_image(&mut |start, path| {
            images.push((start, alloc::vec::Vec::from(record_path(path))));
        });
        for (start, path) in images {
            self.log_record(owner, &Record::MapIn(MapIn { pid: -1, start, path: &path }));
        }
    }

    /// The PMCDETACH record of `pmc` leaving `pid`.
    pub(crate) fn log_detach(&self, pmc: &Pmc, pid: Pid) {
        self.log_record(pmc.owner, &Record::PmcDetach(PmcDetach { pmcid: pmc.id.to_u32(), pid }));
    }

    /// The PROCEXIT record of a counting PMC with PMC_F_LOG_PROCEXIT whose target `pid` exits
    /// after counting `value` events.
    pub(crate) fn log_proc_exit(&self, pmc: &Pmc, pid: Pid, value: u64) {
        let record = Record::ProcExit(ProcExit { pmcid: pmc.id.to_u32(), pid, value });
        self.log_record(pmc.owner, &record);
    }

    /// The PROCCSW record of a PMC with PMC_F_LOG_PROCCSW that counted `value` events while
    /// thread `tid` of `pid` was on a CPU.
    pub(crate) fn log_proc_csw(&self, pmc: &Pmc, pid: Pid, tid: Tid, value: u64) {
        let record = Record::ProcCsw(ProcCsw { value, pmcid: pmc.id.to_u32(), pid, tid });
        self.log_record(pmc.owner, &record);
    }
}
