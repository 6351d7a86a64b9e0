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
    /// Samples per second (`--freq`), for a clock event: its rate is then a period in
    /// nanoseconds, `1e9 / frequency` (a later `-n` or `--freq` replaces it).
    pub frequency: Option<u64>,
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
    pub log_output: Option<OsString>,
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
    /// `--firefox`: a Firefox Profiler profile (gzipped when the name ends in `.gz`).
    pub firefox: Option<PathBuf>,
    /// `--top N`.
    pub top: Option<usize>,
    /// `--json`: counts (or, with `-R`, the profile) as JSON.
    pub json: bool,
    /// `--analysis-memory MIB`: the budget of the analyses' tables of frames and stacks.
    pub analysis_memory: Option<u64>,
    /// `--summary`: the perf-stat-like summary of a launched command's counts even when standard
    /// error is not a terminal.
    pub summary: bool,
    /// `--multiplex`: counting PMCs are allocated with PMC_F_MULTIPLEX and their counts scaled.
    pub multiplex: bool,
    /// `--print-man`: print the manual page (roff) and exit.
    pub print_man: bool,
    /// `--print-completions SHELL`: print the shell's completion script and exit.
    pub print_completions: Option<clap_complete::Shell>,
    /// `--call-graph dwarf|fp`: how the Linux host walks user stacks (`None`: libpmc's
    /// default, `PMC_CALL_GRAPH` or dwarf).
    pub call_graph: Option<pmc::host::CallGraph>,
    /// `--push KIND=URL` and its companions (`--push-window`, …): windows pushed to backends.
    pub push: crate::push::options::PushOptions,
}

/// What `--help` adds after the options: the event syntax, the units and examples.
const LONG_HELP: &str = "\
Events (-p/-s/-P/-S):
  NAME                  an event this host offers (pmcstat -L lists them; pmcstat -u NAME
                        shows how it is programmed): a FreeBSD alias (instructions,
                        branch-mispredicts, …), a vendor name (INST_RETIRED.ANY_P), TSC, or a
                        software event (Linux: cpu-clock, task-clock, page-faults, …)
  NAME,usr | NAME,os    count only in user or only in kernel mode
  event=0xc0,umask=0x01[,edge][,inv][,cmask=N]
                        a raw encoding, with the qualifiers of FreeBSD's libpmc
Units:
  counts                events; task-clock and cpu-clock count nanoseconds on Linux
  -n RATE               events between two samples; nanoseconds for the Linux clock events
                        (cpu-clock, task-clock: 10000 or more; FreeBSD: ticks of the kernel's
                        clock); pmcstat -u NAME shows the default with its unit
  --freq HZ             samples per second, for clock events (perf's -F): 1000 is every 1 ms
  -w, -l SECS           seconds, fractions allowed
Examples:
  pmcstat -p instructions -p branches -- ./prog          count a command
  pmcstat -d -P cpu-clock -O run.log -- sh -c 'make'     sample it and its children into a log
  pmcstat -R run.log --top 30                            the 30 hottest functions
  pmcstat -R run.log --pprof run.pb.gz -F callgrind.out  profiles for go tool pprof, KCachegrind
  pmcstat -R run.log --firefox run.json.gz               threads over time, for profiler.firefox.com
  pmcstat -p page-faults -w 1 -t 1234                    count a running process every second
Exit status: the command's; 64 for a usage error, 65 for a damaged log, 69-77 for other
failures (sysexits(3)), 128 + N after signal N.
Manual page and completions: pmcstat --print-man > pmcstat.8;
  pmcstat --print-completions bash|zsh|fish|elvish|powershell > FILE.";

/// pmcstat's command line, as clap describes it (also the source of the manual page and the
/// shell completions).
pub fn command() -> Command {
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
        // A negative number is a value (refused with its range), not an option.
        Arg::new(id)
            .short(short)
            .num_args(1)
            .action(ArgAction::Append)
            .value_name(name)
            .allow_negative_numbers(true)
            .help(help)
    };
    let toggle = |id: &'static str, short: char, help: &'static str| {
        Arg::new(id).short(short).action(ArgAction::Count).help(help)
    };
    Command::new("pmcstat")
        .about("count and sample programs with performance-monitoring counters; analyse pmclog files")
        .override_usage(
            "pmcstat [-p|-s|-P|-S spec]... [options] [command [args]]\n       pmcstat -R file [-G file] [-g [-D dir] [-M file]] [-F file] [--folded file] [--flamegraph file.svg] [--pprof file.pb.gz] [--firefox file.json.gz] [--top N]",
        )
        .version(env!("CARGO_PKG_VERSION"))
        .after_help(LONG_HELP)
        .disable_help_flag(true)
        .disable_version_flag(true)
        .arg(Arg::new("help").short('h').long("help").action(ArgAction::Help).help("print this help"))
        .arg(Arg::new("version").long("version").action(ArgAction::Version).help("print the version"))
        .arg(Arg::new("print-man").long("print-man").action(ArgAction::SetTrue).help("print the manual page (roff) and exit"))
        .arg(
            Arg::new("print-completions")
                .long("print-completions")
                .num_args(1)
                .value_name("SHELL")
                .value_parser(clap::value_parser!(clap_complete::Shell))
                .help("print a completion script for SHELL (bash, zsh, fish, elvish, powershell) and exit"),
        )
        .arg(value("p", 'p', "process-mode counting PMC (TC)"))
        .arg(value("s", 's', "system-mode counting PMC (SC), one per CPU of -c"))
        .arg(value("P", 'P', "process-mode sampling PMC (TS)"))
        .arg(value("S", 'S', "system-mode sampling PMC (SS), one per CPU of -c"))
        .arg(value("c", 'c', "CPUs for the system PMCs that follow (\"*\" for all; e.g. 0,2-3)"))
        .arg(value("n", 'n', "sampling rate for the sampling PMCs that follow: events between samples (nanoseconds for the Linux clock events; -u NAME shows the default)"))
        .arg(
            Arg::new("freq")
                .long("freq")
                .num_args(1)
                .action(ArgAction::Append)
                .value_name("HZ")
                .allow_negative_numbers(true)
                .help("samples per second for the clock-event sampling PMCs that follow (perf's -F), instead of -n"),
        )
        .arg(toggle("C", 'C', "toggle cumulative counts for the counting PMCs that follow"))
        .arg(toggle("d", 'd', "toggle following descendants for the process PMCs that follow"))
        .arg(toggle("E", 'E', "toggle logging per-process counts at exit (PMC_F_LOG_PROCEXIT)"))
        .arg(toggle("N", 'N', "toggle callchain capture for the sampling PMCs that follow"))
        .arg(toggle("U", 'U', "toggle user callchains from kernel-mode samples (FreeBSD; Linux always joins them)"))
        .arg(toggle("W", 'W', "toggle per-context-switch counts in the log (PMC_F_LOG_PROCCSW)"))
        .arg(value("t", 't', "attach to a process: a pid or a regex on command names"))
        .arg(value("o", 'o', "text output file"))
        // Paths are any bytes, as on FreeBSD (not only UTF-8).
        .arg(value("O", 'O', "raw log output: a file or host:port").value_parser(clap::value_parser!(OsString)))
        .arg(value("w", 'w', "printing interval in seconds (default 5)"))
        .arg(value("l", 'l', "measurement duration in seconds"))
        .arg(value("R", 'R', "analyse a log file; alone, print it as text").value_parser(clap::value_parser!(OsString)))
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
        .arg(Arg::new("firefox").long("firefox").num_args(1).help("write a Firefox Profiler profile: every sample of every thread at its time (gzipped if the name ends in .gz)"))
        .arg(Arg::new("top").long("top").num_args(1).allow_negative_numbers(true).help("print a flat profile of the top N functions (the live profile of a sampling run shows 20 unless given)"))
        .arg(Arg::new("summary").long("summary").action(ArgAction::SetTrue).help("for people even when standard error is no terminal (on a terminal always): after the counts of a launched command a summary with units, rates and times (-q leaves it out), and with -w a time column"))
        .arg(Arg::new("multiplex").long("multiplex").action(ArgAction::SetTrue).help("let counting PMCs share the counters when there are more than counters (the driver rotates them, perf on Linux; without it Linux pins each event, and one that loses its counter is an error; counts are scaled to the whole run, and the share of the time each was counted is printed)"))
        .arg(Arg::new("analysis-memory").long("analysis-memory").num_args(1).value_name("MiB").help("the most memory the analyses' tables of functions and stacks take (default 1024); beyond it the stacks with the fewest samples are counted as [other]"))
        .arg(Arg::new("json").long("json").action(ArgAction::SetTrue).help("print counts as JSON; with -R, the flat profile"))
        .arg(Arg::new("call-graph").long("call-graph").num_args(1).value_name("dwarf|fp").help("Linux: walk user stacks with the images' CFI from a copy of the stack (dwarf, the default) or with frame pointers only (fp)"))
        .args(crate::push::options::args())
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
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
            CliError::Help(e.to_string())
        }
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

/// The last value of a path option read as any bytes.
fn last_path(m: &ArgMatches, id: &str) -> Option<OsString> {
    m.get_many::<OsString>(id).and_then(|mut v| v.next_back()).cloned()
}

fn number<T: std::str::FromStr>(option: &str, text: &str) -> Result<T, CliError> {
    text.parse().map_err(|_| CliError::Usage(format!("{option} {text:?}: not a valid number")))
}

/// Parses the value of `option` as a number from `min` to `max`, both included: `what` (e.g.
/// "the sampling rate") names it in the error, which gives the range.
fn ranged<T>(option: &str, text: &str, what: &str, min: T, max: T) -> Result<T, CliError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    let out_of_range =
        || CliError::Usage(format!("{option} {text}: {what} must be from {min} to {max}"));
    match text.parse::<T>() {
        Ok(v) if v >= min && v <= max => Ok(v),
        Ok(_) => Err(out_of_range()),
        // A number too large (or negative) for the type is out of range, not malformed.
        Err(_) if text.parse::<f64>().is_ok() => Err(out_of_range()),
        Err(_) => number(option, text),
    }
}

/// The shortest printing interval (`-w`), in seconds.
pub const MIN_INTERVAL: f64 = 0.01;
/// The shortest duration (`-l`), in seconds.
pub const MIN_DURATION: f64 = 0.001;
/// The longest interval or duration: a year, in seconds.
pub const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;
/// The highest sampling rate (`-n`): perf and FreeBSD's reload arithmetic both need it below
/// 2^63.
pub const MAX_RATE: u64 = i64::MAX as u64;
/// The highest `--freq`: the shortest period perf gives the Linux clock events
/// ([`pmc::host::CLOCK_MIN_PERIOD_NS`], 10 µs) is 100 000 samples a second.
pub const MAX_FREQUENCY: u64 = 1_000_000_000 / pmc::host::CLOCK_MIN_PERIOD_NS;
/// The highest CPU number: a PMC id holds 12 bits of CPU, and 0xFFF means "any".
pub const MAX_CPU: u32 = 0xFFE;
/// The deepest call graph (`-z`): the most frames a callchain record holds.
pub const MAX_DEPTH: usize = pmclog::CALLCHAIN_DEPTH_MAX;
/// The most functions `--top` lists.
pub const MAX_TOP: usize = 1_000_000;

/// The largest `--analysis-memory`, in MiB (1 TiB).
pub const MAX_ANALYSIS_MIB: u64 = 1 << 20;

/// Parses a CPU list: `*`, or numbers and ranges separated by commas, each CPU at most
/// [`MAX_CPU`] (checked before a range is expanded).
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
        let cpu = |t: &str| -> Result<u32, CliError> {
            match t.parse::<u64>() {
                Ok(n) if n <= u64::from(MAX_CPU) => Ok(n as u32),
                Ok(n) => Err(CliError::Usage(format!(
                    "-c {text:?}: CPU {n} is beyond the highest CPU number a PMC can name \
                     ({MAX_CPU})"
                ))),
                Err(_) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => {
                    Err(CliError::Usage(format!(
                        "-c {text:?}: CPU {t} is beyond the highest CPU number a PMC can name \
                         ({MAX_CPU})"
                    )))
                }
                Err(_) => Err(bad()),
            }
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (cpu(a)?, cpu(b)?);
                if a > b {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(cpu(part)?),
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
        Freq(&'a String),
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
    items.extend(positioned(m, "freq").into_iter().map(|(i, v)| (i, Item::Freq(v))));
    for id in ["C", "d", "E", "N", "U", "W"] {
        // A count's default (0) has an index too: only toggles given on the command line count.
        let given = m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        if let Some(indices) = m.indices_of(id).filter(|_| given) {
            items.extend(indices.map(|i| (i, Item::Toggle(id))));
        }
    }
    items.sort_by_key(|(i, _)| *i);
    // FreeBSD's rule: -c, -n and the toggles set up the PMC options after them. One that no
    // later PMC option takes would be silently ignored: it is a mistake.
    for (at, item) in items.iter().enumerate() {
        let (option, takes, which): (String, fn(Mode) -> bool, &str) = match item.1 {
            Item::Pmc(..) => continue,
            Item::Cpus(text) => (format!("-c {text}"), Mode::is_system, "system PMCs (-s/-S)"),
            Item::Rate(text) => (format!("-n {text}"), Mode::is_sampling, "sampling PMCs (-P/-S)"),
            Item::Freq(text) => {
                (format!("--freq {text}"), Mode::is_sampling, "sampling PMCs (-P/-S)")
            }
            Item::Toggle("C") => ("-C".into(), |m| !m.is_sampling(), "counting PMCs (-p/-s)"),
            Item::Toggle(t @ ("N" | "U")) => (format!("-{t}"), Mode::is_sampling, "sampling PMCs"),
            Item::Toggle(t) => (format!("-{t}"), Mode::is_virtual, "process PMCs (-p/-P)"),
        };
        let taken =
            items[at..].iter().any(|(_, later)| matches!(later, Item::Pmc(m, _) if takes(*m)));
        if !taken {
            return Err(CliError::Usage(format!(
                "{option} applies to the {which} after it on the command line, and none follows: \
                 put it before the PMC options it is for"
            )));
        }
    }

    let mut flags_desc = false;
    let (mut procexit, mut callchain, mut usercc, mut proccsw, mut cumulative) =
        (false, true, false, false, false);
    let mut cpus = None;
    let mut rate = None;
    let mut frequency = None;
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
                rate = Some(ranged("-n", text, "the sampling rate", 1, MAX_RATE)?);
                frequency = None;
            }
            Item::Freq(text) => {
                frequency = Some(ranged("--freq", text, "samples per second", 1, MAX_FREQUENCY)?);
                rate = None;
            }
            Item::Pmc(mode, spec) => {
                let mut flags = PmcFlags::empty();
                if mode.is_virtual() {
                    flags.set(PmcFlags::DESCENDANTS, flags_desc);
                    flags.set(PmcFlags::LOG_PROCEXIT, procexit);
                    flags.set(PmcFlags::LOG_PROCCSW, proccsw);
                }
                if !mode.is_sampling() {
                    flags.set(PmcFlags::MULTIPLEX, m.get_flag("multiplex"));
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
                    frequency: if mode.is_sampling() { frequency } else { None },
                    cumulative,
                });
            }
        }
    }

    let seconds = |id: &str, what: &str, min: f64| -> Result<Option<f64>, CliError> {
        let Some(t) = last(m, id) else { return Ok(None) };
        let option = format!("-{id}");
        let v: f64 = number(&option, t)?;
        // NaN fails both comparisons.
        if !(v >= min && v <= MAX_SECONDS) {
            return Err(CliError::Usage(format!(
                "{option} {t}: {what} must be from {min} to {MAX_SECONDS} seconds (a year)"
            )));
        }
        Ok(Some(v))
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
        log_output: last_path(m, "O"),
        interval: seconds("w", "the printing interval", MIN_INTERVAL)?,
        duration: seconds("l", "the duration", MIN_DURATION)?,
        read_log: last_path(m, "R").map(PathBuf::from),
        callgraph: last(m, "G").cloned(),
        gmon: count("g"),
        gmon_dir: last(m, "D").map(PathBuf::from),
        gmon_map: last(m, "M").map(PathBuf::from),
        gmon_kernel: m.get_flag("gmon-kernel"),
        calltree: last(m, "F").cloned(),
        fsroot: last(m, "r").map(PathBuf::from),
        offsets: count("I"),
        addresses: count("A"),
        depth: last(m, "z")
            .map(|t| ranged("-z", t, "the call graph depth", 1, MAX_DEPTH))
            .transpose()?,
        thread: last(m, "i").map(|t| ranged("-i", t, "a thread id", 1, i32::MAX)).transpose()?,
        list: count("L"),
        describe: last(m, "u").cloned(),
        top_mode: count("T"),
        verbosity: m.get_count("v") as i32 - m.get_count("q") as i32,
        folded: m.get_one::<String>("folded").map(PathBuf::from),
        flamegraph: m.get_one::<String>("flamegraph").map(PathBuf::from),
        pprof: m.get_one::<String>("pprof").map(PathBuf::from),
        firefox: m.get_one::<String>("firefox").map(PathBuf::from),
        top: m
            .get_one::<String>("top")
            .map(|t| ranged("--top", t, "the number of functions", 1, MAX_TOP))
            .transpose()?,
        json: m.get_flag("json"),
        analysis_memory: m
            .get_one::<String>("analysis-memory")
            .map(|t| ranged("--analysis-memory", t, "MiB", 1, MAX_ANALYSIS_MIB))
            .transpose()?,
        summary: m.get_flag("summary"),
        multiplex: m.get_flag("multiplex"),
        print_man: m.get_flag("print-man"),
        print_completions: m.get_one::<clap_complete::Shell>("print-completions").copied(),
        call_graph,
        push: crate::push::options::parse(m).map_err(CliError::Usage)?,
    };
    if options.print_man || options.print_completions.is_some() {
        return Ok(options);
    }
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
        || o.firefox.is_some()
        || o.top.is_some();
    if o.analysis_memory.is_some() && !analysis && !(o.json && o.read_log.is_some()) {
        return usage(
            "--analysis-memory bounds the analyses (-G, -g, -F, --folded, --flamegraph, --pprof, --firefox, --top): it needs one",
        );
    }
    if let Some(message) = push_mistake(o, analysis) {
        return Err(CliError::Usage(message.into()));
    }
    if o.depth.is_some() && o.callgraph.is_none() {
        return usage("-z sets the depth of the -G call graph: it needs -G");
    }
    if o.gmon_dir.is_some() && !o.gmon {
        return usage("-D is the directory of the -g gmon files: it needs -g");
    }
    if o.read_log.is_some() {
        if !o.pmcs.is_empty() || !o.command.is_empty() || !o.targets.is_empty() {
            return usage(
                "-R analyses a log: it cannot be combined with -p/-s/-P/-S, -t or a command",
            );
        }
        let measuring = [
            (o.interval.is_some(), "-w"),
            (o.duration.is_some(), "-l"),
            (o.log_output.is_some(), "-O"),
            (o.top_mode, "-T"),
        ];
        if let Some((_, option)) = measuring.iter().find(|(given, _)| *given) {
            return Err(CliError::Usage(format!(
                "{option} is for a measurement: it has no meaning with -R, which reads a log"
            )));
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
    let samples = o.pmcs.iter().any(|p| p.mode.is_sampling());
    let reads_samples = [
        (analysis, "the analyses (-G, -g, -F, --folded, --flamegraph, --pprof, --firefox, --top)"),
        (o.top_mode, "-T"),
        (o.thread.is_some(), "-i"),
        (o.offsets || o.addresses || o.fsroot.is_some(), "-I, -A and -r"),
    ];
    if let Some((_, what)) = reads_samples.iter().find(|(given, _)| *given && !samples) {
        return Err(CliError::Usage(format!(
            "{what} work on samples: add a sampling PMC (-P/-S), or analyse a log with -R"
        )));
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

/// What is wrong with the `--push` options, if anything.
fn push_mistake(o: &Options, analysis: bool) -> Option<&'static str> {
    if o.push.companions_given() && !o.push.enabled() {
        return Some(
            "--push-window, --push-service, --push-header, --push-label, --push-ca and --push-retries are for --push KIND=URL: add one",
        );
    }
    if !o.push.enabled() {
        return None;
    }
    if o.read_log.is_none() {
        return Some("--push pushes the samples of a log for now: use -R file --push KIND=URL");
    }
    if analysis || o.json {
        return Some(
            "-R file --push pushes the log's windows: write its reports (-G, -g, -F, --folded, --flamegraph, --pprof, --top, --json) in a run of their own",
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> Result<Options, CliError> {
        parse(args.iter().map(OsString::from))
    }

    /// The usage error `args` give (the test fails if they give none).
    fn msg(args: &[&str]) -> String {
        match parse_str(args) {
            Err(CliError::Usage(m)) => m,
            other => panic!("{args:?}: {other:?}"),
        }
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
        assert!(msg(&[]).contains("no PMC"));
        assert!(msg(&["-p", "x"]).contains("need a command"));
        assert!(msg(&["-R", "f", "-p", "x"]).contains("-R"));
        assert!(msg(&["-c", "3-1", "-S", "x"]).contains("CPU list"));
    }

    #[test]
    fn every_number_is_range_checked_and_the_error_names_the_range() {
        let year = "31536000 seconds (a year)";
        let w = format!("the printing interval must be from 0.01 to {year}");
        let l = format!("the duration must be from 0.001 to {year}");
        let n = format!("the sampling rate must be from 1 to {MAX_RATE}");
        for (args, says) in [
            (&["-p", "x", "-w", "0", "true"][..], format!("-w 0: {w}")),
            (&["-p", "x", "-w", "0.0000001", "true"], format!("-w 0.0000001: {w}")),
            (&["-p", "x", "-w", "1e300", "true"], format!("-w 1e300: {w}")),
            (&["-p", "x", "-w", "NaN", "true"], format!("-w NaN: {w}")),
            (&["-p", "x", "-l", "1e20", "true"], format!("-l 1e20: {l}")),
            (&["-p", "x", "-l", "-1", "true"], format!("-l -1: {l}")),
            (&["-n", "0", "-P", "x", "true"], format!("-n 0: {n}")),
            (
                &["-n", "99999999999999999999", "-P", "x", "true"],
                format!("-n 99999999999999999999: {n}"),
            ),
            (&["-n", "-5", "-P", "x", "true"], format!("-n -5: {n}")),
            (
                &["-R", "f", "-G", "-", "-z", "0"],
                "-z 0: the call graph depth must be from 1 to 512".into(),
            ),
            (
                &["-R", "f", "-G", "-", "-z", "513"],
                "-z 513: the call graph depth must be from 1 to 512".into(),
            ),
            (
                &["-R", "f", "--top", "0"],
                "--top 0: the number of functions must be from 1 to 1000000".into(),
            ),
            (
                &["-R", "f", "--top", "1", "-i", "0"],
                "-i 0: a thread id must be from 1 to 2147483647".into(),
            ),
        ] {
            assert_eq!(msg(args), says, "{args:?}");
        }
        assert!(msg(&["-n", "many", "-P", "x", "true"]).contains("not a valid number"));
        // The limits themselves are accepted.
        let o = parse_str(&[
            "-n",
            &MAX_RATE.to_string(),
            "-P",
            "x",
            "-w",
            "0.01",
            "-l",
            "31536000",
            "true",
        ])
        .unwrap();
        assert_eq!(
            (o.pmcs[0].rate, o.interval, o.duration),
            (Some(MAX_RATE), Some(0.01), Some(MAX_SECONDS))
        );
    }

    #[test]
    fn cpu_lists_are_checked_before_they_are_expanded() {
        for list in ["0-4294967295", "4095", "0-99999999999999999999"] {
            let m = msg(&["-c", list, "-s", "x"]);
            assert!(m.contains("beyond the highest CPU number a PMC can name (4094)"), "{m}");
        }
        assert_eq!(parse_cpus("0-4094").unwrap().unwrap().len(), 4095);
    }

    #[test]
    fn an_option_that_applies_to_no_later_pmc_is_a_usage_error() {
        for (args, says) in [
            (&["-s", "x", "-c", "1"][..], "-c 1 applies to the system PMCs"),
            (&["-c", "1", "-p", "x", "true"], "-c 1 applies to the system PMCs"),
            (&["-P", "x", "-n", "100", "true"], "-n 100 applies to the sampling PMCs"),
            (&["-n", "100", "-p", "x", "true"], "-n 100 applies to the sampling PMCs"),
            (&["-P", "x", "-N", "true"], "-N applies to the sampling PMCs"),
            (&["-p", "x", "-C", "true"], "-C applies to the counting PMCs"),
            (&["-P", "x", "-d", "true"], "-d applies to the process PMCs"),
            (&["-d", "-s", "x"], "-d applies to the process PMCs"),
        ] {
            let m = msg(args);
            assert!(m.starts_with(says) && m.contains("put it before"), "{args:?}: {m}");
        }
        // Before the PMC options they are for, they are taken.
        assert!(parse_str(&["-c", "1", "-n", "9", "-N", "-S", "x"]).is_ok());
    }

    #[test]
    fn options_the_run_would_ignore_are_usage_errors() {
        let no_samples = "work on samples: add a sampling PMC (-P/-S), or analyse a log with -R";
        for args in [
            &["-p", "x", "-G", "cg", "true"][..],
            &["-p", "x", "--flamegraph", "f.svg", "true"],
            &["-p", "x", "-T", "true"],
            &["-p", "x", "-i", "5", "true"],
            &["-p", "x", "-A", "true"],
        ] {
            assert!(msg(args).contains(no_samples), "{args:?}: {}", msg(args));
        }
        for option in [&["-w", "1"][..], &["-l", "1"], &["-O", "x.log"], &["-T"]] {
            let mut args = vec!["-R", "f"];
            args.extend_from_slice(option);
            let m = msg(&args);
            assert!(m.starts_with(option[0]) && m.contains("no meaning with -R"), "{m}");
        }
        assert!(msg(&["-R", "f", "-z", "4"]).contains("it needs -G"));
        assert!(msg(&["-R", "f", "-G", "-", "-D", "d"]).contains("it needs -g"));
    }
}
