//! hwpmc: FreeBSD's hwpmc(4) hardware performance-monitoring-counter driver as a no_std library.
//!
//! A kernel embeds it by implementing the `Kernel` trait of services, calling its hooks from the
//! scheduler, exec, fork, exit and mmap paths and from the PMI handler, and routing the hwpmc
//! system call to it. On FreeBSD-compatible systems the ABI is FreeBSD's (see [`abi`]); logs are
//! written with the [`pmclog`] crate.
//!
//! # Layers
//!
//! Leaf types ([`abi`], [`errno`], [`text`]), the host-kernel interface ([`kernel`]), the
//! hardware traits ([`hw`]) and the PMU backend trait (`backend.rs`), the machine-dependent
//! backends ([`arch`]: MSRs, native access, `x86/intel/`), the classes (`class/`), the
//! bookkeeping (`state.rs`), the per-CPU runtime (`percpu.rs`, `sample.rs`, multiplexing in
//! `mux.rs`), then the entry
//! points (system calls in `ops.rs`, hooks in `hooks.rs`, the log in `log.rs` and `logging.rs`).
//!
//! # Counter multiplexing (extension)
//!
//! A counting PMC allocated with `PMC_F_MULTIPLEX` ([`abi::PmcFlags::MULTIPLEX`], a bit
//! FreeBSD does not use) may share a counter with other multiplexed PMCs of its CPU or process:
//! the driver rotates them at [`Driver::tick`] and keeps each one's time enabled and time on a
//! counter, read with the extension op [`abi::PMC_OP_PMCREADTIMES`]. `PMC_F_GROUP_LEADER` and
//! `PMC_F_GROUP_MEMBER` make event groups that are always counted together. Without these
//! flags nothing changes: allocation fails when the rows run out, as FreeBSD's. The details are
//! in `mux.rs`.
//!
//! # Concurrency contract
//!
//! The driver is `Sync` when its kernel and hardware are: system calls may come from any CPU at
//! once, each hook runs on the CPU it names, and a PMI (an NMI on x86) may arrive at any
//! instruction of any of them.
//!
//! * **The interrupt path** ([`Driver::interrupt`], [`Driver::soft_event`]) takes no lock and
//!   allocates nothing; it touches only its own CPU's state, through atomics. (A test runs it
//!   under a counting allocator and a kernel that fails on any lock taken there.)
//! * **Sample rings** have one producer context each: every CPU has a ring for its PMI and one
//!   for its software events, so one never reuses a slot the other is filling; the drain
//!   ([`Driver::tick`], on the same CPU) is the one consumer of both. The pending table of
//!   samples waiting for user callchains claims entries with a compare-and-swap, so both
//!   producers may use it.
//! * **Slots** (a row on a CPU) are published after they are programmed and unpublished before
//!   they are stopped (Release/Acquire), so the interrupt path only ever folds a whole PMC.
//!   Reading a running counter is exact against a concurrent overflow: the interrupt folds and
//!   reloads between two increments of the slot's reload generation, and a reader that sees it
//!   move starts again.
//! * **Locks** (each CPU's frame buffer, the bookkeeping, the logs; taken in that order) are
//!   spin locks held inside the critical section the kernel provides
//!   ([`Kernel::enter_critical_section`]), so a kernel can make them preemption- and
//!   interrupt-safe. They are taken in thread context only: system calls, the fork, exec, exit
//!   and thread hooks, the drain, the log writer, and the context-switch hooks of a thread whose
//!   process has running PMCs. A thread of a process without running PMCs switches in and out
//!   in a few instructions and takes no lock.
//! * **Per-CPU state** (slots, rings, statistics) sits on cache lines of its own; statistics are
//!   counted per CPU and added up by GETDRIVERSTATS.
//! * **The PMI** acknowledges only the status bits that are the driver's (its counters'
//!   overflows, and the freeze it asked for), never another PMU user's.
//!
//! The lock-free protocols have `loom` models next to them, run with
//! `RUSTFLAGS="--cfg loom" cargo test -p hwpmc --release`.
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
mod host_counting;
pub mod hosted;
mod lock;
// Declares the `unsafe` hardware-access methods that `arch` implements and calls.
#[allow(unsafe_code)]
pub mod hw;
pub mod kernel;
mod log;
mod logging;
mod mux;
mod ops;
mod percpu;
mod sample;
mod state;
mod sync;
pub mod text;
mod types;

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
