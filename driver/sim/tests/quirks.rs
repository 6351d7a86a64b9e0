//! The driver on parts that depart from the SDM's letter ([`hwpmc_sim::quirks`]): a KVM guest, a
//! Core 2 whose CPUID hides its fixed counters, reference cycles at their own clock.

use std::rc::Rc;

use hwpmc::abi::{Class, Mode, event};
use hwpmc::arch::x86::intel::discovery::IntelPmu;
use hwpmc::hw::{CpuIdReader, Hardware};
use hwpmc_sim::pmu::{MaskedPmi, Ring, Work};
use hwpmc_sim::{
    AllocateRequest, ArchEvent, Credentials, Machine, MachineConfig, PmuModel, Program,
    ProgramBuilder, SimHardware,
};
use pmclog::{Record, Records};

/// `main` runs a 1000-instruction user block 500 times.
fn program() -> Rc<Program> {
    let work = Work { instructions: 1000, core_cycles: 1500, ref_cycles: 1200, ..Work::default() };
    ProgramBuilder::new("/usr/bin/busy")
        .function("main", move |f| f.block(Ring::User, work.clone()).loop_to(0, 500).exit())
        .build()
}

/// The classes the driver offers, as `tool` sees them: (class, rows).
fn classes(m: &Machine, tool: hwpmc::Pid) -> Vec<(u32, u32)> {
    let info = m.client(tool).cpu_info().unwrap();
    info.pm_classes[..info.pm_nclass as usize].iter().map(|c| (c.pm_class, c.pm_num)).collect()
}

/// Early Core 2 parts report no fixed counter in CPUID.0AH:EDX, though the three exist (Linux
/// assumes three on bare-metal perfmon v2 to v4). The driver does the same: it offers the IAF
/// class with three rows of the GP counters' width, and they count exactly. Under a hypervisor
/// it trusts CPUID, whose vPMU may really have none.
#[test]
fn a_core2_hiding_its_fixed_counters_still_gets_them() {
    let model = PmuModel::core2_hiding_fixed_counters();
    let hw = SimHardware::new(model, 1);
    assert_eq!(hw.cpuid().cpuid1(0xA).edx, 0, "CPUID hides them");
    let pmu = IntelPmu::discover(&hw.cpuid(), &hw).unwrap();
    assert_eq!((pmu.fixed_mask, pmu.fixed_width), (0b111, 40), "three assumed, 40 bits wide");

    let mut m = Machine::new(MachineConfig::new(model, 1));
    let tool = m.spawn_tool(Credentials::user(1000));
    let iaf = (Class::Iaf.as_u32(), 3);
    assert!(classes(&m, tool).contains(&iaf), "{:?}", classes(&m, tool));
    let target = m.spawn(&program(), Credentials::user(1000));
    let request = AllocateRequest::iaf(event::IAF_INSTR_RETIRED_ANY);
    let id = m.client(tool).allocate(request).unwrap();
    m.client(tool).attach(id, target).unwrap();
    m.client(tool).start(id).unwrap();
    m.run_until_idle();
    m.hardware().assert_no_faults();
    assert_eq!(m.client(tool).read(id), Ok(500_000));

    // A hypervisor reporting no fixed counter has none: the driver offers no IAF class.
    let guest = PmuModel { fixed_counters: 0, fixed_width: 0, ..PmuModel::kvm_guest() };
    let mut m = Machine::new(MachineConfig::new(guest, 1));
    let tool = m.spawn_tool(Credentials::user(1000));
    assert!(classes(&m, tool).iter().all(|&(class, _)| class != Class::Iaf.as_u32()));
    m.hardware().assert_no_faults();
}

/// A KVM guest: perfmon v2 without the freeze bit (#GP if written), masked PMIs dropped, counter
/// writes truncated. The driver loads without a #GP and samples every overflow of two sampling
/// PMCs whose overflows come close together.
#[test]
fn a_kvm_guest_samples_every_overflow() {
    let model = PmuModel::kvm_guest();
    let config = MachineConfig::new(model, 1);
    assert_eq!(config.masked_pmi, MaskedPmi::Dropped, "KVM's APIC drops masked PMIs");
    for freeze in [false, true] {
        let tunables = hwpmc::Tunables { freeze_on_pmi: freeze, ..Default::default() };
        let mut m = Machine::new(config.clone().tunables(tunables));
        let tool = m.spawn_tool(Credentials::user(1000));
        let kernel = m.kernel().clone();
        let fd = kernel.open_sink(tool, hwpmc_sim::SinkKind::Writable);
        m.client(tool).configure_log(fd).unwrap();
        let target = m.spawn(&program(), Credentials::user(1000));
        let mut ids = Vec::new();
        for period in [10_000, 25_000] {
            let request = AllocateRequest::iap(0x01_00C0).in_mode(Mode::ThreadSampling, None);
            let id = m.client(tool).allocate(request.with_count(period)).unwrap();
            m.client(tool).attach(id, target).unwrap();
            m.client(tool).start(id).unwrap();
            ids.push(id);
        }
        m.run_until_idle();
        m.hardware().assert_no_faults();
        m.client(tool).flush_log().unwrap();
        let bytes = kernel.sink_bytes(kernel.sink_of(tool, fd).unwrap());
        let records: Vec<Record<'_>> =
            Records::new(&bytes).map(|e| e.expect("the log decodes").record).collect();
        let of = |id: u32| {
            records.iter().filter(|r| matches!(r, Record::Callchain(cc) if cc.pmcid == id)).count()
        };
        assert_eq!((of(ids[0]), of(ids[1])), (50, 20), "freeze tunable {freeze}");
    }
}

/// D6: UnHalted Reference Cycles (0x3C/0x01) on a GP counter counts the part's reference clock,
/// which need not be the TSC's: here one tick per 8 TSC ticks (the bus clock of a part whose
/// fixed counter 2 and TSC run at the core's nominal rate). Fixed counter 2 counts the TSC's
/// rate, the GP counter an eighth of it.
#[test]
fn reference_cycles_on_a_gp_counter_count_their_own_clock() {
    let mut model = PmuModel::skylake();
    model.quirks.gp_ref_cycles_divisor = 8;
    let mut m = Machine::new(MachineConfig::new(model, 1));
    let tool = m.spawn_tool(Credentials::user(1000));
    let target = m.spawn(&program(), Credentials::user(1000));
    let gp = m.client(tool).allocate(AllocateRequest::iap(0x01_013C)).unwrap();
    let fixed =
        m.client(tool).allocate(AllocateRequest::iaf(event::IAF_CPU_CLK_UNHALTED_REF)).unwrap();
    for id in [gp, fixed] {
        m.client(tool).attach(id, target).unwrap();
        m.client(tool).start(id).unwrap();
    }
    m.run_until_idle();
    m.hardware().assert_no_faults();
    let truth = m.process_truth(target).arch_in(Ring::User, ArchEvent::RefCycles) as u64;
    assert_eq!(truth, 600_000);
    let fixed_count = m.client(tool).read(fixed).unwrap();
    let gp_count = m.client(tool).read(gp).unwrap();
    assert_eq!(fixed_count, truth, "fixed counter 2: the TSC's rate");
    assert_eq!(gp_count, truth / 8, "the GP counter: the reference clock's");
}
