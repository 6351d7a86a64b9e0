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

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;

use pmc::host::HostKind;
use pmc::{Class, Mode, Pmc, PmcFlags, PmcSpec};

use crate::assign::{Need, assign};
use crate::buf::{Buf, gethrtime};
use crate::consts::{
    CPC_BIND_LWP_INHERIT, CPC_BIND_MULTIPLEX, CPC_CAP_OVERFLOW_INTERRUPT, CPC_COUNT_SYSTEM,
    CPC_COUNT_USER, CPC_MAX_ATTRS, CPC_MAX_NREQS, CPC_OVF_NOTIFY_EMT, PICNUM, REQ_ALL_FLAGS,
    Subcode,
};
use crate::error::{Error, Result};
use crate::platform::Platform;
use crate::set::{Request, Set};
use crate::smpl;

/// Locks a binding; a thread that panicked while holding it left it consistent (every field is
/// written whole), so a poisoned lock is used as is.
pub(crate) fn lock(binding: &Mutex<Binding>) -> MutexGuard<'_, Binding> {
    binding.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where a set is bound.
#[derive(Debug)]
pub(crate) enum Scope {
    /// To the thread `thread`, bound when CPU binds had happened `epoch` times; with
    /// `inherit` (CPC_BIND_LWP_INHERIT) the threads it creates afterwards count too.
    Lwp { thread: ThreadId, epoch: u64, inherit: bool },
    /// To CPU `cpu` by thread `thread`, whose previous CPU mask is restored at unbind.
    Cpu { cpu: u32, thread: ThreadId, previous: Option<SavedMask> },
    /// To process `pid`.
    Process { pid: i32 },
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
    /// that runs the machine, which may preset and restart it (see [`crate::ovf_sim`]).
    signals_controller: bool,
    /// The process generation that bound it (see [`crate::fork`]): in a forked child the
    /// parent's bindings act as unbound, their counters being the parent's.
    generation: u64,
}

/// The CPU mask of a thread before `cpc_bind_cpu` pinned it (Linux).
#[cfg(target_os = "linux")]
type SavedMask = Box<libc::cpu_set_t>;
/// Elsewhere the thread is not pinned: nothing is saved.
#[cfg(not(target_os = "linux"))]
type SavedMask = std::convert::Infallible;

/// Whether a request of `scope` signals (see [`crate::ovf`] and [`crate::ovf_sim`]): a
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

/// The number of CPU binds made in this process so far: a per-LWP set bound before the latest
/// one is invalid.
static CPU_EPOCH: AtomicU64 = AtomicU64::new(0);
/// The CPUs with a bound set in this process.
static CPU_BOUND: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// A set bound to an LWP of another process (`cpc_bind_pctx`).
struct ProcessBind {
    pid: i32,
    lwp: i32,
    /// Bound with [`CPC_BIND_MULTIPLEX`]: it takes turns with the others bound so.
    multiplex: bool,
    binding: std::sync::Weak<Mutex<Binding>>,
}

/// The sets bound to LWPs of other processes.
type ProcessBinds = Mutex<Vec<ProcessBind>>;

/// The sets bound to LWPs of other processes, so that binding another set to an LWP unbinds
/// the one bound there before (illumos: "binding another set automatically unbinds the most
/// recently bound set"), and the end of an LWP or process gives its sets' counters back.
static PROCESS_BINDS: crate::fork::PerProcess<ProcessBinds> = crate::fork::PerProcess::new();

/// The table of sets bound to LWPs of other processes, locked.
fn process_binds() -> MutexGuard<'static, Vec<ProcessBind>> {
    let table = PROCESS_BINDS.get(|| Mutex::new(Vec::new()));
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes the sets that `which` selects out of the table (and forgets those gone).
fn take_process_binds(which: impl Fn(&ProcessBind) -> bool) -> Vec<Arc<Mutex<Binding>>> {
    let mut taken = Vec::new();
    process_binds().retain(|bind| {
        let matches = which(bind);
        if matches {
            taken.extend(bind.binding.upgrade());
        }
        !matches && bind.binding.strong_count() > 0
    });
    taken
}

/// Releases the counters of the sets bound to LWP `lwp` of process `pid` before a new bind
/// there (`multiplex`: with [`CPC_BIND_MULTIPLEX`], which keeps the sets bound so). Their
/// sets are unbound.
fn release_process_binds(pid: i32, lwp: i32, multiplex: bool) {
    let replaced = |b: &ProcessBind| b.pid == pid && b.lwp == lwp && !(multiplex && b.multiplex);
    for binding in take_process_binds(replaced) {
        lock(&binding).release();
    }
}

/// Gives back the counters of the sets bound to LWP `lwp` of process `pid` (`None`: to any of
/// its LWPs), which has ended (libpctx tells, after its callbacks): they stay bound, and sample
/// their final values.
pub(crate) fn retire_process_binds(pid: i32, lwp: Option<i32>) {
    let ended = |b: &ProcessBind| b.pid == pid && lwp.is_none_or(|lwp| lwp == b.lwp);
    for binding in take_process_binds(ended) {
        lock(&binding).retire();
    }
}

thread_local! {
    /// The set bound to this thread with `cpc_bind_curlwp`.
    /// The flag says whether it signals overflows (SIGEMT is then blocked while it is locked).
    static CURRENT: RefCell<Option<(Arc<Mutex<Binding>>, bool)>> = const { RefCell::new(None) };
}

fn cpu_bound() -> MutexGuard<'static, Vec<u32>> {
    CPU_BOUND.lock().unwrap_or_else(PoisonError::into_inner)
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

/// The checks illumos' kernel makes of a set before assigning counters (reference §2.6 table):
/// sizes, request flags, explicit picnums, overflow capability.
fn check_set(op: &'static str, platform: &Platform, requests: &[Request]) -> Result<()> {
    if requests.is_empty() {
        return Err(Error::invalid(op, "the set has no requests"));
    }
    let counters = requests.iter().filter(|r| !r.is_smpl()).count();
    if counters > platform.pics.len() || requests.len() > CPC_MAX_NREQS {
        return Err(Error::invalid(
            op,
            format!("{counters} counter requests for {} counters", platform.pics.len()),
        ));
    }
    let mut explicit = Vec::new();
    for (index, request) in requests.iter().enumerate() {
        if request.attrs.iter().filter(|a| a.name != PICNUM).count() > CPC_MAX_ATTRS {
            return Err(Error::invalid(op, format!("request {index} has over 50 attributes")));
        }
        if request.flags & !REQ_ALL_FLAGS != 0 {
            return Err(Error::sub(
                op,
                libc::EINVAL,
                Subcode::ReqInvalidFlags,
                format!("request {index} has flags {:#x}", request.flags & !REQ_ALL_FLAGS),
            ));
        }
        if request.is_smpl() {
            let nrecs = request.attr(smpl::SMPL_NRECS).unwrap_or(0);
            if nrecs == 0 || nrecs > u64::from(smpl::MAX_RECORDS) {
                return Err(Error::sub(
                    op,
                    libc::EINVAL,
                    Subcode::AttributeOutOfRange,
                    format!(
                        "request {index}: smpl_nrecs {nrecs} is not in 1..={}",
                        smpl::MAX_RECORDS
                    ),
                ));
            }
            continue;
        }
        if let Some(pic) = request.picnum() {
            if pic >= u64::from(platform.npic()) {
                return Err(Error::sub(
                    op,
                    libc::EINVAL,
                    Subcode::InvalidPicnum,
                    format!("request {index}: picnum {pic}"),
                ));
            }
            if explicit.contains(&pic) {
                return Err(Error::invalid(op, format!("two requests name picnum {pic}")));
            }
            explicit.push(pic);
        }
    }
    for (index, request) in requests.iter().enumerate() {
        if request.flags & CPC_OVF_NOTIFY_EMT != 0
            && platform.caps & CPC_CAP_OVERFLOW_INTERRUPT == 0
        {
            return Err(Error::new(op, libc::ENOTSUP).because(format!(
                "request {index} asks for overflow signals; these counters cannot interrupt"
            )));
        }
    }
    Ok(())
}

/// The libpmc spec of SMPL request `request`: its event as the first PIC that counts it (a raw
/// code as PIC 0) counts it, in the request's rings.
fn smpl_spec(op: &'static str, platform: &Platform, request: &Request) -> Result<String> {
    let pic = platform.coverage(&request.event).first().copied().unwrap_or(0);
    let sampled = Request { attrs: Vec::new(), ..request.clone() };
    pmc_spec(op, platform, pic, &sampled)
}

/// The libpmc spec of `request` on PIC `pic`: the event plus its attributes and rings, checked
/// as a back-end checks them.
fn pmc_spec(
    op: &'static str,
    platform: &Platform,
    pic: usize,
    request: &Request,
) -> Result<String> {
    let umask = request.attr("umask");
    let Some(mut spec) = platform.spec_on(pic, &request.event, umask) else {
        return Err(Error::sub(
            op,
            libc::EINVAL,
            Subcode::InvalidEvent,
            format!("counter {pic} has no event {:?}", request.event),
        ));
    };
    let class = platform.pics[pic].class;
    let generic = platform.pics[pic].generic(&request.event).is_some();
    let named = platform.pics[pic].has_platform_event(&request.event);
    for attr in request.attrs.iter().filter(|a| a.name != PICNUM) {
        let out_of_range =
            |why: String| Err(Error::sub(op, libc::EINVAL, Subcode::AttributeOutOfRange, why));
        match attr.name.as_str() {
            "nouser" | "sys" => continue,
            _ if generic => {
                return out_of_range(format!(
                    "the generic event {} takes no attribute {}",
                    request.event, attr.name
                ));
            }
            _ if !matches!(class, Class::Iap | Class::K8) => {
                return out_of_range(format!("counter {pic} takes no attribute {}", attr.name));
            }
            "umask" | "cmask" if attr.value > 0xff => {
                return out_of_range(format!("{} {:#x} is over 0xff", attr.name, attr.value));
            }
            // AMD: ORed into the event's own unit mask (illumos), below; Intel: replaces it.
            "umask" if named && class == Class::K8 => {}
            "umask" if named => spec.push_str(&format!(",umask={:#x}", attr.value)),
            "cmask" if attr.value != 0 => spec.push_str(&format!(",cmask={}", attr.value)),
            "edge" | "inv" if attr.value != 0 => spec.push_str(&format!(",{}", attr.name)),
            _ => {}
        }
    }
    if let (Class::K8, true, Some(umask)) = (class, named, umask) {
        // Checked above: at most 0xff.
        spec = platform.amd_with_umask(&spec, umask).ok_or_else(|| {
            Error::sub(
                op,
                libc::EINVAL,
                Subcode::InvalidEvent,
                format!("{:?} is not an AMD core event here", request.event),
            )
        })?;
    }
    if matches!(class, Class::Iap | Class::Iaf | Class::K8) {
        let (usr, os) = rings(request);
        if usr {
            spec.push_str(",usr");
        }
        if os {
            spec.push_str(",os");
        }
    }
    Ok(spec)
}

/// The rings a request counts in: its flags, with the `nouser` and `sys` attributes applied.
fn rings(request: &Request) -> (bool, bool) {
    let usr = request.flags & CPC_COUNT_USER != 0 && request.attr("nouser").unwrap_or(0) == 0;
    let os = request.flags & CPC_COUNT_SYSTEM != 0 || request.attr("sys").unwrap_or(0) != 0;
    (usr, os)
}

/// libpmc's allocation error as a bind error.
fn allocation_error(op: &'static str, e: &pmc::Error, request: usize) -> Error {
    let detail = format!("request {request}: {e}");
    match e.errno {
        libc::EPERM | libc::EACCES => Error::new(op, libc::EACCES).because(detail),
        libc::EBUSY | libc::ENOSPC | libc::EAGAIN => {
            Error::sub(op, libc::EINVAL, Subcode::ResourceUnavail, detail)
        }
        libc::EINVAL if e.op == "event" => {
            Error::sub(op, libc::EINVAL, Subcode::InvalidEvent, detail)
        }
        // The event and its attributes were checked: the driver found no row for it.
        libc::EINVAL if e.op == "PMCALLOCATE" => {
            Error::sub(op, libc::EINVAL, Subcode::ResourceUnavail, detail)
        }
        errno => Error::new(op, errno).because(detail),
    }
}

impl Binding {
    /// Binds `requests` in `scope`: all of them get a running PMC, or none is kept.
    fn new(
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
            crate::ovf::start_watcher();
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

    #[cfg_attr(not(target_os = "linux"), allow(dead_code))] // Read by the Linux overflow watcher.
    /// Takes the samples the watcher read of PMC `pmc`; the instruction pointer to signal the
    /// thread with, if they call for a signal: the first overflow of the current period (which
    /// freezes the set), or the record that fills an SMPL request.
    pub(crate) fn on_samples(&mut self, pmc: u32, samples: &[smpl::Sample]) -> Option<u64> {
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

    /// Keeps the values of a set whose process or LWP has ended, and gives its PMCs back: it
    /// stays bound, and samples its final values.
    fn retire(&mut self) {
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
        crate::ovf::unwatch(&self.watched_pmcs());
        crate::ovf_sim::unwatch(&self.watched_pmcs());
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
    fn release(&mut self) {
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
        crate::ovf::unwatch(&self.watched_pmcs());
        crate::ovf_sim::unwatch(&self.watched_pmcs());
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

    fn request_preset(&mut self, index: i32, preset: u64) -> Result<()> {
        const OP: &str = "cpc_request_preset";
        self.lwp_only(OP)?;
        let counter = usize::try_from(index).ok().and_then(|i| self.counters.get_mut(i));
        let counter = counter.ok_or_else(|| Error::invalid(OP, format!("no request {index}")))?;
        counter.next_preset = preset;
        Ok(())
    }

    fn restart(&mut self) -> Result<()> {
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

    fn disable(&mut self) -> Result<()> {
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

    fn enable(&mut self) -> Result<()> {
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

/// Pins the calling thread to `cpu` for a CPU bind on the Linux host (the simulator's CPUs are
/// not this machine's; elsewhere the thread is not pinned); its previous mask, or the errno.
fn pin_for_bind(cpu: u32) -> std::result::Result<Option<SavedMask>, i32> {
    #[cfg(target_os = "linux")]
    if pmc::api::host_kind().ok() == Some(pmc::host::HostKind::Linux) {
        return pin_to(cpu).map(Some);
    }
    let _ = cpu;
    Ok(None)
}

/// Gives the calling thread back the mask [`pin_for_bind`] saved.
fn restore_mask(mask: &SavedMask) {
    #[cfg(target_os = "linux")]
    set_affinity(mask);
    #[cfg(not(target_os = "linux"))]
    match *mask {}
}

#[cfg(target_os = "linux")]
fn set_affinity(mask: &libc::cpu_set_t) -> bool {
    // SAFETY: sched_setaffinity reads one cpu_set_t of the size given.
    unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), mask) == 0 }
}

#[cfg(target_os = "linux")]
/// Pins the calling thread to `cpu`; its previous mask, or the errno of the failure.
fn pin_to(cpu: u32) -> std::result::Result<Box<libc::cpu_set_t>, i32> {
    // SAFETY: an all-zero cpu_set_t is a valid empty mask.
    let mut previous: Box<libc::cpu_set_t> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: sched_getaffinity writes one cpu_set_t of the size given.
    if unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut *previous) } != 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
    }
    // SAFETY: as above.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes a bit of the mask; `cpu` is below the mask's size (checked by the
    // caller against the host's CPU count, which is far below CPU_SETSIZE).
    unsafe { libc::CPU_SET(cpu as usize, &mut mask) };
    if !set_affinity(&mask) {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
    }
    Ok(previous)
}

/// The PMC flags of `scope`: the thread scope of libpmc's driver for a per-LWP bind
/// (PMC_F_THREAD, with PMC_F_THREAD_INHERIT for CPC_BIND_LWP_INHERIT), so a set counts its own
/// thread. Process counting (no flag) where the scope is missing: on FreeBSD, whose kernel has
/// no thread scope, and for CPC_BIND_MULTIPLEX, whose rotating PMCs the driver loads for the
/// whole process.
fn thread_scope(platform: &Platform, scope: &Scope, multiplex: bool) -> PmcFlags {
    match scope {
        Scope::Lwp { inherit, .. } if !multiplex && platform.host != HostKind::FreeBsd => {
            let inherit = if *inherit { PmcFlags::THREAD_INHERIT } else { PmcFlags::empty() };
            PmcFlags::THREAD | inherit
        }
        _ => PmcFlags::empty(),
    }
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
            let _held = crate::ovf::SignalHeld::new(holds);
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
            crate::ovf::watch(&overflows, &binding, crate::ovf::current_tid());
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
        release_process_binds(pid, lwp, multiplex);
        let binding =
            Binding::new(OP, platform, &self.requests, Scope::Process { pid }, multiplex)?;
        let signalling = binding.watched_pmcs();
        let binding = self.attach(binding);
        process_binds().push(ProcessBind {
            pid,
            lwp,
            multiplex,
            binding: Arc::downgrade(&binding),
        });
        if !signalling.is_empty() {
            crate::ovf_sim::watch(signalling, &binding);
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
        let _held = crate::ovf::SignalHeld::new(self.holds_signal);
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
        let _held = crate::ovf::SignalHeld::new(self.holds_signal);
        lock(binding).sample(buf)
    }
}

/// Runs `f` on the calling thread's bound set, else (on the simulator) on the set whose
/// overflow signal it received last (see [`crate::ovf_sim`]); `EINVAL` if it has neither.
fn with_current<R>(op: &'static str, f: impl FnOnce(&mut Binding) -> Result<R>) -> Result<R> {
    let current = CURRENT.with(|c| c.borrow().clone());
    let current = current.or_else(|| crate::ovf_sim::signalled().map(|b| (b, false)));
    let (binding, holds) =
        current.ok_or_else(|| Error::invalid(op, "the calling thread has no bound set"))?;
    let _held = crate::ovf::SignalHeld::new(holds);
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
