//! What a run prints while it measures and at its end: the counts (columns, `--json`, the
//! summary) and the live profile.

use std::io::Write;
use std::time::{Duration, Instant};

use pmc::Mode;
use pmc::api;

use crate::cli::Options;
use crate::counts::{self, Column};
use crate::counts_json::{self, CountsDocument, Multiplexed, PmcCount};
use crate::failure::{Failure, io_failure};
use crate::live::LiveProfile;
use crate::outputs::Output;
use crate::report;
use crate::summary;

use super::ending::{Ending, RunEnd};
use super::files::NewFiles;
use super::log_sink::LogSink;
use super::pmcs::{Allocated, read_readings, scaled_values};

/// The live profile of this run, if it shows one: sampling into a temporary log with no
/// analysis but `--top`, or `-T` with a log that can be read back.
pub(super) fn live_profile(o: &Options, log: &LogSink) -> Option<LiveProfile> {
    let other_analyses = report::wants_analysis(&Options { top: None, ..o.clone() });
    let temporary = matches!(log, LogSink::Temporary(..));
    if !(o.top_mode || (temporary && !other_analyses)) {
        return None;
    }
    Some(LiveProfile::new(o, log.path(o)?.to_path_buf()))
}

/// What a run prints while it measures and at its end: the counts and the live profile.
pub(super) struct Progress {
    pub(super) out: CountsOut,
    pub(super) columns: Vec<Column>,
    /// Whether counts are printed as columns (not with --json, nor without counting PMCs).
    pub(super) print_counts: bool,
    /// For people (a terminal, or when asked; scripts that read standard error get FreeBSD's
    /// layout alone): the summary at the end, and with -w a time column.
    pub(super) for_people: bool,
    pub(super) timed: bool,
    pub(super) started: Instant,
    pub(super) live: Option<LiveProfile>,
    /// Why the live profile could not be shown, if it could not.
    pub(super) live_failure: Option<Failure>,
}

impl Progress {
    /// The counts' columns, and their header printed.
    pub(super) fn new(
        o: &Options,
        out: CountsOut,
        counting: &[&Allocated],
        started: Instant,
    ) -> Progress {
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
    pub(super) fn write_interval(
        &mut self,
        o: &Options,
        counting: &[&Allocated],
    ) -> Result<(), Failure> {
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
    pub(super) fn write_final(
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
    pub(super) fn failure(self) -> Option<Failure> {
        self.out.error.as_ref().map(|e| io_failure("writing counts", e)).or(self.live_failure)
    }
}

/// The counts output (the `-o` file, standard error, or standard output with `--json`). A
/// write that fails — a closed pipe, a full device — does not end the measurement: the log is
/// still finished; nothing more is written here, and the error is reported at the end.
pub(super) struct CountsOut {
    pub(super) out: Box<dyn Write>,
    pub(super) error: Option<std::io::Error>,
}

impl CountsOut {
    /// Writes with `f`, unless an earlier write failed.
    pub(super) fn write(&mut self, f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
        if self.error.is_none() {
            self.error = f(&mut self.out).err();
        }
    }

    /// The output, unless an earlier write failed.
    pub(super) fn sink(&mut self) -> Option<&mut dyn Write> {
        match self.error {
            None => Some(&mut self.out),
            Some(_) => None,
        }
    }
}

/// Counting output: the `-o` file, else standard error (as FreeBSD's pmcstat).
pub(super) fn text_sink(o: &Options, files: &mut NewFiles) -> Result<Box<dyn Write>, Failure> {
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
