//! Checks a run of the example kernel (`tests/ring0/run.sh` runs it):
//! `ring0-check CONSOLE LOG KERNEL_ELF USER_ELF`.
//!
//! CONSOLE is what the kernel and its test program printed on COM1, LOG the bytes the driver
//! wrote to the log device, the ELFs the kernel and the program that ran. It checks that the
//! driver loaded and unloaded, that nothing faulted or panicked, that TSC counts increased, that
//! every SOFT count equals the kernel's own count of the events, and that the log decodes with
//! pmclog and its samples carry callchains that lie in the code that ran (user samples in the
//! program, kernel samples in the kernel) and go through the nested functions the program and the
//! kernel spun in. It prints what it found and exits non-zero on any failure.

use std::collections::BTreeMap;
use std::ops::Range;
use std::process::ExitCode;

use object::{Object, ObjectSegment, ObjectSymbol, SegmentFlags};
use pmclog::{Record, Records};

/// A program's executable ranges and named functions.
struct Image {
    text: Vec<Range<u64>>,
    functions: BTreeMap<String, Range<u64>>,
}

impl Image {
    fn read(path: &str) -> Result<Image, String> {
        let data = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        let file = object::File::parse(&*data).map_err(|e| format!("{path}: {e}"))?;
        let text = file
            .segments()
            .filter(|s| matches!(s.flags(), SegmentFlags::Elf { p_flags } if p_flags & 1 != 0))
            .map(|s| s.address()..s.address() + s.size())
            .collect();
        let functions = file
            .symbols()
            .filter(|s| s.size() > 0)
            .filter_map(|s| Some((s.name().ok()?.to_string(), s.address()..s.address() + s.size())))
            .collect();
        Ok(Image { text, functions })
    }

    fn contains(&self, pc: u64) -> bool {
        self.text.iter().any(|r| r.contains(&pc))
    }

    /// Whether `pcs` starts inside `names[0]`, then returns into `names[1]`, and so on.
    fn chain_goes_through(&self, pcs: &[u64], names: &[&str]) -> bool {
        pcs.len() >= names.len()
            && names.iter().zip(pcs).all(|(name, pc)| {
                // A return address is one past its call, which may end the function.
                self.functions.get(*name).is_some_and(|r| r.start < *pc && *pc <= r.end)
            })
    }
}

/// The `key=value` fields of a RESULT line.
fn fields(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace().filter_map(|w| w.split_once('=')).collect()
}

fn number(fields: &BTreeMap<&str, &str>, key: &str) -> Option<u64> {
    let text = fields.get(key)?;
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// "N signals M" (the rest of the kernel's "ring0: log bytes N signals M" line).
fn fields_of_totals(rest: &str) -> (Option<u64>, Option<u64>) {
    let mut words = rest.split_whitespace();
    let bytes = words.next().and_then(|w| w.parse().ok());
    let signals = words.nth(1).and_then(|w| w.parse().ok());
    (bytes, signals)
}

/// One CALLCHAIN record.
struct Sample {
    pid: i32,
    pmcid: u32,
    cpu: u32,
    user: bool,
    pcs: Vec<u64>,
}

/// Every log session in `log` (CONFIGURELOG … CLOSELOG, one after another): its samples.
fn decode(log: &[u8], failures: &mut Vec<String>) -> (usize, Vec<Sample>) {
    let mut samples = Vec::new();
    let mut sessions = 0;
    let mut rest = log;
    while !rest.is_empty() {
        let mut records = Records::new(rest);
        let mut closed = false;
        for entry in records.by_ref() {
            match entry {
                Ok(entry) => match entry.record {
                    Record::Callchain(c) => samples.push(Sample {
                        pid: c.pid,
                        pmcid: c.pmcid,
                        cpu: c.cpuflags.cpu(),
                        user: c.cpuflags.is_user(),
                        pcs: (0..c.pcs.len()).filter_map(|i| c.pcs.get(i)).collect(),
                    }),
                    Record::CloseLog => closed = true,
                    _ => {}
                },
                Err(e) => {
                    failures.push(format!("the log does not decode: {e}"));
                    return (sessions, samples);
                }
            }
        }
        if !closed {
            failures.push("a log session does not end with CLOSELOG".into());
            break;
        }
        sessions += 1;
        rest = &rest[records.offset() as usize..];
    }
    (sessions, samples)
}

fn run(args: &[String]) -> Result<Vec<String>, String> {
    let [console, log, kernel, user] = args else {
        return Err("usage: ring0-check CONSOLE LOG KERNEL_ELF USER_ELF".into());
    };
    let console = std::fs::read_to_string(console).map_err(|e| format!("{console}: {e}"))?;
    let log = std::fs::read(log).map_err(|e| format!("{log}: {e}"))?;
    let (failures, summary) = check_run(&console, &log, &Image::read(kernel)?, &Image::read(user)?);
    println!("{summary}");
    for line in
        console.lines().filter(|l| l.starts_with("ring0: cpu ") || l.starts_with("ring0: done"))
    {
        println!("ring0-check: {line}");
    }
    Ok(failures)
}

/// Checks a run: its console output, its log, and the images that ran. Returns the failures and
/// a one-line summary.
fn check_run(console: &str, log: &[u8], kernel: &Image, user: &Image) -> (Vec<String>, String) {
    let mut failures = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };

    for line in console.lines() {
        let bad = ["FAULT", "PANIC", "FAIL"].iter().any(|w| line.contains(w));
        check(!bad, format!("the console says: {line}"));
    }
    for needed in
        ["ring0: driver loaded", "RESULT test done", "ring0: driver unloaded", "ring0: done in"]
    {
        check(console.contains(needed), format!("the console lacks \"{needed}\""));
    }
    // A clean unload: no owner still had PMCs (the driver signals those), and every byte the
    // driver wrote to the log device reached the host.
    let totals =
        console.lines().find_map(|l| l.strip_prefix("ring0: log bytes ")).map(fields_of_totals);
    match totals {
        Some((bytes, signals)) => {
            check(signals == Some(0), format!("the driver sent {signals:?} signals at unload"));
            check(
                bytes == Some(log.len() as u64),
                format!("the kernel wrote {bytes:?} log bytes, the host has {}", log.len()),
            );
        }
        None => check(false, "the console lacks the kernel's log and signal totals".into()),
    }
    let results: Vec<&str> = console.lines().filter(|l| l.starts_with("RESULT ")).collect();
    let cpus = console
        .lines()
        .find_map(|l| l.strip_prefix("ring0: ")?.strip_suffix(" CPUs online")?.parse::<u32>().ok())
        .unwrap_or(0);
    check(cpus >= 2, format!("{cpus} CPUs came online, not at least 2"));

    // User-pointer checks: a system call with a kernel pointer, or one that runs past the end
    // of user memory, fails with EFAULT (14).
    let efault = results.iter().find(|l| l.starts_with("RESULT efault ")).map(|l| fields(l));
    let faults = efault.as_ref().map(|f| (number(f, "kernel"), number(f, "straddling")));
    check(
        faults == Some((Some(14), Some(14))),
        format!("bad user pointers gave {faults:?}, not EFAULT"),
    );

    // TSC: every CPU's count increased between two reads.
    let tsc: Vec<_> =
        results.iter().filter(|l| l.starts_with("RESULT tsc ")).map(|l| fields(l)).collect();
    check(tsc.len() as u32 == cpus, format!("{} TSC results for {cpus} CPUs", tsc.len()));
    for f in &tsc {
        let (first, second) = (number(f, "first").unwrap_or(0), number(f, "second").unwrap_or(0));
        check(
            first > 0 && second > first,
            format!("TSC on cpu {:?}: {first} then {second}", f.get("cpu")),
        );
    }
    // SOFT counting: the driver's count equals the kernel's, which is not zero.
    let soft: Vec<_> =
        results.iter().filter(|l| l.starts_with("RESULT soft-")).map(|l| fields(l)).collect();
    check(soft.len() as u32 == cpus + 1, format!("{} SOFT results, not {}", soft.len(), cpus + 1));
    for f in &soft {
        let (pmc, kernel) = (number(f, "pmc"), number(f, "kernel"));
        check(
            pmc.is_some() && pmc == kernel && kernel > Some(0),
            format!("SOFT count {pmc:?}, kernel's {kernel:?}: {f:?}"),
        );
    }

    // The log: decodes, samples for every sampling PMC, callchains in the code that ran.
    let (sessions, samples) = decode(log, &mut failures);
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    check(sessions >= 1, format!("{} bytes of log hold no complete session", log.len()));
    let sampling: Vec<_> =
        results.iter().filter(|l| l.starts_with("RESULT sampling ")).map(|l| fields(l)).collect();
    check(
        sampling.len() as u32 == cpus + 1 || sampling.len() as u32 == cpus + 2,
        format!("{} sampling PMCs", sampling.len()),
    );
    for f in &sampling {
        let id = number(f, "pmcid").unwrap_or(0) as u32;
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.pmcid == id).collect();
        check(!mine.is_empty(), format!("no sample of PMC {id:#x}"));
        if let Some(cpu) = number(f, "cpu") {
            check(
                mine.iter().all(|s| u64::from(s.cpu) == cpu),
                format!("a sample of PMC {id:#x} not on cpu {cpu}"),
            );
        }
    }
    let process_sampler = results.iter().find(|l| l.starts_with("RESULT sampling process "));
    if let Some(id) = process_sampler.and_then(|l| number(&fields(l), "pmcid")) {
        let pids: Vec<i32> =
            samples.iter().filter(|s| s.pmcid == id as u32).map(|s| s.pid).collect();
        check(
            pids.iter().all(|&p| p == 1),
            format!("process-scope samples of other processes: {pids:?}"),
        );
    }
    for s in &samples {
        let image = if s.user { &user } else { &kernel };
        let valid = !s.pcs.is_empty() && s.pcs.iter().all(|&pc| image.contains(pc));
        let mode = if s.user { "user" } else { "kernel" };
        check(valid, format!("a {mode} callchain outside the {mode} code: {:x?}", s.pcs));
    }
    let user_chains = samples.iter().filter(|s| {
        s.user && user.chain_goes_through(&s.pcs, &["work_inner", "work_middle", "work_outer"])
    });
    let user_chains = user_chains.count();
    let kernel_chains = samples
        .iter()
        .filter(|s| {
            !s.user
                && kernel
                    .chain_goes_through(&s.pcs, &["kwork_inner", "kwork_middle", "kwork_outer"])
        })
        .count();
    check(user_chains > 0, "no user callchain goes work_inner < work_middle < work_outer".into());
    check(
        kernel_chains > 0,
        "no kernel callchain goes kwork_inner < kwork_middle < kwork_outer".into(),
    );
    let spinner = samples.iter().filter(|s| s.pid == 2).count();
    check(spinner > 0, "system sampling saw no sample of the spinner (process 2)".into());

    // The hardware PMU: counted and sampled, or said to be absent.
    let hardware = results.iter().find(|l| l.starts_with("RESULT hardware "));
    let absent = results.iter().any(|l| l.starts_with("RESULT pmu absent"));

    // Every CPU took timer ticks and the NMIs the kernel sends it; without a PMU the driver
    // claimed none of them (only a counter overflow is its).
    let per_cpu: Vec<Vec<u64>> = console
        .lines()
        .filter_map(|l| l.strip_prefix("ring0: cpu "))
        .map(|rest| rest.split_whitespace().filter_map(|w| w.parse().ok()).collect())
        .collect();
    check(per_cpu.len() as u32 == cpus, format!("{} CPU reports for {cpus} CPUs", per_cpu.len()));
    for cpu in &per_cpu {
        let &[index, ticks, nmis, claimed, ..] = cpu.as_slice() else {
            check(false, format!("a CPU report without its numbers: {cpu:?}"));
            continue;
        };
        check(ticks > 0 && nmis > 0, format!("cpu {index}: {ticks} ticks, {nmis} NMIs"));
        check(claimed <= nmis, format!("cpu {index}: {claimed} of {nmis} NMIs claimed"));
        if hardware.is_none() {
            check(
                claimed == 0,
                format!("cpu {index}: the driver claimed {claimed} NMIs without a PMU"),
            );
        }
    }
    match hardware {
        Some(line) => {
            check(number(&fields(line), "instructions").unwrap_or(0) > 0, line.to_string())
        }
        None => check(absent, "neither hardware results nor \"pmu absent\"".into()),
    }

    let summary = format!(
        "ring0-check: {cpus} CPUs; {} log sessions, {} samples ({} user, {} kernel; {user_chains} through work_*, {kernel_chains} through kwork_*, {spinner} of the spinner); PMU {}",
        sessions,
        samples.len(),
        samples.iter().filter(|s| s.user).count(),
        samples.iter().filter(|s| !s.user).count(),
        if hardware.is_some() { "present" } else { "absent" },
    );
    (failures, summary)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(failures) if failures.is_empty() => {
            println!("ring0-check: OK");
            ExitCode::SUCCESS
        }
        Ok(failures) => {
            for f in &failures {
                eprintln!("ring0-check: FAILED: {f}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("ring0-check: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmclog::{Callchain, CallchainFlags, Initialize, ProgramCounters};

    const USER_TEXT: Range<u64> = 0x400_0000..0x400_4000;
    const KERNEL_TEXT: Range<u64> = 0x10_0000..0x12_0000;

    fn image(text: Range<u64>, functions: &[(&str, u64)]) -> Image {
        let functions = functions.iter().map(|&(n, a)| (n.to_string(), a..a + 0x40)).collect();
        Image { text: vec![text], functions }
    }

    fn user() -> Image {
        image(
            USER_TEXT,
            &[("work_inner", 0x400_1000), ("work_middle", 0x400_1100), ("work_outer", 0x400_1200)],
        )
    }

    fn kernel() -> Image {
        image(
            KERNEL_TEXT,
            &[("kwork_inner", 0x11_0000), ("kwork_middle", 0x11_0100), ("kwork_outer", 0x11_0200)],
        )
    }

    const CONSOLE: &str = "ring0: 2 CPUs online\n\
        ring0: driver loaded (cpuid X)\n\
        RESULT efault kernel=14 straddling=14\n\
        RESULT tsc cpu=0 first=10 second=20\n\
        RESULT soft-system cpu=0 pmc=5 kernel=5\n\
        RESULT tsc cpu=1 first=11 second=21\n\
        RESULT soft-system cpu=1 pmc=6 kernel=6\n\
        RESULT soft-process pid=1 pmc=4 kernel=4\n\
        RESULT sampling system cpu=0 pmcid=0xf00\n\
        RESULT sampling system cpu=1 pmcid=0x100f00\n\
        RESULT sampling process pmcid=0xfff20f01\n\
        RESULT pmu absent: none\n\
        RESULT test done\n\
        ring0: driver unloaded\n\
        ring0: cpu 0 ticks 100 nmis 6 claimed 0 calls 1\n\
        ring0: cpu 1 ticks 100 nmis 6 claimed 0 calls 1\n\
        ring0: log bytes LOGBYTES signals 0\n\
        ring0: done in 5 ms\n";

    /// The console of a run that wrote `log`.
    fn console(log: &[u8]) -> String {
        CONSOLE.replace("LOGBYTES", &log.len().to_string())
    }

    /// A log session with one sample of each kind the check looks for; `pcs` replaces the
    /// user sample's callchain when given.
    fn log(user_pcs: Option<&[u64]>) -> Vec<u8> {
        let user_chain = [0x400_1010, 0x400_1110, 0x400_1210];
        let kernel_chain = [0x11_0010, 0x11_0110, 0x11_0210];
        let sample = |pid, pmcid, cpu, flags, pcs: &[u64]| {
            let pcs: Vec<u64> = pcs.to_vec();
            let cpuflags = CallchainFlags::new(cpu, flags);
            (pid, pmcid, cpuflags, pcs)
        };
        let samples = [
            sample(2, 0xf00, 0, CallchainFlags::USERSPACE as u16, user_pcs.unwrap_or(&user_chain)),
            sample(1, 0x100f00, 1, 0, &kernel_chain),
            sample(1, 0xfff2_0f01, 1, CallchainFlags::USERSPACE as u16, &user_chain),
        ];
        let mut out = Vec::new();
        let mut push = |record: Record<'_>| {
            let mut buf = [0u8; 1024];
            let n = pmclog::encode(&record, 1, &mut buf).expect("encodes");
            out.extend_from_slice(&buf[..n]);
        };
        push(Record::Initialize(Initialize {
            version: 0x0A02_0000,
            cpu_type: 0x400,
            tsc_freq: 1,
            time_sec: 0,
            time_nsec: 0,
            cpuid: b"X",
        }));
        for (pid, pmcid, cpuflags, pcs) in &samples {
            push(Record::Callchain(Callchain {
                pid: *pid,
                tid: 7,
                pmcid: *pmcid,
                cpuflags: *cpuflags,
                pcs: ProgramCounters::from_words(pcs),
            }));
        }
        push(Record::CloseLog);
        out
    }

    #[test]
    fn a_good_run_passes() {
        let log = log(None);
        let (failures, _) = check_run(&console(&log), &log, &kernel(), &user());
        assert_eq!(failures, Vec::<String>::new());
    }

    #[test]
    fn a_soft_count_unequal_to_the_kernels_fails() {
        let log = log(None);
        let console = console(&log).replace("pmc=6 kernel=6", "pmc=6 kernel=7");
        let (failures, _) = check_run(&console, &log, &kernel(), &user());
        assert!(failures.iter().any(|f| f.contains("SOFT count")), "{failures:?}");
    }

    #[test]
    fn a_tsc_that_did_not_increase_fails() {
        let log = log(None);
        let console = console(&log).replace("first=11 second=21", "first=21 second=21");
        let (failures, _) = check_run(&console, &log, &kernel(), &user());
        assert!(failures.iter().any(|f| f.contains("TSC on cpu")), "{failures:?}");
    }

    #[test]
    fn a_callchain_outside_the_code_fails() {
        let log = log(Some(&[0x400_1010, 0x9999_0000]));
        let (failures, _) = check_run(&console(&log), &log, &kernel(), &user());
        assert!(failures.iter().any(|f| f.contains("outside the user code")), "{failures:?}");
    }

    #[test]
    fn a_fault_a_truncated_log_or_a_missing_unload_fails() {
        let mut truncated = log(None);
        let console = console(&truncated).replace("ring0: driver unloaded\n", "ring0: FAULT #GP\n");
        truncated.truncate(truncated.len() - 3);
        let (failures, _) = check_run(&console, &truncated, &kernel(), &user());
        assert!(failures.iter().any(|f| f.contains("FAULT")), "{failures:?}");
        assert!(failures.iter().any(|f| f.contains("driver unloaded")), "{failures:?}");
        assert!(
            failures.iter().any(|f| f.contains("decode") || f.contains("CLOSELOG")),
            "{failures:?}"
        );
        assert!(failures.iter().any(|f| f.contains("log bytes")), "{failures:?}");
    }

    #[test]
    fn an_nmi_claimed_without_a_pmu_fails() {
        let log = log(None);
        let console = console(&log).replace("nmis 6 claimed 0", "nmis 6 claimed 1");
        let (failures, _) = check_run(&console, &log, &kernel(), &user());
        assert!(failures.iter().any(|f| f.contains("without a PMU")), "{failures:?}");
    }

    #[test]
    fn a_bad_user_pointer_that_is_not_a_fault_fails() {
        let log = log(None);
        let console = console(&log).replace("straddling=14", "straddling=0");
        let (failures, _) = check_run(&console, &log, &kernel(), &user());
        assert!(failures.iter().any(|f| f.contains("not EFAULT")), "{failures:?}");
    }

    #[test]
    fn signals_at_unload_fail() {
        let log = log(None);
        let console = console(&log).replace("signals 0", "signals 1");
        let (failures, _) = check_run(&console, &log, &kernel(), &user());
        assert!(failures.iter().any(|f| f.contains("signals at unload")), "{failures:?}");
    }
}
