//! The limits of the format (`freebsd-abi.md` §3.2–3.4): the header, the longest path and
//! callchain, and the sizes of the fixed text fields.

/// The magic byte in bits 31..24 of every record header (`PMCLOG_HEADER_MAGIC`).
pub const HEADER_MAGIC: u8 = 0xEE;
/// Length of the record header: header word, spare word, 64-bit TSC.
pub const HEADER_LEN: usize = 16;
/// Most program counters a CALLCHAIN record may carry (`PMC_CALLCHAIN_DEPTH_MAX`).
pub const CALLCHAIN_DEPTH_MAX: usize = 512;
/// Longest path name, including its NUL (`PATH_MAX`).
pub const PATH_MAX: usize = 1024;
/// Size of the command and thread name fields, including the NUL (`MAXCOMLEN + 1`).
pub const COMM_LEN: usize = 20;
/// Size of the cpuid string field of INITIALIZE (`PMC_CPUID_LEN`).
pub const CPUID_LEN: usize = 64;
/// Size of the event name field of PMCALLOCATEDYN (`PMC_NAME_MAX`).
pub const NAME_MAX: usize = 64;
