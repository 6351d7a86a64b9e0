//! Cost of unwinding one sampled user stack with the images' CFI, as the Linux host does for
//! each sample with `--call-graph dwarf`: a stack 32 calls deep (plus the frames below it) of
//! this process, captured as perf copies it (registers and 8 KiB of stack).
//!
//! `cargo bench -p libpmc --bench unwind` prints microseconds per sample; `cargo test
//! --benches` runs the loop a few times only (a smoke run).

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn main() {
    use std::time::Instant;

    use pmc::host::linux::unwind::{MAX_FRAMES, Unwinding, nested_stack};

    let quick = !std::env::args().any(|a| a == "--bench");
    let iterations = if quick { 10 } else { 100_000 };
    let pid = std::process::id() as i32;
    let stack = nested_stack(32, 8192).expect("this thread's stack");

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
