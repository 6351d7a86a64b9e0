//! The simulator host through the Rust API: the embedded driver on the simulated Skylake gives
//! exact counts and samples for the built-in programs.

use pmc::api;
use pmc::host::{self, HostKind};
use pmc::{Mode, PmcFlags, PmcSpec};

/// Every test uses the simulator (each test thread has its own machine).
fn sim() {
    host::select(HostKind::Sim).expect("this test binary uses only the simulator");
}

/// Runs built-in program `name` with `pmcs` attached and started; returns its pid.
fn run_with(name: &str, pmcs: &[&pmc::Pmc]) -> i32 {
    let pid = api::spawn(&[name.into()]).unwrap();
    for p in pmcs {
        p.attach(pid).unwrap();
        p.start().unwrap();
    }
    api::resume(pid).unwrap();
    assert_eq!(api::wait(pid).unwrap(), 0);
    pid
}

#[test]
fn instructions_of_hot_cold_are_exactly_ten_million() {
    sim();
    let fixed = PmcSpec::new("instructions").allocate().unwrap();
    let gp = PmcSpec::new("INST_RETIRED.ANY_P").allocate().unwrap();
    let branches = PmcSpec::new("branches").allocate().unwrap();
    run_with("hot-cold", &[&fixed, &gp, &branches]);
    // 1000 blocks of exactly 10 000 instructions and 1000 branches each.
    assert_eq!(fixed.read().unwrap(), 10_000_000);
    assert_eq!(gp.read().unwrap(), 10_000_000);
    assert_eq!(branches.read().unwrap(), 1_000_000);
}

#[test]
fn a_counting_pmc_starts_from_its_initial_count() {
    sim();
    let pmc = PmcSpec::new("instructions").rate(5).allocate().unwrap();
    assert_eq!(pmc.read().unwrap(), 5);
    run_with("hot-cold", &[&pmc]);
    assert_eq!(pmc.read().unwrap(), 10_000_005);
}

#[test]
fn user_only_and_kernel_only_qualifiers_split_the_count() {
    sim();
    let usr = PmcSpec::new("instructions,usr").allocate().unwrap();
    let os = PmcSpec::new("INST_RETIRED.ANY_P,os").allocate().unwrap();
    run_with("hot-cold", &[&usr, &os]);
    assert_eq!(usr.read().unwrap(), 10_000_000, "every block runs in user mode");
    assert_eq!(os.read().unwrap(), 0);
}

#[test]
fn descendants_follow_the_child_of_forker() {
    sim();
    let parent_only = PmcSpec::new("instructions").allocate().unwrap();
    let with_children =
        PmcSpec::new("INST_RETIRED.ANY_P").flags(PmcFlags::DESCENDANTS).allocate().unwrap();
    run_with("forker", &[&parent_only, &with_children]);
    assert_eq!(parent_only.read().unwrap(), 9_000_000, "the parent runs hot: 900 blocks");
    assert_eq!(with_children.read().unwrap(), 18_000_000, "and so does its child");
}

#[test]
fn sampling_hot_cold_gives_one_sample_per_period_in_the_right_function() {
    sim();
    let dir = std::env::temp_dir().join(format!("libpmc-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sample.log");
    let file = std::fs::File::create(&path).unwrap();
    api::configure_log(std::os::fd::AsRawFd::as_raw_fd(&file)).unwrap();
    let pmc = PmcSpec::new("instructions")
        .mode(Mode::ThreadSampling)
        .flags(PmcFlags::CALLCHAIN)
        .rate(100_000)
        .allocate()
        .unwrap();
    let pid = run_with("hot-cold", &[&pmc]);
    api::flush_log().unwrap();
    api::close_log().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let program = hwpmc_sim_program("hot-cold");
    let (hot, cold) = (program.function_id("hot").unwrap(), program.function_id("cold").unwrap());
    let (mut in_hot, mut in_cold, mut total) = (0, 0, 0);
    for entry in pmclog::Records::new(&bytes) {
        if let pmclog::Record::Callchain(cc) = entry.unwrap().record {
            assert_eq!((cc.pid, cc.pmcid), (pid, pmc.id()));
            total += 1;
            let pc = cc.pcs.get(0).unwrap();
            match program.block_at(pc).map(|(f, _)| f) {
                Some(f) if f == hot => in_hot += 1,
                Some(f) if f == cold => in_cold += 1,
                other => panic!("sample at {pc:#x} in {other:?}"),
            }
        }
    }
    // 10 000 000 instructions at one sample per 100 000.
    assert_eq!((total, in_hot, in_cold), (100, 90, 10));
}

fn hwpmc_sim_program(name: &str) -> std::rc::Rc<hwpmc_sim::workload::Program> {
    pmc::host::sim::program(name).unwrap()
}

#[test]
fn a_program_the_simulator_does_not_have_is_enoent_with_the_list() {
    sim();
    let e = api::spawn(&["/bin/ls".into()]).unwrap_err();
    assert_eq!(e.errno, libc::ENOENT);
    assert!(e.to_string().contains("hot-cold"), "{e}");
}

#[test]
fn waiting_for_a_process_that_is_not_a_spawned_child_is_echild() {
    sim();
    assert_eq!(api::wait(4242).unwrap_err().errno, libc::ECHILD);
    let pid = api::spawn(&["hot-cold".into()]).unwrap();
    api::resume(pid).unwrap();
    assert_eq!(api::wait(pid).unwrap(), 0);
    assert_eq!(api::wait(pid).unwrap_err().errno, libc::ECHILD, "already waited for");
}

#[test]
fn driver_errors_keep_freebsd_errno() {
    sim();
    let p = PmcSpec::new("instructions").allocate().unwrap();
    let pid = api::spawn(&["hot-cold".into()]).unwrap();
    p.attach(pid).unwrap();
    assert_eq!(p.attach(pid).unwrap_err().errno, libc::EEXIST);
    p.start().unwrap();
    assert_eq!(p.write(1).unwrap_err().errno, libc::EBUSY);
    let ss = PmcSpec::new("branches").mode(Mode::SystemSampling).cpu(0).allocate().unwrap();
    assert_eq!(ss.start().unwrap_err().errno, pmc::error::EDOOFUS, "system sampling needs a log");
    assert_eq!(api::read(0x1234_5678).unwrap_err().errno, libc::EINVAL);
}

#[test]
fn process_events_of_forker_and_threads_come_in_order_and_unknown_pids_are_esrch() {
    use pmc::host::sim::{ProcessEvent as E, next_process_event};
    sim();
    let err = next_process_event(&[424_242]).unwrap_err();
    assert_eq!(err.errno, libc::ESRCH, "{err}");

    let parent = api::spawn(&["forker".into()]).unwrap();
    api::resume(parent).unwrap();
    let Some(E::Fork { parent: p, child }) = next_process_event(&[parent]).unwrap() else {
        panic!("forker forks first")
    };
    assert_eq!(p, parent);
    assert!(child != parent && child > 0);
    let mut exits = Vec::new();
    while let Some(event) = next_process_event(&[parent, child]).unwrap() {
        match event {
            E::Exit { pid, status } => exits.push((pid, status)),
            other => panic!("forker's processes are single-threaded: {other:?}"),
        }
        if exits.len() == 2 {
            break;
        }
    }
    exits.sort();
    assert_eq!(exits, [(parent.min(child), 0), (parent.max(child), 0)]);
    assert_eq!(api::wait(parent).unwrap(), 0);

    let pid = api::spawn(&["threads".into()]).unwrap();
    api::resume(pid).unwrap();
    assert_eq!(next_process_event(&[pid]).unwrap(), Some(E::LwpCreate { pid, lwp: 2 }));
    assert_eq!(next_process_event(&[pid]).unwrap(), Some(E::Exit { pid, status: 0 }));
    assert_eq!(api::wait(pid).unwrap(), 0);
}

#[test]
fn the_exec_of_execer_is_reported_before_the_new_image_runs() {
    use pmc::host::sim::{ProcessEvent as E, next_process_event, process_program};
    sim();
    let counter = PmcSpec::new("instructions").mode(Mode::ThreadCounting).allocate().unwrap();
    let pid = api::spawn(&["execer".into()]).unwrap();
    counter.attach(pid).unwrap();
    counter.start().unwrap();
    api::resume(pid).unwrap();
    assert_eq!(process_program(pid).unwrap(), "/usr/sim/bin/execer");
    assert_eq!(next_process_event(&[pid]).unwrap(), Some(E::Exec { pid }));
    assert_eq!(process_program(pid).unwrap(), "/usr/sim/bin/hot-cold");
    assert_eq!(counter.read().unwrap(), 1_000_000, "cold only: hot-cold has not run yet");
    assert_eq!(next_process_event(&[pid]).unwrap(), Some(E::Exit { pid, status: 0 }));
    assert_eq!(counter.read().unwrap(), 11_000_000);
    assert_eq!(api::wait(pid).unwrap(), 0);
    assert_eq!(process_program(pid).unwrap_err().errno, libc::ESRCH);
}

#[test]
fn a_stop_condition_stops_the_machine_after_the_block_execution_that_made_it_hold() {
    use pmc::host::sim::{BLOCK_INSTRUCTIONS, ProcessEvent as E, next_process_event_until};
    sim();
    let counter = PmcSpec::new("instructions").mode(Mode::ThreadCounting).allocate().unwrap();
    let pid = api::spawn(&["hot-cold".into()]).unwrap();
    counter.attach(pid).unwrap();
    counter.start().unwrap();
    api::resume(pid).unwrap();
    // Asked after every tick of one block execution per CPU: the process (one thread) stops
    // after exactly the block that reached 123 blocks.
    let mut stop = || counter.read().unwrap() >= 123 * BLOCK_INSTRUCTIONS;
    assert_eq!(next_process_event_until(&[pid], &mut stop).unwrap(), Some(E::Stopped));
    assert_eq!(counter.read().unwrap(), 123 * BLOCK_INSTRUCTIONS);
    // A condition that never holds: the next change of the process comes as before.
    let mut never = || false;
    let event = next_process_event_until(&[pid], &mut never).unwrap();
    assert_eq!(event, Some(E::Exit { pid, status: 0 }));
    assert_eq!(counter.read().unwrap(), 1_000 * BLOCK_INSTRUCTIONS);
    assert_eq!(api::wait(pid).unwrap(), 0);
}
