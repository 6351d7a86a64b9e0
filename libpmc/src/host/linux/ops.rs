//! The PMC_OP_* operations of the Linux host, with hwpmc(4)'s semantics and errno.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::{FromRawFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use hwpmc::abi::{
    Caps, Class, Disposition, Mode, Op, PMC_CPU_ANY, PMC_NAME_MAX, PMC_VERSION, PMC_VERSION_MAJOR,
    PmcClassInfo, PmcDynEventDescr, PmcFlags, PmcId, PmcInfo, PmcOpCaps, PmcOpConfigureLog,
    PmcOpGetCpuInfo, PmcOpGetDriverStats, PmcOpGetDynEventInfo, PmcOpGetPmcInfo, PmcOpPmcAdmin,
    PmcOpPmcAllocate, PmcOpPmcAttach, PmcOpPmcRw, PmcOpPmcSetCount, PmcOpSimple, PmcOpWriteLog,
    State, cpu_type, event,
};
use perf_event::Counter;
use perf_event::events::Hardware;
use pmclog::{
    DynLayout, Initialize, PmcAllocate, PmcAllocateDyn, PmcAttach, PmcDetach, ProcExit, Record,
    UserData,
};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use super::log::{Ring, RingMeta};
use super::perf::{self, Rings, Sampling, Scope, Source};
use super::{ClassRows, LinuxHost, perf_error};
use crate::error::{EDOOFUS, EPROGMISMATCH, Error, Result};

/// Nanoseconds in one tick of the clock events when they sample (FreeBSD's hz = 1000).
const CLOCK_TICK_NS: u64 = 1_000_000;
/// `kern.hwpmc.callchaindepth`'s default.
const CALLCHAIN_DEPTH: usize = 128;

/// One PMC.
struct Pmc {
    id: PmcId,
    owner: i32,
    event: u32,
    flags: PmcFlags,
    caps: Caps,
    source: Option<Source>,
    rings: Rings,
    state: State,
    /// Sampling: events per sample.
    reload: u64,
    /// Counting: the value at the last write or detach, plus what the live counters added since
    /// `offset`.
    base: u64,
    offset: u64,
    /// Process modes: the targets and their counters (empty lists for sampling PMCs, whose rings
    /// live in the log).
    targets: BTreeMap<i32, Vec<Counter>>,
    /// System counting: the CPU's counter.
    system: Option<Counter>,
    /// Whether the PMC was ever attached (a process PMC whose targets all went away cannot
    /// start again: ESRCH).
    attach_done: bool,
    /// Targets whose exit was logged (PMC_F_LOG_PROCEXIT).
    exit_logged: Vec<i32>,
}

impl Pmc {
    fn mode(&self) -> Mode {
        self.id.mode
    }
    fn running(&self) -> bool {
        self.state == State::Running
    }
    fn live_sum(&mut self) -> u64 {
        let mut sum = 0u64;
        for c in self.targets.values_mut().flatten().chain(self.system.as_mut()) {
            sum = sum.wrapping_add(c.read().unwrap_or(0));
        }
        sum
    }
    fn needs_log(&self) -> bool {
        self.mode() == Mode::SystemSampling
            || self.flags.intersects(PmcFlags::LOG_PROCCSW | PmcFlags::LOG_PROCEXIT)
            || (self.mode() == Mode::ThreadSampling
                && self.targets.keys().any(|&p| p != self.owner))
    }
}

/// Driver statistics (`struct pmc_op_getdriverstats`): operations and failed operations.
static SYSCALLS: AtomicU32 = AtomicU32::new(0);
static SYSCALL_ERRORS: AtomicU32 = AtomicU32::new(0);

/// Everything the Linux host's operations change.
pub(crate) struct LinuxState {
    classes: Vec<ClassRows>,
    pmcs: BTreeMap<u32, Pmc>,
    /// Rows an administrator disabled, by (cpu, row).
    disabled: Vec<(u32, u32)>,
}

impl LinuxState {
    pub(crate) fn new(classes: &[ClassRows]) -> Self {
        LinuxState { classes: classes.to_vec(), pmcs: BTreeMap::new(), disabled: Vec::new() }
    }
    fn class(&self, class: Class) -> Option<ClassRows> {
        self.classes.iter().copied().find(|c| c.class == class)
    }
    fn npmc(&self) -> u32 {
        self.classes.iter().map(|c| c.rows).sum()
    }
}

fn inval(op: &'static str, detail: impl Into<String>) -> Error {
    Error::with_detail(op, libc::EINVAL, detail)
}

fn read_arg<T: FromBytes + KnownLayout + Immutable>(op: &'static str, arg: &[u8]) -> Result<T> {
    T::read_from_prefix(arg)
        .map(|(v, _)| v)
        .map_err(|_| Error::with_detail(op, libc::EFAULT, "argument buffer too small"))
}

fn write_arg<T: IntoBytes + Immutable>(op: &'static str, value: &T, arg: &mut [u8]) -> Result<()> {
    let bytes = value.as_bytes();
    arg.get_mut(..bytes.len())
        .ok_or_else(|| Error::with_detail(op, libc::EFAULT, "argument buffer too small"))?
        .copy_from_slice(bytes);
    Ok(())
}

/// This process's pid, cached: a system call per PMC operation would cost as much as the perf
/// read itself. A fork handler forgets it in the child, where the PMCs of the parent are no
/// longer the caller's (FreeBSD semantics: the child owns none of them).
static PID: AtomicI32 = AtomicI32::new(0);

extern "C" fn forget_pid_in_child() {
    PID.store(0, Ordering::Relaxed);
}

fn getpid() -> i32 {
    let pid = PID.load(Ordering::Relaxed);
    if pid != 0 {
        return pid;
    }
    static AT_FORK: std::sync::Once = std::sync::Once::new();
    AT_FORK.call_once(|| {
        // SAFETY: registers a handler that only stores to an atomic, which is async-signal-safe
        // and valid in the child after fork.
        unsafe { libc::pthread_atfork(None, None, Some(forget_pid_in_child)) };
    });
    let pid = std::process::id() as i32;
    PID.store(pid, Ordering::Relaxed);
    pid
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether perf lets this process measure `pid` in kernel mode too (it does not for an
/// unprivileged caller when `kernel.perf_event_paranoid` is 2 or more).
fn kernel_mode_allowed(source: Source, rings: Rings, pid: i32) -> bool {
    let scope = Scope::Thread { tid: pid, inherit: false, threads_only: false };
    match perf::open_counter(source, rings, scope) {
        Ok(_) => true,
        Err(e) => !matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)),
    }
}

fn process_exists(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether process `pid` exists and has not ended (a zombie has: it only waits to be reaped).
fn process_running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // "pid (comm) S ...": the state follows the last ')' (comm may contain parentheses).
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

/// The thread ids of process `pid`.
fn threads_of(pid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut tids: Vec<i32> =
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    tids.sort_unstable();
    tids
}

fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC only reads the time-stamp counter; every x86_64 CPU has it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        super::log::now_ns()
    }
}

impl LinuxHost {
    fn lock(&self) -> std::sync::MutexGuard<'_, LinuxState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn dispatch(&self, op: Op, arg: &mut [u8]) -> Result<()> {
        let result = self.dispatch_inner(op, arg);
        SYSCALLS.fetch_add(1, Ordering::Relaxed);
        if result.is_err() {
            SYSCALL_ERRORS.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    fn dispatch_inner(&self, op: Op, arg: &mut [u8]) -> Result<()> {
        match op {
            Op::GetModuleVersion => {
                let client: u32 = read_arg("GETMODULEVERSION", arg)?;
                if client >> 24 != PMC_VERSION_MAJOR {
                    return Err(Error::new("GETMODULEVERSION", EPROGMISMATCH));
                }
                write_arg("GETMODULEVERSION", &PMC_VERSION, arg)
            }
            Op::GetCpuInfo => self.cpu_info(arg),
            Op::GetDriverStats => self.driver_stats(arg),
            Op::GetPmcInfo => self.pmc_info(arg),
            Op::GetDynEventInfo => self.dyn_event_info(arg),
            Op::PmcAdmin => self.admin(arg),
            Op::PmcAllocate => self.allocate(arg),
            Op::PmcAttach => self.attach(arg),
            Op::PmcDetach => self.detach(arg),
            Op::PmcStart => self.start(arg),
            Op::PmcStop => self.stop(arg),
            Op::PmcRelease => self.release(arg),
            Op::PmcRw => self.rw(arg),
            Op::PmcSetCount => self.set_count(arg),
            Op::GetCaps => {
                let mut req: PmcOpCaps = read_arg("GETCAPS", arg)?;
                let state = self.lock();
                req.pm_caps = owned(&state, "GETCAPS", req.pm_pmcid)?.caps.bits();
                write_arg("GETCAPS", &req, arg)
            }
            Op::PmcGetMsr => {
                let req: PmcOpSimple = read_arg("PMCGETMSR", arg)?;
                owned(&self.lock(), "PMCGETMSR", req.pm_pmcid)?;
                Err(inval(
                    "PMCGETMSR",
                    "the Linux host gives no direct RDPMC access; read the PMC with pmc_read",
                ))
            }
            Op::ConfigureLog => self.configure_log(arg),
            Op::FlushLog => {
                if !self.log.is_open() {
                    return Err(inval("FLUSHLOG", "no log is configured"));
                }
                self.log.flush().map_err(|errno| {
                    Error::with_detail("FLUSHLOG", errno, "writing the log failed")
                })
            }
            Op::CloseLog => {
                if !self.log.is_open() {
                    return Err(inval("CLOSELOG", "no log is configured"));
                }
                self.log.close(Some(&Record::CloseLog));
                Ok(())
            }
            Op::WriteLog => {
                let req: PmcOpWriteLog = read_arg("WRITELOG", arg)?;
                if !self.log.is_open() {
                    return Err(inval("WRITELOG", "no log is configured"));
                }
                self.log.write(&Record::UserData(UserData { data: req.pm_userdata }));
                Ok(())
            }
        }
    }

    /// Process `pid` has ended (a child this host launched, reaped by `wait`, or a target the
    /// drain thread found gone): PMCs with PMC_F_LOG_PROCEXIT attached to it log its share of
    /// their count (PROCEXIT) once, as FreeBSD does when a target exits. The counters stay
    /// readable: the PMC's value still includes the share.
    pub(super) fn target_exited(&self, pid: i32) {
        let mut state = self.lock();
        let mut records = Vec::new();
        for (&pmcid, pmc) in state.pmcs.iter_mut() {
            if !pmc.flags.contains(PmcFlags::LOG_PROCEXIT) || pmc.exit_logged.contains(&pid) {
                continue;
            }
            let Some(counters) = pmc.targets.get_mut(&pid) else { continue };
            let value =
                counters.iter_mut().map(|c| c.read().unwrap_or(0)).fold(0, u64::wrapping_add);
            pmc.exit_logged.push(pid);
            records.push(ProcExit { pmcid, pid, value });
        }
        drop(state);
        for record in records {
            self.log.write(&Record::ProcExit(record));
        }
    }

    /// Logs the exit of every PMC_F_LOG_PROCEXIT target that has ended (gone from `/proc`, or a
    /// zombie) since the last look: the drain thread's periodic check, for targets this host
    /// did not launch (`pmcstat -t`).
    pub(super) fn log_ended_targets(&self) {
        let ended: Vec<i32> = {
            let state = self.lock();
            let mut pids: Vec<i32> = state
                .pmcs
                .values()
                .filter(|p| p.flags.contains(PmcFlags::LOG_PROCEXIT))
                .flat_map(|p| p.targets.keys().filter(|pid| !p.exit_logged.contains(pid)))
                .copied()
                .collect();
            pids.sort_unstable();
            pids.dedup();
            pids.retain(|&pid| !process_running(pid));
            pids
        };
        for pid in ended {
            self.target_exited(pid);
        }
    }

    fn cpu_info(&self, arg: &mut [u8]) -> Result<()> {
        let state = self.lock();
        let mut info = PmcOpGetCpuInfo::new_zeroed();
        info.pm_cputype = cpu_type::GENERIC;
        info.pm_ncpu = self.ncpu;
        info.pm_npmc = state.npmc();
        info.pm_nclass = state.classes.len() as u32;
        for (slot, c) in info.pm_classes.iter_mut().zip(&state.classes) {
            *slot = PmcClassInfo {
                pm_class: c.class.as_u32(),
                pm_caps: c.caps.bits(),
                pm_width: c.width,
                pm_num: c.rows,
            };
        }
        write_arg("GETCPUINFO", &info, arg)
    }

    fn driver_stats(&self, arg: &mut [u8]) -> Result<()> {
        let mut stats = PmcOpGetDriverStats::new_zeroed();
        stats.pm_syscalls = SYSCALLS.load(Ordering::Relaxed);
        stats.pm_syscall_errors = SYSCALL_ERRORS.load(Ordering::Relaxed);
        stats.pm_intr_bufferfull = self.log.lost.load(Ordering::Relaxed) as u32;
        write_arg("GETDRIVERSTATS", &stats, arg)
    }

    fn pmc_info(&self, arg: &mut [u8]) -> Result<()> {
        let req: PmcOpGetPmcInfo = read_arg("GETPMCINFO", arg)?;
        let cpu = u32::try_from(req.pm_cpu).ok().filter(|&c| c < self.ncpu);
        let cpu =
            cpu.ok_or_else(|| inval("GETPMCINFO", format!("CPU {} does not exist", req.pm_cpu)))?;
        let state = self.lock();
        let header = size_of::<PmcOpGetPmcInfo>();
        let need = header + state.npmc() as usize * size_of::<PmcInfo>();
        if arg.len() < need {
            return Err(Error::with_detail(
                "GETPMCINFO",
                libc::EFAULT,
                "argument buffer too small for every row",
            ));
        }
        for class in &state.classes {
            for index in 0..class.rows {
                let row = class.first_row + index;
                let mut info = PmcInfo::new_zeroed();
                let name = format!("{}-{index}", class.class.name());
                let n = name.len().min(PMC_NAME_MAX - 1);
                info.pm_name[..n].copy_from_slice(&name.as_bytes()[..n]);
                info.pm_class = class.class.as_u32();
                info.pm_enabled = i32::from(!state.disabled.contains(&(cpu, row)));
                info.pm_rowdisp = Disposition::Free.as_u32();
                let holder = state.pmcs.values().find(|p| {
                    u32::from(p.id.row) == row && p.id.cpu.is_none_or(|c| u32::from(c) == cpu)
                });
                if let Some(p) = holder {
                    info.pm_rowdisp = if p.mode().is_system() {
                        Disposition::Standalone
                    } else {
                        Disposition::Thread
                    }
                    .as_u32();
                    info.pm_ownerpid = p.owner;
                    info.pm_mode = p.mode().as_u32();
                    info.pm_event = p.event;
                    info.pm_flags = p.flags.bits();
                    info.pm_reloadcount = p.reload;
                }
                let at = header + row as usize * size_of::<PmcInfo>();
                arg[at..at + size_of::<PmcInfo>()].copy_from_slice(info.as_bytes());
            }
        }
        Ok(())
    }

    #[inline(never)]
    fn dyn_event_info(&self, arg: &mut [u8]) -> Result<()> {
        let class: u32 = read_arg("GETDYNEVENTINFO", arg)?;
        if class != Class::Soft.as_u32() {
            return Err(inval("GETDYNEVENTINFO", "only the SOFT class has dynamic events"));
        }
        // 272 KiB: on the heap, so that no stack frame of the dispatch path is that large
        // (its stack probes would cost every operation hundreds of nanoseconds).
        let mut info = PmcOpGetDynEventInfo::new_box_zeroed()
            .map_err(|_| Error::new("GETDYNEVENTINFO", libc::ENOMEM))?;
        info.pm_class = class;
        info.pm_nevent = perf::SOFTWARE_EVENTS.len() as u32;
        for (i, (name, _)) in perf::SOFTWARE_EVENTS.iter().enumerate() {
            let mut descr = PmcDynEventDescr::new_zeroed();
            descr.pm_ev_name[..name.len()].copy_from_slice(name.as_bytes());
            descr.pm_ev_code = event::SOFT_FIRST + i as u32;
            info.pm_events[i] = descr;
        }
        write_arg("GETDYNEVENTINFO", &*info, arg)
    }

    fn admin(&self, arg: &mut [u8]) -> Result<()> {
        let req: PmcOpPmcAdmin = read_arg("PMCADMIN", arg)?;
        if !is_root() {
            return Err(Error::with_detail(
                "PMCADMIN",
                libc::EPERM,
                "enabling and disabling rows needs root",
            ));
        }
        let mut state = self.lock();
        let cpu = u32::try_from(req.pm_cpu).ok().filter(|&c| c < self.ncpu);
        let cpu = cpu.ok_or_else(|| Error::with_detail("PMCADMIN", libc::ENXIO, "no such CPU"))?;
        let row = u32::try_from(req.pm_pmc).ok().filter(|&r| r < state.npmc());
        let row = row.ok_or_else(|| inval("PMCADMIN", "no such row"))?;
        if state.pmcs.values().any(|p| u32::from(p.id.row) == row) {
            return Err(Error::with_detail("PMCADMIN", libc::EBUSY, "the row holds a PMC"));
        }
        match State::from_u32(req.pm_state) {
            Some(State::Disabled) => {
                if !state.disabled.contains(&(cpu, row)) {
                    state.disabled.push((cpu, row));
                }
            }
            Some(State::Free) => state.disabled.retain(|&e| e != (cpu, row)),
            _ => {
                return Err(inval(
                    "PMCADMIN",
                    "the state must be PMC_STATE_FREE or PMC_STATE_DISABLED",
                ));
            }
        }
        Ok(())
    }

    /// What a PMCALLOCATE request counts with.
    fn source_of(
        &self,
        class: Class,
        req: &PmcOpPmcAllocate,
        flags: PmcFlags,
    ) -> Result<Option<Source>> {
        const OP: &str = "PMCALLOCATE";
        match class {
            Class::Soft => {
                let index = req.pm_ev.checked_sub(event::SOFT_FIRST).map(|i| i as usize);
                let (_, sw) =
                    index.and_then(|i| perf::SOFTWARE_EVENTS.get(i)).ok_or_else(|| {
                        inval(OP, format!("{:#x} is not a SOFT event of this host", req.pm_ev))
                    })?;
                Ok(Some(Source::Software(u64::from(*sw))))
            }
            Class::Tsc => Ok(None),
            Class::Iap => {
                if !flags.contains(PmcFlags::EV_PMU) {
                    return Err(inval(OP, "IAP events are given as PMC_F_EV_PMU configurations"));
                }
                let sel = u64::from(req.pm_md.iap_config());
                const ANY: u64 = 1 << 21;
                const PIN_CONTROL: u64 = 1 << 19;
                if sel & ANY != 0 && !is_root() {
                    return Err(Error::with_detail(
                        OP,
                        libc::EPERM,
                        "AnyThread counting needs root",
                    ));
                }
                if sel & PIN_CONTROL != 0 {
                    return Err(inval(
                        OP,
                        "bit 19 (PC) of IA32_PERFEVTSEL is not a counting qualifier",
                    ));
                }
                // Event, umask, edge, inv, cmask (and AnyThread): the rings come from the caps.
                let raw = sel & (0xFFFF | 1 << 18 | 1 << 23 | 0xFF << 24 | ANY);
                Ok(Some(Source::Raw(raw)))
            }
            Class::Iaf => {
                let hw = match req.pm_ev {
                    event::IAF_INSTR_RETIRED_ANY => Hardware::INSTRUCTIONS,
                    event::IAF_CPU_CLK_UNHALTED_CORE => Hardware::CPU_CYCLES,
                    event::IAF_CPU_CLK_UNHALTED_REF => Hardware::REF_CPU_CYCLES,
                    other => return Err(inval(OP, format!("{other:#x} is not an IAF event"))),
                };
                Ok(Some(Source::Hardware(u64::from(hw))))
            }
            _ => Err(inval(OP, format!("class {} does not exist here", class.name()))),
        }
    }

    fn allocate(&self, arg: &mut [u8]) -> Result<()> {
        const OP: &str = "PMCALLOCATE";
        let mut req: PmcOpPmcAllocate = read_arg(OP, arg)?;
        let mode = Mode::from_u32(req.pm_mode)
            .ok_or_else(|| inval(OP, format!("mode {} does not exist", req.pm_mode)))?;
        let flags = PmcFlags::from_bits(req.pm_flags)
            .filter(|f| PmcFlags::ALLOCATE_ACCEPTED.contains(*f))
            .ok_or_else(|| {
                inval(
                    OP,
                    format!("flags {:#x} include bits PMCALLOCATE does not take", req.pm_flags),
                )
            })?;
        let caps = Caps::from_bits(req.pm_caps)
            .ok_or_else(|| inval(OP, format!("caps {:#x} are unknown", req.pm_caps)))?;
        let class = Class::from_u32(req.pm_class)
            .ok_or_else(|| inval(OP, format!("class {} does not exist", req.pm_class)))?;
        let cpu = if mode.is_system() {
            if req.pm_cpu >= self.ncpu {
                return Err(inval(
                    OP,
                    format!("CPU {} does not exist (this machine has {})", req.pm_cpu, self.ncpu),
                ));
            }
            Some(req.pm_cpu)
        } else {
            if req.pm_cpu != PMC_CPU_ANY {
                return Err(inval(OP, "a process PMC takes PMC_CPU_ANY"));
            }
            None
        };
        let mut state = self.lock();
        let class_rows = state.class(class).ok_or_else(|| match &self.missing {
            Some(reason) if matches!(class, Class::Iap | Class::Iaf) => {
                inval(OP, format!("class {}: {reason}", class.name()))
            }
            _ => inval(OP, format!("class {} does not exist on this host", class.name())),
        })?;
        if !class_rows.caps.contains(caps) {
            return Err(inval(
                OP,
                format!(
                    "class {} lacks capabilities {:#x}",
                    class.name(),
                    (caps - class_rows.caps).bits()
                ),
            ));
        }
        if class == Class::Tsc && (mode != Mode::SystemCounting || req.pm_ev != event::TSC_TSC) {
            return Err(inval(
                OP,
                "the TSC is read-only and counts system-wide: mode SC, event TSC_TSC",
            ));
        }
        if mode.is_sampling() && !class_rows.caps.contains(Caps::INTERRUPT) {
            return Err(inval(OP, format!("class {} cannot sample", class.name())));
        }
        if flags.contains(PmcFlags::LOG_PROCCSW) {
            return Err(Error::with_detail(
                OP,
                libc::EOPNOTSUPP,
                "PMC_F_LOG_PROCCSW (pmcstat -W) needs the driver's context-switch hook; the \
                 Linux host does not see the context switches of the processes it measures",
            ));
        }
        let source = self.source_of(class, &req, flags)?;
        let sel = u64::from(req.pm_md.iap_config());
        let (usr, os) = if class == Class::Iap
            && flags.contains(PmcFlags::EV_PMU)
            && sel & (3 << 16) != 0
            && !caps.intersects(Caps::USER | Caps::SYSTEM)
        {
            (sel & 1 << 16 != 0, sel & 1 << 17 != 0)
        } else {
            (caps.contains(Caps::USER), caps.contains(Caps::SYSTEM))
        };
        let rings = if usr || os {
            Rings { user: usr, kernel: os }
        } else {
            Rings { user: true, kernel: true }
        };
        let owner = getpid();
        let row = (class_rows.first_row..class_rows.first_row + class_rows.rows)
            .find(|&row| row_usable(&state, row, mode, cpu, owner))
            .ok_or_else(|| {
                Error::with_detail(OP, libc::EINVAL, format!("every {} row is taken", class.name()))
            })?;
        let id = PmcId { cpu: cpu.map(|c| c as u16), mode, class, row: row as u8 };
        let mut pmc = Pmc {
            id,
            owner,
            event: req.pm_ev,
            flags,
            caps: if caps.is_empty() { class_rows.caps } else { caps },
            source,
            rings,
            state: State::Allocated,
            reload: if mode.is_sampling() { req.pm_count.max(1) } else { 0 },
            base: if mode.is_sampling() { 0 } else { req.pm_count },
            offset: 0,
            targets: BTreeMap::new(),
            system: None,
            attach_done: false,
            exit_logged: Vec::new(),
        };
        if let (Some(cpu), Some(source)) = (cpu, source) {
            if mode == Mode::SystemCounting {
                let counter = perf::open_counter(source, rings, Scope::Cpu(cpu))
                    .map_err(|e| perf_error(OP, &format!("counting on CPU {cpu}"), &e))?;
                pmc.system = Some(counter);
            } else {
                let sampling = Sampling {
                    period: period_of(&pmc),
                    callchain: flags.contains(PmcFlags::CALLCHAIN),
                    side_band: true,
                };
                let sampler = perf::open_sampler(source, rings, Scope::Cpu(cpu), sampling)
                    .map_err(|e| perf_error(OP, &format!("sampling on CPU {cpu}"), &e))?;
                self.log.add_ring(ring(id.to_u32(), &pmc, sampler));
            }
        }
        req.pm_pmcid = id.to_u32();
        req.pm_caps = pmc.caps.bits();
        write_arg(OP, &req, arg)?;
        let record = allocation_record(id.to_u32(), &pmc);
        state.pmcs.insert(id.to_u32(), pmc);
        drop(state);
        self.log.write(&record);
        Ok(())
    }

    fn attach(&self, arg: &mut [u8]) -> Result<()> {
        const OP: &str = "PMCATTACH";
        let req: PmcOpPmcAttach = read_arg(OP, arg)?;
        let pid = if req.pm_pid == 0 { getpid() } else { req.pm_pid };
        let mut state = self.lock();
        let pmc = owned_mut(&mut state, OP, req.pm_pmc)?;
        if pmc.mode().is_system() {
            return Err(inval(OP, "system-scope PMCs are not attached to processes"));
        }
        if pmc.running() {
            return Err(Error::with_detail(OP, libc::EBUSY, "stop the PMC before attaching it"));
        }
        if req.pm_pid < 0 {
            return Err(inval(OP, format!("{} is not a process id", req.pm_pid)));
        }
        if !process_exists(pid) {
            return Err(Error::with_detail(OP, libc::ESRCH, format!("no process {pid}")));
        }
        if pmc.targets.contains_key(&pid) {
            return Err(Error::with_detail(OP, libc::EEXIST, format!("already attached to {pid}")));
        }
        let source = pmc.source.ok_or_else(|| inval(OP, "this PMC cannot be attached"))?;
        let descendants = pmc.flags.contains(PmcFlags::DESCENDANTS);
        let what = format!("measuring process {pid}");
        // Without privilege (kernel.perf_event_paranoid 2) perf measures a process in user
        // mode only; a PMC that did not ask for one ring (both, FreeBSD's default) counts user
        // mode then, as `perf stat` does, instead of failing. Asking for kernel mode alone
        // still fails with EPERM.
        if pmc.rings.user && pmc.rings.kernel && !kernel_mode_allowed(source, pmc.rings, pid) {
            pmc.rings.kernel = false;
        }
        let mut counters = Vec::new();
        if pmc.mode().is_sampling() {
            let sampling = Sampling {
                period: period_of(pmc),
                callchain: pmc.flags.contains(PmcFlags::CALLCHAIN),
                side_band: true,
            };
            // One ring per CPU, opened for the first thread; the other threads' events on
            // that CPU write into it.
            let mut rings: Vec<Ring> = Vec::new();
            for (i, tid) in threads_of(pid).into_iter().enumerate() {
                for cpu in 0..self.ncpu {
                    let scope = Scope::ThreadOnCpu { pid: tid, cpu, threads_only: !descendants };
                    if i == 0 {
                        let sampler = perf::open_sampler(source, pmc.rings, scope, sampling)
                            .map_err(|e| perf_error(OP, &what, &e))?;
                        rings.push(ring(req.pm_pmc, pmc, sampler));
                    } else {
                        let ring = &mut rings[cpu as usize];
                        let event =
                            perf::open_into(source, pmc.rings, scope, sampling, &ring.sampler)
                                .map_err(|e| perf_error(OP, &what, &e))?;
                        ring.sharing.push(event);
                    }
                }
            }
            for r in rings {
                self.log.add_ring(r);
            }
        } else {
            for tid in threads_of(pid) {
                let scope = Scope::Thread { tid, inherit: true, threads_only: !descendants };
                counters.push(
                    perf::open_counter(source, pmc.rings, scope)
                        .map_err(|e| perf_error(OP, &what, &e))?,
                );
            }
        }
        pmc.targets.insert(pid, counters);
        pmc.attach_done = true;
        let sampling = pmc.mode().is_sampling();
        drop(state);
        if self.log.is_open() {
            let path = super::super::unix_process::exe_path(pid);
            self.log.write(&Record::PmcAttach(PmcAttach { pmcid: req.pm_pmc, pid, path: &path }));
            if sampling {
                for (start, path) in super::super::unix_process::executable_mappings(pid) {
                    self.log.write(&Record::MapIn(pmclog::MapIn { pid, start, path: &path }));
                }
            }
        }
        Ok(())
    }

    fn detach(&self, arg: &mut [u8]) -> Result<()> {
        const OP: &str = "PMCDETACH";
        let req: PmcOpPmcAttach = read_arg(OP, arg)?;
        let pid = if req.pm_pid == 0 { getpid() } else { req.pm_pid };
        let mut state = self.lock();
        let pmc = owned(&state, OP, req.pm_pmc)?;
        if pmc.mode().is_system() {
            return Err(inval(OP, "system-scope PMCs are not attached to processes"));
        }
        if !pmc.targets.contains_key(&pid) {
            let monitored = state.pmcs.values().any(|p| p.targets.contains_key(&pid));
            let (errno, why) = if monitored {
                (libc::EINVAL, format!("this PMC is not attached to {pid}"))
            } else {
                (libc::ESRCH, format!("no PMC is attached to process {pid}"))
            };
            return Err(Error::with_detail(OP, errno, why));
        }
        let pmc = owned_mut(&mut state, OP, req.pm_pmc)?;
        // The detached target's count stays in the PMC's value.
        let value = pmc.base.wrapping_add(pmc.live_sum().wrapping_sub(pmc.offset));
        pmc.targets.remove(&pid);
        pmc.base = value;
        pmc.offset = pmc.live_sum();
        drop(state);
        self.log.write(&Record::PmcDetach(PmcDetach { pmcid: req.pm_pmc, pid }));
        Ok(())
    }

    fn start(&self, arg: &mut [u8]) -> Result<()> {
        const OP: &str = "PMCSTART";
        let req: PmcOpSimple = read_arg(OP, arg)?;
        let mut state = self.lock();
        let pmc = owned_mut(&mut state, OP, req.pm_pmcid)?;
        if pmc.running() {
            return Ok(());
        }
        if pmc.needs_log() && !self.log.is_open() {
            return Err(Error::with_detail(
                OP,
                EDOOFUS,
                "this PMC logs: configure a log first (pmc_configure_logfile)",
            ));
        }
        if pmc.mode().is_virtual() && pmc.targets.is_empty() {
            if pmc.attach_done {
                return Err(Error::with_detail(
                    OP,
                    libc::ESRCH,
                    "every process it was attached to has gone",
                ));
            }
            drop(state);
            let mut attach = PmcOpPmcAttach { pm_pmc: req.pm_pmcid, pm_pid: 0 };
            self.attach(attach.as_mut_bytes())?;
            state = self.lock();
        }
        let pmc = owned_mut(&mut state, OP, req.pm_pmcid)?;
        if pmc.mode().is_sampling() && self.log.is_open() {
            self.log.write_kernel_mapping();
        }
        if pmc.mode() == Mode::SystemSampling && !self.log.wrote_all_mappings() {
            // As FreeBSD at the first system-sampling start: the executable mappings of every
            // process, so samples of processes already running can be named.
            self.log.write_all_mappings();
        }
        if pmc.id.class != Class::Tsc {
            if pmc.mode().is_sampling() {
                self.log
                    .enable_rings(req.pm_pmcid, true)
                    .map_err(|e| perf_error(OP, "starting the sampler", &e))?;
            } else {
                for c in pmc.targets.values_mut().flatten().chain(pmc.system.as_mut()) {
                    c.enable().map_err(|e| perf_error(OP, "starting the counter", &e))?;
                }
            }
        }
        pmc.state = State::Running;
        Ok(())
    }

    fn stop(&self, arg: &mut [u8]) -> Result<()> {
        const OP: &str = "PMCSTOP";
        let req: PmcOpSimple = read_arg(OP, arg)?;
        let mut state = self.lock();
        let pmc = owned_mut(&mut state, OP, req.pm_pmcid)?;
        if !pmc.running() {
            return Ok(());
        }
        if pmc.mode().is_sampling() {
            self.log
                .enable_rings(req.pm_pmcid, false)
                .map_err(|e| perf_error(OP, "stopping the sampler", &e))?;
        } else {
            for c in pmc.targets.values_mut().flatten().chain(pmc.system.as_mut()) {
                c.disable().map_err(|e| perf_error(OP, "stopping the counter", &e))?;
            }
        }
        pmc.state = State::Stopped;
        Ok(())
    }

    fn release(&self, arg: &mut [u8]) -> Result<()> {
        const OP: &str = "PMCRELEASE";
        let req: PmcOpSimple = read_arg(OP, arg)?;
        let mut state = self.lock();
        owned(&state, OP, req.pm_pmcid)?;
        // Dropping the counters closes their perf events.
        let pmc = state.pmcs.remove(&req.pm_pmcid);
        drop(state);
        if pmc.is_some_and(|p| p.mode().is_sampling()) {
            self.log.remove_rings(req.pm_pmcid);
        }
        Ok(())
    }

    fn rw(&self, arg: &mut [u8]) -> Result<()> {
        const OP: &str = "PMCRW";
        let mut req: PmcOpPmcRw = read_arg(OP, arg)?;
        let flags = PmcFlags::from_bits(req.pm_flags)
            .filter(|f| !f.is_empty() && (PmcFlags::OLDVALUE | PmcFlags::NEWVALUE).contains(*f))
            .ok_or_else(|| inval(OP, "flags must be PMC_F_OLDVALUE and/or PMC_F_NEWVALUE"))?;
        let mut state = self.lock();
        let pmc = owned_mut(&mut state, OP, req.pm_pmcid)?;
        let write = flags.contains(PmcFlags::NEWVALUE);
        if write && pmc.running() {
            return Err(Error::with_detail(OP, libc::EBUSY, "stop the PMC before writing it"));
        }
        let new = req.pm_value;
        if flags.contains(PmcFlags::OLDVALUE) {
            req.pm_value = if pmc.mode().is_sampling() {
                pmc.reload
            } else if pmc.id.class == Class::Tsc {
                rdtsc()
            } else {
                pmc.base.wrapping_add(pmc.live_sum().wrapping_sub(pmc.offset))
            };
        }
        if write {
            if pmc.mode().is_sampling() {
                pmc.reload = new.max(1);
            } else {
                pmc.base = new;
                pmc.offset = pmc.live_sum();
            }
        }
        write_arg(OP, &req, arg)
    }

    fn set_count(&self, arg: &mut [u8]) -> Result<()> {
        const OP: &str = "PMCSETCOUNT";
        let req: PmcOpPmcSetCount = read_arg(OP, arg)?;
        let mut state = self.lock();
        let pmc = owned_mut(&mut state, OP, req.pm_pmcid)?;
        if pmc.running() {
            return Err(Error::with_detail(
                OP,
                libc::EBUSY,
                "stop the PMC before changing its count",
            ));
        }
        if pmc.mode().is_sampling() {
            pmc.reload = req.pm_count.max(1);
        } else {
            // A counting PMC's count, as the driver does.
            pmc.base = req.pm_count;
            pmc.offset = pmc.live_sum();
        }
        Ok(())
    }

    fn configure_log(&self, arg: &mut [u8]) -> Result<()> {
        const OP: &str = "CONFIGURELOG";
        let req: PmcOpConfigureLog = read_arg(OP, arg)?;
        if req.pm_flags != 0 {
            return Err(inval(OP, "flags must be 0"));
        }
        if req.pm_logfd < 0 {
            if !self.log.is_open() {
                return Err(inval(OP, "no log is configured"));
            }
            self.log.close(None);
            return Ok(());
        }
        if self.log.is_open() {
            return Err(Error::with_detail(OP, libc::EBUSY, "a log is already configured"));
        }
        let file = own_log_descriptor(req.pm_logfd)?;
        self.log.open(file);
        let (sec, nsec) = wall_clock();
        self.log.write(&Record::Initialize(Initialize {
            version: PMC_VERSION,
            cpu_type: cpu_type::GENERIC,
            tsc_freq: 1_000_000_000,
            time_sec: sec,
            time_nsec: nsec,
            cpuid: trim_nul(&self.cpuid),
        }));
        let state = self.lock();
        let allocations: Vec<Record<'static>> = state
            .pmcs
            .iter()
            .filter(|(_, p)| p.owner == getpid())
            .map(|(&id, p)| allocation_record(id, p))
            .collect();
        drop(state);
        for record in &allocations {
            self.log.write(record);
        }
        Ok(())
    }
}

/// The record of an allocation: PMCALLOCATEDYN (with the event's name) for a SOFT PMC, as
/// FreeBSD writes, else PMCALLOCATE.
fn allocation_record(pmcid: u32, pmc: &Pmc) -> Record<'static> {
    let (flags, rate) = (pmc.flags.bits(), pmc.reload);
    if pmc.id.class == Class::Soft {
        let index = pmc.event.wrapping_sub(event::SOFT_FIRST) as usize;
        let name = perf::SOFTWARE_EVENTS.get(index).map_or("", |(n, _)| n);
        return Record::PmcAllocateDyn(PmcAllocateDyn {
            pmcid,
            event: pmc.event,
            flags,
            rate,
            name: name.as_bytes(),
            layout: DynLayout::Kernel,
        });
    }
    Record::PmcAllocate(PmcAllocate { pmcid, event: pmc.event, flags, rate })
}

fn trim_nul(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())]
}

fn wall_clock() -> (i64, i64) {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (now.as_secs() as i64, i64::from(now.subsec_nanos()))
}

/// The log's own reference to descriptor `fd`: EBADF unless it is open for writing and is a
/// file, a pipe or a socket.
fn own_log_descriptor(fd: RawFd) -> Result<File> {
    const OP: &str = "CONFIGURELOG";
    let badf = |why: &str| Error::with_detail(OP, libc::EBADF, format!("descriptor {fd} {why}"));
    // SAFETY: F_GETFL on any int is safe; an invalid descriptor gives -1/EBADF.
    let access = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if access < 0 {
        return Err(badf("is not open"));
    }
    if access & libc::O_ACCMODE == libc::O_RDONLY {
        return Err(badf("is open read-only"));
    }
    // SAFETY: an all-zero stat is a valid value for fstat to overwrite.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: `st` is a valid stat buffer and `fd` an open descriptor.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(badf("cannot be examined"));
    }
    let kind = st.st_mode & libc::S_IFMT;
    if ![libc::S_IFREG, libc::S_IFIFO, libc::S_IFSOCK, libc::S_IFCHR].contains(&kind) {
        return Err(badf("is not a file, a pipe or a socket"));
    }
    // SAFETY: F_DUPFD_CLOEXEC duplicates an open descriptor; the copy is ours alone.
    let own = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if own < 0 {
        return Err(Error::os(OP, &std::io::Error::last_os_error()));
    }
    // SAFETY: `own` is a fresh descriptor nothing else owns.
    Ok(unsafe { File::from_raw_fd(own) })
}

/// The sampling period perf uses for `pmc`: the reload count, in ticks of [`CLOCK_TICK_NS`] for
/// the clock events.
fn period_of(pmc: &Pmc) -> u64 {
    match pmc.source {
        Some(s) if perf::is_clock(s) => pmc.reload.saturating_mul(CLOCK_TICK_NS),
        _ => pmc.reload,
    }
}

fn ring(pmcid: u32, pmc: &Pmc, sampler: perf_event::Sampler) -> Ring {
    let callchain = pmc.flags.contains(PmcFlags::CALLCHAIN);
    let meta = RingMeta {
        pmcid,
        depth: if callchain { CALLCHAIN_DEPTH } else { 1 },
        user_callchain: pmc.flags.contains(PmcFlags::USERCALLCHAIN),
    };
    Ring { meta, sampler, sharing: Vec::new() }
}

/// Whether a new PMC of `owner` in `mode` may take `row`: no PMC of the other scope holds it
/// (on that CPU), and the owner holds no PMC there already.
fn row_usable(state: &LinuxState, row: u32, mode: Mode, cpu: Option<u32>, owner: i32) -> bool {
    if cpu.is_some_and(|c| state.disabled.contains(&(c, row))) {
        return false;
    }
    state.pmcs.values().filter(|p| u32::from(p.id.row) == row).all(|p| {
        let same_cpu = match (p.id.cpu, cpu) {
            (Some(a), Some(b)) => u32::from(a) == b,
            _ => true,
        };
        if p.mode().is_system() != mode.is_system() {
            return !same_cpu;
        }
        if mode.is_system() { !same_cpu } else { p.owner != owner }
    })
}

/// Why the caller cannot use PMC `id`, as FreeBSD says it: ESRCH when the caller owns no PMC
/// at all (it has no owner descriptor; after fork a child owns none of its parent's PMCs),
/// EINVAL when it owns others but not this one.
fn not_owned(state: &LinuxState, op: &'static str, id: u32) -> Error {
    let me = getpid();
    if state.pmcs.values().any(|p| p.owner == me) {
        inval(op, format!("{id:#010x} is not a PMC of this process"))
    } else {
        Error::with_detail(op, libc::ESRCH, "this process owns no PMC")
    }
}

/// The PMC `id` if the caller owns it.
fn owned<'a>(state: &'a LinuxState, op: &'static str, id: u32) -> Result<&'a Pmc> {
    match state.pmcs.get(&id) {
        Some(p) if p.owner == getpid() => Ok(p),
        _ => Err(not_owned(state, op, id)),
    }
}

fn owned_mut<'a>(state: &'a mut LinuxState, op: &'static str, id: u32) -> Result<&'a mut Pmc> {
    if state.pmcs.get(&id).is_none_or(|p| p.owner != getpid()) {
        return Err(not_owned(state, op, id));
    }
    state.pmcs.get_mut(&id).ok_or_else(|| inval(op, "vanished"))
}
