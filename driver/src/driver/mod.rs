//! The driver object: the subsystems it holds and wires together (the per-CPU runtime, the
//! bookkeeping, what the bookkeeping publishes for the hooks, the logs), load and unload; the
//! per-CPU operations the system calls and hooks share are in `on_cpu.rs`.

mod on_cpu;

use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::lock::Lock;

use crate::arch::Backend;
use crate::backend::{CpuIdString, PmuBackend};
use crate::book::Book;
use crate::class::Layout;
use crate::hosted::HostedGate;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, LoadError, Pid, Tunables};
use crate::log::Logs;
use crate::machine::SampleRing;
use crate::machine::{CpuStats, Machine, PerCpu};
use crate::publish::Published;

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
    /// Each CPU's state (see [`crate::machine`]).
    pub(crate) machine: Machine,
    pub(crate) book: Lock<Book>,
    /// What the bookkeeping publishes for the context-switch hooks (see [`crate::publish`]).
    pub(crate) published: Published,
    /// Keeps reads of host-counted PMCs whole while their counts move to the driver.
    pub(crate) hosted_gate: HostedGate,
    /// Owners' logs (taken after `book` when both are needed).
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
        debug_assert!(rows <= crate::machine::MAX_ROWS);
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
        let published = Published::new(&cpus);
        let rows = crate::mux::Geometry::new(layout.rows()).total_rows();
        let book = Book::new(ncpu, rows, published.running_pids(), published.credits());
        let driver = Driver {
            book: Lock::new(book),
            published,
            hosted_gate: HostedGate::default(),
            logs: Lock::new(Logs::default()),
            layout,
            backend,
            machine: Machine::new(cpus),
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
        let owners: Vec<Pid> = self.book.lock(&self.kernel).owner_pids();
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
        self.backend.init_cpu(&self.hw, &self.machine.cpus()[cpu as usize].pmu);
    }

    /// Undoes [`Self::init_cpu`] on the current CPU `cpu`.
    fn fini_cpu(&self, cpu: Cpu) {
        self.backend.fini_cpu(&self.hw, &self.machine.cpus()[cpu as usize].pmu);
    }

    /// The statistics of the CPU the caller runs on (thread context; a thread that moves on
    /// meanwhile counts on the CPU it left, which changes no total).
    pub(crate) fn local_stats(&self) -> &CpuStats {
        self.machine.stats_of(self.kernel.current_cpu())
    }

    /// Gives every active CPU an image map with the current lists of processes `pids` (see
    /// [`crate::publish`]); when it returns, no switch-in anywhere loads from an older list.
    /// Thread context, without the bookkeeping lock held.
    pub(crate) fn publish_loads(&self, pids: &[Pid]) {
        if pids.is_empty() {
            return;
        }
        let map = self.book.lock(&self.kernel).publish_loads(pids);
        let images = self.published.image(&self.kernel, self.machine.cpus(), &map);
        for cpu in 0..self.kernel.cpu_count() {
            let Some((table, image)) = self.published.for_cpu(cpu, &images) else { continue };
            if !self.kernel.cpu_active(cpu) {
                continue;
            }
            // The closure only swaps references; the map it replaces is dropped here, in
            // thread context.
            let replaced = self.on_cpu(cpu, || table.install(Arc::clone(image)));
            drop(replaced);
        }
        drop(images);
    }

    /// Runs `f` on `cpu` and returns its result.
    pub(crate) fn on_cpu<R>(&self, cpu: Cpu, mut f: impl FnMut() -> R) -> Option<R> {
        let mut result = None;
        self.kernel.run_on_cpu(cpu, &mut || result = Some(f()));
        result
    }
}
