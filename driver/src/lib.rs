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
// The only module with `unsafe` code: hardware access.
#[allow(unsafe_code)]
pub mod arch;
mod backend;
mod class;
mod driver;
pub mod errno;
mod hooks;
pub mod hosted;
mod lock;
// Declares the `unsafe` hardware-access methods that `arch` implements and calls.
#[allow(unsafe_code)]
pub mod hw;
pub mod kernel;
mod log;
mod logging;
mod ops;
mod percpu;
mod sample;
mod state;
mod sync;
pub mod text;

/// Intel's typed performance-monitoring registers (an alias of
/// [`arch::x86::intel::regs`], for libpmc's event encoding).
pub use arch::x86::intel::regs;

pub use driver::{Driver, ExecInfo};
pub use errno::Errno;
pub use hosted::{HostCounters, HostedEvent, HostedPmc, HostedSample};
pub use kernel::{
    Cpu, CriticalSection, Kernel, LoadError, LogFile, Pid, Privilege, ProcessState, Signal, Tid,
    TrapFrame, Tunables, UserPtr,
};
