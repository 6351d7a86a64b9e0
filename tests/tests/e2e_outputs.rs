//! pmcstat's profile outputs end to end: `-g` gmon files (and `-M`), `-F` calltree profiles,
//! the live flat profile (`-T`, and sampling without `-O`), and `-u`.
//!
//! On the simulated machine the outputs are checked byte for byte against what the log says
//! (read with the pmclog crate) and what the simulator says its program looks like. On Linux
//! they are read back by the tools they are for — GNU gprof and callgrind_annotate, when
//! installed (a test without its tool says so and passes) — on a real C program.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use hwpmc_tests::{
    Host, Run, arg, c_program, files_under, one_line_error, parse_folded, parse_top, pmcstat,
    sample_hot, write_log,
};

/// The simulated program's path, as the simulated kernel reports it.
const IMAGE: &str = "/usr/sim/bin/hot-cold";

/// What the tests know of `hot-cold` from the simulator and from its log.
struct HotCold {
    /// `[start, end)` of every function.
    functions: Vec<(u64, u64, String)>,
    /// Where hot and cold start (each sample of a function is at its start).
    hot: u64,
    cold: u64,
    /// The return addresses in main after its calls of hot and of cold.
    after_hot: u64,
    after_cold: u64,
}

/// Samples `hot-cold` every 100 000 instructions into `dir/hot-cold.log` (100 samples: 90 in
/// hot, 10 in cold, both called by main), and reads the log's call chains with pmclog.
fn sample_hot_cold(dir: &Path) -> (PathBuf, HotCold) {
    let log = dir.join("hot-cold.log");
    let run = pmcstat(
        Host::Sim,
        &["-n", "100000", "-P", "INST_RETIRED.ANY", "-O", arg(&log), "hot-cold"],
    );
    run.assert_status(0);
    let functions = pmc::host::sim::symbols(IMAGE).expect("hot-cold is a simulated program");
    let start = |name: &str| functions.iter().find(|f| f.2 == name).unwrap().0;
    let (hot, cold) = (start("hot"), start("cold"));
    let mut chains: Vec<(Vec<u64>, u64)> = Vec::new();
    for entry in pmclog::Records::new(&std::fs::read(&log).unwrap()) {
        if let pmclog::Record::Callchain(cc) = entry.unwrap().record {
            let pcs: Vec<u64> = cc.pcs.iter().collect();
            match chains.iter_mut().find(|(c, _)| *c == pcs) {
                Some((_, n)) => *n += 1,
                None => chains.push((pcs, 1)),
            }
        }
    }
    assert_eq!(chains.len(), 2, "{chains:x?}");
    let (after_hot, after_cold) = (chains[0].0[1], chains[1].0[1]);
    assert_eq!(chains, [(vec![hot, after_hot], 90), (vec![cold, after_cold], 10)]);
    let main = functions.iter().find(|f| f.2 == "main").unwrap();
    assert!((main.0..main.1).contains(&after_hot) && (main.0..main.1).contains(&after_cold));
    (log, HotCold { functions, hot, cold, after_hot, after_cold })
}

/// The gmon file of hot-cold as GNU gprof (or, on FreeBSD, FreeBSD's gprof) reads it: a BSD
/// header, one u16 counter per 16 bytes from the first function to the end of the last
/// (rounded up to a whole counter), then the arcs main → hot and main → cold. The profiling
/// rate is 1: the event (instructions) is no clock, each sample is one unit.
fn expected_gmon(h: &HotCold) -> Vec<u8> {
    let header = if cfg!(target_os = "freebsd") { 48 } else { 40 };
    let low = h.functions.iter().map(|f| f.0).min().unwrap();
    let end = h.functions.iter().map(|f| f.1).max().unwrap();
    let buckets = (end - low).div_ceil(16) as usize;
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&low.to_le_bytes());
    bytes.extend_from_slice(&(low + 16 * buckets as u64).to_le_bytes());
    bytes.extend_from_slice(&((header + 2 * buckets) as u32).to_le_bytes());
    bytes.extend_from_slice(&0x0005_1879u32.to_le_bytes());
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.resize(header, 0);
    let mut histogram = vec![0u16; buckets];
    histogram[((h.hot - low) / 16) as usize] = 90;
    histogram[((h.cold - low) / 16) as usize] = 10;
    for counter in histogram {
        bytes.extend_from_slice(&counter.to_le_bytes());
    }
    let mut arcs = [(h.after_hot, h.hot, 90u64), (h.after_cold, h.cold, 10u64)];
    arcs.sort();
    for (from, to, count) in arcs {
        for word in [from, to, count] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
    }
    bytes
}

#[test]
fn gmon_file_of_hot_cold_is_exact_and_the_mapping_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (log, h) = sample_hot_cold(dir.path());
    let (out, map) = (dir.path().join("gmon"), dir.path().join("map.txt"));
    let run = pmcstat(Host::Sim, &["-R", arg(&log), "-g", "-D", arg(&out), "-M", arg(&map)]);
    run.assert_status(0);
    assert_eq!((run.stdout.as_str(), run.stderr.as_str()), ("", ""));
    assert_eq!(files_under(&out), ["INSTR_RETIRED_ANY/hot-cold.gmon"]);
    let gmon = std::fs::read(out.join("INSTR_RETIRED_ANY/hot-cold.gmon")).unwrap();
    assert_eq!(gmon, expected_gmon(&h));
    assert_eq!(
        std::fs::read_to_string(&map).unwrap(),
        format!(" \"{IMAGE}\" => \"hot-cold\" INSTR_RETIRED_ANY/100\n")
    );
}

#[test]
fn gmon_files_of_a_run_without_a_log_file_are_written_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let (_, h) = sample_hot_cold(dir.path());
    let out = dir.path().join("live-gmon");
    let run = pmcstat(
        Host::Sim,
        &["-g", "-D", arg(&out), "-n", "100000", "-P", "INST_RETIRED.ANY", "hot-cold"],
    );
    run.assert_status(0);
    assert_eq!(run.stdout, "", "another analysis than the flat profile was asked for");
    let gmon = std::fs::read(out.join("INSTR_RETIRED_ANY/hot-cold.gmon")).unwrap();
    assert_eq!(gmon, expected_gmon(&h));
}

#[test]
fn the_mapping_file_needs_g() {
    let run = pmcstat(Host::Sim, &["-R", "/nonexistent.log", "-M", "/tmp/map"]);
    assert_eq!(run.status, 64);
    assert!(one_line_error(&run).contains("-M"), "{}", run.describe());
}

/// The calltree of hot-cold: hot and cold with their samples at their starts, main calling
/// them from its two call sites.
fn expected_calltree(h: &HotCold) -> String {
    format!(
        "# callgrind format\n\
         version: 1\n\
         creator: pmcstat\n\
         positions: instr\n\
         events: INSTR_RETIRED_ANY\n\
         summary: 100\n\
         \n\
         ob=(1) {IMAGE}\n\
         fl=(1) ???\n\
         fn=(1) hot\n\
         {hot:#x} 90\n\
         \n\
         fn=(2) cold\n\
         {cold:#x} 10\n\
         \n\
         fn=(3) main\n\
         cfn=(1)\n\
         calls=90 {hot:#x}\n\
         {after_hot:#x} 90\n\
         cfn=(2)\n\
         calls=10 {cold:#x}\n\
         {after_cold:#x} 10\n",
        hot = h.hot,
        cold = h.cold,
        after_hot = h.after_hot,
        after_cold = h.after_cold,
    )
}

#[test]
fn calltree_of_hot_cold_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let (log, h) = sample_hot_cold(dir.path());
    let tree = dir.path().join("callgrind.out.hot-cold");
    let run = pmcstat(Host::Sim, &["-R", arg(&log), "-F", arg(&tree)]);
    run.assert_status(0);
    assert_eq!(run.stdout, "");
    assert_eq!(std::fs::read_to_string(&tree).unwrap(), expected_calltree(&h));
    // "-" is the -o output.
    let run = pmcstat(Host::Sim, &["-R", arg(&log), "-F", "-"]);
    run.assert_status(0);
    assert_eq!(run.stdout, expected_calltree(&h));
}

/// Whether `tool` runs (`tool --version`); a test that needs it says so when it does not.
fn installed(tool: &str) -> bool {
    let ok = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("{tool} is not installed: skipping the part of this test that needs it");
    }
    ok
}

/// callgrind_annotate's function lines (`COUNT (PERCENT)  FILE:FUNCTION [OBJECT]`) as
/// (count, the rest), in the order printed.
fn annotated_functions(text: &str) -> Vec<(u64, String)> {
    let mut lines = text.lines().skip_while(|l| !l.ends_with("file:function"));
    lines.next();
    lines
        .skip_while(|l| l.starts_with('-'))
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let (count, rest) = l.trim_start().split_once(' ').unwrap();
            let name = rest.split_once("%)").unwrap().1.trim();
            (count.replace(',', "").parse().unwrap(), name.to_owned())
        })
        .collect()
}

#[test]
fn callgrind_annotate_reads_the_calltree_of_hot_cold() {
    if !installed("callgrind_annotate") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = sample_hot_cold(dir.path());
    let tree = dir.path().join("callgrind.out.1");
    pmcstat(Host::Sim, &["-R", arg(&log), "-F", arg(&tree)]).assert_status(0);
    let annotate = Command::new("callgrind_annotate").arg(&tree).output().unwrap();
    let text = String::from_utf8_lossy(&annotate.stdout);
    assert!(annotate.status.success(), "{text}\n{}", String::from_utf8_lossy(&annotate.stderr));
    assert_eq!(
        annotated_functions(&text),
        [(90, format!("???:hot [{IMAGE}]")), (10, format!("???:cold [{IMAGE}]"))]
    );
    // With inclusive costs main has all 100.
    let inclusive =
        Command::new("callgrind_annotate").arg("--inclusive=yes").arg(&tree).output().unwrap();
    let text = String::from_utf8_lossy(&inclusive.stdout);
    assert_eq!(annotated_functions(&text)[0], (100, format!("???:main [{IMAGE}]")), "{text}");
}

#[test]
fn top_mode_with_a_log_file_prints_the_profile_and_keeps_the_log() {
    // The simulator runs the program inside pmcstat: no intervals, one profile at the end.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("top.log");
    let run = pmcstat(
        Host::Sim,
        &["-T", "-w", "0.3", "-n", "100000", "-P", "INST_RETIRED.ANY", "-O", arg(&log), "hot-cold"],
    );
    run.assert_status(0);
    assert_eq!(
        run.stdout,
        format!(
            "@ INSTR_RETIRED_ANY [100 samples]\n \
             self%     self  total%    total  function  image\n \
             90.00       90   90.00       90  hot       {IMAGE}\n \
             10.00       10   10.00       10  cold      {IMAGE}\n  \
             0.00        0  100.00      100  main      {IMAGE}\n"
        )
    );
    assert!(std::fs::metadata(&log).unwrap().len() > 0);
}

#[test]
fn describe_prints_the_encoding_of_fixed_and_programmable_events() {
    let run = pmcstat(Host::Sim, &["-u", "inst-retired.any"]);
    run.assert_status(0);
    assert_eq!(
        run.stdout,
        "event:          INST_RETIRED.ANY\n\
         spec:           inst-retired.any\n\
         class:          IAF (Intel fixed-function counter)\n\
         counter:        fixed counter 0 (INSTR_RETIRED.ANY)\n\
         FreeBSD event:  0x10000 (INSTR_RETIRED_ANY)\n\
         rings:          user and kernel\n\
         sampling rate:  65536 events (when -n is not given)\n"
    );
    // FreeBSD's alias `instructions` is inst_retired.any_p, on a programmable counter, with
    // Intel's sample-after value as its default rate.
    let run = pmcstat(Host::Sim, &["-u", "instructions"]);
    run.assert_status(0);
    assert_eq!(
        run.stdout,
        "event:          instructions\n\
         class:          IAP (Intel programmable counter)\n\
         event select:   0xc0\n\
         umask:          0x00\n\
         rings:          user and kernel\n\
         flags:          none\n\
         PERFEVTSEL:     0x000300c0\n\
         sampling rate:  2000003 events (when -n is not given)\n"
    );
    let run = pmcstat(Host::Sim, &["-u", "inst_retired.any_p,usr,edge,cmask=2"]);
    run.assert_status(0);
    assert_eq!(
        run.stdout,
        "event:          INST_RETIRED.ANY_P\n\
         spec:           inst_retired.any_p,usr,edge,cmask=2\n\
         class:          IAP (Intel programmable counter)\n\
         event select:   0xc0\n\
         umask:          0x00\n\
         rings:          user\n\
         flags:          edge cmask=2\n\
         PERFEVTSEL:     0x020500c0\n\
         sampling rate:  2000003 events (when -n is not given)\n"
    );
}

#[test]
fn describe_prints_the_software_event_behind_a_name() {
    let run = pmcstat(Host::Linux, &["-u", "CLOCK.PROF"]);
    run.assert_status(0);
    assert_eq!(
        run.stdout,
        "event:          CLOCK.PROF\n\
         class:          SOFT (software event)\n\
         software event: cpu-clock (a Linux perf software event)\n\
         sampling rate:  1000000 ns, 1000 samples a second (when -n or --freq is not given)\n"
    );
    let unknown = pmcstat(Host::Linux, &["-u", "no-such-event"]);
    assert!(one_line_error(&unknown).contains("no-such-event"));
}

// ---------------------------------------------------------------------------------------------
// Linux: a real program, read back by gprof and callgrind_annotate.

/// One sampling run of `hot` on Linux, shared by the tests: its log and the program.
struct Sampled {
    log: Vec<u8>,
    program: PathBuf,
}

fn sampled() -> &'static Sampled {
    static SAMPLED: OnceLock<Sampled> = OnceLock::new();
    SAMPLED.get_or_init(|| {
        let (run, log, program) = sample_hot(None);
        run.assert_status(0);
        Sampled { log, program }
    })
}

/// pmcstat `args` on the shared log, written into `dir`.
fn on_sampled_log(dir: &Path, args: &[&str]) -> Run {
    let log = write_log(dir, &sampled().log);
    let mut all = vec!["-q", "-R", arg(&log)];
    all.extend_from_slice(args);
    let run = pmcstat(Host::Linux, &all);
    run.assert_status(0);
    run
}

/// Samples in which main calls hot_function, counted once per call on the stack.
fn main_calls_hot_function(dir: &Path) -> u64 {
    let folded = dir.join("out.folded");
    on_sampled_log(dir, &["--folded", arg(&folded)]);
    parse_folded(&std::fs::read_to_string(&folded).unwrap())
        .iter()
        .map(|(frames, n)| {
            let calls = frames.windows(2).filter(|w| w[0] == "main" && w[1] == "hot_function");
            calls.count() as u64 * n
        })
        .sum()
}

#[test]
fn gprof_reads_the_gmon_file_of_a_sampled_c_program() {
    let dir = tempfile::tempdir().unwrap();
    let gmon_dir = dir.path().join("gmon");
    on_sampled_log(dir.path(), &["-g", "-D", arg(&gmon_dir)]);
    let gmon = gmon_dir.join("cpu-clock/hot.gmon");
    assert!(gmon.exists(), "files: {:?}", files_under(&gmon_dir));
    if !installed("gprof") {
        return;
    }
    let output =
        Command::new("gprof").arg("-b").arg("-p").arg(&sampled().program).arg(&gmon).output();
    let output = output.unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}\n{}", String::from_utf8_lossy(&output.stderr));
    // The flat profile: `%time cumulative self [calls self/call total/call] name`.
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("time"))
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| !f.is_empty())
        .collect();
    let first = rows.first().unwrap_or_else(|| panic!("no flat profile in\n{text}"));
    assert_eq!(first.last(), Some(&"hot_function"), "{text}");
    let percent: f64 = first[0].parse().unwrap();
    assert!(percent > 50.0, "hot_function has most of the time:\n{text}");
    // The arcs: gprof's calls of hot_function are the samples with main → hot_function.
    assert_eq!(first.len(), 7, "hot_function has a calls column (the arcs were read):\n{text}");
    let calls: u64 = first[3].parse().unwrap();
    assert_eq!(calls, main_calls_hot_function(dir.path()), "{text}");
    // The profiling rate: cpu-clock sampled every 1 ms is 1000 samples a second, so
    // gprof's seconds are the CPU time the samples stand for.
    let bytes = std::fs::read(&gmon).unwrap();
    assert_eq!(u32::from_le_bytes(bytes[24..28].try_into().unwrap()), 1000, "profrate");
    let top = on_sampled_log(dir.path(), &["--top", "1"]);
    let hot_samples = parse_top(&top.stdout)[0].2[0].self_samples;
    let self_seconds: f64 = first[2].parse().unwrap();
    let expected = hot_samples as f64 / 1000.0;
    assert!(
        (self_seconds - expected).abs() < 0.0051,
        "{self_seconds} s for {hot_samples} samples:\n{text}"
    );
}

#[test]
fn callgrind_annotate_reads_the_calltree_of_a_sampled_c_program() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("callgrind.out.hot");
    on_sampled_log(dir.path(), &["-F", arg(&tree)]);
    let top = on_sampled_log(dir.path(), &["--top", "1"]);
    let blocks = parse_top(&top.stdout);
    let hot = &blocks[0].2[0];
    assert_eq!(hot.function, "hot_function");
    if !installed("callgrind_annotate") {
        return;
    }
    let annotate = Command::new("callgrind_annotate").arg(&tree).output().unwrap();
    let text = String::from_utf8_lossy(&annotate.stdout);
    assert!(annotate.status.success(), "{text}\n{}", String::from_utf8_lossy(&annotate.stderr));
    let functions = annotated_functions(&text);
    let program = sampled().program.display().to_string();
    assert_eq!(
        functions.first(),
        Some(&(hot.self_samples, format!("???:hot_function [{program}]"))),
        "{text}"
    );
    assert!(text.contains("Events recorded:  cpu_clock\n"), "{text}");
}

#[test]
fn the_live_profile_is_printed_every_interval_and_at_the_end() {
    // 4 000 000 000 dependent adds take at least 0.8 s below 5 GHz: more than two intervals.
    let hot = c_program("hot");
    let run = pmcstat(
        Host::Linux,
        &["-q", "-w", "0.3", "-P", "cpu-clock", "--", arg(&hot), "4000000000"],
    );
    run.assert_status(0);
    assert!(!run.stdout.contains('\x1b'), "no screen clearing when not on a terminal");
    let blocks = parse_top(&run.stdout);
    assert!(blocks.len() >= 2, "an intermediate and a final profile:\n{}", run.describe());
    let mut previous = 0;
    for (name, samples, rows) in &blocks {
        assert_eq!(name, "cpu-clock");
        assert!(rows.len() <= 20, "the top 20");
        assert!(*samples >= previous, "each profile has everything sampled so far");
        previous = *samples;
    }
    let last = &blocks.last().unwrap().2;
    assert_eq!((last[0].function.as_str(), last[0].image.as_str()), ("hot_function", arg(&hot)));
}
