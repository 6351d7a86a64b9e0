//! Mirrors of FreeBSD's `sys/pmc.h` for amd64: operation numbers, enums, flags, capabilities, the
//! PMC id packing and every `PMC_OP_*` argument struct, laid out byte for byte
//! (`freebsd-abi.md` §1–2). The structs derive zerocopy's traits, so copying them in and out of
//! user memory needs no `unsafe`; the tests assert every size and offset.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `PMC_VERSION_MAJOR`: the V10 API (`PMC_F_EV_PMU`).
pub const PMC_VERSION_MAJOR: u32 = 0x0A;
/// `PMC_VERSION` this driver reports: major 0x0A, minor 2, patch 0 (`MMmmpppp`). FreeBSD trees of
/// 2025–2026 use minors 0 to 3; minor 2 lets clients built for minors 0–2 in, and the exact
/// upstream minor is unconfirmed (UNVERIFIED), so it lives only here.
pub const PMC_VERSION: u32 = PMC_VERSION_MAJOR << 24 | 0x02 << 16;
/// The version a client should send with GETMODULEVERSION: major 0x0A, minor 0, so that it never
/// exceeds a V10 kernel's major.minor.
pub const PMC_VERSION_CLIENT: u32 = PMC_VERSION_MAJOR << 24;

/// Rows of the SOFT class (FreeBSD's `SOFT_NPMCS`): a small fixed number, allocating past it
/// fails cleanly.
pub const SOFT_ROWS: u32 = 16;
/// `PMC_CPU_ANY`: `pm_cpu` of a process-mode PMC.
pub const PMC_CPU_ANY: u32 = !0;
/// `PMC_ID_INVALID`.
pub const PMC_ID_INVALID: u32 = !0;
/// `PMC_NAME_MAX`: size of row and event name fields.
pub const PMC_NAME_MAX: usize = 64;
/// `PMC_CLASS_MAX`: classes described by GETCPUINFO.
pub const PMC_CLASS_MAX: usize = 8;
/// `PMC_CPUID_LEN`: size of the `kern.hwpmc.cpuid` string.
pub const PMC_CPUID_LEN: usize = 64;
/// `PMC_EV_DYN_COUNT`: most dynamic (SOFT) events.
pub const PMC_EV_DYN_COUNT: usize = 0x1000;
/// `PMC_CALLCHAIN_DEPTH_MAX`.
pub const PMC_CALLCHAIN_DEPTH_MAX: usize = pmclog::CALLCHAIN_DEPTH_MAX;

macro_rules! abi_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $value:expr),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        pub enum $name {
            $($(#[$vmeta])* $variant = $value),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The value with this number, if there is one.
            pub const fn from_u32(value: u32) -> Option<Self> {
                match value {
                    $($value => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// The ABI number.
            pub const fn as_u32(self) -> u32 {
                self as u32
            }
        }
    };
}

abi_enum! {
    /// `enum pmc_ops`: the first argument of the hwpmc system call.
    Op {
        /// Configure or deconfigure the owner's log.
        ConfigureLog = 0,
        /// Write out buffered log data.
        FlushLog = 1,
        /// Describe the CPU's PMC classes.
        GetCpuInfo = 2,
        /// Driver statistics.
        GetDriverStats = 3,
        /// Exchange PMC_VERSION.
        GetModuleVersion = 4,
        /// Describe the rows of one CPU.
        GetPmcInfo = 5,
        /// Enable or disable a row.
        PmcAdmin = 6,
        /// Allocate a PMC.
        PmcAllocate = 7,
        /// Attach a process PMC to a process.
        PmcAttach = 8,
        /// Detach a process PMC from a process.
        PmcDetach = 9,
        /// The RDPMC index of a self-attached process PMC (`PMC_OP_PMCX86GETMSR` in hwpmc(4)).
        PmcGetMsr = 10,
        /// Release a PMC.
        PmcRelease = 11,
        /// Read and/or write a PMC's value.
        PmcRw = 12,
        /// Set a sampling PMC's reload count (`PMC_OP_SETCOUNT` in hwpmc(4)).
        PmcSetCount = 13,
        /// Start a PMC.
        PmcStart = 14,
        /// Stop a PMC.
        PmcStop = 15,
        /// Write a USERDATA record to the owner's log.
        WriteLog = 16,
        /// Close the owner's log.
        CloseLog = 17,
        /// Names and codes of the dynamic (SOFT) events.
        GetDynEventInfo = 18,
        /// A PMC's capabilities.
        GetCaps = 19,
    }
}

abi_enum! {
    /// `enum pmc_mode`.
    Mode {
        /// System-wide sampling on one CPU (SS).
        SystemSampling = 0,
        /// System-wide counting on one CPU (SC).
        SystemCounting = 1,
        /// Process (thread-virtual) sampling (TS).
        ThreadSampling = 2,
        /// Process (thread-virtual) counting (TC).
        ThreadCounting = 3,
    }
}

impl Mode {
    /// SS or SC: bound to one CPU, counting whatever runs there.
    #[inline]
    pub const fn is_system(self) -> bool {
        matches!(self, Mode::SystemSampling | Mode::SystemCounting)
    }
    /// TS or TC: virtualised per process.
    #[inline]
    pub const fn is_virtual(self) -> bool {
        !self.is_system()
    }
    /// SS or TS: interrupts and produces samples.
    #[inline]
    pub const fn is_sampling(self) -> bool {
        matches!(self, Mode::SystemSampling | Mode::ThreadSampling)
    }
}

abi_enum! {
    /// `enum pmc_state`.
    State {
        /// The row is administratively disabled.
        Disabled = 0,
        /// The row is free.
        Free = 1,
        /// Allocated, never started.
        Allocated = 2,
        /// Stopped after running.
        Stopped = 3,
        /// Running.
        Running = 4,
        /// Being released.
        Deleted = 5,
    }
}

abi_enum! {
    /// `enum pmc_disp`: who may use a row.
    Disposition {
        /// Used by a system-mode PMC.
        Standalone = 0,
        /// Free for either kind.
        Free = 1,
        /// Used by process-mode PMCs.
        Thread = 2,
        /// Unknown.
        Unknown = 3,
    }
}

abi_enum! {
    /// `enum pmc_class`, with FreeBSD's explicit values. The gaps are retired classes.
    Class {
        /// The time-stamp counter.
        Tsc = 0x00,
        /// AMD core counters.
        K8 = 0x02,
        /// AMD instruction-based sampling.
        Ibs = 0x03,
        /// Intel fixed-function counters.
        Iaf = 0x06,
        /// Intel programmable counters.
        Iap = 0x07,
        /// Intel uncore fixed counters.
        Ucf = 0x08,
        /// Intel uncore programmable counters.
        Ucp = 0x09,
        /// PowerPC 7450.
        Ppc7450 = 0x0D,
        /// PowerPC 970.
        Ppc970 = 0x0E,
        /// Software events registered by the kernel.
        Soft = 0x0F,
        /// ARMv7.
        Armv7 = 0x10,
        /// ARMv8.
        Armv8 = 0x11,
        /// Freescale e500.
        E500 = 0x13,
        /// IBM POWER8.
        Power8 = 0x15,
        /// ARM DMC-620 clock-domain-2 counters.
        Dmc620PmuCd2 = 0x16,
        /// ARM DMC-620 counters.
        Dmc620PmuC = 0x17,
        /// ARM CMN-600.
        Cmn600Pmu = 0x18,
        /// Intel/AMD RAPL energy counters.
        Rapl = 0x19,
        /// APERF/MPERF. The value is not confirmed upstream (UNVERIFIED).
        Perf = 0x1A,
    }
}

impl Class {
    /// FreeBSD's name (`pmc_name_of_class`).
    pub const fn name(self) -> &'static str {
        match self {
            Class::Tsc => "TSC",
            Class::K8 => "K8",
            Class::Ibs => "IBS",
            Class::Iaf => "IAF",
            Class::Iap => "IAP",
            Class::Ucf => "UCF",
            Class::Ucp => "UCP",
            Class::Ppc7450 => "PPC7450",
            Class::Ppc970 => "PPC970",
            Class::Soft => "SOFT",
            Class::Armv7 => "ARMV7",
            Class::Armv8 => "ARMV8",
            Class::E500 => "E500",
            Class::Power8 => "POWER8",
            Class::Dmc620PmuCd2 => "DMC620_PMU_CD2",
            Class::Dmc620PmuC => "DMC620_PMU_C",
            Class::Cmn600Pmu => "CMN600_PMU",
            Class::Rapl => "RAPL",
            Class::Perf => "PERF",
        }
    }
}

/// `enum pmc_cputype` values this driver reports (the full list of names is
/// `pmclog::names::cpu_type_name`).
pub mod cpu_type {
    /// Every AMD CPU.
    pub const AMD_K8: u32 = 0x01;
    /// Intel Core 2.
    pub const INTEL_CORE2: u32 = 0x88;
    /// Intel Skylake (client).
    pub const INTEL_SKYLAKE: u32 = 0x98;
    /// Intel Skylake-SP.
    pub const INTEL_SKYLAKE_XEON: u32 = 0x99;
    /// A CPU without a model-specific description (and the type of a CPU with no PMU).
    pub const GENERIC: u32 = 0x400;
}

/// `enum pmc_event` values of the static blocks this driver implements.
pub mod event {
    /// The TSC's only event.
    pub const TSC_TSC: u32 = 0x1000;
    /// IAF fixed counter 0: instructions retired.
    pub const IAF_INSTR_RETIRED_ANY: u32 = 0x10000;
    /// IAF fixed counter 1: core cycles while not halted.
    pub const IAF_CPU_CLK_UNHALTED_CORE: u32 = 0x10001;
    /// IAF fixed counter 2: reference cycles while not halted.
    pub const IAF_CPU_CLK_UNHALTED_REF: u32 = 0x10002;
    /// First dynamic (SOFT) event code.
    pub const SOFT_FIRST: u32 = 0x20000;
    /// Last dynamic (SOFT) event code.
    pub const SOFT_LAST: u32 = 0x20FFF;
    /// `PMC_EVENT_FIRST`.
    pub const FIRST: u32 = TSC_TSC;
    /// `PMC_EVENT_LAST`.
    pub const LAST: u32 = SOFT_LAST;
}

bitflags::bitflags! {
    /// `PMC_CAP_*`: what a class can do, and what an allocation asks for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Caps: u32 {
        /// Can interrupt on overflow (sampling).
        const INTERRUPT = 0x1;
        /// Can count in user mode.
        const USER = 0x2;
        /// Can count in kernel mode.
        const SYSTEM = 0x4;
        /// Can count edges.
        const EDGE = 0x8;
        /// Has a threshold (counter mask).
        const THRESHOLD = 0x10;
        /// Can be read.
        const READ = 0x20;
        /// Can be written.
        const WRITE = 0x40;
        /// Can invert the threshold comparison.
        const INVERT = 0x80;
        /// Has event qualifiers.
        const QUALIFIER = 0x100;
        /// Precise sampling.
        const PRECISE = 0x200;
        /// Tagging.
        const TAGGING = 0x400;
        /// Cascading.
        const CASCADE = 0x800;
        /// One counter for the whole system.
        const SYSWIDE = 0x1000;
        /// One counter per NUMA domain.
        const DOMWIDE = 0x2000;
    }
}

impl Caps {
    /// What a SOFT-class PMC can do.
    pub const SOFT_CLASS: Caps =
        Caps::READ.union(Caps::WRITE).union(Caps::INTERRUPT).union(Caps::USER).union(Caps::SYSTEM);
    /// What an IAP-class (Intel general-purpose counter) PMC can do.
    pub const IAP_CLASS: Caps = Caps::INTERRUPT
        .union(Caps::USER)
        .union(Caps::SYSTEM)
        .union(Caps::EDGE)
        .union(Caps::THRESHOLD)
        .union(Caps::READ)
        .union(Caps::WRITE)
        .union(Caps::INVERT)
        .union(Caps::QUALIFIER)
        .union(Caps::PRECISE);
    /// What a K8-class (AMD core counter) PMC can do: FreeBSD's `AMD_PMC_CAPS` (hwpmc_amd.c),
    /// IAP's but PRECISE.
    pub const K8_CLASS: Caps = Caps::IAP_CLASS.difference(Caps::PRECISE);
    /// What an IAF-class (Intel fixed counter) PMC can do.
    pub const IAF_CLASS: Caps =
        Caps::INTERRUPT.union(Caps::USER).union(Caps::SYSTEM).union(Caps::READ).union(Caps::WRITE);
}

bitflags::bitflags! {
    /// `PMC_F_*` flags of PMCALLOCATE and PMCRW, and the driver's internal flags.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct PmcFlags: u32 {
        /// Retired (was PMC_F_FORCE); never reused.
        const UNUSED1 = 0x1;
        /// Follow children forked after attach.
        const DESCENDANTS = 0x2;
        /// Log PROCCSW records.
        const LOG_PROCCSW = 0x4;
        /// Log PROCEXIT records.
        const LOG_PROCEXIT = 0x8;
        /// PMCRW: write the value.
        const NEWVALUE = 0x10;
        /// PMCRW: read the value.
        const OLDVALUE = 0x20;
        /// Record callchains.
        const CALLCHAIN = 0x80;
        /// Capture the user stack from kernel-mode samples.
        const USERCALLCHAIN = 0x100;
        /// `pm_ev` is a PMU table index and the configuration is in `pm_md`.
        const EV_PMU = 0x200;
        /// Extension (not FreeBSD's; see [`MULTIPLEX_FLAGS`](PmcFlags::MULTIPLEX_FLAGS)): a
        /// counting PMC that may share its counter with other multiplexed PMCs, the driver
        /// rotating them at the tick, instead of EBUSY when the counters run out.
        const MULTIPLEX = 0x0100_0000;
        /// Extension: a multiplexed PMC that starts an event group, scheduled in a rotation
        /// turn where the owner has no other PMC on the same CPU (or process), so the whole
        /// group fits.
        const GROUP_LEADER = 0x0200_0000;
        /// Extension: a multiplexed PMC of the group the owner's last GROUP_LEADER or
        /// GROUP_MEMBER PMC (same mode and CPU) belongs to; counted only together with it
        /// (EBUSY if the group no longer fits the counters, EINVAL without a leader).
        const GROUP_MEMBER = 0x0400_0000;
        /// Extension (see [`HYBRID_FLAGS`](PmcFlags::HYBRID_FLAGS)): counts only on the P-cores
        /// of a hybrid CPU (perf's `cpu_core` PMU); its event is the P-cores' encoding.
        const CORE_TYPE_CORE = 0x0800_0000;
        /// Extension: counts only on the E-cores of a hybrid CPU (perf's `cpu_atom` PMU); its
        /// event is the E-cores' encoding.
        const CORE_TYPE_ATOM = 0x1000_0000;
        /// Extension (see [`THREAD_FLAGS`](PmcFlags::THREAD_FLAGS)): a process PMC that counts
        /// only the thread that attaches it (libcpc's `cpc_bind_curlwp`).
        const THREAD = 0x2000_0000;
        /// Extension: with [`THREAD`](PmcFlags::THREAD), the threads that thread creates
        /// afterwards are counted too, in the same value (`CPC_BIND_LWP_INHERIT`).
        const THREAD_INHERIT = 0x4000_0000;
        /// Internal: attached to its owner.
        const ATTACHED_TO_OWNER = 0x10000;
        /// Internal: needs a log file.
        const NEEDS_LOGFILE = 0x20000;
        /// Internal: attach done.
        const ATTACH_DONE = 0x40000;
    }
}

impl PmcFlags {
    /// The flags PMCALLOCATE accepts; any other bit is EINVAL.
    pub const ALLOCATE_ACCEPTED: PmcFlags = PmcFlags::DESCENDANTS
        .union(PmcFlags::LOG_PROCCSW)
        .union(PmcFlags::LOG_PROCEXIT)
        .union(PmcFlags::CALLCHAIN)
        .union(PmcFlags::USERCALLCHAIN)
        .union(PmcFlags::EV_PMU);

    /// The multiplexing extension's PMCALLOCATE flags, accepted besides FreeBSD's. Bits far
    /// above FreeBSD's (whose forks number their own group flags 0x40, 0x400 and 0x800), so a
    /// FreeBSD binary never sets them by accident; without them, allocation behaves as
    /// FreeBSD's (EBUSY when the rows run out).
    pub const MULTIPLEX_FLAGS: PmcFlags =
        PmcFlags::MULTIPLEX.union(PmcFlags::GROUP_LEADER).union(PmcFlags::GROUP_MEMBER);
}

impl PmcFlags {
    /// The hybrid extension's PMCALLOCATE flags (one at most): the core type a hardware PMC
    /// counts on. A process PMC with one is loaded only on CPUs of that core type, where its
    /// encoding means what it names; without one a process PMC counts on every CPU, so its event
    /// must be one both core types encode alike (the architectural events). EINVAL when no CPU
    /// has the core type (or, for a system PMC, its CPU has another).
    pub const HYBRID_FLAGS: PmcFlags = PmcFlags::CORE_TYPE_CORE.union(PmcFlags::CORE_TYPE_ATOM);

    /// The thread-scope extension's PMCALLOCATE flags. FreeBSD's process scope counts every
    /// thread of a target; a process PMC with [`THREAD`](PmcFlags::THREAD) counts one thread:
    /// PMCATTACH with `pm_pid` 0 (or the caller's pid), or the attach PMCSTART makes, attaches
    /// it to the **calling thread** (any other pid is EINVAL), and only that thread's time on a
    /// CPU is counted. With [`THREAD_INHERIT`](PmcFlags::THREAD_INHERIT) too, every thread a
    /// counted thread creates from then on is counted in the same value (illumos gives each new
    /// LWP its own copy of the set, which one PMC id cannot express). A counted thread's exit
    /// stops counting it; when the last one exits the PMC is detached, its count kept for its
    /// owner (no SIGIO: the owner is the thread's own process). Thread PMCs of one process
    /// share its rows: two threads each with their own PMCs need as many rows as they have
    /// PMCs between them. EINVAL for THREAD_INHERIT without THREAD, and for THREAD on a system
    /// PMC, with PMC_F_DESCENDANTS or with the multiplexing flags (not yet: a multiplexed
    /// PMC's turns are loaded for the whole process); EOPNOTSUPP where the kernel cannot tell
    /// the calling thread.
    pub const THREAD_FLAGS: PmcFlags = PmcFlags::THREAD.union(PmcFlags::THREAD_INHERIT);
}

/// Extension op (not in `enum pmc_ops`, far above its numbers): reads a PMC's count with the
/// time it was enabled and the time it was counting ([`PmcOpPmcReadTimes`]).
pub const PMC_OP_PMCREADTIMES: u32 = 0x100;

/// A PMC id: `cpu:12 | mode:4 | class:8 | row:8` (FreeBSD 14 and later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PmcId {
    /// The CPU of a system-mode PMC; `None` (0xFFF) for process mode.
    pub cpu: Option<u16>,
    /// The mode.
    pub mode: Mode,
    /// The class.
    pub class: Class,
    /// The row index within the class.
    pub row: u8,
}

/// The 12-bit CPU field value meaning "any CPU".
const ID_CPU_ANY: u32 = 0xFFF;

impl PmcId {
    /// The packed 32-bit id.
    pub const fn to_u32(self) -> u32 {
        let cpu = match self.cpu {
            Some(cpu) => cpu as u32 & 0xFFF,
            None => ID_CPU_ANY,
        };
        cpu << 20
            | (self.mode.as_u32() & 0xF) << 16
            | (self.class.as_u32() & 0xFF) << 8
            | self.row as u32
    }

    /// Unpacks an id; `None` when its mode or class is not a valid value.
    pub const fn from_u32(id: u32) -> Option<PmcId> {
        let Some(mode) = Mode::from_u32(id >> 16 & 0xF) else { return None };
        let Some(class) = Class::from_u32(id >> 8 & 0xFF) else { return None };
        let cpu = id >> 20;
        Some(PmcId {
            cpu: if cpu == ID_CPU_ANY { None } else { Some(cpu as u16) },
            mode,
            class,
            row: id as u8,
        })
    }
}

macro_rules! abi_struct {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident : $ty:ty),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
        #[repr(C)]
        #[allow(missing_docs)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty),+
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_struct(stringify!($name))
                    $(.field(stringify!($field), &DebugField(&self.$field)))+
                    .finish()
            }
        }
    };
}

/// Debug-prints arrays of bytes as strings, everything else as itself.
struct DebugField<'a, T>(&'a T);

impl<T: DebugAbi> core::fmt::Debug for DebugField<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.fmt_abi(f)
    }
}

trait DebugAbi {
    fn fmt_abi(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result;
}

macro_rules! debug_abi_plain {
    ($($t:ty),*) => {$(
        impl DebugAbi for $t {
            fn fmt_abi(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(self, f)
            }
        }
    )*};
}
debug_abi_plain!(u16, u32, i32, u64, [u32; 1], PmcMdOpPmcAllocate, [PmcClassInfo; PMC_CLASS_MAX]);

impl<const N: usize> DebugAbi for [u8; N] {
    fn fmt_abi(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let end = self.iter().position(|&b| b == 0).unwrap_or(N);
        core::fmt::Debug::fmt(&core::str::from_utf8(&self[..end]).unwrap_or("<not UTF-8>"), f)
    }
}

impl DebugAbi for [PmcDynEventDescr; PMC_EV_DYN_COUNT] {
    fn fmt_abi(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "[{} entries]", self.len())
    }
}

/// `union pmc_md_op_pmcallocate` on amd64: 32 bytes, read through typed accessors for each
/// member (`pm_amd`, `pm_ibs`, `pm_iap`, `pm_ucf`, `pm_ucp`).
#[derive(Clone, Copy, PartialEq, Eq, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct PmcMdOpPmcAllocate {
    words: [u64; 4],
}

impl core::fmt::Debug for PmcMdOpPmcAllocate {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PmcMdOpPmcAllocate({:#x?})", self.words)
    }
}

impl PmcMdOpPmcAllocate {
    fn u32_at(&self, offset: usize) -> u32 {
        let b = self.words.as_bytes();
        u32::from_ne_bytes([b[offset], b[offset + 1], b[offset + 2], b[offset + 3]])
    }
    fn set_u32_at(&mut self, offset: usize, value: u32) {
        self.words.as_mut_bytes()[offset..offset + 4].copy_from_slice(&value.to_ne_bytes());
    }

    /// `pm_iap.pm_iap_config`: the IA32_PERFEVTSELx image (event, umask, USR, OS, EDGE, INT, ANY,
    /// EN, INV, CMASK).
    pub fn iap_config(&self) -> u32 {
        self.u32_at(0)
    }
    /// Sets `pm_iap.pm_iap_config`.
    pub fn set_iap_config(&mut self, config: u32) {
        self.set_u32_at(0, config);
    }
    /// The 64-bit IA32_PERFEVTSELx image: `pm_iap.pm_iap_config` as bits 31:0 and, as this
    /// driver's extension, the 4 bytes of padding after it as bits 63:32 (UMASK2, bits 47:40,
    /// on CPUs that have it). FreeBSD's libpmc zeroes the request, so its requests have no high
    /// bits; bits the CPU leaves undefined are refused (EINVAL), like any reserved bit.
    pub fn iap_config64(&self) -> u64 {
        self.words[0]
    }
    /// Sets the 64-bit IA32_PERFEVTSELx image (see [`PmcMdOpPmcAllocate::iap_config64`]).
    pub fn set_iap_config64(&mut self, config: u64) {
        self.words[0] = config;
    }
    /// `pm_iap.pm_iap_rsp`: the offcore response MSR value.
    pub fn iap_rsp(&self) -> u64 {
        self.words[1]
    }
    /// Sets `pm_iap.pm_iap_rsp`.
    pub fn set_iap_rsp(&mut self, rsp: u64) {
        self.words[1] = rsp;
    }
    /// This driver's extension for hybrid CPUs: the 64-bit IA32_PERFEVTSELx image the E-cores
    /// load (bytes 16 to 23 of the union, after the 16 bytes of `pm_iap`), when the event both
    /// core types have is encoded differently there; `pm_iap_config` (with its padding) is then
    /// the P-cores' encoding. 0: the same encoding on every core type (FreeBSD's libpmc zeroes
    /// the request, so its requests always mean that).
    pub fn iap_config_atom(&self) -> u64 {
        self.words[2]
    }
    /// Sets the E-cores' encoding (see [`PmcMdOpPmcAllocate::iap_config_atom`]).
    pub fn set_iap_config_atom(&mut self, config: u64) {
        self.words[2] = config;
    }
    /// `pm_amd.pm_amd_config`: the PERF_CTL image.
    pub fn amd_config(&self) -> u64 {
        self.words[0]
    }
    /// Sets `pm_amd.pm_amd_config`.
    pub fn set_amd_config(&mut self, config: u64) {
        self.words[0] = config;
    }
    /// `pm_amd.pm_amd_sub_class`: 0 core, 1 L3 cache, 2 data fabric.
    pub fn amd_sub_class(&self) -> u32 {
        self.u32_at(8)
    }
    /// Sets `pm_amd.pm_amd_sub_class`.
    pub fn set_amd_sub_class(&mut self, sub_class: u32) {
        self.set_u32_at(8, sub_class);
    }
    /// `pm_ucf.pm_ucf_flags`.
    pub fn ucf_flags(&self) -> u16 {
        let b = self.words.as_bytes();
        u16::from_ne_bytes([b[0], b[1]])
    }
    /// `pm_ucp.pm_ucp_config`.
    pub fn ucp_config(&self) -> u32 {
        self.u32_at(0)
    }
    /// `pm_ibs`: `(ibs_flag, ibs_type, ibs_ctl, ibs_ctl2)`.
    pub fn ibs(&self) -> (u32, u32, u64, u64) {
        (self.u32_at(0), self.u32_at(4), self.words[1], self.words[2])
    }
}

abi_struct! {
    /// `struct pmc_op_pmcallocate`, 72 bytes.
    PmcOpPmcAllocate {
        pm_caps: u32,
        pm_cpu: u32,
        pm_class: u32,
        pm_ev: u32,
        pm_flags: u32,
        pm_mode: u32,
        pm_pmcid: u32,
        pm_pad: u32,
        pm_count: u64,
        pm_md: PmcMdOpPmcAllocate,
    }
}

abi_struct! {
    /// `struct pmc_op_pmcadmin`, 16 bytes.
    PmcOpPmcAdmin { pm_cpu: i32, pm_flags: u32, pm_pmc: i32, pm_state: u32 }
}

abi_struct! {
    /// `struct pmc_op_pmcattach` (PMCATTACH and PMCDETACH), 8 bytes.
    PmcOpPmcAttach { pm_pmc: u32, pm_pid: i32 }
}

abi_struct! {
    /// `struct pmc_op_pmcsetcount`, 16 bytes.
    PmcOpPmcSetCount { pm_count: u64, pm_pmcid: u32, pm_pad: u32 }
}

abi_struct! {
    /// `struct pmc_op_pmcrw`, 16 bytes. The kernel copies back only `pm_value`.
    PmcOpPmcRw { pm_flags: u32, pm_pmcid: u32, pm_value: u64 }
}

abi_struct! {
    /// The argument of [`PMC_OP_PMCREADTIMES`], 32 bytes: the caller fills `pm_pmcid`; the
    /// driver writes the count (as PMCRW reads it) and, for a multiplexed PMC, the time it was
    /// enabled and the time it was on a counter, in reference cycles (TSC ticks). Both times are
    /// 0 for a PMC that is not multiplexed (it counts whenever it is enabled).
    PmcOpPmcReadTimes { pm_pmcid: u32, pm_pad: u32, pm_value: u64, pm_enabled: u64, pm_running: u64 }
}

abi_struct! {
    /// `struct pmc_info`: one row of GETPMCINFO, 104 bytes.
    PmcInfo {
        pm_name: [u8; PMC_NAME_MAX],
        pm_class: u32,
        pm_enabled: i32,
        pm_rowdisp: u32,
        pm_ownerpid: i32,
        pm_mode: u32,
        pm_event: u32,
        pm_flags: u32,
        pm_pad: u32,
        pm_reloadcount: u64,
    }
}

abi_struct! {
    /// The fixed head of `struct pmc_op_getpmcinfo`; `npmc` [`PmcInfo`] follow at offset 8.
    PmcOpGetPmcInfo { pm_cpu: i32, pm_pad: u32 }
}

abi_struct! {
    /// `struct pmc_classinfo`, 16 bytes.
    PmcClassInfo { pm_class: u32, pm_caps: u32, pm_width: u32, pm_num: u32 }
}

abi_struct! {
    /// `struct pmc_op_getcpuinfo`, 144 bytes.
    PmcOpGetCpuInfo {
        pm_cputype: u32,
        pm_ncpu: u32,
        pm_npmc: u32,
        pm_nclass: u32,
        pm_classes: [PmcClassInfo; PMC_CLASS_MAX],
    }
}

abi_struct! {
    /// `struct pmc_op_configurelog`, 8 bytes.
    PmcOpConfigureLog { pm_flags: i32, pm_logfd: i32 }
}

abi_struct! {
    /// `struct pmc_op_getdriverstats`, 32 bytes (the kernel's 64-bit counters truncated).
    PmcOpGetDriverStats {
        pm_intr_ignored: u32,
        pm_intr_processed: u32,
        pm_intr_bufferfull: u32,
        pm_syscalls: u32,
        pm_syscall_errors: u32,
        pm_buffer_requests: u32,
        pm_buffer_requests_failed: u32,
        pm_log_sweeps: u32,
    }
}

abi_struct! {
    /// `struct pmc_op_simple` (PMCRELEASE, PMCSTART, PMCSTOP), 4 bytes.
    PmcOpSimple { pm_pmcid: u32 }
}

abi_struct! {
    /// `struct pmc_op_writelog`, 4 bytes.
    PmcOpWriteLog { pm_userdata: u32 }
}

abi_struct! {
    /// `struct pmc_op_getmsr`, 8 bytes.
    PmcOpGetMsr { pm_msr: u32, pm_pmcid: u32 }
}

abi_struct! {
    /// `struct pmc_dyn_event_descr`, 68 bytes.
    PmcDynEventDescr { pm_ev_name: [u8; PMC_NAME_MAX], pm_ev_code: u32 }
}

abi_struct! {
    /// `struct pmc_op_getdyneventinfo`, 278 536 bytes.
    PmcOpGetDynEventInfo {
        pm_class: u32,
        pm_nevent: u32,
        pm_events: [PmcDynEventDescr; PMC_EV_DYN_COUNT],
    }
}

abi_struct! {
    /// `struct pmc_op_caps`, 8 bytes.
    PmcOpCaps { pm_pmcid: u32, pm_caps: u32 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    #[test]
    fn op_numbers_match_freebsd() {
        assert_eq!(Op::ALL.len(), 20);
        for (i, op) in Op::ALL.iter().enumerate() {
            assert_eq!(op.as_u32(), i as u32);
            assert_eq!(Op::from_u32(i as u32), Some(*op));
        }
        assert_eq!(Op::PmcGetMsr.as_u32(), 10);
        assert_eq!(Op::GetCaps.as_u32(), 19);
        assert_eq!(Op::from_u32(20), None);
    }

    #[test]
    fn enums_have_freebsd_values() {
        assert_eq!(Mode::ThreadCounting.as_u32(), 3);
        assert!(Mode::SystemSampling.is_system() && Mode::SystemSampling.is_sampling());
        assert!(Mode::ThreadCounting.is_virtual() && !Mode::ThreadCounting.is_sampling());
        assert_eq!(State::Deleted.as_u32(), 5);
        assert_eq!(Disposition::Thread.as_u32(), 2);
        assert_eq!(Class::Soft.as_u32(), 0x0F);
        assert_eq!(Class::Rapl.as_u32(), 0x19);
        assert_eq!(Class::from_u32(1), None, "K7 is retired");
        assert_eq!(Caps::DOMWIDE.bits(), 0x2000);
        assert_eq!(PmcFlags::ALLOCATE_ACCEPTED.bits(), 0x2 | 0x4 | 0x8 | 0x80 | 0x100 | 0x200);
    }

    #[test]
    fn version_is_major_ten() {
        assert_eq!(PMC_VERSION >> 24, 0x0A);
        assert_eq!(PMC_VERSION_CLIENT, 0x0A00_0000);
    }

    #[test]
    fn pmc_id_packing_matches_the_reference_example() {
        let id = PmcId { cpu: None, mode: Mode::ThreadCounting, class: Class::Iap, row: 3 };
        assert_eq!(id.to_u32(), 0xFFF3_0703);
        assert_eq!(PmcId::from_u32(0xFFF3_0703), Some(id));
        let sys = PmcId { cpu: Some(5), mode: Mode::SystemSampling, class: Class::Iaf, row: 1 };
        assert_eq!(sys.to_u32(), 0x0050_0601);
        assert_eq!(PmcId::from_u32(sys.to_u32()), Some(sys));
        assert_eq!(PmcId::from_u32(0xFFF4_0703), None, "mode 4 does not exist");
        assert_eq!(PmcId::from_u32(0xFFF3_0103), None, "class 1 is retired");
    }

    macro_rules! assert_layout {
        ($ty:ty, size $size:expr, $($field:ident @ $off:expr),* $(,)?) => {{
            assert_eq!(size_of::<$ty>(), $size, "sizeof {}", stringify!($ty));
            $(assert_eq!(offset_of!($ty, $field), $off, "{}.{}", stringify!($ty), stringify!($field));)*
        }};
    }

    #[test]
    fn op_structs_have_amd64_layout() {
        assert_layout!(PmcOpPmcAllocate, size 72,
            pm_caps @ 0, pm_cpu @ 4, pm_class @ 8, pm_ev @ 12, pm_flags @ 16, pm_mode @ 20,
            pm_pmcid @ 24, pm_count @ 32, pm_md @ 40);
        assert_eq!(align_of::<PmcOpPmcAllocate>(), 8);
        assert_layout!(PmcMdOpPmcAllocate, size 32,);
        assert_layout!(PmcOpPmcAdmin, size 16, pm_cpu @ 0, pm_flags @ 4, pm_pmc @ 8, pm_state @ 12);
        assert_layout!(PmcOpPmcAttach, size 8, pm_pmc @ 0, pm_pid @ 4);
        assert_layout!(PmcOpPmcSetCount, size 16, pm_count @ 0, pm_pmcid @ 8);
        assert_layout!(PmcOpPmcRw, size 16, pm_flags @ 0, pm_pmcid @ 4, pm_value @ 8);
        assert_layout!(PmcOpPmcReadTimes, size 32,
            pm_pmcid @ 0, pm_value @ 8, pm_enabled @ 16, pm_running @ 24);
        assert_layout!(PmcInfo, size 104,
            pm_name @ 0, pm_class @ 64, pm_enabled @ 68, pm_rowdisp @ 72, pm_ownerpid @ 76,
            pm_mode @ 80, pm_event @ 84, pm_flags @ 88, pm_reloadcount @ 96);
        assert_layout!(PmcOpGetPmcInfo, size 8, pm_cpu @ 0);
        assert_layout!(PmcClassInfo, size 16, pm_class @ 0, pm_caps @ 4, pm_width @ 8, pm_num @ 12);
        assert_layout!(PmcOpGetCpuInfo, size 144,
            pm_cputype @ 0, pm_ncpu @ 4, pm_npmc @ 8, pm_nclass @ 12, pm_classes @ 16);
        assert_layout!(PmcOpConfigureLog, size 8, pm_flags @ 0, pm_logfd @ 4);
        assert_layout!(PmcOpGetDriverStats, size 32,
            pm_intr_ignored @ 0, pm_intr_processed @ 4, pm_intr_bufferfull @ 8, pm_syscalls @ 12,
            pm_syscall_errors @ 16, pm_buffer_requests @ 20, pm_buffer_requests_failed @ 24,
            pm_log_sweeps @ 28);
        assert_layout!(PmcOpSimple, size 4, pm_pmcid @ 0);
        assert_layout!(PmcOpWriteLog, size 4, pm_userdata @ 0);
        assert_layout!(PmcOpGetMsr, size 8, pm_msr @ 0, pm_pmcid @ 4);
        assert_layout!(PmcDynEventDescr, size 68, pm_ev_name @ 0, pm_ev_code @ 64);
        assert_layout!(PmcOpGetDynEventInfo, size 278_536, pm_class @ 0, pm_nevent @ 4, pm_events @ 8);
        assert_layout!(PmcOpCaps, size 8, pm_pmcid @ 0, pm_caps @ 4);
    }

    #[test]
    fn md_union_members_sit_where_freebsd_puts_them() {
        let mut md = PmcMdOpPmcAllocate::default();
        md.set_iap_config(0x0043_00C0);
        md.set_iap_rsp(0x1122_3344_5566_7788);
        assert_eq!(&md.as_bytes()[0..4], &0x0043_00C0u32.to_le_bytes());
        assert_eq!(&md.as_bytes()[8..16], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(md.iap_config(), 0x0043_00C0);
        assert_eq!(md.ucp_config(), 0x0043_00C0);
        assert_eq!(md.ucf_flags(), 0x00C0);
        assert_eq!(md.amd_config(), 0x0043_00C0);
        assert_eq!(md.amd_sub_class(), 0x5566_7788);
        assert_eq!(md.ibs(), (0x0043_00C0, 0, 0x1122_3344_5566_7788, 0));
    }

    #[test]
    fn the_e_core_encoding_follows_pm_iap_inside_the_union() {
        let mut md = PmcMdOpPmcAllocate::default();
        md.set_iap_config64(0x0000_0100_0043_00C0);
        md.set_iap_rsp(0x77);
        md.set_iap_config_atom(0x0043_01C4);
        assert_eq!(&md.as_bytes()[16..24], &0x0043_01C4u64.to_le_bytes());
        assert_eq!((md.iap_config64(), md.iap_rsp()), (0x0000_0100_0043_00C0, 0x77), "untouched");
        assert_eq!(PmcMdOpPmcAllocate::default().iap_config_atom(), 0, "zeroed: one encoding");
    }

    #[test]
    fn structs_convert_from_and_to_bytes() {
        let mut bytes = [0u8; 16];
        bytes[0..4].copy_from_slice(&0x30u32.to_le_bytes());
        bytes[4..8].copy_from_slice(&0xFFF3_0703u32.to_le_bytes());
        bytes[8..16].copy_from_slice(&42u64.to_le_bytes());
        let rw = PmcOpPmcRw::read_from_bytes(&bytes).expect("16 bytes");
        assert_eq!((rw.pm_flags, rw.pm_pmcid, rw.pm_value), (0x30, 0xFFF3_0703, 42));
        assert_eq!(rw.as_bytes(), &bytes);
        assert!(PmcOpPmcRw::read_from_bytes(&bytes[..15]).is_err());
    }
}
