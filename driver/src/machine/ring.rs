//! Per-CPU sample rings: where the interrupt path leaves samples for the same CPU's tick to log.
//!
//! One producer context and one consumer per ring: each CPU has a ring for its
//! performance-monitoring interrupt and another for its software events (so a PMI arriving in
//! the middle of a software event's push never reuses that slot), and the drain (thread or tick
//! context on this CPU) empties both. Every slot is allocated when the
//! ring is made, with room for `depth` program counters, so producing a sample allocates nothing
//! and takes no lock. The producer fills the slot at `head` and publishes it by advancing `head`
//! with Release ordering; the consumer reads `head` with Acquire, reads the slot, and frees it by
//! advancing `tail` with Release ordering, which the producer reads with Acquire before reusing
//! the slot (only when it reaches the end of the room it last saw: `tail` never goes back, so
//! every slot before that end stays free until the producer fills it). Slot fields are atomics
//! so that all of this needs no `unsafe`; the ordering comes from `head` and `tail` alone, so
//! the field accesses themselves are Relaxed.
//!
//! A full ring refuses the new sample; the caller counts it lost, per PMC (for DROPNOTIFY
//! records) and in the driver's statistics.

use crate::sync::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::kernel::{Pid, Tid};

/// Why a ring could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RingError {
    /// The capacity is not a power of two of at least 2.
    Capacity(usize),
    /// The depth is 0 or above 512 frames.
    Depth(usize),
}

/// What a sample says besides its program counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SampleHeader {
    /// The PMC that produced it (a `PmcHandle`'s raw value).
    pub(crate) pmc: u64,
    pub(crate) pid: Pid,
    pub(crate) tid: Tid,
    /// `PMC_CC_F_*` flags (user mode, multipart).
    pub(crate) flags: u32,
    /// The timestamp taken in the interrupt.
    pub(crate) tsc: u64,
}

#[derive(Debug, Default)]
pub(super) struct SlotHeader {
    pub(super) pmc: AtomicU64,
    pub(super) pid: AtomicI32,
    pub(super) tid: AtomicI32,
    pub(super) flags: AtomicU32,
    pub(super) frames: AtomicU32,
    pub(super) tsc: AtomicU64,
}

impl SlotHeader {
    /// Stores `header` (the writer publishes it afterwards with a release store).
    #[inline]
    pub(super) fn store(&self, header: &SampleHeader) {
        self.pmc.store(header.pmc, Ordering::Relaxed);
        self.pid.store(header.pid, Ordering::Relaxed);
        self.tid.store(header.tid, Ordering::Relaxed);
        self.flags.store(header.flags, Ordering::Relaxed);
        self.tsc.store(header.tsc, Ordering::Relaxed);
    }

    /// The stored header (the reader acquired it first).
    #[inline]
    pub(super) fn load(&self) -> SampleHeader {
        SampleHeader {
            pmc: self.pmc.load(Ordering::Relaxed),
            pid: self.pid.load(Ordering::Relaxed),
            tid: self.tid.load(Ordering::Relaxed),
            flags: self.flags.load(Ordering::Relaxed),
            tsc: self.tsc.load(Ordering::Relaxed),
        }
    }
}

/// A single-producer, single-consumer ring of samples of up to `depth` frames each.
#[derive(Debug)]
pub(crate) struct SampleRing {
    mask: u64,
    depth: usize,
    /// Index of the next slot the producer fills (only the producer stores it).
    head: AtomicU64,
    /// Index of the next slot the consumer reads (only the consumer stores it).
    tail: AtomicU64,
    /// `tail + capacity` as the producer last read `tail` (only the producer reads or stores it):
    /// the producer fills slots up to it without reading `tail` again.
    room_end: AtomicU64,
    slots: Box<[RingSlot]>,
    /// `capacity × depth` program counters, slot `i`'s at `i × depth` (samples with callchains).
    frames: Box<[AtomicU64]>,
}

/// A sample's header, with the sampled PC of a sample that has no callchain: the common
/// sample is written to one place. Its header's `frames` is [`PC_ONLY`] for such a sample (else
/// its frames are in the ring's `frames`).
#[derive(Debug, Default)]
struct RingSlot {
    header: SlotHeader,
    /// The sampled PC of a sample without a callchain.
    pc: AtomicU64,
}

/// A ring slot's frame count for a sample that is the PC alone, in the slot's `pc` (one store
/// says both how many frames there are and where).
const PC_ONLY: u32 = u32::MAX;

/// Writes a sample's program counters straight into its slot.
pub(crate) struct FrameWriter<'a> {
    pub(super) frames: &'a [AtomicU64],
    pub(super) written: usize,
}

impl FrameWriter<'_> {
    /// Appends `pc`; false (and nothing written) once the slot's depth is reached.
    #[inline]
    pub(crate) fn push(&mut self, pc: u64) -> bool {
        match self.frames.get(self.written) {
            Some(frame) => {
                frame.store(pc, Ordering::Relaxed);
                self.written += 1;
                true
            }
            None => false,
        }
    }

    /// Frames written so far.
    pub(crate) fn len(&self) -> usize {
        self.written
    }
}

/// A sample as the consumer sees it.
pub(crate) struct SampleView<'a> {
    pub(crate) header: SampleHeader,
    frames: &'a [AtomicU64],
}

impl SampleView<'_> {
    /// The program counters, innermost first.
    pub(crate) fn frames(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        self.frames.iter().map(|f| f.load(Ordering::Relaxed))
    }
}

impl SampleRing {
    /// A ring of `capacity` samples (a power of two, at least 2) of up to `depth` frames.
    pub(crate) fn new(capacity: usize, depth: usize) -> Result<SampleRing, RingError> {
        if capacity < 2 || !capacity.is_power_of_two() {
            return Err(RingError::Capacity(capacity));
        }
        if depth == 0 || depth > pmclog::CALLCHAIN_DEPTH_MAX {
            return Err(RingError::Depth(depth));
        }
        let slots = (0..capacity).map(|_| RingSlot::default()).collect::<Vec<_>>();
        let frames = (0..capacity * depth).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        Ok(SampleRing {
            mask: capacity as u64 - 1,
            depth,
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            room_end: AtomicU64::new(capacity as u64),
            slots: slots.into_boxed_slice(),
            frames: frames.into_boxed_slice(),
        })
    }

    /// Producer: stores a sample whose frames `fill` writes. Returns false (the sample is
    /// lost) when the ring is full. Allocates nothing and takes no lock.
    #[inline]
    pub(crate) fn push(
        &self,
        header: SampleHeader,
        fill: impl FnOnce(&mut FrameWriter<'_>),
    ) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        if !self.has_room(head) {
            return false;
        }
        let index = (head & self.mask) as usize;
        let start = index * self.depth;
        // A ring has a slot and `depth` frames at every index below its capacity (`new`).
        let (Some(slot), Some(frames)) =
            (self.slots.get(index), self.frames.get(start..start + self.depth))
        else {
            return false;
        };
        let mut writer = FrameWriter { frames, written: 0 };
        fill(&mut writer);
        slot.header.store(&header);
        slot.header.frames.store(writer.len() as u32, Ordering::Relaxed);
        self.head.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    /// Producer: stores a sample whose only frame is `pc` (the common sample, in a straight
    /// line). Returns false (the sample is lost) when the ring is full. Allocates nothing and
    /// takes no lock.
    #[inline]
    pub(crate) fn push_pc(&self, header: SampleHeader, pc: u64) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        if !self.has_room(head) {
            return false;
        }
        // A ring has a slot at every index below its capacity (`new`).
        let Some(slot) = self.slots.get((head & self.mask) as usize) else { return false };
        slot.pc.store(pc, Ordering::Relaxed);
        slot.header.store(&header);
        slot.header.frames.store(PC_ONLY, Ordering::Relaxed);
        self.head.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    /// Producer: whether the slot at `head` is free: below the end of the room the producer last
    /// saw, or, once there, below the end of the room the consumer has made since.
    #[inline]
    fn has_room(&self, head: u64) -> bool {
        if head != self.room_end.load(Ordering::Relaxed) {
            return true;
        }
        // Once per ring's worth of samples at most.
        crate::backend::cold_path();
        let room_end = self.tail.load(Ordering::Acquire).wrapping_add(self.mask + 1);
        self.room_end.store(room_end, Ordering::Relaxed);
        head != room_end
    }

    /// Consumer: hands the oldest sample to `read` and frees its slot; false if the ring is
    /// empty.
    pub(crate) fn pop(&self, read: impl FnOnce(&SampleView<'_>)) -> bool {
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Acquire);
        if tail == head {
            return false;
        }
        let index = (tail & self.mask) as usize;
        let slot = &self.slots[index];
        let frames = slot.header.frames.load(Ordering::Relaxed);
        let frames = if frames == PC_ONLY {
            core::slice::from_ref(&slot.pc)
        } else {
            let start = index * self.depth;
            &self.frames[start..start + (frames as usize).min(self.depth)]
        };
        let view = SampleView { header: slot.header.load(), frames };
        read(&view);
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
        true
    }

    /// Whether no sample waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.head.load(Ordering::Acquire) == self.tail.load(Ordering::Relaxed)
    }

    /// Samples waiting.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn len(&self) -> usize {
        let head = self.head.load(Ordering::Acquire);
        head.wrapping_sub(self.tail.load(Ordering::Acquire)) as usize
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::vec;

    fn header(n: u64) -> SampleHeader {
        SampleHeader { pmc: n, pid: n as i32, tid: -(n as i32), flags: 1, tsc: n * 10 }
    }

    fn collect(ring: &SampleRing) -> Vec<(SampleHeader, Vec<u64>)> {
        let mut out = Vec::new();
        while ring.pop(|s| out.push((s.header, s.frames().collect()))) {}
        out
    }

    #[test]
    fn capacity_must_be_a_power_of_two_and_depth_in_range() {
        assert_eq!(SampleRing::new(0, 8).err(), Some(RingError::Capacity(0)));
        assert_eq!(SampleRing::new(1, 8).err(), Some(RingError::Capacity(1)));
        assert_eq!(SampleRing::new(6, 8).err(), Some(RingError::Capacity(6)));
        assert_eq!(SampleRing::new(8, 0).err(), Some(RingError::Depth(0)));
        assert_eq!(SampleRing::new(8, 513).err(), Some(RingError::Depth(513)));
        assert!(SampleRing::new(2, 512).is_ok());
    }

    #[test]
    fn samples_come_out_in_order_with_their_frames() {
        let ring = SampleRing::new(4, 3).unwrap();
        assert!(ring.push(header(1), |w| {
            w.push(0x10);
            w.push(0x20);
        }));
        assert!(ring.push(header(2), |_| {}));
        assert_eq!(ring.len(), 2);
        assert_eq!(collect(&ring), vec![(header(1), vec![0x10, 0x20]), (header(2), vec![])]);
        assert_eq!(ring.len(), 0);
        assert!(!ring.pop(|_| panic!("empty ring yields nothing")));
    }

    #[test]
    fn frames_beyond_the_depth_are_refused() {
        let ring = SampleRing::new(2, 2).unwrap();
        let mut accepted = vec![];
        ring.push(header(1), |w| accepted = (1..=4).map(|pc| w.push(pc)).collect());
        assert_eq!(accepted, [true, true, false, false]);
        assert_eq!(collect(&ring), vec![(header(1), vec![1, 2])]);
    }

    #[test]
    fn a_full_ring_drops_and_counts_new_samples() {
        let ring = SampleRing::new(4, 1).unwrap();
        for n in 0..4 {
            assert!(ring.push(header(n), |w| {
                w.push(n);
            }));
        }
        assert!(!ring.push(header(4), |_| panic!("a full ring does not call fill")));
        assert!(!ring.push(header(5), |_| {}));
        assert_eq!(collect(&ring).len(), 4);
        assert!(ring.push(header(6), |_| {}), "room again after draining");
        assert_eq!(collect(&ring), vec![(header(6), vec![])]);
    }

    #[test]
    fn a_full_ring_takes_a_sample_again_as_soon_as_one_is_read() {
        let ring = SampleRing::new(2, 1).unwrap();
        assert!(ring.push_pc(header(1), 0x10) && ring.push_pc(header(2), 0x20));
        assert!(!ring.push_pc(header(3), 0x30), "full");
        assert!(ring.pop(|_| {}));
        assert!(ring.push_pc(header(4), 0x40), "the slot read is free again");
        assert!(!ring.push_pc(header(5), 0x50), "and the ring full again");
        let pcs = |(_, pcs): (SampleHeader, Vec<u64>)| pcs;
        assert_eq!(collect(&ring).into_iter().map(pcs).collect::<Vec<_>>(), [[0x20], [0x40]]);
    }

    #[test]
    fn a_sample_of_the_pc_alone_shares_the_ring_with_callchains_and_a_full_ring_refuses_it() {
        let ring = SampleRing::new(2, 3).unwrap();
        assert!(ring.push_pc(header(1), 0x40_1000));
        assert!(ring.push(header(2), |w| {
            w.push(0x10);
            w.push(0x20);
            w.push(0x30);
        }));
        assert!(!ring.push_pc(header(3), 0x40_2000), "a full ring refuses the sample");
        assert_eq!(
            collect(&ring),
            vec![(header(1), vec![0x40_1000]), (header(2), vec![0x10, 0x20, 0x30])]
        );
        // The slot the first sample used holds a callchain now, and the next one the PC alone.
        assert!(ring.push(header(4), |w| _ = (w.push(1), w.push(2))));
        assert!(ring.push_pc(header(5), 3));
        assert_eq!(collect(&ring), vec![(header(4), vec![1, 2]), (header(5), vec![3])]);
    }

    #[test]
    fn indexes_wrap_around_many_times() {
        let ring = SampleRing::new(2, 2).unwrap();
        for n in 0..1000u64 {
            assert!(ring.push(header(n), |w| {
                w.push(n);
                w.push(!n);
            }));
            assert_eq!(collect(&ring), vec![(header(n), vec![n, !n])]);
        }
    }

    #[test]
    fn a_producer_and_a_consumer_on_two_threads_lose_nothing() {
        // The ring's protocol on real concurrency: every sample either arrives intact and in
        // order, or is counted as dropped.
        let ring = Arc::new(SampleRing::new(8, 4).unwrap());
        let total = 200_000u64;
        let producer = {
            let ring = Arc::clone(&ring);
            std::thread::spawn(move || {
                let (mut delivered, mut lost) = (0, 0);
                for n in 0..total {
                    if ring.push(header(n), |w| (0..4).for_each(|i| _ = w.push(n * 4 + i))) {
                        delivered += 1;
                    } else {
                        lost += 1;
                    }
                }
                (delivered, lost)
            })
        };
        let mut received = Vec::new();
        loop {
            let done = producer.is_finished();
            while ring.pop(|s| {
                let frames: Vec<u64> = s.frames().collect();
                let n = s.header.pmc;
                assert_eq!(s.header, header(n), "a header arrived torn");
                assert_eq!(frames, [n * 4, n * 4 + 1, n * 4 + 2, n * 4 + 3], "frames arrived torn");
                received.push(n);
            }) {}
            if done && ring.is_empty() {
                break;
            }
        }
        let (delivered, lost) = producer.join().unwrap();
        assert_eq!(received.len() as u64, delivered);
        assert_eq!(delivered + lost, total);
        assert!(received.windows(2).all(|w| w[0] < w[1]), "samples arrived out of order");
    }
}

/// Every interleaving of a CPU's two producer contexts (the PMI and software events, each with
/// its own ring) and the drain: no sample is lost unless refused, none is torn, none comes out
/// twice, and each ring keeps its order.
#[cfg(all(test, loom))]
mod loom_models {
    use super::{SampleHeader, SampleRing};
    use loom::sync::Arc;
    use loom::thread;

    fn header(pmc: u64, n: u64) -> SampleHeader {
        SampleHeader { pmc, pid: n as i32, tid: n as i32, flags: 0, tsc: n }
    }

    /// Pushes samples 1..=count of `pmc` (frames `[pmc, n]`); returns how many were refused.
    fn produce(ring: &SampleRing, pmc: u64, count: u64) -> u64 {
        (1..=count)
            .filter(|&n| {
                !ring.push(header(pmc, n), |frames| {
                    frames.push(pmc);
                    frames.push(n);
                })
            })
            .count() as u64
    }

    /// Pops whatever waits in `ring`, checking each sample is whole and in order after `last`.
    fn drain(ring: &SampleRing, pmc: u64, last: &mut u64) -> u64 {
        let mut taken = 0;
        while ring.pop(|sample| {
            let n = sample.header.tsc;
            assert_eq!(sample.header, header(pmc, n), "a whole header");
            assert_eq!(sample.frames().collect::<Vec<_>>(), [pmc, n], "its own frames");
            assert!(n > *last, "in order, never twice");
            *last = n;
        }) {
            taken += 1;
        }
        taken
    }

    #[test]
    fn the_pmi_and_software_events_each_with_a_ring_never_overwrite_each_other() {
        loom::model(|| {
            let pmi = Arc::new(SampleRing::new(2, 2).unwrap());
            let soft = Arc::new(SampleRing::new(2, 2).unwrap());
            let producers = [(Arc::clone(&pmi), 1), (Arc::clone(&soft), 2)]
                .map(|(ring, pmc)| thread::spawn(move || produce(&ring, pmc, 3)));
            let (mut last_pmi, mut last_soft) = (0, 0);
            let mut taken = drain(&pmi, 1, &mut last_pmi) + drain(&soft, 2, &mut last_soft);
            let refused: u64 = producers.map(|p| p.join().unwrap()).iter().sum();
            taken += drain(&pmi, 1, &mut last_pmi) + drain(&soft, 2, &mut last_soft);
            assert_eq!(taken + refused, 6, "every sample delivered or counted lost");
        });
    }
}
