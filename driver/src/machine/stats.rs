//! The driver's statistics, counted per CPU.

use crate::sync::AtomicU64;

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
