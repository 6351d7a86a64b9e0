//! Helpers shared by the pmclog fuzz targets: how an input is split into a chunking plan and a log,
//! the reference decoding (`pmclog::Records`), and the round-trip check.
//!
//! Input layout: byte 0 says how many plan bytes follow (`data[0] % 8 + 1`), the plan bytes give
//! the chunk lengths in turn (cycled), and everything after them is the log.

use pmclog::{DecodeError, Entry, Record, Records};

/// A chunking plan: the lengths of the pieces the log is cut into, cycled.
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    codes: &'a [u8],
    next: usize,
}

impl<'a> Plan<'a> {
    /// The next plan code (0..=255), or `None` when the plan is empty (take everything).
    pub fn next_code(&mut self) -> Option<u8> {
        if self.codes.is_empty() {
            return None;
        }
        let code = self.codes[self.next % self.codes.len()];
        self.next += 1;
        Some(code)
    }

    /// The next chunk length: codes 0..=127 give 1..=128 bytes (cuts inside headers and fields),
    /// 128..=255 give 64..=8192 bytes in steps of 64 (whole records, several records).
    pub fn next_len(&mut self) -> usize {
        self.next_code().map_or(usize::MAX, code_len)
    }
}

/// The chunk length a plan code stands for (see [`Plan::next_len`]).
pub fn code_len(code: u8) -> usize {
    if code < 128 { usize::from(code) + 1 } else { usize::from(code - 127) * 64 }
}

/// Splits a fuzz input into its chunking plan and its log.
pub fn split_input(data: &[u8]) -> (Plan<'_>, &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return (Plan { codes: &[], next: 0 }, &[]);
    };
    let n = (usize::from(first) % 8 + 1).min(rest.len());
    let (codes, log) = rest.split_at(n);
    (Plan { codes, next: 0 }, log)
}

/// What [`Records`] makes of `log`: every entry, and `Err` if it stopped at a malformed or
/// truncated record (`Ok` at CLOSELOG or at the end of the data between records).
pub fn reference(log: &[u8]) -> (Vec<Entry<'_>>, Result<(), DecodeError>) {
    let mut entries = Vec::new();
    for item in Records::new(log) {
        match item {
            Ok(entry) => entries.push(entry),
            Err(e) => return (entries, Err(e)),
        }
    }
    (entries, Ok(()))
}

/// Checks that `entries` are consistent among themselves: offsets follow each other, counts
/// start at 1, `raw` starts with the header and only the last entry may be CLOSELOG.
pub fn check_framing(entries: &[Entry<'_>]) {
    let mut offset = 0;
    for (i, entry) in entries.iter().enumerate() {
        assert_eq!(entry.offset, offset, "entry {i}");
        assert_eq!(entry.count, i as u64 + 1);
        assert!(entry.raw.len() >= pmclog::HEADER_LEN && entry.raw.len() % 4 == 0);
        let word = u32::from_le_bytes(entry.raw[..4].try_into().unwrap());
        assert_eq!(
            pmclog::parse_header_word(word, entry.offset),
            Ok((entry.record.record_type(), entry.raw.len()))
        );
        assert_eq!(entry.tsc, u64::from_le_bytes(entry.raw[8..16].try_into().unwrap()));
        if matches!(entry.record, Record::CloseLog) {
            assert_eq!(i + 1, entries.len(), "records after CLOSELOG");
        }
        offset = entry.end_offset();
    }
}

/// Re-encodes a decoded record and decodes it again: the record must come back unchanged, and
/// encoding that again must give the same bytes.
pub fn check_round_trip(entry: &Entry<'_>) {
    let record = &entry.record;
    if let Record::Callchain(cc) = record {
        // Multipart parsing must not panic whatever the header word says.
        if let Some(Ok(parts)) = cc.multipart() {
            for part in parts.parts() {
                assert!(part.first >= 1 && part.first + part.words.len() <= cc.pcs.len());
            }
        }
    }
    let mut buf = [0u8; pmclog::MAX_RECORD_LEN];
    let len = match pmclog::encode(record, entry.tsc, &mut buf) {
        Ok(len) => len,
        Err(e) => panic!("a decoded record does not encode: {e:?}\nrecord: {record:?}"),
    };
    assert_eq!(pmclog::encoded_len(record), Ok(len));
    let path_record =
        matches!(record, Record::PmcAttach(_) | Record::ProcExec(_) | Record::MapIn(_));
    if path_record {
        // The writer drops whatever followed the path's NUL.
        assert!(len <= entry.raw.len());
    } else {
        assert_eq!(len, entry.raw.len());
    }
    let (again, tsc, again_len) = match pmclog::decode_record(&buf[..len], entry.offset) {
        Ok(decoded) => decoded,
        Err(e) => panic!("a re-encoded record does not decode: {e}\nrecord: {record:?}"),
    };
    assert_eq!((tsc, again_len), (entry.tsc, len));
    assert_eq!(&again, record, "record changed in a round trip");
    let mut buf2 = [0u8; pmclog::MAX_RECORD_LEN];
    assert_eq!(pmclog::encode(&again, tsc, &mut buf2), Ok(len));
    assert_eq!(buf[..len], buf2[..len], "encoding is not stable");
}
