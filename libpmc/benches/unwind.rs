//! Cost of unwinding one sampled user stack with the images' CFI, as the Linux host does for
//! each sample with `--call-graph dwarf`: a stack 32 calls deep (plus the frames below it) of
//! this process, captured as perf copies it (registers and 8 KiB of stack).
//!
//! `cargo bench -p libpmc --bench unwind` prints microseconds per sample; `cargo test
//! --benches` runs the loop a few times only (a smoke run).

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn main() {
    use std::time::Instant;

    use pmc::host::linux::unwind::{MAX_FRAMES, Unwinding};

    let quick = !std::env::args().any(|a| a == "--bench");
    let iterations = if quick { 10 } else { 100_000 };
    let pid = std::process::id() as i32;
    let stack = capture::recurse(32, 8192);

    let start = Instant::now();
    let mut unwinding = Unwinding::default();
    let frames = unwinding.unwind(pid, &stack, MAX_FRAMES).expect("this binary has CFI").len();
    let cold = start.elapsed();
    assert!(frames > 33, "{frames} frames for a stack 32 calls deep");

    let best = (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                std::hint::black_box(unwinding.unwind(
                    pid,
                    std::hint::black_box(&stack),
                    MAX_FRAMES,
                ));
            }
            start.elapsed().as_secs_f64() * 1e6 / f64::from(iterations)
        })
        .fold(f64::INFINITY, f64::min);
    println!(
        "unwind: {frames} frames (32 nested calls) from an 8 KiB stack copy: {best:.2} µs/sample \
         ({:.0} ns/frame); first sample of the process (reads /proc/PID/maps and the images' \
         CFI): {:.0} µs",
        best * 1e3 / frames as f64,
        cold.as_secs_f64() * 1e6
    );
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn main() {
    println!("unwind: the CFI unwinder runs on x86-64 Linux only");
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod capture {
    use std::fs::File;
    use std::os::unix::fs::FileExt;

    use pmc::host::linux::unwind::UserStack;

    /// This process's registers at a point inside this function and a copy of `len` bytes of
    /// its stack from there up (read from `/proc/self/mem`), as perf copies a sampled stack.
    #[inline(never)]
    fn capture(len: usize) -> UserStack {
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: copies the instruction pointer, the stack pointer and %rbp into three
        // registers; reads and writes no memory.
        unsafe {
            core::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                bp = out(reg) bp,
                options(nomem, nostack, preserves_flags),
            )
        };
        let mut bytes = vec![0; len];
        let mem = File::open("/proc/self/mem").expect("/proc/self/mem");
        let read = mem.read_at(&mut bytes, sp).expect("reading this process's stack");
        bytes.truncate(read);
        UserStack { ip, sp, bp, bytes, user_at: 0 }
    }

    /// `depth` nested calls of itself, the innermost capturing the stack.
    #[inline(never)]
    pub(crate) fn recurse(depth: usize, len: usize) -> UserStack {
        let stack = if depth <= 1 { capture(len) } else { recurse(depth - 1, len) };
        std::hint::black_box(stack)
    }
}
