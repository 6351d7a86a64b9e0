//! How long the profile engine takes to name the samples of a large binary with DWARF: the
//! benchmark binary itself (built with debug information), sampled at addresses spread over its
//! code, read into a profile with and without source lines (`-F` and `--pprof` read lines).
//!
//! `cargo bench -p pmcprof --bench symbolize` prints the binary's size and the time of each
//! read; `cargo test --benches` runs it on fewer samples (a smoke run).

use std::time::Instant;

use object::{Object, ObjectSection};
use pmclog::{Callchain, CallchainFlags, Initialize, MapIn, PmcAllocate, ProgramCounters, Record};
use pmcprof::{Profile, ResolveOptions};

/// A log of `samples` one-frame samples of pid 1, whose only mapping is `path` at `base`, at
/// the link-time addresses `addresses` (cycled).
fn log(path: &str, base: u64, addresses: &[u64], samples: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; pmclog::MAX_RECORD_LEN];
    let mut push = |record: &Record<'_>| {
        let len = pmclog::encode(record, 0, &mut buf).expect("encode");
        bytes.extend_from_slice(&buf[..len]);
    };
    push(&Record::Initialize(Initialize {
        version: 0x0A00_0000,
        cpu_type: 0x98,
        tsc_freq: 1_000_000_000,
        time_sec: 0,
        time_nsec: 0,
        cpuid: b"GenuineIntel-6-55",
    }));
    push(&Record::PmcAllocate(PmcAllocate { pmcid: 0x100, event: 0x10000, flags: 0x10, rate: 1 }));
    push(&Record::MapIn(MapIn { pid: 1, start: base, path: path.as_bytes() }));
    for i in 0..samples {
        let pc = [base + addresses[i % addresses.len()]];
        push(&Record::Callchain(Callchain {
            pid: 1,
            tid: 1,
            pmcid: 0x100,
            cpuflags: CallchainFlags::new(0, 1),
            pcs: ProgramCounters::from_words(&pc),
        }));
    }
    bytes
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let exe = std::env::current_exe().expect("the benchmark's path");
    let data = std::fs::read(&exe).expect("read the benchmark binary");
    let file = object::File::parse(&*data).expect("an ELF file");
    let text = file.section_by_name(".text").expect("a .text section");
    let dwarf = file.section_by_name(".debug_info").map_or(0, |s| s.size());
    let distinct = if quick { 200 } else { 20_000 };
    let samples = if quick { 1_000 } else { 200_000 };
    let step = (text.size() / distinct as u64).max(1);
    let addresses: Vec<u64> = (0..distinct as u64).map(|i| text.address() + i * step).collect();
    // A PIE's link-time addresses start at 0: map it at a typical load address.
    let base = if file.kind() == object::ObjectKind::Executable { 0 } else { 0x5555_5555_0000 };
    let bytes = log(exe.to_str().expect("a UTF-8 path"), base, &addresses, samples);
    println!(
        "binary: {:.1} MB ({:.1} MB of .debug_info); {samples} samples at {distinct} addresses",
        data.len() as f64 / 1e6,
        dwarf as f64 / 1e6
    );
    drop(data);
    for lines in [false, true] {
        let opts = ResolveOptions { lines, ..ResolveOptions::default() };
        let start = Instant::now();
        let profile = Profile::from_log(&bytes, &opts).expect("the log reads");
        let elapsed = start.elapsed();
        let named = profile.frames().iter().filter(|f| f.symbol.is_some()).count();
        let with_lines = if lines {
            let pmc = &profile.pmcs()[0];
            let located = pmc.location_stacks().filter(|(s, _)| !profile.source(&s[0]).is_empty());
            format!(", {} addresses with a source line", located.count())
        } else {
            String::new()
        };
        println!(
            "symbolise {}: {:.1} ms ({} functions named{with_lines})",
            if lines { "with lines" } else { "functions only" },
            elapsed.as_secs_f64() * 1e3,
            named
        );
        assert!(named > 0, "the benchmark names its own functions");
    }
}
