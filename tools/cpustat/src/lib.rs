//! cpustat(8), as illumos's (reference §7): binds the sets of the `-c` specs to every CPU
//! (`cpc_bind_cpu`, one thread per CPU) and prints each CPU's counts every `interval` seconds,
//! `count` times, then the totals.
//!
//! ```text
//! cpustat -c spec [-c spec]... [-p period] [-T u|d] [-sntD] [interval [count]]
//! ```
//!
//! Exit status: 0 success, 1 error (a failed write of the output too: the run stops there), 2
//! usage. With several specs each CPU binds them in turn, one per interval; `count` is the
//! number of samples of each CPU over all the sets (with `-p`, of each set), as illumos's. `-s` (a soaker thread per CPU while a system-only set is bound) is
//! accepted and does nothing: Linux's idle time is not counted as a running thread's.

use std::ffi::OsString;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Arg, ArgAction, Command};
use cpc::tool::{columns, spec};
use cpc::{Buf, Cpc};

const USAGE: &str = "Usage:\n\tcpustat [-c events] [-p period] [-nstD] [-T d|u] [interval [count]]\n\n\t-c events specify processor events to be monitored\n\t-n\t  suppress titles\n\t-p period cycle through event list periodically\n\t-s\t  run user soaker thread for system-only events\n\t-t\t  include tsc register\n\t-T d|u\t  Display a timestamp in date (d) or unix time_t (u)\n\t-D\t  enable debug mode\n\t-h\t  print extended usage information\n\n\tUse cputrack(1) to monitor per-process statistics.\n";

/// What the tool says when it cannot open libcpc.
const NO_ACCESS: &str = "cannot access performance counters";

fn command() -> Command {
    let flag = |(id, c): (&'static str, char)| Arg::new(id).short(c).action(ArgAction::SetTrue);
    Command::new("cpustat")
        .disable_help_flag(true)
        .disable_version_flag(true)
        .override_usage(USAGE)
        .arg(Arg::new("c").short('c').action(ArgAction::Append))
        .arg(Arg::new("p").short('p').value_parser(clap::value_parser!(f64)))
        .arg(Arg::new("T").short('T').value_parser(["u", "d"]))
        .args([("s", 's'), ("n", 'n'), ("t", 't'), ("D", 'D'), ("h", 'h')].map(flag))
        .arg(Arg::new("interval").value_parser(clap::value_parser!(f64)))
        .arg(Arg::new("count").value_parser(clap::value_parser!(u64)))
}

/// A usage error: its message, usage on stderr, exit 2.
fn usage_error(message: &str) -> i32 {
    cpc::tool::usage_error("cpustat", USAGE, message)
}

/// The options.
#[derive(Debug, Clone)]
struct Options {
    interval: Duration,
    count: Option<u64>,
    rest: Duration,
    timestamp: Option<String>,
    no_title: bool,
    tsc: bool,
}

/// Runs cpustat with `args` (without the program name); the exit status.
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let argv = std::iter::once(OsString::from("cpustat")).chain(args);
    let m = match command().try_get_matches_from(argv) {
        Ok(m) => m,
        Err(e) => return usage_error(&e.render().to_string()),
    };
    if m.get_flag("h") {
        return help();
    }
    if m.get_many::<String>("c").is_none() {
        return usage_error("no events specified (-c)");
    }
    let interval = m.get_one::<f64>("interval").copied().unwrap_or(5.0);
    let count = m.get_one::<u64>("count").copied();
    if !(interval > 0.0 && interval < 4_294_967.0) || count == Some(0) {
        return usage_error("the interval and the count must be positive");
    }
    let specs: Vec<String> =
        m.get_many::<String>("c").map(|c| c.cloned().collect()).unwrap_or_default();
    let nsets = specs.len() as u32;
    let interval = Duration::from_secs_f64(interval);
    let rest = match m.get_one::<f64>("p") {
        Some(&p) if (0.0..4_294_967.0).contains(&p) => {
            Duration::from_secs_f64(p).saturating_sub(interval * nsets)
        }
        Some(_) => return usage_error("the period (-p) must be a number of seconds"),
        None => Duration::ZERO,
    };
    let options = Options {
        interval,
        // As illumos: the count is of samples over all the sets, unless -p makes it a count of
        // cycles through them.
        count: if m.contains_id("p") {
            count.map(|c| c.saturating_mul(u64::from(nsets.max(1))))
        } else {
            count
        },
        rest,
        timestamp: m.get_one::<String>("T").cloned(),
        no_title: m.get_flag("n"),
        tsc: m.get_flag("t"),
    };
    run(&options, &specs, m.get_flag("D"))
}

/// `-h`: usage and the capabilities text on stdout, exit 0.
fn help() -> i32 {
    cpc::tool::help("cpustat", USAGE, NO_ACCESS)
}

/// Standard output, shared by the CPU threads, its first write failure, and the flag that
/// stops the run (set by a signal, a failed CPU or a failed write: the output is lost then).
struct Output {
    failure: Mutex<Option<std::io::Error>>,
    stop: Arc<AtomicBool>,
}

impl Output {
    /// Writes `text` in one write, so lines of CPU threads do not mix; after a failure, nothing.
    fn emit(&self, text: &str) {
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if failure.is_some() {
            return;
        }
        let mut out = std::io::stdout().lock();
        if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            *failure = Some(e);
            self.stop.store(true, Ordering::Release);
        }
    }
}

/// The prefix of a sample or total line: time, cpu, label, and `-t`'s tick.
fn prefix(options: &Options, secs: f64, cpu: u32, label: &str, tick: u64) -> String {
    let mut line = String::new();
    if let Some(kind) = &options.timestamp {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        line.push_str(&if kind == "u" {
            format!("{}\n", now.as_secs())
        } else {
            format!("{}\n", date())
        });
    }
    line.push_str(&format!("{secs:7.3} {cpu:>3} {label:>5} "));
    if options.tsc {
        line.push_str(&columns::tick(tick));
    }
    line
}

/// The local date and time, as date(1) prints it.
fn date() -> String {
    // SAFETY: time(NULL) and localtime_r into a zeroed tm; strftime writes at most the
    // buffer's length.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&now, &mut tm);
        let mut buf = [0u8; 64];
        let n = libc::strftime(
            buf.as_mut_ptr().cast(),
            buf.len(),
            c"%a %b %e %H:%M:%S %Z %Y".as_ptr(),
            &tm,
        );
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

/// One CPU's thread: binds the sets in turn, prints each interval's counts, adds them to
/// `totals`.
fn measure_cpu(
    cpc: &Cpc,
    cpu: u32,
    specs: &[spec::Spec],
    options: &Options,
    start: i64,
    totals: &Mutex<Vec<Buf>>,
    output: &Output,
) -> Result<(), String> {
    let stop = &*output.stop;
    let mut sets = specs
        .iter()
        .map(|s| s.to_set(cpc.platform()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let several = specs.len() > 1;
    let mut next = Instant::now();
    let mut n = 0u64;
    let mut current = 0usize;
    let mut last = Buf::new(specs[0].requests.len());
    let mut bound = false;
    while options.count.is_none_or(|c| n < c) && !stop.load(Ordering::Acquire) {
        if !bound {
            sets[current]
                .bind_cpu(cpc.platform(), cpu as i32, 0)
                .map_err(|e| format!("cpu{cpu}: {e}"))?;
            last = Buf::new(specs[current].requests.len());
            sets[current].sample(&mut last).map_err(|e| format!("cpu{cpu}: {e}"))?;
            bound = true;
        }
        next += options.interval;
        while Instant::now() < next && !stop.load(Ordering::Acquire) {
            std::thread::sleep(
                next.saturating_duration_since(Instant::now()).min(Duration::from_millis(50)),
            );
        }
        let mut now = Buf::new(specs[current].requests.len());
        sets[current].sample(&mut now).map_err(|e| format!("cpu{cpu}: {e}"))?;
        let delta = Buf::sub(&now, &last).unwrap_or_default();
        last = now;
        let secs = (delta.hrtime() - start) as f64 / 1e9;
        let mut line = prefix(options, secs, cpu, "tick", delta.tick());
        line.push_str(&columns::values(delta.values()));
        line.push_str(&columns::line_end(&specs[current].text, several));
        output.emit(&line);
        {
            let mut totals = totals.lock().unwrap_or_else(|e| e.into_inner());
            totals[current] = Buf::add(&totals[current], &delta).unwrap_or_default();
        }
        n += 1;
        if several {
            let _ = sets[current].unbind();
            bound = false;
            current = (current + 1) % specs.len();
            if current == 0 && !options.rest.is_zero() {
                std::thread::sleep(options.rest);
                next += options.rest;
            }
        }
    }
    Ok(())
}

fn run(options: &Options, texts: &[String], debug: bool) -> i32 {
    let cpc = match cpc::tool::open("cpustat", NO_ACCESS) {
        Ok(cpc) => cpc,
        Err(status) => return status,
    };
    let mut specs = Vec::new();
    for text in texts {
        match spec::parse(cpc.platform(), text) {
            Ok(s) => specs.push(s),
            Err(message) => return usage_error(&message),
        }
    }
    if let Err(e) = specs[0].to_set(cpc.platform()) {
        eprintln!("cpustat: {}", if debug { e.to_string() } else { e.detail.unwrap_or_default() });
        return 1;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let output = Output { failure: Mutex::new(None), stop: stop.clone() };
    if !options.no_title {
        let pics: Vec<usize> = specs[0].requests.iter().map(|r| r.pic).collect();
        let mut title = format!("{:>7} {:>3} {:>5} ", "time", "cpu", "event");
        if options.tsc {
            title.push_str(&format!("{:>9} ", "tsc"));
        }
        title.push_str(&columns::pic_headers(&pics));
        title.push('\n');
        output.emit(&title);
    }
    cpc::tool::stop_on_signals(stop.clone());
    let start = cpc::gethrtime();
    let totals = Mutex::new(specs.iter().map(|s| Buf::new(s.requests.len())).collect::<Vec<_>>());
    let ncpu = cpc.platform().ncpu;
    let failures: Vec<String> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..ncpu)
            .map(|cpu| {
                let (cpc, specs, totals, output) = (&cpc, &specs, &totals, &output);
                scope.spawn(move || {
                    let result = measure_cpu(cpc, cpu, specs, options, start, totals, output);
                    if result.is_err() {
                        output.stop.store(true, Ordering::Release);
                    }
                    result
                })
            })
            .collect();
        threads
            .into_iter()
            .filter_map(|t| t.join().unwrap_or_else(|_| Err("a CPU thread panicked".into())).err())
            .collect()
    });
    for failure in &failures {
        eprintln!("cpustat: {failure}");
    }
    let totals = totals.into_inner().unwrap_or_else(|e| e.into_inner());
    let secs = (cpc::gethrtime() - start) as f64 / 1e9;
    for (spec, total) in specs.iter().zip(&totals) {
        let mut line = prefix(options, secs, ncpu, "total", total.tick());
        line.push_str(&columns::values(total.values()));
        line.push_str(&columns::line_end(&spec.text, specs.len() > 1));
        output.emit(&line);
    }
    if let Some(e) = output.failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        eprintln!("cpustat: cannot write the output: {e}");
        return 1;
    }
    if failures.is_empty() { 0 } else { 1 }
}
