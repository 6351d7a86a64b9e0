//! Records of process life — PROCFORK, PROC_CREATE, PROCEXEC, THR_CREATE, THR_EXIT, SYSEXIT — go
//! to owners of running system-sampling PMCs (who see every process) and, for fork and exec, to
//! owners of PMCs attached to the process. MAP_IN and MAP_OUT records name the executables a
//! sampling log's program counters fall in.

use hwpmc::abi::{Mode, PMC_ID_INVALID, PmcFlags, event};
use hwpmc::{ExecInfo, Pid, Tunables};
use hwpmc_sim::{
    AllocateRequest, Credentials, PmcClient, PmuModel, SimDriver, SinkId, SinkKind, load_driver,
};
use pmclog::Records;

fn logging_owner(driver: &SimDriver, credentials: Credentials) -> (Pid, SinkId) {
    let kernel = driver.kernel();
    let pid = kernel.spawn(None, credentials);
    let fd = kernel.open_sink(pid, SinkKind::Writable);
    PmcClient::new(driver, pid).configure_log(fd).unwrap();
    (pid, kernel.sink_of(pid, fd).unwrap())
}

fn records(driver: &SimDriver, owner: Pid, sink: SinkId) -> Vec<String> {
    PmcClient::new(driver, owner).flush_log().unwrap();
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

fn map_in(pid: Pid, start: u64, path: &[u8]) -> String {
    format!("MapIn(MapIn {{ pid: {pid}, start: {start}, path: {path:?} }})")
}

#[test]
fn attaching_a_sampling_pmc_logs_the_target_s_executable_mappings() {
    let driver = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let kernel = driver.kernel().clone();
    let (owner, sink) = logging_owner(&driver, Credentials::user(1000));
    let target = kernel.spawn(None, Credentials::user(1000));
    kernel.with_process(target, |p| {
        p.mappings.push((0x40_0000, 0x40_8000, b"/bin/prog".to_vec()));
        p.mappings.push((0x8_0000_0000, 0x8_0001_0000, b"/lib/libc.so.7".to_vec()));
    });
    let client = PmcClient::new(&driver, owner);
    let sampling = AllocateRequest::iap(0x00C0).in_mode(Mode::ThreadSampling, None);
    let id = client.allocate(sampling.with_count(1 << 16)).unwrap();
    client.attach(id, target).unwrap();
    let log = records(&driver, owner, sink);
    assert!(log[0].starts_with("PmcAttach"), "{log:?}");
    assert_eq!(
        log[1..],
        [map_in(target, 0x40_0000, b"/bin/prog"), map_in(target, 0x8_0000_0000, b"/lib/libc.so.7")]
    );
}

#[test]
fn attaching_a_counting_pmc_logs_no_mappings() {
    let driver = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let kernel = driver.kernel().clone();
    let (owner, sink) = logging_owner(&driver, Credentials::user(1000));
    let target = kernel.spawn(None, Credentials::user(1000));
    kernel.with_process(target, |p| p.mappings.push((0x40_0000, 0x40_8000, b"/bin/x".to_vec())));
    let client = PmcClient::new(&driver, owner);
    let id = client.allocate(AllocateRequest::iap(0x00C0)).unwrap();
    client.attach(id, target).unwrap();
    let log = records(&driver, owner, sink);
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(log[0].starts_with("PmcAttach"), "{log:?}");
}

#[test]
fn system_sampling_start_logs_every_process_s_mappings_once() {
    let driver = load_driver(PmuModel::skylake(), 2, Tunables::default());
    let kernel = driver.kernel().clone();
    let a = kernel.spawn(None, Credentials::user(1000));
    let b = kernel.spawn(None, Credentials::user(1001));
    kernel.with_process(a, |p| p.mappings.push((0x1000, 0x2000, b"/bin/a".to_vec())));
    kernel.with_process(b, |p| p.mappings.push((0x3000, 0x4000, b"/bin/b".to_vec())));
    let (root, sink) = logging_owner(&driver, Credentials::root());
    let client = PmcClient::new(&driver, root);
    let ss = |cpu| AllocateRequest::iap(0x00C0).in_mode(Mode::SystemSampling, Some(cpu));
    let first = client.allocate(ss(0).with_count(1 << 20)).unwrap();
    let second = client.allocate(ss(1).with_count(1 << 20)).unwrap();
    client.start(first).unwrap();
    client.start(second).unwrap();
    client.stop(first).unwrap();
    client.start(first).unwrap();
    let log = records(&driver, root, sink);
    assert_eq!(log, [map_in(a, 0x1000, b"/bin/a"), map_in(b, 0x3000, b"/bin/b")]);
}

#[test]
fn mmap_and_munmap_reach_system_samplers_and_attached_samplers_only() {
    let driver = load_driver(PmuModel::skylake(), 1, Tunables::default());
    let kernel = driver.kernel().clone();
    let (root, root_sink) = logging_owner(&driver, Credentials::root());
    let (follower, follower_sink) = logging_owner(&driver, Credentials::user(1000));
    let (counter, counter_sink) = logging_owner(&driver, Credentials::user(1000));
    let target = kernel.spawn(None, Credentials::user(1000));
    let ss = AllocateRequest::iap(0x00C0).in_mode(Mode::SystemSampling, Some(0));
    let id = PmcClient::new(&driver, root).allocate(ss.with_count(1 << 20)).unwrap();
    PmcClient::new(&driver, root).start(id).unwrap();
    let ps = AllocateRequest::iap(0x00C0).in_mode(Mode::ThreadSampling, None);
    let follower_client = PmcClient::new(&driver, follower);
    let id = follower_client.allocate(ps.with_count(1 << 16)).unwrap();
    follower_client.attach(id, target).unwrap();
    let counter_client = PmcClient::new(&driver, counter);
    // (A fixed counter: two PMCs on one row cannot share a target.)
    let id = counter_client.allocate(AllocateRequest::iaf(event::IAF_INSTR_RETIRED_ANY)).unwrap();
    counter_client.attach(id, target).unwrap();
    let before = |driver: &SimDriver, owner, sink| records(driver, owner, sink).len();
    let (root_before, follower_before, counter_before) = (
        before(&driver, root, root_sink),
        before(&driver, follower, follower_sink),
        before(&driver, counter, counter_sink),
    );
    // A path with a NUL is cut there, as the kernel's string would be.
    driver.mmap(target, 0x7000_0000, 0x7001_0000, b"/lib/libm.so.5\0garbage");
    driver.munmap(target, 0x7000_0000, 0x7001_0000);
    let expected = [
        map_in(target, 0x7000_0000, b"/lib/libm.so.5"),
        format!(
            "MapOut(MapOut {{ pid: {target}, start: {}, end: {} }})",
            0x7000_0000u64, 0x7001_0000u64
        ),
    ];
    assert_eq!(records(&driver, root, root_sink)[root_before..], expected);
    assert_eq!(records(&driver, follower, follower_sink)[follower_before..], expected);
    assert_eq!(records(&driver, counter, counter_sink).len(), counter_before);
}
