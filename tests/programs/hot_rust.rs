// A Rust program with a known hot function, for pmcstat's sampling tests of binaries linked by
// rustc's default linker (rust-lld on x86_64 Linux): its segments' addresses are not their file
// offsets.
//
//   hot_rust [ITERATIONS]
//
// hot_function runs ITERATIONS iterations (default 400 000 000), cold_function a twentieth of
// that. Built with `rustc -O -g` (a release build with line tables).

#[inline(never)]
fn hot_function(n: u64) -> u64 {
    let mut x = 0u64;
    for i in 0..n {
        x = std::hint::black_box(x.wrapping_add(i));
    }
    x
}

#[inline(never)]
fn cold_function(n: u64) -> u64 {
    let mut x = 0u64;
    for i in 0..n {
        x = std::hint::black_box(x ^ i);
    }
    x
}

fn main() {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(400_000_000);
    let r = hot_function(n).wrapping_add(cold_function(n / 20));
    std::process::exit(i32::from(std::hint::black_box(r) == 1));
}
