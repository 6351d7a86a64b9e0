//! The pmclog(3) C API fed arbitrary bytes in pieces whose lengths come from the input: it must
//! never crash, must report the same records (offsets, counts, types) as `Records`, and must end
//! in the state that matches how `Records` ended.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pmclog::Record;
use pmclog::capi::{
    PMCLOG_EOF, PMCLOG_ERROR, PMCLOG_FD_NONE, PMCLOG_OK, PMCLOG_REQUIRE_DATA, pmclog_close,
    pmclog_ev, pmclog_feed, pmclog_open, pmclog_read,
};
use pmclog_fuzz::{reference, split_input};

fuzz_target!(|data: &[u8]| {
    let (mut plan, log) = split_input(data);
    let (expected, expected_end) = reference(log);
    // SAFETY: PMCLOG_FD_NONE makes a memory-fed parser; it is closed below.
    let parser = unsafe { pmclog_open(PMCLOG_FD_NONE) };
    assert!(!parser.is_null());
    let mut ev = Box::new(pmclog_ev::default());
    let mut seen = 0;
    let mut input = log;
    let final_state = 'feed: loop {
        let (chunk, rest) = input.split_at(plan.next_len().min(input.len()));
        input = rest;
        if !chunk.is_empty() {
            // SAFETY: `chunk` lives in `data`, which outlives every read of this parser.
            let fed = unsafe { pmclog_feed(parser, chunk.as_ptr() as *mut _, chunk.len() as i32) };
            assert_eq!(fed, 0, "feeding after REQUIRE_DATA succeeds");
        }
        loop {
            // SAFETY: `parser` is open and `ev` is a valid event.
            let status = unsafe { pmclog_read(parser, &mut *ev) };
            match ev.pl_state {
                PMCLOG_OK => {
                    assert_eq!(status, 0);
                    let entry = &expected[seen];
                    assert_eq!(ev.pl_count as u64, entry.count);
                    assert_eq!(ev.pl_offset as u64, entry.end_offset());
                    assert_eq!(ev.pl_len as usize, entry.raw.len());
                    assert_eq!(ev.pl_type, u32::from(entry.record.record_type().code()));
                    seen += 1;
                }
                PMCLOG_REQUIRE_DATA if !input.is_empty() => continue 'feed,
                state => {
                    assert_eq!(status, -1);
                    break 'feed state;
                }
            }
        }
    };
    // SAFETY: `parser` came from `pmclog_open` and is closed once.
    unsafe { pmclog_close(parser) };
    let closed = expected.last().is_some_and(|e| matches!(e.record, Record::CloseLog));
    match final_state {
        // CLOSELOG ends the log: everything before it was read.
        PMCLOG_EOF => {
            assert!(closed);
            assert_eq!(seen + 1, expected.len());
        }
        // A memory parser only runs out of data; a malformed log is an error.
        PMCLOG_REQUIRE_DATA => {
            assert!(!closed);
            assert_eq!(seen, expected.len());
            assert!(
                expected_end.is_ok()
                    || matches!(expected_end, Err(pmclog::DecodeError::Truncated { .. }))
            );
        }
        PMCLOG_ERROR => {
            assert!(expected_end.is_err());
            assert_eq!(seen, expected.len());
        }
        other => panic!("unexpected state {other}"),
    }
});
