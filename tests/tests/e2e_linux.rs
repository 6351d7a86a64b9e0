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
    Host, Json, Run, TopRow, allocations, arg, c_program, c_program_with, linker_installed,
    one_line_error, parse_callgraph, parse_folded, parse_top, pmcstat, pmcstat_as_nobody,
    rust_program, sample_hot, samples_per_pmc, write_log,
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
    counts_in(run, &run.stderr, names)
}

/// The counts of a sampling run, which may also say, as its last line, that samples were lost
/// (a busy machine can fill perf's ring at a high rate; the run must say so, and does).
fn counts_of_sampling_run(run: &Run, names: &[&str]) -> Vec<u64> {
    let lost = |line: &str| {
        line.contains("samples were lost: the sample rings or log buffers filled up")
            || line.contains("losses (DROPNOTIFY): the sample rings or log buffers filled up")
    };
    let kept: Vec<&str> = run.stderr.split('\n').filter(|line| !lost(line)).collect();
    counts_in(run, &kept.join("\n"), names)
}

fn counts_in(run: &Run, stderr: &str, names: &[&str]) -> Vec<u64> {
    let mut lines = stderr.split('\n');
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
fn multiplex_scales_nothing_perf_never_rotated_and_prints_freebsds_layout() {
    // Software events never wait for a counter: perf's times say they ran all the time they
    // were enabled, so the counts are not scaled and no line of shares follows.
    let hot = c_program("hot");
    let names = ["task-clock", "context-switches"];
    let args = ["--multiplex", "-p", names[0], "-p", names[1], "--", arg(&hot), "10000000"];
    let run = pmcstat(Host::Linux, &args);
    run.assert_status(0);
    let values = counts(&run, &names);
    assert!(values[0] >= 1_000_000, "task-clock {} ns", values[0]);
    let run = pmcstat(Host::Linux, &["--json", "--multiplex", "-p", "task-clock", "--", "true"]);
    run.assert_status(0);
    let json = Json::parse(&run.stdout);
    let pmcs = json.get("pmcs").array();
    assert_eq!(pmcs[0].keys(), ["event", "mode", "cpu", "value"], "no times: not multiplexed");
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

/// Samples `program` run with `args` with cpu-clock (`--call-graph METHOD`) and returns its
/// flat profile: the samples and rows of `--top 100`.
fn top_of(program: &std::path::Path, args: &[&str], method: &str) -> (u64, Vec<TopRow>) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("top.log");
    let options = ["--call-graph", method, "-P", "cpu-clock", "-O", arg(&log), "--", arg(program)];
    pmcstat(Host::Linux, &[&options[..], args].concat()).assert_status(0);
    let report = pmcstat(Host::Linux, &["-R", arg(&log), "--top", "100"]);
    report.assert_status(0);
    let mut blocks = parse_top(&report.stdout);
    assert_eq!(blocks.len(), 1, "{}", report.describe());
    let (_, samples, rows) = blocks.remove(0);
    (samples, rows)
}

/// Whether `program`'s segments are not all the same distance from their file offsets (as LLD
/// and mold lay them out; GNU ld keeps the distance), which is what the tests of such binaries
/// are about.
fn segments_moved_from_their_offsets(program: &std::path::Path) -> bool {
    let out = std::process::Command::new("readelf").arg("-lW").arg(program).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let mut distances = text
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|fields| fields.first() == Some(&"LOAD"))
        .map(|fields| hex(fields[2]).wrapping_sub(hex(fields[1])));
    let first = distances.next().expect("PT_LOAD segments");
    distances.any(|d| d != first)
}

#[test]
fn programs_linked_by_lld_and_mold_name_their_hot_function_first() {
    for linker in ["lld", "mold"] {
        if !linker_installed(linker) {
            continue;
        }
        for pie in ["-pie", "-no-pie"] {
            let use_linker = format!("-fuse-ld={linker}");
            let output = format!("hot-{linker}{pie}");
            let flags = ["-O1", "-fno-omit-frame-pointer", &use_linker, pie];
            let program = c_program_with("hot", &output, &flags);
            assert!(segments_moved_from_their_offsets(&program), "{output}: GNU ld's layout");
            let (samples, rows) = top_of(&program, &["400000000"], "fp");
            let case = format!("{output}: {rows:?}");
            let top = (rows[0].function.as_str(), rows[0].image.as_str());
            assert_eq!(top, ("hot_function", arg(&program)), "{case}");
            assert!(rows[0].self_samples * 2 > samples, "{case}");
            let main = rows.iter().find(|r| r.function == "main").expect(&case);
            assert!(main.total_samples >= rows[0].self_samples, "{case}");
        }
    }
}

#[test]
fn code_linked_by_lld_and_mold_without_frame_pointers_unwinds_whole_with_cfi() {
    for linker in ["lld", "mold"] {
        if !linker_installed(linker) {
            continue;
        }
        let use_linker = format!("-fuse-ld={linker}");
        let output = format!("chain-O2-nofp-{linker}");
        let flags = ["-O2", "-fomit-frame-pointer", &use_linker];
        let program = c_program_with("chain", &output, &flags);
        assert!(segments_moved_from_their_offsets(&program), "{output}: GNU ld's layout");
        let dir = tempfile::tempdir().unwrap();
        let (log, folded) = (dir.path().join("chain.log"), dir.path().join("chain.folded"));
        let options = ["--call-graph", "dwarf", "-P", "cpu-clock", "-O", arg(&log), "--"];
        let run = pmcstat(Host::Linux, &[&options[..], &[arg(&program), "1500000000"]].concat());
        run.assert_status(0);
        pmcstat(Host::Linux, &["-R", arg(&log), "--folded", arg(&folded)]).assert_status(0);
        let stacks = parse_folded(&std::fs::read_to_string(&folded).unwrap());
        let total: u64 = stacks.iter().map(|(_, n)| n).sum();
        assert!(total >= 100, "{linker}: {total} samples of about a second: {stacks:?}");
        let full = full_chain_samples(&stacks);
        assert!(full * 10 >= total * 8, "{linker}: {full} of {total} are main;a;b;c: {stacks:?}");
    }
}

#[test]
fn a_rust_release_binary_linked_by_rust_lld_names_its_hot_function_and_callers() {
    let program = rust_program("hot_rust");
    if !segments_moved_from_their_offsets(&program) {
        eprintln!("note: rustc linked {} with GNU ld's layout", program.display());
    }
    let (samples, rows) = top_of(&program, &["400000000"], "dwarf");
    let case = format!("{rows:?}");
    assert_eq!(rows[0].function, "hot_rust::hot_function", "{case}");
    assert!(rows[0].self_samples * 2 > samples, "{case}");
    let main = rows.iter().find(|r| r.function == "hot_rust::main").expect(&case);
    assert!(main.total_samples >= rows[0].self_samples, "main calls hot_function: {case}");
}

#[test]
fn code_a_program_generated_is_named_by_its_jit_map_file() {
    let program = c_program("jit");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jit.log");
    let args = ["-P", "cpu-clock", "-O", arg(&log), "--", arg(&program), "1500000000"];
    let run = pmcstat(Host::Linux, &args);
    // The map file the program wrote, removed whatever the outcome.
    let map = run.stdout.trim().to_owned();
    let _remove = scopeguard(&map);
    run.assert_status(0);
    assert!(map.starts_with("/tmp/perf-") && map.ends_with(".map"), "{}", run.describe());
    let report = pmcstat(Host::Linux, &["-R", arg(&log), "--top", "3"]);
    report.assert_status(0);
    let blocks = parse_top(&report.stdout);
    let (_, samples, rows) = &blocks[0];
    let top = (rows[0].function.as_str(), rows[0].image.as_str());
    assert_eq!(top, ("jitted_hot_loop", map.as_str()), "{rows:?}");
    assert!(rows[0].self_samples * 2 > *samples, "{rows:?}");
}

#[test]
fn code_a_program_generated_is_named_by_its_jitdump_file() {
    let program = c_program("jit");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jit.log");
    let jit_dir = dir.path().join("dumps");
    std::fs::create_dir(&jit_dir).unwrap();
    let args =
        ["-P", "cpu-clock", "-O", arg(&log), "--", arg(&program), "1500000000", arg(&jit_dir)];
    pmcstat(Host::Linux, &args).assert_status(0);
    let dump = std::fs::read_dir(&jit_dir).unwrap().next().unwrap().unwrap().path();
    let report = pmcstat(Host::Linux, &["-R", arg(&log), "--top", "3"]);
    report.assert_status(0);
    assert!(!report.stderr.contains("jit-"), "the dump is no image to warn of: {}", report.stderr);
    let blocks = parse_top(&report.stdout);
    let (_, samples, rows) = &blocks[0];
    let top = (rows[0].function.as_str(), rows[0].image.as_str());
    assert_eq!(top, ("jitted_dump_loop", arg(&dump)), "{rows:?}");
    assert!(rows[0].self_samples * 2 > *samples, "{rows:?}");
}

/// Removes the file at `path` when dropped.
fn scopeguard(path: &str) -> impl Drop + '_ {
    struct Remove<'a>(&'a str);
    impl Drop for Remove<'_> {
        fn drop(&mut self) {
            if self.0.starts_with("/tmp/perf-") {
                let _ = std::fs::remove_file(self.0);
            }
        }
    }
    Remove(path)
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
    let args = ["-p", "task-clock", "-n", "1000000", "-P", "cpu-clock", "--"];
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
        &["-n", "1000000", "-P", "cpu-clock", "-O", &address, "--", arg(&program), "100000000"],
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
    let dir = tempfile::tempdir().unwrap();
    let full = hwpmc_tests::full_device(dir.path(), "full");
    let args = ["-P", "cpu-clock", "-p", "task-clock", "-O", arg(&full), "--", "sh", "-c", busy];
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
    let dir = tempfile::tempdir().unwrap();
    let full = hwpmc_tests::full_device(dir.path(), "full");
    let run = pmcstat(Host::Linux, &["-S", "cpu-clock", "-O", arg(&full), "-l", "0.3"]);
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
    let dir = tempfile::tempdir().unwrap();
    let null = hwpmc_tests::null_device(dir.path(), "null");
    let args = ["-p", "task-clock", "-o", arg(&null), "--", "sh", "-c", script];
    let run = pmcstat(Host::Linux, &args);
    run.assert_status(0);
    assert_eq!((run.stdout.as_str(), run.stderr.as_str()), ("done\n", ""), "{}", run.describe());
}

/// The `--summary` block of a run's standard error: the lines after FreeBSD's counts.
fn summary_lines(run: &Run) -> Vec<String> {
    let text = run.stderr.split_once("Performance counter stats for").map_or("", |(_, rest)| rest);
    text.lines().map(str::to_owned).collect()
}

#[test]
fn the_summary_follows_freebsds_counts_with_units_rates_and_times() {
    let hot = c_program("hot");
    let run = pmcstat(
        Host::Linux,
        &["--summary", "-p", "task-clock", "-p", "page-faults", "--", arg(&hot), "50000000"],
    );
    run.assert_status(0);
    // FreeBSD's layout first, as scripts read it.
    assert!(run.stderr.starts_with(&header(&["task-clock", "page-faults"])), "{}", run.describe());
    let lines = summary_lines(&run);
    assert!(lines[0].starts_with(&format!(" '{} 50000000':", arg(&hot))), "{lines:?}");
    let task_clock = lines.iter().find(|l| l.contains("task-clock")).unwrap();
    assert!(
        task_clock.contains(" msec task-clock") && task_clock.contains("CPUs utilized"),
        "{task_clock}"
    );
    let faults = lines.iter().find(|l| l.contains("page-faults")).unwrap();
    assert!(faults.ends_with("/sec"), "{faults}");
    for time in ["seconds time elapsed", "seconds user", "seconds sys"] {
        assert!(lines.iter().any(|l| l.ends_with(time)), "{time}: {lines:?}");
    }
    // Counts are those of FreeBSD's line, with separators.
    let values = parse_values(run.stderr.lines().nth(1).unwrap(), 2);
    let shown: String = faults.split_whitespace().next().unwrap().replace(',', "");
    assert_eq!(shown, values[1].to_string());
    let ms = task_clock.split_whitespace().next().unwrap();
    assert_eq!(ms, format!("{:.2}", values[0] as f64 / 1e6));
    assert!(!run.stderr.contains("add -d"), "a program that starts no process");
}

#[test]
fn the_summary_notes_processes_that_were_not_followed() {
    let hot = c_program("hot");
    let command = format!("{} 100000000", arg(&hot));
    let without =
        pmcstat(Host::Linux, &["--summary", "-p", "task-clock", "--", "sh", "-c", &command]);
    without.assert_status(0);
    assert!(without.stderr.contains("add -d to count them too"), "{}", without.describe());
    let with =
        pmcstat(Host::Linux, &["--summary", "-d", "-p", "task-clock", "--", "sh", "-c", &command]);
    with.assert_status(0);
    assert!(!with.stderr.contains("add -d"), "{}", with.describe());
}

#[test]
fn a_sampling_run_notes_processes_that_were_not_followed() {
    let hot = c_program("hot");
    // The shell runs the program in a child (`; true` keeps it from exec'ing it in place).
    let command = format!("{} 100000000; true", arg(&hot));
    let sample = |follow: bool| {
        let mut args = vec!["-P", "cpu-clock", "--top", "3"];
        if follow {
            args.insert(0, "-d");
        }
        args.extend(["--", "sh", "-c", &command]);
        let run = pmcstat(Host::Linux, &args);
        run.assert_status(0);
        run
    };
    let without = sample(false);
    let note = without.stderr.lines().find(|l| l.contains("were not followed"));
    let note = note.unwrap_or_else(|| panic!("{}", without.describe()));
    assert!(note.starts_with("pmcstat: note: the command's processes used "), "{note}");
    assert!(note.ends_with("add -d to sample them too"), "{note}");
    let with = sample(true);
    assert!(!with.stderr.contains("add -d"), "{}", with.describe());
    assert!(with.stdout.contains("hot_function"), "the child was sampled: {}", with.describe());
}

#[test]
fn the_summary_is_left_out_for_scripts_and_with_q() {
    for args in [
        &["-p", "task-clock", "--", "true"][..],
        &["--summary", "-q", "-p", "task-clock", "--", "true"],
    ] {
        let run = pmcstat(Host::Linux, args);
        run.assert_status(0);
        assert!(!run.stderr.contains("Performance counter stats"), "{args:?}: {}", run.describe());
    }
}

#[test]
fn freq_samples_the_clock_event_that_many_times_a_second_of_cpu_time() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("freq.log");
    let hot = c_program("hot");
    let run = pmcstat(
        Host::Linux,
        &[
            "-p",
            "task-clock",
            "--freq",
            "10000",
            "-P",
            "cpu-clock",
            "-O",
            arg(&log),
            "--",
            arg(&hot),
            "200000000",
        ],
    );
    run.assert_status(0);
    let cpu_ns = counts_of_sampling_run(&run, &["task-clock"])[0];
    let bytes = std::fs::read(&log).unwrap();
    // The log says the period: 100 000 ns.
    let rates: Vec<(String, u64)> =
        allocations(&bytes).into_iter().map(|(_, name, rate)| (name, rate)).collect();
    assert_eq!(rates, [("task-clock".to_owned(), 0), ("cpu-clock".to_owned(), 100_000)]);
    // One sample per 100 µs of CPU time: at least half of them (a sample needs the timer to
    // fire while the program runs), and not more than cpu-clock and task-clock, two clocks of
    // the same CPU time, can differ by (5 %).
    let samples: u64 = samples_per_pmc(&bytes).values().sum();
    let expected = cpu_ns / 100_000;
    assert!(
        samples * 2 >= expected && samples <= expected + expected / 20 + 10,
        "{samples} samples for {cpu_ns} ns"
    );
}

#[test]
fn clock_rates_are_nanoseconds_from_perfs_shortest_period() {
    let short = pmcstat(Host::Linux, &["-n", "5000", "-P", "cpu-clock", "--", "true"]);
    let message = one_line_error(&short);
    assert!(message.contains("10000 ns") && message.contains("nanoseconds"), "{message}");
    let hardware = pmcstat(Host::Linux, &["--freq", "100", "-P", "page-faults", "--", "true"]);
    hardware.assert_status(64);
    assert!(one_line_error(&hardware).contains("not a clock event"), "{}", hardware.stderr);
    for (freq, range) in [("0", "from 1 to 100000"), ("200000", "from 1 to 100000")] {
        let run = pmcstat(Host::Linux, &["--freq", freq, "-P", "cpu-clock", "--", "true"]);
        run.assert_status(64);
        assert!(one_line_error(&run).contains(range), "{}", run.stderr);
    }
    let trailing = pmcstat(Host::Linux, &["-P", "cpu-clock", "--freq", "100", "--", "true"]);
    trailing.assert_status(64);
    assert!(
        one_line_error(&trailing).contains("--freq 100 applies to the sampling PMCs"),
        "{}",
        trailing.stderr
    );
}

#[test]
fn interval_lines_for_people_start_with_the_seconds_since_the_start() {
    let hot = c_program("hot");
    let run = pmcstat(
        Host::Linux,
        &["--summary", "-w", "0.1", "-p", "task-clock", "--", arg(&hot), "3000000000"],
    );
    run.assert_status(0);
    let mut lines = run.stderr.lines();
    assert_eq!(lines.next(), Some(format!("#      seconds {:>20} ", "p/task-clock").as_str()));
    let times: Vec<f64> = lines
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert!(times.len() >= 2, "{}", run.describe());
    // The last line comes when the program ends, which may be in the same millisecond as the
    // interval line before it: times never go back, and the run spans more than one instant.
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(times[0] < times[times.len() - 1], "{times:?}");
    // Scripts (no --summary, not a terminal) get FreeBSD's layout.
    let plain = pmcstat(Host::Linux, &["-w", "0.1", "-p", "task-clock", "--", "true"]);
    assert!(plain.stderr.starts_with(&header(&["task-clock"])), "{}", plain.describe());
}

/// Samples `program` (`tests/programs/PROGRAM.c` built `-O2 -fomit-frame-pointer`) run with
/// `args` with cpu-clock and `--call-graph METHOD`; returns its folded stacks (outermost caller
/// first) and the sample count.
fn sample_without_frame_pointers(
    program: &str,
    args: &[&str],
    method: &str,
) -> (Vec<(Vec<String>, u64)>, u64) {
    let output = format!("{program}-O2-nofp");
    let program = c_program_with(program, &output, &["-O2", "-fomit-frame-pointer"]);
    let dir = tempfile::tempdir().unwrap();
    let (log, folded) = (dir.path().join("chain.log"), dir.path().join("chain.folded"));
    let options = ["--call-graph", method, "-P", "cpu-clock", "-O", arg(&log), "--", arg(&program)];
    let run = pmcstat(Host::Linux, &[&options[..], args].concat());
    run.assert_status(0);
    let report = pmcstat(Host::Linux, &["-R", arg(&log), "--folded", arg(&folded)]);
    report.assert_status(0);
    let stacks = parse_folded(&std::fs::read_to_string(&folded).unwrap());
    let total = stacks.iter().map(|(_, n)| n).sum();
    (stacks, total)
}

/// Samples whose stack holds main → a → b → c in a row, c the sampled function.
fn full_chain_samples(stacks: &[(Vec<String>, u64)]) -> u64 {
    let chain = ["main", "a", "b", "c"];
    stacks
        .iter()
        .filter(|(frames, _)| frames.ends_with(&chain.map(String::from)))
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn code_without_frame_pointers_gets_whole_callchains_from_its_cfi() {
    let (stacks, total) = sample_without_frame_pointers("chain", &["1500000000"], "dwarf");
    assert!(total >= 100, "{total} samples of about a second: {stacks:?}");
    let full = full_chain_samples(&stacks);
    // c runs nearly all the time; every sample in it unwinds through b and a to main.
    assert!(full * 10 >= total * 8, "{full} of {total} samples are main;a;b;c: {stacks:?}");
    let in_c: u64 =
        stacks.iter().filter(|(f, _)| f.last().is_some_and(|l| l == "c")).map(|(_, n)| n).sum();
    assert_eq!(full, in_c, "every sample in c has its whole chain: {stacks:?}");
}

#[test]
fn frame_pointer_walks_of_code_without_frame_pointers_lose_the_callers() {
    let (stacks, total) = sample_without_frame_pointers("chain", &["1500000000"], "fp");
    assert!(total >= 100, "{total} samples of about a second: {stacks:?}");
    let in_c: u64 =
        stacks.iter().filter(|(f, _)| f.last().is_some_and(|l| l == "c")).map(|(_, n)| n).sum();
    assert!(in_c * 10 >= total * 8, "{in_c} of {total} samples in c: {stacks:?}");
    // %rbp holds junk in c: the walk cannot find b, a and main.
    let full = full_chain_samples(&stacks);
    assert!(full * 10 <= total, "{full} of {total} samples are main;a;b;c with fp: {stacks:?}");
}

#[test]
fn an_unknown_call_graph_method_is_a_usage_error() {
    let run = pmcstat(Host::Linux, &["--call-graph", "lbr", "-P", "cpu-clock", "--", "true"]);
    run.assert_status(64);
    assert!(run.stderr.contains("--call-graph \"lbr\": use dwarf or fp"), "{}", run.describe());
}

/// Samples whose stack ends in main → level × 32 → spin.
fn deep_chain_samples(stacks: &[(Vec<String>, u64)]) -> u64 {
    let mut chain = vec!["main".to_string()];
    chain.extend(std::iter::repeat_n("level".to_string(), 32));
    chain.push("spin".into());
    stacks.iter().filter(|(frames, _)| frames.ends_with(&chain)).map(|(_, n)| n).sum()
}

#[test]
fn a_call_chain_32_deep_without_frame_pointers_unwinds_whole_and_not_with_fp() {
    let (stacks, total) = sample_without_frame_pointers("deep", &["1500000000", "32"], "dwarf");
    assert!(total >= 100, "{total} samples of about a second: {stacks:?}");
    let full = deep_chain_samples(&stacks);
    assert!(full * 10 >= total * 8, "{full} of {total} samples are main;level×32;spin: {stacks:?}");
    let (stacks, total) = sample_without_frame_pointers("deep", &["1500000000", "32"], "fp");
    let full = deep_chain_samples(&stacks);
    assert!(full * 10 <= total, "{full} of {total} samples whole with fp: {stacks:?}");
}

/// Whether perf shows kernel frames to pmcstat: as root, or with `kernel.perf_event_paranoid` at
/// 1 or below.
fn kernel_frames_visible() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .unwrap_or(2);
    root || paranoid <= 1
}

#[test]
fn kernel_samples_carry_the_kernel_stack_after_the_cfi_unwound_user_stack() {
    // c reads /dev/zero a MiB at a time: most samples are in the kernel, inside c's read(2).
    let (stacks, total) = sample_without_frame_pointers("chain", &["10000", "read"], "dwarf");
    assert!(total >= 50, "{total} samples of 10 GiB read from /dev/zero: {stacks:?}");
    let chain = ["main", "a", "b", "c"].map(String::from);
    // Folded stacks go from the outermost caller in: the user frames, then the kernel's, which
    // start at the system-call entry.
    let joined: u64 = stacks
        .iter()
        .filter(|(frames, _)| {
            let at = frames.windows(4).position(|w| w == chain);
            at.is_some_and(|at| frames[at + 4..].iter().any(|f| f.starts_with("entry_SYSCALL")))
        })
        .map(|(_, n)| n)
        .sum();
    if kernel_frames_visible() {
        assert!(
            joined * 2 >= total,
            "{joined} of {total} samples are main;a;b;c;…;entry_SYSCALL…: {stacks:?}"
        );
    } else {
        assert_eq!(joined, 0, "kernel frames where perf hides them: {stacks:?}");
    }
}

#[test]
fn an_unprivileged_user_gets_whole_callchains_of_code_without_frame_pointers() {
    let Some(mut nobody) = pmcstat_as_nobody() else { return };
    let program = c_program_with("chain", "chain-O2-nofp", &["-O2", "-fomit-frame-pointer"]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .unwrap();
    let (log, folded) = (dir.path().join("chain.log"), dir.path().join("chain.folded"));
    // perf_event_paranoid 2 is enough for one's own processes, stack copies included.
    let args = ["-P", "cpu-clock", "-O", arg(&log), "--", arg(&program), "1500000000"];
    let output = nobody.args(args).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report = pmcstat(Host::Linux, &["-R", arg(&log), "--folded", arg(&folded)]);
    report.assert_status(0);
    let stacks = parse_folded(&std::fs::read_to_string(&folded).unwrap());
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    assert!(total >= 100, "{total} samples of about a second: {stacks:?}");
    let full = full_chain_samples(&stacks);
    assert!(full * 10 >= total * 8, "{full} of {total} samples are main;a;b;c: {stacks:?}");
}

#[test]
fn samples_in_the_vdso_unwind_through_its_cfi_to_main() {
    // c reads the clock in a loop: most samples are in the vDSO, called from libc from c.
    let (stacks, total) = sample_without_frame_pointers("chain", &["30000000", "clock"], "dwarf");
    assert!(total >= 100, "{total} samples: {stacks:?}");
    let chain = ["main", "a", "b", "c"].map(String::from);
    let through: u64 = stacks
        .iter()
        .filter(|(frames, _)| frames.windows(4).any(|w| w == chain))
        .map(|(_, n)| n)
        .sum();
    // In c's loop, in libc's clock_gettime or in the vDSO: main;a;b;c in every user sample.
    assert!(through * 10 >= total * 8, "{through} of {total} samples pass main;a;b;c: {stacks:?}");
}
