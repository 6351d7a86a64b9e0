//! Extended errors: the text a failed hwpmc call leaves its thread, read after the call as
//! `uexterr_gettext(3)` reads it, and checked as FreeBSD's tests check it (the text contains
//! the string). Every errno is the one the call returned before the texts existed.

use hwpmc::Errno;
use hwpmc::abi::{
    Class, Mode, Op, PMC_CPU_ANY, PmcFlags, PmcOpPmcAllocate, PmcOpPmcAttach, PmcOpPmcRw,
};
use hwpmc::kernel::UserPtr;
use hwpmc_sim::{AllocateRequest, Credentials, PmcClient, PmuModel};
use hwpmc_test_support::world::World;
use zerocopy::FromZeros;

/// A world of a user's process with FreeBSD's test event, SOFT-CLOCK.HARD, registered;
/// returns its code.
fn soft_world(model: PmuModel, cpus: usize) -> (World, u32) {
    soft_world_of(World::builder(model).cpus(cpus).build())
}

/// `w` with SOFT-CLOCK.HARD registered, and its code.
fn soft_world_of(w: World) -> (World, u32) {
    let code = w.driver.register_soft_event("CLOCK.HARD").unwrap();
    (w, code)
}

/// Asserts that `result` failed with `errno` and left the calling thread a text containing
/// `needle`.
#[track_caller]
fn refused<T: std::fmt::Debug>(
    client: PmcClient<'_>,
    result: Result<T, Errno>,
    errno: Errno,
    needle: &str,
) {
    assert_eq!(result.unwrap_err(), errno);
    let text = client.error_text();
    assert!(text.contains(needle), "extended error {text:?} does not contain {needle:?}");
}

/// A raw PMCALLOCATE of the SOFT class, as FreeBSD's test builds it.
fn soft_allocate(event: u32, mode: u32, cpu: u32, flags: u32) -> PmcOpPmcAllocate {
    let mut op = PmcOpPmcAllocate::new_zeroed();
    op.pm_class = Class::Soft.as_u32();
    op.pm_ev = event;
    op.pm_mode = mode;
    op.pm_cpu = cpu;
    op.pm_flags = flags;
    op
}

#[test]
fn pmcallocate_invalid_mode() {
    let (w, code) = soft_world(PmuModel::skylake(), 2);
    let c = w.client();
    let mut op = soft_allocate(code, 0xFF, PMC_CPU_ANY, 0);
    refused(c, c.call(Op::PmcAllocate, &mut op), Errno::Inval, "Invalid PMC mode");
}

#[test]
fn pmcallocate_invalid_cpu() {
    let (w, code) = soft_world(PmuModel::skylake(), 2);
    let c = w.client();
    let mut op = soft_allocate(code, Mode::ThreadCounting.as_u32(), 2, 0);
    refused(c, c.call(Op::PmcAllocate, &mut op), Errno::Inval, "Invalid PMC CPU");
    // A system PMC on a CPU past the last one, too.
    let mut op = soft_allocate(code, Mode::SystemCounting.as_u32(), 2, 0);
    refused(c, c.call(Op::PmcAllocate, &mut op), Errno::Inval, "Invalid PMC CPU");
}

#[test]
fn pmcallocate_invalid_flags() {
    let (w, code) = soft_world(PmuModel::skylake(), 2);
    let c = w.client();
    let mut op = soft_allocate(code, Mode::ThreadCounting.as_u32(), PMC_CPU_ANY, 1 << 31);
    refused(c, c.call(Op::PmcAllocate, &mut op), Errno::Inval, "Invalid PMC flags");
}

#[test]
fn pmcattach_system_mode() {
    // System PMCs are root's (FreeBSD's test runs as root).
    let root = World::builder(PmuModel::skylake()).cpus(2).credentials(Credentials::root());
    let (w, code) = soft_world_of(root.build());
    let c = w.client();
    let id =
        c.allocate(AllocateRequest::soft(code).in_mode(Mode::SystemCounting, Some(0))).unwrap();
    let mut op = PmcOpPmcAttach { pm_pmc: id, pm_pid: w.pid };
    refused(c, c.call(Op::PmcAttach, &mut op), Errno::Inval, "Cannot attach a system-mode PMC");
    c.release(id).unwrap();
}

#[test]
fn pmcattach_running_pmc() {
    let (w, code) = soft_world(PmuModel::skylake(), 2);
    let c = w.client();
    let id = c.allocate(AllocateRequest::soft(code)).unwrap();
    c.start(id).unwrap();
    let mut op = PmcOpPmcAttach { pm_pmc: id, pm_pid: w.pid };
    refused(c, c.call(Op::PmcAttach, &mut op), Errno::Busy, "PMC must be stopped before attach");
    c.stop(id).unwrap();
    c.release(id).unwrap();
}

#[test]
fn pmcrw_no_flags() {
    let (w, code) = soft_world(PmuModel::skylake(), 2);
    let c = w.client();
    let id = c.allocate(AllocateRequest::soft(code)).unwrap();
    let mut op = PmcOpPmcRw { pm_flags: 0, pm_pmcid: id, pm_value: 0 };
    refused(c, c.call(Op::PmcRw, &mut op), Errno::Inval, "PMCRW requires OLDVALUE");
    c.release(id).unwrap();
}

#[test]
fn pmcrw_write_running() {
    let (w, code) = soft_world(PmuModel::skylake(), 2);
    let c = w.client();
    let id = c.allocate(AllocateRequest::soft(code)).unwrap();
    c.start(id).unwrap();
    let mut op = PmcOpPmcRw { pm_flags: PmcFlags::NEWVALUE.bits(), pm_pmcid: id, pm_value: 1 };
    let needle = "Cannot write a PMC while it is running";
    refused(c, c.call(Op::PmcRw, &mut op), Errno::Busy, needle);
    c.stop(id).unwrap();
    c.release(id).unwrap();
}

#[test]
fn amd_missing_pmu_flag_invalid_subclass_and_config_bits() {
    for model in [PmuModel::k10(), PmuModel::zen2(), PmuModel::zen4()] {
        let w = World::new(model);
        let c = w.client();
        let request = AllocateRequest { flags: 0, ..AllocateRequest::k8(0xC0) };
        refused(c, c.allocate(request), Errno::Inval, "AMD PMCs require PMC_F_EV_PMU");
        let request = AllocateRequest { amd_sub_class: u32::MAX, ..AllocateRequest::k8(0xC0) };
        refused(c, c.allocate(request), Errno::Inval, "AMD subclass");
        let request = AllocateRequest::k8(!0);
        refused(c, c.allocate(request), Errno::Inval, "AMD PMU config has unsupported bits");
    }
}

#[test]
fn no_row_left() {
    let w = World::new(PmuModel::skylake());
    let c = w.client();
    let mut refusal = None;
    for _ in 0..64 {
        if let Err(e) = c.allocate(AllocateRequest::iap(0x00C0 | 1 << 16)) {
            refusal = Some(e);
            break;
        }
    }
    assert_eq!(refusal, Some(Errno::Inval));
    assert!(c.error_text().contains("No PMC row accepted"), "{:?}", c.error_text());
}

/// FreeBSD sets a thread's text at every failing call, to nothing for a failure without one,
/// and leaves it at a successful call (as errno): so after a success the text still reads as
/// the last failure's, and a later failure never shows an earlier one's cause.
#[test]
fn a_later_failure_never_shows_an_earlier_cause() {
    let (w, code) = soft_world(PmuModel::skylake(), 2);
    let c = w.client();
    let mut op = soft_allocate(code, 0xFF, PMC_CPU_ANY, 0);
    refused(c, c.call(Op::PmcAllocate, &mut op), Errno::Inval, "Invalid PMC mode");
    let id = c.allocate(AllocateRequest::soft(code)).unwrap();
    assert_eq!(c.error_text(), "Invalid PMC mode", "a success leaves the text");
    // A failure with another cause replaces it.
    refused(c, c.rw(id, 0, 0), Errno::Inval, "PMCRW requires OLDVALUE");
    assert!(!c.error_text().contains("Invalid PMC mode"));
    // A failure without a cause of the driver's (a bad address) clears it.
    assert_eq!(c.call_raw(Op::PmcRw.as_u32(), UserPtr(0x10)), Err(Errno::Fault));
    assert_eq!(c.error_text(), "");
    c.release(id).unwrap();
}

#[test]
fn texts_are_per_thread() {
    let w = World::builder(PmuModel::skylake()).process(Credentials::user(2000)).build();
    let (c, other) = (w.client(), w.client_as(w.processes[1]));
    refused(c, c.read(12345), Errno::Srch, "The process owns no PMCs");
    assert_eq!(other.error_text(), "", "another thread's is its own");
}

/// A call that is expected to fail.
type Call<'a> = dyn Fn() -> Result<(), Errno> + 'a;

#[test]
fn every_driver_refusal_has_a_text() {
    let (w, code) = soft_world(PmuModel::skylake(), 2);
    let c = w.client();
    let id = c.allocate(AllocateRequest::soft(code)).unwrap();
    // A refusal or two of each group of operations: each names its cause.
    let calls: [(&str, &Call); 7] = [
        ("start of an unknown id", &|| c.start(id ^ 1)),
        ("unknown operation", &|| c.call_raw(0x99, UserPtr(0))),
        ("set count while running", &|| c.start(id).and_then(|()| c.set_count(id, 5))),
        ("close without a log", &|| c.close_log()),
        ("write without a log", &|| c.write_log(1)),
        ("admin without privilege", &|| c.admin(0, 0, hwpmc::abi::State::Disabled)),
        ("getmsr of a soft PMC", &|| c.get_msr(id).map(|_| ())),
    ];
    for (what, call) in calls {
        let result = call();
        assert!(result.is_err(), "{what}");
        assert!(!c.error_text().is_empty(), "{what}: {result:?} without a text");
    }
}

/// A host that calls the driver on the caller's thread reads the text with the errno.
#[test]
fn the_text_comes_with_the_errno_for_hosted_callers() {
    let w = World::new(PmuModel::skylake());
    w.kernel().set_caller(w.pid);
    let unknown = w.driver.syscall_explained(0x99, UserPtr(0));
    assert_eq!(unknown, Err((Errno::Inval, "Unknown PMC operation")));
    assert_eq!(w.client().error_text(), "Unknown PMC operation", "the kernel has it too");
    // An errno of the kernel's services carries no text.
    let fault = w.driver.syscall_explained(Op::PmcRw.as_u32(), UserPtr(0x10));
    assert_eq!(fault, Err((Errno::Fault, "")));
}
