//! The Linux host with real software events: counting this process and a launched child,
//! sampling this process, and the pmc(3) error paths.
#![cfg(target_os = "linux")]

use pmc::api;
use pmc::{Mode, PmcFlags, PmcSpec};

const PAGE: usize = 4096;

/// The tests share this process's PMC rows and threads (process PMCs follow every thread), so
/// they run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Touches `pages` fresh pages (one write each) and returns them so they stay mapped.
fn touch_fresh_pages(pages: usize) -> Vec<u8> {
    let mut v: Vec<u8> = Vec::with_capacity(pages * PAGE);
    // SAFETY-free: write through the spare capacity one byte per page.
    for i in 0..pages {
        v.spare_capacity_mut()[i * PAGE].write(1);
    }
    v
}

/// Closes this process's log and returns what the file at `path` holds (and removes it).
fn close_log(path: &std::path::Path) -> Vec<u8> {
    api::close_log().unwrap();
    let bytes = std::fs::read(path).unwrap();
    let _ = std::fs::remove_file(path);
    bytes
}

/// Configures this process's log to a new file named after `what`; returns its path and the
/// file (keep it open while logging).
fn configure_log(what: &str) -> (std::path::PathBuf, std::fs::File) {
    let path = std::env::temp_dir().join(format!("libpmc-{what}-{}.log", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    api::configure_log(std::os::fd::AsRawFd::as_raw_fd(&file)).unwrap();
    (path, file)
}

#[test]
fn counting_own_page_faults_is_within_ten_percent_of_pages_touched() {
    let _serial = serial();
    let pmc = PmcSpec::new("page-faults").allocate().unwrap();
    pmc.attach(0).unwrap();
    pmc.start().unwrap();
    let pages = 20_000;
    let kept = touch_fresh_pages(pages);
    pmc.stop().unwrap();
    let faults = pmc.read().unwrap();
    drop(kept);
    let low = pages as u64 * 9 / 10;
    let high = pages as u64 * 11 / 10;
    assert!((low..=high).contains(&faults), "{faults} faults for {pages} pages");
}

#[test]
fn a_launched_child_is_counted_from_its_exec_and_reports_its_status() {
    let _serial = serial();
    let pmc = PmcSpec::new("task-clock").allocate().unwrap();
    let pid = api::spawn(&[
        "sh".into(),
        "-c".into(),
        "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 3".into(),
    ])
    .unwrap();
    pmc.attach(pid).unwrap();
    pmc.start().unwrap();
    api::resume(pid).unwrap();
    assert_eq!(api::wait(pid).unwrap(), 3);
    let ns = pmc.read().unwrap();
    assert!(ns > 1_000_000, "the shell loop ran {ns} ns of task-clock");
}

#[test]
fn attaching_twice_to_the_same_process_fails_with_eexist() {
    let _serial = serial();
    let pmc = PmcSpec::new("context-switches").allocate().unwrap();
    pmc.attach(0).unwrap();
    assert_eq!(pmc.attach(0).unwrap_err().errno, libc::EEXIST);
}

#[test]
fn writing_a_running_pmc_fails_with_ebusy_and_a_stopped_one_takes_the_value() {
    let _serial = serial();
    let pmc = PmcSpec::new("page-faults").allocate().unwrap();
    pmc.attach(0).unwrap();
    pmc.start().unwrap();
    assert_eq!(pmc.write(5).unwrap_err().errno, libc::EBUSY);
    pmc.stop().unwrap();
    pmc.write(1_000_000).unwrap();
    let v = pmc.read().unwrap();
    assert!((1_000_000..1_000_100).contains(&v), "{v}");
}

#[test]
fn an_unknown_pmc_id_is_esrch_without_pmcs_and_einval_with_others() {
    let _serial = serial();
    let id = 0xFFF3_0F0F;
    // No owner descriptor yet: FreeBSD says ESRCH.
    assert_eq!(api::start(id).unwrap_err().errno, libc::ESRCH);
    assert_eq!(api::release(id).unwrap_err().errno, libc::ESRCH);
    let _mine = PmcSpec::new("page-faults").allocate().unwrap();
    assert_eq!(api::start(id).unwrap_err().errno, libc::EINVAL);
    assert_eq!(api::read(id).unwrap_err().errno, libc::EINVAL);
    assert_eq!(api::release(id).unwrap_err().errno, libc::EINVAL);
    assert_eq!(api::capabilities(id).unwrap_err().errno, libc::EINVAL);
}

#[test]
fn hardware_events_on_a_pmu_less_machine_say_why() {
    let _serial = serial();
    if api::classes().unwrap().iter().any(|c| c.pm_class == pmc::Class::Iap.as_u32()) {
        return; // this machine has a PMU
    }
    let e = PmcSpec::new("instructions").allocate().unwrap_err();
    assert_eq!(e.errno, libc::EINVAL);
    assert!(e.to_string().contains("PMU"), "{e}");
}

#[test]
fn no_rdpmc_index_is_given_for_a_counter_perf_owns() {
    let _serial = serial();
    let pmc = PmcSpec::new("task-clock").allocate().unwrap();
    pmc.attach(0).unwrap();
    let e = api::get_msr(pmc.id()).unwrap_err();
    assert_eq!(e.errno, libc::ENOSYS);
    assert!(e.to_string().contains("pmc_read"), "{e}");
}

#[test]
fn the_soft_class_has_sixteen_rows_per_owner() {
    let _serial = serial();
    let pmcs: Vec<_> = (0..16).map(|_| PmcSpec::new("minor-faults").allocate().unwrap()).collect();
    let e = PmcSpec::new("minor-faults").allocate().unwrap_err();
    assert_eq!(e.errno, libc::EINVAL);
    drop(pmcs);
    PmcSpec::new("minor-faults").allocate().unwrap();
}

/// Spins for `cpu` of this thread's CPU time, almost all of it in its own code: no calls in the
/// inner loop even in a debug build (no ranges, no wrapping_* methods, no black_box).
#[inline(never)]
fn busy(cpu: std::time::Duration) -> u64 {
    // This thread's CPU time, not the wall clock: on a loaded machine a wall-clock loop gets
    // only part of a CPU, and the samples and counts the tests expect follow CPU time.
    let thread_cpu = || {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec into the valid local.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    };
    let start = thread_cpu();
    // However busy the machine, the loop ends: at most 20 s of waiting.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    while thread_cpu() - start < cpu && std::time::Instant::now() < deadline {
        let mut i = 0u32;
        while i < 200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            i += 1;
        }
    }
    x
}

#[test]
fn a_software_events_perf_times_ran_all_the_time_it_was_enabled_and_add_up_across_runs() {
    let _serial = serial();
    for flags in [PmcFlags::empty(), PmcFlags::MULTIPLEX] {
        let pmc = PmcSpec::new("task-clock").flags(flags).allocate().unwrap();
        pmc.attach(0).unwrap();
        let before = pmc.read_scaled().unwrap();
        assert_eq!((before.enabled, before.running), (0, 0), "{flags:?}: not started yet");
        pmc.start().unwrap();
        std::hint::black_box(busy(std::time::Duration::from_millis(20)));
        let live = pmc.read_scaled().unwrap();
        // perf's times: nanoseconds the task's events were enabled, all of them on a counter
        // (a software event never waits for one).
        assert!(live.enabled > 0, "{flags:?}: {live:?}");
        assert_eq!(live.running, live.enabled, "{flags:?}: {live:?}");
        pmc.stop().unwrap();
        let first = pmc.read_scaled().unwrap();
        assert_eq!(first.value, pmc.read().unwrap());
        assert!(!first.multiplexed() && first.scaled() == Some(first.value), "{first:?}");
        // task-clock counts the nanoseconds the task ran: the time it was enabled.
        assert!(first.enabled >= live.enabled && first.value > 0, "{first:?}");
        pmc.start().unwrap();
        std::hint::black_box(busy(std::time::Duration::from_millis(5)));
        pmc.stop().unwrap();
        let second = pmc.read_scaled().unwrap();
        assert!(second.enabled > first.enabled, "{flags:?}: the second run's time adds up");
        assert_eq!(second.running, second.enabled);
    }
}

/// Samples this process with cpu-clock every millisecond, with callchains, while `work` runs;
/// returns the PMC (still allocated) and the log.
fn sample_self(what: &str, work: impl FnOnce()) -> (pmc::Pmc, Vec<u8>) {
    let (path, _file) = configure_log(what);
    let pmc = PmcSpec::new("cpu-clock")
        .mode(Mode::ThreadSampling)
        .flags(PmcFlags::CALLCHAIN)
        .rate(1_000_000)
        .allocate()
        .unwrap();
    pmc.attach(0).unwrap();
    pmc.start().unwrap();
    work();
    pmc.stop().unwrap();
    api::flush_log().unwrap();
    (pmc, close_log(&path))
}

#[test]
fn sampling_own_process_puts_most_samples_in_the_busy_function() {
    let _serial = serial();
    let (pmc, bytes) = sample_self("sample", || {
        busy(std::time::Duration::from_millis(300));
    });
    let busy_addr = busy as *const () as u64;
    let (mut total, mut inside) = (0, 0);
    for entry in pmclog::Records::new(&bytes) {
        if let pmclog::Record::Callchain(cc) = entry.unwrap().record {
            if cc.pmcid != pmc.id() {
                continue;
            }
            total += 1;
            // The sampled PC or a caller within busy's first 4 KiB (it is small and inlined into).
            if cc.pcs.iter().any(|pc| (busy_addr..busy_addr + 4096).contains(&pc)) {
                inside += 1;
            }
        }
    }
    assert!(total >= 50, "only {total} samples in 300 ms at 1 kHz");
    assert!(inside * 10 >= total * 7, "{inside} of {total} samples in busy()");
}

#[test]
fn samples_carry_the_time_they_were_taken_at() {
    let _serial = serial();
    let (path, _file) = configure_log("times");
    let pmc =
        PmcSpec::new("cpu-clock").mode(Mode::ThreadSampling).rate(1_000_000).allocate().unwrap();
    let id = pmc.id();
    pmc.attach(0).unwrap();
    // SAFETY: RDTSC only reads the time-stamp counter.
    let before = unsafe { core::arch::x86_64::_rdtsc() };
    pmc.start().unwrap();
    busy(std::time::Duration::from_millis(100));
    pmc.stop().unwrap();
    // SAFETY: as above.
    let after = unsafe { core::arch::x86_64::_rdtsc() };
    let bytes = close_log(&path);
    let mut hz = 0;
    let mut stamps = Vec::new();
    for entry in pmclog::Records::new(&bytes) {
        let entry = entry.unwrap();
        match entry.record {
            pmclog::Record::Initialize(i) => hz = i.tsc_freq,
            pmclog::Record::Callchain(c) if c.pmcid == id => stamps.push(entry.tsc),
            _ => {}
        }
    }
    assert!(hz > 0 && stamps.len() >= 50, "{} samples, TSC at {hz} Hz", stamps.len());
    // A millisecond of TSC apart, one sample per millisecond of CPU time; not the bursts in
    // which the worker posts them. (A margin for the clocks'
    // conversion: a sample may be stamped a little before the start or after the stop.)
    let margin = hz / 1000;
    assert!(stamps.iter().all(|&t| before - margin <= t && t <= after + margin), "{stamps:?}");
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "in time order: {stamps:?}");
    let mut gaps: Vec<u64> = stamps.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable();
    let median = gaps[gaps.len() / 2];
    assert!(median > hz / 2000, "median gap {median} ticks at {hz} Hz: {stamps:?}");
}

#[test]
fn samples_taken_before_a_stop_reach_the_log_though_the_pmc_is_released_at_once() {
    let _serial = serial();
    let (path, _file) = configure_log("release");
    let pmc =
        PmcSpec::new("cpu-clock").mode(Mode::ThreadSampling).rate(1_000_000).allocate().unwrap();
    let id = pmc.id();
    let clock = PmcSpec::new("task-clock").allocate().unwrap();
    clock.attach(0).unwrap();
    pmc.attach(0).unwrap();
    pmc.start().unwrap();
    clock.start().unwrap();
    busy(std::time::Duration::from_millis(100));
    clock.stop().unwrap();
    // No flush between the stop and the release: the stop hands perf's samples to the driver
    // (the worker moves them every 20 ms; the last ones would be lost).
    pmc.stop().unwrap();
    let ms = clock.read().unwrap() / 1_000_000;
    drop(pmc);
    let bytes = close_log(&path);
    let samples = pmclog::Records::new(&bytes)
        .filter(|e| matches!(&e.as_ref().unwrap().record, pmclog::Record::Callchain(c) if c.pmcid == id))
        .count();
    // cpu-clock and task-clock measure the same CPU time (a sample per millisecond).
    assert!(samples + 5 >= ms as usize, "{samples} samples in {ms} ms of CPU time at 1 kHz");
}

#[test]
fn a_launched_child_that_exits_logs_its_count_with_log_procexit() {
    let _serial = serial();
    let (path, _file) = configure_log("procexit");
    let pmc = PmcSpec::new("page-faults").flags(PmcFlags::LOG_PROCEXIT).allocate().unwrap();
    let pid = api::spawn(&["sh".into(), "-c".into(), "exit 0".into()]).unwrap();
    pmc.attach(pid).unwrap();
    pmc.start().unwrap();
    api::resume(pid).unwrap();
    assert_eq!(api::wait(pid).unwrap(), 0);
    pmc.stop().unwrap();
    let faults = pmc.read().unwrap();
    let bytes = close_log(&path);
    let exits: Vec<(u32, i32, u64)> = pmclog::Records::new(&bytes)
        .filter_map(|e| match e.unwrap().record {
            pmclog::Record::ProcExit(x) => Some((x.pmcid, x.pid, x.value)),
            _ => None,
        })
        .collect();
    assert_eq!(exits, [(pmc.id(), pid, faults)]);
    assert!(faults > 0, "a shell faults in pages");
}

#[test]
fn per_switch_logging_is_refused_with_the_reason() {
    let _serial = serial();
    let e = PmcSpec::new("page-faults").flags(PmcFlags::LOG_PROCCSW).allocate().unwrap_err();
    assert_eq!(e.errno, libc::EOPNOTSUPP);
    assert!(e.to_string().contains("context switch"), "{e}");
}

#[test]
fn system_sampling_logs_every_process_mappings_and_samples_of_this_process() {
    let _serial = serial();
    let (path, _file) = configure_log("ss");
    let pmc = match PmcSpec::new("cpu-clock")
        .mode(Mode::SystemSampling)
        .cpu(0)
        .rate(1_000_000)
        .allocate()
    {
        Ok(pmc) => pmc,
        Err(e) if e.errno == libc::EPERM => {
            eprintln!("skipped: system-wide sampling needs privilege here ({e})");
            api::close_log().unwrap();
            return;
        }
        Err(e) => panic!("{e}"),
    };
    pmc.start().unwrap();
    // Run on CPU 0 for a while (pinned: the PMC samples that CPU only).
    let pinned = pin_this_thread_to_cpu0();
    busy(std::time::Duration::from_millis(200));
    pmc.stop().unwrap();
    let bytes = close_log(&path);
    let me = std::process::id() as i32;
    let (mut my_maps, mut my_samples, mut samples) = (0, 0, 0);
    for entry in pmclog::Records::new(&bytes) {
        match entry.unwrap().record {
            pmclog::Record::MapIn(m) if m.pid == me => my_maps += 1,
            pmclog::Record::Callchain(cc) => {
                samples += 1;
                my_samples += usize::from(cc.pid == me);
            }
            _ => {}
        }
    }
    assert!(my_maps > 0, "the mappings of a process that was running when sampling started");
    assert!(samples > 50, "{samples} samples of CPU 0 in 200 ms at 1 kHz");
    if pinned {
        // 200 ms of this thread's CPU time on CPU 0: a sample for each of most of its
        // milliseconds, whatever else CPU 0 ran.
        assert!(my_samples >= 100, "{my_samples} of {samples} samples in this busy process");
    }
}

/// Pins the calling thread to CPU 0; whether that worked.
fn pin_this_thread_to_cpu0() -> bool {
    // SAFETY: cpu_set_t is a plain bit array (all zeroes is the empty set); CPU_SET writes bit 0
    // of it; sched_setaffinity(0, …) applies a valid set to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[test]
fn an_attached_process_that_ends_logs_its_count_with_log_procexit() {
    let _serial = serial();
    let (path, _file) = configure_log("procexit-t");
    // A process this library did not launch (as `pmcstat -t` attaches to).
    let mut child = std::process::Command::new("sleep").arg("0.2").spawn().unwrap();
    let pid = child.id() as i32;
    let pmc = PmcSpec::new("context-switches").flags(PmcFlags::LOG_PROCEXIT).allocate().unwrap();
    pmc.attach(pid).unwrap();
    pmc.start().unwrap();
    child.wait().unwrap();
    // The worker notices the end within its period.
    let exits: Vec<(u32, i32)> = proc_exits(&path).into_iter().map(|(id, p, _)| (id, p)).collect();
    api::close_log().unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(exits, [(pmc.id(), pid)], "one PROCEXIT for the ended target");
}

/// The PROCEXIT records of the log at `path`, waiting up to 5 s for the first.
fn proc_exits(path: &std::path::Path) -> Vec<(u32, i32, u64)> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        api::flush_log().unwrap();
        let bytes = std::fs::read(path).unwrap();
        let exits: Vec<(u32, i32, u64)> = pmclog::Records::new(&bytes)
            .filter_map(|e| match e.unwrap().record {
                pmclog::Record::ProcExit(x) => Some((x.pmcid, x.pid, x.value)),
                _ => None,
            })
            .collect();
        if !exits.is_empty() || std::time::Instant::now() > deadline {
            return exits;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_target_that_ended_while_the_pmc_was_stopped_does_not_stop_it_starting() {
    let _serial = serial();
    let (path, _file) = configure_log("vanished");
    let mut child = std::process::Command::new("sleep").arg("0.1").spawn().unwrap();
    let pid = child.id() as i32;
    let pmc = PmcSpec::new("task-clock").flags(PmcFlags::LOG_PROCEXIT).allocate().unwrap();
    pmc.attach(pid).unwrap();
    pmc.attach(0).unwrap();
    child.wait().unwrap();
    // Gone (reaped) before the start: the PMC counts this process, and the driver hears of the
    // end and detaches the other.
    pmc.start().unwrap();
    busy(std::time::Duration::from_millis(20));
    let exits = proc_exits(&path);
    pmc.stop().unwrap();
    let ns = pmc.read().unwrap();
    assert!(ns >= 10_000_000, "this process's {ns} ns of task-clock count");
    api::close_log().unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(exits, [(pmc.id(), pid, 0)], "one PROCEXIT for the vanished target");
}

#[test]
fn a_sampled_pipeline_logs_each_childs_fork_before_its_exec_and_mappings() {
    let _serial = serial();
    let (path, _file) = configure_log("pipeline");
    let pmc = PmcSpec::new("cpu-clock")
        .mode(Mode::ThreadSampling)
        .flags(PmcFlags::CALLCHAIN | PmcFlags::DESCENDANTS)
        .rate(1_000_000)
        .allocate()
        .unwrap();
    let script = "seq 1 300000 | sort -n > /dev/null";
    let pid = api::spawn(&["sh".into(), "-c".into(), script.into()]).unwrap();
    pmc.attach(pid).unwrap();
    pmc.start().unwrap();
    api::resume(pid).unwrap();
    assert_eq!(api::wait(pid).unwrap(), 0);
    pmc.stop().unwrap();
    api::flush_log().unwrap();
    let bytes = close_log(&path);
    // The order a reader meets: every child is forked before it executes its program and maps
    // it (the records come from two CPUs' rings, merged in time order).
    let mut forked = Vec::new();
    let mut executed = Vec::new();
    for entry in pmclog::Records::new(&bytes) {
        match entry.unwrap().record {
            pmclog::Record::ProcFork(f) if f.old_pid == pid => forked.push(f.new_pid),
            pmclog::Record::ProcExec(x) if x.pid != pid => {
                assert!(forked.contains(&x.pid), "exec of {} before its fork", x.pid);
                executed.push((x.pid, x.path.to_vec()));
            }
            pmclog::Record::MapIn(m) if m.pid != pid && m.pid > 0 => {
                assert!(forked.contains(&m.pid), "mapping of {} before its fork", m.pid);
            }
            _ => {}
        }
    }
    let programs: Vec<&[u8]> = executed.iter().map(|(_, p)| p.as_slice()).collect();
    assert!(programs.iter().any(|p| p.ends_with(b"/seq")), "{executed:?}");
    assert!(programs.iter().any(|p| p.ends_with(b"/sort")), "{executed:?}");
}

/// The perf rings this process has mapped.
fn perf_rings_mapped() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.ends_with("[perf_event]"))
        .count()
}

#[test]
fn a_sampled_multithreaded_process_has_one_ring_per_cpu() {
    let _serial = serial();
    // Threads that exist when the PMC is attached.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            })
        })
        .collect();
    let (path, _file) = configure_log("rings");
    let before = perf_rings_mapped();
    let pmc =
        PmcSpec::new("cpu-clock").mode(Mode::ThreadSampling).rate(1_000_000).allocate().unwrap();
    pmc.attach(0).unwrap();
    // PMCSTART opens the perf events.
    pmc.start().unwrap();
    let cpus = api::cpu_info().unwrap().pm_ncpu as usize;
    assert_eq!(perf_rings_mapped() - before, cpus, "one ring per CPU for 5+ threads");
    busy(std::time::Duration::from_millis(100));
    pmc.stop().unwrap();
    api::flush_log().unwrap();
    api::close_log().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let samples = pmclog::Records::new(&bytes)
        .filter(|e| matches!(e.as_ref().unwrap().record, pmclog::Record::Callchain(_)))
        .count();
    assert!(samples > 30, "the shared rings carry the samples: {samples}");
}

/// Whether perf shows kernel frames to this process: as root, or with
/// `kernel.perf_event_paranoid` at 1 or below.
fn kernel_frames_visible() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .unwrap_or(2);
    root || paranoid <= 1
}

/// Reads `/dev/zero` a megabyte at a time until `until`: most of the time in the kernel.
fn read_zeros(until: std::time::Instant) {
    use std::io::Read;
    let mut zero = std::fs::File::open("/dev/zero").unwrap();
    let mut buf = vec![1u8; 1 << 20];
    while std::time::Instant::now() < until {
        zero.read_exact(&mut buf).unwrap();
    }
}

#[test]
fn kernel_samples_carry_the_kernel_stack_then_the_user_stack_without_usercallchain() {
    let _serial = serial();
    // CALLCHAIN alone, no PMC_F_USERCALLCHAIN (pmcstat without -U): on Linux the stacks are
    // joined anyway, as perf joins them.
    let (pmc, bytes) = sample_self("joined", || {
        read_zeros(std::time::Instant::now() + std::time::Duration::from_millis(300));
    });
    const KERNEL_START: u64 = 0xffff_8000_0000_0000;
    let (mut kernel_samples, mut joined, mut total) = (0, 0, 0);
    for entry in pmclog::Records::new(&bytes) {
        let pmclog::Record::Callchain(cc) = entry.unwrap().record else { continue };
        if cc.pmcid != pmc.id() {
            continue;
        }
        total += 1;
        let pcs: Vec<u64> = cc.pcs.iter().collect();
        if cc.cpuflags.is_user() {
            assert!(pcs.iter().all(|&pc| pc < KERNEL_START), "kernel frames in a user sample");
            continue;
        }
        kernel_samples += 1;
        // The kernel frames, then the user frames: never a kernel frame after a user one.
        let kernel_frames = pcs.iter().take_while(|&&pc| pc >= KERNEL_START).count();
        assert!(kernel_frames >= 1, "a kernel-mode sample starts with kernel frames: {pcs:x?}");
        assert!(
            pcs[kernel_frames..].iter().all(|&pc| pc < KERNEL_START),
            "user frames then kernel frames again: {pcs:x?}"
        );
        if pcs.len() > kernel_frames {
            joined += 1;
        }
    }
    assert!(total >= 50, "only {total} samples in 300 ms at 1 kHz");
    if kernel_frames_visible() {
        // Reading /dev/zero spends most of its time clearing user pages in the kernel.
        assert!(kernel_samples * 2 >= total, "{kernel_samples} of {total} samples in the kernel");
        assert!(
            joined * 10 >= kernel_samples * 9,
            "{joined} of {kernel_samples} kernel samples go on into the user stack"
        );
    } else {
        // perf hides the kernel: every sample is a user one.
        assert_eq!(kernel_samples, 0, "kernel samples where perf_event_paranoid hides them");
    }
}

#[test]
fn a_sampled_command_that_ended_has_its_exec_and_samples_in_the_log_every_time() {
    // The worker (woken by the command's pidfd) and the thread that reaps it both service the
    // host: whichever notices the end first, the command's samples and its exec are posted
    // before the driver hears that it ended (they used to be dropped about one run in three).
    let _serial = serial();
    for run in 0..24 {
        let (path, _file) = configure_log(&format!("ended-{run}"));
        let pmc = PmcSpec::new("cpu-clock")
            .mode(Mode::ThreadSampling)
            .rate(1_000_000)
            .allocate()
            .unwrap();
        // About 30 ms of CPU time: fewer samples than fill a quarter of a ring, so nothing
        // wakes the worker before the command ends.
        let script = "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done";
        let pid = api::spawn(&["sh".into(), "-c".into(), script.into()]).unwrap();
        pmc.attach(pid).unwrap();
        pmc.start().unwrap();
        api::resume(pid).unwrap();
        assert_eq!(api::wait(pid).unwrap(), 0);
        pmc.stop().unwrap();
        drop(pmc);
        let bytes = close_log(&path);
        let (mut execs, mut samples) = (0, 0);
        for entry in pmclog::Records::new(&bytes) {
            match entry.unwrap().record {
                pmclog::Record::ProcExec(x) if x.pid == pid => execs += 1,
                pmclog::Record::Callchain(c) if c.pid == pid => samples += 1,
                _ => {}
            }
        }
        assert!(execs == 1 && samples > 0, "run {run}: {execs} execs, {samples} samples");
    }
}
