//! The workspace's end-to-end tests (`tests/tests/`) and what they share: running pmcstat as a
//! separate process on a host (and signalling it), building the C test programs of
//! `programs/`, building and running the C clients of `c/` against the built `libpmc` and
//! `libcpc` ([`c_clients`]), crafting logs with the pmclog encoder and reading them back, and parsing
//! pmcstat's outputs (the `-G` call graph, folded stacks, the `--top` flat profile, `--json`)
//! back into values.
//!
//! The parsers are strict: a line that does not have the documented layout fails the test.

pub mod c_clients;

/// Shared with pmcprof's and pmcstat's unit tests, which build programs with several linkers.
pub use pmcprof_fixtures::linker_installed;

use pmc::events::pmu_table::PmuEventNames;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The host pmcstat runs on (`PMC_HOST`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// `perf_event_open(2)`: software events only on this VM.
    Linux,
    /// The simulated Skylake machine: exact counts.
    Sim,
}

impl Host {
    fn name(self) -> &'static str {
        match self {
            Host::Linux => "linux",
            Host::Sim => "sim",
        }
    }
}

/// Cargo's output directory of the running test (`target/debug`): the test binary is in its
/// `deps/`.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the test binary is in a directory");
    deps.parent().unwrap_or(deps).to_path_buf()
}

/// The pmcstat executable the tests run: this package's `pmcstat-e2e` (pmcstat's `main`),
/// which Cargo builds before it runs this package's tests.
pub fn pmcstat_binary() -> PathBuf {
    target_dir().join("pmcstat-e2e")
}

/// A finished pmcstat run.
#[derive(Debug, Clone)]
pub struct Run {
    /// The arguments, for messages.
    pub args: Vec<String>,
    /// The exit status.
    pub status: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// Asserts that pmcstat exited with `status`, showing everything it printed otherwise.
    #[track_caller]
    pub fn assert_status(&self, status: i32) -> &Self {
        assert_eq!(self.status, status, "pmcstat {:?}\n{}", self.args, self.describe());
        self.assert_no_panic()
    }

    /// Asserts that nothing on standard error looks like a panic.
    #[track_caller]
    pub fn assert_no_panic(&self) -> &Self {
        for word in ["panicked", "RUST_BACKTRACE", "stack backtrace"] {
            assert!(
                !self.stderr.contains(word),
                "pmcstat {:?} printed {word:?}\n{}",
                self.args,
                self.describe()
            );
        }
        self
    }

    /// Standard output and standard error, for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "status {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Runs pmcstat with `args` on `host`.
pub fn pmcstat(host: Host, args: &[&str]) -> Run {
    pmcstat_env(host, &[], args)
}

/// Runs pmcstat with `args` on `host` with extra environment variables. The simulator's
/// `PMC_SIM_*` variables are cleared first (the defaults: 2 CPUs, Skylake, seed 1), and
/// `RUST_BACKTRACE=1` makes any panic visible on standard error.
pub fn pmcstat_env(host: Host, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut command = Command::new(pmcstat_binary());
    command.args(args).env("PMC_HOST", host.name()).env("RUST_BACKTRACE", "1");
    for var in ["PMC_SIM_CPUS", "PMC_SIM_MODEL", "PMC_SIM_SEED"] {
        command.env_remove(var);
    }
    command.envs(env.iter().copied());
    let output = command.output().expect("cannot run the pmcstat binary");
    let run = Run {
        args: args.iter().map(|a| a.to_string()).collect(),
        status: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(
        output.status.code().is_some(),
        "pmcstat {args:?} was killed by a signal: {:?}\n{}",
        output.status,
        run.describe()
    );
    run
}

/// A pmcstat started in the background, to be signalled while it measures.
pub struct Running {
    child: std::process::Child,
    args: Vec<String>,
}

/// Starts pmcstat with `args` on `host` without waiting for it (standard output and error are
/// collected for [`Running::finish`]).
pub fn start_pmcstat(host: Host, args: &[&str]) -> Running {
    let child = Command::new(pmcstat_binary())
        .args(args)
        .env("PMC_HOST", host.name())
        .env("RUST_BACKTRACE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("cannot run the pmcstat binary");
    Running { child, args: args.iter().map(|a| a.to_string()).collect() }
}

impl Running {
    /// pmcstat's pid.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits (up to a minute) until pmcstat catches SIGINT, SIGTERM and SIGHUP, as its
    /// `/proc/PID/status` shows: from then on a signal reaches its handler.
    pub fn wait_until_catching_signals(&self) {
        let wanted: u64 =
            [libc::SIGINT, libc::SIGTERM, libc::SIGHUP].iter().map(|s| 1u64 << (s - 1)).sum();
        let status = format!("/proc/{}/status", self.pid());
        wait_for(&format!("pmcstat {:?} to catch signals", self.args), || {
            std::fs::read_to_string(&status).is_ok_and(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("SigCgt:"))
                    .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
                    .is_some_and(|mask| mask & wanted == wanted)
            })
        });
    }

    /// Sends `signal` to pmcstat.
    pub fn signal(&self, signal: i32) {
        send_signal(self.pid(), signal);
    }

    /// Waits for pmcstat to end, at most `limit`: a pmcstat still running then hangs, and is
    /// killed and the test fails.
    #[track_caller]
    pub fn finish_within(self, limit: std::time::Duration) -> Run {
        let deadline = std::time::Instant::now() + limit;
        let pid = self.pid();
        let mut child = self.child;
        while child.try_wait().expect("waiting for pmcstat").is_none() {
            if std::time::Instant::now() > deadline {
                send_signal(pid, libc::SIGKILL);
                panic!("pmcstat {:?} hangs: still running after {limit:?}", self.args);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let (run, killed_by) = Running { child, args: self.args }.finish();
        assert_eq!(killed_by, None, "pmcstat {:?} was killed\n{}", run.args, run.describe());
        run
    }

    /// Waits for pmcstat to end: the run (status -1 if a signal killed it) and the signal that
    /// killed it, if one did.
    pub fn finish(self) -> (Run, Option<i32>) {
        use std::os::unix::process::ExitStatusExt;
        let output = self.child.wait_with_output().expect("waiting for pmcstat");
        let run = Run {
            args: self.args,
            status: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        };
        (run, output.status.signal())
    }
}

/// Sends `signal` to process `pid`.
pub fn send_signal(pid: i32, signal: i32) {
    // SAFETY: kill(2) takes no pointers.
    let r = unsafe { libc::kill(pid, signal) };
    assert_eq!(r, 0, "kill({pid}, {signal}): {}", std::io::Error::last_os_error());
}

/// Waits (up to a minute, polling every 10 ms) until `done` holds; fails the test naming
/// `what` otherwise.
#[track_caller]
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Whether process `pid` is gone or a zombie (it ran its last instruction).
pub fn process_ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) STATE ...`; comm may hold spaces and parentheses.
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        }
        Err(_) => true,
    }
}

/// Asserts that `run` failed cleanly: a non-zero status that is not a panic's (101), exactly one
/// line on standard error starting with `pmcstat: `, and no panic text. Returns the line without
/// its newline.
#[track_caller]
pub fn one_line_error(run: &Run) -> &str {
    run.assert_no_panic();
    assert!(run.status != 0 && run.status != 101, "pmcstat {:?}\n{}", run.args, run.describe());
    let line = run.stderr.strip_suffix('\n').unwrap_or_else(|| {
        panic!("pmcstat {:?}: stderr does not end with a newline\n{}", run.args, run.describe())
    });
    assert!(
        !line.contains('\n') && line.starts_with("pmcstat: "),
        "pmcstat {:?}: stderr is not one `pmcstat: ...` line\n{}",
        run.args,
        run.describe()
    );
    line
}

/// A path as an argument.
pub fn arg(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

/// The `pmcstat` binary run as user and group 65534 (nobody) with `PMC_HOST=linux`, through
/// util-linux's setpriv: `None`, with a note, unless the test runs as root and setpriv exists.
pub fn pmcstat_as_nobody() -> Option<Command> {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
    });
    let setpriv = Path::new("/usr/bin/setpriv");
    if !root || !setpriv.exists() {
        eprintln!("skipped: needs root and /usr/bin/setpriv");
        return None;
    }
    let mut command = Command::new(setpriv);
    command
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(pmcstat_binary())
        .env("PMC_HOST", "linux");
    Some(command)
}

/// A sampling run on Linux of the `hot` program: `pmcstat -P cpu-clock -O LOG -- hot 400000000
/// [exit_status]`; the run, the log it wrote and the program.
pub fn sample_hot(exit_status: Option<&str>) -> (Run, Vec<u8>, PathBuf) {
    let program = c_program("hot");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cpu-clock.log");
    let mut args = vec!["-P", "cpu-clock", "-O", arg(&log), "--", arg(&program), "400000000"];
    args.extend(exit_status);
    let run = pmcstat(Host::Linux, &args);
    let bytes = std::fs::read(&log).unwrap_or_default();
    (run, bytes, program)
}

/// Writes the log `bytes` as `cpu-clock.log` in `dir`; returns its path.
pub fn write_log(dir: &Path, bytes: &[u8]) -> PathBuf {
    let path = dir.join("cpu-clock.log");
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The C program `programs/NAME.c` of this package, built once per test process with
/// `cc -O1 -fno-omit-frame-pointer` into Cargo's temporary directory for tests. The path is
/// canonical, as the kernel reports it in the log.
pub fn c_program(name: &str) -> PathBuf {
    c_program_with(name, name, &["-O1", "-fno-omit-frame-pointer"])
}

/// The C program `programs/NAME.c` built once per test process with `flags` as `output` (see
/// [`c_program`]).
pub fn c_program_with(name: &str, output: &str, flags: &[&str]) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(output) {
        return path.clone();
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("programs/{name}.c"));
    let dir = target_dir().join("pmcstat-e2e-programs");
    std::fs::create_dir_all(&dir).unwrap();
    // Built under a name of this process and renamed into place, so that test binaries running
    // at the same time never see a half-written program.
    let scratch = dir.join(format!("{output}.{}", std::process::id()));
    let compiled = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&scratch)
        .arg(&source)
        .output()
        .expect("the end-to-end tests need a C compiler (cc)");
    assert!(
        compiled.status.success(),
        "cc {}: {}",
        source.display(),
        String::from_utf8_lossy(&compiled.stderr)
    );
    let path = dir.join(output);
    std::fs::rename(&scratch, &path).unwrap();
    let path = path.canonicalize().unwrap();
    built.insert(output.to_owned(), path.clone());
    path
}

/// The Rust program `programs/NAME.rs` of this package built once per test process as a
/// release build with line tables (`rustc -O -g`, rustc's default linker: rust-lld on x86_64
/// Linux), as [`c_program`] builds C.
pub fn rust_program(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(name) {
        return path.clone();
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("programs/{name}.rs"));
    let dir = target_dir().join("pmcstat-e2e-programs");
    std::fs::create_dir_all(&dir).unwrap();
    let scratch = dir.join(format!("{name}.{}", std::process::id()));
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let compiled = Command::new(rustc)
        .args(["-O", "-g", "--edition", "2021", "-o"])
        .arg(&scratch)
        .arg(&source)
        .output()
        .expect("run rustc");
    assert!(
        compiled.status.success(),
        "rustc {}: {}",
        source.display(),
        String::from_utf8_lossy(&compiled.stderr)
    );
    let path = dir.join(name);
    std::fs::rename(&scratch, &path).unwrap();
    let path = path.canonicalize().unwrap();
    built.insert(name.to_owned(), path.clone());
    path
}

// ---------------------------------------------------------------------------------------------
// Logs, read with the pmclog crate (independently of pmcstat's analysis).

/// The PMCs a log allocates, in order: (pmcid, name as `pmcstat -R` prints it, rate).
pub fn allocations(log: &[u8]) -> Vec<(u32, String, u64)> {
    let mut text = Vec::new();
    pmclog::dump_bytes_with_names(log, PmuEventNames, &mut text).unwrap();
    let names: HashMap<u32, String> = String::from_utf8(text)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("allocate"))
        .map(|l| {
            // `allocate  0xID "NAME" 0xFLAGS` (and `allocatedyn`).
            let (id, rest) = l.split_once(' ').unwrap().1.trim_start().split_once(' ').unwrap();
            let id = u32::from_str_radix(id.trim_start_matches("0x"), 16).unwrap();
            let name = rest[1..].rsplit_once("\" ").unwrap().0.to_owned();
            (id, name)
        })
        .collect();
    let mut out = Vec::new();
    for entry in pmclog::Records::new(log) {
        let (pmcid, rate) = match entry.unwrap().record {
            pmclog::Record::PmcAllocate(a) => (a.pmcid, a.rate),
            pmclog::Record::PmcAllocateDyn(a) => (a.pmcid, a.rate),
            _ => continue,
        };
        out.push((pmcid, names[&pmcid].clone(), rate));
    }
    out
}

/// Samples (CALLCHAIN records with at least one program counter) per PMC id.
pub fn samples_per_pmc(log: &[u8]) -> HashMap<u32, u64> {
    let mut counts = HashMap::new();
    for entry in pmclog::Records::new(log) {
        if let pmclog::Record::Callchain(cc) = entry.unwrap().record {
            if !cc.pcs.is_empty() {
                *counts.entry(cc.pmcid).or_default() += 1;
            }
        }
    }
    counts
}

/// Every file under `dir` (recursively), relative to it, sorted.
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    files.sort();
    files
}

/// FreeBSD's counting header and values for 48-bit counters (the simulated Skylake's and Zen's):
/// each column as wide as its title or 15 digits (floor(48 / log2 10) + 1), whichever is more;
/// titles right-aligned after `# `, values right-aligned with the first column 2 wider.
pub fn counting_output(columns: &[(&str, u64)]) -> String {
    let mut header = String::from("# ");
    let mut values = String::new();
    for (i, (name, value)) in columns.iter().enumerate() {
        let title = format!("p/{name}");
        let width = title.len().max(15);
        header.push_str(&format!("{title:>width$} "));
        let width = if i == 0 { width + 2 } else { width };
        values.push_str(&format!("{value:>width$} "));
    }
    format!("{header}\n{values}\n")
}

/// Encodes `records` as a log (TSC 0), as a crafted log for pmcstat to read.
pub fn encode_log(records: &[pmclog::Record<'_>]) -> Vec<u8> {
    let mut log = Vec::new();
    let mut buf = vec![0u8; pmclog::MAX_RECORD_LEN];
    for record in records {
        let len = pmclog::encode(record, 0, &mut buf).expect("the record encodes");
        log.extend_from_slice(&buf[..len]);
    }
    log
}

/// The byte offset of every record of a log.
pub fn record_offsets(log: &[u8]) -> Vec<u64> {
    pmclog::Records::new(log).map(|e| e.unwrap().offset).collect()
}

// ---------------------------------------------------------------------------------------------
// `-G`: FreeBSD's call graph text.

/// One line of a call-graph tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallgraphLine {
    /// Nesting: 0 for the sampled function, 1 for its callers, …
    pub depth: usize,
    /// The percentage as printed (`90.00`, `100.0`).
    pub percent: String,
    /// Samples.
    pub count: u64,
    /// The function, or its address.
    pub name: String,
    /// ` @ IMAGE` when printed.
    pub image: Option<String>,
}

/// One PMC of a call graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallgraphPmc {
    /// The name of `@ NAME [N samples]`.
    pub name: String,
    /// The N of `@ NAME [N samples]`.
    pub samples: u64,
    /// The trees, each line by line (the first line is the sampled function).
    pub trees: Vec<Vec<CallgraphLine>>,
}

/// FreeBSD's layout of a call-graph line (`pmcstat_cgnode_print`).
fn callgraph_line_text(l: &CallgraphLine) -> String {
    let count = format!(" [{}] ", l.count);
    let pad = 12usize.saturating_sub(count.len());
    let image = l.image.as_ref().map(|i| format!(" @ {i}")).unwrap_or_default();
    let indent = " ".repeat(l.depth);
    format!("{indent}{}% {count}{}{indent}{}{image}", l.percent, " ".repeat(pad), l.name)
}

/// Parses `-G` output, checking that every line has FreeBSD's layout and that every percentage
/// is the node's share of its parent (of the PMC's samples at the top).
#[track_caller]
pub fn parse_callgraph(text: &str) -> Vec<CallgraphPmc> {
    let mut pmcs: Vec<CallgraphPmc> = Vec::new();
    let mut lines = text.split_inclusive('\n').map(|l| {
        l.strip_suffix('\n').unwrap_or_else(|| panic!("unterminated line {l:?} in\n{text}"))
    });
    let mut tree: Vec<CallgraphLine> = Vec::new();
    while let Some(line) = lines.next() {
        if let Some(header) = line.strip_prefix("@ ") {
            assert!(tree.is_empty(), "a tree not ended by a blank line before {line:?}");
            let (name, samples) = header
                .strip_suffix(" samples]")
                .and_then(|h| h.rsplit_once(" ["))
                .unwrap_or_else(|| panic!("bad PMC header {line:?}"));
            pmcs.push(CallgraphPmc {
                name: name.to_owned(),
                samples: samples.parse().unwrap(),
                trees: Vec::new(),
            });
            assert_eq!(lines.next(), Some(""), "no blank line after {line:?}");
            continue;
        }
        let pmc = pmcs.last_mut().unwrap_or_else(|| panic!("{line:?} before any `@` header"));
        if line.is_empty() {
            assert!(!tree.is_empty(), "two blank lines in a row in\n{text}");
            pmc.trees.push(std::mem::take(&mut tree));
            continue;
        }
        let depth = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[depth..];
        let (percent, rest) = rest.split_once("% ").unwrap_or_else(|| panic!("{line:?}"));
        let (count, rest) =
            rest.strip_prefix(" [").and_then(|r| r.split_once("] ")).unwrap_or_else(|| {
                panic!("{line:?}: no ` [count] `");
            });
        let rest = rest.trim_start_matches(' ');
        let (name, image) = match rest.split_once(" @ ") {
            Some((n, i)) => (n, Some(i.to_owned())),
            None => (rest, None),
        };
        let parsed = CallgraphLine {
            depth,
            percent: percent.to_owned(),
            count: count.parse().unwrap_or_else(|_| panic!("{line:?}: bad count")),
            name: name.to_owned(),
            image,
        };
        assert_eq!(callgraph_line_text(&parsed), line, "not FreeBSD's call-graph layout");
        if let Some(previous) = tree.last() {
            assert!(parsed.depth <= previous.depth + 1, "{line:?} skips a level");
        } else {
            assert_eq!(parsed.depth, 0, "a tree must start at depth 0: {line:?}");
        }
        tree.push(parsed);
    }
    assert!(tree.is_empty(), "the last tree is not ended by a blank line:\n{text}");
    for pmc in &pmcs {
        for tree in &pmc.trees {
            check_percentages(tree, pmc.samples);
        }
    }
    pmcs
}

/// Checks each line's percentage against its parent's count (`total` at the top).
#[track_caller]
fn check_percentages(tree: &[CallgraphLine], total: u64) {
    let mut parents: Vec<u64> = vec![total];
    for line in tree {
        parents.truncate(line.depth + 1);
        let parent = parents[line.depth];
        let expected = if line.count == parent {
            "100.0".to_owned()
        } else {
            format!("{:05.2}", 100.0 * line.count as f64 / parent as f64)
        };
        assert_eq!(line.percent, expected, "percentage of {line:?} (parent count {parent})");
        assert!(line.count <= parent, "{line:?} has more samples than its parent");
        parents.push(line.count);
    }
}

impl CallgraphPmc {
    /// The top-level lines (sampled functions), in printed order.
    pub fn roots(&self) -> Vec<&CallgraphLine> {
        self.trees.iter().map(|t| &t[0]).collect()
    }

    /// The sum of the top-level counts.
    pub fn root_total(&self) -> u64 {
        self.trees.iter().map(|t| t[0].count).sum()
    }
}

// ---------------------------------------------------------------------------------------------
// `--folded`.

/// Parses folded stacks: (frames from the outermost caller to the sampled function, count).
#[track_caller]
pub fn parse_folded(text: &str) -> Vec<(Vec<String>, u64)> {
    text.lines()
        .map(|line| {
            let (stack, count) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
            let frames = stack.split(';').map(str::to_owned).collect();
            (frames, count.parse().unwrap_or_else(|_| panic!("{line:?}: bad count")))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// `--top N`.

/// One row of the flat profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopRow {
    /// Samples in the function itself.
    pub self_samples: u64,
    /// Samples with the function on the stack.
    pub total_samples: u64,
    /// The function (or address).
    pub function: String,
    /// The image path.
    pub image: String,
}

/// Parses the flat profile: (PMC name, samples, rows) per block.
#[track_caller]
pub fn parse_top(text: &str) -> Vec<(String, u64, Vec<TopRow>)> {
    let mut blocks = Vec::new();
    for block in text.split("\n\n") {
        let mut lines = block.lines();
        let header = lines.next().unwrap_or_else(|| panic!("empty block in\n{text}"));
        let (name, samples) = header
            .strip_prefix("@ ")
            .and_then(|h| h.strip_suffix(" samples]"))
            .and_then(|h| h.rsplit_once(" ["))
            .unwrap_or_else(|| panic!("bad block header {header:?}"));
        let columns: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(columns, ["self%", "self", "total%", "total", "function", "image"]);
        // A last "(N more functions: …)" line says how many rows were left out.
        let rows = lines
            .filter(|line| !line.starts_with('('))
            .map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                assert_eq!(f.len(), 6, "{line:?}");
                TopRow {
                    self_samples: f[1].parse().unwrap(),
                    total_samples: f[3].parse().unwrap(),
                    function: f[4].to_owned(),
                    image: f[5].to_owned(),
                }
            })
            .collect();
        blocks.push((name.to_owned(), samples.parse().unwrap(), rows));
    }
    blocks
}

// ---------------------------------------------------------------------------------------------
// `--json`: a small JSON reader, enough for pmcstat's counts.

/// A JSON value. Numbers keep their text, so that 64-bit counts stay exact.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number, as written.
    Number(String),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, members in order.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Parses a whole document (surrounding white space allowed).
    #[track_caller]
    pub fn parse(text: &str) -> Json {
        let mut p = JsonParser { s: text.as_bytes(), i: 0 };
        let v = p.value();
        p.ws();
        assert_eq!(p.i, p.s.len(), "trailing characters in JSON {text:?}");
        v
    }

    /// Member `key` of an object.
    #[track_caller]
    pub fn get(&self, key: &str) -> &Json {
        match self {
            Json::Object(m) => {
                &m.iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("no {key:?}")).1
            }
            other => panic!("{other:?} is not an object"),
        }
    }

    /// The members' names of an object.
    pub fn keys(&self) -> Vec<&str> {
        match self {
            Json::Object(m) => m.iter().map(|(k, _)| k.as_str()).collect(),
            other => panic!("{other:?} is not an object"),
        }
    }

    /// An array's elements.
    #[track_caller]
    pub fn array(&self) -> &[Json] {
        match self {
            Json::Array(a) => a,
            other => panic!("{other:?} is not an array"),
        }
    }

    /// A non-negative integer.
    #[track_caller]
    pub fn u64(&self) -> u64 {
        match self {
            Json::Number(n) => n.parse().unwrap_or_else(|_| panic!("{n} is not a u64")),
            other => panic!("{other:?} is not a number"),
        }
    }

    /// A string.
    #[track_caller]
    pub fn str(&self) -> &str {
        match self {
            Json::String(s) => s,
            other => panic!("{other:?} is not a string"),
        }
    }
}

struct JsonParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl JsonParser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && b" \t\r\n".contains(&self.s[self.i]) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) {
        self.ws();
        assert_eq!(self.s.get(self.i), Some(&c), "JSON: expected {:?} at {}", c as char, self.i);
        self.i += 1;
    }

    fn literal(&mut self, word: &str, value: Json) -> Json {
        assert!(self.s[self.i..].starts_with(word.as_bytes()), "JSON: bad literal at {}", self.i);
        self.i += word.len();
        value
    }

    fn value(&mut self) -> Json {
        self.ws();
        match self.s.get(self.i).copied() {
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Json::Object(members);
                }
                loop {
                    self.ws();
                    let key = self.string();
                    self.eat(b':');
                    members.push((key, self.value()));
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Json::Object(members);
                        }
                        _ => panic!("JSON: bad object at {}", self.i),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Json::Array(items);
                }
                loop {
                    items.push(self.value());
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Json::Array(items);
                        }
                        _ => panic!("JSON: bad array at {}", self.i),
                    }
                }
            }
            Some(b'"') => Json::String(self.string()),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                let start = self.i;
                while self.i < self.s.len() && b"+-.eE0123456789".contains(&self.s[self.i]) {
                    self.i += 1;
                }
                Json::Number(String::from_utf8(self.s[start..self.i].to_vec()).unwrap())
            }
            other => panic!("JSON: unexpected {other:?} at {}", self.i),
        }
    }

    fn string(&mut self) -> String {
        self.eat(b'"');
        let mut out = Vec::new();
        loop {
            let c = *self.s.get(self.i).expect("JSON: unterminated string");
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).unwrap(),
                b'\\' => {
                    let e = self.s[self.i];
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'u' => {
                            let hex = std::str::from_utf8(&self.s[self.i..self.i + 4]).unwrap();
                            let c = char::from_u32(u32::from_str_radix(hex, 16).unwrap()).unwrap();
                            self.i += 4;
                            out.extend_from_slice(c.to_string().as_bytes());
                        }
                        _ => panic!("JSON: bad escape at {}", self.i),
                    }
                }
                c => out.push(c),
            }
        }
    }
}

/// A character device `major:minor` made with mknod(2) at `dir/name` (the tests run as root):
/// a test writes to its own device node, never to a system path such as `/dev/null`, which a
/// faulty pmcstat could remove or replace.
pub fn char_device(dir: &Path, name: &str, major: u32, minor: u32) -> PathBuf {
    let path = dir.join(name);
    let c = std::ffi::CString::new(arg(&path)).unwrap();
    // SAFETY: mknod reads the NUL-terminated path, which lives across the call.
    let made =
        unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(major, minor)) };
    assert_eq!(made, 0, "mknod {}: {}", path.display(), std::io::Error::last_os_error());
    path
}

/// A private null device (1:3) at `dir/name`: writes vanish.
pub fn null_device(dir: &Path, name: &str) -> PathBuf {
    char_device(dir, name, 1, 3)
}

/// A private full device (1:7) at `dir/name`: every write fails with ENOSPC.
pub fn full_device(dir: &Path, name: &str) -> PathBuf {
    char_device(dir, name, 1, 7)
}

/// A symbolic link at `dir/name` to the standard output of whoever opens it
/// (`/proc/self/fd/1`), made here rather than the system's `/dev/stdout` (or the one made
/// earlier).
pub fn stdout_link(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    if std::fs::symlink_metadata(&path).is_err() {
        std::os::unix::fs::symlink("/proc/self/fd/1", &path).unwrap();
    }
    path
}
