//! Measurements, not checks (ignored by default; numbers vary with the machine):
//! `cargo test -p pmcpush --release --test measure -- --ignored --nocapture` prints the
//! request bytes a window costs for each backend (OTLP over gRPC: before gRPC's gzip) and the
//! time from `offer` to the backend's answer on loopback, for the tests' small window and for
//! one the size of a busy process's 10 s (2000 distinct stacks).

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::*;
use flate2::Compression;
use flate2::write::GzEncoder;
use pmcpush::pprof::proto;
use pmcpush::{Backend, Pusher, Target, Window};
use prost::Message as _;

/// 12 mappings with build IDs, 600 functions, 4000 locations, 2000 samples of stacks 8 to 24
/// deep (a deterministic generator: the same profile on every run).
fn busy_window_pprof() -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut strings = vec![String::new(), "samples".into(), "count".into()];
    let mut string = |s: String| {
        strings.push(s);
        (strings.len() - 1) as i64
    };
    let mapping: Vec<proto::Mapping> = (0..12u64)
        .map(|i| proto::Mapping {
            id: i + 1,
            memory_start: 0x40_0000 + i * 0x100_0000,
            memory_limit: 0x40_0000 + i * 0x100_0000 + 0x80_0000,
            filename: string(format!("/usr/lib/x86_64-linux-gnu/libexample{i}.so.1")),
            build_id: string(format!("{:040x}", 0x1234_5678_9abc_def0u128 * (i as u128 + 1))),
            has_functions: true,
            ..Default::default()
        })
        .collect();
    let function: Vec<proto::Function> = (0..600u64)
        .map(|i| {
            let name = string(format!("example::module{}::function_number_{i}", i % 37));
            proto::Function {
                id: i + 1,
                name,
                system_name: name,
                filename: string(format!("src/module{}.rs", i % 37)),
                start_line: (i * 7) as i64,
            }
        })
        .collect();
    let location: Vec<proto::Location> = (0..4000u64)
        .map(|i| {
            let m = next(12);
            proto::Location {
                id: i + 1,
                mapping_id: m + 1,
                address: mapping[m as usize].memory_start + next(0x80_0000),
                line: vec![proto::Line { function_id: next(600) + 1, line: next(2000) as i64 }],
                is_folded: false,
            }
        })
        .collect();
    let sample: Vec<proto::Sample> = (0..2000)
        .map(|_| proto::Sample {
            location_id: (0..8 + next(17)).map(|_| next(4000) + 1).collect(),
            value: vec![1 + next(100) as i64],
            label: vec![],
        })
        .collect();
    let profile = proto::Profile {
        sample_type: vec![proto::ValueType { r#type: 1, unit: 2 }],
        sample,
        mapping,
        location,
        function,
        string_table: strings,
        ..Default::default()
    };
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&profile.encode_to_vec()).unwrap();
    gz.finish().unwrap()
}

fn measure(backend: Backend, url: &str, pprof: &[u8], gzip: bool) {
    let mut config = quick_config(Target::new(backend, url));
    config.convert.gzip = gzip;
    let pusher = Pusher::start(config).unwrap();
    let rounds = 50u32;
    let mut latencies = Vec::new();
    for n in 0..rounds {
        let mut w = window(u64::from(n));
        w = Window::new(pprof.to_vec(), w.meta);
        let start = Instant::now();
        pusher.offer(w);
        while pusher.status().windows_sent <= u64::from(n) {
            std::thread::yield_now();
            assert!(start.elapsed() < Duration::from_secs(30), "hang guard");
        }
        latencies.push(start.elapsed());
    }
    let status = pusher.shutdown(Duration::from_secs(30));
    latencies.sort();
    println!(
        "{backend:>10}{}: {} bytes/window; offer→answer median {:?}, p90 {:?}",
        if gzip { " (gzip)" } else { "" },
        status.bytes_sent / status.windows_sent,
        latencies[latencies.len() / 2],
        latencies[latencies.len() * 9 / 10],
    );
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn bytes_per_window_and_loopback_latency() {
    for (name, pprof) in
        [("sample (3 stacks)", sample_pprof()), ("busy (2000 stacks)", busy_window_pprof())]
    {
        println!("{name}: pprof {} bytes gzipped", pprof.len());
        for gzip in [false, true] {
            let otlp_grpc = otlp_grpc_receiver(0);
            measure(Backend::OtlpGrpc, &otlp_grpc.url(), &pprof, gzip);
            let otlp_http = http_receiver(0, "/v1development/profiles");
            measure(Backend::OtlpHttp, &otlp_http.url(), &pprof, gzip);
        }
        let pyroscope = http_receiver(0, "/ingest");
        measure(Backend::Pyroscope, &pyroscope.url(), &pprof, false);
        let parca = parca_receiver(0);
        measure(Backend::Parca, &parca.url(), &pprof, false);
    }
}
