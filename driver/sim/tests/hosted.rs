//! PMCs the host kernel counts itself (`hwpmc::hosted`), as the Linux host's perf events do:
//! the driver keeps the rules, the bookkeeping and the log, and hands the counting to the host.
//! A scripted host stands in for perf; each test checks what the driver asked of it and what
//! the owner sees.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use hwpmc::abi::{Class, Mode, PmcFlags, event};
use hwpmc::{Errno, HostCounters, HostedEvent, HostedPmc, HostedSample, Pid, Signal, Tunables};
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{AllocateRequest, Credentials, PmuModel, SinkId, SinkKind};
use hwpmc_test_support::world::World;
use pmclog::{Record, Records};

/// A running PMC on the host: its description and what each target counted.
type Running = (HostedPmc, BTreeMap<Pid, u64>);

/// A host that counts SOFT, IAP and K8 PMCs: the test says what each target counted.
#[derive(Default)]
struct ScriptedHost {
    /// Running PMCs by token.
    running: RefCell<BTreeMap<u64, Running>>,
    /// Every call, in order.
    calls: RefCell<Vec<String>>,
    /// The errno the next start fails with.
    refuse: RefCell<Option<Errno>>,
    /// What the host was asked to check at allocation, and the errno to refuse it with.
    checked: RefCell<Vec<HostedPmc>>,
    reject: RefCell<Option<Errno>>,
}

impl ScriptedHost {
    /// Target `pid` of the running PMC `token` counted `n` more events.
    fn count(&self, token: u64, pid: Pid, n: u64) {
        let mut running = self.running.borrow_mut();
        let (_, targets) = running.get_mut(&token).expect("the PMC runs on the host");
        *targets.get_mut(&pid).expect("the host counts this target") += n;
    }

    /// The only running PMC's token and description.
    fn only(&self) -> (u64, HostedPmc) {
        let running = self.running.borrow();
        assert_eq!(running.len(), 1, "one PMC runs on the host");
        let (&token, (pmc, _)) = running.iter().next().unwrap();
        (token, *pmc)
    }

    fn calls(&self) -> Vec<String> {
        self.calls.borrow().clone()
    }
}

impl HostCounters for ScriptedHost {
    fn counts(&self, class: Class) -> bool {
        matches!(class, Class::Soft | Class::Iap | Class::K8)
    }

    fn check(&self, pmc: &HostedPmc) -> Result<(), Errno> {
        self.checked.borrow_mut().push(*pmc);
        self.reject.borrow_mut().take().map_or(Ok(()), Err)
    }

    fn start(&self, pmc: &HostedPmc, targets: &[Pid]) -> Result<(), Errno> {
        self.calls.borrow_mut().push(format!("start {targets:?}"));
        if let Some(errno) = self.refuse.borrow_mut().take() {
            return Err(errno);
        }
        let targets = if targets.is_empty() { vec![-1] } else { targets.to_vec() };
        let counts = targets.into_iter().map(|pid| (pid, 0)).collect();
        self.running.borrow_mut().insert(pmc.token, (*pmc, counts));
        Ok(())
    }

    fn stop(&self, token: u64, counted: &mut dyn FnMut(Pid, u64)) {
        self.calls.borrow_mut().push("stop".into());
        let (_, targets) = self.running.borrow_mut().remove(&token).expect("stop a running PMC");
        for (pid, n) in targets {
            counted(pid, n);
        }
    }

    fn read(&self, token: u64) -> u64 {
        self.running.borrow().get(&token).map_or(0, |(_, t)| t.values().sum())
    }

    fn detach(&self, token: u64, pid: Pid) -> u64 {
        self.calls.borrow_mut().push(format!("detach {pid}"));
        let mut running = self.running.borrow_mut();
        running.get_mut(&token).and_then(|(_, t)| t.remove(&pid)).unwrap_or(0)
    }
}

/// The world of the hosted tests: a driver on two CPUs whose kernel counts PMCs through a
/// scripted host, with a soft event registered, and the owner's process.
struct Hosted {
    world: World,
    host: Rc<ScriptedHost>,
    soft: u32,
}

impl std::ops::Deref for Hosted {
    type Target = World;

    fn deref(&self) -> &World {
        &self.world
    }
}

impl Hosted {
    fn new() -> Hosted {
        Hosted::with(Tunables::default())
    }

    fn with(tunables: Tunables) -> Hosted {
        Hosted::on(PmuModel::skylake(), tunables)
    }

    fn on(model: PmuModel, tunables: Tunables) -> Hosted {
        let host = Rc::new(ScriptedHost::default());
        let world =
            World::builder(model).cpus(2).tunables(tunables).host_counters(host.clone()).build();
        let soft = world.driver.register_soft_event("PAGE_FAULT.ALL").unwrap();
        Hosted { world, host, soft }
    }

    /// A log for the owner; returns its file.
    fn log(&self) -> SinkId {
        let fd = self.kernel().open_sink(self.pid, SinkKind::Writable);
        self.client().configure_log(fd).unwrap();
        self.kernel().sink_of(self.pid, fd).unwrap()
    }

    fn records(&self, sink: SinkId) -> Vec<String> {
        self.client().flush_log().unwrap();
        let bytes = self.kernel().sink_bytes(sink);
        Records::new(&bytes)
            .map(|entry| format!("{:?}", entry.expect("the log decodes").record))
            .collect()
    }
}

#[test]
fn a_hosted_process_pmc_counts_what_the_host_counted_across_stop_and_start() {
    let w = Hosted::new();
    let c = w.client();
    let id = c.allocate(AllocateRequest::soft(w.soft).with_count(5)).unwrap();
    c.start(id).unwrap();
    let (token, pmc) = w.host.only();
    assert_eq!(pmc.event, HostedEvent::Soft { event: w.soft });
    assert_eq!(pmc.id.to_u32(), id);
    assert_eq!((pmc.user, pmc.kernel, pmc.reload), (true, true, 0));
    assert_eq!(w.host.calls(), [format!("start [{}]", w.pid)], "PMCSTART attached the owner");

    w.host.count(token, w.pid, 1000);
    assert_eq!(c.read(id).unwrap(), 1005, "the initial count plus the host's");
    c.stop(id).unwrap();
    assert_eq!(c.read(id).unwrap(), 1005, "stopped: the count stays");
    c.start(id).unwrap();
    let (token, _) = w.host.only();
    w.host.count(token, w.pid, 20);
    assert_eq!(c.read(id).unwrap(), 1025);
    assert_eq!(c.write(id, 0), Err(Errno::Busy), "a running PMC is not written");
    c.release(id).unwrap();
    assert!(w.host.running.borrow().is_empty(), "release stops the host's counting");
}

#[test]
fn the_driver_never_counts_a_hosted_pmc_itself() {
    let w = Hosted::new();
    let c = w.client();
    let id = c.allocate(AllocateRequest::soft(w.soft)).unwrap();
    c.start(id).unwrap();
    let tid = w.kernel().threads(w.pid)[0];
    // The owner runs on CPU 0 and takes software events there: a PMC the driver counted would
    // move; this one counts only what the host says.
    w.driver.switch_in(0, w.pid, tid);
    for _ in 0..10 {
        w.driver.soft_event(0, w.soft, &hwpmc::TrapFrame::default());
    }
    w.driver.switch_out(0, w.pid, tid);
    assert_eq!(c.read(id).unwrap(), 0);
    assert_eq!(c.get_msr(id), Err(Errno::NoSys), "no RDPMC index for a counter the host owns");
}

#[test]
fn a_hosted_pmu_event_reaches_the_host_with_its_checked_configuration() {
    let w = Hosted::new();
    let c = w.client();
    // INST_RETIRED.ANY_P counted in user mode only (USR set, OS clear).
    let id = c.allocate(AllocateRequest::iap(0x0001_00C0)).unwrap();
    c.start(id).unwrap();
    let (_, pmc) = w.host.only();
    assert_eq!(pmc.id.class, Class::Iap);
    let HostedEvent::Raw { class: Class::Iap, config: evtsel } = pmc.event else {
        panic!("an IAP event: {:?}", pmc.event)
    };
    assert_eq!(evtsel & 0xFFFF, 0x00C0, "event select and umask");
    assert_eq!((pmc.user, pmc.kernel), (true, false));
    assert_eq!(evtsel & (1 << 22 | 1 << 20), 0, "EN and INT are the host's business");
    c.release(id).unwrap();
}

#[test]
fn on_an_amd_cpu_a_k8_pmc_reaches_the_host_with_its_perf_ctl_image() {
    let w = Hosted::on(PmuModel::zen4(), Tunables::default());
    let c = w.client();
    // ex_ret_brn (0x0C2) with a 12-bit neighbour's high bits, user mode only, CMASK 2, EDGE.
    let image = 0x1_0000_0000 | 2 << 24 | 1 << 18 | 1 << 16 | 0xC2;
    let id = c.allocate(AllocateRequest::k8(image)).unwrap();
    c.start(id).unwrap();
    let (token, pmc) = w.host.only();
    assert_eq!(pmc.id.class, Class::K8);
    assert_eq!(pmc.event, HostedEvent::Raw { class: Class::K8, config: image });
    assert_eq!((pmc.user, pmc.kernel), (true, false));
    w.host.count(token, w.pid, 4321);
    assert_eq!(c.read(id), Ok(4321));
    c.release(id).unwrap();
    // Reserved bits never reach the host.
    assert_eq!(c.allocate(AllocateRequest::k8(1 << 19 | 0xC2)), Err(Errno::Inval));
    assert!(
        w.host
            .checked
            .borrow()
            .iter()
            .all(|p| p.event != HostedEvent::Raw { class: Class::K8, config: 1 << 19 | 0xC2 })
    );
}

#[test]
fn an_offcore_response_event_is_not_handed_to_a_host_that_gets_no_response_value() {
    let w = Hosted::new();
    // OFFCORE_RESPONSE_0 (0xB7/0x01) with a response value Skylake defines: the host would be
    // given the event select only, and count with whatever its MSR holds.
    let request = AllocateRequest::iap(0x01B7).with_rsp(0x1_0001);
    assert_eq!(w.client().allocate(request), Err(Errno::OpNotSupp));
    assert!(w.host.checked.borrow().is_empty(), "refused before the host is asked");
    // Without a value it still reads the MSR (value 0); other events are the host's.
    assert_eq!(w.client().allocate(AllocateRequest::iap(0x01B7)), Err(Errno::OpNotSupp));
    w.client().allocate(AllocateRequest::iap(0x01C0)).unwrap();
}

#[test]
fn fixed_counters_the_host_does_not_count_still_count_on_the_pmu() {
    let w = Hosted::new();
    let kernel = w.kernel().clone();
    let c = w.client();
    let id = c.allocate(AllocateRequest::iaf(event::IAF_INSTR_RETIRED_ANY)).unwrap();
    c.start(id).unwrap();
    assert!(w.host.running.borrow().is_empty(), "IAF is not the host's");
    let tid = kernel.threads(w.pid)[0];
    kernel.hardware().set_current_cpu(0);
    w.driver.switch_in(0, w.pid, tid);
    kernel.hardware().pmu(0).retire(Ring::User, &Work { instructions: 1234, ..Work::default() });
    w.driver.switch_out(0, w.pid, tid);
    assert_eq!(c.read(id).unwrap(), 1234);
}

#[test]
fn a_refused_start_changes_nothing() {
    let w = Hosted::new();
    let c = w.client();
    let id = c.allocate(AllocateRequest::soft(w.soft)).unwrap();
    *w.host.refuse.borrow_mut() = Some(Errno::Perm);
    assert_eq!(c.start(id), Err(Errno::Perm), "the host's errno");
    assert!(w.host.running.borrow().is_empty());
    // Not attached to its owner, not marked attached: it can still be attached elsewhere.
    let other = w.kernel().spawn(None, Credentials::user(1000));
    c.attach(id, other).unwrap();
    c.start(id).unwrap();
    assert_eq!(w.host.only().1.id.to_u32(), id);
    assert_eq!(w.host.calls().last().unwrap(), &format!("start [{other}]"));
}

#[test]
fn a_target_that_exits_is_detached_from_the_host_with_its_share_logged() {
    let w = Hosted::new();
    let sink = w.log();
    let c = w.client();
    let target = w.kernel().spawn(None, Credentials::user(1000));
    let request = AllocateRequest::soft(w.soft).with_flags(PmcFlags::LOG_PROCEXIT);
    let id = c.allocate(request).unwrap();
    c.attach(id, target).unwrap();
    c.start(id).unwrap();
    let (token, _) = w.host.only();
    w.host.count(token, target, 77);
    w.kernel().begin_exit(target);
    w.driver.process_exit(target);
    w.kernel().reap(target);
    assert_eq!(w.host.calls().last().unwrap(), &format!("detach {target}"));
    assert_eq!(c.read(id).unwrap(), 77, "the exited target's events stay counted");
    let exit = format!("ProcExit(ProcExit {{ pmcid: {id}, pid: {target}, value: 77 }})");
    assert!(w.records(sink).contains(&exit), "PROCEXIT with the target's share");
    assert!(w.kernel().take_signals().contains(&(w.pid, Signal::Io)), "lost its last target");
}

#[test]
fn a_hosted_system_pmc_starts_on_its_cpu() {
    let w = Hosted::new();
    w.kernel().set_unprivileged_syspmcs(true);
    let c = w.client();
    let request = AllocateRequest::soft(w.soft).in_mode(Mode::SystemCounting, Some(1));
    let id = c.allocate(request).unwrap();
    c.start(id).unwrap();
    let (token, pmc) = w.host.only();
    assert_eq!(pmc.id.cpu, Some(1));
    assert_eq!(w.host.calls(), ["start []"]);
    w.host.count(token, -1, 9);
    assert_eq!(c.read(id).unwrap(), 9);
    c.stop(id).unwrap();
    assert_eq!(c.read(id).unwrap(), 9);
}

/// A running sampling SOFT PMC with callchains, attached to its owner, with a log.
fn sampling(w: &Hosted) -> (u32, u64, SinkId) {
    let sink = w.log();
    let c = w.client();
    let request = AllocateRequest::soft(w.soft)
        .in_mode(Mode::ThreadSampling, None)
        .with_flags(PmcFlags::CALLCHAIN)
        .with_count(100);
    let id = c.allocate(request).unwrap();
    c.start(id).unwrap();
    let (token, pmc) = w.host.only();
    assert_eq!(pmc.reload, 100);
    assert!(pmc.flags.contains(PmcFlags::CALLCHAIN));
    (id, token, sink)
}

#[test]
fn hosted_samples_become_callchain_records_of_the_owners_log() {
    let w = Hosted::new();
    let (id, token, sink) = sampling(&w);
    let tid = w.kernel().threads(w.pid)[0];
    let pcs = [0x40_1000, 0x40_2000, 0x40_3000];
    let sample = HostedSample { cpu: 1, pid: w.pid, tid, user: true, pcs: &pcs, tsc: None };
    w.driver.hosted_sample(token, &sample);
    w.driver.hosted_sample(token, &HostedSample { user: false, pcs: &pcs[..1], ..sample });
    let chains: Vec<String> =
        w.records(sink).into_iter().filter(|r| r.starts_with("Callchain")).collect();
    assert_eq!(chains.len(), 2, "{chains:?}");
    let expect = |flags: u32, pcs: &str| {
        format!(
            "Callchain(Callchain {{ pid: {}, tid: {tid}, pmcid: {id}, cpuflags: CallchainFlags({}), pcs: {pcs} }})",
            w.pid,
            1 << 16 | flags
        )
    };
    assert_eq!(chains[0], expect(1, "[0x401000, 0x402000, 0x403000]"));
    assert_eq!(chains[1], expect(0, "[0x401000]"));
}

#[test]
fn hosted_samples_count_until_release_and_others_are_ignored() {
    let w = Hosted::new();
    let (id, token, sink) = sampling(&w);
    let tid = w.kernel().threads(w.pid)[0];
    let sample = HostedSample { cpu: 0, pid: w.pid, tid, user: true, pcs: &[0x40_1000], tsc: None };
    // Taken before the stop, delivered after it: still the PMC's.
    w.client().stop(id).unwrap();
    w.driver.hosted_sample(token, &sample);
    let chains = |w: &Hosted| w.records(sink).iter().filter(|r| r.starts_with("Callchain")).count();
    assert_eq!(chains(&w), 1);
    w.client().release(id).unwrap();
    w.driver.hosted_sample(token, &sample);
    w.driver.hosted_sample(0xdead_beef, &sample);
    w.driver.hosted_sample(0, &sample);
    assert_eq!(chains(&w), 1, "nothing for a released PMC or an unknown token");
    assert_eq!(w.client().driver_stats().unwrap().pm_intr_ignored, 3);
}

#[test]
fn the_host_may_refuse_a_pmc_at_allocation_and_nothing_is_allocated() {
    let w = Hosted::new();
    *w.host.reject.borrow_mut() = Some(Errno::OpNotSupp);
    let c = w.client();
    let request = AllocateRequest::soft(w.soft).with_flags(PmcFlags::LOG_PROCEXIT);
    assert_eq!(c.allocate(request), Err(Errno::OpNotSupp));
    let checked = w.host.checked.borrow().clone();
    assert_eq!(checked.len(), 1);
    assert_eq!(checked[0].token, 0, "no PMC yet");
    assert!(checked[0].flags.contains(PmcFlags::LOG_PROCEXIT));
    // Every SOFT row is still free: as many PMCs as rows can be allocated.
    let rows = c.cpu_info().unwrap().pm_classes[0].pm_num;
    for _ in 0..rows {
        c.allocate(AllocateRequest::soft(w.soft)).unwrap();
    }
}

#[test]
fn the_kernels_images_are_logged_once_at_the_first_sampling_start() {
    let w = Hosted::new();
    w.kernel().set_kernel_image(0xffff_ffff_8000_0000, "/boot/kernel/kernel");
    let (id, _, sink) = sampling(&w);
    w.client().stop(id).unwrap();
    w.client().start(id).unwrap();
    w.client().flush_log().unwrap();
    let bytes = w.kernel().sink_bytes(sink);
    let kernel: Vec<(u64, Vec<u8>)> = Records::new(&bytes)
        .filter_map(|entry| match entry.expect("the log decodes").record {
            Record::MapIn(m) if m.pid == -1 => Some((m.start, m.path.to_vec())),
            _ => None,
        })
        .collect();
    assert_eq!(kernel, [(0xffff_ffff_8000_0000, b"/boot/kernel/kernel".to_vec())]);
}

#[test]
fn a_hosted_sample_keeps_the_time_it_was_taken_at() {
    let w = Hosted::new();
    let (_, token, sink) = sampling(&w);
    let tid = w.kernel().threads(w.pid)[0];
    let pcs = [0x40_1000];
    let taken = HostedSample { cpu: 0, pid: w.pid, tid, user: true, pcs: &pcs, tsc: Some(777) };
    w.driver.hosted_sample(token, &taken);
    w.client().flush_log().unwrap();
    let bytes = w.kernel().sink_bytes(sink);
    let stamps: Vec<u64> = Records::new(&bytes)
        .map(|e| e.expect("the log decodes"))
        .filter(|e| matches!(e.record, Record::Callchain(_)))
        .map(|e| e.tsc)
        .collect();
    assert_eq!(stamps, [777]);
}

#[test]
fn hosted_callchains_are_cut_at_the_callchain_depth() {
    let w = Hosted::with(Tunables { callchain_depth: 4, ..Tunables::default() });
    let (_, token, sink) = sampling(&w);
    let tid = w.kernel().threads(w.pid)[0];
    let pcs: Vec<u64> = (1..=10).map(|i| i * 0x1000).collect();
    w.driver.hosted_sample(
        token,
        &HostedSample { cpu: 0, pid: w.pid, tid, user: true, pcs: &pcs, tsc: None },
    );
    let records = w.records(sink);
    let chain = records.iter().find(|r| r.starts_with("Callchain")).expect("a CALLCHAIN");
    assert!(chain.ends_with("pcs: [0x1000, 0x2000, 0x3000, 0x4000] })"), "{chain}");
}

#[test]
fn samples_the_host_lost_are_reported_by_dropnotify_at_the_next_tick() {
    let w = Hosted::new();
    let (_, token, sink) = sampling(&w);
    w.driver.hosted_lost(token, 3);
    assert!(!w.records(sink).iter().any(|r| r.contains("DropNotify")), "not before the tick");
    w.driver.tick(0);
    let drops = w.records(sink).iter().filter(|r| r.contains("DropNotify")).count();
    assert_eq!(drops, 1);
    w.driver.tick(0);
    let drops = w.records(sink).iter().filter(|r| r.contains("DropNotify")).count();
    assert_eq!(drops, 1, "said once");
}

#[test]
fn a_hosted_sampling_pmc_needs_a_log_only_for_another_process() {
    let w = Hosted::new();
    let c = w.client();
    let target = w.kernel().spawn(None, Credentials::user(1000));
    let request = AllocateRequest::soft(w.soft).in_mode(Mode::ThreadSampling, None);
    let id = c.allocate(request).unwrap();
    c.attach(id, target).unwrap();
    assert_eq!(c.start(id), Err(Errno::Doofus), "no log to put the samples in");
    assert!(w.host.calls().is_empty(), "the host was never asked");
}

#[test]
fn a_hosted_pmcs_core_type_is_the_hosts_to_take_or_refuse() {
    // The simulated Skylake has no hybrid cores: the driver alone would refuse a core type;
    // a host that counts the class knows its own core PMUs and decides.
    let w = Hosted::new();
    let c = w.client();
    let atom = AllocateRequest::iap(0x0001_00C0).with_flags(PmcFlags::CORE_TYPE_ATOM);
    let id = c.allocate(atom).unwrap();
    let checked = w.host.checked.borrow().last().copied().unwrap();
    assert!(checked.flags.contains(PmcFlags::CORE_TYPE_ATOM), "the host sees the core type");
    c.release(id).unwrap();
    *w.host.reject.borrow_mut() = Some(Errno::Inval);
    assert_eq!(c.allocate(atom), Err(Errno::Inval), "the host's refusal is PMCALLOCATE's");
    let both = PmcFlags::CORE_TYPE_ATOM | PmcFlags::CORE_TYPE_CORE;
    let checks = w.host.checked.borrow().len();
    assert_eq!(c.allocate(AllocateRequest::iap(0x0001_00C0).with_flags(both)), Err(Errno::Inval));
    assert_eq!(w.host.checked.borrow().len(), checks, "both core types: refused by the driver");
}
