//! libpmc: count and sample with hardware performance-monitoring counters through FreeBSD's
//! pmc(3) interface, from Rust or C, on FreeBSD, on Linux and on the simulated machine.
//!
//! * [`api`] — the Rust API: [`PmcSpec`] allocates a [`Pmc`] that releases itself; the pmc(3)
//!   operations by id; launching a measured command.
//! * [`events`] — the event catalog: FreeBSD-style names, aliases, raw encodings, SOFT events.
//! * [`host`] — where the hwpmc system call goes: FreeBSD, Linux (the embedded driver,
//!   counting with perf_event_open), the simulator.
//! * [`capi`] — the C ABI of `libpmc.so` / `libpmc.a` (headers in `libpmc/include`).
//! * [`error`] — [`Error`]: the operation, the errno and the reason.
//! * [`config`] — the settings (host, simulated machine, call graph, CPU): passed in, read from
//!   the environment only by the tools and the C ABI's entry points.
//!
//! Logs are read with the `pmclog` crate (re-exported as [`log`]).

pub mod api;
pub mod capi;
pub mod config;
pub mod error;
pub mod events;
pub mod host;

pub use api::{Pmc, PmcSpec, ScaledValue};
pub use error::{Error, Result};
pub use hwpmc::abi::{Caps, Class, Mode, PmcFlags, PmcId};
pub use pmclog as log;
