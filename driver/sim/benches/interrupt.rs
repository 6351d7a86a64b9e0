//! Cost of the sampling path: the performance-monitoring interrupt taking one sample, and the
//! log path (ring → log buffers → the kernel's sink) writing CALLCHAIN records.
//!
//! MSR accesses cost nothing here: GLOBAL_STATUS always reports GP counter 0 overflowed, every
//! other read returns 0, writes are dropped; CPUID is the simulated Skylake. `cargo bench -p
//! hwpmc-sim --bench interrupt` prints nanoseconds per interrupt and records/s through the log
//! path; under callgrind (`--toggle-collect='*interrupt*'`) it gives instructions per sample.

use std::hint::black_box;
use std::time::Instant;

use hwpmc::abi::{Mode, Op, PmcOpConfigureLog};
use hwpmc::hw::{CpuIdReader, Hardware, Lapic, Msrs, msr};
use hwpmc::{Driver, TrapFrame, Tunables};
use hwpmc_sim::kernel::SimKernel;
use hwpmc_sim::{
    AllocateRequest, CpuidModel, Credentials, PmcClient, PmuModel, SimHardware, SinkKind,
};

/// Hardware whose only state is "GP counter 0 overflowed".
#[derive(Clone)]
struct OverflowingPmu(CpuidModel);

impl Msrs for OverflowingPmu {
    fn read_msr(&self, address: u32) -> u64 {
        if address == msr::IA32_PERF_GLOBAL_STATUS { 1 } else { 0 }
    }
    fn write_msr(&self, _msr: u32, _value: u64) {}
    fn read_pmc(&self, _index: u32) -> u64 {
        0
    }
}

impl Lapic for OverflowingPmu {
    fn unmask_pmi(&self) {}
    fn mask_pmi(&self) {}
}

impl Hardware for OverflowingPmu {
    type Cpuid = CpuidModel;
    fn cpuid(&self) -> CpuidModel {
        self.0
    }
    fn read_tsc(&self) -> u64 {
        0
    }
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let samples: u32 = if quick { 2_000 } else { 2_000_000 };
    let model = PmuModel::skylake();
    let kernel = SimKernel::new(SimHardware::new(model, 1));
    let hw = OverflowingPmu(CpuidModel::new(model, 0));
    assert!(hw.cpuid().cpuid1(0xA).eax != 0);
    let tunables = Tunables { nsamples: 4096, ..Tunables::default() };
    let driver = Driver::load(kernel.clone(), hw, tunables).expect("load");
    let owner = kernel.spawn(None, Credentials::user(1000));
    let tid = kernel.threads(owner)[0];
    let fd = kernel.open_sink(owner, SinkKind::Writable);
    let client = PmcClient::new(&driver, owner);
    client.call(Op::ConfigureLog, &mut PmcOpConfigureLog { pm_flags: 0, pm_logfd: fd }).unwrap();
    let request = AllocateRequest::iap(0x00C0).in_mode(Mode::ThreadSampling, None);
    let id = client.allocate(request.with_count(100_000)).unwrap();
    client.start(id).unwrap();
    driver.switch_in(0, owner, tid);
    let frame = TrapFrame { pc: 0x40_1000, fp: 0, sp: 0, user: true };

    // The interrupt path alone: drain every 4096 samples, outside the timed loop.
    let mut in_interrupt = std::time::Duration::ZERO;
    let mut taken = 0;
    while taken < samples {
        let batch = 4000.min(samples - taken);
        let start = Instant::now();
        for _ in 0..batch {
            black_box(driver.interrupt(black_box(0), black_box(&frame)));
        }
        in_interrupt += start.elapsed();
        taken += batch;
        driver.tick(0);
        driver.write_logs();
    }
    let per_sample = in_interrupt.as_nanos() as f64 / f64::from(samples);
    println!("interrupt path, callchain depth 1 (the sampled PC), MSR accesses free:");
    println!("  {per_sample:8.1} ns per sample ({samples} samples)");

    // The log path: samples already in the ring, drained into CALLCHAIN records and written.
    let mut drained = std::time::Duration::ZERO;
    let mut records = 0u64;
    while records < u64::from(samples) {
        for _ in 0..4000 {
            driver.interrupt(0, &frame);
        }
        let start = Instant::now();
        driver.tick(0);
        driver.write_logs();
        drained += start.elapsed();
        records += 4000;
    }
    let rate = records as f64 / drained.as_secs_f64();
    println!("log path (ring -> buffers -> sink), depth 1:");
    println!("  {:8.2} M CALLCHAIN records/s ({records} records)", rate / 1e6);
    let stats = client.driver_stats().unwrap();
    assert_eq!(stats.pm_intr_bufferfull, 0, "the bench must not drop samples");
}
