//! Why a log could not be analysed.

use std::fmt;

/// A log that could not be analysed: where it went wrong and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnalysisError {
    offset: u64,
    record: u64,
    message: String,
    decode: Option<pmclog::DecodeError>,
}

impl AnalysisError {
    pub(crate) fn decode(error: pmclog::DecodeError, record: u64) -> Self {
        AnalysisError {
            offset: error.offset(),
            record,
            message: error.to_string(),
            decode: Some(error),
        }
    }

    /// Byte offset, in the log, of the first byte of the record that could not be read.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Serial number (from 1) the bad record has in the log.
    pub fn record(&self) -> u64 {
        self.record
    }

    /// What is wrong, in words.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The decoder's error, when the log itself is malformed.
    pub fn decode_error(&self) -> Option<&pmclog::DecodeError> {
        self.decode.as_ref()
    }
}

impl fmt::Display for AnalysisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "event parsing failed (record {}, offset {:#x}): {}",
            self.record, self.offset, self.message
        )
    }
}

impl std::error::Error for AnalysisError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.decode.as_ref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}
