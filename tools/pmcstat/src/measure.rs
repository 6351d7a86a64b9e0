//! A measurement: allocate the PMCs, launch or find the targets, start, print counts every
//! interval, and at the end print the final counts, close the log, analyse it if asked, and say
//! what was lost.
//!
//! # The live profile
//!
//! Sampling without `-O` and without other analyses, or with `-T`, shows a flat profile of the
//! top functions (20, or `--top N`) as `top` does: every `-w` seconds (default 5) pmcstat flushes
//! the log, reads what has been written so far (whole records only: the last one may still be
//! partly written) and prints the profile of everything sampled since the start, then prints
//! the final profile at the end. The profile goes to the `-o` file, else to standard output; on
//! a terminal the screen is cleared before each one, otherwise the profiles follow one another,
//! separated by a blank line. On the simulator the measured program runs to its end inside
//! pmcstat, so only the final profile is printed. With `-O host:port` the log cannot be read
//! back, and there is no live profile.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pmc::api;
use pmc::host::HostKind;
use pmc::{Mode, Pmc, PmcSpec};

use crate::cli::{Options, PmcRequest};
use crate::counts::{self, Column};
use crate::counts_json::{self, CountsDocument, Multiplexed, PmcCount};
use crate::failure::{Failure, io_failure};
use crate::live::LiveProfile;
use crate::outputs::Output;
use crate::report;
use crate::signals::{self, Interrupt};
use crate::summary;

/// FreeBSD's default printing interval.
const DEFAULT_INTERVAL: f64 = 5.0;

/// How often a log file gets what the driver holds, at the latest.
const LOG_FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// One allocated PMC and how to show it.
struct Allocated {
    pmc: Pmc,
    request: PmcRequest,
    cpu: Option<u32>,
}

/// Where the log goes.
enum LogSink {
    File(File),
    Socket(std::net::TcpStream),
    /// A temporary file pmcstat analyses itself (sampling without `-O`).
    Temporary(File, std::path::PathBuf),
}

impl LogSink {
    fn fd(&self) -> i32 {
        match self {
            LogSink::File(f) | LogSink::Temporary(f, _) => f.as_raw_fd(),
            LogSink::Socket(s) => s.as_raw_fd(),
        }
    }

    /// The socket the log is sent on, if it is.
    fn socket(&self) -> Option<i32> {
        match self {
            LogSink::Socket(stream) => Some(stream.as_raw_fd()),
            _ => None,
        }
    }

    /// The file the log can be read back from.
    fn path<'a>(&'a self, o: &'a Options) -> Option<&'a Path> {
        match self {
            LogSink::Temporary(_, path) => Some(path),
            LogSink::File(_) => o.log_output.as_deref().map(Path::new),
            LogSink::Socket(_) => None,
        }
    }
}

/// The live profile of this run, if it shows one: sampling into a temporary log with no
/// analysis but `--top`, or `-T` with a log that can be read back.
fn live_profile(o: &Options, log: &LogSink) -> Option<LiveProfile> {
    let other_analyses = report::wants_analysis(&Options { top: None, ..o.clone() });
    let temporary = matches!(log, LogSink::Temporary(..));
    if !(o.top_mode || (temporary && !other_analyses)) {
        return None;
    }
    Some(LiveProfile::new(o, log.path(o)?.to_path_buf()))
}

/// The files a run writes. The `-o` and `-O` files are written as temporary files until the
/// measurement starts ([`crate::outputs`]): a run that fails before then leaves no stub log or
/// empty output behind, and a file that was at the path keeps its content. The temporary log
/// is removed whenever the run ends.
#[derive(Default)]
struct NewFiles {
    /// Put in place by [`NewFiles::measuring`]; dropped before, they leave nothing behind.
    outputs: Vec<Output>,
    /// Removed at the end of the run, however it ends.
    temporary: Vec<tempfile::TempPath>,
}

impl NewFiles {
    /// The measurement starts: the outputs replace what their paths held.
    fn measuring(&mut self) -> Result<(), Failure> {
        for output in self.outputs.drain(..) {
            output.commit().map_err(|e| io_failure("cannot put the output files in place", &e))?;
        }
        Ok(())
    }
}

fn open_log(o: &Options, files: &mut NewFiles) -> Result<LogSink, Failure> {
    let network = o.log_output.as_deref().and_then(|t| t.to_str()).filter(|t| {
        // host:port, as FreeBSD tells them apart.
        !t.contains('/') && t.contains(':')
    });
    match (network, &o.log_output) {
        (Some(target), _) => {
            let stream = std::net::TcpStream::connect(target)
                .map_err(|e| io_failure(&format!("cannot connect to {target}"), &e))?;
            // SO_SNDTIMEO: a receiver that stops reading fails the log's writes after a while
            // instead of holding pmcstat (and the end of the run) for ever.
            stream.set_write_timeout(Some(NETWORK_STALL)).map_err(|e| {
                io_failure(&format!("cannot set up the connection to {target}"), &e)
            })?;
            Ok(LogSink::Socket(stream))
        }
        (None, Some(path)) => {
            let path = Path::new(path);
            let failed = |e: &std::io::Error| {
                io_failure(&format!("cannot create log {}", path.display()), e)
            };
            let output = Output::create(path).map_err(|e| failed(&e))?;
            let file = output.file().try_clone().map_err(|e| failed(&e))?;
            files.outputs.push(output);
            Ok(LogSink::File(file))
        }
        (None, None) => {
            // A new file of a name no one can guess or take first (O_EXCL).
            let (file, path) = tempfile::Builder::new()
                .prefix(&format!("pmcstat-{}-", std::process::id()))
                .suffix(".log")
                .tempfile()
                .map_err(|e| io_failure("cannot create the temporary log", &e))?
                .into_parts();
            let shown = path.to_path_buf();
            signals::temporary_log(Some(shown.clone()));
            files.temporary.push(path);
            Ok(LogSink::Temporary(file, shown))
        }
    }
}

/// How long a write of the log to a network receiver may make no progress before the log is
/// given up (the receiver stopped reading); the run itself goes on.
pub const NETWORK_STALL: Duration = Duration::from_secs(10);

/// The CPUs a system PMC goes on.
fn cpus_of(request: &PmcRequest, ncpu: u32) -> Result<Vec<u32>, Failure> {
    match &request.cpus {
        None => Ok((0..ncpu).collect()),
        Some(cpus) => {
            if let Some(bad) = cpus.iter().find(|&&c| c >= ncpu) {
                return Err(Failure::usage(format!(
                    "-c: CPU {bad} does not exist (this machine has {ncpu})"
                )));
            }
            Ok(cpus.clone())
        }
    }
}

fn allocate(o: &Options, ncpu: u32) -> Result<Vec<Allocated>, Failure> {
    let mut out = Vec::new();
    for request in &o.pmcs {
        let cpus: Vec<Option<u32>> = if request.mode.is_system() {
            cpus_of(request, ncpu)?.into_iter().map(Some).collect()
        } else {
            vec![None]
        };
        for cpu in cpus {
            let mut spec = PmcSpec::new(&request.spec).mode(request.mode).flags(request.flags);
            if let Some(cpu) = cpu {
                spec = spec.cpu(cpu);
            }
            if let Some(rate) = request.rate {
                spec = spec.rate(rate);
            }
            if let Some(hz) = request.frequency {
                spec = spec.rate(clock_period(request, hz)?);
            }
            let pmc = spec.allocate().map_err(|e| allocation_failure(request, cpu, &out, &e))?;
            out.push(Allocated { pmc, request: request.clone(), cpu });
        }
    }
    Ok(out)
}

/// The sampling period of `request`'s clock event for `hz` samples a second (`--freq`); only
/// the clock events, whose rate is a time, have one.
fn clock_period(request: &PmcRequest, hz: u64) -> Result<u64, Failure> {
    let event = api::lookup_event(&request.spec)
        .map_err(|e| Failure::pmc(&format!("event {:?}", request.spec), &e))?;
    match &event.kind {
        pmc::events::EventKind::Soft { name } if pmc::host::is_clock_event(name) => {
            Ok(1_000_000_000 / hz)
        }
        _ => Err(Failure::usage(format!(
            "--freq {hz}: {:?} is not a clock event (its rate counts events, not time): give -n \
             for it, or sample cpu-clock",
            request.spec
        ))),
    }
}

/// Why `request` (on `cpu`) could not be allocated after `allocated`: when its class has no
/// row left, the error names the class's number of rows.
fn allocation_failure(
    request: &PmcRequest,
    cpu: Option<u32>,
    allocated: &[Allocated],
    e: &pmc::Error,
) -> Failure {
    let doing = format!("cannot allocate {:?}", request.spec);
    if let Some(hint) =
        api::lookup_event(&request.spec).ok().and_then(|event| event.refusal_hint(e.errno))
    {
        let mut failure = Failure::pmc(&doing, e);
        failure.message = format!("{doing}: {hint} ({e})");
        return failure;
    }
    let class = api::lookup_event(&request.spec).map(|event| event.class.as_u32());
    let rows = class.ok().and_then(|class| {
        let info = api::classes().ok()?.into_iter().find(|c| c.pm_class == class)?;
        Some((class, info.pm_num))
    });
    let Some((class, rows)) = rows else { return Failure::pmc(&doing, e) };
    let used = allocated
        .iter()
        .filter(|a| a.cpu == cpu)
        .filter(|a| pmc::PmcId::from_u32(a.pmc.id()).is_some_and(|id| id.class.as_u32() == class))
        .count();
    if used < rows as usize {
        return Failure::pmc(&doing, e);
    }
    let name = pmc::Class::from_u32(class).map_or("this", |c| c.name());
    let where_ = cpu.map(|c| format!(" on CPU {c}")).unwrap_or_default();
    let mut failure = Failure::pmc(&doing, e);
    failure.message = format!(
        "{doing}: the {name} class has {rows} rows and this run already uses all of them{where_}: \
         give at most {rows} {name} PMC options ({e})"
    );
    failure
}

/// The pids `-t` names: a number, or a regex matched against command names (Linux `/proc`).
/// On the simulator the pids are the simulated machine's: they are checked by PMCATTACH, and
/// there are no command names to match.
fn resolve_targets(specs: &[String], host: HostKind) -> Result<Vec<i32>, Failure> {
    let mut pids = Vec::new();
    for spec in specs {
        if let Ok(pid) = spec.parse::<i32>() {
            let real = host != HostKind::Sim;
            if pid <= 0 || (real && !std::path::Path::new(&format!("/proc/{pid}")).exists()) {
                return Err(Failure::usage(format!("-t {spec}: no such process")));
            }
            pids.push(pid);
            continue;
        }
        if host == HostKind::Sim {
            return Err(Failure::usage(format!(
                "-t {spec:?}: the simulator's processes are attached to by pid"
            )));
        }
        let re = regex_lite::Regex::new(spec)
            .map_err(|e| Failure::usage(format!("-t {spec:?}: not a pid or a valid regex: {e}")))?;
        let me = std::process::id() as i32;
        let found: Vec<i32> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| pid != me)
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| re.is_match(c.trim_end()))
            })
            .collect();
        if found.is_empty() {
            return Err(Failure::usage(format!(
                "-t {spec:?}: no process has a matching command name"
            )));
        }
        pids.extend(found);
    }
    pids.sort_unstable();
    pids.dedup();
    Ok(pids)
}

/// How the measured work ends.
enum Ending {
    /// The command's exit status.
    Command(i32),
    /// Attached processes went away, or the duration elapsed.
    Done,
    /// A signal ended a measurement without a command.
    Interrupted(Interrupt),
}

impl Ending {
    /// pmcstat's exit status: the command's, 0, or 128 + the signal that ended it.
    fn status(&self) -> i32 {
        match self {
            Ending::Command(status) => *status,
            Ending::Done => 0,
            Ending::Interrupted(interrupt) => interrupt.exit_status(),
        }
    }
}

/// What wakes the measurement loop.
enum Wake {
    /// The launched command ended (its status, or why waiting failed).
    CommandEnded(pmc::Result<i32>),
    /// SIGINT, SIGTERM or SIGHUP.
    Interrupted(Interrupt),
}

/// Runs the measurement and returns pmcstat's exit status, in stages: connect to the driver,
/// open the outputs, allocate the PMCs, launch or find the targets and start, wait for the end
/// (printing every interval), stop and read, print the final counts, finish the log, and choose
/// the status.
pub fn run(o: &Options) -> Result<i32, Failure> {
    let (host, ncpu) = connect(o)?;
    // From here on SIGINT, SIGTERM and SIGHUP end the measurement cleanly (module signals).
    let (tx, rx) = mpsc::channel();
    signals::catch(tx.clone(), Wake::Interrupted)?;
    let mut files = NewFiles::default();
    let (log, out) = open_outputs(o, &mut files)?;
    let pmcs = allocate(o, ncpu)?;
    let targets = launch_and_attach(o, host, &pmcs)?;
    let started = start(&mut files, &pmcs, targets.child)?;

    let counting: Vec<&Allocated> = pmcs.iter().filter(|a| !a.request.mode.is_sampling()).collect();
    let mut progress = Progress::new(o, out, &counting, started);
    progress.live = log.as_ref().and_then(|log| live_profile(o, log));
    let ending = if host == HostKind::Sim {
        wait_simulated(rx, targets.child)?
    } else {
        wait_for_end(o, (tx, rx), &targets, log.as_ref(), &counting, &mut progress)?
    };
    // A signal while the log is sent to a receiver that stopped reading stops that wait first
    // (module signals).
    signals::shut_down_on_signal(log.as_ref().and_then(LogSink::socket));
    for a in &pmcs {
        a.pmc.stop().map_err(|e| Failure::pmc(&format!("cannot stop {:?}", a.request.spec), &e))?;
    }
    let readings = read_readings(o, &counting)?;
    let log_error = log.as_ref().and_then(|_| close_log().err()).map(|why| match &log {
        Some(LogSink::Socket(stream)) => network_log_error(o, stream, why),
        _ => why,
    });
    signals::shut_down_on_signal(None);
    let end = RunEnd {
        ending,
        log_error,
        launched: targets.child.is_some(),
        // Whether each sampling PMC followed the command's descendants (`-d`), for the note
        // after the analyses.
        sampled_descendants: samples_descendants(
            &pmcs
                .iter()
                .filter(|a| a.request.mode.is_sampling())
                .map(|a| a.request.flags)
                .collect::<Vec<_>>(),
        ),
    };
    progress.write_final(o, &counting, &readings, &end);
    if let Some(why) = &end.log_error {
        crate::failure::tell(format_args!("{LOG_WRITE_FAILED}: {why}"));
    }

    let lost = api::driver_stats().map(|s| u64::from(s.pm_intr_bufferfull)).unwrap_or(0);
    if let Some(log) = log {
        drop(pmcs);
        finish_log(o, log, lost, &end, &mut files, &mut progress)?;
    }
    // The counts (or the live profile) that could not be written: said last, after the log was
    // finished. A closed pipe (`2>&1 | head`) is not news to its reader.
    let output_failure = progress.failure();
    if let Some(failure) = output_failure.as_ref().filter(|f| !f.message.is_empty()) {
        crate::failure::tell(format_args!("{failure}"));
    }
    Ok(end.status(output_failure.as_ref()))
}

/// The first stage: the call-graph method, the driver, and what it says of the machine (the
/// host and the number of CPUs).
fn connect(o: &Options) -> Result<(HostKind, u32), Failure> {
    if let Some(method) = o.call_graph {
        pmc::host::set_call_graph(method);
    }
    api::init().map_err(|e| Failure::pmc("cannot use the PMC driver", &e))?;
    let host = api::host_kind().map_err(|e| Failure::pmc("PMC_HOST", &e))?;
    let ncpu = api::cpu_info().map_err(|e| Failure::pmc("GETCPUINFO", &e))?.pm_ncpu;
    Ok((host, ncpu))
}

/// The log (when a PMC logs, or `-O` asks for one) and the counts output, and the driver's log
/// configured to the log.
fn open_outputs(
    o: &Options,
    files: &mut NewFiles,
) -> Result<(Option<LogSink>, CountsOut), Failure> {
    let needs_log = o.pmcs.iter().any(|p| {
        p.mode.is_sampling()
            || p.flags.intersects(pmc::PmcFlags::LOG_PROCEXIT | pmc::PmcFlags::LOG_PROCCSW)
    });
    let log = if needs_log || o.log_output.is_some() { Some(open_log(o, files)?) } else { None };
    let out = CountsOut { out: text_sink(o, files)?, error: None };
    if let Some(log) = &log {
        api::configure_log(log.fd()).map_err(|e| Failure::pmc("cannot configure the log", &e))?;
    }
    Ok((log, out))
}

/// The processes a run measures: the command it launched, if any, and every process it
/// attached to (the command included).
struct Targets {
    /// The launched command, stopped until [`start`] resumes it.
    child: Option<i32>,
    /// `-t`'s processes and the command.
    pids: Vec<i32>,
}

/// Launches the command (stopped before it runs), finds `-t`'s processes, and attaches every
/// process PMC to them all.
fn launch_and_attach(o: &Options, host: HostKind, pmcs: &[Allocated]) -> Result<Targets, Failure> {
    let child = if o.command.is_empty() {
        None
    } else {
        Some(
            api::spawn(&o.command)
                .map_err(|e| Failure::pmc(&format!("cannot run {:?}", o.command[0]), &e))?,
        )
    };
    if let Some(pid) = child {
        signals::launched(pid);
    }
    if host != HostKind::Sim {
        signals::finish_log_at_once();
    }
    let mut pids = resolve_targets(&o.targets, host)?;
    pids.extend(child);
    for a in pmcs.iter().filter(|a| a.request.mode.is_virtual()) {
        for &pid in &pids {
            a.pmc.attach(pid).map_err(|e| {
                Failure::pmc(&format!("cannot attach {:?} to process {pid}", a.request.spec), &e)
            })?;
        }
    }
    Ok(Targets { child, pids })
}

/// Puts the outputs in place, starts the PMCs and lets the command run; when that was.
fn start(files: &mut NewFiles, pmcs: &[Allocated], child: Option<i32>) -> Result<Instant, Failure> {
    files.measuring()?;
    for a in pmcs {
        a.pmc
            .start()
            .map_err(|e| Failure::pmc(&format!("cannot start {:?}", a.request.spec), &e))?;
    }
    if let Some(pid) = child {
        api::resume(pid).map_err(|e| Failure::pmc("cannot start the command", &e))?;
    }
    Ok(Instant::now())
}

/// The counting PMCs' counts. With --multiplex, each count with its times, scaled to the whole
/// time enabled; else FreeBSD's read.
fn read_readings(o: &Options, counting: &[&Allocated]) -> Result<Vec<pmc::ScaledValue>, Failure> {
    counting
        .iter()
        .map(|a| {
            let read = if o.multiplex {
                a.pmc.read_scaled()
            } else {
                a.pmc.read().map(|value| pmc::ScaledValue { value, ..Default::default() })
            };
            read.map_err(|e| Failure::pmc(&format!("cannot read {:?}", a.request.spec), &e))
        })
        .collect()
}

/// The counts as printed: scaled, 0 for a PMC that never ran.
fn scaled_values(readings: &[pmc::ScaledValue]) -> Vec<u64> {
    readings.iter().map(|r| r.scaled().unwrap_or(0)).collect()
}

/// What a run prints while it measures and at its end: the counts and the live profile.
struct Progress {
    out: CountsOut,
    columns: Vec<Column>,
    /// Whether counts are printed as columns (not with --json, nor without counting PMCs).
    print_counts: bool,
    /// For people (a terminal, or when asked; scripts that read standard error get FreeBSD's
    /// layout alone): the summary at the end, and with -w a time column.
    for_people: bool,
    timed: bool,
    started: Instant,
    live: Option<LiveProfile>,
    /// Why the live profile could not be shown, if it could not.
    live_failure: Option<Failure>,
}

impl Progress {
    /// The counts' columns, and their header printed.
    fn new(o: &Options, out: CountsOut, counting: &[&Allocated], started: Instant) -> Progress {
        // Each column is as wide as its class's counter (FreeBSD's pmc_width).
        let classes = api::classes().unwrap_or_default();
        let width_of = |a: &Allocated| {
            let class = pmc::PmcId::from_u32(a.pmc.id()).map(|id| id.class.as_u32());
            classes.iter().find(|c| Some(c.pm_class) == class).map_or(64, |c| c.pm_width)
        };
        let columns: Vec<Column> = counting
            .iter()
            .map(|a| Column::new(&a.request.spec, a.cpu, width_of(a), a.request.cumulative))
            .collect();
        let print_counts = !o.json && !columns.is_empty();
        let for_people = o.summary || std::io::IsTerminal::is_terminal(&std::io::stderr());
        let timed = for_people && o.interval.is_some() && o.output.is_none();
        let mut progress = Progress {
            out,
            columns,
            print_counts,
            for_people,
            timed,
            started,
            live: None,
            live_failure: None,
        };
        if progress.print_counts {
            progress.out.write(|w| counts::write_header(&progress.columns, timed, w));
        }
        progress
    }

    /// The time column's value, when there is one.
    fn elapsed(&self) -> Option<Duration> {
        self.timed.then(|| self.started.elapsed())
    }

    /// Every interval: the live profile so far, and the counts.
    fn write_interval(&mut self, o: &Options, counting: &[&Allocated]) -> Result<(), Failure> {
        if let Some(view) = self.live.as_mut() {
            let shown = match &o.output {
                Some(_) => self.out.sink().map(|sink| view.show_current(o, sink)),
                None => Some(view.show_current(o, &mut std::io::stdout())),
            };
            // A profile that cannot be shown (a closed pipe) is not a reason to throw the
            // measurement away: the run goes on without it.
            if let Some(Err(failure)) = shown {
                self.live_failure = Some(failure);
                self.live = None;
            }
        }
        if self.print_counts {
            let values = scaled_values(&read_readings(o, counting)?);
            let elapsed = self.elapsed();
            self.out.write(|w| counts::write_values(&mut self.columns, &values, elapsed, w));
        }
        Ok(())
    }

    /// At the end: the final counts (with what multiplexed PMCs counted), or `--json`, and for
    /// people the summary.
    fn write_final(
        &mut self,
        o: &Options,
        counting: &[&Allocated],
        readings: &[pmc::ScaledValue],
        end: &RunEnd,
    ) {
        let values = scaled_values(readings);
        let multiplexed = readings.iter().any(pmc::ScaledValue::multiplexed);
        if self.print_counts {
            let elapsed = self.elapsed();
            self.out.write(|w| {
                counts::write_values(&mut self.columns, &values, elapsed, w)?;
                if multiplexed {
                    counts::write_counted(&self.columns, readings, w)?;
                }
                writeln!(w)
            });
        }
        if o.json {
            let log_error = end.log_error.as_deref();
            self.out.write(|w| write_json(w, counting, readings, &end.ending, log_error));
        }
        self.out.write(|w| w.flush());
        if self.print_counts && end.launched && o.verbosity >= 0 && self.for_people {
            let (user, sys) = summary::children_cpu_time();
            let summary = summary::Summary {
                command: o
                    .command
                    .iter()
                    .map(|a| a.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" "),
                counts: counting
                    .iter()
                    .map(|a| a.request.spec.clone())
                    .zip(values.iter().copied())
                    .collect(),
                elapsed: self.started.elapsed(),
                user,
                sys,
                descendants: counting
                    .iter()
                    .any(|a| a.request.flags.contains(pmc::PmcFlags::DESCENDANTS)),
                counted: if multiplexed {
                    readings.iter().map(|r| (r.running > 0).then(|| r.fraction_counted())).collect()
                } else {
                    Vec::new()
                },
            };
            // For people, on standard error: if it cannot be written, no one reads it.
            let _ = summary::write_summary(&summary, &mut std::io::stderr());
        }
    }

    /// Why the counts (or the live profile) could not be written, if they could not.
    fn failure(self) -> Option<Failure> {
        self.out.error.as_ref().map(|e| io_failure("writing counts", e)).or(self.live_failure)
    }
}

/// On the simulator: the simulated machine runs in this thread, to the command's end. A signal
/// reaches it through the simulator, which then ends the command as the signal would.
fn wait_simulated(rx: mpsc::Receiver<Wake>, child: Option<i32>) -> Result<Ending, Failure> {
    std::thread::spawn(move || {
        while let Ok(wake) = rx.recv() {
            if let Wake::Interrupted(interrupt) = wake {
                pmc::host::sim::interrupt(interrupt.signal);
            }
        }
    });
    Ok(match child {
        Some(pid) => Ending::Command(
            api::wait(pid).map_err(|e| Failure::pmc("waiting for the command", &e))?,
        ),
        None => Ending::Done,
    })
}

/// The command's end after it was asked to end (by a signal, or at the -l deadline).
fn command_end(rx: &mpsc::Receiver<Wake>) -> Result<Ending, Failure> {
    loop {
        match rx.recv() {
            Ok(Wake::CommandEnded(status)) => {
                let status = status.map_err(|e| Failure::pmc("waiting for the command", &e))?;
                return Ok(Ending::Command(status));
            }
            Ok(Wake::Interrupted(_)) => {}
            Err(_) => return Ok(Ending::Done),
        }
    }
}

/// On a real host: waits for the command's end, a signal, the `-l` deadline or the attached
/// processes' end, printing every interval and flushing the log file meanwhile.
fn wait_for_end(
    o: &Options,
    (tx, rx): (mpsc::Sender<Wake>, mpsc::Receiver<Wake>),
    targets: &Targets,
    log: Option<&LogSink>,
    counting: &[&Allocated],
    progress: &mut Progress,
) -> Result<Ending, Failure> {
    let child = targets.child;
    if let Some(pid) = child {
        std::thread::spawn(move || {
            let status = api::wait(pid);
            signals::reaped();
            let _ = tx.send(Wake::CommandEnded(status));
        });
    }
    let interval = Duration::from_secs_f64(o.interval.unwrap_or(DEFAULT_INTERVAL));
    let deadline = o.duration.map(|d| Instant::now() + Duration::from_secs_f64(d));
    // Woken every interval only for something to do then: counts or a profile to print, a
    // deadline, or attached processes to look for (a launched command's end and signals
    // wake the loop themselves).
    let periodic = progress.print_counts
        || progress.live.is_some()
        || (child.is_none() && !targets.pids.is_empty());
    let mut next_print = Instant::now() + interval;
    // A log file gets what the driver holds at least every LOG_FLUSH_INTERVAL, not only
    // when a buffer fills (minutes at a low rate): a run that ends abruptly keeps its
    // samples. (Not a socket: a stalled receiver would hold this loop.)
    let flushing = matches!(log, Some(LogSink::File(_) | LogSink::Temporary(..)));
    let mut next_flush = flushing.then(|| Instant::now() + LOG_FLUSH_INTERVAL);
    let ending = loop {
        let wake_at =
            [(deadline.is_some() || periodic).then_some(next_print), deadline, next_flush]
                .into_iter()
                .flatten()
                .min();
        let timeout = match wake_at {
            Some(at) => at.saturating_duration_since(Instant::now()),
            None => Duration::MAX,
        };
        let woken = if timeout == Duration::MAX {
            rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
        } else {
            rx.recv_timeout(timeout)
        };
        match woken {
            Ok(Wake::CommandEnded(status)) => {
                break Ending::Command(
                    status.map_err(|e| Failure::pmc("waiting for the command", &e))?,
                );
            }
            Ok(Wake::Interrupted(interrupt)) => match child {
                Some(pid) => {
                    interrupt.forward_to(pid);
                    // The command's end may wait for the log's writes: a receiver that
                    // stopped reading must not hold it (module signals).
                    signals::shut_down_on_signal(log.and_then(LogSink::socket));
                    break command_end(&rx)?;
                }
                None => break Ending::Interrupted(interrupt),
            },
            Err(mpsc::RecvTimeoutError::Disconnected) if child.is_some() => break Ending::Done,
            Err(_) => {}
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            if let Some(pid) = child {
                // As a SIGINT pmcstat was sent (a stopped command acts on it too).
                Interrupt { signal: libc::SIGINT, from_terminal: false }.forward_to(pid);
                break command_end(&rx)?;
            }
            break Ending::Done;
        }
        if next_flush.is_some_and(|at| Instant::now() >= at) {
            // An error stops the log; closing it at the end says why.
            let _ = api::flush_log();
            next_flush = Some(Instant::now() + LOG_FLUSH_INTERVAL);
        }
        if Instant::now() < next_print {
            continue;
        }
        next_print = Instant::now() + interval;
        if child.is_none()
            && !targets.pids.is_empty()
            && targets.pids.iter().all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
        {
            break Ending::Done;
        }
        progress.write_interval(o, counting)?;
    };
    // A signal from now on ends pmcstat at once.
    drop(rx);
    Ok(ending)
}

/// How the run ended, and what the stages after it need to know of it.
struct RunEnd {
    ending: Ending,
    /// Why the log could not be written, if it could not.
    log_error: Option<String>,
    /// Whether pmcstat launched the command.
    launched: bool,
    /// Whether any sampling PMC followed the command's descendants (`-d`).
    sampled_descendants: bool,
}

impl RunEnd {
    /// pmcstat's exit status, given why the counts could not be written, if they could not.
    fn status(&self, output_failure: Option<&Failure>) -> i32 {
        match (&self.ending, &self.log_error, output_failure) {
            // Without a command's status to return, a log that could not be written is the
            // status, else counts that could not be written.
            (Ending::Done | Ending::Interrupted(_), Some(_), _) => crate::failure::EX_IOERR,
            (Ending::Done, None, Some(failure)) => failure.status,
            _ => self.ending.status(),
        }
    }
}

/// The last stage of a run with a log: the log read back for the analyses and the live
/// profile's final view, or what a recording run's log lost (`lost`: samples the driver could
/// not log).
fn finish_log(
    o: &Options,
    log: LogSink,
    lost: u64,
    end: &RunEnd,
    files: &mut NewFiles,
    progress: &mut Progress,
) -> Result<(), Failure> {
    let temporary = matches!(log, LogSink::Temporary(..));
    match log.path(o) {
        // A log that could not be written is not analysed: what it holds is cut short.
        _ if end.log_error.is_some() => {}
        Some(path) if progress.live.is_some() || report::wants_analysis(o) => {
            let file = File::open(path);
            if temporary {
                signals::temporary_log(None);
                files.temporary.clear();
            }
            let file = file.map_err(|e| io_failure("reading the log back", &e))?;
            let name = if temporary { "the log".to_owned() } else { path.display().to_string() };
            let read = report::read_log(o, file, &name)?;
            let profile = &read.profile;
            let mut rest = o.clone();
            if let Some(view) = progress.live.as_mut() {
                // The final profile, as text that stays on the terminal.
                let shown = match &o.output {
                    Some(_) => progress.out.sink().map(|sink| view.show_final(profile, sink)),
                    None => Some(view.show_final(profile, &mut std::io::stdout())),
                };
                if let Some(Err(failure)) = shown {
                    progress.live_failure = Some(failure);
                }
                rest.top = None;
            }
            report::write_analyses(&rest, profile)?;
            report::report_profile_warnings(o, profile);
            if end.launched && o.verbosity >= 0 && !end.sampled_descendants {
                note_unfollowed_samples(profile);
            }
            report::check_end(&read, &name)?;
        }
        // The recording run says what its log lost, as `-R` of it would.
        Some(path) if end.log_error.is_none() => report::report_drops(drop_notices(path), lost),
        _ => report::report_drops(0, lost),
    }
    Ok(())
}

/// Whether any sampling PMC (of `flags`) followed the command's descendants (`-d`).
fn samples_descendants(flags: &[pmc::PmcFlags]) -> bool {
    flags.iter().any(|f| f.contains(pmc::PmcFlags::DESCENDANTS))
}

/// After a sampling run of a launched command without `-d`: when a clock event's samples cover
/// less than half the CPU time the command and the processes it waited for used, the processes
/// it started were not followed; say so, as the counting summary does.
fn note_unfollowed_samples(profile: &pmcprof::Profile) {
    let (user, sys) = summary::children_cpu_time();
    let cpu_ns = (user + sys).as_nanos();
    // Only where the CPU time is worth ten samples or more: fewer is what rounding gives.
    let sampled = profile
        .pmcs()
        .iter()
        .filter_map(|p| p.clock_period_ns().map(|period| (p.samples(), period)))
        .filter(|&(_, period)| cpu_ns >= 10 * u128::from(period))
        .map(|(samples, period)| samples.saturating_mul(period))
        .max();
    if let Some(ns) = sampled.filter(|&ns| summary::unfollowed(ns, user + sys)) {
        let ms = |ns: u128| ns / 1_000_000;
        crate::failure::tell(format_args!(
            "note: the command's processes used {} ms of CPU time and the samples cover \
             {} ms: the processes it started were not followed; add -d to sample them too",
            ms((user + sys).as_nanos()),
            ms(u128::from(ns))
        ));
    }
}

/// The counts output (the `-o` file, standard error, or standard output with `--json`). A
/// write that fails — a closed pipe, a full device — does not end the measurement: the log is
/// still finished; nothing more is written here, and the error is reported at the end.
struct CountsOut {
    out: Box<dyn Write>,
    error: Option<std::io::Error>,
}

impl CountsOut {
    /// Writes with `f`, unless an earlier write failed.
    fn write(&mut self, f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
        if self.error.is_none() {
            self.error = f(&mut self.out).err();
        }
    }

    /// The output, unless an earlier write failed.
    fn sink(&mut self) -> Option<&mut dyn Write> {
        match self.error {
            None => Some(&mut self.out),
            Some(_) => None,
        }
    }
}

/// How many DROPNOTIFY records (losses the driver wrote down) the log file at `path` holds:
/// read back through a bounded window, up to its first damaged record; 0 for what is not a
/// regular file (a device, a FIFO, which would block, is never opened).
fn drop_notices(path: &Path) -> u64 {
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return 0;
    }
    let Ok(file) = File::open(path) else { return 0 };
    let mut reader = pmclog::LogReader::new(file);
    let mut notices = 0;
    while let Ok(Some(entry)) = reader.next_entry() {
        if matches!(entry.record, pmclog::Record::DropNotify) {
            notices += 1;
        }
    }
    notices
}

/// How pmcstat's message about a log it could not write starts (a script looks for it on
/// standard error, or for `log_error` in `--json`: the exit status stays the command's).
pub const LOG_WRITE_FAILED: &str = "the log could not be written, it is incomplete";

/// `why` a log sent to `-O host:port` could not be written, with the reason in words when
/// the receiver stopped reading: data still waits to be sent on `stream` after the writes made
/// no progress for [`NETWORK_STALL`], or a signal stopped the wait.
fn network_log_error(o: &Options, stream: &std::net::TcpStream, why: String) -> String {
    let target = o.log_output.as_deref().unwrap_or_default().to_string_lossy();
    let mut unsent: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ on a socket) writes one int, a valid local.
    let queried = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut unsent) } == 0;
    if signals::socket_shut_down() {
        format!("{why} (a signal stopped the wait for {target}, which was not reading)")
    } else if queried && unsent > 0 {
        format!(
            "{why} ({target} stopped reading: the log's writes made no progress for {} s)",
            NETWORK_STALL.as_secs()
        )
    } else {
        why
    }
}

/// Writes out and closes the log; why it could not be written, if it could not (the log is
/// closed in any case).
fn close_log() -> Result<(), String> {
    let flushed = api::flush_log();
    let closed = api::close_log();
    match (flushed, closed) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
    }
}

/// Counting output: the `-o` file, else standard error (as FreeBSD's pmcstat).
fn text_sink(o: &Options, files: &mut NewFiles) -> Result<Box<dyn Write>, Failure> {
    match &o.output {
        Some(path) => {
            let failed =
                |e: &std::io::Error| io_failure(&format!("cannot create {}", path.display()), e);
            let output = Output::create(path).map_err(|e| failed(&e))?;
            let file = output.file().try_clone().map_err(|e| failed(&e))?;
            files.outputs.push(output);
            Ok(Box::new(std::io::BufWriter::new(file)))
        }
        None if o.json => Ok(Box::new(std::io::stdout())),
        None => Ok(Box::new(std::io::stderr())),
    }
}

/// `--json`: the counts, the command's exit status and what became of the log.
fn write_json(
    out: &mut dyn Write,
    pmcs: &[&Allocated],
    readings: &[pmc::ScaledValue],
    ending: &Ending,
    log_error: Option<&str>,
) -> std::io::Result<()> {
    let pmcs = pmcs
        .iter()
        .zip(readings)
        .map(|(a, r)| PmcCount {
            event: &a.request.spec,
            mode: if a.request.mode == Mode::SystemCounting { "system" } else { "process" },
            cpu: a.cpu,
            value: r.scaled().unwrap_or(0),
            multiplexed: r.multiplexed().then_some(Multiplexed {
                raw_value: r.value,
                time_enabled: r.enabled,
                time_running: r.running,
            }),
        })
        .collect();
    let exit_status = match ending {
        Ending::Command(s) => Some(*s),
        Ending::Done | Ending::Interrupted(_) => None,
    };
    counts_json::write(&CountsDocument { pmcs, exit_status, log_error }, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drop_notices_of_a_log_file_are_counted_and_a_fifo_is_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drops.log");
        let mut bytes = Vec::new();
        let mut buf = vec![0u8; pmclog::MAX_RECORD_LEN];
        for record in [pmclog::Record::DropNotify, pmclog::Record::CloseLog] {
            for _ in 0..2 {
                let len = pmclog::encode(&record, 0, &mut buf).unwrap();
                bytes.extend_from_slice(&buf[..len]);
            }
        }
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(drop_notices(&path), 2);
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path, which lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(drop_notices(&fifo), 0);
    }
}
