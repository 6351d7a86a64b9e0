//! How a measurement ends when what is around it fails (issue 33, items 7, 6 and 5): a closed or
//! full standard error never loses the log nor panics, and the command's status is kept.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};

use hwpmc_tests::{arg, pmcstat_binary};

/// A shell loop that keeps a CPU busy for a moment (long enough for samples), then exits 3.
const BUSY_THEN_3: &str = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exit 3";

/// The exit status, standard output and the log of `pmcstat args` run with `stderr` as its
/// standard error.
fn run_with_stderr(args: &[&str], stderr: Stdio) -> (Option<i32>, String) {
    let output = Command::new(pmcstat_binary())
        .args(args)
        .env("PMC_HOST", "linux")
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::piped())
        .stderr(stderr)
        .output()
        .unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The write end of a pipe whose read end is already closed: every write fails with EPIPE
/// (pmcstat ignores SIGPIPE, as Rust programs do).
fn pipe_without_reader() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two-element array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just made by pipe2 and are owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

/// Whether the log at `path` ends with CLOSELOG, and how many samples it holds.
fn closed_with_samples(path: &Path) -> (bool, usize) {
    let bytes = std::fs::read(path).unwrap();
    let records: Vec<_> = pmclog::Records::new(&bytes).map(|e| e.unwrap().record).collect();
    let samples = records.iter().filter(|r| matches!(r, pmclog::Record::Callchain(_))).count();
    (matches!(records.last(), Some(pmclog::Record::CloseLog)), samples)
}

#[test]
fn a_closed_standard_error_keeps_the_log_and_the_commands_status() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.log");
    for interval in [None, Some("0.05")] {
        let mut args = vec!["-p", "task-clock", "-P", "cpu-clock", "-O", arg(&log)];
        if let Some(interval) = interval {
            args.extend(["-w", interval]);
        }
        args.extend(["--", "sh", "-c", BUSY_THEN_3]);
        let (status, _) = run_with_stderr(&args, pipe_without_reader());
        assert_eq!(status, Some(3), "{args:?}");
        let (closed, samples) = closed_with_samples(&log);
        assert!(closed && samples > 0, "{args:?}: closed {closed}, {samples} samples");
    }
}

#[test]
fn a_full_standard_error_never_panics_and_keeps_the_log_and_the_commands_status() {
    let dir = tempfile::tempdir().unwrap();
    let full = hwpmc_tests::full_device(dir.path(), "full");
    let log = dir.path().join("run.log");
    let stderr = || Stdio::from(std::fs::File::options().write(true).open(&full).unwrap());
    let args =
        ["-p", "task-clock", "-P", "cpu-clock", "-O", arg(&log), "--", "sh", "-c", BUSY_THEN_3];
    let (status, _) = run_with_stderr(&args, stderr());
    assert_eq!(status, Some(3));
    let (closed, samples) = closed_with_samples(&log);
    assert!(closed && samples > 0, "closed {closed}, {samples} samples");
    // The log cannot be written either: its message is lost, the status is still the command's.
    let args = ["-P", "cpu-clock", "-O", arg(&full), "--", "sh", "-c", BUSY_THEN_3];
    let (status, _) = run_with_stderr(&args, stderr());
    assert_eq!(status, Some(3));
    // A failure of pmcstat's own (a mistyped event) keeps its status, not a panic's.
    let (status, _) = run_with_stderr(&["-p", "no-such-event", "--", "true"], stderr());
    assert_eq!(status, Some(69));
    // --json to a closed standard output: the command's status.
    let output = Command::new(pmcstat_binary())
        .args(["--json", "-p", "task-clock", "--", "sh", "-c", BUSY_THEN_3])
        .env("PMC_HOST", "linux")
        .stdout(pipe_without_reader())
        .stderr(stderr())
        .status()
        .unwrap();
    assert_eq!(output.code(), Some(3));
}
