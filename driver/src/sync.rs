//! The atomics of the lock-free protocols (sample rings, slots): `core`'s, or `loom`'s when the
//! crate is built with `--cfg loom` for the models that check every interleaving of them.

#[cfg(all(test, loom))]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

#[cfg(not(all(test, loom)))]
pub(crate) use core::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

/// Waits a moment before retrying (under loom, lets the other threads run).
#[inline]
pub(crate) fn retry_hint() {
    #[cfg(all(test, loom))]
    loom::thread::yield_now();
    #[cfg(not(all(test, loom)))]
    core::hint::spin_loop();
}
