//! The streaming decoder: records out of data that arrives in pieces of any size.
//!
//! This is pmclog(3)'s state machine without its allocation: a record that lies wholly inside the
//! piece just given is decoded in place (zero-copy); one that is cut by the end of a piece is
//! copied into a fixed buffer of [`MAX_RECORD_LEN`] bytes until the rest arrives. Whatever the
//! chunking, the same records come out with the same offsets and counts.

use crate::bytes::read_u32;
use crate::decode::{decode_body, parse_header_word};
use crate::error::DecodeError;
use crate::fields;
use crate::layout::{MAX_RECORD_LEN, RecordType};
use crate::record::{Entry, Record};

/// What [`StreamDecoder::next`] found (pmclog(3)'s `PMCLOG_OK`, `PMCLOG_REQUIRE_DATA`,
/// `PMCLOG_EOF`, `PMCLOG_ERROR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// A complete record (`PMCLOG_OK`).
    Record(Entry<'a>),
    /// The input is used up; give more (`PMCLOG_REQUIRE_DATA`).
    NeedData,
    /// The log is over: a CLOSELOG record was read, or [`StreamDecoder::end_of_input`] was called
    /// between records (`PMCLOG_EOF`).
    Eof,
    /// The log is malformed (`PMCLOG_ERROR`). The decoder stays in this state.
    Error(DecodeError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    Eof,
    Error(DecodeError),
}

/// A pmclog stream decoder that never allocates and never panics.
///
/// ```
/// # use pmclog::{StreamDecoder, Step};
/// fn count_records(chunks: &[&[u8]]) -> Result<u64, pmclog::DecodeError> {
///     let mut decoder = StreamDecoder::new();
///     let mut records = 0;
///     for chunk in chunks {
///         let mut rest = *chunk;
///         loop {
///             let (used, step) = decoder.next(rest);
///             rest = &rest[used..];
///             match step {
///                 Step::Record(_) => records += 1,
///                 Step::NeedData => break,
///                 Step::Eof => return Ok(records),
///                 Step::Error(e) => return Err(e),
///             }
///         }
///     }
///     match decoder.end_of_input() {
///         Step::Error(e) => Err(e),
///         _ => Ok(records),
///     }
/// }
/// ```
pub struct StreamDecoder {
    /// The record in progress, when it was cut by the end of an input piece.
    saved: [u8; MAX_RECORD_LEN],
    /// Bytes of the record in progress held in `saved`.
    saved_len: usize,
    /// The record in progress's type and length, once its header word is complete.
    pending: Option<(RecordType, usize)>,
    /// Stream offset of the next record's first byte.
    offset: u64,
    /// Records returned so far.
    count: u64,
    state: State,
}

impl Default for StreamDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for StreamDecoder {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StreamDecoder")
            .field("saved_len", &self.saved_len)
            .field("pending", &self.pending)
            .field("offset", &self.offset)
            .field("count", &self.count)
            .field("state", &self.state)
            .finish()
    }
}

impl StreamDecoder {
    /// A decoder at the start of a stream.
    pub const fn new() -> Self {
        StreamDecoder {
            saved: [0; MAX_RECORD_LEN],
            saved_len: 0,
            pending: None,
            offset: 0,
            count: 0,
            state: State::Running,
        }
    }

    /// Stream offset of the first byte of the next record (or of the record in progress).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Records returned so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Bytes of a cut record held while waiting for the rest.
    pub fn buffered(&self) -> usize {
        self.saved_len
    }

    /// Decodes the next record from `input`, which continues the stream where the bytes consumed
    /// so far ended. Returns how many bytes of `input` were consumed and what was found; call
    /// again with the rest of `input` after a record, or with the next piece after
    /// [`Step::NeedData`] (which always consumes all of `input`).
    pub fn next<'a>(&'a mut self, input: &'a [u8]) -> (usize, Step<'a>) {
        match self.state {
            State::Running => {}
            State::Eof => return (0, Step::Eof),
            State::Error(e) => return (0, Step::Error(e)),
        }
        if self.saved_len == 0 { self.next_in_place(input) } else { self.continue_saved(input) }
    }

    /// Says that the stream has ended. Returns [`Step::Eof`] if it ended between records, or a
    /// [`DecodeError::Truncated`] error if a record was cut short; either state is final.
    pub fn end_of_input(&mut self) -> Step<'static> {
        if self.state == State::Running {
            self.state = if self.saved_len == 0 {
                State::Eof
            } else {
                State::Error(DecodeError::Truncated {
                    offset: self.offset,
                    have: self.saved_len,
                    need: self.pending.map_or(4, |(_, len)| len),
                })
            };
        }
        match self.state {
            State::Error(e) => Step::Error(e),
            _ => Step::Eof,
        }
    }

    /// No partial record is held: decode straight from `input` if the whole record is there.
    fn next_in_place<'a>(&'a mut self, input: &'a [u8]) -> (usize, Step<'a>) {
        if input.len() < 4 {
            return (self.save(input), Step::NeedData);
        }
        let (record_type, length) =
            match parse_header_word(read_u32(input, fields::header::WORD), self.offset) {
                Ok(header) => header,
                Err(e) => return (0, self.fail(e)),
            };
        match input.get(..length) {
            Some(record) => (length, self.complete(record_type, record)),
            None => {
                self.pending = Some((record_type, length));
                (self.save(input), Step::NeedData)
            }
        }
    }

    /// A partial record is held in `saved`: top it up from `input`.
    fn continue_saved<'a>(&'a mut self, input: &'a [u8]) -> (usize, Step<'a>) {
        let mut used = 0;
        if self.saved_len < 4 {
            used = self.save(&input[..input.len().min(4 - self.saved_len)]);
            if self.saved_len < 4 {
                return (used, Step::NeedData);
            }
            match parse_header_word(read_u32(&self.saved, fields::header::WORD), self.offset) {
                Ok(header) => self.pending = Some(header),
                Err(e) => return (used, self.fail(e)),
            }
        }
        let Some((record_type, length)) = self.pending else {
            return (used, Step::NeedData);
        };
        let rest = &input[used..];
        used += self.save(&rest[..rest.len().min(length - self.saved_len)]);
        if self.saved_len < length {
            return (used, Step::NeedData);
        }
        self.saved_len = 0;
        self.pending = None;
        // Split the borrow: the record borrows `saved` while the bookkeeping fields change.
        let StreamDecoder { saved, offset, count, state, .. } = self;
        (used, finish(offset, count, state, record_type, &saved[..length]))
    }

    fn complete<'a>(&mut self, record_type: RecordType, record: &'a [u8]) -> Step<'a> {
        finish(&mut self.offset, &mut self.count, &mut self.state, record_type, record)
    }

    /// Appends `bytes` to the record in progress and returns how many were taken.
    fn save(&mut self, bytes: &[u8]) -> usize {
        let room = MAX_RECORD_LEN - self.saved_len;
        let taken = bytes.len().min(room);
        self.saved[self.saved_len..self.saved_len + taken].copy_from_slice(&bytes[..taken]);
        self.saved_len += taken;
        taken
    }

    fn fail<'a>(&mut self, error: DecodeError) -> Step<'a> {
        self.state = State::Error(error);
        Step::Error(error)
    }
}

/// Decodes a complete record and advances the stream position; CLOSELOG ends the stream.
fn finish<'a>(
    offset: &mut u64,
    count: &mut u64,
    state: &mut State,
    record_type: RecordType,
    record: &'a [u8],
) -> Step<'a> {
    match decode_body(record_type, record, *offset) {
        Ok(decoded) => {
            *count += 1;
            let entry = Entry {
                offset: *offset,
                count: *count,
                tsc: crate::bytes::read_u64(record, fields::header::TSC),
                raw: record,
                record: decoded,
            };
            *offset += record.len() as u64;
            if matches!(decoded, Record::CloseLog) {
                *state = State::Eof;
            }
            Step::Record(entry)
        }
        Err(e) => {
            *state = State::Error(e);
            Step::Error(e)
        }
    }
}
