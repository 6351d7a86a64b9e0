//! The Linux host's worker thread (it reads perf's rings and notices ended targets) runs only
//! when something needs it: a process counting itself gets no thread of libpmc's.
#![cfg(target_os = "linux")]

use pmc::PmcSpec;
use pmc::api;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn counting_itself_starts_no_thread_and_a_log_starts_one() {
    let before = threads();
    let pmc = PmcSpec::new("task-clock").allocate().unwrap();
    pmc.attach(0).unwrap();
    pmc.start().unwrap();
    assert!(pmc.read().unwrap() > 0);
    assert_eq!(threads(), before, "no worker for a process counting itself");
    pmc.stop().unwrap();
    drop(pmc);
    let path = std::env::temp_dir().join(format!("libpmc-worker-{}.log", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    api::configure_log(std::os::fd::AsRawFd::as_raw_fd(&file)).unwrap();
    assert_eq!(threads(), before + 1, "the log's writer");
    api::close_log().unwrap();
    let _ = std::fs::remove_file(&path);
}
