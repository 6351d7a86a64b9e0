//! Processes, threads and the scheduler: one run queue for all CPUs, a scheduler loop on each
//! CPU's own stack that switches to a thread and back (a thread gives the CPU up with [`leave`]),
//! preemption at the end of a time slice when a thread is interrupted in ring 3.
//!
//! The context-switch hooks of the driver run here (through `hooks.rs`): `switch_in` on the CPU just before it
//! switches to a thread, `switch_out` on the thread's CPU just before it leaves. The kernel never
//! calls the driver while it holds one of its own locks (the driver calls back into the kernel).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicU64, Ordering};

use crate::frame::{TrapFrame, trap_return};
use crate::gdt;
use crate::hooks;
use crate::percpu::{self, Cpu};
use crate::thread::{EXITED, RUNNABLE, RUNNING, Thread};
use ring0_abi as abi;

/// Bytes of each thread's kernel stack.
const KSTACK: usize = 64 * 1024;
/// Timer ticks a thread runs in ring 3 before it is preempted.
pub const SLICE: u32 = 4;

/// A thread on the run queue (owned by it).
struct Queued(*mut Thread);
// SAFETY: a queued thread is owned by the queue alone; the CPU that takes it owns it until it
// puts it back.
unsafe impl Send for Queued {}

/// A process: threads share its (the one) address space.
pub struct Process {
    pub pid: i32,
    pub parent: i32,
    pub path: &'static [u8],
    pub threads: u32,
    pub exited: bool,
}

static RUN_QUEUE: spin::Mutex<VecDeque<Queued>> = spin::Mutex::new(VecDeque::new());
static PROCESSES: spin::Mutex<Vec<Process>> = spin::Mutex::new(Vec::new());
static NEXT_PID: AtomicI32 = AtomicI32::new(1);
static NEXT_TID: AtomicI32 = AtomicI32::new(100_001);
static NEXT_USER_STACK: AtomicU64 = AtomicU64::new(abi::USER_STACKS_BASE);
/// Set by the BSP when every process has ended: the scheduler loops stop.
static SHUTDOWN: AtomicBool = AtomicBool::new(false);

unsafe extern "C" {
    /// Saves the callee-saved registers and the stack pointer at `save`, switches to `next`.
    fn switch_context(save: *mut u64, next: u64);
}

core::arch::global_asm!(
    r#"
    .section .text
    .global switch_context
switch_context:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    "#,
    options(att_syntax)
);

/// Calls `f` with the process table (the caller holds no other lock, and calls no driver entry).
pub fn with_processes<R>(f: impl FnOnce(&mut Vec<Process>) -> R) -> R {
    let saved = crate::cpu::disable_interrupts();
    let result = f(&mut PROCESSES.lock());
    crate::cpu::restore_interrupts(saved);
    result
}

/// Creates process `parent`'s child running the user program (its path `path`) with `role`:
/// fork and exec in one, with the driver's fork, exec, mapping and thread hooks. Returns its pid.
pub fn spawn_process(parent: i32, path: &'static [u8], role: u64) -> i32 {
    let pid = NEXT_PID.fetch_add(1, Ordering::Relaxed);
    with_processes(|p| p.push(Process { pid, parent, path, threads: 0, exited: false }));
    if parent > 0 {
        hooks::process_fork(parent, pid);
    }
    hooks::process_exec(pid, path);
    let (start, end) = crate::user::image_range();
    hooks::mmap(pid, start, end, path);
    spawn_thread(pid, crate::user::entry(), role);
    pid
}

/// Starts a thread of `pid` at user address `entry` with `arg` in RDI; returns its id.
pub fn spawn_thread(pid: i32, entry: u64, arg: u64) -> i32 {
    let tid = NEXT_TID.fetch_add(1, Ordering::Relaxed);
    let stack = NEXT_USER_STACK.fetch_add(abi::USER_STACK_SIZE, Ordering::Relaxed);
    assert!(stack + abi::USER_STACK_SIZE <= abi::USER_END, "out of user stacks");
    let kstack = alloc::vec![0u128; KSTACK / 16].into_boxed_slice();
    let thread = Box::new(Thread {
        tid,
        pid,
        kstack,
        rsp: UnsafeCell::new(0),
        state: AtomicU8::new(RUNNABLE),
    });
    // The new kernel stack: a trap frame that enters ring 3 at `entry`, below it the return
    // address `trap_return` and six callee-saved registers for `switch_context` to pop.
    let (_, top) = thread.kstack_bounds();
    let frame = TrapFrame {
        rdi: arg,
        rip: entry,
        cs: u64::from(gdt::USER_CODE),
        rflags: 0x202,
        // The System V entry alignment: RSP + 8 is a multiple of 16.
        rsp: stack + abi::USER_STACK_SIZE - 8,
        ss: u64::from(gdt::USER_DATA),
        ..TrapFrame::default()
    };
    let frame_at = top - core::mem::size_of::<TrapFrame>() as u64;
    let rsp = frame_at - 8 - 6 * 8;
    // SAFETY: `rsp..top` lies within the new thread's kernel stack, which nothing else uses yet.
    unsafe {
        core::ptr::write(frame_at as *mut TrapFrame, frame);
        core::ptr::write((frame_at - 8) as *mut u64, trap_return as *const () as u64);
        core::ptr::write_bytes(rsp as *mut u64, 0, 6);
        *thread.rsp.get() = rsp;
    }
    with_processes(|p| {
        if let Some(p) = p.iter_mut().find(|p| p.pid == pid) {
            p.threads += 1;
        }
    });
    hooks::thread_create(pid, tid);
    let saved = crate::cpu::disable_interrupts();
    RUN_QUEUE.lock().push_back(Queued(Box::into_raw(thread)));
    crate::cpu::restore_interrupts(saved);
    tid
}

/// The thread running on this CPU (in thread context).
pub fn current() -> &'static Thread {
    let thread = percpu::this().current.load(Ordering::Relaxed);
    assert!(!thread.is_null(), "no current thread");
    // SAFETY: the running thread is owned by its CPU until it leaves; the caller runs on it.
    unsafe { &*thread }
}

/// The running thread gives up the CPU, runnable again (`exit` false) or ended. Interrupts are
/// disabled. Returns (perhaps on another CPU) when the thread runs again.
pub fn leave(exit: bool) {
    let cpu = percpu::this();
    let thread = current();
    hooks::switch_out(cpu.index, thread.pid, thread.tid);
    cpu.kstack_lo.store(0, Ordering::Relaxed);
    cpu.kstack_hi.store(0, Ordering::Relaxed);
    thread.state.store(if exit { EXITED } else { RUNNABLE }, Ordering::Relaxed);
    // SAFETY: the thread's saved RSP is its own (it runs); the scheduler's was saved by
    // `run_thread` on this CPU, whose stack is intact below it.
    unsafe { switch_context(thread.rsp.get(), *cpu.sched_rsp.get()) }
}

/// Ends the running thread (and its process with its last thread), with the driver's hooks.
pub fn exit_thread() -> ! {
    let thread = current();
    let (pid, tid) = (thread.pid, thread.tid);
    hooks::thread_exit(pid, tid);
    let last = with_processes(|p| {
        let p = p.iter_mut().find(|p| p.pid == pid).expect("the process of a running thread");
        p.threads -= 1;
        p.threads == 0
    });
    if last {
        hooks::process_exit(pid);
        with_processes(|p| {
            if let Some(p) = p.iter_mut().find(|p| p.pid == pid) {
                p.exited = true;
            }
        });
        crate::println!("ring0: process {pid} exited");
    }
    leave(true);
    unreachable!("an exited thread ran again");
}

/// Preemption: called when a timer interrupt returns to ring 3.
pub fn preempt_if_due(cpu: &Cpu) {
    if cpu.slice.fetch_add(1, Ordering::Relaxed) + 1 >= SLICE {
        leave(false);
    }
}

fn run_thread(cpu: &Cpu, thread: *mut Thread) {
    // SAFETY: taken from the run queue, the thread is this CPU's alone until put back.
    let t = unsafe { &*thread };
    let (lo, hi) = t.kstack_bounds();
    t.state.store(RUNNING, Ordering::Relaxed);
    cpu.current.store(thread, Ordering::Relaxed);
    cpu.slice.store(0, Ordering::Relaxed);
    gdt::set_kernel_stack(cpu, hi);
    cpu.kstack_lo.store(lo, Ordering::Relaxed);
    cpu.kstack_hi.store(hi, Ordering::Relaxed);
    hooks::switch_in(cpu.index, t.pid, t.tid);
    // SAFETY: the thread's saved RSP points at a frame `switch_context` (or `spawn_thread`) left.
    unsafe { switch_context(cpu.sched_rsp.get(), *t.rsp.get()) }
    cpu.current.store(core::ptr::null_mut(), Ordering::Relaxed);
    if t.state.load(Ordering::Relaxed) == EXITED {
        // SAFETY: the thread ended and this CPU no longer runs on its stack.
        drop(unsafe { Box::from_raw(thread) });
    } else {
        RUN_QUEUE.lock().push_back(Queued(thread));
    }
}

/// Whether every process created so far has ended and no CPU runs a thread.
fn all_done() -> bool {
    let processes_done = with_processes(|p| !p.is_empty() && p.iter().all(|p| p.exited));
    processes_done && percpu::online().all(|c| c.current.load(Ordering::Relaxed).is_null())
}

/// The scheduler loop of this CPU (interrupts disabled but while idle). On the BSP it returns
/// when every process has ended; on the others when the BSP says so.
pub fn run(cpu: &Cpu) {
    loop {
        let next = RUN_QUEUE.lock().pop_front();
        match next {
            Some(Queued(thread)) => run_thread(cpu, thread),
            None if cpu.index == 0 && all_done() => {
                SHUTDOWN.store(true, Ordering::Release);
                return;
            }
            None if cpu.index != 0 && SHUTDOWN.load(Ordering::Acquire) => return,
            None => crate::cpu::wait_for_interrupt(),
        }
    }
}
