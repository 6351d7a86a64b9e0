//! Golden bytes for every pmclog record type, written by hand from the layout tables of
//! freebsd-abi.md §3.2–3.4 (amd64, little-endian). Each record is a 16-byte header — the word
//! `0xEE << 24 | type << 16 | length`, a spare word (zero), the 64-bit TSC — followed by its payload.
//! Bytes FreeBSD leaves uninitialised (spare word, pads, the bytes after a NUL) are zero here,
//! as the encoder promises to write them.
//!
//! For every record: decoding the bytes gives exactly the record written out below, and encoding
//! that record gives exactly the bytes.

mod common;

use common::{Owned, hex};
use pmclog::{
    CALLCHAIN_DEPTH_MAX, COMM_LEN, CPUID_LEN, Callchain, CallchainFlags, DecodeError, DynLayout,
    EncodeError, HEADER_LEN, HEADER_MAGIC, Initialize, MAX_RECORD_LEN, MapIn, MapOut,
    MultipartError, MultipartKind, NAME_MAX, PATH_MAX, PmcAllocate, PmcAllocateDyn, PmcAttach,
    PmcDetach, ProcCreate, ProcCsw, ProcExec, ProcExit, ProcFork, ProgramCounters, Record,
    RecordType, Records, Step, StreamDecoder, SysExit, ThrCreate, ThrExit, UserData,
};

/// Checks one golden record: the bytes decode to `expected` (through `decode_record`, `Records`
/// and `StreamDecoder`) and `expected` encodes to the bytes.
fn check(golden: &str, tsc: u64, expected: Record<'_>) {
    let bytes = hex(golden);
    let len = bytes.len();
    assert_eq!(len % 4, 0, "golden record length {len} is not a multiple of 4");
    assert_eq!(bytes[3], 0xEE, "golden header magic");
    assert_eq!(bytes[2], expected.record_type().code(), "golden type byte");
    assert_eq!(usize::from(u16::from_le_bytes([bytes[0], bytes[1]])), len, "golden length");

    // Decoding.
    assert_eq!(pmclog::decode_record(&bytes, 0), Ok((expected, tsc, len)));
    let mut followed = bytes.clone();
    followed.extend_from_slice(&hex("10 00 01 ee 00 00 00 00 00 00 00 00 00 00 00 00"));
    assert_eq!(pmclog::decode_record(&followed, 0x1234), Ok((expected, tsc, len)));
    let mut records = Records::new(&bytes);
    let entry = records.next().expect("one record").expect("a valid record");
    assert_eq!((entry.offset, entry.count, entry.tsc, entry.raw), (0, 1, tsc, &bytes[..]));
    assert_eq!(entry.record, expected);
    assert_eq!(entry.end_offset(), len as u64);
    assert!(records.next().is_none());
    let mut decoder = StreamDecoder::new();
    match decoder.next(&bytes) {
        (used, Step::Record(entry)) => {
            assert_eq!(used, len);
            assert_eq!((entry.offset, entry.count, entry.tsc, entry.raw), (0, 1, tsc, &bytes[..]));
            assert_eq!(entry.record, expected);
        }
        other => panic!("stream decoder returned {other:?}"),
    }

    // Encoding.
    assert_eq!(pmclog::encoded_len(&expected), Ok(len));
    let mut buf = vec![0xA5; len + 8];
    assert_eq!(pmclog::encode(&expected, tsc, &mut buf), Ok(len));
    assert_eq!(&buf[..len], &bytes[..], "encoded bytes differ from the golden bytes");
    assert!(buf[len..].iter().all(|&b| b == 0xA5), "encode wrote past the record");
    let mut exact = vec![0x5A; len];
    assert_eq!(pmclog::encode(&expected, tsc, &mut exact), Ok(len));
    assert_eq!(exact, bytes);

    // A buffer one byte too small is refused and left untouched.
    let mut small = vec![0x5A; len - 1];
    assert_eq!(
        pmclog::encode(&expected, tsc, &mut small),
        Err(EncodeError::BufferTooSmall { needed: len, available: len - 1 })
    );
    assert!(small.iter().all(|&b| b == 0x5A), "a refused encode wrote into the buffer");
    assert_eq!(
        pmclog::encode(&expected, tsc, &mut []),
        Err(EncodeError::BufferTooSmall { needed: len, available: 0 })
    );
}

const CLOSELOG: &str = "
    10 00 01 ee  00 00 00 00  11 22 33 44 55 66 77 88
";

#[test]
fn closelog() {
    check(CLOSELOG, 0x8877_6655_4433_2211, Record::CloseLog);
}

const DROPNOTIFY: &str = "
    10 00 02 ee  00 00 00 00  00 00 00 00 00 00 00 00
";

#[test]
fn dropnotify() {
    check(DROPNOTIFY, 0, Record::DropNotify);
}

const INITIALIZE: &str = "
    70 00 03 ee  00 00 00 00  00 10 00 00 00 00 00 00
    00 00 00 0a                 # 16 pl_version 0x0a000000
    98 00 00 00                 # 20 pl_cpu INTEL_SKYLAKE
    00 18 0d 8f 00 00 00 00     # 24 pl_tsc_freq 2400000000
    00 f1 53 65 00 00 00 00     # 32 tv_sec 1700000000
    15 cd 5b 07 00 00 00 00     # 40 tv_nsec 123456789
    47 65 6e 75 69 6e 65 49 6e 74 65 6c 2d 36 2d 35   # 48 pl_cpuid 'GenuineIntel-6-55'
    35 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
";

#[test]
fn initialize() {
    // The reference quotes this header word.
    assert_eq!(&hex(INITIALIZE)[..4], &0xEE03_0070u32.to_le_bytes());
    check(
        INITIALIZE,
        0x1000,
        Record::Initialize(Initialize {
            version: 0x0A00_0000,
            cpu_type: 0x98,
            tsc_freq: 2_400_000_000,
            time_sec: 1_700_000_000,
            time_nsec: 123_456_789,
            cpuid: b"GenuineIntel-6-55",
        }),
    );
}

const PMCALLOCATE: &str = "
    28 00 05 ee  00 00 00 00  01 00 00 00 05 00 00 00
    03 07 f2 ff                 # 16 pmcid 0xfff20703
    00 00 01 00                 # 20 event 0x10000 (INSTR_RETIRED_ANY)
    80 00 00 00                 # 24 flags PMC_F_CALLCHAIN
    00 00 00 00                 # 28 pad
    a3 86 01 00 00 00 00 00     # 32 rate 100003
";

#[test]
fn pmcallocate() {
    assert_eq!(&hex(PMCALLOCATE)[..4], &0xEE05_0028u32.to_le_bytes());
    check(
        PMCALLOCATE,
        0x0000_0005_0000_0001,
        Record::PmcAllocate(PmcAllocate {
            pmcid: 0xFFF2_0703,
            event: 0x10000,
            flags: 0x80,
            rate: 100_003,
        }),
    );
}

const PMCATTACH: &str = "
    24 00 06 ee  00 00 00 00  ff ff ff ff ff ff ff 7f
    03 07 f3 ff                 # 16 pmcid 0xfff30703
    01 00 00 00                 # 20 pid 1
    2f 73 62 69 6e 2f 69 6e 69 74 00 00   # 24 '/sbin/init', NUL, 1 byte of padding
";

#[test]
fn pmcattach() {
    check(
        PMCATTACH,
        i64::MAX as u64,
        Record::PmcAttach(PmcAttach { pmcid: 0xFFF3_0703, pid: 1, path: b"/sbin/init" }),
    );
}

const PMCDETACH: &str = "
    18 00 07 ee  00 00 00 00  08 07 06 05 04 03 02 01
    03 07 f3 ff                 # 16 pmcid
    01 00 00 00                 # 20 pid 1
";

#[test]
fn pmcdetach() {
    check(
        PMCDETACH,
        0x0102_0304_0506_0708,
        Record::PmcDetach(PmcDetach { pmcid: 0xFFF3_0703, pid: 1 }),
    );
}

const PROCCSW: &str = "
    28 00 08 ee  00 00 00 00  00 00 00 00 00 00 00 80
    01 00 00 00 00 00 00 80     # 16 value 0x8000000000000001
    03 07 f3 ff                 # 24 pmcid
    d2 04 00 00                 # 28 pid 1234
    1b 87 01 00                 # 32 tid 100123
    00 00 00 00                 # 36 pad
";

#[test]
fn proccsw() {
    check(
        PROCCSW,
        1 << 63,
        Record::ProcCsw(ProcCsw {
            value: 0x8000_0000_0000_0001,
            pmcid: 0xFFF3_0703,
            pid: 1234,
            tid: 100_123,
        }),
    );
}

const PROCEXEC: &str = "
    38 00 09 ee  00 00 00 00  09 00 00 00 00 00 00 00
    d2 04 00 00                 # 16 pid 1234
    03 07 f3 ff                 # 20 pmcid
    00 00 00 01 08 00 00 00     # 24 pl_base 0x801000000
    00 00 20 00 00 00 00 00     # 32 pl_dyn 0x200000
    2f 75 73 72 2f 62 69 6e 2f 65 6e 76 00 00 00 00   # 40 '/usr/bin/env', NUL, 3 bytes of padding
";

#[test]
fn procexec() {
    check(
        PROCEXEC,
        9,
        Record::ProcExec(ProcExec {
            pid: 1234,
            pmcid: 0xFFF3_0703,
            base_addr: 0x8_0100_0000,
            dyn_addr: 0x20_0000,
            path: b"/usr/bin/env",
        }),
    );
}

const PROCEXIT: &str = "
    20 00 0a ee  00 00 00 00  0a 00 00 00 00 00 00 00
    03 07 f3 ff                 # 16 pmcid
    d3 04 00 00                 # 20 pid 1235
    07 ca 9a 3b 00 00 00 00     # 24 value 1000000007
";

#[test]
fn procexit() {
    check(
        PROCEXIT,
        10,
        Record::ProcExit(ProcExit { pmcid: 0xFFF3_0703, pid: 1235, value: 1_000_000_007 }),
    );
}

const PROCFORK: &str = "
    18 00 0b ee  00 00 00 00  0b 00 00 00 00 00 00 00
    d2 04 00 00                 # 16 oldpid 1234
    d3 04 00 00                 # 20 newpid 1235
";

#[test]
fn procfork() {
    check(PROCFORK, 11, Record::ProcFork(ProcFork { old_pid: 1234, new_pid: 1235 }));
}

const SYSEXIT: &str = "
    18 00 0c ee  00 00 00 00  0c 00 00 00 00 00 00 00
    e1 10 00 00                 # 16 pid 4321
    00 00 00 00                 # 20 pad
";

#[test]
fn sysexit() {
    check(SYSEXIT, 12, Record::SysExit(SysExit { pid: 4321 }));
}

const USERDATA: &str = "
    18 00 0d ee  00 00 00 00  0d 00 00 00 00 00 00 00
    ef be ad de                 # 16 userdata 0xdeadbeef
    00 00 00 00                 # 20 pad
";

#[test]
fn userdata() {
    // freebsd-abi.md §3.3: USERDATA is 0xEE0D0018, stored as bytes 18 00 0D EE.
    assert_eq!(&hex(USERDATA)[..4], &[0x18, 0x00, 0x0D, 0xEE]);
    check(USERDATA, 13, Record::UserData(UserData { data: 0xDEAD_BEEF }));
}

const MAP_IN: &str = "
    28 00 0e ee  00 00 00 00  0e 00 00 00 00 00 00 00
    d2 04 00 00                 # 16 pid 1234
    00 00 00 00                 # 20 pad
    00 00 40 00 00 00 00 00     # 24 start 0x400000
    2f 62 69 6e 2f 73 68 00     # 32 '/bin/sh', NUL, no padding
";

#[test]
fn map_in() {
    assert_eq!(&hex(MAP_IN)[..4], &0xEE0E_0028u32.to_le_bytes());
    check(MAP_IN, 14, Record::MapIn(MapIn { pid: 1234, start: 0x40_0000, path: b"/bin/sh" }));
}

const MAP_IN_KERNEL: &str = "
    38 00 0e ee  00 00 00 00  0e 00 00 00 00 00 00 00
    ff ff ff ff                 # 16 pid -1 (kernel)
    00 00 00 00                 # 20 pad
    00 00 20 80 ff ff ff ff     # 24 start 0xffffffff80200000
    2f 62 6f 6f 74 2f 6b 65 72 6e 65 6c 2f 68 77 70   # 32 '/boot/kernel/hwpmc.ko'
    6d 63 2e 6b 6f 00 00 00                           #    NUL, 2 bytes of padding
";

#[test]
fn map_in_of_a_kernel_module() {
    check(
        MAP_IN_KERNEL,
        14,
        Record::MapIn(MapIn {
            pid: -1,
            start: 0xffff_ffff_8020_0000,
            path: b"/boot/kernel/hwpmc.ko",
        }),
    );
}

const MAP_IN_EMPTY_PATH: &str = "
    24 00 0e ee  00 00 00 00  0e 00 00 00 00 00 00 00
    07 00 00 00  00 00 00 00  00 10 00 00 00 00 00 00
    00 00 00 00                 # 32 '' (just the NUL and padding)
";

#[test]
fn map_in_with_an_empty_path() {
    check(MAP_IN_EMPTY_PATH, 14, Record::MapIn(MapIn { pid: 7, start: 0x1000, path: b"" }));
}

const MAP_OUT: &str = "
    28 00 0f ee  00 00 00 00  0f 00 00 00 00 00 00 00
    d2 04 00 00                 # 16 pid 1234
    00 00 00 00                 # 20 pad
    00 00 40 00 00 00 00 00     # 24 start 0x400000
    00 00 4a 00 00 00 00 00     # 32 end 0x4a0000
";

#[test]
fn map_out() {
    check(MAP_OUT, 15, Record::MapOut(MapOut { pid: 1234, start: 0x40_0000, end: 0x4a_0000 }));
}

const CALLCHAIN: &str = "
    38 00 10 ee  00 00 00 00  06 05 04 03 02 01 00 00
    d2 04 00 00                 # 16 pid 1234
    1b 87 01 00                 # 20 tid 100123
    03 07 f2 ff                 # 24 pmcid 0xfff20703
    01 00 02 00                 # 28 cpuflags: cpu 2, PMC_CC_F_USERSPACE
    f0 a3 20 00 00 00 00 00     # 32 pc[0] 0x20a3f0
    04 b1 20 00 00 00 00 00     # 40 pc[1] 0x20b104
    a8 c2 e3 00 08 00 00 00     # 48 pc[2] 0x800e3c2a8
";

#[test]
fn callchain() {
    let pcs = [0x20a3f0, 0x20b104, 0x8_00e3_c2a8];
    let expected = Record::Callchain(Callchain {
        pid: 1234,
        tid: 100_123,
        pmcid: 0xFFF2_0703,
        cpuflags: CallchainFlags(0x0002_0001),
        pcs: ProgramCounters::from_words(&pcs),
    });
    check(CALLCHAIN, 0x0102_0304_0506, expected);

    let bytes = hex(CALLCHAIN);
    let Ok((Record::Callchain(decoded), _, _)) = pmclog::decode_record(&bytes, 0) else {
        panic!("not a callchain")
    };
    assert_eq!(decoded.cpuflags, CallchainFlags::new(2, 1));
    assert_eq!(decoded.cpuflags.cpu(), 2);
    assert_eq!(decoded.cpuflags.flags(), 1);
    assert!(decoded.cpuflags.is_user());
    assert!(!decoded.cpuflags.is_multipart());
    assert_eq!(decoded.multipart(), None);
    assert_eq!(decoded.pcs.len(), 3);
    assert!(!decoded.pcs.is_empty());
    assert_eq!(decoded.pcs.iter().collect::<Vec<_>>(), pcs);
    assert_eq!(decoded.pcs.get(2), Some(0x8_00e3_c2a8));
    assert_eq!(decoded.pcs.get(3), None);
    assert_eq!(format!("{:?}", decoded.pcs), "[0x20a3f0, 0x20b104, 0x800e3c2a8]");
}

const CALLCHAIN_NO_FRAMES: &str = "
    20 00 10 ee  00 00 00 00  10 00 00 00 00 00 00 00
    0b 00 00 00                 # 16 pid 11
    a1 86 01 00                 # 20 tid 100001
    00 03 00 00                 # 24 pmcid 0x300
    00 00 03 00                 # 28 cpuflags: cpu 3, kernel mode
";

#[test]
fn callchain_without_frames() {
    check(
        CALLCHAIN_NO_FRAMES,
        16,
        Record::Callchain(Callchain {
            pid: 11,
            tid: 100_001,
            pmcid: 0x300,
            cpuflags: CallchainFlags::new(3, 0),
            pcs: ProgramCounters::from_words(&[]),
        }),
    );
}

const CALLCHAIN_IBS: &str = "
    58 00 10 ee  00 00 00 00  20 00 00 00 00 00 00 00
    d2 04 00 00                 # 16 pid 1234
    1b 87 01 00                 # 20 tid 100123
    00 03 00 00                 # 24 pmcid 0x300 (class IBS)
    03 00 05 00                 # 28 cpuflags: cpu 5, USERSPACE | MULTIPART
    02 04 01 02 00 00 00 00     # 32 pc[0] parts: (IBS_FETCH, 4 words), (CALLCHAIN, 2 words)
    ff ff 01 00 00 00 03 00     # 40 fetch CTL
    05 00 00 00 00 00 00 00     # 48 fetch EXTCTL
    00 10 20 00 00 00 00 00     # 56 fetch LINADDR
    00 50 34 12 00 00 00 00     # 64 fetch PHYSADDR
    10 10 20 00 00 00 00 00     # 72 callchain pc 0x201010
    a0 20 20 00 00 00 00 00     # 80 callchain pc 0x2020a0
";

#[test]
fn multipart_ibs_callchain() {
    let pcs = [
        0x0000_0000_0201_0402,
        0x0003_0000_0001_ffff,
        0x5,
        0x20_1000,
        0x1234_5000,
        0x20_1010,
        0x20_20a0,
    ];
    check(
        CALLCHAIN_IBS,
        0x20,
        Record::Callchain(Callchain {
            pid: 1234,
            tid: 100_123,
            pmcid: 0x300,
            cpuflags: CallchainFlags::new(5, 3),
            pcs: ProgramCounters::from_words(&pcs),
        }),
    );

    let bytes = hex(CALLCHAIN_IBS);
    let Ok((Record::Callchain(decoded), _, _)) = pmclog::decode_record(&bytes, 0) else {
        panic!("not a callchain")
    };
    assert!(decoded.cpuflags.is_multipart());
    assert!(decoded.cpuflags.is_user());
    assert_eq!(decoded.cpuflags.cpu(), 5);
    let multipart = decoded.multipart().expect("multipart flag set").expect("valid parts");
    let parts: Vec<_> = multipart.parts().collect();
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].kind, MultipartKind::IbsFetch);
    assert_eq!(parts[0].first, 1);
    assert_eq!(
        parts[0].words.iter().collect::<Vec<_>>(),
        [0x0003_0000_0001_ffff, 0x5, 0x20_1000, 0x1234_5000]
    );
    assert_eq!(parts[1].kind, MultipartKind::Callchain);
    assert_eq!(parts[1].first, 5);
    assert_eq!(parts[1].words.iter().collect::<Vec<_>>(), [0x20_1010, 0x20_20a0]);
    assert_eq!(multipart.callchain(), Some(parts[1]));
}

#[test]
fn multipart_header_that_claims_too_much_or_is_missing() {
    // (IBS_OP, 9 words) with only 3 words after the header.
    let words = [0x0903, 1, 2, 3];
    let chain = Callchain {
        pid: 1,
        tid: 2,
        pmcid: 0x300,
        cpuflags: CallchainFlags::new(0, 2),
        pcs: ProgramCounters::from_words(&words),
    };
    assert_eq!(
        chain.multipart(),
        Some(Err(MultipartError::PartsOverrun { claimed: 9, available: 3 }))
    );
    // The boundary: parts that use exactly the words there are, and one word more.
    let exact = [0x0203, 1, 2];
    let exact = Callchain { pcs: ProgramCounters::from_words(&exact), ..chain };
    let parts: Vec<_> = exact.multipart().unwrap().unwrap().parts().collect();
    assert_eq!(parts.len(), 1);
    assert_eq!((parts[0].kind, parts[0].first), (MultipartKind::IbsOp, 1));
    assert_eq!(parts[0].words.iter().collect::<Vec<_>>(), [1, 2]);
    let over = [0x0303, 1, 2];
    let over = Callchain { pcs: ProgramCounters::from_words(&over), ..chain };
    assert_eq!(
        over.multipart(),
        Some(Err(MultipartError::PartsOverrun { claimed: 3, available: 2 }))
    );
    // (IBS_FETCH, 1), (CALLCHAIN, 2) with 2 words: the second part runs over.
    let second = [0x0201_0102, 1, 2];
    let second = Callchain { pcs: ProgramCounters::from_words(&second), ..chain };
    assert_eq!(
        second.multipart(),
        Some(Err(MultipartError::PartsOverrun { claimed: 3, available: 2 }))
    );
    // The same from decoded (byte-backed) program counters.
    let bytes = common::encode_vec(&Record::Callchain(over), 0);
    let Ok((Record::Callchain(decoded), _, _)) = pmclog::decode_record(&bytes, 0) else {
        panic!("not a callchain")
    };
    assert_eq!(
        decoded.multipart(),
        Some(Err(MultipartError::PartsOverrun { claimed: 3, available: 2 }))
    );
    let empty = Callchain { pcs: ProgramCounters::from_words(&[]), ..chain };
    assert_eq!(empty.multipart(), Some(Err(MultipartError::Empty)));
    // An unknown part type is kept, and a type-0 pair ends the list.
    let words = [0x0003_0000_0101_0107, 0xAA, 0xBB]; // (7, 1), (1, 1), (0, 0), (3, 0)
    let unknown = Callchain { pcs: ProgramCounters::from_words(&words), ..chain };
    let parts: Vec<_> = unknown.multipart().unwrap().unwrap().parts().collect();
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].kind, MultipartKind::Unknown(7));
    assert_eq!(parts[0].words.iter().collect::<Vec<_>>(), [0xAA]);
    assert_eq!(parts[1].kind, MultipartKind::Callchain);
    assert_eq!(parts[1].first, 2);
    assert_eq!(parts[1].words.iter().collect::<Vec<_>>(), [0xBB]);
    assert_eq!(unknown.multipart().unwrap().unwrap().callchain(), Some(parts[1]));
}

const PMCALLOCATEDYN_KERNEL: &str = "
    60 00 11 ee  00 00 00 00  11 00 00 00 00 00 00 00
    00 0f 30 00                 # 16 pmcid 0x300f00
    05 00 02 00                 # 20 event 0x20005
    00 00 00 00                 # 24 flags
    00 00 00 00                 # 28 pad
    e8 03 00 00 00 00 00 00     # 32 rate 1000 (what kernels write)
    43 4c 4f 43 4b 2e 50 52 4f 46 00 00 00 00 00 00   # 40 'CLOCK.PROF', cut to 56 bytes
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 00
";

#[test]
fn pmcallocatedyn_kernel_layout() {
    check(
        PMCALLOCATEDYN_KERNEL,
        17,
        Record::PmcAllocateDyn(PmcAllocateDyn {
            pmcid: 0x0030_0F00,
            event: 0x20005,
            flags: 0,
            rate: 1000,
            name: b"CLOCK.PROF",
            layout: DynLayout::Kernel,
        }),
    );
}

const PMCALLOCATEDYN_KERNEL_FULL_NAME: &str = "
    60 00 11 ee  00 00 00 00  11 00 00 00 00 00 00 00
    00 0f 30 00  05 00 02 00  80 00 00 00  00 00 00 00
    00 00 00 00 00 00 00 00     # 32 rate 0 (the common case: a NUL where the name is read)
    41 42 43 44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50   # 40 'ABCDEFGHIJKLMNOP'
    51 52 53 54 55 56 57 58 59 5a 61 62 63 64 65 66   #    'QRSTUVWXYZabcdef'
    67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 73 74 75 76   #    'ghijklmnopqrstuv'
    77 78 79 7a 30 31 32 33                           #    'wxyz0123': 56 bytes, no NUL
";

#[test]
fn pmcallocatedyn_kernel_layout_with_a_name_that_fills_the_record() {
    check(
        PMCALLOCATEDYN_KERNEL_FULL_NAME,
        17,
        Record::PmcAllocateDyn(PmcAllocateDyn {
            pmcid: 0x0030_0F00,
            event: 0x20005,
            flags: 0x80,
            rate: 0,
            name: b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123",
            layout: DynLayout::Kernel,
        }),
    );
}

const PMCALLOCATEDYN_DOCUMENTED: &str = "
    60 00 11 ee  00 00 00 00  11 00 00 00 00 00 00 00
    00 0f 30 00                 # 16 pmcid
    05 00 02 00                 # 20 event 0x20005
    80 00 00 00                 # 24 flags
    00 00 00 00                 # 28 pad
    43 4c 4f 43 4b 2e 50 52 4f 46 00 00 00 00 00 00   # 32 pl_evname[64] 'CLOCK.PROF'
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
";

#[test]
fn pmcallocatedyn_documented_layout() {
    check(
        PMCALLOCATEDYN_DOCUMENTED,
        17,
        Record::PmcAllocateDyn(PmcAllocateDyn {
            pmcid: 0x0030_0F00,
            event: 0x20005,
            flags: 0x80,
            rate: 0,
            name: b"CLOCK.PROF",
            layout: DynLayout::Documented,
        }),
    );
}

const PMCALLOCATEDYN_DOCUMENTED_SHORT: &str = "
    60 00 11 ee  00 00 00 00  11 00 00 00 00 00 00 00
    01 0f 30 00  06 00 02 00  00 00 00 00  00 00 00 00
    54 49 43 4b 00 00 00 00     # 32 'TICK': shorter than the 8 bytes of a rate
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00   # 40 no text where the kernel puts the name
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 00
";

#[test]
fn pmcallocatedyn_documented_layout_with_a_short_name() {
    check(
        PMCALLOCATEDYN_DOCUMENTED_SHORT,
        17,
        Record::PmcAllocateDyn(PmcAllocateDyn {
            pmcid: 0x0030_0F01,
            event: 0x20006,
            flags: 0,
            rate: 0,
            name: b"TICK",
            layout: DynLayout::Documented,
        }),
    );
}

const THR_CREATE: &str = "
    34 00 12 ee  00 00 00 00  12 00 00 00 00 00 00 00
    1b 87 01 00                 # 16 tid 100123
    d2 04 00 00                 # 20 pid 1234
    02 40 00 10                 # 24 flags 0x10004002
    00 00 00 00                 # 28 pad
    70 6f 6f 6c 2d 77 6f 72 6b 65 72 2d 31 00 00 00   # 32 tdname[20] 'pool-worker-1'
    00 00 00 00
";

#[test]
fn thr_create() {
    check(
        THR_CREATE,
        18,
        Record::ThrCreate(ThrCreate {
            tid: 100_123,
            pid: 1234,
            flags: 0x1000_4002,
            name: b"pool-worker-1",
        }),
    );
}

const THR_EXIT: &str = "
    18 00 13 ee  00 00 00 00  13 00 00 00 00 00 00 00
    1b 87 01 00                 # 16 tid 100123
    00 00 00 00                 # 20 pad
";

#[test]
fn thr_exit() {
    check(THR_EXIT, 19, Record::ThrExit(ThrExit { tid: 100_123 }));
}

const PROC_CREATE: &str = "
    2c 00 14 ee  00 00 00 00  14 00 00 00 00 00 00 00
    d3 04 00 00                 # 16 pid 1235
    02 40 00 10                 # 20 flags 0x10004002
    73 68 00 00 00 00 00 00 00 00 00 00 00 00 00 00   # 24 pcomm[20] 'sh'
    00 00 00 00
";

#[test]
fn proc_create() {
    check(
        PROC_CREATE,
        20,
        Record::ProcCreate(ProcCreate { pid: 1235, flags: 0x1000_4002, comm: b"sh" }),
    );
}

/// Every golden record of this file, in one log.
fn all_golden() -> Vec<&'static str> {
    vec![
        INITIALIZE,
        PMCALLOCATE,
        PMCALLOCATEDYN_KERNEL,
        PMCALLOCATEDYN_KERNEL_FULL_NAME,
        PMCALLOCATEDYN_DOCUMENTED,
        PMCALLOCATEDYN_DOCUMENTED_SHORT,
        PMCATTACH,
        PROCEXEC,
        MAP_IN,
        MAP_IN_KERNEL,
        MAP_IN_EMPTY_PATH,
        CALLCHAIN,
        CALLCHAIN_NO_FRAMES,
        CALLCHAIN_IBS,
        DROPNOTIFY,
        PROCCSW,
        PROCFORK,
        PROC_CREATE,
        THR_CREATE,
        USERDATA,
        MAP_OUT,
        THR_EXIT,
        PROCEXIT,
        SYSEXIT,
        PMCDETACH,
        CLOSELOG,
    ]
}

#[test]
fn every_record_type_has_a_golden_record() {
    let mut seen: Vec<u8> = all_golden().iter().map(|golden| hex(golden)[2]).collect();
    seen.sort();
    seen.dedup();
    let expected: Vec<u8> = (1..=20).filter(|&code| code != 4).collect();
    assert_eq!(seen, expected);
}

#[test]
fn golden_records_concatenated_decode_in_order() {
    let mut log = Vec::new();
    let mut starts = Vec::new();
    for golden in all_golden() {
        starts.push(log.len() as u64);
        log.extend_from_slice(&hex(golden));
    }
    let entries: Vec<_> = Records::new(&log).map(|e| e.expect("valid golden log")).collect();
    assert_eq!(entries.len(), starts.len());
    for (i, (entry, start)) in entries.iter().zip(&starts).enumerate() {
        assert_eq!(entry.offset, *start);
        assert_eq!(entry.count, i as u64 + 1);
        assert_eq!(entry.raw, &hex(all_golden()[i])[..]);
    }
    assert_eq!(entries.last().unwrap().record, Record::CloseLog);
}

/// FreeBSD does not write the spare word, some pads, or the bytes after a NUL; readers ignore them.
#[test]
fn decode_ignores_bytes_freebsd_leaves_uninitialised() {
    let cases: [(&str, &str); 7] = [
        (
            USERDATA,
            "18 00 0d ee  de ad be ef  0d 00 00 00 00 00 00 00
             ef be ad de  55 55 55 55",
        ),
        (
            SYSEXIT,
            "18 00 0c ee  01 02 03 04  0c 00 00 00 00 00 00 00
             e1 10 00 00  ff ff ff ff",
        ),
        (
            THR_EXIT,
            "18 00 13 ee  00 00 00 00  13 00 00 00 00 00 00 00
             1b 87 01 00  aa aa aa aa",
        ),
        (
            PMCATTACH,
            "24 00 06 ee  00 00 00 00  ff ff ff ff ff ff ff 7f
             03 07 f3 ff  01 00 00 00
             2f 73 62 69 6e 2f 69 6e 69 74 00 7e",
        ),
        (
            PROCEXEC,
            "38 00 09 ee  00 00 00 00  09 00 00 00 00 00 00 00
             d2 04 00 00  03 07 f3 ff
             00 00 00 01 08 00 00 00  00 00 20 00 00 00 00 00
             2f 75 73 72 2f 62 69 6e 2f 65 6e 76 00 41 42 43",
        ),
        (
            PROC_CREATE,
            "2c 00 14 ee  00 00 00 00  14 00 00 00 00 00 00 00
             d3 04 00 00  02 40 00 10
             73 68 00 65 6c 6c 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
        ),
        (
            THR_CREATE,
            "34 00 12 ee  00 00 00 00  12 00 00 00 00 00 00 00
             1b 87 01 00  d2 04 00 00  02 40 00 10  99 99 99 99
             70 6f 6f 6c 2d 77 6f 72 6b 65 72 2d 31 00 6f 6c 64 2d 31 00",
        ),
    ];
    for (clean, dirty) in cases {
        let clean = hex(clean);
        let dirty = hex(dirty);
        assert_eq!(clean.len(), dirty.len());
        let (expected, tsc, len) = pmclog::decode_record(&clean, 0).expect("clean record");
        assert_eq!(pmclog::decode_record(&dirty, 0), Ok((expected, tsc, len)));
        // Encoding what was read writes zeros where FreeBSD left garbage.
        assert_eq!(common::encode_vec(&expected, tsc), clean);
    }
}

#[test]
fn fixed_name_fields_may_be_full() {
    // A 20-byte thread name with no NUL is read whole (the field is MAXCOMLEN + 1 bytes)...
    let bytes = hex("
        34 00 12 ee  00 00 00 00  00 00 00 00 00 00 00 00
        01 00 00 00  02 00 00 00  00 00 00 00  00 00 00 00
        61 62 63 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 73 74
    ");
    let expected =
        Record::ThrCreate(ThrCreate { tid: 1, pid: 2, flags: 0, name: b"abcdefghijklmnopqrst" });
    assert_eq!(pmclog::decode_record(&bytes, 0), Ok((expected, 0, 52)));
    // ...and written back the same way, so every decodable record re-encodes.
    assert_eq!(common::encode_vec(&expected, 0), bytes);
}

#[test]
fn header_words_quoted_by_the_reference() {
    assert_eq!(pmclog::parse_header_word(0xEE0D_0018, 0), Ok((RecordType::UserData, 24)));
    assert_eq!(pmclog::parse_header_word(0xEE03_0070, 0), Ok((RecordType::Initialize, 112)));
    assert_eq!(pmclog::parse_header_word(0xEE05_0028, 0), Ok((RecordType::PmcAllocate, 40)));
    assert_eq!(pmclog::parse_header_word(0xEE0E_0028, 0), Ok((RecordType::MapIn, 40)));
    assert_eq!(
        pmclog::parse_header_word(0xEF0D_0018, 0x40),
        Err(DecodeError::BadMagic { offset: 0x40, found: 0xEF })
    );
}

#[test]
fn format_constants() {
    assert_eq!(HEADER_MAGIC, 0xEE);
    assert_eq!(HEADER_LEN, 16);
    assert_eq!(CALLCHAIN_DEPTH_MAX, 512);
    assert_eq!(MAX_RECORD_LEN, 4128);
    assert_eq!(PATH_MAX, 1024);
    assert_eq!(COMM_LEN, 20);
    assert_eq!(CPUID_LEN, 64);
    assert_eq!(NAME_MAX, 64);
}

#[test]
fn record_type_codes_and_names() {
    let table: [(u8, &str); 19] = [
        (1, "CLOSELOG"),
        (2, "DROPNOTIFY"),
        (3, "INITIALIZE"),
        (5, "PMCALLOCATE"),
        (6, "PMCATTACH"),
        (7, "PMCDETACH"),
        (8, "PROCCSW"),
        (9, "PROCEXEC"),
        (10, "PROCEXIT"),
        (11, "PROCFORK"),
        (12, "SYSEXIT"),
        (13, "USERDATA"),
        (14, "MAP_IN"),
        (15, "MAP_OUT"),
        (16, "CALLCHAIN"),
        (17, "PMCALLOCATEDYN"),
        (18, "THR_CREATE"),
        (19, "THR_EXIT"),
        (20, "PROC_CREATE"),
    ];
    assert_eq!(RecordType::ALL.len(), table.len());
    for (record_type, (code, name)) in RecordType::ALL.iter().zip(table) {
        assert_eq!(record_type.code(), code);
        assert_eq!(record_type.name(), name);
        assert_eq!(record_type.to_string(), name);
        assert_eq!(RecordType::from_code(code), Some(*record_type));
    }
    for code in [0, 4, 21, 22, 100, 255] {
        assert_eq!(RecordType::from_code(code), None);
    }
}

#[test]
fn record_type_of_every_sample_record_matches_its_code() {
    for (owned, _) in common::sample_records() {
        assert_eq!(owned.as_record().record_type().code(), owned.type_code(), "{owned:?}");
    }
}

fn map_in_record(path: &[u8]) -> Record<'_> {
    Record::MapIn(MapIn { pid: 1, start: 2, path })
}

/// Checks that `record` cannot be encoded, with `error`, and that nothing is written.
fn refused(record: Record<'_>, error: EncodeError) {
    assert_eq!(pmclog::encoded_len(&record), Err(error));
    let mut buf = vec![0xA5; 8192];
    assert_eq!(pmclog::encode(&record, 1, &mut buf), Err(error));
    assert!(buf.iter().all(|&b| b == 0xA5), "a refused encode wrote into the buffer");
}

#[test]
fn encode_refuses_a_nul_in_a_string() {
    let path = EncodeError::ContainsNul { field: "path" };
    refused(map_in_record(b"/bin\0sh"), path);
    refused(Record::PmcAttach(PmcAttach { pmcid: 1, pid: 2, path: b"\0" }), path);
    refused(
        Record::ProcExec(ProcExec { pid: 1, pmcid: 2, base_addr: 3, dyn_addr: 4, path: b"/x\0" }),
        path,
    );
    refused(
        Record::ProcCreate(ProcCreate { pid: 1, flags: 0, comm: b"s\0h" }),
        EncodeError::ContainsNul { field: "command name" },
    );
    refused(
        Record::ThrCreate(ThrCreate { tid: 1, pid: 2, flags: 0, name: b"a\0" }),
        EncodeError::ContainsNul { field: "thread name" },
    );
    refused(
        Record::Initialize(Initialize {
            version: 0,
            cpu_type: 0,
            tsc_freq: 0,
            time_sec: 0,
            time_nsec: 0,
            cpuid: b"Genuine\0Intel",
        }),
        EncodeError::ContainsNul { field: "cpuid" },
    );
    for layout in [DynLayout::Kernel, DynLayout::Documented] {
        refused(
            Record::PmcAllocateDyn(PmcAllocateDyn {
                pmcid: 1,
                event: 0x20000,
                flags: 0,
                rate: 0,
                name: b"CLOCK\0PROF",
                layout,
            }),
            EncodeError::ContainsNul { field: "event name" },
        );
    }
}

#[test]
fn encode_refuses_strings_that_do_not_fit() {
    let path = vec![b'p'; 1024];
    refused(map_in_record(&path), EncodeError::TooLong { field: "path", len: 1024, max: 1023 });
    refused(
        Record::PmcAttach(PmcAttach { pmcid: 1, pid: 2, path: &path }),
        EncodeError::TooLong { field: "path", len: 1024, max: 1023 },
    );
    assert_eq!(pmclog::encoded_len(&map_in_record(&path[..1023])), Ok(32 + 1024));

    refused(
        Record::ProcCreate(ProcCreate { pid: 1, flags: 0, comm: &[b'c'; 21] }),
        EncodeError::TooLong { field: "command name", len: 21, max: 20 },
    );
    let comm = [b'c'; 20];
    assert_eq!(
        pmclog::encoded_len(&Record::ProcCreate(ProcCreate { pid: 1, flags: 0, comm: &comm })),
        Ok(44)
    );
    refused(
        Record::ThrCreate(ThrCreate { tid: 1, pid: 2, flags: 0, name: &[b't'; 21] }),
        EncodeError::TooLong { field: "thread name", len: 21, max: 20 },
    );
    refused(
        Record::Initialize(Initialize {
            version: 0,
            cpu_type: 0,
            tsc_freq: 0,
            time_sec: 0,
            time_nsec: 0,
            cpuid: &[b'x'; 65],
        }),
        EncodeError::TooLong { field: "cpuid", len: 65, max: 64 },
    );
    let dyn_record = |name, layout| {
        Record::PmcAllocateDyn(PmcAllocateDyn {
            pmcid: 1,
            event: 2,
            flags: 3,
            rate: 4,
            name,
            layout,
        })
    };
    let name = [b'N'; 64];
    refused(
        dyn_record(&name[..57], DynLayout::Kernel),
        EncodeError::TooLong { field: "event name", len: 57, max: 56 },
    );
    assert_eq!(pmclog::encoded_len(&dyn_record(&name[..56], DynLayout::Kernel)), Ok(96));
    refused(
        dyn_record(&name, DynLayout::Documented),
        EncodeError::TooLong { field: "event name", len: 64, max: 63 },
    );
    assert_eq!(pmclog::encoded_len(&dyn_record(&name[..63], DynLayout::Documented)), Ok(96));
}

#[test]
fn encode_refuses_more_than_512_frames() {
    fn chain(pcs: &[u64]) -> Record<'_> {
        Record::Callchain(Callchain {
            pid: 1,
            tid: 2,
            pmcid: 3,
            cpuflags: CallchainFlags(0),
            pcs: ProgramCounters::from_words(pcs),
        })
    }
    let pcs = vec![0x1234u64; 513];
    refused(chain(&pcs), EncodeError::TooManyFrames { frames: 513 });
    let many = vec![0; 100_000];
    refused(chain(&many), EncodeError::TooManyFrames { frames: 100_000 });
    assert_eq!(pmclog::encoded_len(&chain(&pcs[..512])), Ok(MAX_RECORD_LEN));
    let record = common::encode_vec(&chain(&pcs[..512]), 5);
    assert_eq!(&record[..4], &[0x20, 0x10, 0x10, 0xEE]); // 0xEE101020: 4128 bytes
}

#[test]
fn encode_error_messages_say_what_is_wrong() {
    let message = EncodeError::TooLong { field: "path", len: 1024, max: 1023 }.to_string();
    assert!(message.contains("path") && message.contains("1024") && message.contains("1023"));
    let message = EncodeError::ContainsNul { field: "command name" }.to_string();
    assert!(message.contains("command name") && message.contains("NUL"));
    let message = EncodeError::TooManyFrames { frames: 513 }.to_string();
    assert!(message.contains("513") && message.contains("512"));
    let message = EncodeError::BufferTooSmall { needed: 40, available: 39 }.to_string();
    assert!(message.contains("40") && message.contains("39"));
}

#[test]
fn program_counters_from_bytes_ignore_a_short_tail() {
    let bytes = hex("01 00 00 00 00 00 00 00  02 00 00 00 00 00 00 00  03 00 00");
    let pcs = ProgramCounters::from_le_bytes(&bytes);
    assert_eq!(pcs.len(), 2);
    assert_eq!(pcs.iter().collect::<Vec<_>>(), [1, 2]);
    assert_eq!(pcs, ProgramCounters::from_words(&[1, 2]));
    assert_ne!(pcs, ProgramCounters::from_words(&[1, 2, 3]));
    let chain =
        Record::Callchain(Callchain { pid: 1, tid: 1, pmcid: 1, cpuflags: CallchainFlags(0), pcs });
    let encoded = common::encode_vec(&chain, 0);
    assert_eq!(encoded.len(), 48);
    assert_eq!(&encoded[32..], &bytes[..16]);
}

#[test]
fn owned_mirror_round_trips() {
    // The test helpers' owned copy must not lose anything, or other tests would prove nothing.
    for (owned, _) in common::sample_records() {
        assert_eq!(Owned::from_record(&owned.as_record()), owned);
    }
}
