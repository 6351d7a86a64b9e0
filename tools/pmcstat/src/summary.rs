//! The summary of a launched command's counts for people, as `perf stat` prints it, on standard
//! error after FreeBSD's layout (which stays for scripts, and is all that `-o` files get). It is
//! printed when standard error is a terminal or with `--summary`, and never with `-q`:
//!
//! ```text
//!  Performance counter stats for 'sh -c seq 1 2000000 | sort -n':
//!
//!           420.76 msec task-clock          #    0.696 CPUs utilized
//!            2,345      page-faults         #    5.573 K/sec
//!    1,234,567,890      instructions        #    1.23  insn per cycle
//!
//!      0.604551871 seconds time elapsed
//!      0.380000000 seconds user
//!      0.040000000 seconds sys
//! ```
//!
//! - Clock events (`task-clock`, `cpu-clock`) count nanoseconds: shown in milliseconds, with the
//!   CPUs they kept busy on average (`task-clock` / elapsed time).
//! - Other counts get thousands separators and their rate per second of counted CPU time (the
//!   clock event's, else the elapsed time), with K/M/G prefixes.
//! - `insn per cycle` when instructions and cycles are both counted; the share of mispredicted
//!   branches when branches and their mispredictions are.
//! - Elapsed time from the command's start to its end; user and system CPU time of the command
//!   and the descendants it waited for (`getrusage(RUSAGE_CHILDREN)`).
//! - Without `-d`, a note when the command's descendants used much more CPU time than the
//!   clock event counted: they were not followed.

use std::io::{self, Write};
use std::time::Duration;

/// What the summary is made from.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The command line, as the user gave it.
    pub command: String,
    /// Each counting PMC: its name as given and its final value.
    pub counts: Vec<(String, u64)>,
    /// From the command's start to its end.
    pub elapsed: Duration,
    /// User and system CPU time of the command and its waited-for descendants.
    pub user: Duration,
    /// See `user`.
    pub sys: Duration,
    /// Whether the PMCs followed the command's descendants (`-d`).
    pub descendants: bool,
    /// When counters were multiplexed: per count, the share of its time enabled it was counted
    /// (`None`: never; the count is `<not counted>`), printed as `perf stat` does. Empty
    /// otherwise.
    pub counted: Vec<Option<f64>>,
}

/// The event's name without qualifiers (`instructions,usr` → `instructions`), in lower case.
fn base_name(name: &str) -> String {
    name.split(',').next().unwrap_or(name).to_ascii_lowercase()
}

fn is_clock(name: &str) -> bool {
    matches!(base_name(name).as_str(), "task-clock" | "cpu-clock")
}

fn is_one_of(name: &str, names: &[&str]) -> bool {
    names.contains(&base_name(name).as_str())
}

const INSTRUCTIONS: &[&str] =
    &["instructions", "inst_retired.any", "inst_retired.any_p", "instr_retired_any"];
const CYCLES: &[&str] = &[
    "cycles",
    "cpu-cycles",
    "unhalted-cycles",
    "unhalted-core-cycles",
    "cpu_clk_unhalted.thread",
    "cpu_clk_unhalted.thread_p",
    "cpu_clk_unhalted.core",
    "cpu_clk_unhalted_core",
];
const BRANCHES: &[&str] = &["branches", "br_inst_retired.all_branches", "branch-instructions"];
const MISPREDICTS: &[&str] =
    &["branch-mispredicts", "br_misp_retired.all_branches", "branch-misses"];

/// `n` with a comma every three digits.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate with a K/M/G prefix, as perf prints it (`5.573 K/sec`).
fn per_second(rate: f64) -> String {
    let (value, prefix) = match rate {
        r if r >= 1e9 => (r / 1e9, "G"),
        r if r >= 1e6 => (r / 1e6, "M"),
        r if r >= 1e3 => (r / 1e3, "K"),
        r => (r, ""),
    };
    format!("{value:8.3} {prefix}/sec")
}

/// Writes the summary.
pub fn write_summary(s: &Summary, out: &mut dyn Write) -> io::Result<()> {
    let find = |names: &[&str]| s.counts.iter().find(|(n, _)| is_one_of(n, names)).map(|c| c.1);
    let clock_ns = s.counts.iter().find(|(n, _)| is_clock(n)).map(|c| c.1);
    let elapsed_ns = s.elapsed.as_nanos().max(1) as f64;
    // Rates are per second of counted CPU time when a clock event counted it, as perf does.
    let seconds = clock_ns.filter(|&ns| ns > 0).map_or(elapsed_ns, |ns| ns as f64) / 1e9;
    let name_width = s.counts.iter().map(|(n, _)| n.len()).max().unwrap_or(0).max(12);

    let mut text = format!("\n Performance counter stats for '{}':\n\n", s.command);
    for (i, (name, value)) in s.counts.iter().enumerate() {
        let counted = s.counted.get(i).copied();
        if counted == Some(None) {
            text.push_str(&format!("{:>18} {:<4} {name:<name_width$}\n", "<not counted>", ""));
            continue;
        }
        let (shown, unit) = if is_clock(name) {
            (format!("{:.2}", *value as f64 / 1e6), "msec")
        } else {
            (thousands(*value), "")
        };
        let note = if is_clock(name) {
            format!("{:8.3} CPUs utilized", *value as f64 / elapsed_ns)
        } else if is_one_of(name, INSTRUCTIONS) && find(CYCLES).is_some_and(|c| c > 0) {
            let cycles = find(CYCLES).unwrap_or(1) as f64;
            format!("{:8.2}  insn per cycle", *value as f64 / cycles)
        } else if is_one_of(name, MISPREDICTS) && find(BRANCHES).is_some_and(|b| b > 0) {
            let branches = find(BRANCHES).unwrap_or(1) as f64;
            format!("{:8.2}% of all branches", 100.0 * *value as f64 / branches)
        } else {
            per_second(*value as f64 / seconds)
        };
        let share = match counted {
            Some(Some(fraction)) => format!("  ({:.2}%)", 100.0 * fraction),
            _ => String::new(),
        };
        text.push_str(&format!("{shown:>18} {unit:<4} {name:<name_width$}  # {note}{share}\n"));
    }
    let secs = |d: Duration| format!("{}.{:09}", d.as_secs(), d.subsec_nanos());
    text.push_str(&format!("\n{:>18} seconds time elapsed\n", secs(s.elapsed)));
    text.push_str(&format!("{:>18} seconds user\n", secs(s.user)));
    text.push_str(&format!("{:>18} seconds sys\n", secs(s.sys)));
    if let Some(ns) = clock_ns.filter(|_| !s.descendants) {
        if unfollowed(ns, s.user + s.sys) {
            text.push_str(
                "\nNote: the command's processes used more CPU time than was counted: the \
                 processes it started were not followed; add -d to count them too.\n",
            );
        }
    }
    text.push('\n');
    out.write_all(text.as_bytes())
}

/// Whether a clock event that measured `measured_ns` of the command's CPU time missed processes
/// it started: the command and the descendants it waited for used `cpu` (more than 10 ms),
/// over twice what was measured. The rest ran in processes only `-d` follows.
pub fn unfollowed(measured_ns: u64, cpu: Duration) -> bool {
    let cpu_ns = cpu.as_nanos();
    cpu_ns > 10_000_000 && u128::from(measured_ns) * 2 < cpu_ns
}

/// User and system CPU time of this process's waited-for children.
pub fn children_cpu_time() -> (Duration, Duration) {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one `struct rusage` into the buffer it is given.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) };
    if rc != 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    // SAFETY: getrusage succeeded and filled the whole struct (it was zeroed besides).
    let usage = unsafe { usage.assume_init() };
    let time = |t: libc::timeval| {
        Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.clamp(0, 999_999) as u32) * 1000)
    };
    (time(usage.ru_utime), time(usage.ru_stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(counts: &[(&str, u64)], descendants: bool) -> String {
        let s = Summary {
            command: "sh -c work".into(),
            counts: counts.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            elapsed: Duration::from_millis(500),
            user: Duration::from_millis(380),
            sys: Duration::from_millis(40),
            descendants,
            counted: Vec::new(),
        };
        let mut out = Vec::new();
        write_summary(&s, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn multiplexed_counts_end_with_the_share_of_time_they_were_counted() {
        let s = Summary {
            command: "work".into(),
            counts: vec![("instructions".into(), 2_000), ("branches".into(), 0)],
            elapsed: Duration::from_millis(500),
            user: Duration::from_millis(400),
            sys: Duration::ZERO,
            descendants: true,
            counted: vec![Some(0.4998), None],
        };
        let mut out = Vec::new();
        write_summary(&s, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let line = |name: &str| text.lines().find(|l| l.contains(name)).unwrap().to_owned();
        assert!(line("instructions").starts_with("             2,000"), "{text}");
        assert!(line("instructions").ends_with("(49.98%)"), "{text}");
        assert!(line("branches").contains("<not counted>"), "{text}");
        assert!(!summary(&[("instructions", 5)], true).contains("%)"), "none without it");
    }

    #[test]
    fn thousands_separators_every_three_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567_890), "1,234,567,890");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn clock_counts_are_milliseconds_with_cpus_utilized_and_others_rates_per_cpu_second() {
        let text = summary(&[("task-clock", 400_000_000), ("page-faults", 2_345)], true);
        assert_eq!(
            text,
            "\n Performance counter stats for 'sh -c work':\n\n\
             \x20           400.00 msec task-clock    #    0.800 CPUs utilized\n\
             \x20            2,345      page-faults   #    5.862 K/sec\n\
             \n\
             \x20      0.500000000 seconds time elapsed\n\
             \x20      0.380000000 seconds user\n\
             \x20      0.040000000 seconds sys\n\n"
        );
    }

    #[test]
    fn instructions_and_cycles_give_ipc_and_branches_the_misprediction_share() {
        let text = summary(
            &[
                ("instructions", 3_000_000),
                ("unhalted-cycles", 2_000_000),
                ("branches", 400),
                ("branch-mispredicts", 10),
            ],
            true,
        );
        assert!(
            text.contains("3,000,000      instructions        #     1.50  insn per cycle\n"),
            "{text}"
        );
        assert!(
            text.contains("10      branch-mispredicts  #     2.50% of all branches\n"),
            "{text}"
        );
        // Without a clock event, rates are per elapsed second.
        assert!(text.contains("2,000,000      unhalted-cycles     #    4.000 M/sec\n"), "{text}");
    }

    #[test]
    fn uncounted_descendants_are_noted_unless_followed() {
        // 10 ms counted; the processes used 420 ms.
        let note = "add -d to count them too";
        assert!(summary(&[("task-clock", 10_000_000)], false).contains(note));
        assert!(!summary(&[("task-clock", 10_000_000)], true).contains(note));
        assert!(!summary(&[("task-clock", 400_000_000)], false).contains(note));
        assert!(!summary(&[("page-faults", 7)], false).contains(note), "no clock, no guess");
    }
}
