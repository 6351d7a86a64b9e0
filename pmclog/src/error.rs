//! Why a log could not be decoded, and where.

use crate::layout::RecordType;

/// A malformed log. Every variant carries the byte offset of the record that is wrong (the offset
/// of its first header byte in the stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The header's top byte is not `0xEE`.
    #[error("bad magic 0x{found:02x} at offset {offset:#x}: every record header starts with 0xee")]
    BadMagic {
        /// Record offset.
        offset: u64,
        /// The byte found instead.
        found: u8,
    },
    /// The header names a type that does not exist (0, 4, or above 20).
    #[error("unknown record type {code} at offset {offset:#x}: types are 1-3 and 5-20")]
    UnknownType {
        /// Record offset.
        offset: u64,
        /// The type code found.
        code: u8,
    },
    /// The header's length is impossible for its type.
    #[error(
        "impossible length {length} for a {record_type} record at offset {offset:#x}: \
         it must be {}",
        LengthRule(*record_type)
    )]
    BadLength {
        /// Record offset.
        offset: u64,
        /// The record's type.
        record_type: RecordType,
        /// The length found.
        length: usize,
    },
    /// A CALLCHAIN record holds more frames than `PMC_CALLCHAIN_DEPTH_MAX`.
    #[error("callchain at offset {offset:#x} has {frames} frames: at most 512 are allowed")]
    CallchainTooDeep {
        /// Record offset.
        offset: u64,
        /// The frame count the length implies.
        frames: usize,
    },
    /// A path name has no terminating NUL inside its record.
    #[error("{record_type} record at offset {offset:#x}: path name is not NUL-terminated")]
    PathNotTerminated {
        /// Record offset.
        offset: u64,
        /// The record's type.
        record_type: RecordType,
    },
    /// The input ended inside a record.
    #[error("log ends inside the record at offset {offset:#x}: {have} of {need} bytes present")]
    Truncated {
        /// Record offset.
        offset: u64,
        /// Bytes of the record that were present.
        have: usize,
        /// Bytes the record needs (4 while the length is not yet known).
        need: usize,
    },
}

impl DecodeError {
    /// Offset of the first byte of the record that is wrong.
    pub fn offset(&self) -> u64 {
        match *self {
            DecodeError::BadMagic { offset, .. }
            | DecodeError::UnknownType { offset, .. }
            | DecodeError::BadLength { offset, .. }
            | DecodeError::CallchainTooDeep { offset, .. }
            | DecodeError::PathNotTerminated { offset, .. }
            | DecodeError::Truncated { offset, .. } => offset,
        }
    }
}

/// Says which lengths a record type allows, for error messages.
struct LengthRule(RecordType);

impl core::fmt::Display for LengthRule {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        use crate::layout::Size;
        use crate::limits::PATH_MAX;
        match self.0.size() {
            Size::Fixed(len) => write!(f, "{len}"),
            Size::Path { fixed } => write!(
                f,
                "a multiple of 4 from {} to {} ({fixed} bytes and a NUL-terminated path)",
                fixed + 4,
                fixed + PATH_MAX
            ),
            Size::Callchain => f.write_str("32 plus 8 bytes per frame, with at most 512 frames"),
        }
    }
}
