//! `pmcstat -R` over a large log: the text dump, `-G`, `--folded` and `--top`, each timed in CPU
//! time (user + system of the pmcstat process) with its peak resident memory, as MiB of log and
//! records per CPU-second. Nothing is asserted.
//!
//! The log: `PMCSTAT_BENCH_LOG=PATH`, e.g. the 512 MiB log the decoder benchmark keeps with
//! `PMCLOG_BENCH_KEEP=PATH cargo bench -p pmclog --features capi`; without it, a log sampled
//! here from a real program (small: the numbers then mean little). Without `--bench` (as
//! `cargo test --benches` runs it) it is a quick smoke run on that small log.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const MIB: f64 = 1024.0 * 1024.0;

/// A pmcstat run's CPU time in seconds, peak resident memory in bytes and exit status.
fn run_pmcstat(args: &[&str]) -> (f64, u64, i32) {
    // Reaped by wait4 below, which also gives its resource usage.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(env!("CARGO_BIN_EXE_pmcstat"))
        .args(args)
        .env("PMC_HOST", "linux")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("running pmcstat");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid locals for wait4 to fill; the pid is our child's.
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = seconds(usage.ru_utime) + seconds(usage.ru_stime);
    (cpu, usage.ru_maxrss as u64 * 1024, libc::WEXITSTATUS(status))
}

/// A small sampling log of a CPU-bound shell loop, written by pmcstat.
fn sampled_log(dir: &Path) -> PathBuf {
    let path = dir.join("sampled.log");
    let loop_ = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";
    let log = path.to_str().expect("a UTF-8 temporary path");
    let (_, _, status) = run_pmcstat(&["-P", "cpu-clock", "-O", log, "--", "sh", "-c", loop_]);
    assert_eq!(status, 0, "sampling the benchmark's log");
    path
}

/// The records of the log at `path`.
fn records_of(path: &Path) -> u64 {
    let mut reader = pmclog::LogReader::new(std::fs::File::open(path).expect("the log"));
    while let Ok(Some(_)) = reader.next_entry() {}
    reader.count()
}

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let dir = std::env::temp_dir().join(format!("pmcstat-report-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let given = std::env::var_os("PMCSTAT_BENCH_LOG").map(PathBuf::from).filter(|_| full);
    let log = given.clone().unwrap_or_else(|| sampled_log(&dir));
    let bytes = std::fs::metadata(&log).expect("the log").len();
    let records = records_of(&log);
    println!(
        "pmcstat -R over {} ({:.1} MiB, {records} records){}",
        log.display(),
        bytes as f64 / MIB,
        if given.is_none() { "; set PMCSTAT_BENCH_LOG for a large log" } else { "" }
    );
    println!(
        "{:<16} {:>10} {:>11} {:>13} {:>13}",
        "report", "CPU s", "MiB/CPU-s", "rec/CPU-s", "peak memory"
    );
    let path = log.to_str().expect("a UTF-8 log path");
    let null = "/dev/null";
    let modes: [(&str, Vec<&str>); 4] = [
        ("text dump", vec!["-R", path, "-o", null]),
        ("-G", vec!["-q", "-R", path, "-G", null]),
        ("--folded", vec!["-q", "-R", path, "--folded", null]),
        ("--top 20", vec!["-q", "-R", path, "--top", "20", "-o", null]),
    ];
    for (name, args) in modes {
        let (cpu, peak, status) = run_pmcstat(&args);
        let cpu = cpu.max(1e-6);
        println!(
            "{name:<16} {cpu:>10.3} {:>11.1} {:>13.0} {:>10.1} MiB{}",
            bytes as f64 / MIB / cpu,
            records as f64 / cpu,
            peak as f64 / MIB,
            if status == 0 { String::new() } else { format!("  (exit status {status})") }
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
