//! The simulated Intel PMU against the SDM: CPUID encodings, discovery by the driver, every
//! register's #GP cases per perfmon version, counter write semantics, counting, CMASK / INV /
//! EDGE, overflow, PMI delivery through the LVT entry, freeze on PMI, and the `Hardware` handle.

use std::panic::{AssertUnwindSafe, catch_unwind};

use hwpmc::arch::x86::intel::discovery::{FreezeMode, IntelPmu};
use hwpmc::arch::x86::intel::offcore::OffcoreLayout;
use hwpmc::hw::{CpuIdReader, Hardware, Lapic};
use hwpmc_sim::cpuid::{ArchEvent, CpuidModel, PmuModel};
use hwpmc_sim::pmu::bits::*;
use hwpmc_sim::pmu::msr::*;
use hwpmc_sim::pmu::{
    Access, DeliveryMode, Fault, FaultKind, MaskedPmi, Pmi, Ring, SimHardware, SimPmu, Work,
};
use hwpmc_sim::quirks::Quirks;
use proptest::prelude::*;

const W48: u64 = 1 << 48;
const W40: u64 = 1 << 40;
/// NMI delivery, unmasked.
const LVT_NMI: u64 = 0x400;

fn wr(pmu: &mut SimPmu, msr: u32, value: u64) {
    pmu.write_msr(msr, value).unwrap_or_else(|fault| panic!("{fault}"));
}

fn rd(pmu: &SimPmu, msr: u32) -> u64 {
    pmu.read_msr(msr).unwrap_or_else(|fault| panic!("{fault}"))
}

fn wr_fault(pmu: &mut SimPmu, msr: u32, value: u64) -> FaultKind {
    pmu.write_msr(msr, value).expect_err("the write must #GP").kind
}

fn rd_fault(pmu: &SimPmu, msr: u32) -> FaultKind {
    pmu.read_msr(msr).expect_err("the read must #GP").kind
}

/// An IA32_PERFEVTSELx value: EN plus `flags` for `event`.
fn evtsel(event: ArchEvent, flags: u64) -> u64 {
    raw_evtsel(event.event_select(), event.umask(), flags)
}

fn raw_evtsel(event_select: u8, umask: u8, flags: u64) -> u64 {
    u64::from(event_select) | u64::from(umask) << 8 | EVTSEL_EN | flags
}

fn user_block() -> Work {
    Work {
        instructions: 100,
        core_cycles: 50,
        ref_cycles: 40,
        llc_references: 7,
        llc_misses: 3,
        branches: 20,
        branch_mispredicts: 2,
        raw: Vec::new(),
        offcore: Vec::new(),
    }
}

fn kernel_block() -> Work {
    Work { instructions: 30, core_cycles: 10, ref_cycles: 8, llc_misses: 1, ..Work::default() }
}

fn presets() -> Vec<(&'static str, PmuModel)> {
    vec![
        ("yonah", PmuModel::yonah()),
        ("core2", PmuModel::core2()),
        ("nehalem", PmuModel::nehalem()),
        ("skylake", PmuModel::skylake()),
        ("icelake", PmuModel::icelake()),
        ("v5_sparse_fixed", PmuModel::v5_sparse_fixed()),
        ("future_v6", PmuModel::future_version(6)),
    ]
}

// ---------------------------------------------------------------------------------------------
// CPUID and discovery

#[test]
fn cpuid_of_skylake_reports_the_real_leaves() {
    let cpuid = CpuidModel::new(PmuModel::skylake(), 3);
    let leaf0 = cpuid.cpuid1(0);
    assert_eq!(leaf0.eax, 0x16);
    let vendor: Vec<u8> =
        [leaf0.ebx, leaf0.edx, leaf0.ecx].iter().flat_map(|r| r.to_le_bytes()).collect();
    assert_eq!(vendor, b"GenuineIntel");
    let leaf1 = cpuid.cpuid1(1);
    assert_eq!(leaf1.eax, 0x0005_06E3);
    assert_eq!(leaf1.ebx >> 24, 3, "initial APIC ID");
    assert_ne!(leaf1.ecx & 1 << 15, 0, "PDCM");
    assert_eq!(leaf1.ecx & 1 << 31, 0, "not a VM");
    let leaf_a = cpuid.cpuid1(0xA);
    assert_eq!((leaf_a.eax, leaf_a.ebx, leaf_a.ecx, leaf_a.edx), (0x0730_0404, 0, 0, 0x603));
    for leaf in [2, 7, 0xB, 0x16, 0x4000_0000, 0x8000_0000] {
        let r = cpuid.cpuid2(leaf, 0);
        assert_eq!((r.eax, r.ebx, r.ecx, r.edx), (0, 0, 0, 0), "leaf {leaf:#x}");
    }

    // raw-cpuid decodes the same leaves.
    let decoded = raw_cpuid::CpuId::with_cpuid_reader(cpuid);
    assert_eq!(decoded.get_vendor_info().unwrap().as_str(), "GenuineIntel");
    let features = decoded.get_feature_info().unwrap();
    assert_eq!((features.family_id(), features.model_id(), features.stepping_id()), (6, 0x5E, 3));
    assert!(features.has_pdcm() && features.has_msr() && features.has_tsc());
    let perf = decoded.get_performance_monitoring_info().unwrap();
    assert_eq!(perf.version_id(), 4);
    assert_eq!(perf.number_of_counters(), 4);
    assert_eq!(perf.counter_bit_width(), 48);
    assert_eq!(perf.fixed_function_counters(), 3);
    assert_eq!(perf.fixed_function_counters_bit_width(), 48);
}

#[test]
fn cpuid_leaf_0a_encodes_every_version() {
    let leaf = |model: PmuModel| {
        let r = CpuidModel::new(model, 0).cpuid1(0xA);
        (r.eax, r.ebx, r.ecx, r.edx)
    };
    assert_eq!(leaf(PmuModel::yonah()), (0x0728_0201, 0, 0, 0));
    assert_eq!(leaf(PmuModel::core2()), (0x0728_0202, 0, 0, 0x503));
    assert_eq!(leaf(PmuModel::nehalem()), (0x0730_0403, 0, 0, 0x603));
    assert_eq!(leaf(PmuModel::icelake()), (0x0830_0805, 0, 0xF, 0x8604));
    assert_eq!(leaf(PmuModel::v5_sparse_fixed()), (0x0830_0805, 0, 0b1011, 0x8602));
    assert_eq!(leaf(PmuModel::future_version(6)).0 & 0xFF, 6);
    // EBX is limited to the vector length; ECX is reserved (0) before v5.
    let odd = PmuModel {
        arch_events_unavailable: 0xFFFF_FF40,
        fixed_bitmap: 0xF0,
        ..PmuModel::skylake()
    };
    assert_eq!(leaf(odd), (0x0730_0404, 0x40, 0, 0x603));
    assert_eq!(CpuidModel::new(PmuModel::core2(), 0).cpuid1(1).ecx & 1 << 15, 0, "no PDCM");
}

#[test]
fn no_pmu_vm_reports_a_zero_leaf_0a_and_discovery_finds_no_pmu() {
    let hw = SimHardware::new(PmuModel::no_pmu_vm(), 2);
    let cpuid = hw.cpuid();
    let leaf_a = cpuid.cpuid1(0xA);
    assert_eq!((leaf_a.eax, leaf_a.ebx, leaf_a.ecx, leaf_a.edx), (0, 0, 0, 0));
    assert!(cpuid.cpuid1(0).eax >= 0xA, "the leaf exists, it is just empty");
    assert_ne!(cpuid.cpuid1(1).ecx & 1 << 31, 0, "hypervisor bit");
    assert_eq!(IntelPmu::discover(&cpuid, &hw), None);
    hw.assert_no_faults();
}

#[test]
fn discovery_describes_every_preset() {
    let core_offcore = |rsp0: u64, rsp1: u64| {
        Some(OffcoreLayout { events: [(0xB7, 0x01), (0xBB, 0x01)], valid: [rsp0, rsp1] })
    };
    let expected = |name: &str| -> IntelPmu {
        let base = IntelPmu {
            reported_version: 4,
            version: 4,
            gp_counters: 4,
            gp_width: 48,
            fixed_mask: 0b111,
            fixed_width: 48,
            arch_events: 0x7F,
            full_width_write: true,
            any_thread: true,
            freeze: FreezeMode::Streamlined,
            offcore: core_offcore(0x3F_FFFF_8FFF, 0x3F_FFFF_8FFF),
            umask2: false,
            extended_leaf: None,
            core_type: None,
        };
        let v5 = IntelPmu {
            reported_version: 5,
            version: 5,
            gp_counters: 8,
            fixed_mask: 0xF,
            arch_events: 0xFF,
            any_thread: false,
            offcore: core_offcore(0x3F_FFFF_BFFF, 0x3F_FFFF_BFFF),
            ..base
        };
        match name {
            "yonah" => IntelPmu {
                reported_version: 1,
                version: 1,
                gp_counters: 2,
                gp_width: 40,
                fixed_mask: 0,
                fixed_width: 0,
                full_width_write: false,
                any_thread: false,
                freeze: FreezeMode::None,
                offcore: None,
                ..base
            },
            "core2" => IntelPmu {
                reported_version: 2,
                version: 2,
                gp_counters: 2,
                gp_width: 40,
                fixed_width: 40,
                full_width_write: false,
                any_thread: false,
                freeze: FreezeMode::Legacy,
                offcore: None,
                ..base
            },
            "nehalem" => IntelPmu {
                reported_version: 3,
                version: 3,
                full_width_write: false,
                freeze: FreezeMode::Legacy,
                offcore: core_offcore(0xFFFF, 0),
                ..base
            },
            "skylake" => base,
            "icelake" => v5,
            "v5_sparse_fixed" => IntelPmu { fixed_mask: 0b1011, ..v5 },
            "future_v6" => IntelPmu { reported_version: 6, ..v5 },
            _ => unreachable!(),
        }
    };
    for (name, model) in presets() {
        let hw = SimHardware::new(model, 1);
        let found = IntelPmu::discover(&hw.cpuid(), &hw);
        assert_eq!(found, Some(expected(name)), "{name}");
        hw.assert_no_faults();
    }
}

#[test]
fn driver_register_masks_agree_with_the_simulated_hardware() {
    for (name, model) in presets() {
        let hw = SimHardware::new(model, 1);
        let pmu = IntelPmu::discover(&hw.cpuid(), &hw).unwrap();
        let sim = hw.pmu(0);
        // The driver programs no TSX bit (IN_TX, IN_TXCP), which a TSX part also accepts.
        let tsx = model.quirks.evtsel_high_valid();
        assert_eq!(pmu.evtsel_valid(), sim.evtsel_valid() & !tsx, "{name}: PERFEVTSEL");
        assert_eq!(pmu.counters().bits(), sim.counter_bits(), "{name}: GLOBAL_CTRL");
        if model.version >= 2 {
            assert_eq!(pmu.status_reset_valid(), sim.status_reset_valid(), "{name}: OVF_CTRL");
        }
        for i in 0..7u8 {
            if model.has_fixed(i) {
                let nibble = sim.fixed_ctrl_valid() >> (4 * i) & 0xF;
                assert_eq!(u64::from(pmu.fixed_field_valid().bits()), nibble, "{name}: fixed {i}");
            }
        }
        let fw = if model.full_width_write() { IA32_A_PMC0 } else { IA32_PMC0 };
        assert_eq!(pmu.gp_write_msr(1), fw + 1, "{name}: counter write MSR");
    }
}

#[test]
fn perfevtsel_faults_on_bits_above_31_and_unsupported_anythread() {
    for (name, model) in presets() {
        let mut pmu = SimPmu::new(model);
        let last = IA32_PERFEVTSEL0 + u32::from(model.gp_counters) - 1;
        wr(&mut pmu, last, 0xFFFF_FFFF & !EVTSEL_ANY);
        assert_eq!(rd(&pmu, last), 0xFFFF_FFFF & !EVTSEL_ANY);
        // IN_TX and IN_TXCP exist on TSX parts only.
        let first_reserved = if model.quirks.tsx { 34 } else { 32 };
        for bit in 32..first_reserved {
            wr(&mut pmu, last, 1 << bit);
        }
        for bit in first_reserved..64 {
            assert_eq!(wr_fault(&mut pmu, last, 1 << bit), FaultKind::ReservedBits(1 << bit));
        }
        let any = pmu.write_msr(IA32_PERFEVTSEL0, EVTSEL_ANY | 0x4300C0);
        let supported = matches!(name, "nehalem" | "skylake");
        assert_eq!(any.is_ok(), supported, "{name}: AnyThread");
        assert_eq!(model.anythread_supported(), supported, "{name}");
        // The next counter after the last does not exist.
        assert_eq!(wr_fault(&mut pmu, last + 1, 0), FaultKind::UnknownMsr, "{name}");
        assert_eq!(rd_fault(&pmu, last + 1), FaultKind::UnknownMsr, "{name}");
    }
}

#[test]
fn fixed_ctr_ctrl_faults_on_missing_counters_and_anythread() {
    let mut skylake = SimPmu::new(PmuModel::skylake());
    wr(&mut skylake, IA32_FIXED_CTR_CTRL, 0xFFF);
    assert_eq!(
        wr_fault(&mut skylake, IA32_FIXED_CTR_CTRL, 0x1000),
        FaultKind::ReservedBits(0x1000)
    );
    assert_eq!(
        wr_fault(&mut skylake, IA32_FIXED_CTR_CTRL, 1 << 32),
        FaultKind::ReservedBits(1 << 32)
    );

    let mut core2 = SimPmu::new(PmuModel::core2());
    wr(&mut core2, IA32_FIXED_CTR_CTRL, 0xBBB);
    assert_eq!(wr_fault(&mut core2, IA32_FIXED_CTR_CTRL, 0x040), FaultKind::ReservedBits(0x040));

    let mut icelake = SimPmu::new(PmuModel::icelake());
    wr(&mut icelake, IA32_FIXED_CTR_CTRL, 0xBBBB);
    assert_eq!(wr_fault(&mut icelake, IA32_FIXED_CTR_CTRL, 0x4), FaultKind::ReservedBits(0x4));

    // Fixed counters 0, 1 and 3: nibble 2 and IA32_FIXED_CTR2 do not exist.
    let mut sparse = SimPmu::new(PmuModel::v5_sparse_fixed());
    wr(&mut sparse, IA32_FIXED_CTR_CTRL, 0xB0BB);
    assert_eq!(wr_fault(&mut sparse, IA32_FIXED_CTR_CTRL, 0x300), FaultKind::ReservedBits(0x300));
    wr(&mut sparse, IA32_FIXED_CTR0 + 3, 5);
    assert_eq!(rd_fault(&sparse, IA32_FIXED_CTR0 + 2), FaultKind::UnknownMsr);
    assert_eq!(wr_fault(&mut sparse, IA32_FIXED_CTR0 + 2, 0), FaultKind::UnknownMsr);
    assert_eq!(sparse.read_pmc(1 << 30 | 2).unwrap_err().kind, FaultKind::NoSuchCounter);
    assert_eq!(sparse.read_pmc(1 << 30 | 3), Ok(5));
}

#[test]
fn global_ctrl_faults_on_missing_counters() {
    let mut skylake = SimPmu::new(PmuModel::skylake());
    wr(&mut skylake, IA32_PERF_GLOBAL_CTRL, 0x7_0000_000F);
    for bit in [4, 35, 48, 63] {
        let kind = wr_fault(&mut skylake, IA32_PERF_GLOBAL_CTRL, 1 << bit);
        assert_eq!(kind, FaultKind::ReservedBits(1 << bit));
    }
    let mut core2 = SimPmu::new(PmuModel::core2());
    wr(&mut core2, IA32_PERF_GLOBAL_CTRL, 0x7_0000_0003);
    assert_eq!(wr_fault(&mut core2, IA32_PERF_GLOBAL_CTRL, 0x4), FaultKind::ReservedBits(0x4));
    let mut sparse = SimPmu::new(PmuModel::v5_sparse_fixed());
    wr(&mut sparse, IA32_PERF_GLOBAL_CTRL, 0xB_0000_00FF);
    assert_eq!(
        wr_fault(&mut sparse, IA32_PERF_GLOBAL_CTRL, 1 << 34),
        FaultKind::ReservedBits(1 << 34)
    );
}

#[test]
fn status_reset_accepts_exactly_the_bits_of_the_version() {
    let core2 = SimPmu::new(PmuModel::core2()).status_reset_valid();
    assert_eq!(core2, 0x7_0000_0003 | STATUS_OVF_BUF | STATUS_COND_CHGD);
    let nehalem = SimPmu::new(PmuModel::nehalem()).status_reset_valid();
    assert_eq!(nehalem, 0x7_0000_000F | STATUS_OVF_BUF | STATUS_COND_CHGD | STATUS_OVF_UNCORE);
    let skylake = SimPmu::new(PmuModel::skylake()).status_reset_valid();
    let v4_bits = STATUS_TRACE_TOPA_PMI | STATUS_LBR_FRZ | STATUS_CTR_FRZ | STATUS_ASCI;
    assert_eq!(skylake, nehalem | v4_bits);

    let mut pmu = SimPmu::new(PmuModel::core2());
    wr(&mut pmu, IA32_PERF_GLOBAL_OVF_CTRL, core2);
    for bit in [2, 35, 55, 58, 59, 60, 61] {
        let kind = wr_fault(&mut pmu, IA32_PERF_GLOBAL_OVF_CTRL, 1 << bit);
        assert_eq!(kind, FaultKind::ReservedBits(1 << bit), "v2 bit {bit}");
    }
    let mut pmu = SimPmu::new(PmuModel::nehalem());
    wr(&mut pmu, IA32_PERF_GLOBAL_OVF_CTRL, STATUS_OVF_UNCORE);
    assert_eq!(
        wr_fault(&mut pmu, IA32_PERF_GLOBAL_OVF_CTRL, STATUS_CTR_FRZ),
        FaultKind::ReservedBits(STATUS_CTR_FRZ)
    );
    let mut pmu = SimPmu::new(PmuModel::skylake());
    wr(&mut pmu, IA32_PERF_GLOBAL_OVF_CTRL, skylake);
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_OVF_CTRL), 0, "reads as 0");
    assert_eq!(
        wr_fault(&mut pmu, IA32_PERF_GLOBAL_OVF_CTRL, 1 << 56),
        FaultKind::ReservedBits(1 << 56)
    );
}

#[test]
fn read_only_msrs_fault_on_write() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    assert_eq!(wr_fault(&mut pmu, IA32_PERF_GLOBAL_STATUS, 0), FaultKind::ReadOnly);
    assert_eq!(wr_fault(&mut pmu, IA32_PERF_CAPABILITIES, 0), FaultKind::ReadOnly);
    assert_eq!(wr_fault(&mut pmu, IA32_PERF_GLOBAL_INUSE, 0), FaultKind::ReadOnly);
    assert_eq!(rd(&pmu, IA32_PERF_CAPABILITIES), 0x23C5);
}

#[test]
fn v1_has_no_global_msrs_and_no_fixed_counters() {
    let mut pmu = SimPmu::new(PmuModel::yonah());
    for msr in [
        IA32_FIXED_CTR0,
        IA32_FIXED_CTR_CTRL,
        IA32_PERF_GLOBAL_STATUS,
        IA32_PERF_GLOBAL_CTRL,
        IA32_PERF_GLOBAL_OVF_CTRL,
        IA32_PERF_GLOBAL_STATUS_SET,
        IA32_PERF_GLOBAL_INUSE,
        IA32_PERF_CAPABILITIES,
        IA32_A_PMC0,
    ] {
        assert_eq!(rd_fault(&pmu, msr), FaultKind::UnknownMsr, "{msr:#x}");
        assert_eq!(wr_fault(&mut pmu, msr, 0), FaultKind::UnknownMsr, "{msr:#x}");
    }
    assert_eq!(pmu.read_pmc(1 << 30).unwrap_err().kind, FaultKind::NoSuchCounter);
    wr(&mut pmu, IA32_PERFEVTSEL0 + 1, 0x4300C0);
    wr(&mut pmu, IA32_PMC0 + 1, 7);
    assert_eq!(pmu.read_pmc(1), Ok(7));
    assert_eq!(
        wr_fault(&mut pmu, IA32_DEBUGCTL, DEBUGCTL_FREEZE_PERFMON_ON_PMI),
        FaultKind::ReservedBits(1 << 12)
    );
}

#[test]
fn v4_only_msrs_fault_before_v4() {
    for model in [PmuModel::core2(), PmuModel::nehalem()] {
        let mut pmu = SimPmu::new(model);
        for msr in [IA32_PERF_GLOBAL_STATUS_SET, IA32_PERF_GLOBAL_INUSE] {
            assert_eq!(rd_fault(&pmu, msr), FaultKind::UnknownMsr);
            assert_eq!(wr_fault(&mut pmu, msr, 0), FaultKind::UnknownMsr);
        }
    }
}

#[test]
fn perf_capabilities_exists_only_with_pdcm() {
    assert_eq!(
        rd_fault(&SimPmu::new(PmuModel::core2()), IA32_PERF_CAPABILITIES),
        FaultKind::UnknownMsr
    );
    assert_eq!(rd(&SimPmu::new(PmuModel::nehalem()), IA32_PERF_CAPABILITIES), 0x1C3);
}

#[test]
fn full_width_alias_needs_fw_write_and_a_value_that_fits() {
    let mut nehalem = SimPmu::new(PmuModel::nehalem());
    assert_eq!(wr_fault(&mut nehalem, IA32_A_PMC0, 1), FaultKind::UnknownMsr);
    assert_eq!(rd_fault(&nehalem, IA32_A_PMC0), FaultKind::UnknownMsr);

    let mut skylake = SimPmu::new(PmuModel::skylake());
    wr(&mut skylake, IA32_A_PMC0 + 3, W48 - 1);
    assert_eq!(rd(&skylake, IA32_A_PMC0 + 3), W48 - 1);
    assert_eq!(wr_fault(&mut skylake, IA32_A_PMC0 + 3, W48), FaultKind::ReservedBits(W48));
    assert_eq!(wr_fault(&mut skylake, IA32_A_PMC0 + 4, 0), FaultKind::UnknownMsr);
    assert_eq!(wr_fault(&mut skylake, IA32_FIXED_CTR0, W48 | 5), FaultKind::ReservedBits(W48));
}

#[test]
fn rdpmc_faults_on_counters_that_do_not_exist() {
    let skylake = SimPmu::new(PmuModel::skylake());
    for index in [0, 3, 1 << 30, 1 << 30 | 2] {
        assert_eq!(skylake.read_pmc(index), Ok(0), "{index:#x}");
    }
    for index in [4, 8, 1 << 30 | 3, 1 << 31, 1 << 31 | 1, 1 << 29] {
        let fault = skylake.read_pmc(index).unwrap_err();
        assert_eq!((fault.access, fault.kind), (Access::Rdpmc { index }, FaultKind::NoSuchCounter));
    }
    let none = SimPmu::new(PmuModel::no_pmu_vm());
    assert!(none.read_pmc(0).is_err());
}

#[test]
fn unknown_msrs_fault() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    for msr in [0, 0x1A8, 0x10F, 0x30C, 0x393, 0x3F1, 0x832, 0xC000_0080] {
        assert_eq!(rd_fault(&pmu, msr), FaultKind::UnknownMsr, "{msr:#x}");
        assert_eq!(wr_fault(&mut pmu, msr, 0), FaultKind::UnknownMsr, "{msr:#x}");
    }
}

/// The strictest DEBUGCTL ([`Quirks::NONE`]): FREEZE_PERFMON_ON_PMI alone.
#[test]
fn umask2_is_discovered_from_cpuid_leaf_23h_and_counted() {
    let model = PmuModel::arrowlake_p();
    let hw = SimHardware::new(model, 1);
    let cpuid = hw.cpuid();
    assert_eq!(cpuid.cpuid2(0x23, 0).ebx & 1, 1, "leaf 23H sub-leaf 0 EBX[0]");
    let found = IntelPmu::discover(&cpuid, &hw).unwrap();
    assert!(found.umask2 && found.fixed_mask == 0xF && found.reported_version == 6);
    assert_eq!(found.evtsel_valid() & 0xFF << 40, 0xFF << 40);
    let skylake = SimHardware::new(PmuModel::skylake(), 1);
    assert!(!IntelPmu::discover(&skylake.cpuid(), &skylake).unwrap().umask2);
    // Bits 47:40 are the second unit mask; 63:48 and 39:32 stay reserved.
    let mut pmu = SimPmu::new(model);
    for bit in (32..40).chain(48..64) {
        assert_eq!(
            wr_fault(&mut pmu, IA32_PERFEVTSEL0, 1 << bit),
            FaultKind::ReservedBits(1 << bit)
        );
    }
    // ITLB_MISSES.STLB_HIT on Arrow Lake's P-core: 0x11, umask 0x20, UMASK2 0x01.
    let work = Work::default().with_raw_umask2(0x11, 0x20, 0x01, 3).with_raw(0x11, 0x20, 7);
    wr(&mut pmu, IA32_PERFEVTSEL0, raw_evtsel(0x11, 0x20, EVTSEL_USR) | 0x01 << 40);
    wr(&mut pmu, IA32_PERFEVTSEL0 + 1, raw_evtsel(0x11, 0x20, EVTSEL_USR));
    pmu.retire_repeated(Ring::User, &work, 10);
    assert_eq!(pmu.read_pmc(0), Ok(30));
    assert_eq!(pmu.read_pmc(1), Ok(70), "UMASK2 0 is another event");
    assert_eq!(pmu.ground_truth(Ring::User).raw_umask2(0x11, 0x20, 0x01), 30);
}

#[test]
fn offcore_response_msrs_exist_where_the_model_defines_them() {
    // Core 2: none; Nehalem: MSR_OFFCORE_RSP_0 with bits 15:0; Skylake: both, 0x3F_FFFF_8FFF.
    let mut core2 = SimPmu::new(PmuModel::core2());
    assert_eq!(rd_fault(&core2, 0x1A6), FaultKind::UnknownMsr);
    assert_eq!(wr_fault(&mut core2, 0x1A7, 0), FaultKind::UnknownMsr);
    let mut nehalem = SimPmu::new(PmuModel::nehalem());
    nehalem.write_msr(0x1A6, 0xFFFF).unwrap();
    assert_eq!(rd(&nehalem, 0x1A6), 0xFFFF);
    assert_eq!(wr_fault(&mut nehalem, 0x1A6, 1 << 16), FaultKind::ReservedBits(1 << 16));
    assert_eq!(rd_fault(&nehalem, 0x1A7), FaultKind::UnknownMsr);
    let mut skylake = SimPmu::new(PmuModel::skylake());
    skylake.write_msr(0x1A7, 0x3F_FFFF_8FFF).unwrap();
    assert_eq!(rd(&skylake, 0x1A7), 0x3F_FFFF_8FFF);
    for bit in [12, 38, 63] {
        assert_eq!(wr_fault(&mut skylake, 0x1A6, 1 << bit), FaultKind::ReservedBits(1 << bit));
    }
    assert_eq!(rd(&skylake, 0x1A6), 0, "a faulting write changes nothing");
    assert_eq!(hwpmc_sim::pmu::msr_name(0x1A7), "MSR_OFFCORE_RSP_1 (0x1a7)");
}

#[test]
fn offcore_response_events_count_the_requests_their_msr_selects() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    let work = Work::default().with_offcore(0x1_0001, 3).with_offcore(0x1_0002, 5);
    pmu.write_msr(IA32_PERFEVTSEL0, raw_evtsel(0xB7, 0x01, EVTSEL_USR)).unwrap();
    pmu.write_msr(IA32_PERFEVTSEL0 + 1, raw_evtsel(0xBB, 0x01, EVTSEL_USR)).unwrap();
    pmu.write_msr(0x1A6, 0x1_0002).unwrap();
    pmu.retire_repeated(Ring::User, &work, 10);
    pmu.write_msr(0x1A6, 0x1_0001).unwrap();
    pmu.write_msr(0x1A7, 0x1_0002).unwrap();
    pmu.retire_repeated(Ring::User, &work, 4);
    assert_eq!(pmu.read_pmc(0), Ok(5 * 10 + 3 * 4));
    assert_eq!(pmu.read_pmc(1), Ok(5 * 4), "RSP_1 held 0 for the first 10");
    assert_eq!(pmu.ground_truth(Ring::User).offcore(0x1_0001), 3 * 14);
}

#[test]
fn debugctl_implements_only_freeze_perfmon_on_pmi_from_v2() {
    for (name, model) in presets() {
        let model = PmuModel { quirks: Quirks::NONE, ..model };
        let mut pmu = SimPmu::new(model);
        assert_eq!(rd(&pmu, IA32_DEBUGCTL), 0);
        let result = pmu.write_msr(IA32_DEBUGCTL, DEBUGCTL_FREEZE_PERFMON_ON_PMI);
        assert_eq!(result.is_ok(), model.version >= 2, "{name}");
        for bit in [0, 1, 11, 14] {
            assert_eq!(
                wr_fault(&mut pmu, IA32_DEBUGCTL, 1 << bit),
                FaultKind::ReservedBits(1 << bit)
            );
        }
    }
    // A hypervisor that does not implement the freeze bit.
    let vm = PmuModel { freeze_on_pmi: false, hypervisor: true, ..PmuModel::skylake() };
    let mut pmu = SimPmu::new(vm);
    assert_eq!(wr_fault(&mut pmu, IA32_DEBUGCTL, 1 << 12), FaultKind::ReservedBits(1 << 12));
}

/// DEBUGCTL with its real bits (SDM Vol. 3B Figure 18-3): LBR, BTF, the branch-trace bits,
/// FREEZE_LBRS_ON_PMI and FREEZE_WHILE_SMM everywhere; FREEZE_PERFMON_ON_PMI from v2;
/// RTM_DEBUG on TSX parts; a KVM guest refuses the freeze bit with #GP.
#[test]
fn debugctl_has_its_real_bits() {
    use hwpmc_sim::quirks::debugctl;
    for (name, model) in presets() {
        let mut pmu = SimPmu::new(model);
        wr(&mut pmu, IA32_DEBUGCTL, debugctl::BARE_METAL);
        assert_eq!(rd(&pmu, IA32_DEBUGCTL), debugctl::BARE_METAL, "{name}");
        let freeze = pmu.write_msr(IA32_DEBUGCTL, debugctl::LBR | debugctl::FREEZE_PERFMON_ON_PMI);
        assert_eq!(freeze.is_ok(), model.version >= 2, "{name}");
        let rtm = pmu.write_msr(IA32_DEBUGCTL, debugctl::RTM_DEBUG);
        assert_eq!(rtm.is_ok(), model.quirks.tsx, "{name}");
        for bit in [2, 3, 4, 5, 13, 16, 63] {
            assert_eq!(
                wr_fault(&mut pmu, IA32_DEBUGCTL, 1 << bit),
                FaultKind::ReservedBits(1 << bit),
                "{name}: bit {bit}"
            );
        }
    }
    let mut kvm = SimPmu::new(PmuModel::kvm_guest());
    wr(&mut kvm, IA32_DEBUGCTL, debugctl::LBR | debugctl::BTF);
    let freeze = debugctl::FREEZE_PERFMON_ON_PMI;
    assert_eq!(wr_fault(&mut kvm, IA32_DEBUGCTL, freeze), FaultKind::ReservedBits(freeze));
}

/// PERFEVTSEL's TSX bits: accepted where the model has TSX; a counter with IN_TX counts nothing
/// (no transaction runs), one with IN_TXCP alone counts as usual.
#[test]
fn tsx_event_select_bits_exist_only_on_tsx_parts() {
    use hwpmc_sim::quirks::{EVTSEL_IN_TX, EVTSEL_IN_TXCP};
    assert!(PmuModel::skylake().quirks.tsx && !PmuModel::core2().quirks.tsx);
    let mut core2 = SimPmu::new(PmuModel::core2());
    assert_eq!(
        wr_fault(&mut core2, IA32_PERFEVTSEL0, EVTSEL_IN_TX),
        FaultKind::ReservedBits(EVTSEL_IN_TX)
    );
    let mut pmu = SimPmu::new(PmuModel::skylake());
    let instructions = evtsel(ArchEvent::Instructions, EVTSEL_USR);
    wr(&mut pmu, IA32_PERFEVTSEL0, instructions | EVTSEL_IN_TX);
    wr(&mut pmu, IA32_PERFEVTSEL0 + 1, instructions | EVTSEL_IN_TXCP);
    wr(&mut pmu, IA32_PERF_GLOBAL_CTRL, 0b11);
    pmu.retire_repeated(Ring::User, &Work { instructions: 100, ..Work::default() }, 3);
    assert_eq!(pmu.read_pmc(0).unwrap(), 0, "IN_TX: outside any transaction");
    assert_eq!(pmu.read_pmc(1).unwrap(), 300);
}

/// A KVM guest truncates counter writes wider than the counter instead of raising #GP.
#[test]
fn a_kvm_guest_truncates_wide_counter_writes() {
    let mut kvm = SimPmu::new(PmuModel::kvm_guest());
    wr(&mut kvm, IA32_FIXED_CTR0, u64::MAX);
    assert_eq!(rd(&kvm, IA32_FIXED_CTR0), (1 << 48) - 1);
    wr(&mut kvm, IA32_A_PMC0, 1 << 48 | 5);
    assert_eq!(rd(&kvm, IA32_PMC0), 5);
    let mut skylake = SimPmu::new(PmuModel::skylake());
    assert_eq!(wr_fault(&mut skylake, IA32_FIXED_CTR0, 1 << 48), FaultKind::ReservedBits(1 << 48));
}

#[test]
fn lvt_entry_faults_on_reserved_bits_and_modes() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    assert_eq!(rd(&pmu, IA32_X2APIC_LVT_PMI), LVT_MASK, "masked at reset");
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, 0x200 | LVT_MASK);
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, 0xF0);
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_MASK | 0x05);
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI | LVT_DELIVERY_STATUS);
    assert_eq!(rd(&pmu, IA32_X2APIC_LVT_PMI), LVT_NMI, "delivery status is read-only");
    for bit in [11, 13, 15, 17, 32] {
        assert_eq!(
            wr_fault(&mut pmu, IA32_X2APIC_LVT_PMI, 1 << bit),
            FaultKind::ReservedBits(1 << bit)
        );
    }
    for mode in [1, 3, 5, 6, 7] {
        let kind = wr_fault(&mut pmu, IA32_X2APIC_LVT_PMI, mode << 8 | 0xF0);
        assert_eq!(kind, FaultKind::InvalidValue, "mode {mode:03b}");
    }
    assert_eq!(wr_fault(&mut pmu, IA32_X2APIC_LVT_PMI, 0x0F), FaultKind::InvalidValue);
}

#[test]
fn fault_messages_name_the_msr_and_the_bits() {
    let mut core2 = SimPmu::new(PmuModel::core2());
    let fault = core2.write_msr(IA32_PERFEVTSEL0, 0x4300C0 | EVTSEL_ANY).unwrap_err();
    assert_eq!(fault.access, Access::Wrmsr { msr: 0x186, value: 0x6300C0 });
    let text = fault.to_string();
    for needle in ["WRMSR", "IA32_PERFEVTSEL0 (0x186)", "0x200000", "AnyThread", "v2"] {
        assert!(text.contains(needle), "{text:?} lacks {needle:?}");
    }
    let mut sparse = SimPmu::new(PmuModel::v5_sparse_fixed());
    let text = sparse.write_msr(IA32_FIXED_CTR_CTRL, 0x100).unwrap_err().to_string();
    assert!(text.contains("IA32_FIXED_CTR_CTRL") && text.contains("fixed counter 2"), "{text}");
    let text = sparse.write_msr(IA32_PERF_GLOBAL_CTRL, 1 << 9).unwrap_err().to_string();
    assert!(text.contains("GP counter 9 does not exist"), "{text}");
    let text =
        SimPmu::new(PmuModel::yonah()).read_msr(IA32_PERF_GLOBAL_STATUS).unwrap_err().to_string();
    assert!(
        text.contains("RDMSR IA32_PERF_GLOBAL_STATUS (0x38e)") && text.contains("v2"),
        "{text}"
    );
    let text = core2.read_pmc(5).unwrap_err().to_string();
    assert!(text.contains("RDPMC 0x5") && text.contains("no such counter"), "{text}");
}

#[test]
fn no_pmu_vm_has_only_tsc_debugctl_and_lvt() {
    let mut pmu = SimPmu::new(PmuModel::no_pmu_vm());
    for msr in [
        IA32_PMC0,
        IA32_PERFEVTSEL0,
        IA32_FIXED_CTR0,
        IA32_PERF_GLOBAL_CTRL,
        IA32_PERF_CAPABILITIES,
    ] {
        assert_eq!(rd_fault(&pmu, msr), FaultKind::UnknownMsr, "{msr:#x}");
    }
    wr(&mut pmu, IA32_DEBUGCTL, 0);
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    pmu.retire(Ring::User, &user_block());
    assert_eq!(rd(&pmu, IA32_TIME_STAMP_COUNTER), 40);
    assert_eq!(pmu.ground_truth(Ring::User).arch(ArchEvent::Instructions), 100);
}

// ---------------------------------------------------------------------------------------------
// Counter writes

#[test]
fn legacy_writes_sign_extend_bit_31_into_the_counter_width() {
    let mut skylake = SimPmu::new(PmuModel::skylake());
    let cases = [
        (0x0000_0000_7FFF_FFFF, 0x7FFF_FFFF),
        (0x0000_0000_8000_0000, 0xFFFF_8000_0000),
        (0xFFFF_FFFF_8000_0000, 0xFFFF_8000_0000),
        (0xFFFF_0000_0000_0010, 0x10),
        (0x0000_FFFF_FFFF_FFF6, 0xFFFF_FFFF_FFF6),
        (0x1234_5678_0000_0001, 1),
    ];
    for (written, held) in cases {
        wr(&mut skylake, IA32_PMC0, written);
        assert_eq!(rd(&skylake, IA32_PMC0), held, "{written:#x}");
        assert_eq!(skylake.read_pmc(0), Ok(held));
    }
    let mut core2 = SimPmu::new(PmuModel::core2());
    wr(&mut core2, IA32_PMC0 + 1, 0xFFFF_FFFF_8000_0000);
    assert_eq!(rd(&core2, IA32_PMC0 + 1), 0xFF_8000_0000);
    wr(&mut core2, IA32_PMC0 + 1, (W40 - 100) & 0xFFFF_FFFF);
    assert_eq!(rd(&core2, IA32_PMC0 + 1), W40 - 100);
}

#[test]
fn full_width_writes_take_the_whole_width() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    wr(&mut pmu, IA32_A_PMC0, 0x0000_8000_0000_0000);
    assert_eq!(rd(&pmu, IA32_PMC0), 0x8000_0000_0000);
    wr(&mut pmu, IA32_A_PMC0, 0x0000_0001_2345_6789);
    assert_eq!(pmu.read_pmc(0), Ok(0x1_2345_6789));
    assert_eq!(
        wr_fault(&mut pmu, IA32_A_PMC0, 0xFFFF_FFFF_8000_0000),
        FaultKind::ReservedBits(0xFFFF_0000_0000_0000)
    );
    // The legacy address still sign-extends when FW_WRITE exists.
    wr(&mut pmu, IA32_PMC0, 0x0000_0001_8000_0000);
    assert_eq!(rd(&pmu, IA32_A_PMC0), 0xFFFF_8000_0000);
}

#[test]
fn fixed_counters_are_written_at_full_width() {
    let mut core2 = SimPmu::new(PmuModel::core2());
    wr(&mut core2, IA32_FIXED_CTR0 + 2, W40 - 1);
    assert_eq!(core2.read_pmc(1 << 30 | 2), Ok(W40 - 1));
    assert_eq!(wr_fault(&mut core2, IA32_FIXED_CTR0 + 2, W40), FaultKind::ReservedBits(W40));
    assert_eq!(wr_fault(&mut core2, IA32_FIXED_CTR0 + 3, 0), FaultKind::UnknownMsr);
}

#[test]
fn reset_state_enables_the_gp_counters_in_global_ctrl() {
    assert_eq!(rd(&SimPmu::new(PmuModel::skylake()), IA32_PERF_GLOBAL_CTRL), 0xF);
    assert_eq!(rd(&SimPmu::new(PmuModel::core2()), IA32_PERF_GLOBAL_CTRL), 0x3);
    assert_eq!(rd(&SimPmu::new(PmuModel::icelake()), IA32_PERF_GLOBAL_CTRL), 0xFF);
    let pmu = SimPmu::new(PmuModel::skylake());
    for msr in
        [IA32_PMC0, IA32_PERFEVTSEL0, IA32_FIXED_CTR_CTRL, IA32_PERF_GLOBAL_STATUS, IA32_DEBUGCTL]
    {
        assert_eq!(rd(&pmu, msr), 0, "{msr:#x}");
    }
}

// ---------------------------------------------------------------------------------------------
// Counting

#[test]
fn gp_counters_count_by_ring_event_and_umask() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    wr(&mut pmu, IA32_PERFEVTSEL0, evtsel(ArchEvent::Instructions, EVTSEL_USR));
    wr(&mut pmu, IA32_PERFEVTSEL0 + 1, evtsel(ArchEvent::Instructions, EVTSEL_OS));
    wr(&mut pmu, IA32_PERFEVTSEL0 + 2, evtsel(ArchEvent::LlcMisses, EVTSEL_USR | EVTSEL_OS));
    wr(&mut pmu, IA32_PERFEVTSEL0 + 3, evtsel(ArchEvent::RefCycles, EVTSEL_USR));
    pmu.retire_repeated(Ring::User, &user_block(), 5);
    pmu.retire_repeated(Ring::Kernel, &kernel_block(), 2);
    let counts: Vec<u64> = (0..4).map(|i| pmu.read_pmc(i).unwrap()).collect();
    assert_eq!(counts, [500, 60, 17, 200]);

    // Every other architectural event, and near misses of the encodings.
    let cases = [
        (evtsel(ArchEvent::CoreCycles, EVTSEL_USR), 250),
        (evtsel(ArchEvent::LlcReferences, EVTSEL_USR), 35),
        (evtsel(ArchEvent::Branches, EVTSEL_USR), 100),
        (evtsel(ArchEvent::BranchMispredicts, EVTSEL_USR), 10),
        (raw_evtsel(0x2E, 0x42, EVTSEL_USR), 0),
        (raw_evtsel(0x3C, 0x02, EVTSEL_USR), 0),
        (raw_evtsel(0, 0, EVTSEL_USR), 0),
        (evtsel(ArchEvent::Instructions, 0), 0),
        (evtsel(ArchEvent::Instructions, EVTSEL_USR) & !EVTSEL_EN, 0),
        (evtsel(ArchEvent::Instructions, EVTSEL_USR | EVTSEL_ANY | EVTSEL_PC), 500),
    ];
    for (sel, expected) in cases {
        let mut pmu = SimPmu::new(PmuModel::skylake());
        wr(&mut pmu, IA32_PERFEVTSEL0, sel);
        pmu.retire_repeated(Ring::User, &user_block(), 5);
        assert_eq!(pmu.read_pmc(0), Ok(expected), "{sel:#x}");
    }
}

#[test]
fn global_ctrl_gates_gp_and_fixed_counters() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    wr(&mut pmu, IA32_PERFEVTSEL0, evtsel(ArchEvent::Instructions, EVTSEL_USR));
    wr(&mut pmu, IA32_PERFEVTSEL0 + 1, evtsel(ArchEvent::Instructions, EVTSEL_USR));
    wr(&mut pmu, IA32_FIXED_CTR_CTRL, 0x222);
    // Reset GLOBAL_CTRL: GP counters on, fixed counters off.
    pmu.retire(Ring::User, &user_block());
    assert_eq!((pmu.read_pmc(0), pmu.read_pmc(1 << 30)), (Ok(100), Ok(0)));
    wr(&mut pmu, IA32_PERF_GLOBAL_CTRL, 1 << 1 | 1 << 32 | 1 << 34);
    pmu.retire(Ring::User, &user_block());
    let read = |pmu: &SimPmu, index| pmu.read_pmc(index).unwrap();
    assert_eq!([read(&pmu, 0), read(&pmu, 1)], [100, 200]);
    assert_eq!(
        [read(&pmu, 1 << 30), read(&pmu, 1 << 30 | 1), read(&pmu, 1 << 30 | 2)],
        [100, 0, 40]
    );
}

#[test]
fn fixed_counters_count_instructions_cycles_ref_cycles_and_slots() {
    let mut pmu = SimPmu::new(PmuModel::icelake());
    wr(&mut pmu, IA32_FIXED_CTR_CTRL, 0x2 | 0x1 << 4 | 0x3 << 8 | 0x2 << 12);
    wr(&mut pmu, IA32_PERF_GLOBAL_CTRL, 0xF_0000_0001);
    pmu.retire_repeated(Ring::User, &user_block(), 3);
    pmu.retire(Ring::Kernel, &kernel_block());
    let fixed: Vec<u64> = (0..4).map(|i| pmu.read_pmc(1 << 30 | i).unwrap()).collect();
    assert_eq!(fixed, [300, 10, 128, 5 * 50 * 3]);
    let msrs: Vec<u64> = (0..4).map(|i| rd(&pmu, IA32_FIXED_CTR0 + i)).collect();
    assert_eq!(msrs, fixed);
    // TOPDOWN.SLOTS is also architectural event 7 on a GP counter of a v5 PMU.
    wr(&mut pmu, IA32_PERFEVTSEL0, evtsel(ArchEvent::TopdownSlots, EVTSEL_OS));
    pmu.retire(Ring::Kernel, &kernel_block());
    assert_eq!(pmu.read_pmc(0), Ok(50));
}

#[test]
fn unavailable_architectural_events_count_nothing() {
    let model = PmuModel { arch_events_unavailable: 1 << 6, ..PmuModel::skylake() };
    let mut pmu = SimPmu::new(model);
    wr(&mut pmu, IA32_PERFEVTSEL0, evtsel(ArchEvent::BranchMispredicts, EVTSEL_USR));
    wr(&mut pmu, IA32_PERFEVTSEL0 + 1, evtsel(ArchEvent::TopdownSlots, EVTSEL_USR));
    wr(&mut pmu, IA32_PERFEVTSEL0 + 2, evtsel(ArchEvent::Branches, EVTSEL_USR));
    pmu.retire(Ring::User, &user_block());
    let counts: Vec<u64> = (0..3).map(|i| pmu.read_pmc(i).unwrap()).collect();
    assert_eq!(counts, [0, 0, 20], "mispredicts marked unavailable, slots beyond the vector");
    assert_eq!(pmu.ground_truth(Ring::User).arch(ArchEvent::BranchMispredicts), 2);
}

#[test]
fn raw_events_count_on_gp_counters() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    wr(&mut pmu, IA32_PERFEVTSEL0, raw_evtsel(0xD1, 0x01, EVTSEL_USR));
    wr(&mut pmu, IA32_PERFEVTSEL0 + 1, raw_evtsel(0xD1, 0x02, EVTSEL_USR));
    wr(&mut pmu, IA32_PERFEVTSEL0 + 2, raw_evtsel(0xC0, 0x00, EVTSEL_USR));
    let block = user_block().with_raw(0xD1, 0x01, 9).with_raw(0xD1, 0x01, 1).with_raw(0xC0, 0, 5);
    pmu.retire_repeated(Ring::User, &block, 4);
    let counts: Vec<u64> = (0..3).map(|i| pmu.read_pmc(i).unwrap()).collect();
    assert_eq!(counts, [40, 0, 420]);
    assert_eq!(pmu.ground_truth(Ring::User).raw(0xD1, 0x01), 40);
    assert_eq!(pmu.ground_truth(Ring::User).raw(0xD1, 0x02), 0);
}

#[test]
fn cmask_inv_edge_count_cycles_and_edges() {
    let cmask = |m: u64| m << 24;
    let llc = |flags| evtsel(ArchEvent::LlcReferences, EVTSEL_USR | flags);
    // 6 LLC references over 4 cycles: 1, 2, 1, 2 per cycle.
    let block = Work { core_cycles: 4, llc_references: 6, ..Work::default() };
    let cases = [
        (llc(cmask(2)), 20),
        (llc(cmask(2) | EVTSEL_INV), 20),
        (llc(cmask(2) | EVTSEL_EDGE), 20),
        (llc(cmask(1) | EVTSEL_EDGE), 1),
        (llc(cmask(1) | EVTSEL_INV), 0),
        (llc(cmask(3)), 0),
        (llc(cmask(3) | EVTSEL_INV), 40),
        (llc(EVTSEL_INV), 60),
    ];
    for (sel, expected) in cases {
        let mut pmu = SimPmu::new(PmuModel::skylake());
        wr(&mut pmu, IA32_PERFEVTSEL0, sel);
        pmu.retire_repeated(Ring::User, &block, 10);
        assert_eq!(pmu.read_pmc(0), Ok(expected), "{sel:#x}");
    }
    // 5 misses over 7 cycles: 0110111, two runs per block, each block starting deasserted.
    let block = Work { core_cycles: 7, llc_misses: 5, ..Work::default() };
    let misses = |flags| evtsel(ArchEvent::LlcMisses, EVTSEL_USR | flags);
    for (sel, expected) in [
        (misses(cmask(1)), 5_000),
        (misses(cmask(1) | EVTSEL_INV), 2_000),
        (misses(cmask(1) | EVTSEL_EDGE), 2_000),
        (misses(cmask(1) | EVTSEL_EDGE | EVTSEL_INV), 2_000),
    ] {
        let mut pmu = SimPmu::new(PmuModel::skylake());
        wr(&mut pmu, IA32_PERFEVTSEL0, sel);
        pmu.retire_repeated(Ring::User, &block, 1_000);
        assert_eq!(pmu.read_pmc(0), Ok(expected), "{sel:#x}");
    }
}

#[test]
fn edge_state_carries_across_blocks_and_resets_when_not_counting() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    // Core cycles with CMASK 1 and EDGE: the condition holds in every counted cycle.
    wr(
        &mut pmu,
        IA32_PERFEVTSEL0,
        evtsel(ArchEvent::CoreCycles, EVTSEL_USR | EVTSEL_EDGE | 1 << 24),
    );
    let user = Work { core_cycles: 10, ..Work::default() };
    pmu.retire(Ring::User, &user);
    pmu.retire(Ring::User, &user);
    assert_eq!(pmu.read_pmc(0), Ok(1), "the condition stays asserted across blocks");
    pmu.retire(Ring::Kernel, &Work { instructions: 3, ..Work::default() });
    pmu.retire(Ring::User, &user);
    assert_eq!(pmu.read_pmc(0), Ok(1), "a block without cycles keeps the state");
    pmu.retire(Ring::Kernel, &kernel_block());
    pmu.retire(Ring::User, &user);
    assert_eq!(pmu.read_pmc(0), Ok(2), "uncounted kernel cycles deassert the condition");
    let sel = rd(&pmu, IA32_PERFEVTSEL0);
    wr(&mut pmu, IA32_PERFEVTSEL0, sel);
    pmu.retire(Ring::User, &user);
    assert_eq!(pmu.read_pmc(0), Ok(3), "reprogramming resets the edge detector");
}

// ---------------------------------------------------------------------------------------------
// Overflow, PMIs, freeze

/// Skylake with GP counter `index` counting user instructions from `2^48 − before`, with `flags`.
fn armed(model: PmuModel, index: u32, before: u64, flags: u64) -> SimPmu {
    let mut pmu = SimPmu::new(model);
    wr(&mut pmu, IA32_PERFEVTSEL0 + index, evtsel(ArchEvent::Instructions, EVTSEL_USR | flags));
    let start = (1u64 << model.gp_width) - before;
    wr(&mut pmu, IA32_PMC0 + index, start & 0xFFFF_FFFF);
    pmu
}

#[test]
fn overflow_sets_status_and_raises_a_pmi_only_with_int() {
    let mut pmu = armed(PmuModel::skylake(), 0, 10, 0);
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    pmu.retire(Ring::User, &Work { instructions: 9, ..Work::default() });
    assert_eq!((rd(&pmu, IA32_PERF_GLOBAL_STATUS), pmu.read_pmc(0)), (0, Ok(W48 - 1)));
    pmu.retire(Ring::User, &Work { instructions: 16, ..Work::default() });
    assert_eq!(pmu.read_pmc(0), Ok(15));
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS), 1);
    assert_eq!(pmu.pmi_stats().raised, 0);
    assert!(!pmu.pmi_pending());

    let mut pmu = armed(PmuModel::skylake(), 2, 10, EVTSEL_INT);
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    pmu.retire(Ring::User, &Work { instructions: 25, ..Work::default() });
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS), 1 << 2);
    assert_eq!(pmu.read_pmc(2), Ok(15), "the counter keeps the remainder of the block");
    assert!(pmu.pmi_pending());
    assert_eq!(pmu.take_pmi(), Some(Pmi { mode: DeliveryMode::Nmi, vector: 0 }));
    assert_eq!(pmu.take_pmi(), None);
    // Clearing the status bit through OVF_CTRL.
    wr(&mut pmu, IA32_PERF_GLOBAL_OVF_CTRL, 1 << 2);
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS), 0);
}

#[test]
fn fixed_counter_overflow_raises_a_pmi_only_with_its_pmi_bit() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    wr(&mut pmu, IA32_FIXED_CTR_CTRL, 0x2 | 0xA << 4);
    wr(&mut pmu, IA32_PERF_GLOBAL_CTRL, 0x3 << 32);
    wr(&mut pmu, IA32_FIXED_CTR0, W48 - 100);
    wr(&mut pmu, IA32_FIXED_CTR0 + 1, W48 - 100);
    pmu.retire(Ring::User, &Work { instructions: 150, core_cycles: 60, ..Work::default() });
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS), 1 << 32, "only fixed 0 wrapped");
    assert!(!pmu.pmi_pending(), "fixed 0 has no PMI bit");
    pmu.retire(Ring::User, &Work { instructions: 0, core_cycles: 60, ..Work::default() });
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS), 0x3 << 32);
    assert_eq!(pmu.read_pmc(1 << 30 | 1), Ok(20));
    assert!(pmu.pmi_pending());
}

#[test]
fn lvt_masks_itself_on_delivery() {
    let mut pmu = armed(PmuModel::skylake(), 0, 10, EVTSEL_INT);
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    pmu.retire(Ring::User, &Work { instructions: 10, ..Work::default() });
    assert_eq!(rd(&pmu, IA32_X2APIC_LVT_PMI), LVT_NMI | LVT_MASK);
    assert!(pmu.take_pmi().is_some());
    // A second overflow while the entry is masked is held, not delivered.
    wr(&mut pmu, IA32_PMC0, (W48 - 5) & 0xFFFF_FFFF);
    pmu.retire(Ring::User, &Work { instructions: 5, ..Work::default() });
    assert!(!pmu.pmi_pending() && pmu.pmi_held());
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    assert_eq!(pmu.take_pmi(), Some(Pmi { mode: DeliveryMode::Nmi, vector: 0 }));
    assert_eq!(rd(&pmu, IA32_X2APIC_LVT_PMI), LVT_NMI | LVT_MASK);
    assert_eq!(pmu.pmi_stats().raised, 2);
    assert_eq!(pmu.pmi_stats().delivered, 2);
}

#[test]
fn pmi_raised_while_masked_is_held_until_unmasked() {
    let mut pmu = armed(PmuModel::skylake(), 1, 1, EVTSEL_INT);
    pmu.retire(Ring::User, &Work { instructions: 1, ..Work::default() });
    assert!(pmu.pmi_held() && !pmu.pmi_pending());
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_MASK | 0x400);
    assert!(pmu.pmi_held() && !pmu.pmi_pending(), "still masked");
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, 0x40);
    assert_eq!(pmu.take_pmi(), Some(Pmi { mode: DeliveryMode::Fixed, vector: 0x40 }));
    assert!(!pmu.pmi_held());
    assert_eq!(rd(&pmu, IA32_X2APIC_LVT_PMI), 0x40 | LVT_MASK);
}

#[test]
fn dropped_policy_loses_pmis_raised_while_masked() {
    let mut pmu = armed(PmuModel::skylake(), 0, 1, EVTSEL_INT);
    pmu.set_masked_pmi(MaskedPmi::Dropped);
    pmu.retire(Ring::User, &Work { instructions: 1, ..Work::default() });
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    assert!(!pmu.pmi_pending() && !pmu.pmi_held());
    assert_eq!(pmu.pmi_stats().dropped, 1);
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS), 1, "the status bit is set all the same");
}

#[test]
fn level_policy_raises_again_at_unmask_while_an_interrupting_status_bit_is_set() {
    let mut pmu = armed(PmuModel::skylake(), 0, 1, EVTSEL_INT);
    pmu.set_masked_pmi(MaskedPmi::Level);
    pmu.retire(Ring::User, &Work { instructions: 1, ..Work::default() });
    assert!(!pmu.pmi_pending() && !pmu.pmi_held(), "masked: nothing latched");
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    assert!(pmu.take_pmi().is_some(), "the status bit asserts the PMI at unmask");
    // Unmasked again with the bit still set: again.
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    assert!(pmu.take_pmi().is_some());
    // Once the bit is reset, unmasking delivers nothing.
    wr(&mut pmu, IA32_PERF_GLOBAL_OVF_CTRL, 1);
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    assert!(!pmu.pmi_pending());
    // A status bit of a counter without INT asserts nothing.
    let mut pmu = armed(PmuModel::skylake(), 0, 1, 0);
    pmu.set_masked_pmi(MaskedPmi::Level);
    pmu.retire(Ring::User, &Work { instructions: 1, ..Work::default() });
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS), 1);
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    assert!(!pmu.pmi_pending());
}

#[test]
fn legacy_freeze_clears_global_ctrl() {
    // (DEBUGCTL, GLOBAL_CTRL after the PMI, GP 0 and fixed 0 after a second block)
    for (freeze, expected_ctrl, gp, fixed) in
        [(DEBUGCTL_FREEZE_PERFMON_ON_PMI, 0, 15, 25), (0, 0x7_0000_0003, 115, 125)]
    {
        let mut pmu = armed(PmuModel::core2(), 0, 10, EVTSEL_INT);
        wr(&mut pmu, IA32_DEBUGCTL, freeze);
        wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
        wr(&mut pmu, IA32_FIXED_CTR_CTRL, 0x222);
        wr(&mut pmu, IA32_PERF_GLOBAL_CTRL, 0x7_0000_0003);
        pmu.retire(Ring::User, &Work { instructions: 25, ..Work::default() });
        assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_CTRL), expected_ctrl);
        assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS), 1);
        assert!(!pmu.frozen(), "v2 has no CTR_FRZ");
        pmu.retire(Ring::User, &Work { instructions: 100, ..Work::default() });
        assert_eq!((pmu.read_pmc(0), pmu.read_pmc(1 << 30)), (Ok(gp), Ok(fixed)));
    }
}

#[test]
fn streamlined_freeze_sets_ctr_frz_until_status_reset() {
    let mut pmu = armed(PmuModel::skylake(), 0, 10, EVTSEL_INT);
    wr(&mut pmu, IA32_DEBUGCTL, DEBUGCTL_FREEZE_PERFMON_ON_PMI);
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    wr(&mut pmu, IA32_FIXED_CTR_CTRL, 0x2);
    wr(&mut pmu, IA32_PERF_GLOBAL_CTRL, 0x1_0000_000F);
    let block = Work { instructions: 25, ..Work::default() };
    pmu.retire(Ring::User, &block);
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS), 1 | STATUS_CTR_FRZ);
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_CTRL), 0x1_0000_000F, "v4 leaves GLOBAL_CTRL alone");
    assert!(pmu.frozen() && pmu.take_pmi().is_some());
    pmu.retire(Ring::User, &block);
    assert_eq!((pmu.read_pmc(0), pmu.read_pmc(1 << 30)), (Ok(15), Ok(25)), "frozen");
    wr(&mut pmu, IA32_PERF_GLOBAL_OVF_CTRL, 1);
    pmu.retire(Ring::User, &block);
    assert_eq!(pmu.read_pmc(0), Ok(15), "clearing the overflow bit alone does not unfreeze");
    wr(&mut pmu, IA32_PERF_GLOBAL_OVF_CTRL, STATUS_CTR_FRZ);
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS), 0);
    pmu.retire(Ring::User, &block);
    assert_eq!((pmu.read_pmc(0), pmu.read_pmc(1 << 30)), (Ok(40), Ok(50)));
    assert_eq!(pmu.ground_truth(Ring::User).arch(ArchEvent::Instructions), 100);
}

#[test]
fn status_set_and_inuse_on_v4() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    wr(&mut pmu, IA32_PERF_GLOBAL_STATUS_SET, 1 << 2 | STATUS_CTR_FRZ);
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS), 1 << 2 | STATUS_CTR_FRZ);
    assert!(pmu.frozen());
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS_SET), 0);
    assert_eq!(
        wr_fault(&mut pmu, IA32_PERF_GLOBAL_STATUS_SET, STATUS_COND_CHGD),
        FaultKind::ReservedBits(STATUS_COND_CHGD)
    );
    assert!(!pmu.pmi_pending(), "setting a status bit raises no PMI");

    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_INUSE), 0);
    wr(&mut pmu, IA32_PERFEVTSEL0 + 1, 0xC0);
    wr(&mut pmu, IA32_FIXED_CTR_CTRL, 0x8 << 4);
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_INUSE), 1 << 1 | INUSE_PMI);
    wr(&mut pmu, IA32_FIXED_CTR_CTRL, 0x3 << 8);
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_INUSE), 1 << 1 | 1 << 34);
    wr(&mut pmu, IA32_PERFEVTSEL0 + 3, EVTSEL_INT);
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_INUSE), 1 << 1 | 1 << 34 | INUSE_PMI);
}

#[test]
fn one_huge_retire_wraps_a_48_bit_counter_exactly() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    wr(&mut pmu, IA32_PERFEVTSEL0, evtsel(ArchEvent::Instructions, EVTSEL_USR));
    wr(&mut pmu, IA32_A_PMC0, W48 - 12_345);
    wr(&mut pmu, IA32_FIXED_CTR_CTRL, 0x22);
    wr(&mut pmu, IA32_PERF_GLOBAL_CTRL, 0x3_0000_0001);
    let block = Work { instructions: 1_000_003, core_cycles: 777_777, ..Work::default() };
    let repeat = 1_000_000_000_000u64;
    pmu.retire_repeated(Ring::User, &block, repeat);
    let total = 1_000_003u128 * u128::from(repeat);
    assert!(total >> 48 > 1000, "the counter wraps thousands of times");
    let expected = |start: u128, n: u128| ((start + n) % (1 << 48)) as u64;
    assert_eq!(pmu.read_pmc(0), Ok(expected(u128::from(W48 - 12_345), total)));
    assert_eq!(pmu.read_pmc(1 << 30), Ok(expected(0, total)));
    assert_eq!(pmu.read_pmc(1 << 30 | 1), Ok(expected(0, 777_777 * u128::from(repeat))));
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS), 0x3_0000_0001);
    assert_eq!(pmu.ground_truth(Ring::User).arch(ArchEvent::Instructions), total);
}

#[test]
fn one_huge_retire_wraps_a_40_bit_counter_exactly() {
    let mut pmu = SimPmu::new(PmuModel::core2());
    wr(&mut pmu, IA32_PERFEVTSEL0 + 1, evtsel(ArchEvent::CoreCycles, EVTSEL_OS | EVTSEL_INT));
    wr(&mut pmu, IA32_PMC0 + 1, 0xFFFF_FFFF_8000_0000);
    wr(&mut pmu, IA32_FIXED_CTR_CTRL, 0x1 << 8);
    wr(&mut pmu, IA32_PERF_GLOBAL_CTRL, 0x4_0000_0002);
    let block = Work { core_cycles: 3_000_017, ref_cycles: 2_500_001, ..Work::default() };
    let repeat = 123_456_789_012u64;
    pmu.retire_repeated(Ring::Kernel, &block, repeat);
    let start = 0xFF_8000_0000u128;
    let cycles = 3_000_017u128 * u128::from(repeat);
    assert_eq!(pmu.read_pmc(1), Ok(((start + cycles) % (1 << 40)) as u64));
    let refs = 2_500_001u128 * u128::from(repeat);
    assert_eq!(pmu.read_pmc(1 << 30 | 2), Ok((refs % (1 << 40)) as u64));
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS), 0x4_0000_0002);
    assert_eq!(pmu.pmi_stats().raised, 1, "one PMI at the end of the block");
}

#[test]
fn v1_overflow_raises_a_pmi_without_status() {
    let mut pmu = armed(PmuModel::yonah(), 0, 100, EVTSEL_INT);
    wr(&mut pmu, IA32_X2APIC_LVT_PMI, LVT_NMI);
    assert_eq!(pmu.read_pmc(0), Ok(W40 - 100));
    let block = Work { instructions: 60, ..Work::default() };
    pmu.retire(Ring::User, &block);
    assert_eq!(pmu.read_pmc(0).unwrap() >> 39, 1, "bit width−1 still set: no overflow yet");
    assert!(!pmu.pmi_pending());
    pmu.retire(Ring::User, &block);
    assert_eq!(pmu.read_pmc(0), Ok(20));
    assert_eq!(pmu.read_pmc(0).unwrap() >> 39, 0, "bit width−1 clear: the driver's v1 test");
    assert!(pmu.pmi_pending());
    assert_eq!(rd_fault(&pmu, IA32_PERF_GLOBAL_STATUS), FaultKind::UnknownMsr);
    // v1 has no freeze: the counter keeps counting after the PMI.
    pmu.retire(Ring::User, &block);
    assert_eq!(pmu.read_pmc(0), Ok(80));
}

#[test]
fn ground_truth_counts_regardless_of_programming() {
    let mut pmu = SimPmu::new(PmuModel::icelake());
    pmu.retire_repeated(Ring::User, &user_block().with_raw(0xD1, 0x01, 2), 7);
    pmu.retire_repeated(Ring::Kernel, &kernel_block(), 3);
    let user = pmu.ground_truth(Ring::User);
    let expected = [350, 700, 280, 49, 21, 140, 14, 5 * 350];
    for (event, count) in ArchEvent::ALL.into_iter().zip(expected) {
        assert_eq!(user.arch(event), count, "{event:?}");
    }
    assert_eq!((user.raw(0xD1, 0x01), user.blocks()), (14, 7));
    let kernel = pmu.ground_truth(Ring::Kernel);
    assert_eq!(kernel.arch(ArchEvent::Instructions), 90);
    assert_eq!(kernel.arch(ArchEvent::LlcMisses), 3);
    assert_eq!((0..8).map(|i| pmu.read_pmc(i).unwrap()).sum::<u64>(), 0, "nothing programmed");
}

#[test]
fn tsc_advances_with_reference_cycles_and_halted_time() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    pmu.retire_repeated(Ring::User, &user_block(), 3);
    pmu.retire(Ring::Kernel, &kernel_block());
    assert_eq!(pmu.tsc(), 128);
    pmu.advance_tsc(1000);
    assert_eq!(rd(&pmu, IA32_TIME_STAMP_COUNTER), 1128);
    wr(&mut pmu, IA32_TIME_STAMP_COUNTER, 5);
    assert_eq!(pmu.tsc(), 5);
}

// ---------------------------------------------------------------------------------------------
// The driver's view: SimHardware

#[test]
fn sim_hardware_routes_to_the_current_cpu() {
    let hw = SimHardware::new(PmuModel::skylake(), 3);
    assert_eq!((hw.cpu_count(), hw.current_cpu()), (3, 0));
    hw.set_current_cpu(2);
    hw.write_msr(IA32_PERFEVTSEL0, evtsel(ArchEvent::Instructions, EVTSEL_USR));
    assert_eq!(hw.cpuid().cpuid1(1).ebx >> 24, 2);
    hw.current_pmu().retire(Ring::User, &user_block());
    assert_eq!((hw.read_pmc(0), hw.read_tsc()), (100, 40));
    assert_eq!(hw.read_msr(IA32_PERFEVTSEL0), 0x4100C0 | EVTSEL_EN);
    hw.set_current_cpu(0);
    assert_eq!((hw.read_pmc(0), hw.read_msr(IA32_PERFEVTSEL0), hw.read_tsc()), (0, 0, 0));
    assert_eq!(hw.pmu(2).read_pmc(0), Ok(100));
    hw.assert_no_faults();

    let hybrid = SimHardware::from_pmus(vec![
        SimPmu::new(PmuModel::skylake()),
        SimPmu::new(PmuModel::core2()).with_apic_id(8),
    ]);
    hybrid.set_current_cpu(1);
    assert_eq!(hybrid.cpuid().cpuid1(0xA).eax & 0xFF, 2);
    assert_eq!(hybrid.cpuid().apic_id(), 8);
}

#[test]
fn sim_hardware_panics_and_records_every_gp() {
    let hw = SimHardware::new(PmuModel::core2(), 2);
    hw.set_current_cpu(1);
    let panic = catch_unwind(AssertUnwindSafe(|| hw.write_msr(IA32_PERFEVTSEL0, 1 << 32)))
        .expect_err("a #GP panics");
    let message = panic.downcast_ref::<String>().unwrap();
    assert!(message.contains("CPU 1") && message.contains("IA32_PERFEVTSEL0"), "{message}");
    assert!(catch_unwind(AssertUnwindSafe(|| hw.read_msr(IA32_PERF_GLOBAL_INUSE))).is_err());
    assert!(catch_unwind(AssertUnwindSafe(|| hw.read_pmc(2))).is_err());
    let faults = hw.faults();
    assert_eq!(faults.len(), 3);
    assert_eq!(faults[0].cpu, 1);
    assert_eq!(
        faults[0].fault,
        Fault {
            access: Access::Wrmsr { msr: IA32_PERFEVTSEL0, value: 1 << 32 },
            kind: FaultKind::ReservedBits(1 << 32),
            detail: "bits 63:32 are reserved".into(),
        }
    );
    assert!(catch_unwind(AssertUnwindSafe(|| hw.assert_no_faults())).is_err());
    assert_eq!(hw.take_faults().len(), 3);
    hw.assert_no_faults();
    // The PMU is usable after the panic: no borrow was left behind.
    hw.write_msr(IA32_PERFEVTSEL0, 0);
}

#[test]
fn sim_hardware_lapic_programs_nmi_delivery() {
    let hw = SimHardware::new(PmuModel::skylake(), 1);
    hw.unmask_pmi();
    assert_eq!(hw.read_msr(IA32_X2APIC_LVT_PMI), LVT_NMI);
    hw.write_msr(IA32_PERFEVTSEL0, evtsel(ArchEvent::Instructions, EVTSEL_USR | EVTSEL_INT));
    hw.write_msr(IA32_A_PMC0, W48 - 1);
    hw.current_pmu().retire(Ring::User, &Work { instructions: 1, ..Work::default() });
    assert_eq!(hw.current_pmu().take_pmi(), Some(Pmi { mode: DeliveryMode::Nmi, vector: 0 }));
    assert_eq!(hw.read_msr(IA32_X2APIC_LVT_PMI), LVT_NMI | LVT_MASK);
    hw.unmask_pmi();
    hw.mask_pmi();
    assert_eq!(hw.read_msr(IA32_X2APIC_LVT_PMI), LVT_NMI | LVT_MASK);
    hw.assert_no_faults();
}

// ---------------------------------------------------------------------------------------------
// Properties

fn arb_evtsel() -> impl Strategy<Value = u64> {
    let events = prop::sample::select(vec![
        ArchEvent::CoreCycles,
        ArchEvent::Instructions,
        ArchEvent::LlcReferences,
        ArchEvent::LlcMisses,
        ArchEvent::Branches,
    ]);
    (events, 0u64..4, any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(event, cmask, inv, edge, usr, os)| {
            let mut flags = cmask << 24;
            flags |= if inv { EVTSEL_INV } else { 0 } | if edge { EVTSEL_EDGE } else { 0 };
            flags |= if usr { EVTSEL_USR } else { 0 } | if os { EVTSEL_OS } else { 0 };
            evtsel(event, flags)
        },
    )
}

fn arb_work() -> impl Strategy<Value = Work> {
    (0u64..50, 0u64..12, 0u64..30, 0u64..30, 0u64..30).prop_map(
        |(instructions, core_cycles, llc_references, llc_misses, branches)| Work {
            instructions,
            core_cycles,
            ref_cycles: core_cycles / 2,
            llc_references,
            llc_misses,
            branches,
            ..Work::default()
        },
    )
}

proptest! {
    /// Retiring a block `repeat` times at once leaves exactly the state of retiring it one
    /// execution at a time (counters, status, edge detectors), including across wraps of a
    /// 40-bit counter started just below 2^40.
    #[test]
    fn retiring_repeatedly_equals_retiring_one_block_at_a_time(
        selects in prop::collection::vec(arb_evtsel(), 2),
        blocks in prop::collection::vec((arb_work(), any::<bool>(), 1u64..6), 1..6),
        start in 0u64..200,
    ) {
        let mut at_once = SimPmu::new(PmuModel::core2());
        for (i, sel) in selects.iter().enumerate() {
            wr(&mut at_once, IA32_PERFEVTSEL0 + i as u32, *sel);
            wr(&mut at_once, IA32_PMC0 + i as u32, (W40 - start) & 0xFFFF_FFFF);
        }
        wr(&mut at_once, IA32_FIXED_CTR_CTRL, 0x123);
        wr(&mut at_once, IA32_PERF_GLOBAL_CTRL, 0x7_0000_0003);
        let mut one_by_one = at_once.clone();
        for (work, user, repeat) in &blocks {
            let ring = if *user { Ring::User } else { Ring::Kernel };
            at_once.retire_repeated(ring, work, *repeat);
            for _ in 0..*repeat {
                one_by_one.retire(ring, work);
            }
        }
        for index in [0, 1, 1 << 30, 1 << 30 | 1, 1 << 30 | 2] {
            prop_assert_eq!(at_once.read_pmc(index), one_by_one.read_pmc(index));
        }
        prop_assert_eq!(
            at_once.read_msr(IA32_PERF_GLOBAL_STATUS),
            one_by_one.read_msr(IA32_PERF_GLOBAL_STATUS)
        );
        prop_assert_eq!(at_once.ground_truth(Ring::User), one_by_one.ground_truth(Ring::User));
        prop_assert_eq!(at_once.tsc(), one_by_one.tsc());
    }

    /// Legacy counter writes follow the SDM formula for every value and both widths.
    #[test]
    fn legacy_writes_follow_the_sdm_formula(value in any::<u64>(), wide in any::<bool>()) {
        let (model, width) = if wide { (PmuModel::skylake(), 48) } else { (PmuModel::core2(), 40) };
        let mut pmu = SimPmu::new(model);
        wr(&mut pmu, IA32_PMC0, value);
        let low = value & 0xFFFF_FFFF;
        let expected = if low >> 31 == 1 { low | ((1u64 << width) - (1 << 32)) } else { low };
        prop_assert_eq!(pmu.read_pmc(0), Ok(expected));
    }
}

#[test]
fn executions_to_next_pmi_is_the_first_interrupting_overflow() {
    let mut pmu = SimPmu::new(PmuModel::skylake());
    let work = user_block(); // 100 instructions, 50 core cycles per execution
    assert_eq!(pmu.executions_to_next_pmi(Ring::User, &work), None, "nothing counts");
    // GP 0 counts instructions 1050 short of overflow, with INT: 11 executions reach it.
    let instructions = evtsel(ArchEvent::Instructions, EVTSEL_USR | EVTSEL_INT);
    wr(&mut pmu, IA32_PERFEVTSEL0, instructions);
    wr(&mut pmu, IA32_A_PMC0, W48 - 1050);
    wr(&mut pmu, IA32_PERF_GLOBAL_CTRL, 0b1);
    assert_eq!(pmu.executions_to_next_pmi(Ring::User, &work), Some(11));
    assert_eq!(pmu.executions_to_next_pmi(Ring::Kernel, &work), None, "USR only");
    // Fixed counter 1 (core cycles) 200 short, with PMI: 4 executions come first.
    wr(&mut pmu, IA32_FIXED_CTR0 + 1, W48 - 200);
    wr(&mut pmu, IA32_FIXED_CTR_CTRL, (FIXED_USR | FIXED_PMI) << 4);
    wr(&mut pmu, IA32_PERF_GLOBAL_CTRL, 0b1 | 1 << 33);
    assert_eq!(pmu.executions_to_next_pmi(Ring::User, &work), Some(4));
    // Without PMI the fixed counter's overflow interrupts nothing.
    wr(&mut pmu, IA32_FIXED_CTR_CTRL, FIXED_USR << 4);
    assert_eq!(pmu.executions_to_next_pmi(Ring::User, &work), Some(11));
    // Retiring exactly that many overflows GP 0 and raises the PMI; one fewer does not.
    pmu.retire_repeated(Ring::User, &work, 10);
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS) & 1, 0);
    assert_eq!(pmu.executions_to_next_pmi(Ring::User, &work), Some(1));
    pmu.retire_repeated(Ring::User, &work, 1);
    assert_eq!(rd(&pmu, IA32_PERF_GLOBAL_STATUS) & 1, 1);
    // A CMASK filter counts cycles, whose overflow point has no closed form.
    wr(&mut pmu, IA32_PERFEVTSEL0, instructions | 1 << 24);
    assert_eq!(pmu.executions_to_next_pmi(Ring::User, &work), None);
}
