//! The counters on a hybrid machine described by a fake sysfs (cpu_core on CPUs 0-3, type 4;
//! cpu_atom on CPUs 4-7, type 8) with a scripted perf: the attrs each PMC opens, the sum over
//! core PMUs, the errors, perf's times, and pinned events that lose their counter.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hwpmc::abi::{Class, Mode, PmcFlags, PmcId};
use hwpmc::{Errno, HostCounters, HostedEvent, HostedPmc, Pid};

use super::super::call_detail::explanation;
use super::super::lock;
use super::super::perf::{CounterRequest, EventAttr, PERF_TYPE_HARDWARE, Reading, Scope};
use super::super::pmus::{discover, fake::FakeSysfs};
use super::super::scripted_perf::ScriptedPerf;
use super::PerfCounters;

/// The hybrid machine's counters with perf scripted by `script`, and the requests they make.
fn hybrid(
    script: impl Fn(&CounterRequest, usize) -> io::Result<Reading> + Send + Sync + 'static,
) -> (PerfCounters, Arc<Mutex<Vec<CounterRequest>>>, FakeSysfs) {
    let sysfs = FakeSysfs::hybrid("counters");
    let pmus = discover(sysfs.path()).unwrap();
    let opened = Arc::new(Mutex::new(Vec::new()));
    let perf = ScriptedPerf { opened: opened.clone(), script: Arc::new(script) };
    (PerfCounters::new(8, |_| {}, pmus, Box::new(perf)), opened, sysfs)
}

/// The requests that count (not the probe of whether kernel mode is allowed).
fn counting(opened: &Mutex<Vec<CounterRequest>>) -> Vec<CounterRequest> {
    lock(opened)
        .iter()
        .filter(|r| !matches!(r.scope, Scope::Thread { inherit: false, .. }))
        .copied()
        .collect()
}

const INSTRUCTIONS: u64 = 1;

/// A counting PMC of `event` with `flags`, on `cpu` for a system PMC.
fn pmc(token: u64, event: HostedEvent, flags: PmcFlags, cpu: Option<u16>) -> HostedPmc {
    let (class, mode) = match (event, cpu) {
        (HostedEvent::Raw { class, .. }, None) => (class, Mode::ThreadCounting),
        (HostedEvent::Raw { class, .. }, Some(_)) => (class, Mode::SystemCounting),
        _ => (Class::Soft, Mode::ThreadCounting),
    };
    HostedPmc {
        token,
        id: PmcId { cpu, mode, class, row: token as u8 },
        event,
        user: true,
        kernel: false,
        flags,
        thread: 0,
        reload: 0,
    }
}

/// Fixed counter `index`: instructions 0, cycles 1, ref-cycles 2.
fn fixed(index: u64) -> HostedEvent {
    HostedEvent::Raw { class: Class::Iaf, config: index }
}

/// A single-threaded process to count, killed when dropped.
struct Child(std::process::Child);

impl Child {
    fn new() -> Child {
        Child(std::process::Command::new("sleep").arg("60").spawn().unwrap())
    }
    fn pid(&self) -> Pid {
        self.0.id() as Pid
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn reading(value: u64, enabled: u64, running: u64) -> io::Result<Reading> {
    Ok(Reading { value, enabled, running })
}

#[test]
fn a_core_type_pmc_opens_one_pinned_event_on_its_pmu_with_perfs_extended_type() {
    let (counters, opened, _sysfs) = hybrid(|_, _| reading(7, 10, 10));
    let child = Child::new();
    let core = pmc(1, fixed(0), PmcFlags::CORE_TYPE_CORE, None);
    counters.start(&core, &[child.pid()]).unwrap();
    let requests = counting(&opened);
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].attr, EventAttr { kind: PERF_TYPE_HARDWARE, config: 4 << 32 | 1 });
    assert!(requests[0].pinned, "a PMC without PMC_F_MULTIPLEX may not share a counter");
    assert_eq!(
        requests[0].scope,
        Scope::Thread { tid: child.pid(), inherit: true, threads_only: true }
    );
    assert_eq!(counters.read(1), 7);
    // A raw encoding of the E-cores' table opens on cpu_atom's own type.
    lock(&opened).clear();
    let usr = 1 << 16;
    let atom_raw = HostedEvent::Raw { class: Class::Iap, config: 0x01_D1 | usr };
    counters.start(&pmc(2, atom_raw, PmcFlags::CORE_TYPE_ATOM, None), &[child.pid()]).unwrap();
    assert_eq!(counting(&opened)[0].attr, EventAttr { kind: 8, config: 0x01_D1 });
}

#[test]
fn a_process_pmc_without_a_core_type_counts_the_sum_of_both_pmus_events() {
    let (counters, opened, _sysfs) = hybrid(|request, _| match request.attr.config >> 32 {
        // 60% of the thread's time on the P-cores, 40% on the E-cores.
        4 => reading(100, 1000, 600),
        8 => reading(50, 1000, 400),
        _ => Err(io::Error::from_raw_os_error(libc::ENOENT)),
    });
    let child = Child::new();
    let both = pmc(3, fixed(0), PmcFlags::empty(), None);
    counters.check(&both).unwrap();
    counters.start(&both, &[child.pid()]).unwrap();
    let attrs: Vec<EventAttr> = counting(&opened).iter().map(|r| r.attr).collect();
    assert_eq!(
        attrs,
        [
            EventAttr { kind: PERF_TYPE_HARDWARE, config: 4 << 32 | INSTRUCTIONS },
            EventAttr { kind: PERF_TYPE_HARDWARE, config: 8 << 32 | INSTRUCTIONS },
        ]
    );
    assert_eq!(counters.read(3), 150);
    // Each event was enabled the whole time; together they ran all of it: not multiplexed.
    assert_eq!(counters.times(both.id.to_u32()), Some((1000, 1000)));
    let mut counted = Vec::new();
    counters.stop(3, &mut |pid, n| counted.push((pid, n)));
    assert_eq!(counted, [(child.pid(), 150)]);
}

#[test]
fn events_a_core_pmu_lacks_and_core_types_of_other_cpus_are_refused_with_the_reason() {
    let (counters, opened, _sysfs) = hybrid(|_, _| reading(1, 1, 1));
    // ref-cycles (fixed counter 2): sysfs lists it for cpu_core only.
    assert_eq!(counters.check(&pmc(4, fixed(2), PmcFlags::empty(), None)), Err(Errno::Inval));
    let why = explanation(Errno::Inval).unwrap();
    assert!(why.contains("ref-cycles") && why.contains("no cpu_atom"), "{why}");
    assert!(why.contains("cpu_core/EVENT/ (P-cores) or cpu_atom/EVENT/ (E-cores)"), "{why}");
    assert_eq!(counters.check(&pmc(4, fixed(2), PmcFlags::CORE_TYPE_CORE, None)), Ok(()));
    // A raw encoding of one core type's table, without the core type.
    let raw = HostedEvent::Raw { class: Class::Iap, config: 0x01_D1 };
    assert_eq!(counters.check(&pmc(5, raw, PmcFlags::empty(), None)), Err(Errno::Inval));
    assert!(explanation(Errno::Inval).unwrap().contains("one core type's event table"));
    // CPU 5 is an E-core.
    let on5 = pmc(6, fixed(0), PmcFlags::CORE_TYPE_CORE, Some(5));
    assert_eq!(counters.check(&on5), Err(Errno::Inval));
    let why = explanation(Errno::Inval).unwrap();
    assert!(why.contains("CPU 5 is one of the E-cores (cpu_atom)"), "{why}");
    assert!(counting(&opened).is_empty(), "nothing was opened");
}

#[test]
fn a_system_pmc_opens_on_the_pmu_of_its_cpu() {
    let (counters, opened, _sysfs) = hybrid(|_, _| reading(9, 5, 5));
    let on5 = pmc(7, fixed(0), PmcFlags::empty(), Some(5));
    counters.start(&on5, &[]).unwrap();
    let requests = counting(&opened);
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].attr, EventAttr { kind: PERF_TYPE_HARDWARE, config: 8 << 32 | 1 });
    assert_eq!(requests[0].scope, Scope::Cpu(5));
    let mut counted = Vec::new();
    counters.stop(7, &mut |pid, n| counted.push((pid, n)));
    assert_eq!(counted, [(-1, 9)]);
}

#[test]
fn a_multiplexed_pmc_is_not_pinned_and_reads_perfs_times_across_runs_until_released() {
    let (counters, opened, _sysfs) = hybrid(|_, _| reading(100, 2000, 500));
    let child = Child::new();
    let shared = pmc(8, fixed(1), PmcFlags::MULTIPLEX | PmcFlags::CORE_TYPE_CORE, None);
    let id = shared.id.to_u32();
    assert_eq!(counters.times(id), None, "never started");
    counters.start(&shared, &[child.pid()]).unwrap();
    assert!(counting(&opened).iter().all(|r| !r.pinned), "PMC_F_MULTIPLEX lets perf rotate it");
    assert_eq!(counters.read(8), 100);
    assert_eq!(counters.times(id), Some((2000, 500)));
    counters.stop(8, &mut |_, _| {});
    assert_eq!(counters.times(id), Some((2000, 500)), "a stopped PMC keeps its times");
    // A second run adds its times.
    counters.start(&shared, &[child.pid()]).unwrap();
    assert_eq!(counters.read(8), 100);
    assert_eq!(counters.times(id), Some((4000, 1000)));
    counters.stop(8, &mut |_, _| {});
    counters.forget(id);
    assert_eq!(counters.times(id), None, "a released PMC's times go with it");
}

#[test]
fn a_pinned_event_that_loses_its_counter_fails_the_start_or_the_reads_naming_the_event() {
    let eof = || Err(io::Error::from(io::ErrorKind::UnexpectedEof));
    // No counter at once: the start fails.
    let (counters, _, _sysfs) = hybrid(move |_, _| eof());
    let child = Child::new();
    let lost = pmc(9, fixed(0), PmcFlags::CORE_TYPE_ATOM, None);
    assert_eq!(counters.start(&lost, &[child.pid()]), Err(Errno::Busy));
    let why = explanation(Errno::Busy).unwrap();
    assert!(why.contains("lost its counter") && why.contains("on cpu_atom"), "{why}");
    assert!(why.contains("IAF event 0x0") && why.contains("PMC_F_MULTIPLEX"), "{why}");
    // Later: the PMC's failure stays until it is started again.
    let reads = Arc::new(AtomicUsize::new(0));
    let seen = reads.clone();
    let (counters, _, _sysfs) = hybrid(move |_, n| {
        seen.fetch_add(1, Ordering::Relaxed);
        if n == 0 { reading(5, 10, 10) } else { eof() }
    });
    let later = pmc(10, fixed(0), PmcFlags::CORE_TYPE_CORE, None);
    let id = later.id.to_u32();
    counters.start(&later, &[child.pid()]).unwrap();
    assert_eq!(counters.failure(id), None);
    assert_eq!(counters.read(10), 0, "the event that lost its counter reads nothing");
    let why = counters.failure(id).unwrap();
    assert!(why.contains(&format!("PMC {id:#x}")) && why.contains("on cpu_core"), "{why}");
    counters.stop(10, &mut |_, _| {});
    assert!(counters.failure(id).is_some(), "still wrong after the stop");
    counters.start(&later, &[child.pid()]).unwrap();
    assert_eq!(counters.failure(id), None, "a new start counts afresh");
    assert!(reads.load(Ordering::Relaxed) >= 3);
}

#[test]
fn a_sampling_process_pmc_has_a_ring_on_each_cpu_of_its_core_pmus_with_their_events() {
    let pmus = discover(FakeSysfs::hybrid("sampling").path()).unwrap();
    let sampling = |flags| HostedPmc {
        id: PmcId { cpu: None, mode: Mode::ThreadSampling, class: Class::Iaf, row: 1 },
        reload: 100_000,
        ..pmc(11, fixed(0), flags, None)
    };
    let attr = |pmu_type: u64| EventAttr { kind: PERF_TYPE_HARDWARE, config: pmu_type << 32 | 1 };
    let core = super::Plan::of(&sampling(PmcFlags::CORE_TYPE_CORE), &pmus).unwrap();
    assert_eq!(core.sampling_cpus(8), (0..4).map(|c| (c, attr(4))).collect::<Vec<_>>());
    let both = super::Plan::of(&sampling(PmcFlags::empty()), &pmus).unwrap();
    let expected: Vec<_> = (0..8).map(|c| (c, attr(if c < 4 { 4 } else { 8 }))).collect();
    assert_eq!(both.sampling_cpus(8), expected);
}

#[test]
fn a_detached_targets_times_stay_with_the_pmc() {
    let (first, second) = (Child::new(), Child::new());
    let first_pid = first.pid();
    let (counters, _, _sysfs) = hybrid(move |request, _| match request.scope {
        Scope::Thread { tid, inherit: true, .. } if tid == first_pid => reading(100, 1000, 250),
        _ => reading(50, 500, 500),
    });
    let shared = pmc(12, fixed(0), PmcFlags::MULTIPLEX | PmcFlags::CORE_TYPE_CORE, None);
    let id = shared.id.to_u32();
    counters.start(&shared, &[first.pid(), second.pid()]).unwrap();
    assert_eq!(counters.read(12), 150);
    assert_eq!(counters.times(id), Some((1500, 750)));
    assert_eq!(counters.detach(12, first.pid()), 100);
    assert_eq!(counters.read(12), 50, "the detached target's count went to the driver");
    assert_eq!(counters.times(id), Some((1500, 750)), "its times did not go");
    let mut counted = Vec::new();
    counters.stop(12, &mut |pid, n| counted.push((pid, n)));
    assert_eq!(counted, [(second.pid(), 50)]);
    assert_eq!(counters.times(id), Some((1500, 750)));
}
