//! Single instructions on the current CPU: the interrupt flag, control registers, MSRs, halting.

/// Disables interrupts and returns whether they were enabled.
pub fn disable_interrupts() -> bool {
    let flags: u64;
    // SAFETY: reading RFLAGS and clearing IF in ring 0 touches no memory.
    unsafe {
        core::arch::asm!("pushfq", "pop {}", "cli", out(reg) flags, options(nomem, preserves_flags))
    }
    flags & (1 << 9) != 0
}

/// Enables interrupts again if `enabled` (what [`disable_interrupts`] returned).
pub fn restore_interrupts(enabled: bool) {
    if enabled {
        // SAFETY: setting IF in ring 0; the IDT is loaded before anything enables interrupts.
        unsafe { core::arch::asm!("sti", options(nomem, nostack)) }
    }
}

/// Enables interrupts and waits for one (atomically: `sti` delays interrupts by one instruction,
/// so one that is already pending wakes the `hlt`), then disables them again.
pub fn wait_for_interrupt() {
    // SAFETY: as in `restore_interrupts`.
    unsafe { core::arch::asm!("sti", "hlt", "cli", options(nomem, nostack)) }
}

/// Stops this CPU for good.
pub fn halt_forever() -> ! {
    loop {
        // SAFETY: `cli; hlt` stops the CPU; only an NMI wakes it, and the loop halts it again.
        unsafe { core::arch::asm!("cli", "hlt", options(nomem, nostack)) }
    }
}

/// RDMSR.
///
/// # Safety
/// `msr` exists on this CPU.
pub unsafe fn rdmsr(msr: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: the caller guarantees the MSR exists.
    unsafe {
        core::arch::asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags))
    }
    u64::from(hi) << 32 | u64::from(lo)
}

/// WRMSR.
///
/// # Safety
/// `msr` exists, `value` sets none of its reserved bits, and the write breaks nothing the kernel
/// relies on.
pub unsafe fn wrmsr(msr: u32, value: u64) {
    // SAFETY: the caller's guarantees.
    unsafe {
        core::arch::asm!("wrmsr", in("ecx") msr, in("eax") value as u32, in("edx") (value >> 32) as u32,
            options(nostack, preserves_flags));
    }
}

/// CR2: the address of the last page fault.
pub fn cr2() -> u64 {
    let value: u64;
    // SAFETY: reading CR2 in ring 0 has no side effect.
    unsafe {
        core::arch::asm!("mov {}, cr2", out(reg) value, options(nomem, nostack, preserves_flags))
    }
    value
}

/// Sets or clears CR4 bit `bit` on this CPU.
///
/// # Safety
/// The bit is one whose change the kernel is prepared for (PCE, OSXSAVE…).
pub unsafe fn set_cr4_bit(bit: u32, on: bool) {
    // SAFETY: the caller's guarantee; reading and writing CR4 in ring 0.
    unsafe {
        let mut cr4: u64;
        core::arch::asm!("mov {}, cr4", out(reg) cr4, options(nomem, nostack, preserves_flags));
        if on {
            cr4 |= 1 << bit;
        } else {
            cr4 &= !(1 << bit);
        }
        core::arch::asm!("mov cr4, {}", in(reg) cr4, options(nostack, preserves_flags));
    }
}

/// Flushes the whole TLB of this CPU (reloads CR3).
pub fn flush_tlb() {
    // SAFETY: reloading CR3 with its own value only drops cached translations.
    unsafe {
        core::arch::asm!("mov {0}, cr3", "mov cr3, {0}", out(reg) _, options(nostack, preserves_flags))
    }
}

/// RDTSC.
pub fn rdtsc() -> u64 {
    hwpmc::arch::x86::native::read_tsc()
}

/// CPUID leaf `leaf`, subleaf `sub`: (eax, ebx, ecx, edx).
pub fn cpuid(leaf: u32, sub: u32) -> (u32, u32, u32, u32) {
    let r = core::arch::x86_64::__cpuid_count(leaf, sub);
    (r.eax, r.ebx, r.ecx, r.edx)
}
