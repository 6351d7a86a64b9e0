//! cpustat end to end on the simulator and Linux hosts: a line per CPU per interval, the totals,
//! several specs in turn, and the exit codes.

#[path = "../../cputrack/tests/support/mod.rs"]
mod support;

use std::process::Output;

use support::{lines_labelled, run_tool, run_tool_on_model, text};

fn cpustat(host: &str, args: &[&str]) -> Output {
    run_tool(env!("CARGO_BIN_EXE_cpustat"), host, args)
}

#[test]
fn every_cpu_of_the_simulator_every_interval_then_the_totals() {
    let out = cpustat("sim", &["-c", "PAPI_tot_ins,PAPI_br_ins", "0.05", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("   time cpu event      pic0      pic1 \n"), "{stdout}");
    let ticks = lines_labelled(&stdout, "tick");
    assert_eq!(ticks.len(), 4, "two CPUs, two intervals: {stdout}");
    let mut cpus: Vec<&str> = ticks.iter().map(|f| f[1]).collect();
    cpus.sort();
    assert_eq!(cpus, ["0", "0", "1", "1"]);
    // The simulated machine runs nothing while cpustat watches it.
    assert!(ticks.iter().all(|f| f[3..] == ["0", "0"]), "{stdout}");
    let total = &lines_labelled(&stdout, "total")[0];
    assert_eq!(total[1..], ["2", "total", "0", "0"], "{stdout}");
    assert_eq!(stdout.lines().last().map(|l| l.len()), Some(7 + 1 + 3 + 1 + 5 + 1 + 10 + 10));
}

#[test]
fn amd_generic_events_and_raw_codes_count_on_every_cpu_of_the_simulator() {
    for model in ["zen4", "zen2", "k10"] {
        let out = run_tool_on_model(
            env!("CARGO_BIN_EXE_cpustat"),
            "sim",
            Some(model),
            &["-c", "PAPI_tot_cyc,PAPI_br_msp,pic3=0x4e1,umask3=0xf7", "0.02", "1"],
        );
        assert!(out.status.success(), "{model}: {}", text(&out.stderr));
        let stdout = text(&out.stdout);
        assert!(
            stdout.starts_with("   time cpu event      pic0      pic1      pic3 \n"),
            "{stdout}"
        );
        let ticks = lines_labelled(&stdout, "tick");
        assert_eq!(ticks.len(), 2, "{model}: one interval on two CPUs: {stdout}");
        // The simulated machine runs nothing while cpustat watches it.
        assert!(ticks.iter().all(|f| f[3..] == ["0", "0", "0"]), "{model}: {stdout}");
    }
    let out = run_tool_on_model(env!("CARGO_BIN_EXE_cpustat"), "sim", Some("zen4"), &["-h"]);
    let usage = text(&out.stdout) + &text(&out.stderr);
    assert!(usage.contains("AMD Family 19h") && usage.contains("PAPI_br_cn"), "{usage}");
}

#[test]
fn several_specs_take_turns_and_are_named_on_each_line() {
    let out = cpustat(
        "sim",
        &["-n", "-t", "-c", "PAPI_tot_ins", "-c", "pic1=0xc4,umask1=0", "0.02", "2"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let ticks = lines_labelled(&stdout, "tick");
    assert_eq!(ticks.len(), 4, "one cycle of two sets on two CPUs: {stdout}");
    assert!(ticks.iter().any(|f| f[5..] == ["#", "PAPI_tot_ins"]), "{stdout}");
    assert!(ticks.iter().any(|f| f[5..] == ["#", "pic1=0xc4,umask1=0"]), "{stdout}");
    assert_eq!(lines_labelled(&stdout, "total").len(), 2, "{stdout}");
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["1", "1"][..],
        &["-c", "PAPI_tot_ins", "0"],
        &["-c", "PAPI_tot_ins", "1", "0"],
        &["-c", "PAPI_tot_ins", "-T", "x", "1", "1"],
        &["-c", "nonsense_event", "1", "1"],
        &["-c", "PAPI_tot_ins", "-q"],
    ] {
        let out = cpustat("sim", args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("Usage:"), "{args:?}");
    }
    let out = cpustat("sim", &["-h"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains("\tGeneric Events:\n\n\tevent0: PAPI_tot_cyc PAPI_tot_ins"),
        "{}",
        text(&out.stdout)
    );
}

#[cfg(target_os = "linux")]
#[test]
fn cpu_clock_of_every_cpu_on_the_linux_host() {
    let out = cpustat("linux", &["-c", "cpu-clock,sys,context-switches", "0.1", "2"]);
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        // Counting a CPU is privileged (perf's system-wide events need CAP_PERFMON).
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("Permission denied"), "{}", text(&out.stderr));
        return;
    }
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let ncpu = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    assert_eq!(lines_labelled(&stdout, "tick").len(), 2 * ncpu, "{stdout}");
    let total = &lines_labelled(&stdout, "total")[0];
    assert_eq!(total[1], ncpu.to_string());
    let clock: i64 = total[3].parse().unwrap();
    // Every CPU's clock runs whatever it runs: about 0.2 s each.
    assert!(clock > 100_000_000 * ncpu as i64, "{stdout}");
}

#[test]
fn the_count_is_of_samples_over_all_sets_and_of_cycles_with_a_period() {
    // As illumos: without -p, `count` samples per CPU whatever the number of sets; with -p,
    // `count` cycles through them.
    let specs = ["-c", "PAPI_tot_ins", "-c", "PAPI_br_ins", "-c", "PAPI_tot_cyc"];
    let out = cpustat("sim", &[&specs[..], &["0.01", "4"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(lines_labelled(&stdout, "tick").len(), 2 * 4, "two CPUs: {stdout}");
    let out = cpustat("sim", &[&specs[..], &["-p", "0", "0.01", "2"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(lines_labelled(&stdout, "tick").len(), 2 * 2 * 3, "{stdout}");
}

#[test]
fn a_count_of_cycles_too_large_to_multiply_runs_until_interrupted() {
    // 2^63 cycles of two sets is more samples than 64 bits hold: the run goes on (it did not
    // start at all when the product wrapped to 0) until SIGINT ends it in order.
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cpustat"))
        .args(["-c", "PAPI_tot_ins", "-c", "PAPI_br_ins", "-p", "0", "0.01"])
        .arg("9223372036854775808")
        .env("PMC_HOST", "sim")
        .env_remove("PMC_SIM_CPUS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run cpustat");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first_tick = lines.by_ref().map_while(Result::ok).find(|l| l.contains(" tick "));
    // SAFETY: kill(2) of our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert!(first_tick.is_some(), "a sample before the interrupt: {rest:?}");
    assert!(status.success(), "{status:?}");
    assert!(rest.iter().any(|l| l.contains(" total ")), "the totals at the end: {rest:?}");
}

#[test]
fn help_names_the_tsc_as_illumos_does_on_x86() {
    let out = cpustat("sim", &["-h"]);
    assert!(text(&out.stdout).contains("\t-t\t  include tsc register\n"), "{}", text(&out.stdout));
}

#[test]
fn seventeen_events_on_sixteen_counters_say_why_the_token_is_bad() {
    let spec = vec!["page-faults"; 17].join(",");
    let out = cpustat("linux", &["-c", &spec, "1", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).starts_with(
            "cpustat: bad token 'page-faults': no counter after pic15 is left for it (16 counters)\n"
        ),
        "{}",
        text(&out.stderr)
    );
}

/// A full device (`/dev/full`'s numbers, 1:7) made in a temporary directory of this test.
#[cfg(target_os = "linux")]
fn full_device(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("cpustat-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("full");
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mknod with a NUL-terminated path; makes a character device node (root).
    let made = unsafe { libc::mknod(c_path.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 7)) };
    assert_eq!(made, 0, "mknod: {}", std::io::Error::last_os_error());
    (dir, path)
}

#[cfg(target_os = "linux")]
#[test]
fn a_failed_write_of_the_output_is_reported_with_status_1() {
    let (dir, full) = full_device("full");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cpustat"))
        .args(["-c", "PAPI_tot_ins", "0.01", "2"])
        .env("PMC_HOST", "sim")
        .stdout(std::fs::OpenOptions::new().write(true).open(&full).unwrap())
        .output()
        .expect("run cpustat");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("cpustat: cannot write the output: No space left on device"),
        "{}",
        text(&out.stderr)
    );
}
