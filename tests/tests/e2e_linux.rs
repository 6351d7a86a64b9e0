//! pmcstat end to end on the Linux host (`PMC_HOST=linux`) with real programs: the C programs of
//! `programs/` of this package, built by the tests, and the shell.
//!
//! Only software events are used (this machine may have no hardware PMU), and nothing depends on
//! timing: counts are checked against lower bounds that the work guarantees, and sampling
//! against where most of the time must go (`hot_function` runs 20 times longer than
//! `cold_function`, and everything else is start-up).

use pmc::events::pmu_table::PmuEventNames;
use std::sync::OnceLock;

use hwpmc_tests::{
    Host, Json, Run, allocations, arg, c_program, parse_callgraph, parse_folded, parse_top,
    pmcstat, pmcstat_as_nobody, sample_hot, samples_per_pmc, write_log,
};

/// The values line of FreeBSD's counting output for 64-bit counters: 20 digits a column, the
/// first column 2 wider for the header's `# `; each value followed by a space.
#[track_caller]
fn parse_values(line: &str, columns: usize) -> Vec<u64> {
    assert_eq!(line.len(), 2 + 21 * columns, "values line {line:?}");
    (0..columns)
        .map(|i| {
            let (start, width) = if i == 0 { (0, 22) } else { (2 + 21 * i, 20) };
            let field = &line[start..start + width + 1];
            assert!(field.ends_with(' '), "{line:?}");
            let digits = field.trim_start();
            assert!(digits.len() > 1, "column {i} of {line:?} is not right-aligned in its width");
            digits.trim_end().parse().unwrap_or_else(|_| panic!("column {i} of {line:?}"))
        })
        .collect()
}

/// FreeBSD's header line for 64-bit process counters: `# ` then each `p/NAME` right-aligned in
/// 20 columns and a space.
fn header(names: &[&str]) -> String {
    let mut text = String::from("# ");
    for name in names {
        text.push_str(&format!("{:>20} ", format!("p/{name}")));
    }
    text
}

/// The counting output on standard error: the header, one values line, nothing else.
#[track_caller]
fn counts(run: &Run, names: &[&str]) -> Vec<u64> {
    let mut lines = run.stderr.split('\n');
    assert_eq!(lines.next(), Some(header(names).as_str()), "{}", run.describe());
    let values = parse_values(lines.next().unwrap(), names.len());
    assert_eq!(lines.collect::<Vec<_>>(), [""], "one final newline\n{}", run.describe());
    values
}

#[test]
fn counting_soft_events_prints_real_counts_and_exits_with_the_command_status() {
    let names = ["task-clock", "page-faults", "context-switches"];
    let run = pmcstat(
        Host::Linux,
        &["-p", names[0], "-p", names[1], "-p", names[2], "--", "sh", "-c", "exit 3"],
    );
    run.assert_status(3);
    assert_eq!(run.stdout, "");
    let values = counts(&run, &names);
    assert!(values[0] > 0, "a shell runs for some nanoseconds: {values:?}");
    assert!(values[1] > 0, "a shell that execs touches pages: {values:?}");
}

#[test]
fn the_exit_status_of_a_killed_command_is_128_plus_the_signal() {
    let run = pmcstat(Host::Linux, &["-p", "task-clock", "--", "sh", "-c", "kill -9 $$"]);
    run.assert_status(128 + 9);
    counts(&run, &["task-clock"]);
}

#[test]
fn a_program_touching_n_pages_has_at_least_n_page_faults() {
    let pages = c_program("pages");
    for n in [256u64, 4096] {
        let run = pmcstat(
            Host::Linux,
            &["-p", "page-faults", "-p", "minor-faults", "--", arg(&pages), &n.to_string()],
        );
        run.assert_status(0);
        let values = counts(&run, &["page-faults", "minor-faults"]);
        assert!(values[0] >= n, "{n} pages touched, {} page faults", values[0]);
        assert!(values[1] >= n, "{n} fresh anonymous pages are minor faults: {}", values[1]);
    }
}

#[test]
fn task_clock_of_a_busy_program_is_plausible() {
    // 100 000 000 iterations of a dependent add take at least 100 000 000 cycles: more than
    // 10 ms of CPU time on any machine under 10 GHz. Load cannot lower it (task-clock counts
    // time on the CPU only).
    let hot = c_program("hot");
    let run = pmcstat(Host::Linux, &["-p", "task-clock", "--", arg(&hot), "100000000"]);
    run.assert_status(0);
    let values = counts(&run, &["task-clock"]);
    assert!(values[0] >= 10_000_000, "task-clock {} ns", values[0]);
}

#[test]
fn json_gives_every_pmc_and_the_exit_status() {
    let run = pmcstat(
        Host::Linux,
        &["--json", "-p", "task-clock", "-p", "page-faults", "--", "sh", "-c", "exit 3"],
    );
    run.assert_status(3);
    assert_eq!(run.stderr, "", "--json replaces the counting table");
    assert!(run.stdout.ends_with('\n') && run.stdout.lines().count() == 1, "{}", run.describe());
    let json = Json::parse(&run.stdout);
    assert_eq!(json.keys(), ["pmcs", "exit_status", "log_error"]);
    assert_eq!(json.get("exit_status").u64(), 3);
    assert_eq!(json.get("log_error"), &Json::Null);
    let pmcs = json.get("pmcs").array();
    assert_eq!(pmcs.len(), 2);
    for (pmc, event) in pmcs.iter().zip(["task-clock", "page-faults"]) {
        assert_eq!(pmc.keys(), ["event", "mode", "cpu", "value"]);
        assert_eq!(pmc.get("event").str(), event);
        assert_eq!(pmc.get("mode").str(), "process");
        assert_eq!(pmc.get("cpu"), &Json::Null);
        assert!(pmc.get("value").u64() > 0, "{event}: {pmc:?}");
    }
}

#[test]
fn attaching_to_a_running_process_counts_it() {
    let mut busy =
        std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().expect("sh");
    let pid = busy.id().to_string();
    let run = pmcstat(Host::Linux, &["--json", "-p", "task-clock", "-t", &pid, "-l", "0.3"]);
    busy.kill().unwrap();
    busy.wait().unwrap();
    run.assert_status(0);
    let json = Json::parse(&run.stdout);
    assert_eq!(json.get("exit_status"), &Json::Null, "no command of pmcstat's own");
    assert!(json.get("pmcs").array()[0].get("value").u64() > 0, "{}", run.describe());
}

/// One sampling run of `hot`, shared by the tests that analyse it: `pmcstat -P cpu-clock -O log
/// -- hot 400000000 5` (hot exits with status 5).
struct Sampled {
    run: Run,
    log: Vec<u8>,
    program: String,
}

fn sampled() -> &'static Sampled {
    static SAMPLED: OnceLock<Sampled> = OnceLock::new();
    SAMPLED.get_or_init(|| {
        let (run, log, program) = sample_hot(Some("5"));
        Sampled { run, log, program: arg(&program).to_owned() }
    })
}

/// The shared log written to a file in `dir`.
fn sampled_log(dir: &std::path::Path) -> std::path::PathBuf {
    write_log(dir, &sampled().log)
}

#[test]
fn sampling_exits_with_the_command_status_and_writes_only_the_log() {
    let s = sampled();
    s.run.assert_status(5);
    assert_eq!(s.run.stdout, "", "-O: the analysis is for -R");
    let pmcs = allocations(&s.log);
    assert_eq!(pmcs.len(), 1);
    assert_eq!(pmcs[0].1, "cpu-clock");
    let samples = samples_per_pmc(&s.log)[&pmcs[0].0];
    assert!(samples >= 20, "only {samples} samples of a program busy for ~0.2 s");
}

#[test]
fn the_callgraph_puts_the_hot_function_first_in_the_program_image() {
    let s = sampled();
    let dir = tempfile::tempdir().unwrap();
    let (log, out) = (sampled_log(dir.path()), dir.path().join("callgraph.txt"));
    let run = pmcstat(Host::Linux, &["-R", arg(&log), "-G", arg(&out)]);
    run.assert_status(0);
    let graph = parse_callgraph(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(graph.len(), 1);
    let pmc = &graph[0];
    assert_eq!(pmc.name, "cpu-clock");
    let first = &pmc.trees[0];
    assert_eq!(first[0].name, "hot_function", "{pmc:#?}");
    assert_eq!(first[0].image.as_deref(), Some(s.program.as_str()));
    assert!(first[0].count * 2 > pmc.samples, "hot_function has most samples: {pmc:#?}");
    // Its callers: main (the program's image, so not printed again) above all.
    let caller = first.iter().find(|l| l.depth == 1).expect("a caller");
    assert_eq!((caller.name.as_str(), caller.image.as_deref()), ("main", None), "{first:#?}");
}

#[test]
fn folded_stacks_end_in_the_hot_function_called_by_main() {
    let dir = tempfile::tempdir().unwrap();
    let (log, out) = (sampled_log(dir.path()), dir.path().join("out.folded"));
    let run = pmcstat(Host::Linux, &["-R", arg(&log), "--folded", arg(&out)]);
    run.assert_status(0);
    let stacks = parse_folded(&std::fs::read_to_string(&out).unwrap());
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    let (heaviest, count) = stacks.iter().max_by_key(|(_, n)| *n).unwrap();
    let tail: Vec<&str> = heaviest.iter().rev().take(2).map(String::as_str).collect();
    assert_eq!(tail, ["hot_function", "main"], "{stacks:?}");
    assert!(count * 2 > total, "{stacks:?}");
    // Every sample is one folded stack.
    let samples: u64 = samples_per_pmc(&sampled().log).values().sum();
    assert_eq!(total, samples);
}

#[test]
fn top_lists_the_hot_function_first_with_the_program_path() {
    let s = sampled();
    let dir = tempfile::tempdir().unwrap();
    let log = sampled_log(dir.path());
    let run = pmcstat(Host::Linux, &["-R", arg(&log), "--top", "3"]);
    run.assert_status(0);
    let blocks = parse_top(&run.stdout);
    assert_eq!(blocks.len(), 1, "{}", run.describe());
    let (name, samples, rows) = &blocks[0];
    assert_eq!(name, "cpu-clock");
    assert!(!rows.is_empty() && rows.len() <= 3, "{rows:?}");
    assert_eq!((rows[0].function.as_str(), rows[0].image.as_str()), ("hot_function", &*s.program));
    assert!(rows[0].self_samples * 2 > *samples, "{rows:?}");
    let main = rows.iter().find(|r| r.function == "main");
    if let Some(main) = main {
        assert!(main.total_samples >= rows[0].self_samples, "main calls hot_function: {rows:?}");
    }
}

#[test]
fn live_sampling_without_a_log_prints_the_flat_profile_and_keeps_the_exit_status() {
    let hot = c_program("hot");
    let run = pmcstat(Host::Linux, &["-q", "-P", "cpu-clock", "--", arg(&hot), "400000000", "7"]);
    run.assert_status(7);
    let blocks = parse_top(&run.stdout);
    assert_eq!(blocks.len(), 1, "{}", run.describe());
    let rows = &blocks[0].2;
    assert!(rows.len() <= 20, "the live profile shows the top 20");
    assert_eq!((rows[0].function.as_str(), rows[0].image.as_str()), ("hot_function", arg(&hot)));
}

#[test]
fn the_dump_of_a_linux_log_is_pmclogs_text_dump() {
    let dir = tempfile::tempdir().unwrap();
    let log = sampled_log(dir.path());
    let run = pmcstat(Host::Linux, &["-R", arg(&log)]);
    run.assert_status(0);
    let mut expected = Vec::new();
    assert_eq!(
        pmclog::dump_bytes_with_names(&sampled().log, PmuEventNames, &mut expected).unwrap(),
        pmclog::DumpEnd::Finished
    );
    assert_eq!(run.stdout.as_bytes(), expected.as_slice());
    assert!(run.stdout.contains(&format!("\"{}\"", sampled().program)), "the exec'd program");
}

#[test]
fn the_callgraph_of_a_linux_log_reproduces_its_sample_counts() {
    let dir = tempfile::tempdir().unwrap();
    let log = sampled_log(dir.path());
    let run = pmcstat(Host::Linux, &["-R", arg(&log), "-G", "-"]);
    run.assert_status(0);
    let graph = parse_callgraph(&run.stdout);
    let log = &sampled().log;
    let per_pmc = samples_per_pmc(log);
    let expected: Vec<(String, u64)> = allocations(log)
        .into_iter()
        .filter_map(|(id, name, _)| per_pmc.get(&id).map(|&n| (name, n)))
        .collect();
    let printed: Vec<(String, u64)> = graph.iter().map(|p| (p.name.clone(), p.samples)).collect();
    assert_eq!(printed, expected);
    for pmc in &graph {
        assert_eq!(pmc.root_total(), pmc.samples, "{}", pmc.name);
    }
}

#[test]
fn an_unprivileged_user_counts_and_samples_own_commands_in_user_mode() {
    // perf_event_paranoid 2 lets a user measure their own processes in user mode only: the
    // PMCs (both rings by default) fall back to user mode instead of failing. Needs root to
    // become an unprivileged user, and util-linux's setpriv; skipped otherwise.
    let Some(mut nobody) = pmcstat_as_nobody() else { return };
    let program = c_program("hot");
    let args = ["-p", "task-clock", "-n", "1", "-P", "cpu-clock", "--"];
    let output = nobody.args(args).arg(&program).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("p/task-clock"), "{stderr}");
    assert!(stdout.contains("hot_function"), "the profile names the hot function:\n{stdout}");
}

#[test]
fn the_raw_log_goes_to_a_tcp_socket_with_o_host_port() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let receiver = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut stream, &mut bytes).unwrap();
        bytes
    });
    let program = c_program("hot");
    let run = pmcstat(
        Host::Linux,
        &["-n", "1", "-P", "cpu-clock", "-O", &address, "--", arg(&program), "100000000"],
    );
    run.assert_status(0);
    let bytes = receiver.join().unwrap();
    let records: Vec<_> = pmclog::Records::new(&bytes).map(|e| e.unwrap().record).collect();
    assert!(matches!(records.first(), Some(pmclog::Record::Initialize(_))), "the log starts");
    assert!(records.iter().any(|r| matches!(r, pmclog::Record::Callchain(_))), "with samples");
}

/// The value lines of a counting output (after the `# ` header), one number per column.
fn value_lines(stderr: &str) -> Vec<u64> {
    stderr
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn counts_are_printed_every_interval_as_deltas_or_with_c_cumulatively() {
    let program = c_program("hot");
    let long = ["--", arg(&program), "2000000000"];
    let deltas = pmcstat(Host::Linux, &[&["-w", "0.1", "-p", "task-clock"][..], &long].concat());
    deltas.assert_status(0);
    let cumulative =
        pmcstat(Host::Linux, &[&["-w", "0.1", "-C", "-p", "task-clock"][..], &long].concat());
    cumulative.assert_status(0);
    let (d, c) = (value_lines(&deltas.stderr), value_lines(&cumulative.stderr));
    assert!(d.len() >= 3 && c.len() >= 3, "a line per interval and one at the end: {d:?} {c:?}");
    assert!(c.windows(2).all(|w| w[0] <= w[1]), "cumulative values never go down: {c:?}");
    // Deltas add up to the run's total, so the last one is less than their sum; cumulative
    // values end at the total.
    let total: u64 = d.iter().sum();
    assert!(d.last().unwrap() < &total, "the last line is a delta, not the total: {d:?}");
    assert!(c.last().unwrap() > &c[0], "cumulative values grow: {c:?}");
}

/// The line pmcstat prints when it could not write its log.
const LOG_WRITE_FAILED: &str = "pmcstat: the log could not be written, it is incomplete: ";

#[test]
fn a_log_that_cannot_be_written_is_reported_and_the_commands_status_kept() {
    // A full disk.
    let busy = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; exit 3";
    let args = ["-P", "cpu-clock", "-p", "task-clock", "-O", "/dev/full", "--", "sh", "-c", busy];
    let run = pmcstat(Host::Linux, &args);
    run.assert_status(3);
    let last = run.stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with(LOG_WRITE_FAILED) && last.contains("ENOSPC"), "{}", run.describe());
    assert!(run.stderr.starts_with("#         p/task-clock"), "no counts\n{}", run.describe());
    // --json says it too.
    let mut json_args = vec!["--json"];
    json_args.extend_from_slice(&args);
    let run = pmcstat(Host::Linux, &json_args);
    run.assert_status(3);
    let json = Json::parse(&run.stdout);
    assert!(json.get("log_error").str().contains("ENOSPC"), "{}", run.describe());
    // A connection the reader resets.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let closer = std::thread::spawn(move || drop(listener.accept().unwrap()));
    let args = ["-P", "cpu-clock", "-O", &address, "--", "sh", "-c", busy];
    let run = pmcstat(Host::Linux, &args);
    closer.join().unwrap();
    run.assert_status(3);
    let last = run.stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with(LOG_WRITE_FAILED), "{}", run.describe());
}

#[test]
fn without_a_command_a_log_that_cannot_be_written_is_the_exit_status() {
    let run = pmcstat(Host::Linux, &["-S", "cpu-clock", "-O", "/dev/full", "-l", "0.3"]);
    if run.stderr.contains("EPERM") || run.stderr.contains("EACCES") {
        eprintln!("skipped: system-wide sampling needs privilege here");
        return;
    }
    run.assert_status(74);
    assert!(run.stderr.contains(LOG_WRITE_FAILED), "{}", run.describe());
}

#[test]
fn the_launched_command_gets_sigpipe_as_usual() {
    // pmcstat itself ignores SIGPIPE (Rust programs do); its command must not inherit that:
    // in `yes | head`, `yes` dies of SIGPIPE instead of failing to write ("Broken pipe").
    let script = "yes | head -n 1 >/dev/null; echo done";
    let args = ["-p", "task-clock", "-o", "/dev/null", "--", "sh", "-c", script];
    let run = pmcstat(Host::Linux, &args);
    run.assert_status(0);
    assert_eq!((run.stdout.as_str(), run.stderr.as_str()), ("done\n", ""), "{}", run.describe());
}
