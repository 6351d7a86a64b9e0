//! The CPU binds of this process (`cpc_bind_cpu`): one set per CPU, and the epoch that
//! invalidates the per-LWP sets bound before the latest CPU bind.

use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The number of CPU binds made in this process so far: a per-LWP set bound before the latest
/// one is invalid.
pub(super) static CPU_EPOCH: AtomicU64 = AtomicU64::new(0);
/// The CPUs with a bound set in this process.
static CPU_BOUND: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// The CPUs with a bound set in this process, locked.
pub(super) fn cpu_bound() -> MutexGuard<'static, Vec<u32>> {
    CPU_BOUND.lock().unwrap_or_else(PoisonError::into_inner)
}
