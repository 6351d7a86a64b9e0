//! What the worker thread waits on: descriptors keyed by what they stand for. A leaf shared by
//! the worker ([`super::worker`]) and the perf counters that hand it their descriptors.

use std::os::fd::OwnedFd;

/// A descriptor the worker waits on, with a key that names what it watches for as long as
/// that lives (a ring, a process).
pub(crate) type Watched = (u64, OwnedFd);

/// The key of a process's pidfd (`PROCESS_KEY | pid`); other keys are rings'.
pub(crate) const PROCESS_KEY: u64 = 1 << 63;
