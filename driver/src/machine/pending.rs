//! Samples that wait outside the rings for their thread to return to user mode.

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::ring::{FrameWriter, SampleHeader, SlotHeader};
use crate::kernel::Tid;
use crate::sync::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
/// Samples waiting for their thread to return to user mode, where its user stack can be read.
///
/// The interrupt cannot read user memory (a page may be absent), so two kinds of samples wait
/// here, outside the ring, until their thread returns to user mode and the driver walks its
/// user stack with fault-tolerant reads:
///
/// * a user-mode sample of a PMC that records callchains (PMC_F_CALLCHAIN) holds the sampled PC
///   and the user frame pointer, and its user callchain is walked from there (a thread returns
///   to user mode right after the interrupt, so a few entries are plenty);
/// * a kernel-mode sample of a user thread for a PMC with PMC_F_USERCALLCHAIN holds its kernel
///   callchain, captured in the interrupt, and the user stack the thread returns to is appended
///   (FreeBSD's UR ring). A system call can take many samples before it returns, so these
///   entries are as many as the ring's, with room for a full callchain each; they are allocated
///   when the first PMC with PMC_F_USERCALLCHAIN is, not before.
///
/// Waiting samples never hold up the ring (FreeBSD leaves them in the ring and stalls the drain
/// behind them). Entries are claimed with compare-and-swap, so the interrupt (which fills them)
/// and thread context (which empties them) never see one half-written; an entry stays claimed
/// while its taker reads it.
#[derive(Debug)]
pub(crate) struct PendingTable<const USER: usize = PENDING_USER_SAMPLES> {
    /// User-mode samples (PC and frame pointer), in the table itself: the interrupt finds them
    /// at a fixed place and goes through a fixed number.
    user: [PendingEntry; USER],
    /// Kernel-mode samples with their kernel callchains, once made.
    kernel: spin::Once<KernelEntries>,
    /// Entries `PENDING` (so that asking whether any sample waits costs one load).
    waiting: AtomicU32,
}

/// The entries of kernel-mode samples and their frames.
#[derive(Debug)]
struct KernelEntries {
    entries: Box<[PendingEntry]>,
    /// Frames per entry.
    depth: usize,
    /// `entries × depth` program counters, entry `i`'s at `i × depth`.
    frames: Box<[AtomicU64]>,
    /// Where the interrupt starts looking for a free entry (after the last one it filled, so
    /// entries freed in the order they were filled are found at once).
    next: AtomicUsize,
}

#[derive(Debug, Default)]
struct PendingEntry {
    /// `FREE`, `WRITING`, `PENDING` or `TAKEN`.
    state: AtomicU32,
    header: SlotHeader,
    /// A user-mode sample's PC.
    pc: AtomicU64,
    /// A user-mode sample's user frame pointer at the interruption.
    fp: AtomicU64,
    /// A kernel-mode sample's frames stored.
    len: AtomicU32,
    /// Ticks the entry has waited.
    age: AtomicU32,
}

const FREE: u32 = 0;
const WRITING: u32 = 1;
const PENDING: u32 = 2;
const TAKEN: u32 = 3;

/// Room for kernel-mode samples could not be allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutOfMemory;

/// What a waiting sample still needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UserStack {
    /// A user-mode sample: its frames are the sampled PC; the user callchain is walked from the
    /// frame pointer `fp` it was interrupted with.
    FromSample {
        /// The user frame pointer at the interruption.
        fp: u64,
    },
    /// A kernel-mode sample (PMC_F_USERCALLCHAIN): its frames are its kernel callchain; the
    /// user PC and callchain of the context the thread returns to are appended.
    FromReturn,
}

/// A waiting sample, as the thread-context code that takes it sees it.
pub(crate) struct PendingView<'a> {
    pub(crate) header: SampleHeader,
    pub(crate) user_stack: UserStack,
    frames: &'a [AtomicU64],
}

impl PendingView<'_> {
    /// The frames captured so far, innermost first.
    pub(crate) fn frames(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        self.frames.iter().map(|f| f.load(Ordering::Relaxed))
    }
}

/// A boxed slice of `len` defaults, or `OutOfMemory`.
fn try_boxed<T: Default>(len: usize) -> Result<Box<[T]>, OutOfMemory> {
    let mut items = Vec::new();
    items.try_reserve_exact(len).map_err(|_| OutOfMemory)?;
    items.extend((0..len).map(|_| T::default()));
    Ok(items.into_boxed_slice())
}

/// User-mode samples a CPU holds while their threads return to user mode (a thread returns
/// right after the interrupt, so a few are plenty; when they run out, samples go to the ring
/// with the sampled PC alone).
pub(crate) const PENDING_USER_SAMPLES: usize = 16;

impl<const USER: usize> PendingTable<USER> {
    /// A table with `USER` entries for user-mode samples (and none yet for kernel-mode ones:
    /// [`Self::reserve_kernel_samples`]).
    pub(crate) fn new() -> Self {
        PendingTable {
            user: core::array::from_fn(|_| PendingEntry::default()),
            kernel: spin::Once::new(),
            waiting: AtomicU32::new(0),
        }
    }

    /// Thread context: makes room for `capacity` kernel-mode samples of up to `depth` frames
    /// (at most [`pmclog::CALLCHAIN_DEPTH_MAX`]), unless there is already room. Any CPU may call
    /// it; the interrupt sees the room once it is complete.
    pub(crate) fn reserve_kernel_samples(
        &self,
        capacity: usize,
        depth: usize,
    ) -> Result<(), OutOfMemory> {
        let depth = depth.clamp(1, pmclog::CALLCHAIN_DEPTH_MAX);
        self.kernel.try_call_once(|| {
            let frames = capacity.checked_mul(depth).ok_or(OutOfMemory)?;
            Ok(KernelEntries {
                entries: try_boxed(capacity)?,
                depth,
                frames: try_boxed(frames)?,
                next: AtomicUsize::new(0),
            })
        })?;
        Ok(())
    }

    /// Interrupt path: holds a user-mode sample at `pc` with user frame pointer `fp`; false if
    /// every entry is taken.
    #[inline]
    pub(crate) fn hold_user_sample(&self, header: SampleHeader, pc: u64, fp: u64) -> bool {
        for entry in self.user.iter() {
            if Self::start_writing(entry) {
                entry.pc.store(pc, Ordering::Relaxed);
                entry.fp.store(fp, Ordering::Relaxed);
                self.publish(entry, &header);
                return true;
            }
        }
        false
    }

    /// Interrupt path: holds a kernel-mode sample whose kernel callchain `fill` writes (up to
    /// the depth the room was made for), to have the user stack appended at return to user
    /// mode; false (and `fill` not called) if there is no room or every entry is taken.
    pub(crate) fn hold_kernel_sample(
        &self,
        header: SampleHeader,
        fill: impl FnOnce(&mut FrameWriter<'_>),
    ) -> bool {
        let Some(kernel) = self.kernel.get() else { return false };
        let count = kernel.entries.len();
        let first = kernel.next.load(Ordering::Relaxed);
        for index in (first..count).chain(0..first.min(count)) {
            let entry = &kernel.entries[index];
            if !Self::start_writing(entry) {
                continue;
            }
            let start = index * kernel.depth;
            let mut writer =
                FrameWriter { frames: &kernel.frames[start..start + kernel.depth], written: 0 };
            fill(&mut writer);
            entry.len.store(writer.len() as u32, Ordering::Relaxed);
            kernel.next.store(index + 1, Ordering::Relaxed);
            self.publish(entry, &header);
            return true;
        }
        false
    }

    #[inline]
    fn start_writing(entry: &PendingEntry) -> bool {
        entry.state.compare_exchange(FREE, WRITING, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    #[inline]
    fn publish(&self, entry: &PendingEntry, header: &SampleHeader) {
        entry.header.store(header);
        entry.age.store(0, Ordering::Relaxed);
        self.waiting.fetch_add(1, Ordering::Relaxed);
        entry.state.store(PENDING, Ordering::Release);
    }

    /// Thread context: hands every waiting sample of thread `tid` to `take`, and frees its
    /// entry.
    pub(crate) fn take_thread(&self, tid: Tid, take: impl FnMut(&PendingView<'_>)) {
        self.take_if(|entry| entry.header.tid.load(Ordering::Relaxed) == tid, take);
    }

    /// Thread or tick context: hands every sample that waited more than `max_age` ticks to
    /// `take` (its thread did not return to user mode: it sleeps, exited, is still in a long
    /// system call, or runs on another CPU now) and ages the others.
    pub(crate) fn take_stale(&self, max_age: u32, take: impl FnMut(&PendingView<'_>)) {
        self.take_if(|entry| entry.age.fetch_add(1, Ordering::Relaxed) >= max_age, take);
    }

    /// Thread context: hands every waiting sample of PMC `pmc` (a handle's raw value) to `take`.
    pub(crate) fn take_pmc(&self, pmc: u64, take: impl FnMut(&PendingView<'_>)) {
        self.take_if(|entry| entry.header.pmc.load(Ordering::Relaxed) == pmc, take);
    }

    /// Hands every waiting sample for which `wanted` holds to `take`, user-mode samples first,
    /// each kind in table order.
    fn take_if(
        &self,
        mut wanted: impl FnMut(&PendingEntry) -> bool,
        mut take: impl FnMut(&PendingView<'_>),
    ) {
        if !self.any_pending() {
            return;
        }
        for entry in self.user.iter() {
            if entry.state.load(Ordering::Acquire) == PENDING && wanted(entry) {
                let fp = entry.fp.load(Ordering::Relaxed);
                let frames = core::slice::from_ref(&entry.pc);
                self.claim(entry, UserStack::FromSample { fp }, frames, &mut take);
            }
        }
        let Some(kernel) = self.kernel.get() else { return };
        for (index, entry) in kernel.entries.iter().enumerate() {
            if entry.state.load(Ordering::Acquire) == PENDING && wanted(entry) {
                let len = (entry.len.load(Ordering::Relaxed) as usize).min(kernel.depth);
                let start = index * kernel.depth;
                let frames = &kernel.frames[start..start + len];
                self.claim(entry, UserStack::FromReturn, frames, &mut take);
            }
        }
    }

    /// Whether any sample waits.
    pub(crate) fn any_pending(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }

    /// Claims `entry`, hands it to `take` as a sample of `frames` that still needs `user_stack`,
    /// and frees it (if no one claimed it first).
    fn claim(
        &self,
        entry: &PendingEntry,
        user_stack: UserStack,
        frames: &[AtomicU64],
        take: &mut impl FnMut(&PendingView<'_>),
    ) {
        let claimed =
            entry.state.compare_exchange(PENDING, TAKEN, Ordering::Acquire, Ordering::Relaxed);
        if claimed.is_err() {
            return;
        }
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        take(&PendingView { header: entry.header.load(), user_stack, frames });
        entry.state.store(FREE, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::vec;

    fn header(n: u64) -> SampleHeader {
        SampleHeader { pmc: n, pid: n as i32, tid: -(n as i32), flags: 1, tsc: n * 10 }
    }

    /// What `take` was handed: header, frames, what the sample still needs.
    type Taken = (SampleHeader, Vec<u64>, UserStack);

    fn taking(out: &mut Vec<Taken>) -> impl FnMut(&PendingView<'_>) + '_ {
        |s| out.push((s.header, s.frames().collect(), s.user_stack))
    }

    #[test]
    fn pending_samples_wait_outside_the_ring_until_their_thread_returns() {
        let table = PendingTable::<2>::new();
        let a = SampleHeader { tid: 7, ..header(1) };
        let b = SampleHeader { tid: 8, ..header(2) };
        assert!(table.hold_user_sample(a, 0x10, 0x7000));
        assert!(table.hold_user_sample(b, 0x20, 0x8000));
        assert!(!table.hold_user_sample(header(3), 0x30, 0), "a full table refuses");
        let mut taken = vec![];
        table.take_thread(7, taking(&mut taken));
        assert_eq!(taken, [(a, vec![0x10], UserStack::FromSample { fp: 0x7000 })]);
        assert!(table.hold_user_sample(header(4), 0x40, 0), "the entry is free again");
        taken.clear();
        table.take_stale(1, taking(&mut taken));
        assert!(taken.is_empty(), "one tick is not stale yet");
        table.take_stale(1, taking(&mut taken));
        assert_eq!(taken.len(), 2, "after two ticks both wait too long");
        assert!(!table.any_pending());
    }

    #[test]
    fn kernel_mode_samples_wait_with_their_kernel_frames_up_to_the_depth() {
        let table = PendingTable::<1>::new();
        assert!(!table.hold_kernel_sample(header(1), |_| panic!("no room yet")));
        table.reserve_kernel_samples(2, 3).unwrap();
        table.reserve_kernel_samples(100, 100).unwrap();
        let k = SampleHeader { tid: 9, ..header(5) };
        assert!(table.hold_kernel_sample(k, |w| (1..=5).for_each(|pc| _ = w.push(pc))));
        assert!(table.hold_user_sample(header(6), 0x60, 0x6000));
        assert!(table.hold_kernel_sample(header(7), |w| _ = w.push(7)));
        assert!(
            !table.hold_kernel_sample(header(8), |_| panic!("a full table does not call fill"))
        );
        let mut taken = vec![];
        table.take_pmc(5, taking(&mut taken));
        assert_eq!(taken, [(k, vec![1, 2, 3], UserStack::FromReturn)], "cut at the first depth");
        assert!(table.hold_kernel_sample(header(8), |_| {}), "the entry is free again");
        taken.clear();
        table.take_stale(0, taking(&mut taken));
        let expected = vec![
            (header(6), vec![0x60], UserStack::FromSample { fp: 0x6000 }),
            (header(8), vec![], UserStack::FromReturn),
            (header(7), vec![7], UserStack::FromReturn),
        ];
        assert_eq!(
            taken, expected,
            "user-mode samples first, then kernel-mode ones in table order"
        );
        assert!(!table.any_pending());
    }
}
