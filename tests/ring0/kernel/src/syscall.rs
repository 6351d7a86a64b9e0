//! The system calls of the ring-3 program (numbers in `tests/ring0/abi` (crate `ring0-abi`)). They run with
//! interrupts disabled (an interrupt gate), but for SYS_KWORK, which enables them on purpose.

use core::sync::atomic::Ordering;

use crate::frame::TrapFrame;
use ring0_abi as abi;

use crate::{memory, pmc, sched};

/// Whether `frame` is a #UD raised in ring 3 by an `int 0x80` instruction (bytes CD 80 at RIP).
///
/// A hypervisor that runs guests without hardware virtualization (Linux's PVM, KVM's
/// "pagetable-based virtual machine", which provides /dev/kvm on some cloud VMs) handles ring-3
/// system call instructions for its own paravirtualized guests: it delivers a ring-3 `int 0x80`
/// of this kernel as #UD at the instruction, with the trap frame otherwise intact (and SYSCALL
/// does not reach ring 0 at all). The kernel then treats the #UD as the system call.
pub fn is_int80(frame: &TrapFrame) -> bool {
    frame.is_user()
        && memory::is_user_range(frame.rip, 2)
        // SAFETY: the two bytes are user memory (checked), mapped in the one address space.
        && unsafe { core::ptr::read_unaligned(frame.rip as *const [u8; 2]) } == [0xCD, 0x80]
}

/// EFAULT and EINVAL, as negative results.
const EFAULT: i64 = 14;
const EINVAL: i64 = 22;

/// Handles the `int 0x80` in `frame`: number in RAX, arguments in RDI, RSI, RDX, result in RAX.
pub fn dispatch(frame: &mut TrapFrame) {
    let (a, b) = (frame.rdi, frame.rsi);
    let result: i64 = match frame.rax {
        abi::SYS_WRITE => write(a, b as usize),
        abi::SYS_EXIT_THREAD => sched::exit_thread(),
        abi::SYS_YIELD => {
            sched::leave(false);
            0
        }
        abi::SYS_THREAD_CREATE => {
            if memory::is_user_range(a, 1) {
                i64::from(sched::spawn_thread(sched::current().pid, a, b))
            } else {
                -EFAULT
            }
        }
        abi::SYS_SPAWN => {
            let path: &'static [u8] =
                if a == abi::ROLE_SPINNER { b"/bin/spinner" } else { b"/bin/pmctest" };
            i64::from(sched::spawn_process(sched::current().pid, path, a))
        }
        abi::SYS_PROC_ALIVE => {
            let pid = a as i32;
            i64::from(sched::with_processes(|p| p.iter().any(|p| p.pid == pid && !p.exited)))
        }
        abi::SYS_HWPMC => match pmc::syscall(a as u32, b) {
            Ok(()) => 0,
            Err(errno) => -i64::from(errno.freebsd()),
        },
        abi::SYS_CLOCK_ARM => {
            pmc::arm_clock(a != 0);
            0
        }
        abi::SYS_CLOCK_COUNT => match pmc::clock_count(a, b) {
            Some(count) => count as i64,
            None => -EINVAL,
        },
        abi::SYS_KWORK => {
            kwork(a);
            0
        }
        abi::SYS_GETPID => i64::from(sched::current().pid),
        abi::SYS_NCPU => i64::from(crate::percpu::online_count()),
        abi::SYS_TSC_HZ => crate::time::tsc_hz() as i64,
        abi::SYS_GETCPU => i64::from(crate::percpu::index()),
        _ => -EINVAL,
    };
    frame.rax = result as u64;
}

fn write(ptr: u64, len: usize) -> i64 {
    if !memory::is_user_range(ptr, len) {
        return -EFAULT;
    }
    // SAFETY: the range is user memory (checked), mapped and readable in the one address space.
    let bytes = unsafe { core::slice::from_raw_parts(ptr as *const u8, len) };
    crate::console::print(format_args!("{}", core::str::from_utf8(bytes).unwrap_or("<not UTF-8>")));
    len as i64
}

/// Spins for `ticks` timer ticks of this CPU with interrupts enabled, three calls deep, so that
/// the timer's software event samples the thread in the kernel with a kernel callchain. The CPU
/// cannot change meanwhile: a timer interrupt that arrives in ring 0 never preempts.
fn kwork(ticks: u64) {
    let ticks = ticks.min(1000);
    // SAFETY: this system call holds no lock and touches nothing an interrupt handler changes.
    unsafe { core::arch::asm!("sti", options(nomem, nostack)) };
    kwork_outer(ticks);
    // SAFETY: as above; the rest of the system call runs with interrupts disabled again.
    unsafe { core::arch::asm!("cli", options(nomem, nostack)) };
}

#[inline(never)]
#[unsafe(no_mangle)]
fn kwork_outer(ticks: u64) {
    kwork_middle(ticks);
    core::hint::black_box(());
}

#[inline(never)]
#[unsafe(no_mangle)]
fn kwork_middle(ticks: u64) {
    kwork_inner(ticks);
    core::hint::black_box(());
}

#[inline(never)]
#[unsafe(no_mangle)]
fn kwork_inner(ticks: u64) {
    let cpu = crate::percpu::this();
    let until = cpu.ticks.load(Ordering::Relaxed) + ticks;
    while cpu.ticks.load(Ordering::Relaxed) < until {
        core::hint::spin_loop();
    }
}
