//! The driver object: load and unload, and the per-CPU operations the system calls and hooks
//! share (loading a PMC on a row, folding and unloading it).

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::lock::Lock;

use crate::abi::State;
use crate::arch::Backend;
use crate::backend::{CounterMask, CpuIdString, PmuBackend};
use crate::class::{HwConfig, Layout};
use crate::credits::{CreditCell, Credits};
use crate::hosted_gate::HostedGate;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, LoadError, Pid, Tunables};
use crate::loads::{ImageMap, LoadImage, LoadSpec, LoadTable};
use crate::log::Logs;
use crate::percpu::{self, CpuStats, PerCpu, Slot};
use crate::sample::SampleRing;
use crate::state::{Core, Pmc, running_pid_bit};
use crate::types::{PmcHandle, SampleFlags};

/// What a kernel tells the driver about an `execve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecInfo<'a> {
    /// The new executable's path.
    pub path: &'a [u8],
    /// AT_BASE: where the dynamic loader was mapped (0 for a static executable).
    pub base_addr: u64,
    /// The load base of a position-independent executable (0 otherwise).
    pub dyn_addr: u64,
    /// Whether the exec changed the process's credentials (a set-id program).
    pub credentials_changed: bool,
}

/// What the driver keeps for all CPUs besides its locks.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Set when a sample was lost and no DROPNOTIFY has said so yet (so quiet ticks cost
    /// nothing).
    pub(crate) unreported_drops: core::sync::atomic::AtomicBool,
}

/// The hwpmc driver, embedded in a kernel.
///
/// `K` is the kernel's services, `H` the CPU hardware (see [`crate::arch::x86::native::NativeCpu`] for
/// real x86_64 CPUs). The driver is `Sync` when they are: system calls may come from any CPU, and
/// each hook is called on the CPU it concerns.
pub struct Driver<K: Kernel, H: Hardware> {
    pub(crate) kernel: K,
    pub(crate) hw: H,
    pub(crate) tunables: Tunables,
    pub(crate) layout: Layout,
    /// The machine's PMU backend.
    pub(crate) backend: Backend,
    pub(crate) cpus: Box<[PerCpu]>,
    pub(crate) core: Lock<Core>,
    /// Which processes have running PMCs, published by [`Core`] for the context-switch hooks:
    /// a thread whose bit is clear has nothing to load, and its switch takes no lock.
    running_pids: Arc<AtomicU64>,
    /// Each CPU's image map, which its switch-in reads (see [`crate::loads`]).
    loads: Box<[LoadTable]>,
    /// Each CPU's flavor: CPUs of one flavor have the same counters and share images.
    flavors: Box<[usize]>,
    /// The first CPU of each flavor, whose counters its images are made from.
    flavor_cpus: Box<[usize]>,
    /// The newest image map of each flavor, which the next one shares unchanged images with
    /// (thread context; taken alone).
    images: Lock<Vec<Arc<ImageMap>>>,
    /// Where switch-out hands back what PMCs counted (see [`crate::credits`]).
    credits: Arc<Credits>,
    /// Keeps reads of host-counted PMCs whole while their counts move to the driver.
    pub(crate) hosted_gate: HostedGate,
    /// Owners' logs (taken after `core` when both are needed).
    pub(crate) logs: Lock<Logs>,
    pub(crate) stats: Stats,
}

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Loads the driver: checks the tunables, discovers the PMU of every active CPU (on that CPU)
    /// and resets each CPU's counters, stopped, with the PMI entry of its local APIC unmasked.
    pub fn load(kernel: K, hw: H, tunables: Tunables) -> Result<Self, LoadError> {
        tunables.validate()?;
        let ncpu = kernel.cpu_count();
        if ncpu == 0 {
            return Err(LoadError::NoCpus);
        }
        let mut pmus = Vec::with_capacity(ncpu as usize);
        for cpu in 0..ncpu {
            let mut pmu = None;
            if kernel.cpu_active(cpu) {
                kernel.run_on_cpu(cpu, &mut || pmu = Backend::discover(&hw));
            }
            pmus.push(pmu);
        }
        let active: Vec<_> =
            (0..ncpu).filter(|&c| kernel.cpu_active(c)).map(|c| pmus[c as usize]).collect();
        let mut backend = Backend::new(&active, &hw);
        backend.apply_tunables(&tunables);
        let layout = Layout::new(&backend);
        let rows = layout.rows() as usize;
        debug_assert!(rows <= crate::percpu::MAX_ROWS);
        let depth = tunables.callchain_depth as usize;
        let mut cpus = Vec::with_capacity(pmus.len());
        let ring = || {
            SampleRing::new(tunables.nsamples as usize, depth)
                .map_err(|_| LoadError::BadSampleRingSize(tunables.nsamples))
        };
        for (cpu, pmu) in (0..).zip(&pmus) {
            let rings = (ring()?, ring()?);
            cpus.push(PerCpu::new(cpu, &layout, &backend, backend.cpu(*pmu), rings, depth));
        }
        let (flavors, flavor_cpus) = flavors_of(&cpus);
        let running_pids = Arc::new(AtomicU64::new(0));
        let credits = Arc::new(Credits::default());
        let rows = crate::mux::Geometry::new(layout.rows()).total_rows();
        let core = Core::new(ncpu, rows, Arc::clone(&running_pids), Arc::clone(&credits));
        let driver = Driver {
            core: Lock::new(core),
            running_pids,
            loads: (0..ncpu).map(|_| LoadTable::default()).collect(),
            images: Lock::new(flavor_cpus.iter().map(|_| Arc::default()).collect()),
            flavors,
            flavor_cpus,
            credits,
            hosted_gate: HostedGate::default(),
            logs: Lock::new(Logs::default()),
            layout,
            backend,
            cpus: cpus.into_boxed_slice(),
            stats: Stats::default(),
            kernel,
            hw,
            tunables,
        };
        for cpu in 0..ncpu {
            if driver.kernel.cpu_active(cpu) {
                driver.kernel.run_on_cpu(cpu, &mut || driver.init_cpu(cpu));
            }
        }
        Ok(driver)
    }

    /// Unloads the driver: releases every PMC (sending SIGBUS to owners that still had some) and
    /// returns every CPU's PMU to how it was found.
    pub fn unload(&self) {
        let owners: Vec<Pid> = self.core.lock(&self.kernel).owner_pids();
        for owner in owners {
            self.release_all_of(owner);
            self.kernel.signal(owner, crate::kernel::Signal::Bus);
        }
        let logged: Vec<Pid> = self.logs.lock(&self.kernel).owners.keys().copied().collect();
        for owner in logged {
            let _ = self.close_log(owner);
        }
        for cpu in 0..self.kernel.cpu_count() {
            if self.kernel.cpu_active(cpu) {
                self.kernel.run_on_cpu(cpu, &mut || self.fini_cpu(cpu));
            }
        }
    }

    /// The kernel services the driver was loaded with.
    pub fn kernel(&self) -> &K {
        &self.kernel
    }

    /// The hardware the driver was loaded with.
    pub fn hardware(&self) -> &H {
        &self.hw
    }

    /// The tunables the driver was loaded with.
    pub fn tunables(&self) -> &Tunables {
        &self.tunables
    }

    /// `kern.hwpmc.cpuid`: the string libpmc uses to pick its event tables, e.g.
    /// `GenuineIntel-6-5E`.
    pub fn cpuid(&self) -> CpuIdString {
        self.backend.cpuid_string()
    }

    /// `pmc_cputype`, reported by GETCPUINFO.
    pub(crate) fn cpu_type(&self) -> u32 {
        self.backend.cpu_type()
    }

    /// Resets the PMU of the current CPU `cpu` (see [`PmuBackend::init_cpu`]).
    fn init_cpu(&self, cpu: Cpu) {
        self.backend.init_cpu(&self.hw, &self.cpus[cpu as usize].pmu);
    }

    /// Undoes [`Self::init_cpu`] on the current CPU `cpu`.
    fn fini_cpu(&self, cpu: Cpu) {
        self.backend.fini_cpu(&self.hw, &self.cpus[cpu as usize].pmu);
    }

    /// The statistics of the CPU the caller runs on (thread context; a thread that moves on
    /// meanwhile counts on the CPU it left, which changes no total).
    pub(crate) fn local_stats(&self) -> &CpuStats {
        let cpu = self.kernel.current_cpu() as usize;
        &self.cpus.get(cpu).unwrap_or(&self.cpus[0]).stats
    }

    /// The slot of `row` on `cpu`.
    pub(crate) fn slot(&self, cpu: Cpu, row: u32) -> Option<&Slot> {
        self.cpus.get(cpu as usize)?.slots.get(row as usize)
    }

    /// Programs the PMC `spec` describes in `slot`, its row of the current CPU, for target
    /// `pid` (-1 for a system PMC), with its counter at `load`, and returns the hardware
    /// counter to start with [`PmuBackend::start`].
    #[inline]
    pub(crate) fn program_pmc(
        &self,
        state: &PerCpu,
        slot: &Slot,
        spec: &LoadSpec,
        load: u64,
        pid: Pid,
    ) -> CounterMask {
        slot.claim(spec.handle, pid, (spec.start, load), spec.sample_flags, spec.cell);
        percpu::program(&self.backend, &self.hw, state, slot, &spec.armed, load)
    }

    /// Whether process `pid` may have running PMCs to load (a clear answer is exact; see
    /// [`Driver::switch_in`] for the ordering against PMCSTART).
    #[inline]
    pub(crate) fn may_have_running_pmcs(&self, pid: Pid) -> bool {
        self.running_pids.load(Ordering::SeqCst) & running_pid_bit(pid) != 0
    }

    /// `cpu`'s load lists, for its context-switch hooks.
    #[inline]
    pub(crate) fn load_table(&self, cpu: Cpu) -> Option<&LoadTable> {
        self.loads.get(cpu as usize)
    }

    /// Credit cell `index` (none for [`crate::loads::NO_CELL`]).
    #[inline]
    pub(crate) fn credit_cell(&self, index: u32) -> Option<&CreditCell> {
        self.credits.get(index)
    }

    /// Gives every active CPU an image map with the current lists of processes `pids` (see
    /// [`crate::loads`]); when it returns, no switch-in anywhere loads from an older list.
    /// Thread context, without the bookkeeping lock held.
    pub(crate) fn publish_loads(&self, pids: &[Pid]) {
        if pids.is_empty() {
            return;
        }
        let map = self.core.lock(&self.kernel).publish_loads(pids);
        // Imaged for each flavor of CPU outside the lock (it allocates), from the newest maps.
        let previous: Vec<Arc<ImageMap>> = self.images.lock(&self.kernel).clone();
        let images: Vec<Arc<ImageMap>> = previous
            .iter()
            .zip(self.flavor_cpus.iter())
            .map(|(previous, &cpu)| {
                let state = &self.cpus[cpu];
                Arc::new(previous.rebuilt(&map, |specs| {
                    LoadImage::build(specs, state.core_type, |row| {
                        state.slots.get(row as usize).map(Slot::counter)
                    })
                }))
            })
            .collect();
        {
            let mut newest = self.images.lock(&self.kernel);
            for (newest, image) in newest.iter_mut().zip(&images) {
                if image.version() > newest.version() {
                    *newest = Arc::clone(image);
                }
            }
        }
        for cpu in 0..self.kernel.cpu_count() {
            let Some(table) = self.loads.get(cpu as usize) else { continue };
            let Some(image) = self.flavors.get(cpu as usize).and_then(|&f| images.get(f)) else {
                continue;
            };
            if !self.kernel.cpu_active(cpu) {
                continue;
            }
            // The closure only swaps references; the map it replaces is dropped here, in
            // thread context.
            let replaced = self.on_cpu(cpu, || table.install(Arc::clone(image)));
            drop(replaced);
        }
        drop(previous);
    }

    /// The value `pmc`'s counter is loaded with. A hardware counter counts up from
    /// 2^width − period and overflows after `period` events (the reload of a sampling PMC, or the
    /// longest period for a counting one); the handler folds and reloads it, so the distance
    /// from the last fold stays below 2^width and the modular fold is exact (and on perfmon v1,
    /// bit width − 1 going clear shows the overflow). Software counters are 64 bits wide: a
    /// counting one starts from zero, a sampling one at 2^64 − reload.
    pub(crate) fn counter_start(&self, pmc: &Pmc) -> u64 {
        let period = match pmc.config {
            // A sampling software counter counts up to its 64-bit overflow, as hardware does.
            HwConfig::Soft { .. } if pmc.mode().is_sampling() => {
                return pmc.reload.max(1).wrapping_neg();
            }
            HwConfig::Soft { .. } | HwConfig::Tsc => return 0,
            HwConfig::Hardware(config) => self.backend.max_period(config, pmc.width_mask),
        };
        let period = if pmc.mode().is_sampling() { pmc.reload.clamp(1, period) } else { period };
        pmc.width_mask.wrapping_sub(period).wrapping_add(1) & pmc.width_mask
    }

    /// Programs and starts `pmc` on the current CPU `cpu` for target `pid` (-1 for a system
    /// PMC, whose `cell` is [`crate::loads::NO_CELL`]) with a whole period.
    pub(crate) fn load_pmc(&self, cpu: Cpu, handle: PmcHandle, pmc: &Pmc, pid: Pid, cell: u32) {
        let Some(state) = self.cpus.get(cpu as usize) else { return };
        let Some(slot) = state.slots.get(pmc.slot_row as usize) else { return };
        // A PMC of the thread running here joins what its switch-out unloads, so nothing may
        // stay parked; a system PMC needs its slot only.
        if pid >= 0 || slot.handle().is_some() {
            self.evict_parked(state);
        }
        let Some(spec) = pmc.load_spec_on(handle, cell, state.core_type) else { return };
        let counters = self.program_pmc(state, slot, &spec, pmc.start, pid);
        if pid >= 0 && pid == state.current_pid() {
            // Its counter's bit, programmed or not: the switch-out unpublishes it.
            state.add_current(pmc.slot_row, slot.counter().mask());
        }
        self.backend.start(&self.hw, &state.pmu, counters);
    }

    /// Stops and unloads `handle` from row `row` of the current CPU `cpu`; returns the target it
    /// ran for, the events it counted since loaded and the samples it lost, or `None` if it was
    /// not loaded there.
    pub(crate) fn unload_pmc(
        &self,
        cpu: Cpu,
        handle: PmcHandle,
        row: u32,
    ) -> Option<(Pid, u64, u64)> {
        let state = self.cpus.get(cpu as usize)?;
        let slot = state.slots.get(row as usize)?;
        if slot.handle() != Some(handle) {
            return None;
        }
        let counters = slot.counter().mask();
        state.current_counters.fetch_and(!counters.bits(), Ordering::Relaxed);
        state.remove_current_row(row);
        state.published.unpublish(counters);
        slot.unpublish();
        self.backend.stop(&self.hw, &state.pmu, counters);
        self.backend.unprogram(&self.hw, &state.pmu, counters);
        let pid = slot.pid();
        let (delta, dropped, _) = self.finish_unload(slot, slot.sample_flags());
        slot.release();
        Some((pid, delta, dropped))
    }

    /// Unloads the PMC in `slot` (which samples as `flags` say) whose counter is already stopped
    /// and unprogrammed ([`PmuBackend::unprogram`]) and whose slot is hidden from the interrupt
    /// path: folds the
    /// final value and returns the events counted, the samples lost and, for a sampling PMC,
    /// the value to resume it with (see [`Slot::resume_value`]). The caller hands them back,
    /// then empties the slot ([`Slot::release`]).
    // Inlined into the switch-out loop, its hottest caller (out of line it costs ~20
    // instructions per PMC per switch in calls and spills).
    #[inline(always)]
    pub(crate) fn finish_unload(&self, slot: &Slot, flags: SampleFlags) -> (u64, u64, Option<u64>) {
        let now = percpu::read(&self.backend, &self.hw, slot);
        let delta = slot.fold_all(now);
        // Only a sampling PMC loses samples (counting ones take none).
        if !flags.is_sampling() {
            return (delta, 0, None);
        }
        (delta, slot.take_drops(), Some(slot.resume_value(now)))
    }

    /// What `handle` counted on the current CPU `cpu` since it was loaded there, leaving it
    /// running (exact against an overflow interrupt meanwhile, see [`Slot::peek`]); `None` if it
    /// is not loaded there.
    pub(crate) fn peek_pmc(&self, cpu: Cpu, handle: PmcHandle, row: u32) -> Option<u64> {
        let state = self.cpus.get(cpu as usize)?;
        let slot = state.slots.get(row as usize)?;
        if slot.handle() != Some(handle) {
            return None;
        }
        Some(slot.peek(|| percpu::read(&self.backend, &self.hw, slot)))
    }

    /// Runs `f` on `cpu` and returns its result.
    pub(crate) fn on_cpu<R>(&self, cpu: Cpu, mut f: impl FnMut() -> R) -> Option<R> {
        let mut result = None;
        self.kernel.run_on_cpu(cpu, &mut || result = Some(f()));
        result
    }

    /// Unloads `handle` from every CPU where it is loaded and adds what it counted to its count
    /// (and to its targets' counts). Must be called without the core lock held.
    pub(crate) fn unload_everywhere(&self, handle: PmcHandle) {
        self.on_cpus_holding(handle, |cpu, row| {
            if let Some(Some((pid, delta, dropped))) =
                self.on_cpu(cpu, || self.unload_pmc(cpu, handle, row))
            {
                self.credit(handle, pid, delta, dropped);
            }
        });
    }

    /// What `handle` counted so far on the CPUs where it is loaded, not yet in its count.
    pub(crate) fn peek_everywhere(&self, handle: PmcHandle) -> u64 {
        let mut total = 0u64;
        self.on_cpus_holding(handle, |cpu, row| {
            let counted = self.on_cpu(cpu, || self.peek_pmc(cpu, handle, row)).flatten();
            total = total.wrapping_add(counted.unwrap_or(0));
        });
        total
    }

    /// Calls `act(cpu, row)` for every CPU whose slot of `handle`'s row (its counter's row,
    /// [`Pmc::slot_row`]) holds it (a PMC's row never changes, so it is looked up once). Must be called without the core lock held.
    pub(crate) fn on_cpus_holding(&self, handle: PmcHandle, mut act: impl FnMut(Cpu, u32)) {
        let Some(row) = self.core.lock(&self.kernel).pmc(handle).map(|p| p.slot_row) else {
            return;
        };
        for cpu in 0..self.kernel.cpu_count() {
            if self.slot(cpu, row).is_some_and(|s| s.handle() == Some(handle)) {
                act(cpu, row);
            }
        }
    }

    /// Adds `delta` events to `handle`'s count and to target `pid`'s share of it, and
    /// `dropped` lost samples.
    pub(crate) fn credit(&self, handle: PmcHandle, pid: Pid, delta: u64, dropped: u64) {
        let mut core = self.core.lock(&self.kernel);
        core.credit(handle, pid, delta, dropped);
        if dropped > 0 {
            self.stats.unreported_drops.store(true, Ordering::Relaxed);
        }
    }

    /// Stops, detaches and frees every PMC `owner` owns.
    pub(crate) fn release_all_of(&self, owner: Pid) {
        let handles: Vec<PmcHandle> = self.core.lock(&self.kernel).owned(owner).to_vec();
        for handle in handles {
            self.release_pmc(handle);
        }
    }

    /// Stops, detaches and frees one PMC. Its samples still in the CPUs' rings and pending
    /// tables are logged first: a PMC is freed only when no sample refers to it.
    pub(crate) fn release_pmc(&self, handle: PmcHandle) {
        let (hosted_running, targets) = {
            let mut core = self.core.lock(&self.kernel);
            let hosted_running = core.pmc(handle).is_some_and(Pmc::runs_on_host);
            (hosted_running, core.set_state(handle, State::Deleted))
        };
        // No CPU loads it any more, then it is unloaded where it is.
        self.publish_loads(&targets);
        if hosted_running {
            self.hosted_stop(handle);
        }
        self.unload_everywhere(handle);
        for cpu in 0..self.kernel.cpu_count() {
            if self.kernel.cpu_active(cpu) {
                self.on_cpu(cpu, || self.drain_samples_of(cpu, handle));
            }
        }
        let mut core = self.core.lock(&self.kernel);
        let Some(pmc) = core.pmc(handle).cloned() else { return };
        for target in &pmc.targets {
            core.unlink_target(handle, pmc.row, *target);
        }
        self.unclaim_shared(&pmc);
        core.remove(handle);
    }
}

/// Each CPU's flavor (an index), and the first CPU of each: CPUs whose rows have the same
/// counters on the same core type share a flavor, and so the images of the processes' loads.
fn flavors_of(cpus: &[PerCpu]) -> (Box<[usize]>, Box<[usize]>) {
    let mut firsts: Vec<usize> = Vec::new();
    let mut flavors = Vec::with_capacity(cpus.len());
    for (index, cpu) in cpus.iter().enumerate() {
        let flavor = firsts.iter().position(|&first| cpus[first].same_counters(cpu));
        flavors.push(flavor.unwrap_or_else(|| {
            firsts.push(index);
            firsts.len() - 1
        }));
    }
    (flavors.into_boxed_slice(), firsts.into_boxed_slice())
}
