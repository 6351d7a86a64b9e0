//! Malformed logs: every decoder reports the exact error, at the offset of the bad record, says
//! what was wrong in its message, and stays stopped. `Records`, `StreamDecoder` (in any chunking)
//! and `LogReader` agree on the records before the error and on the error.

mod common;

use std::io::{self, Cursor, ErrorKind, Read};
use std::panic::{AssertUnwindSafe, catch_unwind};

use common::{
    Decoded, End, OwnedEntry, Rng, build_log, encode_vec, sample_log, split_by, via_reader,
    via_records, via_stream, via_stream_chunked,
};
use pmclog::{
    DecodeError, LogReader, MapIn, PmcAllocate, Record, RecordType, Records, Step, StreamDecoder,
    UserData,
};

/// A record header: the word `0xEE << 24 | code << 16 | length` (with any magic), spare 0, a TSC.
fn header(magic: u8, code: u8, length: u16) -> Vec<u8> {
    let word = u32::from(magic) << 24 | u32::from(code) << 16 | u32::from(length);
    let mut bytes = word.to_le_bytes().to_vec();
    bytes.extend_from_slice(&[0; 4]);
    bytes.extend_from_slice(&0x1122_3344u64.to_le_bytes());
    bytes
}

/// A record of type `code` claiming `length` bytes, with `body` after the header, padded with `fill`
/// up to `total` bytes.
fn record(code: u8, length: u16, body: &[u8], fill: u8, total: usize) -> Vec<u8> {
    let mut bytes = header(0xEE, code, length);
    bytes.extend_from_slice(body);
    bytes.resize(total.max(bytes.len()), fill);
    bytes
}

/// Valid records to put before a bad one: INITIALIZE, PMCALLOCATE, MAP_IN, USERDATA (216 = 0xd8
/// bytes).
fn valid_prefix() -> (Vec<u8>, Vec<OwnedEntry>) {
    let (log, entries) = build_log(&[
        (common::records_without_close()[0].0.clone(), 1),
        (
            common::Owned::PmcAllocate(PmcAllocate {
                pmcid: 0x100,
                event: 0x1000,
                flags: 0,
                rate: 0,
            }),
            2,
        ),
        (common::Owned::MapIn { pid: 5, start: 0x1000, path: b"/bin/sh".to_vec() }, 3),
        (common::Owned::UserData(UserData { data: 7 }), 4),
    ]);
    assert_eq!(log.len(), 0xd8);
    (log, entries)
}

/// Valid records to put after a bad one; no decoder may return them.
fn valid_suffix() -> Vec<u8> {
    let mut bytes = encode_vec(&Record::DropNotify, 5);
    bytes.extend(encode_vec(&Record::MapIn(MapIn { pid: 1, start: 2, path: b"/lib" }), 6));
    bytes.extend(encode_vec(&Record::CloseLog, 7));
    bytes
}

/// The words the message of `error` must contain, besides the offset in hex.
fn message_mentions(error: &DecodeError) -> Vec<String> {
    match *error {
        DecodeError::BadMagic { found, .. } => vec!["bad magic".into(), format!("0x{found:02x}")],
        DecodeError::UnknownType { code, .. } => {
            vec!["unknown record type".into(), code.to_string()]
        }
        DecodeError::BadLength { record_type, length, .. } => {
            vec!["impossible length".into(), length.to_string(), record_type.name().into()]
        }
        DecodeError::CallchainTooDeep { frames, .. } => {
            vec!["callchain".into(), frames.to_string(), "512".into()]
        }
        DecodeError::PathNotTerminated { record_type, .. } => {
            vec!["not NUL-terminated".into(), record_type.name().into()]
        }
        DecodeError::Truncated { have, need, .. } => {
            vec!["ends inside".into(), format!("{have} of {need}")]
        }
        other => panic!("a DecodeError this test does not know: {other:?}"),
    }
}

/// Checks that every decoder reports `error(offset)` for `bad`, both as the first record and after
/// the valid prefix, and (unless `at_end`, for truncations) with valid records after it.
fn check(name: &str, bad: &[u8], at_end: bool, error: impl Fn(u64) -> DecodeError) {
    let (prefix, prefix_entries) = valid_prefix();
    for (before, entries) in [(Vec::new(), Vec::new()), (prefix, prefix_entries)] {
        let offset = before.len() as u64;
        let expected_error = error(offset);
        assert_eq!(expected_error.offset(), offset, "{name}");

        let message = expected_error.to_string();
        assert!(message.contains(&format!("{offset:#x}")), "{name}: {message:?} lacks the offset");
        for word in message_mentions(&expected_error) {
            assert!(message.contains(&word), "{name}: {message:?} does not mention {word:?}");
        }

        let mut log = before.clone();
        log.extend_from_slice(bad);
        if !at_end {
            log.extend_from_slice(&valid_suffix());
        }
        let expected = Decoded { entries, end: End::Error(expected_error) };
        assert_eq!(via_records(&log), expected, "{name}: Records");
        for size in [1, 2, 3, 5, 16, 64, log.len()] {
            assert_eq!(via_stream_chunked(&log, size), expected, "{name}: chunks of {size}");
        }
        assert_eq!(via_reader(Cursor::new(&log)), expected, "{name}: LogReader");
        assert_eq!(
            pmclog::decode_record(&log[before.len()..], offset),
            Err(expected_error),
            "{name}: decode_record"
        );

        // Records and the stream decoder stay stopped.
        let mut records = Records::new(&log);
        let errors: Vec<_> = records.by_ref().filter_map(Result::err).collect();
        assert_eq!(errors, [expected_error]);
        assert!(records.next().is_none());
        let mut decoder = StreamDecoder::new();
        let mut rest = &log[..];
        loop {
            let (used, step) = decoder.next(rest);
            rest = &rest[used..];
            match step {
                Step::Record(_) => {}
                Step::NeedData => break,
                Step::Error(e) => {
                    assert_eq!(e, expected_error);
                    break;
                }
                Step::Eof => panic!("{name}: Eof"),
            }
        }
        assert_eq!(decoder.end_of_input(), Step::Error(expected_error), "{name}");
        let valid = valid_suffix();
        for _ in 0..3 {
            assert_eq!(decoder.next(&valid), (0, Step::Error(expected_error)), "{name}");
            assert_eq!(decoder.next(&[]), (0, Step::Error(expected_error)), "{name}");
            assert_eq!(decoder.end_of_input(), Step::Error(expected_error), "{name}");
        }
    }
}

#[test]
fn truncated_header() {
    for have in 1..4 {
        let bad = &header(0xEE, 1, 16)[..have];
        check("truncated header", bad, true, |offset| DecodeError::Truncated {
            offset,
            have,
            need: 4,
        });
    }
}

#[test]
fn truncated_record() {
    let bad = &record(5, 40, &[], 0, 40)[..20];
    check("truncated record", bad, true, |offset| DecodeError::Truncated {
        offset,
        have: 20,
        need: 40,
    });
    let bad = &header(0xEE, 16, 4128)[..4];
    check("truncated callchain", bad, true, |offset| DecodeError::Truncated {
        offset,
        have: 4,
        need: 4128,
    });
}

#[test]
fn bad_magic() {
    for magic in [0x00, 0xEF, 0x0E, 0xFF] {
        let bad = header(magic, 1, 16);
        check("bad magic", &bad, false, |offset| DecodeError::BadMagic { offset, found: magic });
    }
    // A header written big-endian.
    let mut bad = vec![0xEE, 0x01, 0x00, 0x10];
    bad.resize(16, 0);
    check("big-endian header", &bad, false, |offset| DecodeError::BadMagic { offset, found: 0x10 });
    // Zero-filled space, as a file system leaves it.
    check("zeros", &[0; 64], false, |offset| DecodeError::BadMagic { offset, found: 0 });
}

#[test]
fn length_below_16() {
    let cases: [(u8, u16, RecordType); 5] = [
        (1, 8, RecordType::CloseLog),
        (2, 0, RecordType::DropNotify),
        (16, 0, RecordType::Callchain),
        (16, 8, RecordType::Callchain),
        (14, 12, RecordType::MapIn),
    ];
    for (code, length, record_type) in cases {
        check("length below 16", &record(code, length, &[], 0, 16), false, |offset| {
            DecodeError::BadLength { offset, record_type, length: usize::from(length) }
        });
    }
}

#[test]
fn length_above_the_maximum() {
    assert_eq!(pmclog::MAX_RECORD_LEN, 4128);
    let cases: [(u8, u16, RecordType); 5] = [
        (14, 0xFFFC, RecordType::MapIn),
        (6, 4132, RecordType::PmcAttach),
        (9, 40 + 1028, RecordType::ProcExec),
        (2, 0xFFFF, RecordType::DropNotify),
        (16, 4132, RecordType::Callchain),
    ];
    for (code, length, record_type) in cases {
        check("length above the maximum", &record(code, length, &[], 0, 16), false, |offset| {
            DecodeError::BadLength { offset, record_type, length: usize::from(length) }
        });
    }
    // A callchain length of the form 32 + 8n above the maximum has too many frames.
    check("huge callchain", &record(16, 0xFFF8, &[], 0, 16), false, |offset| {
        DecodeError::CallchainTooDeep { offset, frames: (0xFFF8 - 32) / 8 }
    });
}

#[test]
fn length_that_a_fixed_size_type_does_not_have() {
    let cases: [(u8, u16, RecordType, usize); 9] = [
        (1, 20, RecordType::CloseLog, 16),
        (3, 108, RecordType::Initialize, 112),
        (3, 116, RecordType::Initialize, 112),
        (5, 44, RecordType::PmcAllocate, 40),
        (10, 24, RecordType::ProcExit, 32),
        (13, 28, RecordType::UserData, 24),
        (17, 100, RecordType::PmcAllocateDyn, 96),
        (18, 56, RecordType::ThrCreate, 52),
        (20, 48, RecordType::ProcCreate, 44),
    ];
    for (code, length, record_type, required) in cases {
        let bad = record(code, length, &[], 0, usize::from(length));
        check("fixed-size length", &bad, false, |offset| DecodeError::BadLength {
            offset,
            record_type,
            length: usize::from(length),
        });
        let message = DecodeError::BadLength { offset: 0, record_type, length: 1 }.to_string();
        assert!(message.contains(&format!("must be {required}")), "{message}");
    }
}

#[test]
fn path_record_length_not_a_multiple_of_4() {
    let cases: [(u8, u16, RecordType); 4] = [
        (9, 46, RecordType::ProcExec),
        (14, 37, RecordType::MapIn),
        (14, 39, RecordType::MapIn),
        (6, 30, RecordType::PmcAttach),
    ];
    for (code, length, record_type) in cases {
        let bad = record(code, length, b"/x\0", 0, usize::from(length).next_multiple_of(4));
        check("unaligned path record", &bad, false, |offset| DecodeError::BadLength {
            offset,
            record_type,
            length: usize::from(length),
        });
    }
    // No room for even the NUL.
    check("path record without room", &record(14, 32, &[], 0, 32), false, |offset| {
        DecodeError::BadLength { offset, record_type: RecordType::MapIn, length: 32 }
    });
}

#[test]
fn callchain_length_not_32_plus_8n() {
    for length in [36u16, 44, 60, 4124] {
        let bad = record(16, length, &[], 0, usize::from(length));
        check("callchain length", &bad, false, |offset| DecodeError::BadLength {
            offset,
            record_type: RecordType::Callchain,
            length: usize::from(length),
        });
    }
}

#[test]
fn callchain_of_513_frames() {
    let bad = record(16, 32 + 8 * 513, &[1, 0, 0, 0], 0x11, 32 + 8 * 513);
    check("513 frames", &bad, false, |offset| DecodeError::CallchainTooDeep {
        offset,
        frames: 513,
    });
    // 512 frames are fine.
    let ok = record(16, 32 + 8 * 512, &[1, 0, 0, 0], 0x11, 32 + 8 * 512);
    let (record, _, len) = pmclog::decode_record(&ok, 0).expect("512 frames");
    assert_eq!(len, pmclog::MAX_RECORD_LEN);
    let Record::Callchain(chain) = record else { panic!("{record:?}") };
    assert_eq!(chain.pcs.len(), 512);
    assert_eq!(chain.pcs.get(511), Some(0x1111_1111_1111_1111));
}

#[test]
fn unknown_types() {
    for code in [0u8, 4, 21, 255] {
        check("unknown type", &record(code, 16, &[], 0, 16), false, |offset| {
            DecodeError::UnknownType { offset, code }
        });
    }
}

#[test]
fn path_without_nul() {
    let cases: [(u8, usize, RecordType); 4] = [
        (14, 32, RecordType::MapIn),
        (6, 24, RecordType::PmcAttach),
        (9, 40, RecordType::ProcExec),
        (6, 24, RecordType::PmcAttach),
    ];
    for (i, (code, fixed, record_type)) in cases.into_iter().enumerate() {
        // The last case has the longest path room (1024 bytes), all of it text.
        let room = if i == 3 { 1024 } else { 4 * (i + 1) };
        let length = (fixed + room) as u16;
        let mut bad = record(code, length, &[], 0, fixed);
        bad.resize(fixed + room, b'x');
        check("path without NUL", &bad, false, |offset| DecodeError::PathNotTerminated {
            offset,
            record_type,
        });
    }
}

#[test]
fn zero_length_input() {
    let empty = Decoded { entries: Vec::new(), end: End::Eof };
    assert_eq!(via_records(&[]), empty);
    assert_eq!(via_stream([]), empty);
    assert_eq!(via_stream([&[][..], &[][..]]), empty);
    assert_eq!(via_reader(Cursor::new(Vec::new())), empty);
    assert_eq!(
        pmclog::decode_record(&[], 8),
        Err(DecodeError::Truncated { offset: 8, have: 0, need: 4 })
    );
    let mut decoder = StreamDecoder::new();
    assert_eq!(decoder.next(&[]), (0, Step::NeedData));
    assert_eq!(decoder.end_of_input(), Step::Eof);
}

#[test]
fn header_word_errors_come_from_parse_header_word() {
    assert_eq!(
        pmclog::parse_header_word(0xEE15_0010, 0x20),
        Err(DecodeError::UnknownType { offset: 0x20, code: 21 })
    );
    assert_eq!(
        pmclog::parse_header_word(0xEE0D_001C, 0x20),
        Err(DecodeError::BadLength { offset: 0x20, record_type: RecordType::UserData, length: 28 })
    );
    assert_eq!(
        pmclog::parse_header_word(0xEE10_1028, 0x20),
        Err(DecodeError::CallchainTooDeep { offset: 0x20, frames: 513 })
    );
    assert_eq!(pmclog::parse_header_word(0xEE10_1020, 0), Ok((RecordType::Callchain, 4128)));
    assert_eq!(pmclog::parse_header_word(0xEE09_0428, 0), Ok((RecordType::ProcExec, 1064)));
    assert_eq!(
        pmclog::parse_header_word(0xEE09_042C, 0),
        Err(DecodeError::BadLength { offset: 0, record_type: RecordType::ProcExec, length: 1068 })
    );
}

// ---------------------------------------------------------------------------------------------
// Random garbage and random mutations of a valid log, with a fixed seed.

/// A reader that returns the data in pieces of the given sizes, and `Interrupted` now and then.
struct Pieces<'a> {
    data: &'a [u8],
    sizes: Vec<usize>,
    next: usize,
    interrupt_every: usize,
    calls: usize,
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.interrupt_every > 0 && self.calls % self.interrupt_every == 0 {
            return Err(ErrorKind::Interrupted.into());
        }
        let size = self.sizes.get(self.next).copied().unwrap_or(usize::MAX);
        self.next += 1;
        let n = size.max(1).min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// A record header of a random type (valid or not) with a length that is often right for it.
fn plausible_records(rng: &mut Rng) -> Vec<u8> {
    let mut log = Vec::new();
    for _ in 0..rng.below(12) {
        let code = match rng.below(10) {
            0 => rng.byte(),
            _ => rng.below(23) as u8,
        };
        let length: usize = match rng.below(8) {
            0 => rng.below(0x10000),
            1 => 32 + 8 * rng.below(520),
            2 => 24 + 4 * rng.below(260),
            3 => 16,
            _ => [16, 24, 32, 40, 44, 52, 96, 112, 36, 48][rng.below(10)],
        };
        let magic = if rng.below(20) == 0 { rng.byte() } else { 0xEE };
        let mut record = header(magic, code, length as u16);
        let body_len = if rng.below(10) == 0 { rng.below(length + 8) } else { length };
        while record.len() < body_len {
            // Mostly text, some NULs.
            record.push(if rng.below(16) == 0 { 0 } else { 0x20 + rng.byte() % 0x5F });
        }
        record.truncate(body_len.max(if rng.below(10) == 0 { 0 } else { 4 }));
        log.extend_from_slice(&record);
    }
    log
}

fn garbage(rng: &mut Rng) -> Vec<u8> {
    (0..rng.below(300)).map(|_| rng.byte()).collect()
}

/// The sample log with a few random changes, often at a record header.
fn mutate(sample: &[u8], starts: &[usize], rng: &mut Rng) -> Vec<u8> {
    let mut log = sample.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = if rng.below(2) == 0 {
            starts[rng.below(starts.len())] + rng.below(16)
        } else {
            rng.below(log.len().max(1))
        };
        let at = at.min(log.len().saturating_sub(1));
        match rng.below(7) {
            0 => log[at] ^= 1 << rng.below(8),
            1 => log[at] = [0x00, 0xEE, 0xFF, 0x10, 0x04][rng.below(5)],
            2 => log.truncate(at),
            3 => {
                let end = (at + rng.below(64)).min(log.len());
                log.drain(at..end);
            }
            4 => {
                let bytes: Vec<u8> = (0..rng.below(9)).map(|_| rng.byte()).collect();
                log.splice(at..at, bytes);
            }
            5 if at + 2 <= log.len() => {
                let length = (rng.next_u64() as u16).to_le_bytes();
                log[at..at + 2].copy_from_slice(&length);
            }
            _ => log[at] = rng.byte(),
        }
        if log.is_empty() {
            break;
        }
    }
    log
}

#[test]
fn random_inputs_never_panic_and_every_decoder_agrees() {
    let (sample, entries) = sample_log();
    let starts: Vec<usize> = entries.iter().map(|e| e.offset as usize).collect();
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    let mut errors = 0;
    for iteration in 0..1500 {
        let input = match iteration % 3 {
            0 => garbage(&mut rng),
            1 => plausible_records(&mut rng),
            _ => mutate(&sample, &starts, &mut rng),
        };
        let max_piece = [1, 7, 64, 700, 5000][rng.below(5)];
        let max_piece = if input.len() > 1000 { max_piece.max(64) } else { max_piece };
        let sizes = rng.chunk_sizes(input.len(), max_piece);
        let reader_sizes = rng.chunk_sizes(input.len(), max_piece);
        let interrupt_every = [0, 2, 3, 5][rng.below(4)]; // never 1: every read would fail
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let records = via_records(&input);
            let stream = via_stream(split_by(&input, &sizes));
            assert_eq!(stream, records, "StreamDecoder and Records disagree");
            let reader = via_reader(Pieces {
                data: &input,
                sizes: reader_sizes.clone(),
                next: 0,
                interrupt_every,
                calls: 0,
            });
            assert_eq!(reader, records, "LogReader and Records disagree");
            // Every entry really is the bytes at its offset.
            for entry in &records.entries {
                let start = entry.offset as usize;
                assert_eq!(&input[start..start + entry.raw.len()], &entry.raw[..]);
            }
            records.end
        }));
        match outcome {
            Ok(End::Error(_)) => errors += 1,
            Ok(End::Eof) => {}
            Err(panic) => {
                let shown: Vec<String> =
                    input.iter().take(256).map(|b| format!("{b:02x}")).collect();
                eprintln!(
                    "iteration {iteration}: {} bytes, pieces of up to {max_piece}: {}",
                    input.len(),
                    shown.join(" ")
                );
                std::panic::resume_unwind(panic);
            }
        }
    }
    // The inputs do reach the error paths (and not only them).
    assert!(errors > 500 && errors < 1500, "{errors} of 1500 inputs were errors");
}

#[test]
fn log_reader_reports_the_same_errors_for_every_case() {
    // One more angle on the cases above: a LogReader over a 1-byte-per-read source.
    let (prefix, prefix_entries) = valid_prefix();
    let mut log = prefix.clone();
    log.extend_from_slice(&record(21, 16, &[], 0, 16));
    let decoded = via_reader(Pieces {
        data: &log,
        sizes: vec![1; log.len()],
        next: 0,
        interrupt_every: 3,
        calls: 0,
    });
    assert_eq!(
        decoded,
        Decoded {
            entries: prefix_entries,
            end: End::Error(DecodeError::UnknownType { offset: 0xd8, code: 21 })
        }
    );
    let mut reader = LogReader::new(Cursor::new(&log[prefix.len()..]));
    match reader.next_entry() {
        Err(pmclog::ReadError::Decode(e)) => {
            assert_eq!(e, DecodeError::UnknownType { offset: 0, code: 21 });
            // ReadError::Decode shows the decode error's own message.
            assert_eq!(pmclog::ReadError::Decode(e).to_string(), e.to_string());
        }
        other => panic!("{other:?}"),
    }
    // The error is final: the reader reports it again rather than pretending the log ended.
    assert!(matches!(
        reader.next_entry(),
        Err(pmclog::ReadError::Decode(DecodeError::UnknownType { offset: 0, code: 21 }))
    ));
}

#[test]
fn an_error_in_a_record_cut_across_pieces_is_reported_once_complete() {
    // A MAP_IN whose path has no NUL, fed a byte at a time: the error comes with its last byte.
    let (prefix, _) = valid_prefix();
    let mut log = prefix.clone();
    let mut bad = record(14, 36, &[], 0, 32);
    bad.extend_from_slice(b"abcd");
    log.extend_from_slice(&bad);
    let mut decoder = StreamDecoder::new();
    let mut fed = 0;
    let error = loop {
        let byte = &log[fed..fed + 1];
        fed += 1;
        match decoder.next(byte) {
            (_, Step::Record(_)) => {
                // A record completes with the byte; feed the (empty) rest.
                assert_eq!(decoder.next(&[]).1, Step::NeedData);
            }
            (1, Step::NeedData) => {}
            (_, Step::Error(e)) => break e,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(fed, log.len());
    assert_eq!(
        error,
        DecodeError::PathNotTerminated { offset: 0xd8, record_type: RecordType::MapIn }
    );
}
