//! `pmcstat -R log --push KIND=URL`: a log's samples (from FreeBSD's kernel or from the Linux
//! host) cut into windows by their timestamps and pushed, so that hosts that write logs join
//! a fleet's backend.
//!
//! The log is read once for its clock and the span of its samples, then once per window for
//! that window's samples (every mapping record is read each time, so that each window resolves
//! as the whole log would). Windows are made faster than real time: after each offer the
//! pushers are flushed, a hand-off, so that none is dropped for want of room in the queue.

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use pmc::events::pmu_table::PmuEventNames;
use pmclog::Record;
use pmcprof::{Profile, ResolveOptions};
use pmcpush::Resource;

use super::cut::LogClock;
use super::pushers::Pushers;
use super::window::{Labels, window};
use crate::cli::Options;
use crate::failure::{EX_UNAVAILABLE, Failure, io_failure, tell};

/// How long one window may take to land (sent, or dropped after its retries) before the next
/// is made: more than the retries of the default back-off with their request timeouts.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(300);

/// How long the pushers may take at the end for what is still queued.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

/// Pushes the windows of `log`; 0 if every one was sent, EX_UNAVAILABLE otherwise, EX_DATAERR
/// for a damaged log (whose windows before the damage were pushed).
pub fn run(o: &Options, log: &Path) -> Result<i32, Failure> {
    let name = log.display().to_string();
    let open = || File::open(log).map_err(|e| io_failure(&format!("cannot read log {name}"), &e));
    let scan = scan(open()?).map_err(|e| io_failure(&format!("cannot read log {name}"), &e))?;
    let pushers = Pushers::start(&o.push)?;
    let resolve = ResolveOptions {
        fsroot: o.fsroot.clone(),
        show_offsets: o.offsets,
        raw_addresses: o.addresses,
        thread: o.thread,
        lines: true,
        frames_only: false,
        table_budget: o.analysis_memory.map(|mib| mib << 20),
        ..ResolveOptions::default()
    };
    let mut labels: Option<Labels> = None;
    let mut damaged = None;
    let windows = match scan.samples {
        Some((first, last)) => scan.clock.cut(first, last, o.push.window()),
        None => Vec::new(),
    };
    let count = windows.len();
    for tsc in windows {
        let read =
            Profile::window_from_reader(open()?, &resolve, &PmuEventNames, Some(tsc.clone()))
                .map_err(|e| io_failure(&format!("cannot read log {name}"), &e))?;
        damaged = read.error.as_ref().map(|e| e.to_string());
        let labels = labels.get_or_insert_with(|| replay_labels(o, &read.profile));
        let (start, end) = (scan.clock.wall(tsc.start), scan.clock.wall(tsc.end));
        let made = window(&read.profile, start, end, labels)
            .map_err(|e| io_failure("making a pprof profile", &e))?;
        if let Some(w) = made {
            pushers.offer(&w);
            pushers.flush(FLUSH_TIMEOUT);
        }
    }
    if count == 0 {
        tell(format_args!("warning: {name}: no samples to push"));
    }
    let all_sent = pushers.shutdown(SHUTDOWN_DEADLINE);
    if let Some(message) = damaged.or(scan.error) {
        return Err(Failure::data(format!("{name}: {message}; the windows before it were pushed")));
    }
    Ok(if all_sent { 0 } else { EX_UNAVAILABLE })
}

/// What the first pass over a log finds.
struct Scan {
    clock: LogClock,
    /// The first and last timestamps of its samples.
    samples: Option<(u64, u64)>,
    /// Why the log ends early, if it does.
    error: Option<String>,
}

/// Reads the log's clock and the span of its samples, without resolving anything.
fn scan(input: File) -> std::io::Result<Scan> {
    let mut reader = pmclog::LogReader::new(input);
    let mut scan = Scan { clock: LogClock::default(), samples: None, error: None };
    loop {
        match reader.next_entry() {
            Ok(Some(entry)) => match entry.record {
                Record::Initialize(init) => {
                    scan.clock = LogClock {
                        start_ns: i128::from(init.time_sec) * 1_000_000_000
                            + i128::from(init.time_nsec),
                        start_tsc: entry.tsc,
                        freq: init.tsc_freq,
                    };
                }
                Record::Callchain(_) => {
                    let tsc = entry.tsc;
                    scan.samples = Some(match scan.samples {
                        None => (tsc, tsc),
                        Some((lo, hi)) => (lo.min(tsc), hi.max(tsc)),
                    });
                }
                _ => {}
            },
            Ok(None) => break,
            Err(pmclog::ReadError::Io(e)) => return Err(e),
            Err(pmclog::ReadError::Decode(e)) => {
                scan.error = Some(e.to_string());
                break;
            }
        }
    }
    Ok(scan)
}

/// A replay's labels: `--push-service`, else the log's main program, else `pmcstat`. The
/// resource has no host attributes: the host that wrote the log is not this one
/// (`--push-label host=NAME` says which it was).
fn replay_labels(o: &Options, profile: &Profile) -> Labels {
    let program = profile.main_image().map(|image| {
        let base = image.rsplit('/').next().unwrap_or(image);
        base.to_owned()
    });
    let service = o.push.service.clone().or(program).unwrap_or_else(|| "pmcstat".to_owned());
    Labels { resource: Resource::new(&service), service, labels: o.push.labels.clone() }
}
