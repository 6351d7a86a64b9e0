//! Hybrid machines (Alder Lake-like and Meteor Lake-like: P-cores and E-cores with PMUs of their
//! own): discovery finds each CPU's core type, the driver's classes are what every core type
//! has, and a thread that moves between P- and E-cores is counted exactly on both, also when its
//! PMCs are multiplexed.

use hwpmc::Tunables;
use hwpmc::abi::{Class, PmcFlags, event};
use hwpmc::arch::x86::intel::discovery::{CoreType, IntelPmu, PerfmonExt};
use hwpmc::hw::Hardware;
use hwpmc_sim::kernel::SimKernel;
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{
    AllocateRequest, ArchEvent, Credentials, Machine, PmuModel, ProgramBuilder, Quirks,
    SimHardware, SimPmu,
};

/// A machine of `p` P-cores then `e` E-cores of a hybrid part, with the driver loaded.
fn hybrid(p_core: PmuModel, e_core: PmuModel, p: usize, e: usize, seed: u64) -> Machine {
    let models = std::iter::repeat_n(p_core, p).chain(std::iter::repeat_n(e_core, e));
    let pmus = models.enumerate().map(|(i, m)| SimPmu::new(m).with_apic_id(i as u32)).collect();
    let hw = SimHardware::from_pmus(pmus);
    let kernel = SimKernel::new(hw.clone());
    let driver = hwpmc::Driver::load(kernel, hw, Tunables::default()).expect("load");
    Machine::with_driver(driver, seed, 3)
}

fn work() -> Work {
    Work::every_event_distinct()
}

/// Spawns two busy processes besides the measured one, so that threads move between the CPUs.
fn competitors(m: &mut Machine) {
    let busy = ProgramBuilder::new("/bin/busy")
        .function("main", |f| f.repeat(Ring::User, work(), 4).loop_to(0, 200).exit())
        .build();
    for _ in 0..2 {
        m.spawn(&busy, Credentials::user(2000));
    }
}

/// The CPUs `pid` ran on.
fn cpus_of(m: &Machine, pid: i32) -> std::collections::BTreeSet<u32> {
    m.trace().iter().filter(|d| d.pid == pid).map(|d| d.cpu).collect()
}

/// Spawns `/bin/mover` as user `uid` (`passes` passes of `repeat` blocks of `block`), then the
/// competitors that move it between the CPUs, and a root tool: (the mover's pid, the tool's).
fn spawn_mover(m: &mut Machine, block: &Work, repeat: u64, passes: u64, uid: u32) -> (i32, i32) {
    let block = block.clone();
    let program = ProgramBuilder::new("/bin/mover")
        .function("main", move |f| {
            f.repeat(Ring::User, block.clone(), repeat).loop_to(0, passes).exit()
        })
        .build();
    let pid = m.spawn(&program, Credentials::user(uid));
    competitors(m);
    (pid, m.spawn_tool(Credentials::root()))
}

fn config(event: ArchEvent) -> u32 {
    u32::from(event.event_select()) | u32::from(event.umask()) << 8 | 3 << 16
}

#[test]
fn discovery_reads_each_cpus_core_type() {
    for (model, gp, fixed, core) in [
        (PmuModel::alder_lake_p(), 8, 0xF, CoreType::Core),
        (PmuModel::alder_lake_e(), 6, 0x7, CoreType::Atom),
        (PmuModel::meteor_lake_p(), 8, 0xF, CoreType::Core),
        (PmuModel::meteor_lake_e(), 8, 0x7, CoreType::Atom),
    ] {
        let hw = SimHardware::new(model, 1);
        let pmu = IntelPmu::discover(&hw.cpuid(), &hw).expect("a PMU");
        assert_eq!((pmu.gp_counters, pmu.fixed_mask, pmu.core_type), (gp, fixed, Some(core)));
    }
    let hw = SimHardware::new(PmuModel::icelake(), 1);
    assert_eq!(IntelPmu::discover(&hw.cpuid(), &hw).unwrap().core_type, None, "not hybrid");
}

/// The classes have a row for every counter some core type has (the P-cores' 8 GP and 4 fixed
/// counters on Alder Lake), as wide as the narrowest core type's (the E-cores' 44 bits); a PMC
/// that runs on every core type takes only the rows they all have (see
/// `only_a_pmc_of_the_p_cores_takes_their_extra_counters`).
/// CPUID leaf 23H (Meteor Lake on): each core type reports its own counter and architectural
/// event bitmaps there, and discovery takes the counters from it rather than from leaf 0xA
/// (tried with a leaf 0xA that reports only 4 GP counters); Alder Lake has no leaf 23H.
#[test]
fn discovery_takes_the_counters_from_leaf_23h_where_present() {
    let discover = |model: PmuModel| {
        let hw = SimHardware::new(model, 1);
        IntelPmu::discover(&hw.cpuid(), &hw).expect("a PMU")
    };
    let leaf = |gp, fixed, events| PerfmonExt {
        umask2: false,
        eq: false,
        gp_counters: Some(gp),
        fixed_counters: Some(fixed),
        arch_events: Some(events),
    };
    assert_eq!(discover(PmuModel::meteor_lake_p()).extended_leaf, Some(leaf(0xFF, 0xF, 0xFF)));
    assert_eq!(discover(PmuModel::meteor_lake_e()).extended_leaf, Some(leaf(0xFF, 0x7, 0x7F)));
    assert_eq!(discover(PmuModel::alder_lake_p()).extended_leaf, None, "no leaf 23H");
    let arrow = discover(PmuModel::arrowlake_p()).extended_leaf.expect("leaf 23H");
    assert!(arrow.umask2 && arrow.gp_counters == Some(0xFF), "{arrow:?}");

    let short_leaf_0a = |model: PmuModel| PmuModel {
        quirks: Quirks { leaf_0a_gp_counters: 4, ..model.quirks },
        ..model
    };
    let meteor = discover(short_leaf_0a(PmuModel::meteor_lake_e()));
    assert_eq!((meteor.gp_counters, meteor.fixed_mask, meteor.arch_events), (8, 0x7, 0x7F));
    let alder = discover(short_leaf_0a(PmuModel::alder_lake_e()));
    assert_eq!(alder.gp_counters, 4, "without leaf 23H, leaf 0xA's count");

    // The machine's rows are leaf 23H's: 8 GP counters on both core types.
    let e_core = short_leaf_0a(PmuModel::meteor_lake_e());
    let mut m = hybrid(PmuModel::meteor_lake_p(), e_core, 1, 1, 3);
    let tool = m.spawn_tool(Credentials::root());
    let request = AllocateRequest::iap(config(ArchEvent::Instructions));
    for _ in 0..8 {
        m.client(tool).allocate(request.with_flags(PmcFlags::CORE_TYPE_ATOM)).unwrap();
    }
}

#[test]
fn the_classes_of_a_hybrid_machine_have_every_core_types_rows() {
    let mut m = hybrid(PmuModel::alder_lake_p(), PmuModel::alder_lake_e(), 2, 2, 1);
    let tool = m.spawn_tool(Credentials::root());
    let info = m.client(tool).cpu_info().unwrap();
    let class = |c: Class| {
        let classes = &info.pm_classes[..info.pm_nclass as usize];
        classes.iter().find(|k| k.pm_class == c.as_u32()).map(|k| (k.pm_num, k.pm_width))
    };
    assert_eq!(class(Class::Iap), Some((8, 44)), "the P-cores' 8 GP counters, 44 bits");
    assert_eq!(class(Class::Iaf), Some((4, 48)), "the P-cores' 4 fixed counters");
    // Each CPU's rows (GETPMCINFO): those of a counter its core type lacks are disabled there.
    let enabled = |cpu: i32, c: Class| {
        let rows = m.client(tool).pmc_info(cpu).unwrap();
        rows.iter().filter(|r| r.pm_class == c.as_u32() && r.pm_enabled != 0).count()
    };
    assert_eq!((enabled(0, Class::Iap), enabled(0, Class::Iaf)), (8, 4), "a P-core");
    assert_eq!((enabled(2, Class::Iap), enabled(2, Class::Iaf)), (6, 3), "an E-core");
}

/// The P-cores' GP counters 6 and 7 and fixed counter 3 (TOPDOWN.SLOTS), which the E-cores lack,
/// take PMCs of the P-cores (PMC_F_CORE_TYPE_CORE) only: a PMC of every core type or of the
/// E-cores finds no row there (EINVAL). On a thread moving between the core types, the P-core
/// PMCs on those counters count exactly its P-core share.
#[test]
fn only_a_pmc_of_the_p_cores_takes_their_extra_counters() {
    let mut m = hybrid(PmuModel::alder_lake_p(), PmuModel::alder_lake_e(), 1, 1, 11);
    let (pid, tool) = spawn_mover(&mut m, &work(), 5, 300, 1004);
    let user = |e: ArchEvent| AllocateRequest::iap(config(e) & !(1 << 17));
    let (core, atom) = (PmcFlags::CORE_TYPE_CORE, PmcFlags::CORE_TYPE_ATOM);
    let alloc = |request: AllocateRequest| m.client(tool).allocate(request);
    let row = |id: u32| hwpmc::abi::PmcId::from_u32(id).map(|p| p.row);
    // Rows 0 to 4 for every core type, row 5 for the E-cores: the rows both core types have.
    let everywhere = alloc(user(ArchEvent::Instructions)).unwrap();
    let fillers: Vec<u32> =
        (0..4).map(|_| alloc(user(ArchEvent::BranchMispredicts)).unwrap()).collect();
    let atom_instructions = alloc(user(ArchEvent::Instructions).with_flags(atom)).unwrap();
    assert_eq!(alloc(user(ArchEvent::Instructions)), Err(hwpmc::Errno::Inval), "no row left");
    assert_eq!(alloc(user(ArchEvent::Instructions).with_flags(atom)), Err(hwpmc::Errno::Inval));
    let core_instructions = alloc(user(ArchEvent::Instructions).with_flags(core)).unwrap();
    let core_cycles = alloc(user(ArchEvent::CoreCycles).with_flags(core)).unwrap();
    assert_eq!(alloc(user(ArchEvent::CoreCycles).with_flags(core)), Err(hwpmc::Errno::Inval));
    let gp_first = row(everywhere).unwrap();
    assert_eq!(row(core_instructions), Some(gp_first + 6), "the P-cores' GP counter 6");
    assert_eq!(row(core_cycles), Some(gp_first + 7), "the P-cores' GP counter 7");
    // TOPDOWN.SLOTS: fixed counter 3.
    let slots = AllocateRequest::iap(0xA4 | 0x01 << 8 | 1 << 16).with_flags(PmcFlags::EV_PMU);
    let slots = AllocateRequest { class: Class::Iaf.as_u32(), ..slots };
    assert_eq!(alloc(slots), Err(hwpmc::Errno::Inval), "not on the E-cores");
    assert_eq!(alloc(slots.with_flags(atom)), Err(hwpmc::Errno::Inval));
    let core_slots = alloc(slots.with_flags(core)).unwrap();

    let pmcs = [everywhere, atom_instructions, core_instructions, core_cycles, core_slots];
    for &id in pmcs.iter().chain(&fillers) {
        m.client(tool).attach(id, pid).unwrap();
        m.client(tool).start(id).unwrap();
    }
    m.run_until_idle();
    assert_eq!(cpus_of(&m, pid).len(), 2, "it ran on the P-core and on the E-core");
    let read = |id| m.client(tool).read(id).unwrap();
    let all = read(everywhere);
    assert_eq!(u128::from(all), m.process_truth(pid).arch(ArchEvent::Instructions));
    let (p, e) = (read(core_instructions), read(atom_instructions));
    assert!(p > 0 && e > 0, "P {p}, E {e}");
    assert_eq!(p + e, all, "GP counter 6 counted the P-core share");
    let cycles = read(core_cycles);
    assert_eq!(cycles * 1_000, p * 1_700, "GP counter 7: 1 700 cycles per 1 000 instructions");
    let slots_per_cycle = u64::from(PmuModel::alder_lake_p().topdown_slots_per_cycle);
    assert_eq!(read(core_slots), cycles * slots_per_cycle, "fixed counter 3 on the P-core");
    m.hardware().assert_no_faults();
}

/// An event both core types have with an encoding each: the P-cores' in `pm_iap_config`, the
/// E-cores' raw events (a block retires 50 of the P-cores' event 0xAB/0x01 and 70 of the
/// E-cores' 0xCD/0x02).
fn two_encodings() -> AllocateRequest {
    AllocateRequest::iap(0xAB | 0x01 << 8 | 1 << 16).with_atom_encoding(0xCD | 0x02 << 8 | 1 << 16)
}

/// One PMC carrying both core types' encodings loads each core type's own at switch-in: on a
/// thread moving between P- and E-cores it counts the P-core encoding's events while the
/// thread is on the P-core and the E-core encoding's while it is on the E-core, exactly what a
/// PMC of each core type counts together; a system PMC on the E-core counts its encoding.
#[test]
fn one_pmc_counts_with_each_core_types_encoding() {
    let mut m = hybrid(PmuModel::alder_lake_p(), PmuModel::alder_lake_e(), 1, 1, 13);
    let block = work().with_raw(0xAB, 0x01, 50).with_raw(0xCD, 0x02, 70);
    let (pid, tool) = spawn_mover(&mut m, &block, 5, 300, 1005);
    let both = m.client(tool).allocate(two_encodings()).unwrap();
    let p_only =
        AllocateRequest::iap(0xAB | 0x01 << 8 | 1 << 16).with_flags(PmcFlags::CORE_TYPE_CORE);
    let p_only = m.client(tool).allocate(p_only).unwrap();
    let e_only =
        AllocateRequest::iap(0xCD | 0x02 << 8 | 1 << 16).with_flags(PmcFlags::CORE_TYPE_ATOM);
    let e_only = m.client(tool).allocate(e_only).unwrap();
    // CPU 1 is the E-core.
    let system = two_encodings().in_mode(hwpmc::abi::Mode::SystemCounting, Some(1));
    let system = m.client(tool).allocate(system).unwrap();
    for id in [both, p_only, e_only] {
        m.client(tool).attach(id, pid).unwrap();
    }
    for id in [both, p_only, e_only, system] {
        m.client(tool).start(id).unwrap();
    }
    m.run_until_idle();
    assert_eq!(cpus_of(&m, pid).len(), 2, "it ran on the P-core and on the E-core");
    let read = |id| m.client(tool).read(id).unwrap();
    let (value, p, e) = (read(both), read(p_only), read(e_only));
    // Only the measured program retires the raw events: each CPU's truth is its share.
    let on_p = m.cpu_truth(0).raw(0xAB, 0x01);
    let on_e = m.cpu_truth(1).raw(0xCD, 0x02);
    assert!(on_p > 0 && on_e > 0, "P {on_p}, E {on_e}");
    assert_eq!((u128::from(p), u128::from(e)), (on_p, on_e));
    assert_eq!(value, p + e, "each core type's encoding where it ran, no gap");
    let blocks = m.process_truth(pid).raw(0xAB, 0x01) / 50;
    assert_eq!(u128::from(value), on_p + on_e);
    assert_ne!(u128::from(value), blocks * 50, "not the P-cores' encoding everywhere");
    assert_eq!(u128::from(read(system)), on_e, "a system PMC on the E-core: its encoding");
    m.hardware().assert_no_faults();
}

/// The samples a thread-sampling PMC of `request` (period 1 000) takes of a thread that moves
/// between the P-core and the E-core and retires 50 events 0xAB/0x01 per block.
fn samples_of_a_mover(request: AllocateRequest, seed: u64) -> (usize, Machine) {
    use hwpmc_sim::kernel::SinkKind;
    let mut m = hybrid(PmuModel::alder_lake_p(), PmuModel::alder_lake_e(), 1, 1, seed);
    let block = work().with_raw(0xAB, 0x01, 50);
    let (pid, tool) = spawn_mover(&mut m, &block, 5, 300, 1008);
    let kernel = m.kernel().clone();
    let fd = kernel.open_sink(tool, SinkKind::Writable);
    m.client(tool).configure_log(fd).unwrap();
    let sink = kernel.sink_of(tool, fd).unwrap();
    let request = request.in_mode(hwpmc::abi::Mode::ThreadSampling, None).with_count(1_000);
    let id = m.client(tool).allocate(request).unwrap();
    m.client(tool).attach(id, pid).unwrap();
    m.client(tool).start(id).unwrap();
    m.run_until_idle();
    m.client(tool).flush_log().unwrap();
    assert_eq!(cpus_of(&m, pid).len(), 2, "it ran on the P-core and on the E-core");
    m.hardware().assert_no_faults();
    let bytes = m.kernel().sink_bytes(sink);
    let records = pmclog::Records::new(&bytes).map(|r| r.expect("the log decodes").record);
    (records.filter(|r| matches!(r, pmclog::Record::Callchain(_))).count(), m)
}

/// The P-core's GP counters are 48 bits wide, the class (the E-core's) 44: a sampling PMC's
/// counter is loaded sign-extended to the P-core counter's width, so it overflows after its
/// period there too: one sample per 1 000 events on either core type (50 per block: periods
/// end at block ends, so the count is exact).
#[test]
fn a_p_core_counter_wider_than_its_class_overflows_after_the_period() {
    let request = AllocateRequest::iap(0xAB | 0x01 << 8 | 1 << 16);
    let (samples, m) = samples_of_a_mover(request.with_flags(PmcFlags::CORE_TYPE_CORE), 21);
    let on_p = m.cpu_truth(0).raw(0xAB, 0x01);
    assert!(on_p > 0);
    assert_eq!(samples as u128, on_p / 1_000, "P-core only");
    let (samples, m) = samples_of_a_mover(request, 23);
    let events = m.cpu_truth(0).raw(0xAB, 0x01) + m.cpu_truth(1).raw(0xAB, 0x01);
    assert_eq!(samples as u128, events / 1_000, "every core type");
}

/// A sampling PMC with both core types' encodings keeps one period across the core types: one
/// sample per 1 000 events, whichever core type's encoding counted them. (A block retires its
/// 50 or 70 events at once, so a period that ends inside one runs on to the block's end before
/// the counter is reloaded, as hardware's skid: between events / (1 000 + 70) and events / 1 000
/// samples.)
#[test]
fn a_sampling_pmc_with_two_encodings_keeps_its_period_across_core_types() {
    use hwpmc_sim::kernel::SinkKind;
    let mut m = hybrid(PmuModel::alder_lake_p(), PmuModel::alder_lake_e(), 1, 1, 19);
    let block = work().with_raw(0xAB, 0x01, 50).with_raw(0xCD, 0x02, 70);
    let (pid, tool) = spawn_mover(&mut m, &block, 5, 300, 1007);
    let kernel = m.kernel().clone();
    let fd = kernel.open_sink(tool, SinkKind::Writable);
    m.client(tool).configure_log(fd).unwrap();
    let sink = kernel.sink_of(tool, fd).unwrap();
    let request = two_encodings().in_mode(hwpmc::abi::Mode::ThreadSampling, None);
    let id = m.client(tool).allocate(request.with_count(1_000)).unwrap();
    m.client(tool).attach(id, pid).unwrap();
    m.client(tool).start(id).unwrap();
    m.run_until_idle();
    m.client(tool).flush_log().unwrap();
    assert_eq!(cpus_of(&m, pid).len(), 2, "it ran on the P-core and on the E-core");
    let bytes = m.kernel().sink_bytes(sink);
    let records = pmclog::Records::new(&bytes).map(|r| r.expect("the log decodes").record);
    let samples = records.filter(|r| matches!(r, pmclog::Record::Callchain(_))).count();
    let events = m.cpu_truth(0).raw(0xAB, 0x01) + m.cpu_truth(1).raw(0xCD, 0x02);
    let guaranteed = events / 1_070..=events / 1_000;
    assert!(guaranteed.contains(&(samples as u128)), "{samples} samples, {events} events");
    m.hardware().assert_no_faults();
}

/// A multiplexed PMC with both core types' encodings takes its turns like any other: enabled
/// exactly while its thread runs (its two load specs are one PMC to the turns), never counting
/// more than while it was on a counter.
#[test]
fn a_multiplexed_pmc_with_two_encodings_has_exact_times() {
    let mut m = hybrid(PmuModel::alder_lake_p(), PmuModel::alder_lake_e(), 1, 1, 17);
    let block = work().with_raw(0xAB, 0x01, 50).with_raw(0xCD, 0x02, 70);
    let (pid, tool) = spawn_mover(&mut m, &block, 7, 400, 1006);
    let filler =
        AllocateRequest::iap(config(ArchEvent::Instructions)).with_flags(PmcFlags::MULTIPLEX);
    let mut ids: Vec<u32> = (0..11).map(|_| m.client(tool).allocate(filler).unwrap()).collect();
    let both = two_encodings().with_flags(PmcFlags::MULTIPLEX);
    let both = m.client(tool).allocate(both).unwrap();
    ids.push(both);
    for &id in &ids {
        m.client(tool).attach(id, pid).unwrap();
        m.client(tool).start(id).unwrap();
    }
    m.run_until_idle();
    assert_eq!(cpus_of(&m, pid).len(), 2, "it ran on the P-core and on the E-core");
    let on_cpu = u64::try_from(m.process_truth(pid).arch(ArchEvent::RefCycles)).unwrap();
    let t = m.client(tool).read_times(both).unwrap();
    assert_eq!(t.pm_enabled, on_cpu, "{t:?}");
    assert!(t.pm_running > 0 && t.pm_running < t.pm_enabled, "{t:?}");
    // At most 70 events per 1 300 reference cycles on a counter (the E-cores' rate).
    assert!(t.pm_value > 0 && t.pm_value * 1_300 <= t.pm_running * 70, "{t:?}");
    m.hardware().assert_no_faults();
}

/// A second encoding is refused (EINVAL) where it has no meaning: with a core type named, on
/// fixed counters, on a machine that is not hybrid, with a bit the E-cores leave undefined; a
/// PMC the host kernel would count is refused with EOPNOTSUPP elsewhere (`host_counting`).
#[test]
fn a_second_encoding_is_refused_where_it_has_no_meaning() {
    let mut m = hybrid(PmuModel::alder_lake_p(), PmuModel::alder_lake_e(), 1, 1, 1);
    let tool = m.spawn_tool(Credentials::root());
    let alloc = |request: AllocateRequest| m.client(tool).allocate(request);
    for flag in [PmcFlags::CORE_TYPE_CORE, PmcFlags::CORE_TYPE_ATOM] {
        assert_eq!(alloc(two_encodings().with_flags(flag)), Err(hwpmc::Errno::Inval), "{flag:?}");
    }
    let fixed = AllocateRequest { class: Class::Iaf.as_u32(), ..two_encodings() };
    let fixed = fixed.with_flags(PmcFlags::EV_PMU);
    assert_eq!(
        alloc(AllocateRequest { iap_config: 0xC0 | 1 << 16, ..fixed }),
        Err(hwpmc::Errno::Inval)
    );
    // UMASK2 (bits 47:40) is undefined on these E-cores.
    assert_eq!(
        alloc(two_encodings().with_atom_encoding(0xCD | 1 << 16 | 1 << 40)),
        Err(hwpmc::Errno::Inval)
    );
    assert!(alloc(two_encodings()).is_ok());
    let mut plain = Machine::new(hwpmc_sim::MachineConfig::new(PmuModel::icelake(), 2));
    let tool = plain.spawn_tool(Credentials::root());
    assert_eq!(
        plain.client(tool).allocate(two_encodings()),
        Err(hwpmc::Errno::Inval),
        "not hybrid"
    );
}

/// A thread on a machine of one P-core and one E-core runs on both, and its process PMCs (GP
/// and fixed, every architectural event both core types have) count it exactly.
#[test]
fn a_thread_moving_between_p_and_e_cores_is_counted_exactly() {
    for (p_core, e_core) in [
        (PmuModel::alder_lake_p(), PmuModel::alder_lake_e()),
        (PmuModel::meteor_lake_p(), PmuModel::meteor_lake_e()),
    ] {
        let mut m = hybrid(p_core, e_core, 1, 1, 7);
        let program = ProgramBuilder::new("/bin/mover")
            .function("main", |f| {
                f.repeat(Ring::User, work(), 5)
                    .repeat(Ring::Kernel, work(), 1)
                    .loop_to(0, 300)
                    .exit()
            })
            .build();
        let pid = m.spawn(&program, Credentials::user(1001));
        competitors(&mut m);
        let tool = m.spawn_tool(Credentials::root());
        let events = [
            ArchEvent::Instructions,
            ArchEvent::CoreCycles,
            ArchEvent::Branches,
            ArchEvent::LlcReferences,
            ArchEvent::BranchMispredicts,
            ArchEvent::LlcMisses,
        ];
        let mut pmcs = Vec::new();
        for e in events {
            pmcs.push((m.client(tool).allocate(AllocateRequest::iap(config(e))).unwrap(), e));
        }
        let fixed = [
            (event::IAF_INSTR_RETIRED_ANY, ArchEvent::Instructions),
            (event::IAF_CPU_CLK_UNHALTED_CORE, ArchEvent::CoreCycles),
            (event::IAF_CPU_CLK_UNHALTED_REF, ArchEvent::RefCycles),
        ];
        for (ev, e) in fixed {
            pmcs.push((m.client(tool).allocate(AllocateRequest::iaf(ev)).unwrap(), e));
        }
        for &(id, _) in &pmcs {
            m.client(tool).attach(id, pid).unwrap();
            m.client(tool).start(id).unwrap();
        }
        m.run_until_idle();
        assert_eq!(cpus_of(&m, pid).len(), 2, "it ran on the P-core and on the E-core");
        let truth = m.process_truth(pid);
        for (id, e) in pmcs {
            let value = m.client(tool).read(id).unwrap();
            assert_eq!(u128::from(value), truth.arch(e), "{e:?}");
        }
        m.hardware().assert_no_faults();
    }
}

/// Four times the GP counters every core type has, multiplexed, on a thread that moves between
/// P- and E-cores: each PMC is enabled exactly while the thread runs and counts at the block's
/// rate while it is on a counter.
#[test]
fn multiplexed_pmcs_of_a_thread_moving_between_core_types_have_exact_times() {
    let mut m = hybrid(PmuModel::alder_lake_p(), PmuModel::alder_lake_e(), 1, 1, 5);
    let (pid, tool) = spawn_mover(&mut m, &work(), 7, 400, 1002);
    let request =
        AllocateRequest::iap(config(ArchEvent::Instructions)).with_flags(PmcFlags::MULTIPLEX);
    let ids: Vec<u32> = (0..24).map(|_| m.client(tool).allocate(request).unwrap()).collect();
    for &id in &ids {
        m.client(tool).attach(id, pid).unwrap();
        m.client(tool).start(id).unwrap();
    }
    m.run_until_idle();
    assert_eq!(cpus_of(&m, pid).len(), 2, "it ran on the P-core and on the E-core");
    let on_cpu = u64::try_from(m.process_truth(pid).arch(ArchEvent::RefCycles)).unwrap();
    let mut running = 0;
    for &id in &ids {
        let t = m.client(tool).read_times(id).unwrap();
        assert_eq!(t.pm_enabled, on_cpu);
        assert_eq!(t.pm_value * 1_300, t.pm_running * 1_000, "{t:?}");
        running += t.pm_running;
    }
    assert_eq!(running, on_cpu * 6, "6 counters busy all the time, one turn at a time");
    m.hardware().assert_no_faults();
}

/// A process PMC that names a core type counts only while its thread runs on CPUs of that type:
/// the P-core and E-core counts of a thread that moved between them add up to its count, and a
/// system PMC or a machine without that core type refuses it.
#[test]
fn a_pmc_of_one_core_type_counts_only_on_that_core_type() {
    let mut m = hybrid(PmuModel::alder_lake_p(), PmuModel::alder_lake_e(), 1, 1, 9);
    let (pid, tool) = spawn_mover(&mut m, &work(), 5, 300, 1003);
    let instructions = AllocateRequest::iap(config(ArchEvent::Instructions));
    let everywhere = m.client(tool).allocate(instructions).unwrap();
    let p_only =
        m.client(tool).allocate(instructions.with_flags(PmcFlags::CORE_TYPE_CORE)).unwrap();
    let e_only =
        m.client(tool).allocate(instructions.with_flags(PmcFlags::CORE_TYPE_ATOM)).unwrap();
    for id in [everywhere, p_only, e_only] {
        m.client(tool).attach(id, pid).unwrap();
        m.client(tool).start(id).unwrap();
    }
    m.run_until_idle();
    assert_eq!(cpus_of(&m, pid).len(), 2, "it ran on the P-core and on the E-core");
    let read = |id| m.client(tool).read(id).unwrap();
    let (all, p, e) = (read(everywhere), read(p_only), read(e_only));
    assert_eq!(u128::from(all), m.process_truth(pid).arch(ArchEvent::Instructions));
    assert!(p > 0 && e > 0, "P {p}, E {e}");
    assert_eq!(p + e, all, "each instruction on exactly one core type");

    let both = PmcFlags::CORE_TYPE_CORE | PmcFlags::CORE_TYPE_ATOM;
    assert_eq!(m.client(tool).allocate(instructions.with_flags(both)), Err(hwpmc::Errno::Inval));
    // CPU 1 is the E-core.
    let system = instructions.in_mode(hwpmc::abi::Mode::SystemCounting, Some(1));
    assert_eq!(
        m.client(tool).allocate(system.with_flags(PmcFlags::CORE_TYPE_CORE)),
        Err(hwpmc::Errno::Inval)
    );
    assert!(m.client(tool).allocate(system.with_flags(PmcFlags::CORE_TYPE_ATOM)).is_ok());
    let mut plain = Machine::new(hwpmc_sim::MachineConfig::new(PmuModel::icelake(), 2));
    let tool = plain.spawn_tool(Credentials::root());
    assert_eq!(
        plain.client(tool).allocate(instructions.with_flags(PmcFlags::CORE_TYPE_ATOM)),
        Err(hwpmc::Errno::Inval),
        "no E-core on this machine"
    );
}
