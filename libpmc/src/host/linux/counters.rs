//! The counting the driver hands to Linux: its `HostCounters` over `perf_event_open(2)`.
//!
//! SOFT PMCs are perf software events, IAF the generic hardware events of the fixed counters,
//! IAP raw events (the TSC stays the driver's: `rdtsc`). A process PMC is one perf event per
//! thread of each target (per core PMU on a hybrid machine: see `hybrid`), inherited by the
//! threads it creates afterwards (and with PMC_F_DESCENDANTS by its children); a system PMC is
//! one per-CPU event. A sampling process PMC has one ring per CPU whatever its thread count (the
//! other threads' events write into it); the worker reads the rings and posts their samples and
//! side-band records to the driver. PMCSTART opens the events, PMCSTOP reads and closes them.
//!
//! Counting events are pinned unless the PMC was allocated with PMC_F_MULTIPLEX (or in a group):
//! as the driver refuses to share a counter without the flag, perf must not rotate the event
//! either. A pinned event that loses its counter reads as end of file; the PMC's reads then
//! fail (EBUSY, naming the event) until it is started again or released. A PMC with the flag
//! may be rotated by perf, and its times enabled and running are perf's (nanoseconds), read
//! with PMC_OP_PMCREADTIMES.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

use hwpmc::abi::{Class, PmcFlags, event};
use hwpmc::{Errno, HostCounters, HostedEvent, HostedPmc, Pid};
use perf_event::Counter;
use perf_event::events::Hardware;

use super::call_detail::explain;
use super::hybrid::{self, Placement};
use super::lock;
use super::perf::{
    self, CounterRequest, CountingEvent, CountingEvents, EventAttr, Reading, Rings, Sampling,
    Scope, Source,
};
use super::pmus::{CorePmus, CoreType};
use super::procfs::{not_allowed, numbered_entries};
use super::rings::{Event, Ring, RingMeta};
use super::watched::{PROCESS_KEY, Watched};

/// `kern.hwpmc.callchaindepth`'s default, the depth the driver keeps.
const CALLCHAIN_DEPTH: usize = 128;
/// IA32_PERFEVTSEL's AnyThread and pin-control bits.
const EVTSEL_ANY: u64 = 1 << 21;
const EVTSEL_PIN_CONTROL: u64 = 1 << 19;
/// The IA32_PERFEVTSEL bits that say what to count (event, umask, edge, inv, cmask,
/// AnyThread, UMASK2 47:40, which perf's raw config takes where the CPU has it); perf takes the
/// rings apart.
const EVTSEL_EVENT_BITS: u64 = 0xFFFF | 1 << 18 | 1 << 23 | 0xFF << 24 | EVTSEL_ANY | 0xFF << 40;
/// The bits of an AMD PERF_CTL image perf takes in a raw event's config (Linux's
/// `AMD64_RAW_EVENT_MASK`): event select 7:0 and 35:32, unit mask, EDGE, INV, CMASK. USR and OS
/// become perf's exclude flags; EN and INT are perf's.
const PERF_CTL_EVENT_BITS: u64 = 0xFFFF | 1 << 18 | 1 << 23 | 0xFF << 24 | 0xF << 32;
/// PERF_CTL's GuestOnly and HostOnly bits (41:40), which perf sets itself from its
/// exclude_guest / exclude_host flags and drops from a raw config.
const PERF_CTL_HOST_GUEST: u64 = 3 << 40;

/// One counting perf event: what it counts, on which core PMU.
struct Counting {
    attr: EventAttr,
    core_type: Option<CoreType>,
    event: Box<dyn CountingEvent>,
}

/// A counting event that could not be read.
struct Unreadable {
    attr: EventAttr,
    core_type: Option<CoreType>,
    error: io::Error,
}

/// One target's perf events.
#[derive(Default)]
struct Target {
    /// Counting: per thread, one event per core PMU it counts on.
    threads: Vec<Vec<Counting>>,
    /// Sampling: one ring per CPU it samples on.
    rings: Vec<Ring>,
    /// What the driver was given for this target when it exited (its descendants go on counting
    /// into the same events).
    credited: Reading,
    /// Whether it exited (or was detached) while its descendants may still run.
    gone: bool,
}

impl Reading {
    fn plus(self, other: Reading) -> Reading {
        Reading {
            value: self.value.wrapping_add(other.value),
            enabled: self.enabled.saturating_add(other.enabled),
            running: self.running.saturating_add(other.running),
        }
    }

    fn minus(self, other: Reading) -> Reading {
        Reading {
            value: self.value.wrapping_sub(other.value),
            enabled: self.enabled.saturating_sub(other.enabled),
            running: self.running.saturating_sub(other.running),
        }
    }
}

impl Target {
    /// The count and times since start (less what was credited), and the first event that could
    /// not be read (it counts 0). A thread's events on several core PMUs are one count: their
    /// values add up, and so do their times on a counter, while each was enabled all the time
    /// the thread ran (perf keeps a hybrid event enabled, not running, on the other core type).
    fn reading(&mut self) -> (Reading, Option<Unreadable>) {
        let mut total = Reading::default();
        let mut unreadable = None;
        for thread in &mut self.threads {
            let mut sum = Reading::default();
            for counting in thread.iter_mut() {
                match counting.event.read() {
                    Ok(r) => {
                        sum.value = sum.value.wrapping_add(r.value);
                        sum.enabled = sum.enabled.max(r.enabled);
                        sum.running = sum.running.saturating_add(r.running);
                    }
                    Err(error) => {
                        let (attr, core_type) = (counting.attr, counting.core_type);
                        unreadable.get_or_insert(Unreadable { attr, core_type, error });
                    }
                }
            }
            sum.running = sum.running.min(sum.enabled);
            total = total.plus(sum);
        }
        (total.minus(self.credited), unreadable)
    }
}

/// A running PMC's perf events.
struct Running {
    pmc: HostedPmc,
    targets: BTreeMap<Pid, Target>,
    /// A system PMC's event on its CPU.
    system: Option<Target>,
    /// The times of its last read (for PMC_OP_PMCREADTIMES, which reads the count first).
    last: Reading,
}

impl Running {
    fn all(&mut self) -> impl Iterator<Item = &mut Target> {
        self.targets.values_mut().chain(self.system.as_mut())
    }

    /// Appends the events every ring of the PMC holds to `events`.
    fn read_rings(&mut self, events: &mut Vec<(u64, Event)>) {
        for target in self.all() {
            for ring in &mut target.rings {
                ring.read_into(events);
            }
        }
    }
}

/// Where the events of a stopped PMC's rings go (the driver, through the host).
pub(crate) type Post = fn(Vec<(u64, Event)>);

/// The times of a PMC's stopped runs and detached targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Settled {
    /// The PMC's id (its token may name another PMC after a release).
    id: u32,
    enabled: u64,
    running: u64,
}

/// The host's side of the PMCs perf counts.
pub(crate) struct PerfCounters {
    ncpu: u32,
    post: Post,
    /// The machine's core PMUs (hybrid or not).
    pmus: CorePmus,
    /// Opens the counting events.
    perf: Box<dyn CountingEvents>,
    running: Mutex<BTreeMap<u64, Running>>,
    /// Rings of targets that went away, read once more by the next drain.
    retired: Mutex<Vec<Ring>>,
    /// Per token, the times counted before the current run.
    settled: Mutex<BTreeMap<u64, Settled>>,
    /// Per PMC id, why its count cannot be trusted (an event lost its counter), until it is
    /// started again or released.
    failed: Mutex<BTreeMap<u32, String>>,
}

/// A perf failure as hwpmc(4) reports it (perf's EACCES, not permitted by
/// `kernel.perf_event_paranoid`, is EPERM; a missing event is EINVAL), with the reason.
fn perf_errno(what: &str, err: &io::Error) -> Errno {
    let raw = err.raw_os_error().unwrap_or(libc::EIO);
    match raw {
        libc::EACCES | libc::EPERM => explain(Errno::Perm, not_allowed(what)),
        libc::ESRCH => explain(Errno::Srch, format!("{what}: no such process")),
        libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV => explain(
            Errno::Inval,
            format!(
                "{what}: this machine's perf has no such event ({})",
                crate::error::errno_name(raw)
            ),
        ),
        libc::ENOMEM | libc::EMFILE | libc::ENFILE => {
            explain(Errno::NoMem, format!("{what}: perf_event_open failed: {err}"))
        }
        libc::EBUSY => explain(Errno::Busy, format!("{what}: perf_event_open failed: {err}")),
        _ => explain(Errno::Inval, format!("{what}: perf_event_open failed: {err}")),
    }
}

/// The PMC's event in words, for messages.
fn event_words(pmc: &HostedPmc) -> String {
    match pmc.event {
        HostedEvent::Soft { event } => {
            let index = event.checked_sub(event::SOFT_FIRST).map(|i| i as usize);
            match index.and_then(|i| perf::SOFTWARE_EVENTS.get(i)) {
                Some((name, _)) => (*name).to_string(),
                None => format!("SOFT event {event:#x}"),
            }
        }
        HostedEvent::Raw { class, config } => format!("{} event {config:#x}", class.name()),
        HostedEvent::Tsc => "the TSC".to_string(),
    }
}

/// Why `pmc`'s count is wrong when `lost` could not be read.
fn lost_words(pmc: &HostedPmc, lost: &Unreadable) -> String {
    let on = lost.core_type.map(|t| format!(" on {}", t.pmu_name())).unwrap_or_default();
    let attr = format!("perf type {}, config {:#x}", lost.attr.kind, lost.attr.config);
    if lost.error.kind() == io::ErrorKind::UnexpectedEof {
        format!(
            "PMC {:#x} ({}{on}) lost its counter: perf could not keep its pinned event ({attr})              on a counter, which other PMCs or perf users hold; PMCs allocated with              PMC_F_MULTIPLEX (pmcstat --multiplex) share the counters instead",
            pmc.id.to_u32(),
            event_words(pmc)
        )
    } else {
        format!(
            "PMC {:#x} ({}{on}): reading its perf event ({attr}) failed: {}",
            pmc.id.to_u32(),
            event_words(pmc),
            lost.error
        )
    }
}

/// What perf counts for `pmc`.
fn source_of(pmc: &HostedPmc) -> Result<Source, Errno> {
    match pmc.event {
        HostedEvent::Soft { event } => {
            let index = event.checked_sub(event::SOFT_FIRST).map(|i| i as usize);
            let found = index.and_then(|i| perf::SOFTWARE_EVENTS.get(i));
            let (_, sw) = found.ok_or_else(|| {
                explain(Errno::Inval, format!("{event:#x} is not a SOFT event of this host"))
            })?;
            Ok(Source::Software(u64::from(*sw)))
        }
        HostedEvent::Raw { class: Class::Iap, config: evtsel } => {
            if evtsel & EVTSEL_PIN_CONTROL != 0 {
                let why = "bit 19 (PC) of IA32_PERFEVTSEL is not a counting qualifier";
                return Err(explain(Errno::Inval, why));
            }
            Ok(Source::Raw(evtsel & EVTSEL_EVENT_BITS))
        }
        HostedEvent::Raw { class: Class::K8, config: perf_ctl } => {
            if perf_ctl & PERF_CTL_HOST_GUEST != 0 {
                let why = "PERF_CTL's GuestOnly and HostOnly bits (41:40) are perf's to set \
                           (from its exclude_guest and exclude_host flags)";
                return Err(explain(Errno::Inval, why));
            }
            Ok(Source::Raw(perf_ctl & PERF_CTL_EVENT_BITS))
        }
        HostedEvent::Raw { class: Class::Iaf, config: index } => {
            let hw = match index {
                0 => Hardware::INSTRUCTIONS,
                1 => Hardware::CPU_CYCLES,
                2 => Hardware::REF_CPU_CYCLES,
                _ => {
                    let why = format!("perf has no generic event for fixed counter {index}");
                    return Err(explain(Errno::Inval, why));
                }
            };
            Ok(Source::Hardware(u64::from(hw)))
        }
        HostedEvent::Tsc => Err(explain(Errno::Inval, "the TSC is read with rdtsc, not perf")),
        HostedEvent::Raw { class, .. } => {
            Err(explain(Errno::Inval, format!("perf counts no {} events here", class.name())))
        }
    }
}

/// Whether perf lets this process measure `pid` in kernel mode too (it does not for an
/// unprivileged caller when `kernel.perf_event_paranoid` is 2 or more).
fn kernel_mode_allowed(perf: &dyn CountingEvents, attr: EventAttr, rings: Rings, pid: Pid) -> bool {
    let scope = Scope::Thread { tid: pid, inherit: false, threads_only: false };
    match perf.open(&CounterRequest { attr, rings, scope, pinned: false }) {
        Ok(_) => true,
        Err(e) => !matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)),
    }
}

/// How `pmc` counts or samples: its event, rings and sampling parameters.
struct Plan {
    /// Its perf events (per thread, or on its CPU): one, or one per core PMU.
    placements: Vec<Placement>,
    rings: Rings,
    sampling: Option<Sampling>,
    meta: RingMeta,
    descendants: bool,
    /// A thread PMC's thread (PMC_F_THREAD) and whether the threads it creates count too.
    thread: Option<(Pid, bool)>,
    /// Whether counting events are pinned (not allowed to share a counter).
    pinned: bool,
}

impl Plan {
    fn of(pmc: &HostedPmc, pmus: &CorePmus) -> Result<Plan, Errno> {
        let source = source_of(pmc)?;
        let wanted = CoreType::of_flags(pmc.flags);
        let cpu = pmc.id.cpu.map(u32::from);
        let placements =
            hybrid::place(pmus, source, wanted, cpu).map_err(|why| explain(Errno::Inval, why))?;
        let callchain = pmc.flags.contains(PmcFlags::CALLCHAIN);
        // The reload count is the period: events, or nanoseconds for the clock events.
        let min = crate::host::CLOCK_MIN_PERIOD_NS;
        if pmc.id.mode.is_sampling() && perf::is_clock(source) && pmc.reload < min {
            let why = format!(
                "the clock events sample at most every {min} ns (100 kHz); the rate counts \
                 nanoseconds: give {min} or more"
            );
            return Err(explain(Errno::Inval, why));
        }
        let dwarf = match crate::host::call_graph() {
            Ok(method) => method == crate::host::CallGraph::Dwarf,
            Err(e) => return Err(explain(Errno::Inval, e.to_string())),
        };
        let sampling = pmc.id.mode.is_sampling().then(|| Sampling {
            period: pmc.reload.max(1),
            callchain,
            // The CFI unwinder knows x86-64's registers only.
            user_stack: callchain && dwarf && cfg!(target_arch = "x86_64"),
            side_band: true,
        });
        Ok(Plan {
            placements,
            rings: Rings { user: pmc.user, kernel: pmc.kernel },
            sampling,
            meta: RingMeta { token: pmc.token, depth: if callchain { CALLCHAIN_DEPTH } else { 1 } },
            descendants: pmc.flags.contains(PmcFlags::DESCENDANTS),
            thread: pmc
                .flags
                .contains(PmcFlags::THREAD)
                .then(|| (pmc.thread, pmc.flags.contains(PmcFlags::THREAD_INHERIT))),
            pinned: !pmc.flags.intersects(PmcFlags::MULTIPLEX_FLAGS),
        })
    }

    /// The CPUs a sampling process PMC has a ring on, ascending, with the event on each (the
    /// event of the core PMU the CPU belongs to).
    fn sampling_cpus(&self, ncpu: u32) -> Vec<(u32, EventAttr)> {
        let mut cpus: Vec<(u32, EventAttr)> = self
            .placements
            .iter()
            .flat_map(|p| {
                let all: Vec<u32> = p.cpus.clone().unwrap_or_else(|| (0..ncpu).collect());
                all.into_iter().filter(|&c| c < ncpu).map(|c| (c, p.attr)).collect::<Vec<_>>()
            })
            .collect();
        cpus.sort_by_key(|&(cpu, _)| cpu);
        cpus
    }

    /// The perf events of process `pid`, disabled.
    fn open_process(
        &self,
        pid: Pid,
        ncpu: u32,
        perf: &dyn CountingEvents,
    ) -> Result<Target, Errno> {
        let mut target = Target::default();
        if !super::procfs::process_running(pid) {
            // It ended while the PMC was stopped and nobody saw it go: nothing to count, and
            // the worker tells the driver it ended (which detaches it).
            return Ok(target);
        }
        let what = format!("measuring process {pid}");
        // Without privilege (kernel.perf_event_paranoid 2) perf measures a process in user mode
        // only; a PMC that did not ask for one ring (both, FreeBSD's default) counts user mode
        // then, as `perf stat` does, instead of failing. Asking for kernel mode alone still
        // fails with EPERM.
        let mut rings = self.rings;
        let probe = self.placements[0].attr;
        if rings.user && rings.kernel && !kernel_mode_allowed(perf, probe, rings, pid) {
            rings.kernel = false;
        }
        let fail = |e: io::Error| perf_errno(&what, &e);
        let tids = match self.thread {
            Some((tid, _)) => vec![tid],
            None => numbered_entries(&format!("/proc/{pid}/task")),
        };
        for tid in tids {
            // A thread that ended since the listing is no error: it has nothing to count.
            let opened = self.open_thread(tid, rings, ncpu, &mut target, perf);
            match opened {
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
                other => other.map_err(fail)?,
            }
        }
        Ok(target)
    }

    /// Adds thread `tid`'s events to `target`: a counter, or for sampling an event per CPU
    /// (the first thread's own the rings, the others' write into them).
    fn open_thread(
        &self,
        tid: Pid,
        rings: Rings,
        ncpu: u32,
        target: &mut Target,
        perf: &dyn CountingEvents,
    ) -> io::Result<()> {
        let threads_only = !self.descendants;
        // A thread PMC inherits only with PMC_F_THREAD_INHERIT.
        let inherit = self.thread.is_none_or(|(_, inherit)| inherit);
        let Some(sampling) = self.sampling else {
            let scope = Scope::Thread { tid, inherit, threads_only };
            let mut events = Vec::new();
            for placement in &self.placements {
                let request =
                    CounterRequest { attr: placement.attr, rings, scope, pinned: self.pinned };
                events.push(Counting {
                    attr: placement.attr,
                    core_type: placement.core_type,
                    event: perf.open(&request)?,
                });
            }
            target.threads.push(events);
            return Ok(());
        };
        let first = target.rings.is_empty();
        let mut opened = Vec::new();
        // The rings are in the order of these CPUs for every thread.
        for (index, (cpu, attr)) in self.sampling_cpus(ncpu).into_iter().enumerate() {
            let scope = Scope::ThreadOnCpu { pid: tid, cpu, inherit, threads_only };
            match target.rings.get(index).filter(|_| !first) {
                None => {
                    let sampler = perf::open_sampler(attr, rings, scope, sampling)?;
                    opened.push(Opened::Ring(Ring {
                        meta: self.meta,
                        sampler,
                        sharing: Vec::new(),
                    }));
                }
                Some(ring) => {
                    let event = perf::open_into(attr, rings, scope, sampling, &ring.sampler)?;
                    opened.push(Opened::Sharing(index, event));
                }
            }
        }
        // All of the thread's events or none.
        for event in opened {
            match event {
                Opened::Ring(ring) => target.rings.push(ring),
                Opened::Sharing(cpu, event) => {
                    if let Some(ring) = target.rings.get_mut(cpu) {
                        ring.sharing.push(event);
                    }
                }
            }
        }
        Ok(())
    }

    /// The perf event of CPU `cpu` (of the core PMU `cpu` belongs to), disabled.
    fn open_cpu(&self, cpu: u32, perf: &dyn CountingEvents) -> Result<Target, Errno> {
        let what = format!("measuring CPU {cpu}");
        let fail = |e: io::Error| perf_errno(&what, &e);
        let mut target = Target::default();
        let placement = &self.placements[0];
        let (attr, scope) = (placement.attr, Scope::Cpu(cpu));
        match self.sampling {
            Some(sampling) => {
                let sampler =
                    perf::open_sampler(attr, self.rings, scope, sampling).map_err(fail)?;
                target.rings.push(Ring { meta: self.meta, sampler, sharing: Vec::new() });
            }
            None => {
                let request =
                    CounterRequest { attr, rings: self.rings, scope, pinned: self.pinned };
                let event = perf.open(&request).map_err(fail)?;
                let core_type = placement.core_type;
                target.threads.push(vec![Counting { attr, core_type, event }]);
            }
        }
        Ok(target)
    }
}

/// One event of a thread being opened for sampling.
enum Opened {
    /// The ring of a CPU (the target's first thread).
    Ring(Ring),
    /// An event writing into the ring of a CPU.
    Sharing(usize, Counter),
}

/// Enables or disables every event of `target`.
fn enable(target: &mut Target, on: bool) -> io::Result<()> {
    for counting in target.threads.iter_mut().flatten() {
        counting.event.enable(on)?;
    }
    for ring in &mut target.rings {
        ring.enable(on)?;
    }
    Ok(())
}

impl PerfCounters {
    /// The counters of a machine with `ncpu` CPUs and core PMUs `pmus`, opening counting
    /// events with `perf`.
    pub(crate) fn new(
        ncpu: u32,
        post: Post,
        pmus: CorePmus,
        perf: Box<dyn CountingEvents>,
    ) -> PerfCounters {
        PerfCounters {
            ncpu,
            post,
            pmus,
            perf,
            running: Mutex::new(BTreeMap::new()),
            retired: Mutex::new(Vec::new()),
            settled: Mutex::new(BTreeMap::new()),
            failed: Mutex::new(BTreeMap::new()),
        }
    }

    /// PMC `pmcid`'s times enabled and running in nanoseconds: those of its stopped runs and
    /// detached targets, and while it runs those of the last read of its count. `None` for a
    /// PMC perf never counted.
    pub(crate) fn times(&self, pmcid: u32) -> Option<(u64, u64)> {
        let running = lock(&self.running);
        let settled = lock(&self.settled);
        let live = running.iter().find(|(_, r)| r.pmc.id.to_u32() == pmcid);
        let token = live
            .map(|(&t, _)| t)
            .or_else(|| settled.iter().find(|(_, s)| s.id == pmcid).map(|(&t, _)| t))?;
        let before = settled.get(&token).filter(|s| s.id == pmcid);
        let (mut enabled, mut ran) = before.map_or((0, 0), |s| (s.enabled, s.running));
        if let Some((_, r)) = live {
            enabled = enabled.saturating_add(r.last.enabled);
            ran = ran.saturating_add(r.last.running);
        }
        Some((enabled, ran))
    }

    /// Why PMC `pmcid`'s count cannot be trusted, if an event of it could not be read.
    pub(crate) fn failure(&self, pmcid: u32) -> Option<String> {
        lock(&self.failed).get(&pmcid).cloned()
    }

    /// PMC `pmcid` was released: its times and failure go.
    pub(crate) fn forget(&self, pmcid: u32) {
        lock(&self.settled).retain(|_, s| s.id != pmcid);
        lock(&self.failed).remove(&pmcid);
    }

    /// Adds a reading's times to `pmc`'s settled times.
    fn settle(&self, pmc: &HostedPmc, reading: Reading) {
        let mut settled = lock(&self.settled);
        let id = pmc.id.to_u32();
        let entry = settled.entry(pmc.token).or_insert(Settled { id, enabled: 0, running: 0 });
        entry.enabled = entry.enabled.saturating_add(reading.enabled);
        entry.running = entry.running.saturating_add(reading.running);
    }

    /// Remembers why `pmc`'s count is wrong, if an event could not be read.
    fn note(&self, pmc: &HostedPmc, unreadable: Option<Unreadable>) {
        if let Some(lost) = unreadable {
            lock(&self.failed).entry(pmc.id.to_u32()).or_insert_with(|| lost_words(pmc, &lost));
        }
    }

    /// Whether a running PMC needs the worker: one that samples (its rings need reading) or
    /// counts another process (whose end must be noticed). A process counting itself does not.
    pub(crate) fn needs_worker(&self) -> bool {
        let me = crate::host::current_pid::current_pid();
        lock(&self.running).values().any(|r| {
            r.pmc.id.mode.is_sampling()
                || r.pmc.id.cpu.is_some()
                || r.targets.keys().any(|&p| p != me)
        })
    }

    /// The processes running PMCs count that have not been seen to end.
    pub(crate) fn live_targets(&self) -> Vec<Pid> {
        let running = lock(&self.running);
        let mut pids: Vec<Pid> = running
            .values()
            .flat_map(|r| r.targets.iter().filter(|(_, t)| !t.gone).map(|(&pid, _)| pid))
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// What the worker waits on while PMCs run: every ring (perf makes it readable at its wakeup
    /// watermark) and a pidfd of every other process a PMC counts (readable when it ends).
    /// Duplicated descriptors: a ring closed meanwhile only makes the worker wake once more.
    pub(crate) fn watched(&self) -> Vec<Watched> {
        let me = crate::host::current_pid::current_pid();
        let mut out = Vec::new();
        let mut processes = Vec::new();
        for running in lock(&self.running).values() {
            let token = running.pmc.token;
            for (pid, target) in running
                .targets
                .iter()
                .map(|(p, t)| (*p, t))
                .chain(running.system.iter().map(|t| (-1, t)))
            {
                for (index, ring) in target.rings.iter().enumerate() {
                    // Unique while the ring lives: its PMC, its target and its CPU's place.
                    let key =
                        (token << 32 ^ (pid as u32 as u64) << 12 ^ index as u64) & !PROCESS_KEY;
                    // SAFETY: the ring's descriptor is open while the lock is held.
                    let fd = unsafe { BorrowedFd::borrow_raw(ring.sampler.as_raw_fd()) };
                    if let Ok(fd) = fd.try_clone_to_owned() {
                        out.push((key, fd));
                    }
                }
                if pid > 0 && pid != me && !target.gone {
                    processes.push(pid);
                }
            }
        }
        processes.sort_unstable();
        processes.dedup();
        for pid in processes {
            // SAFETY: pidfd_open takes no pointers; a non-negative result is a new descriptor.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            if fd >= 0 {
                // SAFETY: `fd` was just returned by pidfd_open and nothing else owns it.
                out.push((PROCESS_KEY | pid as u64, unsafe { OwnedFd::from_raw_fd(fd as i32) }));
            }
        }
        out
    }

    /// Every event the rings hold (and the retired rings' last ones), with their times.
    pub(crate) fn drain(&self) -> Vec<(u64, Event)> {
        let mut events = Vec::new();
        let retired = std::mem::take(&mut *lock(&self.retired));
        for mut ring in retired {
            ring.read_into(&mut events);
        }
        for running in lock(&self.running).values_mut() {
            running.read_rings(&mut events);
        }
        events
    }
}

impl HostCounters for PerfCounters {
    fn counts(&self, class: Class) -> bool {
        matches!(class, Class::Soft | Class::Iap | Class::Iaf | Class::K8)
    }

    fn check(&self, pmc: &HostedPmc) -> Result<(), Errno> {
        if pmc.flags.contains(PmcFlags::LOG_PROCCSW) {
            let why = "PMC_F_LOG_PROCCSW (pmcstat -W) logs the count at every context switch of \
                       a target, and perf reads no counter at another task's context switches";
            return Err(explain(Errno::OpNotSupp, why));
        }
        Plan::of(pmc, &self.pmus).map(drop)
    }

    fn start(&self, pmc: &HostedPmc, targets: &[Pid]) -> Result<(), Errno> {
        let plan = Plan::of(pmc, &self.pmus)?;
        let id = pmc.id.to_u32();
        lock(&self.failed).remove(&id);
        // A token names another PMC after a release: its times are not this one's.
        lock(&self.settled).retain(|&t, s| t != pmc.token || s.id == id);
        let perf = &*self.perf;
        let mut running =
            Running { pmc: *pmc, targets: BTreeMap::new(), system: None, last: Reading::default() };
        match pmc.id.cpu {
            Some(cpu) => running.system = Some(plan.open_cpu(u32::from(cpu), perf)?),
            None => {
                for &pid in targets {
                    running.targets.insert(pid, plan.open_process(pid, self.ncpu, perf)?);
                }
            }
        }
        for target in running.all() {
            enable(target, true).map_err(|e| perf_errno("starting the PMC", &e))?;
        }
        // A pinned event that finds no free counter where its target runs now is in error at
        // once: the start fails rather than count nothing.
        for target in running.all() {
            if let (_, Some(lost)) = target.reading() {
                if lost.error.kind() == io::ErrorKind::UnexpectedEof {
                    return Err(explain(Errno::Busy, lost_words(pmc, &lost)));
                }
            }
        }
        lock(&self.running).insert(pmc.token, running);
        Ok(())
    }

    fn stop(&self, token: u64, counted: &mut dyn FnMut(Pid, u64)) {
        let Some(mut running) = lock(&self.running).remove(&token) else { return };
        for target in running.all() {
            let _ = enable(target, false);
        }
        let pmc = running.pmc;
        let mut report = |pid: Pid, target: &mut Target| {
            let (reading, unreadable) = target.reading();
            self.note(&pmc, unreadable);
            self.settle(&pmc, reading);
            counted(pid, reading.value);
        };
        for (&pid, target) in &mut running.targets {
            report(pid, target);
        }
        if let Some(system) = running.system.as_mut() {
            report(-1, system);
        }
        if running.pmc.id.mode.is_sampling() {
            // The samples taken so far go to the driver before the PMC can be released.
            let mut events = Vec::new();
            running.read_rings(&mut events);
            (self.post)(events);
        }
    }

    fn read(&self, token: u64) -> u64 {
        let mut all = lock(&self.running);
        let Some(running) = all.get_mut(&token) else { return 0 };
        let pmc = running.pmc;
        let mut total = Reading::default();
        for target in running.all() {
            let (reading, unreadable) = target.reading();
            self.note(&pmc, unreadable);
            total = total.plus(reading);
        }
        running.last = total;
        total.value
    }

    fn detach(&self, token: u64, pid: Pid) -> u64 {
        let mut all = lock(&self.running);
        let Some(running) = all.get_mut(&token) else { return 0 };
        let pmc = running.pmc;
        let descendants = pmc.flags.contains(PmcFlags::DESCENDANTS);
        let Some(target) = running.targets.get_mut(&pid) else { return 0 };
        let (reading, unreadable) = target.reading();
        self.note(&pmc, unreadable);
        self.settle(&pmc, reading);
        if descendants {
            // Closing the events would stop counting the children too: they stay open, and
            // what they count from now on is the children's.
            target.credited = target.credited.plus(reading);
            target.gone = true;
            return reading.value;
        }
        if let Some(mut target) = running.targets.remove(&pid) {
            let _ = enable(&mut target, false);
            lock(&self.retired).append(&mut target.rings);
        }
        reading.value
    }
}

#[cfg(test)]
mod scripted;

#[cfg(test)]
mod tests {
    use super::*;
    use hwpmc::abi::{Mode, PmcId};

    static POSTED: Mutex<Vec<(u64, Event)>> = Mutex::new(Vec::new());

    /// The CPU time of the calling thread, in nanoseconds.
    fn thread_cpu_ns() -> u64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid timespec for clock_gettime to fill.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    fn keep(events: Vec<(u64, Event)>) {
        lock(&POSTED).extend(events);
    }

    /// Counters of this machine's perf, as if it were not hybrid.
    fn on_this_machine(ncpu: u32) -> PerfCounters {
        PerfCounters::new(ncpu, keep, CorePmus::default(), Box::new(perf::Perf))
    }

    #[test]
    fn a_k8_pmc_is_a_perf_raw_event_with_the_same_perf_ctl_event_bits() {
        let id = PmcId { cpu: None, mode: Mode::ThreadCounting, class: Class::K8, row: 4 };
        let pmc = |perf_ctl| HostedPmc {
            token: 1,
            id,
            event: HostedEvent::Raw { class: Class::K8, config: perf_ctl },
            user: true,
            kernel: false,
            flags: PmcFlags::empty(),
            thread: 0,
            reload: 0,
        };
        // A 12-bit event (0x1C7: bits 35:32 hold 1), unit mask, EDGE, INV, CMASK: perf's raw
        // config is the PERF_CTL image itself; USR, OS, INT and EN are perf's business.
        let image = 0x1_0000_0000 | 0x0A << 24 | 1 << 23 | 1 << 18 | 0x3F << 8 | 0xC7;
        let usr_os_int_en = 1 << 16 | 1 << 17 | 1 << 20 | 1 << 22;
        assert_eq!(source_of(&pmc(image | usr_os_int_en)), Ok(Source::Raw(image)));
        assert_eq!(source_of(&pmc(0xC0)), Ok(Source::Raw(0xC0)));
        assert_eq!(source_of(&pmc(0xC0 | 1 << 41)), Err(Errno::Inval), "HostOnly is perf's");
        assert!(on_this_machine(1).counts(Class::K8));
    }

    #[test]
    fn a_clock_period_below_perfs_minimum_is_refused_with_the_minimum() {
        let counters = on_this_machine(1);
        let id = PmcId { cpu: None, mode: Mode::ThreadSampling, class: Class::Soft, row: 0 };
        let pmc = |reload| HostedPmc {
            token: 8,
            id,
            event: HostedEvent::Soft { event: event::SOFT_FIRST },
            user: true,
            kernel: true,
            flags: PmcFlags::empty(),
            thread: 0,
            reload,
        };
        let min = crate::host::CLOCK_MIN_PERIOD_NS;
        assert_eq!(counters.check(&pmc(min - 1)), Err(Errno::Inval));
        let why = super::super::call_detail::explanation(Errno::Inval).unwrap();
        assert!(why.contains("10000 ns"), "{why}");
        assert_eq!(counters.check(&pmc(min)), Ok(()));
        // A counting PMC's reload is its initial count, not a period.
        let counting = HostedPmc { id: PmcId { mode: Mode::ThreadCounting, ..id }, ..pmc(1) };
        assert_eq!(counters.check(&counting), Ok(()));
    }

    #[test]
    fn a_stop_hands_over_every_sample_its_rings_hold() {
        // A ring on every CPU: the thread runs wherever the scheduler puts it.
        // SAFETY: sysconf has no memory-safety preconditions.
        let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as u32;
        let counters = on_this_machine(ncpu);
        let id = PmcId { cpu: None, mode: Mode::ThreadSampling, class: Class::Soft, row: 0 };
        // SOFT_FIRST is cpu-clock; one sample per millisecond (1 000 000 ns).
        let pmc = HostedPmc {
            token: 7,
            id,
            event: HostedEvent::Soft { event: event::SOFT_FIRST },
            user: true,
            kernel: true,
            flags: PmcFlags::empty(),
            thread: 0,
            reload: 1_000_000,
        };
        assert_eq!(perf::SOFTWARE_EVENTS[0].0, "cpu-clock");
        counters.start(&pmc, &[std::process::id() as Pid]).unwrap();
        // 50 ms of this thread's CPU time, however busy the machine is (at most 10 s of waiting).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let start = thread_cpu_ns();
        let mut x = 1u64;
        while thread_cpu_ns() - start < 50_000_000 && std::time::Instant::now() < deadline {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let mut counted = Vec::new();
        counters.stop(7, &mut |pid, n| counted.push((pid, n)));
        assert_eq!(counted, [(std::process::id() as Pid, 0)], "a sampling PMC counts nothing");
        let samples = lock(&POSTED)
            .iter()
            .filter(|(_, e)| matches!(e, Event::Sample { token: 7, .. }))
            .count();
        // Nothing else reads these rings: every sample of the 50 ms comes out of the stop.
        assert!(samples >= 25, "{samples} samples of 50 ms of CPU time at 1 kHz");
        assert!(lock(&counters.running).is_empty(), "the stopped PMC still runs");
        assert!(counters.watched().is_empty(), "the worker would wait on a stopped PMC's ring");
    }
}
