//! x86 I/O port access.

/// Writes `value` to I/O port `port`.
pub fn outb(port: u16, value: u8) {
    // SAFETY: the kernel runs in ring 0; its callers name devices it owns (serial, PIT, debug ports).
    unsafe {
        core::arch::asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack, preserves_flags))
    }
}

/// Reads I/O port `port`.
pub fn inb(port: u16) -> u8 {
    let value: u8;
    // SAFETY: as in `outb`.
    unsafe {
        core::arch::asm!("in al, dx", in("dx") port, out("al") value, options(nomem, nostack, preserves_flags))
    }
    value
}

/// Writes all of `bytes` to port `port` with one `rep outsb` (one exit to QEMU under KVM, rather
/// than one per byte).
pub fn outsb(port: u16, bytes: &[u8]) {
    // SAFETY: `rep outsb` reads `bytes.len()` bytes from `bytes`, which is valid for that many.
    unsafe {
        core::arch::asm!("rep outsb", in("dx") port, inout("rsi") bytes.as_ptr() => _,
            inout("rcx") bytes.len() => _, options(nostack, preserves_flags, readonly));
    }
}
