//! cputrack end to end: exact counts of a simulated program on the simulator host, a real
//! command and a running process on the Linux host, the output columns and the exit codes.

mod support;

use std::process::{Command, Output};

use support::{lines_labelled, run_tool, run_tool_on_model, text};

fn cputrack(host: &str, args: &[&str]) -> Output {
    run_tool(env!("CARGO_BIN_EXE_cputrack"), host, args)
}

fn stdout(output: &Output) -> String {
    text(&output.stdout)
}

fn stderr(output: &Output) -> String {
    text(&output.stderr)
}

#[test]
fn a_simulated_program_is_counted_exactly_with_illumos_columns() {
    let out = cputrack(
        "sim",
        &["-c", "pic0=PAPI_tot_ins,pic1=PAPI_br_ins,pic4=instr_retired.any", "hot-cold"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("   time lwp      event      pic0      pic1      pic4 "));
    let exit = lines.next().expect("the exit line");
    assert_eq!(&exit[7..], "   1       exit  10000000   1000000  10000000 ", "{text}");
    assert!(exit[..7].trim().parse::<f64>().is_ok(), "{exit}");
    assert_eq!(lines.next(), None, "{text}");
}

/// The simulator's AMD models (`PMC_SIM_MODEL`) with their `cpc_cciname`.
const AMD_MODELS: [(&str, &str); 3] =
    [("zen4", "AMD Family 19h"), ("zen2", "AMD Family 17h"), ("k10", "AMD Family 10h")];

#[test]
fn generic_events_count_a_simulated_program_exactly_on_amd() {
    for (model, _) in AMD_MODELS {
        let out = run_tool_on_model(
            env!("CARGO_BIN_EXE_cputrack"),
            "sim",
            Some(model),
            &["-c", "pic0=0xc0,PAPI_br_ins,PAPI_tot_cyc,PAPI_br_msp", "hot-cold"],
        );
        assert!(out.status.success(), "{model}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(
            text.starts_with("   time lwp      event      pic0      pic1      pic2      pic3 \n"),
            "{model}: {text}"
        );
        let exits = lines_labelled(&text, "exit");
        assert_eq!(exits[0][3..], ["10000000", "1000000", "12500000", "10000"], "{model}: {text}");
    }
}

#[test]
fn the_usage_text_lists_amd_generic_events_per_family() {
    for (model, cciname) in AMD_MODELS {
        let out = run_tool_on_model(env!("CARGO_BIN_EXE_cputrack"), "sim", Some(model), &["-h"]);
        let text = stdout(&out) + &stderr(&out);
        assert!(text.contains(&format!("interface: {cciname}\n")), "{model}: {text}");
        for generic in ["PAPI_tot_cyc", "PAPI_tot_ins", "PAPI_br_ins", "PAPI_br_msp", "PAPI_tlb_dm"]
        {
            assert!(text.contains(generic), "{model} lacks {generic}: {text}");
        }
        // Family 10h's taken branches and L3 misses (illumos), not Zen's.
        for generic in ["PAPI_br_tkn", "PAPI_l3_tcm"] {
            assert_eq!(text.contains(generic), model == "k10", "{model}, {generic}: {text}");
        }
        // Zen's conditional branches, not family 10h's.
        assert_eq!(text.contains("PAPI_br_cn"), model != "k10", "{model}: {text}");
    }
}

#[test]
fn bare_events_take_the_next_counters_and_flags_apply_per_counter() {
    // PAPI_br_msp lands on pic1 after pic0; nouser1 leaves pic1 counting nothing (the
    // program runs in user mode only).
    let out = cputrack("sim", &["-c", "PAPI_tot_ins,PAPI_br_msp,nouser1", "hot-cold"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("   time lwp      event      pic0      pic1 \n"), "{text}");
    assert_eq!(lines_labelled(&text, "exit")[0][3..], ["10000000", "0"], "{text}");
    let out = cputrack("sim", &["-c", "PAPI_tot_ins,PAPI_br_msp", "hot-cold"]);
    assert_eq!(lines_labelled(&stdout(&out), "exit")[0][3..], ["10000000", "10000"]);
}

#[test]
fn no_title_tsc_verbose_several_specs_and_an_output_file() {
    let dir = std::env::temp_dir().join(format!("cputrack-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("out.txt");
    let out = cputrack(
        "sim",
        &[
            "-n",
            "-t",
            "-v",
            "-o",
            file.to_str().unwrap(),
            "-c",
            "PAPI_tot_ins",
            "-c",
            "PAPI_br_ins",
            "hot-cold",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "", "everything goes to the -o file");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let labels: Vec<&str> = text.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    // The second set was never bound: as illumos, no line for it (its time would be negative).
    assert_eq!(labels, ["init_lwp", "fini_lwp", "exit"], "{text}");
    let exits = lines_labelled(&text, "exit");
    // time lwp label tsc value # spec
    assert_eq!(exits[0][4..], ["10000000", "#", "PAPI_tot_ins"], "{text}");
    assert!(exits[0][3].parse::<u64>().is_ok(), "{text}");
    assert!(text.lines().all(|l| !l.trim_start().starts_with('-')), "{text}");
}

#[test]
fn usage_errors_exit_2_and_failures_exit_1() {
    for args in [
        &["hot-cold"][..],
        &["-c", "bogus_event", "hot-cold"],
        &["-c", "pic0=PAPI_tot_ins,pic0=PAPI_br_ins", "hot-cold"],
        &["-c", "pic0=", "hot-cold"],
        &["-c", "PAPI_tot_ins"],
        &["-c", "PAPI_tot_ins", "-p", "1", "hot-cold"],
        &["-c", "PAPI_tot_ins", "-x", "hot-cold"],
        &["-c", "PAPI_tot_ins", "-T", "x", "hot-cold"],
        &["-c", "umask0=zz,PAPI_tot_ins", "hot-cold"],
    ] {
        let out = cputrack("sim", args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("Usage:"), "{args:?}");
    }
    let out = cputrack("sim", &["-c", "pic0=PAPI_tot_ins,pic0=PAPI_br_ins", "hot-cold"]);
    assert!(stderr(&out).starts_with("cputrack: repeated 'pic0' token\n"), "{}", stderr(&out));
    let out = cputrack("sim", &["-c", "pic4=PAPI_br_ins", "hot-cold"]);
    assert!(
        stderr(&out).starts_with("cputrack: pic4 cannot measure event 'PAPI_br_ins' on this cpu\n")
    );
    let out = cputrack("sim", &["-c", "PAPI_tot_ins", "no-such-program"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).starts_with("cputrack: cannot run command"), "{}", stderr(&out));
}

#[test]
fn help_prints_usage_and_the_capabilities() {
    let out = cputrack("sim", &["-h"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.starts_with("Usage:\n\tcputrack "), "{text}");
    assert!(text.contains("\tCPU performance counter interface: Intel Arch PerfMon"), "{text}");
    assert!(text.contains("\tevent4: instr_retired.any inst_retired.any \n"), "{text}");
    assert!(text.contains("\tattributes: edge inv umask cmask nouser sys \n"), "{text}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_command_ticks_and_exits_on_the_linux_host() {
    let out = cputrack("linux", &["-T", "0.1", "-c", "page-faults,task-clock", "sleep", "0.45"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("   time lwp      event      pic0      pic1 \n"), "{text}");
    let ticks = lines_labelled(&text, "tick");
    assert!((3..=5).contains(&ticks.len()), "{text}");
    let exit = &lines_labelled(&text, "exit")[0];
    let faults: u64 = exit[3].parse().unwrap();
    let ns: u64 = exit[4].parse().unwrap();
    assert!(faults > 0 && ns > 0, "sleep faults in its pages and runs: {text}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_running_process_is_followed_for_n_samples_on_the_linux_host() {
    let mut child = Command::new("sleep").arg("5").spawn().expect("sleep");
    let pid = child.id().to_string();
    let out =
        cputrack("linux", &["-n", "-T", "0.1", "-N", "3", "-c", "context-switches", "-p", &pid]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(lines_labelled(&text, "tick").len(), 3, "{text}");
    assert_eq!(text.lines().count(), 3, "no title, no exit line: {text}");
    let out = cputrack("linux", &["-c", "page-faults", "-p", "999999999"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn both_threads_of_a_simulated_program_are_counted() {
    // "threads": main starts a worker and both run hot (900 blocks of 10 000 instructions);
    // the worker, 5 blocks short when main exits, ends with the process. The count is the
    // process's (libcpc counts per process), exact for the simulator's default seed.
    let out = cputrack("sim", &["-c", "PAPI_tot_ins,PAPI_br_ins", "threads"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(lines_labelled(&stdout(&out), "exit")[0][3..], ["17950000", "1795000"]);
}

#[cfg(target_os = "linux")]
#[test]
fn sigint_ends_the_run_in_order() {
    let started = std::time::Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_cputrack"))
        .args(["-T", "0.1", "-c", "page-faults", "sleep", "30"])
        .env("PMC_HOST", "linux")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run cputrack");
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("wait for cputrack");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "it stopped at SIGINT");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!lines_labelled(&stdout(&out), "tick").is_empty(), "{}", stdout(&out));
}

/// The whitespace-separated fields of the lines of `-f` output (a pid column before the lwp)
/// labelled `label`.
fn pid_lines_labelled<'a>(out: &'a str, label: &str) -> Vec<Vec<&'a str>> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.get(3) == Some(&label))
        .collect()
}

#[test]
fn follow_fork_counts_forkers_child_exactly_under_its_own_pid() {
    // "forker": the parent forks, then parent and child each run hot (900 blocks): each is
    // measured on its own, the child from before it runs, for any number of CPUs.
    for cpus in ["1", "2", "4"] {
        let out = Command::new(env!("CARGO_BIN_EXE_cputrack"))
            .args(["-f", "-c", "PAPI_tot_ins,PAPI_br_ins", "forker"])
            .env("PMC_HOST", "sim")
            .env("PMC_SIM_CPUS", cpus)
            .output()
            .expect("run cputrack");
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.starts_with("   time    pid lwp      event      pic0      pic1 \n"), "{text}");
        let forks = pid_lines_labelled(&text, "fork");
        assert_eq!(forks.len(), 1, "{text}");
        let (parent, child) = (forks[0][1], forks[0][5]);
        assert_eq!(forks[0][2..], ["1", "fork", "#", child], "{text}");
        assert!(forks[0].len() == 6 && parent != child, "{text}");
        let mut exits: Vec<Vec<&str>> = pid_lines_labelled(&text, "exit");
        exits.sort_by_key(|f| f[1] != parent);
        assert_eq!(exits.len(), 2, "{text}");
        assert_eq!(exits[0][1..], [parent, "1", "exit", "9000000", "900000"], "{text}");
        assert_eq!(exits[1][1..], [child, "1", "exit", "9000000", "900000"], "{text}");
    }
}

#[test]
fn without_follow_fork_only_the_parent_is_counted_and_the_fork_line_is_printed() {
    let out = cputrack("sim", &["-c", "PAPI_tot_ins", "forker"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 3, "title, the fork and one exit line: {text}");
    // As illumos: the fork line without the pid column, `# <child pid>`.
    let fork = &lines_labelled(&text, "fork")[0];
    assert_eq!(fork[1..4], ["1", "fork", "#"], "{text}");
    assert!(fork[4].parse::<i32>().is_ok_and(|pid| pid > 0), "{text}");
    assert_eq!(lines_labelled(&text, "exit")[0][1..], ["1", "exit", "9000000"], "{text}");
}

#[test]
fn follow_fork_with_verbose_and_two_specs_binds_the_child_and_labels_its_lines() {
    let out = cputrack("sim", &["-f", "-v", "-c", "PAPI_tot_ins", "-c", "PAPI_br_ins", "forker"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let inits = pid_lines_labelled(&text, "init_lwp");
    assert_eq!(inits.len(), 2, "the parent's and the child's: {text}");
    assert_ne!(inits[0][1], inits[1][1], "{text}");
    let finis = pid_lines_labelled(&text, "fini_lwp");
    assert_eq!(finis.len(), 2, "{text}");
    for fini in finis {
        assert_eq!(fini[4..], ["9000000", "#", "PAPI_tot_ins"], "{text}");
    }
    // The second spec's set never counted (the simulator has no ticks): as illumos, no line.
    assert_eq!(pid_lines_labelled(&text, "exit").len(), 2, "one spec, two processes: {text}");
}

#[test]
fn an_exec_ends_the_tracking_without_follow_exec() {
    // "execer" runs cold (100 blocks), then executes hot-cold: cputrack prints the old image's
    // totals and the exec marker, and stops there (no exit line), with status 1 as illumos's.
    let out = cputrack("sim", &["-c", "PAPI_tot_ins,PAPI_br_ins", "execer"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "illumos says nothing more");
    let text = stdout(&out);
    let execs = lines_labelled(&text, "exec");
    assert_eq!(execs.len(), 2, "{text}");
    assert_eq!(execs[0][1..], ["1", "exec", "1000000", "100000"], "{text}");
    assert_eq!(execs[1][1..], ["1", "exec", "#", "'/usr/sim/bin/hot-cold'"], "{text}");
    assert!(lines_labelled(&text, "exit").is_empty(), "{text}");
    assert_eq!(text.lines().count(), 3, "{text}");
}

#[test]
fn follow_exec_counts_the_new_image_exactly_after_the_old_images_totals() {
    let out = cputrack("sim", &["-e", "-c", "PAPI_tot_ins,PAPI_br_ins", "execer"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let labels: Vec<&str> =
        text.lines().skip(1).filter_map(|l| l.split_whitespace().nth(2)).collect();
    assert_eq!(labels, ["exec", "exec", "exit"], "{text}");
    assert_eq!(lines_labelled(&text, "exec")[0][3..], ["1000000", "100000"], "{text}");
    assert_eq!(lines_labelled(&text, "exit")[0][3..], ["10000000", "1000000"], "{text}");
}

/// `tests/programs/forkexec.c` compiled with the system `cc` into this test's temporary
/// directory (once per test process).
#[cfg(target_os = "linux")]
fn forkexec() -> &'static str {
    static EXE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    EXE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("cputrack-forkexec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("forkexec");
        let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/programs/forkexec.c");
        let status = Command::new("cc")
            .args(["-std=c99", "-D_GNU_SOURCE", "-O1", "-Wall", "-Werror", "-o"])
            .arg(&exe)
            .arg(source)
            .status()
            .expect("run cc");
        assert!(status.success(), "cc {source}");
        exe.to_string_lossy().into_owned()
    })
}

/// The value in column `column` (after time, pid, lwp, label) of a `-f` line.
#[cfg(target_os = "linux")]
fn count(fields: &[&str], column: usize) -> u64 {
    fields[4 + column].parse().unwrap_or_else(|_| panic!("a count: {fields:?}"))
}

#[cfg(target_os = "linux")]
#[test]
fn follow_fork_and_exec_trace_a_real_program_on_the_linux_host() {
    // forkexec touches 64 pages, forks a child that touches 256, then executes itself
    // ("stage2"), which touches 128: with -f the child is counted under its own pid, with -e
    // the new image is counted on after the old one's totals.
    let exe = forkexec();
    let out = cputrack("linux", &["-f", "-e", "-T", "60", "-c", "page-faults,task-clock", exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("   time    pid lwp      event      pic0      pic1 \n"), "{text}");
    let forks = pid_lines_labelled(&text, "fork");
    assert_eq!(forks.len(), 1, "one fork: {text}");
    let (root, child) = (forks[0][1], forks[0][5]);
    assert_eq!(forks[0][4], "#", "{text}");
    assert_ne!(root, child);
    // One exit line per process, each under its pid (and its main LWP, the pid).
    let exits = pid_lines_labelled(&text, "exit");
    let mut pids: Vec<&str> = exits.iter().map(|f| f[1]).collect();
    pids.sort_unstable();
    let mut expected = vec![root, child];
    expected.sort_unstable();
    assert_eq!(pids, expected, "{text}");
    assert!(exits.iter().all(|f| f[1] == f[2]), "{text}");
    let child_exit = exits.iter().find(|f| f[1] == child).unwrap();
    assert!(count(child_exit, 0) >= 256 && count(child_exit, 1) > 0, "{text}");
    // The exec: the old image's totals, then the marker with the new program's path.
    let execs = pid_lines_labelled(&text, "exec");
    assert_eq!(execs.len(), 2, "{text}");
    assert!(execs.iter().all(|f| f[1] == root), "{text}");
    assert!(count(&execs[0], 0) >= 64, "{text}");
    assert_eq!(execs[1][4..], ["#", &format!("'{exe}"), "stage2'"], "{text}");
    // The new image's totals: its own 128 pages, not the old image's.
    let root_exit = exits.iter().find(|f| f[1] == root).unwrap();
    assert!(count(root_exit, 0) >= 128 && count(root_exit, 1) > 0, "{text}");
    // In order: the fork before the child's lines, the exec before the root's exit.
    let labels: Vec<(&str, &str)> = text
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .map(|f| (f[1], f[3]))
        .collect();
    let at = |pid: &str, label: &str| labels.iter().position(|&l| l == (pid, label)).unwrap();
    assert!(at(root, "fork") < at(child, "exit"), "{text}");
    assert!(at(root, "exec") < at(root, "exit"), "{text}");
    assert_eq!(labels.len(), 5, "fork, child exit, 2 exec, root exit: {text}");
}

#[cfg(target_os = "linux")]
#[test]
fn without_follow_flags_the_tracking_of_a_real_program_ends_at_its_exec_on_the_linux_host() {
    // No pid column, no child line: the fork line, then the old image's totals at the exec end
    // it (exit status 1, as illumos's); the exec marker shows the new command line.
    let exe = forkexec();
    let out = cputrack("linux", &["-T", "60", "-c", "page-faults", exe]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    let labels: Vec<&str> =
        text.lines().skip(1).filter_map(|l| l.split_whitespace().nth(2)).collect();
    assert_eq!(labels, ["fork", "exec", "exec"], "{text}");
    let execs = lines_labelled(&text, "exec");
    let faults: u64 = execs[0][3].parse().unwrap();
    assert!(faults >= 64, "{text}");
    assert_eq!(execs[1][3..], ["#", &format!("'{exe}"), "stage2'"], "{text}");

    // -e alone: the exec, then the new image's exit; the forked child is not followed.
    let out = cputrack("linux", &["-e", "-T", "60", "-c", "page-faults", exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let labels: Vec<&str> =
        text.lines().skip(1).filter_map(|l| l.split_whitespace().nth(2)).collect();
    assert_eq!(labels, ["fork", "exec", "exec", "exit"], "{text}");
    let faults: u64 = lines_labelled(&text, "exit")[0][3].parse().unwrap();
    assert!(faults >= 128, "{text}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_process_another_tracer_holds_cannot_be_captured_on_the_linux_host() {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new("sleep");
    command.arg("30");
    // SAFETY: the child only makes the ptrace system call before it executes sleep, which then
    // stops at its exec, traced by this test process.
    unsafe {
        command.pre_exec(|| {
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let mut child = command.spawn().expect("sleep");
    let pid = child.id().to_string();
    let out = cputrack("linux", &["-N", "1", "-c", "page-faults", "-p", &pid]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(
        message.starts_with("cputrack: pctx_run: Operation not permitted")
            && message.contains(&format!("cannot trace process {pid} (ptrace)")),
        "{message}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn following_more_processes_than_counters_in_turn_releases_each_ones_at_its_exit_on_linux() {
    // 40 children in turn, each followed and counted: more than the host's 16 software
    // counters, which suffice since each ended process's counters go back.
    let script = "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 \
                  21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40; do /bin/true; done";
    let out = cputrack("linux", &["-f", "-e", "-T", "60", "-c", "task-clock", "sh", "-c", script]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let forks = pid_lines_labelled(&text, "fork");
    let exits = pid_lines_labelled(&text, "exit");
    assert_eq!(forks.len(), 40, "{text}");
    let mut pids: Vec<&str> = exits.iter().map(|f| f[1]).collect();
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), 41, "an exit line per process, the shell's and its 40 children's");
    // Each child executes /bin/true: its exec lines, then its exit.
    assert_eq!(pid_lines_labelled(&text, "exec").len(), 80, "{text}");
}

/// A temporary directory of this test process, made empty.
#[cfg(target_os = "linux")]
fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cputrack-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg(target_os = "linux")]
#[test]
fn an_exec_without_follow_exec_lets_the_command_run_on_to_its_end_on_linux() {
    // The command executes another shell, which sleeps then makes marker2: the tracking ends
    // at the exec (status 1, as illumos's cputrack), but the new program runs to its end.
    let dir = temp_dir("exec-runs-on");
    let marker = dir.join("marker2");
    let script = format!("true; exec sh -c \"sleep 0.2; touch '{}'\"", marker.display());
    let out = cputrack("linux", &["-c", "task-clock", "sh", "-c", &script]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    assert!(marker.exists(), "the executed program ran to its end");
    let text = stdout(&out);
    let execs = lines_labelled(&text, "exec");
    assert_eq!(execs.len(), 2, "{text}");
    let marker_line = text.lines().find(|l| l.contains('#')).unwrap();
    assert!(marker_line.ends_with(&format!("# 'sh -c sleep 0.2; touch '{}''", marker.display())));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(target_os = "linux")]
#[test]
fn a_descendants_exec_ends_only_its_own_tracking_with_follow_fork_on_linux() {
    // 12 background jobs, each a shell that executes (its tracking ends there) and then makes
    // its file: every one runs to its end, and the followed shell's run ends with its exit.
    let dir = temp_dir("fork-exec");
    let script = format!(
        "cd '{}' && for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sh -c \"sleep 0.2; touch done$i\" & \
         done; wait",
        dir.display()
    );
    let out = cputrack("linux", &["-f", "-T", "60", "-c", "task-clock", "sh", "-c", &script]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for i in 1..=12 {
        assert!(dir.join(format!("done{i}")).exists(), "job {i} ran to its end: {text}");
    }
    assert_eq!(pid_lines_labelled(&text, "fork").len(), 12, "{text}");
    assert_eq!(pid_lines_labelled(&text, "exec").len(), 24, "totals and marker of each: {text}");
    let root = pid_lines_labelled(&text, "fork")[0][1];
    let exits = pid_lines_labelled(&text, "exit");
    assert!(exits.iter().any(|f| f[1] == root), "the shell's exit line: {text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_names_the_tsc_as_illumos_does_on_x86() {
    let out = cputrack("sim", &["-h"]);
    let text = stdout(&out);
    assert!(text.contains("\t-t\t  include virtualized tsc register\n"), "{text}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_failed_write_of_the_output_is_reported_with_status_1() {
    // A full device (`/dev/full`'s numbers, 1:7) made in a temporary directory, as the -o file
    // and as standard output: the run ends with status 1 and says why.
    let dir = temp_dir("full");
    let full = dir.join("full");
    let c_path = std::ffi::CString::new(full.to_str().unwrap()).unwrap();
    // SAFETY: mknod with a NUL-terminated path; makes a character device node (root).
    let made = unsafe { libc::mknod(c_path.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 7)) };
    assert_eq!(made, 0, "mknod: {}", std::io::Error::last_os_error());
    let out = cputrack("sim", &["-o", full.to_str().unwrap(), "-c", "PAPI_tot_ins", "hot-cold"]);
    assert_eq!(out.status.code(), Some(1));
    let message = "cputrack: cannot write the output: No space left on device";
    assert!(stderr(&out).starts_with(message), "{}", stderr(&out));
    let out = Command::new(env!("CARGO_BIN_EXE_cputrack"))
        .args(["-c", "PAPI_tot_ins", "hot-cold"])
        .env("PMC_HOST", "sim")
        .stdout(std::fs::OpenOptions::new().write(true).open(&full).unwrap())
        .output()
        .expect("run cputrack");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).starts_with(message), "{}", stderr(&out));
    assert!(full.exists(), "the device is left where it was");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(target_os = "linux")]
#[test]
fn sixty_four_specs_take_turns_on_the_host_s_sixteen_counters_on_linux() {
    // Each tick binds the next spec's set, which unbinds the one before (illumos): 64 specs
    // cycle twice over on 16 counters. -N ends the run.
    let mut args: Vec<&str> = vec!["-T", "0.005", "-N", "130"];
    for _ in 0..64 {
        args.extend(["-c", "task-clock"]);
    }
    args.extend(["sleep", "30"]);
    let out = cputrack("linux", &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(lines_labelled(&text, "tick").len(), 130, "{text}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_fork_tree_of_300_live_processes_runs_to_its_end_with_follow_fork_on_linux() {
    // 300 background jobs alive at once, each a forked shell that sleeps and then makes its
    // file. The host's 16 counters measure the first few; each other process's tracking ends
    // at its failed bind (as illumos's tracker per child gives up alone) and it runs on: the
    // command and every job live to their end, and the run ends with the command's exit.
    let dir = temp_dir("tree");
    let script = format!(
        "cd '{}' && for i in $(seq 300); do {{ sleep 0.3; touch f$i; }} & done; wait",
        dir.display()
    );
    let out =
        cputrack("linux", &["-f", "-T", "60", "-c", "task-clock,page-faults", "sh", "-c", &script]);
    assert!(out.status.success(), "{}", stderr(&out));
    let made = (1..=300).filter(|i| dir.join(format!("f{i}")).exists()).count();
    assert_eq!(made, 300, "every job ran to its end");
    let text = stdout(&out);
    // The shell's 300 jobs and its `seq` (and the touches of the jobs measured).
    assert!(pid_lines_labelled(&text, "fork").len() > 300, "{text}");
    let root = pid_lines_labelled(&text, "fork")[0][1];
    assert!(pid_lines_labelled(&text, "exit").iter().any(|f| f[1] == root), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
