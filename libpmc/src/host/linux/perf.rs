//! The perf events behind PMCs: which `perf_event_attr` an allocated PMC becomes, and opening it
//! for a process or a CPU, counting or sampling. Counting events open through
//! [`CountingEvents`], which tests replace with a scripted perf.

use std::io;

use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Counter, SampleFlag, Sampler};

/// What perf counts for one PMC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A perf software event (`PERF_COUNT_SW_*`).
    Software(u64),
    /// A perf generic hardware event (`PERF_COUNT_HW_*`), for the fixed counters.
    Hardware(u64),
    /// A raw IA32_PERFEVTSEL encoding (event, umask, edge, inv, cmask).
    Raw(u64),
}

/// `PERF_TYPE_HARDWARE`: generic hardware events (on a hybrid machine with the PMU's type in
/// config bits 63:32, perf's extended type).
pub(crate) const PERF_TYPE_HARDWARE: u32 = 0;
/// `PERF_TYPE_SOFTWARE`.
pub(crate) const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_TYPE_RAW`: the CPU's event-select encoding, on the machine's one core PMU.
pub(crate) const PERF_TYPE_RAW: u32 = 4;

/// What a perf event counts: `perf_event_attr`'s `type` and `config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventAttr {
    pub(crate) kind: u32,
    pub(crate) config: u64,
}

impl Source {
    /// Its attr on a machine with one core PMU (see `hybrid` for the others).
    pub(crate) fn attr(self) -> EventAttr {
        match self {
            Source::Software(config) => EventAttr { kind: PERF_TYPE_SOFTWARE, config },
            Source::Hardware(config) => EventAttr { kind: PERF_TYPE_HARDWARE, config },
            Source::Raw(config) => EventAttr { kind: PERF_TYPE_RAW, config },
        }
    }
}

/// Which rings a PMC counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rings {
    pub(crate) user: bool,
    pub(crate) kernel: bool,
}

/// The perf software events this host offers: (perf name, `PERF_COUNT_SW_*`).
pub(crate) const SOFTWARE_EVENTS: &[(&str, Software)] = &[
    ("cpu-clock", Software::CPU_CLOCK),
    ("task-clock", Software::TASK_CLOCK),
    ("page-faults", Software::PAGE_FAULTS),
    ("context-switches", Software::CONTEXT_SWITCHES),
    ("cpu-migrations", Software::CPU_MIGRATIONS),
    ("minor-faults", Software::PAGE_FAULTS_MIN),
    ("major-faults", Software::PAGE_FAULTS_MAJ),
    ("alignment-faults", Software::ALIGNMENT_FAULTS),
    ("emulation-faults", Software::EMULATION_FAULTS),
];

/// Whether perf software event `config` is a clock (sampled by time: its period is in ns).
pub(crate) fn is_clock(source: Source) -> bool {
    matches!(source, Source::Software(c)
        if c == u64::from(Software::CPU_CLOCK) || c == u64::from(Software::TASK_CLOCK))
}

/// Where a perf event counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// One thread (and, with `inherit`, what it creates afterwards), on any CPU.
    Thread { tid: i32, inherit: bool, threads_only: bool },
    /// Every process on one CPU.
    Cpu(u32),
    /// One thread and, with `inherit`, the threads (and, unless `threads_only`, the processes)
    /// it creates, on one CPU (sampling a process needs one ring per CPU: perf refuses to map an
    /// inherited event that follows a task on every CPU).
    ThreadOnCpu { pid: i32, cpu: u32, inherit: bool, threads_only: bool },
}

/// Sampling parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sampling {
    /// Events per sample (nanoseconds for the clocks).
    pub(crate) period: u64,
    /// Whether samples carry callchains.
    pub(crate) callchain: bool,
    /// Whether samples carry the user registers and a copy of the user stack, for unwinding
    /// with the images' CFI (`perf record --call-graph dwarf`).
    pub(crate) user_stack: bool,
    /// Whether this event also reports exec, mmap, fork and exit.
    pub(crate) side_band: bool,
}

fn builder(attr: EventAttr, rings: Rings, scope: Scope) -> Builder<'static> {
    // Any event, then the type and config: the crate's event types know no dynamic PMU type.
    // read_format is the builder's default: TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING.
    let mut b = Builder::new(Software::DUMMY);
    b.attrs_mut().type_ = attr.kind;
    b.attrs_mut().config = attr.config;
    b.exclude_user(!rings.user).exclude_kernel(!rings.kernel).exclude_hv(true).enabled(false);
    match scope {
        Scope::Thread { tid, inherit, threads_only } => {
            b.observe_pid(tid).any_cpu().inherit(inherit);
            if inherit && threads_only {
                b.inherit_thread(true);
            }
        }
        Scope::Cpu(cpu) => {
            b.any_pid().one_cpu(cpu as usize);
        }
        Scope::ThreadOnCpu { pid, cpu, inherit, threads_only } => {
            b.observe_pid(pid).one_cpu(cpu as usize).inherit(inherit);
            b.inherit_thread(inherit && threads_only);
        }
    }
    b
}

/// One counting perf event to open (disabled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CounterRequest {
    pub(crate) attr: EventAttr,
    pub(crate) rings: Rings,
    pub(crate) scope: Scope,
    /// `pinned`: on a counter all the time or in error (read gives end of file), never
    /// rotated with other events.
    pub(crate) pinned: bool,
}

/// A count with perf's times (`PERF_FORMAT_TOTAL_TIME_ENABLED | _RUNNING`), in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Reading {
    pub(crate) value: u64,
    /// Time the event was enabled (for a task's event: while the task ran).
    pub(crate) enabled: u64,
    /// Time it was on a counter.
    pub(crate) running: u64,
}

/// An open counting event.
pub(crate) trait CountingEvent: Send {
    fn enable(&mut self, on: bool) -> io::Result<()>;
    /// Its count and times; `ErrorKind::UnexpectedEof` when perf put a pinned event in error
    /// state (it could not keep a counter).
    fn read(&mut self) -> io::Result<Reading>;
}

/// Opens counting events: perf itself ([`Perf`]), or a scripted perf in tests.
pub(crate) trait CountingEvents: Send + Sync {
    fn open(&self, request: &CounterRequest) -> io::Result<Box<dyn CountingEvent>>;
}

/// `perf_event_open(2)`.
pub(crate) struct Perf;

impl CountingEvents for Perf {
    fn open(&self, request: &CounterRequest) -> io::Result<Box<dyn CountingEvent>> {
        let mut b = builder(request.attr, request.rings, request.scope);
        b.pinned(request.pinned);
        Ok(Box::new(b.build()?))
    }
}

impl CountingEvent for Counter {
    fn enable(&mut self, on: bool) -> io::Result<()> {
        if on { Counter::enable(self) } else { Counter::disable(self) }
    }

    fn read(&mut self) -> io::Result<Reading> {
        let data = self.read_full()?;
        let ns = |d: Option<std::time::Duration>| {
            d.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        };
        Ok(Reading {
            value: data.count(),
            enabled: ns(data.time_enabled()),
            running: ns(data.time_running()),
        })
    }
}

/// The user registers samples carry for unwinding: `PERF_REG_X86_BP`, `_SP` and `_IP` (perf
/// gives them in this order, the order of their bits).
pub(crate) const USER_REGS: u64 = 1 << 6 | 1 << 7 | 1 << 8;

/// Bytes of the user stack each sample copies from its stack pointer up, as `perf record
/// --call-graph dwarf` copies by default: enough for the frames of ordinary code (a frame
/// beyond it ends the callchain).
pub(crate) const USER_STACK_BYTES: u32 = 8192;

/// Bytes of each sampling ring (a power-of-two number of pages, plus the header page).
const RING_BYTES: usize = 512 * 1024;
/// Bytes of each sampling ring whose samples copy the user stack, where the limits allow.
const STACK_RING_BYTES: usize = 2 * 1024 * 1024;

/// Opens a sampling event, disabled, with its ring mapped.
pub(crate) fn open_sampler(
    attr: EventAttr,
    rings: Rings,
    scope: Scope,
    sampling: Sampling,
) -> io::Result<Sampler> {
    if sampling.user_stack {
        // A sample with its stack copy is about 8.5 KiB: a bigger ring where the memory-lock
        // limits allow one (perf_event_mlock_kb, RLIMIT_MEMLOCK), else the usual one.
        let counter = sampling_builder(attr, rings, scope, sampling).build()?;
        if let Ok(sampler) = counter.sampled(STACK_RING_BYTES) {
            return Ok(sampler);
        }
    }
    sampling_builder(attr, rings, scope, sampling).build()?.sampled(RING_BYTES)
}

fn sampling_builder(
    attr: EventAttr,
    rings: Rings,
    scope: Scope,
    sampling: Sampling,
) -> Builder<'static> {
    let mut b = builder(attr, rings, scope);
    let mut flags = SampleFlag::IP | SampleFlag::TID | SampleFlag::TIME | SampleFlag::CPU;
    if sampling.callchain {
        flags |= SampleFlag::CALLCHAIN;
    }
    if sampling.user_stack {
        flags |= SampleFlag::REGS_USER | SampleFlag::STACK_USER;
        b.sample_regs_user(USER_REGS).sample_stack_user(USER_STACK_BYTES);
    }
    // Sample times on CLOCK_MONOTONIC_RAW, which the host converts to TSC values for the log.
    b.sample(flags)
        .sample_period(sampling.period.max(1))
        // The worker is woken when a quarter of the ring is full, not per sample or on a
        // timer: few wake-ups, and room for three more quarters while it reads.
        .wakeup_watermark(RING_BYTES / 4)
        .clockid(perf_event::Clock::MONOTONIC_RAW);
    if sampling.side_band {
        // MMAP2: mappings with their file's device and inode, which find the file of a process
        // in another mount namespace.
        b.mmap(true).mmap2(true).comm(true).comm_exec(true).task(true).sample_id_all(true);
    }
    b
}

/// Opens a sampling event like [`open_sampler`] but without a ring of its own: its records go
/// to `ring`'s (same CPU, same kind of event), so a process's threads share one ring per CPU.
pub(crate) fn open_into(
    attr: EventAttr,
    rings: Rings,
    scope: Scope,
    sampling: Sampling,
    ring: &Sampler,
) -> io::Result<Counter> {
    let counter = sampling_builder(attr, rings, scope, sampling).build()?;
    /// `PERF_EVENT_IOC_SET_OUTPUT`: `_IO('$', 5)`.
    const SET_OUTPUT: libc::c_ulong = 0x2405;
    use std::os::fd::AsRawFd;
    // SAFETY: an ioctl on two perf event descriptors we own; SET_OUTPUT takes the target
    // descriptor as its integer argument and touches no memory of ours.
    let r = unsafe { libc::ioctl(counter.as_raw_fd(), SET_OUTPUT, ring.as_raw_fd()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(counter)
}

/// Whether perf can count hardware events here (a VM without a virtual PMU cannot: perf says
/// ENOENT); `Err` holds the reason in words.
pub(crate) fn probe_hardware() -> Result<(), String> {
    let rings = Rings { user: true, kernel: false };
    let scope = Scope::Thread { tid: 0, inherit: false, threads_only: false };
    let instructions = Source::Hardware(u64::from(Hardware::INSTRUCTIONS)).attr();
    match builder(instructions, rings, scope).build().map(drop) {
        Ok(()) => Ok(()),
        Err(e) => Err(format!(
            "no hardware PMU: perf_event_open(PERF_COUNT_HW_INSTRUCTIONS) fails with {} (a VM \
             without a virtual PMU reports ENOENT); software events and the TSC remain",
            crate::error::errno_name(e.raw_os_error().unwrap_or(0))
        )),
    }
}
