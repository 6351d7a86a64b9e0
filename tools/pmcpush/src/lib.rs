//! pmcpush: pmcstat as a continuous-profiling agent. pmcstat cuts its samples into windows
//! (10 s by default), symbolises each on the host into a pprof profile (mappings and build IDs
//! kept, so a backend can symbolise again), and hands it to a [`Pusher`], which sends it in
//! the background to one backend:
//!
//! - OTLP profiles over gRPC or HTTP/protobuf
//!   (`opentelemetry.proto.collector.profiles.v1development`), with the window's resource
//!   attributes and its event's sample type and period ([`otlp`]);
//! - Pyroscope's `/ingest` (pprof body, labels in the series name) ([`sink::pyroscope`]);
//! - Parca's `WriteRaw` (pprof bytes and labels, gRPC) ([`sink::parca`]).
//!
//! What a fleet needs of it:
//!
//! - [`Pusher::offer`] never waits on the network: the queue is bounded in windows and bytes;
//!   when it is full the oldest window is spooled ([`spool`], a bounded directory) or dropped.
//!   Every drop is counted by cause in [`Status`], which [`Pusher::status`] returns at any time.
//! - Failed sends are retried with exponential back-off and jitter ([`retry`]), a bounded number
//!   of times; refusals (HTTP 4xx, gRPC `INVALID_ARGUMENT`, …) are not retried.
//! - TLS with rustls and an optional custom CA ([`tls`]); bearer or basic credentials and extra
//!   headers such as Pyroscope's `X-Scope-OrgID` ([`auth`]).
//! - [`Pusher::shutdown`] sends what is queued, the last window included, within a deadline.
//! - Memory is bounded by the queue's bytes, one window in flight, and
//!   [`pprof::MAX_DECODED_BYTES`] for a decompressed profile.
//!
//! # How pmcstat uses it
//!
//! One pusher per `--push KIND=URL`, started before sampling; one [`Window`] per window, from
//! the live sampler or from `-R log` (a replay also calls [`Pusher::flush`] after each offer, so
//! that windows made faster than real time wait for the backend instead of being dropped); the
//! status printed on `SIGINFO`/`SIGUSR1` and at exit:
//!
//! ```no_run
//! use std::time::{Duration, SystemTime};
//! use pmcpush::{Pusher, PusherConfig, Resource, Target, Window, WindowMeta};
//!
//! # fn pprof_of_window() -> Vec<u8> { Vec::new() }
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let target: Target = "otlp-grpc=http://127.0.0.1:4317".parse()?;
//! let pusher = Pusher::start(PusherConfig::new(target))?;
//!
//! // At the end of each window (`pprof_of_window` is pmcstat's `write_pprof` into a Vec):
//! let end = SystemTime::now();
//! let mut meta = WindowMeta::new(end - Duration::from_secs(10), end, "instructions", "db");
//! meta.period = Some(65536);
//! meta.resource = Resource::detect("db").with_process(4242);
//! pusher.offer(Window::new(pprof_of_window(), meta));
//!
//! // At exit: the last window goes out within 5 s.
//! eprintln!("pmcstat: push: {}", pusher.shutdown(Duration::from_secs(5)));
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

pub mod auth;
pub mod otlp;
pub mod pprof;
pub mod pusher;
pub mod queue;
pub mod resource;
pub mod retry;
pub mod sink;
pub mod spool;
pub mod status;
pub mod target;
pub mod tls;
pub mod window;

pub use auth::Auth;
pub use pusher::{Pusher, PusherConfig, StartError};
pub use retry::Backoff;
pub use sink::Connection;
pub use spool::SpoolConfig;
pub use status::{Drops, Status};
pub use target::{Backend, Target};
pub use tls::TlsConfig;
pub use window::{AttributeValue, Resource, SampleType, Window, WindowMeta};

/// The generated OTLP types, for callers and receivers that build or read requests.
pub use opentelemetry_proto;
