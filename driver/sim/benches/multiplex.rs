//! Cost of counter multiplexing: the tick that rotates multiplexed PMCs (per tick per CPU), and
//! the context-switch hooks of a process whose PMCs take turns.
//!
//! The driver runs on hardware whose MSR accesses do nothing (CPUID is the simulated Skylake:
//! 4 GP counters), so what is measured is the driver's own work. `cargo bench -p hwpmc-sim
//! --bench multiplex` prints nanoseconds; `driver/sim/benches/instructions.sh` runs it under
//! callgrind and prints instructions.
//!
//! * `--part=system`: 16 system-counting PMCs on CPU 0 (4 turns of 4), one tick after another.
//! * `--part=process`: a process with 16 multiplexed PMCs runs on CPU 0, ticks go by.
//! * `--part=switch`: that process is switched in and out (`--pmcs=N` multiplexed PMCs, 4 by
//!   default: one turn, nothing rotates; 8 or 16: two or four turns).
//! * `--part=quiet`: ticks of a CPU with no multiplexed PMC (what every tick pays).

use std::hint::black_box;
use std::time::Instant;

use hwpmc::abi::{Mode, PmcFlags};
use hwpmc::hw::{CpuIdReader, Hardware};
use hwpmc::{Driver, Tunables};
use hwpmc_sim::kernel::SimKernel;
use hwpmc_sim::{AllocateRequest, CpuidModel, Credentials, FreeMsrs, PmuModel, SimHardware};

type BenchDriver = Driver<SimKernel, FreeMsrs>;

fn load() -> (BenchDriver, SimKernel) {
    let model = PmuModel::skylake();
    let kernel = SimKernel::new(SimHardware::new(model, 1));
    let hw = FreeMsrs(CpuidModel::new(model, 0));
    assert!(hw.cpuid().cpuid1(0xA).eax != 0);
    (Driver::load(kernel.clone(), hw, Tunables::default()).expect("load"), kernel)
}

/// `n` multiplexed instruction counters of `mode` (on CPU 0 for system modes), started.
fn start_pmcs(driver: &BenchDriver, owner: i32, mode: Mode, n: usize) {
    let client = hwpmc_sim::PmcClient::new(driver, owner);
    let cpu = mode.is_system().then_some(0);
    for _ in 0..n {
        let request =
            AllocateRequest::iap(0x00C0).in_mode(mode, cpu).with_flags(PmcFlags::MULTIPLEX);
        let id = client.allocate(request).expect("allocate");
        client.start(id).expect("start");
    }
}

fn report(what: &str, elapsed: std::time::Duration, n: u32) {
    println!("  {what}: {:8.1} ns each", elapsed.as_nanos() as f64 / f64::from(n));
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let part = std::env::args().find_map(|a| a.strip_prefix("--part=").map(str::to_owned));
    let pmcs: usize =
        std::env::args().find_map(|a| a.strip_prefix("--pmcs=")?.parse().ok()).unwrap_or(4);
    let runs: u32 = if quick { 1_000 } else { 100_000 };
    let wants = |p: &str| part.as_deref().is_none_or(|w| w == p);
    println!("counter multiplexing, MSR accesses free, 4 GP counters");
    if wants("quiet") {
        let (driver, _) = load();
        let start = Instant::now();
        for _ in 0..runs {
            driver.tick(black_box(0));
        }
        report("tick of a CPU without multiplexed PMCs", start.elapsed(), runs);
    }
    if wants("system") {
        let (driver, kernel) = load();
        let tool = kernel.spawn(None, Credentials::root());
        start_pmcs(&driver, tool, Mode::SystemCounting, 16);
        let start = Instant::now();
        for _ in 0..runs {
            driver.tick(black_box(0));
        }
        report("tick rotating 16 system PMCs (4 turns of 4)", start.elapsed(), runs);
    }
    if wants("process") {
        let (driver, kernel) = load();
        let pid = kernel.spawn(None, Credentials::user(1000));
        let tid = kernel.threads(pid)[0];
        start_pmcs(&driver, pid, Mode::ThreadCounting, 16);
        driver.switch_in(0, pid, tid);
        let start = Instant::now();
        for _ in 0..runs {
            driver.tick(black_box(0));
        }
        report("tick rotating a process's 16 PMCs (4 turns of 4)", start.elapsed(), runs);
        driver.switch_out(0, pid, tid);
    }
    if wants("switch") {
        let (driver, kernel) = load();
        let pid = kernel.spawn(None, Credentials::user(1000));
        let tid = kernel.threads(pid)[0];
        start_pmcs(&driver, pid, Mode::ThreadCounting, pmcs);
        let start = Instant::now();
        for _ in 0..runs {
            driver.switch_in(black_box(0), black_box(pid), black_box(tid));
            driver.switch_out(black_box(0), black_box(pid), black_box(tid));
        }
        report(
            &format!("switch-in + switch-out of a process with {pmcs} multiplexed PMCs"),
            start.elapsed(),
            runs,
        );
    }
}
