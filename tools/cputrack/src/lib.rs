//! cputrack(1), as illumos's (reference §7): runs a command (or follows `-p PID`) and prints
//! the counts of the events of each `-c` spec every `-T` seconds and at its end.
//!
//! ```text
//! cputrack -c spec [-c spec]... [-T secs] [-N count] [-Dhntv] [-o file] command [args]
//! cputrack -c spec [-c spec]... -p pid [-T secs] [-N count] [-Dhntv] [-o file]
//! ```
//!
//! Exit status: 0 success, 1 error, 2 usage. Over libcpc's pctx: counting is per process, with
//! the sets bound to its first LWP (its main thread id; 1 on the simulator, which runs a
//! built-in program to its end with no `tick` lines). `-f` follows the processes the command
//! forks where pctx sees forks (the simulator, and Linux with ptrace): each is measured with its
//! own sets and a `pid` column labels the lines; a `fork` line (`# <child pid>`) marks each
//! fork, with or without `-f` (illumos); on FreeBSD, where pctx does not trace processes, `-f`
//! fails (exit 1). An exec prints the old image's totals (`exec` lines) and an `exec` marker
//! (`# '<command line>'`); then, as illumos's cputrack, the tracking of that process ends and it
//! runs on, released, unless `-e` keeps it counting the new image (the set stays bound; the
//! `exit` lines are the new image's totals). When that process is the command (or `-p`
//! process), cputrack exits 1 once no followed process is left and the command has ended, as
//! illumos's exits 1 (which leaves its forked children's trackers going on by themselves; the
//! command is waited for here because it was launched to die with cputrack). `-e` fails (exit 1) on FreeBSD, where
//! cputrack counts across an exec without noticing it. A set that never counted prints no line.
//! A forked process that cannot be measured (its bind or sample fails: the Linux host's 16
//! counters serve every live process at once) runs on unmeasured, with a note on standard
//! error; the run goes on, as illumos's tracker of one child gives up alone.
//! A failed write of the output is reported at the end, with exit status 1.

use std::ffi::OsString;
use std::io::Write;

use clap::{Arg, ArgAction, Command};
use cpc::tool::{columns, spec, strerror};
use cpc::{Buf, Cpc, Pctx, PctxEvents, Set};

const USAGE: &str = "Usage:\n\tcputrack [-T secs] [-N count] [-Defhnv] [-o file]\n\t\t-c events [command [args] | -p pid]\n\n\t-T secs\t  seconds between samples, default 1\n\t-N count  number of samples, default unlimited\n\t-D\t  enable debug mode\n\t-e\t  follow exec(2), and execve(2)\n\t-f\t  follow fork(2), fork1(2), and vfork(2)\n\t-h\t  print extended usage information\n\t-n\t  suppress titles\n\t-t\t  include virtualized tsc register\n\t-v\t  verbose mode\n\t-o file\t  write cpu statistics to this file\n\t-c events specify processor events to be monitored\n\t-p pid\t  pid of existing process to capture\n\n\tUse cpustat(8) to monitor system-wide statistics.\n";

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
    follow_forks: bool,
    follow_exec: bool,
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
        follow_forks: m.get_flag("f"),
        follow_exec: m.get_flag("e"),
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

/// What is measured of one process: a set per spec, the one bound, the last sample and totals.
struct Measured {
    /// Whether the set is bound (it stays bound across an exec).
    bound: bool,
    sets: Vec<Set>,
    current: usize,
    last: Buf,
    totals: Vec<Buf>,
}

/// The measuring: the specs, the measured processes (the command and, with `-f`, the processes
/// it forks), the output.
struct Tracker {
    cpc: Cpc,
    specs: Vec<spec::Spec>,
    procs: std::collections::BTreeMap<i32, Measured>,
    start: i64,
    options: Options,
    out: Box<dyn Write>,
    /// The first failed write of `out`.
    write_error: Option<std::io::Error>,
    failure: Option<String>,
    /// The process launched or captured.
    root: i32,
    /// Whether its exec (without `-e`) ended its tracking.
    root_released: bool,
}

impl Tracker {
    /// The line's start: time, the pid (with `-f`), the lwp and the label.
    fn head(&self, time: i64, pid: i32, lwp: i32, label: &str) -> String {
        let mut head = format!("{:7.3} ", (time - self.start) as f64 / 1e9);
        if self.options.follow_forks {
            head.push_str(&format!("{pid:6} "));
        }
        head.push_str(&format!("{lwp:3} {label:>10} "));
        head
    }

    /// Writes `text` to the output, remembering the first failure.
    fn emit(&mut self, text: &str) {
        if self.write_error.is_none() {
            if let Err(e) = self.out.write_all(text.as_bytes()) {
                self.write_error = Some(e);
            }
        }
    }

    fn line(&mut self, pid: i32, lwp: i32, label: &str, buf: &Buf, spec: usize) {
        let set = &self.specs[spec];
        let mut line = self.head(buf.hrtime(), pid, lwp, label);
        if self.options.tsc {
            line.push_str(&columns::tick(buf.tick()));
        }
        line.push_str(&columns::values(buf.values()));
        line.push_str(&columns::line_end(&set.text, self.specs.len() > 1));
        self.emit(&line);
    }

    /// A marker line (`fork`): two empty columns, then `# what`.
    fn marker(&mut self, pid: i32, lwp: i32, label: &str, what: &str) {
        let mut line = self.head(cpc::gethrtime(), pid, lwp, label);
        if self.options.tsc {
            line.push_str(&format!("{:>9} ", ""));
        }
        line.push_str(&format!("{:>9} {:>9} # {what}\n", "", ""));
        self.emit(&line);
    }

    fn title(&mut self) {
        let pics: Vec<usize> = self.specs[0].requests.iter().map(|r| r.pic).collect();
        let mut title = format!("{:>7} ", "time");
        if self.options.follow_forks {
            title.push_str(&format!("{:>6} ", "pid"));
        }
        title.push_str(&format!("{:>3} {:>10} ", "lwp", "event"));
        if self.options.tsc {
            title.push_str(&format!("{:>9} ", "tsc"));
        }
        title.push_str(&columns::pic_headers(&pics));
        title.push('\n');
        self.emit(&title);
    }

    /// A failure measuring process `pid`: the command's ends the run (exit 1); a followed
    /// process's ends only its own tracking, as in illumos's tracker per process: it runs on
    /// unmeasured, and its counters go back.
    fn fail(&mut self, pid: i32, what: String) -> Result<(), cpc::pctx::CallbackFailed> {
        if pid == self.root {
            self.failure = Some(what);
        } else {
            eprintln!("cputrack: {what}; process {pid} runs on unmeasured");
            if let Some(mut m) = self.procs.remove(&pid) {
                for set in &mut m.sets {
                    let _ = set.unbind();
                }
            }
        }
        Err(cpc::pctx::CallbackFailed)
    }

    /// The sets of a newly measured process `pid`.
    fn measure(&mut self, pid: i32) -> Result<(), cpc::pctx::CallbackFailed> {
        if self.procs.contains_key(&pid) {
            return Ok(());
        }
        let mut sets = Vec::new();
        for spec in &self.specs {
            match spec.to_set(self.cpc.platform()) {
                Ok(set) => sets.push(set),
                Err(e) => {
                    let what = format!("cannot measure process {pid}: {e}");
                    return self.fail(pid, what);
                }
            }
        }
        let totals = self.specs.iter().map(|s| Buf::new(s.requests.len())).collect();
        let last = Buf::new(self.specs[0].requests.len());
        self.procs.insert(pid, Measured { bound: false, sets, current: 0, last, totals });
        Ok(())
    }

    fn bind(&mut self, pid: i32, lwp: i32) -> Result<(), cpc::pctx::CallbackFailed> {
        self.measure(pid)?;
        let platform = self.cpc.platform().clone();
        let Some(m) = self.procs.get_mut(&pid) else { return Ok(()) };
        let i = m.current;
        if let Err(e) = m.sets[i].bind_process(&platform, pid, lwp, 0) {
            return self.fail(pid, format!("cannot bind lwp{lwp}: {e}"));
        }
        m.bound = true;
        m.last = Buf::new(self.specs[i].requests.len());
        if let Err(e) = m.sets[i].sample(&mut m.last) {
            return self.fail(pid, format!("cannot sample lwp{lwp}: {e}"));
        }
        Ok(())
    }

    /// A line per spec with process `pid`'s totals, labelled `label`; none for a spec that
    /// never counted (illumos skips a set whose time is 0: it would print a negative time).
    fn totals_lines(&mut self, pid: i32, lwp: i32, label: &str) {
        let totals = match self.procs.get(&pid) {
            Some(m) => m.totals.clone(),
            None => return,
        };
        for (i, total) in totals.iter().enumerate() {
            if total.hrtime() != 0 {
                self.line(pid, lwp, label, total, i);
            }
        }
    }

    /// Samples the bound set; prints and accumulates the delta since the last sample.
    fn sample(&mut self, pid: i32, lwp: i32, label: &str) -> Result<(), cpc::pctx::CallbackFailed> {
        let Some(m) = self.procs.get_mut(&pid) else { return Ok(()) };
        let i = m.current;
        let mut now = Buf::new(self.specs[i].requests.len());
        if let Err(e) = m.sets[i].sample(&mut now) {
            return self.fail(pid, format!("cannot sample lwp{lwp}: {e}"));
        }
        let delta = Buf::sub(&now, &m.last).unwrap_or_default();
        m.totals[i] = Buf::add(&m.totals[i], &delta).unwrap_or_default();
        m.last = now;
        if !label.is_empty() {
            self.line(pid, lwp, label, &delta, i);
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
        if !self.procs.get(&pid).is_some_and(|m| m.bound) {
            self.bind(pid, lwp)?;
        }
        if self.options.verbose {
            // Nothing counted yet, at the time of the bind.
            if let Some(m) = self.procs.get(&pid) {
                let (nothing, i) = (Buf::sub(&m.last, &m.last).unwrap_or_default(), m.current);
                self.line(pid, lwp, "init_lwp", &nothing, i);
            }
        }
        Ok(())
    }

    fn tick(&mut self, pid: i32, lwp: i32) -> Result<(), cpc::pctx::CallbackFailed> {
        self.sample(pid, lwp, "tick")?;
        if self.specs.len() > 1 {
            if let Some(m) = self.procs.get_mut(&pid) {
                m.current = (m.current + 1) % self.specs.len();
            }
            self.bind(pid, lwp)?;
        }
        Ok(())
    }

    fn fini_lwp(&mut self, pid: i32, lwp: i32) -> Result<(), cpc::pctx::CallbackFailed> {
        if lwp != cpc::pctx::lwp_id(pid) {
            return Ok(());
        }
        self.sample(pid, lwp, if self.options.verbose { "fini_lwp" } else { "" })
    }

    fn fork(&mut self, pid: i32, lwp: i32, child: i32) {
        // Printed with or without -f, as illumos's cputrack does.
        self.marker(pid, lwp, "fork", &child.to_string());
    }

    fn exec(&mut self, pid: i32, lwp: i32, command: &str) -> Result<(), cpc::pctx::CallbackFailed> {
        // The old image's totals (its fini_lwp sampled them), then the exec marker.
        self.totals_lines(pid, lwp, "exec");
        self.marker(pid, lwp, "exec", &format!("'{command}'"));
        if self.options.follow_exec {
            // The set stays bound: the new image counts from here.
            let fresh: Vec<Buf> = self.specs.iter().map(|s| Buf::new(s.requests.len())).collect();
            if let Some(m) = self.procs.get_mut(&pid) {
                m.totals = fresh;
            }
            Ok(())
        } else {
            // As illumos's cputrack: without -e, the process's tracking ends at the exec, and
            // pctx lets it run on. Its counters go back to the pool.
            if let Some(mut m) = self.procs.remove(&pid) {
                for set in &mut m.sets {
                    let _ = set.unbind();
                }
            }
            self.root_released |= pid == self.root;
            Err(cpc::pctx::CallbackFailed)
        }
    }

    fn exit(&mut self, pid: i32, lwp: i32, _status: i32) {
        self.totals_lines(pid, lwp, "exit");
        // Its counters go back to the pool: a command that forks many processes in turn, each
        // followed (-f), needs only as many at once as run at once.
        if let Some(mut m) = self.procs.remove(&pid) {
            for set in &mut m.sets {
                let _ = set.unbind();
            }
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
    for text in &options.specs {
        let parsed = match spec::parse(cpc.platform(), text) {
            Ok(s) => s,
            Err(message) => return usage_error(&message),
        };
        match parsed.to_set(cpc.platform()) {
            Ok(_) => {}
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
        Ok(_) if options.follow_forks && !cpc::pctx::can_follow_forks() => {
            eprintln!(
                "cputrack: cannot follow forks (-f) on this host: it does not trace processes"
            );
            return 1;
        }
        Ok(_) if options.follow_exec && !cpc::pctx::can_follow_forks() => {
            eprintln!(
                "cputrack: cannot follow execs (-e) on this host: it does not trace processes"
            );
            return 1;
        }
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
    cpc::tool::stop_on_signals(process.terminator());
    process.follow_forks(options.follow_forks);
    let mut tracker = Tracker {
        cpc,
        specs,
        procs: std::collections::BTreeMap::new(),
        start: cpc::gethrtime(),
        options: options.clone(),
        out,
        write_error: None,
        failure: None,
        root: process.pid(),
        root_released: false,
    };
    if !options.no_title {
        tracker.title();
    }
    let result = process.run(options.interval_ms, options.samples, &mut tracker);
    // A command that an exec let go runs on to its end; its status is not cputrack's (illumos
    // exits 1 then), but it is waited for: it would die with cputrack.
    let _ = process.wait_released();
    if tracker.write_error.is_none() {
        if let Err(e) = tracker.out.flush() {
            tracker.write_error = Some(e);
        }
    }
    let mut status = match (result, tracker.failure) {
        (Ok(()), None) => 0,
        (_, Some(failure)) => {
            eprintln!("cputrack: {failure}");
            1
        }
        // The command's exec ended the tracking (no -e): illumos's cputrack exits 1, silently.
        (Err(_), None) if tracker.root_released => 1,
        (Err(e), None) => {
            eprintln!("cputrack: {e}");
            1
        }
    };
    if let Some(e) = tracker.write_error {
        eprintln!("cputrack: cannot write the output: {e}");
        status = 1;
    }
    status
}
