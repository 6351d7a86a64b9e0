//! hwpmc: FreeBSD's hwpmc(4) hardware performance-monitoring-counter driver as a no_std library.
//!
//! A kernel embeds it by implementing the `Kernel` trait of services, calling its hooks from the
//! scheduler, exec, fork, exit and mmap paths and from the PMI handler, and routing the hwpmc
//! system call to it. On FreeBSD-compatible systems the ABI is FreeBSD's (see [`abi`]); logs are
//! written with the [`pmclog`] crate.
#![cfg_attr(not(test), no_std)]
#![deny(unsafe_code)]

extern crate alloc;

pub mod abi;
mod class;
mod driver;
pub mod errno;
mod hooks;
pub mod hosted;
pub mod hw;
pub mod kernel;
mod log;
mod logging;
mod ops;
mod percpu;
pub mod pmu;
pub mod regs;
mod sample;
mod state;
pub mod text;

pub use driver::{Driver, ExecInfo};
pub use errno::Errno;
pub use hosted::{HostCounters, HostedEvent, HostedPmc, HostedSample};
pub use kernel::{
    Cpu, Kernel, LoadError, LogFile, Pid, Privilege, ProcessState, Signal, Tid, TrapFrame,
    Tunables, UserPtr,
};
