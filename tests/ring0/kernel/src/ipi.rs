//! Running a closure on another CPU: the caller posts it in the target's call slot and sends the
//! CALL IPI; the target runs it in the interrupt handler (interrupts disabled, so not preempted)
//! and clears the slot. A caller waits with interrupts disabled and runs the requests posted to
//! its own CPU meanwhile, so two CPUs calling each other do not deadlock.

use core::sync::atomic::Ordering;

use crate::percpu::{self, Cpu};

/// Runs `f` on CPU `target` and returns when it has run there.
pub fn run_on_cpu(target: u32, f: &mut dyn FnMut()) {
    let saved = crate::cpu::disable_interrupts();
    let me = percpu::this();
    if target == me.index {
        f();
        crate::cpu::restore_interrupts(saved);
        return;
    }
    let cpu = percpu::cpu(target);
    while cpu.call.busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err()
    {
        serve(me);
        core::hint::spin_loop();
    }
    // SAFETY: only the lifetime is extended: this function does not return before the target
    // has run `f` and cleared the slot, so the reference never outlives `f`.
    let mut f: &'static mut dyn FnMut() =
        unsafe { core::mem::transmute::<&mut dyn FnMut(), &'static mut dyn FnMut()>(f) };
    cpu.call.request.store(&mut f, Ordering::Release);
    crate::apic::send_ipi(cpu.apic_id.load(Ordering::Relaxed), crate::vectors::CALL);
    while !cpu.call.request.load(Ordering::Acquire).is_null() {
        serve(me);
        core::hint::spin_loop();
    }
    cpu.call.busy.store(false, Ordering::Release);
    crate::cpu::restore_interrupts(saved);
}

/// Runs the request posted to `cpu` (the executing CPU), if any. Interrupts are disabled.
pub fn serve(cpu: &Cpu) {
    let request = cpu.call.request.load(Ordering::Acquire);
    if request.is_null() {
        return;
    }
    // SAFETY: the poster waits until the slot is cleared below, so the closure is alive; only
    // this CPU runs its slot's requests, with interrupts disabled, so it runs once.
    unsafe { (*request)() };
    cpu.calls.fetch_add(1, Ordering::Relaxed);
    cpu.call.request.store(core::ptr::null_mut(), Ordering::Release);
}
