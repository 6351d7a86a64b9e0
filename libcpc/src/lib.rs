//! libcpc: the Solaris/illumos CPU performance counter library (`cpc(3CPC)`, API version 2)
//! over libpmc, as a Rust API and as the C ABI of `libcpc.so` / `libcpc.a` (header
//! `libcpc/include/libcpc.h`), so that a Solaris program builds unchanged with
//! `#include <libcpc.h>` and `-lcpc`.
//!
//! * [`Cpc`] — an open library handle (`cpc_t`): the counters of this host ([`Platform`]).
//! * [`Set`] — requests (event, preset, flags, attributes) and their binding: to the calling
//!   thread ([`Set::bind_curlwp`]), to a CPU ([`Set::bind_cpu`]) or to a process
//!   ([`Set::bind_pctx`] with a [`Pctx`]). A bind is all-or-nothing.
//! * [`Buf`] — a sample: 64-bit values `preset + events` by request index, hrtime, tick.
//! * [`request_preset`], [`set_restart`], [`enable`], [`disable`] — the calling thread's set.
//! * [`capi`] — the C ABI.
//! * [`tool`] — what cpustat and cputrack share: the `-c` spec grammar, columns, `-h` text.
//!
//! # Choices where the reference leaves room (tagged \[I\] there)
//!
//! * PICs are logical counters over libpmc classes (see [`platform`]); `cpc_cciname` says which.
//! * Per-LWP counting uses libpmc's thread scope (an extension of FreeBSD's process scope,
//!   `PMC_F_THREAD`): a set bound with `cpc_bind_curlwp` counts the binding thread alone, and
//!   with `CPC_BIND_LWP_INHERIT` (`PMC_F_THREAD_INHERIT`) the threads it creates afterwards too,
//!   **in the same values** (illumos gives each new LWP its own copy of the set, which one PMC
//!   per request cannot express). Two threads' sets share the process's counters. Where the
//!   scope is missing, a per-LWP set counts every thread of the process: on FreeBSD (its kernel
//!   counts processes only) and with `CPC_BIND_MULTIPLEX` (the driver rotates multiplexed PMCs
//!   for the whole process). On the simulator the binding thread runs no simulated code: the
//!   set counts the simulated thread standing for it, which retires nothing.
//! * The exclusivity of CPU binds (one set per CPU; per-LWP binds `EAGAIN` while one exists; the
//!   first invalidates per-LWP sets) holds within this process.
//! * Binding another set to a thread marks the one it replaces unbound (`EINVAL` on its use);
//!   so does binding another set to an LWP of a process with `cpc_bind_pctx` (its counters go
//!   back first), unless both are bound with `CPC_BIND_MULTIPLEX` to take turns. When libpctx
//!   reports the end of an LWP or process, the sets bound to it give their counters back and
//!   keep their final values: they stay bound, and `cpc_set_sample` reads those values.
//! * `CPC_BIND_MULTIPLEX` (an extension, accepted by every bind) lets the set take turns on the
//!   counters with other sets bound so: it is one event group of the driver (counted as a
//!   whole), and its sampled values are scaled to the time it was bound.
//! * `cpc_buf_get`/`cpc_buf_set` refuse an index outside the buffer with `EINVAL`.
//! * `cpc_buf_tick` counts TSC cycles elapsed since bind (wall time, not only on-CPU time).
//! * The attributes `nouser` and `sys` are accepted in requests too (clearing `CPC_COUNT_USER`,
//!   setting `CPC_COUNT_SYSTEM`), as the tools' spec tokens of the same names; `cpc_walk_attrs`
//!   does not list them (they are flags). The modes apply to the Linux host's software events
//!   too (perf's `exclude_user`/`exclude_kernel`); a request of neither mode counts nothing.
//! * `cpc_set_add_request` refuses unknown flags (`CPC_REQ_INVALID_FLAGS`), an empty event name
//!   (`CPC_INVALID_EVENT`) and an SMPL request's missing, 0 or too large `smpl_nrecs`
//!   (`CPC_ATTRIBUTE_OUT_OF_RANGE`), all `EINVAL`: illumos lets these through to the bind (or,
//!   for `""`, takes it for a raw code).
//! * An overflow request (`CPC_OVF_NOTIFY_EMT`) binds with any preset: one more than 2^63
//!   events from wrapping (1, …) never signals; a clock's overflow "at the next event"
//!   (`UINT64_MAX`) comes at its shortest period (10 µs).
//! * A closed `cpc_t` is refused with `EINVAL` (as destroyed sets and buffers are), without its
//!   memory being read; the functions returning no status set `errno`.
//! * `pctx_create(file, argv, …)` executes `file` as `execvp` would (a name without `/` is looked
//!   up in `PATH`; on the simulator it names the program); `pctx_create` and `pctx_capture`
//!   report failures through the error function, by default on standard error as
//!   `libpctx: pctx_create: cannot find program '…'`.
//! * `CPC_HW_SMPL` is 0x100; SMPL requests sample through libpmc's sampling PMCs (see [`smpl`]).
//! * Overflow signals work on the Linux host for sets bound to a thread (see [`overflow::linux`]:
//!   `SIGEMT` is `SIGSTKFLT` there), and on the simulator for sets bound to a simulated program,
//!   whose signals go to the thread running `pctx_run` (see [`overflow::sim`]). The other binds of a
//!   request with `CPC_OVF_NOTIFY_EMT` fail `ENOTSUP` (on the simulator the calling thread runs
//!   no simulated code; on Linux another process cannot be sent the signal); CPU-bound sets
//!   never signal (illumos). A preset set with `cpc_request_preset` gives the overflow period
//!   from the next restart on.
//! * libpctx is the part libcpc needs, over libpmc's launching (see [`pctx`]): its fork, exec,
//!   LWP and exit events come from the simulated kernel on the simulator and from ptrace on
//!   Linux; on FreeBSD a process is one LWP to its callbacks and only its end is reported.
//! * Generic events: the architectural ones on Intel (`PAPI_tot_cyc`, `PAPI_tot_ins`,
//!   `PAPI_br_ins`, `PAPI_br_msp`, `PAPI_l3_tca`, `PAPI_l3_tcm`; `PAPI_tot_ins` and
//!   `PAPI_tot_cyc` on fixed counters 0 and 1 too); on AMD families 10h, 17h and 19h
//!   illumos's, plus Linux perf's branch misses and L2 requests and misses where illumos has
//!   none (see [`generics`]). None on the software backend: no `PAPI_*` event means a software
//!   count.
//! * AMD's attributes are `edge`, `inv`, `umask` (ORed into a named event's unit mask, as
//!   illumos does), `cmask`; not `pc` (libpmc does not set the pin-control bit). Raw codes take
//!   12 bits.
//! * `cpc_set_request_preset` (Oracle) sets a request's preset for its next bind, and for the
//!   next `cpc_set_restart` when the set is the calling thread's bound set.
//! * A set remembers the pctx it was bound to only for `cpc_terminate`; destroying the set does
//!   not release the pctx (illumos does): the application releases it with `pctx_release`.
//! * `cpc_walk_events_all` and `_all_common` list names sorted, each once.
//! * The subcodes `CPC_CONFLICTING_REQS`, `CPC_ATTR_REQUIRES_PRIVILEGE` (illumos: Intel's
//!   `anythr`) and `CPC_HV_NO_ACCESS` are defined but never reported: no backend has conflicting
//!   requests, the attribute `anythr` (libpmc refuses AnyThread counting) or hypervisor events.
//! * After `fork`, the child's sets bound in the parent act as unbound (`EINVAL`; their
//!   counters are the parent's, as on FreeBSD a child owns none of its parent's PMCs): the child
//!   binds its own, and gets its own overflow watcher and sample log.
//! * SMPL requests and overflow signals read the process's pmc log, which libcpc then owns
//!   (a program configuring its own libpmc log at the same time gets `EBUSY` at bind).

pub mod assign;
pub mod bind;
pub mod buf;
pub mod capi;
pub mod consts;
pub mod error;
pub(crate) mod fork;
pub mod generics;
pub mod overflow;
pub mod pctx;
pub mod platform;
pub mod request;
pub mod set;
pub mod smpl;
pub mod tool;

use std::sync::Arc;

pub use bind::{disable, enable, request_preset, set_restart};
pub use buf::{Buf, gethrtime};
pub use error::{Error, Result};
/// [`overflow`] under its former name (`cpc::ovf::SIGEMT`).
pub use overflow as ovf;
pub use pctx::{Pctx, PctxEvents};
pub use platform::Platform;
pub use set::{Attr, Request, Set};

/// An open library handle: the counters of this process's libpmc host.
#[derive(Debug, Clone)]
pub struct Cpc {
    platform: Arc<Platform>,
}

impl Cpc {
    /// Opens the library (`cpc_open`): `EINVAL` unless `version` is [`consts::CPC_VER_CURRENT`];
    /// the host's error (e.g. `ENOSYS`) if it has no counters to offer.
    pub fn open(version: i32) -> Result<Cpc> {
        if version != consts::CPC_VER_CURRENT {
            return Err(Error::invalid(
                "cpc_open",
                format!(
                    "version {version}: only CPC_VER_CURRENT ({}) is supported",
                    consts::CPC_VER_CURRENT
                ),
            ));
        }
        Ok(Cpc { platform: Arc::new(Platform::probe()?) })
    }

    /// The counters and their events.
    pub fn platform(&self) -> &Platform {
        &self.platform
    }

    /// `cpc_npic`.
    pub fn npic(&self) -> u32 {
        self.platform.npic()
    }

    /// `cpc_caps`.
    pub fn caps(&self) -> u32 {
        self.platform.caps
    }

    /// `cpc_cciname`.
    pub fn cciname(&self) -> &str {
        &self.platform.cciname
    }

    /// `cpc_cpuref`.
    pub fn cpuref(&self) -> &str {
        &self.platform.cpuref
    }
}
