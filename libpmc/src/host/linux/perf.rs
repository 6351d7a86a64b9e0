//! The perf events behind PMCs: which `perf_event_attr` an allocated PMC becomes, and opening it
//! for a process or a CPU, counting or sampling.

use std::io;

use perf_event::events::{Hardware, Raw, Software};
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
    /// One thread and the threads (and, unless `threads_only`, the processes) it creates, on
    /// one CPU (sampling a process needs one ring per CPU: perf refuses to map an inherited
    /// event that follows a task on every CPU).
    ThreadOnCpu { pid: i32, cpu: u32, threads_only: bool },
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

fn builder(source: Source, rings: Rings, scope: Scope) -> Builder<'static> {
    let mut b = match source {
        Source::Software(c) => Builder::new(Software::from(c)),
        Source::Hardware(c) => Builder::new(Hardware::from(c)),
        Source::Raw(c) => Builder::new(Raw::new(c)),
    };
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
        Scope::ThreadOnCpu { pid, cpu, threads_only } => {
            b.observe_pid(pid).one_cpu(cpu as usize).inherit(true).inherit_thread(threads_only);
        }
    }
    b
}

/// Opens a counting event, disabled.
pub(crate) fn open_counter(source: Source, rings: Rings, scope: Scope) -> io::Result<Counter> {
    builder(source, rings, scope).build()
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
    source: Source,
    rings: Rings,
    scope: Scope,
    sampling: Sampling,
) -> io::Result<Sampler> {
    if sampling.user_stack {
        // A sample with its stack copy is about 8.5 KiB: a bigger ring where the memory-lock
        // limits allow one (perf_event_mlock_kb, RLIMIT_MEMLOCK), else the usual one.
        let counter = sampling_builder(source, rings, scope, sampling).build()?;
        if let Ok(sampler) = counter.sampled(STACK_RING_BYTES) {
            return Ok(sampler);
        }
    }
    sampling_builder(source, rings, scope, sampling).build()?.sampled(RING_BYTES)
}

fn sampling_builder(
    source: Source,
    rings: Rings,
    scope: Scope,
    sampling: Sampling,
) -> Builder<'static> {
    let mut b = builder(source, rings, scope);
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
        b.mmap(true).comm(true).comm_exec(true).task(true).sample_id_all(true);
    }
    b
}

/// Opens a sampling event like [`open_sampler`] but without a ring of its own: its records go
/// to `ring`'s (same CPU, same kind of event), so a process's threads share one ring per CPU.
pub(crate) fn open_into(
    source: Source,
    rings: Rings,
    scope: Scope,
    sampling: Sampling,
    ring: &Sampler,
) -> io::Result<Counter> {
    let counter = sampling_builder(source, rings, scope, sampling).build()?;
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
    let probe = |source| open_counter(source, rings, scope).map(drop);
    match probe(Source::Hardware(u64::from(Hardware::INSTRUCTIONS))) {
        Ok(()) => Ok(()),
        Err(e) => Err(format!(
            "no hardware PMU: perf_event_open(PERF_COUNT_HW_INSTRUCTIONS) fails with {} (a VM \
             without a virtual PMU reports ENOENT); software events and the TSC remain",
            crate::error::errno_name(e.raw_os_error().unwrap_or(0))
        )),
    }
}
