//! Record types and their sizes (`freebsd-abi.md` §3.2–3.4). The offsets of the fields inside
//! each record are in `fields.rs`, the sizes of the fields in `limits.rs`.

use crate::fields;
use crate::limits::{CALLCHAIN_DEPTH_MAX, HEADER_LEN, HEADER_MAGIC};

/// The longest legal record: a CALLCHAIN with [`CALLCHAIN_DEPTH_MAX`] frames. FreeBSD's parser
/// rejects anything longer than its `union pmclog_entry`, which has exactly this size.
pub const MAX_RECORD_LEN: usize = CALLCHAIN_FIXED_LEN + 8 * CALLCHAIN_DEPTH_MAX;

/// Length of a CALLCHAIN record before its program counters.
pub(crate) const CALLCHAIN_FIXED_LEN: usize = fields::callchain::PCS;

/// The type of a record (`enum pmclog_type`). Value 4 is a retired slot and is not a type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum RecordType {
    /// The log was closed; the last record of a log.
    CloseLog = 1,
    /// The driver had to drop data.
    DropNotify = 2,
    /// The first record of a log.
    Initialize = 3,
    /// A PMC was allocated.
    PmcAllocate = 5,
    /// A PMC was attached to a process.
    PmcAttach = 6,
    /// A PMC was detached from a process.
    PmcDetach = 7,
    /// A process PMC's count while a thread was on a CPU (`PMC_F_LOG_PROCCSW`).
    ProcCsw = 8,
    /// A target process called execve(2).
    ProcExec = 9,
    /// A target process exited; its accumulated count (`PMC_F_LOG_PROCEXIT`).
    ProcExit = 10,
    /// A target process forked.
    ProcFork = 11,
    /// A process exited (for owners of system sampling PMCs).
    SysExit = 12,
    /// Data written by the owner with PMC_OP_WRITELOG.
    UserData = 13,
    /// An executable mapping appeared.
    MapIn = 14,
    /// An executable mapping went away.
    MapOut = 15,
    /// A sample: the interrupted PC and its callers.
    Callchain = 16,
    /// A PMC of a dynamic (SOFT) event was allocated; carries the event name.
    PmcAllocateDyn = 17,
    /// A thread was created.
    ThrCreate = 18,
    /// A thread exited.
    ThrExit = 19,
    /// A process was created.
    ProcCreate = 20,
}

/// How long a record of a given type may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Size {
    /// Exactly this many bytes.
    Fixed(usize),
    /// A fixed part followed by a NUL-terminated path, padded to 4 bytes.
    Path { fixed: usize },
    /// A fixed part followed by 8-byte program counters.
    Callchain,
}

impl RecordType {
    /// Every record type, in numeric order.
    pub const ALL: [RecordType; 19] = [
        RecordType::CloseLog,
        RecordType::DropNotify,
        RecordType::Initialize,
        RecordType::PmcAllocate,
        RecordType::PmcAttach,
        RecordType::PmcDetach,
        RecordType::ProcCsw,
        RecordType::ProcExec,
        RecordType::ProcExit,
        RecordType::ProcFork,
        RecordType::SysExit,
        RecordType::UserData,
        RecordType::MapIn,
        RecordType::MapOut,
        RecordType::Callchain,
        RecordType::PmcAllocateDyn,
        RecordType::ThrCreate,
        RecordType::ThrExit,
        RecordType::ProcCreate,
    ];

    /// The type with this numeric code, if there is one.
    pub const fn from_code(code: u8) -> Option<RecordType> {
        Some(match code {
            1 => RecordType::CloseLog,
            2 => RecordType::DropNotify,
            3 => RecordType::Initialize,
            5 => RecordType::PmcAllocate,
            6 => RecordType::PmcAttach,
            7 => RecordType::PmcDetach,
            8 => RecordType::ProcCsw,
            9 => RecordType::ProcExec,
            10 => RecordType::ProcExit,
            11 => RecordType::ProcFork,
            12 => RecordType::SysExit,
            13 => RecordType::UserData,
            14 => RecordType::MapIn,
            15 => RecordType::MapOut,
            16 => RecordType::Callchain,
            17 => RecordType::PmcAllocateDyn,
            18 => RecordType::ThrCreate,
            19 => RecordType::ThrExit,
            20 => RecordType::ProcCreate,
            _ => return None,
        })
    }

    /// The numeric code of this type (`PMCLOG_TYPE_*`).
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// FreeBSD's name for the type, without the `PMCLOG_TYPE_` prefix.
    pub const fn name(self) -> &'static str {
        match self {
            RecordType::CloseLog => "CLOSELOG",
            RecordType::DropNotify => "DROPNOTIFY",
            RecordType::Initialize => "INITIALIZE",
            RecordType::PmcAllocate => "PMCALLOCATE",
            RecordType::PmcAttach => "PMCATTACH",
            RecordType::PmcDetach => "PMCDETACH",
            RecordType::ProcCsw => "PROCCSW",
            RecordType::ProcExec => "PROCEXEC",
            RecordType::ProcExit => "PROCEXIT",
            RecordType::ProcFork => "PROCFORK",
            RecordType::SysExit => "SYSEXIT",
            RecordType::UserData => "USERDATA",
            RecordType::MapIn => "MAP_IN",
            RecordType::MapOut => "MAP_OUT",
            RecordType::Callchain => "CALLCHAIN",
            RecordType::PmcAllocateDyn => "PMCALLOCATEDYN",
            RecordType::ThrCreate => "THR_CREATE",
            RecordType::ThrExit => "THR_EXIT",
            RecordType::ProcCreate => "PROC_CREATE",
        }
    }

    pub(crate) const fn size(self) -> Size {
        match self {
            RecordType::CloseLog | RecordType::DropNotify => Size::Fixed(HEADER_LEN),
            RecordType::Initialize => Size::Fixed(fields::initialize::LEN),
            RecordType::PmcAllocate => Size::Fixed(fields::pmc_allocate::LEN),
            RecordType::PmcAttach => Size::Path { fixed: fields::pmc_attach::PATH },
            RecordType::PmcDetach => Size::Fixed(fields::pmc_detach::LEN),
            RecordType::ProcCsw => Size::Fixed(fields::proc_csw::LEN),
            RecordType::ProcExec => Size::Path { fixed: fields::proc_exec::PATH },
            RecordType::ProcExit => Size::Fixed(fields::proc_exit::LEN),
            RecordType::ProcFork => Size::Fixed(fields::proc_fork::LEN),
            RecordType::SysExit => Size::Fixed(fields::sys_exit::LEN),
            RecordType::UserData => Size::Fixed(fields::user_data::LEN),
            RecordType::MapIn => Size::Path { fixed: fields::map_in::PATH },
            RecordType::MapOut => Size::Fixed(fields::map_out::LEN),
            RecordType::Callchain => Size::Callchain,
            RecordType::PmcAllocateDyn => Size::Fixed(fields::pmc_allocate_dyn::LEN),
            RecordType::ThrCreate => Size::Fixed(fields::thr_create::LEN),
            RecordType::ThrExit => Size::Fixed(fields::thr_exit::LEN),
            RecordType::ProcCreate => Size::Fixed(fields::proc_create::LEN),
        }
    }
}

impl core::fmt::Display for RecordType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// `roundup(len, 4)`: every record length is a multiple of 4.
pub(crate) const fn round_up_4(len: usize) -> usize {
    (len + 3) & !3
}

/// The header word for a record of `record_type` that is `length` bytes long.
pub(crate) const fn header_word(record_type: RecordType, length: usize) -> u32 {
    (HEADER_MAGIC as u32) << 24 | (record_type.code() as u32) << 16 | (length as u32 & 0xFFFF)
}
