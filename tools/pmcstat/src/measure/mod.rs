//! A measurement: allocate the PMCs, launch or find the targets, start, print counts every
//! interval, and at the end print the final counts, close the log, analyse it if asked, and say
//! what was lost.
//!
//! [`run`] calls the stages in order; the modules hold what they work on: the PMCs (`pmcs`),
//! the processes (`targets`), the files the run creates (`files`) and its log (`log_sink`), the
//! wait for the end (`waiting`), what is printed meanwhile and at the end (`progress`), and how
//! the run ended (`ending`).
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

mod ending;
mod files;
mod log_sink;
mod pmcs;
mod progress;
mod targets;
mod waiting;

pub use log_sink::{LOG_WRITE_FAILED, NETWORK_STALL};

use std::fs::File;
use std::sync::mpsc;
use std::time::Instant;

use pmc::api;
use pmc::host::HostKind;

use crate::cli::Options;
use crate::failure::{Failure, io_failure};
use crate::report;
use crate::signals;
use crate::summary;

use ending::{RunEnd, Wake};
use files::NewFiles;
use log_sink::{LogSink, close_log, drop_notices, network_log_error, open_log};
use pmcs::{Allocated, allocate, read_readings};
use progress::{CountsOut, Progress, live_profile, text_sink};
use targets::launch_and_attach;
use waiting::{wait_for_end, wait_simulated};

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
