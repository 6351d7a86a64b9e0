//! The driver under PMIs served late, as on hardware ([`hwpmc_sim::timing`]): what freezing costs
//! counting PMCs, what skid does to samples, the driver's own ring-0 work counted and sampled,
//! and other users' status bits left alone.

use std::rc::Rc;

use hwpmc::Tunables;
use hwpmc::abi::Mode;
use hwpmc_sim::machine::{DRIVER_PC, KERNEL_IDLE_PC, Machine, MachineConfig};
use hwpmc_sim::pmu::{Ring, Work, msr};
use hwpmc_sim::timing::PmiTiming;
use hwpmc_sim::{AllocateRequest, ArchEvent, Credentials, PmuModel, Program, ProgramBuilder};
use pmclog::{Record, Records};

/// 1000 instructions over 1500 core cycles.
fn user_block() -> Work {
    Work { instructions: 1000, core_cycles: 1500, ref_cycles: 1200, ..Work::default() }
}

/// A system call's kernel block: 300 instructions over 650 cycles.
fn kernel_block() -> Work {
    Work { instructions: 300, core_cycles: 650, ref_cycles: 500, ..Work::default() }
}

/// `main` runs a user block and a system call, 2000 times.
fn busy_program() -> Rc<Program> {
    ProgramBuilder::new("/usr/bin/busy")
        .function("main", |f| {
            f.block(Ring::User, user_block()).syscall("sys_work").loop_to(0, 2000).exit()
        })
        .kernel_function("sys_work", |f| f.block(Ring::Kernel, kernel_block()).ret())
        .build()
}

/// A machine of `model` (one CPU) with `timing` and the driver's freeze tunable at `freeze`.
fn machine(model: PmuModel, timing: PmiTiming, freeze: bool, seed: u64) -> Machine {
    let tunables = Tunables { freeze_on_pmi: freeze, ..Tunables::default() };
    Machine::new(MachineConfig::new(model, 1).seed(seed).tunables(tunables).timing(timing))
}

/// What one run measured.
#[derive(Debug)]
struct Run {
    /// Core cycles the counting PMC missed (truth − count).
    missed_cycles: i128,
    /// Core cycles the process retired.
    cycles: u128,
    /// Core cycles retired while a PMI waited to be served.
    late_cycles: u128,
    /// The samples of the sampling PMC: (pc, user?).
    samples: Vec<(u64, bool)>,
}

/// Runs [`busy_program`] with a user-mode sampling PMC on instructions (period 10 000) and a
/// counting PMC on core cycles in both rings beside it, from a tool process.
fn run(model: PmuModel, timing: PmiTiming, freeze: bool, seed: u64) -> Run {
    let mut m = machine(model, timing, freeze, seed);
    let tool = m.spawn_tool(Credentials::user(1000));
    let kernel = m.kernel().clone();
    let fd = kernel.open_sink(tool, hwpmc_sim::SinkKind::Writable);
    m.client(tool).configure_log(fd).unwrap();
    let target = m.spawn(&busy_program(), Credentials::user(1000));
    let sampler = AllocateRequest::iap(0x01_00C0).in_mode(Mode::ThreadSampling, None);
    let sampler = m.client(tool).allocate(sampler.with_count(10_000)).unwrap();
    let counter = m.client(tool).allocate(AllocateRequest::iap(0x03_003C)).unwrap();
    for id in [sampler, counter] {
        m.client(tool).attach(id, target).unwrap();
        m.client(tool).start(id).unwrap();
    }
    m.run_until_idle();
    m.hardware().assert_no_faults();
    let count = m.client(tool).read(counter).unwrap();
    let cycles = m.process_truth(target).arch(ArchEvent::CoreCycles);
    m.client(tool).flush_log().unwrap();
    let bytes = kernel.sink_bytes(kernel.sink_of(tool, fd).unwrap());
    let samples = Records::new(&bytes)
        .map(|e| e.expect("the log decodes").record)
        .filter_map(|r| match r {
            Record::Callchain(cc) if cc.pmcid == sampler => {
                Some((cc.pcs.iter().next().unwrap(), cc.cpuflags.is_user()))
            }
            _ => None,
        })
        .collect();
    Run {
        missed_cycles: cycles as i128 - i128::from(count),
        cycles,
        late_cycles: m.total_late_truth().arch(ArchEvent::CoreCycles),
        samples,
    }
}

/// D2, measured: PMIs served up to 2 or 8 block executions late. Without freezing, a counting PMC
/// beside a sampling one counts exactly (the handler stops the counters only while it runs);
/// with it, everything that retired between a PMI's raising and its service is lost to it —
/// never more than that, but not nothing. Freezing is off by default for this reason.
#[test]
fn freezing_loses_what_retires_before_the_pmi_is_served_and_not_freezing_loses_nothing() {
    let models = [("skylake", PmuModel::skylake()), ("core2", PmuModel::core2())];
    for ((name, model), latency) in models.into_iter().flat_map(|m| [2, 8].map(|l| (m, l))) {
        let mut report = Vec::new();
        for seed in 0..3 {
            let timing = PmiTiming::exact().latency(latency);
            let unfrozen = run(model, timing.clone(), false, seed);
            assert_eq!(unfrozen.missed_cycles, 0, "{name} seed {seed}: not freezing is exact");
            let frozen = run(model, timing, true, seed);
            assert!(frozen.missed_cycles > 0, "{name} seed {seed}: freezing loses events");
            assert!(
                frozen.missed_cycles as u128 <= frozen.late_cycles,
                "{name} seed {seed}: lost {} of the {} late cycles",
                frozen.missed_cycles,
                frozen.late_cycles
            );
            let exact = run(model, PmiTiming::exact(), true, seed);
            assert_eq!(exact.missed_cycles, 0, "{name}: the exact mode loses nothing");
            report.push(format!(
                "seed {seed}: frozen missed {} of {} cycles ({:.3}%), unfrozen missed 0",
                frozen.missed_cycles,
                frozen.cycles,
                frozen.missed_cycles as f64 * 100.0 / frozen.cycles as f64
            ));
        }
        eprintln!("{name}, latency up to {latency} block(s): {}", report.join("; "));
    }
    // A hypervisor guest never freezes, whatever the tunable says.
    let kvm = run(PmuModel::kvm_guest(), PmiTiming::exact().latency(8), true, 0);
    assert_eq!(kvm.missed_cycles, 0, "a KVM guest does not freeze");
}

/// D4: the PMI lands some instructions after the overflow, possibly in another ring: a user-only
/// sampling PMC is sampled in the kernel just after a system call. What hardware guarantees is
/// that the sample's PC is one the thread executed (here, the start of one of its blocks);
/// the exact mode keeps the exact PC and ring.
#[test]
fn skid_moves_samples_to_later_blocks_and_other_rings() {
    let program = busy_program();
    let user_start = program.function(program.entry()).block(0).start;
    // A PC the thread executed: a block's start, or the kernel's where a PMI that waited past
    // the end of the time slice is served (the timer's interrupt).
    let executed = |pc: u64| program.block_at(pc).is_some() || pc == KERNEL_IDLE_PC;
    let exact = run(PmuModel::skylake(), PmiTiming::exact(), false, 1);
    assert_eq!(exact.samples.len(), 200, "2 000 000 user instructions, one sample per 10 000");
    assert!(exact.samples.iter().all(|&s| s == (user_start, true)), "{:x?}", exact.samples);
    let late = run(PmuModel::skylake(), PmiTiming::exact().latency(3), false, 1);
    assert!(late.samples.iter().all(|&(pc, _)| executed(pc)), "{:x?}", late.samples);
    let in_kernel = late.samples.iter().filter(|(_, user)| !user).count();
    assert!(in_kernel > 0, "some samples skid into the system call");
    // Each served late, its counter reloaded with the period then: never more samples.
    assert!(late.samples.len() <= 200 && late.samples.len() >= 150, "{}", late.samples.len());
}

/// The driver's own instructions: OS-mode counters count them, and a sampling PMC in the kernel
/// overflows inside the driver (right after `switch_in` starts it) and is sampled there.
/// User-only counts stay exact, and a count in both rings is at least the process's and at most
/// that plus the driver's work.
#[test]
fn os_mode_counters_count_the_driver_and_overflow_inside_it() {
    let timing = PmiTiming::exact().driver_work(50);
    let config = MachineConfig::new(PmuModel::skylake(), 1).seed(3).quantum(3).timing(timing);
    let mut m = Machine::new(config);
    m.spawn(&busy_program(), Credentials::user(1001));
    let tool = m.spawn_tool(Credentials::user(1000));
    let kernel = m.kernel().clone();
    let fd = kernel.open_sink(tool, hwpmc_sim::SinkKind::Writable);
    m.client(tool).configure_log(fd).unwrap();
    let target = m.spawn(&busy_program(), Credentials::user(1000));
    let sampler = AllocateRequest::iap(0x02_00C0).in_mode(Mode::ThreadSampling, None);
    let sampler = m.client(tool).allocate(sampler.with_count(1000)).unwrap();
    let user = m.client(tool).allocate(AllocateRequest::iap(0x01_00C0)).unwrap();
    let both = m.client(tool).allocate(AllocateRequest::iap(0x03_00C0)).unwrap();
    for id in [sampler, user, both] {
        m.client(tool).attach(id, target).unwrap();
        m.client(tool).start(id).unwrap();
    }
    m.run_until_idle();
    m.hardware().assert_no_faults();
    let truth = m.process_truth(target);
    let driver = m.driver_truth(0).arch(ArchEvent::Instructions);
    assert!(driver > 0, "the driver retired work");
    let user_count = u128::from(m.client(tool).read(user).unwrap());
    assert_eq!(user_count, truth.arch_in(Ring::User, ArchEvent::Instructions));
    let both_count = u128::from(m.client(tool).read(both).unwrap());
    let instructions = truth.arch(ArchEvent::Instructions);
    assert!(both_count > instructions, "the driver's instructions are counted");
    assert!(both_count <= instructions + driver, "{both_count} > {instructions} + {driver}");
    m.client(tool).flush_log().unwrap();
    let bytes = kernel.sink_bytes(kernel.sink_of(tool, fd).unwrap());
    let in_driver = Records::new(&bytes)
        .map(|e| e.expect("the log decodes").record)
        .filter(|r| matches!(r, Record::Callchain(cc) if cc.pcs.iter().next() == Some(DRIVER_PC)))
        .count();
    assert!(in_driver > 0, "some overflows happened inside the driver and were sampled there");
}

/// Other users of the PMU set their GLOBAL_STATUS bits (ToPA, OvfBuf, LBR_Frz, CondChgd, uncore)
/// and raise PMIs of their own: the driver claims none of those, clears none of those bits, and
/// its own counts and samples are unchanged.
#[test]
fn other_users_status_bits_are_left_alone() {
    for model in [PmuModel::skylake(), PmuModel::nehalem(), PmuModel::core2()] {
        for freeze in [false, true] {
            let timing = PmiTiming::exact().foreign_status(20);
            let mut m = machine(model, timing, freeze, 5);
            let tool = m.spawn_tool(Credentials::user(1000));
            let fd = m.kernel().open_sink(tool, hwpmc_sim::SinkKind::Writable);
            m.client(tool).configure_log(fd).unwrap();
            let target = m.spawn(&busy_program(), Credentials::user(1000));
            let counter = m.client(tool).allocate(AllocateRequest::iap(0x03_003C)).unwrap();
            // A sampling PMC, so that the driver handles PMIs of its own while the foreign
            // bits are pending (and would clear them if it acknowledged every bit it read).
            let sampler = AllocateRequest::iap(0x01_00C0).in_mode(Mode::ThreadSampling, None);
            let sampler = m.client(tool).allocate(sampler.with_count(5_000)).unwrap();
            for id in [counter, sampler] {
                m.client(tool).attach(id, target).unwrap();
                m.client(tool).start(id).unwrap();
            }
            m.run_until_idle();
            m.hardware().assert_no_faults();
            let name = format!("v{} freeze {freeze}", model.version);
            let truth = m.process_truth(target).arch(ArchEvent::CoreCycles);
            assert_eq!(u128::from(m.client(tool).read(counter).unwrap()), truth, "{name}");
            let foreign = m.foreign_status(0);
            assert!(foreign.count_ones() >= 2, "{name}: {foreign:#x}");
            let status = m.hardware().pmu(0).read_msr(msr::IA32_PERF_GLOBAL_STATUS).unwrap();
            assert_eq!(status & foreign, foreign, "{name}: every foreign bit is still set");
            let stats = m.stats();
            assert!(stats.pmis > stats.pmis_claimed, "{name}: foreign PMIs are not claimed");
            assert!(stats.pmis_claimed >= 400, "{name}: the sampler's PMIs are");
        }
    }
}
