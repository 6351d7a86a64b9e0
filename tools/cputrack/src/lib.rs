//! cputrack(1), as illumos's (reference §7): runs a command (or follows `-p PID`) and prints
//! the counts of the events of each `-c` spec every `-T` seconds and at its end.
//!
//! ```text
//! cputrack -c spec [-c spec]... [-T secs] [-N count] [-Dhntv] [-o file] command [args]
//! cputrack -c spec [-c spec]... -p pid [-T secs] [-N count] [-Dhntv] [-o file]
//! ```
//!
//! Exit status: 0 success, 1 error, 2 usage. Over libcpc's pctx: the process is one LWP (its
//! main thread id; 1 on the simulator, which runs a built-in program to its end with no
//! `tick` lines). Following forks (`-f`) and execs (`-e`) needs process tracing, which this
//! cputrack does not do: those options are refused.

use std::ffi::OsString;
use std::io::Write;

use clap::{Arg, ArgAction, Command};
use cpc::tool::{columns, spec, strerror};
use cpc::{Buf, Cpc, Pctx, PctxEvents, Set};

const USAGE: &str = "Usage:\n\tcputrack [-T secs] [-N count] [-Defhnv] [-o file]\n\t\t-c events [command [args] | -p pid]\n\n\t-T secs\t  seconds between samples, default 1\n\t-N count  number of samples, default unlimited\n\t-D\t  enable debug mode\n\t-e\t  follow exec(2), and execve(2)\n\t-f\t  follow fork(2), fork1(2), and vfork(2)\n\t-h\t  print extended usage information\n\t-n\t  suppress titles\n\t-t\t  include virtualized %tick register\n\t-v\t  verbose mode\n\t-o file\t  write cpu statistics to this file\n\t-c events specify processor events to be monitored\n\t-p pid\t  pid of existing process to capture\n\n\tUse cpustat(8) to monitor system-wide statistics.\n";

/// What the tool says when it cannot open libcpc.
const NO_ACCESS: &str = "cannot access performance counter library";

fn command() -> Command {
    let flag = |(id, c): (&'static str, char)| Arg::new(id).short(c).action(ArgAction::SetTrue);
    Command::new("cputrack")
        .disable_help_flag(true)
        .disable_version_flag(true)
        .override_usage(USAGE)
        .arg(Arg::new("c").short('c').action(ArgAction::Append))
        .arg(Arg::new("T").short('T').value_parser(clap::value_parser!(f64)))
        .arg(Arg::new("N").short('N').value_parser(clap::value_parser!(u32)))
        .arg(Arg::new("o").short('o').value_parser(clap::value_parser!(OsString)))
        .arg(Arg::new("p").short('p').value_parser(clap::value_parser!(i32)))
        .args([("D", 'D'), ("e", 'e'), ("f", 'f'), ("n", 'n'), ("t", 't'), ("v", 'v')].map(flag))
        .arg(Arg::new("h").short('h').action(ArgAction::SetTrue))
        .arg(
            Arg::new("command")
                .num_args(1..)
                .trailing_var_arg(true)
                .value_parser(clap::value_parser!(OsString)),
        )
}

/// The options.
#[derive(Debug, Clone)]
struct Options {
    specs: Vec<String>,
    interval_ms: u32,
    samples: u32,
    no_title: bool,
    tsc: bool,
    verbose: bool,
}

/// A usage error: its message, usage on stderr, exit 2.
fn usage_error(message: &str) -> i32 {
    cpc::tool::usage_error("cputrack", USAGE, message)
}

/// Runs cputrack with `args` (without the program name); the exit status.
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let argv = std::iter::once(OsString::from("cputrack")).chain(args);
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
    if m.get_flag("f") || m.get_flag("e") {
        return usage_error(
            "following forks (-f) and execs (-e) is not supported by this cputrack",
        );
    }
    let command: Vec<OsString> =
        m.get_many::<OsString>("command").map(|c| c.cloned().collect()).unwrap_or_default();
    let pid = m.get_one::<i32>("p").copied();
    if command.is_empty() == pid.is_none() {
        return usage_error("give either a command or -p pid");
    }
    let secs = m.get_one::<f64>("T").copied().unwrap_or(1.0);
    if !(0.0..=4_294_967.0).contains(&secs) {
        return usage_error("the interval (-T) must be a number of seconds, 0 or more");
    }
    let options = Options {
        specs: m.get_many::<String>("c").map(|c| c.cloned().collect()).unwrap_or_default(),
        interval_ms: (secs * 1000.0).round() as u32,
        samples: m.get_one::<u32>("N").copied().unwrap_or(0),
        no_title: m.get_flag("n"),
        tsc: m.get_flag("t"),
        verbose: m.get_flag("v"),
    };
    let out: Box<dyn Write> = match m.get_one::<OsString>("o") {
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Box::new(f),
            Err(e) => {
                eprintln!("cputrack: cannot open {}: {e}", path.to_string_lossy());
                return 1;
            }
        },
        None => Box::new(std::io::stdout()),
    };
    run(&options, &command, pid, out, m.get_flag("D"))
}

/// `-h`: usage and the capabilities text on stdout, exit 0.
fn help() -> i32 {
    cpc::tool::help("cputrack", USAGE, NO_ACCESS)
}

/// The measuring: the sets of the specs, the process, the output.
struct Tracker {
    cpc: Cpc,
    specs: Vec<spec::Spec>,
    sets: Vec<Set>,
    current: usize,
    last: Buf,
    totals: Vec<Buf>,
    start: i64,
    options: Options,
    out: Box<dyn Write>,
    failure: Option<String>,
}

impl Tracker {
    fn line(&mut self, lwp: i32, label: &str, buf: &Buf, spec: usize) {
        let set = &self.specs[spec];
        let mut line =
            format!("{:7.3} {:>3} {:>10} ", (buf.hrtime() - self.start) as f64 / 1e9, lwp, label);
        if self.options.tsc {
            line.push_str(&columns::tick(buf.tick()));
        }
        line.push_str(&columns::values(buf.values()));
        line.push_str(&columns::line_end(&set.text, self.specs.len() > 1));
        let _ = self.out.write_all(line.as_bytes());
    }

    fn title(&mut self) {
        let pics: Vec<usize> = self.specs[0].requests.iter().map(|r| r.pic).collect();
        let mut title = format!("{:>7} {:>3} {:>10} ", "time", "lwp", "event");
        if self.options.tsc {
            title.push_str(&format!("{:>9} ", "tsc"));
        }
        title.push_str(&columns::pic_headers(&pics));
        title.push('\n');
        let _ = self.out.write_all(title.as_bytes());
    }

    fn fail(&mut self, what: String) -> Result<(), cpc::pctx::CallbackFailed> {
        self.failure = Some(what);
        Err(cpc::pctx::CallbackFailed)
    }

    fn bind(&mut self, pid: i32, lwp: i32) -> Result<(), cpc::pctx::CallbackFailed> {
        let i = self.current;
        if let Err(e) = self.sets[i].bind_process(self.cpc.platform(), pid, lwp, 0) {
            return self.fail(format!("cannot bind lwp{lwp}: {e}"));
        }
        self.last = Buf::new(self.specs[i].requests.len());
        if let Err(e) = self.sets[i].sample(&mut self.last) {
            return self.fail(format!("cannot sample lwp{lwp}: {e}"));
        }
        Ok(())
    }

    /// Samples the bound set; prints and accumulates the delta since the last sample.
    fn sample(&mut self, lwp: i32, label: &str) -> Result<(), cpc::pctx::CallbackFailed> {
        let i = self.current;
        let mut now = Buf::new(self.specs[i].requests.len());
        if let Err(e) = self.sets[i].sample(&mut now) {
            return self.fail(format!("cannot sample lwp{lwp}: {e}"));
        }
        let delta = Buf::sub(&now, &self.last).unwrap_or_default();
        self.totals[i] = Buf::add(&self.totals[i], &delta).unwrap_or_default();
        self.last = now;
        if !label.is_empty() {
            self.line(lwp, label, &delta, i);
        }
        Ok(())
    }
}

impl PctxEvents for Tracker {
    fn init_lwp(&mut self, pid: i32, lwp: i32) -> Result<(), cpc::pctx::CallbackFailed> {
        if lwp != cpc::pctx::lwp_id(pid) {
            // Counting is per process: the set on the first LWP counts them all.
            return Ok(());
        }
        self.bind(pid, lwp)?;
        if self.options.verbose {
            // Nothing counted yet, at the time of the bind.
            let nothing = Buf::sub(&self.last, &self.last).unwrap_or_default();
            self.line(lwp, "init_lwp", &nothing, self.current);
        }
        Ok(())
    }

    fn tick(&mut self, pid: i32, lwp: i32) -> Result<(), cpc::pctx::CallbackFailed> {
        self.sample(lwp, "tick")?;
        if self.specs.len() > 1 {
            self.current = (self.current + 1) % self.specs.len();
            self.bind(pid, lwp)?;
        }
        Ok(())
    }

    fn fini_lwp(&mut self, pid: i32, lwp: i32) -> Result<(), cpc::pctx::CallbackFailed> {
        if lwp != cpc::pctx::lwp_id(pid) {
            return Ok(());
        }
        self.sample(lwp, if self.options.verbose { "fini_lwp" } else { "" })
    }

    fn exit(&mut self, _pid: i32, lwp: i32, _status: i32) {
        for i in 0..self.specs.len() {
            let total = self.totals[i].clone();
            self.line(lwp, "exit", &total, i);
        }
    }
}

fn run(
    options: &Options,
    command: &[OsString],
    pid: Option<i32>,
    out: Box<dyn Write>,
    debug: bool,
) -> i32 {
    let cpc = match cpc::tool::open("cputrack", NO_ACCESS) {
        Ok(cpc) => cpc,
        Err(status) => return status,
    };
    let mut specs = Vec::new();
    let mut sets = Vec::new();
    for text in &options.specs {
        let parsed = match spec::parse(cpc.platform(), text) {
            Ok(s) => s,
            Err(message) => return usage_error(&message),
        };
        match parsed.to_set(cpc.platform()) {
            Ok(set) => sets.push(set),
            Err(e) => {
                eprintln!(
                    "cputrack: {}",
                    if debug { e.to_string() } else { e.detail.unwrap_or_default() }
                );
                return 1;
            }
        }
        specs.push(parsed);
    }
    let process = match pid {
        Some(pid) => Pctx::capture(pid),
        None => Pctx::create(command),
    };
    let mut process = match process {
        Ok(p) => p,
        Err(e) => {
            eprintln!(
                "cputrack: cannot {} - {}",
                if pid.is_some() { "capture process" } else { "run command" },
                e.detail.clone().unwrap_or_else(|| strerror(e.errno))
            );
            return 1;
        }
    };
    let stop = process.terminator();
    cpc::tool::stop_on_signals(stop);
    let totals = specs.iter().map(|s| Buf::new(s.requests.len())).collect();
    let mut tracker = Tracker {
        cpc,
        last: Buf::new(specs[0].requests.len()),
        specs,
        sets,
        current: 0,
        totals,
        start: cpc::gethrtime(),
        options: options.clone(),
        out,
        failure: None,
    };
    if !options.no_title {
        tracker.title();
    }
    let result = process.run(options.interval_ms, options.samples, &mut tracker);
    let _ = tracker.out.flush();
    match (result, tracker.failure) {
        (Ok(()), None) => 0,
        (_, Some(failure)) => {
            eprintln!("cputrack: {failure}");
            1
        }
        (Err(e), None) => {
            eprintln!("cputrack: {e}");
            1
        }
    }
}
