//! Hybrid machines (Alder Lake-like and Meteor Lake-like: P-cores and E-cores with PMUs of their
//! own): discovery finds each CPU's core type, the driver's classes are what every core type
//! has, and a thread that moves between P- and E-cores is counted exactly on both, also when its
//! PMCs are multiplexed.

use hwpmc::Tunables;
use hwpmc::abi::{Class, PmcFlags, event};
use hwpmc::arch::x86::intel::discovery::{CoreType, IntelPmu};
use hwpmc::hw::Hardware;
use hwpmc_sim::kernel::SimKernel;
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{
    AllocateRequest, ArchEvent, Credentials, Machine, PmuModel, ProgramBuilder, SimHardware, SimPmu,
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

#[test]
fn the_classes_of_a_hybrid_machine_are_what_every_core_type_has() {
    let mut m = hybrid(PmuModel::alder_lake_p(), PmuModel::alder_lake_e(), 2, 2, 1);
    let tool = m.spawn_tool(Credentials::root());
    let info = m.client(tool).cpu_info().unwrap();
    let class = |c: Class| {
        let classes = &info.pm_classes[..info.pm_nclass as usize];
        classes.iter().find(|k| k.pm_class == c.as_u32()).map(|k| (k.pm_num, k.pm_width))
    };
    assert_eq!(class(Class::Iap), Some((6, 44)), "the E-cores' 6 GP counters, 44 bits");
    assert_eq!(class(Class::Iaf), Some((3, 48)), "the E-cores' 3 fixed counters");
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
    let program = ProgramBuilder::new("/bin/mover")
        .function("main", |f| f.repeat(Ring::User, work(), 7).loop_to(0, 400).exit())
        .build();
    let pid = m.spawn(&program, Credentials::user(1002));
    competitors(&mut m);
    let tool = m.spawn_tool(Credentials::root());
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
    let program = ProgramBuilder::new("/bin/mover")
        .function("main", |f| f.repeat(Ring::User, work(), 5).loop_to(0, 300).exit())
        .build();
    let pid = m.spawn(&program, Credentials::user(1003));
    competitors(&mut m);
    let tool = m.spawn_tool(Credentials::root());
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
