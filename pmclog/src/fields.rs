//! Where each field sits inside each record type (`freebsd-abi.md` §3.3), declared once: the
//! decoder reads and the encoder writes at these offsets, and [`RecordType::size`] takes the
//! lengths from here.
//!
//! Offsets count from the start of the record, so the first body field is at [`HEADER_LEN`]. A
//! record whose last field is a path has no `LEN`: its `PATH` offset is the fixed part's length.
//!
//! [`RecordType::size`]: crate::RecordType
//! [`HEADER_LEN`]: crate::HEADER_LEN

use crate::limits::{COMM_LEN, CPUID_LEN, HEADER_LEN};

/// The 16-byte header every record starts with.
pub(crate) mod header {
    /// `0xEE << 24 | type << 16 | length`.
    pub(crate) const WORD: usize = 0;
    // Bytes 4..8 are the spare word, always written as zero.
    /// The 64-bit TSC timestamp.
    pub(crate) const TSC: usize = 8;
}

/// INITIALIZE (`struct pmclog_initialize`).
pub(crate) mod initialize {
    use super::{CPUID_LEN, HEADER_LEN};
    pub(crate) const VERSION: usize = HEADER_LEN;
    pub(crate) const CPU_TYPE: usize = 20;
    pub(crate) const TSC_FREQ: usize = 24;
    pub(crate) const TIME_SEC: usize = 32;
    pub(crate) const TIME_NSEC: usize = 40;
    pub(crate) const CPUID: usize = 48;
    pub(crate) const LEN: usize = CPUID + CPUID_LEN;
}

/// PMCALLOCATE (`struct pmclog_pmcallocate`); bytes 28..32 are padding before the u64 rate.
pub(crate) mod pmc_allocate {
    use super::HEADER_LEN;
    pub(crate) const PMCID: usize = HEADER_LEN;
    pub(crate) const EVENT: usize = 20;
    pub(crate) const FLAGS: usize = 24;
    pub(crate) const RATE: usize = 32;
    pub(crate) const LEN: usize = 40;
}

/// PMCATTACH (`struct pmclog_pmcattach`), followed by a path.
pub(crate) mod pmc_attach {
    use super::HEADER_LEN;
    pub(crate) const PMCID: usize = HEADER_LEN;
    pub(crate) const PID: usize = 20;
    pub(crate) const PATH: usize = 24;
}

/// PMCDETACH (`struct pmclog_pmcdetach`).
pub(crate) mod pmc_detach {
    use super::HEADER_LEN;
    pub(crate) const PMCID: usize = HEADER_LEN;
    pub(crate) const PID: usize = 20;
    pub(crate) const LEN: usize = 24;
}

/// PROCCSW (`struct pmclog_proccsw`).
pub(crate) mod proc_csw {
    use super::HEADER_LEN;
    pub(crate) const VALUE: usize = HEADER_LEN;
    pub(crate) const PMCID: usize = 24;
    pub(crate) const PID: usize = 28;
    pub(crate) const TID: usize = 32;
    pub(crate) const LEN: usize = 40;
}

/// PROCEXEC (`struct pmclog_procexec`), followed by a path.
pub(crate) mod proc_exec {
    use super::HEADER_LEN;
    pub(crate) const PID: usize = HEADER_LEN;
    pub(crate) const PMCID: usize = 20;
    pub(crate) const BASE_ADDR: usize = 24;
    pub(crate) const DYN_ADDR: usize = 32;
    pub(crate) const PATH: usize = 40;
}

/// PROCEXIT (`struct pmclog_procexit`).
pub(crate) mod proc_exit {
    use super::HEADER_LEN;
    pub(crate) const PMCID: usize = HEADER_LEN;
    pub(crate) const PID: usize = 20;
    pub(crate) const VALUE: usize = 24;
    pub(crate) const LEN: usize = 32;
}

/// PROCFORK (`struct pmclog_procfork`).
pub(crate) mod proc_fork {
    use super::HEADER_LEN;
    pub(crate) const OLD_PID: usize = HEADER_LEN;
    pub(crate) const NEW_PID: usize = 20;
    pub(crate) const LEN: usize = 24;
}

/// SYSEXIT (`struct pmclog_sysexit`).
pub(crate) mod sys_exit {
    use super::HEADER_LEN;
    pub(crate) const PID: usize = HEADER_LEN;
    pub(crate) const LEN: usize = 24;
}

/// USERDATA (`struct pmclog_userdata`).
pub(crate) mod user_data {
    use super::HEADER_LEN;
    pub(crate) const DATA: usize = HEADER_LEN;
    pub(crate) const LEN: usize = 24;
}

/// MAP_IN (`struct pmclog_map_in`), followed by a path.
pub(crate) mod map_in {
    use super::HEADER_LEN;
    pub(crate) const PID: usize = HEADER_LEN;
    pub(crate) const START: usize = 24;
    pub(crate) const PATH: usize = 32;
}

/// MAP_OUT (`struct pmclog_map_out`).
pub(crate) mod map_out {
    use super::HEADER_LEN;
    pub(crate) const PID: usize = HEADER_LEN;
    pub(crate) const START: usize = 24;
    pub(crate) const END: usize = 32;
    pub(crate) const LEN: usize = 40;
}

/// CALLCHAIN (`struct pmclog_callchain`), followed by 8-byte program counters.
pub(crate) mod callchain {
    use super::HEADER_LEN;
    pub(crate) const PID: usize = HEADER_LEN;
    pub(crate) const TID: usize = 20;
    pub(crate) const PMCID: usize = 24;
    pub(crate) const CPUFLAGS: usize = 28;
    /// The first program counter; also the length of the fixed part.
    pub(crate) const PCS: usize = 32;
}

/// PMCALLOCATEDYN (`struct pmclog_pmcallocatedyn`) in its two layouts (see
/// [`DynLayout`](crate::DynLayout)).
pub(crate) mod pmc_allocate_dyn {
    use super::HEADER_LEN;
    pub(crate) const PMCID: usize = HEADER_LEN;
    pub(crate) const EVENT: usize = 20;
    pub(crate) const FLAGS: usize = 24;
    /// The u64 rate of FreeBSD's kernel layout.
    pub(crate) const RATE: usize = 32;
    /// Offset of the name in FreeBSD's kernel layout of PMCALLOCATEDYN (after a u64 rate).
    pub(crate) const KERNEL_NAME: usize = 40;
    /// Offset of the name in the documented layout (`struct pmclog_pmcallocatedyn`).
    pub(crate) const DOCUMENTED_NAME: usize = 32;
    pub(crate) const LEN: usize = 96;
}

/// THR_CREATE (`struct pmclog_threadcreate`).
pub(crate) mod thr_create {
    use super::{COMM_LEN, HEADER_LEN};
    pub(crate) const TID: usize = HEADER_LEN;
    pub(crate) const PID: usize = 20;
    pub(crate) const FLAGS: usize = 24;
    pub(crate) const NAME: usize = 32;
    pub(crate) const LEN: usize = NAME + COMM_LEN;
}

/// THR_EXIT (`struct pmclog_threadexit`).
pub(crate) mod thr_exit {
    use super::HEADER_LEN;
    pub(crate) const TID: usize = HEADER_LEN;
    pub(crate) const LEN: usize = 24;
}

/// PROC_CREATE (`struct pmclog_proccreate`).
pub(crate) mod proc_create {
    use super::{COMM_LEN, HEADER_LEN};
    pub(crate) const PID: usize = HEADER_LEN;
    pub(crate) const FLAGS: usize = 20;
    pub(crate) const COMM: usize = 24;
    pub(crate) const LEN: usize = COMM + COMM_LEN;
}
