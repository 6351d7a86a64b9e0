//! `LogReader` over a reader that returns pieces of input-derived lengths, with interruptions and
//! `WouldBlock` errors thrown in, against `Records`. Also checks that the text dump gives the same
//! text and the same ending whether it reads from memory or through `LogReader`.
#![no_main]

use std::io::{self, ErrorKind, Read};

use libfuzzer_sys::fuzz_target;
use pmclog::{LogReader, ReadError};
use pmclog_fuzz::{Plan, check_framing, code_len, reference, split_input};

/// Returns the log in pieces as the plan says. Code 0 is an `Interrupted` error and code 1 a
/// `WouldBlock` error (when `would_block` is set), never twice in a row; other codes are lengths.
struct Pieces<'a> {
    plan: Plan<'a>,
    data: &'a [u8],
    would_block: bool,
    last_failed: bool,
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let code = self.plan.next_code();
        let failed = std::mem::replace(&mut self.last_failed, false);
        match code {
            Some(0) if !failed && !self.data.is_empty() => {
                self.last_failed = true;
                return Err(ErrorKind::Interrupted.into());
            }
            Some(1) if !failed && self.would_block && !self.data.is_empty() => {
                self.last_failed = true;
                return Err(ErrorKind::WouldBlock.into());
            }
            _ => {}
        }
        let n = code.map_or(usize::MAX, code_len).min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fuzz_target!(|data: &[u8]| {
    let (plan, log) = split_input(data);
    let (expected, expected_end) = reference(log);
    check_framing(&expected);

    let pieces = Pieces { plan: plan.clone(), data: log, would_block: true, last_failed: false };
    let mut reader = LogReader::new(pieces);
    let mut seen = 0;
    let mut would_blocks = 0;
    let end = loop {
        match reader.next_entry() {
            Ok(Some(entry)) => {
                assert!(seen < expected.len(), "reader gave an extra record: {entry:?}");
                assert_eq!(entry, expected[seen], "record {seen} differs");
                seen += 1;
            }
            Ok(None) => break Ok(()),
            Err(ReadError::Decode(e)) => break Err(e),
            Err(ReadError::Io(e)) if e.kind() == ErrorKind::WouldBlock => {
                would_blocks += 1;
                assert!(would_blocks <= log.len() + 1, "WouldBlock forever");
            }
            Err(ReadError::Io(e)) => panic!("unexpected I/O error {e}"),
        }
    };
    assert_eq!(seen, expected.len(), "reader gave fewer records");
    assert_eq!(reader.count(), expected.len() as u64);
    assert_eq!(end, expected_end);
    // The end is final: the same end again (None, or the same decoding error).
    match (end, reader.next_entry()) {
        (Ok(()), Ok(None)) => {}
        (Err(first), Err(ReadError::Decode(again))) if first == again => {}
        (end, later) => panic!("reader did not stay at its end {end:?}: {later:?}"),
    }

    let mut from_memory = Vec::new();
    let memory_end = pmclog::dump_bytes(log, &mut from_memory).unwrap();
    let mut from_reader = Vec::new();
    let pieces = Pieces { plan, data: log, would_block: false, last_failed: false };
    let reader_end = pmclog::dump_reader(pieces, &mut from_reader).unwrap();
    assert_eq!(memory_end, reader_end);
    assert!(from_memory == from_reader, "dumps differ");
    match (memory_end, expected_end) {
        (pmclog::DumpEnd::Finished | pmclog::DumpEnd::Unclosed { .. }, Ok(())) => {}
        (pmclog::DumpEnd::Error { error, record }, Err(e)) => {
            assert_eq!(error, e);
            assert_eq!(record, expected.len() as u64 + 1);
        }
        (got, want) => panic!("dump ended with {got:?}, Records with {want:?}"),
    }
});
