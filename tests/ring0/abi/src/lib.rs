//! The example kernel's system calls, shared by the kernel and its ring-3 program (`int 0x80`:
//! the number in RAX, arguments in RDI, RSI, RDX; the result in RAX, a negative errno on failure).

#![no_std]

/// Writes `len` bytes at `ptr` to the console.
pub const SYS_WRITE: u64 = 0;
/// Ends the calling thread (its process ends with its last thread).
pub const SYS_EXIT_THREAD: u64 = 1;
/// Gives the CPU to another thread.
pub const SYS_YIELD: u64 = 2;
/// Starts a thread in the caller's process at `entry(arg)`; returns its thread id.
pub const SYS_THREAD_CREATE: u64 = 3;
/// Starts a new process running this program with `role` (fork and exec in one); returns its pid.
pub const SYS_SPAWN: u64 = 4;
/// Whether process `pid` is alive (1) or gone (0).
pub const SYS_PROC_ALIVE: u64 = 5;
/// The hwpmc system call: `PMC_OP_*` number and argument pointer.
pub const SYS_HWPMC: u64 = 6;
/// Arms (1) or disarms (0) the kernel's CLOCK.HARD software event on every timer tick. Arming
/// zeroes the kernel's own counts of the event.
pub const SYS_CLOCK_ARM: u64 = 7;
/// The kernel's own count of CLOCK.HARD events since the last arming: `kind` 0 counts those
/// fired on CPU `which`, kind 1 those fired while process `which` was running.
pub const SYS_CLOCK_COUNT: u64 = 8;
/// Spins in the kernel, with interrupts enabled, through a few nested kernel functions, for
/// `ticks` timer ticks of the current CPU (so timer samples see a kernel callchain).
pub const SYS_KWORK: u64 = 9;
/// The caller's process id.
pub const SYS_GETPID: u64 = 10;
/// The number of CPUs online.
pub const SYS_NCPU: u64 = 11;
/// The TSC's frequency in Hz.
pub const SYS_TSC_HZ: u64 = 12;
/// The CPU the caller runs on.
pub const SYS_GETCPU: u64 = 13;

/// `role` of the test program (process 1).
pub const ROLE_TEST: u64 = 0;
/// `role` of the spinning process the test spawns.
pub const ROLE_SPINNER: u64 = 1;

/// The descriptor the kernel's log device answers to (CONFIGURELOG's `pm_logfd`).
pub const LOG_FD: i32 = 3;

/// Where the ring-3 program is linked and loaded (a 2 MiB page with the user bit).
pub const USER_IMAGE_BASE: u64 = 0x0400_0000;
/// Where the user stacks start.
pub const USER_STACKS_BASE: u64 = 0x0440_0000;
/// The end of user memory: `USER_IMAGE_BASE..USER_END` is all ring 3 may touch.
pub const USER_END: u64 = 0x0480_0000;
/// Bytes of each user thread's stack.
pub const USER_STACK_SIZE: u64 = 0x1_0000;
