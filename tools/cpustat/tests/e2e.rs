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
        &["-n", "-t", "-c", "PAPI_tot_ins", "-c", "pic1=0xc4,umask1=0", "0.02", "1"],
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
