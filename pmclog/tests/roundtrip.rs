//! Property tests: any record the encoder accepts decodes back to itself, through every decoder,
//! alone and in sequences.

mod common;

use common::{Owned, OwnedEntry, build_log, encode_vec};
use pmclog::{
    DynLayout, PmcAllocate, PmcDetach, ProcCsw, ProcExit, ProcFork, Records, Step, StreamDecoder,
    SysExit, ThrExit, UserData,
};
use proptest::collection::vec;
use proptest::prelude::*;

/// Bytes without a NUL (the string fields are NUL-terminated), `len` long.
fn text(len: impl Into<proptest::sample::SizeRange>) -> impl Strategy<Value = Vec<u8>> {
    vec(1u8..=255, len)
}

/// Path names of 0 to 1023 bytes (PATH_MAX with its NUL), weighted towards the short ones and the
/// longest ones so both ends and every padding length are covered.
fn path() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![text(0..=12), text(0..=1023), text(1016..=1023)]
}

/// 0 to 512 program counters (PMC_CALLCHAIN_DEPTH_MAX).
fn pcs() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![vec(any::<u64>(), 0..=4), vec(any::<u64>(), 0..=512), vec(any::<u64>(), 505..=512)]
}

/// An event name as the PMCALLOCATEDYN decoder can recognise it: non-empty printable ASCII
/// (`is_ascii_graphic`, so no spaces).
fn event_name(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(0x21u8..=0x7E, 1..=max)
}

/// PMCALLOCATEDYN in both layouts. The two layouts are told apart by looking at the bytes (the
/// record has no version field), so only records whose layout is recognisable can round-trip:
///
/// - Documented (name at 32, no rate): recognised only when offset 32 holds a non-empty printable
///   name, so names are 1..=63 printable bytes; the layout has no rate, so the rate is 0.
/// - Kernel (rate at 32, name at 40, at most 56 bytes): recognised only when the name at 40 is
///   non-empty printable ASCII, and the rate's eight bytes are not all printable (eight printable
///   bytes at 32 followed by a printable name would be read as one documented name; no real reload
///   count looks like that).
fn allocate_dyn() -> impl Strategy<Value = Owned> {
    let kernel_rate = any::<u64>().prop_filter("rate bytes must not all be printable", |rate| {
        !rate.to_le_bytes().iter().all(u8::is_ascii_graphic)
    });
    let kernel = (any::<u32>(), any::<u32>(), any::<u32>(), kernel_rate, event_name(56)).prop_map(
        |(pmcid, event, flags, rate, name)| Owned::PmcAllocateDyn {
            pmcid,
            event,
            flags,
            rate,
            name,
            layout: DynLayout::Kernel,
        },
    );
    let documented = (any::<u32>(), any::<u32>(), any::<u32>(), event_name(63)).prop_map(
        |(pmcid, event, flags, name)| Owned::PmcAllocateDyn {
            pmcid,
            event,
            flags,
            rate: 0,
            name,
            layout: DynLayout::Documented,
        },
    );
    prop_oneof![kernel, documented]
}

/// Any record except CLOSELOG (which ends a log).
fn open_record() -> impl Strategy<Value = Owned> {
    prop_oneof![
        Just(Owned::DropNotify),
        (any::<u32>(), any::<u32>(), any::<u64>(), any::<i64>(), any::<i64>(), text(0..=63))
            .prop_map(|(version, cpu_type, tsc_freq, time_sec, time_nsec, cpuid)| {
                Owned::Initialize { version, cpu_type, tsc_freq, time_sec, time_nsec, cpuid }
            }),
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u64>()).prop_map(
            |(pmcid, event, flags, rate)| Owned::PmcAllocate(PmcAllocate {
                pmcid,
                event,
                flags,
                rate
            })
        ),
        (any::<u32>(), any::<i32>(), path()).prop_map(|(pmcid, pid, path)| Owned::PmcAttach {
            pmcid,
            pid,
            path
        }),
        (any::<u32>(), any::<i32>())
            .prop_map(|(pmcid, pid)| Owned::PmcDetach(PmcDetach { pmcid, pid })),
        (any::<u64>(), any::<u32>(), any::<i32>(), any::<i32>()).prop_map(
            |(value, pmcid, pid, tid)| Owned::ProcCsw(ProcCsw { value, pmcid, pid, tid })
        ),
        (any::<i32>(), any::<u32>(), any::<u64>(), any::<u64>(), path()).prop_map(
            |(pid, pmcid, base_addr, dyn_addr, path)| Owned::ProcExec {
                pid,
                pmcid,
                base_addr,
                dyn_addr,
                path
            }
        ),
        (any::<u32>(), any::<i32>(), any::<u64>())
            .prop_map(|(pmcid, pid, value)| Owned::ProcExit(ProcExit { pmcid, pid, value })),
        (any::<i32>(), any::<i32>())
            .prop_map(|(old_pid, new_pid)| Owned::ProcFork(ProcFork { old_pid, new_pid })),
        any::<i32>().prop_map(|pid| Owned::SysExit(SysExit { pid })),
        any::<u32>().prop_map(|data| Owned::UserData(UserData { data })),
        (any::<i32>(), any::<u64>(), path()).prop_map(|(pid, start, path)| Owned::MapIn {
            pid,
            start,
            path
        }),
        (any::<i32>(), any::<u64>(), any::<u64>())
            .prop_map(|(pid, start, end)| Owned::MapOut(pmclog::MapOut { pid, start, end })),
        (any::<i32>(), any::<i32>(), any::<u32>(), any::<u32>(), pcs()).prop_map(
            |(pid, tid, pmcid, cpuflags, pcs)| Owned::Callchain { pid, tid, pmcid, cpuflags, pcs }
        ),
        allocate_dyn(),
        (any::<i32>(), any::<i32>(), any::<u32>(), text(0..=19))
            .prop_map(|(tid, pid, flags, name)| Owned::ThrCreate { tid, pid, flags, name }),
        any::<i32>().prop_map(|tid| Owned::ThrExit(ThrExit { tid })),
        (any::<i32>(), any::<u32>(), text(0..=19))
            .prop_map(|(pid, flags, comm)| Owned::ProcCreate { pid, flags, comm }),
    ]
}

/// Any record.
fn any_record() -> impl Strategy<Value = Owned> {
    prop_oneof![19 => open_record(), 1 => Just(Owned::CloseLog)]
}

proptest! {
    #[test]
    fn one_record_round_trips(owned in any_record(), tsc in any::<u64>(), offset in any::<u32>()) {
        let record = owned.as_record();
        let len = owned.expected_len();
        prop_assert_eq!(pmclog::encoded_len(&record), Ok(len));

        // The encoder writes exactly `len` bytes, all of them, and nothing after.
        let mut buf = vec![0xA5u8; len + 16];
        prop_assert_eq!(pmclog::encode(&record, tsc, &mut buf), Ok(len));
        prop_assert!(buf[len..].iter().all(|&b| b == 0xA5));
        let mut zeroed = vec![0u8; len];
        prop_assert_eq!(pmclog::encode(&record, tsc, &mut zeroed), Ok(len));
        prop_assert_eq!(&zeroed[..], &buf[..len]);
        let bytes = &buf[..len];

        // The header, checked against freebsd-abi.md §3.2.
        let word = u32::from_le_bytes(bytes[..4].try_into().unwrap());
        prop_assert_eq!(word, 0xEE << 24 | u32::from(owned.type_code()) << 16 | len as u32);
        prop_assert_eq!(&bytes[4..8], &[0, 0, 0, 0]);
        prop_assert_eq!(&bytes[8..16], &tsc.to_le_bytes());

        // decode_record, at any stream offset, with more data after the record.
        let offset = u64::from(offset);
        let decoded = pmclog::decode_record(&buf, offset);
        prop_assert_eq!(decoded, Ok((record, tsc, len)));

        // Records.
        let mut records = Records::new(bytes);
        let entry = records.next().expect("one record").expect("valid");
        prop_assert_eq!((entry.offset, entry.count, entry.tsc, entry.raw), (0, 1, tsc, bytes));
        prop_assert_eq!(entry.record, record);
        prop_assert!(records.next().is_none());

        // StreamDecoder.
        let mut decoder = StreamDecoder::new();
        let (used, step) = decoder.next(bytes);
        prop_assert_eq!(used, len);
        match step {
            Step::Record(entry) => {
                prop_assert_eq!((entry.offset, entry.count, entry.tsc, entry.raw), (0, 1, tsc, bytes));
                prop_assert_eq!(entry.record, record);
            }
            other => prop_assert!(false, "stream decoder returned {:?}", other),
        }
        let (used, step) = decoder.next(&[]);
        prop_assert_eq!(used, 0);
        if owned == Owned::CloseLog {
            prop_assert_eq!(step, Step::Eof);
        } else {
            prop_assert_eq!(step, Step::NeedData);
        }
        prop_assert_eq!(decoder.end_of_input(), Step::Eof);

        // And what was decoded encodes to the same bytes again.
        prop_assert_eq!(encode_vec(&entry.record, tsc), bytes.to_vec());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn record_sequences_round_trip(
        body in vec((open_record(), any::<u64>()), 0..12),
        close in any::<bool>(),
        close_tsc in any::<u64>(),
        trailing in vec(any::<u8>(), 0..40),
        chunk in 1usize..200,
    ) {
        let mut records = body;
        if close {
            records.push((Owned::CloseLog, close_tsc));
        }
        let (mut log, expected) = build_log(&records);
        prop_assert_eq!(expected.len(), records.len());
        if close {
            // Nothing after CLOSELOG is read.
            log.extend_from_slice(&trailing);
        }

        // The expected entries, from the lengths in freebsd-abi.md §3.3.
        let mut offset = 0u64;
        for (i, (entry, (owned, tsc))) in expected.iter().zip(&records).enumerate() {
            prop_assert_eq!(entry.offset, offset);
            prop_assert_eq!(entry.count, i as u64 + 1);
            prop_assert_eq!(entry.tsc, *tsc);
            prop_assert_eq!(&entry.raw[..], &log[offset as usize..][..owned.expected_len()]);
            offset += owned.expected_len() as u64;
        }

        let records_result = common::via_records(&log);
        prop_assert_eq!(&records_result.entries, &expected);
        prop_assert_eq!(records_result.end, common::End::Eof);

        let whole = common::via_stream([&log[..]]);
        prop_assert_eq!(&whole, &records_result);
        let chunked = common::via_stream_chunked(&log, chunk);
        prop_assert_eq!(&chunked, &records_result);

        // decode_record, record after record.
        let mut position = 0;
        let mut from_decode_record = Vec::new();
        for (owned, tsc) in &records {
            let (record, got_tsc, len) = pmclog::decode_record(&log[position..], position as u64)
                .expect("valid record");
            prop_assert_eq!(record, owned.as_record());
            prop_assert_eq!(got_tsc, *tsc);
            prop_assert_eq!(len, owned.expected_len());
            from_decode_record.push(OwnedEntry {
                offset: position as u64,
                count: from_decode_record.len() as u64 + 1,
                tsc: got_tsc,
                raw: log[position..position + len].to_vec(),
                record: Owned::from_record(&record),
            });
            position += len;
        }
        prop_assert_eq!(&from_decode_record, &expected);
    }
}
