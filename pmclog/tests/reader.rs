//! `LogReader` over `std::io::Read` sources that behave in all the ways `read` may: whole buffers,
//! one byte at a time, `Interrupted`, `WouldBlock`, failures, and a real file.

mod common;

use std::io::{self, Cursor, ErrorKind, Read};

use common::{Decoded, End, OwnedEntry, build_log, sample_log, via_reader, via_records};
use pmclog::{DecodeError, LogReader, ReadError, Record};

/// A source that hands out at most `chunk` bytes per `read`. Before handing out the byte at
/// `block_at` it fails once with `WouldBlock`; the first call and every `interrupt_every`-th call
/// after it fail with `Interrupted`; after `fail_at` bytes every call fails with `ErrorKind::Other`.
struct Source<'a> {
    data: &'a [u8],
    position: usize,
    chunk: usize,
    block_at: Option<usize>,
    interrupt_every: usize,
    fail_at: Option<usize>,
    calls: usize,
    interrupts: usize,
}

impl<'a> Source<'a> {
    fn new(data: &'a [u8], chunk: usize) -> Self {
        Source {
            data,
            position: 0,
            chunk,
            block_at: None,
            interrupt_every: 0,
            fail_at: None,
            calls: 0,
            interrupts: 0,
        }
    }
}

impl Read for Source<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.interrupt_every > 0 && (self.calls - 1) % self.interrupt_every == 0 {
            self.interrupts += 1;
            return Err(io::Error::new(ErrorKind::Interrupted, "signal"));
        }
        if self.block_at == Some(self.position) {
            self.block_at = None;
            return Err(io::Error::new(ErrorKind::WouldBlock, "no data yet"));
        }
        if self.fail_at.is_some_and(|at| self.position >= at) {
            return Err(io::Error::other("disk on fire"));
        }
        let mut end = self.data.len().min(self.position + self.chunk.min(buf.len()));
        for limit in [self.block_at, self.fail_at].into_iter().flatten() {
            if limit > self.position {
                end = end.min(limit);
            }
        }
        let n = end - self.position;
        buf[..n].copy_from_slice(&self.data[self.position..end]);
        self.position = end;
        Ok(n)
    }
}

fn reference() -> (Vec<u8>, Decoded) {
    let (log, entries) = sample_log();
    let decoded = via_records(&log);
    assert_eq!(decoded, Decoded { entries, end: End::Eof });
    (log, decoded)
}

#[test]
fn over_a_cursor() {
    let (log, reference) = reference();
    assert_eq!(via_reader(Cursor::new(&log)), reference);
}

#[test]
fn none_after_closelog_even_with_more_data() {
    let (mut log, reference) = reference();
    log.extend_from_slice(&[0xAB; 64]);
    let mut reader = LogReader::new(Cursor::new(&log));
    let mut last = None;
    while let Some(entry) = reader.next_entry().expect("valid log") {
        last = Some(OwnedEntry::new(&entry));
    }
    assert_eq!(last.as_ref(), reference.entries.last());
    assert_eq!(last.map(|e| e.record), Some(common::Owned::CloseLog));
    assert_eq!(reader.count(), reference.entries.len() as u64);
    for _ in 0..3 {
        assert!(matches!(reader.next_entry(), Ok(None)));
    }
}

#[test]
fn one_byte_per_read() {
    let (log, reference) = reference();
    assert_eq!(via_reader(Source::new(&log, 1)), reference);
}

#[test]
fn odd_read_sizes() {
    let (log, reference) = reference();
    for chunk in [2, 3, 5, 17, 4093, 4128, 4129] {
        assert_eq!(via_reader(Source::new(&log, chunk)), reference, "reads of {chunk}");
    }
}

#[test]
fn interrupted_reads_are_retried() {
    let (log, reference) = reference();
    for (chunk, every) in [(1, 2), (7, 3), (1000, 2), (usize::MAX, 2)] {
        let mut source = Source::new(&log, chunk);
        source.interrupt_every = every;
        let mut reader = LogReader::new(&mut source);
        let mut entries = Vec::new();
        while let Some(entry) = reader.next_entry().expect("Interrupted is not an error") {
            entries.push(OwnedEntry::new(&entry));
        }
        drop(reader);
        assert_eq!(entries, reference.entries);
        assert!(source.interrupts > 0, "the source was never interrupted");
    }
}

/// Reads the whole log from `source`, retrying after `WouldBlock`; returns the entries and the
/// number of `WouldBlock` errors seen.
fn read_retrying(source: Source<'_>) -> (Decoded, usize) {
    let mut reader = LogReader::new(source);
    let mut entries = Vec::new();
    let mut blocked = 0;
    let end = loop {
        match reader.next_entry() {
            Ok(Some(entry)) => entries.push(OwnedEntry::new(&entry)),
            Ok(None) => break End::Eof,
            Err(ReadError::Io(e)) if e.kind() == ErrorKind::WouldBlock => {
                blocked += 1;
                assert!(blocked < 10, "WouldBlock repeats");
            }
            Err(ReadError::Io(e)) => panic!("I/O error {e}"),
            Err(ReadError::Decode(e)) => break End::Error(e),
        }
    };
    (Decoded { entries, end }, blocked)
}

#[test]
fn would_block_mid_record_loses_nothing() {
    let (log, reference) = reference();
    // Inside the first header word, inside the first record, at a record boundary, inside the
    // 512-frame callchain, and in the last record.
    let deep = reference.entries.iter().find(|e| e.raw.len() == 4128).unwrap().offset as usize;
    let mut positions: Vec<usize> = (1..=130).collect();
    positions.extend([deep, deep + 2, deep + 4, deep + 2000, deep + 4127, log.len() - 1]);
    for at in positions {
        for chunk in [1, 64, usize::MAX] {
            let mut source = Source::new(&log, chunk);
            source.block_at = Some(at);
            let (decoded, blocked) = read_retrying(source);
            assert_eq!(blocked, 1, "WouldBlock at {at}, reads of {chunk}");
            assert_eq!(decoded, reference, "WouldBlock at {at}, reads of {chunk}");
        }
    }
}

#[test]
fn would_block_is_returned_as_an_io_error() {
    let (log, reference) = reference();
    let mut source = Source::new(&log, usize::MAX);
    source.block_at = Some(50);
    let mut reader = LogReader::new(source);
    match reader.next_entry() {
        Err(ReadError::Io(e)) => assert_eq!(e.kind(), ErrorKind::WouldBlock),
        other => panic!("{other:?}"),
    }
    assert_eq!((reader.count(), reader.offset()), (0, 0));
    let first = reader.next_entry().expect("continues").expect("a record");
    assert_eq!(OwnedEntry::new(&first), reference.entries[0]);
}

#[test]
fn a_real_file() {
    struct TempFile(std::path::PathBuf);
    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let (log, reference) = reference();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let path = std::env::temp_dir()
        .join(format!("pmclog-reader-test-{}-{nanos}.pmclog", std::process::id()));
    let file = TempFile(path);
    std::fs::write(&file.0, &log).expect("write the temp file");
    let decoded = via_reader(std::fs::File::open(&file.0).expect("open the temp file"));
    assert_eq!(decoded, reference);
    let path = file.0.clone();
    drop(file);
    assert!(!path.exists(), "the temp file was not removed");
}

#[test]
fn a_log_larger_than_the_reader_buffer() {
    // Several times the reader's 256 KiB buffer: it must move partial records to the front.
    let mut records = Vec::new();
    for i in 0..300u64 {
        let pcs: Vec<u64> = (0..(i * 37 % 513)).map(|j| i << 32 | j).collect();
        records.push((
            common::Owned::Callchain {
                pid: i as i32,
                tid: 7,
                pmcid: 3,
                cpuflags: 0x0001_0001,
                pcs,
            },
            i,
        ));
        records.push((
            common::Owned::MapIn { pid: 1, start: i, path: common::long_path(1 + i as usize * 3) },
            i,
        ));
    }
    records.push((common::Owned::CloseLog, 0));
    let (log, entries) = build_log(&records);
    assert!(log.len() > 512 * 1024);
    let expected = Decoded { entries, end: End::Eof };
    assert_eq!(via_records(&log), expected);
    assert_eq!(via_reader(Cursor::new(&log)), expected);
    for chunk in [4093, 65_537, 262_143] {
        assert_eq!(via_reader(Source::new(&log, chunk)), expected, "reads of {chunk}");
    }
}

#[test]
fn input_that_ends_inside_a_record_is_truncated() {
    let (log, entries) = build_log(&common::records_without_close());
    // Between records: the end of the log.
    assert_eq!(via_reader(Cursor::new(&log)), Decoded { entries: entries.clone(), end: End::Eof });
    for entry in &entries {
        let start = entry.offset as usize;
        for have in [1, 3, 4, 5, entry.raw.len() - 1] {
            let cut = &log[..start + have];
            let need = if have < 4 { 4 } else { entry.raw.len() };
            let expected = Decoded {
                entries: entries[..entry.count as usize - 1].to_vec(),
                end: End::Error(DecodeError::Truncated { offset: entry.offset, have, need }),
            };
            assert_eq!(via_reader(Cursor::new(cut)), expected, "cut at {}", start + have);
            assert_eq!(via_reader(Source::new(cut, 3)), expected, "cut at {}", start + have);
        }
    }
}

#[test]
fn a_failing_source_gives_an_io_error() {
    let (log, reference) = reference();
    for fail_at in [0, 2, 112, 200, 5000] {
        let mut source = Source::new(&log, 64);
        source.fail_at = Some(fail_at);
        let mut reader = LogReader::new(source);
        let mut entries = Vec::new();
        let error = loop {
            match reader.next_entry() {
                Ok(Some(entry)) => entries.push(OwnedEntry::new(&entry)),
                Ok(None) => panic!("the log ended although the source failed at {fail_at}"),
                Err(e) => break e,
            }
        };
        // Every record wholly before the failure was returned, and nothing else.
        let before: Vec<_> = reference
            .entries
            .iter()
            .filter(|e| e.offset as usize + e.raw.len() <= fail_at)
            .cloned()
            .collect();
        assert_eq!(entries, before, "source failing at {fail_at}");
        match &error {
            ReadError::Io(e) => {
                assert_eq!(e.kind(), ErrorKind::Other);
                assert_eq!(e.to_string(), "disk on fire");
            }
            other => panic!("expected an I/O error, got {other:?}"),
        }
        assert_eq!(error.to_string(), "cannot read the log: disk on fire");
    }
}

#[test]
fn counts_and_offsets_follow_the_records() {
    let (log, reference) = reference();
    let mut reader = LogReader::new(Cursor::new(&log));
    assert_eq!((reader.count(), reader.offset()), (0, 0));
    for expected in &reference.entries {
        let entry = reader.next_entry().unwrap().unwrap();
        assert_eq!(OwnedEntry::new(&entry), *expected);
        assert_eq!(entry.end_offset(), expected.offset + expected.raw.len() as u64);
        assert_eq!(reader.count(), expected.count);
        assert_eq!(reader.offset(), expected.offset + expected.raw.len() as u64);
    }
    assert!(reader.next_entry().unwrap().is_none());
    let last = reference.entries.last().unwrap();
    assert_eq!(last.record.as_record(), Record::CloseLog);
}

/// A reader that breaks `Read`'s contract: it fills what it is given but claims more.
struct Overclaiming<'a>(&'a [u8]);

impl Read for Overclaiming<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.0.len().min(buf.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(if n == 0 { 0 } else { buf.len() + 4096 })
    }
}

#[test]
fn a_reader_that_claims_more_than_it_read_does_not_panic() {
    let (log, _) = sample_log();
    let mut reader = LogReader::new(Overclaiming(&log));
    let mut outcomes = 0;
    // Whatever the garbage it produces, the reader returns records or an error and stops.
    while outcomes < 10_000 {
        outcomes += 1;
        match reader.next_entry() {
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => break,
        }
    }
    assert!(outcomes < 10_000, "the reader must come to an end");
}
