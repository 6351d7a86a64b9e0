//! Reading a log from any [`std::io::Read`]: files, pipes, sockets.

use std::io::{self, ErrorKind, Read};

use crate::bytes::read_u32;
use crate::decode::{decode_body, parse_header_word};
use crate::error::DecodeError;
use crate::fields;
use crate::layout::MAX_RECORD_LEN;
use crate::record::{Entry, Record};

/// Why reading a log failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The input could not be read.
    #[error("cannot read the log: {0}")]
    Io(#[from] io::Error),
    /// The log is malformed.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Size of the reader's buffer: many records per `read` call, and always room for the longest
/// record after compaction.
const BUFFER_LEN: usize = 256 * 1024;
const _: () = assert!(BUFFER_LEN >= 2 * MAX_RECORD_LEN);

/// Reads records from a byte stream, in large reads, decoding each record in place.
///
/// [`LogReader::next_entry`] returns the next record, `None` after CLOSELOG or at the end of the
/// input between records, and an error for a malformed log, for input that ends inside a record,
/// or for a failed read. A decoding error is final: every later call returns it again, as
/// [`StreamDecoder`](crate::StreamDecoder) does. A read error is not: an error of kind
/// `WouldBlock` (a non-blocking pipe or socket with no data yet) loses nothing, so call again
/// when there is data.
#[derive(Debug)]
pub struct LogReader<R> {
    input: R,
    buffer: Box<[u8]>,
    /// Unconsumed bytes are `buffer[start..end]`.
    start: usize,
    end: usize,
    /// Stream offset of `buffer[start]`.
    offset: u64,
    count: u64,
    input_ended: bool,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Reading,
    Finished,
    Failed(DecodeError),
}

impl<R: Read> LogReader<R> {
    /// A reader at the start of `input`.
    pub fn new(input: R) -> Self {
        LogReader {
            input,
            buffer: vec![0; BUFFER_LEN].into_boxed_slice(),
            start: 0,
            end: 0,
            offset: 0,
            count: 0,
            input_ended: false,
            state: State::Reading,
        }
    }

    /// Records returned so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Stream offset of the next record.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next record; see the type's documentation.
    pub fn next_entry(&mut self) -> Result<Option<Entry<'_>>, ReadError> {
        match self.state {
            State::Reading => {}
            State::Finished => return Ok(None),
            State::Failed(e) => return Err(e.into()),
        }
        if !self.fill(4)? {
            return self.end_of_input(4);
        }
        let header = parse_header_word(
            read_u32(&self.buffer[self.start..], fields::header::WORD),
            self.offset,
        );
        let (record_type, length) = header.inspect_err(|e| self.state = State::Failed(*e))?;
        if !self.fill(length)? {
            return self.end_of_input(length);
        }
        let record = &self.buffer[self.start..self.start + length];
        let offset = self.offset;
        let decoded = match decode_body(record_type, record, offset) {
            Ok(decoded) => decoded,
            Err(e) => {
                self.state = State::Failed(e);
                return Err(e.into());
            }
        };
        self.start += length;
        self.offset += length as u64;
        self.count += 1;
        if matches!(decoded, Record::CloseLog) {
            self.state = State::Finished;
        }
        let tsc = crate::bytes::read_u64(record, fields::header::TSC);
        Ok(Some(Entry { offset, count: self.count, tsc, raw: record, record: decoded }))
    }

    /// Reads until `wanted` unconsumed bytes are buffered; false if the input ends first.
    fn fill(&mut self, wanted: usize) -> io::Result<bool> {
        if self.end - self.start >= wanted {
            return Ok(true);
        }
        if self.start + wanted > self.buffer.len() {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while self.end - self.start < wanted && !self.input_ended {
            match self.input.read(&mut self.buffer[self.end..]) {
                Ok(0) => self.input_ended = true,
                // A reader that claims more than the buffer had room for breaks `Read`'s
                // contract; count only what fits rather than trust it.
                Ok(n) => self.end = (self.end + n).min(self.buffer.len()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.end - self.start >= wanted)
    }

    fn end_of_input(&mut self, need: usize) -> Result<Option<Entry<'_>>, ReadError> {
        let have = self.end - self.start;
        if have == 0 {
            self.state = State::Finished;
            return Ok(None);
        }
        let error = DecodeError::Truncated { offset: self.offset, have, need };
        self.state = State::Failed(error);
        Err(error.into())
    }
}
