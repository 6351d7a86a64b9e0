//! The ring-3 test program of the example kernel (see `tests/ring0/kernel`). Process 1 runs it
//! with role `ROLE_TEST`: it uses hwpmc through the system call as a FreeBSD program does
//! through libpmc, and prints `RESULT` lines that `tests/ring0/check` compares with the kernel's
//! own counts and with the log. Process 2, which it spawns, runs it with role `ROLE_SPINNER` and
//! spins until process 1 ends.
//!
//! Every process runs the one copy of this program, so it has no writable statics.
#![no_std]
#![no_main]

mod pmc;
mod sys;

use core::sync::atomic::{AtomicU32, Ordering};

use ring0_abi as abi;

use hwpmc::abi::{Class, Mode, Op, PmcFlags, event};

use crate::pmc::{Errno, Request};

/// How long the counting and the sampling phases spin.
const COUNT_MS: u64 = 300;
const SAMPLE_MS: u64 = 300;
/// Sampling reloads (events between samples) of the SOFT sampling PMCs.
const SYSTEM_RELOAD: u64 = 3;
const PROCESS_RELOAD: u64 = 2;
/// Threads the sampling phase adds to the test process.
const THREADS: u32 = 2;

#[unsafe(no_mangle)]
#[unsafe(link_section = ".text.start")]
extern "C" fn _start(role: u64) -> ! {
    match role {
        abi::ROLE_TEST => {
            if let Err(e) = test() {
                say!("RESULT FAIL hwpmc system call failed: errno {}", e.0);
            }
        }
        // The spinner spins until the test (process 1) ends, so it runs through every phase.
        _ => {
            while sys::call(abi::SYS_PROC_ALIVE, 1, 0, 0) == 1 {
                work_outer();
            }
        }
    }
    sys::exit_thread()
}

/// Three calls deep, so that samples taken here have a user callchain to check.
#[inline(never)]
#[unsafe(no_mangle)]
fn work_outer() {
    work_middle();
    core::hint::black_box(());
}

#[inline(never)]
#[unsafe(no_mangle)]
fn work_middle() {
    work_inner();
    core::hint::black_box(());
}

#[inline(never)]
#[unsafe(no_mangle)]
fn work_inner() {
    let mut x = 1u64;
    for i in 0..20_000u64 {
        x = core::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
}

/// A thread of the sampling phase: spins in `work_outer`, then counts itself done.
extern "C" fn worker(done: u64) -> ! {
    sys::spin_for(SAMPLE_MS, work_outer);
    // SAFETY: `done` is the address of the `AtomicU32` the test's main thread keeps on its stack
    // until this counter reaches `THREADS`.
    unsafe { (*(done as *const AtomicU32)).fetch_add(1, Ordering::Release) };
    sys::exit_thread()
}

fn arm_clock(on: bool) {
    sys::call(abi::SYS_CLOCK_ARM, u64::from(on), 0, 0);
}

fn clock_count(kind: u64, which: u64) -> u64 {
    sys::call(abi::SYS_CLOCK_COUNT, kind, which, 0) as u64
}

fn test() -> Result<(), Errno> {
    let pid = sys::call(abi::SYS_GETPID, 0, 0, 0) as i32;
    let ncpu = (sys::call(abi::SYS_NCPU, 0, 0, 0) as u32).min(8);
    say!("user: pmctest is process {pid}, {ncpu} CPUs");

    // The kernel checks user pointers: GETCPUINFO into kernel memory, or into a buffer that runs
    // past the end of user memory, fails with EFAULT and writes nothing.
    let errno = |arg: u64| -sys::call(abi::SYS_HWPMC, u64::from(Op::GetCpuInfo.as_u32()), arg, 0);
    let straddling = abi::USER_END - 16;
    say!("RESULT efault kernel={} straddling={}", errno(0x10_0000), errno(straddling));

    let info = pmc::cpu_info()?;
    let classes = &info.pm_classes[..(info.pm_nclass as usize).min(info.pm_classes.len())];
    // Retired instructions: a fixed counter (IAF) when there is one, else a programmable one.
    let mut hardware = None;
    for c in classes {
        let class = Class::from_u32(c.pm_class);
        say!("user: class {:?} width {} count {}", class, c.pm_width, c.pm_num);
        match class {
            Some(Class::Iaf) => hardware = Some(instructions(Class::Iaf)),
            Some(Class::Iap) if hardware.is_none() => hardware = Some(instructions(Class::Iap)),
            Some(Class::Tsc | Class::Soft) => {}
            Some(other) if hardware.is_none() => {
                say!(
                    "RESULT FAIL the driver offers {other:?}, whose events this test does not know"
                );
            }
            _ => {}
        }
    }
    let Some(clock) = pmc::soft_event("CLOCK.HARD")? else {
        say!("RESULT FAIL no CLOCK.HARD software event");
        return Ok(());
    };
    let spinner = sys::call(abi::SYS_SPAWN, abi::ROLE_SPINNER, 0, 0);
    say!("user: spawned the spinner, process {spinner}");

    count(pid, ncpu, clock)?;
    sample(ncpu, clock)?;
    match hardware {
        Some(request) => hardware_events(request)?,
        None => {
            // CPUID is allowed in ring 3: say what the CPU reports about its PMU.
            let max_leaf = core::arch::x86_64::__cpuid(0).eax;
            let version =
                if max_leaf >= 0xA { core::arch::x86_64::__cpuid(0xA).eax & 0xFF } else { 0 };
            say!(
                "RESULT pmu absent: no hardware PMC class (CPUID leaf 0xA: PMU version {version})"
            );
        }
    }
    say!("RESULT test done");
    Ok(())
}

/// TSC and SOFT counting, system and process scope, compared with the kernel's own count of the
/// events it fired while armed (the PMCs run from before the arming to after the disarming).
fn count(pid: i32, ncpu: u32, clock: u32) -> Result<(), Errno> {
    let mut tsc = [0u32; 8];
    let mut soft = [0u32; 8];
    for cpu in 0..ncpu as usize {
        tsc[cpu] = pmc::allocate(Request::new(
            Class::Tsc,
            event::TSC_TSC,
            Mode::SystemCounting,
            Some(cpu as u32),
        ))?;
        soft[cpu] = pmc::allocate(Request::new(
            Class::Soft,
            clock,
            Mode::SystemCounting,
            Some(cpu as u32),
        ))?;
        pmc::start(tsc[cpu])?;
        pmc::start(soft[cpu])?;
    }
    let own = pmc::allocate(Request::new(Class::Soft, clock, Mode::ThreadCounting, None))?;
    pmc::attach(own, 0)?;
    pmc::start(own)?;
    let mut first = [0u64; 8];
    for cpu in 0..ncpu as usize {
        first[cpu] = pmc::read(tsc[cpu])?;
    }
    arm_clock(true);
    sys::spin_for(COUNT_MS, work_outer);
    arm_clock(false);
    for &id in &soft[..ncpu as usize] {
        pmc::stop(id)?;
    }
    pmc::stop(own)?;
    for cpu in 0..ncpu as usize {
        let second = pmc::read(tsc[cpu])?;
        say!("RESULT tsc cpu={cpu} first={} second={second}", first[cpu]);
        let counted = pmc::read(soft[cpu])?;
        say!("RESULT soft-system cpu={cpu} pmc={counted} kernel={}", clock_count(0, cpu as u64));
    }
    let counted = pmc::read(own)?;
    say!("RESULT soft-process pid={pid} pmc={counted} kernel={}", clock_count(1, pid as u64));
    for cpu in 0..ncpu as usize {
        pmc::stop(tsc[cpu])?;
        pmc::release(tsc[cpu])?;
        pmc::release(soft[cpu])?;
    }
    pmc::release(own)
}

/// SOFT sampling with callchains into the log: system scope on every CPU and process scope on
/// this process, while its main thread spins in the kernel (SYS_KWORK) and in ring 3 and two
/// more threads spin in ring 3.
fn sample(ncpu: u32, clock: u32) -> Result<(), Errno> {
    pmc::configure_log()?;
    let mut system = [0u32; 8];
    for (cpu, id) in system[..ncpu as usize].iter_mut().enumerate() {
        let request = Request::new(Class::Soft, clock, Mode::SystemSampling, Some(cpu as u32));
        *id = pmc::allocate(request.sampling_every(SYSTEM_RELOAD))?;
        pmc::start(*id)?;
        say!("RESULT sampling system cpu={cpu} pmcid={id:#x}");
    }
    let own = pmc::allocate(
        Request::new(Class::Soft, clock, Mode::ThreadSampling, None).sampling_every(PROCESS_RELOAD),
    )?;
    pmc::attach(own, 0)?;
    pmc::start(own)?;
    say!("RESULT sampling process pmcid={own:#x}");

    arm_clock(true);
    let done = AtomicU32::new(0);
    for _ in 0..THREADS {
        let tid = sys::call(
            abi::SYS_THREAD_CREATE,
            worker as *const () as u64,
            &done as *const AtomicU32 as u64,
            0,
        );
        say!("user: started thread {tid}");
    }
    sys::call(abi::SYS_KWORK, 100, 0, 0);
    sys::spin_for(SAMPLE_MS / 2, work_outer);
    while done.load(Ordering::Acquire) < THREADS {
        sys::call(abi::SYS_YIELD, 0, 0, 0);
    }
    arm_clock(false);

    pmc::stop(own)?;
    pmc::release(own)?;
    for &id in &system[..ncpu as usize] {
        pmc::stop(id)?;
        pmc::release(id)?;
    }
    pmc::flush_log()?;
    pmc::close_log()
}

/// A request for retired instructions in `class` (IAF or IAP), process counting.
fn instructions(class: Class) -> Request {
    match class {
        Class::Iaf => Request::new(class, event::IAF_INSTR_RETIRED_ANY, Mode::ThreadCounting, None),
        _ => {
            // INST_RETIRED.ANY_P (event 0xC0, umask 0) in user and kernel mode, enabled, as an
            // IA32_PERFEVTSELx image (PMC_F_EV_PMU, as libpmc sends PMU events).
            let mut request = Request::new(class, 0, Mode::ThreadCounting, None);
            request.flags = PmcFlags::EV_PMU;
            request.iap_config = 0x0043_00C0;
            request
        }
    }
}

/// On a CPU whose PMU the driver drives: count retired instructions in process scope, and
/// sample them into a log with callchains.
fn hardware_events(counting: Request) -> Result<(), Errno> {
    let counter = pmc::allocate(counting)?;
    pmc::attach(counter, 0)?;
    pmc::start(counter)?;
    sys::spin_for(50, work_outer);
    pmc::stop(counter)?;
    say!("RESULT hardware instructions={}", pmc::read(counter)?);
    pmc::release(counter)?;

    pmc::configure_log()?;
    let sampling = Request { mode: Mode::ThreadSampling, ..counting };
    let sampler = pmc::allocate(sampling.sampling_every(1_000_000))?;
    pmc::attach(sampler, 0)?;
    pmc::start(sampler)?;
    say!("RESULT sampling hardware pmcid={sampler:#x}");
    sys::spin_for(50, work_outer);
    pmc::stop(sampler)?;
    pmc::release(sampler)?;
    pmc::flush_log()?;
    pmc::close_log()
}

/// The program allocates nothing (it uses `hwpmc` only for its ABI structs, and that crate links
/// `alloc`): any allocation fails.
struct NoHeap;

// SAFETY: `alloc` returns null, which `GlobalAlloc` allows (an allocation failure); `dealloc` is
// never called with memory this allocator gave.
unsafe impl core::alloc::GlobalAlloc for NoHeap {
    unsafe fn alloc(&self, _layout: core::alloc::Layout) -> *mut u8 {
        core::ptr::null_mut()
    }
    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: core::alloc::Layout) {}
}

#[global_allocator]
static HEAP: NoHeap = NoHeap;

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    say!("RESULT FAIL user panic: {info}");
    sys::exit_thread()
}
