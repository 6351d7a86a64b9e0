//! How much counting perturbs the counted program: its context switches counted by
//! `pmcstat -p context-switches` next to `perf stat -e context-switches` and to the program run
//! alone (its rusage), for an idle program (`sleep`) and a CPU-bound one (a shell loop). Prints
//! medians of several runs; nothing is asserted.
//!
//! `cargo bench -p pmcstat --bench context_switches` (it builds pmcstat with the bench
//! profile). Without `--bench` (as `cargo test --benches`
//! runs it) it does one short smoke run. `PMCSTAT_BENCH_RUNS` overrides the number of runs.

use std::process::{Command, Stdio};

/// A program to count: a name and its command line.
struct Workload {
    name: &'static str,
    argv: Vec<String>,
}

fn workloads(full: bool) -> Vec<Workload> {
    let (sleep, loops) = if full { ("3", "3000000") } else { ("0.05", "20000") };
    vec![
        Workload { name: "idle: sleep", argv: vec!["sleep".into(), sleep.into()] },
        Workload {
            name: "CPU-bound: shell loop",
            argv: vec![
                "sh".into(),
                "-c".into(),
                format!("i=0; while [ $i -lt {loops} ]; do i=$((i+1)); done"),
            ],
        },
    ]
}

/// The program's context switches counted by pmcstat (`--json`).
fn under_pmcstat(argv: &[String]) -> Option<u64> {
    let output = Command::new(env!("CARGO_BIN_EXE_pmcstat"))
        .args(["--json", "-p", "context-switches", "--"])
        .args(argv)
        .env("PMC_HOST", "linux")
        .stderr(Stdio::inherit())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    // {"pmcs":[{"event":"context-switches",...,"value":N}],...}
    let value = text.split("\"value\":").nth(1)?;
    value.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// The program's context switches counted by `perf stat` (`None` without perf).
fn under_perf(argv: &[String]) -> Option<u64> {
    let output = Command::new("perf")
        .args(["stat", "-x", ",", "-e", "context-switches", "--"])
        .args(argv)
        .stdout(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stderr);
    // CSV: value,unit,event,...
    let line = text.lines().find(|l| l.contains("context-switches"))?;
    line.split(',').next()?.trim().parse().ok()
}

/// The program's context switches (voluntary + involuntary) run alone, from its rusage.
fn alone(argv: &[String]) -> Option<u64> {
    let child = Command::new(&argv[0]).args(&argv[1..]).spawn().ok()?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `usage` are valid locals for wait4 to fill; `pid` is our child.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    (reaped == pid).then(|| (usage.ru_nvcsw + usage.ru_nivcsw) as u64)
}

fn median(mut values: Vec<u64>) -> Option<u64> {
    values.sort_unstable();
    values.get(values.len() / 2).copied()
}

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let runs = std::env::var("PMCSTAT_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(if full { 7 } else { 1 })
        .max(1);
    println!(
        "context switches of the counted program ({} run{}, median of {runs} runs)",
        if full { "full" } else { "quick smoke" },
        if cfg!(debug_assertions) { ", UNOPTIMISED build" } else { "" },
    );
    println!(
        "{:<24} {:>10} {:>10} {:>10} {:>12}",
        "program", "alone", "perf stat", "pmcstat", "pmcstat/perf"
    );
    for workload in workloads(full) {
        let (mut solo, mut perf, mut ours) = (Vec::new(), Vec::new(), Vec::new());
        // Interleaved, so that a busy moment of the machine does not land on one tool only.
        for _ in 0..runs {
            solo.extend(alone(&workload.argv));
            perf.extend(under_perf(&workload.argv));
            ours.extend(under_pmcstat(&workload.argv));
        }
        let show = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
        let (solo, perf, ours) = (median(solo), median(perf), median(ours));
        let ratio = match (ours, perf) {
            (Some(o), Some(p)) if p > 0 => format!("{:.2}", o as f64 / p as f64),
            _ => "-".to_owned(),
        };
        println!(
            "{:<24} {:>10} {:>10} {:>10} {:>12}",
            workload.name,
            show(solo),
            show(perf),
            show(ours),
            ratio
        );
    }
    if under_perf(&["true".into()]).is_none() {
        println!("(perf stat did not run: install perf, e.g. Debian's linux-perf, for its column)");
    }
}
