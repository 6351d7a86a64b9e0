//! The multiplexing at run time: placing a new multiplexed PMC in a turn, and on each CPU
//! accounting the times and loading the turn due (at the tick, at context switches, and when a
//! multiplexed PMC starts or stops).

use alloc::vec::Vec;

use super::model::{Geometry, nth_turn};
use crate::abi::{Mode, PmcFlags, State};
use crate::book::{Book, Pmc, Target};
use crate::driver::Driver;
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, Pid};
use crate::machine::PerCpu;
use crate::mux::model::NOT_MULTIPLEXED;
use crate::publish::NO_CELL;
use crate::sync::Ordering;
use crate::types::PmcHandle;

/// A multiplexed PMC's scope: what must be rotated together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// The system PMCs of a CPU.
    System(Cpu),
    /// The process PMCs of an owner.
    Owner(Pid),
}

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// How this driver's virtual rows map onto its counters.
    #[inline]
    pub(crate) fn mux_geometry(&self) -> Geometry {
        Geometry::new(self.layout.rows())
    }

    /// The virtual row and turn of a new multiplexed PMC (flags `flags`, of `mode`, on `cpu` for
    /// a system PMC) among `rows` (counter rows of its class), or the errno: EINVAL when every
    /// turn is full or a group member has no leader, EBUSY when a member does not fit.
    /// `usable(book, slot_row, row)` says whether the class allows virtual row `row`.
    pub(crate) fn mux_place(
        &self,
        book: &Book,
        rows: core::ops::Range<u32>,
        (mode, cpu, owner): (Mode, Option<Cpu>, Pid),
        flags: PmcFlags,
        usable: impl Fn(&Book, u32, u32) -> bool,
    ) -> Result<(u32, u8), Errno> {
        let geometry = self.mux_geometry();
        let scope = cpu.map_or(Scope::Owner(owner), Scope::System);
        let fits = |turn: u32| rows.clone().find(|&r| usable(book, r, geometry.row(r, turn)));
        if flags.contains(PmcFlags::GROUP_MEMBER) {
            let turn = group_turn(book, owner, mode, cpu).ok_or(Errno::Inval)?;
            let row = fits(u32::from(turn)).ok_or(Errno::Busy)?;
            return Ok((geometry.row(row, u32::from(turn)), turn));
        }
        let leader = flags.contains(PmcFlags::GROUP_LEADER);
        for turn in 0..geometry.turns() {
            if leader && turn_used(book, scope, turn) {
                continue;
            }
            if let Some(row) = fits(turn) {
                return Ok((geometry.row(row, turn), turn as u8));
            }
        }
        Err(Errno::Inval)
    }

    /// Whether attaching `handle` (at virtual row `row`) to process `pid` would put a
    /// multiplexed PMC and one that is not on the same counter of the process (EBUSY).
    pub(crate) fn mux_attach_conflict(&self, book: &Book, handle: PmcHandle, pid: Pid) -> bool {
        let Some(pmc) = book.pmc(handle) else { return false };
        let Some(target) = book.target(pid) else { return false };
        let geometry = self.mux_geometry();
        let mine = pmc.mux.is_multiplexed();
        geometry.rows_on(pmc.slot_row).filter(|&r| r != pmc.row).any(|r| {
            let other = target.get(r).and_then(|t| book.pmc(t.pmc));
            other.is_some_and(|o| !mine || !o.mux.is_multiplexed())
        })
    }

    /// The tick on `cpu`: accounts the multiplexed PMCs' times and moves the CPU's system PMCs
    /// and the running process's to their next turn. Nothing to do costs two loads.
    #[inline]
    pub(crate) fn mux_tick(&self, cpu: Cpu) {
        let Some(state) = self.machine.cpu(cpu) else { return };
        if state.mux_wants_tick() {
            self.mux_schedule(cpu, true);
        }
    }

    /// The switch-in, on the current CPU `cpu`, of a process with multiplexed PMCs: loads the
    /// turn due now and starts its times (under the bookkeeping lock, as the tick does).
    #[inline(never)]
    pub(crate) fn mux_switch_in(&self, cpu: Cpu) {
        self.mux_schedule(cpu, false);
    }
    /// The switch-out of process `pid` on `state`'s CPU: accounts its multiplexed PMCs' times
    /// (before they are unloaded: which were loaded is in the slots).
    #[inline]
    pub(crate) fn mux_switch_out(&self, state: &PerCpu, pid: Pid) {
        if state.mux_process_active() {
            self.mux_account_switch_out(state, pid);
        }
    }

    /// [`Self::mux_switch_out`] of a process with multiplexed PMCs.
    #[inline(never)]
    fn mux_account_switch_out(&self, state: &PerCpu, pid: Pid) {
        state.set_mux_process_active(false);
        let mut book = self.book.lock(&self.kernel);
        let now = self.hw.read_tsc();
        self.account_process(&mut book, state, pid, now);
    }

    /// Accounts the times of the multiplexed PMCs on every CPU up to now (before one starts or
    /// stops, so the others' intervals end there, and before times are read).
    pub(crate) fn mux_checkpoint(&self) {
        for cpu in 0..self.kernel.cpu_count() {
            let busy = self.machine.cpu(cpu).is_some_and(|s| s.mux_wants_tick());
            if busy && self.kernel.cpu_active(cpu) {
                self.on_cpu(cpu, || self.mux_account(cpu));
            }
        }
    }

    /// Loads the turn due now on every CPU where multiplexed PMC `handle` may run (after it
    /// started or stopped).
    pub(crate) fn mux_reschedule(&self, handle: PmcHandle) {
        let (cpu, targets) = {
            let book = self.book.lock(&self.kernel);
            let Some(pmc) = book.pmc(handle) else { return };
            (pmc.cpu(), pmc.targets.clone())
        };
        for c in 0..self.kernel.cpu_count() {
            let current = self.machine.cpu(c).map_or(-1, PerCpu::current_pid);
            let concerned = match cpu {
                Some(cpu) => cpu == c,
                None => current >= 0 && targets.contains(&current),
            };
            if concerned && self.kernel.cpu_active(c) {
                self.on_cpu(c, || self.mux_schedule(c, false));
            }
        }
    }

    /// Accounts the times on the current CPU `cpu` up to now.
    fn mux_account(&self, cpu: Cpu) {
        let Some(state) = self.machine.cpu(cpu) else { return };
        let mut book = self.book.lock(&self.kernel);
        let now = self.hw.read_tsc();
        let handles = system_pmcs(&book, cpu, state);
        self.account_system(&mut book, state, &handles, now);
        if state.mux_process_active() {
            self.account_process(&mut book, state, state.current_pid(), now);
        }
    }

    /// On the current CPU `cpu`: accounts the times up to now, moves to the next turn if
    /// `rotate`, and loads the turn due (unloading the others).
    fn mux_schedule(&self, cpu: Cpu, rotate: bool) {
        let Some(state) = self.machine.cpu(cpu) else { return };
        let mut book = self.book.lock(&self.kernel);
        let now = self.hw.read_tsc();
        // The CPU's running multiplexed system PMCs, looked up once per tick.
        let handles = system_pmcs(&book, cpu, state);
        self.account_system(&mut book, state, &handles, now);
        self.schedule_system(&mut book, cpu, state, &handles, rotate);
        let pid = state.current_pid();
        if pid < 0 {
            return;
        }
        if state.mux_process_active() {
            self.account_process(&mut book, state, pid, now);
        }
        self.schedule_process(&mut book, cpu, state, pid, rotate, now);
    }

    /// Adds the time since the last accounting to `handles`, the running multiplexed system
    /// PMCs of `state`'s CPU.
    fn account_system(&self, book: &mut Book, state: &PerCpu, handles: &[PmcHandle], now: u64) {
        let since = state.mux.system_mark.swap(now, Ordering::Relaxed);
        // None ran since the mark (the count is the last schedule's): a PMC that started since
        // counts from its start, when the mark was set.
        if state.mux.system_pmcs.load(Ordering::Relaxed) == 0 {
            return;
        }
        let elapsed = now.wrapping_sub(since);
        for &handle in handles {
            let loaded = self.loaded(state, handle, book, -1);
            if let Some(pmc) = book.pmc_mut(handle) {
                pmc.mux.enabled += elapsed;
                if loaded {
                    pmc.mux.running += elapsed;
                }
            }
        }
    }

    /// Adds the time since the last accounting to process `pid`'s running multiplexed PMCs.
    fn account_process(&self, book: &mut Book, state: &PerCpu, pid: Pid, now: u64) {
        let elapsed = now.wrapping_sub(state.mux.process_mark.swap(now, Ordering::Relaxed));
        let handles = book.target(pid).map_or_else(Vec::new, multiplexed_of);
        for handle in handles {
            let loaded = self.loaded(state, handle, book, pid);
            if let Some(pmc) = book.pmc_mut(handle) {
                pmc.mux.enabled += elapsed;
                if loaded {
                    pmc.mux.running += elapsed;
                }
            }
        }
    }

    /// Whether `handle` is loaded on `state`'s CPU for `pid` (-1: a system PMC).
    fn loaded(&self, state: &PerCpu, handle: PmcHandle, book: &Book, pid: Pid) -> bool {
        let Some(pmc) = book.pmc(handle) else { return false };
        state
            .slots
            .get(pmc.slot_row as usize)
            .is_some_and(|s| s.handle() == Some(handle) && s.pid() == pid)
    }

    /// Loads the turn of `cpu`'s system PMCs (`handles`) due (the next one if `rotate`).
    fn schedule_system(
        &self,
        book: &mut Book,
        cpu: Cpu,
        state: &PerCpu,
        handles: &[PmcHandle],
        rotate: bool,
    ) {
        state.mux.system_pmcs.store(handles.len() as u32, Ordering::Relaxed);
        let used = handles
            .iter()
            .filter_map(|&h| book.pmc(h))
            .fold(0u32, |used, p| used | 1 << (p.mux.turn & 31));
        let mut rotations = state.mux.system_rotations.load(Ordering::Relaxed);
        if rotate {
            rotations = rotations.wrapping_add(1);
            state.mux.system_rotations.store(rotations, Ordering::Relaxed);
        }
        let turn = nth_turn(used, rotations);
        self.load_turn(book, cpu, state, handles, -1, turn);
    }

    /// Loads the turn of process `pid`'s PMCs due on `cpu` (the next one if `rotate`).
    fn schedule_process(
        &self,
        book: &mut Book,
        cpu: Cpu,
        state: &PerCpu,
        pid: Pid,
        rotate: bool,
        now: u64,
    ) {
        let Some(target) = book.target_mut(pid) else { return };
        if !target.turns.is_active() {
            state.set_mux_process_active(false);
            return;
        }
        if rotate {
            target.turns.rotate();
        }
        let turn = target.turns.current;
        let handles = multiplexed_of(target);
        if !state.mux_process_active() {
            state.begin_mux_process(now);
        }
        self.load_turn(book, cpu, state, &handles, pid, turn);
    }

    /// Unloads the PMCs of `handles` (multiplexed, for `pid`, -1 for system ones) that are not
    /// of `turn` and loads those that are, whole: the turn's PMCs are loaded only if every one
    /// of their counters is free.
    fn load_turn(
        &self,
        book: &mut Book,
        cpu: Cpu,
        state: &PerCpu,
        handles: &[PmcHandle],
        pid: Pid,
        turn: u8,
    ) {
        // What a process parked here leaves first (see `crate::hooks::parking`): the turn's
        // slots may be parked ones, and a process's turn joins what its switch-out unloads.
        self.evict_parked(state);
        for &handle in handles {
            let Some(pmc) = book.pmc(handle) else { continue };
            if pmc.mux.turn != turn && self.loaded(state, handle, book, pid) {
                let slot_row = pmc.slot_row;
                if let Some((pid, delta, dropped)) = self.unload_pmc(cpu, handle, slot_row) {
                    book.credit(handle, pid, delta, dropped);
                }
            }
        }
        let due = |h: &&PmcHandle| book.pmc(**h).is_some_and(|p| p.mux.turn == turn);
        let free = handles.iter().filter(due).all(|&h| {
            let slot = book.pmc(h).and_then(|p| state.slots.get(p.slot_row as usize));
            slot.is_some_and(|s| s.handle().is_none() || s.handle() == Some(h))
        });
        if !free {
            return;
        }
        for &handle in handles.iter().filter(due) {
            let Some(pmc) = book.pmc(handle) else { continue };
            if !self.loaded(state, handle, book, pid) {
                let cell = if pid < 0 { NO_CELL } else { pmc.cell_of(pid).unwrap_or(NO_CELL) };
                self.load_pmc(cpu, handle, pmc, pid, cell);
            }
        }
    }
}

/// The running multiplexed PMCs of a process (one allocation).
fn multiplexed_of(target: &Target) -> Vec<PmcHandle> {
    let mut handles = Vec::with_capacity(target.running.len());
    handles.extend(target.running.iter().filter(|s| s.turn != NOT_MULTIPLEXED).map(|s| s.handle));
    // A PMC with an encoding per core type has two specs, next to each other.
    handles.dedup();
    handles
}

/// The running multiplexed system PMCs of `cpu` (whose state is `state`).
fn system_pmcs(book: &Book, cpu: Cpu, state: &PerCpu) -> Vec<PmcHandle> {
    // As many as last time, most often: one allocation.
    let mut handles = Vec::with_capacity(state.mux.system_pmcs.load(Ordering::Relaxed) as usize);
    handles.extend(book.handles().filter(|&h| {
        book.pmc(h).is_some_and(|p| {
            p.cpu() == Some(cpu) && p.state == State::Running && p.mux.is_multiplexed()
        })
    }));
    handles
}

/// The turn of the owner's last group PMC of `mode` on `cpu`.
fn group_turn(book: &Book, owner: Pid, mode: Mode, cpu: Option<Cpu>) -> Option<u8> {
    book.owned(owner).iter().rev().filter_map(|&h| book.pmc(h)).find_map(|p: &Pmc| {
        (p.mux.grouped && p.mode() == mode && p.cpu() == cpu).then_some(p.mux.turn)
    })
}

/// Whether `scope` has a multiplexed PMC in `turn` (a group leader needs a turn of its own:
/// PMCs that are not multiplexed hold their counters in every turn, and `fits` sees those).
fn turn_used(book: &Book, scope: Scope, turn: u32) -> bool {
    book.handles().filter_map(|h| book.pmc(h)).any(|p| {
        let in_scope = match scope {
            Scope::System(cpu) => p.cpu() == Some(cpu),
            Scope::Owner(owner) => p.owner == owner && p.mode().is_virtual(),
        };
        in_scope && p.mux.is_multiplexed() && u32::from(p.mux.turn) == turn
    })
}
