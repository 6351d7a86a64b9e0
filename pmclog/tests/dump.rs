//! The `pmcstat -R` text dump, byte for byte as FreeBSD prints it (usr.sbin/pmcstat/pmcstat_log.c,
//! `PMCSTAT_PRINT_ENTRY`: `"%-9s"` tag, one space, the fields, a newline). The expected text is
//! written out literally.

mod common;

use std::io::{self, Write};

use common::encode_vec;
use pmclog::{
    Callchain, CallchainFlags, DecodeError, DumpEnd, DynLayout, EventNames, Initialize, MapIn,
    MapOut, PmcAllocate, PmcAllocateDyn, PmcAttach, PmcDetach, ProcCreate, ProcCsw, ProcExec,
    ProcExit, ProcFork, ProgramCounters, Record, Records, SysExit, TextDump, ThrCreate, ThrExit,
    UserData,
};

/// Encodes `records` into a log.
fn log_of(records: &[Record<'_>]) -> Vec<u8> {
    let mut log = Vec::new();
    for (i, record) in records.iter().enumerate() {
        log.extend(encode_vec(record, 0x1000 + i as u64));
    }
    log
}

/// Dumps `log` with `dump_bytes` and with `dump_reader`, checks that both print the same and end
/// the same way, and returns the text and the end.
fn dump_log(log: &[u8]) -> (String, DumpEnd) {
    let mut from_bytes = Vec::new();
    let end = pmclog::dump_bytes(log, &mut from_bytes).expect("writing to a Vec");
    let mut from_reader = Vec::new();
    let reader_end = pmclog::dump_reader(log, &mut from_reader).expect("writing to a Vec");
    assert_eq!(from_reader, from_bytes, "dump_reader and dump_bytes print differently");
    assert_eq!(reader_end, end, "dump_reader and dump_bytes end differently");
    (String::from_utf8(from_bytes).expect("the dump is text"), end)
}

/// The dump of a log of `records`, which must end cleanly: at its CLOSELOG, or without one
/// after its last record.
fn dump(records: &[Record<'_>]) -> String {
    let log = log_of(records);
    let (text, end) = dump_log(&log);
    let closed = records.iter().any(|r| matches!(r, Record::CloseLog));
    if closed {
        assert_eq!(end, DumpEnd::Finished);
    } else {
        let records = records.len() as u64;
        assert_eq!(end, DumpEnd::Unclosed { offset: log.len() as u64, records });
    }
    assert_eq!(end.error_message(), None);
    text
}

const PMCID: u32 = 0xFFF3_0703;

#[test]
fn callchain() {
    let user = [0x20a3f0, 0x20b104, 0x8_00e3_c2a8];
    let kernel = [0, 0xffff_ffff_80bc_1234];
    let multipart = [0x0101, 0x20_1010];
    let records = [
        Record::Callchain(Callchain {
            pid: 1234,
            tid: 100_123,
            pmcid: 0xFFF2_0703,
            cpuflags: CallchainFlags::new(2, 1),
            pcs: ProgramCounters::from_words(&user),
        }),
        Record::Callchain(Callchain {
            pid: 11,
            tid: 100_001,
            pmcid: 0x300,
            cpuflags: CallchainFlags::new(3, 0),
            pcs: ProgramCounters::from_words(&kernel),
        }),
        // A multipart (IBS) sample: FreeBSD's printer knows nothing of parts and prints every word.
        Record::Callchain(Callchain {
            pid: 1234,
            tid: 100_123,
            pmcid: 0x300,
            cpuflags: CallchainFlags::new(5, 3),
            pcs: ProgramCounters::from_words(&multipart),
        }),
        Record::Callchain(Callchain {
            pid: -1,
            tid: 0,
            pmcid: 0,
            cpuflags: CallchainFlags::new(0, 0),
            pcs: ProgramCounters::from_words(&[]),
        }),
    ];
    assert_eq!(
        dump(&records),
        "callchain 1234 0xfff20703 2 3 u\n\
         ...       0x20a3f0\n\
         ...       0x20b104\n\
         ...       0x800e3c2a8\n\
         callchain 11 0x300 3 2 s\n\
         ...       0x0\n\
         ...       0xffffffff80bc1234\n\
         callchain 1234 0x300 5 2 u\n\
         ...       0x101\n\
         ...       0x201010\n\
         callchain -1 0x0 0 0 s\n"
    );
}

#[test]
fn drop_notify() {
    // "drop" padded to 9 columns, then the separating space, then no fields.
    assert_eq!(dump(&[Record::DropNotify]), "drop      \n");
    assert_eq!(dump(&[Record::DropNotify]).len(), 11);
}

#[test]
fn initlog() {
    let init = |cpu_type| {
        Record::Initialize(Initialize {
            version: 0x0A00_0000,
            cpu_type,
            tsc_freq: 2_400_000_000,
            time_sec: 1_700_000_000,
            time_nsec: 5,
            cpuid: b"GenuineIntel-6-55",
        })
    };
    assert_eq!(dump(&[init(0x98)]), "initlog   0xa000000 \"INTEL_SKYLAKE\"\n");
    assert_eq!(dump(&[init(0x01)]), "initlog   0xa000000 \"AMD_K8\"\n");
    assert_eq!(dump(&[init(0x400)]), "initlog   0xa000000 \"GENERIC\"\n");
    // An unknown CPU type: FreeBSD's printf of a NULL string.
    assert_eq!(dump(&[init(0x02)]), "initlog   0xa000000 \"(null)\"\n");
}

#[test]
fn map_in_and_map_out() {
    let records = [
        Record::MapIn(MapIn { pid: 1234, start: 0x40_0000, path: b"/bin/sh" }),
        Record::MapIn(MapIn { pid: -1, start: 0, path: b"" }),
        Record::MapOut(MapOut { pid: 1234, start: 0x40_0000, end: 0x4a_0000 }),
        Record::MapOut(MapOut { pid: 0, start: 0, end: u64::MAX }),
    ];
    assert_eq!(
        dump(&records),
        "map-in    1234 0x400000 \"/bin/sh\"\n\
         map-in    -1 0x0 \"\"\n\
         map-out   1234 0x400000 0x4a0000\n\
         map-out   0 0x0 0xffffffffffffffff\n"
    );
}

#[test]
fn allocate_names_static_events() {
    let allocate =
        |pmcid, event, flags| Record::PmcAllocate(PmcAllocate { pmcid, event, flags, rate: 65536 });
    let records = [
        allocate(0xFFF2_0703, 0x10000, 0x80),
        allocate(0, 0x1000, 0),
        allocate(0x0002_0200, 0x10001, 0x2),
        allocate(0x0002_0200, 0x2080, 0x4),
        allocate(0x0002_0200, 0x14702, 0x8),
        allocate(1, 0x12345, 0),
        // PMC_F_EV_PMU: the event is an index into a PMU table, which StaticEventNames cannot name.
        allocate(2, 5, 0x200),
    ];
    assert_eq!(
        dump(&records),
        "allocate  0xfff20703 \"INSTR_RETIRED_ANY\" 0x80\n\
         allocate  0x0 \"TSC\" 0x0\n\
         allocate  0x20200 \"CPU_CLK_UNHALTED_CORE\" 0x2\n\
         allocate  0x20200 \"FP_DISPATCHED_FPU_OPS\" 0x4\n\
         allocate  0x20200 \"ENERGY_DRAM\" 0x8\n\
         allocate  0x1 \"(unknown event 0x12345)\" 0x0\n\
         allocate  0x2 \"(unknown event 0x5)\" 0x200\n"
    );
}

#[test]
fn allocatedyn_in_both_layouts() {
    let records = [
        Record::PmcAllocateDyn(PmcAllocateDyn {
            pmcid: 0x0030_0F00,
            event: 0x20005,
            flags: 0,
            rate: 1000,
            name: b"CLOCK.PROF",
            layout: DynLayout::Kernel,
        }),
        Record::PmcAllocateDyn(PmcAllocateDyn {
            pmcid: 0x0030_0F01,
            event: 0x20006,
            flags: 0x80,
            rate: 0,
            name: b"CLOCK.STAT",
            layout: DynLayout::Documented,
        }),
    ];
    assert_eq!(
        dump(&records),
        "allocatedyn 0x300f00 \"CLOCK.PROF\" 0x0\n\
         allocatedyn 0x300f01 \"CLOCK.STAT\" 0x80\n"
    );
}

#[test]
fn attach_and_detach() {
    let records = [
        Record::PmcAttach(PmcAttach { pmcid: PMCID, pid: 1, path: b"/sbin/init" }),
        Record::PmcDetach(PmcDetach { pmcid: PMCID, pid: 1 }),
        Record::PmcDetach(PmcDetach { pmcid: 0, pid: -5 }),
    ];
    assert_eq!(
        dump(&records),
        "attach    0xfff30703 1 \"/sbin/init\"\n\
         detach    0xfff30703 1\n\
         detach    0x0 -5\n"
    );
}

#[test]
fn cswval_and_exitval_print_values_as_signed() {
    let records = [
        Record::ProcCsw(ProcCsw { value: 42, pmcid: PMCID, pid: 1234, tid: 100_123 }),
        Record::ProcCsw(ProcCsw {
            value: 0x8000_0000_0000_0001,
            pmcid: PMCID,
            pid: 1234,
            tid: 100_123,
        }),
        Record::ProcExit(ProcExit { pmcid: PMCID, pid: 1235, value: 1_000_000_007 }),
        Record::ProcExit(ProcExit { pmcid: PMCID, pid: 1235, value: u64::MAX }),
        Record::ProcExit(ProcExit { pmcid: PMCID, pid: 1235, value: i64::MAX as u64 }),
    ];
    assert_eq!(
        dump(&records),
        "cswval    0xfff30703 1234 42\n\
         cswval    0xfff30703 1234 -9223372036854775807\n\
         exitval   0xfff30703 1235 1000000007\n\
         exitval   0xfff30703 1235 -1\n\
         exitval   0xfff30703 1235 9223372036854775807\n"
    );
}

#[test]
fn create_exec_fork_exit() {
    let records = [
        Record::ProcCreate(ProcCreate { pid: 1235, flags: 0x1000_4002, comm: b"sh" }),
        Record::ProcCreate(ProcCreate { pid: 7, flags: 0, comm: b"" }),
        Record::ProcExec(ProcExec {
            pid: 1234,
            pmcid: PMCID,
            base_addr: 0x8_0100_0000,
            dyn_addr: 0x20_0000,
            path: b"/usr/bin/env",
        }),
        Record::ProcExec(ProcExec { pid: 1, pmcid: 0, base_addr: 0, dyn_addr: 0, path: b"/a" }),
        Record::ProcFork(ProcFork { old_pid: 1234, new_pid: 1235 }),
        Record::SysExit(SysExit { pid: 4321 }),
    ];
    assert_eq!(
        dump(&records),
        "create    1235 10004002 \"sh\"\n\
         create    7 0 \"\"\n\
         exec      0xfff30703 1234 0x801000000 \"/usr/bin/env\"\n\
         exec      0x0 1 0x0 \"/a\"\n\
         fork      1234 1235\n\
         exit      4321\n"
    );
}

#[test]
fn userdata() {
    let records =
        [Record::UserData(UserData { data: 0xDEAD_BEEF }), Record::UserData(UserData { data: 0 })];
    assert_eq!(dump(&records), "userdata  0xdeadbeef\nuserdata  0x0\n");
}

#[test]
fn thread_records() {
    let records = [
        Record::ThrCreate(ThrCreate {
            tid: 100_124,
            pid: 1235,
            flags: 0x1000_4002,
            name: b"0123456789abcdefghi",
        }),
        Record::ThrCreate(ThrCreate { tid: 1, pid: 2, flags: 0xabc, name: b"" }),
        Record::ThrExit(ThrExit { tid: 100_124 }),
    ];
    assert_eq!(
        dump(&records),
        "thr-create 100124 1235 10004002 \"0123456789abcdefghi\"\n\
         thr-create 1 2 abc \"\"\n\
         thr-exit  100124\n"
    );
}

#[test]
fn closelog_prints_nothing_and_nothing_after_it_is_printed() {
    let records = [
        Record::UserData(UserData { data: 1 }),
        Record::CloseLog,
        Record::UserData(UserData { data: 2 }),
    ];
    assert_eq!(dump(&records), "userdata  0x1\n");
    // Even garbage after CLOSELOG.
    let mut log = log_of(&records[..2]);
    log.extend_from_slice(&[0xFF; 10]);
    assert_eq!(dump_log(&log), ("userdata  0x1\n".to_string(), DumpEnd::Finished));
    assert_eq!(dump(&[Record::CloseLog]), "");
}

/// A log with every record type, and its dump written out by hand.
fn every_type() -> (Vec<u8>, &'static str) {
    let (log, _) = common::build_log(&dump_records());
    let text = "\
initlog   0xa000000 \"INTEL_SKYLAKE\"
allocate  0xfff20703 \"INSTR_RETIRED_ANY\" 0x80
allocatedyn 0x300f00 \"CLOCK.PROF\" 0x0
attach    0xfff30703 1 \"/sbin/init\"
exec      0xfff30703 1234 0x801000000 \"/usr/bin/env\"
map-in    1234 0x400000 \"/bin/sh\"
callchain 1234 0xfff20703 2 2 u
...       0x20a3f0
...       0x20b104
drop     \x20
cswval    0xfff30703 1234 99
fork      1234 1235
create    1235 10004002 \"sh\"
thr-create 100124 1235 10004002 \"worker\"
userdata  0xdeadbeef
map-out   1234 0x400000 0x4a0000
thr-exit  100124
exitval   0xfff30703 1235 1000000007
exit      1235
detach    0xfff30703 1
";
    (log, text)
}

fn dump_records() -> Vec<(common::Owned, u64)> {
    use common::Owned;
    vec![
        (
            Owned::Initialize {
                version: 0x0A00_0000,
                cpu_type: 0x98,
                tsc_freq: 2_400_000_000,
                time_sec: 1_700_000_000,
                time_nsec: 0,
                cpuid: b"GenuineIntel-6-55".to_vec(),
            },
            1,
        ),
        (
            Owned::PmcAllocate(PmcAllocate {
                pmcid: 0xFFF2_0703,
                event: 0x10000,
                flags: 0x80,
                rate: 100_000,
            }),
            2,
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
            3,
        ),
        (Owned::PmcAttach { pmcid: PMCID, pid: 1, path: b"/sbin/init".to_vec() }, 4),
        (
            Owned::ProcExec {
                pid: 1234,
                pmcid: PMCID,
                base_addr: 0x8_0100_0000,
                dyn_addr: 0x20_0000,
                path: b"/usr/bin/env".to_vec(),
            },
            5,
        ),
        (Owned::MapIn { pid: 1234, start: 0x40_0000, path: b"/bin/sh".to_vec() }, 6),
        (
            Owned::Callchain {
                pid: 1234,
                tid: 100_123,
                pmcid: 0xFFF2_0703,
                cpuflags: 0x0002_0001,
                pcs: vec![0x20a3f0, 0x20b104],
            },
            7,
        ),
        (Owned::DropNotify, 8),
        (Owned::ProcCsw(ProcCsw { value: 99, pmcid: PMCID, pid: 1234, tid: 100_123 }), 9),
        (Owned::ProcFork(ProcFork { old_pid: 1234, new_pid: 1235 }), 10),
        (Owned::ProcCreate { pid: 1235, flags: 0x1000_4002, comm: b"sh".to_vec() }, 11),
        (
            Owned::ThrCreate {
                tid: 100_124,
                pid: 1235,
                flags: 0x1000_4002,
                name: b"worker".to_vec(),
            },
            12,
        ),
        (Owned::UserData(UserData { data: 0xDEAD_BEEF }), 13),
        (Owned::MapOut(MapOut { pid: 1234, start: 0x40_0000, end: 0x4a_0000 }), 14),
        (Owned::ThrExit(ThrExit { tid: 100_124 }), 15),
        (Owned::ProcExit(ProcExit { pmcid: PMCID, pid: 1235, value: 1_000_000_007 }), 16),
        (Owned::SysExit(SysExit { pid: 1235 }), 17),
        (Owned::PmcDetach(PmcDetach { pmcid: PMCID, pid: 1 }), 18),
        (Owned::CloseLog, 19),
    ]
}

#[test]
fn a_log_with_every_record_type() {
    let (log, text) = every_type();
    let mut codes: Vec<u8> = dump_records().iter().map(|(r, _)| r.type_code()).collect();
    codes.sort();
    codes.dedup();
    assert_eq!(codes, (1..=20).filter(|&c| c != 4).collect::<Vec<u8>>());
    assert_eq!(dump_log(&log), (text.to_string(), DumpEnd::Finished));
}

#[test]
fn text_dump_prints_one_entry_at_a_time() {
    let (log, text) = every_type();
    let mut dump = TextDump::new();
    let mut out = Vec::new();
    for entry in Records::new(&log) {
        dump.write_entry(&mut out, &entry.unwrap()).unwrap();
    }
    assert_eq!(String::from_utf8(out).unwrap(), text);
}

#[test]
fn a_corrupt_log_prints_everything_before_the_bad_record() {
    let (log, text) = every_type();
    // Cut after the fourth record (the PROCEXEC ends at offset 112 + 40 + 96 + 36 + 56 = 0x154)
    // and put a bad header there.
    let cut = 112 + 40 + 96 + 36 + 56;
    let mut corrupt = log[..cut].to_vec();
    corrupt.extend_from_slice(&[0x10, 0x00, 0x01, 0xEF]);
    corrupt.extend_from_slice(&log[cut + 4..]);
    let (printed, end) = dump_log(&corrupt);
    let before: String = text.lines().take(5).map(|line| format!("{line}\n")).collect();
    assert_eq!(printed, before);
    let error = DecodeError::BadMagic { offset: 0x154, found: 0xEF };
    assert_eq!(end, DumpEnd::Error { error, record: 6 });
    let message = end.error_message().expect("an error message");
    let prefix = "ERROR: event parsing failed (record 6, offset 0x154): ";
    assert!(message.starts_with(prefix), "{message}");
    assert_eq!(&message[prefix.len()..], error.to_string());

    // The first record bad.
    let (printed, end) = dump_log(&[0; 16]);
    assert_eq!(printed, "");
    assert_eq!(
        end,
        DumpEnd::Error { error: DecodeError::BadMagic { offset: 0, found: 0 }, record: 1 }
    );
    assert!(
        end.error_message()
            .unwrap()
            .starts_with("ERROR: event parsing failed (record 1, offset 0x0): ")
    );
}

#[test]
fn a_log_that_ends_inside_a_record_reports_the_truncation() {
    let (log, text) = every_type();
    // The first two records and 10 bytes of the third (PMCALLOCATEDYN at 0x98).
    let (printed, end) = dump_log(&log[..112 + 40 + 10]);
    let before: String = text.lines().take(2).map(|line| format!("{line}\n")).collect();
    assert_eq!(printed, before);
    let error = DecodeError::Truncated { offset: 0x98, have: 10, need: 96 };
    assert_eq!(end, DumpEnd::Error { error, record: 3 });
    assert!(
        end.error_message()
            .unwrap()
            .starts_with("ERROR: event parsing failed (record 3, offset 0x98): ")
    );
    // Ending between records is not an error, but the log was not closed: the end says where
    // its last whole record ends, and the warning names that offset.
    let (printed, end) = dump_log(&log[..112 + 40]);
    assert_eq!(printed, before);
    assert_eq!(end, DumpEnd::Unclosed { offset: 112 + 40, records: 2 });
    assert_eq!(end.error_message(), None);
    let warning = end.warning().unwrap();
    assert!(warning.contains("no CLOSELOG") && warning.contains("byte offset 0x98"), "{warning}");
    assert_eq!(DumpEnd::Finished.warning(), None);
}

#[test]
fn pmu_events_are_named_by_the_callers_table_for_the_logs_cpuid() {
    struct Table;
    impl EventNames for Table {
        fn pmu_event(&self, cpuid: &[u8], index: u32) -> Option<&str> {
            match (cpuid, index) {
                (b"GenuineIntel-6-55", 7) => Some("BR_INST_RETIRED.ALL_BRANCHES"),
                _ => None,
            }
        }
    }
    let init = Record::Initialize(Initialize {
        version: 0x0A00_0000,
        cpu_type: 0x99,
        tsc_freq: 0,
        time_sec: 0,
        time_nsec: 0,
        cpuid: b"GenuineIntel-6-55",
    });
    let pmu = Record::PmcAllocate(PmcAllocate { pmcid: 0x20700, event: 7, flags: 0x280, rate: 0 });
    let other =
        Record::PmcAllocate(PmcAllocate { pmcid: 0x20701, event: 8, flags: 0x200, rate: 0 });
    let stat = Record::PmcAllocate(PmcAllocate { pmcid: 0x600, event: 0x10000, flags: 0, rate: 0 });
    let print = |records: &[Record<'_>]| {
        let log = log_of(records);
        let mut dump = TextDump::with_names(Table);
        let mut out = Vec::new();
        for entry in Records::new(&log) {
            dump.write_entry(&mut out, &entry.unwrap()).unwrap();
        }
        String::from_utf8(out).unwrap()
    };
    assert_eq!(
        print(&[init, pmu, other, stat]),
        "initlog   0xa000000 \"INTEL_SKYLAKE_XEON\"\n\
         allocate  0x20700 \"BR_INST_RETIRED.ALL_BRANCHES\" 0x280\n\
         allocate  0x20701 \"(unknown event 0x8)\" 0x200\n\
         allocate  0x600 \"INSTR_RETIRED_ANY\" 0x0\n"
    );
    // Without an INITIALIZE record the table has no cpuid to go by.
    assert_eq!(print(&[pmu]), "allocate  0x20700 \"(unknown event 0x7)\" 0x280\n");
}

#[test]
fn write_errors_are_returned() {
    struct Full;
    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::new(io::ErrorKind::StorageFull, "full"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let (log, _) = every_type();
    let error = pmclog::dump_bytes(&log, &mut Full).expect_err("the writer fails");
    assert_eq!(error.kind(), io::ErrorKind::StorageFull);
    let error = pmclog::dump_reader(&log[..], &mut Full).expect_err("the writer fails");
    assert_eq!(error.kind(), io::ErrorKind::StorageFull);
}

#[test]
fn dump_reader_returns_read_errors() {
    struct Broken;
    impl io::Read for Broken {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::Error::other("unplugged"))
        }
    }
    let error = pmclog::dump_reader(Broken, &mut Vec::new()).expect_err("the reader fails");
    assert_eq!(error.to_string(), "unplugged");
}

/// A file in the temp directory, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(tag: &str, contents: &[u8]) -> TempFile {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!("pmclog-dump-test-{}-{tag}-{nanos}.pmclog", std::process::id());
        let file = TempFile(std::env::temp_dir().join(name));
        std::fs::write(&file.0, contents).expect("write the temp file");
        file
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn dump_reader_over_a_file() {
    let (log, text) = every_type();
    let file = TempFile::new("reader", &log);
    let mut out = Vec::new();
    let end = pmclog::dump_reader(std::fs::File::open(&file.0).unwrap(), &mut out).unwrap();
    assert_eq!(end, DumpEnd::Finished);
    assert_eq!(String::from_utf8(out).unwrap(), text);
}

/// Runs `cargo run --example dump -- FILE` with the cargo that runs this test.
fn run_example(file: &TempFile) -> std::process::Output {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    std::process::Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--manifest-path", manifest, "--example", "dump", "--"])
        .arg(&file.0)
        .output()
        .expect("run cargo")
}

#[test]
fn the_dump_example_prints_what_dump_bytes_prints() {
    let (log, text) = every_type();
    let file = TempFile::new("example", &log);
    let output = run_example(&file);
    assert!(output.status.success(), "{output:?}");
    let mut expected = Vec::new();
    pmclog::dump_bytes(&log, &mut expected).unwrap();
    assert_eq!(output.stdout, expected);
    assert_eq!(String::from_utf8(output.stdout).unwrap(), text);

    // A corrupt log: what comes before the bad record, then pmcstat's message, and a data error.
    let mut corrupt = log[..112 + 40].to_vec();
    corrupt.extend_from_slice(&[0x10, 0x00, 0x15, 0xEE]);
    corrupt.resize(112 + 40 + 16, 0);
    let file = TempFile::new("corrupt", &corrupt);
    let output = run_example(&file);
    assert_eq!(output.status.code(), Some(65), "{output:?}"); // EX_DATAERR
    let before: String = text.lines().take(2).map(|line| format!("{line}\n")).collect();
    assert_eq!(String::from_utf8(output.stdout).unwrap(), before);
    let error = DecodeError::UnknownType { offset: 0x98, code: 21 };
    let message = DumpEnd::Error { error, record: 3 }.error_message().unwrap();
    assert!(message.starts_with("ERROR: event parsing failed (record 3, offset 0x98): "));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.ends_with(&format!("dump: {message}\n")), "{stderr:?}");
}
