//! pmcstat's failures end to end: each is one line on standard error that says what is wrong,
//! and a non-zero exit status (sysexits(3), as FreeBSD's pmcstat) — never a panic.

use hwpmc_tests::{
    Host, arg, one_line_error, pmcstat, pmcstat_as_nobody, pmcstat_env, record_offsets,
};

/// `EX_USAGE`, `EX_DATAERR`, `EX_NOINPUT`, `EX_UNAVAILABLE`, `EX_IOERR` of sysexits(3).
const EX_USAGE: i32 = 64;
const EX_DATAERR: i32 = 65;
const EX_NOINPUT: i32 = 66;
const EX_UNAVAILABLE: i32 = 69;
const EX_IOERR: i32 = 74;

#[track_caller]
fn fails_with(run: &hwpmc_tests::Run, status: i32, words: &[&str]) {
    let line = one_line_error(run);
    assert_eq!(run.status, status, "pmcstat {:?}\n{}", run.args, run.describe());
    for word in words {
        assert!(line.contains(word), "pmcstat {:?}: {line:?} does not say {word:?}", run.args);
    }
    assert_eq!(run.stdout, "", "pmcstat {:?}", run.args);
}

#[test]
fn an_unknown_event_is_refused_with_suggestions() {
    let run = pmcstat(Host::Linux, &["-p", "task-clok", "--", "true"]);
    fails_with(
        &run,
        EX_UNAVAILABLE,
        &["unknown event", "task-clok", "did you mean task-clock", "-L"],
    );
    let run = pmcstat(Host::Sim, &["-p", "instructionz", "--", "hot-cold"]);
    fails_with(&run, EX_UNAVAILABLE, &["unknown event", "did you mean instructions"]);
    let run = pmcstat(Host::Sim, &["-n", "1000", "-P", "INST_RETIRED.ANYP", "hot-cold"]);
    fails_with(&run, EX_UNAVAILABLE, &["unknown event", "INST_RETIRED.ANY_P"]);
}

#[test]
fn a_hardware_event_without_a_pmu_says_there_is_no_hardware_pmu() {
    let env = [("PMC_SIM_MODEL", "vm")];
    let run = pmcstat_env(Host::Sim, &env, &["-p", "instructions", "--", "hot-cold"]);
    fails_with(&run, EX_UNAVAILABLE, &["instructions", "not available", "no hardware PMU"]);
}

#[test]
fn a_hardware_event_on_a_linux_vm_without_a_pmu_says_why() {
    let list = pmcstat(Host::Linux, &["-L"]);
    list.assert_status(0);
    if list.stdout.lines().any(|l| l == "IAF" || l == "IAP" || l == "K8") {
        eprintln!("this machine has a hardware PMU: nothing to check");
        return;
    }
    let run = pmcstat(Host::Linux, &["-p", "instructions", "--", "true"]);
    fails_with(&run, EX_UNAVAILABLE, &["instructions", "not available", "no hardware PMU"]);
    // It names what is there instead.
    assert!(one_line_error(&run).contains("task-clock"), "{}", run.describe());
}

#[test]
fn a_command_that_does_not_exist_is_named() {
    let run = pmcstat(Host::Linux, &["-p", "task-clock", "--", "no-such-command-e2e", "x"]);
    fails_with(&run, EX_NOINPUT, &["no-such-command-e2e", "command not found"]);
    let run = pmcstat(Host::Linux, &["-p", "task-clock", "--", "/nonexistent/e2e/prog"]);
    fails_with(&run, EX_NOINPUT, &["/nonexistent/e2e/prog", "command not found"]);
    // The simulator runs its own programs only, and lists them.
    let run = pmcstat(Host::Sim, &["-p", "instructions", "--", "ls"]);
    fails_with(&run, EX_NOINPUT, &["\"ls\"", "not a simulated program", "hot-cold"]);
}

#[test]
fn attaching_to_a_pid_that_does_not_exist_fails() {
    // No process has a pid above pid_max.
    let max: u64 =
        std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
    let pid = (max + 1).to_string();
    let run = pmcstat(Host::Linux, &["-p", "task-clock", "-t", &pid]);
    fails_with(&run, EX_USAGE, &[&format!("-t {pid}"), "no such process"]);
    let run = pmcstat(Host::Linux, &["-p", "task-clock", "-t", "no-such-command-e2e"]);
    fails_with(&run, EX_USAGE, &["no-such-command-e2e", "no process"]);
}

#[test]
fn a_missing_log_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.log");
    for extra in [&[][..], &["-G", "-"][..], &["--top", "5"][..]] {
        let mut args = vec!["-R", arg(&missing)];
        args.extend_from_slice(extra);
        let run = pmcstat(Host::Linux, &args);
        fails_with(&run, EX_NOINPUT, &[arg(&missing), "No such file or directory"]);
    }
}

#[test]
fn an_unreadable_log_is_named() {
    // A directory cannot be read as a file, whoever runs the test (root reads any file).
    let dir = tempfile::tempdir().unwrap();
    let run = pmcstat(Host::Linux, &["-R", arg(dir.path()), "-G", "-"]);
    fails_with(&run, EX_IOERR, &[arg(dir.path()), "Is a directory"]);
}

/// A sampling log of `hot-cold` (sim), and the offset of its tenth record.
fn sim_log(dir: &std::path::Path) -> (Vec<u8>, u64) {
    let log = dir.join("good.log");
    let run =
        pmcstat(Host::Sim, &["-n", "100000", "-P", "instructions", "-O", arg(&log), "hot-cold"]);
    run.assert_status(0);
    let bytes = std::fs::read(&log).unwrap();
    let offset = record_offsets(&bytes)[9];
    (bytes, offset)
}

/// The report pmcstat writes with `analysis` (on standard output) of the log `bytes`.
fn report_of(dir: &std::path::Path, bytes: &[u8], analysis: &[&str]) -> String {
    let log = dir.join("intact.log");
    std::fs::write(&log, bytes).unwrap();
    let mut args = vec!["-q", "-R", arg(&log)];
    args.extend_from_slice(analysis);
    let run = pmcstat(Host::Sim, &args);
    run.assert_status(0);
    run.stdout
}

/// Asserts that `damaged` is reported as far as it is intact — the report of `bytes[..offset]`
/// — then refused with one error line naming `words` and EX_DATAERR.
#[track_caller]
fn reported_up_to_the_damage(
    dir: &std::path::Path,
    damaged: &std::path::Path,
    intact: &[u8],
    words: &[&str],
) {
    let stdout = hwpmc_tests::stdout_link(dir, "stdout");
    for analysis in [&["-G", "-"][..], &["--top", "3"][..], &["--folded", "-"][..]] {
        let mut args = vec!["-R", arg(damaged)];
        args.extend_from_slice(analysis);
        if analysis[0] == "--folded" {
            args = vec!["-R", arg(damaged), "--folded", arg(&stdout)];
        }
        let run = pmcstat(Host::Sim, &args);
        let line = one_line_error(&run);
        assert_eq!(run.status, EX_DATAERR, "{}", run.describe());
        for word in words {
            assert!(line.contains(word), "{line:?} does not say {word:?}");
        }
        assert!(line.contains("the reports cover the 9 records before it"), "{line}");
        let expected = if analysis[0] == "--folded" {
            report_of(dir, intact, &["--folded", arg(&stdout)])
        } else {
            report_of(dir, intact, analysis)
        };
        assert!(!expected.is_empty());
        assert_eq!(run.stdout, expected, "{analysis:?}: not the report of the intact records");
    }
}

#[test]
fn a_corrupt_log_is_reported_up_to_the_bad_record_then_refused_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, offset) = sim_log(dir.path());
    let intact = bytes[..offset as usize].to_vec();
    bytes[offset as usize + 3] = 0x5a; // the magic byte of the header word
    let corrupt = dir.path().join("corrupt.log");
    std::fs::write(&corrupt, &bytes).unwrap();
    let at = format!("{offset:#x}");
    reported_up_to_the_damage(
        dir.path(),
        &corrupt,
        &intact,
        &[arg(&corrupt), "corrupt", &at, "magic"],
    );
    // The dump prints the records before the bad one, then the error (see e2e_log.rs).
    let run = pmcstat(Host::Sim, &["-R", arg(&corrupt)]);
    let line = one_line_error(&run);
    assert_eq!(run.status, EX_DATAERR);
    assert!(line.contains(&format!("offset {at}")), "{line}");
}

#[test]
fn a_truncated_log_is_reported_up_to_the_cut_record_then_refused_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, offset) = sim_log(dir.path());
    let truncated = dir.path().join("truncated.log");
    std::fs::write(&truncated, &bytes[..offset as usize + 5]).unwrap();
    let at = format!("{offset:#x}");
    reported_up_to_the_damage(
        dir.path(),
        &truncated,
        &bytes[..offset as usize],
        &[arg(&truncated), &at],
    );
    let run = pmcstat(Host::Sim, &["-R", arg(&truncated)]);
    assert!(one_line_error(&run).contains(&at), "{}", run.describe());
}

#[test]
fn endless_or_random_input_fails_at_once() {
    for input in ["/dev/zero", "/dev/urandom"] {
        for analysis in [&[][..], &["-G", "-"], &["--top", "3"]] {
            let mut args = vec!["-R", input];
            args.extend_from_slice(analysis);
            let run = hwpmc_tests::start_pmcstat(Host::Sim, &args)
                .finish_within(std::time::Duration::from_secs(60));
            let line = one_line_error(&run);
            assert_eq!(run.status, EX_DATAERR, "{}", run.describe());
            assert!(line.contains("offset 0x0") || line.contains("offset 0x"), "{line}");
        }
    }
}

#[test]
fn options_that_conflict_or_lack_what_they_need_are_usage_errors() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["-R", "x.log", "-p", "task-clock"], &["-R", "cannot be combined"]),
        (&["-p", "task-clock", "-R", "x.log"], &["-R", "cannot be combined"]),
        (&["-R", "x.log", "-P", "cpu-clock"], &["-R", "cannot be combined"]),
        (&["-R", "x.log", "-t", "1"], &["-R", "cannot be combined"]),
        (&["-R", "x.log", "--", "true"], &["-R", "cannot be combined"]),
        (&["--", "true"], &["no PMC"]),
        (&[], &["no PMC"]),
        (&["-p", "task-clock"], &["need a command"]),
        (&["-n", "0", "-P", "cpu-clock", "true"], &["-n 0", "from 1 to"]),
        (&["-n", "many", "-P", "cpu-clock", "true"], &["-n", "not a valid number"]),
        (&["-w", "0", "-p", "task-clock", "true"], &["-w", "from 0.01 to"]),
        (&["-c", "3-1", "-s", "task-clock"], &["-c", "CPU list"]),
        (&["-c", "4094", "-s", "task-clock", "-l", "1"], &["CPU 4094 does not exist"]),
        (&["-c", "4095", "-s", "task-clock", "-l", "1"], &["CPU 4095 is beyond", "(4094)"]),
        (&["-p"], &["-p"]),
    ];
    for (args, words) in cases {
        let run = pmcstat(Host::Linux, args);
        fails_with(&run, EX_USAGE, words);
    }
}

#[test]
fn an_unknown_option_is_a_usage_error_naming_it() {
    for (args, option) in [
        (&["-p", "task-clock", "-x", "--", "true"][..], "-x"),
        (&["--bogus", "-p", "task-clock", "--", "true"][..], "--bogus"),
    ] {
        let run = pmcstat(Host::Linux, args);
        fails_with(&run, EX_USAGE, &[option]);
        assert!(!one_line_error(&run).contains("cannot run"), "{}", run.describe());
    }
}

#[test]
fn an_unknown_host_is_named() {
    let run = pmcstat_env(Host::Linux, &[("PMC_HOST", "bogus")], &["-p", "task-clock", "true"]);
    fails_with(&run, EX_UNAVAILABLE, &["bogus", "linux", "sim"]);
}

#[test]
fn measuring_another_users_process_without_privilege_is_eperm_with_the_reason() {
    // Needs root to become an unprivileged user; skipped otherwise.
    let Some(mut nobody) = pmcstat_as_nobody() else { return };
    let output = nobody.args(["-p", "task-clock", "-t", "1", "-l", "0.2"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(77), "EX_NOPERM\n{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for word in ["EPERM", "process 1", "perf_event_paranoid", "CAP_PERFMON"] {
        assert!(stderr.contains(word), "{stderr:?} does not say {word:?}");
    }
}

#[test]
fn numbers_out_of_range_are_usage_errors_that_name_the_range_never_panics() {
    for (args, says) in [
        (&["-l", "1e300", "-p", "task-clock", "--", "true"][..], "from 0.001 to 31536000"),
        (&["-l", "1e20", "-p", "task-clock", "--", "true"], "from 0.001 to 31536000"),
        (&["-w", "1e300", "-p", "task-clock", "--", "true"], "from 0.01 to 31536000"),
        (&["-w", "0.0000001", "-p", "task-clock", "--", "true"], "from 0.01 to 31536000"),
        (&["-n", "0", "-P", "cpu-clock", "--", "true"], "from 1 to 9223372036854775807"),
    ] {
        let run = pmcstat(Host::Linux, args);
        fails_with(&run, EX_USAGE, &[says]);
    }
}

#[test]
fn a_huge_cpu_list_is_refused_before_it_is_expanded() {
    let run = pmcstat(Host::Linux, &["-c", "0-4294967295", "-s", "cpu-clock"]);
    fails_with(&run, EX_USAGE, &["4294967295", "highest CPU number", "4094"]);
    // Within what a PMC id can name but beyond this machine: checked against the machine.
    let run = pmcstat(Host::Linux, &["-c", "0-4000", "-s", "cpu-clock", "-l", "1"]);
    fails_with(&run, EX_USAGE, &["CPU", "does not exist", "this machine has"]);
}

#[test]
fn one_pmc_too_many_names_the_rows_of_its_class() {
    let mut args: Vec<&str> = Vec::new();
    for _ in 0..17 {
        args.extend(["-p", "task-clock"]);
    }
    args.extend(["--", "true"]);
    let run = pmcstat(Host::Linux, &args);
    fails_with(&run, EX_UNAVAILABLE, &["the SOFT class has 16 rows", "at most 16 SOFT"]);
}

#[test]
fn a_failed_run_leaves_no_output_files() {
    let dir = tempfile::tempdir().unwrap();
    let (log, out) = (dir.path().join("run.log"), dir.path().join("counts.txt"));
    let failing: [&[&str]; 3] = [
        &["-P", "cpu-clock", "-p", "task-clock", "--", "/no/such/command"],
        &["-P", "cpu-clock", "-p", "no-such-event", "--", "true"],
        &["-P", "cpu-clock", "-t", "999999999"],
    ];
    for args in failing {
        let mut all = vec!["-O", arg(&log), "-o", arg(&out)];
        all.extend_from_slice(args);
        let run = pmcstat(Host::Linux, &all);
        one_line_error(&run);
        let left: Vec<_> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
        assert!(left.is_empty(), "pmcstat {all:?} left {left:?}");
    }
    // A report that cannot be written leaves no file either.
    let empty = dir.path().join("empty.log");
    std::fs::write(&empty, []).unwrap();
    let svg = dir.path().join("empty.svg");
    let run = pmcstat(Host::Linux, &["-R", arg(&empty), "--flamegraph", arg(&svg)]);
    one_line_error(&run);
    assert!(!svg.exists(), "an empty flame graph was left behind");
}

#[test]
fn options_a_run_would_ignore_are_usage_errors() {
    for (args, says) in [
        (&["-p", "task-clock", "-c", "0", "--", "true"][..], "-c 0 applies to the system PMCs"),
        (&["-p", "task-clock", "-G", "cg.txt", "--", "true"], "add a sampling PMC"),
        (&["-R", "x.log", "-w", "1"], "no meaning with -R"),
    ] {
        let run = pmcstat(Host::Linux, args);
        fails_with(&run, EX_USAGE, &[says]);
    }
}

/// What the error for an unknown `PMC_SIM_MODEL` lists.
const SIM_MODELS: &str =
    "use skylake, icelake, nehalem, core2, vm, arrowlake, alderlake, meteorlake, zen4, zen2, k10";

#[test]
fn an_unknown_host_or_simulated_machine_is_an_error_listing_the_valid_ones() {
    for (env, says) in [
        (("PMC_SIM_MODEL", "zen5"), &["\"zen5\"", SIM_MODELS][..]),
        (("PMC_SIM_MODEL", "bogus"), &["\"bogus\"", SIM_MODELS]),
        (("PMC_SIM_CPUS", "0"), &["PMC_SIM_CPUS", "a number from 1 to 64"]),
        (("PMC_SIM_CPUS", "many"), &["PMC_SIM_CPUS", "a number from 1 to 64"]),
        (("PMC_SIM_SEED", "-1"), &["PMC_SIM_SEED", "a number from 0 to"]),
    ] {
        let run = pmcstat_env(Host::Sim, &[env], &["-p", "instructions", "hot-cold"]);
        fails_with(&run, EX_UNAVAILABLE, says);
    }
    let mut command = std::process::Command::new(hwpmc_tests::pmcstat_binary());
    let output = command.args(["-p", "task-clock", "true"]).env("PMC_HOST", "bogus").output();
    let output = output.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(EX_UNAVAILABLE), "{stderr}");
    assert!(stderr.contains("unknown host \"bogus\": use freebsd, linux or sim"), "{stderr}");
}

#[test]
fn a_flame_graph_of_a_log_damaged_before_any_sample_reports_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes =
        hwpmc_tests::encode_log(&[pmclog::Record::PmcAllocateDyn(pmclog::PmcAllocateDyn {
            pmcid: 0x4000_0100,
            event: 0x1000,
            flags: 0,
            rate: 1000,
            name: b"cpu-clock",
            layout: pmclog::DynLayout::Kernel,
        })]);
    bytes.extend_from_slice(&[0xff; 16]);
    let log = dir.path().join("damaged.log");
    std::fs::write(&log, &bytes).unwrap();
    let svg = dir.path().join("flame.svg");
    let run = pmcstat(Host::Linux, &["-R", arg(&log), "--flamegraph", arg(&svg)]);
    let line = one_line_error(&run);
    assert_eq!(run.status, EX_DATAERR, "{}", run.describe());
    assert!(line.contains("corrupt log at byte offset"), "{line}");
    assert!(!svg.exists());
}

#[test]
fn log_paths_that_are_not_utf8_are_taken_as_freebsd_takes_any_bytes() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join(std::ffi::OsStr::from_bytes(b"run-\xff\xfe.log"));
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(hwpmc_tests::pmcstat_binary())
            .args(args)
            .env("PMC_HOST", "linux")
            .output()
            .unwrap()
    };
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let recorded =
        run(&[os("-P"), os("cpu-clock"), os("-O"), log.as_os_str(), os("--"), os("true")]);
    assert_eq!(recorded.status.code(), Some(0), "{}", String::from_utf8_lossy(&recorded.stderr));
    assert!(log.is_file());
    let read = run(&[os("-R"), log.as_os_str()]);
    assert_eq!(read.status.code(), Some(0), "{}", String::from_utf8_lossy(&read.stderr));
    assert!(String::from_utf8_lossy(&read.stdout).starts_with("initlog "));
}
