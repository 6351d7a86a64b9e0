//! Cost of the context-switch hooks with 1, 4 and 8 running process PMCs, and for a thread of a
//! process without PMCs (0).
//!
//! The driver runs on hardware whose MSR accesses do nothing (CPUID is the simulated Skylake,
//! or the model `--model=` names: `zen4`, `zen2`), so what is measured is the driver's own
//! work. `cargo bench -p hwpmc-sim --bench
//! context_switch` prints nanoseconds per switch pair; `driver/sim/benches/instructions.sh`
//! runs it under callgrind and prints instructions per PMC per switch.
//!
//! By default one process is switched in and out of the CPU again and again. With
//! `--alternate`, two processes, each with its own PMCs on the same rows, take turns on it, so
//! nothing the hooks could remember about the last process helps the next one.

use std::hint::black_box;
use std::time::Instant;

use hwpmc::abi::event;
use hwpmc::hw::{CpuIdReader, Hardware};
use hwpmc::{Driver, Tunables};
use hwpmc_sim::kernel::SimKernel;
use hwpmc_sim::{AllocateRequest, CpuidModel, Credentials, FreeMsrs, PmuModel, SimHardware};

type BenchDriver = Driver<SimKernel, FreeMsrs>;

/// A driver with `processes` processes that each have `pmcs` running PMCs attached to
/// themselves; returns each one's pid and thread.
fn setup(model: PmuModel, pmcs: usize, processes: usize) -> (BenchDriver, Vec<(i32, i32)>) {
    let kernel = SimKernel::new(SimHardware::new(model, 1));
    let hw = FreeMsrs(CpuidModel::new(model, 0));
    assert!(model.is_amd() || hw.cpuid().cpuid1(0xA).eax != 0);
    let driver = Driver::load(kernel.clone(), hw, Tunables::default()).expect("load");
    let soft = driver.register_soft_event("CLOCK.HARD").expect("soft event");
    // AMD: the six core counters (instructions, cycles, branches, mispredicts, twice), then
    // two software events.
    let stat = driver.register_soft_event("CLOCK.STAT").expect("soft event");
    let amd = [
        AllocateRequest::k8(0x0C0),
        AllocateRequest::k8(0x076),
        AllocateRequest::k8(0x0C2),
        AllocateRequest::k8(0x0C3),
        AllocateRequest::k8(0x0C0),
        AllocateRequest::k8(0x076),
        AllocateRequest::soft(soft),
        AllocateRequest::soft(stat),
    ];
    let intel = [
        AllocateRequest::iap(0x00C0),
        AllocateRequest::iaf(event::IAF_INSTR_RETIRED_ANY),
        AllocateRequest::iap(0x003C),
        AllocateRequest::iaf(event::IAF_CPU_CLK_UNHALTED_CORE),
        AllocateRequest::iap(0x00C4),
        AllocateRequest::iaf(event::IAF_CPU_CLK_UNHALTED_REF),
        AllocateRequest::iap(0x00C5),
        AllocateRequest::soft(soft),
    ];
    let requests = if model.is_amd() { amd } else { intel };
    let mut threads = Vec::new();
    for _ in 0..processes {
        let pid = kernel.spawn(None, Credentials::user(1000));
        let client = hwpmc_sim::PmcClient::new(&driver, pid);
        for request in &requests[..pmcs] {
            let id = client.allocate(*request).expect("allocate");
            client.start(id).expect("start");
        }
        threads.push((pid, kernel.threads(pid)[0]));
    }
    (driver, threads)
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let only: Option<usize> =
        std::env::args().find_map(|a| a.strip_prefix("--pmcs=")?.parse().ok());
    let alternate = std::env::args().any(|a| a == "--alternate");
    let model = match std::env::args().find_map(|a| a.strip_prefix("--model=").map(str::to_owned)) {
        Some(name) if name == "zen4" => PmuModel::zen4(),
        Some(name) if name == "zen2" => PmuModel::zen2(),
        Some(name) if name == "skylake" => PmuModel::skylake(),
        Some(name) => panic!("--model={name}: use skylake, zen4 or zen2"),
        None => PmuModel::skylake(),
    };
    // Switch pairs per run, whether one process or two take turns.
    let pairs: u32 = if quick { 1_000 } else { 200_000 };
    let processes = if alternate { 2 } else { 1 };
    println!(
        "context-switch hooks (switch_in + switch_out), MSR accesses free, {}",
        if alternate { "two processes taking turns" } else { "one process" }
    );
    for pmcs in [0, 1, 4, 8].into_iter().filter(|n| only.is_none_or(|o| o == *n)) {
        let (driver, threads) = setup(model, pmcs, processes);
        let start = Instant::now();
        for _ in 0..pairs / processes as u32 {
            for &(pid, tid) in &threads {
                driver.switch_in(black_box(0), black_box(pid), black_box(tid));
                driver.switch_out(black_box(0), black_box(pid), black_box(tid));
            }
        }
        let elapsed = start.elapsed();
        let per_pair = elapsed.as_nanos() as f64 / f64::from(pairs);
        if pmcs == 0 {
            println!("  no PMC:    {per_pair:8.1} ns per switch-in + switch-out");
            continue;
        }
        println!(
            "  {pmcs} PMC(s): {per_pair:8.1} ns per switch-in + switch-out, {:6.1} ns per PMC per switch",
            per_pair / pmcs as f64 / 2.0
        );
    }
}
