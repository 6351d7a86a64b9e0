//! The FreeBSD hwpmc(4) log format (`pmclog`), byte for byte.
//!
//! This crate is the single authority on the binary records that hwpmc(4) writes to a log file and
//! that pmclog(3) and `pmcstat -R` read. The driver writes records with [`encode()`]; readers use the
//! zero-copy [`StreamDecoder`] (for data that arrives in pieces), [`Records`] (a whole log in
//! memory) or, with the `std` feature, [`LogReader`] over any [`std::io::Read`].
//!
//! The format, in short (see `freebsd-abi.md` §3): a log is a plain concatenation of records with no
//! file header. Every record starts with a 16-byte header — the word
//! `0xEE << 24 | type << 16 | length`, a spare word, and a 64-bit TSC timestamp — and its total length
//! is a multiple of 4. Values are little-endian (amd64), and 64-bit fields are only 4-byte aligned in
//! the stream. Path names are NUL-terminated and padded to 4 bytes.
//!
//! The decoder never panics: every malformed input is a [`DecodeError`] that says what was wrong and
//! at which byte offset.
//!
//! Crate features: `std` (default) adds the [`std::io::Read`] reader and the whole-file helpers;
//! `capi` adds the pmclog(3) C entry points and `struct pmclog_ev`, which libpmc exports.
#![cfg_attr(not(any(feature = "std", test)), no_std)]
#![deny(unsafe_code)]

mod bytes;
mod decode;
mod encode;
mod error;
mod fields;
mod layout;
mod limits;
pub mod names;
mod record;
mod slice;
mod stream;

#[cfg(feature = "std")]
mod dump;
#[cfg(feature = "std")]
mod reader;

#[cfg(feature = "capi")]
#[allow(unsafe_code)]
pub mod capi;
#[cfg(feature = "capi")]
mod handles;

pub use decode::{decode_record, parse_header_word};
pub use encode::{EncodeError, encode, encoded_len};
pub use error::DecodeError;
pub use layout::{MAX_RECORD_LEN, RecordType};
pub use limits::{
    CALLCHAIN_DEPTH_MAX, COMM_LEN, CPUID_LEN, HEADER_LEN, HEADER_MAGIC, NAME_MAX, PATH_MAX,
};
pub use record::{
    Callchain, CallchainFlags, DynLayout, Entry, Initialize, MapIn, MapOut, Multipart,
    MultipartError, MultipartKind, Part, PmcAllocate, PmcAllocateDyn, PmcAttach, PmcDetach,
    ProcCreate, ProcCsw, ProcExec, ProcExit, ProcFork, ProgramCounters, Record, SysExit, ThrCreate,
    ThrExit, UserData,
};
pub use slice::Records;
pub use stream::{Step, StreamDecoder};

#[cfg(feature = "std")]
pub use dump::{
    DumpEnd, EventNames, StaticEventNames, TextDump, dump_bytes, dump_bytes_with_names,
    dump_reader, dump_reader_with_names,
};
#[cfg(feature = "std")]
pub use reader::{LogReader, ReadError};
