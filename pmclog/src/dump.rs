//! The text form of a log that `pmcstat -R file` prints when no analysis option is given
//! (`freebsd-abi.md` §5.5), byte for byte: the record's name left-justified in 9 columns, a space,
//! the fields, a newline.
//!
//! Two places differ from FreeBSD on purpose, both where FreeBSD gives up: a PMCALLOCATE whose
//! event has no known name prints `(unknown event 0x…)` instead of stopping the dump, and a log that
//! ends inside a record reports a truncation error instead of ending silently.

use std::io::{self, Read, Write};

use crate::error::DecodeError;
use crate::names::{self, PMC_F_EV_PMU};
use crate::reader::{LogReader, ReadError};
use crate::record::{Entry, Record};

/// Resolves the event numbers of PMCALLOCATE records to names.
pub trait EventNames {
    /// The name of a static `enum pmc_event` value.
    fn static_event(&self, event: u32) -> Option<&str> {
        names::event_name(event)
    }

    /// The name of entry `index` of the PMU event table for the CPU `cpuid` (the string of the
    /// log's INITIALIZE record), for events allocated with `PMC_F_EV_PMU`.
    fn pmu_event(&self, cpuid: &[u8], index: u32) -> Option<&str>;
}

/// Names only FreeBSD's static events; PMU-table events stay unnamed.
#[derive(Debug, Clone, Copy, Default)]
pub struct StaticEventNames;

impl EventNames for StaticEventNames {
    fn pmu_event(&self, _cpuid: &[u8], _index: u32) -> Option<&str> {
        None
    }
}

/// How a dump ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpEnd {
    /// At a CLOSELOG record: the run that wrote the log ended it.
    Finished,
    /// At the end of the data, between records, without a CLOSELOG: the run that wrote the log
    /// was interrupted (killed, or still running). Every record was printed.
    Unclosed {
        /// Byte offset of the end of the last whole record (the log's length).
        offset: u64,
        /// Records printed.
        records: u64,
    },
    /// At a malformed record; the dump printed everything before it.
    Error {
        /// What was wrong.
        error: DecodeError,
        /// Serial number the bad record would have had (`pl_count + 1`).
        record: u64,
    },
}

impl DumpEnd {
    /// The message pmcstat prints for a log it cannot parse:
    /// `ERROR: event parsing failed (record N, offset 0x…)`, followed by the reason.
    pub fn error_message(&self) -> Option<String> {
        match self {
            DumpEnd::Finished | DumpEnd::Unclosed { .. } => None,
            DumpEnd::Error { error, record } => Some(format!(
                "ERROR: event parsing failed (record {record}, offset {:#x}): {error}",
                error.offset()
            )),
        }
    }

    /// The warning for a log without CLOSELOG: `the log has no CLOSELOG record: the run that
    /// wrote it did not finish; its N records up to byte offset 0x… are intact`.
    pub fn warning(&self) -> Option<String> {
        match self {
            DumpEnd::Unclosed { offset, records } => {
                let plural = if *records == 1 { "" } else { "s" };
                Some(format!(
                    "the log has no CLOSELOG record: the run that wrote it did not finish; its \
                     {records} record{plural} up to byte offset {offset:#x} are intact"
                ))
            }
            _ => None,
        }
    }
}

/// Prints records in `pmcstat -R` form. It remembers the log's cpuid (from INITIALIZE) to name
/// PMU-table events.
#[derive(Debug, Clone, Default)]
pub struct TextDump<N = StaticEventNames> {
    names: N,
    cpuid: Vec<u8>,
}

impl TextDump<StaticEventNames> {
    /// A dump that names FreeBSD's static events.
    pub fn new() -> Self {
        TextDump { names: StaticEventNames, cpuid: Vec::new() }
    }
}

impl<N: EventNames> TextDump<N> {
    /// A dump that names events with `names`.
    pub fn with_names(names: N) -> Self {
        TextDump { names, cpuid: Vec::new() }
    }

    /// Prints one record. CLOSELOG prints nothing, as in FreeBSD (its parser ends the log there).
    pub fn write_entry<W: Write + ?Sized>(
        &mut self,
        out: &mut W,
        entry: &Entry<'_>,
    ) -> io::Result<()> {
        match &entry.record {
            Record::CloseLog => Ok(()),
            Record::DropNotify => line(out, "drop", |_| Ok(())),
            Record::Initialize(r) => {
                self.cpuid = r.cpuid.to_vec();
                let arch = names::cpu_type_name(r.cpu_type).unwrap_or("(null)");
                line(out, "initlog", |o| write!(o, "{:#x} \"{arch}\"", r.version))
            }
            Record::PmcAllocate(r) => {
                let name = if r.flags & PMC_F_EV_PMU != 0 {
                    self.names.pmu_event(&self.cpuid, r.event)
                } else {
                    self.names.static_event(r.event)
                };
                line(out, "allocate", |o| {
                    write!(o, "{:#x} \"", r.pmcid)?;
                    match name {
                        Some(name) => o.write_all(name.as_bytes())?,
                        None => write!(o, "(unknown event {:#x})", r.event)?,
                    }
                    write!(o, "\" {:#x}", r.flags)
                })
            }
            Record::PmcAllocateDyn(r) => line(out, "allocatedyn", |o| {
                write!(o, "{:#x} \"", r.pmcid)?;
                o.write_all(r.name)?;
                write!(o, "\" {:#x}", r.flags)
            }),
            Record::PmcAttach(r) => line(out, "attach", |o| {
                write!(o, "{:#x} {} ", r.pmcid, r.pid)?;
                quoted(o, r.path)
            }),
            Record::PmcDetach(r) => line(out, "detach", |o| write!(o, "{:#x} {}", r.pmcid, r.pid)),
            Record::ProcCsw(r) => {
                // `%jd` of an unsigned value: FreeBSD prints counts past 2^63 as negative.
                line(out, "cswval", |o| write!(o, "{:#x} {} {}", r.pmcid, r.pid, r.value as i64))
            }
            Record::ProcCreate(r) => line(out, "create", |o| {
                write!(o, "{} {:x} ", r.pid, r.flags)?;
                quoted(o, r.comm)
            }),
            Record::ProcExec(r) => line(out, "exec", |o| {
                write!(o, "{:#x} {} {:#x} ", r.pmcid, r.pid, r.base_addr)?;
                quoted(o, r.path)
            }),
            Record::ProcExit(r) => {
                line(out, "exitval", |o| write!(o, "{:#x} {} {}", r.pmcid, r.pid, r.value as i64))
            }
            Record::ProcFork(r) => line(out, "fork", |o| write!(o, "{} {}", r.old_pid, r.new_pid)),
            Record::UserData(r) => line(out, "userdata", |o| write!(o, "{:#x}", r.data)),
            Record::SysExit(r) => line(out, "exit", |o| write!(o, "{}", r.pid)),
            Record::MapIn(r) => line(out, "map-in", |o| {
                write!(o, "{} {:#x} ", r.pid, r.start)?;
                quoted(o, r.path)
            }),
            Record::MapOut(r) => {
                line(out, "map-out", |o| write!(o, "{} {:#x} {:#x}", r.pid, r.start, r.end))
            }
            Record::ThrCreate(r) => line(out, "thr-create", |o| {
                write!(o, "{} {} {:x} ", r.tid, r.pid, r.flags)?;
                quoted(o, r.name)
            }),
            Record::ThrExit(r) => line(out, "thr-exit", |o| write!(o, "{}", r.tid)),
            Record::Callchain(r) => {
                let mode = if r.cpuflags.is_user() { 'u' } else { 's' };
                line(out, "callchain", |o| {
                    let cpu = r.cpuflags.cpu();
                    write!(o, "{} {:#x} {} {} {mode}", r.pid, r.pmcid, cpu, r.pcs.len())
                })?;
                // Most of a log is these lines: built by hand into one buffer and written at
                // once (the formatting machinery per line costs more than the rest of the dump).
                let mut lines = [0u8; PC_LINE_MAX * 16];
                let mut pcs = r.pcs.iter().peekable();
                while pcs.peek().is_some() {
                    let mut used = 0;
                    for pc in pcs.by_ref().take(16) {
                        used += pc_line(pc, &mut lines[used..]);
                    }
                    out.write_all(&lines[..used])?;
                }
                Ok(())
            }
        }
    }
}

/// The longest `...` line: the tag in 9 columns, a space, `0x`, 16 digits, a newline.
const PC_LINE_MAX: usize = 10 + 2 + 16 + 1;

/// Writes the line `...       0x<pc in lower-case hex>\n` (FreeBSD's `%-9s %p`, as
/// [`line`] would print it) at the start of `buf`; returns its length.
fn pc_line(pc: u64, buf: &mut [u8]) -> usize {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digits = ((64 - pc.leading_zeros() as usize).div_ceil(4)).max(1);
    let len = 12 + digits + 1;
    let Some(buf) = buf.get_mut(..len) else { return 0 };
    buf[..12].copy_from_slice(b"...       0x");
    for (i, byte) in buf[12..12 + digits].iter_mut().enumerate() {
        let shift = 4 * (digits - 1 - i);
        *byte = DIGITS[(pc >> shift) as usize & 0xF];
    }
    buf[len - 1] = b'\n';
    len
}

/// `PMCSTAT_PRINT_ENTRY`: `%-9s`, a space, the fields, a newline.
fn line<W: Write + ?Sized>(
    out: &mut W,
    tag: &str,
    fields: impl FnOnce(&mut W) -> io::Result<()>,
) -> io::Result<()> {
    write!(out, "{tag:<9} ")?;
    fields(out)?;
    out.write_all(b"\n")
}

/// A string in double quotes, its bytes as stored (FreeBSD's `"%s"`).
fn quoted<W: Write + ?Sized>(out: &mut W, bytes: &[u8]) -> io::Result<()> {
    out.write_all(b"\"")?;
    out.write_all(bytes)?;
    out.write_all(b"\"")
}

/// Prints a whole log held in memory, as `pmcstat -R` does, into `out`.
pub fn dump_bytes<W: Write + ?Sized>(log: &[u8], out: &mut W) -> io::Result<DumpEnd> {
    dump_bytes_with_names(log, StaticEventNames, out)
}

/// [`dump_bytes`] naming PMU-table events (`PMC_F_EV_PMU`) with `names`.
pub fn dump_bytes_with_names<N: EventNames, W: Write + ?Sized>(
    log: &[u8],
    names: N,
    out: &mut W,
) -> io::Result<DumpEnd> {
    let mut dump = TextDump::with_names(names);
    let mut records = crate::slice::Records::new(log);
    let mut closed = false;
    while let Some(item) = records.next() {
        match item {
            Ok(entry) => {
                closed = matches!(entry.record, Record::CloseLog);
                dump.write_entry(out, &entry)?
            }
            Err(error) => {
                return Ok(DumpEnd::Error { error, record: records.records_yielded() + 1 });
            }
        }
    }
    Ok(end_between_records(closed, records.offset(), records.records_yielded()))
}

/// How a dump that reached the end of its data between records ended.
fn end_between_records(closed: bool, offset: u64, records: u64) -> DumpEnd {
    if closed { DumpEnd::Finished } else { DumpEnd::Unclosed { offset, records } }
}

/// Prints a log read from `input` (a file, a pipe, a socket), as `pmcstat -R` does, into `out`.
/// It holds one [`LogReader`] buffer of the log at a time, whatever the log's size.
pub fn dump_reader<R: Read, W: Write + ?Sized>(input: R, out: &mut W) -> io::Result<DumpEnd> {
    dump_reader_with_names(input, StaticEventNames, out)
}

/// [`dump_reader`] naming PMU-table events (`PMC_F_EV_PMU`) with `names`.
pub fn dump_reader_with_names<R: Read, N: EventNames, W: Write + ?Sized>(
    input: R,
    names: N,
    out: &mut W,
) -> io::Result<DumpEnd> {
    let mut dump = TextDump::with_names(names);
    let mut reader = LogReader::new(input);
    let mut closed = false;
    loop {
        match reader.next_entry() {
            Ok(Some(entry)) => {
                closed = matches!(entry.record, Record::CloseLog);
                dump.write_entry(out, &entry)?
            }
            Ok(None) => {
                return Ok(end_between_records(closed, reader.offset(), reader.count()));
            }
            Err(ReadError::Io(e)) => return Err(e),
            Err(ReadError::Decode(error)) => {
                return Ok(DumpEnd::Error { error, record: reader.count() + 1 });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pc_line_is_what_the_formatted_line_would_be() {
        let mut values = vec![0, 1, 0xF, 0x10, 0x401000, u64::MAX, 1 << 63, 0xFFFF_FFFF];
        values.extend((0..64).map(|bit| 1u64 << bit));
        values.extend((0..64).map(|bit| (1u64 << bit).wrapping_sub(1)));
        for pc in values {
            let mut buf = [0u8; PC_LINE_MAX];
            let len = pc_line(pc, &mut buf);
            let mut expected = Vec::new();
            line(&mut expected, "...", |o| write!(o, "{pc:#x}")).unwrap();
            assert_eq!(&buf[..len], &expected[..], "pc {pc:#x}");
        }
    }
}
