//! Decoding one complete record. Framing across chunks lives in `stream.rs`; this module turns the
//! bytes of a single record into a [`Record`] after checking its header.

use crate::bytes::{c_string, fixed_string, read_i32, read_u32, read_u64};
use crate::error::DecodeError;
use crate::layout::{
    CALLCHAIN_DEPTH_MAX, CALLCHAIN_FIXED_LEN, COMM_LEN, CPUID_LEN, HEADER_MAGIC, NAME_MAX,
    PATH_MAX, PMCALLOCATEDYN_LEN, RecordType, Size,
};
use crate::record::{
    Callchain, CallchainFlags, DynLayout, Initialize, MapIn, MapOut, PmcAllocate, PmcAllocateDyn,
    PmcAttach, PmcDetach, ProcCreate, ProcCsw, ProcExec, ProcExit, ProcFork, ProgramCounters,
    Record, SysExit, ThrCreate, ThrExit, UserData,
};

/// Checks a record header word (the first 4 bytes of a record, little-endian) and returns the
/// record's type and total length. `offset` is the record's position, for the error.
#[inline]
pub fn parse_header_word(word: u32, offset: u64) -> Result<(RecordType, usize), DecodeError> {
    let magic = (word >> 24) as u8;
    if magic != HEADER_MAGIC {
        return Err(DecodeError::BadMagic { offset, found: magic });
    }
    let code = (word >> 16) as u8;
    let record_type =
        RecordType::from_code(code).ok_or(DecodeError::UnknownType { offset, code })?;
    let length = (word & 0xFFFF) as usize;
    let bad_length = DecodeError::BadLength { offset, record_type, length };
    match record_type.size() {
        Size::Fixed(expected) if length != expected => return Err(bad_length),
        Size::Fixed(_) => {}
        Size::Path { fixed } => {
            if length < fixed + 4 || length > fixed + PATH_MAX || length % 4 != 0 {
                return Err(bad_length);
            }
        }
        Size::Callchain => {
            if length < CALLCHAIN_FIXED_LEN || (length - CALLCHAIN_FIXED_LEN) % 8 != 0 {
                return Err(bad_length);
            }
            let frames = (length - CALLCHAIN_FIXED_LEN) / 8;
            if frames > CALLCHAIN_DEPTH_MAX {
                return Err(DecodeError::CallchainTooDeep { offset, frames });
            }
        }
    }
    Ok((record_type, length))
}

/// Decodes the record at the start of `bytes` (which may hold more after it). Returns the record,
/// its timestamp and its length. `offset` is the record's position in the stream, for errors.
#[inline]
pub fn decode_record(bytes: &[u8], offset: u64) -> Result<(Record<'_>, u64, usize), DecodeError> {
    if bytes.len() < 4 {
        return Err(DecodeError::Truncated { offset, have: bytes.len(), need: 4 });
    }
    let (record_type, length) = parse_header_word(read_u32(bytes, 0), offset)?;
    let Some(record) = bytes.get(..length) else {
        return Err(DecodeError::Truncated { offset, have: bytes.len(), need: length });
    };
    Ok((decode_body(record_type, record, offset)?, read_u64(record, 8), length))
}

/// Decodes a record whose header was checked by [`parse_header_word`] and whose bytes are all
/// present (`record.len()` is the header's length).
#[inline]
pub(crate) fn decode_body(
    record_type: RecordType,
    record: &[u8],
    offset: u64,
) -> Result<Record<'_>, DecodeError> {
    let u32_at = |at| read_u32(record, at);
    let i32_at = |at| read_i32(record, at);
    let u64_at = |at| read_u64(record, at);
    let path_at = |at: usize| {
        c_string(&record[at..]).ok_or(DecodeError::PathNotTerminated { offset, record_type })
    };
    Ok(match record_type {
        RecordType::CloseLog => Record::CloseLog,
        RecordType::DropNotify => Record::DropNotify,
        RecordType::Initialize => Record::Initialize(Initialize {
            version: u32_at(16),
            cpu_type: u32_at(20),
            tsc_freq: u64_at(24),
            time_sec: u64_at(32) as i64,
            time_nsec: u64_at(40) as i64,
            cpuid: fixed_string(&record[48..48 + CPUID_LEN]),
        }),
        RecordType::PmcAllocate => Record::PmcAllocate(PmcAllocate {
            pmcid: u32_at(16),
            event: u32_at(20),
            flags: u32_at(24),
            rate: u64_at(32),
        }),
        RecordType::PmcAttach => {
            Record::PmcAttach(PmcAttach { pmcid: u32_at(16), pid: i32_at(20), path: path_at(24)? })
        }
        RecordType::PmcDetach => {
            Record::PmcDetach(PmcDetach { pmcid: u32_at(16), pid: i32_at(20) })
        }
        RecordType::ProcCsw => Record::ProcCsw(ProcCsw {
            value: u64_at(16),
            pmcid: u32_at(24),
            pid: i32_at(28),
            tid: i32_at(32),
        }),
        RecordType::ProcExec => Record::ProcExec(ProcExec {
            pid: i32_at(16),
            pmcid: u32_at(20),
            base_addr: u64_at(24),
            dyn_addr: u64_at(32),
            path: path_at(40)?,
        }),
        RecordType::ProcExit => {
            Record::ProcExit(ProcExit { pmcid: u32_at(16), pid: i32_at(20), value: u64_at(24) })
        }
        RecordType::ProcFork => {
            Record::ProcFork(ProcFork { old_pid: i32_at(16), new_pid: i32_at(20) })
        }
        RecordType::SysExit => Record::SysExit(SysExit { pid: i32_at(16) }),
        RecordType::UserData => Record::UserData(UserData { data: u32_at(16) }),
        RecordType::MapIn => {
            Record::MapIn(MapIn { pid: i32_at(16), start: u64_at(24), path: path_at(32)? })
        }
        RecordType::MapOut => {
            Record::MapOut(MapOut { pid: i32_at(16), start: u64_at(24), end: u64_at(32) })
        }
        RecordType::Callchain => Record::Callchain(Callchain {
            pid: i32_at(16),
            tid: i32_at(20),
            pmcid: u32_at(24),
            cpuflags: CallchainFlags(u32_at(28)),
            pcs: ProgramCounters::from_le_bytes(&record[CALLCHAIN_FIXED_LEN..]),
        }),
        RecordType::PmcAllocateDyn => Record::PmcAllocateDyn(decode_allocate_dyn(record)),
        RecordType::ThrCreate => Record::ThrCreate(ThrCreate {
            tid: i32_at(16),
            pid: i32_at(20),
            flags: u32_at(24),
            name: fixed_string(&record[32..32 + COMM_LEN]),
        }),
        RecordType::ThrExit => Record::ThrExit(ThrExit { tid: i32_at(16) }),
        RecordType::ProcCreate => Record::ProcCreate(ProcCreate {
            pid: i32_at(16),
            flags: u32_at(20),
            comm: fixed_string(&record[24..24 + COMM_LEN]),
        }),
    })
}

/// Offset of the name in FreeBSD's kernel layout of PMCALLOCATEDYN (after a u64 rate).
const DYN_KERNEL_NAME_AT: usize = 40;
/// Offset of the name in the documented layout (`struct pmclog_pmcallocatedyn`).
const DYN_DOCUMENTED_NAME_AT: usize = 32;

/// PMCALLOCATEDYN comes in two layouts (see [`DynLayout`]). Real kernels write a u64 rate at 32 and
/// the name at 40; the documented struct has the name at 32. The documented layout is chosen only
/// when offset 32 holds text and either that text runs past offset 40 (no sane rate has eight
/// printable bytes) or offset 40 holds no text; otherwise the record is read as the kernel wrote it.
fn decode_allocate_dyn(record: &[u8]) -> PmcAllocateDyn<'_> {
    let kernel_name = fixed_string(&record[DYN_KERNEL_NAME_AT..PMCALLOCATEDYN_LEN]);
    let documented_name = &record[DYN_DOCUMENTED_NAME_AT..DYN_DOCUMENTED_NAME_AT + NAME_MAX];
    let documented_text = c_string(documented_name).filter(|name| is_event_name(name));
    let (name, rate, layout) = match documented_text {
        Some(name)
            if name.len() >= DYN_KERNEL_NAME_AT - DYN_DOCUMENTED_NAME_AT
                || !is_event_name(kernel_name) =>
        {
            (name, 0, DynLayout::Documented)
        }
        _ => (kernel_name, read_u64(record, DYN_DOCUMENTED_NAME_AT), DynLayout::Kernel),
    };
    PmcAllocateDyn {
        pmcid: read_u32(record, 16),
        event: read_u32(record, 20),
        flags: read_u32(record, 24),
        rate,
        name,
        layout,
    }
}

/// Whether `bytes` look like an event name: non-empty printable ASCII.
fn is_event_name(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(|b| b.is_ascii_graphic())
}
