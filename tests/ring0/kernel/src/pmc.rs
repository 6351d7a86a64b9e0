//! The driver in this kernel: `impl hwpmc::Kernel`, the hardware it is loaded with, and the
//! calls from the kernel's paths into the driver's entry points and hooks.
//!
//! Every entry point is called with interrupts disabled (system calls, the scheduler, interrupt
//! handlers), so the driver's locks, taken in its critical section with interrupts disabled too,
//! are never held by code an interrupt on the same CPU could interrupt; only the NMI can, and
//! the driver's NMI path takes no lock.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use hwpmc::arch::x86::native::{NativeCpu, NativeCpuid};
use hwpmc::hw::{Hardware, Lapic, Msrs};
use hwpmc::{
    Cpu, CriticalSection, Driver, Errno, ExecInfo, Kernel, LogFile, Pid, Privilege, ProcessState,
    Signal, Tid, Tunables, UserPtr,
};

use crate::frame::TrapFrame;
use crate::hooks::{self, Hooks};
use crate::percpu::{self, MAX_CPUS};
use ring0_abi as abi;

use crate::{console, memory, sched};

/// The CPU the driver programs: MSRs, RDPMC and CPUID are `NativeCpu`'s; the performance-counter
/// entry of the local APIC is the kernel's, which runs it in x2APIC mode when the CPU has it and
/// in xAPIC mode otherwise (`NativeCpu`'s own entry assumes x2APIC).
pub struct KernelCpu(NativeCpu);

impl Msrs for KernelCpu {
    unsafe fn read_msr(&self, msr: u32) -> u64 {
        // SAFETY: the driver's contract (the MSR exists), passed on.
        unsafe { self.0.read_msr(msr) }
    }
    unsafe fn write_msr(&self, msr: u32, value: u64) {
        // SAFETY: the driver's contract (an existing PMU MSR, no reserved bit), passed on.
        unsafe { self.0.write_msr(msr, value) }
    }
    unsafe fn read_pmc(&self, index: u32) -> u64 {
        // SAFETY: the driver's contract (the counter exists), passed on.
        unsafe { self.0.read_pmc(index) }
    }
}

impl Lapic for KernelCpu {
    fn unmask_pmi(&self) {
        crate::apic::set_pmi(false);
    }
    fn mask_pmi(&self) {
        crate::apic::set_pmi(true);
    }
}

impl Hardware for KernelCpu {
    type Cpuid = NativeCpuid;
    fn cpuid(&self) -> NativeCpuid {
        NativeCpuid
    }
    fn read_tsc(&self) -> u64 {
        crate::cpu::rdtsc()
    }
}

/// The kernel's services to the driver (all its state is the kernel's own globals).
pub struct Services;

/// The driver type of this kernel.
pub type Hwpmc = Driver<Services, KernelCpu>;

static DRIVER: spin::Once<Hwpmc> = spin::Once::new();
/// Whether the hooks call the driver (from load to unload).
static LOADED: AtomicBool = AtomicBool::new(false);
/// The event code of CLOCK.HARD.
static CLOCK_EVENT: AtomicU32 = AtomicU32::new(0);
/// Whether the timer fires CLOCK.HARD (the test program arms it).
static CLOCK_ARMED: AtomicBool = AtomicBool::new(false);
/// The kernel's own count of CLOCK.HARD events fired on each CPU, and while each pid ran.
static FIRED_ON_CPU: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
static FIRED_FOR_PID: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];
/// Set by `wake_log_writer`; the timer then calls `write_logs`.
static LOG_WRITER_WANTED: AtomicBool = AtomicBool::new(false);
/// Bytes the driver wrote to the log device, and the signals it sent.
pub static LOG_BYTES: AtomicU64 = AtomicU64::new(0);
pub static SIGNALS: AtomicU64 = AtomicU64::new(0);

fn driver() -> Option<&'static Hwpmc> {
    if LOADED.load(Ordering::Acquire) { DRIVER.get() } else { None }
}

/// Loads the driver on every online CPU and registers CLOCK.HARD.
pub fn load() -> Result<(), hwpmc::LoadError> {
    // SAFETY: the kernel runs in ring 0 and hands the PMU to the driver alone.
    let hw = KernelCpu(unsafe { NativeCpu::new() });
    let tunables = Tunables {
        callchain_depth: 32,
        log_buffer_kib: 64,
        log_buffers_per_cpu: 8,
        ..Tunables::default()
    };
    let driver = Driver::load(Services, hw, tunables)?;
    let code = driver.register_soft_event("CLOCK.HARD").expect("a fresh driver registers an event");
    CLOCK_EVENT.store(code, Ordering::Relaxed);
    DRIVER.call_once(|| driver);
    LOADED.store(true, Ordering::Release);
    hooks::install(&HOOKS);
    Ok(())
}

/// The driver's `kern.hwpmc.cpuid` string.
pub fn cpuid_string() -> alloc::string::String {
    DRIVER
        .get()
        .map(|d| alloc::string::String::from_utf8_lossy(d.cpuid().as_bytes()).into_owned())
        .unwrap_or_default()
}

/// Unloads the driver (every process has ended).
pub fn unload() {
    if let Some(driver) = driver() {
        hooks::remove();
        driver.unload();
        LOADED.store(false, Ordering::Release);
    }
}

/// The hwpmc system call.
pub fn syscall(op: u32, arg: u64) -> Result<(), Errno> {
    driver().ok_or(Errno::NoSys)?.syscall(op, UserPtr(arg))
}

/// The scheduler's and process code's way in (`hooks.rs`).
static HOOKS: Hooks = Hooks {
    switch_in,
    switch_out,
    process_fork,
    process_exec,
    process_exit,
    thread_create,
    thread_exit,
    mmap,
};

fn hook(f: impl FnOnce(&Hwpmc)) {
    if let Some(driver) = driver() {
        f(driver);
    }
}

fn switch_in(cpu: Cpu, pid: Pid, tid: Tid) {
    hook(|d| d.switch_in(cpu, pid, tid));
}
fn switch_out(cpu: Cpu, pid: Pid, tid: Tid) {
    hook(|d| d.switch_out(cpu, pid, tid));
}
fn process_fork(parent: Pid, child: Pid) {
    hook(|d| d.process_fork(parent, child));
}
fn process_exec(pid: Pid, path: &[u8]) {
    hook(|d| {
        d.process_exec(
            pid,
            &ExecInfo { path, base_addr: 0, dyn_addr: 0, credentials_changed: false },
        )
    });
}
fn process_exit(pid: Pid) {
    hook(|d| d.process_exit(pid));
}
fn thread_create(pid: Pid, tid: Tid) {
    hook(|d| d.thread_create(pid, tid));
}
fn thread_exit(pid: Pid, tid: Tid) {
    hook(|d| d.thread_exit(pid, tid));
}
fn mmap(pid: Pid, start: u64, end: u64, path: &[u8]) {
    hook(|d| d.mmap(pid, start, end, path));
}

fn driver_frame(frame: &TrapFrame) -> hwpmc::TrapFrame {
    hwpmc::TrapFrame { pc: frame.rip, fp: frame.rbp, sp: frame.rsp, user: frame.is_user() }
}

/// The return-to-user hook (every return to ring 3 but the NMI's).
pub fn user_return(cpu: Cpu, pid: Pid, tid: Tid, frame: &TrapFrame) {
    hook(|d| d.user_return(cpu, pid, tid, &driver_frame(frame)));
}

/// The PMI (from the NMI handler): whether a counter of the driver overflowed.
pub fn interrupt(cpu: Cpu, frame: &TrapFrame) -> bool {
    driver().is_some_and(|d| d.interrupt(cpu, &driver_frame(frame)))
}

/// The timer's work for the driver on `cpu`: fire CLOCK.HARD when armed (counting it), drain the
/// CPU's samples, and write full log buffers when the driver asked for it.
pub fn clock_tick(cpu: Cpu, frame: &TrapFrame) {
    let Some(driver) = driver() else { return };
    if CLOCK_ARMED.load(Ordering::Acquire) {
        FIRED_ON_CPU[cpu as usize].fetch_add(1, Ordering::Relaxed);
        let pid = percpu::this().current.load(Ordering::Relaxed);
        if !pid.is_null() {
            // SAFETY: the thread running on this CPU is alive while its CPU handles its interrupt.
            let pid = unsafe { (*pid).pid } as usize;
            if let Some(count) = FIRED_FOR_PID.get(pid) {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        driver.soft_event(cpu, CLOCK_EVENT.load(Ordering::Relaxed), &driver_frame(frame));
    }
    driver.tick(cpu);
    if LOG_WRITER_WANTED.swap(false, Ordering::AcqRel) {
        driver.write_logs();
    }
}

/// Arms or disarms CLOCK.HARD; arming zeroes the kernel's counts.
pub fn arm_clock(on: bool) {
    if on {
        FIRED_ON_CPU.iter().chain(FIRED_FOR_PID.iter()).for_each(|c| c.store(0, Ordering::Relaxed));
    }
    CLOCK_ARMED.store(on, Ordering::Release);
}

/// The kernel's count of CLOCK.HARD events fired on CPU `which` (`kind` 0) or for process `which`
/// (`kind` 1).
pub fn clock_count(kind: u64, which: u64) -> Option<u64> {
    let table: &[AtomicU64] = if kind == 0 { &FIRED_ON_CPU } else { &FIRED_FOR_PID };
    Some(table.get(which as usize)?.load(Ordering::Relaxed))
}

/// The pid of the thread running on this CPU (0, the kernel's, when none).
fn current_pid() -> Pid {
    let thread = percpu::this().current.load(Ordering::Relaxed);
    // SAFETY: the running thread is alive while it runs here, and the caller runs on it.
    if thread.is_null() { 0 } else { unsafe { (*thread).pid } }
}

impl Kernel for Services {
    fn cpu_count(&self) -> u32 {
        percpu::online_count()
    }
    fn cpu_active(&self, cpu: Cpu) -> bool {
        (cpu as usize) < MAX_CPUS && percpu::cpu(cpu).online.load(Ordering::Acquire)
    }
    fn current_cpu(&self) -> Cpu {
        percpu::index()
    }
    fn run_on_cpu(&self, cpu: Cpu, f: &mut dyn FnMut()) {
        crate::ipi::run_on_cpu(cpu, f);
    }

    fn current_pid(&self) -> Pid {
        current_pid()
    }
    fn has_privilege(&self, _privilege: Privilege) -> bool {
        // One user: every process may do everything.
        true
    }
    fn is_jailed(&self) -> bool {
        false
    }
    fn unprivileged_syspmcs(&self) -> bool {
        false
    }
    fn can_debug(&self, target: Pid) -> Result<(), Errno> {
        match self.process_state(target) {
            ProcessState::NotFound => Err(Errno::Srch),
            _ => Ok(()),
        }
    }
    fn may_debug(&self, _debugger: Pid, _target: Pid) -> bool {
        true
    }
    fn process_state(&self, pid: Pid) -> ProcessState {
        sched::with_processes(|p| match p.iter().find(|p| p.pid == pid) {
            None => ProcessState::NotFound,
            Some(p) if p.exited || p.threads == 0 => ProcessState::Exiting,
            Some(_) => ProcessState::Alive,
        })
    }
    fn for_each_child(&self, pid: Pid, f: &mut dyn FnMut(Pid)) {
        let children: alloc::vec::Vec<Pid> = sched::with_processes(|p| {
            p.iter().filter(|c| c.parent == pid && !c.exited).map(|c| c.pid).collect()
        });
        children.into_iter().for_each(f);
    }

    fn copy_in(&self, src: UserPtr, dst: &mut [u8]) -> Result<(), Errno> {
        if !memory::is_user_range(src.0, dst.len()) {
            return Err(Errno::Fault);
        }
        // SAFETY: the range is user memory (checked), always mapped in the one address space.
        unsafe { core::ptr::copy_nonoverlapping(src.0 as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }
    fn copy_out(&self, src: &[u8], dst: UserPtr) -> Result<(), Errno> {
        if !memory::is_user_range(dst.0, src.len()) {
            return Err(Errno::Fault);
        }
        // SAFETY: as in `copy_in`.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst.0 as *mut u8, src.len()) };
        Ok(())
    }
    fn read_kernel_stack(&self, cpu: Cpu, addr: u64, dst: &mut [u8]) -> bool {
        // The bounds of the thread running on `cpu` (this CPU), 0..0 when none runs.
        let this = percpu::this();
        if this.index != cpu {
            return false;
        }
        let (lo, hi) =
            (this.kstack_lo.load(Ordering::Relaxed), this.kstack_hi.load(Ordering::Relaxed));
        let inside = addr >= lo && addr.checked_add(dst.len() as u64).is_some_and(|end| end <= hi);
        if !inside || lo == hi {
            return false;
        }
        // SAFETY: `addr..addr + len` lies in the kernel stack of the thread running here, which
        // is mapped and stays allocated while it runs.
        unsafe { core::ptr::copy_nonoverlapping(addr as *const u8, dst.as_mut_ptr(), dst.len()) };
        true
    }
    fn signal(&self, pid: Pid, signal: Signal) {
        SIGNALS.fetch_add(1, Ordering::Relaxed);
        crate::println!("ring0: signal {signal:?} to process {pid}");
    }

    fn set_user_rdpmc(&self, allowed: bool) {
        // SAFETY: CR4.PCE (bit 8) only decides whether ring 3 may execute RDPMC.
        unsafe { crate::cpu::set_cr4_bit(8, allowed) }
    }

    fn log_open(&self, fd: i32) -> Result<LogFile, Errno> {
        if fd == abi::LOG_FD { Ok(LogFile(fd as u64)) } else { Err(Errno::Badf) }
    }
    fn log_write(&self, file: LogFile, bytes: &[u8]) -> Result<(), Errno> {
        if file.0 != abi::LOG_FD as u64 {
            return Err(Errno::Badf);
        }
        console::write_log(bytes);
        LOG_BYTES.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }
    fn log_close(&self, _file: LogFile) {}
    fn wake_log_writer(&self) {
        LOG_WRITER_WANTED.store(true, Ordering::Release);
    }
    fn process_path(&self, pid: Pid, buf: &mut [u8]) -> usize {
        let path = sched::with_processes(|p| p.iter().find(|p| p.pid == pid).map(|p| p.path))
            .unwrap_or(b"");
        let len = path.len().min(buf.len());
        buf[..len].copy_from_slice(&path[..len]);
        len
    }

    fn for_each_executable_mapping(&self, pid: Pid, f: &mut dyn FnMut(u64, u64, &[u8])) {
        let path =
            sched::with_processes(|p| p.iter().find(|p| p.pid == pid && !p.exited).map(|p| p.path));
        if let Some(path) = path {
            let (start, end) = crate::user::image_range();
            f(start, end, path);
        }
    }
    fn for_each_process(&self, f: &mut dyn FnMut(Pid)) {
        let pids: alloc::vec::Vec<Pid> =
            sched::with_processes(|p| p.iter().filter(|p| !p.exited).map(|p| p.pid).collect());
        pids.into_iter().for_each(f);
    }
    fn for_each_kernel_image(&self, f: &mut dyn FnMut(u64, &[u8])) {
        f(0x10_0000, b"/boot/ring0-kernel");
    }

    fn nanotime(&self) -> (i64, i64) {
        let ns = crate::time::nanos_since_boot();
        ((ns / 1_000_000_000) as i64, (ns % 1_000_000_000) as i64)
    }
    fn tsc_frequency(&self) -> u64 {
        crate::time::tsc_hz()
    }

    fn enter_critical_section(&self) -> CriticalSection {
        CriticalSection(u64::from(crate::cpu::disable_interrupts()))
    }
    fn exit_critical_section(&self, section: CriticalSection) {
        crate::cpu::restore_interrupts(section.0 != 0);
    }
}
