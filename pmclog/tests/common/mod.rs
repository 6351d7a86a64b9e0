//! Helpers shared by the pmclog integration tests: hex parsing, an owned mirror of `Record` (decoded
//! records borrow from the decoder, so streams are compared through owned copies), a sample log
//! with every record type, and runners that decode a log through `Records`, `StreamDecoder` and
//! `LogReader` while checking the invariants every caller relies on.
//!
//! Every test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::io::Read;

use pmclog::{
    Callchain, CallchainFlags, DecodeError, DynLayout, Entry, Initialize, LogReader, MapIn,
    PmcAllocate, PmcAllocateDyn, PmcAttach, PmcDetach, ProcCreate, ProcCsw, ProcExec, ProcExit,
    ProcFork, ProgramCounters, ReadError, Record, Records, Step, StreamDecoder, SysExit, ThrCreate,
    ThrExit, UserData,
};

/// Parses hex digits, ignoring whitespace and `#` comments (to the end of the line):
/// `"18 00 0d ee  # header"` is `[0x18, 0x00, 0x0d, 0xee]`.
pub(crate) fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .lines()
        .flat_map(|line| line.split('#').next().unwrap_or("").bytes())
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    assert!(digits.len() % 2 == 0, "odd number of hex digits in {text:?}");
    digits
        .chunks(2)
        .map(|pair| {
            let pair = std::str::from_utf8(pair).expect("hex digits are ASCII");
            u8::from_str_radix(pair, 16).unwrap_or_else(|_| panic!("bad hex byte {pair:?}"))
        })
        .collect()
}

/// An owned copy of a [`Record`], so records can outlive the decoder that produced them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owned {
    CloseLog,
    DropNotify,
    Initialize {
        version: u32,
        cpu_type: u32,
        tsc_freq: u64,
        time_sec: i64,
        time_nsec: i64,
        cpuid: Vec<u8>,
    },
    PmcAllocate(PmcAllocate),
    PmcAttach {
        pmcid: u32,
        pid: i32,
        path: Vec<u8>,
    },
    PmcDetach(PmcDetach),
    ProcCsw(ProcCsw),
    ProcExec {
        pid: i32,
        pmcid: u32,
        base_addr: u64,
        dyn_addr: u64,
        path: Vec<u8>,
    },
    ProcExit(ProcExit),
    ProcFork(ProcFork),
    SysExit(SysExit),
    UserData(UserData),
    MapIn {
        pid: i32,
        start: u64,
        path: Vec<u8>,
    },
    MapOut(pmclog::MapOut),
    Callchain {
        pid: i32,
        tid: i32,
        pmcid: u32,
        cpuflags: u32,
        pcs: Vec<u64>,
    },
    PmcAllocateDyn {
        pmcid: u32,
        event: u32,
        flags: u32,
        rate: u64,
        name: Vec<u8>,
        layout: DynLayout,
    },
    ThrCreate {
        tid: i32,
        pid: i32,
        flags: u32,
        name: Vec<u8>,
    },
    ThrExit(ThrExit),
    ProcCreate {
        pid: i32,
        flags: u32,
        comm: Vec<u8>,
    },
}

impl Owned {
    /// The borrowed record this owns.
    pub(crate) fn as_record(&self) -> Record<'_> {
        match self {
            Owned::CloseLog => Record::CloseLog,
            Owned::DropNotify => Record::DropNotify,
            Owned::Initialize { version, cpu_type, tsc_freq, time_sec, time_nsec, cpuid } => {
                Record::Initialize(Initialize {
                    version: *version,
                    cpu_type: *cpu_type,
                    tsc_freq: *tsc_freq,
                    time_sec: *time_sec,
                    time_nsec: *time_nsec,
                    cpuid,
                })
            }
            Owned::PmcAllocate(r) => Record::PmcAllocate(*r),
            Owned::PmcAttach { pmcid, pid, path } => {
                Record::PmcAttach(PmcAttach { pmcid: *pmcid, pid: *pid, path })
            }
            Owned::PmcDetach(r) => Record::PmcDetach(*r),
            Owned::ProcCsw(r) => Record::ProcCsw(*r),
            Owned::ProcExec { pid, pmcid, base_addr, dyn_addr, path } => {
                Record::ProcExec(ProcExec {
                    pid: *pid,
                    pmcid: *pmcid,
                    base_addr: *base_addr,
                    dyn_addr: *dyn_addr,
                    path,
                })
            }
            Owned::ProcExit(r) => Record::ProcExit(*r),
            Owned::ProcFork(r) => Record::ProcFork(*r),
            Owned::SysExit(r) => Record::SysExit(*r),
            Owned::UserData(r) => Record::UserData(*r),
            Owned::MapIn { pid, start, path } => {
                Record::MapIn(MapIn { pid: *pid, start: *start, path })
            }
            Owned::MapOut(r) => Record::MapOut(*r),
            Owned::Callchain { pid, tid, pmcid, cpuflags, pcs } => Record::Callchain(Callchain {
                pid: *pid,
                tid: *tid,
                pmcid: *pmcid,
                cpuflags: CallchainFlags(*cpuflags),
                pcs: ProgramCounters::from_words(pcs),
            }),
            Owned::PmcAllocateDyn { pmcid, event, flags, rate, name, layout } => {
                Record::PmcAllocateDyn(PmcAllocateDyn {
                    pmcid: *pmcid,
                    event: *event,
                    flags: *flags,
                    rate: *rate,
                    name,
                    layout: *layout,
                })
            }
            Owned::ThrCreate { tid, pid, flags, name } => {
                Record::ThrCreate(ThrCreate { tid: *tid, pid: *pid, flags: *flags, name })
            }
            Owned::ThrExit(r) => Record::ThrExit(*r),
            Owned::ProcCreate { pid, flags, comm } => {
                Record::ProcCreate(ProcCreate { pid: *pid, flags: *flags, comm })
            }
        }
    }

    /// An owned copy of `record`.
    pub(crate) fn from_record(record: &Record<'_>) -> Owned {
        match *record {
            Record::CloseLog => Owned::CloseLog,
            Record::DropNotify => Owned::DropNotify,
            Record::Initialize(r) => Owned::Initialize {
                version: r.version,
                cpu_type: r.cpu_type,
                tsc_freq: r.tsc_freq,
                time_sec: r.time_sec,
                time_nsec: r.time_nsec,
                cpuid: r.cpuid.to_vec(),
            },
            Record::PmcAllocate(r) => Owned::PmcAllocate(r),
            Record::PmcAttach(r) => {
                Owned::PmcAttach { pmcid: r.pmcid, pid: r.pid, path: r.path.to_vec() }
            }
            Record::PmcDetach(r) => Owned::PmcDetach(r),
            Record::ProcCsw(r) => Owned::ProcCsw(r),
            Record::ProcExec(r) => Owned::ProcExec {
                pid: r.pid,
                pmcid: r.pmcid,
                base_addr: r.base_addr,
                dyn_addr: r.dyn_addr,
                path: r.path.to_vec(),
            },
            Record::ProcExit(r) => Owned::ProcExit(r),
            Record::ProcFork(r) => Owned::ProcFork(r),
            Record::SysExit(r) => Owned::SysExit(r),
            Record::UserData(r) => Owned::UserData(r),
            Record::MapIn(r) => Owned::MapIn { pid: r.pid, start: r.start, path: r.path.to_vec() },
            Record::MapOut(r) => Owned::MapOut(r),
            Record::Callchain(r) => Owned::Callchain {
                pid: r.pid,
                tid: r.tid,
                pmcid: r.pmcid,
                cpuflags: r.cpuflags.0,
                pcs: (0..r.pcs.len()).map(|i| r.pcs.get(i).expect("index below len")).collect(),
            },
            Record::PmcAllocateDyn(r) => Owned::PmcAllocateDyn {
                pmcid: r.pmcid,
                event: r.event,
                flags: r.flags,
                rate: r.rate,
                name: r.name.to_vec(),
                layout: r.layout,
            },
            Record::ThrCreate(r) => {
                Owned::ThrCreate { tid: r.tid, pid: r.pid, flags: r.flags, name: r.name.to_vec() }
            }
            Record::ThrExit(r) => Owned::ThrExit(r),
            Record::ProcCreate(r) => {
                Owned::ProcCreate { pid: r.pid, flags: r.flags, comm: r.comm.to_vec() }
            }
        }
    }

    /// The type code FreeBSD uses for this record (`enum pmclog_type`), written down here
    /// independently of the crate.
    pub(crate) fn type_code(&self) -> u8 {
        match self {
            Owned::CloseLog => 1,
            Owned::DropNotify => 2,
            Owned::Initialize { .. } => 3,
            Owned::PmcAllocate(_) => 5,
            Owned::PmcAttach { .. } => 6,
            Owned::PmcDetach(_) => 7,
            Owned::ProcCsw(_) => 8,
            Owned::ProcExec { .. } => 9,
            Owned::ProcExit(_) => 10,
            Owned::ProcFork(_) => 11,
            Owned::SysExit(_) => 12,
            Owned::UserData(_) => 13,
            Owned::MapIn { .. } => 14,
            Owned::MapOut(_) => 15,
            Owned::Callchain { .. } => 16,
            Owned::PmcAllocateDyn { .. } => 17,
            Owned::ThrCreate { .. } => 18,
            Owned::ThrExit(_) => 19,
            Owned::ProcCreate { .. } => 20,
        }
    }

    /// The record's length on disk, from the table in freebsd-abi.md §3.3 (not from the crate).
    pub(crate) fn expected_len(&self) -> usize {
        let path = |path: &[u8]| (path.len() + 1).div_ceil(4) * 4;
        match self {
            Owned::CloseLog | Owned::DropNotify => 16,
            Owned::Initialize { .. } => 112,
            Owned::PmcAllocate(_) => 40,
            Owned::PmcAttach { path: p, .. } => 24 + path(p),
            Owned::PmcDetach(_) => 24,
            Owned::ProcCsw(_) => 40,
            Owned::ProcExec { path: p, .. } => 40 + path(p),
            Owned::ProcExit(_) => 32,
            Owned::ProcFork(_) | Owned::SysExit(_) | Owned::UserData(_) => 24,
            Owned::MapIn { path: p, .. } => 32 + path(p),
            Owned::MapOut(_) => 40,
            Owned::Callchain { pcs, .. } => 32 + 8 * pcs.len(),
            Owned::PmcAllocateDyn { .. } => 96,
            Owned::ThrCreate { .. } => 52,
            Owned::ThrExit(_) => 24,
            Owned::ProcCreate { .. } => 44,
        }
    }
}

/// An owned copy of an [`Entry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnedEntry {
    pub(crate) offset: u64,
    pub(crate) count: u64,
    pub(crate) tsc: u64,
    pub(crate) raw: Vec<u8>,
    pub(crate) record: Owned,
}

impl OwnedEntry {
    pub(crate) fn new(entry: &Entry<'_>) -> OwnedEntry {
        OwnedEntry {
            offset: entry.offset,
            count: entry.count,
            tsc: entry.tsc,
            raw: entry.raw.to_vec(),
            record: Owned::from_record(&entry.record),
        }
    }
}

/// Encodes one record with the crate's encoder (used to build test logs; the encoder itself is
/// checked against hand-written bytes in `golden.rs`).
pub(crate) fn encode_vec(record: &Record<'_>, tsc: u64) -> Vec<u8> {
    let len = pmclog::encoded_len(record).expect("record is encodable");
    let mut buf = vec![0xA5; len];
    assert_eq!(pmclog::encode(record, tsc, &mut buf), Ok(len));
    buf
}

/// A log of `records`, and the entries a decoder must return for it (offsets and counts computed
/// here from the lengths in freebsd-abi.md §3.3). Entries stop after a CLOSELOG.
pub(crate) fn build_log(records: &[(Owned, u64)]) -> (Vec<u8>, Vec<OwnedEntry>) {
    let mut log = Vec::new();
    let mut entries = Vec::new();
    let mut closed = false;
    for (record, tsc) in records {
        let bytes = encode_vec(&record.as_record(), *tsc);
        assert_eq!(bytes.len(), record.expected_len(), "{record:?}");
        if !closed {
            entries.push(OwnedEntry {
                offset: log.len() as u64,
                count: entries.len() as u64 + 1,
                tsc: *tsc,
                raw: bytes.clone(),
                record: record.clone(),
            });
        }
        closed |= *record == Owned::CloseLog;
        log.extend_from_slice(&bytes);
    }
    (log, entries)
}

/// A path of `len` bytes (no NUL) that is easy to recognise.
pub(crate) fn long_path(len: usize) -> Vec<u8> {
    let mut path = b"/usr/local/lib/".to_vec();
    let mut i = 0u8;
    while path.len() < len {
        path.push(b'a' + i % 26);
        i = i.wrapping_add(1);
    }
    path.truncate(len);
    path
}

/// Every record type (both PMCALLOCATEDYN layouts, a multipart callchain, a callchain without
/// frames, one with the most frames, paths of the longest length), ending with CLOSELOG.
pub(crate) fn sample_records() -> Vec<(Owned, u64)> {
    let mut records = records_without_close();
    records.push((Owned::CloseLog, 0x0000_0000_0020_0000));
    records
}

/// [`sample_records`] without the final CLOSELOG.
pub(crate) fn records_without_close() -> Vec<(Owned, u64)> {
    let deep: Vec<u64> = (0..512u64).map(|i| 0xffff_ffff_8000_0000 + i * 0x11).collect();
    vec![
        (
            Owned::Initialize {
                version: 0x0A00_0000,
                cpu_type: 0x98,
                tsc_freq: 2_400_000_000,
                time_sec: 1_700_000_000,
                time_nsec: 123_456_789,
                cpuid: b"GenuineIntel-6-55".to_vec(),
            },
            0x1000,
        ),
        (
            Owned::PmcAllocate(PmcAllocate {
                pmcid: 0xFFF2_0703,
                event: 0x10000,
                flags: 0x80,
                rate: 100_003,
            }),
            0x1010,
        ),
        (
            Owned::PmcAllocateDyn {
                pmcid: 0x0030_0F00,
                event: 0x20005,
                flags: 0,
                rate: 1000,
                name: b"CLOCK.PROF".to_vec(),
                layout: DynLayout::Kernel,
            },
            0x1020,
        ),
        (
            Owned::PmcAllocateDyn {
                pmcid: 0x0030_0F01,
                event: 0x20006,
                flags: 0x80,
                rate: 0,
                name: b"CLOCK.STAT".to_vec(),
                layout: DynLayout::Documented,
            },
            0x1030,
        ),
        (Owned::PmcAttach { pmcid: 0xFFF3_0703, pid: 1, path: b"/sbin/init".to_vec() }, 0x1040),
        (
            Owned::ProcExec {
                pid: 1234,
                pmcid: 0xFFF3_0703,
                base_addr: 0x8_0100_0000,
                dyn_addr: 0x20_0000,
                path: long_path(1023),
            },
            0x1050,
        ),
        (Owned::MapIn { pid: 1234, start: 0x40_0000, path: b"/bin/sh".to_vec() }, 0x1060),
        (Owned::MapIn { pid: -1, start: 0xffff_ffff_8020_0000, path: long_path(1023) }, 0x1070),
        (Owned::MapIn { pid: 1234, start: 0x80_0000, path: Vec::new() }, 0x1080),
        (
            Owned::Callchain {
                pid: 1234,
                tid: 100_123,
                pmcid: 0xFFF2_0703,
                cpuflags: 0x0002_0001,
                pcs: vec![0x20a3f0, 0x20b104, 0x8_00e3_c2a8],
            },
            0x1090,
        ),
        (Owned::DropNotify, 0x10a0),
        (
            Owned::Callchain {
                pid: 0,
                tid: 100_000,
                pmcid: 0x0030_0F00,
                cpuflags: 0x0003_0000,
                pcs: deep,
            },
            0x0fff, // timestamps are not monotonic across CPUs
        ),
        (
            Owned::Callchain {
                pid: 11,
                tid: 100_001,
                pmcid: 0x300,
                cpuflags: 0x0001_0000,
                pcs: vec![],
            },
            0x10b0,
        ),
        (
            Owned::Callchain {
                pid: 1234,
                tid: 100_123,
                pmcid: 0x300,
                cpuflags: 0x0005_0003,
                pcs: vec![
                    0x0000_0000_0201_0402,
                    0x0003_0000_0001_ffff,
                    0x5,
                    0x20_1000,
                    0x1234_5000,
                    0x20_1010,
                    0x20_20a0,
                ],
            },
            0x10c0,
        ),
        (
            Owned::ProcCsw(ProcCsw {
                value: 0x8000_0000_0000_0001,
                pmcid: 0xFFF3_0703,
                pid: 1234,
                tid: 100_123,
            }),
            0x10d0,
        ),
        (Owned::ProcFork(ProcFork { old_pid: 1234, new_pid: 1235 }), 0x10e0),
        (Owned::ProcCreate { pid: 1235, flags: 0x1000_4002, comm: b"sh".to_vec() }, 0x10f0),
        (
            Owned::ThrCreate {
                tid: 100_124,
                pid: 1235,
                flags: 0x1000_4002,
                name: b"0123456789abcdefghi".to_vec(),
            },
            0x1100,
        ),
        (Owned::UserData(UserData { data: 0xDEAD_BEEF }), 0x1110),
        (Owned::MapOut(pmclog::MapOut { pid: 1234, start: 0x40_0000, end: 0x4a_0000 }), 0x1120),
        (Owned::ThrExit(ThrExit { tid: 100_124 }), 0x1130),
        (Owned::ProcExit(ProcExit { pmcid: 0xFFF3_0703, pid: 1235, value: 1_000_000_007 }), 0x1140),
        (Owned::SysExit(SysExit { pid: 1235 }), 0x1150),
        (Owned::PmcDetach(PmcDetach { pmcid: 0xFFF3_0703, pid: 1 }), u64::MAX),
    ]
}

/// The sample log and the entries it must decode to.
pub(crate) fn sample_log() -> (Vec<u8>, Vec<OwnedEntry>) {
    build_log(&sample_records())
}

/// How a decoder finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// CLOSELOG, or the input ended between records.
    Eof,
    /// The log is malformed or ends inside a record.
    Error(DecodeError),
}

/// Everything a decoder returned for a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decoded {
    pub(crate) entries: Vec<OwnedEntry>,
    pub(crate) end: End,
}

/// Decodes `log` with [`Records`], checking that it is fused and keeps its counters right.
pub(crate) fn via_records(log: &[u8]) -> Decoded {
    let mut records = Records::new(log);
    let mut entries = Vec::new();
    let mut end = End::Eof;
    while let Some(item) = records.next() {
        match item {
            Ok(entry) => {
                assert_eq!(records.records_yielded(), entry.count);
                assert_eq!(records.offset(), entry.end_offset());
                entries.push(OwnedEntry::new(&entry));
            }
            Err(e) => {
                end = End::Error(e);
                break;
            }
        }
    }
    assert!(records.next().is_none(), "Records must yield nothing after its end");
    assert!(records.next().is_none(), "Records must yield nothing after its end");
    Decoded { entries, end }
}

/// Checks that feeding an empty slice changes nothing and reports the current state.
pub(crate) fn check_empty_feed(decoder: &mut StreamDecoder, end: Option<End>) {
    let before = (decoder.offset(), decoder.count(), decoder.buffered());
    let (used, step) = decoder.next(&[]);
    assert_eq!(used, 0, "an empty feed consumes nothing");
    match (end, step) {
        (None, Step::NeedData) | (Some(End::Eof), Step::Eof) => {}
        (Some(End::Error(e)), Step::Error(f)) if e == f => {}
        (end, step) => panic!("empty feed in state {end:?} returned {step:?}"),
    }
    assert_eq!((decoder.offset(), decoder.count(), decoder.buffered()), before);
}

/// Decodes a log given as `chunks` with a [`StreamDecoder`], then calls `end_of_input`.
///
/// Checks on every call: `NeedData` consumes its whole input and buffers it, a record advances the
/// offset and count, an empty feed changes nothing, and once the decoder reports `Eof` or an
/// error it says the same on every later call (with valid data too) and consumes nothing.
pub(crate) fn via_stream<'c>(chunks: impl IntoIterator<Item = &'c [u8]>) -> Decoded {
    let mut decoder = StreamDecoder::new();
    let mut entries = Vec::new();
    let mut end: Option<End> = None;
    for chunk in chunks {
        check_empty_feed(&mut decoder, end);
        let mut rest = chunk;
        loop {
            let before = (decoder.offset(), decoder.count(), decoder.buffered());
            let (used, step) = decoder.next(rest);
            assert!(used <= rest.len(), "consumed {used} of {} bytes", rest.len());
            match step {
                Step::Record(entry) => {
                    assert_eq!(end, None, "a record after the end");
                    assert!(used > 0, "a record must consume input");
                    assert_eq!(entry.offset, before.0);
                    assert_eq!(entry.count, before.1 + 1);
                    let entry = OwnedEntry::new(&entry);
                    assert_eq!(decoder.offset(), entry.offset + entry.raw.len() as u64);
                    assert_eq!(decoder.count(), entry.count);
                    assert_eq!(decoder.buffered(), 0);
                    if entry.record == Owned::CloseLog {
                        end = Some(End::Eof);
                    }
                    entries.push(entry);
                    rest = &rest[used..];
                }
                Step::NeedData => {
                    assert_eq!(end, None, "NeedData after the end");
                    assert_eq!(used, rest.len(), "NeedData must consume the whole input");
                    assert_eq!((decoder.offset(), decoder.count()), (before.0, before.1));
                    assert_eq!(decoder.buffered(), before.2 + used);
                    break;
                }
                Step::Eof => {
                    assert_eq!(used, 0, "Eof consumes nothing");
                    assert!(matches!(end, None | Some(End::Eof)), "Eof after {end:?}");
                    end = Some(End::Eof);
                    break;
                }
                Step::Error(e) => {
                    match end {
                        None => end = Some(End::Error(e)),
                        Some(End::Error(f)) => {
                            assert_eq!(e, f, "the error changed");
                            assert_eq!(used, 0, "a repeated error consumes nothing");
                        }
                        Some(End::Eof) => panic!("error {e:?} after Eof"),
                    }
                    break;
                }
            }
        }
    }
    let last = match (end, decoder.end_of_input()) {
        (None | Some(End::Eof), Step::Eof) => End::Eof,
        (None, Step::Error(e)) => End::Error(e),
        (Some(End::Error(e)), Step::Error(f)) if e == f => End::Error(e),
        (end, step) => panic!("end_of_input in state {end:?} returned {step:?}"),
    };
    // The final state is sticky, for end_of_input, empty feeds and valid data alike.
    let again = match decoder.end_of_input() {
        Step::Eof => End::Eof,
        Step::Error(e) => End::Error(e),
        step => panic!("second end_of_input returned {step:?}"),
    };
    assert_eq!(again, last);
    check_empty_feed(&mut decoder, Some(last));
    let valid = encode_vec(&Record::DropNotify, 1);
    let (used, step) = decoder.next(&valid);
    assert_eq!(used, 0);
    match (last, step) {
        (End::Eof, Step::Eof) => {}
        (End::Error(e), Step::Error(f)) if e == f => {}
        (last, step) => panic!("after {last:?} valid data gave {step:?}"),
    }
    Decoded { entries, end: last }
}

/// [`via_stream`] over `log` cut into pieces of `size` bytes.
pub(crate) fn via_stream_chunked(log: &[u8], size: usize) -> Decoded {
    via_stream(log.chunks(size.max(1)))
}

/// Decodes a log read by a [`LogReader`]; any I/O error fails the test.
pub(crate) fn via_reader<R: Read>(input: R) -> Decoded {
    let mut reader = LogReader::new(input);
    let mut entries = Vec::new();
    let end = loop {
        match reader.next_entry() {
            Ok(Some(entry)) => {
                let entry = OwnedEntry::new(&entry);
                assert_eq!(reader.count(), entry.count);
                assert_eq!(reader.offset(), entry.offset + entry.raw.len() as u64);
                entries.push(entry);
            }
            Ok(None) => break End::Eof,
            Err(ReadError::Decode(e)) => break End::Error(e),
            Err(ReadError::Io(e)) => panic!("unexpected I/O error: {e}"),
        }
    };
    for _ in 0..2 {
        match (&end, reader.next_entry()) {
            (End::Eof, Ok(None)) => {}
            (End::Error(first), Err(ReadError::Decode(again))) if *first == again => {}
            (end, later) => panic!("LogReader must stay at its end {end:?}, then gave {later:?}"),
        }
    }
    Decoded { entries, end }
}

/// A small deterministic random number generator (xorshift64*), so randomized loops need no
/// crates beyond proptest and always run the same cases.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub(crate) fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }

    /// Cuts `len` bytes into random pieces of 0 to `max` bytes (empty pieces included).
    pub(crate) fn chunk_sizes(&mut self, len: usize, max: usize) -> Vec<usize> {
        let mut sizes = Vec::new();
        let mut left = len;
        while left > 0 {
            let size = self.below(max + 1).min(left);
            sizes.push(size);
            left -= size;
        }
        sizes
    }
}

/// Splits `log` into consecutive pieces of the given sizes (the last piece takes what is left).
pub(crate) fn split_by<'a>(log: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    let mut rest = log;
    for &size in sizes {
        let (piece, tail) = rest.split_at(size.min(rest.len()));
        pieces.push(piece);
        rest = tail;
    }
    if !rest.is_empty() {
        pieces.push(rest);
    }
    pieces
}
