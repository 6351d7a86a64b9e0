//! The Linux host's worker thread never wakes on a timer: it sleeps until perf or the driver
//! has something for it (its own test binary: the thread counts of `linux_worker.rs` must not
//! see this test's worker).
#![cfg(target_os = "linux")]

use pmc::PmcSpec;
use pmc::api;

/// The voluntary context switches of this process's worker thread (`hwpmc-worker`): each is one
/// time it went to sleep, so the difference between two looks is how often it woke.
fn worker_switches() -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() == "hwpmc-worker" {
            let status = std::fs::read_to_string(dir.join("status")).unwrap();
            let line = status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"));
            return line.and_then(|n| n.trim().parse().ok());
        }
    }
    None
}

#[test]
fn counting_a_launched_command_wakes_the_worker_only_when_it_ends() {
    let pmc = PmcSpec::new("task-clock").allocate().unwrap();
    let pid = api::spawn(&["sleep".into(), "1".into()]).unwrap();
    pmc.attach(pid).unwrap();
    pmc.start().unwrap();
    api::resume(pid).unwrap();
    // The worker watches the command (it counts another process); let it settle into its wait.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let before = worker_switches().expect("a worker thread watches the command");
    std::thread::sleep(std::time::Duration::from_millis(600));
    let after = worker_switches().unwrap();
    // A worker on a 20 ms timer would have woken about 30 times.
    assert!(after - before <= 2, "the worker woke {} times in 600 ms", after - before);
    assert_eq!(api::wait(pid).unwrap(), 0);
    pmc.stop().unwrap();
}
