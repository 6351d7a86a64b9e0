//! The pmclog(3) C API: `struct pmclog_ev`'s layout and `pmclog_open`/`feed`/`read`/`close`, fed
//! from memory, from files and from pipes. Run with `cargo test -p pmclog --features capi`.
#![cfg(feature = "capi")]

use core::ffi::{CStr, c_char, c_int, c_void};
use core::marker::PhantomData;
use core::mem::{offset_of, size_of};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

mod common;

use pmclog::capi::*;
use pmclog::names::PMC_F_EV_PMU;
use pmclog::{
    Callchain, CallchainFlags, DynLayout, Initialize, MapIn, MapOut, PmcAllocate, PmcAllocateDyn,
    PmcAttach, PmcDetach, ProcCreate, ProcCsw, ProcExec, ProcExit, ProcFork, ProgramCounters,
    Record, SysExit, ThrCreate, ThrExit, UserData,
};

// ---------------------------------------------------------------------------------------------
// Helpers.

/// A parser that is closed when dropped; `'a` is the life of the bytes fed to it.
struct Parser<'a> {
    cookie: *mut c_void,
    fed: PhantomData<&'a [u8]>,
}

impl<'a> Parser<'a> {
    fn memory() -> Self {
        Self::open(PMCLOG_FD_NONE)
    }

    fn open(fd: c_int) -> Self {
        // SAFETY: any fd may be given; the tests keep their descriptors open while they read.
        let cookie = unsafe { pmclog_open(fd) };
        assert!(!cookie.is_null());
        Parser { cookie, fed: PhantomData }
    }

    /// Feeds `data`, which outlives the parser, so it stays valid as long as pmclog(3) needs.
    fn feed(&mut self, data: &'a [u8]) -> c_int {
        let len = c_int::try_from(data.len()).unwrap();
        // SAFETY: a live parser; `data` is `len` readable bytes that outlive it. The parser only
        // reads them.
        unsafe { pmclog_feed(self.cookie, data.as_ptr().cast_mut().cast(), len) }
    }

    fn read(&mut self, ev: &mut pmclog_ev) -> c_int {
        // SAFETY: a live parser and a valid event.
        unsafe { pmclog_read(self.cookie, ev) }
    }
}

impl Drop for Parser<'_> {
    fn drop(&mut self) {
        // SAFETY: opened by `Parser::open`, closed only here.
        unsafe { pmclog_close(self.cookie) }
    }
}

fn new_ev() -> Box<pmclog_ev> {
    Box::default()
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn clear_errno() {
    #[cfg(any(target_os = "linux", target_os = "dragonfly"))]
    use libc::__errno_location as errno_location;
    #[cfg(any(target_os = "freebsd", target_vendor = "apple"))]
    use libc::__error as errno_location;
    // SAFETY: the calling thread's errno is always writable.
    unsafe { *errno_location() = 0 };
}

/// The records encoded one after the other, each with its TSC.
fn encode_log(records: &[(Record<'_>, u64)]) -> Vec<u8> {
    records.iter().flat_map(|(record, tsc)| common::encode_vec(record, *tsc)).collect()
}

/// The bytes of a C string field up to its NUL, which must be there.
fn c_str(field: &[c_char]) -> Vec<u8> {
    let bytes: Vec<u8> = field.iter().map(|&c| c as u8).collect();
    CStr::from_bytes_until_nul(&bytes).expect("field is NUL-terminated").to_bytes().to_vec()
}

/// A record's union member, read according to `pl_type`.
#[derive(Debug, Clone, PartialEq)]
enum Ev {
    CloseLog,
    DropNotify,
    Initialize { version: u32, arch: u32, tsc_freq: u64, sec: i64, nsec: i64, cpuid: Vec<u8> },
    PmcAllocate { name: Vec<u8>, rate: u64, event: u32, flags: u32, pmcid: u32 },
    PmcAllocateDyn { name: Vec<u8>, event: u32, flags: u32, pmcid: u32 },
    PmcAttach { pmcid: u32, pid: i32, path: Vec<u8> },
    PmcDetach { pmcid: u32, pid: i32 },
    ProcCsw { pid: i32, tid: i32, pmcid: u32, value: u64 },
    ProcCreate { pid: i32, flags: u32, comm: Vec<u8> },
    ProcExec { pid: i32, pmcid: u32, base: u64, dynamic: u64, path: Vec<u8> },
    ProcExit { pid: u32, pmcid: u32, value: u64 },
    ProcFork { old: i32, new: i32 },
    SysExit { pid: i32 },
    UserData { data: u32 },
    MapIn { pid: i32, start: u64, path: Vec<u8> },
    MapOut { pid: i32, start: u64, end: u64 },
    Callchain { pid: u32, tid: u32, pmcid: u32, cpuflags: u32, cpuflags2: u32, pcs: Vec<u64> },
    ThrCreate { tid: i32, pid: i32, flags: u32, name: Vec<u8> },
    ThrExit { tid: i32 },
}

fn union_of(ev: &pmclog_ev) -> Ev {
    let u = &ev.pl_u;
    // SAFETY: `pl_type` names the member pmclog_read filled; the event started all-zero, so every
    // byte read is initialized.
    unsafe {
        match ev.pl_type {
            PMCLOG_TYPE_CLOSELOG => Ev::CloseLog,
            PMCLOG_TYPE_DROPNOTIFY => Ev::DropNotify,
            PMCLOG_TYPE_INITIALIZE => Ev::Initialize {
                version: u.pl_i.pl_version,
                arch: u.pl_i.pl_arch,
                tsc_freq: u.pl_i.pl_tsc_freq,
                sec: u.pl_i.pl_ts.tv_sec,
                nsec: u.pl_i.pl_ts.tv_nsec,
                cpuid: c_str(&u.pl_i.pl_cpuid),
            },
            PMCLOG_TYPE_PMCALLOCATE => Ev::PmcAllocate {
                name: CStr::from_ptr(u.pl_a.pl_evname).to_bytes().to_vec(),
                rate: u.pl_a.pl_rate,
                event: u.pl_a.pl_event,
                flags: u.pl_a.pl_flags,
                pmcid: u.pl_a.pl_pmcid,
            },
            PMCLOG_TYPE_PMCALLOCATEDYN => Ev::PmcAllocateDyn {
                name: c_str(&u.pl_ad.pl_evname),
                event: u.pl_ad.pl_event,
                flags: u.pl_ad.pl_flags,
                pmcid: u.pl_ad.pl_pmcid,
            },
            PMCLOG_TYPE_PMCATTACH => Ev::PmcAttach {
                pmcid: u.pl_t.pl_pmcid,
                pid: u.pl_t.pl_pid,
                path: c_str(&u.pl_t.pl_pathname),
            },
            PMCLOG_TYPE_PMCDETACH => Ev::PmcDetach { pmcid: u.pl_d.pl_pmcid, pid: u.pl_d.pl_pid },
            PMCLOG_TYPE_PROCCSW => Ev::ProcCsw {
                pid: u.pl_c.pl_pid,
                tid: u.pl_c.pl_tid,
                pmcid: u.pl_c.pl_pmcid,
                value: u.pl_c.pl_value,
            },
            PMCLOG_TYPE_PROC_CREATE => Ev::ProcCreate {
                pid: u.pl_pc.pl_pid,
                flags: u.pl_pc.pl_flags,
                comm: c_str(&u.pl_pc.pl_pcomm),
            },
            PMCLOG_TYPE_PROCEXEC => Ev::ProcExec {
                pid: u.pl_x.pl_pid,
                pmcid: u.pl_x.pl_pmcid,
                base: u.pl_x.pl_baseaddr,
                dynamic: u.pl_x.pl_dynaddr,
                path: c_str(&u.pl_x.pl_pathname),
            },
            PMCLOG_TYPE_PROCEXIT => {
                Ev::ProcExit { pid: u.pl_e.pl_pid, pmcid: u.pl_e.pl_pmcid, value: u.pl_e.pl_value }
            }
            PMCLOG_TYPE_PROCFORK => Ev::ProcFork { old: u.pl_f.pl_oldpid, new: u.pl_f.pl_newpid },
            PMCLOG_TYPE_SYSEXIT => Ev::SysExit { pid: u.pl_se.pl_pid },
            PMCLOG_TYPE_USERDATA => Ev::UserData { data: u.pl_u.pl_userdata },
            PMCLOG_TYPE_MAP_IN => Ev::MapIn {
                pid: u.pl_mi.pl_pid,
                start: u.pl_mi.pl_start,
                path: c_str(&u.pl_mi.pl_pathname),
            },
            PMCLOG_TYPE_MAP_OUT => {
                Ev::MapOut { pid: u.pl_mo.pl_pid, start: u.pl_mo.pl_start, end: u.pl_mo.pl_end }
            }
            PMCLOG_TYPE_CALLCHAIN => Ev::Callchain {
                pid: u.pl_cc.pl_pid,
                tid: u.pl_cc.pl_tid,
                pmcid: u.pl_cc.pl_pmcid,
                cpuflags: u.pl_cc.pl_cpuflags,
                cpuflags2: u.pl_cc.pl_cpuflags2,
                pcs: u.pl_cc.pl_pc[..u.pl_cc.pl_npc as usize].to_vec(),
            },
            PMCLOG_TYPE_THR_CREATE => Ev::ThrCreate {
                tid: u.pl_tc.pl_tid,
                pid: u.pl_tc.pl_pid,
                flags: u.pl_tc.pl_flags,
                name: c_str(&u.pl_tc.pl_tdname),
            },
            PMCLOG_TYPE_THR_EXIT => Ev::ThrExit { tid: u.pl_te.pl_tid },
            other => panic!("unexpected pl_type {other}"),
        }
    }
}

/// Everything `pmclog_read` reported for one record.
#[derive(Debug, Clone, PartialEq)]
struct Got {
    offset: i64,
    count: usize,
    ts_sec: i64,
    ts_nsec: i64,
    record_type: pmclog_type,
    raw: Vec<u8>,
    ev: Ev,
}

fn got(ev: &pmclog_ev) -> Got {
    assert!(!ev.pl_data.is_null());
    // SAFETY: after a record, `pl_data` points to `pl_len` bytes the parser keeps until the next
    // read.
    let raw = unsafe { core::slice::from_raw_parts(ev.pl_data.cast::<u8>(), ev.pl_len as usize) };
    Got {
        offset: ev.pl_offset,
        count: ev.pl_count,
        ts_sec: ev.pl_ts.tv_sec,
        ts_nsec: ev.pl_ts.tv_nsec,
        record_type: ev.pl_type,
        raw: raw.to_vec(),
        ev: union_of(ev),
    }
}

/// Reads until `pmclog_read` fails: the records and the final state.
fn read_until_failure(parser: &mut Parser<'_>, ev: &mut pmclog_ev) -> (Vec<Got>, pmclog_state) {
    let mut records = Vec::new();
    while parser.read(ev) == 0 {
        assert_eq!(ev.pl_state, PMCLOG_OK);
        records.push(got(ev));
    }
    (records, ev.pl_state)
}

/// Feeds `log` in pieces of `piece` bytes, feeding whenever the parser asks. Returns the records,
/// the final state and how many times the parser asked for data.
fn read_fed_in_pieces(log: &[u8], piece: usize) -> (Vec<Got>, pmclog_state, usize) {
    let mut parser = Parser::memory();
    let mut ev = new_ev();
    let mut pieces = log.chunks(piece);
    let mut records = Vec::new();
    let mut asked = 0;
    loop {
        if parser.read(&mut ev) == 0 {
            records.push(got(&ev));
            continue;
        }
        if ev.pl_state != PMCLOG_REQUIRE_DATA {
            return (records, ev.pl_state, asked);
        }
        asked += 1;
        match pieces.next() {
            Some(piece) => assert_eq!(parser.feed(piece), 0),
            None => return (records, ev.pl_state, asked),
        }
    }
}

/// A fresh directory under the system's temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("pmclog-capi-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn file(&self, name: &str, contents: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A pipe: (read end, write end).
fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: pipe(2) just opened both descriptors and nothing else owns them.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

// ---------------------------------------------------------------------------------------------
// The sample log: every record type, with the union contents pmclog_read must produce.

const PCS: [u64; 3] = [0xffff_ffff_8123_4567, 0x0000_0000_0040_1a2b, 0x0000_7fff_dead_0010];

const DEEP: [u64; 512] = {
    let mut pcs = [0; 512];
    let mut i = 0;
    while i < 512 {
        pcs[i] = 0x40_0000 + 16 * i as u64;
        i += 1;
    }
    pcs
};

const PMCID: u32 = 0xFFF3_0703;

/// Every record type but CLOSELOG, each with its TSC and its expected union contents.
fn sample() -> Vec<(Record<'static>, u64, Ev)> {
    vec![
        (
            Record::Initialize(Initialize {
                version: 0x0A02_0000,
                cpu_type: 0x98,
                tsc_freq: 2_400_000_000,
                time_sec: 1_700_000_000,
                time_nsec: 123_456_789,
                cpuid: b"GenuineIntel-6-55",
            }),
            1_000,
            Ev::Initialize {
                version: 0x0A02_0000,
                arch: 0x98,
                tsc_freq: 2_400_000_000,
                sec: 1_700_000_000,
                nsec: 123_456_789,
                cpuid: b"GenuineIntel-6-55".to_vec(),
            },
        ),
        (
            Record::PmcAllocate(PmcAllocate {
                pmcid: PMCID,
                event: 0x10000,
                flags: 0x80,
                rate: 65_536,
            }),
            1_001,
            Ev::PmcAllocate {
                name: b"INSTR_RETIRED_ANY".to_vec(),
                rate: 65_536,
                event: 0x10000,
                flags: 0x80,
                pmcid: PMCID,
            },
        ),
        (
            Record::PmcAllocate(PmcAllocate {
                pmcid: 0xFFF3_0704,
                event: 0x1f,
                flags: PMC_F_EV_PMU | 0x80,
                rate: 100_000,
            }),
            1_002,
            Ev::PmcAllocate {
                name: b"EV_PMU_0x1f".to_vec(),
                rate: 100_000,
                event: 0x1f,
                flags: PMC_F_EV_PMU | 0x80,
                pmcid: 0xFFF3_0704,
            },
        ),
        (
            Record::PmcAllocate(PmcAllocate {
                pmcid: 0x0000_0705,
                event: 0x7777,
                flags: 0,
                rate: 0,
            }),
            1_003,
            Ev::PmcAllocate {
                name: b"UNKNOWN_EVENT_0x7777".to_vec(),
                rate: 0,
                event: 0x7777,
                flags: 0,
                pmcid: 0x0000_0705,
            },
        ),
        (
            Record::PmcAllocateDyn(PmcAllocateDyn {
                pmcid: 0x0001_0d00,
                event: 0x20000,
                flags: 0x2,
                rate: 1_000,
                name: b"CLOCK.PROF",
                layout: DynLayout::Kernel,
            }),
            1_004,
            Ev::PmcAllocateDyn {
                name: b"CLOCK.PROF".to_vec(),
                event: 0x20000,
                flags: 0x2,
                pmcid: 0x0001_0d00,
            },
        ),
        (
            Record::PmcAllocateDyn(PmcAllocateDyn {
                pmcid: 0x0001_0d01,
                event: 0x20001,
                flags: 0,
                rate: 0,
                name: b"PAGE_FAULT.ALL_THE_WAY_DOWN_TO_A_RATHER_LONG_NAME",
                layout: DynLayout::Documented,
            }),
            1_005,
            Ev::PmcAllocateDyn {
                name: b"PAGE_FAULT.ALL_THE_WAY_DOWN_TO_A_RATHER_LONG_NAME".to_vec(),
                event: 0x20001,
                flags: 0,
                pmcid: 0x0001_0d01,
            },
        ),
        (
            Record::PmcAttach(PmcAttach { pmcid: PMCID, pid: 1234, path: b"/usr/bin/make" }),
            1_006,
            Ev::PmcAttach { pmcid: PMCID, pid: 1234, path: b"/usr/bin/make".to_vec() },
        ),
        (
            Record::PmcDetach(PmcDetach { pmcid: PMCID, pid: 1234 }),
            1_007,
            Ev::PmcDetach { pmcid: PMCID, pid: 1234 },
        ),
        (
            Record::ProcCsw(ProcCsw { value: 987_654_321, pmcid: PMCID, pid: 1234, tid: 100_234 }),
            1_008,
            Ev::ProcCsw { pid: 1234, tid: 100_234, pmcid: PMCID, value: 987_654_321 },
        ),
        (
            Record::ProcExec(ProcExec {
                pid: 1234,
                pmcid: PMCID,
                base_addr: 0x0000_0008_0102_0000,
                dyn_addr: 0x0000_0000_0020_0000,
                path: b"/bin/sh",
            }),
            1_009,
            Ev::ProcExec {
                pid: 1234,
                pmcid: PMCID,
                base: 0x0000_0008_0102_0000,
                dynamic: 0x0000_0000_0020_0000,
                path: b"/bin/sh".to_vec(),
            },
        ),
        (
            Record::ProcExit(ProcExit { pmcid: PMCID, pid: 1234, value: 5_000_000_000 }),
            1_010,
            Ev::ProcExit { pid: 1234, pmcid: PMCID, value: 5_000_000_000 },
        ),
        (
            Record::ProcFork(ProcFork { old_pid: 1234, new_pid: 1235 }),
            1_011,
            Ev::ProcFork { old: 1234, new: 1235 },
        ),
        (Record::SysExit(SysExit { pid: 1235 }), 1_012, Ev::SysExit { pid: 1235 }),
        (
            Record::UserData(UserData { data: 0xDEAD_BEEF }),
            1_013,
            Ev::UserData { data: 0xDEAD_BEEF },
        ),
        (
            Record::MapIn(MapIn {
                pid: -1,
                start: 0xffff_ffff_8020_0000,
                path: b"/boot/kernel/kernel",
            }),
            1_014,
            Ev::MapIn {
                pid: -1,
                start: 0xffff_ffff_8020_0000,
                path: b"/boot/kernel/kernel".to_vec(),
            },
        ),
        (
            Record::MapOut(MapOut { pid: 1234, start: 0x1000, end: 0x2000 }),
            1_015,
            Ev::MapOut { pid: 1234, start: 0x1000, end: 0x2000 },
        ),
        (
            Record::Callchain(Callchain {
                pid: 1234,
                tid: 100_234,
                pmcid: PMCID,
                cpuflags: CallchainFlags::new(3, 1),
                pcs: ProgramCounters::from_words(&PCS),
            }),
            // The TSC goes into tv_sec bit for bit, even past i64::MAX.
            0xFFFF_FFFF_FFFF_FFF0,
            Ev::Callchain {
                pid: 1234,
                tid: 100_234,
                pmcid: PMCID,
                cpuflags: 3 << 16 | 1,
                cpuflags2: 0,
                pcs: PCS.to_vec(),
            },
        ),
        (
            Record::Callchain(Callchain {
                pid: 77,
                tid: 100_077,
                pmcid: PMCID,
                cpuflags: CallchainFlags::new(0x7ff, 0),
                pcs: ProgramCounters::from_words(&DEEP),
            }),
            1_017,
            Ev::Callchain {
                pid: 77,
                tid: 100_077,
                pmcid: PMCID,
                cpuflags: 0x7ff << 16,
                cpuflags2: 0,
                pcs: DEEP.to_vec(),
            },
        ),
        (
            Record::Callchain(Callchain {
                pid: 78,
                tid: 100_078,
                pmcid: PMCID,
                cpuflags: CallchainFlags::new(1, 0),
                pcs: ProgramCounters::from_words(&[]),
            }),
            1_018,
            Ev::Callchain {
                pid: 78,
                tid: 100_078,
                pmcid: PMCID,
                cpuflags: 1 << 16,
                cpuflags2: 0,
                pcs: Vec::new(),
            },
        ),
        (
            Record::ThrCreate(ThrCreate {
                tid: 100_235,
                pid: 1234,
                flags: 0x1000,
                name: b"nineteen-bytes-name",
            }),
            1_019,
            Ev::ThrCreate {
                tid: 100_235,
                pid: 1234,
                flags: 0x1000,
                name: b"nineteen-bytes-name".to_vec(),
            },
        ),
        (Record::ThrExit(ThrExit { tid: 100_235 }), 1_020, Ev::ThrExit { tid: 100_235 }),
        (
            Record::ProcCreate(ProcCreate { pid: 1236, flags: 0x4000, comm: b"cc" }),
            1_021,
            Ev::ProcCreate { pid: 1236, flags: 0x4000, comm: b"cc".to_vec() },
        ),
        (Record::DropNotify, 1_022, Ev::DropNotify),
    ]
}

const CLOSELOG_TSC: u64 = 2_000;

/// The sample log ending with CLOSELOG, and what pmclog_read must report for each record before
/// it.
fn sample_log() -> (Vec<u8>, Vec<Got>) {
    let sample = sample();
    let mut records: Vec<(Record<'_>, u64)> = sample.iter().map(|(r, tsc, _)| (*r, *tsc)).collect();
    records.push((Record::CloseLog, CLOSELOG_TSC));
    let log = encode_log(&records);
    let mut offset = 0;
    let expected = sample
        .into_iter()
        .enumerate()
        .map(|(i, (record, tsc, ev))| {
            let raw = encode_log(&[(record, tsc)]);
            offset += raw.len();
            Got {
                offset: offset as i64,
                count: i + 1,
                ts_sec: tsc as i64,
                ts_nsec: 0,
                record_type: pmclog_type::from(record.record_type().code()),
                raw,
                ev,
            }
        })
        .collect();
    (log, expected)
}

/// A long log without CLOSELOG: many callchains of different depths, so that records straddle
/// the parser's 4096-byte reads.
fn long_log() -> Vec<u8> {
    let mut records = vec![(sample()[0].0, 1)];
    for i in 0..400u64 {
        let depth = (i * 7 % 61) as usize;
        records.push((
            Record::Callchain(Callchain {
                pid: i as i32,
                tid: 100_000 + i as i32,
                pmcid: PMCID,
                cpuflags: CallchainFlags::new((i % 8) as u16, (i % 2) as u16),
                pcs: ProgramCounters::from_words(&DEEP[..depth]),
            }),
            10 + i,
        ));
        if i % 50 == 0 {
            records.push((
                Record::MapIn(MapIn { pid: i as i32, start: i << 12, path: b"/lib/libc.so.7" }),
                10 + i,
            ));
        }
    }
    encode_log(&records)
}

/// What a memory parser reads from the whole of `log`, fed at once.
fn read_from_memory(log: &[u8]) -> (Vec<Got>, pmclog_state) {
    let mut parser = Parser::memory();
    let mut ev = new_ev();
    assert_eq!(parser.feed(log), 0);
    read_until_failure(&mut parser, &mut ev)
}

fn sample_allocate(event: u32, flags: u32, tsc: u64) -> (Record<'static>, u64) {
    (Record::PmcAllocate(PmcAllocate { pmcid: PMCID, event, flags, rate: 1 }), tsc)
}

fn userdata(data: u32) -> (Record<'static>, u64) {
    (Record::UserData(UserData { data }), u64::from(data))
}

// ---------------------------------------------------------------------------------------------
// Layout.

#[test]
fn layout_matches_freebsd_amd64() {
    assert_eq!(size_of::<libc::timespec>(), 16);
    assert_eq!(offset_of!(libc::timespec, tv_sec), 0);
    assert_eq!(offset_of!(libc::timespec, tv_nsec), 8);

    assert_eq!(size_of::<pmclog_ev>(), 4184);
    assert_eq!(align_of::<pmclog_ev>(), 8);
    assert_eq!(offset_of!(pmclog_ev, pl_state), 0);
    assert_eq!(offset_of!(pmclog_ev, pl_offset), 8);
    assert_eq!(offset_of!(pmclog_ev, pl_count), 16);
    assert_eq!(offset_of!(pmclog_ev, pl_ts), 24);
    assert_eq!(offset_of!(pmclog_ev, pl_type), 40);
    assert_eq!(offset_of!(pmclog_ev, pl_data), 48);
    assert_eq!(offset_of!(pmclog_ev, pl_len), 56);
    assert_eq!(offset_of!(pmclog_ev, pl_u), 64);

    assert_eq!(size_of::<pmclog_ev_u>(), 4120);
    assert_eq!(offset_of!(pmclog_ev_u, pl_cc), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_cl), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_dn), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_i), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_mi), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_mo), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_a), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_ad), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_t), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_d), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_c), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_pc), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_x), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_e), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_f), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_se), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_tc), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_te), 0);
    assert_eq!(offset_of!(pmclog_ev_u, pl_u), 0);

    assert_eq!(size_of::<pmclog_ev_callchain>(), 4120);
    assert_eq!(offset_of!(pmclog_ev_callchain, pl_pid), 0);
    assert_eq!(offset_of!(pmclog_ev_callchain, pl_tid), 4);
    assert_eq!(offset_of!(pmclog_ev_callchain, pl_pmcid), 8);
    assert_eq!(offset_of!(pmclog_ev_callchain, pl_cpuflags), 12);
    assert_eq!(offset_of!(pmclog_ev_callchain, pl_cpuflags2), 16);
    assert_eq!(offset_of!(pmclog_ev_callchain, pl_npc), 20);
    assert_eq!(offset_of!(pmclog_ev_callchain, pl_pc), 24);

    assert_eq!(size_of::<pmclog_ev_closelog>(), 0);
    assert_eq!(size_of::<pmclog_ev_dropnotify>(), 0);

    assert_eq!(size_of::<pmclog_ev_initialize>(), 1056);
    assert_eq!(offset_of!(pmclog_ev_initialize, pl_version), 0);
    assert_eq!(offset_of!(pmclog_ev_initialize, pl_arch), 4);
    assert_eq!(offset_of!(pmclog_ev_initialize, pl_tsc_freq), 8);
    assert_eq!(offset_of!(pmclog_ev_initialize, pl_ts), 16);
    assert_eq!(offset_of!(pmclog_ev_initialize, pl_cpuid), 32);

    assert_eq!(size_of::<pmclog_ev_map_in>(), 1040);
    assert_eq!(offset_of!(pmclog_ev_map_in, pl_pid), 0);
    assert_eq!(offset_of!(pmclog_ev_map_in, pl_start), 8);
    assert_eq!(offset_of!(pmclog_ev_map_in, pl_pathname), 16);

    assert_eq!(size_of::<pmclog_ev_map_out>(), 24);
    assert_eq!(offset_of!(pmclog_ev_map_out, pl_pid), 0);
    assert_eq!(offset_of!(pmclog_ev_map_out, pl_start), 8);
    assert_eq!(offset_of!(pmclog_ev_map_out, pl_end), 16);

    assert_eq!(size_of::<pmclog_ev_pmcallocate>(), 32);
    // FreeBSD's member order: pl_event, pl_evname, pl_flags, pl_pmcid, pl_rate.
    assert_eq!(offset_of!(pmclog_ev_pmcallocate, pl_event), 0);
    assert_eq!(offset_of!(pmclog_ev_pmcallocate, pl_evname), 8);
    assert_eq!(offset_of!(pmclog_ev_pmcallocate, pl_flags), 16);
    assert_eq!(offset_of!(pmclog_ev_pmcallocate, pl_pmcid), 20);
    assert_eq!(offset_of!(pmclog_ev_pmcallocate, pl_rate), 24);

    assert_eq!(size_of::<pmclog_ev_pmcallocatedyn>(), 76);
    assert_eq!(offset_of!(pmclog_ev_pmcallocatedyn, pl_event), 0);
    assert_eq!(offset_of!(pmclog_ev_pmcallocatedyn, pl_evname), 4);
    assert_eq!(offset_of!(pmclog_ev_pmcallocatedyn, pl_flags), 68);
    assert_eq!(offset_of!(pmclog_ev_pmcallocatedyn, pl_pmcid), 72);

    assert_eq!(size_of::<pmclog_ev_pmcattach>(), 1032);
    assert_eq!(offset_of!(pmclog_ev_pmcattach, pl_pmcid), 0);
    assert_eq!(offset_of!(pmclog_ev_pmcattach, pl_pid), 4);
    assert_eq!(offset_of!(pmclog_ev_pmcattach, pl_pathname), 8);

    assert_eq!(size_of::<pmclog_ev_pmcdetach>(), 8);
    assert_eq!(offset_of!(pmclog_ev_pmcdetach, pl_pmcid), 0);
    assert_eq!(offset_of!(pmclog_ev_pmcdetach, pl_pid), 4);

    assert_eq!(size_of::<pmclog_ev_proccsw>(), 24);
    assert_eq!(offset_of!(pmclog_ev_proccsw, pl_pid), 0);
    assert_eq!(offset_of!(pmclog_ev_proccsw, pl_tid), 4);
    assert_eq!(offset_of!(pmclog_ev_proccsw, pl_pmcid), 8);
    assert_eq!(offset_of!(pmclog_ev_proccsw, pl_value), 16);

    assert_eq!(size_of::<pmclog_ev_proccreate>(), 28);
    assert_eq!(offset_of!(pmclog_ev_proccreate, pl_pid), 0);
    assert_eq!(offset_of!(pmclog_ev_proccreate, pl_flags), 4);
    assert_eq!(offset_of!(pmclog_ev_proccreate, pl_pcomm), 8);

    assert_eq!(size_of::<pmclog_ev_procexec>(), 1048);
    assert_eq!(offset_of!(pmclog_ev_procexec, pl_pid), 0);
    assert_eq!(offset_of!(pmclog_ev_procexec, pl_pmcid), 4);
    assert_eq!(offset_of!(pmclog_ev_procexec, pl_baseaddr), 8);
    assert_eq!(offset_of!(pmclog_ev_procexec, pl_dynaddr), 16);
    assert_eq!(offset_of!(pmclog_ev_procexec, pl_pathname), 24);

    assert_eq!(size_of::<pmclog_ev_procexit>(), 16);
    assert_eq!(offset_of!(pmclog_ev_procexit, pl_pid), 0);
    assert_eq!(offset_of!(pmclog_ev_procexit, pl_pmcid), 4);
    assert_eq!(offset_of!(pmclog_ev_procexit, pl_value), 8);

    assert_eq!(size_of::<pmclog_ev_procfork>(), 8);
    assert_eq!(offset_of!(pmclog_ev_procfork, pl_oldpid), 0);
    assert_eq!(offset_of!(pmclog_ev_procfork, pl_newpid), 4);

    assert_eq!(size_of::<pmclog_ev_sysexit>(), 4);
    assert_eq!(offset_of!(pmclog_ev_sysexit, pl_pid), 0);

    assert_eq!(size_of::<pmclog_ev_threadcreate>(), 32);
    assert_eq!(offset_of!(pmclog_ev_threadcreate, pl_tid), 0);
    assert_eq!(offset_of!(pmclog_ev_threadcreate, pl_pid), 4);
    assert_eq!(offset_of!(pmclog_ev_threadcreate, pl_flags), 8);
    assert_eq!(offset_of!(pmclog_ev_threadcreate, pl_tdname), 12);

    assert_eq!(size_of::<pmclog_ev_threadexit>(), 4);
    assert_eq!(offset_of!(pmclog_ev_threadexit, pl_tid), 0);

    assert_eq!(size_of::<pmclog_ev_userdata>(), 4);
    assert_eq!(offset_of!(pmclog_ev_userdata, pl_userdata), 0);
}

#[test]
fn constants_match_freebsd() {
    assert_eq!(
        [PMCLOG_OK, PMCLOG_EOF, PMCLOG_REQUIRE_DATA, PMCLOG_ERROR],
        [0, 1, 2, 3] as [pmclog_state; 4]
    );
    assert_eq!(PMCLOG_FD_NONE, -1);
    let types = [
        PMCLOG_TYPE_CLOSELOG,
        PMCLOG_TYPE_DROPNOTIFY,
        PMCLOG_TYPE_INITIALIZE,
        PMCLOG_TYPE_MAPPINGCHANGE,
        PMCLOG_TYPE_PMCALLOCATE,
        PMCLOG_TYPE_PMCATTACH,
        PMCLOG_TYPE_PMCDETACH,
        PMCLOG_TYPE_PROCCSW,
        PMCLOG_TYPE_PROCEXEC,
        PMCLOG_TYPE_PROCEXIT,
        PMCLOG_TYPE_PROCFORK,
        PMCLOG_TYPE_SYSEXIT,
        PMCLOG_TYPE_USERDATA,
        PMCLOG_TYPE_MAP_IN,
        PMCLOG_TYPE_MAP_OUT,
        PMCLOG_TYPE_CALLCHAIN,
        PMCLOG_TYPE_PMCALLOCATEDYN,
        PMCLOG_TYPE_THR_CREATE,
        PMCLOG_TYPE_THR_EXIT,
        PMCLOG_TYPE_PROC_CREATE,
    ];
    assert_eq!(types.to_vec(), (1..=20).collect::<Vec<pmclog_type>>());
    for record_type in pmclog::RecordType::ALL {
        assert!(types.contains(&pmclog_type::from(record_type.code())));
    }
    assert_eq!((PMC_CALLCHAIN_DEPTH_MAX, PMC_NAME_MAX, MAXCOMLEN), (512, 64, 19));
}

// ---------------------------------------------------------------------------------------------
// Memory mode.

#[test]
fn memory_parser_reads_every_record_type() {
    let (log, expected) = sample_log();
    let mut parser = Parser::memory();
    let mut ev = new_ev();

    assert_eq!(parser.read(&mut ev), -1, "nothing fed yet");
    assert_eq!(ev.pl_state, PMCLOG_REQUIRE_DATA);

    assert_eq!(parser.feed(&log), 0);
    for want in &expected {
        assert_eq!(parser.read(&mut ev), 0, "record {}", want.count);
        assert_eq!(ev.pl_state, PMCLOG_OK);
        assert_eq!(ev.pl_len as usize, want.raw.len());
        assert_eq!(&got(&ev), want);
    }

    // CLOSELOG ends the log: EOF, with the record's header fields filled, and the offset and
    // count of the last real record (as FreeBSD's reader leaves them).
    assert_eq!(parser.read(&mut ev), -1);
    assert_eq!(ev.pl_state, PMCLOG_EOF);
    assert_eq!(ev.pl_type, PMCLOG_TYPE_CLOSELOG);
    assert_eq!(ev.pl_offset as usize, log.len() - 16);
    assert_eq!(ev.pl_count, expected.len());
    assert_eq!(ev.pl_len, 16);
    assert_eq!(ev.pl_ts.tv_sec as u64, CLOSELOG_TSC);
    assert_eq!(got(&ev).raw, log[log.len() - 16..]);

    for _ in 0..3 {
        assert_eq!(parser.read(&mut ev), -1);
        assert_eq!(ev.pl_state, PMCLOG_EOF);
    }
}

#[test]
fn memory_parser_fed_one_byte_at_a_time_reads_the_same_records() {
    let (log, expected) = sample_log();
    let (records, state, asked) = read_fed_in_pieces(&log, 1);
    assert_eq!(records, expected);
    assert_eq!(state, PMCLOG_EOF);
    // Once before the first byte, then once for every byte but the last (which completes
    // CLOSELOG and so gives EOF).
    assert_eq!(asked, log.len());

    for piece in [3, 7, 16, 100, 4095, 4096, 4097] {
        let (records, state, _) = read_fed_in_pieces(&log, piece);
        assert_eq!(records, expected, "pieces of {piece}");
        assert_eq!(state, PMCLOG_EOF);
    }
}

#[test]
fn memory_parser_asks_for_data_at_the_end_of_what_was_fed() {
    let log = encode_log(&[userdata(1), userdata(2)]);
    let mut parser = Parser::memory();
    let mut ev = new_ev();
    let (first, second) = log.split_at(30);
    assert_eq!(parser.feed(first), 0);
    assert_eq!(parser.read(&mut ev), 0);
    assert_eq!(union_of(&ev), Ev::UserData { data: 1 });
    assert_eq!(parser.read(&mut ev), -1);
    assert_eq!(ev.pl_state, PMCLOG_REQUIRE_DATA);
    assert_eq!(parser.feed(second), 0);
    assert_eq!(parser.read(&mut ev), 0);
    assert_eq!(union_of(&ev), Ev::UserData { data: 2 });
    assert_eq!((ev.pl_offset, ev.pl_count), (48, 2));
    assert_eq!(parser.read(&mut ev), -1);
    assert_eq!(ev.pl_state, PMCLOG_REQUIRE_DATA, "no CLOSELOG: a memory log never ends by itself");
}

#[test]
fn feed_refuses_a_negative_length() {
    let data = [0u8; 8];
    let log = encode_log(&[userdata(5)]);
    let mut parser = Parser::memory();
    clear_errno();
    // SAFETY: a live parser; the length is rejected before `data` is looked at.
    let fed = unsafe { pmclog_feed(parser.cookie, data.as_ptr().cast_mut().cast(), -1) };
    assert_eq!(fed, -1);
    assert_eq!(errno(), libc::EINVAL);
    // The parser is unharmed.
    assert_eq!(parser.feed(&log), 0);
    let mut ev = new_ev();
    assert_eq!(parser.read(&mut ev), 0);
}

#[test]
fn feed_refuses_a_parser_that_reads_a_descriptor() {
    let (read_end, _write_end) = pipe();
    let mut parser = Parser::open(read_end.as_raw_fd());
    clear_errno();
    assert_eq!(parser.feed(b"\0\0\0\0"), -1);
    assert_eq!(errno(), libc::EINVAL);
}

#[test]
fn feed_refuses_new_data_before_the_old_is_consumed() {
    let log = encode_log(&[userdata(1), userdata(2)]);
    let more = encode_log(&[userdata(3)]);
    let mut parser = Parser::memory();
    let mut ev = new_ev();
    assert_eq!(parser.feed(&log), 0);
    assert_eq!(parser.feed(&more), -1, "nothing read yet");
    assert_eq!(parser.read(&mut ev), 0);
    assert_eq!(parser.feed(&more), -1, "one record left");
    assert_eq!(parser.read(&mut ev), 0);
    // The second record ended exactly at the end of the data, so all of it is consumed.
    assert_eq!(parser.feed(&more), 0);
    assert_eq!(parser.read(&mut ev), 0);
    assert_eq!(union_of(&ev), Ev::UserData { data: 3 });
    assert_eq!((ev.pl_offset, ev.pl_count), (72, 3));
    assert_eq!(parser.read(&mut ev), -1);
    assert_eq!(ev.pl_state, PMCLOG_REQUIRE_DATA);
    assert_eq!(parser.feed(&[]), 0, "an empty feed is allowed");
    assert_eq!(parser.read(&mut ev), -1);
    assert_eq!(ev.pl_state, PMCLOG_REQUIRE_DATA);
}

#[test]
fn closelog_ends_the_log_and_nothing_after_it_is_read() {
    let log = encode_log(&[userdata(1), (Record::CloseLog, 9), userdata(2)]);
    let more = encode_log(&[userdata(3)]);
    let mut parser = Parser::memory();
    let mut ev = new_ev();
    assert_eq!(parser.feed(&log), 0);
    assert_eq!(parser.read(&mut ev), 0);
    assert_eq!(union_of(&ev), Ev::UserData { data: 1 });
    assert_eq!(parser.read(&mut ev), -1);
    assert_eq!(ev.pl_state, PMCLOG_EOF);
    assert_eq!((ev.pl_type, ev.pl_offset, ev.pl_count), (PMCLOG_TYPE_CLOSELOG, 24, 1));

    // The bytes after CLOSELOG are dropped: more data is accepted but never parsed.
    assert_eq!(parser.feed(&more), 0);
    for _ in 0..2 {
        assert_eq!(parser.read(&mut ev), -1);
        assert_eq!(ev.pl_state, PMCLOG_EOF);
    }

    // The same from a file.
    let dir = TempDir::new("closelog");
    let file = File::open(dir.file("log", &log)).unwrap();
    let mut parser = Parser::open(file.as_raw_fd());
    let (records, state) = read_until_failure(&mut parser, &mut ev);
    assert_eq!(records.len(), 1);
    assert_eq!(state, PMCLOG_EOF);
    assert_eq!(ev.pl_type, PMCLOG_TYPE_CLOSELOG);
    assert_eq!(parser.read(&mut ev), -1);
    assert_eq!(ev.pl_state, PMCLOG_EOF);
}

#[test]
fn a_corrupt_record_is_an_error_that_stays() {
    let good = encode_log(&[userdata(1), userdata(2), userdata(3)]);
    type Corruption = (&'static str, fn(&mut Vec<u8>));
    let corruptions: [Corruption; 4] = [
        ("bad magic", |log| log[24 + 3] = 0x00),
        ("unknown type 4", |log| log[24 + 2] = 4),
        ("bad length", |log| log[24] = 20),
        ("length past the largest record", |log| log[24 + 1] = 0x40),
    ];
    for (what, corrupt) in corruptions {
        let mut log = good.clone();
        corrupt(&mut log);
        for piece in [log.len(), 1] {
            let (records, state, _) = read_fed_in_pieces(&log, piece);
            assert_eq!(records.len(), 1, "{what}, pieces of {piece}");
            assert_eq!(state, PMCLOG_ERROR, "{what}, pieces of {piece}");
        }

        let more = encode_log(&[userdata(9)]);
        let mut parser = Parser::memory();
        let mut ev = new_ev();
        assert_eq!(parser.feed(&log), 0);
        assert_eq!(parser.read(&mut ev), 0);
        clear_errno();
        assert_eq!(parser.read(&mut ev), -1);
        assert_eq!((ev.pl_state, errno()), (PMCLOG_ERROR, libc::EINVAL), "{what}");
        // It stays in error, even when given good data.
        assert_eq!(parser.feed(&more), 0);
        for _ in 0..2 {
            clear_errno();
            assert_eq!(parser.read(&mut ev), -1);
            assert_eq!((ev.pl_state, errno()), (PMCLOG_ERROR, libc::EINVAL), "{what}");
        }
    }
}

#[test]
fn event_names_stay_valid_until_close() {
    let log = encode_log(&[
        sample_allocate(0x1000, 0, 1),
        userdata(2),
        sample_allocate(0x5, PMC_F_EV_PMU, 3),
        sample_allocate(0x1000, 0, 4),
        sample_allocate(0x5, 0, 5),
    ]);
    let mut parser = Parser::memory();
    let mut ev = new_ev();
    assert_eq!(parser.feed(&log), 0);
    let mut names = Vec::new();
    while parser.read(&mut ev) == 0 {
        if ev.pl_type == PMCLOG_TYPE_PMCALLOCATE {
            // SAFETY: pl_type says the member is pl_a.
            names.push(unsafe { ev.pl_u.pl_a.pl_evname });
        }
    }
    // SAFETY: the parser is still open, so every name it returned is still valid.
    let strings: Vec<&CStr> = names.iter().map(|&name| unsafe { CStr::from_ptr(name) }).collect();
    assert_eq!(strings, [c"TSC", c"EV_PMU_0x5", c"TSC", c"UNKNOWN_EVENT_0x5"]);
    assert_eq!(names[0], names[2], "the same event gets the same string");
}

#[test]
fn names_that_fill_their_field_are_cut_to_fit_the_nul() {
    // The kernel copies MAXCOMLEN + 1 bytes, so a name may fill all 20 with no NUL; the C field
    // has room for 19 and the NUL.
    let mut log = encode_log(&[
        (
            Record::ThrCreate(ThrCreate { tid: 1, pid: 2, flags: 0, name: b"0123456789abcdefghi" }),
            1,
        ),
        (Record::ProcCreate(ProcCreate { pid: 3, flags: 0, comm: b"0123456789abcdefghi" }), 2),
    ]);
    log[32 + 19] = b'J';
    log[52 + 24 + 19] = b'K';
    let (records, _) = read_from_memory(&log);
    let names: Vec<Ev> = records.into_iter().map(|r| r.ev).collect();
    assert_eq!(
        names,
        [
            Ev::ThrCreate { tid: 1, pid: 2, flags: 0, name: b"0123456789abcdefghi".to_vec() },
            Ev::ProcCreate { pid: 3, flags: 0, comm: b"0123456789abcdefghi".to_vec() },
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Descriptor mode.

#[test]
fn file_parser_reads_a_whole_file() {
    let dir = TempDir::new("file");
    // The sample ends with CLOSELOG; the long log just stops, which a memory parser cannot tell
    // from data still to come, but a file parser sees as the end of the file.
    for (name, log, memory_state) in
        [("sample", sample_log().0, PMCLOG_EOF), ("long", long_log(), PMCLOG_REQUIRE_DATA)]
    {
        let (want, want_state) = read_from_memory(&log);
        assert!(want.len() > 20);
        assert_eq!(want_state, memory_state);
        let file = File::open(dir.file(name, &log)).unwrap();
        let mut parser = Parser::open(file.as_raw_fd());
        let mut ev = new_ev();
        let (records, state) = read_until_failure(&mut parser, &mut ev);
        assert_eq!(records, want, "{name}");
        assert_eq!(state, PMCLOG_EOF, "{name}");
    }
}

#[test]
fn file_parser_follows_a_growing_file() {
    let dir = TempDir::new("growing");
    let log = encode_log(&[userdata(1), userdata(2), userdata(3), userdata(4)]);
    let path = dir.file("log", &log[..48]);
    let reader = File::open(&path).unwrap();
    let mut parser = Parser::open(reader.as_raw_fd());
    let mut ev = new_ev();

    let (records, state) = read_until_failure(&mut parser, &mut ev);
    assert_eq!((records.len(), state), (2, PMCLOG_EOF));
    // EOF between records is not final: appended records are read on the next call.
    let mut writer = File::options().append(true).open(&path).unwrap();
    writer.write_all(&log[48..]).unwrap();
    let (records, state) = read_until_failure(&mut parser, &mut ev);
    assert_eq!((records.len(), state), (2, PMCLOG_EOF));
    assert_eq!((records[1].count, records[1].offset), (4, 96));
    assert_eq!(records[1].ev, Ev::UserData { data: 4 });
}

#[test]
fn file_that_ends_inside_a_record_is_an_error() {
    let dir = TempDir::new("truncated");
    let log = long_log();
    let (complete, _) = read_from_memory(&log);
    for cut in [1, 3, 5, 17] {
        let file = File::open(dir.file("log", &log[..log.len() - cut])).unwrap();
        let mut parser = Parser::open(file.as_raw_fd());
        let mut ev = new_ev();
        clear_errno();
        let (records, state) = read_until_failure(&mut parser, &mut ev);
        assert_eq!(records[..], complete[..complete.len() - 1], "cut {cut}");
        assert_eq!((state, errno()), (PMCLOG_ERROR, libc::EINVAL), "cut {cut}");
        assert_eq!(parser.read(&mut ev), -1);
        assert_eq!(ev.pl_state, PMCLOG_ERROR, "the error stays");
    }
}

#[test]
fn pipe_parser_reads_until_the_writer_closes() {
    let log = long_log();
    let (want, _) = read_from_memory(&log);
    let (read_end, write_end) = pipe();
    let writer = std::thread::spawn({
        let log = log.clone();
        move || {
            let mut pipe = File::from(write_end);
            for piece in log.chunks(1000) {
                pipe.write_all(piece).unwrap();
            }
            // Dropping `pipe` closes the write end: the reader sees end of file.
        }
    });
    let mut parser = Parser::open(read_end.as_raw_fd());
    let mut ev = new_ev();
    let (records, state) = read_until_failure(&mut parser, &mut ev);
    writer.join().unwrap();
    assert_eq!(records, want);
    assert_eq!(state, PMCLOG_EOF);
}

#[test]
fn empty_nonblocking_pipe_asks_for_data() {
    let (read_end, write_end) = pipe();
    // SAFETY: fcntl on a descriptor this test owns.
    let flags = unsafe { libc::fcntl(read_end.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    let set = unsafe { libc::fcntl(read_end.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) };
    assert_eq!(set, 0);
    let mut writer = File::from(write_end);
    let log = encode_log(&[userdata(1), userdata(2)]);
    let mut parser = Parser::open(read_end.as_raw_fd());
    let mut ev = new_ev();

    clear_errno();
    assert_eq!(parser.read(&mut ev), -1);
    assert_eq!((ev.pl_state, errno()), (PMCLOG_REQUIRE_DATA, libc::EAGAIN));

    writer.write_all(&log[..10]).unwrap();
    assert_eq!(parser.read(&mut ev), -1);
    assert_eq!(ev.pl_state, PMCLOG_REQUIRE_DATA, "half a record");

    writer.write_all(&log[10..]).unwrap();
    assert_eq!(parser.read(&mut ev), 0);
    assert_eq!(union_of(&ev), Ev::UserData { data: 1 });
    assert_eq!(parser.read(&mut ev), 0);
    assert_eq!(union_of(&ev), Ev::UserData { data: 2 });
    assert_eq!(parser.read(&mut ev), -1);
    assert_eq!(ev.pl_state, PMCLOG_REQUIRE_DATA);

    drop(writer);
    assert_eq!(parser.read(&mut ev), -1);
    assert_eq!(ev.pl_state, PMCLOG_EOF);
}

#[test]
fn a_failed_read_reports_its_errno() {
    // read(2) on the write end of a pipe fails with EBADF.
    let (_read_end, write_end) = pipe();
    let mut parser = Parser::open(write_end.as_raw_fd());
    let mut ev = new_ev();
    for _ in 0..2 {
        clear_errno();
        assert_eq!(parser.read(&mut ev), -1);
        assert_eq!((ev.pl_state, errno()), (PMCLOG_ERROR, libc::EBADF));
    }
}

// ---------------------------------------------------------------------------------------------
// Misuse at the boundary.

#[test]
fn null_arguments_fail_with_einval() {
    let mut ev = new_ev();
    ev.pl_state = 77;
    clear_errno();
    // SAFETY: NULL cookies are allowed and rejected.
    assert_eq!(unsafe { pmclog_read(core::ptr::null_mut(), &mut *ev) }, -1);
    assert_eq!(errno(), libc::EINVAL);
    assert_eq!(ev.pl_state, 77, "the event is not touched");

    let parser = Parser::memory();
    clear_errno();
    // SAFETY: a NULL event is allowed and rejected.
    assert_eq!(unsafe { pmclog_read(parser.cookie, core::ptr::null_mut()) }, -1);
    assert_eq!(errno(), libc::EINVAL);

    let data = [0u8; 4];
    clear_errno();
    // SAFETY: NULL cookies are allowed and rejected.
    let fed = unsafe { pmclog_feed(core::ptr::null_mut(), data.as_ptr().cast_mut().cast(), 4) };
    assert_eq!(fed, -1);
    assert_eq!(errno(), libc::EINVAL);

    clear_errno();
    // SAFETY: a NULL buffer with a length is rejected.
    assert_eq!(unsafe { pmclog_feed(parser.cookie, core::ptr::null_mut(), 4) }, -1);
    assert_eq!(errno(), libc::EINVAL);
    // SAFETY: a NULL buffer of length 0 is an empty feed.
    assert_eq!(unsafe { pmclog_feed(parser.cookie, core::ptr::null_mut(), 0) }, 0);

    // SAFETY: closing NULL does nothing.
    unsafe { pmclog_close(core::ptr::null_mut()) };
}

#[test]
fn an_uninitialized_event_is_filled() {
    let log = encode_log(&[(sample()[16].0, 5)]);
    let mut parser = Parser::memory();
    assert_eq!(parser.feed(&log), 0);
    let mut memory = Box::<pmclog_ev>::new_uninit();
    let ev = memory.as_mut_ptr().cast::<pmclog_ev>();
    // SAFETY: pmclog_read accepts uninitialized memory for the event.
    assert_eq!(unsafe { pmclog_read(parser.cookie, ev) }, 0);
    // SAFETY: a successful read sets every field outside the union, and pl_cc's fixed fields and
    // first pl_npc program counters, which are all that is read here.
    let (state, ty, npc, pc0) = unsafe {
        ((*ev).pl_state, (*ev).pl_type, (*ev).pl_u.pl_cc.pl_npc, (*ev).pl_u.pl_cc.pl_pc[0])
    };
    assert_eq!((state, ty, npc, pc0), (PMCLOG_OK, PMCLOG_TYPE_CALLCHAIN, 3, PCS[0]));
}

#[test]
fn closing_a_closed_cookie_does_nothing_and_a_closed_cookie_cannot_be_read() {
    let log = encode_log(&[userdata(1)]);
    // SAFETY: a memory parser; the log outlives every call that reads it.
    unsafe {
        let cookie = pmclog_open(PMCLOG_FD_NONE);
        assert!(!cookie.is_null());
        assert_eq!(pmclog_feed(cookie, log.as_ptr().cast_mut().cast(), log.len() as c_int), 0);
        pmclog_close(cookie);
        // A second close: no double free (the allocator would abort), EINVAL.
        set_errno_for_test(0);
        pmclog_close(cookie);
        assert_eq!(errno(), libc::EINVAL);
        // Reading or feeding a closed cookie fails cleanly, touching nothing.
        let mut ev = new_ev();
        ev.pl_state = 77;
        assert_eq!(pmclog_read(cookie, &mut *ev), -1);
        assert_eq!((errno(), ev.pl_state), (libc::EINVAL, 77));
        assert_eq!(pmclog_feed(cookie, log.as_ptr().cast_mut().cast(), 4), -1);
        assert_eq!(errno(), libc::EINVAL);
        // Parsers opened afterwards never get the closed cookie's value, although they reuse
        // its slot: the closed cookie stays closed.
        let others: Vec<_> = (0..64).map(|_| pmclog_open(PMCLOG_FD_NONE)).collect();
        assert!(others.iter().all(|&c| c != cookie));
        for c in others {
            pmclog_close(c);
        }
    }
}

#[test]
fn a_value_pmclog_open_never_returned_is_refused_without_being_touched() {
    let log = encode_log(&[userdata(1)]);
    // SAFETY: none of these values is dereferenced: each is refused as no cookie.
    unsafe {
        let live = pmclog_open(PMCLOG_FD_NONE);
        for bogus in [0x1000usize, 0x10, live.addr() + 16, live.addr() ^ (1 << 40), usize::MAX] {
            let bogus = core::ptr::without_provenance_mut::<c_void>(bogus);
            let mut ev = new_ev();
            set_errno_for_test(0);
            assert_eq!(pmclog_read(bogus, &mut *ev), -1);
            assert_eq!(errno(), libc::EINVAL);
            assert_eq!(pmclog_feed(bogus, log.as_ptr().cast_mut().cast(), 4), -1);
            set_errno_for_test(0);
            pmclog_close(bogus);
            assert_eq!(errno(), libc::EINVAL);
        }
        // The live parser was not disturbed.
        assert_eq!(pmclog_feed(live, log.as_ptr().cast_mut().cast(), log.len() as c_int), 0);
        let mut ev = new_ev();
        assert_eq!(pmclog_read(live, &mut *ev), 0);
        assert_eq!(ev.pl_type, PMCLOG_TYPE_USERDATA);
        pmclog_close(live);
    }
}

#[test]
fn open_and_close_cycles_reuse_the_same_memory() {
    // A million cycles: each closed cookie stays recognised, and nothing accumulates (the
    // handles' unit tests count the slots; here LeakSanitizer or the fuzz targets would notice).
    // SAFETY: each cookie is closed once, by this loop.
    let cookies: Vec<*mut c_void> = (0..1_000_000)
        .map(|_| unsafe {
            let cookie = pmclog_open(PMCLOG_FD_NONE);
            pmclog_close(cookie);
            cookie
        })
        .step_by(100_000)
        .collect();
    let distinct: std::collections::HashSet<usize> = cookies.iter().map(|c| c.addr()).collect();
    assert_eq!(distinct.len(), cookies.len(), "every cookie is its own value");
    for cookie in cookies {
        set_errno_for_test(0);
        // SAFETY: a closed cookie is refused.
        unsafe { pmclog_close(cookie) };
        assert_eq!(errno(), libc::EINVAL);
    }
}

/// Sets the calling thread's `errno`.
fn set_errno_for_test(value: c_int) {
    // SAFETY: the C library returns the calling thread's errno, always writable.
    unsafe { *libc::__errno_location() = value };
}
