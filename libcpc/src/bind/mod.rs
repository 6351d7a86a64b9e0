//! Binding a set to counters: the all-or-nothing bind (every request gets a PMC or none is
//! kept), the per-LWP "one set per thread" rule, the system-wide exclusivity of CPU binds, and
//! the 64-bit virtual counters read back as `preset + events`.
//!
//! Scopes over libpmc (design choices, see the crate documentation):
//! * LWP (`cpc_bind_curlwp`): process-counting PMCs of libpmc's thread scope (PMC_F_THREAD,
//!   PMC_F_THREAD_INHERIT with CPC_BIND_LWP_INHERIT) attached to the binding thread (process
//!   counting on FreeBSD and with CPC_BIND_MULTIPLEX); the set belongs to the binding thread,
//!   which alone samples, presets, restarts, enables and disables it.
//! * CPU (`cpc_bind_cpu`): system-counting PMCs on that CPU; on the Linux host the calling
//!   thread is also pinned to the CPU until unbind.
//! * process (`cpc_bind_pctx`): process-counting PMCs attached to the controlled process.
//!
//! This module holds the binds of a [`Set`] and the calling thread's current set; its parts:
//! * `binding` — a bound set's counters: the bind itself, sampling, presets, restarts;
//! * `scope` — where a set is bound, and the CPU pinning of a CPU bind;
//! * `requests` — the checks of a set and the libpmc spec of each request;
//! * `cpu_binds`, `process_binds` — this process's CPU binds and binds to other processes.

pub(crate) mod binding;
pub(crate) mod cpu_binds;
pub(crate) mod process_binds;
pub(crate) mod requests;
pub(crate) mod scope;

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use pmc::host::HostKind;

pub use binding::Binding;
use binding::lock;
use cpu_binds::{CPU_EPOCH, cpu_bound};
use process_binds::ProcessBind;
use scope::{Scope, pin_for_bind, restore_mask};

use crate::buf::Buf;
use crate::consts::{CPC_BIND_LWP_INHERIT, CPC_BIND_MULTIPLEX, CPC_OVF_NOTIFY_EMT, Subcode};
use crate::error::{Error, Result};
use crate::overflow::signal::{SignalHeld, current_tid};
use crate::platform::Platform;
use crate::set::Set;

thread_local! {
    /// The set bound to this thread with `cpc_bind_curlwp`.
    /// The flag says whether it signals overflows (SIGEMT is then blocked while it is locked).
    static CURRENT: RefCell<Option<(Arc<Mutex<Binding>>, bool)>> = const { RefCell::new(None) };
}

impl Set {
    fn attach(&mut self, binding: Binding) -> Arc<Mutex<Binding>> {
        let binding = Arc::new(Mutex::new(binding));
        self.binding = Some(binding.clone());
        binding
    }

    /// Binds the set to the calling thread (`cpc_bind_curlwp`); a set already bound to it is
    /// unbound first, even if this bind fails.
    pub fn bind_curlwp(&mut self, platform: &Platform, flags: u32) -> Result<()> {
        const OP: &str = "cpc_bind_curlwp";
        if flags & !(CPC_BIND_LWP_INHERIT | CPC_BIND_MULTIPLEX) != 0 {
            return Err(Error::invalid(
                OP,
                format!("bind flags {flags:#x}: only CPC_BIND_LWP_INHERIT and CPC_BIND_MULTIPLEX"),
            ));
        }
        if self.requests.is_empty() {
            return Err(Error::invalid(OP, "the set has no requests"));
        }
        if let Some((previous, holds)) = CURRENT.with(|c| c.borrow_mut().take()) {
            let _held = SignalHeld::new(holds);
            lock(&previous).release();
        }
        let _ = self.unbind();
        if !cpu_bound().is_empty() {
            return Err(Error::new(OP, libc::EAGAIN)
                .because("a set is bound to a CPU (cpc_bind_cpu) in this process"));
        }
        if platform.host == HostKind::Sim
            && self.requests.iter().any(|r| r.flags & CPC_OVF_NOTIFY_EMT != 0)
        {
            return Err(Error::new(OP, libc::ENOTSUP).because(
                "on the simulator the calling thread runs no simulated code, so its counters \
                 never overflow: bind overflow requests to a simulated program (cpc_bind_pctx)",
            ));
        }
        let scope = Scope::Lwp {
            thread: std::thread::current().id(),
            epoch: CPU_EPOCH.load(Ordering::Acquire),
            inherit: flags & CPC_BIND_LWP_INHERIT != 0,
        };
        let multiplex = flags & CPC_BIND_MULTIPLEX != 0;
        let binding = Binding::new(OP, platform, &self.requests, scope, multiplex)?;
        let overflows = binding.watched_pmcs();
        let binding = self.attach(binding);
        self.holds_signal = !overflows.is_empty();
        if self.holds_signal {
            crate::overflow::linux::watch(&overflows, &binding, current_tid());
        }
        CURRENT.with(|c| *c.borrow_mut() = Some((binding, self.holds_signal)));
        Ok(())
    }

    /// Binds the set to CPU `cpu` (`cpc_bind_cpu`): one set per CPU in this process, and the
    /// first CPU bind invalidates every per-thread set (their next sample fails `EAGAIN`).
    pub fn bind_cpu(&mut self, platform: &Platform, cpu: i32, flags: u32) -> Result<()> {
        const OP: &str = "cpc_bind_cpu";
        if flags & !CPC_BIND_MULTIPLEX != 0 {
            return Err(Error::invalid(
                OP,
                format!("bind flags {flags:#x}: 0 or CPC_BIND_MULTIPLEX"),
            ));
        }
        if self.requests.is_empty() {
            return Err(Error::invalid(OP, "the set has no requests"));
        }
        let Some(cpu) = u32::try_from(cpu).ok().filter(|&c| c < platform.ncpu) else {
            return Err(Error::sub(
                OP,
                libc::EINVAL,
                Subcode::PbindFailed,
                format!("processor {cpu} does not exist (0..{})", platform.ncpu),
            ));
        };
        let _ = self.unbind();
        if cpu_bound().contains(&cpu) {
            return Err(Error::new(OP, libc::EAGAIN)
                .because(format!("processor {cpu} already has a bound set")));
        }
        let previous = pin_for_bind(cpu).map_err(|errno| {
            Error::sub(OP, errno, Subcode::PbindFailed, format!("cannot run on processor {cpu}"))
        })?;
        let saved = previous.clone();
        let scope = Scope::Cpu { cpu, thread: std::thread::current().id(), previous };
        let multiplex = flags & CPC_BIND_MULTIPLEX != 0;
        match Binding::new(OP, platform, &self.requests, scope, multiplex) {
            Ok(binding) => {
                cpu_bound().push(cpu);
                CPU_EPOCH.fetch_add(1, Ordering::AcqRel);
                self.attach(binding);
                Ok(())
            }
            Err(e) => {
                if let Some(mask) = saved {
                    restore_mask(&mask);
                }
                Err(e)
            }
        }
    }

    /// Binds the set to the process `pctx` controls (`cpc_bind_pctx`): `EINVAL` for flags other
    /// than 0, `ESRCH` if `lwp` is not one of its threads. The set bound to that LWP before is
    /// unbound (unless both are bound with `CPC_BIND_MULTIPLEX`, to take turns); when libpctx reports the end of the LWP or of its process (after the
    /// callbacks), the set's counters go back, and it samples its final values from then on.
    pub fn bind_pctx(
        &mut self,
        platform: &Platform,
        pctx: &crate::pctx::Pctx,
        lwp: i32,
        flags: u32,
    ) -> Result<()> {
        self.bind_process(platform, pctx.pid(), lwp, flags)?;
        self.terminator = Some(pctx.terminator());
        Ok(())
    }

    /// Binds the set to process `pid`, whose thread `lwp` must exist (what `cpc_bind_pctx`
    /// does, for a caller that knows the process only by its id).
    pub fn bind_process(
        &mut self,
        platform: &Platform,
        pid: i32,
        lwp: i32,
        flags: u32,
    ) -> Result<()> {
        const OP: &str = "cpc_bind_pctx";
        if flags & !CPC_BIND_MULTIPLEX != 0 {
            return Err(Error::invalid(
                OP,
                format!("bind flags {flags:#x}: 0 or CPC_BIND_MULTIPLEX"),
            ));
        }
        if platform.host != HostKind::Sim
            && self.requests.iter().any(|r| r.flags & CPC_OVF_NOTIFY_EMT != 0)
        {
            return Err(Error::new(OP, libc::ENOTSUP).because(
                "overflow signals go to the thread that bound the set; another process cannot \
                 be sent one",
            ));
        }
        if !crate::pctx::has_lwp(pid, lwp) {
            return Err(
                Error::new(OP, libc::ESRCH).because(format!("process {pid} has no LWP {lwp}"))
            );
        }
        if self.requests.is_empty() {
            return Err(Error::invalid(OP, "the set has no requests"));
        }
        let _ = self.unbind();
        let multiplex = flags & CPC_BIND_MULTIPLEX != 0;
        // The set bound to the LWP before is unbound (its counters go back first), unless both
        // take turns on the counters (CPC_BIND_MULTIPLEX).
        process_binds::release_process_binds(pid, lwp, multiplex);
        let binding =
            Binding::new(OP, platform, &self.requests, Scope::Process { pid }, multiplex)?;
        let signalling = binding.watched_pmcs();
        let binding = self.attach(binding);
        process_binds::process_binds().push(ProcessBind {
            pid,
            lwp,
            multiplex,
            binding: Arc::downgrade(&binding),
        });
        if !signalling.is_empty() {
            crate::overflow::sim::watch(signalling, &binding);
        }
        Ok(())
    }

    /// Releases the set's counters (`cpc_unbind`); `EINVAL` if it is not bound. The set is
    /// unbound afterwards in every case.
    pub fn unbind(&mut self) -> Result<()> {
        let Some(binding) = self.binding.take() else {
            return Err(Error::invalid("cpc_unbind", "the set is not bound"));
        };
        CURRENT.with(|c| {
            let mut current = c.borrow_mut();
            if current.as_ref().is_some_and(|(b, _)| Arc::ptr_eq(b, &binding)) {
                *current = None;
            }
        });
        let _held = SignalHeld::new(self.holds_signal);
        let mut binding = lock(&binding);
        let was_live = binding.is_live();
        binding.release();
        if was_live { Ok(()) } else { Err(Error::invalid("cpc_unbind", "the set is not bound")) }
    }

    /// Samples the bound set into `buf` (`cpc_set_sample`): `EINVAL` if the set is unbound or
    /// `buf` is sized for another number of requests.
    pub fn sample(&self, buf: &mut Buf) -> Result<()> {
        const OP: &str = "cpc_set_sample";
        let binding =
            self.binding.as_ref().ok_or_else(|| Error::invalid(OP, "the set is not bound"))?;
        if buf.len() != self.requests.len() {
            return Err(Error::invalid(
                OP,
                format!(
                    "the buffer holds {} values, the set has {} requests",
                    buf.len(),
                    self.requests.len()
                ),
            ));
        }
        let _held = SignalHeld::new(self.holds_signal);
        lock(binding).sample(buf)
    }
}

/// Runs `f` on the calling thread's bound set, else (on the simulator) on the set whose
/// overflow signal it received last (see [`crate::overflow::sim`]); `EINVAL` if it has neither.
fn with_current<R>(op: &'static str, f: impl FnOnce(&mut Binding) -> Result<R>) -> Result<R> {
    let current = CURRENT.with(|c| c.borrow().clone());
    let current =
        current.or_else(|| crate::overflow::sim::signalled::<Mutex<Binding>>().map(|b| (b, false)));
    let (binding, holds) =
        current.ok_or_else(|| Error::invalid(op, "the calling thread has no bound set"))?;
    let _held = SignalHeld::new(holds);
    let mut guard = lock(&binding);
    f(&mut guard)
}

/// Sets the preset of request `index` of the calling thread's set, used from the next
/// [`set_restart`] (`cpc_request_preset`).
pub fn request_preset(index: i32, preset: u64) -> Result<()> {
    with_current("cpc_request_preset", |b| b.request_preset(index, preset))
}

/// Restarts the calling thread's set from its presets (`cpc_set_restart`).
pub fn set_restart() -> Result<()> {
    with_current("cpc_set_restart", Binding::restart)
}

/// Stops the calling thread's counters, keeping their values (`cpc_disable`).
pub fn disable() -> Result<()> {
    with_current("cpc_disable", Binding::disable)
}

/// Resumes the calling thread's counters from their values (`cpc_enable`).
pub fn enable() -> Result<()> {
    with_current("cpc_enable", Binding::enable)
}
