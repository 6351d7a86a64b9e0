//! The log operations: CONFIGURELOG, FLUSHLOG, CLOSELOG and WRITELOG.

use crate::abi::{PMC_VERSION, PmcOpConfigureLog, PmcOpWriteLog};
use crate::book::Pmc;
use crate::driver::Driver;
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Kernel, UserPtr};
use crate::log::OwnerLog;
use crate::refusal::{Cause, Refusal};
use pmclog::{Initialize, Record, UserData};

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// CONFIGURELOG: a descriptor of 0 or more starts a log (EBUSY if one is active) and writes
    /// its INITIALIZE record at once; a negative one writes out and closes the log.
    pub(crate) fn op_configure_log(&self, arg: UserPtr) -> Result<(), Refusal> {
        let request: PmcOpConfigureLog = self.copy_in(arg)?;
        if request.pm_flags != 0 {
            return Err(Cause::InvalidLogFlags.into());
        }
        let owner = self.kernel.current_pid();
        if request.pm_logfd < 0 {
            if !self.has_log(owner) {
                return Err(Cause::NoLog.into());
            }
            // Closing keeps what was logged (FreeBSD discards queued buffers here).
            let _ = self.close_log(owner);
            return Ok(());
        }
        if self.has_log(owner) {
            return Err(Cause::LogActive.into());
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
                return Err(Cause::LogActive.into());
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
            let book = self.book.lock(&self.kernel);
            let handles = book.owned(owner).to_vec();
            handles.iter().filter_map(|&h| book.pmc(h).cloned()).collect()
        };
        for pmc in &owned {
            self.log_allocation(pmc);
        }
        // A write error here is reported by the next FLUSHLOG, as any other.
        let _ = self.flush_log(owner);
        Ok(())
    }

    /// FLUSHLOG: writes out everything logged so far; returns a pending writer error.
    pub(crate) fn op_flush_log(&self) -> Result<(), Refusal> {
        // The log's writer errors pass as they are; EINVAL is the log's absence.
        let no_log = |e| Refusal::from(e).or_cause(Errno::Inval, Cause::NoLog);
        self.flush_log(self.kernel.current_pid()).map_err(no_log)
    }

    /// CLOSELOG: a CLOSELOG record, then the log is written out and closed.
    pub(crate) fn op_close_log(&self) -> Result<(), Refusal> {
        let owner = self.kernel.current_pid();
        if !self.has_log(owner) {
            return Err(Cause::NoLog.into());
        }
        self.log_record(owner, &Record::CloseLog);
        self.close_log(owner).map_err(|e| Refusal::from(e).or_cause(Errno::Inval, Cause::NoLog))
    }

    /// WRITELOG: a USERDATA record (ENOMEM when no log buffer is free). After a write of the
    /// log failed, it succeeds as FreeBSD's does: the record is dropped and counted, and the
    /// error is FLUSHLOG's and CLOSELOG's to report (the writer signalled it already).
    pub(crate) fn op_write_log(&self, arg: UserPtr) -> Result<(), Refusal> {
        let request: PmcOpWriteLog = self.copy_in(arg)?;
        let owner = self.kernel.current_pid();
        if !self.has_log(owner) {
            return Err(Cause::NoLog.into());
        }
        let record = Record::UserData(UserData { data: request.pm_userdata });
        if self.log_record(owner, &record) {
            return Ok(());
        }
        let failed =
            self.logs.lock(&self.kernel).owners.get(&owner).is_some_and(|l| l.error.is_some());
        if failed { Ok(()) } else { Err(Cause::LogNoMemory.into()) }
    }
}
