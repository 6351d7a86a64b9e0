//! The AMD backend on the simulated Zen and family 10h machines: what the K8 class accepts and
//! refuses (before any MSR write), the RDPMC index, the PMI handlers with and without
//! PerfMonV2, load and unload; and the simulated registers' own #GP rules.

use hwpmc::abi::{Class, Mode, PmcFlags};
use hwpmc::arch::x86::amd::msr::{
    PERF_CNTR_GLOBAL_CTL, PERF_CNTR_GLOBAL_STATUS, PERF_CNTR_GLOBAL_STATUS_CLR, PERF_CTL0,
    PERF_CTL0_LEGACY, PERF_CTR0,
};
use hwpmc::{Errno, TrapFrame};
use hwpmc_sim::pmu::{FaultKind, Ring, Work};
use hwpmc_sim::{AllocateRequest, ArchEvent, PmuModel};
use hwpmc_test_support::world::World;

/// Instructions retired (`ex_ret_instr`, 0x0C0), user mode only.
const INSTRUCTIONS_USER: u64 = 0x1_00C0;

#[test]
fn k8_refuses_reserved_bits_other_sub_classes_and_non_pmu_events_before_any_msr_access() {
    for model in [PmuModel::k10(), PmuModel::zen2(), PmuModel::zen4()] {
        let w = World::new(model);
        let hw = w.driver.kernel().hardware().clone();
        let before = hw.last_access();
        let refused = [
            // Pin control (bit 19), bit 21, bits 39:36 and 63:42 are reserved.
            AllocateRequest::k8(1 << 19 | 0xC0),
            AllocateRequest::k8(1 << 21 | 0xC0),
            AllocateRequest::k8(1 << 36 | 0xC0),
            AllocateRequest::k8(1 << 42 | 0xC0),
            // The L3 and data-fabric sub-classes are not driven yet.
            AllocateRequest { amd_sub_class: 1, ..AllocateRequest::k8(0xC0) },
            AllocateRequest { amd_sub_class: 2, ..AllocateRequest::k8(0xC0) },
            AllocateRequest { amd_sub_class: 3, ..AllocateRequest::k8(0xC0) },
            // FreeBSD's static K8 events are not driven: only PMU events (PMC_F_EV_PMU).
            AllocateRequest { flags: 0, event: 0x2080, ..AllocateRequest::k8(0xC0) },
        ];
        for request in refused {
            assert_eq!(w.client().allocate(request), Err(Errno::Inval), "{request:?}");
        }
        assert_eq!(hw.last_access(), before, "no MSR was touched");
        // What is defined is accepted: a 12-bit event, GuestOnly with HostOnly, every flag.
        let defined = 0x30F_0000_0000_u64 | 0xFF00_0000 | 0xD7 << 16 | 0xFFFF;
        assert!(w.client().allocate(AllocateRequest::k8(defined)).is_ok());
        hw.assert_no_faults();
    }
}

#[test]
fn the_rdpmc_index_is_the_core_counter_number() {
    let w = World::new(PmuModel::zen4());
    let c = w.client();
    let ids: Vec<u32> = (0..6).map(|_| c.allocate(AllocateRequest::k8(0xC0)).unwrap()).collect();
    for (n, &id) in ids.iter().enumerate() {
        c.attach(id, 0).unwrap();
        // Rows 4 and 5 too (FreeBSD's address arithmetic gives 0x205 and 0x207 there).
        assert_eq!(c.get_msr(id), Ok(n as u32));
    }
    let seventh = c.allocate(AllocateRequest::k8(0xC0));
    assert_eq!(seventh, Err(Errno::Inval), "six core counters, all in use");
}

/// Runs `blocks` blocks of 1000 user instructions on CPU 0 of `w`, delivering every PMI;
/// returns how many the driver claimed.
fn run(w: &World, blocks: u64) -> u64 {
    let hw = w.driver.kernel().hardware().clone();
    let work = Work { instructions: 1000, core_cycles: 1500, ..Work::default() };
    let frame = TrapFrame { pc: 0x40_1000, fp: 0, sp: 0, user: true };
    let mut claimed = 0;
    for _ in 0..blocks {
        hw.pmu(0).retire(Ring::User, &work);
        if hw.pmu(0).take_pmi().is_some() {
            claimed += u64::from(w.driver.interrupt(0, &frame));
        }
    }
    claimed
}

#[test]
fn sampling_interrupts_are_claimed_and_an_nmi_with_no_overflow_is_not() {
    for model in [PmuModel::k10(), PmuModel::zen2(), PmuModel::zen4()] {
        let w = World::new(model);
        let request = AllocateRequest::k8(INSTRUCTIONS_USER).in_mode(Mode::ThreadSampling, None);
        let id = w.client().allocate(request.with_count(10_000)).unwrap();
        w.client().start(id).unwrap();
        w.driver.switch_in(0, w.pid, w.tid);
        assert_eq!(run(&w, 45), 4, "{model:?}: 45 000 instructions, one PMI per 10 000");
        // Someone else's NMI while the counter runs, 5000 short of its overflow.
        let frame = TrapFrame { pc: 0x40_1000, fp: 0, sp: 0, user: true };
        assert!(!w.driver.interrupt(0, &frame), "{model:?}: not the driver's");
        assert_eq!(run(&w, 5), 1, "{model:?}: the period went on");
        w.driver.switch_out(0, w.pid, w.tid);
        w.driver.kernel().hardware().assert_no_faults();
    }
}

#[test]
fn with_perfmon_v2_the_counters_run_by_global_control_and_load_restores_it() {
    let w = World::new(PmuModel::zen4());
    let hw = w.driver.kernel().hardware().clone();
    // Loading stopped everything through the global control (which resets to all counters).
    assert_eq!(hw.pmu(0).read_msr(PERF_CNTR_GLOBAL_CTL).unwrap(), 0);
    let id = w.client().allocate(AllocateRequest::k8(INSTRUCTIONS_USER)).unwrap();
    w.client().start(id).unwrap();
    w.driver.switch_in(0, w.pid, w.tid);
    let ctl = hw.pmu(0).read_msr(PERF_CTL0).unwrap();
    assert_eq!(ctl, INSTRUCTIONS_USER | 1 << 22 | 1 << 20, "EN and INT set by the driver");
    assert_eq!(hw.pmu(0).read_msr(PERF_CNTR_GLOBAL_CTL).unwrap(), 1);
    run(&w, 3);
    w.driver.switch_out(0, w.pid, w.tid);
    assert_eq!(hw.pmu(0).read_msr(PERF_CNTR_GLOBAL_CTL).unwrap(), 0);
    assert_eq!(w.client().read(id), Ok(3000));
    w.driver.unload();
    assert_eq!(hw.pmu(0).read_msr(PERF_CNTR_GLOBAL_CTL).unwrap(), 0x3F, "restored as found");
    assert_eq!(hw.pmu(0).read_msr(PERF_CTL0).unwrap(), 0);
    hw.assert_no_faults();
}

#[test]
fn without_perfmon_v2_a_counter_starts_and_stops_by_its_enable_bit() {
    for model in [PmuModel::k10(), PmuModel::zen2()] {
        let w = World::new(model);
        let hw = w.driver.kernel().hardware().clone();
        let ctl0 =
            if model.amd.unwrap().perf_ctr_ext_core() { PERF_CTL0 } else { PERF_CTL0_LEGACY };
        let id = w.client().allocate(AllocateRequest::k8(INSTRUCTIONS_USER)).unwrap();
        w.client().start(id).unwrap();
        w.driver.switch_in(0, w.pid, w.tid);
        assert_ne!(hw.pmu(0).read_msr(ctl0).unwrap() & 1 << 22, 0, "{model:?}: enabled");
        run(&w, 7);
        w.driver.switch_out(0, w.pid, w.tid);
        assert_eq!(hw.pmu(0).read_msr(ctl0).unwrap() & 1 << 22, 0, "{model:?}: disabled");
        // Work while switched out is not counted.
        run(&w, 2);
        assert_eq!(w.client().read(id), Ok(7000));
        hw.assert_no_faults();
    }
}

#[test]
fn the_k8_class_is_offered_by_amd_machines_only() {
    let w = World::new(PmuModel::skylake());
    assert_eq!(w.client().allocate(AllocateRequest::k8(0xC0)), Err(Errno::Inval));
    let w = World::new(PmuModel::zen4());
    let info = w.client().cpu_info().unwrap();
    let classes: Vec<u32> =
        info.pm_classes[..info.pm_nclass as usize].iter().map(|c| c.pm_class).collect();
    assert_eq!(classes, [Class::Soft.as_u32(), Class::Tsc.as_u32(), Class::K8.as_u32()]);
    let request = AllocateRequest::arch(&PmuModel::zen4(), ArchEvent::CoreCycles, 0);
    assert!(w.client().allocate(request.with_flags(PmcFlags::CALLCHAIN)).is_ok());
}

// ----- The simulated registers -----

#[test]
fn simulated_amd_registers_fault_as_the_manual_says() {
    let zen4 = hwpmc_sim::SimPmu::new(PmuModel::zen4());
    let mut pmu = zen4.clone();
    let kind = |r: Result<(), hwpmc_sim::Fault>| r.unwrap_err().kind;
    assert_eq!(kind(pmu.write_msr(PERF_CTL0, 1 << 19)), FaultKind::ReservedBits(1 << 19));
    assert_eq!(kind(pmu.write_msr(PERF_CTR0, 1 << 48)), FaultKind::ReservedBits(1 << 48));
    assert_eq!(kind(pmu.write_msr(PERF_CNTR_GLOBAL_STATUS, 0)), FaultKind::ReadOnly);
    assert_eq!(kind(pmu.write_msr(PERF_CNTR_GLOBAL_CTL, 1 << 6)), FaultKind::ReservedBits(1 << 6));
    assert_eq!(
        kind(pmu.write_msr(PERF_CNTR_GLOBAL_STATUS_CLR, 1 << 7)),
        FaultKind::ReservedBits(1 << 7)
    );
    // Intel's registers do not exist; counter 6 does not either.
    assert_eq!(pmu.read_msr(0x186).unwrap_err().kind, FaultKind::UnknownMsr);
    assert_eq!(pmu.read_msr(0x38F).unwrap_err().kind, FaultKind::UnknownMsr);
    assert_eq!(pmu.read_msr(PERF_CTL0 + 12).unwrap_err().kind, FaultKind::UnknownMsr);
    assert_eq!(pmu.read_pmc(6).unwrap_err().kind, FaultKind::NoSuchCounter);
    // The legacy addresses alias counters 0 to 3.
    pmu.write_msr(PERF_CTR0 + 6, 1234).unwrap();
    assert_eq!(pmu.read_msr(0xC001_0007), Ok(1234));
    assert_eq!(pmu.read_pmc(3), Ok(1234));
    // Zen 2 has no global registers; family 10h has no extended addresses.
    let zen2 = hwpmc_sim::SimPmu::new(PmuModel::zen2());
    assert_eq!(zen2.read_msr(PERF_CNTR_GLOBAL_CTL).unwrap_err().kind, FaultKind::UnknownMsr);
    let k10 = hwpmc_sim::SimPmu::new(PmuModel::k10());
    assert_eq!(k10.read_msr(PERF_CTL0).unwrap_err().kind, FaultKind::UnknownMsr);
    assert_eq!(k10.read_pmc(4).unwrap_err().kind, FaultKind::NoSuchCounter);
}

#[test]
fn simulated_core_counters_count_by_enable_global_bit_ring_and_host_guest_bits() {
    let instructions = |ctl: u64, global: Option<u64>| {
        let mut pmu = hwpmc_sim::SimPmu::new(PmuModel::zen4());
        pmu.write_msr(PERF_CTL0, ctl).unwrap();
        if let Some(global) = global {
            pmu.write_msr(PERF_CNTR_GLOBAL_CTL, global).unwrap();
        }
        let work = Work { instructions: 100, core_cycles: 150, ..Work::default() };
        pmu.retire(Ring::User, &work);
        pmu.retire(Ring::Kernel, &work);
        pmu.read_pmc(0).unwrap()
    };
    let en = 1 << 22;
    assert_eq!(instructions(0x3_00C0 | en, None), 200, "GlobalCtl resets to every counter");
    assert_eq!(instructions(0x3_00C0 | en, Some(0)), 0, "its global bit clear");
    assert_eq!(instructions(0x3_00C0, None), 0, "EN clear");
    assert_eq!(instructions(0x1_00C0 | en, None), 100, "USR only");
    assert_eq!(instructions(0x3_0076 | en, None), 300, "ls_not_halted_cyc");
    assert_eq!(instructions(0x3_00C0 | en | 1 << 41, None), 0, "HostOnly with SVM off");
    assert_eq!(instructions(0x3_00C0 | en | 3 << 40, None), 200, "both: counts everywhere");
}

#[test]
fn missing_feature_bits_under_a_hypervisor_reduce_what_is_offered_without_a_fault() {
    use hwpmc_sim::amd::AmdFeatures;
    let k8_rows = |model: PmuModel| {
        let w = World::new(model);
        let info = w.client().cpu_info().unwrap();
        let k8 = info.pm_classes[..info.pm_nclass as usize]
            .iter()
            .find(|c| c.pm_class == Class::K8.as_u32())
            .map(|c| c.pm_num);
        if k8.is_some() {
            let id = w.client().allocate(AllocateRequest::k8(INSTRUCTIONS_USER)).unwrap();
            w.client().start(id).unwrap();
            w.driver.switch_in(0, w.pid, w.tid);
            run(&w, 3);
            w.driver.switch_out(0, w.pid, w.tid);
            assert_eq!(w.client().read(id), Ok(3000));
        }
        w.driver.unload();
        w.driver.kernel().hardware().assert_no_faults();
        (k8, w.driver.kernel().hardware().last_access())
    };
    // A Zen 4 guest whose hypervisor hides PerfMonV2 (no leaf 8000_0022h): the six counters
    // without the global registers (which do not exist there: touching them would #GP).
    let zen4 = PmuModel::zen4();
    let amd = zen4.amd.unwrap();
    let no_v2 = AmdFeatures { max_extended_leaf: 0x8000_0021, ..amd };
    let guest = PmuModel { hypervisor: true, amd: Some(no_v2), ..zen4 };
    assert_eq!(k8_rows(guest).0, Some(6));
    // A guest that advertises no counters at all: SOFT and TSC only, no PMU MSR touched.
    let none = AmdFeatures { ext_features_ecx: amd.ext_features_ecx & !(1 << 23), ..no_v2 };
    let bare = PmuModel { hypervisor: true, amd: Some(none), gp_counters: 4, ..zen4 };
    assert_eq!(k8_rows(bare), (None, None));
}

#[test]
fn simulated_faults_name_amd_registers() {
    let mut pmu = hwpmc_sim::SimPmu::new(PmuModel::zen4());
    let fault = pmu.write_msr(PERF_CTL0 + 4, 1 << 21).unwrap_err();
    assert!(fault.to_string().contains("WRMSR PERF_CTL2 (0xc0010204)"), "{fault}");
    let fault = pmu.write_msr(PERF_CNTR_GLOBAL_STATUS, 1).unwrap_err();
    assert!(fault.to_string().contains("PerfCntrGlobalStatus (0xc0000300)"), "{fault}");
}
