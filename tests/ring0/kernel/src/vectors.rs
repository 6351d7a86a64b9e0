//! The interrupt vectors the kernel handles (the IDT's stubs are in `trap.rs`).

/// Vector of the local APIC timer.
pub const TIMER: u8 = 32;
/// Vector of the "run this closure" IPI.
pub const CALL: u8 = 0xF0;
/// Vector of the system call (`int 0x80`, allowed from ring 3).
pub const SYSCALL: u8 = 0x80;
/// The local APIC's spurious vector.
pub const SPURIOUS: u8 = 0xFF;
/// The NMI (the PMI is delivered as one).
pub const NMI: u8 = 2;
/// Invalid opcode.
pub const INVALID_OPCODE: u8 = 6;
/// Double fault.
pub const DOUBLE_FAULT: u8 = 8;
