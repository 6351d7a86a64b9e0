//! Time: the TSC's frequency, measured once against the PIT, and busy waits.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::port::{inb, outb};

static TSC_HZ: AtomicU64 = AtomicU64::new(0);
static BOOT_TSC: AtomicU64 = AtomicU64::new(0);

/// Measures the TSC over 10 ms of PIT channel 2 (its gate on, the speaker off, mode 0).
pub fn calibrate() {
    const PIT_HZ: u64 = 1_193_182;
    const TICKS: u64 = PIT_HZ / 100;
    BOOT_TSC.store(crate::cpu::rdtsc(), Ordering::Relaxed);
    outb(0x61, (inb(0x61) & !0x02) | 0x01);
    outb(0x43, 0xB0);
    outb(0x42, TICKS as u8);
    outb(0x42, (TICKS >> 8) as u8);
    let start = crate::cpu::rdtsc();
    while inb(0x61) & 0x20 == 0 {
        core::hint::spin_loop();
    }
    let cycles = crate::cpu::rdtsc() - start;
    TSC_HZ.store(cycles * 100, Ordering::Relaxed);
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
