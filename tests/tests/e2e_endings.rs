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

/// A listener on 127.0.0.1 with a tiny receive buffer (set before listen(2), so its
/// connections get it): a connection that is never read fills at once.
fn tiny_listener() -> std::net::TcpListener {
    use std::os::fd::AsRawFd;
    // SAFETY: socket(2) takes no pointers; the result is checked and then owned.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    // SAFETY: `fd` was just made by socket(2) and is owned by nothing else.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    let size: libc::c_int = 4096;
    let address = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr { s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be() },
        sin_zero: [0; 8],
    };
    // SAFETY: each call reads a valid local of the length it is given.
    unsafe {
        let len = std::mem::size_of_val(&size) as libc::socklen_t;
        let option = (&raw const size).cast();
        assert_eq!(libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, option, len), 0);
        let len = std::mem::size_of_val(&address) as libc::socklen_t;
        assert_eq!(libc::bind(fd, (&raw const address).cast(), len), 0);
        assert_eq!(libc::listen(fd, 1), 0);
    }
    assert!(socket.as_raw_fd() >= 0);
    std::net::TcpListener::from(socket)
}

/// The command of the network tests: a program 120 calls deep sampled every 50 µs (a log of
/// about ten megabytes, more than the connection's buffers hold), then `marker` is written and
/// the command exits 3.
fn busy_marked(marker: &Path) -> String {
    let deep = hwpmc_tests::c_program_with("deep", "deep", &["-O2", "-fomit-frame-pointer"]);
    format!("{} 500000000 120; touch {}; exit 3", arg(&deep), arg(marker))
}

/// The network tests' options before the address: a count, and samples (of the command's
/// descendants too) every 50 µs.
const NETWORK_ARGS: [&str; 8] = ["-d", "-p", "task-clock", "-n", "50000", "-P", "cpu-clock", "-O"];

/// Accepts one connection on `listener` and keeps it, never reading, until `done` is sent.
fn never_reading(listener: std::net::TcpListener) -> std::sync::mpsc::Sender<()> {
    let (done, wait) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let (connection, _) = listener.accept().unwrap();
        let _ = wait.recv();
        drop(connection);
    });
    done
}

#[test]
fn a_receiver_that_stops_reading_does_not_hang_pmcstat() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("done");
    let listener = tiny_listener();
    let address = listener.local_addr().unwrap().to_string();
    let done = never_reading(listener);
    let script = busy_marked(&marker);
    let args = NETWORK_ARGS.iter().copied().chain([address.as_str(), "--", "sh", "-c", &script]);
    let args: Vec<&str> = args.collect();
    let run = hwpmc_tests::start_pmcstat(hwpmc_tests::Host::Linux, &args)
        .finish_within(std::time::Duration::from_secs(120));
    drop(done);
    // The command's status, its counts, and the stall named last.
    run.assert_status(3);
    assert!(run.stderr.starts_with("#         p/task-clock"), "no counts\n{}", run.describe());
    let last = run.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("pmcstat: the log could not be written, it is incomplete: ")
            && last.contains(&format!(
                "({address} stopped reading: the log's writes made no progress for 10 s)"
            )),
        "{}",
        run.describe()
    );
}

/// Whether pmcstat's (libpmc's) log writer, the `hwpmc-worker` thread of process `pid`, waits
/// in the kernel for room in the socket's send buffer (`sk_stream_wait_memory`, which shows as
/// `wait_woken`; its idle wait is poll's).
fn waits_on_a_full_socket(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().any(|task| {
        let read = |name: &str| std::fs::read_to_string(task.path().join(name)).unwrap_or_default();
        read("comm").trim() == "hwpmc-worker"
            && ["wait_woken", "sk_stream_wait_memory"].contains(&read("wchan").trim())
    })
}

#[test]
fn the_first_signal_stops_waiting_for_a_receiver_that_stopped_reading() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("done");
    let listener = tiny_listener();
    let address = listener.local_addr().unwrap().to_string();
    let done = never_reading(listener);
    let script = busy_marked(&marker);
    let args = NETWORK_ARGS.iter().copied().chain([address.as_str(), "--", "sh", "-c", &script]);
    let args: Vec<&str> = args.collect();
    let pmcstat = hwpmc_tests::start_pmcstat(hwpmc_tests::Host::Linux, &args);
    // The command ended and pmcstat, ending its run, is stuck sending the log.
    hwpmc_tests::wait_for("the command's end", || marker.exists());
    hwpmc_tests::wait_for("pmcstat to wait on the receiver", || {
        waits_on_a_full_socket(pmcstat.pid())
    });
    // The first SIGINT stops the wait when pmcstat already knows the command ended; else it
    // ends the measurement, and the next one stops the wait. Either way pmcstat then ends at
    // once with the command's status: a SIGINT that would end pmcstat itself (status 130, the
    // command's status lost) fails the test.
    let pid = pmcstat.pid();
    while !hwpmc_tests::process_ended(pid) {
        pmcstat.signal(libc::SIGINT);
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let run = pmcstat.finish_within(std::time::Duration::from_secs(120));
    drop(done);
    run.assert_status(3);
    assert!(run.stderr.starts_with("#         p/task-clock"), "no counts\n{}", run.describe());
    let last = run.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!("(a signal stopped the wait for {address}, which was not reading)")),
        "{}",
        run.describe()
    );
}

/// The pid a command wrote into `file` with `echo $$`, once it is there.
fn pid_in(file: &Path) -> i32 {
    let mut pid = 0;
    hwpmc_tests::wait_for(&format!("a pid in {}", file.display()), || {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        pid = text.trim().parse().unwrap_or(0);
        text.ends_with('\n') && pid > 0
    });
    pid
}

/// A shell command that writes its pid into `pidfile` after `setup`, then becomes the `hot`
/// program spinning for far longer than any test (it keeps the pid and what `setup` ignored).
fn endless_hot(setup: &str, pidfile: &Path) -> String {
    let hot = hwpmc_tests::c_program("hot");
    format!("{setup} echo $$ > {}; exec {} 1000000000000000", arg(pidfile), arg(&hot))
}

/// Whether the log file at `path` holds a sample already (whole records only: the last one
/// may be partly written).
fn has_a_sample(path: &Path) -> bool {
    let bytes = std::fs::read(path).unwrap_or_default();
    let whole = &bytes[..bytes.len() - bytes.len() % 4];
    pmclog::Records::new(whole)
        .any(|e| e.is_ok_and(|e| matches!(e.record, pmclog::Record::Callchain(_))))
}

#[test]
fn samples_reach_the_log_file_without_waiting_for_a_full_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("slow.log");
    let pidfile = dir.path().join("pid");
    let script = endless_hot("", &pidfile);
    // One sample a second: a 256 KiB buffer would take over twenty minutes to fill.
    let args = ["-n", "1000000000", "-P", "cpu-clock", "-O", arg(&log), "--", "sh", "-c", &script];
    let pmcstat = hwpmc_tests::start_pmcstat(hwpmc_tests::Host::Linux, &args);
    pmcstat.wait_until_catching_signals();
    let command = pid_in(&pidfile);
    hwpmc_tests::wait_for("a sample in the log file", || has_a_sample(&log));
    pmcstat.signal(libc::SIGINT);
    let run = pmcstat.finish_within(std::time::Duration::from_secs(120));
    run.assert_status(128 + libc::SIGINT);
    assert!(hwpmc_tests::process_ended(command));
    assert!(closed_with_samples(&log).0, "the log was not closed");
}

#[test]
fn a_second_signal_closes_the_log_and_kills_a_command_that_ignores_the_first() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("run.log");
        let pidfile = dir.path().join("pid");
        let got = dir.path().join("got");
        // A shell that notes each signal and carries on counting (sampled itself).
        let script = format!(
            "trap 'touch {}' INT TERM HUP; echo $$ > {}; i=0; while :; do i=$((i+1)); done",
            arg(&got),
            arg(&pidfile)
        );
        let args = ["-P", "cpu-clock", "-O", arg(&log), "--", "sh", "-c", &script];
        let pmcstat = hwpmc_tests::start_pmcstat(hwpmc_tests::Host::Linux, &args);
        pmcstat.wait_until_catching_signals();
        let command = pid_in(&pidfile);
        hwpmc_tests::wait_for("a sample in the log file", || has_a_sample(&log));
        pmcstat.signal(signal);
        // pmcstat passed it on, and waits for the command, which carries on.
        hwpmc_tests::wait_for("the command to get the signal", || got.exists());
        assert!(!hwpmc_tests::process_ended(command));
        pmcstat.signal(signal);
        let (run, killed_by) = pmcstat.finish();
        // pmcstat ends as the signal ends a process (the shell's status 128 + signal).
        assert_eq!(killed_by, Some(signal), "{}", run.describe());
        hwpmc_tests::wait_for("the command to be killed", || hwpmc_tests::process_ended(command));
        let (closed, samples) = closed_with_samples(&log);
        assert!(closed && samples > 0, "signal {signal}: closed {closed}, {samples} samples");
    }
}

/// The state letter of process `pid` in `/proc/PID/stat` (`T`: stopped).
fn state_of(pid: i32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()).unwrap_or('?')
}

#[test]
fn sigint_ends_a_stopped_command_without_waiting_for_sigcont() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.log");
    let pidfile = dir.path().join("pid");
    let script = endless_hot("", &pidfile);
    let args = ["-P", "cpu-clock", "-O", arg(&log), "--", "sh", "-c", &script];
    let pmcstat = hwpmc_tests::start_pmcstat(hwpmc_tests::Host::Linux, &args);
    pmcstat.wait_until_catching_signals();
    let command = pid_in(&pidfile);
    hwpmc_tests::send_signal(command, libc::SIGSTOP);
    hwpmc_tests::wait_for("the command to stop", || state_of(command) == 'T');
    pmcstat.signal(libc::SIGINT);
    let run = pmcstat.finish_within(std::time::Duration::from_secs(120));
    run.assert_status(128 + libc::SIGINT);
    assert!(hwpmc_tests::process_ended(command));
    assert!(closed_with_samples(&log).0, "the log was not closed");
}

#[test]
fn a_second_signal_leaves_no_temporary_log_behind() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let pidfile = dir.path().join("pid");
    let got = dir.path().join("got");
    let script = format!(
        "trap 'touch {}' INT; echo $$ > {}; i=0; while :; do i=$((i+1)); done",
        arg(&got),
        arg(&pidfile)
    );
    // Sampling without -O: the log is a temporary file of pmcstat's, under TMPDIR.
    let mut pmcstat = Command::new(pmcstat_binary())
        .args(["-P", "cpu-clock", "--", "sh", "-c", &script])
        .env("PMC_HOST", "linux")
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = pmcstat.id() as i32;
    let command = pid_in(&pidfile);
    hwpmc_tests::wait_for("the temporary log", || std::fs::read_dir(&tmp).unwrap().count() == 1);
    hwpmc_tests::send_signal(pid, libc::SIGINT);
    hwpmc_tests::wait_for("the command to get the signal", || got.exists());
    hwpmc_tests::send_signal(pid, libc::SIGINT);
    pmcstat.wait().unwrap();
    hwpmc_tests::wait_for("the command to be killed", || hwpmc_tests::process_ended(command));
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
