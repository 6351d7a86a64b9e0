//! A bound set's counters ([`Binding`]): the all-or-nothing bind (every request gets a PMC or
//! none is kept), the 64-bit virtual counters read back as `preset + events`, presets and
//! restarts, and what the overflow watchers read for it (it is their [`OverflowTarget`]).

use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard, PoisonError};

use pmc::host::HostKind;
use pmc::{Mode, Pmc, PmcFlags, PmcSpec};

use super::cpu_binds::{CPU_EPOCH, cpu_bound};
use super::requests::{allocation_error, check_set, pmc_spec, rings, smpl_spec};
use super::scope::{Scope, restore_mask, thread_scope};
use crate::assign::{Need, assign};
use crate::buf::{Buf, gethrtime};
use crate::consts::{CPC_CAP_OVERFLOW_INTERRUPT, CPC_OVF_NOTIFY_EMT, Subcode};
use crate::error::{Error, Result};
use crate::overflow::OverflowTarget;
use crate::platform::Platform;
use crate::request::Request;
use crate::smpl;

/// Locks a binding; a thread that panicked while holding it left it consistent (every field is
/// written whole), so a poisoned lock is used as is.
pub(crate) fn lock(binding: &Mutex<Binding>) -> MutexGuard<'_, Binding> {
    binding.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One request's counter.
#[derive(Debug)]
struct Counter {
    /// The PMC; `None` for a request counting in no mode (neither user nor system).
    pmc: Option<Pmc>,
    /// The value it counts from since the last bind or restart.
    preset: u64,
    /// The preset the next restart uses (`cpc_request_preset`).
    next_preset: u64,
    /// The PMC's value at the last bind or restart.
    base: u64,
    /// For an SMPL request: its records so far and how many it keeps.
    smpl: Option<Records>,
    /// For an overflow request bound to a thread: the sampling PMC that overflows with it.
    overflow: Option<Pmc>,
    /// The shortest period its overflow PMC samples at (a clock's, in nanoseconds; else 1).
    min_period: u64,
}

/// The period of the sampling PMC that signals the overflow of a counter starting at
/// `preset`: the events it lacks to wrap, at least `min` (a clock's shortest period: an
/// overflow "at the next event" comes at the clock's next tick). `None` for presets more than
/// 2^63 events from wrapping (0, 1, …), which no host samples so rarely (perf refuses such
/// periods) and which never overflow in practice (2^63 events take decades).
fn overflow_period(preset: u64, min: u64) -> Option<u64> {
    smpl::period(preset).filter(|&p| p <= i64::MAX as u64).map(|p| p.max(min))
}

/// The shortest sampling period of the libpmc event `spec`: perf's clocks sample at most every
/// [`pmc::host::CLOCK_MIN_PERIOD_NS`] nanoseconds; other events every event.
fn min_period(spec: &str) -> u64 {
    let clock = ["task-clock", "cpu-clock"].iter().any(|c| spec.eq_ignore_ascii_case(c));
    if clock { pmc::host::CLOCK_MIN_PERIOD_NS } else { 1 }
}

/// The records of an SMPL request.
#[derive(Debug)]
struct Records {
    cap: usize,
    ips: Vec<u64>,
    /// Whether the thread gets SIGEMT when `cap` records are in (`CPC_OVF_NOTIFY_EMT`), and
    /// whether it got it.
    notify: bool,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))] // Read by the Linux overflow watcher.
    notified: bool,
}

/// A bound set's counters.
#[derive(Debug)]
pub struct Binding {
    scope: Scope,
    counters: Vec<Counter>,
    live: bool,
    /// The values while counting is stopped (`cpc_disable`).
    frozen: Option<Buf>,
    bind_tsc: u64,
    /// Bound with [`CPC_BIND_MULTIPLEX`]: values are scaled (see [`Binding::count`]).
    multiplex: bool,
    /// When the overflow PMCs last started counting a period (bind, restart): an overflow
    /// sample older than that belongs to a period that is over.
    armed_tsc: u64,
    /// Bound to a simulated process with a signalling request: its signals go to the thread
    /// that runs the machine, which may preset and restart it (see [`crate::overflow::sim`]).
    signals_controller: bool,
    /// The process generation that bound it (see [`crate::fork`]): in a forked child the
    /// parent's bindings act as unbound, their counters being the parent's.
    generation: u64,
}

/// Whether a request of `scope` signals (see [`crate::overflow`]): a
/// counter request its overflows, an SMPL request the moment its records are all in. Sets
/// bound to a thread signal on the Linux host, sets bound to a process on the simulator.
fn signals(platform: &Platform, scope: &Scope, request: &Request) -> bool {
    request.flags & CPC_OVF_NOTIFY_EMT != 0
        && platform.caps & CPC_CAP_OVERFLOW_INTERRUPT != 0
        && signalling_scope(platform, scope)
}

/// Whether sets bound in `scope` signal on this host.
fn signalling_scope(platform: &Platform, scope: &Scope) -> bool {
    match scope {
        Scope::Lwp { .. } => platform.host == HostKind::Linux,
        Scope::Process { .. } => platform.host == HostKind::Sim,
        Scope::Cpu { .. } => false,
    }
}

/// Whether a counter request of `scope` signals its overflows.
fn signals_overflow(platform: &Platform, scope: &Scope, request: &Request) -> bool {
    signals(platform, scope, request)
        && !request.is_smpl()
        && overflow_period(request.preset, 1).is_some()
}

/// The time-stamp counter.
fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC reads the time-stamp counter; it has no memory effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        gethrtime() as u64
    }
}

impl Binding {
    /// Binds `requests` in `scope`: all of them get a running PMC, or none is kept.
    pub(super) fn new(
        op: &'static str,
        platform: &Platform,
        requests: &[Request],
        scope: Scope,
        multiplex: bool,
    ) -> Result<Binding> {
        check_set(op, platform, requests)?;
        let generation = crate::fork::generation();
        let counting: Vec<usize> =
            (0..requests.len()).filter(|&i| !requests[i].is_smpl()).collect();
        let needs: Vec<Need> = counting
            .iter()
            .map(|&i| Need {
                picnum: requests[i].picnum().map(|p| p as usize),
                coverage: platform.coverage(&requests[i].event),
            })
            .collect();
        let assigned = assign(&needs, platform.pics.len()).ok_or_else(|| {
            Error::sub(
                op,
                libc::EINVAL,
                Subcode::ResourceUnavail,
                "no assignment of the requests to counters exists (a raw event code needs picnum)",
            )
        })?;
        let mut pics = vec![None; requests.len()];
        for (&i, &pic) in counting.iter().zip(&assigned) {
            pics[i] = Some(pic);
        }
        let specs = requests
            .iter()
            .zip(&pics)
            .map(|(r, pic)| match pic {
                Some(pic) => pmc_spec(op, platform, *pic, r),
                None => smpl_spec(op, platform, r),
            })
            .collect::<Result<Vec<_>>>()?;
        let scoped = thread_scope(platform, &scope, multiplex);
        let (counting_mode, sampling_mode, cpu, target) = match &scope {
            Scope::Lwp { .. } => (Mode::ThreadCounting, Mode::ThreadSampling, 0, Some(0)),
            Scope::Process { pid } => (Mode::ThreadCounting, Mode::ThreadSampling, 0, Some(*pid)),
            Scope::Cpu { cpu, .. } => (Mode::SystemCounting, Mode::SystemSampling, *cpu, None),
        };
        if requests.iter().any(|r| r.is_smpl() || signals_overflow(platform, &scope, r)) {
            smpl::ensure_log(op)?;
        }
        let signalling = requests.iter().any(|r| signals(platform, &scope, r));
        if signalling && platform.host == HostKind::Linux {
            crate::overflow::linux::start_watcher();
        }
        let mut counters = Vec::with_capacity(requests.len());
        for (index, (request, spec)) in requests.iter().zip(&specs).enumerate() {
            let (usr, os) = rings(request);
            // A software event's spec takes no ring qualifiers: its rings go with the request
            // (perf's exclude_user / exclude_kernel on Linux). A request counting in neither
            // mode counts nothing (illumos programs the counter with neither mode bit): it
            // gets no PMC, as a hardware one.
            let new_spec = |spec: &str| {
                let pmc_spec = PmcSpec::new(spec);
                if usr || os { pmc_spec.soft_rings(usr, os) } else { pmc_spec }
            };
            let pmc = if usr || os || request.is_smpl() {
                let mut pmc_spec = new_spec(spec).cpu(cpu).flags(scoped);
                pmc_spec = if request.is_smpl() {
                    let spec = pmc_spec.mode(sampling_mode);
                    match smpl::period(request.preset) {
                        Some(period) => spec.rate(period),
                        None => spec,
                    }
                } else if multiplex {
                    // The set's counting PMCs are one group: counted together or not at all.
                    let leading =
                        !counters.iter().any(|c: &Counter| c.pmc.is_some() && c.smpl.is_none());
                    let group =
                        if leading { PmcFlags::GROUP_LEADER } else { PmcFlags::GROUP_MEMBER };
                    pmc_spec.mode(counting_mode).flags(PmcFlags::MULTIPLEX | group)
                } else {
                    pmc_spec.mode(counting_mode)
                };
                let pmc = pmc_spec.allocate().map_err(|e| allocation_error(op, &e, index))?;
                if let Some(pid) = target {
                    pmc.attach(pid).map_err(|e| allocation_error(op, &e, index))?;
                }
                Some(pmc)
            } else {
                None
            };
            let smpl = request.is_smpl().then(|| Records {
                cap: request.attr(smpl::SMPL_NRECS).unwrap_or(0) as usize,
                ips: Vec::new(),
                notify: signals(platform, &scope, request),
                notified: false,
            });
            let min_period = min_period(spec);
            let overflow = match overflow_period(request.preset, min_period) {
                Some(period) if signals_overflow(platform, &scope, request) => {
                    let pmc = new_spec(spec)
                        .flags(scoped)
                        .mode(sampling_mode)
                        .rate(period)
                        .allocate()
                        .map_err(|e| allocation_error(op, &e, index))?;
                    pmc.attach(target.unwrap_or(0)).map_err(|e| allocation_error(op, &e, index))?;
                    Some(pmc)
                }
                _ => None,
            };
            counters.push(Counter {
                pmc,
                preset: request.preset,
                next_preset: request.preset,
                base: 0,
                smpl,
                overflow,
                min_period,
            });
        }
        let armed_tsc = tsc();
        // Sampling PMCs first: the first start of one makes the host describe the process's
        // mappings to the log (on Linux, reading the kernel's symbol table: page faults that
        // the counting PMCs of the set must not count).
        let sampling_first = counters.iter().enumerate().flat_map(|(index, c)| {
            let (sampling, counting) = if c.smpl.is_some() {
                (c.pmc.as_ref(), None)
            } else {
                (c.overflow.as_ref(), c.pmc.as_ref())
            };
            [(0, index, sampling), (1, index, counting)]
        });
        let mut order: Vec<_> = sampling_first.filter_map(|(o, i, p)| Some((o, i, p?))).collect();
        order.sort_by_key(|&(o, i, _)| (o, i));
        for (_, index, pmc) in order {
            pmc.start().map_err(|e| allocation_error(op, &e, index))?;
        }
        Ok(Binding {
            signals_controller: signalling && matches!(scope, Scope::Process { .. }),
            scope,
            counters,
            live: true,
            frozen: None,
            bind_tsc: tsc(),
            multiplex,
            armed_tsc,
            generation,
        })
    }

    /// Whether the binding still holds its counters (in this process).
    pub(crate) fn is_live(&self) -> bool {
        self.live && !self.inherited()
    }

    /// Whether a parent process bound it: this forked child has none of its counters.
    fn inherited(&self) -> bool {
        self.generation != crate::fork::generation()
    }

    /// The ids of its overflow PMCs.
    /// The PMCs whose samples the watcher reads: overflow PMCs and those of SMPL requests that
    /// signal when their records are in.
    pub(crate) fn watched_pmcs(&self) -> Vec<u32> {
        let notifying = |c: &Counter| c.smpl.as_ref().is_some_and(|r| r.notify);
        let smpl = self.counters.iter().filter(|c| notifying(c)).filter_map(|c| c.pmc.as_ref());
        let overflow = self.counters.iter().filter_map(|c| c.overflow.as_ref());
        overflow.chain(smpl).map(Pmc::id).collect()
    }

    /// Keeps the values of a set whose process or LWP has ended, and gives its PMCs back: it
    /// stays bound, and samples its final values.
    pub(super) fn retire(&mut self) {
        if !self.is_live() {
            return;
        }
        if self.frozen.is_none() {
            let mut last = Buf::new(self.counters.len());
            if self.sample(&mut last).is_err() {
                // Unreadable: nothing to keep.
                self.release();
                return;
            }
            last.smpl = Vec::new();
            self.frozen = Some(last);
        }
        crate::overflow::unwatch(&self.watched_pmcs());
        let sampling: Vec<u32> = self.sampling_pmcs();
        smpl::forget(&sampling);
        for counter in &mut self.counters {
            counter.pmc = None;
            counter.overflow = None;
        }
    }

    /// The ids of the sampling PMCs (SMPL requests' and overflow PMCs).
    fn sampling_pmcs(&self) -> Vec<u32> {
        let sampling =
            self.counters.iter().filter(|c| c.smpl.is_some()).filter_map(|c| c.pmc.as_ref());
        sampling
            .chain(self.counters.iter().filter_map(|c| c.overflow.as_ref()))
            .map(Pmc::id)
            .collect()
    }

    /// Releases the counters.
    pub(super) fn release(&mut self) {
        if self.inherited() {
            // The parent's PMCs: their ids may be this child's own PMCs' ids, so nothing is
            // released; the parent's memory copy is left as it is.
            for counter in self.counters.drain(..) {
                std::mem::forget(counter);
            }
            if let Scope::Cpu { previous, .. } = &mut self.scope {
                // The parent's thread's mask: not this child's to restore.
                *previous = None;
            }
            self.frozen = None;
            self.live = false;
            return;
        }
        crate::overflow::unwatch(&self.watched_pmcs());
        smpl::forget(&self.sampling_pmcs());
        self.counters.clear();
        self.frozen = None;
        if self.live
            && let Scope::Cpu { cpu, previous, .. } = &mut self.scope
        {
            cpu_bound().retain(|c| c != cpu);
            if let Some(mask) = previous.take() {
                restore_mask(&mask);
            }
        }
        self.live = false;
    }

    /// Checks that the calling thread may use this binding now.
    fn usable(&self, op: &'static str) -> Result<()> {
        if !self.live {
            return Err(Error::invalid(op, "the set is not bound (another set replaced it?)"));
        }
        if self.inherited() {
            return Err(Error::invalid(op, "the set was bound in the parent process, not here"));
        }
        let me = std::thread::current().id();
        match &self.scope {
            Scope::Lwp { thread, epoch, .. } => {
                if *thread != me {
                    return Err(Error::invalid(op, "the set is bound to another thread"));
                }
                if *epoch != CPU_EPOCH.load(Ordering::Acquire) {
                    return Err(Error::new(op, libc::EAGAIN)
                        .because("the counters were invalidated by a CPU bind (cpc_bind_cpu)"));
                }
            }
            Scope::Cpu { thread, .. } => {
                if *thread != me {
                    return Err(Error::new(op, libc::EAGAIN)
                        .because("a CPU-bound set is sampled by the thread that bound it"));
                }
            }
            Scope::Process { .. } => {}
        }
        Ok(())
    }

    /// Reads the virtual counters into `buf`, and the SMPL requests' records.
    pub(crate) fn sample(&mut self, buf: &mut Buf) -> Result<()> {
        const OP: &str = "cpc_set_sample";
        self.usable(OP)?;
        // SMPL requests keep sampling while the counters are frozen.
        for (index, counter) in self.counters.iter_mut().enumerate() {
            let Some(records) = counter.smpl.as_mut() else { continue };
            // A retired set's PMC is gone: its records are all there are.
            if let Some(pmc) = &counter.pmc {
                let new = smpl::take_samples(OP, pmc.id())?;
                let room = records.cap.saturating_sub(records.ips.len());
                records.ips.extend(new.into_iter().take(room).map(|sample| sample.ip));
            }
            if let Some(slot) = buf.smpl.get_mut(index) {
                *slot = Some(records.ips.clone());
            }
        }
        if let Some(frozen) = &self.frozen {
            let records = std::mem::take(&mut buf.smpl);
            buf.copy_from(frozen);
            buf.smpl = records;
            return Ok(());
        }
        self.read_values(buf)
    }

    /// A counting PMC's count: as read, or scaled to the time the set was bound when it takes
    /// turns on the counters ([`CPC_BIND_MULTIPLEX`]; the set's PMCs share one turn, so their
    /// values keep their ratios).
    fn count(&self, pmc: &Pmc) -> pmc::Result<u64> {
        Self::count_of(self.multiplex, pmc)
    }

    fn count_of(multiplex: bool, pmc: &Pmc) -> pmc::Result<u64> {
        if multiplex { Ok(pmc.read_scaled()?.scaled().unwrap_or(0)) } else { pmc.read() }
    }

    /// Reads the counters' values, hrtime and tick into `buf`.
    fn read_values(&self, buf: &mut Buf) -> Result<()> {
        const OP: &str = "cpc_set_sample";
        for (slot, counter) in buf.data.iter_mut().zip(&self.counters) {
            *slot = match &counter.pmc {
                _ if counter.smpl.is_some() => 0,
                Some(pmc) => {
                    let now = self.count(pmc).map_err(|e| Error::pmc(OP, &e))?;
                    counter.preset.wrapping_add(now.wrapping_sub(counter.base))
                }
                None => counter.preset,
            };
        }
        buf.hrtime = gethrtime();
        buf.tick = tsc().wrapping_sub(self.bind_tsc);
        Ok(())
    }

    #[cfg_attr(not(target_os = "linux"), allow(dead_code))] // Read by the Linux overflow watcher.
    /// Stops the counters at an overflow (the watcher thread): `false` if they are stopped
    /// already or released.
    fn freeze_at_overflow(&mut self, sample_tsc: u64) -> bool {
        if !self.live || self.frozen.is_some() || sample_tsc < self.armed_tsc {
            return false;
        }
        let mut snapshot = Buf::new(self.counters.len());
        if self.read_values(&mut snapshot).is_err() {
            return false;
        }
        for counter in self.counters.iter().filter(|c| c.smpl.is_none()) {
            for pmc in counter.pmc.iter().chain(&counter.overflow) {
                let _ = pmc.stop();
            }
        }
        self.frozen = Some(snapshot);
        true
    }

    fn lwp_only(&self, op: &'static str) -> Result<()> {
        self.usable(op)?;
        match self.scope {
            Scope::Lwp { .. } => Ok(()),
            Scope::Process { .. } if self.signals_controller => Ok(()),
            _ => Err(Error::invalid(
                op,
                "the calling thread's set is not bound with cpc_bind_curlwp",
            )),
        }
    }

    pub(super) fn request_preset(&mut self, index: i32, preset: u64) -> Result<()> {
        const OP: &str = "cpc_request_preset";
        self.lwp_only(OP)?;
        let counter = usize::try_from(index).ok().and_then(|i| self.counters.get_mut(i));
        let counter = counter.ok_or_else(|| Error::invalid(OP, format!("no request {index}")))?;
        counter.next_preset = preset;
        Ok(())
    }

    pub(super) fn restart(&mut self) -> Result<()> {
        const OP: &str = "cpc_set_restart";
        self.lwp_only(OP)?;
        let was_frozen = self.frozen.take().is_some();
        self.armed_tsc = tsc();
        for counter in self.counters.iter_mut().filter(|c| c.smpl.is_none()) {
            let old_period = overflow_period(counter.preset, counter.min_period);
            counter.preset = counter.next_preset;
            let period = overflow_period(counter.preset, counter.min_period);
            if let Some(pmc) = &counter.pmc {
                counter.base =
                    Self::count_of(self.multiplex, pmc).map_err(|e| Error::pmc(OP, &e))?;
                if was_frozen {
                    pmc.start().map_err(|e| Error::pmc(OP, &e))?;
                }
            }
            // A full period again before the next overflow: the new preset's, if it has one
            // (a preset of 0 is 2^64 events from wrapping: the overflow PMC stays stopped).
            if let Some(pmc) = &counter.overflow {
                if !was_frozen {
                    pmc.stop().map_err(|e| Error::pmc(OP, &e))?;
                }
                if period != old_period
                    && let Some(period) = period
                {
                    pmc.set_count(period).map_err(|e| Error::pmc(OP, &e))?;
                }
                if period.is_some() {
                    pmc.start().map_err(|e| Error::pmc(OP, &e))?;
                }
            }
        }
        Ok(())
    }

    pub(super) fn disable(&mut self) -> Result<()> {
        const OP: &str = "cpc_disable";
        self.lwp_only(OP)?;
        if self.frozen.is_some() {
            return Err(Error::invalid(OP, "counting is already disabled"));
        }
        let mut snapshot = Buf::new(self.counters.len());
        self.sample(&mut snapshot)?;
        for counter in self.counters.iter().filter(|c| c.smpl.is_none()) {
            for pmc in counter.pmc.iter().chain(&counter.overflow) {
                pmc.stop().map_err(|e| Error::pmc(OP, &e))?;
            }
        }
        self.frozen = Some(snapshot);
        Ok(())
    }

    pub(super) fn enable(&mut self) -> Result<()> {
        const OP: &str = "cpc_enable";
        self.lwp_only(OP)?;
        if self.frozen.is_none() {
            return Err(Error::invalid(OP, "counting is not disabled"));
        }
        for counter in self.counters.iter().filter(|c| c.smpl.is_none()) {
            for pmc in counter.pmc.iter().chain(&counter.overflow) {
                pmc.start().map_err(|e| Error::pmc(OP, &e))?;
            }
        }
        self.frozen = None;
        Ok(())
    }
}

impl Drop for Binding {
    fn drop(&mut self) {
        self.release();
    }
}

impl OverflowTarget for Binding {
    /// Takes the samples the watcher read of PMC `pmc`; the instruction pointer to signal the
    /// thread with, if they call for a signal: the first overflow of the current period (which
    /// freezes the set), or the record that fills an SMPL request.
    fn on_samples(&mut self, pmc: u32, samples: &[smpl::Sample]) -> Option<u64> {
        let smpl = self.counters.iter_mut().find_map(|c| match (&mut c.smpl, &c.pmc) {
            (Some(records), Some(p)) if p.id() == pmc => Some(records),
            _ => None,
        });
        if let Some(records) = smpl {
            let room = records.cap.saturating_sub(records.ips.len());
            records.ips.extend(samples.iter().take(room).map(|s| s.ip));
            let full = records.ips.len() == records.cap && records.notify && !records.notified;
            records.notified |= full;
            return full.then(|| records.ips.last().copied()).flatten();
        }
        samples.iter().find(|s| self.freeze_at_overflow(s.tsc)).map(|s| s.ip)
    }

    fn is_live(&self) -> bool {
        Binding::is_live(self)
    }
}
