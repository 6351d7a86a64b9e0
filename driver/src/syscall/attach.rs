//! PMCATTACH and PMCDETACH: linking a process PMC to its target processes (and their
//! descendants) and unlinking it, settling what it counted for them.

use crate::abi::{PmcFlags, PmcOpPmcAttach};
use crate::book::Pmc;
use crate::driver::Driver;
use crate::hw::Hardware;
use crate::kernel::{Kernel, Pid, ProcessState, Signal, UserPtr};
use crate::refusal::{Cause, Refusal};
use crate::types::PmcHandle;
use alloc::vec::Vec;

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// The PMC and target of a PMCATTACH or PMCDETACH request: a process PMC of the caller,
    /// and a pid (0 is the caller; negative is EINVAL).
    fn attach_request(&self, arg: UserPtr) -> Result<(PmcHandle, Pmc, Pid, Pid), Refusal> {
        let request: PmcOpPmcAttach = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let (handle, pmc) = self.find_cloned(caller, request.pm_pmc)?;
        if pmc.mode().is_system() {
            return Err(Cause::AttachSystemMode.into());
        }
        let pid = match request.pm_pid {
            0 => caller,
            pid if pid < 0 => return Err(Cause::InvalidPid.into()),
            pid => pid,
        };
        Ok((handle, pmc, pid, caller))
    }

    /// PMCATTACH.
    pub(super) fn op_attach(&self, arg: UserPtr) -> Result<(), Refusal> {
        let (handle, pmc, pid, caller) = self.attach_request(arg)?;
        if pmc.is_running() {
            return Err(Cause::AttachRunning.into());
        }
        // A thread PMC counts the calling thread: of no other process.
        let thread = if pmc.flags.contains(PmcFlags::THREAD) {
            if pid != caller {
                return Err(Cause::ThreadOtherProcess.into());
            }
            Some(self.calling_thread(caller).ok_or(Cause::ThreadUnknown)?)
        } else {
            None
        };
        if self.kernel.process_state(pid) != ProcessState::Alive {
            return Err(Cause::NoSuchProcess.into());
        }
        if pid != caller {
            self.kernel.can_debug(pid)?;
        }
        if pmc.msr_granted && pid != pmc.owner {
            return Err(Cause::AttachGranted.into());
        }
        let mut pids = alloc::vec![pid];
        if pmc.flags.contains(PmcFlags::DESCENDANTS) {
            self.collect_descendants(pid, &mut pids);
        }
        let mut book = self.book.lock(&self.kernel);
        let pmc = book.pmc(handle).ok_or(Cause::UnknownPmc)?;
        if pmc.is_running() {
            return Err(Cause::AttachRunning.into());
        }
        if pmc.targets.contains(&pid) {
            return Err(Cause::AlreadyAttached.into());
        }
        let row = pmc.row;
        for &p in &pids {
            let holder = book.target(p).and_then(|t| t.get(row)).map(|r| r.pmc);
            if holder.is_some_and(|h| h != handle) || self.mux_attach_conflict(&book, handle, p) {
                return Err(Cause::RowInUse.into());
            }
        }
        match thread {
            Some(tid) => book.link_thread(handle, row, pid, tid)?,
            None => {
                for &p in &pids {
                    book.link_target(handle, row, p)?;
                }
            }
        }
        let pmc = book.pmc(handle).cloned();
        drop(book);
        self.publish_loads(&pids);
        if let Some(pmc) = pmc {
            for p in pids {
                self.log_attach(&pmc, p);
                // A sampling PMC's log needs the target's executables to name its samples.
                if pmc.mode().is_sampling() {
                    self.log_mappings(pmc.owner, p);
                }
            }
        }
        Ok(())
    }

    /// Appends every descendant of `pid` to `out`.
    fn collect_descendants(&self, pid: Pid, out: &mut Vec<Pid>) {
        let mut children = Vec::new();
        self.kernel.for_each_child(pid, &mut |child| children.push(child));
        for child in children {
            if self.kernel.process_state(child) == ProcessState::Alive && !out.contains(&child) {
                out.push(child);
                self.collect_descendants(child, out);
            }
        }
    }

    /// PMCDETACH.
    pub(super) fn op_detach(&self, arg: UserPtr) -> Result<(), Refusal> {
        let (handle, pmc, pid, _) = self.attach_request(arg)?;
        if self.kernel.process_state(pid) == ProcessState::NotFound {
            return Err(Cause::NoSuchProcess.into());
        }
        {
            let book = self.book.lock(&self.kernel);
            let target = book.target(pid).ok_or(Cause::NoSuchProcess)?;
            if target.get(pmc.row).map(|r| r.pmc) != Some(handle) {
                return Err(Cause::NotAttached.into());
            }
        }
        let mut pids = alloc::vec![pid];
        if pmc.flags.contains(PmcFlags::DESCENDANTS) {
            self.collect_descendants(pid, &mut pids);
        }
        self.detach_targets(handle, &pids);
        for p in pids {
            self.log_detach(&pmc, p);
        }
        Ok(())
    }

    /// Detaches `handle` from `pids`: unlinks them (so that no CPU loads it for them any more),
    /// then unloads it from the CPUs where it still runs for one of them; the owner gets SIGIO
    /// if the PMC lost its last target.
    pub(crate) fn detach_targets(&self, handle: PmcHandle, pids: &[Pid]) {
        if self.book.lock(&self.kernel).pmc(handle).is_some_and(Pmc::runs_on_host) {
            for &pid in pids {
                self.hosted_detach(handle, pid);
            }
        }
        // Each target's share so far (PROCEXIT's value), then the links go.
        let (pmc, mut shares) = {
            let mut book = self.book.lock(&self.kernel);
            book.settle(handle);
            let Some(pmc) = book.pmc(handle).cloned() else { return };
            let mut shares: Vec<(Pid, u64)> = Vec::with_capacity(pids.len());
            for &pid in pids {
                let share = book.target(pid).and_then(|t| t.get(pmc.row));
                let share = share.filter(|r| r.pmc == handle).map_or(0, |r| r.value);
                shares.push((pid, share));
                book.unlink_target(handle, pmc.row, pid);
            }
            (pmc, shares)
        };
        self.publish_loads(pids);
        // No switch-in loads it for them now: what still runs is unloaded, and what switch-outs
        // handed back meanwhile is in the cells.
        let mut unloaded: Vec<(Pid, u64, u64)> = Vec::new();
        self.on_cpus_holding(handle, |cpu, row| {
            let for_target = self.machine.slot(cpu, row).is_some_and(|s| pids.contains(&s.pid()));
            if for_target {
                if let Some(Some(found)) = self.on_cpu(cpu, || self.unload_pmc(cpu, handle, row)) {
                    unloaded.push(found);
                }
            }
        });
        let mut book = self.book.lock(&self.kernel);
        for (pid, share) in &mut shares {
            let (handed_back, lost) = book.take_cell(handle, *pid);
            let (delta, dropped) = unloaded
                .iter()
                .filter(|(p, _, _)| p == pid)
                .fold((handed_back, lost), |(d, l), &(_, delta, dropped)| {
                    (d.wrapping_add(delta), l + dropped)
                });
            // The link is gone: the PMC's count takes it, and the share adds it up.
            book.credit(handle, *pid, delta, dropped);
            *share = share.wrapping_add(delta);
            if dropped > 0 {
                self.stats.unreported_drops.store(true, core::sync::atomic::Ordering::Relaxed);
            }
        }
        let now_empty = book.pmc(handle).is_some_and(|p| p.targets.is_empty());
        drop(book);
        let log_exit = pmc.flags.contains(PmcFlags::LOG_PROCEXIT) && !pmc.mode().is_sampling();
        if log_exit {
            for &(pid, share) in &shares {
                self.log_proc_exit(&pmc, pid, share);
            }
        }
        // A thread PMC's owner is its target, told of its threads' ends by its own kernel.
        if !pmc.targets.is_empty() && now_empty && !pmc.flags.contains(PmcFlags::THREAD) {
            self.kernel.signal(pmc.owner, Signal::Io);
        }
    }
}
