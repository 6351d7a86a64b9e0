//! Process sampling: each overflow of a sampling PMC is one CALLCHAIN record in the owner's log,
//! and samples lost to a full ring are counted and reported with DROPNOTIFY.
//!
//! The suite runs under each mode of `hwpmc_test_support::modes`, in a module named after it
//! (`exact::skylake::…`): the masked-PMI policy and freezing everywhere; PMI latency, the driver's
//! work, other users' status bits and injected PMIs on the simulated machine. Where PMIs served
//! late make an exact number impossible on hardware (a period runs on until its PMI is served, the
//! sample lands where the PMI does), a test checks what hardware guarantees
//! ([`guaranteed_samples`], a PC the thread executed), and the exact mode keeps the exact
//! assertion.

use hwpmc::abi::Mode;
use hwpmc::{Pid, TrapFrame, Tunables};
use hwpmc_sim::machine::{KERNEL_IDLE_PC, MachineConfig};
use hwpmc_sim::modes::SimModes;
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{AllocateRequest, ArchEvent, Credentials, PmuModel, SinkId, SinkKind};
use hwpmc_test_support::world::World;
use pmclog::{Record, Records};
use std::ops::RangeInclusive;

const BLOCK_PC: u64 = 0x40_1000;

/// The world of the sampling tests: a driver on one CPU of `model` with `tunables`, under the
/// masked-PMI policy and freezing of `modes`, and a process logging to a file.
fn world(model: PmuModel, tunables: Tunables, modes: &SimModes) -> World {
    World::builder(model).tunables(tunables).modes(modes).logging().build()
}

/// What the sampling tests do with their world.
trait Sampling {
    /// Runs `blocks` blocks of 1000 user instructions on CPU 0, delivering every PMI, without
    /// draining the ring.
    fn run(&self, blocks: u64);
    /// The log so far, flushed.
    fn flushed_records(&self) -> Vec<Record<'static>>;
    /// The log so far.
    fn records(&self) -> Vec<Record<'static>>;
}

impl Sampling for World {
    fn run(&self, blocks: u64) {
        let hw = self.driver.kernel().hardware().clone();
        hw.set_current_cpu(0);
        let work = Work { instructions: 1000, core_cycles: 1500, ..Work::default() };
        for _ in 0..blocks {
            hw.pmu(0).retire(Ring::User, &work);
            if hw.pmu(0).take_pmi().is_some() {
                let frame = TrapFrame { pc: BLOCK_PC, fp: 0, sp: 0, user: true };
                assert!(self.driver.interrupt(0, &frame), "the PMI is the driver's");
            }
        }
    }

    fn flushed_records(&self) -> Vec<Record<'static>> {
        self.client().flush_log().unwrap();
        self.records()
    }

    fn records(&self) -> Vec<Record<'static>> {
        let bytes: &'static [u8] = self.log_bytes().leak();
        Records::new(bytes).map(|e| e.expect("the log decodes").record).collect()
    }
}

/// A tool process on `machine` with a log: its pid and the sink its log goes to.
fn logging_tool(machine: &mut hwpmc_sim::machine::Machine) -> (Pid, SinkId) {
    let tool = machine.spawn_tool(Credentials::user(1000));
    let kernel = machine.kernel().clone();
    let fd = kernel.open_sink(tool, SinkKind::Writable);
    machine.client(tool).configure_log(fd).unwrap();
    (tool, kernel.sink_of(tool, fd).unwrap())
}

/// Attaches a PMC of `request` (with a 10 000 period) from `tool` to `target`, starts it, runs
/// the machine until it is idle, and returns the PMC's id and the tool's flushed log.
fn sample_until_idle(
    machine: &mut hwpmc_sim::machine::Machine,
    (tool, sink): (Pid, SinkId),
    target: Pid,
    request: AllocateRequest,
) -> (u32, Vec<Record<'static>>) {
    let id = machine.client(tool).allocate(request.with_count(10_000)).unwrap();
    machine.client(tool).attach(id, target).unwrap();
    machine.client(tool).start(id).unwrap();
    machine.run_until_idle();
    machine.client(tool).flush_log().unwrap();
    let bytes: &'static [u8] = machine.kernel().sink_bytes(sink).leak();
    machine.hardware().assert_no_faults();
    (id, Records::new(bytes).map(|e| e.expect("the log decodes").record).collect())
}

/// A request for a programmable counter of `model` counting instructions (IAP on Intel, K8 on
/// AMD), process counting.
fn instructions(model: &PmuModel) -> AllocateRequest {
    AllocateRequest::arch(model, ArchEvent::Instructions, 0)
}

fn sample_count(records: &[Record<'_>]) -> usize {
    records.iter().filter(|r| matches!(r, Record::Callchain(_))).count()
}

/// A simulated machine of `cpus` CPUs of `model` under `modes`.
fn machine_config(modes: &SimModes, model: PmuModel, cpus: usize) -> MachineConfig {
    MachineConfig::new(model, cpus).modes(modes)
}

/// The samples a sampling PMC of `period` takes over `events` events on `machine` under `modes` (in
/// blocks of at most `block` events), as hardware guarantees them: exactly `events / period` when
/// every PMI is served at once. Served up to L block executions late, a period runs on by up to L ×
/// `block` events before the handler reloads it (or, frozen, loses what retired meanwhile): at
/// least `(events − late) / (period + L × block)`, never more than `events / period`.
fn guaranteed_samples(
    modes: &SimModes,
    machine: &hwpmc_sim::machine::Machine,
    events: u128,
    period: u128,
    block: u128,
) -> RangeInclusive<usize> {
    let exact = (events / period) as usize;
    if modes.exact_counts() {
        return exact..=exact;
    }
    let late = machine.total_late_truth().arch(hwpmc_sim::ArchEvent::Instructions);
    let stretch = u128::from(modes.timing.max_latency) * block;
    (events.saturating_sub(late) / (period + stretch)) as usize..=exact
}

/// The models the exact sampling tests run on: perfmon v4 (streamlined freeze), v2 (legacy
/// freeze), v1 (no freeze, no fixed counters), v4 and v2 under a hypervisor (no freeze), and
/// AMD's legacy counters, Zen 2 (no PerfMonV2) and Zen 4 (PerfMonV2).
fn sampling_models() -> Vec<PmuModel> {
    let unfrozen = |mut model: PmuModel| {
        model.hypervisor = true;
        model.freeze_on_pmi = false;
        model
    };
    vec![
        PmuModel::skylake(),
        PmuModel::core2(),
        PmuModel::yonah(),
        unfrozen(PmuModel::skylake()),
        unfrozen(PmuModel::core2()),
        PmuModel::k10(),
        PmuModel::zen2(),
        PmuModel::zen4(),
    ]
}

fn each_overflow_of_a_process_sampling_pmc_is_one_callchain_record(modes: &SimModes) {
    use hwpmc::abi::event::IAF_INSTR_RETIRED_ANY;
    let mut runs = 0;
    for model in sampling_models() {
        let counters = [instructions(&model), AllocateRequest::iaf(IAF_INSTR_RETIRED_ANY)];
        for counter in counters {
            if model.version < 2 && counter.class == hwpmc::abi::Class::Iaf.as_u32() {
                continue; // perfmon v1 and AMD have no fixed counters
            }
            runs += 1;
            let w = world(model, Tunables::default(), modes);
            let request = counter.in_mode(Mode::ThreadSampling, None);
            let id = w.client().allocate(request.with_count(10_000)).unwrap();
            w.client().start(id).unwrap();
            w.driver.switch_in(0, w.pid, w.tid);
            w.run(95);
            w.driver.tick(0);
            w.driver.switch_out(0, w.pid, w.tid);
            let records = w.flushed_records();
            assert_eq!(sample_count(&records), 9, "95 000 instructions at one sample per 10 000");
            for record in &records {
                if let Record::Callchain(cc) = record {
                    assert_eq!((cc.pid, cc.tid, cc.pmcid), (w.pid, w.tid, id));
                    assert_eq!((cc.cpuflags.cpu(), cc.cpuflags.is_user()), (0, true));
                    assert_eq!(cc.pcs.iter().collect::<Vec<_>>(), [BLOCK_PC]);
                }
            }
            w.driver.kernel().hardware().assert_no_faults();
        }
    }
    assert_eq!(runs, 12, "8 models × GP and fixed, but no fixed counter on v1 and AMD");
}

fn the_pmi_acknowledges_only_its_own_status_bits(modes: &SimModes) {
    use hwpmc_sim::pmu::msr::{IA32_PERF_GLOBAL_STATUS, IA32_PERF_GLOBAL_STATUS_SET};
    let w = world(PmuModel::skylake(), Tunables::default(), modes);
    // Intel PT's ToPA PMI (bit 55) and the DS buffer's overflow (bit 62) are other users' news.
    let others = 1 << 55 | 1 << 62;
    let hw = w.driver.kernel().hardware().clone();
    hw.pmu(0).write_msr(IA32_PERF_GLOBAL_STATUS_SET, others).unwrap();
    let request = AllocateRequest::iap(0x00C0).in_mode(Mode::ThreadSampling, None);
    let id = w.client().allocate(request.with_count(10_000)).unwrap();
    w.client().start(id).unwrap();
    w.driver.switch_in(0, w.pid, w.tid);
    w.run(25);
    w.driver.switch_out(0, w.pid, w.tid);
    w.driver.tick(0);
    assert_eq!(sample_count(&w.flushed_records()), 2, "25 000 instructions, one sample per 10 000");
    let status = hw.pmu(0).read_msr(IA32_PERF_GLOBAL_STATUS).unwrap();
    assert_eq!(status & others, others, "the other users' bits are still pending");
    assert_eq!(status & !others, 0, "the driver's own bits (its counter, CTR_FRZ) are cleared");
}

fn the_amd_pmi_acknowledges_only_its_own_status_bits(modes: &SimModes) {
    use hwpmc::arch::x86::amd::msr::{PERF_CNTR_GLOBAL_STATUS, PERF_CNTR_GLOBAL_STATUS_SET};
    use hwpmc_sim::pmu::AMD_STATUS_LBRS_FROZEN;
    let model = PmuModel::zen4();
    let w = world(model, Tunables::default(), modes);
    // The LBR stack's freeze indication is another user's news.
    let hw = w.driver.kernel().hardware().clone();
    hw.pmu(0).write_msr(PERF_CNTR_GLOBAL_STATUS_SET, AMD_STATUS_LBRS_FROZEN).unwrap();
    let request = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let id = w.client().allocate(request.with_count(10_000)).unwrap();
    w.client().start(id).unwrap();
    w.driver.switch_in(0, w.pid, w.tid);
    w.run(25);
    w.driver.switch_out(0, w.pid, w.tid);
    w.driver.tick(0);
    assert_eq!(sample_count(&w.flushed_records()), 2, "25 000 instructions, one sample per 10 000");
    let status = hw.pmu(0).read_msr(PERF_CNTR_GLOBAL_STATUS).unwrap();
    assert_eq!(status, AMD_STATUS_LBRS_FROZEN, "the driver cleared its own bits only");
    hw.assert_no_faults();
}

fn a_full_ring_drops_exactly_what_it_cannot_hold_and_says_so(model: PmuModel, modes: &SimModes) {
    let w = world(model, Tunables { nsamples: 2, ..Tunables::default() }, modes);
    let request = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let id = w.client().allocate(request.with_count(1000)).unwrap();
    w.client().start(id).unwrap();
    w.driver.switch_in(0, w.pid, w.tid);
    // Five samples before any drain: two fit, three are lost.
    w.run(5);
    w.driver.tick(0);
    w.run(1);
    w.driver.switch_out(0, w.pid, w.tid);
    w.driver.tick(0);
    let records = w.flushed_records();
    let delivered = sample_count(&records);
    let stats = w.client().driver_stats().unwrap();
    assert_eq!(delivered, 3);
    assert_eq!(stats.pm_intr_bufferfull, 3);
    assert_eq!(delivered as u32 + stats.pm_intr_bufferfull, 6, "delivered + dropped = generated");
    let drops = records.iter().filter(|r| matches!(r, Record::DropNotify)).count();
    assert_eq!(drops, 1, "one DROPNOTIFY for the loss");
    assert!(records.iter().all(|r| !matches!(r, Record::Callchain(cc) if cc.pmcid != id)));
}

/// Exact on hardware too as long as the PMU does not freeze (the default): with freezing, what
/// retires before the PMI is served is lost (measured in `pmi_latency.rs`); here every PMI is
/// served at once, the simulator's exact mode.
fn counting_pmcs_beside_a_sampling_one_still_count_exactly(model: PmuModel, modes: &SimModes) {
    let w = world(model, Tunables::default(), modes);
    let sampler = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let sampler = w.client().allocate(sampler.with_count(7_000)).unwrap();
    let counter =
        w.client().allocate(AllocateRequest::arch(&model, ArchEvent::CoreCycles, 0)).unwrap();
    w.client().start(sampler).unwrap();
    w.client().start(counter).unwrap();
    w.driver.switch_in(0, w.pid, w.tid);
    w.run(70);
    w.driver.switch_out(0, w.pid, w.tid);
    w.driver.tick(0);
    assert_eq!(w.client().read(counter), Ok(70 * 1500));
    assert_eq!(sample_count(&w.flushed_records()), 10);
}

fn a_simulated_workload_sampled_by_another_process_fills_its_log(
    model: PmuModel,
    modes: &SimModes,
) {
    use hwpmc_sim::machine::Machine;
    use hwpmc_sim::workload::ProgramBuilder;

    let work = Work { instructions: 1000, core_cycles: 1200, ..Work::default() };
    let program = ProgramBuilder::new("/usr/bin/busy")
        .function("main", move |f| f.block(Ring::User, work.clone()).loop_to(0, 500))
        .build();
    let mut machine = Machine::new(machine_config(modes, model, 2));
    let tool = logging_tool(&mut machine);
    let target = machine.spawn(&program, Credentials::user(1000));
    let request = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let (id, records) = sample_until_idle(&mut machine, tool, target, request);
    let samples: Vec<_> = records
        .into_iter()
        .filter_map(|r| match r {
            Record::Callchain(cc) => Some((cc.pid, cc.pmcid, cc.cpuflags.is_user())),
            _ => None,
        })
        .collect();
    // 500 blocks of 1000 instructions, one sample per 10 000: the machine's timer drained the
    // rings into the log and its writer wrote it.
    assert_eq!(machine.process_truth(target).arch(hwpmc_sim::ArchEvent::Instructions), 500_000);
    let range = guaranteed_samples(modes, &machine, 500_000, 10_000, 1000);
    assert!(range.contains(&samples.len()), "{} samples, not in {range:?}", samples.len());
    if modes.exact_counts() {
        assert_eq!(samples.len(), 50);
        assert!(samples.iter().all(|&s| s == (target, id, true)));
    } else {
        // A PMI that waits past a time slice is served in the kernel (the timer's interrupt).
        assert!(samples.iter().all(|&(pid, pmc, _)| (pid, pmc) == (target, id)));
    }
}

fn a_huge_repeated_block_is_sampled_at_every_overflow_not_once_per_time_slice(
    model: PmuModel,
    modes: &SimModes,
) {
    use hwpmc_sim::machine::Machine;
    use hwpmc_sim::workload::ProgramBuilder;

    // One block of 1000 instructions executed 5000 times: a time slice retires 64 executions
    // (64 000 instructions) at once, which crosses six overflows of a 10 000 period.
    let work = Work { instructions: 1000, core_cycles: 1200, ..Work::default() };
    let program = ProgramBuilder::new("/usr/bin/hot")
        .function("main", move |f| f.repeat(Ring::User, work.clone(), 5000).exit())
        .build();
    let mut machine = Machine::new(machine_config(modes, model, 1));
    let tool = logging_tool(&mut machine);
    let target = machine.spawn(&program, Credentials::user(1000));
    let request = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let (_, records) = sample_until_idle(&mut machine, tool, target, request);
    assert_eq!(machine.process_truth(target).arch(hwpmc_sim::ArchEvent::Instructions), 5_000_000);
    // One sample per 10 000 of 5 000 000 instructions (500 in the exact mode).
    let range = guaranteed_samples(modes, &machine, 5_000_000, 10_000, 1000);
    assert!(range.contains(&sample_count(&records)), "{} not in {range:?}", sample_count(&records));
}

fn a_counter_that_overflowed_unseen_before_switch_out_resumes_at_a_full_period(
    model: PmuModel,
    modes: &SimModes,
) {
    let w = world(model, Tunables::default(), modes);
    let request = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let id = w.client().allocate(request.with_count(10_000)).unwrap();
    w.client().start(id).unwrap();
    let hw = w.driver.kernel().hardware().clone();
    hw.set_current_cpu(0);
    w.driver.switch_in(0, w.pid, w.tid);
    // 3000 instructions, switch out and in: the period continues (7000 to go).
    w.run(3);
    w.driver.switch_out(0, w.pid, w.tid);
    w.driver.switch_in(0, w.pid, w.tid);
    w.run(7);
    w.driver.tick(0);
    assert_eq!(sample_count(&w.flushed_records()), 1, "3000 + 7000 = one period");
    // Now the counter overflows and the switch-out comes before its PMI (the interrupt arrives
    // once the PMC is unloaded): the next period is a whole one, not 2^48 events.
    let work = Work { instructions: 10_000, core_cycles: 10_000, ..Work::default() };
    hw.pmu(0).retire(Ring::User, &work);
    w.driver.switch_out(0, w.pid, w.tid);
    assert!(hw.pmu(0).take_pmi().is_some(), "the counter overflowed");
    let frame = TrapFrame { pc: BLOCK_PC, fp: 0, sp: 0, user: true };
    w.driver.interrupt(0, &frame);
    w.driver.switch_in(0, w.pid, w.tid);
    w.run(9);
    w.driver.tick(0);
    assert_eq!(sample_count(&w.flushed_records()), 1, "9000 instructions: no new sample");
    w.run(1);
    w.driver.tick(0);
    w.driver.switch_out(0, w.pid, w.tid);
    assert_eq!(sample_count(&w.flushed_records()), 2, "the 10 000th instruction samples");
}

/// Samples of a TS PMC (period 10 000) on `target`, which shares `cpus` CPUs with two busy
/// processes under a 13-block quantum (13 000 instructions: every slice ends mid-period).
fn samples_under_switching(
    modes: &SimModes,
    model: PmuModel,
    cpus: usize,
    target_threads: u32,
) -> (usize, RangeInclusive<usize>, u128) {
    use hwpmc_sim::machine::Machine;
    use hwpmc_sim::workload::ProgramBuilder;

    let work = Work { instructions: 1000, core_cycles: 1200, ..Work::default() };
    let (w1, w2) = (work.clone(), work);
    let target_program = ProgramBuilder::new("/usr/bin/target")
        .function("main", move |f| {
            (1..target_threads).fold(f, |f, _| f.spawn_thread("worker")).call("body").exit()
        })
        .function("worker", |f| f.call("body").exit_thread())
        .function("body", move |f| f.repeat(Ring::User, w1.clone(), 95).ret())
        .build();
    let busy = ProgramBuilder::new("/usr/bin/busy")
        .function("main", move |f| f.repeat(Ring::User, w2.clone(), 120).exit())
        .build();
    let mut machine = Machine::new(machine_config(modes, model, cpus).quantum(13));
    let tool = logging_tool(&mut machine);
    let target = machine.spawn(&target_program, Credentials::user(1000));
    machine.spawn(&busy, Credentials::user(1000));
    machine.spawn(&busy, Credentials::user(1000));
    let request = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let (_, records) = sample_until_idle(&mut machine, tool, target, request);
    let switches = machine.stats().switches;
    assert!(switches >= 10, "the target was switched often: {switches} switches");
    let instructions = machine.process_truth(target).arch(hwpmc_sim::ArchEvent::Instructions);
    let range = guaranteed_samples(modes, &machine, instructions, 10_000, 1000);
    (sample_count(&records), range, instructions)
}

fn a_process_sampled_across_context_switches_resumes_its_period(model: PmuModel, modes: &SimModes) {
    // One thread, migrating between two CPUs among two busy processes.
    let (samples, range, instructions) = samples_under_switching(modes, model, 2, 1);
    assert_eq!(instructions, 95_000);
    assert!(range.contains(&samples), "95 000 instructions at one sample per 10 000: {samples}");
    assert!(!modes.exact_counts() || samples == 9);
    // Two threads of the process taking turns on one CPU share its period (the process ends
    // when its main thread exits, wherever the worker is).
    let (samples, range, instructions) = samples_under_switching(modes, model, 1, 2);
    assert!(instructions > 150_000, "both threads ran: {instructions}");
    assert!(range.contains(&samples), "one sample per 10 000 instructions: {samples} {range:?}");
    assert!(!modes.exact_counts() || samples as u128 == instructions / 10_000);
}

fn user_mode_samples_carry_the_user_callchain_walked_at_return_to_user_mode(
    model: PmuModel,
    modes: &SimModes,
) {
    use hwpmc::abi::PmcFlags;
    use hwpmc_sim::machine::Machine;
    use hwpmc_sim::workload::ProgramBuilder;
    use std::cell::RefCell;
    use std::rc::Rc;

    let work = Work { instructions: 1000, core_cycles: 1200, ..Work::default() };
    // main calls f, f calls g; g's only block runs 300 times. The hook records the stack g's
    // block runs with: [return address into f, return address into main].
    let stack: Rc<RefCell<Vec<u64>>> = Rc::default();
    let seen = stack.clone();
    let program = ProgramBuilder::new("/usr/bin/nested")
        .function("main", |f| f.call("f").exit())
        .function("f", |f| f.call("g").ret())
        .function("g", move |f| {
            f.block(Ring::User, work.clone())
                .loop_to(0, 300)
                .hook(move |ctx| *seen.borrow_mut() = ctx.thread().stack())
                .ret()
        })
        .build();
    let g_block = program.function(program.function_id("g").unwrap()).block(0).start;
    let mut machine = Machine::new(machine_config(modes, model, 1));
    let (tool, sink) = logging_tool(&mut machine);
    let kernel = machine.kernel().clone();
    let target = machine.spawn(&program, Credentials::user(1000));
    let request = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let request = request.with_count(10_000).with_flags(PmcFlags::CALLCHAIN);
    let id = machine.client(tool).allocate(request).unwrap();
    machine.client(tool).attach(id, target).unwrap();
    machine.client(tool).start(id).unwrap();
    machine.run_until_idle();
    machine.client(tool).flush_log().unwrap();
    let stack = stack.borrow().clone();
    assert_eq!(stack.len(), 2, "g runs two calls deep");
    let mut expected = vec![g_block];
    expected.extend(&stack);
    let bytes = kernel.sink_bytes(sink);
    let chains: Vec<Vec<u64>> = Records::new(&bytes)
        .map(|e| e.expect("the log decodes").record)
        .filter_map(|r| match r {
            Record::Callchain(cc) if cc.pmcid == id => Some(cc.pcs.iter().collect()),
            _ => None,
        })
        .collect();
    let range = guaranteed_samples(modes, &machine, 300_000, 10_000, 1000);
    assert!(range.contains(&chains.len()), "300 000 instructions, one sample per 10 000");
    if modes.exact_counts() {
        assert!(chains.iter().all(|c| *c == expected), "{chains:x?} != {expected:x?}");
    } else {
        // Served late, a sample's PC is one the thread executed later, or the kernel's.
        let executed = |pc: u64| program.block_at(pc).is_some() || pc == KERNEL_IDLE_PC;
        assert!(chains.iter().all(|c| executed(c[0])), "{chains:x?}");
    }
    machine.hardware().assert_no_faults();
}

fn user_callchains_stop_where_the_stack_cannot_be_read_or_is_not_a_chain(
    model: PmuModel,
    modes: &SimModes,
) {
    use hwpmc::abi::PmcFlags;
    use hwpmc_sim::kernel::SCRATCH_BASE;

    let w = world(model, Tunables::default(), modes);
    let kernel = w.driver.kernel().clone();
    let request = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let request = request.with_count(1000).with_flags(PmcFlags::CALLCHAIN);
    let id = w.client().allocate(request).unwrap();
    w.client().start(id).unwrap();
    // Two frame records in the process's memory: inner at A (caller at B, returns to 0x111),
    // outer at B (caller at 0x10, below B: not a chain, so the walk ends there).
    let (a, b) = (SCRATCH_BASE + 0x100, SCRATCH_BASE + 0x200);
    let record = |caller: u64, ret: u64| [caller.to_le_bytes(), ret.to_le_bytes()].concat();
    kernel.write_memory(w.pid, a, &record(b, 0x111)).unwrap();
    kernel.write_memory(w.pid, b, &record(0x10, 0x222)).unwrap();
    let hw = kernel.hardware().clone();
    hw.set_current_cpu(0);
    w.driver.switch_in(0, w.pid, w.tid);
    let work = Work { instructions: 1000, core_cycles: 1000, ..Work::default() };
    for fp in [a, 0xdead_0000] {
        hw.pmu(0).retire(Ring::User, &work);
        assert!(hw.pmu(0).take_pmi().is_some());
        let frame = TrapFrame { pc: BLOCK_PC, fp, sp: fp, user: true };
        assert!(w.driver.interrupt(0, &frame));
        kernel.set_caller(w.pid);
        w.driver.user_return(0, w.pid, w.tid, &frame);
    }
    w.driver.switch_out(0, w.pid, w.tid);
    let chains: Vec<Vec<u64>> = w
        .flushed_records()
        .into_iter()
        .filter_map(|r| match r {
            Record::Callchain(cc) => Some(cc.pcs.iter().collect()),
            _ => None,
        })
        .collect();
    assert_eq!(chains, [vec![BLOCK_PC, 0x111, 0x222], vec![BLOCK_PC]]);
}

fn a_user_sample_whose_thread_never_returns_is_logged_with_its_pc_after_two_ticks(
    model: PmuModel,
    modes: &SimModes,
) {
    use hwpmc::abi::PmcFlags;

    let w = world(model, Tunables::default(), modes);
    let request = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let request = request.with_count(1000).with_flags(PmcFlags::CALLCHAIN);
    let id = w.client().allocate(request).unwrap();
    w.client().start(id).unwrap();
    w.driver.switch_in(0, w.pid, w.tid);
    w.run(1);
    w.driver.switch_out(0, w.pid, w.tid);
    let callchains = |w: &World| sample_count(&w.flushed_records());
    for _ in 0..2 {
        w.driver.tick(0);
        assert_eq!(callchains(&w), 0, "still waiting for its thread");
    }
    w.driver.tick(0);
    assert_eq!(callchains(&w), 1);
}

fn software_events_sample_every_reload_events(modes: &SimModes) {
    let w = world(PmuModel::skylake(), Tunables::default(), modes);
    let faults = w.driver.register_soft_event("PAGE_FAULT.ALL").unwrap();
    let request = AllocateRequest::soft(faults).in_mode(Mode::ThreadSampling, None);
    let id = w.client().allocate(request.with_count(3)).unwrap();
    w.client().start(id).unwrap();
    w.driver.switch_in(0, w.pid, w.tid);
    let frame = TrapFrame { pc: 0x50_0000, fp: 0, sp: 0, user: false };
    for _ in 0..10 {
        w.driver.soft_event(0, faults, &frame);
    }
    w.driver.switch_out(0, w.pid, w.tid);
    w.driver.tick(0);
    let records = w.flushed_records();
    assert_eq!(sample_count(&records), 3, "samples at the 3rd, 6th and 9th event");
    assert!(records.iter().all(|r| !matches!(r, Record::Callchain(cc)
        if cc.pmcid != id || cc.cpuflags.is_user() || cc.pcs.iter().collect::<Vec<_>>() != [0x50_0000])));
}

fn releasing_a_pmc_logs_its_samples_still_in_the_ring_first(model: PmuModel, modes: &SimModes) {
    let w = world(model, Tunables::default(), modes);
    let request = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let id = w.client().allocate(request.with_count(1000)).unwrap();
    w.client().start(id).unwrap();
    w.driver.switch_in(0, w.pid, w.tid);
    w.run(5);
    w.driver.switch_out(0, w.pid, w.tid);
    // No tick ran: five samples wait in the ring when the PMC goes.
    w.client().release(id).unwrap();
    let records = w.flushed_records();
    assert_eq!(sample_count(&records), 5);
    assert!(records.iter().all(|r| !matches!(r, Record::Callchain(cc) if cc.pmcid != id)));
}

fn hardware_sampling_rates_have_a_floor_of_mincount_and_software_ones_of_one(
    model: PmuModel,
    modes: &SimModes,
) {
    let w = world(model, Tunables { min_count: 1000, ..Tunables::default() }, modes);
    let c = w.client();
    let request = instructions(&model).in_mode(Mode::ThreadSampling, None);
    let id = c.allocate(request.with_count(10)).unwrap();
    assert_eq!(c.read(id), Ok(1000), "PMCRW reads a sampling PMC's reload");
    c.set_count(id, 5).unwrap();
    assert_eq!(c.read(id), Ok(1000));
    c.set_count(id, 123_456).unwrap();
    assert_eq!(c.read(id), Ok(123_456));
    let faults = w.driver.register_soft_event("PAGE_FAULT.ALL").unwrap();
    let soft = AllocateRequest::soft(faults).in_mode(Mode::ThreadSampling, None);
    let soft = c.allocate(soft.with_count(0)).unwrap();
    assert_eq!(c.read(soft), Ok(1));
}

/// The scenarios above on Intel (Skylake) and AMD (Zen 2 without PerfMonV2, Zen 4 with it).
/// The scenarios on each model, under the modes of the enclosing module.
macro_rules! on_every_model {
    ($($model:ident),+) => {$(
        mod $model {
            use hwpmc_sim::PmuModel;

            #[test]
            fn a_full_ring_drops_exactly_what_it_cannot_hold_and_says_so() {
                super::super::a_full_ring_drops_exactly_what_it_cannot_hold_and_says_so(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn counting_pmcs_beside_a_sampling_one_still_count_exactly() {
                super::super::counting_pmcs_beside_a_sampling_one_still_count_exactly(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn a_simulated_workload_sampled_by_another_process_fills_its_log() {
                super::super::a_simulated_workload_sampled_by_another_process_fills_its_log(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn a_huge_repeated_block_is_sampled_at_every_overflow_not_once_per_time_slice() {
                super::super::a_huge_repeated_block_is_sampled_at_every_overflow_not_once_per_time_slice(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn a_counter_that_overflowed_unseen_before_switch_out_resumes_at_a_full_period() {
                super::super::a_counter_that_overflowed_unseen_before_switch_out_resumes_at_a_full_period(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn a_process_sampled_across_context_switches_resumes_its_period() {
                super::super::a_process_sampled_across_context_switches_resumes_its_period(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn user_mode_samples_carry_the_user_callchain_walked_at_return_to_user_mode() {
                super::super::user_mode_samples_carry_the_user_callchain_walked_at_return_to_user_mode(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn user_callchains_stop_where_the_stack_cannot_be_read_or_is_not_a_chain() {
                super::super::user_callchains_stop_where_the_stack_cannot_be_read_or_is_not_a_chain(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn a_user_sample_whose_thread_never_returns_is_logged_with_its_pc_after_two_ticks() {
                super::super::a_user_sample_whose_thread_never_returns_is_logged_with_its_pc_after_two_ticks(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn releasing_a_pmc_logs_its_samples_still_in_the_ring_first() {
                super::super::releasing_a_pmc_logs_its_samples_still_in_the_ring_first(PmuModel::$model(), &super::modes());
            }

            #[test]
            fn hardware_sampling_rates_have_a_floor_of_mincount_and_software_ones_of_one() {
                super::super::hardware_sampling_rates_have_a_floor_of_mincount_and_software_ones_of_one(PmuModel::$model(), &super::modes());
            }
        }
    )+};
}

/// The suite under one mode of `hwpmc_test_support::modes`, in a module named after it.
macro_rules! suite {
    ($mode:ident, $modes:expr) => {
        mod $mode {
            use hwpmc_sim::modes::SimModes;

            fn modes() -> SimModes {
                $modes
            }

            on_every_model!(skylake, zen2, zen4);

            #[test]
            fn each_overflow_of_a_process_sampling_pmc_is_one_callchain_record() {
                super::each_overflow_of_a_process_sampling_pmc_is_one_callchain_record(&modes());
            }

            #[test]
            fn the_pmi_acknowledges_only_its_own_status_bits() {
                super::the_pmi_acknowledges_only_its_own_status_bits(&modes());
            }

            #[test]
            fn the_amd_pmi_acknowledges_only_its_own_status_bits() {
                super::the_amd_pmi_acknowledges_only_its_own_status_bits(&modes());
            }

            #[test]
            fn software_events_sample_every_reload_events() {
                super::software_events_sample_every_reload_events(&modes());
            }
        }
    };
}

hwpmc_test_support::for_each_sim_mode!(suite);
