//! Time: the TSC's frequency, measured once against the PIT, and busy waits.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::port::{inb, outb};

static TSC_HZ: AtomicU64 = AtomicU64::new(0);
static BOOT_TSC: AtomicU64 = AtomicU64::new(0);

/// The TSC's frequency: from the hypervisor's timing leaf 0x40000010 (in kHz) when it has one
/// (QEMU with an invariant TSC), else measured over 10 ms of PIT channel 2 (its gate on, the
/// speaker off, mode 0), three times: a virtual CPU descheduled during a measurement only
/// lengthens it, so the shortest wins.
pub fn calibrate() {
    BOOT_TSC.store(crate::cpu::rdtsc(), Ordering::Relaxed);
    let (_, _, hypervisor, _) = crate::cpu::cpuid(1, 0);
    let (max_leaf, ..) = crate::cpu::cpuid(0x4000_0000, 0);
    let khz = if hypervisor & (1 << 31) != 0 && (0x4000_0010..0x4001_0000).contains(&max_leaf) {
        crate::cpu::cpuid(0x4000_0010, 0).0
    } else {
        0
    };
    let hz = if khz != 0 {
        u64::from(khz) * 1000
    } else {
        (0..3).map(|_| pit_10ms_in_tsc_cycles()).min().unwrap_or(0) * 100
    };
    TSC_HZ.store(hz, Ordering::Relaxed);
}

fn pit_10ms_in_tsc_cycles() -> u64 {
    const PIT_HZ: u64 = 1_193_182;
    const TICKS: u64 = PIT_HZ / 100;
    outb(0x61, (inb(0x61) & !0x02) | 0x01);
    outb(0x43, 0xB0);
    outb(0x42, TICKS as u8);
    outb(0x42, (TICKS >> 8) as u8);
    let start = crate::cpu::rdtsc();
    while inb(0x61) & 0x20 == 0 {
        core::hint::spin_loop();
    }
    crate::cpu::rdtsc() - start
}

/// The TSC's frequency in Hz.
pub fn tsc_hz() -> u64 {
    TSC_HZ.load(Ordering::Relaxed)
}

/// Nanoseconds since the kernel started.
pub fn nanos_since_boot() -> u64 {
    let cycles = crate::cpu::rdtsc().wrapping_sub(BOOT_TSC.load(Ordering::Relaxed));
    (u128::from(cycles) * 1_000_000_000 / u128::from(tsc_hz().max(1))) as u64
}

/// Spins for `us` microseconds.
pub fn delay_us(us: u64) {
    let start = crate::cpu::rdtsc();
    let cycles = tsc_hz().max(1_000_000_000) / 1_000_000 * us;
    while crate::cpu::rdtsc().wrapping_sub(start) < cycles {
        core::hint::spin_loop();
    }
}
