//! What each vector does. Faults print what happened and end the test as failed; the timer
//! counts ticks, fires the CLOCK.HARD software event, runs the driver's drain and preempts; the
//! NMI is the driver's PMI; the CALL IPI runs a closure another CPU posted.

use core::sync::atomic::Ordering;

use crate::console::{self, print_unlocked};
use crate::frame::TrapFrame;
use crate::percpu;
use crate::vectors;
use crate::{pmc, sched, syscall};

/// Called by every stub with interrupts disabled.
pub fn dispatch(frame: &mut TrapFrame) {
    match frame.vector as u8 {
        vectors::NMI => {
            nmi(frame);
            // The NMI may have interrupted anything, even the kernel's return to ring 3: it
            // neither switches threads nor calls the return-to-user hook.
            return;
        }
        vectors::TIMER => timer(frame),
        vectors::CALL => {
            crate::apic::eoi();
            crate::ipi::serve(percpu::this());
        }
        vectors::SYSCALL => syscall::dispatch(frame),
        vectors::INVALID_OPCODE if syscall::is_int80(frame) => {
            // See `syscall::is_int80`: the system call arrived as #UD at its `int 0x80`.
            frame.rip += 2;
            syscall::dispatch(frame);
        }
        vectors::SPURIOUS => {}
        _ => fault(frame),
    }
    if frame.is_user() {
        let thread = sched::current();
        pmc::user_return(percpu::index(), thread.pid, thread.tid, frame);
    }
}

fn nmi(frame: &TrapFrame) {
    let cpu = percpu::this();
    cpu.nmis.fetch_add(1, Ordering::Relaxed);
    if pmc::interrupt(cpu.index, frame) {
        cpu.nmis_claimed.fetch_add(1, Ordering::Relaxed);
    }
}

fn timer(frame: &TrapFrame) {
    let cpu = percpu::this();
    // Acknowledged first: the handler may switch threads before it returns.
    crate::apic::eoi();
    let ticks = cpu.ticks.fetch_add(1, Ordering::Relaxed) + 1;
    // Every 16 ticks, an NMI to the next CPU, wherever it is (ring 3, a system call, the
    // scheduler, the driver's locked sections): the driver's PMI entry must take it there and
    // disclaim it, as it is not a counter overflow.
    if ticks % 16 == 0 {
        let next = (cpu.index + 1) % percpu::online_count();
        if next != cpu.index {
            crate::apic::send_nmi(percpu::cpu(next).apic_id.load(Ordering::Relaxed));
        }
    }
    pmc::clock_tick(cpu.index, frame);
    if frame.is_user() {
        sched::preempt_if_due(cpu);
    }
}

fn fault(frame: &TrapFrame) -> ! {
    let name = match frame.vector {
        0 => "#DE divide error",
        6 => "#UD invalid opcode",
        8 => "#DF double fault",
        13 => "#GP general protection",
        14 => "#PF page fault",
        _ => "exception",
    };
    print_unlocked(format_args!(
        "\nring0: FAULT {name} (vector {}) on cpu {} in {}: error {:#x} rip {:#x} rsp {:#x} rbp {:#x} cr2 {:#x}\n",
        frame.vector,
        percpu::index(),
        if frame.is_user() { "ring 3" } else { "ring 0" },
        frame.error,
        frame.rip,
        frame.rsp,
        frame.rbp,
        crate::cpu::cr2(),
    ));
    console::exit_qemu(console::EXIT_FAILURE)
}
