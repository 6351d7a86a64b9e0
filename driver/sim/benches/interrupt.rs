//! Cost of the sampling path: the performance-monitoring interrupt taking one sample, and the
//! log path (ring → log buffers → the kernel's sink) writing CALLCHAIN records; then deep
//! callchains: a user stack walked at return to user mode, and a kernel stack of 128 frames
//! walked in the interrupt.
//!
//! MSR accesses cost nothing here: GLOBAL_STATUS always reports GP counter 0 overflowed (AMD's
//! PerfCntrGlobalStatus too, until the handler clears it), every other read returns 0, writes
//! are dropped; CPUID is the simulated Skylake, or the model `--model=` names (`zen4`, `zen2`). `cargo bench -p
//! hwpmc-sim --bench interrupt` prints nanoseconds per interrupt and records/s through the log
//! path; under callgrind (`--toggle-collect='*interrupt*'`) it gives instructions per sample
//! (see `instructions.sh`). `--parts=pc,log,user,kernel` runs only the parts named (default:
//! all); `--freeze` sets the `freeze_on_pmi` tunable.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hwpmc::abi::{Mode, Op, PmcFlags};
use hwpmc::arch::x86::amd::msr as amd;
use hwpmc::arch::x86::msr;
use hwpmc::hw::{CpuIdReader, Hardware, Lapic, Msrs};
use hwpmc::{Driver, TrapFrame, Tunables};
use hwpmc_sim::kernel::{KERNEL_STACK_SIZE, SCRATCH_BASE, SimKernel, kernel_stack_base};
use hwpmc_sim::{
    AllocateRequest, CpuidModel, Credentials, PmcClient, PmuModel, SimHardware, SinkKind,
};

/// Hardware whose only state is "GP counter 0 overflowed": its status bit (Intel's
/// IA32_PERF_GLOBAL_STATUS, AMD's PerfCntrGlobalStatus), cleared through the status-clear MSR and
/// set again as soon as the counters are started (the counter overflows at once), so that every
/// interrupt finds one overflow and handles it in one round. Counters read 0, which is an
/// overflow for AMD's legacy counters too (top bit clear).
#[derive(Clone)]
struct OverflowingPmu(CpuidModel, Arc<AtomicU64>);

impl Msrs for OverflowingPmu {
    unsafe fn read_msr(&self, address: u32) -> u64 {
        match address {
            msr::IA32_PERF_GLOBAL_STATUS | amd::PERF_CNTR_GLOBAL_STATUS => {
                self.1.load(Ordering::Relaxed)
            }
            _ => 0,
        }
    }
    unsafe fn write_msr(&self, address: u32, value: u64) {
        match address {
            msr::IA32_PERF_GLOBAL_OVF_CTRL | amd::PERF_CNTR_GLOBAL_STATUS_CLR => {
                _ = self.1.fetch_and(!value, Ordering::Relaxed)
            }
            msr::IA32_PERF_GLOBAL_CTRL | amd::PERF_CNTR_GLOBAL_CTL if value & 1 != 0 => {
                self.1.store(1, Ordering::Relaxed)
            }
            _ => {}
        }
    }
    unsafe fn read_pmc(&self, _index: u32) -> u64 {
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

/// A request for instructions on `model`'s first programmable counter (IAP or K8).
fn instructions(model: &PmuModel) -> AllocateRequest {
    AllocateRequest::arch(model, hwpmc_sim::ArchEvent::Instructions, 0)
}

/// The parts of the bench `--parts=` names (all by default).
fn part_enabled(part: &str) -> bool {
    let parts = std::env::args().find_map(|a| a.strip_prefix("--parts=").map(str::to_owned));
    parts.is_none_or(|parts| parts.split(',').any(|p| p == part))
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let samples: u32 = if quick { 2_000 } else { 2_000_000 };
    let model = match std::env::args().find_map(|a| a.strip_prefix("--model=").map(str::to_owned)) {
        Some(name) if name == "zen4" => PmuModel::zen4(),
        Some(name) if name == "zen2" => PmuModel::zen2(),
        Some(name) if name == "skylake" => PmuModel::skylake(),
        Some(name) => panic!("--model={name}: use skylake, zen4 or zen2"),
        None => PmuModel::skylake(),
    };
    let kernel = SimKernel::new(SimHardware::new(model, 1));
    let hw = OverflowingPmu(CpuidModel::new(model, 0), Arc::new(AtomicU64::new(1)));
    assert!(model.is_amd() || hw.cpuid().cpuid1(0xA).eax != 0);
    // `--freeze`: the PMU freezes its counters on a PMI (the `freeze_on_pmi` tunable).
    let freeze_on_pmi = std::env::args().any(|a| a == "--freeze");
    let tunables = Tunables { nsamples: 4096, freeze_on_pmi, ..Tunables::default() };
    let driver = Driver::load(kernel.clone(), hw, tunables).expect("load");
    let owner = kernel.spawn(None, Credentials::user(1000));
    let tid = kernel.threads(owner)[0];
    let fd = kernel.open_sink(owner, SinkKind::Writable);
    let client = PmcClient::new(&driver, owner);
    client.configure_log(fd).unwrap();
    let request = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let id = client.allocate(request.with_count(100_000)).unwrap();
    client.start(id).unwrap();
    driver.switch_in(0, owner, tid);
    let frame = TrapFrame { pc: 0x40_1000, fp: 0, sp: 0, user: true };

    // The interrupt path alone: drain every 4096 samples, outside the timed loop.
    let mut in_interrupt = std::time::Duration::ZERO;
    let mut taken = 0;
    while part_enabled("pc") && taken < samples {
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
    if part_enabled("pc") {
        let per_sample = in_interrupt.as_nanos() as f64 / f64::from(samples);
        println!("interrupt path, callchain depth 1 (the sampled PC), MSR accesses free:");
        println!("  {per_sample:8.1} ns per sample ({samples} samples)");
    }

    // The log path: samples already in the ring, drained into CALLCHAIN records and written.
    let mut drained = std::time::Duration::ZERO;
    let mut records = 0u64;
    while part_enabled("log") && records < u64::from(samples) {
        for _ in 0..4000 {
            driver.interrupt(0, &frame);
        }
        let start = Instant::now();
        driver.tick(0);
        driver.write_logs();
        drained += start.elapsed();
        records += 4000;
    }
    if part_enabled("log") {
        let rate = records as f64 / drained.as_secs_f64();
        println!("log path (ring -> buffers -> sink), depth 1:");
        println!("  {:8.2} M CALLCHAIN records/s ({records} records)", rate / 1e6);
    }
    let stats = client.driver_stats().unwrap();
    assert_eq!(stats.pm_intr_bufferfull, 0, "the bench must not drop samples");
    driver.switch_out(0, owner, tid);
    client.release(id).unwrap();
    if part_enabled("user") {
        user_callchains(&driver, &kernel, &client, fd, samples);
    }
    if part_enabled("kernel") {
        kernel_callchains(&driver, &kernel, &client, fd, samples);
    }
}

/// Depth 32: a CALLCHAIN PMC; the interrupt parks the sample, the return to user mode walks 31
/// frame records of the sampled thread's stack, the tick logs 32-PC records.
fn user_callchains(
    driver: &Driver<SimKernel, OverflowingPmu>,
    kernel: &SimKernel,
    client: &PmcClient<'_, OverflowingPmu>,
    fd: i32,
    samples: u32,
) {
    let owner = client.pid();
    let tid = kernel.threads(owner)[0];
    let id = start_callchain_pmc(driver, client);
    driver.switch_in(0, owner, tid);
    let innermost = SCRATCH_BASE + 0x1000;
    for i in 0..DEPTH - 1 {
        let fp = innermost + 16 * i;
        let caller = if i + 1 < DEPTH - 1 { fp + 16 } else { 0 };
        let record = [caller.to_le_bytes(), (0x40_2000 + i).to_le_bytes()].concat();
        kernel.write_memory(owner, fp, &record).unwrap();
    }
    let frame = TrapFrame { pc: 0x40_1000, fp: innermost, sp: innermost, user: true };
    let zero = std::time::Duration::ZERO;
    let (mut in_interrupt, mut walking, mut logging) = (zero, zero, zero);
    let mut records = 0u64;
    kernel.set_caller(owner);
    while records < u64::from(samples) {
        for _ in 0..64 {
            let start = Instant::now();
            black_box(driver.interrupt(black_box(0), black_box(&frame)));
            let interrupted = Instant::now();
            return_to_user(driver, owner, tid, &frame);
            walking += interrupted.elapsed();
            in_interrupt += interrupted - start;
        }
        let start = Instant::now();
        driver.tick(0);
        driver.write_logs();
        logging += start.elapsed();
        records += 64;
    }
    let per = |d: std::time::Duration| d.as_nanos() as f64 / records as f64;
    println!("callchain depth {DEPTH} (user stack walked at return to user mode):");
    println!("  {:8.1} ns per sample in the interrupt", per(in_interrupt));
    println!("  {:8.1} ns per sample walking the stack at user return", per(walking));
    let rate = records as f64 / logging.as_secs_f64();
    println!("  {:8.2} M CALLCHAIN records/s through the log path ({records} records)", rate / 1e6);
    let last_depth = last_callchain(kernel, client, fd).map(|(depth, _)| depth);
    assert_eq!(last_depth, Some(DEPTH as usize), "the walk must reach every frame");
    driver.switch_out(0, owner, tid);
    client.release(id).unwrap();
}

/// A kernel callchain of [`kernel_depth`] frames (128 by default): a CALLCHAIN PMC samples
/// kernel mode, and the interrupt walks depth − 1 frame records of the interrupted thread's
/// kernel stack (each read through `Kernel::read_kernel_stack`) into the ring.
fn kernel_callchains(
    driver: &Driver<SimKernel, OverflowingPmu>,
    kernel: &SimKernel,
    client: &PmcClient<'_, OverflowingPmu>,
    fd: i32,
    samples: u32,
) {
    let owner = client.pid();
    let tid = kernel.threads(owner)[0];
    let id = start_callchain_pmc(driver, client);
    kernel.set_running(0, Some(tid));
    driver.switch_in(0, owner, tid);
    let depth = kernel_depth();
    let records_on_stack = depth - 1;
    let innermost = kernel_stack_base(tid) + KERNEL_STACK_SIZE - 16 * records_on_stack;
    for i in 0..records_on_stack {
        let fp = innermost + 16 * i;
        let caller = if i + 1 < records_on_stack { fp + 16 } else { 0 };
        let record = [caller.to_le_bytes(), (0xffff_ffff_8020_0000 + 16 * i).to_le_bytes()];
        kernel.write_kernel_stack(tid, fp, &record.concat()).unwrap();
    }
    let frame = TrapFrame { pc: 0xffff_ffff_8010_0040, fp: innermost, sp: innermost, user: false };
    let mut in_interrupt = std::time::Duration::ZERO;
    let mut taken = 0;
    while taken < samples {
        let batch = 4000.min(samples - taken);
        let start = Instant::now();
        for _ in 0..batch {
            black_box(kernel_interrupt(driver, black_box(&frame)));
        }
        in_interrupt += start.elapsed();
        taken += batch;
        driver.tick(0);
        driver.write_logs();
    }
    let per_sample = in_interrupt.as_nanos() as f64 / f64::from(samples);
    println!("callchain depth {depth} in the kernel (walked in the interrupt):");
    println!("  {per_sample:8.1} ns per sample ({samples} samples)");
    let last = last_callchain(kernel, client, fd);
    assert_eq!(last, Some((depth as usize, false)), "the walk must reach every frame");
    driver.switch_out(0, owner, tid);
    kernel.set_running(0, None);
    client.release(id).unwrap();
}

/// Allocates and starts a CALLCHAIN PMC sampling every 100 000 instructions of its owner.
fn start_callchain_pmc(
    driver: &Driver<SimKernel, OverflowingPmu>,
    client: &PmcClient<'_, OverflowingPmu>,
) -> u32 {
    let model = *driver.hardware().0.model();
    let request = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let request = request.with_count(100_000).with_flags(PmcFlags::CALLCHAIN);
    let id = client.allocate(request).unwrap();
    client.start(id).unwrap();
    id
}

/// Checks that the bench lost no sample, then flushes the owner's log (on descriptor `fd`) and
/// returns its last CALLCHAIN record's depth and whether it was taken in user mode.
fn last_callchain(
    kernel: &SimKernel,
    client: &PmcClient<'_, OverflowingPmu>,
    fd: i32,
) -> Option<(usize, bool)> {
    let stats = client.driver_stats().unwrap();
    assert_eq!(stats.pm_intr_bufferfull, 0, "the bench must not drop samples");
    client.call_raw(Op::FlushLog.as_u32(), hwpmc::UserPtr::NULL).unwrap();
    let bytes = kernel.sink_bytes(kernel.sink_of(client.pid(), fd).unwrap());
    pmclog::Records::new(&bytes)
        .filter_map(|e| match e.expect("the log decodes").record {
            pmclog::Record::Callchain(cc) => Some((cc.pcs.len(), cc.cpuflags.is_user())),
            _ => None,
        })
        .last()
}

/// Frames per callchain in the kernel-callchain part: `--kernel-depth=N`, by default 128 (the
/// default `kern.hwpmc.callchaindepth`).
fn kernel_depth() -> u64 {
    std::env::args()
        .find_map(|a| a.strip_prefix("--kernel-depth=").and_then(|d| d.parse().ok()))
        .filter(|d| (2..=128).contains(d))
        .unwrap_or(128)
}

/// The interrupt of the kernel-callchain part, kept out of line so callgrind can count it
/// (`--toggle-collect='*kernel_interrupt*'`).
#[inline(never)]
fn kernel_interrupt(driver: &Driver<SimKernel, OverflowingPmu>, frame: &TrapFrame) -> bool {
    driver.interrupt(0, frame)
}

/// Frames per callchain in the deep-callchain part.
const DEPTH: u64 = 32;

/// The driver's return-to-user hook, kept out of line so callgrind can count it
/// (`--toggle-collect='*return_to_user*'`).
#[inline(never)]
fn return_to_user(
    driver: &Driver<SimKernel, OverflowingPmu>,
    pid: hwpmc::Pid,
    tid: hwpmc::Tid,
    frame: &TrapFrame,
) {
    driver.user_return(0, pid, tid, frame);
}
