//! The kernel's system calls (`int 0x80`) and printing to its console.

use core::fmt::{self, Write};

use ring0_abi as abi;

/// A system call with up to three arguments; a negative result is an errno.
pub fn call(number: u64, a: u64, b: u64, c: u64) -> i64 {
    let result: i64;
    // SAFETY: `int 0x80` enters the kernel, which reads the arguments, writes RAX and restores
    // every other register; memory the arguments point to is read or written as the call says.
    unsafe {
        core::arch::asm!("int 0x80", inlateout("rax") number as i64 => result, in("rdi") a, in("rsi") b,
            in("rdx") c, options(nostack));
    }
    result
}

/// Writes `bytes` to the console.
pub fn write(bytes: &[u8]) {
    call(abi::SYS_WRITE, bytes.as_ptr() as u64, bytes.len() as u64, 0);
}

/// Ends the calling thread.
pub fn exit_thread() -> ! {
    call(abi::SYS_EXIT_THREAD, 0, 0, 0);
    unreachable!("the kernel returned from SYS_EXIT_THREAD");
}

/// A line being formatted on the stack, written with one system call.
pub struct Line {
    buf: [u8; 256],
    len: usize,
}

impl Line {
    pub fn new() -> Self {
        Line { buf: [0; 256], len: 0 }
    }
    pub fn flush(&self) {
        write(&self.buf[..self.len]);
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Prints a line on the kernel's console.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        let mut line = $crate::sys::Line::new();
        let _ = core::fmt::Write::write_fmt(&mut line, format_args!("{}\n", format_args!($($arg)*)));
        line.flush();
    }};
}

/// The TSC (RDTSC is allowed in ring 3).
pub fn rdtsc() -> u64 {
    hwpmc::arch::x86::native::read_tsc()
}

/// Spins in `work` until `ms` milliseconds have passed.
pub fn spin_for(ms: u64, mut work: impl FnMut()) {
    let hz = call(abi::SYS_TSC_HZ, 0, 0, 0) as u64;
    let until = rdtsc() + hz / 1000 * ms;
    while rdtsc() < until {
        work();
    }
}
