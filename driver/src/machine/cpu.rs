//! The state of one CPU: its slots, what is loaded there for the thread running now (what its
//! switch-out undoes), what is parked there, its sample rings and pending samples, its
//! statistics and its multiplexing marks.
//!
//! A CPU's state is written only on that CPU (by its hooks and by closures the driver runs
//! there), and read by its interrupt path, which may arrive between any two instructions: every
//! field that changes is an atomic.

use crate::sync::{AtomicBool, AtomicI32, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::pending::PendingTable;
use super::ring::SampleRing;
use super::slot::{PublishedCounters, Slot};
use super::stats::CpuStats;
use crate::arch::Backend;
use crate::backend::{CounterMask, PmuBackend};
use crate::class::{HwConfig, Layout, RowCounter};
use crate::hw::Hardware;
use crate::kernel::{Pid, Tid};

/// The most rows a machine may have (the PMC id's row field is 8 bits wide).
pub(crate) const MAX_ROWS: usize = 256;

/// A row number beyond every CPU's slots ([`MAX_ROWS`] is far below it).
const NO_ROW: u16 = u16::MAX;

bitflags::bitflags! {
    /// What a switch-out must undo on a CPU ([`PerCpu`]'s undo word).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) struct Undo: u8 {
        /// User-mode RDPMC is allowed for the process running here.
        const RDPMC = 1;
        /// The process running here has multiplexed PMCs whose times run here.
        const MUX = 2;
        /// PMCs are loaded here for the thread running now.
        const PMCS = 4;
        /// What is loaded here is a parkable image (see `hooks/parking.rs`) and nothing
        /// else, so the switch-out may park it.
        const PARK = 8;
    }
}

/// [`PerCpu::parked_pid`] when nothing is parked.
const NOBODY: Pid = -1;

/// The state of one CPU, on cache lines of its own (other CPUs' writes never invalidate it).
#[repr(align(64))]
#[derive(Debug)]
pub(crate) struct PerCpu {
    /// One slot per row.
    pub(crate) slots: alloc::boxed::Box<[Slot]>,
    /// What this CPU counted for the statistics.
    pub(crate) stats: CpuStats,
    /// This CPU's PMU, as the backend keeps it.
    pub(crate) pmu: <Backend as PmuBackend>::Cpu,
    /// The row of each hardware counter bit ([`CounterMask`]) here, for the interrupt path.
    /// ([`NO_ROW`] for a bit without one: one load and one bounds check find a slot.)
    rows_by_bit: [u16; 64],
    /// The rows without a hardware counter loaded for the thread running here (by its
    /// switch-in, or by a PMC started while it runs), the first `current_len` entries: what
    /// its switch-out unloads besides [`PerCpu::current_counters`]' slots. (One entry per slot
    /// at most: a row is listed only while its slot holds a PMC.)
    current_rows: alloc::boxed::Box<[AtomicU32]>,
    current_len: AtomicUsize,
    /// What a switch-out must undo ([`Undo`]): one word, so that a thread with none of them
    /// costs one load. Written only on this CPU, and never by its interrupt path.
    undo: AtomicU8,
    /// The hardware counters loaded here for the process running now (a [`CounterMask`]), so
    /// switching out stops and unpublishes them together.
    current_counters: AtomicU64,
    /// The hardware counters whose slots the interrupt path may fold.
    pub(crate) published: PublishedCounters,
    /// The process whose PMCs the last switch-out here parked (see `hooks/parking.rs`), or
    /// [`NOBODY`]. What is parked stays in `current_counters` and `current_rows`, claimed and
    /// programmed, its counters stopped and everything hidden from the interrupt path.
    parked_pid: AtomicI32,
    /// The version of the image map the parkable image loaded here came from.
    loaded_version: AtomicU64,
    /// The process the last switch-out that had PMCs to unload here was of: a process that
    /// comes back to this CPU with nobody measured in between is parked at its next switch-out,
    /// one that found another process's PMCs here is not (see `hooks/parking.rs`).
    last_left: AtomicI32,
    /// Samples the performance-monitoring interrupt leaves for the drain: its only producer.
    pub(crate) ring: SampleRing,
    /// Samples software events leave for the drain: its only producer is
    /// [`Driver::soft_event`](crate::Driver::soft_event), so a PMI that interrupts a software
    /// event's push never writes into the same slot.
    pub(crate) soft_ring: SampleRing,
    /// User-mode samples waiting for their thread to return to user mode.
    pub(crate) pending: PendingTable,
    /// Set by the interrupt path when a slot here lost a sample the drain has not collected.
    pub(crate) slot_drops: AtomicBool,
    /// Where the drain and the user-return walk gather one sample's frames (`callchain_depth`
    /// preallocated).
    pub(crate) scratch: crate::lock::Lock<alloc::vec::Vec<u64>>,
    /// The thread running here, as the switch hooks saw it (pid, tid), or (-1, -1).
    current_pid: AtomicI32,
    current_tid: AtomicI32,
    /// Counter multiplexing here (see [`crate::mux`]).
    pub(crate) mux: crate::mux::MuxCpu,
    /// The core type of this CPU on a hybrid machine ([`PmuBackend::core_type`]), 0 otherwise.
    pub(crate) core_type: u8,
    /// Whether switch-outs here may park PMCs ([`PmuBackend::stop_keeps_program`]).
    pub(crate) parks: bool,
    /// This CPU's number (the interrupt path passes the state alone; the rare sample that needs
    /// the number, a kernel callchain's, reads it here).
    pub(crate) cpu: crate::kernel::Cpu,
}

impl PerCpu {
    /// CPU `cpu`, whose PMU the backend describes as `pmu`, with the rows of `layout` and a
    /// sample ring.
    pub(crate) fn new(
        cpu: crate::kernel::Cpu,
        layout: &Layout,
        backend: &Backend,
        pmu: <Backend as PmuBackend>::Cpu,
        (ring, soft_ring): (SampleRing, SampleRing),
        depth: usize,
    ) -> Self {
        let slots: alloc::boxed::Box<[Slot]> = (0..)
            .zip(layout.row_masks())
            .map(|(row, mask)| Slot::new(mask, RowCounter::of(layout, backend, row, &pmu)))
            .collect();
        let mut rows_by_bit = [NO_ROW; 64];
        for (row, slot) in slots.iter().enumerate() {
            slot.counter().mask().for_each_bit(|bit| {
                rows_by_bit[bit as usize] = u16::try_from(row).unwrap_or(NO_ROW);
            });
        }
        let current_rows = slots.iter().map(|_| AtomicU32::new(0)).collect();
        let core_type = backend.core_type(&pmu);
        let parks = backend.stop_keeps_program(&pmu);
        PerCpu {
            slots,
            pmu,
            rows_by_bit,
            stats: CpuStats::default(),
            current_rows,
            current_len: AtomicUsize::new(0),
            undo: AtomicU8::new(0),
            current_counters: AtomicU64::new(0),
            published: PublishedCounters::default(),
            parked_pid: AtomicI32::new(NOBODY),
            loaded_version: AtomicU64::new(0),
            last_left: AtomicI32::new(NOBODY),
            ring,
            soft_ring,
            pending: PendingTable::new(),
            slot_drops: AtomicBool::new(false),
            scratch: crate::lock::Lock::new(alloc::vec::Vec::with_capacity(depth)),
            current_pid: AtomicI32::new(-1),
            current_tid: AtomicI32::new(-1),
            mux: crate::mux::MuxCpu::default(),
            core_type,
            parks,
            cpu,
        }
    }

    /// What the switch-out of the thread running here has to undo.
    #[inline]
    fn undo(&self) -> Undo {
        Undo::from_bits_retain(self.undo.load(Ordering::Relaxed))
    }

    /// Sets what the switch-out has to undo (only this CPU writes the word, and an interrupt
    /// never does: no read-modify-write instruction is needed).
    #[inline]
    fn set_undo(&self, undo: Undo) {
        self.undo.store(undo.bits(), Ordering::Relaxed);
    }

    /// Records that the slot of `row` (`counters`: its hardware counter's bit, if it has
    /// one) was loaded for the thread running here.
    #[inline]
    pub(crate) fn add_current(&self, row: u32, counters: CounterMask) {
        // What the thread runs with is no longer only a parkable image (see `loaded_parkable`).
        // Only this CPU writes the word, and an interrupt never does.
        self.set_undo((self.undo() | Undo::PMCS).difference(Undo::PARK));
        if !counters.is_empty() {
            self.current_counters.fetch_or(counters.bits(), Ordering::Relaxed);
            return;
        }
        let len = self.current_len.load(Ordering::Relaxed);
        if let Some(entry) = self.current_rows.get(len) {
            entry.store(row, Ordering::Relaxed);
            self.current_len.store(len + 1, Ordering::Relaxed);
        }
    }

    /// Records that PMCs are loaded for the thread running here (its switch-out has work).
    #[inline]
    pub(crate) fn loaded_pmcs(&self) {
        // Only this CPU writes the word, and an interrupt never does.
        let undo = self.undo();
        if !undo.contains(Undo::PMCS) {
            self.set_undo(undo | Undo::PMCS);
        }
    }

    /// Records that the slot of `row` no longer holds a PMC of the thread running here.
    pub(crate) fn remove_current_row(&self, row: u32) {
        let len = self.current_len.load(Ordering::Relaxed);
        let rows = self.current_rows.get(..len).unwrap_or_default();
        if let Some(index) = rows.iter().position(|r| r.load(Ordering::Relaxed) == row) {
            rows[index].store(rows[len - 1].load(Ordering::Relaxed), Ordering::Relaxed);
            self.current_len.store(len - 1, Ordering::Relaxed);
        }
    }

    /// Takes the rows loaded for the thread running here (the list is empty afterwards).
    #[inline]
    pub(crate) fn take_current_rows(&self) -> impl ExactSizeIterator<Item = u32> + '_ {
        let len = self.current_len.swap(0, Ordering::Relaxed);
        let rows = self.current_rows.get(..len).unwrap_or_default();
        rows.iter().map(|r| r.load(Ordering::Relaxed))
    }

    /// Whether the thread running here has PMCs loaded or RDPMC allowed (what its switch-out
    /// has to undo).
    #[inline]
    pub(crate) fn holds_anything(&self) -> bool {
        self.undo.load(Ordering::Relaxed) != 0
    }

    /// What the switch-out of the thread running here has to undo ([`Undo::PMCS`],
    /// [`Undo::RDPMC`]; [`Undo::MUX`] is the multiplexing's, cleared by it before), taken.
    #[inline]
    pub(crate) fn take_undo(&self) -> Undo {
        // Only this CPU writes the word, and an interrupt never does.
        let undo = self.undo();
        self.set_undo(undo & Undo::MUX);
        undo
    }

    /// User-mode RDPMC is allowed here for the process running now.
    #[inline]
    pub(crate) fn allow_rdpmc(&self) {
        self.undo.fetch_or(Undo::RDPMC.bits(), Ordering::Relaxed);
    }

    /// Whether the thread running here belongs to a process whose multiplexed PMCs' times run
    /// here (see [`crate::mux`]).
    #[inline]
    pub(crate) fn mux_process_active(&self) -> bool {
        self.undo().contains(Undo::MUX)
    }

    /// Whether the tick has something to rotate or account here. (Whether the running
    /// process's times run here is one of the bits the switch-out looks at, so that threads
    /// without PMCs pay nothing for it.)
    #[inline]
    pub(crate) fn mux_wants_tick(&self) -> bool {
        self.mux.has_system_pmcs() || self.mux_process_active()
    }

    /// The process switching in has multiplexed PMCs: its times count from `now`.
    #[inline]
    pub(crate) fn begin_mux_process(&self, now: u64) {
        self.mux.mark_process(now);
        self.set_mux_process_active(true);
    }

    /// Marks (or clears) [`PerCpu::mux_process_active`].
    #[inline]
    pub(crate) fn set_mux_process_active(&self, active: bool) {
        if active {
            self.undo.fetch_or(Undo::MUX.bits(), Ordering::Relaxed);
        } else {
            self.undo.fetch_and(!Undo::MUX.bits(), Ordering::Relaxed);
        }
    }

    /// The slot of the hardware counter at `bit` of a [`CounterMask`] here, if it is published
    /// (interrupt path: only a published slot may be folded).
    #[inline]
    pub(crate) fn slot_of_bit(&self, bit: u32) -> Option<&Slot> {
        if !self.published.contains(bit) {
            crate::backend::cold_path();
            return None;
        }
        // A bit number is below 64: the mask keeps the index in bounds without a check.
        let row = self.rows_by_bit[bit as usize & 63];
        self.slots.get(usize::from(row))
    }

    /// The slot of the hardware counter at `bit` of a [`CounterMask`] here, published or not.
    #[inline]
    pub(crate) fn slot_of_counter(&self, bit: u32) -> Option<&Slot> {
        let row = self.rows_by_bit[bit as usize & 63];
        self.slots.get(usize::from(row))
    }

    /// The counter behind `row` here (`None`: a row beyond this CPU's).
    pub(crate) fn row_counter(&self, row: u32) -> Option<RowCounter> {
        self.slots.get(row as usize).map(Slot::counter)
    }

    /// Whether `other`'s rows have the same counters as this CPU's, on the same core type (a
    /// process's [`LoadImage`](crate::publish::LoadImage) made for one then loads on the other).
    pub(crate) fn same_counters(&self, other: &PerCpu) -> bool {
        self.core_type == other.core_type
            && self.slots.len() == other.slots.len()
            && self.slots.iter().zip(other.slots.iter()).all(|(a, b)| a.counter() == b.counter())
    }

    /// Records that `counters` are the hardware counters loaded for the thread running here
    /// (a switch-in that loads an image).
    #[inline]
    pub(crate) fn set_current_counters(&self, counters: CounterMask) {
        self.current_counters.store(counters.bits(), Ordering::Relaxed);
    }

    /// Records that `counters` no longer hold PMCs of the thread running here.
    #[inline]
    pub(crate) fn remove_current_counters(&self, counters: CounterMask) {
        self.current_counters.fetch_and(!counters.bits(), Ordering::Relaxed);
    }

    /// The hardware counters loaded for the process running now, taken (the set is empty
    /// afterwards).
    #[inline]
    pub(crate) fn take_current_counters(&self) -> CounterMask {
        CounterMask::from_bits(self.current_counters.swap(0, Ordering::Relaxed))
    }

    /// The hardware counters loaded for the thread running here (or parked here).
    #[inline]
    pub(crate) fn running_counters(&self) -> CounterMask {
        CounterMask::from_bits(self.current_counters.load(Ordering::Relaxed))
    }

    /// The rows without a hardware counter loaded for the thread running here (or parked
    /// here), left as they are.
    #[inline]
    pub(crate) fn running_rows(&self) -> impl ExactSizeIterator<Item = u32> + '_ {
        let len = self.current_len.load(Ordering::Relaxed);
        let rows = self.current_rows.get(..len).unwrap_or_default();
        rows.iter().map(|r| r.load(Ordering::Relaxed))
    }

    /// Whether the switch-out of the thread running here may park what it loaded: a parkable
    /// image, and nothing loaded since (no multiplexing, no RDPMC either).
    #[inline]
    pub(crate) fn may_park(&self) -> bool {
        self.undo() == Undo::PMCS | Undo::PARK
    }

    /// Records that what was loaded here for process `pid` is the parkable image of image map
    /// `version` (after [`PerCpu::add_current`], which clears the mark), and that its
    /// switch-out may park it if `pid` is the process whose switch-out unloaded PMCs here last:
    /// it came back with no other process's PMCs loaded in between, as it is then likely to
    /// again.
    #[inline]
    pub(crate) fn loaded_parkable(&self, pid: Pid, version: u64) {
        if self.last_left.load(Ordering::Relaxed) != pid {
            return;
        }
        self.loaded_version.store(version, Ordering::Relaxed);
        // Only this CPU writes the word, and an interrupt never does.
        self.set_undo(self.undo() | Undo::PMCS | Undo::PARK);
    }

    /// Parks what is loaded for process `pid` (its hardware counters stopped, and everything
    /// hidden from the interrupt path): it stays as it is, and the thread leaving undoes
    /// nothing more.
    #[inline]
    pub(crate) fn park(&self, pid: Pid) {
        self.parked_pid.store(pid, Ordering::Relaxed);
        self.last_left.store(pid, Ordering::Relaxed);
        self.set_undo(Undo::empty());
    }

    /// Takes back what is parked here for process `pid` as the running thread's, if it was
    /// loaded from image map `version` (nothing can have changed it then: a system call that
    /// unloads a PMC from here publishes a newer map first), and returns its hardware counters;
    /// the switch-out may park it again. `None` otherwise (the caller then evicts it).
    #[inline]
    pub(crate) fn unpark(&self, pid: Pid, version: u64) -> Option<CounterMask> {
        if self.parked_pid.load(Ordering::Relaxed) != pid
            || self.loaded_version.load(Ordering::Relaxed) != version
        {
            return None;
        }
        self.parked_pid.store(NOBODY, Ordering::Relaxed);
        self.set_undo(Undo::PMCS | Undo::PARK);
        Some(self.running_counters())
    }

    /// Records that a switch-out of process `pid` unloaded PMCs here.
    #[inline]
    pub(crate) fn left(&self, pid: Pid) {
        self.last_left.store(pid, Ordering::Relaxed);
    }

    /// Whether PMCs are parked here.
    #[inline]
    pub(crate) fn has_parked(&self) -> bool {
        self.parked_pid.load(Ordering::Relaxed) != NOBODY
    }

    /// Forgets that PMCs are parked here (they are being evicted); returns their process.
    #[inline]
    pub(crate) fn take_parked(&self) -> Pid {
        self.parked_pid.swap(NOBODY, Ordering::Relaxed)
    }

    /// Records that thread `tid` of process `pid` runs here now (switch-in).
    #[inline]
    pub(crate) fn set_current(&self, pid: Pid, tid: Tid) {
        self.current_tid.store(tid, Ordering::Relaxed);
        // SeqCst: see `Driver::switch_in`.
        self.current_pid.store(pid, Ordering::SeqCst);
    }

    /// Records that no thread runs here (switch-out; no ordering needed: a PMC started now
    /// need not be loaded for a thread that is leaving).
    #[inline]
    pub(crate) fn clear_current(&self) {
        self.current_pid.store(-1, Ordering::Relaxed);
        self.current_tid.store(-1, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn current_pid(&self) -> Pid {
        self.current_pid.load(Ordering::SeqCst)
    }

    #[inline]
    pub(crate) fn current_tid(&self) -> Tid {
        self.current_tid.load(Ordering::Relaxed)
    }
}

/// Programs `armed` (a [`HwConfig::armed`](crate::class::HwConfig::armed) configuration) on
/// `slot`'s row of the current CPU (the slot claimed) with the counter at `start` and publishes
/// the slot. A hardware counter does not count until
/// [`PmuBackend::start`](crate::backend::PmuBackend::start) starts it; the counter to pass there
/// is returned (none if it could not be programmed; its bit is published all the same, see
/// [`RowCounter::mask`]). `start` is already within the width of every CPU's counters (it is
/// below the class's width, the narrowest).
#[inline]
pub(crate) fn program(
    backend: &Backend,
    hw: &impl Hardware,
    cpu: &PerCpu,
    slot: &Slot,
    armed: &HwConfig,
    start: u64,
) -> CounterMask {
    match armed {
        HwConfig::Hardware(config) => {
            // A row without its counter on this CPU has nothing to program.
            let RowCounter::Hardware(counter) = slot.counter_ref() else {
                return CounterMask::EMPTY;
            };
            backend.write_counter(hw, *counter, start);
            cpu.published.publish(Backend::counter_mask(*counter));
            backend.program_counter(hw, &cpu.pmu, *counter, *config)
        }
        HwConfig::Soft { event } => {
            slot.soft_counter().store(start, Ordering::Relaxed);
            slot.set_soft_event(*event);
            slot.publish();
            CounterMask::EMPTY
        }
        HwConfig::Tsc => {
            slot.publish();
            CounterMask::EMPTY
        }
    }
}
