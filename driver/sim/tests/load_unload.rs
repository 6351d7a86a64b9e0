//! Loading checks the tunables and resets every CPU's PMU; unloading releases every PMC, sends
//! SIGBUS to owners, and leaves the hardware as it was found.

use hwpmc::{Driver, LoadError, Signal, Tunables};
use hwpmc_sim::kernel::SimKernel;
use hwpmc_sim::pmu::msr;
use hwpmc_sim::{AllocateRequest, Credentials, PmcClient, PmuModel, SimHardware, load_driver};

#[test]
fn bad_tunables_refuse_to_load() {
    let hw = SimHardware::new(PmuModel::skylake(), 1);
    let load = |tunables| Driver::load(SimKernel::new(hw.clone()), hw.clone(), tunables).err();
    let default = Tunables::default();
    assert_eq!(
        load(Tunables { nsamples: 300, ..default }),
        Some(LoadError::BadSampleRingSize(300))
    );
    assert_eq!(load(Tunables { nsamples: 1, ..default }), Some(LoadError::BadSampleRingSize(1)));
    assert_eq!(
        load(Tunables { callchain_depth: 513, ..default }),
        Some(LoadError::BadCallchainDepth(513))
    );
    assert_eq!(
        load(Tunables { log_buffer_kib: 16384, log_buffers_per_cpu: 4, ..default }),
        Some(LoadError::BadLogBuffers { kib: 16384, count: 4 })
    );
    assert!(load(Tunables { nsamples: 65536, callchain_depth: 512, ..default }).is_none());
    let message = LoadError::BadSampleRingSize(300).to_string();
    assert!(message.contains("power of two"), "{message}");
}

#[test]
fn load_resets_the_pmu_and_unload_restores_it() {
    let hw = SimHardware::new(PmuModel::skylake(), 2);
    // Something left counters running and DEBUGCTL clear before the driver loads.
    hw.pmu(1).write_msr(msr::IA32_PERFEVTSEL0, 0x43_00C0).unwrap();
    // Freezing on PMI asked for (it is off by default).
    let tunables = Tunables { freeze_on_pmi: true, ..Tunables::default() };
    let driver = Driver::load(SimKernel::new(hw.clone()), hw.clone(), tunables).unwrap();
    for cpu in 0..2 {
        let pmu = hw.pmu(cpu);
        assert_eq!(pmu.read_msr(msr::IA32_PERFEVTSEL0).unwrap(), 0);
        assert_eq!(pmu.read_msr(msr::IA32_PERF_GLOBAL_CTRL).unwrap(), 0);
        assert_eq!(pmu.read_msr(msr::IA32_DEBUGCTL).unwrap(), 1 << 12, "freeze on PMI");
        assert_eq!(pmu.read_msr(msr::IA32_X2APIC_LVT_PMI).unwrap() & 1 << 16, 0, "PMI unmasked");
    }
    let kernel = driver.kernel().clone();
    let owner = kernel.spawn(None, Credentials::user(1000));
    let client = PmcClient::new(&driver, owner);
    let id = client.allocate(AllocateRequest::iap(0x00C0)).unwrap();
    client.start(id).unwrap();
    let tid = kernel.threads(owner)[0];
    hw.set_current_cpu(0);
    driver.switch_in(0, owner, tid);
    assert_ne!(hw.pmu(0).read_msr(msr::IA32_PERF_GLOBAL_CTRL).unwrap(), 0);
    driver.unload();
    assert_eq!(kernel.take_signals(), [(owner, Signal::Bus)]);
    for cpu in 0..2 {
        let pmu = hw.pmu(cpu);
        assert_eq!(pmu.read_msr(msr::IA32_PERFEVTSEL0).unwrap(), 0, "cpu {cpu}");
        assert_eq!(pmu.read_msr(msr::IA32_PERF_GLOBAL_CTRL).unwrap(), 0, "cpu {cpu}");
        assert_eq!(pmu.read_msr(msr::IA32_FIXED_CTR_CTRL).unwrap(), 0, "cpu {cpu}");
        assert_eq!(pmu.read_msr(msr::IA32_DEBUGCTL).unwrap(), 0, "DEBUGCTL restored");
        assert_ne!(pmu.read_msr(msr::IA32_X2APIC_LVT_PMI).unwrap() & 1 << 16, 0, "PMI masked");
    }
    hw.assert_no_faults();
}

/// Freezing is off by default: the driver leaves DEBUGCTL alone, whatever the model.
#[test]
fn by_default_the_driver_does_not_touch_debugctl() {
    for model in [PmuModel::skylake(), PmuModel::core2(), PmuModel::kvm_guest()] {
        let hw = SimHardware::new(model, 1);
        hw.pmu(0).write_msr(msr::IA32_DEBUGCTL, 1).unwrap();
        let driver = Driver::load(SimKernel::new(hw.clone()), hw.clone(), Tunables::default());
        assert_eq!(hw.pmu(0).read_msr(msr::IA32_DEBUGCTL).unwrap(), 1, "{model:?}");
        driver.unwrap().unload();
        assert_eq!(hw.pmu(0).read_msr(msr::IA32_DEBUGCTL).unwrap(), 1, "{model:?}");
        hw.assert_no_faults();
    }
}

#[test]
fn a_vm_without_a_pmu_loads_and_unloads_without_touching_pmu_msrs() {
    let driver = load_driver(PmuModel::no_pmu_vm(), 2, Tunables::default());
    driver.unload();
    driver.kernel().hardware().assert_no_faults();
}

/// D8: DEBUGCTL belongs to more than the driver (LBR, BTF and branch trace are the debugger's
/// and the LBR driver's). Loading sets FREEZE_PERFMON_ON_PMI and unloading clears it again (or
/// leaves it set if it was), and neither touches another bit: LBR enabled while the driver was
/// loaded stays enabled after it unloads.
#[test]
fn unload_restores_only_the_freeze_bit_of_debugctl() {
    use hwpmc_sim::quirks::debugctl::{BTF, FREEZE_LBRS_ON_PMI, FREEZE_PERFMON_ON_PMI, LBR};
    for found in [FREEZE_LBRS_ON_PMI, FREEZE_LBRS_ON_PMI | FREEZE_PERFMON_ON_PMI] {
        let hw = SimHardware::new(PmuModel::skylake(), 1);
        hw.pmu(0).write_msr(msr::IA32_DEBUGCTL, found).unwrap();
        let tunables = Tunables { freeze_on_pmi: true, ..Tunables::default() };
        let driver = Driver::load(SimKernel::new(hw.clone()), hw.clone(), tunables).unwrap();
        let debugctl = hw.pmu(0).read_msr(msr::IA32_DEBUGCTL).unwrap();
        assert_eq!(debugctl, found | FREEZE_PERFMON_ON_PMI, "loaded: freezing");
        // A debugger turns on LBR and single-stepping on branches while the driver is loaded.
        hw.pmu(0).write_msr(msr::IA32_DEBUGCTL, debugctl | LBR | BTF).unwrap();
        driver.unload();
        let debugctl = hw.pmu(0).read_msr(msr::IA32_DEBUGCTL).unwrap();
        assert_eq!(debugctl, found | LBR | BTF, "unloaded: the freeze bit as found, the rest kept");
        hw.assert_no_faults();
    }
}
