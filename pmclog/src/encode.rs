//! Writing records into a caller's buffer (no allocation; used by the driver's log writer).
//!
//! Every byte of the record is written: the spare header word, padding fields and the bytes after a
//! NUL-terminated string are zero, where FreeBSD's kernel leaves whatever the buffer held before.

use crate::bytes::{write_u32, write_u64};
use crate::fields;
use crate::layout::{CALLCHAIN_FIXED_LEN, Size, header_word, round_up_4};
use crate::limits::{CALLCHAIN_DEPTH_MAX, COMM_LEN, CPUID_LEN, NAME_MAX, PATH_MAX};
use crate::record::{DynLayout, ProgramCounters, Record};

/// Why a record could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The buffer is shorter than the record.
    #[error("record needs {needed} bytes but the buffer has {available}")]
    BufferTooSmall {
        /// The record's length.
        needed: usize,
        /// The buffer's length.
        available: usize,
    },
    /// A string field holds a NUL byte, which would cut it short when read back.
    #[error("{field} contains a NUL byte")]
    ContainsNul {
        /// Which field.
        field: &'static str,
    },
    /// A string is longer than its field allows. A path needs room for its NUL; a name in a
    /// fixed-size field may fill the field.
    #[error("{field} is {len} bytes long; at most {max} fit")]
    TooLong {
        /// Which field.
        field: &'static str,
        /// The string's length.
        len: usize,
        /// The most the field holds.
        max: usize,
    },
    /// A callchain has more than 512 program counters.
    #[error("callchain has {frames} frames; at most 512 fit in a record")]
    TooManyFrames {
        /// The number of program counters given.
        frames: usize,
    },
}

/// The length `record` will have when encoded.
pub fn encoded_len(record: &Record<'_>) -> Result<usize, EncodeError> {
    let fixed = match record.record_type().size() {
        Size::Fixed(len) => len,
        Size::Path { fixed } => fixed,
        Size::Callchain => CALLCHAIN_FIXED_LEN,
    };
    let variable = match record {
        Record::PmcAttach(r) => path_room(r.path)?,
        Record::ProcExec(r) => path_room(r.path)?,
        Record::MapIn(r) => path_room(r.path)?,
        Record::Callchain(r) if r.pcs.len() > CALLCHAIN_DEPTH_MAX => {
            return Err(EncodeError::TooManyFrames { frames: r.pcs.len() });
        }
        Record::Callchain(r) => 8 * r.pcs.len(),
        other => {
            check_strings(other)?;
            0
        }
    };
    Ok(fixed + variable)
}

/// Bytes a path takes in a record: the path, its NUL, padding to 4.
fn path_room(path: &[u8]) -> Result<usize, EncodeError> {
    check_string("path", path, PATH_MAX - 1)?;
    Ok(round_up_4(path.len() + 1))
}

/// Writes `record` with timestamp `tsc` at the start of `buf` and returns its length. Nothing is
/// written when the record does not fit or a field is out of range.
pub fn encode(record: &Record<'_>, tsc: u64, buf: &mut [u8]) -> Result<usize, EncodeError> {
    let length = encoded_len(record)?;
    let available = buf.len();
    let Some(out) = buf.get_mut(..length) else {
        return Err(EncodeError::BufferTooSmall { needed: length, available });
    };
    out.fill(0);
    write_u32(out, fields::header::WORD, header_word(record.record_type(), length));
    write_u64(out, fields::header::TSC, tsc);
    match record {
        Record::CloseLog | Record::DropNotify => {}
        Record::Initialize(r) => {
            use fields::initialize::*;
            write_u32(out, VERSION, r.version);
            write_u32(out, CPU_TYPE, r.cpu_type);
            write_u64(out, TSC_FREQ, r.tsc_freq);
            write_u64(out, TIME_SEC, r.time_sec as u64);
            write_u64(out, TIME_NSEC, r.time_nsec as u64);
            out[CPUID..CPUID + r.cpuid.len()].copy_from_slice(r.cpuid);
        }
        Record::PmcAllocate(r) => {
            use fields::pmc_allocate::*;
            write_u32(out, PMCID, r.pmcid);
            write_u32(out, EVENT, r.event);
            write_u32(out, FLAGS, r.flags);
            write_u64(out, RATE, r.rate);
        }
        Record::PmcAttach(r) => {
            use fields::pmc_attach::*;
            write_u32(out, PMCID, r.pmcid);
            write_u32(out, PID, r.pid as u32);
            out[PATH..PATH + r.path.len()].copy_from_slice(r.path);
        }
        Record::PmcDetach(r) => {
            use fields::pmc_detach::*;
            write_u32(out, PMCID, r.pmcid);
            write_u32(out, PID, r.pid as u32);
        }
        Record::ProcCsw(r) => {
            use fields::proc_csw::*;
            write_u64(out, VALUE, r.value);
            write_u32(out, PMCID, r.pmcid);
            write_u32(out, PID, r.pid as u32);
            write_u32(out, TID, r.tid as u32);
        }
        Record::ProcExec(r) => {
            use fields::proc_exec::*;
            write_u32(out, PID, r.pid as u32);
            write_u32(out, PMCID, r.pmcid);
            write_u64(out, BASE_ADDR, r.base_addr);
            write_u64(out, DYN_ADDR, r.dyn_addr);
            out[PATH..PATH + r.path.len()].copy_from_slice(r.path);
        }
        Record::ProcExit(r) => {
            use fields::proc_exit::*;
            write_u32(out, PMCID, r.pmcid);
            write_u32(out, PID, r.pid as u32);
            write_u64(out, VALUE, r.value);
        }
        Record::ProcFork(r) => {
            use fields::proc_fork::*;
            write_u32(out, OLD_PID, r.old_pid as u32);
            write_u32(out, NEW_PID, r.new_pid as u32);
        }
        Record::SysExit(r) => write_u32(out, fields::sys_exit::PID, r.pid as u32),
        Record::UserData(r) => write_u32(out, fields::user_data::DATA, r.data),
        Record::MapIn(r) => {
            use fields::map_in::*;
            write_u32(out, PID, r.pid as u32);
            write_u64(out, START, r.start);
            out[PATH..PATH + r.path.len()].copy_from_slice(r.path);
        }
        Record::MapOut(r) => {
            use fields::map_out::*;
            write_u32(out, PID, r.pid as u32);
            write_u64(out, START, r.start);
            write_u64(out, END, r.end);
        }
        Record::Callchain(r) => {
            use fields::callchain::*;
            write_u32(out, PID, r.pid as u32);
            write_u32(out, TID, r.tid as u32);
            write_u32(out, PMCID, r.pmcid);
            write_u32(out, CPUFLAGS, r.cpuflags.0);
            write_pcs(&mut out[PCS..], r.pcs);
        }
        Record::PmcAllocateDyn(r) => {
            use fields::pmc_allocate_dyn::*;
            write_u32(out, PMCID, r.pmcid);
            write_u32(out, EVENT, r.event);
            write_u32(out, FLAGS, r.flags);
            let name_at = match r.layout {
                DynLayout::Kernel => {
                    write_u64(out, RATE, r.rate);
                    KERNEL_NAME
                }
                DynLayout::Documented => DOCUMENTED_NAME,
            };
            out[name_at..name_at + r.name.len()].copy_from_slice(r.name);
        }
        Record::ThrCreate(r) => {
            use fields::thr_create::*;
            write_u32(out, TID, r.tid as u32);
            write_u32(out, PID, r.pid as u32);
            write_u32(out, FLAGS, r.flags);
            out[NAME..NAME + r.name.len()].copy_from_slice(r.name);
        }
        Record::ThrExit(r) => write_u32(out, fields::thr_exit::TID, r.tid as u32),
        Record::ProcCreate(r) => {
            use fields::proc_create::*;
            write_u32(out, PID, r.pid as u32);
            write_u32(out, FLAGS, r.flags);
            out[COMM..COMM + r.comm.len()].copy_from_slice(r.comm);
        }
    }
    Ok(length)
}

fn write_pcs(out: &mut [u8], pcs: ProgramCounters<'_>) {
    for (slot, pc) in out.chunks_exact_mut(8).zip(pcs.iter()) {
        slot.copy_from_slice(&pc.to_le_bytes());
    }
}

/// Checks the string fields of fixed-size records against their room.
fn check_strings(record: &Record<'_>) -> Result<(), EncodeError> {
    match record {
        // A name that fills its fixed field is written without a NUL; readers (this crate's and
        // FreeBSD's) take the whole field then, so every decodable record can be written back.
        Record::Initialize(r) => check_string("cpuid", r.cpuid, CPUID_LEN),
        Record::ThrCreate(r) => check_string("thread name", r.name, COMM_LEN),
        Record::ProcCreate(r) => check_string("command name", r.comm, COMM_LEN),
        Record::PmcAllocateDyn(r) => {
            // The kernel layout has 56 bytes for the name inside the record: FreeBSD writes all 64
            // and lets the next record overwrite the last 8. A name that fills the room is kept
            // without its NUL, as FreeBSD readers see it.
            let room = match r.layout {
                DynLayout::Kernel => {
                    fields::pmc_allocate_dyn::LEN - fields::pmc_allocate_dyn::KERNEL_NAME
                }
                DynLayout::Documented => NAME_MAX - 1,
            };
            check_string("event name", r.name, room)
        }
        _ => Ok(()),
    }
}

fn check_string(field: &'static str, value: &[u8], max: usize) -> Result<(), EncodeError> {
    if value.contains(&0) {
        return Err(EncodeError::ContainsNul { field });
    }
    if value.len() > max {
        return Err(EncodeError::TooLong { field, len: value.len(), max });
    }
    Ok(())
}
