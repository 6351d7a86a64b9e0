//! The hooks a kernel calls: context switches, fork, exec, exit, threads, the performance
//! monitoring interrupt and software events.

use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use crate::abi::{Class, PmcFlags};
use crate::backend::{CounterMask, PmuBackend};
use crate::class::RowCounter;
use crate::driver::{Driver, ExecInfo};
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, Pid, Tid, TrapFrame};
use crate::loads::{ImageEntry, LoadImage, LoadSpec};
use crate::logging::record_path;
use crate::mux::NOT_MULTIPLEXED;
use crate::percpu::{self, PerCpu, Slot, UNDO_PMCS, UNDO_RDPMC};
use crate::sample::{FrameWriter, PendingView, SampleHeader, SampleRing, UserStack};
use crate::state::Core;
use crate::types::{PmcHandle, SampleFlags};
use core::fmt::Write;

use pmclog::{
    Callchain, CallchainFlags, MapIn, MapOut, ProcCreate, ProcExec, ProcFork, ProgramCounters,
    Record, SysExit, ThrCreate, ThrExit,
};

use crate::abi::{Mode, PMC_ID_INVALID};
use crate::text::FixedText;

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Scheduler hook: thread `tid` of process `pid` starts running on `cpu` (called on `cpu`,
    /// with preemption disabled). Loads the running PMCs attached to `pid` on this CPU and
    /// starts them together, from the process's image in this CPU's image map (see the crate's
    /// concurrency contract): no lock. A thread of a process without running PMCs costs a few
    /// instructions.
    // An entry point the scheduler calls, kept small: the loading is out of line.
    #[inline(never)]
    pub fn switch_in(&self, cpu: Cpu, pid: Pid, tid: Tid) {
        let Some(state) = self.cpus.get(cpu as usize) else { return };
        state.set_current(pid, tid);
        // SeqCst, as the stores of the running pid here and of the filter by PMCSTART, which
        // then looks at the running pids: one of the two sees the other, so a PMC started while
        // its target switches in is loaded by one of them.
        if self.may_have_running_pmcs(pid) {
            self.load_or_restart(cpu, state, pid);
        }
    }

    /// [`Self::switch_in`] of a process that may have running PMCs: starts again what this CPU
    /// parked for it (see `parking.rs`), or loads its image.
    // Out of line, so that `switch_in` stays as short for a thread without PMCs (a tail call).
    #[inline(never)]
    fn load_or_restart(&self, cpu: Cpu, state: &PerCpu, pid: Pid) {
        if !self.restart_parked(cpu, state, pid) {
            self.load_process_pmcs(cpu, state, pid);
        }
    }

    /// [`Self::switch_in`] of a process that may have running PMCs: loads its image (see
    /// [`crate::loads`]) in one pass.
    #[inline(never)]
    fn load_process_pmcs(&self, cpu: Cpu, state: &PerCpu, pid: Pid) {
        let Some(table) = self.load_table(cpu) else { return };
        let Some(map) = table.read() else { return };
        self.evict_parked(state);
        let Some(image) = map.get(pid) else { return };
        let free = (state.published.counters().bits() & image.counters().bits()) == 0;
        let to_start = if free && !image.by_thread() {
            let to_start = self.load_image(state, image, pid);
            if image.parkable() && state.parks {
                state.loaded_parkable(pid, map.version());
            }
            to_start
        } else {
            // A counter of the image holds another PMC (which the rows' dispositions rule
            // out), or the process has thread PMCs: PMC by PMC, those of this thread.
            // (The thread is read back here, not passed: `switch_in` stays as short.)
            self.load_specs(state, image.specs(), pid, state.current_tid())
        };
        if !to_start.is_empty() {
            self.backend.start(&self.hw, &state.pmu, to_start);
        }
        if image.multiplexed() {
            // Out of line, under the bookkeeping lock: the turn due now, and its times.
            self.mux_switch_in(cpu);
        }
        if image.user_rdpmc() {
            state.allow_rdpmc();
            self.kernel.set_user_rdpmc(true);
        }
    }

    /// Loads `image` for process `pid` on `state`'s CPU, whose counters are all free: claims
    /// the slots and writes the counters, publishes them with one store, programs their
    /// control registers in one pass and starts them, then loads the other rows. Returns the
    /// counters still to start (those the other rows programmed: none, as their PMCs are
    /// software ones).
    // Inlined into its one caller: a call of its own costs a second prologue per switch-in.
    #[inline(always)]
    fn load_image(&self, state: &PerCpu, image: &LoadImage, pid: Pid) -> CounterMask {
        for (entry, counter) in image.hardware() {
            let Some(slot) = state.slots.get(entry.row as usize) else { continue };
            let load = self.load_value(entry);
            slot.claim(entry.handle, pid, (entry.start, load), entry.sample_flags, entry.cell);
            self.backend.write_counter(&self.hw, *counter, load);
        }
        if !image.counters().is_empty() {
            state.loaded_pmcs();
            state.current_counters.store(image.counters().bits(), Ordering::Relaxed);
            state.published.publish(image.counters());
        }
        self.backend.program_and_start(&self.hw, &state.pmu, image.regs());
        let mut started = CounterMask::EMPTY;
        for (entry, armed) in image.others() {
            let Some(slot) = state.slots.get(entry.row as usize) else { continue };
            if slot.handle().is_none() {
                let load = self.load_value(entry);
                slot.claim(entry.handle, pid, (entry.start, load), entry.sample_flags, entry.cell);
                let counters = percpu::program(&self.backend, &self.hw, state, slot, armed, load);
                started = started.union(counters);
                state.add_current(entry.row, slot.counter().mask());
            }
        }
        started
    }

    /// The value `entry`'s counter is loaded with: a sampling PMC continues the process's
    /// period where it stands.
    #[inline]
    fn load_value(&self, entry: &ImageEntry) -> u64 {
        if entry.sample_flags.is_sampling() {
            self.credit_cell(entry.cell).map_or(entry.start, |c| c.resume())
        } else {
            entry.start
        }
    }

    /// Loads the PMCs of `specs` that run here and whose slots are free, one by one, for
    /// thread `tid` of process `pid` on `state`'s CPU. Returns the counters to start.
    // Out of line: only processes with thread PMCs need it (the rows' dispositions keep the
    // others from it).
    #[inline(never)]
    fn load_specs(&self, state: &PerCpu, specs: &[LoadSpec], pid: Pid, tid: Tid) -> CounterMask {
        let mut counters = CounterMask::EMPTY;
        for spec in specs {
            let here = spec.runs_on(state.core_type) && spec.counts_thread(tid);
            if spec.turn != NOT_MULTIPLEXED || !here {
                continue;
            }
            let Some(slot) = state.slots.get(spec.row as usize) else { continue };
            if slot.handle().is_none() {
                let entry = spec.image_entry();
                let load = self.load_value(&entry);
                counters = counters.union(self.program_pmc(state, slot, spec, load, pid));
                state.add_current(spec.row, slot.counter().mask());
            }
        }
        counters
    }

    /// Scheduler hook: thread `tid` of process `pid` stops running on `cpu` (called on `cpu`,
    /// with preemption disabled). Stops its PMCs together, then unloads them and hands what
    /// they counted back to their credit cells (see the crate's concurrency contract): no lock,
    /// but for a PMC with PMC_F_LOG_PROCCSW, whose PROCCSW record goes to its owner's log.
    // An entry point the scheduler calls, kept small: the unloading is out of line.
    #[inline(never)]
    pub fn switch_out(&self, cpu: Cpu, pid: Pid, tid: Tid) {
        let Some(state) = self.cpus.get(cpu as usize) else { return };
        if state.holds_anything() {
            // Parking (see `parking.rs`) is short enough to stay in the hook.
            if state.may_park() {
                self.park(state, pid);
            } else {
                self.unload_process_pmcs(state, pid, tid);
            }
        }
        // After the counters stopped: a PMI served while they are being stopped (an NMI can
        // land anywhere in the scheduler) samples the thread that is still leaving.
        state.clear_current();
    }

    /// [`Self::switch_out`] of a thread that has PMCs loaded (or RDPMC allowed) here: stops
    /// its counters and clears their control registers in one backend call, hides them from
    /// the interrupt path with one store, then folds each PMC and hands its count back.
    #[inline(never)]
    fn unload_process_pmcs(&self, state: &PerCpu, pid: Pid, tid: Tid) {
        state.left(pid);
        self.mux_switch_out(state, pid);
        let undo = state.take_undo();
        if undo & UNDO_RDPMC != 0 {
            self.kernel.set_user_rdpmc(false);
        }
        if undo & UNDO_PMCS == 0 {
            return;
        }
        let counters = state.take_current_counters();
        self.backend.stop_and_unprogram(&self.hw, &state.pmu, counters);
        // Hidden from the interrupt path once stopped and unprogrammed: an interrupt before
        // this store may still fold and reload them (their overflow indications are cleared
        // now, so a later one finds nothing of theirs), and the final reads below take
        // everything.
        state.published.unpublish(counters);
        self.unload_slots(state, counters, pid, tid);
    }

    /// Unloads the PMCs of thread `tid` of process `pid` in the slots of `counters` (stopped,
    /// unprogrammed, hidden) and of the rows without a hardware counter loaded for it (the list
    /// is empty afterwards), and hands their counts back: a switch-out's last step, and an
    /// eviction's (`parking.rs`).
    #[inline(always)]
    pub(crate) fn unload_slots(&self, state: &PerCpu, counters: CounterMask, pid: Pid, tid: Tid) {
        // Inlined wherever it is called: no closure is built in memory.
        counters.for_each_bit(
            #[inline(always)]
            |bit| {
                if let Some(slot) = state.slot_of_counter(bit) {
                    self.unload_slot(slot, pid, tid);
                }
            },
        );
        for row in state.take_current_rows() {
            if let Some(slot) = state.slots.get(row as usize) {
                // A SOFT or TSC row's own flag (a hardware counter's went with the CPU's word).
                slot.unpublish();
                self.unload_slot(slot, pid, tid);
            }
        }
    }

    /// Switch-out of thread `tid` of process `pid`: unloads the PMC in `slot` (hidden from the
    /// interrupt path, its counter stopped and unprogrammed) if it is `pid`'s, and hands what it
    /// counted back to its credit cell.
    #[inline(always)]
    fn unload_slot(&self, slot: &Slot, pid: Pid, tid: Tid) {
        let Some(handle) = slot.handle() else { return };
        if slot.pid() != pid {
            return;
        }
        let flags = slot.sample_flags();
        if flags.is_plain_counting() {
            // The common case, with one test: a counting PMC that logs nothing hands back its
            // count and nothing else.
            let delta = slot.take_final(percpu::read(&self.backend, &self.hw, slot));
            if let Some(cell) = self.credit_cell(slot.cell()) {
                cell.add(delta);
            }
            slot.release();
            return;
        }
        let (delta, dropped, resume) = self.finish_unload(slot, flags);
        // Handed back before the slot empties: a system call that finds it empty finds this
        // in the cell (see `credits`).
        if let Some(cell) = self.credit_cell(slot.cell()) {
            cell.add(delta);
            if let Some(resume) = resume {
                // The next switch-in continues the period where this one left it.
                cell.set_resume(resume);
            }
            if dropped != 0 {
                cell.add_dropped(dropped);
                self.stats.unreported_drops.store(true, Ordering::Relaxed);
            }
        }
        if flags.logs_context_switches() {
            self.log_context_switch(handle, pid, tid, delta);
        }
        slot.release();
    }

    /// Logs a PROCCSW record of `delta` events counted by `handle` for thread `tid` of `pid`.
    // Out of line: only PMC_F_LOG_PROCCSW PMCs take the locks it takes.
    #[inline(never)]
    fn log_context_switch(&self, handle: PmcHandle, pid: Pid, tid: Tid, delta: u64) {
        let core = self.core.lock(&self.kernel);
        if let Some(pmc) = core.pmc(handle) {
            self.log_proc_csw(pmc, pid, tid, delta);
        }
    }

    /// Process `parent` forked `child` (called after the child exists, before it runs). PMCs
    /// attached to the parent with PMC_F_DESCENDANTS follow the child; the child owns nothing.
    pub fn process_fork(&self, parent: Pid, child: Pid) {
        let mut core = self.core.lock(&self.kernel);
        let inherited: Vec<(u32, PmcHandle)> = core.target(parent).map_or_else(Vec::new, |t| {
            t.iter()
                .filter(|(_, r)| {
                    core.pmc(r.pmc).is_some_and(|p| p.flags.contains(PmcFlags::DESCENDANTS))
                })
                .map(|(row, r)| (row, r.pmc))
                .collect()
        });
        let mut followers: Vec<Pid> = Vec::new();
        for &(row, handle) in &inherited {
            // Without a credit cell left (the arena holds millions) the child is not counted.
            if core.link_target(handle, row, child).is_ok() {
                if let Some(pmc) = core.pmc(handle) {
                    followers.push(pmc.owner);
                }
            }
        }
        drop(core);
        if !inherited.is_empty() {
            self.publish_loads(&[child]);
        }
        let ss_owners = self.ss_owners();
        followers.extend(ss_owners.iter().copied());
        followers.sort_unstable();
        followers.dedup();
        for owner in followers {
            self.log_record(owner, &Record::ProcFork(ProcFork { old_pid: parent, new_pid: child }));
        }
        if !ss_owners.is_empty() {
            let comm = self.command_name(child);
            let record =
                Record::ProcCreate(ProcCreate { pid: child, flags: 0, comm: comm.as_bytes() });
            for owner in ss_owners {
                self.log_record(owner, &record);
            }
        }
    }

    /// Owners of running system-sampling PMCs: they see every process (FreeBSD's
    /// `pmc_ss_owners`).
    fn ss_owners(&self) -> Vec<Pid> {
        Self::ss_owners_of(&self.core.lock(&self.kernel))
    }

    /// [`Self::ss_owners`], with the bookkeeping lock held.
    fn ss_owners_of(core: &Core) -> Vec<Pid> {
        let mut owners: Vec<Pid> = core
            .handles()
            .filter_map(|h| core.pmc(h))
            .filter(|p| p.mode() == Mode::SystemSampling && p.is_running())
            .map(|p| p.owner)
            .collect();
        owners.sort_unstable();
        owners.dedup();
        owners
    }

    /// The command name of `pid`: its executable's base name, cut to 19 bytes.
    fn command_name(&self, pid: Pid) -> FixedText<{ pmclog::COMM_LEN }> {
        let mut path = [0u8; 1024];
        let len = self.kernel.process_path(pid, &mut path).min(path.len());
        let path = &path[..len];
        let base = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
        let mut name = FixedText::new();
        // Writing into a fixed buffer cannot fail; it truncates.
        let _ = name.write_str(core::str::from_utf8(base).unwrap_or("?"));
        name
    }

    /// Process `pid` executed a new program. A process that owned PMCs loses them; after a
    /// set-id exec, PMCs whose owners may no longer debug the process are detached from it.
    /// (FreeBSD's check is inverted and keeps exactly those; see hwpmc-internals §4.2.)
    pub fn process_exec(&self, pid: Pid, exec: &ExecInfo<'_>) {
        let path = record_path(exec.path);
        let exec_record = |pmcid| {
            Record::ProcExec(ProcExec {
                pid,
                pmcid,
                base_addr: exec.base_addr,
                dyn_addr: exec.dyn_addr,
                path,
            })
        };
        for owner in self.ss_owners() {
            self.log_record(owner, &exec_record(PMC_ID_INVALID));
        }
        let attached: Vec<(Pid, u32)> = {
            let core = self.core.lock(&self.kernel);
            core.target(pid).map_or_else(Vec::new, |t| {
                t.iter()
                    .filter_map(|(_, r)| core.pmc(r.pmc))
                    .map(|p| (p.owner, p.id.to_u32()))
                    .collect()
            })
        };
        for (owner, pmcid) in attached {
            self.log_record(owner, &exec_record(pmcid));
        }
        if self.core.lock(&self.kernel).owns_any(pid) {
            self.release_all_of(pid);
        }
        if !exec.credentials_changed {
            return;
        }
        let attached: Vec<(PmcHandle, Pid)> = {
            let core = self.core.lock(&self.kernel);
            let Some(target) = core.target(pid) else { return };
            target.iter().filter_map(|(_, r)| core.pmc(r.pmc).map(|p| (r.pmc, p.owner))).collect()
        };
        for (handle, owner) in attached {
            if owner != pid && !self.kernel.may_debug(owner, pid) {
                self.detach_targets(handle, &[pid]);
            }
        }
    }

    /// Process `pid` is exiting (called once, from its last thread). Its PMCs are unloaded and
    /// detached (an owner gets SIGIO when its PMC loses its last target), and the PMCs it owned
    /// are released.
    pub fn process_exit(&self, pid: Pid) {
        for owner in self.ss_owners() {
            self.log_record(owner, &Record::SysExit(SysExit { pid }));
        }
        let attached: Vec<PmcHandle> = {
            let core = self.core.lock(&self.kernel);
            core.target(pid).map(|t| t.iter().map(|(_, r)| r.pmc).collect())
        }
        .unwrap_or_default();
        for handle in attached {
            self.detach_targets(handle, &[pid]);
        }
        if self.core.lock(&self.kernel).owns_any(pid) {
            self.release_all_of(pid);
        }
        if self.has_log(pid) {
            let _ = self.close_log(pid);
        }
    }

    /// Process `pid` mapped `path` executable at `start..end` (mmap, or a dynamic loader).
    /// Owners of system-sampling PMCs and of sampling PMCs attached to `pid` get MAP_IN.
    /// (A MAP_IN record carries no end: FreeBSD's format names only the start.)
    pub fn mmap(&self, pid: Pid, start: u64, _end: u64, path: &[u8]) {
        let path = record_path(path);
        for owner in self.mapping_audience(pid) {
            self.log_record(owner, &Record::MapIn(MapIn { pid, start, path }));
        }
    }

    /// Process `pid` unmapped the executable mapping `start..end`: MAP_OUT, to the same owners
    /// as [`Self::mmap`].
    pub fn munmap(&self, pid: Pid, start: u64, end: u64) {
        for owner in self.mapping_audience(pid) {
            self.log_record(owner, &Record::MapOut(MapOut { pid, start, end }));
        }
    }

    /// Who hears about `pid`'s mappings: owners of running system-sampling PMCs and of sampling
    /// PMCs attached to `pid`.
    fn mapping_audience(&self, pid: Pid) -> Vec<Pid> {
        let mut owners = self.ss_owners();
        {
            let core = self.core.lock(&self.kernel);
            if let Some(target) = core.target(pid) {
                let sampling = target.iter().filter_map(|(_, r)| core.pmc(r.pmc));
                owners.extend(sampling.filter(|p| p.mode().is_sampling()).map(|p| p.owner));
            }
        }
        owners.sort_unstable();
        owners.dedup();
        owners
    }

    /// Thread `tid` was created in process `pid` (called in the creating thread's context,
    /// before the new thread runs). Inheriting thread PMCs (`PmcFlags::THREAD_INHERIT`) that
    /// count the creator count it too.
    pub fn thread_create(&self, pid: Pid, tid: Tid) {
        let creator = self.calling_thread(pid);
        // One lock for the inheriting thread PMCs and the THR_CREATE audience.
        let (inherited, owners) = {
            let mut core = self.core.lock(&self.kernel);
            let inherited = creator.is_some_and(|c| core.thread_created(pid, c, tid));
            (inherited, Self::ss_owners_of(&core))
        };
        if inherited {
            self.publish_loads(&[pid]);
        }
        if owners.is_empty() {
            return;
        }
        let name = self.command_name(pid);
        let record = Record::ThrCreate(ThrCreate { tid, pid, flags: 0, name: name.as_bytes() });
        for owner in owners {
            self.log_record(owner, &record);
        }
    }

    /// Thread `tid` of process `pid` exited (or is exiting: its last switch-out may come
    /// after). Thread PMCs stop counting it (what it counted until it leaves its CPU is kept);
    /// those that counted it alone are detached (unloaded at once, their counts readable).
    pub fn thread_exit(&self, pid: Pid, tid: Tid) {
        // One lock for the thread PMCs counting it and the THR_EXIT audience.
        let (changed, orphaned, owners) = {
            let mut core = self.core.lock(&self.kernel);
            let (changed, orphaned) = core.thread_exited(pid, tid);
            (changed, orphaned, Self::ss_owners_of(&core))
        };
        if changed {
            self.publish_loads(&[pid]);
        }
        for handle in orphaned {
            self.detach_targets(handle, &[pid]);
        }
        for owner in owners {
            self.log_record(owner, &Record::ThrExit(ThrExit { tid }));
        }
    }

    /// The performance-monitoring interrupt (an NMI on x86) on `cpu`, called on `cpu` with the
    /// interrupted context. Returns whether a counter of the driver overflowed (whether the NMI
    /// is claimed). Leaves the PMI entry of the local APIC unmasked whatever it returns. Takes
    /// no lock and allocates nothing; a CPU without a PMU never has its MSRs read here.
    ///
    /// The backend's PMI handler (`PmuBackend::pmi`) finds the overflowed counters and
    /// acknowledges them; each one is handled here, in one straight line for the common case
    /// (one counter, a sample of the PC alone).
    // An entry point the NMI handler calls; kept out of line so its cost is its own.
    #[inline(never)]
    pub fn interrupt(&self, cpu: Cpu, frame: &TrapFrame) -> bool {
        let Some(state) = self.cpus.get(cpu as usize) else {
            crate::backend::cold_path();
            return false;
        };
        let claimed = self.backend.pmi(
            &self.hw,
            &state.pmu,
            // Inlined wherever the backend calls it: no closure is built in memory.
            #[inline(always)]
            move |bit| {
                let slot = state.slot_of_bit(bit);
                slot.is_some_and(|slot| self.counter_overflowed(state, slot, frame))
            },
        );
        let stats = &state.stats;
        let counted = if claimed { &stats.intr_processed } else { &stats.intr_ignored };
        counted.fetch_add(1, Ordering::Relaxed);
        claimed
    }

    /// Handles the overflow of `slot`'s counter on the CPU whose state is `state`, if a PMC is
    /// loaded there: a sampling PMC's overflow is a sample; every counter is folded
    /// and reloaded with its period, so the next fold is again less than 2^width away. Returns
    /// whether a PMC was loaded.
    #[inline(always)]
    fn counter_overflowed(&self, state: &PerCpu, slot: &Slot, frame: &TrapFrame) -> bool {
        // (The caller found the slot published: see `PerCpu::slot_of_bit`.)
        let RowCounter::Hardware(counter) = slot.counter_ref() else {
            crate::backend::cold_path();
            return false;
        };
        self.record_sample(state, &state.ring, slot, slot.sample_flags(), frame);
        let counter = *counter;
        let now = self.backend.read(&self.hw, counter);
        slot.fold_and_reload(now, |start| self.backend.write_counter(&self.hw, counter, start));
        true
    }

    /// The header of a sample of `slot`'s PMC taken at `tsc` in the interruption `frame` on
    /// the CPU whose state is `state`.
    #[inline]
    fn sample_header(state: &PerCpu, slot: &Slot, frame: &TrapFrame, tsc: u64) -> SampleHeader {
        let pid = slot.pid();
        SampleHeader {
            pmc: slot.raw_handle(),
            // A system PMC samples whichever process runs.
            pid: if pid >= 0 { pid } else { state.current_pid() },
            tid: state.current_tid(),
            flags: if frame.user { CallchainFlags::USERSPACE } else { 0 },
            tsc,
        }
    }

    /// Counts a sample of `slot`'s PMC lost to a full ring (interrupt path).
    #[inline]
    fn count_lost_sample(state: &PerCpu, slot: &Slot) {
        // Rare: the compiler lays the common sample out as one straight line.
        crate::backend::cold_path();
        slot.count_drop();
        state.slot_drops.store(true, Ordering::Relaxed);
        state.stats.intr_bufferfull.fetch_add(1, Ordering::Relaxed);
    }

    /// Puts a sample of `slot`'s PMC (on the CPU whose state is `state`) in `ring`, or counts it
    /// lost if the ring is full; nothing if the PMC does not sample (`flags`). Interrupt path:
    /// no lock, no allocation.
    ///
    /// Without PMC_F_CALLCHAIN the sample is the interrupted PC alone (the common sample, tested
    /// first). With it, see [`Self::record_callchain`].
    ///
    /// `ring` is the one whose only producer is the caller's context (the PMI's, or software
    /// events'); the pending table's entries are claimed with a compare-and-swap, so both may
    /// park samples there.
    #[inline(always)]
    fn record_sample(
        &self,
        state: &PerCpu,
        ring: &SampleRing,
        slot: &Slot,
        flags: SampleFlags,
        frame: &TrapFrame,
    ) {
        if flags.samples_pc_alone() {
            let header = Self::sample_header(state, slot, frame, self.hw.read_tsc());
            if !ring.push_pc(header, frame.pc) {
                Self::count_lost_sample(state, slot);
            }
        } else if flags.records_callchains() {
            self.record_callchain(state, ring, slot, frame);
        }
    }

    /// Records a sample of `slot`'s PMC, which records callchains: a kernel-mode
    /// sample gets its kernel callchain here, walked through the saved frame pointers of the
    /// interrupted stack; a user-mode sample waits in the pending table for its thread to
    /// return to user mode, where its user stack can be read. With PMC_F_USERCALLCHAIN too, a
    /// kernel-mode sample of a user thread waits there with its kernel callchain, and the user
    /// stack is appended at the return to user mode; its flags stay those of a kernel-mode
    /// sample (no PMC_CC_F_USERSPACE), as FreeBSD's UR ring leaves them. A sample the pending
    /// table has no room for goes to `ring` with what the interrupt has.
    #[inline(always)]
    fn record_callchain(&self, state: &PerCpu, ring: &SampleRing, slot: &Slot, frame: &TrapFrame) {
        if !frame.user {
            self.record_kernel_callchain(state, ring, slot, frame);
            return;
        }
        let header = Self::sample_header(state, slot, frame, self.hw.read_tsc());
        if !state.pending.park(header, frame.pc, frame.fp) && !ring.push_pc(header, frame.pc) {
            Self::count_lost_sample(state, slot);
        }
    }

    /// [`Self::record_callchain`] of a kernel-mode sample.
    // Out of line: the common samples (the PC alone, or parked for the user stack) stay short.
    #[inline(never)]
    fn record_kernel_callchain(
        &self,
        state: &PerCpu,
        ring: &SampleRing,
        slot: &Slot,
        frame: &TrapFrame,
    ) {
        let cpu = state.cpu;
        let header = Self::sample_header(state, slot, frame, self.hw.read_tsc());
        // Only a thread of a user process (pid 0 is the kernel's own) returns to user mode.
        let wants_user_stack = state.current_pid() > 0
            && state.current_tid() >= 0
            && slot.sample_flags().appends_user_stack();
        if wants_user_stack
            && state.pending.park_kernel(header, |frames| {
                self.walk_kernel_stack(cpu, frame, frames);
            })
        {
            return;
        }
        if !ring.push(header, |frames| self.walk_kernel_stack(cpu, frame, frames)) {
            Self::count_lost_sample(state, slot);
        }
    }

    /// The periodic drain of `cpu`, called on `cpu` from thread context (a per-CPU kernel thread
    /// or a softclock run by the timer, never the NMI or a hard interrupt handler, since it
    /// takes the driver's locks): moves the CPU's samples into their owners' logs as CALLCHAIN
    /// records, and sends a DROPNOTIFY to owners whose samples were lost to a full ring. A tick
    /// with nothing to do takes no lock.
    pub fn tick(&self, cpu: Cpu) {
        self.mux_tick(cpu);
        let Some(state) = self.cpus.get(cpu as usize) else { return };
        let quiet = state.ring.is_empty()
            && state.soft_ring.is_empty()
            && !state.pending.any_pending()
            && !state.slot_drops.load(Ordering::Relaxed)
            && !self.stats.unreported_drops.load(Ordering::Relaxed);
        if quiet {
            // A quiet tick takes no lock.
            return;
        }
        let mut scratch = state.scratch.lock(&self.kernel);
        let core = self.core.lock(&self.kernel);
        let mut drained = false;
        for ring in [&state.ring, &state.soft_ring] {
            while ring.pop(|sample| {
                scratch.clear();
                scratch.extend(sample.frames());
                self.log_sample_locked(&core, cpu, sample.header, &scratch);
            }) {
                drained = true;
            }
        }
        drop(core);
        drop(scratch);
        if drained {
            state.stats.log_sweeps.fetch_add(1, Ordering::Relaxed);
        }
        // A sample whose thread has not returned to user mode for two ticks (it sleeps in the
        // kernel, exited, or went on to another CPU) is logged with the frames it has (the
        // sampled PC, or a kernel callchain) rather than lost.
        state.pending.take_stale(2, |sample| self.log_pending_as_is(cpu, state, sample));
        self.report_drops(state);
    }

    /// Logs every sample of `handle` still waiting on the current CPU `cpu` (with the rest of
    /// the ring, which is drained in order).
    pub(crate) fn drain_samples_of(&self, cpu: Cpu, handle: PmcHandle) {
        self.tick(cpu);
        let Some(state) = self.cpus.get(cpu as usize) else { return };
        state.pending.take_pmc(handle.raw(), |sample| self.log_pending_as_is(cpu, state, sample));
    }

    /// Logs a waiting sample without its user stack.
    fn log_pending_as_is(&self, cpu: Cpu, state: &PerCpu, sample: &PendingView<'_>) {
        let mut frames = state.scratch.lock(&self.kernel);
        frames.clear();
        frames.extend(sample.frames());
        self.log_sample(cpu, sample.header, &frames);
    }

    /// Return-to-user hook: thread `tid` of process `pid` is about to return to user mode on
    /// `cpu` (after an interrupt, a system call or a context switch; called on `cpu`, in the
    /// thread's context, where the process's memory can be read with faults handled), to the
    /// user context `frame` (its user PC and frame pointer). Completes the thread's waiting
    /// samples: a user-mode sample gets its user callchain, walked from the frame pointer it
    /// was taken with; a kernel-mode sample of a PMC_F_USERCALLCHAIN PMC gets `frame`'s PC and
    /// user callchain after its kernel frames. Walks go through the frame pointers with
    /// fault-tolerant reads: an unreadable stack ends the callchain there. Cheap when nothing
    /// waits, so a kernel may call it on every return to user mode.
    pub fn user_return(&self, cpu: Cpu, pid: Pid, tid: Tid, frame: &TrapFrame) {
        let Some(state) = self.cpus.get(cpu as usize) else { return };
        let _ = pid;
        if !state.pending.any_pending() {
            return;
        }
        let depth = self.tunables.callchain_depth as usize;
        // The CPU's preallocated frame buffer (lock order: scratch, then core, as in `tick`).
        let mut frames = state.scratch.lock(&self.kernel);
        state.pending.take_thread(tid, |sample| {
            frames.clear();
            frames.extend(sample.frames().take(depth));
            let fp = match sample.user_stack {
                UserStack::FromSample { fp } => Some(fp),
                UserStack::FromReturn if frame.user && frames.len() < depth => {
                    frames.push(frame.pc);
                    Some(frame.fp)
                }
                UserStack::FromReturn => None,
            };
            if let Some(fp) = fp {
                self.walk_user_stack(fp, depth, &mut frames);
            }
            self.log_sample(cpu, sample.header, &frames);
        });
    }

    /// Interrupt path: writes the kernel callchain of the interruption `frame` on `cpu`: its
    /// PC, then the return addresses of the frame records from `frame.fp` outwards (at `fp` the
    /// caller's frame pointer, at `fp + 8` the return address), up to `callchain_depth` frames
    /// in all. Each record is read with [`Kernel::read_kernel_stack`], so nothing outside the
    /// interrupted thread's kernel stack is touched; the walk ends at a record outside it, a
    /// misaligned frame pointer, a zero return address (the outermost frame), or a caller's
    /// frame pointer that is not above its callee's (stacks grow down). No lock, no allocation.
    // Out of line: the common sample (the PC alone) stays short.
    #[inline(never)]
    fn walk_kernel_stack(&self, cpu: Cpu, frame: &TrapFrame, frames: &mut FrameWriter<'_>) {
        let depth = self.tunables.callchain_depth as usize;
        if !frames.push(frame.pc) {
            return;
        }
        let mut fp = frame.fp;
        while frames.len() < depth && fp % 8 == 0 {
            let mut record = [0u8; 16];
            if !self.kernel.read_kernel_stack(cpu, fp, &mut record) {
                break;
            }
            let (caller_fp, return_address) = frame_record(&record);
            if return_address == 0 || !frames.push(return_address) || caller_fp <= fp {
                break;
            }
            fp = caller_fp;
        }
    }

    /// Appends the return addresses of the frame records from `fp` outwards, up to `depth`
    /// frames in all, reading user memory with `copy_in` (a fault ends the walk).
    fn walk_user_stack(&self, mut fp: u64, depth: usize, frames: &mut alloc::vec::Vec<u64>) {
        while frames.len() < depth && fp != 0 {
            let mut record = [0u8; 16];
            if self.kernel.copy_in(crate::kernel::UserPtr(fp), &mut record).is_err() {
                break;
            }
            let (caller_fp, return_address) = frame_record(&record);
            if return_address == 0 {
                break;
            }
            frames.push(return_address);
            // Stacks grow down: a caller's frame is above its callee's, or the chain is bad.
            if caller_fp <= fp {
                break;
            }
            fp = caller_fp;
        }
    }

    /// Logs one sample as a CALLCHAIN record in its PMC owner's log.
    fn log_sample(&self, cpu: Cpu, header: SampleHeader, frames: &[u64]) {
        self.log_sample_locked(&self.core.lock(&self.kernel), cpu, header, frames);
    }

    /// [`Self::log_sample`] with the bookkeeping lock held. A sample of a PMC released since is
    /// dropped (release logs a PMC's samples first, so none should be left).
    fn log_sample_locked(&self, core: &Core, cpu: Cpu, header: SampleHeader, frames: &[u64]) {
        let Some(pmc) = PmcHandle::from_raw(header.pmc).and_then(|h| core.pmc(h)) else {
            return;
        };
        let record = Record::Callchain(Callchain {
            pid: header.pid,
            tid: header.tid,
            pmcid: pmc.id.to_u32(),
            cpuflags: CallchainFlags::new(cpu as u16, header.flags as u16),
            pcs: ProgramCounters::from_words(frames),
        });
        self.log_record_at(pmc.owner, cpu, &record, header.tsc);
    }

    /// Moves the loaded slots' lost-sample counts to their PMCs and writes a DROPNOTIFY for
    /// each PMC that lost samples.
    fn report_drops(&self, state: &PerCpu) {
        let mut core = self.core.lock(&self.kernel);
        if state.slot_drops.swap(false, Ordering::Relaxed) {
            for slot in state.slots.iter() {
                let dropped = slot.take_drops();
                let pmc = slot.handle().and_then(|h| core.pmc_mut(h)).filter(|_| dropped > 0);
                if let Some(pmc) = pmc {
                    pmc.dropped += dropped;
                    self.stats.unreported_drops.store(true, Ordering::Relaxed);
                }
            }
        }
        if !self.stats.unreported_drops.swap(false, Ordering::Relaxed) {
            return;
        }
        // Samples lost by PMCs switched out are in their credit cells.
        let handles: Vec<PmcHandle> = core.handles().collect();
        for &handle in &handles {
            core.settle(handle);
        }
        let lossy: Vec<PmcHandle> =
            handles.into_iter().filter(|&h| core.pmc(h).is_some_and(|p| p.dropped > 0)).collect();
        let mut owners = Vec::with_capacity(lossy.len());
        for handle in lossy {
            if let Some(pmc) = core.pmc_mut(handle) {
                pmc.dropped = 0;
                owners.push(pmc.owner);
            }
        }
        drop(core);
        for owner in owners {
            self.log_record(owner, &Record::DropNotify);
        }
    }

    /// A software event `event` (a code from [`Driver::register_soft_event`]) happened on `cpu`.
    /// Interrupt-safe: takes no lock and allocates nothing.
    /// A sampling SOFT PMC takes a sample when its counter overflows (every `reload` events),
    /// through the same path as a hardware sample.
    pub fn soft_event(&self, cpu: Cpu, event: u32, frame: &TrapFrame) {
        let Some(state) = self.cpus.get(cpu as usize) else { return };
        let Some(soft) = self.layout.class(Class::Soft) else { return };
        let rows = soft.first_row as usize..(soft.first_row + soft.rows) as usize;
        for slot in &state.slots[rows] {
            if !slot.is_running() || slot.soft_event() != event {
                continue;
            }
            let before = slot.soft_counter().fetch_add(1, Ordering::Relaxed);
            if slot.is_sampling() && before == u64::MAX {
                self.record_sample(state, &state.soft_ring, slot, slot.sample_flags(), frame);
                slot.soft_counter().store(slot.start(), Ordering::Relaxed);
            }
        }
    }

    /// Registers a software event named `name` (e.g. `CLOCK.HARD`, `PAGE_FAULT.ALL`) and returns
    /// its event code (from `PMC_EV_SOFT_FIRST`). Registering a name again returns the same code;
    /// EINVAL for an empty name or one of 64 bytes or more, ENOMEM when all 4096 codes are used.
    pub fn register_soft_event(&self, name: &str) -> Result<u32, Errno> {
        if name.is_empty() || name.len() >= crate::abi::PMC_NAME_MAX || name.contains('\0') {
            return Err(Errno::Inval);
        }
        self.core.lock(&self.kernel).register_soft_event(name)
    }
}

/// An x86-64 frame record: the caller's frame pointer, then the return address.
#[inline]
fn frame_record(record: &[u8; 16]) -> (u64, u64) {
    let words = u128::from_le_bytes(*record);
    (words as u64, (words >> 64) as u64)
}
