//! Decoding one complete record. Framing across chunks lives in `stream.rs`; this module turns the
//! bytes of a single record into a [`Record`] after checking its header.

use crate::bytes::{c_string, fixed_string, read_i32, read_u32, read_u64};
use crate::error::DecodeError;
use crate::fields;
use crate::layout::{CALLCHAIN_FIXED_LEN, RecordType, Size};
use crate::limits::{CALLCHAIN_DEPTH_MAX, COMM_LEN, CPUID_LEN, HEADER_MAGIC, NAME_MAX, PATH_MAX};
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
    let (record_type, length) = parse_header_word(read_u32(bytes, fields::header::WORD), offset)?;
    let Some(record) = bytes.get(..length) else {
        return Err(DecodeError::Truncated { offset, have: bytes.len(), need: length });
    };
    Ok((decode_body(record_type, record, offset)?, read_u64(record, fields::header::TSC), length))
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
        RecordType::Initialize => {
            use fields::initialize::*;
            Record::Initialize(Initialize {
                version: u32_at(VERSION),
                cpu_type: u32_at(CPU_TYPE),
                tsc_freq: u64_at(TSC_FREQ),
                time_sec: u64_at(TIME_SEC) as i64,
                time_nsec: u64_at(TIME_NSEC) as i64,
                cpuid: fixed_string(&record[CPUID..CPUID + CPUID_LEN]),
            })
        }
        RecordType::PmcAllocate => {
            use fields::pmc_allocate::*;
            Record::PmcAllocate(PmcAllocate {
                pmcid: u32_at(PMCID),
                event: u32_at(EVENT),
                flags: u32_at(FLAGS),
                rate: u64_at(RATE),
            })
        }
        RecordType::PmcAttach => {
            use fields::pmc_attach::*;
            Record::PmcAttach(PmcAttach {
                pmcid: u32_at(PMCID),
                pid: i32_at(PID),
                path: path_at(PATH)?,
            })
        }
        RecordType::PmcDetach => {
            use fields::pmc_detach::*;
            Record::PmcDetach(PmcDetach { pmcid: u32_at(PMCID), pid: i32_at(PID) })
        }
        RecordType::ProcCsw => {
            use fields::proc_csw::*;
            Record::ProcCsw(ProcCsw {
                value: u64_at(VALUE),
                pmcid: u32_at(PMCID),
                pid: i32_at(PID),
                tid: i32_at(TID),
            })
        }
        RecordType::ProcExec => {
            use fields::proc_exec::*;
            Record::ProcExec(ProcExec {
                pid: i32_at(PID),
                pmcid: u32_at(PMCID),
                base_addr: u64_at(BASE_ADDR),
                dyn_addr: u64_at(DYN_ADDR),
                path: path_at(PATH)?,
            })
        }
        RecordType::ProcExit => {
            use fields::proc_exit::*;
            Record::ProcExit(ProcExit {
                pmcid: u32_at(PMCID),
                pid: i32_at(PID),
                value: u64_at(VALUE),
            })
        }
        RecordType::ProcFork => {
            use fields::proc_fork::*;
            Record::ProcFork(ProcFork { old_pid: i32_at(OLD_PID), new_pid: i32_at(NEW_PID) })
        }
        RecordType::SysExit => Record::SysExit(SysExit { pid: i32_at(fields::sys_exit::PID) }),
        RecordType::UserData => {
            Record::UserData(UserData { data: u32_at(fields::user_data::DATA) })
        }
        RecordType::MapIn => {
            use fields::map_in::*;
            Record::MapIn(MapIn { pid: i32_at(PID), start: u64_at(START), path: path_at(PATH)? })
        }
        RecordType::MapOut => {
            use fields::map_out::*;
            Record::MapOut(MapOut { pid: i32_at(PID), start: u64_at(START), end: u64_at(END) })
        }
        RecordType::Callchain => {
            use fields::callchain::*;
            Record::Callchain(Callchain {
                pid: i32_at(PID),
                tid: i32_at(TID),
                pmcid: u32_at(PMCID),
                cpuflags: CallchainFlags(u32_at(CPUFLAGS)),
                pcs: ProgramCounters::from_le_bytes(&record[PCS..]),
            })
        }
        RecordType::PmcAllocateDyn => Record::PmcAllocateDyn(decode_allocate_dyn(record)),
        RecordType::ThrCreate => {
            use fields::thr_create::*;
            Record::ThrCreate(ThrCreate {
                tid: i32_at(TID),
                pid: i32_at(PID),
                flags: u32_at(FLAGS),
                name: fixed_string(&record[NAME..NAME + COMM_LEN]),
            })
        }
        RecordType::ThrExit => Record::ThrExit(ThrExit { tid: i32_at(fields::thr_exit::TID) }),
        RecordType::ProcCreate => {
            use fields::proc_create::*;
            Record::ProcCreate(ProcCreate {
                pid: i32_at(PID),
                flags: u32_at(FLAGS),
                comm: fixed_string(&record[COMM..COMM + COMM_LEN]),
            })
        }
    })
}

/// PMCALLOCATEDYN comes in two layouts (see [`DynLayout`]). Real kernels write a u64 rate at 32 and
/// the name at 40; the documented struct has the name at 32. The documented layout is chosen only
/// when offset 32 holds text and either that text runs past offset 40 (no sane rate has eight
/// printable bytes) or offset 40 holds no text; otherwise the record is read as the kernel wrote it.
fn decode_allocate_dyn(record: &[u8]) -> PmcAllocateDyn<'_> {
    use fields::pmc_allocate_dyn::{DOCUMENTED_NAME, EVENT, FLAGS, KERNEL_NAME, LEN, PMCID, RATE};
    let kernel_name = fixed_string(&record[KERNEL_NAME..LEN]);
    let documented_name = &record[DOCUMENTED_NAME..DOCUMENTED_NAME + NAME_MAX];
    let documented_text = c_string(documented_name).filter(|name| is_event_name(name));
    let (name, rate, layout) = match documented_text {
        Some(name)
            if name.len() >= KERNEL_NAME - DOCUMENTED_NAME || !is_event_name(kernel_name) =>
        {
            (name, 0, DynLayout::Documented)
        }
        _ => (kernel_name, read_u64(record, RATE), DynLayout::Kernel),
    };
    PmcAllocateDyn {
        pmcid: read_u32(record, PMCID),
        event: read_u32(record, EVENT),
        flags: read_u32(record, FLAGS),
        rate,
        name,
        layout,
    }
}

/// Whether `bytes` look like an event name: non-empty printable ASCII.
fn is_event_name(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(|b| b.is_ascii_graphic())
}
