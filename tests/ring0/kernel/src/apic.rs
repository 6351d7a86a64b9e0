//! The local APIC, in x2APIC mode (MSRs) when the CPU has it, in xAPIC mode (MMIO at
//! 0xFEE00000) otherwise: its timer, IPIs, INIT-SIPI-SIPI, and the performance-counter entry.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::cpu::{rdmsr, wrmsr};

const IA32_APIC_BASE: u32 = 0x1B;
const XAPIC_BASE: u64 = 0xFEE0_0000;

const ID: u32 = 0x20;
const EOI: u32 = 0xB0;
const SPURIOUS: u32 = 0xF0;
const ICR_LOW: u32 = 0x300;
const ICR_HIGH: u32 = 0x310;
const LVT_TIMER: u32 = 0x320;
const LVT_PMI: u32 = 0x340;
const TIMER_INITIAL: u32 = 0x380;
const TIMER_CURRENT: u32 = 0x390;
const TIMER_DIVIDE: u32 = 0x3E0;

static X2APIC: AtomicBool = AtomicBool::new(false);
/// Timer counts per millisecond (divide by 16), measured on the BSP.
static COUNTS_PER_MS: AtomicU32 = AtomicU32::new(0);

/// Whether the local APICs run in x2APIC mode.
pub fn is_x2apic() -> bool {
    X2APIC.load(Ordering::Relaxed)
}

fn read(reg: u32) -> u32 {
    if is_x2apic() {
        // SAFETY: in x2APIC mode every register at `reg` (a readable one) is MSR 0x800 + reg/16.
        unsafe { rdmsr(0x800 + (reg >> 4)) as u32 }
    } else {
        // SAFETY: the xAPIC page is identity-mapped uncached (`crate::memory`); `reg` is a
        // readable register.
        unsafe { core::ptr::read_volatile((XAPIC_BASE + u64::from(reg)) as *const u32) }
    }
}

fn write(reg: u32, value: u32) {
    if is_x2apic() {
        // SAFETY: as in `read`, for a writable register.
        unsafe { wrmsr(0x800 + (reg >> 4), u64::from(value)) }
    } else {
        // SAFETY: as in `read`.
        unsafe { core::ptr::write_volatile((XAPIC_BASE + u64::from(reg)) as *mut u32, value) }
    }
}

/// Enables this CPU's local APIC (x2APIC mode when CPUID has it; the BSP decides for all) with
/// the spurious vector, everything masked but what the kernel programs later.
pub fn init(bsp: bool) {
    if bsp {
        // The firmware left the legacy PICs delivering the PIT at vector 8 (the double fault's):
        // mask every line, the local APICs do all the kernel needs.
        crate::port::outb(0x21, 0xFF);
        crate::port::outb(0xA1, 0xFF);
        let (_, _, ecx, _) = crate::cpu::cpuid(1, 0);
        X2APIC.store(ecx & (1 << 21) != 0, Ordering::Relaxed);
    }
    // SAFETY: IA32_APIC_BASE exists on every x86_64 CPU; setting EN (bit 11) and, when the CPU has
    // it, EXTD (bit 10) enables the APIC at its current base.
    unsafe {
        let base = rdmsr(IA32_APIC_BASE);
        let mode = if is_x2apic() { 3 << 10 } else { 1 << 11 };
        wrmsr(IA32_APIC_BASE, base | mode);
    }
    write(SPURIOUS, 0x100 | u32::from(crate::vectors::SPURIOUS));
    write(LVT_TIMER, 1 << 16);
}

/// This CPU's APIC id.
pub fn id() -> u32 {
    if is_x2apic() { read(ID) } else { read(ID) >> 24 }
}

/// Ends the interrupt being handled.
pub fn eoi() {
    write(EOI, 0);
}

fn send(dest: u32, command: u32) {
    if is_x2apic() {
        // SAFETY: the x2APIC ICR is the 64-bit MSR 0x830, destination in the high half.
        unsafe { wrmsr(0x830, u64::from(dest) << 32 | u64::from(command)) }
    } else {
        write(ICR_HIGH, dest << 24);
        write(ICR_LOW, command);
        while read(ICR_LOW) & (1 << 12) != 0 {
            core::hint::spin_loop();
        }
    }
}

/// Sends a fixed interrupt `vector` to the CPU with APIC id `dest`.
pub fn send_ipi(dest: u32, vector: u8) {
    send(dest, u32::from(vector));
}

/// Sends an NMI to the CPU with APIC id `dest`.
pub fn send_nmi(dest: u32) {
    send(dest, 0x400);
}

/// INIT, then two STARTUPs at page `page` (the real-mode trampoline), to the CPU `dest`.
pub fn start_ap(dest: u32, page: u8) {
    send(dest, 0x4500);
    crate::time::delay_us(10_000);
    for _ in 0..2 {
        send(dest, 0x4600 | u32::from(page));
        crate::time::delay_us(200);
    }
}

/// Measures the timer's rate against the TSC (on the BSP, after `time::calibrate`).
pub fn calibrate_timer() {
    write(TIMER_DIVIDE, 0x3);
    write(LVT_TIMER, 1 << 16);
    write(TIMER_INITIAL, u32::MAX);
    crate::time::delay_us(10_000);
    let elapsed = u32::MAX - read(TIMER_CURRENT);
    write(TIMER_INITIAL, 0);
    COUNTS_PER_MS.store((elapsed / 10).max(1), Ordering::Relaxed);
}

/// Starts this CPU's timer: periodic, `hz` interrupts a second on vector `TIMER`.
pub fn start_timer(hz: u32) {
    write(TIMER_DIVIDE, 0x3);
    write(LVT_TIMER, 1 << 17 | u32::from(crate::vectors::TIMER));
    let counts = COUNTS_PER_MS.load(Ordering::Relaxed) as u64 * 1000 / u64::from(hz);
    write(TIMER_INITIAL, counts.max(1) as u32);
}

/// Programs the performance-counter entry: NMI delivery, masked or not.
pub fn set_pmi(masked: bool) {
    write(LVT_PMI, 4 << 8 | u32::from(masked) << 16);
}
