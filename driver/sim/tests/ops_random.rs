//! Long random sequences of PMC_OP_* requests with random (often bad) arguments from several
//! processes, interleaved with context switches, work, forks and exits: no panic, no simulated
//! #GP, every failure an errno hwpmc(4) documents for that operation, and no leaked row once
//! every owner has exited. The same runs with a host that counts the SOFT and IAP classes itself
//! (as the Linux host's perf does) check the driver's hand-over too: it never stops, reads or
//! detaches a PMC the host does not run, never starts one twice, and leaves none running.

use hwpmc::abi::{
    Disposition, Mode, Op, PMC_CPU_ANY, PmcOpConfigureLog, PmcOpWriteLog, State, event,
};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use hwpmc::abi::Class;
use hwpmc::{Driver, Errno, ExecInfo, HostCounters, HostedPmc, Pid, Tid, Tunables, UserPtr};
use hwpmc_sim::kernel::{SCRATCH_BASE, SimKernel};
use hwpmc_sim::machine::SplitMix64;
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{
    AllocateRequest, Credentials, PmcClient, PmuModel, SimDriver, SimHardware, SinkKind,
};
use proptest::prelude::*;

/// The errnos hwpmc(4) documents for each operation (plus EFAULT everywhere an argument is read).
fn documented(op: Op) -> &'static [Errno] {
    use Errno::*;
    match op {
        Op::PmcAllocate => &[Fault, Inval, Nxio, Perm, OpNotSupp],
        Op::PmcAttach => &[Fault, Inval, Srch, Perm, Exist, Busy],
        Op::PmcDetach => &[Fault, Inval, Srch],
        Op::PmcStart => &[Fault, Inval, Srch, Doofus, Nxio, Busy],
        Op::PmcStop => &[Fault, Inval, Srch, Nxio],
        Op::PmcRw => &[Fault, Inval, Srch, Busy, Nxio],
        Op::PmcSetCount => &[Fault, Inval, Srch, Busy],
        Op::PmcGetMsr => &[Fault, Inval, Srch, NoSys],
        Op::PmcRelease => &[Fault, Inval, Srch],
        Op::GetCaps => &[Fault, Inval, Srch],
        Op::PmcAdmin => &[Fault, Inval, Nxio, Perm, Busy],
        Op::GetPmcInfo => &[Fault, Inval, Nxio],
        Op::GetModuleVersion => &[Fault, ProgMismatch],
        Op::GetDynEventInfo => &[Fault, Inval],
        Op::ConfigureLog => &[Fault, Inval, Busy, Badf],
        Op::WriteLog => &[Fault, Inval, NoMem],
        Op::FlushLog | Op::CloseLog => &[Inval, Io, NoSpc],
        Op::GetCpuInfo | Op::GetDriverStats => &[Fault],
    }
}

/// A host that counts SOFT, IAP and K8 PMCs and refuses one start in ten (a target perf cannot
/// measure); every call is checked against what it runs.
struct RandomHost {
    /// Running PMCs by token: their first target (−1 for a system PMC) and their count.
    running: RefCell<BTreeMap<u64, (Pid, u64)>>,
    rng: RefCell<SplitMix64>,
    /// How many starts it took.
    started: std::cell::Cell<u32>,
}

impl HostCounters for RandomHost {
    fn counts(&self, class: Class) -> bool {
        matches!(class, Class::Soft | Class::Iap | Class::K8)
    }

    fn start(&self, pmc: &HostedPmc, targets: &[Pid]) -> Result<(), Errno> {
        if self.rng.borrow_mut().below(10) == 0 {
            return Err(Errno::Srch);
        }
        assert_eq!(targets.is_empty(), pmc.id.cpu.is_some(), "targets for a process PMC only");
        let first = targets.first().copied().unwrap_or(-1);
        let previous = self.running.borrow_mut().insert(pmc.token, (first, 0));
        assert!(previous.is_none(), "PMC {:#x} started twice", pmc.token);
        self.started.set(self.started.get() + 1);
        Ok(())
    }

    fn stop(&self, token: u64, counted: &mut dyn FnMut(Pid, u64)) {
        let stopped = self.running.borrow_mut().remove(&token);
        let (pid, n) = stopped.unwrap_or_else(|| panic!("stop of {token:#x}, not running"));
        counted(pid, n);
    }

    fn read(&self, token: u64) -> u64 {
        let mut running = self.running.borrow_mut();
        let (_, n) = running.get_mut(&token).unwrap_or_else(|| panic!("read of {token:#x}"));
        *n += 1000;
        *n
    }

    fn detach(&self, token: u64, _pid: Pid) -> u64 {
        assert!(self.running.borrow().contains_key(&token), "detach from {token:#x}");
        0
    }
}

struct World {
    model: PmuModel,
    driver: SimDriver,
    processes: Vec<Pid>,
    ids: Vec<(Pid, u32)>,
    running: Vec<Option<(Pid, Tid)>>,
}

impl World {
    fn pid(&self, rng: &mut SplitMix64) -> Pid {
        let live = self.processes[rng.below(self.processes.len() as u64) as usize];
        rng.pick(&[live, live, live, 0, -1, 99_999])
    }

    /// Mostly one of the caller's own PMC ids, sometimes anyone's, sometimes garbage.
    fn id(&self, rng: &mut SplitMix64, caller: Pid) -> u32 {
        let own: Vec<u32> =
            self.ids.iter().filter(|(p, _)| *p == caller).map(|(_, id)| *id).collect();
        if !own.is_empty() && rng.chance(75) {
            own[rng.below(own.len() as u64) as usize]
        } else if !self.ids.is_empty() && rng.chance(70) {
            self.ids[rng.below(self.ids.len() as u64) as usize].1
        } else {
            rng.next() as u32
        }
    }

    fn request(&self, rng: &mut SplitMix64) -> AllocateRequest {
        let soft = event::SOFT_FIRST;
        let k8 = |config: u64, sub_class: u32| AllocateRequest {
            amd_sub_class: sub_class,
            ..AllocateRequest::k8(config)
        };
        let mut request = match rng.below(6) {
            // K8 on an AMD model: good events, reserved bits, other sub-classes, anything.
            0 | 4 | 5 if self.model.is_amd() => match rng.below(4) {
                0 => k8(rng.pick(&[0x0C0, 0x076, 0x1_0000_00C2, 0x3_00C3, 1 << 19 | 0xC0]), 0),
                1 => k8(0x0C0, rng.below(4) as u32),
                2 => k8(rng.next(), 0),
                _ => k8(0x0C0, 0),
            },
            0 => AllocateRequest::iap(rng.pick(&[0x00C0, 0x003C, 0x00C4, 0x20_00C0, 0x4F2E])),
            1 => AllocateRequest::iaf(rng.pick(&[0x10000, 0x10001, 0x10002, 0x10003])),
            2 => AllocateRequest::tsc(rng.below(3) as u32),
            3 => AllocateRequest::soft(rng.pick(&[soft, soft + 1, soft + 7])),
            4 => AllocateRequest::iap(rng.next() as u32),
            _ => AllocateRequest::iap(0x00C0),
        };
        if rng.chance(30) {
            let mode = Mode::from_u32(rng.below(5) as u32).unwrap_or(Mode::ThreadCounting);
            let cpu = if mode.is_system() { Some(rng.below(3) as u32) } else { None };
            request = request.in_mode(mode, cpu);
        }
        if rng.chance(20) {
            request.flags |= rng.pick(&[0x2, 0x4, 0x8, 0x80, 0x100, 0x40, 0x1_0000]);
        }
        if rng.chance(10) {
            request.caps = rng.next() as u32 & 0x3FFF;
        }
        if rng.chance(10) {
            request.cpu = rng.pick(&[0, 1, 2, PMC_CPU_ANY, 77]);
        }
        request.with_count(rng.pick(&[0, 1, 999, 65536, u64::MAX]))
    }

    /// One random request; returns the op and its result.
    fn step(&mut self, rng: &mut SplitMix64) -> (Op, Result<(), Errno>) {
        let owners: Vec<Pid> =
            self.ids.iter().map(|(p, _)| *p).filter(|p| self.processes.contains(p)).collect();
        let caller = if !owners.is_empty() && rng.chance(60) {
            owners[rng.below(owners.len() as u64) as usize]
        } else {
            self.processes[rng.below(self.processes.len() as u64) as usize]
        };
        let client = PmcClient::new(&self.driver, caller);
        let op = Op::from_u32(rng.below(20) as u32).unwrap();
        if rng.chance(5) {
            let bad = UserPtr(rng.pick(&[0, 8, 0xdead_0000, SCRATCH_BASE + 512 * 1024 - 4]));
            return (op, client.call_raw(op.as_u32(), bad));
        }
        let result = match op {
            Op::PmcAllocate => {
                client.allocate(self.request(rng)).map(|id| self.ids.push((caller, id)))
            }
            Op::PmcAttach => client.attach(self.id(rng, caller), self.pid(rng)),
            Op::PmcDetach => client.detach(self.id(rng, caller), self.pid(rng)),
            Op::PmcStart => client.start(self.id(rng, caller)),
            Op::PmcStop => client.stop(self.id(rng, caller)),
            Op::PmcRw => {
                client.rw(self.id(rng, caller), rng.pick(&[0x10, 0x20, 0x30, 0, 0x40]), 7).map(drop)
            }
            Op::PmcSetCount => client.set_count(self.id(rng, caller), rng.next()),
            Op::PmcGetMsr => client.get_msr(self.id(rng, caller)).map(drop),
            Op::PmcRelease => client.release(self.id(rng, caller)),
            Op::GetCaps => client.caps(self.id(rng, caller)).map(drop),
            Op::PmcAdmin => {
                let state = rng.pick(&[State::Disabled, State::Free, State::Running]);
                client.admin(rng.below(3) as i32, rng.below(26) as i32 - 1, state)
            }
            Op::GetPmcInfo => client.pmc_info(rng.below(3) as i32 - 1).map(drop),
            Op::GetModuleVersion => {
                client.module_version(Some(rng.pick(&[0x0A00_0000, 0x0A03_0000, 0]))).map(drop)
            }
            Op::GetDynEventInfo => client.dyn_events(rng.pick(&[0x0F, 0x07])).map(drop),
            Op::GetCpuInfo => client.cpu_info().map(drop),
            Op::GetDriverStats => client.driver_stats().map(drop),
            Op::ConfigureLog => {
                // Descriptor 3 is a writable file, 4 read-only, others not open.
                let fd = rng.pick(&[3, 3, 3, -1, -1, 4, 9]);
                let flags = if rng.chance(10) { 1 } else { 0 };
                client.call(
                    Op::ConfigureLog,
                    &mut PmcOpConfigureLog { pm_flags: flags, pm_logfd: fd },
                )
            }
            Op::WriteLog => {
                client.call(Op::WriteLog, &mut PmcOpWriteLog { pm_userdata: rng.next() as u32 })
            }
            Op::FlushLog | Op::CloseLog => client.call_raw(op.as_u32(), UserPtr::NULL),
        };
        (op, result)
    }

    /// Random scheduling, work, forks, execs and exits between requests.
    fn churn(&mut self, rng: &mut SplitMix64) {
        let kernel = self.driver.kernel().clone();
        let hw = kernel.hardware().clone();
        let cpu = rng.below(2) as usize;
        hw.set_current_cpu(cpu);
        match rng.below(10) {
            0..=3 => {
                if let Some((pid, tid)) = self.running[cpu].take() {
                    self.driver.switch_out(cpu as u32, pid, tid);
                }
                let pid = self.processes[rng.below(self.processes.len() as u64) as usize];
                let tid = kernel.threads(pid)[0];
                if !self.running.iter().flatten().any(|&(p, t)| p == pid && t == tid) {
                    self.driver.switch_in(cpu as u32, pid, tid);
                    self.running[cpu] = Some((pid, tid));
                }
            }
            4 | 5 => {
                let work = Work { instructions: 1 << 20, core_cycles: 3 << 20, ..Work::default() };
                let ring = if rng.chance(50) { Ring::User } else { Ring::Kernel };
                hw.pmu(cpu).retire_repeated(ring, &work, rng.below(1 << 12));
                let pmi = hw.pmu(cpu).take_pmi();
                if pmi.is_some() {
                    self.driver.interrupt(cpu as u32, &Default::default());
                }
                if rng.chance(30) {
                    self.driver.soft_event(cpu as u32, event::SOFT_FIRST, &Default::default());
                }
            }
            6 => {
                // The log writer runs; sometimes the disk is full for a while.
                let pid = self.processes[rng.below(self.processes.len() as u64) as usize];
                if let Some(sink) = kernel.sink_of(pid, 3) {
                    let failure = if rng.chance(20) { Some(Errno::NoSpc) } else { None };
                    kernel.set_sink_failure(sink, failure);
                }
                self.driver.write_logs();
            }
            7 => {
                let parent = self.processes[rng.below(self.processes.len() as u64) as usize];
                if let Some(child) = kernel.fork(parent) {
                    self.driver.process_fork(parent, child);
                    self.processes.push(child);
                }
            }
            8 if rng.chance(30) => {
                let pid = self.processes[rng.below(self.processes.len() as u64) as usize];
                let exec = ExecInfo {
                    path: b"/bin/sh",
                    base_addr: 0,
                    dyn_addr: 0,
                    credentials_changed: rng.chance(50),
                };
                self.driver.process_exec(pid, &exec);
            }
            8 => {}
            _ => {
                if self.processes.len() > 2 && rng.chance(50) {
                    let index = rng.below(self.processes.len() as u64) as usize;
                    let pid = self.processes.remove(index);
                    self.exit(pid);
                }
            }
        }
    }

    fn exit(&mut self, pid: Pid) {
        let kernel = self.driver.kernel().clone();
        kernel.begin_exit(pid);
        for cpu in 0..self.running.len() {
            if let Some((p, tid)) = self.running[cpu].filter(|&(p, _)| p == pid) {
                kernel.hardware().set_current_cpu(cpu);
                self.driver.switch_out(cpu as u32, p, tid);
                self.running[cpu] = None;
            }
        }
        self.driver.process_exit(pid);
        kernel.reap(pid);
    }
}

/// Runs `steps` random requests; returns how many PMCs the host started.
fn run(model: PmuModel, seed: u64, steps: usize, hosted: bool) -> u32 {
    let hw = SimHardware::new(model, 2);
    let host = Rc::new(RandomHost {
        running: RefCell::new(BTreeMap::new()),
        rng: RefCell::new(SplitMix64(seed ^ 0x1234)),
        started: std::cell::Cell::new(0),
    });
    let mut kernel = SimKernel::new(hw.clone());
    if hosted {
        kernel = kernel.with_host_counters(host.clone());
    }
    let driver = Driver::load(kernel, hw, Tunables::default()).expect("load");
    driver.register_soft_event("CLOCK.HARD").unwrap();
    let kernel = driver.kernel().clone();
    kernel.set_unprivileged_syspmcs(seed % 2 == 0);
    let processes = vec![
        kernel.spawn(None, Credentials::user(1000)),
        kernel.spawn(None, Credentials::user(1000)),
        kernel.spawn(None, Credentials::user(2000)),
        kernel.spawn(None, Credentials::root()),
    ];
    let mut sinks = Vec::new();
    for &pid in &processes {
        assert_eq!(kernel.open_sink(pid, SinkKind::Writable), 3);
        assert_eq!(kernel.open_sink(pid, SinkKind::ReadOnly), 4);
        sinks.extend(kernel.sink_of(pid, 3));
    }
    let mut world = World { model, driver, processes, ids: Vec::new(), running: vec![None, None] };
    let mut rng = SplitMix64(seed);
    for _ in 0..steps {
        if rng.chance(40) {
            world.churn(&mut rng);
        }
        let (op, result) = world.step(&mut rng);
        if let Err(errno) = result {
            assert!(documented(op).contains(&errno), "{op:?} failed with undocumented {errno}");
        }
        world.driver.kernel().hardware().assert_no_faults();
    }
    // Every owner exits: every row of every CPU is free again, nothing is loaded, every log
    // file is closed, and each log decodes.
    for pid in std::mem::take(&mut world.processes) {
        world.exit(pid);
    }
    assert_eq!(kernel.open_log_files(), 0, "a log file leaked");
    assert!(host.running.borrow().is_empty(), "the host still runs PMCs of owners that exited");
    for sink in sinks {
        let bytes = kernel.sink_bytes(sink);
        for entry in pmclog::Records::new(&bytes) {
            if let Err(e) = entry {
                panic!("a log does not decode: {e}");
            }
        }
    }
    let observer = kernel.spawn(None, Credentials::root());
    let client = PmcClient::new(&world.driver, observer);
    for cpu in 0..2 {
        for (row, info) in client.pmc_info(cpu).unwrap().iter().enumerate() {
            assert_eq!(info.pm_rowdisp, Disposition::Free.as_u32(), "cpu {cpu} row {row} leaked");
            assert_eq!(info.pm_ownerpid, -1, "cpu {cpu} row {row} still holds a PMC");
        }
    }
    // And all of them can be allocated again, once rows PMCADMIN disabled are enabled.
    let rows = client.cpu_info().unwrap().pm_npmc as i32;
    for cpu in 0..2 {
        for row in 0..rows {
            client.admin(cpu, row, State::Free).unwrap();
        }
    }
    for _ in 0..4 {
        let request = AllocateRequest::arch(&model, hwpmc_sim::ArchEvent::Instructions, 0);
        client.allocate(request).expect("a row leaked");
    }
    world.driver.kernel().hardware().assert_no_faults();
    host.started.get()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_requests_never_panic_fault_or_leak(seed in any::<u64>()) {
        run(PmuModel::skylake(), seed, 600, false);
    }

    #[test]
    fn random_requests_to_host_counted_pmcs_never_panic_or_leak(seed in any::<u64>()) {
        run(PmuModel::skylake(), seed, 600, true);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_requests_on_zen4_never_panic_fault_or_leak(seed in any::<u64>()) {
        run(PmuModel::zen4(), seed, 600, false);
    }

    #[test]
    fn random_requests_on_zen2_never_panic_fault_or_leak(seed in any::<u64>()) {
        run(PmuModel::zen2(), seed, 600, false);
    }

    #[test]
    fn random_requests_to_host_counted_k8_pmcs_never_panic_or_leak(seed in any::<u64>()) {
        run(PmuModel::zen4(), seed, 600, true);
    }
}

#[test]
fn one_long_random_run() {
    run(PmuModel::skylake(), 0x5eed, 5000, false);
}

#[test]
fn one_long_random_run_on_zen4() {
    run(PmuModel::zen4(), 0x5eed, 5000, false);
}

#[test]
fn one_long_random_run_with_a_host_that_counts() {
    let started = run(PmuModel::skylake(), 0x5eed, 5000, true);
    assert!(started > 20, "only {started} PMCs started on the host");
}
