//! pmcstat's command line for people and shells: `-h`/`--help` with the event syntax, units and
//! examples, `--version`, the manual page and completion scripts generated from the same
//! definition, and a quiet end when the reader of its output goes away.

use std::io::Read;
use std::process::{Command, Stdio};

use hwpmc_tests::{Host, arg, encode_log, one_line_error, pmcstat};

#[test]
fn h_and_help_print_the_event_syntax_units_and_examples() {
    for flag in ["-h", "--help"] {
        let run = pmcstat(Host::Linux, &[flag]);
        run.assert_status(0);
        for part in
            ["Usage:", "Events (-p/-s/-P/-S):", "Units:", "Examples:", "--pprof", "Exit status:"]
        {
            assert!(run.stdout.contains(part), "{flag}: no {part:?} in\n{}", run.stdout);
        }
    }
}

#[test]
fn version_prints_the_package_version() {
    let run = pmcstat(Host::Linux, &["--version"]);
    run.assert_status(0);
    assert_eq!(run.stdout, format!("pmcstat {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn the_manual_page_is_roff_for_section_8_with_every_option() {
    let run = pmcstat(Host::Linux, &["--print-man"]);
    run.assert_status(0);
    assert!(run.stdout.contains(".TH pmcstat 8"), "{}", run.stdout);
    for option in ["\\-R", "\\-\\-pprof", "\\-\\-print\\-completions", "Examples:"] {
        assert!(run.stdout.contains(option), "no {option:?} in the page");
    }
    // man(1) formats it, where man is installed.
    if Command::new("man").arg("--version").output().is_ok() {
        let dir = tempfile::tempdir().unwrap();
        let page = dir.path().join("pmcstat.8");
        std::fs::write(&page, &run.stdout).unwrap();
        let man = Command::new("man").arg("-l").arg(&page).env("MANPAGER", "cat").output().unwrap();
        assert!(man.status.success(), "{}", String::from_utf8_lossy(&man.stderr));
        assert!(String::from_utf8_lossy(&man.stdout).contains("pmcstat"));
    }
}

#[test]
fn completion_scripts_are_generated_for_each_shell_and_bash_parses_its_own() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let run = pmcstat(Host::Linux, &["--print-completions", shell]);
        run.assert_status(0);
        assert!(run.stdout.contains("pmcstat") && run.stdout.contains("pprof"), "{shell}");
    }
    let bash = pmcstat(Host::Linux, &["--print-completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("pmcstat.bash");
    std::fs::write(&script, &bash.stdout).unwrap();
    let check = Command::new("bash").arg("-n").arg(&script).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let bad = pmcstat(Host::Linux, &["--print-completions", "tcsh"]);
    bad.assert_status(64);
    assert!(one_line_error(&bad).contains("tcsh"), "{}", bad.stderr);
}

#[test]
fn a_closed_output_pipe_ends_pmcstat_quietly_as_sigpipe_would() {
    // A log whose text dump is far larger than a pipe's buffer.
    let pcs = [0x401000u64, 0x401100, 0x401200];
    let chain = pmclog::Record::Callchain(pmclog::Callchain {
        pid: 7,
        tid: 8,
        pmcid: 0x100,
        cpuflags: pmclog::CallchainFlags::new(0, 1),
        pcs: pmclog::ProgramCounters::from_words(&pcs),
    });
    let records = vec![chain; 20_000];
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("big.log");
    std::fs::write(&log, encode_log(&records)).unwrap();
    let mut child = Command::new(hwpmc_tests::pmcstat_binary())
        .args(["-R", arg(&log)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 100];
    child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(128 + libc::SIGPIPE));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "", "no message for a closed pipe");
}

/// A tmux server of this test's own, with one 100×30 window running `command`.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// `None` (with a note) where tmux is not installed, except under CI, which has it.
    fn start(command: &str) -> Option<Tmux> {
        let socket = format!("pmcstat-test-{}", std::process::id());
        let started = Command::new("tmux")
            // Wide and tall enough that the final profile (20 functions, long image paths)
            // neither wraps nor scrolls its header off the window.
            .args(["-L", &socket, "new-session", "-d", "-x", "200", "-y", "60", command])
            .status();
        match started {
            Ok(status) => {
                assert!(status.success(), "tmux new-session");
                Some(Tmux { socket })
            }
            Err(e) if std::env::var_os("CI").is_none() => {
                eprintln!("not run: tmux is not installed ({e})");
                None
            }
            Err(e) => panic!("CI has tmux: {e}"),
        }
    }

    /// What the window shows.
    fn screen(&self) -> String {
        let output =
            Command::new("tmux").args(["-L", &self.socket, "capture-pane", "-p"]).output().unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.socket, "kill-server"]).status();
    }
}

#[test]
fn t_on_a_terminal_is_a_full_screen_view_that_leaves_the_final_profile() {
    let hot = hwpmc_tests::c_program("hot");
    let command = format!(
        "PMC_HOST=linux {} -T -w 0.2 -P cpu-clock -- {} 2000000000; echo status=$?; sleep 60",
        hwpmc_tests::pmcstat_binary().display(),
        arg(&hot)
    );
    let Some(tmux) = Tmux::start(&command) else { return };
    // While it runs: the title, a table with its header and the hint, on the whole screen.
    hwpmc_tests::wait_for("the live view", || {
        let screen = tmux.screen();
        screen.contains("self%") && screen.contains("hot_function") && screen.contains("^C ends")
    });
    let live = tmux.screen();
    assert!(live.lines().next().unwrap().contains(" samples"), "{live}");
    hwpmc_tests::wait_for("the end of the run", || tmux.screen().contains("status=0"));
    // After it: the normal screen again, with the final profile as text.
    let after = tmux.screen();
    assert!(after.contains("@ cpu-clock [") && after.contains("hot_function"), "{after}");
    assert!(!after.contains("^C ends"), "the view is gone:\n{after}");
}
