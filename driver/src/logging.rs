//! The log operations (CONFIGURELOG, FLUSHLOG, WRITELOG, CLOSELOG), the writer, and the records
//! the driver's operations and hooks emit.

use pmclog::{
    Initialize, MapIn, PmcAllocate, PmcAllocateDyn, PmcAttach, PmcDetach, ProcCsw, ProcExit,
    Record, UserData,
};

use crate::abi::{PMC_VERSION, PmcOpConfigureLog, PmcOpWriteLog};
use crate::class::HwConfig;
use crate::driver::Driver;
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, LogFile, Pid, Signal, Tid, UserPtr};
use crate::log::OwnerLog;
use crate::state::Pmc;

/// Longest executable path a record carries (`PATH_MAX` with its NUL).
const PATH_MAX: usize = pmclog::PATH_MAX - 1;

/// `path` as a record carries it: at most [`PATH_MAX`] bytes, cut at the first NUL.
pub(crate) fn record_path(path: &[u8]) -> &[u8] {
    let path = &path[..path.len().min(PATH_MAX)];
    &path[..path.iter().position(|&b| b == 0).unwrap_or(path.len())]
}

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Writes the full log buffers of every owner to their files. A kernel calls it from a
    /// thread context after [`Kernel::wake_log_writer`]. A write error stops that owner's log
    /// and sends it SIGIO; FLUSHLOG returns the error.
    pub fn write_logs(&self) {
        loop {
            // The lock is released before writing (a `while let` would hold it in the body).
            let next = self.logs.lock(&self.kernel).next_full();
            let Some((owner, file, buffer)) = next else { break };
            self.write_buffer(owner, file, buffer);
        }
    }

    /// Writes one full buffer of `owner`'s log to `file` (no lock held) and gives it back; a
    /// failed write stops the log and sends the owner SIGIO.
    fn write_buffer(&self, owner: Pid, file: LogFile, buffer: alloc::vec::Vec<u8>) {
        let result = self.kernel.log_write(file, &buffer);
        if result.is_err() {
            self.kernel.signal(owner, Signal::Io);
        }
        self.logs.lock(&self.kernel).written(owner, buffer, result);
    }

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
        let core = self.core.lock(&self.kernel);
        let name = core.soft_events().iter().find(|e| e.code == event).map(|e| e.name.as_str());
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

    /// Writes everything `owner` has logged so far to its file; returns its pending error.
    fn flush_log(&self, owner: Pid) -> Result<(), Errno> {
        {
            let mut logs = self.logs.lock(&self.kernel);
            let log = logs.owners.get_mut(&owner).ok_or(Errno::Inval)?;
            log.queue_current();
        }
        loop {
            let next = self.logs.lock(&self.kernel).next_full_of(owner);
            let Some((file, buffer)) = next else { break };
            self.write_buffer(owner, file, buffer);
        }
        let logs = self.logs.lock(&self.kernel);
        let log = logs.owners.get(&owner).ok_or(Errno::Inval)?;
        match log.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Writes out and closes `owner`'s log; returns the flush's error.
    pub(crate) fn close_log(&self, owner: Pid) -> Result<(), Errno> {
        let flushed = self.flush_log(owner);
        let Some(log) = self.logs.lock(&self.kernel).owners.remove(&owner) else { return flushed };
        self.kernel.log_close(log.file);
        flushed
    }

    /// CONFIGURELOG: a descriptor of 0 or more starts a log (EBUSY if one is active) and writes
    /// its INITIALIZE record at once; a negative one writes out and closes the log.
    pub(crate) fn op_configure_log(&self, arg: UserPtr) -> Result<(), Errno> {
        let request: PmcOpConfigureLog = self.copy_in(arg)?;
        if request.pm_flags != 0 {
            return Err(Errno::Inval);
        }
        let owner = self.kernel.current_pid();
        if request.pm_logfd < 0 {
            if !self.has_log(owner) {
                return Err(Errno::Inval);
            }
            // Closing keeps what was logged (FreeBSD discards queued buffers here).
            let _ = self.close_log(owner);
            return Ok(());
        }
        if self.has_log(owner) {
            return Err(Errno::Busy);
        }
        let file = self.kernel.log_open(request.pm_logfd)?;
        let cpus = self.kernel.cpu_count() as usize;
        let per_cpu = self.tunables.log_buffers_per_cpu as usize;
        let size = self.tunables.log_buffer_kib as usize * 1024;
        let log = OwnerLog::new(file, cpus, cpus * per_cpu, size);
        {
            let mut logs = self.logs.lock(&self.kernel);
            if logs.owners.contains_key(&owner) {
                drop(logs);
                self.kernel.log_close(file);
                return Err(Errno::Busy);
            }
            logs.owners.insert(owner, log);
        }
        let (sec, nsec) = self.kernel.nanotime();
        let cpuid = self.cpuid();
        let record = Record::Initialize(Initialize {
            version: PMC_VERSION,
            cpu_type: self.cpu_type(),
            tsc_freq: self.kernel.tsc_frequency(),
            time_sec: sec,
            time_nsec: nsec,
            cpuid: cpuid.as_bytes(),
        });
        self.log_record(owner, &record);
        // PMCs the owner allocated before it had a log are described too.
        let owned: alloc::vec::Vec<Pmc> = {
            let core = self.core.lock(&self.kernel);
            let handles = core.owned(owner).to_vec();
            handles.iter().filter_map(|&h| core.pmc(h).cloned()).collect()
        };
        for pmc in &owned {
            self.log_allocation(pmc);
        }
        // A write error here is reported by the next FLUSHLOG, as any other.
        let _ = self.flush_log(owner);
        Ok(())
    }

    /// FLUSHLOG: writes out everything logged so far; returns a pending writer error.
    pub(crate) fn op_flush_log(&self) -> Result<(), Errno> {
        self.flush_log(self.kernel.current_pid())
    }

    /// CLOSELOG: a CLOSELOG record, then the log is written out and closed.
    pub(crate) fn op_close_log(&self) -> Result<(), Errno> {
        let owner = self.kernel.current_pid();
        if !self.has_log(owner) {
            return Err(Errno::Inval);
        }
        self.log_record(owner, &Record::CloseLog);
        self.close_log(owner)
    }

    /// WRITELOG: a USERDATA record (ENOMEM when no log buffer is free). After a write of the
    /// log failed, it succeeds as FreeBSD's does: the record is dropped and counted, and the
    /// error is FLUSHLOG's and CLOSELOG's to report (the writer signalled it already).
    pub(crate) fn op_write_log(&self, arg: UserPtr) -> Result<(), Errno> {
        let request: PmcOpWriteLog = self.copy_in(arg)?;
        let owner = self.kernel.current_pid();
        if !self.has_log(owner) {
            return Err(Errno::Inval);
        }
        let record = Record::UserData(UserData { data: request.pm_userdata });
        if self.log_record(owner, &record) {
            return Ok(());
        }
        let failed =
            self.logs.lock(&self.kernel).owners.get(&owner).is_some_and(|l| l.error.is_some());
        if failed { Ok(()) } else { Err(Errno::NoMem) }
    }
}
