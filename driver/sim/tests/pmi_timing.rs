//! PMIs as hardware without freezing delivers them: counters keep running from the overflow until
//! the handler stops them, so a second counter can overflow after a PMI was delivered and before
//! (or while) the handler runs, and the local APIC may hold, drop or re-raise the PMI raised
//! while its entry is masked ([`MaskedPmi`]). These are the driver bugs such timing exposed.

use hwpmc::abi::Mode;
use hwpmc::{Pid, TrapFrame, Tunables};
use pmclog::{Record, Records};
use std::cell::Cell;
use std::rc::Rc;

use hwpmc_sim::pmu::{Access, MaskedPmi, Ring, Work, bits::LVT_MASK, msr};
use hwpmc_sim::{AllocateRequest, Credentials, PmcClient, PmuModel, SimDriver, SinkKind};
use hwpmc_sim::{SimHardware, SimKernel, load_driver};

/// Skylake as a hypervisor guest: the driver never freezes counters there.
fn unfrozen_skylake() -> PmuModel {
    PmuModel { hypervisor: true, freeze_on_pmi: false, ..PmuModel::skylake() }
}

/// 1000 instructions retired in user mode.
fn thousand() -> Work {
    Work { instructions: 1000, core_cycles: 1500, ..Work::default() }
}

const FRAME: TrapFrame = TrapFrame { pc: 0x40_1000, fp: 0, sp: 0, user: true };

/// A one-CPU machine of `model` whose APIC treats masked PMIs by `masked`, running a process
/// with one sampling PMC on instructions per period in `periods`, switched in on CPU 0.
fn sampled(model: PmuModel, masked: MaskedPmi, periods: &[u64]) -> (SimDriver, Pid) {
    sampled_with(model, Tunables::default(), masked, periods)
}

/// [`sampled`] with the driver loaded with `tunables`.
fn sampled_with(
    model: PmuModel,
    tunables: Tunables,
    masked: MaskedPmi,
    periods: &[u64],
) -> (SimDriver, Pid) {
    let driver = load_driver(model, 1, tunables);
    let kernel = driver.kernel().clone();
    let hw = kernel.hardware().clone();
    hw.pmu(0).set_masked_pmi(masked);
    let pid = kernel.spawn(None, Credentials::user(1000));
    let tid = kernel.threads(pid)[0];
    let client = PmcClient::new(&driver, pid);
    let fd = kernel.open_sink(pid, SinkKind::Writable);
    client.configure_log(fd).unwrap();
    for &period in periods {
        let request = AllocateRequest::iap(0x00C0).in_mode(Mode::ThreadSampling, None);
        let id = client.allocate(request.with_count(period)).unwrap();
        client.start(id).unwrap();
    }
    hw.set_current_cpu(0);
    driver.switch_in(0, pid, tid);
    (driver, pid)
}

/// Takes every PMI CPU 0 has, as the CPU would (each handler may let a held one in); returns
/// whether the driver claimed each.
fn take_pmis(kernel: &SimKernel, hw: &SimHardware, driver: &SimDriver) -> Vec<bool> {
    let mut claims = Vec::new();
    while hw.pmu(0).take_pmi().is_some() && claims.len() < 8 {
        claims.push(kernel.in_interrupt(|| driver.interrupt(0, &FRAME)));
    }
    claims
}

/// D1: the first counter overflows and its PMI is delivered; before the CPU takes it, the second
/// overflows too, and its PMI is held (the entry is masked). The first handler handles both and
/// unmasks the entry, which releases the held PMI; the second handler finds nothing to do — and
/// must still leave the entry unmasked, or no PMI is ever delivered on this CPU again.
#[test]
fn a_pmi_that_finds_nothing_still_unmasks_the_lvt_entry() {
    let (driver, _pid) = sampled(unfrozen_skylake(), MaskedPmi::Held, &[1000, 2000]);
    let kernel = driver.kernel().clone();
    let hw = kernel.hardware().clone();
    hw.pmu(0).retire(Ring::User, &thousand());
    assert!(hw.pmu(0).pmi_pending(), "the first counter's PMI is delivered");
    hw.pmu(0).retire(Ring::User, &thousand());
    assert!(hw.pmu(0).pmi_held(), "the second counter's PMI is held: the entry is masked");

    let claims = take_pmis(&kernel, &hw, &driver);
    // The released PMI finds no status bit: it is not claimed (nothing of the driver's
    // overflowed), but the entry is unmasked, NMI delivery.
    assert_eq!(claims, [true, false]);
    assert_eq!(hw.read_msr(msr::IA32_X2APIC_LVT_PMI), 0x400, "the LVT entry is unmasked");

    // Sampling goes on: the first counter overflows at each of the next 20 blocks (the second
    // at every other one, in the same block), one PMI each, all claimed.
    let mut claims = Vec::new();
    for _ in 0..20 {
        hw.pmu(0).retire(Ring::User, &thousand());
        claims.extend(take_pmis(&kernel, &hw, &driver));
    }
    assert_eq!(claims, [true; 20], "one PMI per overflow, each the driver's");
    assert_eq!(hw.read_msr(msr::IA32_X2APIC_LVT_PMI) & LVT_MASK, 0);
    hw.assert_no_faults();
}

/// The same two overflows under each masked-PMI policy: whatever the APIC does with the PMI
/// raised while the handler's entry was masked, sampling goes on.
#[test]
fn sampling_survives_an_overflow_before_the_handler_under_every_masked_pmi_policy() {
    // (policy, the claims of the PMIs the two overflows bring)
    let cases = [
        (MaskedPmi::Held, vec![true, false]),
        // KVM drops it: the first handler handled both counters anyway.
        (MaskedPmi::Dropped, vec![true]),
        // The handler reset both status bits before unmasking: nothing to re-raise.
        (MaskedPmi::Level, vec![true]),
    ];
    for (policy, expected) in cases {
        let (driver, pid) = sampled(unfrozen_skylake(), policy, &[1000, 2000]);
        let kernel = driver.kernel().clone();
        let hw = kernel.hardware().clone();
        hw.pmu(0).retire(Ring::User, &thousand());
        hw.pmu(0).retire(Ring::User, &thousand());
        assert_eq!(take_pmis(&kernel, &hw, &driver), expected, "{policy:?}");
        let mut claims = Vec::new();
        for _ in 0..20 {
            hw.pmu(0).retire(Ring::User, &thousand());
            claims.extend(take_pmis(&kernel, &hw, &driver));
        }
        assert_eq!(claims, [true; 20], "{policy:?}: one PMI per overflow");
        let stats = PmcClient::new(&driver, pid).driver_stats().unwrap();
        assert_eq!(stats.pm_intr_processed, 21, "{policy:?}");
        hw.assert_no_faults();
    }
}

/// D5: without freezing, the counters run until the handler stops them. A counter that overflows
/// after the handler read GLOBAL_STATUS has its status bit set too late to be seen, and under
/// KVM its PMI (raised while the entry is masked) is dropped: its sample would come at some
/// later PMI, or never. The handler stops the counters before it reads the status (and reads it
/// again until none of its bits is set), so when it returns no overflow of the driver's is left
/// pending. Here, in every handler, the CPU retires 1000 more instructions right after the
/// status read (the time the handler takes, with whatever counters still run counting).
#[test]
fn no_overflow_is_left_pending_when_the_handler_returns() {
    let (driver, pid) = sampled(unfrozen_skylake(), MaskedPmi::Dropped, &[1000, 2000]);
    let kernel = driver.kernel().clone();
    let hw = kernel.hardware().clone();
    let retired_in_handler = Rc::new(Cell::new(false));
    let hook = {
        let (kernel, hw, retired) = (kernel.clone(), hw.clone(), retired_in_handler.clone());
        move || {
            let status_read = Access::Rdmsr { msr: msr::IA32_PERF_GLOBAL_STATUS };
            if kernel.is_in_interrupt() && hw.last_access() == Some(status_read) && !retired.get() {
                retired.set(true);
                hw.pmu(0).retire(Ring::User, &thousand());
            }
        }
    };
    hw.after_each_access(Some(Rc::new(hook)));
    let counters = hw.pmu(0).counter_bits();
    let mut claims = Vec::new();
    for block in 0..20 {
        hw.pmu(0).retire(Ring::User, &thousand());
        retired_in_handler.set(false);
        claims.extend(take_pmis(&kernel, &hw, &driver));
        let pending = hw.read_msr(msr::IA32_PERF_GLOBAL_STATUS) & counters;
        assert_eq!(pending, 0, "block {block}: an overflow left for a PMI that never comes");
        assert_eq!(hw.read_msr(msr::IA32_X2APIC_LVT_PMI) & LVT_MASK, 0);
    }
    hw.after_each_access(None);
    assert!(claims.iter().all(|&c| c) && claims.len() >= 10, "{claims:?}");
    let dropped = hw.pmu(0).pmi_stats().dropped;
    let stats = PmcClient::new(&driver, pid).driver_stats().unwrap();
    assert_eq!(stats.pm_intr_processed as usize, claims.len(), "{dropped} PMIs dropped");
    hw.assert_no_faults();
}

/// D5, the loop: stopping counters through GLOBAL_CTRL may take effect a few events late on
/// hardware, so a counter can still overflow after the handler's first status read. Modelled
/// here by the PMU setting the second counter's status bit right after that read (through
/// GLOBAL_STATUS_SET, as a late overflow would): the handler reads the status again, handles
/// it in the same PMI, and leaves nothing pending.
#[test]
fn an_overflow_seen_only_at_the_second_status_read_is_handled_in_the_same_pmi() {
    let (driver, pid) = sampled(unfrozen_skylake(), MaskedPmi::Dropped, &[1000, 1_000_000]);
    let kernel = driver.kernel().clone();
    let hw = kernel.hardware().clone();
    let late = Rc::new(Cell::new(false));
    let hook = {
        let (kernel, hw, late) = (kernel.clone(), hw.clone(), late.clone());
        move || {
            let status_read = Access::Rdmsr { msr: msr::IA32_PERF_GLOBAL_STATUS };
            if kernel.is_in_interrupt() && hw.last_access() == Some(status_read) && !late.get() {
                late.set(true);
                hw.write_msr(msr::IA32_PERF_GLOBAL_STATUS_SET, 0b10);
            }
        }
    };
    hw.after_each_access(Some(Rc::new(hook)));
    hw.pmu(0).retire(Ring::User, &thousand());
    assert_eq!(take_pmis(&kernel, &hw, &driver), [true]);
    hw.after_each_access(None);
    assert!(late.get(), "the second counter's bit was set after the first read");
    let pending = hw.read_msr(msr::IA32_PERF_GLOBAL_STATUS) & hw.pmu(0).counter_bits();
    assert_eq!(pending, 0, "both overflows were handled in the one PMI");
    // The second counter was sampled then, and reloaded with its period.
    let stats = PmcClient::new(&driver, pid).driver_stats().unwrap();
    assert_eq!(stats.pm_intr_processed, 1);
    assert_eq!(hw.pmu(0).read_pmc(1).unwrap(), (1 << 48) - 1_000_000);
    hw.assert_no_faults();
}

/// D3: a counter's overflow indication is cleared when the driver unloads it (SDM Vol. 3B
/// §21.2.2 asks for it when a counter is disabled or reloaded). Here a process's sampling PMC
/// overflows, and the PMI is served late: after the process switched out and another one's PMC
/// was loaded on the same counter. The late PMI must not be handled as an overflow of the new
/// PMC (a sample of a process that did not overflow, and an early reload of its counter).
#[test]
fn a_late_pmi_is_not_handled_against_the_next_holder_of_the_counter() {
    // (model, the claim of the late PMI: a frozen v4 PMU was frozen by the driver's PMI, which
    // is claimed to unfreeze it, with nothing to handle)
    let freezing = Tunables { freeze_on_pmi: true, ..Tunables::default() };
    let models = [
        ("freezing skylake", PmuModel::skylake(), freezing, true),
        ("skylake", PmuModel::skylake(), Tunables::default(), false),
        ("unfrozen skylake", unfrozen_skylake(), freezing, false),
        ("freezing core2", PmuModel::core2(), freezing, false),
        ("core2", PmuModel::core2(), Tunables::default(), false),
    ];
    for (name, model, tunables, claimed) in models {
        let (driver, first) = sampled_with(model, tunables, MaskedPmi::Held, &[1000]);
        let kernel = driver.kernel().clone();
        let hw = kernel.hardware().clone();
        let second = kernel.spawn(None, Credentials::user(1000));
        let client = PmcClient::new(&driver, second);
        let fd = kernel.open_sink(second, SinkKind::Writable);
        client.configure_log(fd).unwrap();
        let request = AllocateRequest::iap(0x00C0).in_mode(Mode::ThreadSampling, None);
        let id = client.allocate(request.with_count(5000)).unwrap();
        client.start(id).unwrap();

        hw.pmu(0).retire(Ring::User, &thousand());
        assert!(hw.pmu(0).pmi_pending(), "{name}: the first process's PMC overflowed");
        driver.switch_out(0, first, kernel.threads(first)[0]);
        driver.switch_in(0, second, kernel.threads(second)[0]);
        let claims = take_pmis(&kernel, &hw, &driver);
        assert_eq!(claims, [claimed], "{name}: the new PMC did not overflow");
        // Its counter still holds its full period.
        let start = (1u64 << model.gp_width) - 5000;
        assert_eq!(hw.pmu(0).read_pmc(0).unwrap(), start, "{name}: not reloaded");
        assert_eq!(hw.read_msr(msr::IA32_X2APIC_LVT_PMI) & LVT_MASK, 0, "{name}");
        // It samples at its own overflow.
        for _ in 0..5 {
            hw.pmu(0).retire(Ring::User, &thousand());
        }
        assert_eq!(take_pmis(&kernel, &hw, &driver), [true], "{name}");
        driver.tick(0);
        client.flush_log().unwrap();
        let bytes = kernel.sink_bytes(kernel.sink_of(second, fd).unwrap());
        let records = Records::new(&bytes).map(|e| e.expect("the log decodes").record);
        let samples = records.filter(|r| matches!(r, Record::Callchain(_))).count();
        assert_eq!(samples, 1, "{name}: the new PMC's one overflow, one sample");
        hw.assert_no_faults();
    }
}

/// The (pid, tid, user?) of every sample in `pid`'s log (its first descriptor, 3), flushed.
fn samples_of(driver: &SimDriver, pid: Pid) -> Vec<(Pid, i32, bool)> {
    let kernel = driver.kernel();
    PmcClient::new(driver, pid).flush_log().unwrap();
    let bytes = kernel.sink_bytes(kernel.sink_of(pid, 3).unwrap());
    Records::new(&bytes)
        .map(|e| e.expect("the log decodes").record)
        .filter_map(|r| match r {
            Record::Callchain(cc) => Some((cc.pid, cc.tid, cc.cpuflags.is_user())),
            _ => None,
        })
        .collect()
}

/// D3: an NMI can land anywhere in the scheduler, and a PMI raised just before a thread is
/// switched out (or delivered late) is served while `switch_out` runs, before the counters are
/// stopped. Its sample belongs to the thread that was running: it keeps that thread's id, not
/// the "no thread" −1 the CPU records once the switch is over.
#[test]
fn a_sample_taken_during_switch_out_keeps_its_thread() {
    let (driver, pid) = sampled(PmuModel::skylake(), MaskedPmi::Held, &[1000]);
    let driver = Rc::new(driver);
    let kernel = driver.kernel().clone();
    let hw = kernel.hardware().clone();
    let tid = kernel.threads(pid)[0];
    hw.pmu(0).retire(Ring::User, &thousand());
    assert!(hw.pmu(0).pmi_pending(), "the counter overflowed");
    // The NMI arrives at the first MSR access of the switch-out, in the scheduler.
    let served = Rc::new(Cell::new(false));
    let hook = {
        let (kernel, hw, served) = (kernel.clone(), hw.clone(), served.clone());
        let driver = Rc::downgrade(&driver);
        move || {
            let Some(driver) = driver.upgrade() else { return };
            if kernel.is_in_interrupt() || hw.pmu(0).take_pmi().is_none() {
                return;
            }
            served.set(true);
            let frame = TrapFrame { pc: 0xffff_ffff_8020_0000, fp: 0, sp: 0, user: false };
            assert!(kernel.in_interrupt(|| driver.interrupt(0, &frame)), "the driver's PMI");
        }
    };
    hw.after_each_access(Some(Rc::new(hook)));
    driver.switch_out(0, pid, tid);
    hw.after_each_access(None);
    assert!(served.get(), "the PMI was served inside switch_out");
    driver.tick(0);
    assert_eq!(samples_of(&driver, pid), [(pid, tid, false)]);
    hw.assert_no_faults();
}

/// Another agent's freeze: the driver does not freeze counters (a hypervisor guest here), but a
/// PMI of someone else's finds CTR_FRZ set in GLOBAL_STATUS (their DEBUGCTL freeze, their bit to
/// clear). The handler stopped the counters through GLOBAL_CTRL on entry; it must start them
/// again, or the driver's counters stay stopped for good.
#[test]
fn a_pmi_that_finds_another_agents_freeze_leaves_the_drivers_counters_started() {
    let (driver, _pid) = sampled(unfrozen_skylake(), MaskedPmi::Held, &[1_000_000]);
    let kernel = driver.kernel().clone();
    let hw = kernel.hardware().clone();
    let started = hw.read_msr(msr::IA32_PERF_GLOBAL_CTRL);
    assert_ne!(started, 0, "the driver's counter runs");
    hw.pmu(0).inject_foreign_status(hwpmc_sim::pmu::bits::STATUS_CTR_FRZ, true);
    let claims = take_pmis(&kernel, &hw, &driver);
    assert_eq!(claims, [false], "one PMI, not the driver's");
    assert_eq!(hw.read_msr(msr::IA32_PERF_GLOBAL_CTRL), started, "started again");
    let status = hw.read_msr(msr::IA32_PERF_GLOBAL_STATUS);
    assert_ne!(status & hwpmc_sim::pmu::bits::STATUS_CTR_FRZ, 0, "the other agent's bit stays");
    hw.assert_no_faults();
}
