//! The machine's mode that delivers a PMI at every MSR and counter access the driver makes (in
//! the middle of system calls, context switches, the drain): counts and samples come out
//! exactly as without it (the counting, sampling and thread-scope suites also run in this mode,
//! in their `pmi_at_every_msr_access` modules), and the mode that delivers one at the accesses a
//! seed chooses (their `pmi_at_seeded_accesses_1` and `_2` modules).

use hwpmc::abi::Mode;
use hwpmc_sim::machine::{Machine, MachineConfig};
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::workload::ProgramBuilder;
use hwpmc_sim::{AllocateRequest, ArchEvent, Credentials, PmuModel, SinkKind};
use pmclog::{Record, Records};

/// Four threads taking turns on two CPUs, counting their instructions and cycles, then a
/// process sampled
/// every 10 000 instructions by another, with PMIs delivered at every MSR access (`every`) or
/// at the ones `seed` chooses; returns the counts read, the samples logged and the interrupts
/// the driver saw.
fn run(model: PmuModel, every: bool, seed: Option<u64>) -> (Vec<u128>, usize, u32) {
    let config = MachineConfig::new(model, 2).seed(7).quantum(2);
    let mut m = Machine::new(config.pmi_at_every_msr_access(every).pmi_at_seeded_accesses(seed));
    let work = Work { instructions: 1000, core_cycles: 1500, ..Work::default() };
    let counted = ProgramBuilder::new("/bin/counted")
        .function("main", |f| {
            (0..3).fold(f, |f, _| f.spawn_thread("worker")).call("body").sleep().exit()
        })
        .function("worker", |f| f.call("body").exit_thread())
        .function("body", |f| f.repeat(Ring::User, work.clone(), 3).loop_to(0, 40))
        .build();
    let pid = m.spawn(&counted, Credentials::user(1000));
    let client = m.client(pid);
    let ids: Vec<u32> = [0x00C0, 0x003C]
        .into_iter()
        .map(|config| client.allocate(AllocateRequest::iap(config)).unwrap())
        .collect();
    for &id in &ids {
        m.client(pid).start(id).unwrap();
    }
    m.run_until_idle();
    let truth = m.process_truth(pid);
    assert_eq!(truth.arch(ArchEvent::Instructions), 4 * 40 * 3 * 1000);
    let counts: Vec<u128> =
        ids.iter().map(|&id| u128::from(m.client(pid).read(id).unwrap())).collect();
    assert_eq!(counts, [truth.arch(ArchEvent::Instructions), truth.arch(ArchEvent::CoreCycles)]);

    let tool = m.spawn_tool(Credentials::user(1000));
    let kernel = m.kernel().clone();
    let fd = kernel.open_sink(tool, SinkKind::Writable);
    m.client(tool).configure_log(fd).unwrap();
    let sink = kernel.sink_of(tool, fd).unwrap();
    let busy = ProgramBuilder::new("/usr/bin/busy")
        .function("main", move |f| f.block(Ring::User, work.clone()).loop_to(0, 300))
        .build();
    let target = m.spawn(&busy, Credentials::user(1000));
    let request = AllocateRequest::iap(0x00C0).in_mode(Mode::ThreadSampling, None);
    let id = m.client(tool).allocate(request.with_count(10_000)).unwrap();
    m.client(tool).attach(id, target).unwrap();
    m.client(tool).start(id).unwrap();
    m.run_until_idle();
    m.client(tool).flush_log().unwrap();
    let bytes = kernel.sink_bytes(sink);
    let records = Records::new(&bytes).map(|e| e.expect("the log decodes").record);
    let samples = records.filter(|r| matches!(r, Record::Callchain(_))).count();
    let stats = m.client(tool).driver_stats().unwrap();
    m.hardware().assert_no_faults();
    (counts, samples, stats.pm_intr_ignored + stats.pm_intr_processed)
}

#[test]
fn a_pmi_at_every_msr_access_changes_no_count_and_no_sample() {
    let models = [("skylake", PmuModel::skylake()), ("core2", PmuModel::core2())];
    for (name, model) in models.into_iter().chain([("yonah", PmuModel::yonah())]) {
        let (counts, samples, interrupts) = run(model, false, None);
        let (injected_counts, injected_samples, injected_interrupts) = run(model, true, None);
        assert_eq!(injected_counts, counts, "{name}: the same exact counts");
        assert_eq!((samples, injected_samples), (30, 30), "{name}: one sample per 10 000");
        assert!(
            injected_interrupts > interrupts + 200,
            "{name}: the mode delivered PMIs ({interrupts} without, {injected_interrupts} with)"
        );
    }
}

#[test]
fn pmis_at_seed_chosen_msr_accesses_change_no_count_and_no_sample() {
    for (name, model) in [("skylake", PmuModel::skylake()), ("core2", PmuModel::core2())] {
        let (counts, samples, interrupts) = run(model, false, None);
        let mut delivered = Vec::new();
        for seed in [1, 2] {
            let (seeded_counts, seeded_samples, seeded_interrupts) = run(model, false, Some(seed));
            assert_eq!(seeded_counts, counts, "{name}, seed {seed}: the same exact counts");
            assert_eq!(seeded_samples, samples, "{name}, seed {seed}: the same samples");
            assert!(
                seeded_interrupts > interrupts + 50,
                "{name}, seed {seed}: the mode delivered PMIs ({interrupts} without, \
                 {seeded_interrupts} with)"
            );
            delivered.push(seeded_interrupts);
        }
        let (_, _, every) = run(model, true, None);
        assert!(
            delivered.iter().all(|&d| d < every),
            "{name}: a seed chooses some accesses, not all ({delivered:?} against {every})"
        );
        assert_eq!(run(model, false, Some(1)).2, delivered[0], "{name}: a seed is repeatable");
    }
}
