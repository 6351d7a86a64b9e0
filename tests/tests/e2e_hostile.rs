//! pmcstat reading logs crafted to harm it (written with the pmclog encoder): names from a log
//! never lead outside the output directory, and files a log names are read for symbols only if
//! they are regular files.

use std::io::Write;
use std::time::Duration;

use hwpmc_tests::{Host, arg, c_program, encode_log, files_under, start_pmcstat};
use pmclog::{
    Callchain, CallchainFlags, DynLayout, MapIn, PmcAllocateDyn, ProgramCounters, Record,
};

const PMCID: u32 = 0x4000_0100;

/// A user-mode sample of thread 8 of process 7 with the program counters `pcs`.
fn sample(pcs: &[u64]) -> Record<'_> {
    Record::Callchain(Callchain {
        pid: 7,
        tid: 8,
        pmcid: PMCID,
        cpuflags: CallchainFlags::new(0, 1),
        pcs: ProgramCounters::from_words(pcs),
    })
}

/// A log whose PMC is named `event` and whose samples fall in the image `image` mapped at
/// 0x400000 in process 7.
fn log_with(event: &str, image: &str) -> Vec<u8> {
    let pcs = [0x401000u64, 0x401100];
    let mut records = vec![
        Record::PmcAllocateDyn(PmcAllocateDyn {
            pmcid: PMCID,
            event: 0x1000,
            flags: 0,
            rate: 1000,
            name: event.as_bytes(),
            layout: DynLayout::Kernel,
        }),
        Record::MapIn(MapIn { pid: 7, start: 0x400000, path: image.as_bytes() }),
    ];
    records.extend(std::iter::repeat_n(sample(&pcs), 5));
    encode_log(&records)
}

#[test]
fn event_and_image_names_from_a_log_never_leave_the_gmon_directory() {
    let program = c_program("hot");
    for (event, image) in [
        ("..", arg(&program).to_owned()),
        (".", arg(&program).to_owned()),
        ("../../escape", arg(&program).to_owned()),
        ("ev\\..\\..", arg(&program).to_owned()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("hostile.log");
        std::fs::write(&log, log_with(event, &image)).unwrap();
        let out = dir.path().join("a").join("sub");
        let args = ["-q", "-R", arg(&log), "-g", "-D", arg(&out)];
        let run = start_pmcstat(Host::Linux, &args).finish_within(Duration::from_secs(60));
        run.assert_status(0);
        // Everything written is below -D; beside it, only the log.
        let all = files_under(dir.path());
        let (below, outside): (Vec<_>, Vec<_>) = all.iter().partition(|f| f.starts_with("a/sub/"));
        assert_eq!(outside, ["hostile.log"], "event {event:?}: {all:?}");
        assert_eq!(below.len(), 1, "event {event:?}: {all:?}");
        assert!(below[0].ends_with(".gmon"), "{below:?}");
    }
}

#[test]
fn a_fifo_named_in_a_log_is_not_opened_and_the_report_still_comes() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("image.fifo");
    let path = std::ffi::CString::new(arg(&fifo)).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path, which lives across the call.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let log = dir.path().join("fifo.log");
    std::fs::write(&log, log_with("cpu-clock", arg(&fifo))).unwrap();
    let null = hwpmc_tests::null_device(dir.path(), "null");
    for analysis in [&["--top", "5"][..], &["-G", "-"], &["--folded", "-"]] {
        let mut args = vec!["-R", arg(&log)];
        args.extend_from_slice(analysis);
        if analysis[0] == "--folded" {
            args[3] = arg(&null);
        }
        let run = start_pmcstat(Host::Linux, &args).finish_within(Duration::from_secs(60));
        run.assert_status(0);
        let warning = format!("symbols of {} unavailable", fifo.display());
        assert!(
            run.stderr.contains(&warning) && run.stderr.contains("not a regular file"),
            "{analysis:?}\n{}",
            run.describe()
        );
    }
}

/// Runs pmcstat with `args` (output discarded) and returns its exit status and its peak
/// resident memory in bytes (`ru_maxrss`).
fn peak_memory(args: &[&str]) -> (i32, u64) {
    // Reaped by wait4 below, which also gives its resource usage.
    #[allow(clippy::zombie_processes)]
    let child = std::process::Command::new(hwpmc_tests::pmcstat_binary())
        .args(args)
        .env("PMC_HOST", "linux")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid locals for wait4 to fill; the pid is our child's.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    (libc::WEXITSTATUS(status), usage.ru_maxrss as u64 * 1024)
}

#[test]
fn a_log_larger_than_the_memory_bound_is_read_in_bounded_memory() {
    const LOG_BYTES: usize = 72 << 20;
    const BOUND: u64 = 64 << 20;
    let program = c_program("hot");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.log");
    // Written record by record: this process stays small, as the peak resident memory a child
    // reports includes what it had before its exec (this process's, when it was forked).
    let mut log = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    // One mapping, then samples of depth 8–64 over a few dozen distinct stacks.
    let start = log_with("cpu-clock", arg(&program));
    log.write_all(&start).unwrap();
    let mut written = start.len();
    let mut buf = vec![0u8; pmclog::MAX_RECORD_LEN];
    let mut n = 0u64;
    while written < LOG_BYTES {
        let depth = 8 + (n % 57) as usize;
        let pcs: Vec<u64> = (0..depth as u64).map(|i| 0x401000 + 16 * ((n + i) % 7)).collect();
        let len = pmclog::encode(&sample(&pcs), n, &mut buf).unwrap();
        log.write_all(&buf[..len]).unwrap();
        written += len;
        n += 1;
    }
    log.flush().unwrap();
    drop(log);
    let null = hwpmc_tests::null_device(dir.path(), "null");
    for analysis in
        [&["-o", arg(&null)][..], &["--top", "5"], &["-G", arg(&null)], &["--folded", arg(&null)]]
    {
        let mut args = vec!["-q", "-R", arg(&path)];
        args.extend_from_slice(analysis);
        let (status, peak) = peak_memory(&args);
        assert_eq!(status, 0, "{analysis:?}");
        assert!(peak < BOUND, "{analysis:?}: {} MiB for a {} MiB log", peak >> 20, LOG_BYTES >> 20);
    }
}

#[test]
fn a_newline_in_an_image_path_never_starts_a_line_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let image = format!("{}/no\nforged line", dir.path().display());
    let log = dir.path().join("newline.log");
    std::fs::write(&log, log_with("cpu-clock", &image)).unwrap();
    let run = start_pmcstat(Host::Linux, &["-R", arg(&log), "--top", "5"])
        .finish_within(Duration::from_secs(60));
    run.assert_status(0);
    assert!(run.stderr.lines().all(|l| l.starts_with("pmcstat: ")), "{}", run.describe());
    assert!(run.stderr.contains("no\\nforged line"), "{}", run.describe());
    // The report on standard output names the image escaped too.
    assert!(run.stdout.lines().all(|l| !l.starts_with("forged line")), "{}", run.describe());
    assert!(run.stdout.contains("no\\nforged line"), "{}", run.describe());
}
