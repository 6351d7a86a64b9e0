//! The PMU backend: everything the driver knows about one vendor's counters, behind one trait —
//! FreeBSD's `pmc_mdep` (per-CPU discovery, init and fini, the PMI handler) and `pmc_classdep`
//! (allocation, program, start, stop, read and write of a counter) in Rust form.
//!
//! The generic driver — system calls, hooks, logging, sampling, bookkeeping — names no vendor
//! register: it holds a backend's configurations ([`PmuBackend::Config`]) and counters
//! ([`PmuBackend::Counter`]) as opaque values and calls the trait. The backend of the machine
//! the driver is built for is [`crate::arch::Backend`].
//!
//! What the trait allows for, besides Intel's architectural PMU:
//! * a control and a counter register per counter, no fixed counters and an optional global
//!   control and status (AMD): the backend decides what [`CounterMask`] bits mean, how counters
//!   start and stop together, and what its PMI handler acknowledges;
//! * a different PMU per core type (hybrid CPUs): discovery runs on every CPU and each CPU keeps
//!   its own state ([`PmuBackend::Cpu`]); a row may have no counter on some CPUs
//!   ([`PmuBackend::row_counter`] returns `None` there);
//! * rows that are not a fixed counter (multiplexing): a row's counter on a CPU is whatever
//!   [`PmuBackend::row_counter`] resolves it to when the driver loads, so a backend may return a
//!   virtual counter that it maps onto hardware itself.

use core::ops::Range;

use crate::abi::{Caps, Class, PmcFlags, PmcOpPmcAllocate};
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::refusal::Refusal;
pub(crate) use crate::text::CpuIdString;

/// A set of a CPU's hardware counters, one bit per counter; what each bit means is the backend's
/// choice (Intel's is the IA32_PERF_GLOBAL_CTRL layout). The generic driver only combines sets
/// and maps bits to rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub(crate) struct CounterMask(u64);

impl CounterMask {
    /// No counter.
    pub(crate) const EMPTY: CounterMask = CounterMask(0);

    /// A set from its bits (built by the backend).
    #[inline]
    pub(crate) const fn from_bits(bits: u64) -> Self {
        CounterMask(bits)
    }
    /// The raw bits.
    #[inline]
    pub(crate) const fn bits(self) -> u64 {
        self.0
    }
    /// Counters in either set.
    #[inline]
    pub(crate) const fn union(self, other: CounterMask) -> Self {
        CounterMask(self.0 | other.0)
    }
    /// Whether the set is empty.
    #[inline]
    pub(crate) const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// [`Self::for_each_bit`] for the PMI handlers: a set of one counter (the common case) in a
    /// straight line, without a loop.
    #[inline(always)]
    pub(crate) fn for_each_overflow(self, mut f: impl FnMut(u32)) {
        let bits = self.0;
        if bits & bits.wrapping_sub(1) == 0 {
            if bits != 0 {
                f(bits.trailing_zeros());
            }
        } else {
            cold_path();
            self.for_each_bit(f);
        }
    }

    /// Calls `f` with each bit number in the set, lowest first.
    // Always inline: the PMI handlers hand it a closure that refers to theirs, which must not
    // have to be in memory for an out-of-line call.
    #[inline(always)]
    pub(crate) fn for_each_bit(self, mut f: impl FnMut(u32)) {
        let mut bits = self.0;
        while bits != 0 {
            f(bits.trailing_zeros());
            bits &= bits - 1;
        }
    }
}

/// A hardware class a backend offers: its rows follow SOFT's and TSC's, in the order given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HardwareClass {
    pub(crate) class: Class,
    pub(crate) rows: u32,
    /// Counter width in bits (the narrowest of every CPU's, so a process PMC runs anywhere).
    pub(crate) width: u32,
    pub(crate) caps: Caps,
}

/// What the generic driver asks of a PMCALLOCATE request for a hardware class, already checked
/// against the mode, flags and caps rules every class shares.
#[derive(Clone, Copy)]
pub(crate) struct AllocateRequest<'a> {
    /// The request as the caller sent it (`pm_ev`, `pm_md`).
    pub(crate) raw: &'a PmcOpPmcAllocate,
    /// The capabilities asked for (PMC_CAP_USER / PMC_CAP_SYSTEM select the rings when the
    /// configuration names none).
    pub(crate) caps: Caps,
    /// The allocation flags (PMC_F_EV_PMU: `pm_md` holds a raw configuration).
    pub(crate) flags: PmcFlags,
    /// Whether the caller may count on the sibling hyperthread too (AnyThread); asked only of
    /// a request that wants it.
    pub(crate) any_thread_allowed: &'a dyn Fn() -> bool,
    /// The only core type the PMC runs on (leaf 0x1A numbering, from its
    /// [`PmcFlags::HYBRID_FLAGS`]), whose PMU the request is checked against and whose
    /// counters it may use; 0 for every CPU (what every core type has).
    pub(crate) core_type: u8,
}

/// The second encoding of a PMC on a hybrid machine, for an event both core types have but
/// encode differently: the configuration [`PmuBackend::configure`] returned is loaded on CPUs of
/// core type `primary`, `config` on those of core type `other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OtherCoreType<Config> {
    pub(crate) primary: u8,
    pub(crate) other: u8,
    pub(crate) config: Config,
}

/// The most times one PMI handles overflows and reads the status again, where the backend
/// reads it again (counters stopped by the handler may overflow a few events late; should one
/// overflow at every round, the PMI still ends).
pub(crate) const PMI_ROUNDS: usize = 4;

/// A configuration in the vendor-neutral form a host kernel that counts PMCs itself receives
/// (see [`crate::hosted::HostedEvent::Raw`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawEvent {
    pub(crate) config: u64,
    pub(crate) user: bool,
    pub(crate) kernel: bool,
}

/// One vendor's performance-monitoring unit (see the module documentation).
///
/// Methods taking `hw` run on the CPU whose state `cpu` is (or, for discovery, on the CPU being
/// discovered). Methods marked "interrupt path" may run in an NMI: they take no lock and
/// allocate nothing.
///
/// No method has a default body: a backend that delegates to others (the x86 vendor dispatch)
/// must forward every method, and the compiler says when one is missing.
pub(crate) trait PmuBackend: Sized + core::fmt::Debug {
    /// What discovery finds on one CPU.
    type Description: Copy + core::fmt::Debug;
    /// One CPU's state: its PMU and the register images the backend keeps there.
    type Cpu: core::fmt::Debug;
    /// The counter behind a hardware row on one CPU, fixed when the driver loads.
    type Counter: Copy + core::fmt::Debug + PartialEq;
    /// A configuration of a hardware class, accepted at allocation (reserved bits refused).
    type Config: Copy + core::fmt::Debug + PartialEq;
    /// The control registers of a set of counters as loading programs them, worked out ahead
    /// ([`PmuBackend::add_to_image`]): a process's counters are imaged once, when its load list
    /// is published, and each switch-in programs them in one pass. Fixed size, so that making
    /// one allocates nothing. An image is built from the counters of one CPU and programmed on
    /// CPUs with the same counters.
    type Image: Clone + Default + core::fmt::Debug + Send + Sync;

    /// Describes the PMU of the CPU the caller runs on; `None` if it has none the backend can
    /// drive (the driver then offers SOFT and TSC only).
    fn discover<H: Hardware>(hw: &H) -> Option<Self::Description>;
    /// The machine: every active CPU's description (`None` for CPUs without a PMU), and the
    /// hardware of the CPU loading the driver.
    fn new<H: Hardware>(cpus: &[Option<Self::Description>], hw: &H) -> Self;
    /// The hardware classes every CPU can run process PMCs of, in row order.
    fn classes(&self) -> &[HardwareClass];
    /// The state of a CPU with `description`.
    fn cpu(&self, description: Option<Self::Description>) -> Self::Cpu;
    /// The core type of a CPU of a hybrid machine, as CPUID leaf 0x1A names it (0x20 E-core,
    /// 0x40 P-core); 0 when the machine is not hybrid.
    fn core_type(&self, cpu: &Self::Cpu) -> u8;
    /// The counter behind row `index` of hardware class `class` on a CPU, if it has one.
    fn row_counter(&self, cpu: &Self::Cpu, class: Class, index: u32) -> Option<Self::Counter>;
    /// The bit of `counter` in a [`CounterMask`].
    fn counter_mask(counter: Self::Counter) -> CounterMask;
    /// `pmc_cputype` (GETCPUINFO): names the CPU for libpmc's tables, never decides support.
    fn cpu_type(&self) -> u32;
    /// `kern.hwpmc.cpuid`.
    fn cpuid_string(&self) -> CpuIdString;

    /// Applies the load-time tunables that concern the PMU (before any CPU's state is made).
    fn apply_tunables(&mut self, tunables: &crate::kernel::Tunables);
    /// Resets the current CPU's PMU at load: every counter stopped, the PMI entry unmasked.
    fn init_cpu<H: Hardware>(&self, hw: &H, cpu: &Self::Cpu);
    /// Undoes [`PmuBackend::init_cpu`] at unload.
    fn fini_cpu<H: Hardware>(&self, hw: &H, cpu: &Self::Cpu);

    /// Checks an allocation request for `class` and returns its configuration and the rows of
    /// the class (indexes within it) that may hold it: EINVAL for a bad event or a reserved
    /// bit, EPERM for AnyThread without the privilege (a bare errno is given its cause by the
    /// caller; a backend names a cause of its own where it has one). Nothing reaches a
    /// register before this.
    fn configure(
        &self,
        class: Class,
        rows: u32,
        request: &AllocateRequest<'_>,
    ) -> Result<(Self::Config, Range<u32>), Refusal>;
    /// The second core type's encoding a request for `class` carries besides `config` (what
    /// [`PmuBackend::configure`] accepted), checked against that core type's PMU: `None` when
    /// it carries none (one encoding for every CPU). EINVAL when the request names one core
    /// type, the class has no second encoding or the machine is not hybrid; EPERM for AnyThread
    /// without the privilege.
    fn configure_other_core_type(
        &self,
        class: Class,
        request: &AllocateRequest<'_>,
        config: Self::Config,
    ) -> Result<Option<OtherCoreType<Self::Config>>, Errno>;
    /// Claims, on `cpus` (a system PMC's CPU, or every CPU for a process PMC), the registers
    /// `config` shares with the other counters of a CPU (Intel's offcore-response MSRs): EBUSY
    /// when a PMC allocated there holds one with another value. All or nothing; called under
    /// the allocation lock. Backends with no shared register claim nothing.
    fn claim<'a>(
        &self,
        cpus: impl Iterator<Item = &'a Self::Cpu> + Clone,
        config: Self::Config,
    ) -> Result<(), Errno>
    where
        Self::Cpu: 'a;
    /// Gives back what [`PmuBackend::claim`] claimed on `cpus` (at release).
    fn unclaim<'a>(&self, cpus: impl Iterator<Item = &'a Self::Cpu>, config: Self::Config)
    where
        Self::Cpu: 'a;
    /// The configuration as loading writes it: enabled, interrupting at overflow.
    fn armed(config: Self::Config) -> Self::Config;
    /// The longest period a counter of `config` (width mask `width_mask`) may be loaded with.
    fn max_period(&self, config: Self::Config, width_mask: u64) -> u64;
    /// The RDPMC index of row `index` of `config`'s class (PMCGETMSR), if user mode may read it.
    fn rdpmc_index(config: Self::Config, index: u32) -> Option<u32>;
    /// `config` as a host kernel that counts PMCs itself receives it.
    fn raw_event(config: Self::Config) -> RawEvent;
    /// Whether [`PmuBackend::raw_event`] says all of `config` (not so for an event that also
    /// reads a shared register, such as Intel's offcore response).
    fn host_countable(config: Self::Config) -> bool;

    /// Writes `value` to `counter` (stopped, or in the PMI handler). Interrupt path.
    fn write_counter<H: Hardware>(&self, hw: &H, counter: Self::Counter, value: u64);
    /// Adds `counter` programmed with `armed` ([`PmuBackend::armed`]) to `image`.
    fn add_to_image(image: &mut Self::Image, counter: Self::Counter, armed: Self::Config);
    /// Programs the counters of `image` (their values already written); they do not count
    /// until [`PmuBackend::start`]. Returns the bits of those it programmed (all of them, but
    /// for one whose shared register holds another PMC's value, or an image that is not of
    /// this CPU's counters).
    fn program<H: Hardware>(&self, hw: &H, cpu: &Self::Cpu, image: &Self::Image) -> CounterMask;
    /// Programs `counter` with `armed` ([`PmuBackend::armed`]; its value already written) as
    /// [`PmuBackend::program`] programs an image of that one counter, without making the image
    /// (loading one PMC: PMCSTART, a multiplexing turn). Returns its bit, or none if it was not
    /// programmed.
    fn program_counter<H: Hardware>(
        &self,
        hw: &H,
        cpu: &Self::Cpu,
        counter: Self::Counter,
        armed: Self::Config,
    ) -> CounterMask;
    /// [`PmuBackend::program`] then [`PmuBackend::start`] of the counters it programmed, in one
    /// call (a switch-in's): returns them.
    fn program_and_start<H: Hardware>(
        &self,
        hw: &H,
        cpu: &Self::Cpu,
        image: &Self::Image,
    ) -> CounterMask;
    /// Starts `counters` (programmed) together.
    fn start<H: Hardware>(&self, hw: &H, cpu: &Self::Cpu, counters: CounterMask);
    /// Stops `counters` together.
    fn stop<H: Hardware>(&self, hw: &H, cpu: &Self::Cpu, counters: CounterMask);
    /// Whether [`PmuBackend::stop`] stops a CPU's counters and leaves them programmed, so that
    /// [`PmuBackend::start`] alone starts them again (a switch-out may then park them: see
    /// `hooks/parking.rs`). Not so where a counter runs while it is programmed (Intel's perfmon
    /// v1, whose `stop` leaves that to `unprogram`).
    fn stop_keeps_program(&self, cpu: &Self::Cpu) -> bool;
    /// [`PmuBackend::stop`] then [`PmuBackend::unprogram`] of `counters`, in one call (a
    /// switch-out's).
    fn stop_and_unprogram<H: Hardware>(&self, hw: &H, cpu: &Self::Cpu, counters: CounterMask);
    /// Clears the configuration of `counters` (stopped) in one pass, with what they leave in
    /// shared control registers, and their overflow indications (a PMI served late must not be
    /// taken for an overflow of whatever is loaded there next). Their values stay readable.
    fn unprogram<H: Hardware>(&self, hw: &H, cpu: &Self::Cpu, counters: CounterMask);
    /// The counter's value (bits above its width unspecified). Interrupt path.
    fn read<H: Hardware>(&self, hw: &H, counter: Self::Counter) -> u64;

    /// The PMI handler (interrupt path), straight through for the common case of one overflow:
    /// stops the counters where the PMU does not freeze them itself; finds which of the
    /// driver's counters overflowed and calls `overflowed` with each one's [`CounterMask`] bit
    /// number (the driver folds, reloads and samples it, and returns whether a PMC was loaded
    /// there); acknowledges only the status bits the driver owns (never another user's, such
    /// as Intel PT's); where counters may have overflowed since the status was read, reads it
    /// again and handles those too (at most [`PMI_ROUNDS`] rounds); restarts the counters.
    ///
    /// Whatever it finds, it ends by unmasking the PMI entry (which the APIC masked when it
    /// delivered the interrupt) while the driver is loaded on this CPU: an NMI that finds
    /// nothing may be the driver's PMI all the same, raised while an earlier handler ran and
    /// already handled by it; leaving the entry masked then would stop sampling on this CPU
    /// for good.
    ///
    /// Returns whether the interrupt is the driver's (whether the NMI is claimed): the status
    /// register says one of the driver's counters overflowed, or that the PMU froze itself for
    /// an overflow an earlier NMI handled; without a status register, `overflowed` found a PMC
    /// loaded on a counter that wrapped. A CPU without a PMU has no MSR read here.
    fn pmi<H: Hardware>(
        &self,
        hw: &H,
        cpu: &Self::Cpu,
        overflowed: impl FnMut(u32) -> bool,
    ) -> bool;
}

/// The rings to count in, as (OS, USR): those a configuration names, else the requested caps
/// (PMC_CAP_SYSTEM, PMC_CAP_USER), else both.
pub(crate) fn rings(os: bool, usr: bool, caps: Caps) -> (bool, bool) {
    if os || usr {
        return (os, usr);
    }
    let (os, usr) = (caps.contains(Caps::SYSTEM), caps.contains(Caps::USER));
    if os || usr { (os, usr) } else { (true, true) }
}

/// A mask of the low `n` bits (`n` up to 64).
pub(crate) const fn low_bits(n: u32) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

/// Marks the path that calls it as rare (what `core::hint::cold_path` does, which is newer than
/// the workspace's `rust-version`). The interrupt path marks its rare branches so that the
/// compiler takes its common case for the hot one: it lays it out in a straight line and inlines
/// what it calls there, as it would not in a path it estimates cold.
#[cold]
#[inline]
pub(crate) fn cold_path() {}
