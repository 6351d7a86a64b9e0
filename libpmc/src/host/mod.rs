//! Hosts: where the hwpmc system call goes.
//!
//! Every host takes the same call, `syscall(op, arg)`, with the argument struct's bytes laid out as
//! FreeBSD's `sys/pmc.h` on amd64, and answers with FreeBSD's semantics and errno. The rest of
//! libpmc (the Rust API, the C ABI) marshals structs and never knows which host it talks to.
//!
//! * `freebsd` — the real system call of the `hwpmc` kernel module (FreeBSD only).
//! * `linux` — the `hwpmc` driver embedded in this process, with `perf_event_open(2)` counting and
//!   sampling for it: this process, the children it launches and other processes perf lets it
//!   measure.
//! * `sim` — the `hwpmc` driver itself, embedded, on the simulated machine of `hwpmc-sim`: exact
//!   numbers for built-in simulated programs. Built with the cargo feature `sim` (on by default).
//!
//! The host is chosen once per process: by [`select`], else by the `PMC_HOST` setting of
//! [`crate::config`] (`freebsd|linux|sim`), else automatically (FreeBSD's module if present,
//! else Linux).

use std::ffi::OsString;

use hwpmc::abi::Op;

use crate::config::{self, Config};
use crate::error::{Error, Result};

#[cfg(unix)]
pub(crate) mod current_pid;
#[cfg(target_os = "freebsd")]
mod freebsd;
#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(unix)]
pub(crate) mod per_process;
#[cfg(feature = "sim")]
pub mod sim;
#[cfg(unix)]
mod unix_process;

/// Where the Linux host's logs say the kernel's function symbols are: the path of the kernel's
/// MAP_IN record (process -1). A text symbol table (`address type name` lines), not an ELF file.
pub const KERNEL_SYMBOLS: &str = "/proc/kallsyms";

/// The Linux host's clock events. They count nanoseconds, and a sampling PMC of one samples
/// every `rate` nanoseconds (FreeBSD's clock events count ticks of the kernel's clock instead).
pub const CLOCK_EVENTS: [&str; 2] = ["cpu-clock", "task-clock"];

/// The sampling period of the Linux clock events when none is given: 1 ms (1 kHz).
pub const CLOCK_DEFAULT_PERIOD_NS: u64 = 1_000_000;

/// The shortest sampling period perf gives the clock events: 10 µs (100 kHz); a shorter one is
/// refused rather than silently lengthened.
pub const CLOCK_MIN_PERIOD_NS: u64 = 10_000;

/// Whether the software event the host knows as `host_name` is one of the Linux clock events.
pub fn is_clock_event(host_name: &str) -> bool {
    CLOCK_EVENTS.contains(&host_name)
}

/// How the Linux host walks the user stack of a sample for its callchain.
///
/// Chosen per process, not per PMC: a PMC's flags are FreeBSD's `PMC_F_*` word, shared with
/// FreeBSD's kernel, and how stacks are walked is a matter of the host (FreeBSD's kernel walks
/// frame pointers and the FreeBSD host ignores this setting). It is read when a PMC starts:
/// [`set_call_graph`] (pmcstat's `--call-graph`), else the `PMC_CALL_GRAPH=dwarf|fp` setting of
/// [`crate::config`] (the environment variable of C programs), else [`CallGraph::Dwarf`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallGraph {
    /// Each sample carries the user registers and a copy of the top of the user stack
    /// (8 KiB, as `perf record --call-graph dwarf`), unwound with the CFI (`.eh_frame`) of the
    /// images mapped at the sampled addresses; code in no image with CFI (JIT code) keeps the
    /// frame-pointer chain. The default: it gives whole stacks for code built without frame
    /// pointers (distribution binaries, Rust release builds, `-O2` C), whose frame-pointer
    /// chains are junk or end early.
    Dwarf,
    /// perf's frame-pointer walk alone: no stack copies (less sampling overhead), right only
    /// for code that keeps frame pointers.
    FramePointers,
}

impl CallGraph {
    /// The name `PMC_CALL_GRAPH` and pmcstat's `--call-graph` use (perf's spelling).
    pub fn name(self) -> &'static str {
        match self {
            CallGraph::Dwarf => "dwarf",
            CallGraph::FramePointers => "fp",
        }
    }

    /// The method named `name` (`dwarf` or `fp`).
    pub fn from_name(name: &str) -> Result<CallGraph> {
        Self::parse(name, "call graph")
    }

    fn parse(name: &str, what: &'static str) -> Result<CallGraph> {
        match name {
            "dwarf" => Ok(CallGraph::Dwarf),
            "fp" => Ok(CallGraph::FramePointers),
            other => Err(Error::with_detail(
                what,
                libc::EINVAL,
                format!("unknown call-graph method {other:?}: use dwarf or fp"),
            )),
        }
    }
}

/// The call-graph method set by [`set_call_graph`]: 0 none, 1 dwarf, 2 fp.
static CALL_GRAPH: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Chooses how the Linux host walks user stacks for the PMCs started from now on (overrides
/// `PMC_CALL_GRAPH`).
pub fn set_call_graph(method: CallGraph) {
    let code = match method {
        CallGraph::Dwarf => 1,
        CallGraph::FramePointers => 2,
    };
    CALL_GRAPH.store(code, std::sync::atomic::Ordering::Relaxed);
}

/// How the Linux host walks user stacks: [`set_call_graph`]'s choice, else the
/// `PMC_CALL_GRAPH` setting's, else [`CallGraph::Dwarf`]. An unknown `PMC_CALL_GRAPH` is EINVAL.
pub fn call_graph() -> Result<CallGraph> {
    match CALL_GRAPH.load(std::sync::atomic::Ordering::Relaxed) {
        1 => Ok(CallGraph::Dwarf),
        2 => Ok(CallGraph::FramePointers),
        _ => config::with(|config| match config.call_graph.as_deref() {
            None | Some("") => Ok(CallGraph::Dwarf),
            Some(name) => CallGraph::parse(name, config::PMC_CALL_GRAPH_VAR),
        }),
    }
}

/// Which host serves this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostKind {
    /// FreeBSD's hwpmc(4) kernel module.
    FreeBsd,
    /// The embedded driver counting with Linux `perf_event_open(2)`.
    Linux,
    /// The embedded driver on the simulated machine.
    Sim,
}

impl HostKind {
    /// The name `PMC_HOST` uses.
    pub fn name(self) -> &'static str {
        match self {
            HostKind::FreeBsd => "freebsd",
            HostKind::Linux => "linux",
            HostKind::Sim => "sim",
        }
    }

    /// The host `config` names (its `PMC_HOST` setting), or the automatic choice when it names
    /// none.
    pub fn from_config(config: &Config) -> Result<HostKind> {
        match config.host.as_deref() {
            None | Some("") => Ok(Self::automatic()),
            Some("freebsd") => Ok(HostKind::FreeBsd),
            Some("linux") => Ok(HostKind::Linux),
            Some("sim") => Ok(HostKind::Sim),
            Some(other) => Err(Error::with_detail(
                "PMC_HOST",
                libc::EINVAL,
                format!("unknown host {other:?}: use freebsd, linux or sim"),
            )),
        }
    }

    fn automatic() -> HostKind {
        if cfg!(target_os = "freebsd") { HostKind::FreeBsd } else { HostKind::Linux }
    }
}

/// A process a host launched for measuring: created, held before it runs its program until
/// [`Host::resume`].
pub type ChildPid = i32;

/// One host.
pub trait Host {
    /// Which host this is.
    fn kind(&self) -> HostKind;

    /// The hwpmc system call: operation `op` with its argument struct's bytes, read and written in
    /// place. Errors carry FreeBSD's errno in this system's numbering.
    fn syscall(&self, op: Op, arg: &mut [u8]) -> Result<()>;

    /// An extension operation of this project's driver (not FreeBSD's: see
    /// [`hwpmc::abi::PMC_OP_PMCREADTIMES`]), number `op`, with its argument's bytes. ENOSYS on a
    /// host without the extensions.
    fn extension_call(&self, op: u32, arg: &mut [u8]) -> Result<()> {
        let _ = (op, arg);
        Err(Error::with_detail("extension op", libc::ENOSYS, "not offered by this host"))
    }

    /// Why the hardware classes are missing on this host, if they are (for event errors).
    fn missing_hardware_reason(&self) -> Option<String> {
        None
    }

    /// CPUID leaf 0xA's EAX and EBX as the CPU the PMCs count on reports them (which
    /// architectural events it has), if it has an architectural PMU. The Linux and FreeBSD hosts
    /// count on this very CPU.
    fn arch_perfmon_leaf(&self) -> Option<(u32, u32)> {
        native_arch_perfmon_leaf()
    }

    /// Whether the CPUs PMCs count on have core types of their own PMUs (a hybrid CPU: P-cores
    /// and E-cores). The Linux and FreeBSD hosts count on this machine: CPUID.07H:EDX\[15\]
    /// with a leaf 0x1A core type.
    fn is_hybrid(&self) -> bool {
        crate::events::model::current_core_type().is_some()
    }

    /// This CPU's id in FreeBSD's `pmc_cpuid` format (`"GenuineIntel-6-55-4"`,
    /// `"AuthenticAMD-25-11-1"`; the stepping may be left out), which picks the event tables.
    fn intel_model(&self) -> Option<String> {
        None
    }

    /// Launches `argv` (a command on Linux and FreeBSD; a built-in program's name on the
    /// simulator), held before it runs so PMCs can be attached first.
    fn spawn(&self, argv: &[OsString]) -> Result<ChildPid>;

    /// [`Host::spawn`] executing `file` (found as `execvp` finds it) with the arguments `argv`,
    /// whose first is the name the program gets for itself. By default `file` stands in for
    /// `argv[0]` (the simulator's programs are known by the name `file` ends with).
    fn spawn_file(&self, file: &std::ffi::OsStr, argv: &[OsString]) -> Result<ChildPid> {
        let mut named = vec![file.to_os_string()];
        named.extend(argv.iter().skip(1).cloned());
        self.spawn(&named)
    }

    /// Lets a child from [`Host::spawn`] run its program.
    fn resume(&self, pid: ChildPid) -> Result<()>;

    /// Waits for a child to end; returns its exit status as a shell reports it (128 + signal
    /// for a killed child).
    fn wait(&self, pid: ChildPid) -> Result<i32>;
}

/// Runs `f` with this process's host (made on first use).
pub fn with_host<R>(f: impl FnOnce(&dyn Host) -> Result<R>) -> Result<R> {
    match selected()? {
        #[cfg(feature = "sim")]
        HostKind::Sim => sim::with(|host| f(host)),
        #[cfg(not(feature = "sim"))]
        HostKind::Sim => Err(Error::with_detail(
            "host",
            libc::ENOSYS,
            "the sim host is not built into this libpmc (its cargo feature `sim` is off)",
        )),
        #[cfg(target_os = "linux")]
        HostKind::Linux => f(linux::get()?),
        #[cfg(target_os = "freebsd")]
        HostKind::FreeBsd => f(freebsd::get()?),
        #[allow(unreachable_patterns)]
        other => Err(Error::with_detail(
            "host",
            libc::ENOSYS,
            format!("the {} host does not exist on this system", other.name()),
        )),
    }
}

static KIND: std::sync::OnceLock<Result<HostKind>> = std::sync::OnceLock::new();

/// The host this process uses: the one [`select`] chose, else the `PMC_HOST` setting's (see
/// [`crate::config`]), else the automatic choice.
pub fn selected() -> Result<HostKind> {
    KIND.get_or_init(|| config::with(HostKind::from_config)).clone()
}

/// Chooses this process's host before its first use (as `PMC_HOST` would); EBUSY if another
/// host is already in use.
pub fn select(kind: HostKind) -> Result<()> {
    let chosen = KIND.get_or_init(|| Ok(kind)).clone()?;
    if chosen == kind {
        Ok(())
    } else {
        Err(Error::with_detail(
            "select host",
            libc::EBUSY,
            format!("this process already uses the {} host", chosen.name()),
        ))
    }
}

/// What a host whose kernel has no thread scope (FreeBSD's hwpmc) says to a PMCALLOCATE
/// request `arg` with PMC_F_THREAD or PMC_F_THREAD_INHERIT: EOPNOTSUPP with the reason (the
/// kernel would answer a bare EINVAL). Other requests pass.
#[cfg_attr(not(target_os = "freebsd"), allow(dead_code))]
pub(crate) fn refuse_thread_scope(op: Op, arg: &[u8]) -> Result<()> {
    use zerocopy::FromBytes;
    let Ok((request, _)) = hwpmc::abi::PmcOpPmcAllocate::read_from_prefix(arg) else {
        return Ok(());
    };
    let flags = hwpmc::abi::PmcFlags::from_bits_retain(request.pm_flags);
    if op != Op::PmcAllocate || !flags.intersects(hwpmc::abi::PmcFlags::THREAD_FLAGS) {
        return Ok(());
    }
    Err(Error::with_detail(
        op_name(op),
        libc::EOPNOTSUPP,
        "FreeBSD's hwpmc counts processes, not threads: PMC_F_THREAD needs the Linux or \
         simulator host",
    ))
}

/// FreeBSD's name of operation `op` (`PMC_OP_` without the prefix), for messages.
pub fn op_name(op: Op) -> &'static str {
    match op {
        Op::ConfigureLog => "CONFIGURELOG",
        Op::FlushLog => "FLUSHLOG",
        Op::GetCpuInfo => "GETCPUINFO",
        Op::GetDriverStats => "GETDRIVERSTATS",
        Op::GetModuleVersion => "GETMODULEVERSION",
        Op::GetPmcInfo => "GETPMCINFO",
        Op::PmcAdmin => "PMCADMIN",
        Op::PmcAllocate => "PMCALLOCATE",
        Op::PmcAttach => "PMCATTACH",
        Op::PmcDetach => "PMCDETACH",
        Op::PmcGetMsr => "PMCX86GETMSR",
        Op::PmcRelease => "PMCRELEASE",
        Op::PmcRw => "PMCRW",
        Op::PmcSetCount => "PMCSETCOUNT",
        Op::PmcStart => "PMCSTART",
        Op::PmcStop => "PMCSTOP",
        Op::WriteLog => "WRITELOG",
        Op::CloseLog => "CLOSELOG",
        Op::GetDynEventInfo => "GETDYNEVENTINFO",
        Op::GetCaps => "GETCAPS",
    }
}

/// CPUID leaf 0xA's EAX and EBX of the CPU this thread runs on, if it reports an architectural
/// PMU (version 1 or later).
#[cfg(target_arch = "x86_64")]
fn native_arch_perfmon_leaf() -> Option<(u32, u32)> {
    use hwpmc::hw::CpuIdReader;
    let native = hwpmc::arch::x86::native::NativeCpuid;
    if native.cpuid1(0).eax < 0xA {
        return None;
    }
    let leaf = native.cpuid1(0xA);
    (leaf.eax & 0xFF != 0).then_some((leaf.eax, leaf.ebx))
}

/// No architectural PMU off x86_64.
#[cfg(not(target_arch = "x86_64"))]
fn native_arch_perfmon_leaf() -> Option<(u32, u32)> {
    None
}

#[cfg(test)]
mod tests {
    use super::refuse_thread_scope;
    use hwpmc::abi::{Op, PmcFlags, PmcOpPmcAllocate};
    use zerocopy::{FromZeros, IntoBytes};

    #[test]
    fn a_host_without_thread_scope_refuses_thread_pmcs_with_eopnotsupp() {
        let mut request = PmcOpPmcAllocate::new_zeroed();
        request.pm_flags = (PmcFlags::THREAD | PmcFlags::THREAD_INHERIT).bits();
        let refused = refuse_thread_scope(Op::PmcAllocate, request.as_bytes()).unwrap_err();
        assert_eq!(refused.errno, libc::EOPNOTSUPP);
        assert!(refused.to_string().contains("PMC_F_THREAD"), "{refused}");
        request.pm_flags = PmcFlags::DESCENDANTS.bits();
        assert!(refuse_thread_scope(Op::PmcAllocate, request.as_bytes()).is_ok());
        request.pm_flags = PmcFlags::THREAD.bits();
        assert!(refuse_thread_scope(Op::PmcAttach, request.as_bytes()).is_ok(), "other ops pass");
    }
}
