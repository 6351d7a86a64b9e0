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
    AtomicBool, AtomicI32, AtomicU8, AtomicU32, AtomicU64, Ordering, fence, retry_hint,
};

use crate::arch::Backend;
use crate::backend::{CounterMask, PmuBackend};
use crate::class::RowCounter;
use crate::hw::Hardware;
use crate::kernel::Pid;
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
    /// it counted (see [`crate::publish`]).
    cell: AtomicU32,
}

impl Slot {
    /// An empty slot of a row whose counter on this CPU is `counter`, of width mask `mask`.
    pub(crate) fn new(mask: u64, counter: RowCounter) -> Self {
        Slot { pid: AtomicI32::new(-1), mask: AtomicU64::new(mask), counter, ..Slot::default() }
    }

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
        SampleFlags::from_bits_retain(self.sample_flags.load(Ordering::Relaxed))
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
