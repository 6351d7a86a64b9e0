//! hwpmc: FreeBSD's hwpmc(4) hardware performance-monitoring-counter driver as a no_std library.
//!
//! A kernel embeds it by implementing the `Kernel` trait of services, calling its hooks from the
//! scheduler, exec, fork, exit and mmap paths and from the PMI handler, and routing the hwpmc
//! system call to it. On FreeBSD-compatible systems the ABI is FreeBSD's (see [`abi`]); logs are
//! written with the [`pmclog`] crate.
//!
//! # Layers
//!
//! One folder per layer, arrows pointing down:
//!
//! * leaf types: [`abi`], [`errno`], `refusal.rs` (why a system call was refused: a cause,
//!   its errno and its text), [`text`], and `types.rs` (processes, threads, CPUs, user
//!   addresses, PMC handles, sampling flags);
//! * the host-kernel interface ([`kernel`], and [`hosted`] for a kernel that counts PMCs
//!   itself), the hardware traits ([`hw`]), the PMU backend trait (`backend.rs`), the
//!   machine-dependent backends ([`arch`]: MSRs, native access, `x86/intel/`, `x86/amd/`) and
//!   the classes (`class/`);
//! * `mux/model.rs`: the multiplexing data (virtual rows, turns, times), below the two that keep
//!   it;
//! * `machine/`: the per-CPU runtime — each CPU's slots, sample rings, samples pending a user
//!   callchain, statistics and what its switch-out undoes;
//! * `book/`: the bookkeeping — PMCs, owners, targets, row dispositions — under one lock;
//! * `publish/`: what the bookkeeping publishes for the lock-free hooks — load lists and the
//!   image maps made of them, the running pids, the credit cells the hooks hand counts back to;
//! * `log/`: owners' log buffers, the records the driver emits, and the writer;
//! * the entry points, `impl Driver` blocks: `driver/` (the object, load and unload, and
//!   loading one PMC on a CPU), `hooks/` (context switches and parking, processes, threads,
//!   the PMI, the tick, callchains), `syscall/` (one file per group of operations),
//!   `mux/rotate.rs` (the rotation of multiplexed PMCs) and `hosted/handover.rs` (PMCs handed
//!   to the host).
//!
//! # Counter multiplexing (extension)
//!
//! A counting PMC allocated with `PMC_F_MULTIPLEX` ([`abi::PmcFlags::MULTIPLEX`], a bit
//! FreeBSD does not use) may share a counter with other multiplexed PMCs of its CPU or process:
//! the driver rotates them at [`Driver::tick`] and keeps each one's time enabled and time on a
//! counter, read with the extension op [`abi::PMC_OP_PMCREADTIMES`]. `PMC_F_GROUP_LEADER` and
//! `PMC_F_GROUP_MEMBER` make event groups that are always counted together. Without these
//! flags nothing changes: allocation fails when the rows run out, as FreeBSD's. The details are
//! in `mux/`.
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
//! * **Slots** (a row on a CPU) are claimed and their counters written before they are
//!   published, and unpublished before their final values are read (Release/Acquire), so the
//!   interrupt path only ever folds a whole PMC. A hardware counter's slot is published by a
//!   bit of its CPU's published-counters word, so a switch publishes or hides all of a
//!   process's counters with one store.
//!   Reading a running counter is exact against a concurrent overflow: the interrupt folds and
//!   reloads between two increments of the slot's reload generation, and a reader that sees it
//!   move starts again.
//! * **Context switches** ([`Driver::switch_in`], [`Driver::switch_out`]) take no lock shared
//!   with system calls. A thread of a process without running PMCs costs a few instructions (a
//!   bit of a shared word, and its CPU's state). For one with running PMCs, switch-in reads the
//!   process's load image in its CPU's image map: an immutable, versioned map of immutable
//!   images (the process's load list worked out, in thread context, for CPUs with that CPU's
//!   counters: slots to claim, counters to write, the control registers as one backend image)
//!   that the driver builds from the bookkeeping's lists and gives to every CPU by running a
//!   closure there ([`Kernel::run_on_cpu`]) before it goes on — RCU by rendezvous: when a PMC has left
//!   the map of every CPU, no switch-in can load it any more, and the system call then unloads
//!   it where it still runs. The closure only swaps two references; the map it replaces goes
//!   back to the system call, which drops it: nothing is freed under a reader, and the hooks
//!   and closures allocate and free nothing. Switch-out stops its counters and clears their
//!   control registers and overflow indications in one backend call, then hides them with one
//!   store (an interrupt in between folds a stopped counter, or finds no overflow), and
//!   hands what each PMC counted and lost, and where a sampling period stands, to the credit
//!   cell of its (PMC, process) link: atomics in an arena that only grows, reached by index.
//!   It writes the cell before it empties the slot, so a system call that finds the slot empty
//!   finds the count in the cell; system calls move the cells into the PMC's count under the
//!   lock when they read it. (A PMC with PMC_F_LOG_PROCCSW is the exception: its PROCCSW
//!   record goes to its owner's log at switch-out, through the bookkeeping and log locks.)
//!   A process with thread PMCs (`PmcFlags::THREAD`) has no image: its switch-in goes through
//!   the same immutable load list PMC by PMC, loading those of the thread that switches in
//!   (still no lock, nothing allocated).
//!   A switch-out whose thread had only counting PMCs loaded (on hardware counters or
//!   software events, logging nothing, without multiplexing or RDPMC) *parks* them instead
//!   (`hooks/parking.rs`): it stops the counters and hides the slots, and leaves them claimed and
//!   programmed. A switch-in of the same process on that CPU under the same image map only
//!   publishes and starts them again; anything else that loads PMCs there evicts them first
//!   (their counts go to the credit cells as at a switch-out), and a system call finds a parked
//!   PMC's slot as it finds a running one's. A kernel calls [`Driver::cpu_offline`] on a CPU
//!   that stops running threads.
//! * **Locks** (each CPU's frame buffer, the bookkeeping, the logs; taken in that order) are
//!   spin locks held inside the critical section the kernel provides
//!   ([`Kernel::enter_critical_section`]), so a kernel can make them preemption- and
//!   interrupt-safe. They are taken in thread context only: system calls, the fork, exec, exit
//!   and thread hooks, the drain and the log writer (and closures these run on a CPU).
//! * **Per-CPU state** (slots, rings, statistics) sits on cache lines of its own; statistics are
//!   counted per CPU and added up by GETDRIVERSTATS.
//! * **The PMI** acknowledges only the status bits that are the driver's (its counters'
//!   overflows, and the freeze it asked for), never another PMU user's.
//!
//! The lock-free protocols have `loom` models next to them, run with
//! `RUSTFLAGS="--cfg loom" cargo test -p hwpmc --release`.
//!
//! # Freezing counters on a PMI
//!
//! From perfmon v2 an Intel PMU can freeze its counters when it raises a PMI
//! (IA32_DEBUGCTL.FREEZE_PERFMON_ON_PMI: v2 and v3 clear IA32_PERF_GLOBAL_CTRL, v4 and later set
//! GLOBAL_STATUS.CTR_FRZ). The freeze happens when the PMI is *raised*; everything the CPU
//! retires until the handler *serves* it is lost to every counter of the CPU, counting PMCs
//! included. Without freezing, the counters run until the handler's first instruction stops
//! them through IA32_PERF_GLOBAL_CTRL (before it reads the status, which it reads again until no
//! overflow of its own is left), so nothing is lost; the cost is one more WRMSR and RDMSR per
//! PMI, and an OS-mode counter also counts the NMI's entry up to that WRMSR.
//!
//! Measured on the simulated machine (a user sampling PMC, one sample per 10 000 instructions,
//! beside a counting PMC on core cycles; `pmi_latency.rs`): with PMIs served up to 2 block
//! executions late, freezing lost 0.9 to 1.0% of the cycles, up to 8 late 5.2 to 5.6%, on perfmon
//! v4 and v2 alike; not freezing lost none. The price of not freezing is 3 more instructions per
//! sample in the handler (111 instead of 108 on the simulated Skylake, MSR accesses excluded:
//! `driver/sim/benches/instructions.sh`, the bench's `--freeze` for the other). So the
//! driver does not freeze, on any version (as Linux, which dropped v4 counter freezing for the
//! same reason):
//!
//! | | default | with the `freeze_on_pmi` tunable |
//! |---|---|---|
//! | perfmon v1 | no freeze (there is none) | no freeze |
//! | perfmon v2, v3 (bare metal) | no freeze | legacy freeze (GLOBAL_CTRL cleared) |
//! | perfmon v4, v5 (bare metal) | no freeze | streamlined freeze (CTR_FRZ) |
//! | any version under a hypervisor | no freeze | no freeze (a vPMU may #GP on the bit, as KVM's does) |
//!
//! With or without freezing, the driver sets and clears only the freeze bit of IA32_DEBUGCTL and
//! leaves the others (LBR, BTF, branch trace) to their owners.
#![cfg_attr(not(test), no_std)]
#![deny(unsafe_code)]

extern crate alloc;

pub mod abi;
// The only module with `unsafe` code: hardware access.
#[allow(unsafe_code)]
pub mod arch;
mod backend;
mod book;
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
mod machine;
mod mux;
mod publish;
mod refusal;
mod sync;
mod syscall;
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
