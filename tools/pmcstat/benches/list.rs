//! The wall time of `pmcstat -L` (target ≤ 20 ms): the whole command, from exec to exit, for
//! this machine's CPU and for CPUs named by `PMC_CPUID` (a large Intel table, a hybrid part,
//! an AMD part).
//!
//! `cargo bench -p pmcstat --bench list` prints milliseconds per run; `cargo test --benches`
//! runs each case twice only (a smoke run).

use std::process::Command;
use std::time::Instant;

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let runs = if quick { 2 } else { 50 };
    let pmcstat = env!("CARGO_BIN_EXE_pmcstat");
    for cpuid in [
        None,
        Some("GenuineIntel-6-8F-8"),
        Some("GenuineIntel-6-C5-2"),
        Some("AuthenticAMD-26-2-0"),
    ] {
        let mut lines = 0;
        let start = Instant::now();
        for _ in 0..runs {
            let mut command = Command::new(pmcstat);
            command.arg("-L");
            match cpuid {
                Some(cpuid) => command.env("PMC_CPUID", cpuid),
                None => command.env_remove("PMC_CPUID"),
            };
            let output = command.output().expect("pmcstat runs");
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
            lines = output.stdout.iter().filter(|&&b| b == b'\n').count();
        }
        let ms = start.elapsed().as_secs_f64() * 1e3 / f64::from(runs);
        println!("pmcstat -L for {:<22} {ms:>7.2} ms ({lines} lines)", cpuid.unwrap_or("this CPU"));
    }
}
