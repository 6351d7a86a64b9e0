//! Decoder throughput: a synthetic log of at least 256 MiB with a realistic mix of records (mostly
//! CALLCHAIN samples of depth 8–64) is built in memory with `pmclog::encode`, then decoded through
//! each of the crate's readers. It prints records/s and MiB/s (best and median of several runs)
//! and a checksum of every decoded field, so that the work cannot be optimised away. Nothing here
//! is asserted about time.
//!
//! `cargo bench -p pmclog` runs the full benchmark. Without `--bench` (as `cargo test --benches`
//! runs it) it does a quick smoke run on a 1 MiB log. `PMCLOG_BENCH_MIB` overrides the log size,
//! `PMCLOG_BENCH_RUNS` the number of runs per path, and `PMCLOG_BENCH_ONLY` (letters, e.g. `ab`)
//! picks the paths to run, e.g. under a profiler.

use std::hint::black_box;
use std::io::Cursor;
use std::time::{Duration, Instant};

use pmclog::{
    Callchain, CallchainFlags, DynLayout, Entry, Initialize, LogReader, MAX_RECORD_LEN, MapIn,
    PmcAllocate, PmcAllocateDyn, PmcAttach, ProcCsw, ProcExec, ProgramCounters, Record, RecordType,
    Records, Step, StreamDecoder, encode,
};

const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * MIB;

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<usize>().ok());
    let mib = env("PMCLOG_BENCH_MIB").unwrap_or(if full { 512 } else { 1 });
    let runs = env("PMCLOG_BENCH_RUNS").unwrap_or(if full { 9 } else { 3 }).max(1);

    let started = Instant::now();
    let (log, mix) = generate(mib << 20, 0x9E37_79B9_7F4A_7C15);
    let generated = started.elapsed();
    println!(
        "pmclog decode benchmark ({} run{}, {} runs per path)",
        if full { "full" } else { "quick smoke" },
        if cfg!(debug_assertions) { ", UNOPTIMISED build" } else { "" },
        runs
    );
    print_log_summary(&log, &mix, generated);

    // (name, target in GiB/s, what to run)
    type Path = (&'static str, Option<f64>, fn(&[u8]) -> Tally);
    let all_paths: [Path; 5] = [
        ("(a) Records, in memory", Some(2.0), decode_in_memory),
        ("(b) StreamDecoder, 4 KiB chunks", Some(1.0), |log| decode_streaming(log, 4 << 10)),
        ("(c) LogReader over io::Cursor", None, decode_reader),
        ("(d) StreamDecoder, 64 KiB chunks", None, |log| decode_streaming(log, 64 << 10)),
        ("(e) baseline: sum of u64 words", None, scan_words),
    ];
    // PMCLOG_BENCH_ONLY=ab runs only paths (a) and (b), e.g. under a profiler.
    let only = std::env::var("PMCLOG_BENCH_ONLY").unwrap_or_else(|_| "abcde".into());
    let paths: Vec<_> =
        all_paths.into_iter().filter(|(name, ..)| only.contains(&name[1..2])).collect();

    // Rounds go through every path in turn, so that a slow moment of the machine does not land on
    // one path only.
    let mut times = vec![Vec::with_capacity(runs); paths.len()];
    let mut tallies = vec![None; paths.len()];
    for _ in 0..runs {
        for (i, (_, _, decode)) in paths.iter().enumerate() {
            let start = Instant::now();
            let tally = black_box(decode(black_box(&log)));
            times[i].push(start.elapsed());
            match tallies[i] {
                None => tallies[i] = Some(tally),
                Some(first) => assert_eq!(first, tally, "{}: runs disagree", paths[i].0),
            }
        }
    }

    println!();
    println!(
        "{:<34} {:>13} {:>13} {:>10} {:>10}  {:>10}  target",
        "path", "best rec/s", "median rec/s", "best MiB/s", "med MiB/s", "best GiB/s"
    );
    let mut decoded = Vec::new();
    for (i, (name, target, _)) in paths.iter().enumerate() {
        let tally = tallies[i].unwrap();
        let (best, median) = best_and_median(&mut times[i]);
        let per_sec = |count: u64, time: Duration| count as f64 / time.as_secs_f64();
        let bytes = log.len() as u64;
        let best_gib = per_sec(bytes, best) / GIB;
        let verdict = match target {
            Some(_) if !full || cfg!(debug_assertions) => "(targets apply to `cargo bench`)".into(),
            Some(t) if best_gib >= *t => format!(">= {t} GiB/s: met"),
            Some(t) => format!(">= {t} GiB/s: NOT met"),
            None => "(context)".to_string(),
        };
        let rate = |time| match tally.records {
            0 => "-".to_string(),
            n => format!("{:.0}", per_sec(n, time)),
        };
        println!(
            "{name:<34} {:>13} {:>13} {:>10.1} {:>10.1}  {best_gib:>10.3}  {verdict}",
            rate(best),
            rate(median),
            per_sec(bytes, best) / MIB,
            per_sec(bytes, median) / MIB,
        );
        if tally.records > 0 {
            decoded.push(tally);
        } else {
            println!();
            println!("baseline word sum: {:#018x}", tally.checksum);
        }
    }

    // Every decoder must have seen the same records and fields.
    assert!(decoded.windows(2).all(|w| w[0] == w[1]), "decoders disagree: {decoded:?}");
    if let Some(tally) = decoded.first() {
        assert_eq!(tally.records, mix.total(), "decoded record count");
        println!(
            "checksum of decoded fields: {:#018x} over {} records ({} decoders agree)",
            tally.checksum,
            tally.records,
            decoded.len()
        );
    }

    file_paths(&log, mix.total(), runs, full);
}

/// The readers of a log file, timed in CPU time (user + system, as FreeBSD's numbers are):
/// `pmcstat -R`'s text dump loop and, with the `capi` feature, a pmclog(3) C-API read loop.
/// `PMCLOG_BENCH_KEEP=PATH` keeps the log file there (e.g. for pmcstat's report benchmark).
fn file_paths(log: &[u8], records: u64, runs: usize, full: bool) {
    let keep = std::env::var_os("PMCLOG_BENCH_KEEP").map(std::path::PathBuf::from);
    let path = keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("pmclog-bench-{}.log", std::process::id()))
    });
    std::fs::write(&path, log).expect("writing the benchmark log");
    type FilePath = (&'static str, f64, fn(&std::path::Path) -> u64);
    // Without `capi` nothing is pushed below.
    #[cfg_attr(not(feature = "capi"), allow(unused_mut))]
    let mut file_paths: Vec<FilePath> =
        vec![("(f) text dump, pmcstat -R's loop", 400.0 * MIB, dump_file)];
    #[cfg(feature = "capi")]
    file_paths.push(("(g) pmclog(3) C API read loop", 7.0 * GIB, capi_read_file));
    println!();
    println!(
        "{:<34} {:>13} {:>10} {:>10}  target (in CPU time)",
        "from the file", "rec/CPU-s", "MiB/CPU-s", "GiB/CPU-s"
    );
    for (name, target, read) in file_paths {
        let mut best = f64::MAX;
        for _ in 0..runs {
            let before = cpu_seconds();
            let seen = black_box(read(&path));
            best = best.min(cpu_seconds() - before);
            assert_eq!(seen, records, "{name}: records read");
        }
        let per_sec = log.len() as f64 / best.max(1e-9);
        let verdict = match () {
            _ if !full || cfg!(debug_assertions) => "(targets apply to `cargo bench`)".to_owned(),
            _ if per_sec >= target => format!(">= {:.0} MiB/s: met", target / MIB),
            _ => format!(">= {:.0} MiB/s: NOT met", target / MIB),
        };
        println!(
            "{name:<34} {:>13.0} {:>10.1} {:>10.3}  {verdict}",
            records as f64 / best.max(1e-9),
            per_sec / MIB,
            per_sec / GIB
        );
    }
    #[cfg(not(feature = "capi"))]
    println!("(the pmclog(3) C-API loop runs with `--features capi`)");
    if keep.is_none() {
        let _ = std::fs::remove_file(&path);
    }
}

/// CPU time of this process so far (user + system), in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: an all-zero rusage is valid for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid local.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// (f) What `pmcstat -R FILE` does without an analysis (`pmclog::dump_reader`'s loop): the text
/// dump of the file, into a sink. Returns the records read.
fn dump_file(path: &std::path::Path) -> u64 {
    let file = std::fs::File::open(path).unwrap();
    let mut out = CountingSink(0);
    let mut dump = pmclog::TextDump::new();
    let mut reader = LogReader::new(file);
    while let Some(entry) = reader.next_entry().expect("the benchmark log is well-formed") {
        dump.write_entry(&mut out, &entry).unwrap();
    }
    black_box(out.0);
    reader.count()
}

/// A writer that only counts bytes (the dump's output is not the point).
struct CountingSink(u64);

impl std::io::Write for CountingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// (g) A pmclog(3) C client: `pmclog_open(fd)`, `pmclog_read` until it returns -1. Returns the
/// records read.
#[cfg(feature = "capi")]
fn capi_read_file(path: &std::path::Path) -> u64 {
    use pmclog::capi::{PMCLOG_EOF, pmclog_close, pmclog_ev, pmclog_open, pmclog_read};
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).unwrap();
    let mut ev: Box<pmclog_ev> = Box::default();
    let mut records = 0;
    // SAFETY: the descriptor stays open while the parser reads it; `ev` is a valid event.
    unsafe {
        let parser = pmclog_open(file.as_raw_fd());
        assert!(!parser.is_null());
        while pmclog_read(parser, &mut *ev) == 0 {
            records += 1;
            black_box(ev.pl_type);
        }
        assert_eq!(ev.pl_state, PMCLOG_EOF, "the benchmark log is malformed");
        pmclog_close(parser);
    }
    // CLOSELOG ends the loop with PMCLOG_EOF: a record all the same.
    records + 1
}

/// What one decoding pass saw: how many records, and a sum over every decoded field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tally {
    records: u64,
    checksum: u64,
}

impl Tally {
    fn add(&mut self, entry: &Entry<'_>) {
        self.records += 1;
        self.checksum = self.checksum.rotate_left(5) ^ fold_entry(entry);
    }
}

/// Folds every field of an entry into one word. Strings count by length and first byte; program
/// counters are all added up.
#[inline]
fn fold_entry(entry: &Entry<'_>) -> u64 {
    let text = |s: &[u8]| s.len() as u64 ^ u64::from(s.first().copied().unwrap_or(0)) << 32;
    let header = entry.offset ^ entry.count.wrapping_mul(3) ^ entry.tsc ^ entry.raw.len() as u64;
    let body = match &entry.record {
        Record::CloseLog => 1,
        Record::DropNotify => 2,
        Record::Initialize(r) => {
            u64::from(r.version ^ r.cpu_type)
                ^ r.tsc_freq
                ^ r.time_sec as u64
                ^ r.time_nsec as u64
                ^ text(r.cpuid)
        }
        Record::PmcAllocate(r) => u64::from(r.pmcid ^ r.event ^ r.flags) ^ r.rate,
        Record::PmcAllocateDyn(r) => {
            u64::from(r.pmcid ^ r.event ^ r.flags)
                ^ r.rate
                ^ text(r.name)
                ^ matches!(r.layout, DynLayout::Kernel) as u64
        }
        Record::PmcAttach(r) => u64::from(r.pmcid) ^ r.pid as u64 ^ text(r.path),
        Record::PmcDetach(r) => u64::from(r.pmcid) ^ r.pid as u64,
        Record::ProcCsw(r) => r.value ^ u64::from(r.pmcid) ^ r.pid as u64 ^ (r.tid as u64) << 20,
        Record::ProcExec(r) => {
            r.pid as u64 ^ u64::from(r.pmcid) ^ r.base_addr ^ r.dyn_addr ^ text(r.path)
        }
        Record::ProcExit(r) => u64::from(r.pmcid) ^ r.pid as u64 ^ r.value,
        Record::ProcFork(r) => r.old_pid as u64 ^ (r.new_pid as u64) << 20,
        Record::SysExit(r) => r.pid as u64,
        Record::UserData(r) => u64::from(r.data),
        Record::MapIn(r) => r.pid as u64 ^ r.start ^ text(r.path),
        Record::MapOut(r) => r.pid as u64 ^ r.start ^ r.end,
        Record::Callchain(r) => {
            let pcs = r.pcs.iter().fold(0u64, u64::wrapping_add);
            pcs ^ r.pid as u64
                ^ (r.tid as u64) << 20
                ^ u64::from(r.pmcid)
                ^ u64::from(r.cpuflags.0) << 7
                ^ r.pcs.len() as u64
        }
        Record::ThrCreate(r) => r.tid as u64 ^ r.pid as u64 ^ u64::from(r.flags) ^ text(r.name),
        Record::ThrExit(r) => r.tid as u64,
        Record::ProcCreate(r) => r.pid as u64 ^ u64::from(r.flags) ^ text(r.comm),
    };
    header.wrapping_add(body)
}

/// (a) The whole log in memory.
fn decode_in_memory(log: &[u8]) -> Tally {
    let mut tally = Tally { records: 0, checksum: 0 };
    for item in Records::new(log) {
        match item {
            Ok(entry) => tally.add(&entry),
            Err(e) => panic!("the benchmark log is malformed: {e}"),
        }
    }
    tally
}

/// (b), (d) The streaming decoder fed `chunk` bytes at a time.
fn decode_streaming(log: &[u8], chunk: usize) -> Tally {
    let mut tally = Tally { records: 0, checksum: 0 };
    let mut decoder = StreamDecoder::new();
    'chunks: for piece in log.chunks(chunk) {
        let mut rest = piece;
        loop {
            let (used, step) = decoder.next(rest);
            rest = &rest[used..];
            match step {
                Step::Record(entry) => tally.add(&entry),
                Step::NeedData => break,
                Step::Eof => break 'chunks,
                Step::Error(e) => panic!("the benchmark log is malformed: {e}"),
            }
        }
    }
    match decoder.end_of_input() {
        Step::Error(e) => panic!("the benchmark log is malformed: {e}"),
        _ => tally,
    }
}

/// (c) `LogReader` over an in-memory `io::Read`.
fn decode_reader(log: &[u8]) -> Tally {
    let mut tally = Tally { records: 0, checksum: 0 };
    let mut reader = LogReader::new(Cursor::new(log));
    loop {
        match reader.next_entry() {
            Ok(Some(entry)) => tally.add(&entry),
            Ok(None) => return tally,
            Err(e) => panic!("the benchmark log is malformed: {e}"),
        }
    }
}

/// Not a decoder: the cost of reading every byte once, as a ceiling for the others.
fn scan_words(log: &[u8]) -> Tally {
    let sum = log
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
        .fold(0u64, u64::wrapping_add);
    Tally { records: 0, checksum: sum }
}

fn best_and_median(times: &mut [Duration]) -> (Duration, Duration) {
    times.sort();
    (times[0], times[times.len() / 2])
}

// ---------------------------------------------------------------------------------------------
// The synthetic log.

/// xorshift64*: deterministic, fast, good enough to pick record kinds and addresses.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi` (the modulo bias is irrelevant here).
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.next() as usize % items.len()]
    }
}

/// How many records of each type the log holds, and how many CALLCHAIN frames.
struct Mix {
    counts: [u64; 21],
    frames: u64,
}

impl Mix {
    fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

const EXECUTABLES: &[&[u8]] = &[
    b"/usr/bin/make",
    b"/usr/local/bin/cc",
    b"/usr/local/llvm19/bin/clang-19",
    b"/usr/local/bin/python3.11",
    b"/bin/sh",
    b"/usr/sbin/nginx",
    b"/usr/local/libexec/postgresql/postgres",
    b"/usr/local/lib/firefox/firefox",
];

const LIBRARIES: &[&[u8]] = &[
    b"/lib/libc.so.7",
    b"/lib/libthr.so.3",
    b"/lib/libm.so.5",
    b"/usr/lib/libc++.so.1",
    b"/lib/libcxxrt.so.1",
    b"/lib/libgcc_s.so.1",
    b"/usr/local/lib/libpython3.11.so.1.0",
    b"/usr/local/lib/libssl.so.3",
    b"/usr/local/lib/libcrypto.so.3",
    b"/usr/local/llvm19/lib/libLLVM.so.19.1",
    b"/libexec/ld-elf.so.1",
    b"/boot/kernel/kernel",
    b"/boot/kernel/zfs.ko",
];

/// A process the samples come from.
struct Process {
    pid: i32,
    tids: [i32; 4],
    /// Base of its text; user PCs fall in the 64 MiB above it.
    text: u64,
}

const PMC_SAMPLING: u32 = 0x2010_0000;
const PMC_COUNTING: u32 = 0x2110_0001;
const PMC_SOFT: u32 = 0x1010_0002;
const KERNEL_TEXT: u64 = 0xFFFF_FFFF_8020_0000;

/// Builds a log of at least `min_bytes`: INITIALIZE, the PMCs and attaches, then samples with a
/// PROCEXEC or MAP_IN about one record in 200 and a PROCCSW one in 50, then CLOSELOG.
fn generate(min_bytes: usize, seed: u64) -> (Vec<u8>, Mix) {
    let mut rng = Rng(seed);
    let mut log = Vec::with_capacity(min_bytes + 2 * MAX_RECORD_LEN);
    let mut mix = Mix { counts: [0; 21], frames: 0 };
    let mut scratch = [0u8; MAX_RECORD_LEN];
    let mut tsc = 0x0000_1234_5678_0000u64;
    let mut push = |log: &mut Vec<u8>, record: Record<'_>, rng: &mut Rng| {
        tsc += rng.range(500, 60_000);
        let len = encode(&record, tsc, &mut scratch).expect("benchmark record encodes");
        log.extend_from_slice(&scratch[..len]);
        mix.counts[usize::from(record.record_type().code())] += 1;
        if let Record::Callchain(cc) = record {
            mix.frames += cc.pcs.len() as u64;
        }
    };

    let init = Initialize {
        version: 0x0A00_0000,
        cpu_type: 0x98,
        tsc_freq: 2_893_437_000,
        time_sec: 1_767_225_600,
        time_nsec: 123_456_789,
        cpuid: b"GenuineIntel-6-85-7",
    };
    push(&mut log, Record::Initialize(init), &mut rng);
    for (pmcid, event, flags, rate) in
        [(PMC_SAMPLING, 0x10001, 0x0000_1080, 65_536), (PMC_COUNTING, 0x10000, 0x0000_0400, 0)]
    {
        let alloc = PmcAllocate { pmcid, event, flags, rate };
        push(&mut log, Record::PmcAllocate(alloc), &mut rng);
    }
    let soft = PmcAllocateDyn {
        pmcid: PMC_SOFT,
        event: 0x20003,
        flags: 0x1000,
        rate: 1000,
        name: b"CLOCK.PROF",
        layout: DynLayout::Kernel,
    };
    push(&mut log, Record::PmcAllocateDyn(soft), &mut rng);

    let mut processes: Vec<Process> = (0..24)
        .map(|i| Process {
            pid: 1000 + 37 * i,
            tids: [0, 1, 2, 3].map(|t| 100_000 + 1000 * i + t),
            text: 0x0000_0000_0020_0000 + ((i as u64) << 32),
        })
        .collect();
    for p in &processes[..3] {
        let path = rng.pick(EXECUTABLES);
        let attach = PmcAttach { pmcid: PMC_COUNTING, pid: p.pid, path };
        push(&mut log, Record::PmcAttach(attach), &mut rng);
    }

    let mut pcs = [0u64; 64];
    let mut next_pid = 5000;
    while log.len() < min_bytes {
        let roll = rng.next() % 1000;
        let p_index = rng.next() as usize % processes.len();
        if roll < 5 {
            // One record in 200: a process is replaced by a new one, or maps a library.
            if rng.next() % 3 == 0 {
                processes[p_index].pid = next_pid;
                next_pid += 1;
                let p = &processes[p_index];
                let exec = ProcExec {
                    pid: p.pid,
                    pmcid: PMC_SAMPLING,
                    base_addr: 0x0000_0008_0100_0000 + (rng.next() & 0xFFFF_F000),
                    dyn_addr: p.text,
                    path: rng.pick(EXECUTABLES),
                };
                push(&mut log, Record::ProcExec(exec), &mut rng);
            } else {
                let p = &processes[p_index];
                let map = MapIn {
                    pid: p.pid,
                    start: 0x0000_0008_0000_0000 + (rng.next() & 0x0FFF_F000),
                    path: rng.pick(LIBRARIES),
                };
                push(&mut log, Record::MapIn(map), &mut rng);
            }
        } else if roll < 25 {
            let p = &processes[p_index];
            let csw = ProcCsw {
                value: rng.range(1_000, 50_000_000),
                pmcid: PMC_COUNTING,
                pid: p.pid,
                tid: rng.pick(&p.tids),
            };
            push(&mut log, Record::ProcCsw(csw), &mut rng);
        } else {
            let p = &processes[p_index];
            let depth = rng.range(8, 64) as usize;
            // A third of the samples land in the kernel: a few kernel frames, then user frames.
            let user = rng.next() % 3 != 0;
            let kernel_frames = if user { 0 } else { rng.range(2, 8) as usize };
            for (i, pc) in pcs[..depth].iter_mut().enumerate() {
                *pc = if i < kernel_frames {
                    KERNEL_TEXT + (rng.next() & 0x01FF_FFFF)
                } else {
                    p.text + (rng.next() & 0x03FF_FFFF)
                };
            }
            let cc = Callchain {
                pid: p.pid,
                tid: rng.pick(&p.tids),
                pmcid: PMC_SAMPLING,
                cpuflags: CallchainFlags::new(rng.range(0, 7) as u16, u16::from(user)),
                pcs: ProgramCounters::from_words(&pcs[..depth]),
            };
            push(&mut log, Record::Callchain(cc), &mut rng);
        }
    }
    push(&mut log, Record::CloseLog, &mut rng);
    (log, mix)
}

fn print_log_summary(log: &[u8], mix: &Mix, generated: Duration) {
    let total = mix.total();
    println!(
        "log: {} bytes ({:.1} MiB), {} records, {:.1} bytes/record on average; built in {:.2} s",
        log.len(),
        log.len() as f64 / MIB,
        total,
        log.len() as f64 / total as f64,
        generated.as_secs_f64()
    );
    let mut parts = Vec::new();
    for code in 0..=20u8 {
        let count = mix.counts[usize::from(code)];
        if count > 0 {
            let name = RecordType::from_code(code).map_or("?", RecordType::name);
            parts.push(format!("{name} {count} ({:.2}%)", 100.0 * count as f64 / total as f64));
        }
    }
    println!("mix: {}", parts.join(", "));
    let callchains = mix.counts[usize::from(RecordType::Callchain.code())];
    println!(
        "callchain frames: {} ({:.1} per CALLCHAIN record, depth uniform in 8..=64)",
        mix.frames,
        mix.frames as f64 / callchains as f64
    );
}
