//! Records of process life — PROCFORK, PROC_CREATE, PROCEXEC, THR_CREATE, THR_EXIT, SYSEXIT — go
//! to owners of running system-sampling PMCs (who see every process) and, for fork and exec, to
//! owners of PMCs attached to the process.

use hwpmc::abi::{Mode, Op, PMC_ID_INVALID, PmcFlags, PmcOpConfigureLog};
use hwpmc::{ExecInfo, Pid, Tunables, UserPtr};
use hwpmc_sim::{
    AllocateRequest, Credentials, PmcClient, PmuModel, SimDriver, SinkId, SinkKind, load_driver,
};
use pmclog::Records;

fn logging_owner(driver: &SimDriver, credentials: Credentials) -> (Pid, SinkId) {
    let kernel = driver.kernel();
    let pid = kernel.spawn(None, credentials);
    let fd = kernel.open_sink(pid, SinkKind::Writable);
    let mut configure = PmcOpConfigureLog { pm_flags: 0, pm_logfd: fd };
    PmcClient::new(driver, pid).call(Op::ConfigureLog, &mut configure).unwrap();
    (pid, kernel.sink_of(pid, fd).unwrap())
}

fn records(driver: &SimDriver, owner: Pid, sink: SinkId) -> Vec<String> {
    PmcClient::new(driver, owner).call_raw(Op::FlushLog.as_u32(), UserPtr::NULL).unwrap();
    let bytes = driver.kernel().sink_bytes(sink);
    Records::new(&bytes)
        .map(|e| format!("{:?}", e.unwrap().record))
        .filter(|r| !r.starts_with("Initialize") && !r.starts_with("PmcAllocate"))
        .collect()
}

#[test]
fn system_sampling_owners_see_every_process_s_life() {
    let driver = load_driver(PmuModel::skylake(), 2, Tunables::default());
    let kernel = driver.kernel().clone();
    let (root, sink) = logging_owner(&driver, Credentials::root());
    let ss = AllocateRequest::iap(0x00C0).in_mode(Mode::SystemSampling, Some(0));
    let id = PmcClient::new(&driver, root).allocate(ss.with_count(1 << 20)).unwrap();
    PmcClient::new(&driver, root).start(id).unwrap();
    let parent = kernel.spawn(None, Credentials::user(1000));
    kernel.with_process(parent, |p| p.path = b"/usr/local/bin/a-very-long-command-name".to_vec());
    let child = kernel.fork(parent).unwrap();
    driver.process_fork(parent, child);
    let thread = kernel.add_thread(child).unwrap();
    driver.thread_create(child, thread);
    driver.thread_exit(child, thread);
    let exec = ExecInfo {
        path: b"/bin/ls",
        base_addr: 0x1000,
        dyn_addr: 0x2000,
        credentials_changed: false,
    };
    driver.process_exec(child, &exec);
    kernel.begin_exit(child);
    driver.process_exit(child);
    let comm: Vec<u8> = b"a-very-long-command".to_vec();
    assert_eq!(
        records(&driver, root, sink),
        [
            format!("ProcFork(ProcFork {{ old_pid: {parent}, new_pid: {child} }})"),
            format!("ProcCreate(ProcCreate {{ pid: {child}, flags: 0, comm: {comm:?} }})"),
            format!(
                "ThrCreate(ThrCreate {{ tid: {thread}, pid: {child}, flags: 0, name: {comm:?} }})"
            ),
            format!("ThrExit(ThrExit {{ tid: {thread} }})"),
            format!(
                "ProcExec(ProcExec {{ pid: {child}, pmcid: {PMC_ID_INVALID}, base_addr: 4096, \
                 dyn_addr: 8192, path: {:?} }})",
                b"/bin/ls"
            ),
            format!("SysExit(SysExit {{ pid: {child} }})"),
        ]
    );
}

#[test]
fn owners_following_a_process_see_its_forks_and_execs() {
    let driver = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let kernel = driver.kernel().clone();
    let (owner, sink) = logging_owner(&driver, Credentials::user(1000));
    let target = kernel.spawn(None, Credentials::user(1000));
    let client = PmcClient::new(&driver, owner);
    let id =
        client.allocate(AllocateRequest::iap(0x00C0).with_flags(PmcFlags::DESCENDANTS)).unwrap();
    client.attach(id, target).unwrap();
    let child = kernel.fork(target).unwrap();
    driver.process_fork(target, child);
    let exec = ExecInfo { path: b"/bin/sh", base_addr: 0, dyn_addr: 0, credentials_changed: false };
    driver.process_exec(child, &exec);
    let log = records(&driver, owner, sink);
    assert_eq!(
        log[1..],
        [
            format!("ProcFork(ProcFork {{ old_pid: {target}, new_pid: {child} }})"),
            format!(
                "ProcExec(ProcExec {{ pid: {child}, pmcid: {id}, base_addr: 0, dyn_addr: 0, \
                 path: {:?} }})",
                b"/bin/sh"
            ),
        ]
    );
    assert!(log[0].starts_with("PmcAttach"), "{log:?}");
    // An unrelated process's life is nobody's business here.
    let other = kernel.spawn(None, Credentials::user(1000));
    let other_child = kernel.fork(other).unwrap();
    driver.process_fork(other, other_child);
    assert_eq!(records(&driver, owner, sink).len(), log.len());
}
