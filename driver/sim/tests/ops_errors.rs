//! Every errno of hwpmc(4)'s ERRORS list that applies to the counting operations, each checked to
//! leave the driver's state unchanged (rows, dispositions, owners, counts).

use hwpmc::abi::{
    Caps, Class, Disposition, Mode, Op, PMC_CPU_ANY, PMC_VERSION, PmcFlags, PmcInfo,
    PmcOpConfigureLog, PmcOpPmcAllocate, PmcOpWriteLog, State, event,
};
use hwpmc::{Errno, Pid, UserPtr};
use hwpmc_sim::kernel::SCRATCH_BASE;
use hwpmc_sim::{AllocateRequest, Credentials, PmuModel};
use hwpmc_test_support::world::World;
use zerocopy::FromZeros;

const INSTRUCTIONS: u32 = 0x00C0;
const CYCLES: u32 = 0x003C;

/// The world of the errno tests: a driver on `cpus` CPUs of `model`, and three processes: a
/// user's, another user's and root's.
fn world(model: PmuModel, cpus: usize) -> World {
    World::builder(model)
        .cpus(cpus)
        .process(Credentials::user(2000))
        .process(Credentials::root())
        .build()
}

/// The errno tests' view of their world.
trait Errors {
    /// The world on two Skylake CPUs.
    fn skylake() -> Self;
    /// The process of user 1000.
    fn user(&self) -> Pid;
    /// The process of user 2000.
    fn other_user(&self) -> Pid;
    /// Root's process.
    fn root(&self) -> Pid;
    /// Everything observable about the driver's bookkeeping: every row of every CPU.
    fn snapshot(&self) -> Vec<Vec<PmcInfo>>;
    fn fails<T: std::fmt::Debug>(&self, errno: Errno, call: impl FnOnce() -> Result<T, Errno>);
}

impl Errors for World {
    fn skylake() -> Self {
        world(PmuModel::skylake(), 2)
    }

    fn user(&self) -> Pid {
        self.processes[0]
    }

    fn other_user(&self) -> Pid {
        self.processes[1]
    }

    fn root(&self) -> Pid {
        self.processes[2]
    }

    fn snapshot(&self) -> Vec<Vec<PmcInfo>> {
        let client = self.client_as(self.root());
        (0..self.driver.kernel().hardware().cpu_count() as i32)
            .map(|cpu| client.pmc_info(cpu).unwrap_or_default())
            .collect()
    }

    /// Runs `call`, expects `errno`, and checks that nothing changed.
    fn fails<T: std::fmt::Debug>(&self, errno: Errno, call: impl FnOnce() -> Result<T, Errno>) {
        let before = self.snapshot();
        let result = call();
        assert!(matches!(result, Err(e) if e == errno), "expected {errno}, got {result:?}");
        assert_eq!(self.snapshot(), before, "a failed call ({errno}) changed the driver's state");
        self.driver.kernel().hardware().assert_no_faults();
    }
}

fn disposition(infos: &[PmcInfo], row: usize) -> u32 {
    infos[row].pm_rowdisp
}

#[test]
fn module_version_newer_than_the_driver_is_eprogmismatch() {
    let w = World::skylake();
    let c = w.client_as(w.user());
    assert_eq!(c.module_version(None), Ok(PMC_VERSION));
    assert_eq!(c.module_version(Some(0x0A02_0005)), Ok(PMC_VERSION), "patch level is ignored");
    w.fails(Errno::ProgMismatch, || c.module_version(Some(0x0A03_0000)));
    w.fails(Errno::ProgMismatch, || c.module_version(Some(0x0B00_0000)));
}

#[test]
fn bad_pointers_are_efault() {
    let w = World::skylake();
    let c = w.client_as(w.user());
    let unmapped = UserPtr(0x1000);
    for op in [Op::PmcAllocate, Op::PmcAttach, Op::PmcStart, Op::PmcRw, Op::GetCpuInfo] {
        w.fails(Errno::Fault, || c.call_raw(op.as_u32(), unmapped));
    }
}

#[test]
fn allocate_whose_reply_cannot_be_copied_out_is_efault_and_allocates_nothing() {
    let w = World::skylake();
    let kernel = w.driver.kernel();
    let read_only = 0x5000_0000;
    kernel.map_memory(w.user(), read_only, 4096, false);
    let mut request = PmcOpPmcAllocate::new_zeroed();
    request.pm_class = Class::Iap.as_u32();
    request.pm_mode = Mode::ThreadCounting.as_u32();
    request.pm_cpu = PMC_CPU_ANY;
    request.pm_flags = PmcFlags::EV_PMU.bits();
    request.pm_md.set_iap_config(INSTRUCTIONS);
    kernel.write_memory(w.user(), read_only, zerocopy::IntoBytes::as_bytes(&request)).unwrap();
    let c = w.client_as(w.user());
    w.fails(Errno::Fault, || c.call_raw(Op::PmcAllocate.as_u32(), UserPtr(read_only)));
    // The rows are all still free: four more allocations of this process succeed.
    for _ in 0..4 {
        c.allocate(AllocateRequest::iap(INSTRUCTIONS)).expect("row free");
    }
}

#[test]
fn unknown_operation_is_einval() {
    let w = World::skylake();
    w.fails(Errno::Inval, || w.client_as(w.user()).call_raw(20, UserPtr(SCRATCH_BASE)));
    w.fails(Errno::Inval, || w.client_as(w.user()).call_raw(u32::MAX, UserPtr(SCRATCH_BASE)));
}

#[test]
fn operations_on_pmcs_need_an_owner_esrch_and_a_valid_id_einval() {
    let w = World::skylake();
    let c = w.client_as(w.user());
    w.fails(Errno::Srch, || c.start(0xFFF3_0711));
    w.fails(Errno::Srch, || c.read(0xFFF3_0711));
    w.fails(Errno::Srch, || c.release(0xFFF3_0711));
    let id = c.allocate(AllocateRequest::iap(INSTRUCTIONS)).unwrap();
    w.fails(Errno::Inval, || c.start(id ^ 1));
    w.fails(Errno::Inval, || c.read(0));
    w.fails(Errno::Inval, || c.caps(id + 0x100));
    // Ids are per owner: another process's PMC id means nothing to the caller (ids of process
    // PMCs at the same row are equal across owners, as in FreeBSD).
    let second = c.allocate(AllocateRequest::iap(CYCLES)).unwrap();
    let other = w.client_as(w.other_user());
    w.fails(Errno::Srch, || other.start(second));
    let others = other.allocate(AllocateRequest::iap(CYCLES)).unwrap();
    assert_eq!(others, id, "the same row gives the same id");
    w.fails(Errno::Inval, || other.start(second));
}

#[test]
fn pmc_info_cpu_errors() {
    let w = World::skylake();
    let c = w.client_as(w.user());
    w.fails(Errno::Inval, || c.pmc_info(2));
    w.fails(Errno::Inval, || c.pmc_info(-1));
    w.driver.kernel().set_cpu_active(1, false);
    w.fails(Errno::Nxio, || c.pmc_info(1));
    assert!(c.pmc_info(0).is_ok());
}

#[test]
fn pmcadmin_errors() {
    let w = World::skylake();
    let user = w.client_as(w.user());
    let root = w.client_as(w.root());
    let iap_row = 17; // SOFT 0..15, TSC 16, IAP 17..20, IAF 21..23
    w.fails(Errno::Perm, || user.admin(0, iap_row, State::Disabled));
    w.fails(Errno::Inval, || root.admin(2, iap_row, State::Disabled));
    w.fails(Errno::Inval, || root.admin(-1, iap_row, State::Disabled));
    w.fails(Errno::Inval, || root.admin(0, iap_row, State::Running));
    w.fails(Errno::Inval, || root.admin(0, 24, State::Disabled));
    w.fails(Errno::Inval, || root.admin(0, -1, State::Disabled));
    w.driver.kernel().set_cpu_active(1, false);
    w.fails(Errno::Nxio, || root.admin(1, iap_row, State::Disabled));
    w.driver.kernel().set_cpu_active(1, true);
    // A row in use by a process PMC cannot be disabled.
    user.allocate(AllocateRequest::iap(INSTRUCTIONS)).unwrap();
    w.fails(Errno::Busy, || root.admin(0, iap_row, State::Disabled));
    // A row in use by a system PMC on that CPU cannot be disabled.
    let sys = AllocateRequest::iap(INSTRUCTIONS).in_mode(Mode::SystemCounting, Some(1));
    root.allocate(sys).unwrap();
    w.fails(Errno::Busy, || root.admin(1, iap_row + 1, State::Disabled));
    // A jailed root is refused.
    let jailed = w.driver.kernel().spawn(None, Credentials { jailed: true, ..Credentials::root() });
    w.fails(Errno::Perm, || w.client_as(jailed).admin(0, iap_row + 3, State::Disabled));
    // What works: disable a free row, which then cannot be allocated, and enable it again.
    root.admin(0, iap_row + 3, State::Disabled).unwrap();
    assert_eq!(root.pmc_info(0).unwrap()[iap_row as usize + 3].pm_enabled, 0);
    root.admin(0, iap_row + 3, State::Free).unwrap();
    assert_eq!(root.pmc_info(0).unwrap()[iap_row as usize + 3].pm_enabled, 1);
}

#[test]
fn allocate_argument_errors() {
    let w = World::skylake();
    let user = w.client_as(w.user());
    let root = w.client_as(w.root());
    let iap = AllocateRequest::iap(INSTRUCTIONS);
    w.fails(Errno::Inval, || user.allocate(AllocateRequest { mode: 4, ..iap }));
    w.fails(Errno::Inval, || user.allocate(AllocateRequest { cpu: 0, ..iap }));
    let sys = iap.in_mode(Mode::SystemCounting, Some(0));
    w.fails(Errno::Inval, || root.allocate(AllocateRequest { cpu: PMC_CPU_ANY, ..sys }));
    w.fails(Errno::Inval, || root.allocate(AllocateRequest { cpu: 2, ..sys }));
    w.driver.kernel().set_cpu_active(1, false);
    w.fails(Errno::Nxio, || root.allocate(AllocateRequest { cpu: 1, ..sys }));
    w.driver.kernel().set_cpu_active(1, true);
    w.fails(Errno::Inval, || user.allocate(iap.with_flags(PmcFlags::from_bits_retain(0x40))));
    w.fails(Errno::Inval, || user.allocate(iap.with_flags(PmcFlags::from_bits_retain(0x1))));
    w.fails(Errno::Inval, || user.allocate(iap.with_flags(PmcFlags::ATTACHED_TO_OWNER)));
    w.fails(Errno::Inval, || root.allocate(sys.with_flags(PmcFlags::LOG_PROCEXIT)));
    w.fails(Errno::Inval, || root.allocate(sys.with_flags(PmcFlags::LOG_PROCCSW)));
    let ts = iap.in_mode(Mode::ThreadSampling, None);
    w.fails(Errno::Inval, || user.allocate(ts.with_flags(PmcFlags::USERCALLCHAIN)));
    w.fails(Errno::Inval, || {
        user.allocate(iap.with_flags(PmcFlags::CALLCHAIN | PmcFlags::USERCALLCHAIN))
    });
    w.fails(Errno::Inval, || user.allocate(AllocateRequest { class: 1, ..iap }));
    w.fails(Errno::Inval, || user.allocate(AllocateRequest { class: Class::K8.as_u32(), ..iap }));
    w.fails(Errno::Inval, || user.allocate(AllocateRequest { flags: 0, ..iap }));
    w.fails(Errno::Inval, || user.allocate(AllocateRequest::soft(event::SOFT_FIRST)));
    w.fails(Errno::Inval, || {
        root.allocate(AllocateRequest::tsc(0).in_mode(Mode::ThreadCounting, None))
    });
    w.fails(Errno::Inval, || {
        root.allocate(AllocateRequest { event: 0x1001, ..AllocateRequest::tsc(0) })
    });
    w.fails(Errno::Inval, || user.allocate(AllocateRequest::iaf(0x10003)));
}

#[test]
fn allocate_capability_errors_are_eopnotsupp() {
    let w = World::skylake();
    let root = w.client_as(w.root());
    let tsc = AllocateRequest::tsc(0);
    w.fails(Errno::OpNotSupp, || root.allocate(AllocateRequest { caps: Caps::USER.bits(), ..tsc }));
    let iaf = AllocateRequest::iaf(event::IAF_INSTR_RETIRED_ANY);
    w.fails(Errno::OpNotSupp, || root.allocate(AllocateRequest { caps: Caps::EDGE.bits(), ..iaf }));
    w.fails(Errno::OpNotSupp, || root.allocate(AllocateRequest { caps: 1 << 20, ..iaf }));
}

#[test]
fn system_pmcs_need_privilege_and_no_jail() {
    let w = World::skylake();
    let sys = AllocateRequest::iap(INSTRUCTIONS).in_mode(Mode::SystemCounting, Some(0));
    w.fails(Errno::Perm, || w.client_as(w.user()).allocate(sys));
    let jailed = w.driver.kernel().spawn(None, Credentials { jailed: true, ..Credentials::root() });
    w.fails(Errno::Perm, || w.client_as(jailed).allocate(sys));
    w.driver.kernel().set_unprivileged_syspmcs(true);
    w.fails(Errno::Perm, || w.client_as(jailed).allocate(sys));
    w.client_as(w.user()).allocate(sys).expect("unprivileged_syspmcs=1 lets a user in");
    w.client_as(w.root()).allocate(AllocateRequest { cpu: 1, ..sys }).expect("root");
}

#[test]
fn reserved_and_privileged_config_bits_are_refused_before_any_msr_write() {
    let w = World::skylake();
    let user = w.client_as(w.user());
    let any_thread = INSTRUCTIONS | 1 << 21;
    w.fails(Errno::Perm, || user.allocate(AllocateRequest::iap(any_thread)));
    w.client_as(w.root())
        .allocate(AllocateRequest::iap(any_thread))
        .expect("root may use AnyThread");
    let mut request = AllocateRequest::iaf(0);
    request.flags = PmcFlags::EV_PMU.bits();
    request.iap_config = any_thread;
    w.fails(Errno::Perm, || user.allocate(request));
    // Ice Lake (perfmon v5) deprecates AnyThread: the bit is reserved, for root too.
    let icelake = world(PmuModel::icelake(), 1);
    let root = icelake.client_as(icelake.root());
    icelake.fails(Errno::Inval, || root.allocate(AllocateRequest::iap(any_thread)));
    // An offcore-response value for an event that reads none (INST_RETIRED), or with a bit
    // Skylake's MSR_OFFCORE_RSP_0 leaves undefined (bit 12).
    let w2 = World::skylake();
    let mut op = PmcOpPmcAllocate::new_zeroed();
    op.pm_class = Class::Iap.as_u32();
    op.pm_mode = Mode::ThreadCounting.as_u32();
    op.pm_cpu = PMC_CPU_ANY;
    op.pm_flags = PmcFlags::EV_PMU.bits();
    op.pm_md.set_iap_config(0x00C0);
    op.pm_md.set_iap_rsp(0x10001);
    w2.fails(Errno::Inval, || w2.client_as(w2.user()).call(Op::PmcAllocate, &mut op));
    op.pm_md.set_iap_config(0x01B7);
    op.pm_md.set_iap_rsp(0x11001);
    w2.fails(Errno::Inval, || w2.client_as(w2.user()).call(Op::PmcAllocate, &mut op));
}

#[test]
fn allocate_without_a_free_row_is_einval() {
    let w = World::skylake();
    let user = w.client_as(w.user());
    for _ in 0..4 {
        user.allocate(AllocateRequest::iap(INSTRUCTIONS)).unwrap();
    }
    w.fails(Errno::Inval, || user.allocate(AllocateRequest::iap(CYCLES)));
    // Another process has rows of its own (process PMCs share rows between processes).
    w.client_as(w.other_user()).allocate(AllocateRequest::iap(CYCLES)).unwrap();
    // But a system PMC cannot take a row process PMCs use.
    let root = w.client_as(w.root());
    let sys = AllocateRequest::iap(CYCLES).in_mode(Mode::SystemCounting, Some(0));
    w.fails(Errno::Inval, || root.allocate(sys));
    // A fixed counter has exactly one row.
    let iaf = AllocateRequest::iaf(event::IAF_INSTR_RETIRED_ANY);
    user.allocate(iaf).unwrap();
    w.fails(Errno::Inval, || user.allocate(iaf));
}

#[test]
fn attach_errors() {
    let w = World::skylake();
    let user = w.client_as(w.user());
    let root = w.client_as(w.root());
    let id = user.allocate(AllocateRequest::iap(INSTRUCTIONS)).unwrap();
    let sys =
        root.allocate(AllocateRequest::iap(CYCLES).in_mode(Mode::SystemCounting, Some(0))).unwrap();
    w.fails(Errno::Inval, || root.attach(sys, 0));
    w.fails(Errno::Inval, || user.attach(id, -5));
    w.fails(Errno::Srch, || user.attach(id, 99_999));
    w.fails(Errno::Perm, || user.attach(id, w.other_user()));
    w.fails(Errno::Perm, || user.attach(id, w.root()));
    let kernel = w.driver.kernel();
    let dying = kernel.spawn(None, Credentials::user(1000));
    kernel.begin_exit(dying);
    w.fails(Errno::Srch, || user.attach(id, dying));
    user.attach(id, 0).unwrap();
    w.fails(Errno::Exist, || user.attach(id, w.user()));
    user.start(id).unwrap();
    let sibling = kernel.spawn(None, Credentials::user(1000));
    w.fails(Errno::Busy, || user.attach(id, sibling));
    user.stop(id).unwrap();
    user.attach(id, sibling).unwrap();
    // The sibling's row is taken by this PMC; another PMC of another owner at the same row
    // cannot attach to it.
    let third = kernel.spawn(None, Credentials::user(1000));
    let other = w.client_as(third);
    let other_id = other.allocate(AllocateRequest::iap(INSTRUCTIONS)).unwrap();
    assert_eq!(other_id & 0xFF, id & 0xFF, "both got the first IAP row");
    w.fails(Errno::Busy, || other.attach(other_id, sibling));
    // unprivileged_proc_debug=0: no attaching to one's own other processes.
    kernel.set_unprivileged_proc_debug(false);
    let fourth = kernel.spawn(None, Credentials::user(1000));
    w.fails(Errno::Perm, || user.attach(id, fourth));
    // Root attaches anywhere.
    let root_id = root.allocate(AllocateRequest::iap(CYCLES)).unwrap();
    root.attach(root_id, fourth).unwrap();
}

#[test]
fn attach_after_getmsr_to_another_process_is_eperm() {
    let w = World::skylake();
    let user = w.client_as(w.user());
    let id = user.allocate(AllocateRequest::iap(INSTRUCTIONS)).unwrap();
    user.attach(id, 0).unwrap();
    assert_eq!(user.get_msr(id), Ok(0), "RDPMC index of GP counter 0");
    let child = w.driver.kernel().spawn(Some(w.user()), Credentials::user(1000));
    w.fails(Errno::Perm, || user.attach(id, child));
}

#[test]
fn detach_errors() {
    let w = World::skylake();
    let user = w.client_as(w.user());
    let root = w.client_as(w.root());
    let kernel = w.driver.kernel();
    let id = user.allocate(AllocateRequest::iap(INSTRUCTIONS)).unwrap();
    let sys = root.allocate(AllocateRequest::tsc(0)).unwrap();
    w.fails(Errno::Inval, || root.detach(sys, 0));
    w.fails(Errno::Inval, || user.detach(id, -1));
    w.fails(Errno::Srch, || user.detach(id, 99_999));
    let child = kernel.spawn(Some(w.user()), Credentials::user(1000));
    w.fails(Errno::Srch, || user.detach(id, child));
    // The child is monitored (by another PMC), but not by this one.
    let second = user.allocate(AllocateRequest::iap(CYCLES)).unwrap();
    user.attach(second, child).unwrap();
    w.fails(Errno::Inval, || user.detach(id, child));
    user.detach(second, child).unwrap();
    w.fails(Errno::Srch, || user.detach(second, child));
}

#[test]
fn start_errors() {
    let w = World::skylake();
    let user = w.client_as(w.user());
    let root = w.client_as(w.root());
    let logged = user
        .allocate(AllocateRequest::iap(INSTRUCTIONS).with_flags(PmcFlags::LOG_PROCEXIT))
        .unwrap();
    w.fails(Errno::Doofus, || user.start(logged));
    let csw =
        user.allocate(AllocateRequest::iap(CYCLES).with_flags(PmcFlags::LOG_PROCCSW)).unwrap();
    w.fails(Errno::Doofus, || user.start(csw));
    let ss = AllocateRequest::iap(INSTRUCTIONS).in_mode(Mode::SystemSampling, Some(0));
    let ss = root.allocate(ss.with_count(100_000)).unwrap();
    w.fails(Errno::Doofus, || root.start(ss));
    // Detached from every target: ESRCH.
    let kernel = w.driver.kernel();
    let child = kernel.spawn(Some(w.user()), Credentials::user(1000));
    let id = user.allocate(AllocateRequest::iaf(event::IAF_INSTR_RETIRED_ANY)).unwrap();
    user.attach(id, child).unwrap();
    user.detach(id, child).unwrap();
    w.fails(Errno::Srch, || user.start(id));
    // A system PMC on a CPU that went offline: ENXIO for start and stop.
    let sc =
        root.allocate(AllocateRequest::iap(CYCLES).in_mode(Mode::SystemCounting, Some(1))).unwrap();
    kernel.set_cpu_active(1, false);
    w.fails(Errno::Nxio, || root.start(sc));
    kernel.set_cpu_active(1, true);
    root.start(sc).unwrap();
    kernel.set_cpu_active(1, false);
    w.fails(Errno::Nxio, || root.stop(sc));
    w.fails(Errno::Nxio, || root.read(sc));
    kernel.set_cpu_active(1, true);
    root.stop(sc).unwrap();
}

#[test]
fn rw_setcount_and_getmsr_errors() {
    let w = World::skylake();
    let user = w.client_as(w.user());
    let root = w.client_as(w.root());
    let id = user.allocate(AllocateRequest::iap(INSTRUCTIONS)).unwrap();
    w.fails(Errno::Inval, || user.rw(id, 0, 0));
    w.fails(Errno::Inval, || user.rw(id, 0x40, 0));
    w.fails(Errno::Inval, || user.rw(id, 0x30 | 0x2, 0));
    user.start(id).unwrap();
    w.fails(Errno::Busy, || user.write(id, 5));
    w.fails(Errno::Busy, || user.rw(id, 0x30, 5));
    w.fails(Errno::Busy, || user.set_count(id, 5));
    user.stop(id).unwrap();
    user.write(id, 5).unwrap();
    assert_eq!(user.read(id), Ok(5));
    // Read and write in one call: the old value comes back, the new one stays.
    assert_eq!(user.rw(id, 0x30, 9), Ok(5));
    assert_eq!(user.read(id), Ok(9));
    let sys = root.allocate(AllocateRequest::tsc(0)).unwrap();
    w.fails(Errno::Inval, || root.get_msr(sys));
    let desc =
        user.allocate(AllocateRequest::iap(CYCLES).with_flags(PmcFlags::DESCENDANTS)).unwrap();
    user.attach(desc, 0).unwrap();
    w.fails(Errno::Inval, || user.get_msr(desc));
    let child = w.driver.kernel().spawn(Some(w.user()), Credentials::user(1000));
    let other = user.allocate(AllocateRequest::iaf(event::IAF_CPU_CLK_UNHALTED_CORE)).unwrap();
    user.attach(other, child).unwrap();
    w.fails(Errno::Inval, || user.get_msr(other));
    let code = w.driver.register_soft_event("PAGE_FAULT.ALL").unwrap();
    let soft = user.allocate(AllocateRequest::soft(code)).unwrap();
    user.attach(soft, 0).unwrap();
    w.fails(Errno::NoSys, || user.get_msr(soft));
}

#[test]
fn log_operations_without_a_log_are_einval() {
    let w = World::skylake();
    let c = w.client_as(w.user());
    let mut configure = PmcOpConfigureLog { pm_flags: 1, pm_logfd: 3 };
    w.fails(Errno::Inval, || c.call(Op::ConfigureLog, &mut configure));
    let mut close = PmcOpConfigureLog { pm_flags: 0, pm_logfd: -1 };
    w.fails(Errno::Inval, || c.call(Op::ConfigureLog, &mut close));
    w.fails(Errno::Inval, || c.flush_log());
    w.fails(Errno::Inval, || c.close_log());
    w.fails(Errno::Inval, || c.call(Op::WriteLog, &mut PmcOpWriteLog { pm_userdata: 7 }));
}

#[test]
fn dynamic_event_info_is_for_the_soft_class_only() {
    let w = World::skylake();
    let c = w.client_as(w.user());
    let hard = w.driver.register_soft_event("CLOCK.HARD").unwrap();
    let faults = w.driver.register_soft_event("PAGE_FAULT.ALL").unwrap();
    assert_eq!(w.driver.register_soft_event("CLOCK.HARD"), Ok(hard));
    assert_eq!(w.driver.register_soft_event(""), Err(Errno::Inval));
    assert_eq!(w.driver.register_soft_event(&"X".repeat(64)), Err(Errno::Inval));
    let events = c.dyn_events(Class::Soft.as_u32()).unwrap();
    assert_eq!(events, [("CLOCK.HARD".to_string(), hard), ("PAGE_FAULT.ALL".to_string(), faults)]);
    assert_eq!(hard, event::SOFT_FIRST);
    w.fails(Errno::Inval, || c.dyn_events(Class::Iap.as_u32()));
}

#[test]
fn cpu_info_describes_the_classes() {
    let w = World::skylake();
    let info = w.client_as(w.user()).cpu_info().unwrap();
    assert_eq!((info.pm_ncpu, info.pm_npmc, info.pm_nclass), (2, 16 + 1 + 4 + 3, 4));
    let classes: Vec<(u32, u32, u32)> =
        info.pm_classes[..4].iter().map(|c| (c.pm_class, c.pm_width, c.pm_num)).collect();
    assert_eq!(classes, [(0x0F, 64, 16), (0x00, 64, 1), (0x07, 48, 4), (0x06, 48, 3)]);
    assert_eq!(info.pm_cputype, hwpmc::abi::cpu_type::INTEL_SKYLAKE);
    let vm = world(PmuModel::no_pmu_vm(), 1);
    let info = vm.client_as(vm.user()).cpu_info().unwrap();
    assert_eq!((info.pm_npmc, info.pm_nclass), (17, 2));
    assert_eq!(info.pm_cputype, hwpmc::abi::cpu_type::GENERIC);
    vm.fails(Errno::Inval, || vm.client_as(vm.user()).allocate(AllocateRequest::iap(INSTRUCTIONS)));
}

#[test]
fn rows_show_their_disposition_and_owner() {
    let w = World::skylake();
    let user = w.client_as(w.user());
    let root = w.client_as(w.root());
    user.allocate(AllocateRequest::iap(INSTRUCTIONS)).unwrap();
    root.allocate(AllocateRequest::iap(CYCLES).in_mode(Mode::SystemCounting, Some(1))).unwrap();
    let cpu1 = root.pmc_info(1).unwrap();
    assert_eq!(disposition(&cpu1, 17), Disposition::Thread.as_u32());
    assert_eq!(disposition(&cpu1, 18), Disposition::Standalone.as_u32());
    assert_eq!(disposition(&cpu1, 19), Disposition::Free.as_u32());
    assert_eq!(cpu1[18].pm_ownerpid, w.root());
    assert_eq!(cpu1[18].pm_mode, Mode::SystemCounting.as_u32());
    assert_eq!(&cpu1[18].pm_name[..6], b"IAP-1\0");
    assert_eq!(&cpu1[16].pm_name[..6], b"TSC-0\0");
    assert_eq!(cpu1[19].pm_ownerpid, -1);
}
