//! Differential target: `Records` (whole log in memory) against `StreamDecoder` fed in pieces
//! whose lengths come from the input. Both must give the same entries and end the same way, and
//! every decoded record must survive a round trip through `encode`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pmclog::{DecodeError, Step, StreamDecoder};
use pmclog_fuzz::{check_framing, check_round_trip, reference, split_input};

fuzz_target!(|data: &[u8]| {
    let (mut plan, log) = split_input(data);
    let (expected, expected_end) = reference(log);
    check_framing(&expected);
    for entry in &expected {
        check_round_trip(entry);
    }

    let mut decoder = StreamDecoder::new();
    let mut seen = 0;
    let mut input = log;
    let end = 'feed: loop {
        if input.is_empty() {
            break outcome(decoder.end_of_input());
        }
        let (chunk, rest) = input.split_at(plan.next_len().min(input.len()));
        input = rest;
        let mut rest = chunk;
        loop {
            let (used, step) = decoder.next(rest);
            assert!(used <= rest.len());
            let was = rest.len();
            rest = &rest[used..];
            match step {
                Step::Record(entry) => {
                    assert!(seen < expected.len(), "stream gave an extra record: {entry:?}");
                    assert_eq!(entry, expected[seen], "record {seen} differs");
                    seen += 1;
                }
                Step::NeedData => {
                    assert_eq!(used, was, "NeedData left input unconsumed");
                    break;
                }
                Step::Eof => break 'feed Ok(()),
                Step::Error(e) => break 'feed Err(e),
            }
        }
    };
    assert_eq!(seen, expected.len(), "stream gave fewer records");
    assert_eq!(decoder.count(), expected.len() as u64);
    assert_eq!(end, expected_end, "Records and the stream end differently");
    // The final state sticks.
    let (used, step) = decoder.next(&[0xEE; 64]);
    assert_eq!((used, outcome(step)), (0, end));
    assert_eq!(outcome(decoder.end_of_input()), end);
});

/// How a stream ended; `Eof` after CLOSELOG or between records is `Ok`.
fn outcome(step: Step<'_>) -> Result<(), DecodeError> {
    match step {
        Step::Eof => Ok(()),
        Step::Error(e) => Err(e),
        other => panic!("expected the end of the stream, got {other:?}"),
    }
}
