//! The hwpmc system call: decoding each `PMC_OP_*` request, checking it, doing it, and encoding
//! the reply, with the errno hwpmc(4) documents for every failure. A request that fails changes
//! nothing: checks come first, and a reply that cannot be copied out undoes the request.
//!
//! This file decodes and dispatches; each group of operations has a file: `info.rs` (the
//! GET* queries), `admin.rs` (PMCADMIN), `allocate.rs`, `attach.rs` (attach and detach),
//! `start.rs` (start and stop), `value.rs` (PMCRW, PMCSETCOUNT, PMCGETMSR, PMCREADTIMES),
//! `release.rs` and `log.rs` (the log operations); `shared_regs.rs` claims the registers a PMC
//! shares with other counters.

mod admin;
mod allocate;
mod attach;
mod info;
mod log;
mod release;
mod shared_regs;
mod start;
mod value;

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::abi::{Op, PMC_OP_PMCREADTIMES};
use crate::book::Pmc;
use crate::driver::Driver;
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, Pid, Tid, UserPtr};
use crate::refusal::{Cause, Refusal};
use crate::types::PmcHandle;

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// The hwpmc system call: `op` is a `PMC_OP_*` number and `arg` the caller's argument
    /// pointer. Returns the errno hwpmc(4) documents on failure; a failed call changes nothing.
    /// The text of a failure goes to the kernel ([`Kernel::set_error_text`]).
    pub fn syscall(&self, op: u32, arg: UserPtr) -> Result<(), Errno> {
        self.syscall_explained(op, arg).map_err(|(errno, _)| errno)
    }

    /// [`Driver::syscall`], also returning the text of a failure (empty for a failure without
    /// one), for a host that calls the driver on the caller's thread and reads the text here
    /// rather than keeping it per thread. The kernel is handed the text all the same.
    pub fn syscall_explained(&self, op: u32, arg: UserPtr) -> Result<(), (Errno, &'static str)> {
        use core::sync::atomic::Ordering::Relaxed;
        self.local_stats().syscalls.fetch_add(1, Relaxed);
        let result = match Op::from_u32(op) {
            Some(op) => self.dispatch(op, arg),
            None if op == PMC_OP_PMCREADTIMES => self.op_read_times(arg),
            None => Err(Cause::UnknownOp.into()),
        };
        // The ABI edge: the one place a refusal becomes an errno and a text.
        result.map_err(|refusal| {
            self.local_stats().syscall_errors.fetch_add(1, Relaxed);
            self.kernel.set_error_text(refusal.text());
            (refusal.errno(), refusal.text().unwrap_or(""))
        })
    }

    fn dispatch(&self, op: Op, arg: UserPtr) -> Result<(), Refusal> {
        match op {
            Op::GetModuleVersion => self.op_get_module_version(arg),
            Op::GetCpuInfo => self.op_get_cpu_info(arg),
            Op::GetDriverStats => self.op_get_driver_stats(arg),
            Op::GetPmcInfo => self.op_get_pmc_info(arg),
            Op::GetDynEventInfo => self.op_get_dyn_event_info(arg),
            Op::GetCaps => self.op_get_caps(arg),
            Op::PmcAdmin => self.op_pmc_admin(arg),
            Op::PmcAllocate => self.op_allocate(arg),
            Op::PmcAttach => self.op_attach(arg),
            Op::PmcDetach => self.op_detach(arg),
            Op::PmcStart => self.op_start(arg),
            Op::PmcStop => self.op_stop(arg),
            Op::PmcRw => self.op_rw(arg),
            Op::PmcSetCount => self.op_set_count(arg),
            Op::PmcGetMsr => self.op_get_msr(arg),
            Op::PmcRelease => self.op_release(arg),
            Op::ConfigureLog => self.op_configure_log(arg),
            Op::FlushLog => self.op_flush_log(),
            Op::CloseLog => self.op_close_log(),
            Op::WriteLog => self.op_write_log(arg),
        }
    }

    pub(crate) fn copy_in<T: FromBytes + IntoBytes + KnownLayout + Immutable>(
        &self,
        arg: UserPtr,
    ) -> Result<T, Errno> {
        let mut value = T::new_zeroed();
        self.kernel.copy_in(arg, value.as_mut_bytes())?;
        Ok(value)
    }

    fn copy_out<T: IntoBytes + Immutable>(&self, value: &T, arg: UserPtr) -> Result<(), Refusal> {
        Ok(self.kernel.copy_out(value.as_bytes(), arg)?)
    }

    /// A CPU number from a request: EINVAL if out of range, ENXIO if not active.
    fn checked_cpu(&self, cpu: i32) -> Result<Cpu, Cause> {
        let cpu = u32::try_from(cpu).map_err(|_| Cause::InvalidCpu)?;
        if cpu >= self.kernel.cpu_count() {
            return Err(Cause::InvalidCpu);
        }
        if !self.kernel.cpu_active(cpu) {
            return Err(Cause::CpuOffline);
        }
        Ok(cpu)
    }

    /// The thread of process `pid` that calls (a system call, or a hook in the thread's
    /// context): the kernel's answer ([`Kernel::current_tid`]), else the thread switched in on
    /// the current CPU if it is `pid`'s.
    pub(crate) fn calling_thread(&self, pid: Pid) -> Option<Tid> {
        if self.kernel.current_pid() == pid {
            if let Some(tid) = self.kernel.current_tid() {
                return Some(tid);
            }
        }
        let state = self.machine.cpu(self.kernel.current_cpu())?;
        let tid = state.current_tid();
        (state.current_pid() == pid && tid > 0).then_some(tid)
    }

    /// The caller's PMC `id` and a copy of it.
    fn find_cloned(&self, caller: Pid, id: u32) -> Result<(PmcHandle, Pmc), Cause> {
        let book = self.book.lock(&self.kernel);
        let handle = book.find(caller, id)?;
        let pmc = book.pmc(handle).cloned().ok_or(Cause::UnknownPmc)?;
        Ok((handle, pmc))
    }
}
