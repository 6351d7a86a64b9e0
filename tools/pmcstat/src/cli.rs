//! The command line: FreeBSD pmcstat(8)'s options, where the toggles (`-C`, `-d`, `-E`, `-N`,
//! `-U`, `-W`), the CPU list (`-c`) and the rate (`-n`) apply to the PMC options that follow them,
//! as on FreeBSD.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Arg, ArgAction, ArgMatches, Command};
use pmc::{Mode, PmcFlags};

/// One PMC the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmcRequest {
    /// The event spec as given (pmcstat prints it as the PMC's name).
    pub spec: String,
    /// TC (`-p`), SC (`-s`), TS (`-P`) or SS (`-S`).
    pub mode: Mode,
    /// System modes: the CPUs (`-c`), `None` for all.
    pub cpus: Option<Vec<u32>>,
    /// PMC_F_* flags from the toggles before it.
    pub flags: PmcFlags,
    /// Sampling rate (`-n`), `None` for the event's default.
    pub rate: Option<u64>,
    /// Counting: print cumulative values (`-C`).
    pub cumulative: bool,
}

/// Everything the command line says.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The PMCs, in command-line order.
    pub pmcs: Vec<PmcRequest>,
    /// The trailing command.
    pub command: Vec<OsString>,
    /// `-t`: pids or command-name regexes to attach to.
    pub targets: Vec<String>,
    /// `-o`: where counts and reports go.
    pub output: Option<PathBuf>,
    /// `-O`: the raw log (a file or `host:port`).
    pub log_output: Option<String>,
    /// `-w`: printing interval in seconds.
    pub interval: Option<f64>,
    /// `-l`: how long to measure.
    pub duration: Option<f64>,
    /// `-R`: a log to analyse.
    pub read_log: Option<PathBuf>,
    /// `-G`: call graph output.
    pub callgraph: Option<String>,
    /// `-g`: gmon output.
    pub gmon: bool,
    /// `-D`: gmon directory.
    pub gmon_dir: Option<PathBuf>,
    /// `-M`: where to write the mapping of images to gmon files (with `-g`).
    pub gmon_map: Option<PathBuf>,
    /// `--gmon-kernel`: with `-g`, also the Linux kernel's file (its text and modules span
    /// about a gigabyte: a histogram of over 100 MB).
    pub gmon_kernel: bool,
    /// `-F`: calltree output.
    pub calltree: Option<String>,
    /// `-r`: file-system root for images.
    pub fsroot: Option<PathBuf>,
    /// `-I`: show offsets within symbols.
    pub offsets: bool,
    /// `-A`: show raw addresses.
    pub addresses: bool,
    /// `-i`: analyse only this thread's samples.
    pub thread: Option<i32>,
    /// `-z`: call graph depth.
    pub depth: Option<usize>,
    /// `-L`: list events.
    pub list: bool,
    /// `-u`: describe an event.
    pub describe: Option<String>,
    /// `-T`: top mode.
    pub top_mode: bool,
    /// `-q` / `-v`.
    pub verbosity: i32,
    /// `--folded`.
    pub folded: Option<PathBuf>,
    /// `--flamegraph`.
    pub flamegraph: Option<PathBuf>,
    /// `--pprof`.
    pub pprof: Option<PathBuf>,
    /// `--top N`.
    pub top: Option<usize>,
    /// `--json`: counts as JSON.
    pub json: bool,
    /// `--call-graph dwarf|fp`: how the Linux host walks user stacks (`None`: libpmc's
    /// default, `PMC_CALL_GRAPH` or dwarf).
    pub call_graph: Option<pmc::host::CallGraph>,
}

fn command() -> Command {
    let value = |id: &'static str, short: char, help: &'static str| {
        // The placeholder in --help: what the value is.
        let name = match short {
            'p' | 's' | 'P' | 'S' | 'u' => "spec",
            'c' => "cpus",
            'n' => "rate",
            't' => "pid|regex",
            'w' | 'l' => "secs",
            'D' | 'r' => "dir",
            'z' => "depth",
            'i' => "tid",
            _ => "file",
        };
        Arg::new(id).short(short).num_args(1).action(ArgAction::Append).value_name(name).help(help)
    };
    let toggle = |id: &'static str, short: char, help: &'static str| {
        Arg::new(id).short(short).action(ArgAction::Count).help(help)
    };
    Command::new("pmcstat")
        .about("count and sample programs with performance-monitoring counters; analyse pmclog files")
        .override_usage(
            "pmcstat [-p|-s|-P|-S spec]... [options] [command [args]]\n       pmcstat -R file [-G file] [-g [-D dir] [-M file]] [-F file] [--folded file] [--flamegraph file.svg] [--pprof file.pb.gz] [--top N]",
        )
        .disable_help_flag(true)
        .disable_version_flag(true)
        .arg(Arg::new("help").long("help").action(ArgAction::Help).help("print this help"))
        .arg(value("p", 'p', "process-mode counting PMC (TC)"))
        .arg(value("s", 's', "system-mode counting PMC (SC), one per CPU of -c"))
        .arg(value("P", 'P', "process-mode sampling PMC (TS)"))
        .arg(value("S", 'S', "system-mode sampling PMC (SS), one per CPU of -c"))
        .arg(value("c", 'c', "CPUs for the system PMCs that follow (\"*\" for all; e.g. 0,2-3)"))
        .arg(value("n", 'n', "sampling rate for the sampling PMCs that follow"))
        .arg(toggle("C", 'C', "toggle cumulative counts for the counting PMCs that follow"))
        .arg(toggle("d", 'd', "toggle following descendants for the process PMCs that follow"))
        .arg(toggle("E", 'E', "toggle logging per-process counts at exit (PMC_F_LOG_PROCEXIT)"))
        .arg(toggle("N", 'N', "toggle callchain capture for the sampling PMCs that follow"))
        .arg(toggle("U", 'U', "toggle user callchains from kernel-mode samples (FreeBSD; Linux always joins them)"))
        .arg(toggle("W", 'W', "toggle per-context-switch counts in the log (PMC_F_LOG_PROCCSW)"))
        .arg(value("t", 't', "attach to a process: a pid or a regex on command names"))
        .arg(value("o", 'o', "text output file"))
        .arg(value("O", 'O', "raw log output: a file or host:port"))
        .arg(value("w", 'w', "printing interval in seconds (default 5)"))
        .arg(value("l", 'l', "measurement duration in seconds"))
        .arg(value("R", 'R', "analyse a log file; alone, print it as text"))
        .arg(value("G", 'G', "write a call graph (text) to file (\"-\": the -o output)"))
        .arg(toggle("g", 'g', "write gprof-compatible gmon profiles per image"))
        .arg(value("D", 'D', "directory for gmon files (default .)"))
        .arg(value("M", 'M', "with -g: write the mapping of executables to gmon files"))
        .arg(value("F", 'F', "write a calltree (KCachegrind) profile (\"-\": the -o output)"))
        .arg(value("r", 'r', "root directory for executables"))
        .arg(toggle("I", 'I', "show offsets within symbols"))
        .arg(toggle("A", 'A', "show raw addresses"))
        .arg(value("z", 'z', "call graph depth (default 16)"))
        .arg(value("i", 'i', "analyse only the samples of this thread (with -R)"))
        .arg(toggle("L", 'L', "list the events of this host"))
        .arg(value("u", 'u', "describe an event"))
        .arg(toggle("T", 'T', "top mode: a flat profile every -w seconds while sampling"))
        .arg(toggle("q", 'q', "less verbose"))
        .arg(toggle("v", 'v', "more verbose"))
        .arg(Arg::new("gmon-kernel").long("gmon-kernel").action(ArgAction::SetTrue).help("with -g, also write the Linux kernel's gmon file (over 100 MB)"))
        .arg(Arg::new("folded").long("folded").num_args(1).help("write folded stacks (flame-graph input)"))
        .arg(Arg::new("flamegraph").long("flamegraph").num_args(1).help("write a flame graph SVG"))
        .arg(Arg::new("pprof").long("pprof").num_args(1).help("write a gzipped pprof profile"))
        .arg(Arg::new("top").long("top").num_args(1).help("print a flat profile of the top N functions"))
        .arg(Arg::new("json").long("json").action(ArgAction::SetTrue).help("print counts as JSON"))
        .arg(Arg::new("call-graph").long("call-graph").num_args(1).value_name("dwarf|fp").help("Linux: walk user stacks with the images' CFI from a copy of the stack (dwarf, the default) or with frame pointers only (fp)"))
        .arg(Arg::new("command").num_args(1..).trailing_var_arg(true).value_parser(clap::value_parser!(OsString)))
}

/// Why the command line is wrong.
#[derive(Debug)]
pub enum CliError {
    /// `--help`: print this and exit 0.
    Help(String),
    /// A mistake: print this and exit with status 64 (EX_USAGE).
    Usage(String),
}

/// Parses pmcstat's arguments (without the program name).
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Options, CliError> {
    let argv = std::iter::once(OsString::from("pmcstat")).chain(args);
    let m = command().try_get_matches_from(argv).map_err(|e| match e.kind() {
        clap::error::ErrorKind::DisplayHelp => CliError::Help(e.to_string()),
        _ => CliError::Usage(first_line(&e.to_string())),
    })?;
    build(&m)
}

fn first_line(text: &str) -> String {
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or(text).trim().to_string()
}

/// Values of option `id` with their positions on the command line.
fn positioned<'a>(m: &'a ArgMatches, id: &str) -> Vec<(usize, &'a String)> {
    match (m.indices_of(id), m.get_many::<String>(id)) {
        (Some(i), Some(v)) => i.zip(v).collect(),
        _ => Vec::new(),
    }
}

fn last<'a>(m: &'a ArgMatches, id: &str) -> Option<&'a String> {
    m.get_many::<String>(id).and_then(|mut v| v.next_back())
}

fn number<T: std::str::FromStr>(option: char, text: &str) -> Result<T, CliError> {
    text.parse().map_err(|_| CliError::Usage(format!("-{option} {text:?}: not a valid number")))
}

/// Parses a CPU list: `*`, or numbers and ranges separated by commas.
pub fn parse_cpus(text: &str) -> Result<Option<Vec<u32>>, CliError> {
    if text == "*" {
        return Ok(None);
    }
    let mut cpus = Vec::new();
    for part in text.split(',') {
        let bad = || {
            CliError::Usage(format!(
                "-c {text:?}: a CPU list is \"*\" or numbers and ranges like 0,2-3"
            ))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(Some(cpus))
}

fn build(m: &ArgMatches) -> Result<Options, CliError> {
    // Every PMC option and order-sensitive setting, in command-line order.
    enum Item<'a> {
        Pmc(Mode, &'a String),
        Cpus(&'a String),
        Rate(&'a String),
        Toggle(&'static str),
    }
    let mut items: Vec<(usize, Item<'_>)> = Vec::new();
    for (id, mode) in [
        ("p", Mode::ThreadCounting),
        ("s", Mode::SystemCounting),
        ("P", Mode::ThreadSampling),
        ("S", Mode::SystemSampling),
    ] {
        items.extend(positioned(m, id).into_iter().map(|(i, v)| (i, Item::Pmc(mode, v))));
    }
    items.extend(positioned(m, "c").into_iter().map(|(i, v)| (i, Item::Cpus(v))));
    items.extend(positioned(m, "n").into_iter().map(|(i, v)| (i, Item::Rate(v))));
    for id in ["C", "d", "E", "N", "U", "W"] {
        if let Some(indices) = m.indices_of(id) {
            items.extend(indices.map(|i| (i, Item::Toggle(id))));
        }
    }
    items.sort_by_key(|(i, _)| *i);

    let mut flags_desc = false;
    let (mut procexit, mut callchain, mut usercc, mut proccsw, mut cumulative) =
        (false, true, false, false, false);
    let mut cpus = None;
    let mut rate = None;
    let mut pmcs = Vec::new();
    for (_, item) in items {
        match item {
            Item::Toggle("C") => cumulative = !cumulative,
            Item::Toggle("d") => flags_desc = !flags_desc,
            Item::Toggle("E") => procexit = !procexit,
            Item::Toggle("N") => callchain = !callchain,
            Item::Toggle("U") => usercc = !usercc,
            Item::Toggle(_) => proccsw = !proccsw,
            Item::Cpus(text) => cpus = parse_cpus(text)?,
            Item::Rate(text) => {
                let n: u64 = number('n', text)?;
                if n == 0 {
                    return Err(CliError::Usage(
                        "-n 0: the sampling rate must be at least 1".into(),
                    ));
                }
                rate = Some(n);
            }
            Item::Pmc(mode, spec) => {
                let mut flags = PmcFlags::empty();
                if mode.is_virtual() {
                    flags.set(PmcFlags::DESCENDANTS, flags_desc);
                    flags.set(PmcFlags::LOG_PROCEXIT, procexit);
                    flags.set(PmcFlags::LOG_PROCCSW, proccsw);
                }
                if mode.is_sampling() {
                    flags.set(PmcFlags::CALLCHAIN, callchain);
                    flags.set(PmcFlags::USERCALLCHAIN, usercc && callchain);
                }
                pmcs.push(PmcRequest {
                    spec: spec.clone(),
                    mode,
                    cpus: if mode.is_system() { cpus.clone() } else { None },
                    flags,
                    rate: if mode.is_sampling() { rate } else { None },
                    cumulative,
                });
            }
        }
    }

    let float = |id: &str, option: char| -> Result<Option<f64>, CliError> {
        match last(m, id) {
            None => Ok(None),
            Some(t) => {
                let v: f64 = number(option, t)?;
                if !(v > 0.0 && v.is_finite()) {
                    return Err(CliError::Usage(format!(
                        "-{option} {t}: must be a positive number of seconds"
                    )));
                }
                Ok(Some(v))
            }
        }
    };
    let count = |id: &str| m.get_count(id) > 0;
    let call_graph = match m.get_one::<String>("call-graph") {
        Some(name) => Some(
            pmc::host::CallGraph::from_name(name)
                .map_err(|_| CliError::Usage(format!("--call-graph {name:?}: use dwarf or fp")))?,
        ),
        None => None,
    };
    let options = Options {
        pmcs,
        command: m
            .get_many::<OsString>("command")
            .map(|v| v.cloned().collect())
            .unwrap_or_default(),
        targets: m.get_many::<String>("t").map(|v| v.cloned().collect()).unwrap_or_default(),
        output: last(m, "o").map(PathBuf::from),
        log_output: last(m, "O").cloned(),
        interval: float("w", 'w')?,
        duration: float("l", 'l')?,
        read_log: last(m, "R").map(PathBuf::from),
        callgraph: last(m, "G").cloned(),
        gmon: count("g"),
        gmon_dir: last(m, "D").map(PathBuf::from),
        gmon_map: last(m, "M").map(PathBuf::from),
        gmon_kernel: m.get_flag("gmon-kernel"),
        calltree: last(m, "F").cloned(),
        fsroot: last(m, "r").map(PathBuf::from),
        offsets: count("I"),
        addresses: count("A"),
        depth: last(m, "z").map(|t| number('z', t)).transpose()?,
        thread: last(m, "i").map(|t| number('i', t)).transpose()?,
        list: count("L"),
        describe: last(m, "u").cloned(),
        top_mode: count("T"),
        verbosity: m.get_count("v") as i32 - m.get_count("q") as i32,
        folded: m.get_one::<String>("folded").map(PathBuf::from),
        flamegraph: m.get_one::<String>("flamegraph").map(PathBuf::from),
        pprof: m.get_one::<String>("pprof").map(PathBuf::from),
        top: m.get_one::<String>("top").map(|t| number('-', t)).transpose()?,
        json: m.get_flag("json"),
        call_graph,
    };
    check(&options)?;
    Ok(options)
}

/// Rejects combinations that make no sense, with the reason.
fn check(o: &Options) -> Result<(), CliError> {
    let usage = |s: &str| Err(CliError::Usage(s.to_string()));
    if o.gmon_map.is_some() && !o.gmon {
        return usage("-M writes the mapping of images to gmon files: it needs -g");
    }
    let analysis = o.callgraph.is_some()
        || o.gmon
        || o.calltree.is_some()
        || o.folded.is_some()
        || o.flamegraph.is_some()
        || o.pprof.is_some()
        || o.top.is_some();
    if o.read_log.is_some() {
        if !o.pmcs.is_empty() || !o.command.is_empty() || !o.targets.is_empty() {
            return usage(
                "-R analyses a log: it cannot be combined with -p/-s/-P/-S, -t or a command",
            );
        }
        return Ok(());
    }
    if o.list || o.describe.is_some() {
        return Ok(());
    }
    if o.pmcs.is_empty() {
        return usage(
            "no PMC given: use -p/-s (counting) or -P/-S (sampling) with an event (pmcstat -L lists them), or -R file",
        );
    }
    if analysis && o.log_output.is_none() {
        // Analysis of a live run is done on the log the run writes.
    }
    let has_process = o.pmcs.iter().any(|p| p.mode.is_virtual());
    if has_process && o.command.is_empty() && o.targets.is_empty() {
        return usage("process PMCs (-p/-P) need a command to run or -t to attach to a process");
    }
    if o.command.is_empty() && o.targets.is_empty() && o.duration.is_none() && o.interval.is_none()
    {
        // System PMCs alone run until interrupted, as FreeBSD's pmcstat does.
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> Result<Options, CliError> {
        parse(args.iter().map(OsString::from))
    }

    #[test]
    fn toggles_apply_to_the_pmcs_that_follow_them() {
        let o = parse_str(&["-P", "a", "-N", "-P", "b", "-d", "-p", "c", "--", "true"]).unwrap();
        assert!(o.pmcs[0].flags.contains(PmcFlags::CALLCHAIN));
        assert!(!o.pmcs[1].flags.contains(PmcFlags::CALLCHAIN));
        assert!(!o.pmcs[1].flags.contains(PmcFlags::DESCENDANTS));
        assert!(o.pmcs[2].flags.contains(PmcFlags::DESCENDANTS));
        assert_eq!(o.command, ["true"]);
    }

    #[test]
    fn cpu_lists_and_rates_apply_to_later_pmcs() {
        let o = parse_str(&["-S", "x", "-c", "1-2", "-n", "1000", "-S", "y", "-s", "z"]).unwrap();
        assert_eq!(o.pmcs[0].cpus, None);
        assert_eq!(o.pmcs[0].rate, None);
        assert_eq!(o.pmcs[1].cpus, Some(vec![1, 2]));
        assert_eq!(o.pmcs[1].rate, Some(1000));
        assert_eq!(o.pmcs[2].cpus, Some(vec![1, 2]));
        assert_eq!(o.pmcs[2].rate, None, "counting PMCs have no rate");
    }

    #[test]
    fn the_command_keeps_its_own_options() {
        let o = parse_str(&["-p", "task-clock", "ls", "-l", "/"]).unwrap();
        assert_eq!(o.command, ["ls", "-l", "/"]);
        assert_eq!(o.duration, None);
    }

    #[test]
    fn gmon_options_and_the_mapping_file_need_g() {
        let o = parse_str(&["-R", "log", "-g", "-D", "out", "-M", "map", "-F", "tree"]).unwrap();
        assert!(o.gmon);
        assert_eq!(o.gmon_dir, Some(PathBuf::from("out")));
        assert_eq!(o.gmon_map, Some(PathBuf::from("map")));
        assert_eq!(o.calltree.as_deref(), Some("tree"));
        match parse_str(&["-R", "log", "-M", "map"]) {
            Err(CliError::Usage(m)) => assert!(m.contains("needs -g"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mistakes_are_usage_errors_that_say_what_is_wrong() {
        let msg = |args: &[&str]| match parse_str(args) {
            Err(CliError::Usage(m)) => m,
            other => panic!("{args:?}: {other:?}"),
        };
        assert!(msg(&[]).contains("no PMC"));
        assert!(msg(&["-p", "x"]).contains("need a command"));
        assert!(msg(&["-R", "f", "-p", "x"]).contains("-R"));
        assert!(msg(&["-S", "x", "-c", "3-1"]).contains("CPU list"));
        assert!(msg(&["-p", "x", "-w", "0", "true"]).contains("positive"));
        assert!(msg(&["-P", "x", "-n", "0", "true"]).contains("at least 1"));
    }
}
