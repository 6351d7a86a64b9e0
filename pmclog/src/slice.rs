//! The fast path for a log that is wholly in memory (read into a buffer or memory-mapped): every
//! record is decoded in place, with no copying and no per-record state beyond a position.

use crate::decode::decode_record;
use crate::error::DecodeError;
use crate::record::{Entry, Record};

/// An iterator over the records of a complete log in memory.
///
/// It yields `Ok(entry)` for each record up to and including CLOSELOG, and stops there. A
/// malformed record, or a log that ends inside a record, yields one `Err` and then nothing.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    data: &'a [u8],
    position: usize,
    count: u64,
    done: bool,
}

impl<'a> Records<'a> {
    /// Iterates over the records of `log`.
    pub fn new(log: &'a [u8]) -> Self {
        Records { data: log, position: 0, count: 0, done: false }
    }

    /// Records yielded so far.
    pub fn records_yielded(&self) -> u64 {
        self.count
    }

    /// Byte offset of the next record.
    pub fn offset(&self) -> u64 {
        self.position as u64
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Entry<'a>, DecodeError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.position >= self.data.len() {
            return None;
        }
        let offset = self.position as u64;
        let rest = &self.data[self.position..];
        match decode_record(rest, offset) {
            Ok((record, tsc, length)) => {
                self.position += length;
                self.count += 1;
                self.done = matches!(record, Record::CloseLog);
                Some(Ok(Entry { offset, count: self.count, tsc, raw: &rest[..length], record }))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl core::iter::FusedIterator for Records<'_> {}
