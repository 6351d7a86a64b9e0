//! Per-CPU state: what each row of each CPU holds right now.
//!
//! A slot is touched only on its own CPU: by the context-switch hooks, by closures the driver runs
//! there with [`Kernel::run_on_cpu`](crate::Kernel::run_on_cpu), and by the interrupt handler.
//! The interrupt can arrive at any instruction of the others (an NMI cannot be masked), so every
//! field that changes is an atomic (a slot's row counter is fixed at load). Whether the
//! interrupt may fold the slot of a hardware counter is one bit of its CPU's
//! [`PublishedCounters`] word, so that a switch loads or unloads all of a process's counters
//! with one store (a SOFT or TSC slot has its own `running` flag). The protocol is:
//!
//! * load: fill `start`/`last`/`pending`, store `handle`, write the counter's value (counter
//!   stopped), then publish the counter's bit (or set `running`) with Release, then program and
//!   enable the counter (programming may start it: perfmon v1, AMD without PerfMonV2);
//! * unload: stop the counter, clear its bit (`running`), clear its configuration, fold its
//!   final value, clear `handle` (a switch-out clears the configuration of its hardware
//!   counters before their bits, stopping and unprogramming them in one backend call: the
//!   interrupt path may fold a stopped counter, and finds no overflow indication once it is
//!   unprogrammed);
//! * interrupt: only slots whose bit it sees published (Acquire) are folded and reloaded,
//!   between two increments of the slot's reload generation (odd while a reload is under way);
//! * reading a running counter ([`Slot::peek`]): the generation, then `pending`, `last` and the
//!   counter, then the generation again; a reload in between (they differ, or it was odd) means
//!   the three may not belong together, so the read starts again. On the slot's own CPU the
//!   interrupt runs to its end before the reader goes on, so a retry happens at most once per
//!   overflow.
//!
//! A hardware counter is loaded at `2^width − period` with `period ≤ 2^(width − 1)`, and the
//! overflow interrupt folds and reloads it, so between two folds it moves less than `2^width`
//! and folding `(now − last) mod 2^width` is exact: counts stay exact forever.
//!
//! The small accessors are `#[inline]`: the hooks, generic over the kernel and the hardware, are
//! compiled in the embedding crate, and a call per accessor cost a third of a context switch.

use crate::sync::{
    AtomicBool, AtomicI32, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence, retry_hint,
};

use crate::arch::Backend;
use crate::backend::{CounterMask, PmuBackend};
use crate::class::{HwConfig, Layout, RowCounter};
use crate::hw::Hardware;
use crate::kernel::{Pid, Tid};
use crate::sample::{PendingTable, SampleRing};
use crate::types::{PmcHandle, SampleFlags};

/// One row of one CPU, on cache lines of its own: the slots of a CPU are written only there,
/// and an array of them never shares a line with another CPU's.
#[repr(align(64))]
#[derive(Debug, Default)]
pub(crate) struct Slot {
    handle: AtomicU64,
    /// The process a virtual PMC is loaded for; -1 for system PMCs.
    pid: AtomicI32,
    /// Whether the slot holds a running PMC, for a row without a hardware counter (SOFT,
    /// TSC); a hardware counter's slot is published by its CPU's [`PublishedCounters`].
    running: AtomicBool,
    /// Hardware value at the last fold.
    last: AtomicU64,
    /// Events folded by the interrupt path, not yet added to the PMC.
    pending: AtomicU64,
    /// Incremented before and after the interrupt path folds and reloads the counter: odd
    /// while it does (see [`Slot::peek`]).
    generation: AtomicU32,
    /// The value the counter is (re)loaded with: 0 when counting, 2^width − reload when sampling.
    start: AtomicU64,
    /// The counter's width mask (fixed for the row).
    mask: AtomicU64,
    /// The counter behind the row on this CPU (fixed for the row).
    counter: RowCounter,
    /// How the PMC in the slot samples.
    sample_flags: AtomicU8,
    /// Samples of this slot's PMC lost to a full ring.
    dropped: AtomicU64,
    /// The counter of a SOFT row.
    soft_counter: AtomicU64,
    /// The event a SOFT row counts.
    soft_event: AtomicU32,
    /// The credit cell of the (PMC, process) link loaded here, where switch-out hands back what
    /// it counted (see [`crate::credits`]).
    cell: AtomicU32,
}

impl Slot {
    /// The raw value of the handle in the slot (0 if none), for a sample's header.
    #[inline]
    pub(crate) fn raw_handle(&self) -> u64 {
        self.handle.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn handle(&self) -> Option<PmcHandle> {
        PmcHandle::from_raw(self.handle.load(Ordering::Acquire))
    }

    #[inline]
    pub(crate) fn pid(&self) -> Pid {
        self.pid.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Claims the slot for `handle` (the counter is stopped); `start` is the reload value after
    /// an overflow and `load` the value the counter was (or is about to be) written with.
    /// (`pending` is already 0: unloading takes it.)
    #[inline]
    pub(crate) fn claim(
        &self,
        handle: PmcHandle,
        pid: Pid,
        (start, load): (u64, u64),
        sample_flags: SampleFlags,
        cell: u32,
    ) {
        self.cell.store(cell, Ordering::Relaxed);
        self.start.store(start, Ordering::Relaxed);
        self.sample_flags.store(sample_flags.bits(), Ordering::Relaxed);
        self.last.store(load, Ordering::Relaxed);
        self.pid.store(pid, Ordering::Relaxed);
        self.handle.store(handle.raw(), Ordering::Release);
    }

    /// The credit cell of the link loaded here.
    #[inline]
    pub(crate) fn cell(&self) -> u32 {
        self.cell.load(Ordering::Relaxed)
    }

    /// An empty slot of a counter of width mask `mask` (for the models of other modules).
    #[cfg(all(test, loom))]
    pub(crate) fn with_mask(mask: u64) -> Self {
        Slot { mask: AtomicU64::new(mask), ..Slot::default() }
    }

    /// How the PMC in the slot samples (one load, for the interrupt path's several tests).
    #[inline]
    pub(crate) fn sample_flags(&self) -> SampleFlags {
        SampleFlags::from_bits(self.sample_flags.load(Ordering::Relaxed))
    }

    /// Whether the PMC in the slot samples.
    #[inline]
    pub(crate) fn is_sampling(&self) -> bool {
        self.sample_flags().is_sampling()
    }

    /// Counts a sample lost to a full ring (interrupt path).
    #[inline]
    pub(crate) fn count_drop(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes the count of lost samples.
    #[inline]
    pub(crate) fn take_drops(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }

    /// The counter behind the slot's row.
    #[inline]
    pub(crate) fn counter(&self) -> RowCounter {
        self.counter
    }

    /// The counter behind the slot's row, not copied (the hot paths read one field of it).
    #[inline]
    pub(crate) fn counter_ref(&self) -> &RowCounter {
        &self.counter
    }

    /// Lets software events count in the slot of a SOFT row (after it is claimed).
    #[inline]
    pub(crate) fn publish(&self) {
        self.running.store(true, Ordering::Release);
    }

    /// Hides the slot of a SOFT row from software events (before its final value is read).
    #[inline]
    pub(crate) fn unpublish(&self) {
        self.running.store(false, Ordering::Release);
    }

    /// Empties the slot (already hidden from the interrupt path).
    #[inline]
    pub(crate) fn release(&self) {
        self.handle.store(0, Ordering::Release);
    }

    /// Interrupt path: moves the events counted since the last fold into `pending` (`now` is
    /// the counter's value; bits above its width are ignored) and has `reload` write the
    /// reload value to the counter, as one step for [`Slot::peek`]. Exact while the counter
    /// moved less than 2^width since the last fold, which the reload at every overflow
    /// guarantees.
    #[inline]
    pub(crate) fn fold_and_reload(&self, now: u64, reload: impl FnOnce(u64)) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::Release);
        let mask = self.mask.load(Ordering::Relaxed);
        let last = self.last.load(Ordering::Relaxed);
        self.pending.fetch_add(now.wrapping_sub(last) & mask, Ordering::Relaxed);
        let start = self.start.load(Ordering::Relaxed);
        reload(start);
        self.last.store(start, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// What the PMC in the slot counted since it was claimed, leaving everything as it is;
    /// `read` reads the counter. Exact against an interrupt that folds and reloads the counter
    /// meanwhile: the read starts again if one did (see the module documentation).
    #[inline]
    pub(crate) fn peek(&self, read: impl Fn() -> u64) -> u64 {
        loop {
            let before = self.generation.load(Ordering::Acquire);
            if before & 1 == 0 {
                let pending = self.pending.load(Ordering::Relaxed);
                let last = self.last.load(Ordering::Relaxed);
                let now = read();
                fence(Ordering::Acquire);
                if self.generation.load(Ordering::Relaxed) == before {
                    let mask = self.mask.load(Ordering::Relaxed);
                    return pending.wrapping_add(now.wrapping_sub(last) & mask);
                }
            }
            retry_hint();
        }
    }

    /// Folds the final value `now` and takes everything counted since the slot was claimed
    /// (the slot is hidden from the interrupt path: nothing folds it meanwhile).
    #[inline]
    pub(crate) fn fold_all(&self, now: u64) -> u64 {
        let mask = self.mask.load(Ordering::Relaxed);
        let last = self.last.load(Ordering::Relaxed);
        self.last.store(now & mask, Ordering::Relaxed);
        self.pending.swap(0, Ordering::Relaxed).wrapping_add(now.wrapping_sub(last) & mask)
    }

    /// [`Slot::fold_all`] of a slot about to be emptied ([`Slot::release`]): the same count,
    /// without recording `now` as the last fold, which nobody reads before the next claim
    /// writes it.
    #[inline]
    pub(crate) fn take_final(&self, now: u64) -> u64 {
        let mask = self.mask.load(Ordering::Relaxed);
        let last = self.last.load(Ordering::Relaxed);
        self.pending.swap(0, Ordering::Relaxed).wrapping_add(now.wrapping_sub(last) & mask)
    }

    /// The value a sampling PMC resumes with at its next switch-in, given the counter's value
    /// `now` at switch-out: `now` while it is still on its way from the reload value to the
    /// overflow, else (it overflowed and the PMI was not taken) the reload value — never a value
    /// that would make a huge first period.
    #[inline]
    pub(crate) fn resume_value(&self, now: u64) -> u64 {
        let start = self.start();
        let now = now & self.mask();
        if !self.overflowed(now) && now >= start { now } else { start }
    }

    /// Whether a hardware counter overflowed: loaded at 2^width − period (period at most
    /// 2^(width − 1)), its top bit is set until it wraps.
    #[inline]
    pub(crate) fn overflowed(&self, now: u64) -> bool {
        let mask = self.mask.load(Ordering::Relaxed);
        now & ((mask >> 1) + 1) == 0
    }

    /// The counter's width mask.
    #[inline]
    pub(crate) fn mask(&self) -> u64 {
        self.mask.load(Ordering::Relaxed)
    }

    /// The reload value of a sampling PMC.
    #[inline]
    pub(crate) fn start(&self) -> u64 {
        self.start.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn soft_counter(&self) -> &AtomicU64 {
        &self.soft_counter
    }

    #[inline]
    pub(crate) fn soft_event(&self) -> u32 {
        self.soft_event.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set_soft_event(&self, event: u32) {
        self.soft_event.store(event, Ordering::Relaxed);
    }
}

/// The hardware counters of a CPU whose slots the interrupt path may fold (a [`CounterMask`]):
/// written only on that CPU, by the switch hooks and the driver's closures, and read by its
/// interrupt path, which may arrive between any two of their instructions.
#[derive(Debug, Default)]
pub(crate) struct PublishedCounters(AtomicU64);

impl PublishedCounters {
    /// Lets the interrupt path fold the slots of `counters` (claimed, their counters written).
    #[inline]
    pub(crate) fn publish(&self, counters: CounterMask) {
        // Only this CPU writes the word, and an interrupt never does: no read-modify-write
        // instruction is needed.
        let now = self.0.load(Ordering::Relaxed);
        self.0.store(now | counters.bits(), Ordering::Release);
    }

    /// Hides the slots of `counters` from the interrupt path (before their final values are
    /// read).
    #[inline]
    pub(crate) fn unpublish(&self, counters: CounterMask) {
        let now = self.0.load(Ordering::Relaxed);
        self.0.store(now & !counters.bits(), Ordering::Release);
    }

    /// Whether the slot of the counter at `bit` may be folded (interrupt path).
    #[inline]
    pub(crate) fn contains(&self, bit: u32) -> bool {
        self.0.load(Ordering::Acquire) >> (bit & 63) & 1 != 0
    }

    /// The published counters.
    #[inline]
    pub(crate) fn counters(&self) -> CounterMask {
        CounterMask::from_bits(self.0.load(Ordering::Relaxed))
    }
}

/// The most rows a machine may have (the PMC id's row field is 8 bits wide).
pub(crate) const MAX_ROWS: usize = 256;

/// The driver's statistics (`kern.hwpmc.stats.*`) as one CPU counts them; GETDRIVERSTATS adds
/// up every CPU's.
#[derive(Debug, Default)]
pub(crate) struct CpuStats {
    pub(crate) intr_ignored: AtomicU64,
    pub(crate) intr_processed: AtomicU64,
    pub(crate) intr_bufferfull: AtomicU64,
    pub(crate) syscalls: AtomicU64,
    pub(crate) syscall_errors: AtomicU64,
    pub(crate) buffer_requests: AtomicU64,
    pub(crate) buffer_requests_failed: AtomicU64,
    pub(crate) log_sweeps: AtomicU64,
}

/// A row number beyond every CPU's slots ([`MAX_ROWS`] is far below it).
const NO_ROW: u16 = u16::MAX;

/// [`PerCpu`]'s undo bit: user-mode RDPMC is allowed for the process running here.
pub(crate) const UNDO_RDPMC: u8 = 1;
/// [`PerCpu`]'s undo bit: the process running here has multiplexed PMCs whose times run here.
pub(crate) const UNDO_MUX: u8 = 2;
/// [`PerCpu`]'s undo bit: PMCs are loaded here for the thread running now.
pub(crate) const UNDO_PMCS: u8 = 4;
/// [`PerCpu`]'s undo bit: what is loaded here is a parkable image (see [`crate::parking`]) and
/// nothing else, so the switch-out may park it.
pub(crate) const UNDO_PARK: u8 = 8;

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
    /// What a switch-out must undo, one bit each ([`UNDO_PMCS`], [`UNDO_RDPMC`],
    /// [`UNDO_MUX`]): one word, so that a thread with none of them costs one load. Written only
    /// on this CPU, and never by its interrupt path.
    undo: AtomicU8,
    /// The hardware counters loaded here for the process running now (a [`CounterMask`]), so
    /// switching out stops and unpublishes them together.
    pub(crate) current_counters: AtomicU64,
    /// The hardware counters whose slots the interrupt path may fold.
    pub(crate) published: PublishedCounters,
    /// The process whose PMCs the last switch-out here parked (see [`crate::parking`]), or
    /// [`NOBODY`]. What is parked stays in `current_counters` and `current_rows`, claimed and
    /// programmed, its counters stopped and everything hidden from the interrupt path.
    parked_pid: AtomicI32,
    /// The version of the image map the parkable image loaded here came from.
    loaded_version: AtomicU64,
    /// The process the last switch-out that had PMCs to unload here was of: a process that
    /// comes back to this CPU with nobody measured in between is parked at its next switch-out,
    /// one that found another process's PMCs here is not (see [`crate::parking`]).
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
            .map(|(row, mask)| Slot {
                pid: AtomicI32::new(-1),
                mask: AtomicU64::new(mask),
                counter: RowCounter::of(layout, backend, row, &pmu),
                ..Slot::default()
            })
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

    /// Records that the slot of `row` (`counters`: its hardware counter's bit, if it has
    /// one) was loaded for the thread running here.
    #[inline]
    pub(crate) fn add_current(&self, row: u32, counters: CounterMask) {
        // What the thread runs with is no longer only a parkable image (see `loaded_parkable`).
        // Only this CPU writes the word, and an interrupt never does.
        let undo = self.undo.load(Ordering::Relaxed);
        self.undo.store((undo | UNDO_PMCS) & !UNDO_PARK, Ordering::Relaxed);
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
        let undo = self.undo.load(Ordering::Relaxed);
        if undo & UNDO_PMCS == 0 {
            self.undo.store(undo | UNDO_PMCS, Ordering::Relaxed);
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

    /// What the switch-out of the thread running here has to undo ([`UNDO_PMCS`],
    /// [`UNDO_RDPMC`]; [`UNDO_MUX`] is the multiplexing's, cleared by it before), taken.
    #[inline]
    pub(crate) fn take_undo(&self) -> u8 {
        // Only this CPU writes the word, and an interrupt never does.
        let undo = self.undo.load(Ordering::Relaxed);
        self.undo.store(undo & UNDO_MUX, Ordering::Relaxed);
        undo
    }

    /// User-mode RDPMC is allowed here for the process running now.
    #[inline]
    pub(crate) fn allow_rdpmc(&self) {
        self.undo.fetch_or(UNDO_RDPMC, Ordering::Relaxed);
    }

    /// Whether the thread running here belongs to a process whose multiplexed PMCs' times run
    /// here (see [`crate::mux`]).
    #[inline]
    pub(crate) fn mux_process_active(&self) -> bool {
        self.undo.load(Ordering::Relaxed) & UNDO_MUX != 0
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
            self.undo.fetch_or(UNDO_MUX, Ordering::Relaxed);
        } else {
            self.undo.fetch_and(!UNDO_MUX, Ordering::Relaxed);
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

    /// Whether `other`'s rows have the same counters as this CPU's, on the same core type (a
    /// process's [`LoadImage`](crate::loads::LoadImage) made for one then loads on the other).
    pub(crate) fn same_counters(&self, other: &PerCpu) -> bool {
        self.core_type == other.core_type
            && self.slots.len() == other.slots.len()
            && self.slots.iter().zip(other.slots.iter()).all(|(a, b)| a.counter == b.counter)
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
        self.undo.load(Ordering::Relaxed) == UNDO_PMCS | UNDO_PARK
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
        let undo = self.undo.load(Ordering::Relaxed);
        self.undo.store(undo | UNDO_PMCS | UNDO_PARK, Ordering::Relaxed);
    }

    /// Parks what is loaded for process `pid` (its hardware counters stopped, and everything
    /// hidden from the interrupt path): it stays as it is, and the thread leaving undoes
    /// nothing more.
    #[inline]
    pub(crate) fn park(&self, pid: Pid) {
        self.parked_pid.store(pid, Ordering::Relaxed);
        self.last_left.store(pid, Ordering::Relaxed);
        self.undo.store(0, Ordering::Relaxed);
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
        self.undo.store(UNDO_PMCS | UNDO_PARK, Ordering::Relaxed);
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

/// The counter value of `slot`'s row on the current CPU (bits above the counter's width
/// unspecified: the caller masks the value when it folds it).
#[inline]
pub(crate) fn read(backend: &Backend, hw: &impl Hardware, slot: &Slot) -> u64 {
    match slot.counter() {
        RowCounter::Soft => slot.soft_counter().load(Ordering::Relaxed),
        RowCounter::Tsc => hw.read_tsc(),
        RowCounter::Hardware(counter) => backend.read(hw, counter),
        RowCounter::Absent => 0,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{PublishedCounters, Slot};
    use crate::backend::CounterMask;
    use crate::sync::{AtomicU64, Ordering};
    use crate::types::{PmcHandle, SampleFlags};
    use core::cell::Cell;

    /// A slot of an 8-bit counter loaded with a period of 16 (start 0xF0).
    fn loaded_slot() -> Slot {
        let slot = Slot { mask: AtomicU64::new(0xFF), ..Slot::default() };
        slot.claim(PmcHandle::new(0, 0), 1, (0xF0, 0xF0), SampleFlags::default(), 0);
        slot.publish();
        slot
    }

    #[test]
    fn a_switch_publishes_and_hides_its_counters_together_and_leaves_the_others() {
        let published = PublishedCounters::default();
        published.publish(CounterMask::from_bits(1 << 33)); // a system PMC's fixed counter
        published.publish(CounterMask::from_bits(0b101)); // a process's two GP counters
        assert!(published.contains(0) && published.contains(2) && published.contains(33));
        assert!(!published.contains(1), "a counter nobody loaded is not folded");
        published.unpublish(CounterMask::from_bits(0b101));
        assert_eq!(published.counters().bits(), 1 << 33, "the system PMC stays");
    }

    #[test]
    fn only_a_sampling_pmc_records_callchains() {
        assert!(SampleFlags::new(true, true, false).records_callchains());
        assert!(!SampleFlags::new(false, true, true).records_callchains());
        assert!(!SampleFlags::new(true, false, false).records_callchains());
        assert!(SampleFlags::new(true, true, true).appends_user_stack());
    }

    #[test]
    fn a_sampling_pmc_samples_the_pc_alone_or_callchains_and_a_counting_one_neither() {
        let pc_alone = SampleFlags::new(true, false, true);
        assert!(pc_alone.is_sampling() && pc_alone.samples_pc_alone());
        let callchains = SampleFlags::new(true, true, false);
        assert!(callchains.is_sampling() && !callchains.samples_pc_alone());
        let counting = SampleFlags::new(false, true, true).logging_context_switches(true);
        assert!(!counting.is_sampling() && !counting.samples_pc_alone());
    }

    #[test]
    fn only_a_counting_pmc_that_logs_nothing_takes_the_plain_switch_out() {
        assert!(SampleFlags::default().is_plain_counting());
        assert!(!SampleFlags::new(true, false, false).is_plain_counting(), "sampling");
        assert!(
            !SampleFlags::default().logging_context_switches(true).is_plain_counting(),
            "PROCCSW"
        );
    }

    #[test]
    fn peeking_a_counter_that_wrapped_counts_its_events_exactly() {
        let slot = loaded_slot();
        // 20 events: the counter wrapped to 0x04 and its interrupt has not come yet.
        assert_eq!(slot.peek(|| 0x04), 20);
        assert_eq!(slot.peek(|| 0x04), 20, "peeking changes nothing");
    }

    #[test]
    fn an_overflow_interrupt_in_the_middle_of_a_peek_makes_it_start_again_and_stay_exact() {
        let slot = loaded_slot();
        let counter = AtomicU64::new(0x04); // 20 events since the load
        let reads = Cell::new(0);
        let value = slot.peek(|| {
            reads.set(reads.get() + 1);
            if reads.get() == 1 {
                // The PMI arrives after the reader took `pending` and `last`: it folds the 20
                // events and reloads the counter, which then reads 0xF0.
                let now = counter.load(Ordering::Relaxed);
                slot.fold_and_reload(now, |start| counter.store(start, Ordering::Relaxed));
            }
            counter.load(Ordering::Relaxed)
        });
        assert_eq!(value, 20, "neither lost nor counted twice");
        assert_eq!(reads.get(), 2, "one retry");
        assert_eq!(slot.fold_all(0xF0 + 3), 23, "the unload takes everything: 20 + 3 more");
    }

    #[test]
    fn the_final_fold_of_a_slot_counts_what_fold_all_counts_and_leaves_nothing_pending() {
        let (a, b) = (loaded_slot(), loaded_slot());
        for slot in [&a, &b] {
            // An overflow folded 20 events and reloaded the counter at 0xF0.
            slot.fold_and_reload(0x04, |_| {});
        }
        // 0x10 more events: the counter wrapped to 0x00.
        assert_eq!(a.take_final(0x00), 36);
        assert_eq!(b.fold_all(0x00), 36, "the same count");
        assert_eq!(a.take_final(0xF0), 0, "nothing left pending");
    }
}

/// Every interleaving of the slot protocols: loading and unloading against the interrupt path,
/// and reading a running counter against an overflow's fold and reload.
#[cfg(all(test, loom))]
mod loom_models {
    use super::{PublishedCounters, Slot};
    use crate::backend::CounterMask;
    use crate::sync::{AtomicU64, Ordering};
    use crate::types::{PmcHandle, SampleFlags};
    use loom::sync::Arc;
    use loom::thread;

    #[test]
    fn the_interrupt_sees_a_published_slot_whole_and_never_an_unpublished_one_in_use() {
        loom::model(|| {
            // Two hardware counters (bits 0 and 1) that a switch-in loads together and its
            // switch-out unloads together: one store of the CPU's word each way.
            let slots = Arc::new([Slot::with_mask(0xFF), Slot::with_mask(0xFF)]);
            let published = Arc::new(PublishedCounters::default());
            let both = CounterMask::from_bits(0b11);
            let switches = {
                let (slots, published) = (Arc::clone(&slots), Arc::clone(&published));
                thread::spawn(move || {
                    slots[0].claim(
                        PmcHandle::new(4, 1),
                        7,
                        (0xF0, 0xF8),
                        SampleFlags::default(),
                        0,
                    );
                    slots[1].claim(
                        PmcHandle::new(5, 1),
                        7,
                        (0xE0, 0xE8),
                        SampleFlags::default(),
                        1,
                    );
                    published.publish(both);
                    published.unpublish(both);
                    slots[0].release();
                    slots[1].release();
                })
            };
            // The interrupt path: a slot whose bit it sees is a whole claim.
            for (bit, start) in [(0, 0xF0), (1, 0xE0)] {
                if published.contains(bit) {
                    let slot = &slots[bit as usize];
                    let whole = (slot.start(), slot.pid(), slot.handle().is_some());
                    assert_eq!(whole, (start, 7, true));
                }
            }
            switches.join().unwrap();
            assert!(!published.contains(0) && !published.contains(1));
            assert!(slots.iter().all(|s| s.handle().is_none()));
        });
    }

    #[test]
    fn a_parked_slot_published_again_is_the_same_whole_claim_to_the_interrupt() {
        loom::model(|| {
            // A switch-in loads a counter, its switch-out parks it (hides it, the slot stays
            // claimed), the next switch-in of the process publishes it again without claiming,
            // and an eviction empties it; the interrupt may come anywhere.
            let slot = Arc::new(Slot::with_mask(0xFF));
            let published = Arc::new(PublishedCounters::default());
            let counter = CounterMask::from_bits(0b1);
            let switches = {
                let (slot, published) = (Arc::clone(&slot), Arc::clone(&published));
                thread::spawn(move || {
                    slot.claim(PmcHandle::new(4, 1), 7, (0xF0, 0xF8), SampleFlags::default(), 3);
                    published.publish(counter);
                    published.unpublish(counter);
                    published.publish(counter);
                    published.unpublish(counter);
                    slot.release();
                })
            };
            if published.contains(0) {
                let whole = (slot.start(), slot.pid(), slot.cell(), slot.handle().is_some());
                assert_eq!(whole, (0xF0, 7, 3, true));
            }
            switches.join().unwrap();
            assert!(!published.contains(0) && slot.handle().is_none());
        });
    }

    #[test]
    fn publishing_one_cpu_s_counters_leaves_the_others_bits_as_they_are() {
        loom::model(|| {
            // A system PMC's counter (bit 4) stays published while a process's come and go.
            let published = Arc::new(PublishedCounters::default());
            published.publish(CounterMask::from_bits(1 << 4));
            let switches = {
                let published = Arc::clone(&published);
                thread::spawn(move || {
                    published.publish(CounterMask::from_bits(0b11));
                    published.unpublish(CounterMask::from_bits(0b11));
                })
            };
            assert!(published.contains(4), "the interrupt always sees the system PMC");
            switches.join().unwrap();
            assert_eq!(published.counters().bits(), 1 << 4);
        });
    }

    #[test]
    fn reading_a_running_counter_is_exact_against_its_fold_and_reload() {
        loom::model(|| {
            // An 8-bit counter loaded at 0xF0 (a period of 16) that counted 20 events: it
            // wrapped to 0x04 and raised its interrupt.
            let slot = Arc::new(Slot { mask: AtomicU64::new(0xFF), ..Slot::default() });
            slot.claim(PmcHandle::new(0, 0), 1, (0xF0, 0xF0), SampleFlags::default(), 0);
            slot.publish();
            let counter = Arc::new(AtomicU64::new(0x04));
            let pmi = {
                let (slot, counter) = (Arc::clone(&slot), Arc::clone(&counter));
                thread::spawn(move || {
                    let now = counter.load(Ordering::Relaxed);
                    slot.fold_and_reload(now, |start| counter.store(start, Ordering::Relaxed));
                })
            };
            let read = slot.peek(|| counter.load(Ordering::Relaxed));
            assert_eq!(read, 20, "neither lost nor counted twice");
            pmi.join().unwrap();
            assert_eq!(slot.fold_all(counter.load(Ordering::Relaxed)), 20);
        });
    }
}
