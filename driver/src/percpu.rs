//! Per-CPU state: what each row of each CPU holds right now.
//!
//! A slot is touched only on its own CPU: by the context-switch hooks, by closures the driver runs
//! there with [`Kernel::run_on_cpu`](crate::Kernel::run_on_cpu), and by the interrupt handler.
//! The interrupt can arrive at any instruction of the others (an NMI cannot be masked), so every
//! field is an atomic and the protocol is:
//!
//! * load: program the hardware (counter stopped), fill `start`/`last`/`pending`, store `handle`,
//!   then `running.store(true, Release)`, then enable the counter;
//! * unload: `running.store(false)`, disable the counter, fold its final value, clear `handle`;
//! * interrupt: only slots it sees `running` (Acquire) are folded and reloaded.
//!
//! A hardware counter is loaded at `2^width − period` with `period ≤ 2^(width − 1)`, and the
//! overflow interrupt folds and reloads it, so between two folds it moves less than `2^width`
//! and folding `(now − last) mod 2^width` is exact: counts stay exact forever.

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

use crate::class::HwConfig;
use crate::kernel::{Pid, Tid};
use crate::pmu::IntelPmu;
use crate::sample::{PendingTable, SampleRing};

/// A PMC in the driver's table: index and generation, so a stale reference never matches a
/// reused entry. Zero means "none".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PmcHandle(u64);

impl PmcHandle {
    pub(crate) fn new(index: usize, generation: u32) -> Self {
        PmcHandle(u64::from(generation) << 32 | (index as u64 + 1))
    }
    pub(crate) fn index(self) -> usize {
        (self.0 as u32 as usize).wrapping_sub(1)
    }
    /// The raw value (what samples carry).
    pub(crate) fn raw(self) -> u64 {
        self.0
    }
    pub(crate) fn from_raw(raw: u64) -> Option<Self> {
        (raw != 0).then_some(PmcHandle(raw))
    }
}

/// One row of one CPU.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    handle: AtomicU64,
    /// The process a virtual PMC is loaded for; -1 for system PMCs.
    pid: AtomicI32,
    /// Whether the interrupt path may fold this slot.
    running: AtomicBool,
    /// Hardware value at the last fold.
    last: AtomicU64,
    /// Events folded by the interrupt path, not yet added to the PMC.
    pending: AtomicU64,
    /// The value the counter is (re)loaded with: 0 when counting, 2^width − reload when sampling.
    start: AtomicU64,
    /// The counter's width mask (fixed for the row).
    mask: AtomicU64,
    /// How the PMC is programmed (`HwConfig::encode`), for unloading it without looking it up.
    config: AtomicU64,
    /// Whether the PMC samples (an overflow is a sample, not only a wrap).
    sampling: AtomicBool,
    /// Whether its samples carry callchains.
    callchain: AtomicBool,
    /// Whether its kernel-mode samples of user threads get the user stack too
    /// (PMC_F_USERCALLCHAIN).
    user_stack: AtomicBool,
    /// Samples of this slot's PMC lost to a full ring.
    dropped: AtomicU64,
    /// The counter of a SOFT row.
    soft_counter: AtomicU64,
    /// The event a SOFT row counts.
    soft_event: AtomicU32,
}

impl Slot {
    /// The raw value of the handle in the slot (0 if none), for a sample's header.
    pub(crate) fn raw_handle(&self) -> u64 {
        self.handle.load(Ordering::Relaxed)
    }

    pub(crate) fn handle(&self) -> Option<PmcHandle> {
        PmcHandle::from_raw(self.handle.load(Ordering::Acquire))
    }

    pub(crate) fn pid(&self) -> Pid {
        self.pid.load(Ordering::Relaxed)
    }

    pub(crate) fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Claims the slot for `handle` (the counter is stopped); `start` is the reload value after
    /// an overflow and `load` the value the counter was (or is about to be) written with.
    /// (`pending` is already 0: unloading takes it.)
    pub(crate) fn claim(
        &self,
        handle: PmcHandle,
        pid: Pid,
        (start, load): (u64, u64),
        (sampling, callchain, user_stack): (bool, bool, bool),
        config: HwConfig,
    ) {
        self.start.store(start, Ordering::Relaxed);
        self.sampling.store(sampling, Ordering::Relaxed);
        self.callchain.store(callchain, Ordering::Relaxed);
        self.user_stack.store(user_stack, Ordering::Relaxed);
        self.last.store(load, Ordering::Relaxed);
        self.config.store(config.encode(), Ordering::Relaxed);
        self.pid.store(pid, Ordering::Relaxed);
        self.handle.store(handle.raw(), Ordering::Release);
    }

    /// Whether the PMC in the slot samples.
    pub(crate) fn is_sampling(&self) -> bool {
        self.sampling.load(Ordering::Relaxed)
    }

    /// Whether the PMC in the slot records callchains.
    pub(crate) fn records_callchains(&self) -> bool {
        self.callchain.load(Ordering::Relaxed)
    }

    /// Whether the PMC in the slot appends the user stack to kernel-mode samples of user
    /// threads (PMC_F_USERCALLCHAIN).
    pub(crate) fn appends_user_stack(&self) -> bool {
        self.user_stack.load(Ordering::Relaxed)
    }

    /// Counts a sample lost to a full ring (interrupt path).
    pub(crate) fn count_drop(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes the count of lost samples.
    pub(crate) fn take_drops(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }

    /// How the PMC in the slot is programmed.
    pub(crate) fn config(&self) -> HwConfig {
        HwConfig::decode(self.config.load(Ordering::Relaxed))
    }

    /// Lets the interrupt path see the slot (after the counter is programmed, before enabling).
    pub(crate) fn publish(&self) {
        self.running.store(true, Ordering::Release);
    }

    /// Hides the slot from the interrupt path (before the counter is disabled).
    pub(crate) fn unpublish(&self) {
        self.running.store(false, Ordering::Release);
    }

    /// Empties the slot (already hidden from the interrupt path).
    pub(crate) fn release(&self) {
        self.handle.store(0, Ordering::Release);
    }

    /// Moves the events counted since the last fold into `pending`; `now` is the counter's
    /// value (bits above its width are ignored). Exact while the counter moved less than
    /// 2^width since the last fold, which the reload at every overflow guarantees.
    pub(crate) fn fold(&self, now: u64) {
        let mask = self.mask.load(Ordering::Relaxed);
        let last = self.last.swap(now & mask, Ordering::Relaxed);
        self.pending.fetch_add(now.wrapping_sub(last) & mask, Ordering::Relaxed);
    }

    /// Folds the final value `now` and takes everything counted since the slot was claimed.
    pub(crate) fn fold_all(&self, now: u64) -> u64 {
        let mask = self.mask.load(Ordering::Relaxed);
        let last = self.last.swap(now & mask, Ordering::Relaxed);
        self.pending.swap(0, Ordering::Relaxed).wrapping_add(now.wrapping_sub(last) & mask)
    }

    /// The value a sampling PMC resumes with at its next switch-in, given the counter's value
    /// `now` at switch-out: `now` while it is still on its way from the reload value to the
    /// overflow, else (it overflowed and the PMI was not taken) the reload value — never a value
    /// that would make a huge first period.
    pub(crate) fn resume_value(&self, now: u64) -> u64 {
        let start = self.start();
        let now = now & self.mask();
        if !self.overflowed(now) && now >= start { now } else { start }
    }

    /// Whether a hardware counter overflowed: loaded at 2^width − period (period at most
    /// 2^(width − 1)), its top bit is set until it wraps.
    pub(crate) fn overflowed(&self, now: u64) -> bool {
        let mask = self.mask.load(Ordering::Relaxed);
        now & ((mask >> 1) + 1) == 0
    }

    /// The counter's width mask.
    pub(crate) fn mask(&self) -> u64 {
        self.mask.load(Ordering::Relaxed)
    }

    /// The reload value of a sampling PMC.
    pub(crate) fn start(&self) -> u64 {
        self.start.load(Ordering::Relaxed)
    }

    /// Records that the counter was rewritten with its reload value.
    pub(crate) fn reloaded(&self) {
        self.last.store(self.start.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    pub(crate) fn soft_counter(&self) -> &AtomicU64 {
        &self.soft_counter
    }

    pub(crate) fn soft_event(&self) -> u32 {
        self.soft_event.load(Ordering::Relaxed)
    }

    pub(crate) fn set_soft_event(&self, event: u32) {
        self.soft_event.store(event, Ordering::Relaxed);
    }
}

/// The iterator of [`PerCpu::loaded_rows`].
pub(crate) struct LoadedRows<'a> {
    words: &'a [AtomicU64],
    word: usize,
    bits: u64,
}

impl Iterator for LoadedRows<'_> {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        while self.bits == 0 {
            self.word += 1;
            self.bits = self.words.get(self.word)?.load(Ordering::Relaxed);
        }
        let bit = self.bits.trailing_zeros();
        self.bits &= self.bits - 1;
        Some(self.word as u32 * 64 + bit)
    }
}

/// User-mode samples a CPU holds while their threads return to user mode (a thread returns
/// right after the interrupt, so a few are plenty; when they run out, samples go to the ring
/// with the sampled PC alone).
const PENDING_USER_SAMPLES: usize = 16;

/// The most rows a machine may have (the PMC id's row field is 8 bits wide).
pub(crate) const MAX_ROWS: usize = 256;

/// The state of one CPU.
#[derive(Debug)]
pub(crate) struct PerCpu {
    /// One slot per row.
    pub(crate) slots: alloc::boxed::Box<[Slot]>,
    /// This CPU's PMU, if it has one.
    pub(crate) pmu: Option<IntelPmu>,
    /// The IA32_PERF_GLOBAL_CTRL image: the counters enabled on this CPU.
    pub(crate) global_ctrl: AtomicU64,
    /// The IA32_FIXED_CTR_CTRL image.
    pub(crate) fixed_ctrl: AtomicU64,
    /// IA32_DEBUGCTL as found at load, restored at unload.
    pub(crate) saved_debugctl: AtomicU64,
    /// Bit `row` set while the slot of `row` holds a PMC, so the hooks visit only those.
    loaded: [AtomicU64; MAX_ROWS / 64],
    /// How many words of `loaded` the rows use.
    loaded_words: usize,
    /// How many slots hold a PMC.
    loaded_count: AtomicU32,
    /// Whether user-mode RDPMC is allowed here (for the process running now).
    pub(crate) user_rdpmc: AtomicBool,
    /// The hardware counters loaded here for the process running now (GLOBAL_CTRL layout), so
    /// switching out stops them with one write.
    pub(crate) current_counters: AtomicU64,
    /// Samples the interrupt path leaves for the drain.
    pub(crate) ring: SampleRing,
    /// User-mode samples waiting for their thread to return to user mode.
    pub(crate) pending: PendingTable,
    /// Set by the interrupt path when a slot here lost a sample the drain has not collected.
    pub(crate) slot_drops: AtomicBool,
    /// Where the drain and the user-return walk gather one sample's frames (`callchain_depth`
    /// preallocated).
    pub(crate) scratch: spin::Mutex<alloc::vec::Vec<u64>>,
    /// The thread running here, as the switch hooks saw it (pid, tid), or (-1, -1).
    current_pid: AtomicI32,
    current_tid: AtomicI32,
}

impl PerCpu {
    /// A CPU whose rows have counters of these width masks, with a sample ring.
    pub(crate) fn new(
        row_masks: &[u64],
        pmu: Option<IntelPmu>,
        ring: SampleRing,
        depth: usize,
    ) -> Self {
        let slots = row_masks
            .iter()
            .map(|&mask| Slot {
                pid: AtomicI32::new(-1),
                mask: AtomicU64::new(mask),
                ..Slot::default()
            })
            .collect::<alloc::vec::Vec<_>>()
            .into_boxed_slice();
        PerCpu {
            slots,
            pmu,
            global_ctrl: AtomicU64::new(0),
            fixed_ctrl: AtomicU64::new(0),
            saved_debugctl: AtomicU64::new(0),
            loaded: Default::default(),
            loaded_words: row_masks.len().div_ceil(64),
            loaded_count: AtomicU32::new(0),
            user_rdpmc: AtomicBool::new(false),
            current_counters: AtomicU64::new(0),
            ring,
            pending: PendingTable::new(PENDING_USER_SAMPLES),
            slot_drops: AtomicBool::new(false),
            scratch: spin::Mutex::new(alloc::vec::Vec::with_capacity(depth)),
            current_pid: AtomicI32::new(-1),
            current_tid: AtomicI32::new(-1),
        }
    }

    /// Records that the slot of `row` holds a PMC (or no longer does).
    pub(crate) fn mark_loaded(&self, row: u32, loaded: bool) {
        let Some(word) = self.loaded.get(row as usize / 64) else { return };
        let bit = 1u64 << (row % 64);
        if loaded {
            if word.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
                self.loaded_count.fetch_add(1, Ordering::Relaxed);
            }
        } else if word.fetch_and(!bit, Ordering::Relaxed) & bit != 0 {
            self.loaded_count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// How many slots hold a PMC.
    pub(crate) fn loaded_count(&self) -> u32 {
        self.loaded_count.load(Ordering::Relaxed)
    }

    /// The rows whose slots hold a PMC (as they were when the iteration reached their word).
    pub(crate) fn loaded_rows(&self) -> LoadedRows<'_> {
        let words = &self.loaded[..self.loaded_words];
        LoadedRows { words, word: 0, bits: words.first().map_or(0, |w| w.load(Ordering::Relaxed)) }
    }

    pub(crate) fn set_current(&self, pid: Pid, tid: Tid) {
        self.current_pid.store(pid, Ordering::Relaxed);
        self.current_tid.store(tid, Ordering::Relaxed);
    }

    pub(crate) fn current_pid(&self) -> Pid {
        self.current_pid.load(Ordering::Relaxed)
    }

    pub(crate) fn current_tid(&self) -> Tid {
        self.current_tid.load(Ordering::Relaxed)
    }
}
