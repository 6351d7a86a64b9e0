//! The console on COM1 (a 16550 UART; QEMU writes what it sends to `-serial`), the log device on
//! QEMU's debug console port (`-device isa-debugcon`), and QEMU's exit device.

use core::fmt::{self, Write};

use crate::port::{inb, outb, outsb};

const COM1: u16 = 0x3F8;
/// The log device: hwpmc's log file (CONFIGURELOG with [`ring0_abi::LOG_FD`]) goes here.
const LOG_PORT: u16 = 0xE9;
/// QEMU's `isa-debug-exit` device: writing `v` ends QEMU with status `v << 1 | 1`.
const EXIT_PORT: u16 = 0xF4;

static CONSOLE: spin::Mutex<()> = spin::Mutex::new(());
static LOG: spin::Mutex<()> = spin::Mutex::new(());

/// Sets COM1 to 115200 8N1, FIFOs on, interrupts off.
pub fn init() {
    outb(COM1 + 1, 0x00);
    outb(COM1 + 3, 0x80);
    outb(COM1, 0x01);
    outb(COM1 + 1, 0x00);
    outb(COM1 + 3, 0x03);
    outb(COM1 + 2, 0xC7);
    outb(COM1 + 4, 0x03);
}

fn put(byte: u8) {
    while inb(COM1 + 5) & 0x20 == 0 {
        core::hint::spin_loop();
    }
    outb(COM1, byte);
}

struct Com1;

impl Write for Com1 {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            if b == b'\n' {
                put(b'\r');
            }
            put(b);
        }
        Ok(())
    }
}

/// Prints to the console; whole lines never interleave between CPUs. Interrupts are disabled
/// while the console lock is held, so an interrupt handler that prints cannot deadlock with the
/// code it interrupted (only the fault handlers print from interrupt context).
pub fn print(args: fmt::Arguments<'_>) {
    let saved = crate::cpu::disable_interrupts();
    {
        let _guard = CONSOLE.lock();
        let _ = Com1.write_fmt(args);
    }
    crate::cpu::restore_interrupts(saved);
}

/// Prints from a context that may have interrupted a printer on this CPU (a fault, the panic
/// handler): does not wait for the console lock.
pub fn print_unlocked(args: fmt::Arguments<'_>) {
    let _ = Com1.write_fmt(args);
}

/// Writes bytes of the hwpmc log to the log device.
pub fn write_log(bytes: &[u8]) {
    let saved = crate::cpu::disable_interrupts();
    {
        let _guard = LOG.lock();
        outsb(LOG_PORT, bytes);
    }
    crate::cpu::restore_interrupts(saved);
}

/// What the kernel writes to the exit device when the test passed: QEMU exits with status 33.
pub const EXIT_SUCCESS: u8 = 0x10;
/// What it writes on a failure (a fault, a panic, a failed check): QEMU exits with status 35.
pub const EXIT_FAILURE: u8 = 0x11;

/// Ends the virtual machine with [`EXIT_SUCCESS`] or [`EXIT_FAILURE`].
pub fn exit_qemu(status: u8) -> ! {
    outb(EXIT_PORT, status);
    crate::cpu::halt_forever()
}

/// `println!` on the console.
#[macro_export]
macro_rules! println {
    ($($arg:tt)*) => { $crate::console::print(format_args!("{}\n", format_args!($($arg)*))) };
}
