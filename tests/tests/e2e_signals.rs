//! pmcstat interrupted while it measures a real command: SIGINT, SIGTERM and SIGHUP end the run
//! cleanly (counts printed, the log closed, the command signalled and waited for, its status
//! returned); a second signal ends pmcstat at once; SIGKILL leaves no orphaned command and a log
//! that reads up to its last whole record, with a warning that it was not closed.

use std::path::Path;

use hwpmc_tests::{
    Host, Running, arg, c_program, pmcstat, process_ended, send_signal, start_pmcstat, wait_for,
};

/// The pid a command wrote into `file` with `echo $$`, once it is there.
fn pid_in(file: &Path) -> i32 {
    let mut pid = 0;
    wait_for(&format!("a pid in {}", file.display()), || {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        pid = text.trim().parse().unwrap_or(0);
        text.ends_with('\n') && pid > 0
    });
    pid
}

/// A shell command that writes its pid into `pidfile`, then becomes the `hot` program spinning
/// for far longer than any test (it keeps the pid).
fn endless_hot(pidfile: &Path) -> String {
    let hot = c_program("hot");
    format!("echo $$ > {}; exec {} 1000000000000000", arg(pidfile), arg(&hot))
}

/// Counts and samples the endless `hot` program into `log`; returns pmcstat once it catches
/// signals, and the command's pid once it runs.
fn measure_endless(dir: &Path, log: &Path) -> (Running, i32) {
    let pidfile = dir.join("pid");
    let script = endless_hot(&pidfile);
    let args = ["-p", "task-clock", "-P", "cpu-clock", "-O", arg(log), "--", "sh", "-c", &script];
    let pmcstat = start_pmcstat(Host::Linux, &args);
    pmcstat.wait_until_catching_signals();
    let command = pid_in(&pidfile);
    (pmcstat, command)
}

/// Whether the log's last record is CLOSELOG and it holds at least one sample.
fn closed_with_samples(log: &[u8]) -> (bool, usize) {
    let entries: Vec<_> = pmclog::Records::new(log).map(|e| e.unwrap().record).collect();
    let samples = entries.iter().filter(|r| matches!(r, pmclog::Record::Callchain(_))).count();
    (matches!(entries.last(), Some(pmclog::Record::CloseLog)), samples)
}

/// Lets the command run until the log file has samples written out (the driver writes its
/// buffers as they fill), so an interrupt comes in the middle of sampling.
fn wait_for_samples_on_disk(log: &Path) {
    wait_for("samples in the log file", || {
        let bytes = std::fs::read(log).unwrap_or_default();
        let whole = &bytes[..bytes.len() - bytes.len() % 4];
        pmclog::Records::new(whole)
            .any(|e| e.is_ok_and(|e| matches!(e.record, pmclog::Record::Callchain(_))))
    });
}

#[test]
fn sigint_sigterm_and_sighup_end_the_run_cleanly_with_the_commands_status() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("run.log");
        let (pmcstat, command) = measure_endless(dir.path(), &log);
        wait_for_samples_on_disk(&log);
        pmcstat.signal(signal);
        let (run, killed_by) = pmcstat.finish();
        assert_eq!(killed_by, None, "signal {signal}: pmcstat died of it\n{}", run.describe());
        // The command got the signal (pmcstat passed it on) and its status is pmcstat's.
        run.assert_status(128 + signal);
        assert!(process_ended(command), "signal {signal}: the command still runs");
        // The counts were printed.
        let counts = run.stderr.lines().nth(1).unwrap_or_default();
        let value: u64 = counts.trim().parse().unwrap_or(0);
        assert!(run.stderr.starts_with("# ") && value > 0, "signal {signal}\n{}", run.describe());
        // The log is complete: every record decodes, the last is CLOSELOG, samples are in it.
        let bytes = std::fs::read(&log).unwrap();
        let (closed, samples) = closed_with_samples(&bytes);
        assert!(closed && samples > 0, "signal {signal}: closed {closed}, {samples} samples");
    }
}

#[test]
fn sigint_is_the_normal_end_of_attaching_to_a_process() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let mut target =
        std::process::Command::new("sh").args(["-c", &endless_hot(&pidfile)]).spawn().unwrap();
    let pid = pid_in(&pidfile);
    let log = dir.path().join("attach.log");
    let pid_text = pid.to_string();
    let args = ["-p", "task-clock", "-P", "cpu-clock", "-O", arg(&log), "-t", &pid_text];
    let pmcstat = start_pmcstat(Host::Linux, &args);
    pmcstat.wait_until_catching_signals();
    wait_for_samples_on_disk(&log);
    pmcstat.signal(libc::SIGINT);
    let (run, killed_by) = pmcstat.finish();
    assert_eq!(killed_by, None, "{}", run.describe());
    run.assert_status(128 + libc::SIGINT);
    let value: u64 = run.stderr.lines().nth(1).unwrap_or_default().trim().parse().unwrap_or(0);
    assert!(value > 0, "no task-clock count printed\n{}", run.describe());
    let (closed, samples) = closed_with_samples(&std::fs::read(&log).unwrap());
    assert!(closed && samples > 0, "closed {closed}, {samples} samples");
    // The process pmcstat attached to is not pmcstat's to end.
    assert!(!process_ended(pid), "pmcstat's SIGINT reached the process it attached to");
    target.kill().unwrap();
    target.wait().unwrap();
}

#[test]
fn a_second_signal_ends_pmcstat_at_once_and_the_command_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    // A command that ignores the first signal pmcstat passes on.
    let script = format!("trap '' INT TERM HUP; echo $$ > {}; while :; do :; done", arg(&pidfile));
    let pmcstat = start_pmcstat(Host::Linux, &["-p", "task-clock", "--", "sh", "-c", &script]);
    pmcstat.wait_until_catching_signals();
    let command = pid_in(&pidfile);
    pmcstat.signal(libc::SIGINT);
    // The first signal does not end a command that ignores it; pmcstat waits for it.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!process_ended(command));
    pmcstat.signal(libc::SIGINT);
    let (run, killed_by) = pmcstat.finish();
    assert_eq!(killed_by, Some(libc::SIGINT), "{}", run.describe());
    wait_for("the command to end with pmcstat", || process_ended(command));
}

#[test]
fn after_sigkill_no_command_is_left_and_the_log_reads_to_its_last_record_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("killed.log");
    let (measuring, command) = measure_endless(dir.path(), &log);
    wait_for_samples_on_disk(&log);
    send_signal(measuring.pid(), libc::SIGKILL);
    let (_, killed_by) = measuring.finish();
    assert_eq!(killed_by, Some(libc::SIGKILL));
    wait_for("the command to die with pmcstat", || process_ended(command));
    // Every buffer written reads back; the reader says the log was not closed and where its
    // last whole record ends.
    let bytes = std::fs::read(&log).unwrap();
    let mut records = pmclog::Records::new(&bytes);
    assert!(records.by_ref().all(|e| e.is_ok()), "a record written before the kill is damaged");
    let (whole, end) = (records.records_yielded(), records.offset());
    assert_eq!(end, bytes.len() as u64, "the log ends inside a record");
    assert!(whole > 1);
    let run = pmcstat(Host::Linux, &["-R", arg(&log)]);
    run.assert_status(0);
    let warning = format!(
        "pmcstat: warning: {}: the log has no CLOSELOG record: the run that wrote it did not \
         finish; its {whole} records up to byte offset {end:#x} are intact\n",
        log.display()
    );
    assert_eq!(run.stderr, warning);
    assert!(run.stdout.lines().any(|l| l.starts_with("callchain")), "{}", run.describe());
}
