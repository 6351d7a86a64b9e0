//! The `hwpmc` driver's kernel on Linux: this process is the kernel the driver is embedded in.
//!
//! The caller of every operation is this process (its descriptors, its credentials); other
//! processes are what `/proc` shows; the log goes to a duplicate of the descriptor the caller
//! gave CONFIGURELOG. The driver keeps no hardware state per CPU here (perf counts), so it is told
//! it always runs on CPU 0: its log then has one buffer, which keeps records in the order the host
//! posts them. The hardware it sees ([`LinuxCpu`]) is this CPU's CPUID and TSC; the PMU's MSRs
//! belong to Linux's perf and are not touched.
//!
//! A system call's argument is copied into a per-thread buffer that stands for the caller's
//! memory at [`ARG_BASE`]: the driver's copy-in and copy-out reach that buffer and nothing else
//! (any other address is EFAULT), so no pointer of the caller is ever followed.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use hwpmc::arch::x86::native::{self, NativeCpuid};
use hwpmc::hw::{CpuIdReader, CpuIdResult, Hardware, Lapic, Msrs};
use hwpmc::{
    Cpu, CriticalSection, Errno, HostCounters, Kernel, LogFile, Pid, Privilege, ProcessState,
    Signal, UserPtr,
};

use super::call_detail::{self, explain};
use super::counters::PerfCounters;
use super::critical;
use super::lock;
use super::perf::{CounterRequest, CountingEvents, Perf, Rings, Scope, Source};
use super::pmus::CorePmus;
use super::procfs::{not_allowed, numbered_entries, process_state_letter};
use super::worker::Worker;
use crate::host::KERNEL_SYMBOLS;
use crate::host::current_pid::current_pid as getpid;
use crate::host::per_process::PerProcess;
use crate::host::unix_process;

/// Where the caller's argument struct lives for the driver.
pub(crate) const ARG_BASE: u64 = 0x1000;

thread_local! {
    /// The argument of the system call this thread is making.
    static ARG: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `call` with `arg` as the caller's memory at [`ARG_BASE`], and copies back what the
/// driver wrote there.
pub(crate) fn with_argument<R>(arg: &mut [u8], call: impl FnOnce(UserPtr) -> R) -> R {
    ARG.with(|a| {
        let mut a = a.borrow_mut();
        a.clear();
        a.extend_from_slice(arg);
    });
    call_detail::forget();
    let result = call(UserPtr(ARG_BASE));
    ARG.with(|a| {
        let a = a.borrow();
        let n = a.len().min(arg.len());
        arg[..n].copy_from_slice(&a[..n]);
    });
    result
}

/// The byte range `ptr..ptr + len` of the argument buffer, if it lies within it.
fn argument_range(ptr: UserPtr, len: usize, arg_len: usize) -> Option<std::ops::Range<usize>> {
    let start = usize::try_from(ptr.0.checked_sub(ARG_BASE)?).ok()?;
    let end = start.checked_add(len)?;
    (end <= arg_len).then_some(start..end)
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn egid() -> u32 {
    // SAFETY: getegid has no preconditions.
    unsafe { libc::getegid() }
}

/// The ids (real, effective, saved, filesystem) on line `key` of `/proc/pid/status`.
fn status_ids(status: &str, key: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|ids| ids.split_whitespace().filter_map(|id| id.parse().ok()).collect())
        .unwrap_or_default()
}

/// Whether this process may measure `pid` as ptrace's rule for a debugger without privilege
/// says (perf applies it): every user and group id of the target is this process's.
fn same_credentials(pid: Pid) -> bool {
    if euid() == 0 {
        return true;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    let (uids, gids) = (status_ids(&status, "Uid:"), status_ids(&status, "Gid:"));
    !uids.is_empty() && uids.iter().all(|&u| u == euid()) && gids.iter().all(|&g| g == egid())
}

/// Whether perf lets this process count whole CPUs (root, CAP_PERFMON, or a permissive
/// `kernel.perf_event_paranoid`): opening a CPU-wide software counter tells.
fn may_count_cpus() -> bool {
    static ALLOWED: PerProcess<bool> = PerProcess::new();
    *ALLOWED.get_or_init(|| {
        let clock = Source::Software(u64::from(perf_event::events::Software::CPU_CLOCK));
        let rings = Rings { user: true, kernel: false };
        let request =
            CounterRequest { attr: clock.attr(), rings, scope: Scope::Cpu(0), pinned: false };
        Perf.open(&request).is_ok()
    })
}

/// The address of the kernel's text (`_stext`, else `_text`) from [`KERNEL_SYMBOLS`], if the
/// kernel shows its addresses (`kernel.kptr_restrict`).
/// Read once per process: the kernel regenerates the file at every read (tens of milliseconds).
fn kernel_text_start() -> Option<u64> {
    static START: PerProcess<Option<u64>> = PerProcess::new();
    *START.get_or_init(read_kernel_text_start)
}

fn read_kernel_text_start() -> Option<u64> {
    let text = std::fs::read_to_string(KERNEL_SYMBOLS).ok()?;
    let find = |name: &str| {
        text.lines().find_map(|line| {
            let mut f = line.split_ascii_whitespace();
            let (addr, _kind, sym) = (f.next()?, f.next()?, f.next()?);
            (sym == name).then(|| u64::from_str_radix(addr, 16).ok()).flatten()
        })
    };
    find("_stext").or_else(|| find("_text")).filter(|&a| a != 0)
}

/// The TSC: RDTSC, which Linux lets user mode execute.
fn rdtsc() -> u64 {
    native::read_tsc()
}

/// `CLOCK_MONOTONIC_RAW` in nanoseconds: the clock perf stamps samples with here (it runs at
/// the TSC's pace, without NTP's adjustments).
fn monotonic_raw_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for clock_gettime to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// How the TSC relates to `CLOCK_MONOTONIC_RAW`: a reading of both, and the TSC's frequency
/// measured over 5 ms (the log's INITIALIZE record gives it to readers).
#[derive(Debug, Clone, Copy)]
struct TscClock {
    tsc: u64,
    ns: u64,
    hz: u64,
}

impl TscClock {
    fn measure() -> TscClock {
        let (ns, tsc) = (monotonic_raw_ns(), rdtsc());
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (ns1, tsc1) = (monotonic_raw_ns(), rdtsc());
        let elapsed = u128::from(ns1.saturating_sub(ns).max(1));
        let hz = (u128::from(tsc1.wrapping_sub(tsc)) * 1_000_000_000 / elapsed) as u64;
        TscClock { tsc, ns, hz }
    }

    /// The TSC value at `ns` of `CLOCK_MONOTONIC_RAW`.
    fn tsc_at(&self, ns: u64) -> u64 {
        let delta = i128::from(ns) - i128::from(self.ns);
        let ticks = delta * i128::from(self.hz) / 1_000_000_000;
        (i128::from(self.tsc) + ticks) as u64
    }
}

/// The kernel services the driver gets on Linux.
pub(crate) struct LinuxKernel {
    ncpu: u32,
    pub(crate) counters: PerfCounters,
    logs: Mutex<BTreeMap<u64, File>>,
    next_log: AtomicU64,
    pub(crate) worker: Worker,
    clock: OnceLock<TscClock>,
}

impl LinuxKernel {
    /// The TSC value (the log's timestamps) of `ns` of `CLOCK_MONOTONIC_RAW`, perf's clock here.
    pub(crate) fn tsc_at(&self, ns: u64) -> u64 {
        self.clock.get_or_init(TscClock::measure).tsc_at(ns)
    }

    /// The kernel of a machine with `ncpu` CPUs and core PMUs `pmus`.
    pub(crate) fn new(ncpu: u32, pmus: CorePmus) -> LinuxKernel {
        Self::with_counters(ncpu, PerfCounters::new(ncpu, super::post, pmus, Box::new(Perf)))
    }

    /// The kernel of a machine with `ncpu` CPUs whose PMCs `counters` count.
    pub(crate) fn with_counters(ncpu: u32, counters: PerfCounters) -> LinuxKernel {
        LinuxKernel {
            ncpu,
            counters,
            logs: Mutex::new(BTreeMap::new()),
            next_log: AtomicU64::new(1),
            worker: Worker::default(),
            clock: OnceLock::new(),
        }
    }
}

impl Kernel for LinuxKernel {
    fn cpu_count(&self) -> u32 {
        self.ncpu
    }

    fn cpu_active(&self, cpu: Cpu) -> bool {
        cpu < self.ncpu
    }

    fn current_cpu(&self) -> Cpu {
        0
    }

    fn run_on_cpu(&self, _cpu: Cpu, f: &mut dyn FnMut()) {
        // Nothing of the driver's is tied to a CPU here: perf runs the counters where they
        // belong.
        f();
    }

    fn current_pid(&self) -> Pid {
        getpid()
    }

    fn current_tid(&self) -> Option<hwpmc::Tid> {
        // SAFETY: gettid has no arguments and cannot fail.
        Some(unsafe { libc::gettid() })
    }

    fn has_privilege(&self, privilege: Privilege) -> bool {
        let allowed = match privilege {
            Privilege::PmcSystem => euid() == 0 || may_count_cpus(),
            Privilege::PmcManage | Privilege::PmcAnyThread => euid() == 0,
        };
        if !allowed {
            let why = match privilege {
                Privilege::PmcSystem => not_allowed("measuring whole CPUs"),
                Privilege::PmcManage => "enabling and disabling rows needs root".into(),
                Privilege::PmcAnyThread => "AnyThread counting needs root".into(),
            };
            explain(Errno::Perm, why);
        }
        allowed
    }

    fn is_jailed(&self) -> bool {
        false
    }

    fn unprivileged_syspmcs(&self) -> bool {
        false
    }

    fn can_debug(&self, target: Pid) -> Result<(), Errno> {
        if process_state_letter(target).is_none() {
            return Err(explain(Errno::Srch, format!("no process {target}")));
        }
        if !same_credentials(target) {
            return Err(explain(Errno::Perm, not_allowed(&format!("measuring process {target}"))));
        }
        Ok(())
    }

    fn may_debug(&self, debugger: Pid, target: Pid) -> bool {
        debugger == getpid() && same_credentials(target)
    }

    fn process_state(&self, pid: Pid) -> ProcessState {
        match process_state_letter(pid) {
            None => ProcessState::NotFound,
            Some('Z' | 'X') => ProcessState::Exiting,
            Some(_) => ProcessState::Alive,
        }
    }

    fn for_each_child(&self, pid: Pid, f: &mut dyn FnMut(Pid)) {
        for tid in numbered_entries(&format!("/proc/{pid}/task")) {
            let path = format!("/proc/{pid}/task/{tid}/children");
            let Ok(children) = std::fs::read_to_string(path) else { continue };
            children.split_whitespace().filter_map(|c| c.parse().ok()).for_each(&mut *f);
        }
    }

    fn copy_in(&self, src: UserPtr, dst: &mut [u8]) -> Result<(), Errno> {
        ARG.with(|a| {
            let a = a.borrow();
            let range = argument_range(src, dst.len(), a.len()).ok_or(Errno::Fault)?;
            dst.copy_from_slice(&a[range]);
            Ok(())
        })
    }

    fn copy_out(&self, src: &[u8], dst: UserPtr) -> Result<(), Errno> {
        ARG.with(|a| {
            let mut a = a.borrow_mut();
            let range = argument_range(dst, src.len(), a.len()).ok_or(Errno::Fault)?;
            a[range].copy_from_slice(src);
            Ok(())
        })
    }

    fn read_kernel_stack(&self, _cpu: Cpu, _addr: u64, _dst: &mut [u8]) -> bool {
        // Never called: the driver takes no interrupt here (perf walks the callchains).
        false
    }

    fn signal(&self, pid: Pid, signal: Signal) {
        // The only owner here is this process. FreeBSD ignores SIGIO unless a process asks for
        // it; Linux's default action would end the process: only a process that handles the
        // signal gets it.
        if pid != getpid() {
            return;
        }
        let signo = match signal {
            Signal::Io => libc::SIGIO,
            Signal::Bus => libc::SIGBUS,
        };
        // SAFETY: an all-zero sigaction is a valid value for sigaction to overwrite; a null
        // new action only reads the current one.
        let handled = unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            libc::sigaction(signo, std::ptr::null(), &mut current) == 0
                && current.sa_sigaction != libc::SIG_DFL
                && current.sa_sigaction != libc::SIG_IGN
        };
        if handled {
            // SAFETY: sends a signal to this process, whose handler for it is installed.
            unsafe { libc::kill(pid, signo) };
        }
    }

    fn set_user_rdpmc(&self, _allowed: bool) {
        // Never called: no PMC here is the driver's to give RDPMC access to.
    }

    fn log_open(&self, fd: i32) -> Result<LogFile, Errno> {
        let file = own_log_descriptor(fd)?;
        let id = self.next_log.fetch_add(1, Ordering::Relaxed);
        lock(&self.logs).insert(id, file);
        Ok(LogFile(id))
    }

    fn log_write(&self, file: LogFile, bytes: &[u8]) -> Result<(), Errno> {
        let mut logs = lock(&self.logs);
        let file = logs.get_mut(&file.0).ok_or(Errno::Badf)?;
        file.write_all(bytes).map_err(|e| {
            let errno = match e.raw_os_error() {
                Some(libc::ENOSPC | libc::EDQUOT) => Errno::NoSpc,
                _ => Errno::Io,
            };
            explain(errno, format!("writing the log failed: {e}"))
        })
    }

    fn log_close(&self, file: LogFile) {
        lock(&self.logs).remove(&file.0);
    }

    fn wake_log_writer(&self) {
        self.worker.wake();
    }

    fn process_path(&self, pid: Pid, buf: &mut [u8]) -> usize {
        let path = super::mount_ns::exe_path(pid);
        let n = path.len().min(buf.len());
        buf[..n].copy_from_slice(&path[..n]);
        n
    }

    fn for_each_executable_mapping(&self, pid: Pid, f: &mut dyn FnMut(u64, u64, &[u8])) {
        // /proc gives the load base of each executable file mapping; its end is not needed
        // (MAP_IN names the start only).
        for (start, path) in unix_process::executable_mappings(pid) {
            // As this namespace finds the file (the process may be in another one).
            f(start, start, &super::mount_ns::locate(pid, &path, None, None).log);
        }
    }

    fn for_each_process(&self, f: &mut dyn FnMut(Pid)) {
        numbered_entries("/proc").into_iter().for_each(f);
    }

    fn for_each_kernel_image(&self, f: &mut dyn FnMut(u64, &[u8])) {
        // The kernel as one image at its text, named by its symbol table: log readers take the
        // kernel's function names from that file.
        if let Some(start) = kernel_text_start() {
            f(start, KERNEL_SYMBOLS.as_bytes());
        }
    }

    fn nanotime(&self) -> (i64, i64) {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        (now.as_secs() as i64, i64::from(now.subsec_nanos()))
    }

    fn tsc_frequency(&self) -> u64 {
        self.clock.get_or_init(TscClock::measure).hz
    }

    fn enter_critical_section(&self) -> CriticalSection {
        // Every signal blocked on this thread: a handler that calls libpmc cannot run inside a
        // driver lock its own thread holds (see `critical`).
        CriticalSection(critical::block_signals())
    }

    fn exit_critical_section(&self, section: CriticalSection) {
        critical::restore_signals(section.0);
    }

    fn host_counters(&self) -> Option<&dyn HostCounters> {
        Some(&self.counters)
    }
}

/// The log's own reference to descriptor `fd`: EBADF unless it is open for writing and is a
/// file, a pipe, a socket or a character device.
fn own_log_descriptor(fd: RawFd) -> Result<File, Errno> {
    let badf = |why: &str| explain(Errno::Badf, format!("descriptor {fd} {why}"));
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
        return Err(explain(Errno::NoMem, "no descriptor is left to keep the log open"));
    }
    // SAFETY: `own` is a fresh descriptor nothing else owns.
    Ok(unsafe { File::from_raw_fd(own) })
}

/// The CPU as the driver sees it on Linux: CPUID and RDTSC are this CPU's; the PMU's MSRs are
/// Linux's (perf programs them), so reads give 0 and writes go nowhere — the driver writes them
/// only to program classes it counts itself, and here perf counts them all.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinuxCpu {
    /// Whether perf can count this CPU's hardware events; when it cannot, CPUID leaf 0xA reads
    /// as "no architectural perfmon", so the driver offers no IAP/IAF rows to fail later.
    pub(crate) pmu_usable: bool,
}

// The driver programs no counter here (perf does): the accesses do nothing.
impl Msrs for LinuxCpu {
    unsafe fn read_msr(&self, _msr: u32) -> u64 {
        0
    }
    unsafe fn write_msr(&self, _msr: u32, _value: u64) {}
    unsafe fn read_pmc(&self, _index: u32) -> u64 {
        0
    }
}

impl Lapic for LinuxCpu {
    fn unmask_pmi(&self) {}
    fn mask_pmi(&self) {}
}

/// CPUID of this CPU, with the counters hidden when perf cannot count hardware events: Intel's
/// leaf 0xA reads as zero, and an AMD CPU reads as a guest that advertises no counters (the
/// hypervisor bit, CPUID.1:ECX\[31\], set; PerfCtrExtCore, 8000_0001h ECX\[23\], clear;
/// 8000_0022h zero), which the driver's AMD discovery takes as no PMU.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinuxCpuid {
    hide_pmu: bool,
}

impl CpuIdReader for LinuxCpuid {
    fn cpuid2(&self, eax: u32, ecx: u32) -> CpuIdResult {
        let real = NativeCpuid.cpuid2(eax, ecx);
        if !self.hide_pmu {
            return real;
        }
        match eax {
            0xA | 0x8000_0022 => CpuIdResult { eax: 0, ebx: 0, ecx: 0, edx: 0 },
            1 => CpuIdResult { ecx: real.ecx | 1 << 31, ..real },
            0x8000_0001 => CpuIdResult { ecx: real.ecx & !(1 << 23), ..real },
            _ => real,
        }
    }
}

impl Hardware for LinuxCpu {
    type Cpuid = LinuxCpuid;

    fn cpuid(&self) -> LinuxCpuid {
        LinuxCpuid { hide_pmu: !self.pmu_usable }
    }

    fn read_tsc(&self) -> u64 {
        rdtsc()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_pmu_is_described_by_neither_vendor_s_cpuid() {
        use hwpmc::arch::x86::amd::discovery::AmdPmu;
        let hidden = LinuxCpuid { hide_pmu: true };
        assert_eq!(AmdPmu::discover(&hidden), None, "no AMD core counters");
        assert_eq!(hidden.cpuid1(0xA), CpuIdResult { eax: 0, ebx: 0, ecx: 0, edx: 0 });
        assert_eq!(hidden.cpuid1(0x8000_0001).ecx & 1 << 23, 0, "no PerfCtrExtCore");
        // The rest of CPUID is the CPU's own.
        let shown = LinuxCpuid { hide_pmu: false };
        assert_eq!(hidden.cpuid1(0), shown.cpuid1(0));
    }

    #[test]
    fn copies_reach_the_argument_and_nothing_else() {
        let kernel = LinuxKernel::new(1, CorePmus::default());
        let mut arg = [1u8, 2, 3, 4];
        with_argument(&mut arg, |ptr| {
            let mut two = [0u8; 2];
            kernel.copy_in(UserPtr(ptr.0 + 2), &mut two).unwrap();
            assert_eq!(two, [3, 4]);
            assert_eq!(kernel.copy_in(UserPtr(ptr.0 + 3), &mut two), Err(Errno::Fault));
            assert_eq!(kernel.copy_in(UserPtr::NULL, &mut two), Err(Errno::Fault));
            assert_eq!(kernel.copy_in(UserPtr(u64::MAX), &mut two), Err(Errno::Fault));
            kernel.copy_out(&[9, 9], ptr).unwrap();
            assert_eq!(kernel.copy_out(&[9; 5], ptr), Err(Errno::Fault));
        });
        assert_eq!(arg, [9, 9, 3, 4], "what the driver wrote reaches the caller");
    }

    #[test]
    fn an_explanation_goes_with_its_errno_only() {
        use super::call_detail::explanation;
        let mut arg = [0u8; 1];
        with_argument(&mut arg, |_| {
            explain(Errno::Perm, "why");
            assert_eq!(explanation(Errno::Inval), None);
        });
        with_argument(&mut arg, |_| {
            explain(Errno::Perm, "why");
            assert_eq!(explanation(Errno::Perm).as_deref(), Some("why"));
        });
    }

    #[test]
    fn the_drivers_critical_section_blocks_every_signal_and_restores_the_mask() {
        let kernel = LinuxKernel::new(1, CorePmus::default());
        let mask = || {
            let saved = critical::block_signals();
            critical::restore_signals(saved);
            saved
        };
        let before = mask();
        let section = kernel.enter_critical_section();
        assert_eq!(section.0, before, "the section keeps the thread's mask");
        let inside = mask();
        // Every signal but the two that cannot be blocked (and the two glibc keeps for itself
        // between the classic and the real-time ones, which no handler of ours can catch).
        let signals = (1..32).chain(libc::SIGRTMIN()..=libc::SIGRTMAX());
        for signo in signals.filter(|&s| s != libc::SIGKILL && s != libc::SIGSTOP) {
            assert_ne!(inside & 1 << (signo - 1), 0, "signal {signo} blocked inside");
        }
        kernel.exit_critical_section(section);
        assert_eq!(mask(), before);
    }

    #[test]
    fn this_process_may_measure_itself_and_not_a_process_that_is_gone() {
        let kernel = LinuxKernel::new(1, CorePmus::default());
        assert_eq!(kernel.can_debug(getpid()), Ok(()));
        let max: i32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .map_or(4_194_304, |s| s.trim().parse().unwrap());
        assert_eq!(kernel.can_debug(max + 1), Err(Errno::Srch));
        assert_eq!(kernel.process_state(max + 1), ProcessState::NotFound);
        assert_eq!(kernel.process_state(getpid()), ProcessState::Alive);
    }
}
