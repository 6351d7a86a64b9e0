//! However a log is cut into pieces, `StreamDecoder` returns the same entries (offset, count, TSC,
//! raw bytes, record) and ends in the same state as `Records` over the whole log.
//!
//! `common::via_stream` checks the per-call invariants on every call: `NeedData` consumes its whole
//! input, an empty feed changes nothing, and the final state is sticky.

mod common;

use common::{Decoded, End, OwnedEntry, build_log, sample_log, split_by, via_records, via_stream};
use pmclog::{DecodeError, Record, Step, StreamDecoder};
use proptest::collection::vec;
use proptest::prelude::*;

/// The sample log, checked once against the entries computed from its records.
fn reference() -> (Vec<u8>, Decoded) {
    let (log, expected) = sample_log();
    let decoded = via_records(&log);
    assert_eq!(decoded.entries, expected, "Records over the sample log");
    assert_eq!(decoded.end, End::Eof);
    assert_eq!(decoded.entries.last().map(|e| &e.record), Some(&common::Owned::CloseLog));
    (log, decoded)
}

#[test]
fn the_sample_log_has_every_record_type_and_the_longest_records() {
    let (log, decoded) = reference();
    let mut codes: Vec<u8> = decoded.entries.iter().map(|e| e.record.type_code()).collect();
    codes.sort();
    codes.dedup();
    assert_eq!(codes, (1..=20).filter(|&c| c != 4).collect::<Vec<u8>>());
    let longest = decoded.entries.iter().map(|e| e.raw.len()).max();
    assert_eq!(longest, Some(pmclog::MAX_RECORD_LEN));
    assert!(decoded.entries.iter().any(|e| e.raw.len() == 40 + pmclog::PATH_MAX));
    assert!(log.len() > pmclog::MAX_RECORD_LEN, "the log is longer than the decoder's buffer");
}

#[test]
fn the_whole_log_in_one_piece() {
    let (log, reference) = reference();
    assert_eq!(via_stream([&log[..]]), reference);
}

#[test]
fn every_single_split_point() {
    let (log, reference) = reference();
    for split in 0..=log.len() {
        let (head, tail) = log.split_at(split);
        assert_eq!(via_stream([head, tail]), reference, "split at {split}");
    }
}

#[test]
fn every_fixed_chunk_size() {
    let (log, reference) = reference();
    for size in 1..=log.len() + 8 {
        assert_eq!(common::via_stream_chunked(&log, size), reference, "chunks of {size} bytes");
    }
}

#[test]
fn data_after_closelog_is_never_read() {
    let (mut log, reference) = reference();
    log.extend_from_slice(&[0xFF; 100]);
    log.extend_from_slice(&common::encode_vec(&Record::DropNotify, 0));
    assert_eq!(via_records(&log), reference);
    for size in [1, 3, 16, 1000, log.len()] {
        assert_eq!(common::via_stream_chunked(&log, size), reference, "chunks of {size} bytes");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_chunk_sequences(sizes in vec(prop_oneof![0usize..=8, 0usize..=600, 4000usize..=5000], 1..64)) {
        let (log, reference) = reference();
        let pieces = split_by(&log, &sizes);
        prop_assert_eq!(via_stream(pieces), reference);
    }
}

/// The sample log without its CLOSELOG, and where each record starts and ends.
fn open_log() -> (Vec<u8>, Vec<OwnedEntry>) {
    let (log, expected) = build_log(&common::records_without_close());
    assert!(expected.iter().all(|e| e.record != common::Owned::CloseLog));
    (log, expected)
}

/// What a decoder must report for the first `cut` bytes of `log` (whose records are `entries`):
/// the records that are wholly inside, then Eof if the cut falls between records or a Truncated
/// error naming the cut record otherwise.
fn expected_at_cut(entries: &[OwnedEntry], cut: usize) -> Decoded {
    let cut = cut as u64;
    let inside: Vec<OwnedEntry> =
        entries.iter().filter(|e| e.offset + e.raw.len() as u64 <= cut).cloned().collect();
    let end = match entries.iter().find(|e| e.offset < cut && cut < e.offset + e.raw.len() as u64) {
        None => End::Eof,
        Some(cut_record) => {
            let have = (cut - cut_record.offset) as usize;
            let need = if have < 4 { 4 } else { cut_record.raw.len() };
            End::Error(DecodeError::Truncated { offset: cut_record.offset, have, need })
        }
    };
    Decoded { entries: inside, end }
}

#[test]
fn a_log_without_closelog_cut_anywhere() {
    let (log, entries) = open_log();
    for cut in 0..=log.len() {
        let prefix = &log[..cut];
        let expected = expected_at_cut(&entries, cut);
        assert_eq!(via_records(prefix), expected, "Records, cut at {cut}");
        assert_eq!(via_stream([prefix]), expected, "one piece, cut at {cut}");
        let (a, b) = prefix.split_at(cut / 2);
        assert_eq!(via_stream([a, b]), expected, "two pieces, cut at {cut}");
    }
    // The whole log ends between records.
    assert_eq!(via_stream([&log[..]]).end, End::Eof);
}

#[test]
fn a_log_without_closelog_in_one_byte_pieces() {
    let (log, entries) = open_log();
    for cut in [0, 1, 2, 3, 4, 5, 15, 16, 111, 112, 113, 114, 115, 116, 150, 151, 152] {
        let expected = expected_at_cut(&entries, cut);
        assert_eq!(common::via_stream_chunked(&log[..cut], 1), expected, "cut at {cut}");
    }
    assert_eq!(common::via_stream_chunked(&log, 1), Decoded { entries, end: End::Eof });
}

#[test]
fn truncation_inside_the_header_word() {
    // INITIALIZE (112 bytes), then 1 to 3 bytes of the next header.
    let (log, _) = open_log();
    for have in 1..4 {
        let decoded = via_stream(log[..112 + have].chunks(5));
        assert_eq!(decoded.entries.len(), 1);
        assert_eq!(decoded.end, End::Error(DecodeError::Truncated { offset: 112, have, need: 4 }));
    }
    // And the first record itself.
    for have in 1..4 {
        let decoded = via_stream([&log[..have]]);
        assert_eq!(decoded.entries, []);
        assert_eq!(decoded.end, End::Error(DecodeError::Truncated { offset: 0, have, need: 4 }));
    }
    // A complete header word is enough to know the record's length.
    let decoded = via_stream([&log[..4]]);
    assert_eq!(decoded.end, End::Error(DecodeError::Truncated { offset: 0, have: 4, need: 112 }));
}

#[test]
fn end_of_input_is_final() {
    let (log, _) = open_log();
    let mut decoder = StreamDecoder::new();
    assert_eq!(decoder.next(&log[..120]).0, 112);
    assert_eq!(decoder.next(&log[112..120]), (8, Step::NeedData));
    let truncated = DecodeError::Truncated { offset: 112, have: 8, need: 40 };
    assert_eq!(decoder.end_of_input(), Step::Error(truncated));
    assert_eq!(decoder.end_of_input(), Step::Error(truncated));
    assert_eq!(decoder.next(&log[120..]), (0, Step::Error(truncated)));
    assert_eq!(decoder.next(&log), (0, Step::Error(truncated)));

    let mut decoder = StreamDecoder::new();
    assert_eq!(decoder.end_of_input(), Step::Eof);
    assert_eq!(decoder.next(&log), (0, Step::Eof));
    assert_eq!(decoder.count(), 0);
}

#[test]
fn an_empty_feed_changes_nothing() {
    let (log, _) = sample_log();
    let mut decoder = StreamDecoder::new();
    let state = |d: &StreamDecoder| (d.offset(), d.count(), d.buffered());

    // Fresh.
    assert_eq!(decoder.next(&[]), (0, Step::NeedData));
    assert_eq!(state(&decoder), (0, 0, 0));
    // Inside the header word.
    assert_eq!(decoder.next(&log[..2]), (2, Step::NeedData));
    assert_eq!(decoder.next(&[]), (0, Step::NeedData));
    assert_eq!(state(&decoder), (0, 0, 2));
    // Inside the record.
    assert_eq!(decoder.next(&log[2..50]), (48, Step::NeedData));
    assert_eq!(decoder.next(&[]), (0, Step::NeedData));
    assert_eq!(state(&decoder), (0, 0, 50));
    // Between records.
    match decoder.next(&log[50..112]) {
        (62, Step::Record(entry)) => assert_eq!((entry.offset, entry.count), (0, 1)),
        other => panic!("{other:?}"),
    }
    assert_eq!(decoder.next(&[]), (0, Step::NeedData));
    assert_eq!(state(&decoder), (112, 1, 0));
    // After the end.
    let (_, entries) = sample_log();
    let mut decoder = StreamDecoder::new();
    let mut rest = &log[..];
    let mut seen = 0;
    loop {
        let (used, step) = decoder.next(rest);
        rest = &rest[used..];
        match step {
            Step::Record(_) => seen += 1,
            Step::Eof => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, entries.len());
    let after = state(&decoder);
    assert_eq!(after, (log.len() as u64, entries.len() as u64, 0));
    assert_eq!(decoder.next(&[]), (0, Step::Eof));
    assert_eq!(state(&decoder), after);
    // After an error.
    let mut decoder = StreamDecoder::new();
    let bad = DecodeError::BadMagic { offset: 0, found: 0 };
    assert_eq!(decoder.next(&[0; 16]), (0, Step::Error(bad)));
    assert_eq!(decoder.next(&[]), (0, Step::Error(bad)));
    assert_eq!(state(&decoder), (0, 0, 0));
}

#[test]
fn need_data_consumes_its_whole_input() {
    let (log, entries) = sample_log();
    // The 512-frame callchain.
    let deep = entries.iter().find(|e| e.raw.len() == pmclog::MAX_RECORD_LEN).unwrap();
    let start = deep.offset as usize;
    let mut decoder = StreamDecoder::new();
    let mut rest = &log[..start + 100];
    let mut records = 0;
    loop {
        let len = rest.len();
        let (used, step) = decoder.next(rest);
        match step {
            Step::Record(_) => records += 1,
            Step::NeedData => {
                assert_eq!(used, len);
                break;
            }
            other => panic!("{other:?}"),
        }
        rest = &rest[used..];
    }
    assert_eq!(records, deep.count - 1);
    assert_eq!(decoder.buffered(), 100);
    assert_eq!(decoder.offset(), deep.offset);
    for piece in log[start + 100..start + 4000].chunks(77) {
        assert_eq!(decoder.next(piece), (piece.len(), Step::NeedData));
    }
    assert_eq!(decoder.buffered(), 4000);
    // The rest of the record and the next record: only the record's bytes are taken.
    let tail = &log[start + 4000..];
    match decoder.next(tail) {
        (128, Step::Record(entry)) => {
            assert_eq!(OwnedEntry::new(&entry), *deep);
        }
        other => panic!("{other:?}"),
    }
}
