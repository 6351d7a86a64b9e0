//! A kernel thread as the scheduler (`sched.rs`) and each CPU (`percpu.rs`, the one it runs) see it.

use alloc::boxed::Box;
use core::cell::UnsafeCell;
use core::sync::atomic::AtomicU8;

/// [`Thread::state`]: it runs on a CPU.
pub const RUNNING: u8 = 0;
/// [`Thread::state`]: it waits on the run queue.
pub const RUNNABLE: u8 = 1;
/// [`Thread::state`]: it ended; the CPU it last ran on frees it.
pub const EXITED: u8 = 2;

/// A thread: its kernel stack and, while it does not run, its saved kernel stack pointer.
pub struct Thread {
    pub tid: i32,
    pub pid: i32,
    pub kstack: Box<[u128]>,
    pub rsp: UnsafeCell<u64>,
    pub state: AtomicU8,
}

impl Thread {
    /// The lowest and one past the highest address of its kernel stack.
    pub fn kstack_bounds(&self) -> (u64, u64) {
        let lo = self.kstack.as_ptr() as u64;
        (lo, lo + (self.kstack.len() * 16) as u64)
    }
}
