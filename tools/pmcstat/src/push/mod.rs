//! `--push KIND=URL`: pmcstat as a fleet's profiling agent. Samples are cut into windows, each
//! symbolised here into a pprof profile, and handed to pmcpush's pushers, which send them in
//! the background to OTLP, Pyroscope or Parca backends.
//!
//! [`options`] reads the command line's `--push` options; [`cut`] says where a log's windows
//! are; [`window`] makes a window's profile a pushable window; [`pushers`] runs one pusher per
//! backend; [`replay`] pushes a log (`-R log --push`).

pub mod cut;
pub mod options;
pub mod pushers;
pub mod replay;
pub mod window;
