//! `pmcstat -R log --push KIND=URL`: a log cut into windows by its timestamps and pushed, here
//! to a Pyroscope ingest receiver on the loopback (a few lines over a `TcpListener`): the
//! windows' number, times and profiles, and a backend that is down.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use hwpmc_tests::{Host, arg, pmcstat};
use pmclog::{
    Callchain, CallchainFlags, Initialize, PmcAllocate, ProcExec, ProgramCounters, Record,
};
use pmcprof_fixtures::{INSTR_RETIRED_ANY, Program};

/// One request the receiver got: its path with the query, and its body.
#[derive(Debug, Clone)]
struct Request {
    target: String,
    body: Vec<u8>,
}

impl Request {
    /// The query parameters.
    fn query(&self) -> HashMap<String, String> {
        let query = self.target.split_once('?').map_or("", |(_, q)| q);
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

/// An HTTP/1.1 server on the loopback that answers every request 200 and keeps it.
fn receiver() -> (u16, Arc<Mutex<Vec<Request>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let kept = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let kept = kept.clone();
            std::thread::spawn(move || serve(stream, &kept));
        }
    });
    (port, requests)
}

/// Serves the requests of one connection (kept alive) until the client closes it.
fn serve(stream: TcpStream, kept: &Mutex<Vec<Request>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let target = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        kept.lock().unwrap().push(Request { target, body });
        stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").unwrap();
    }
}

/// A log of `p` (pid 100) at a 1 GHz TSC, configured at 1000 s: 25 samples of
/// hot ← warm ← main, one every 0.1 s from 1.0 s to 3.4 s after INITIALIZE.
fn log(p: &Program, path: &std::path::Path) {
    let mut bytes = Vec::new();
    let mut push = |record: &Record<'_>, tsc: u64| {
        let mut buf = vec![0u8; pmclog::MAX_RECORD_LEN];
        let len = pmclog::encode(record, tsc, &mut buf).unwrap();
        bytes.extend_from_slice(&buf[..len]);
    };
    let init = Initialize {
        version: 0x0A00_0000,
        cpu_type: 0x98,
        tsc_freq: 1_000_000_000,
        time_sec: 1000,
        time_nsec: 0,
        cpuid: b"GenuineIntel-6-55",
    };
    push(&Record::Initialize(init), 0);
    let allocate = PmcAllocate { pmcid: 0x100, event: INSTR_RETIRED_ANY, flags: 0x10, rate: 65536 };
    push(&Record::PmcAllocate(allocate), 10);
    let path_bytes = p.log_path().as_bytes();
    let exec = ProcExec { pid: 100, pmcid: 0, base_addr: 0, dyn_addr: 0, path: path_bytes };
    push(&Record::ProcExec(exec), 20);
    let pcs = [p.at("hot", 4), p.at("warm", 10), p.at("main", 20)];
    for i in 0..25u64 {
        let sample = Callchain {
            pid: 100,
            tid: 101,
            pmcid: 0x100,
            cpuflags: CallchainFlags::new(1, 1),
            pcs: ProgramCounters::from_words(&pcs),
        };
        push(&Record::Callchain(sample), 1_000_000_000 + i * 100_000_000);
    }
    std::fs::write(path, bytes).unwrap();
}

/// The names of the functions of the first frame of each sample, with their sample counts.
fn leaf_counts(body: &[u8]) -> HashMap<String, i64> {
    let profile = pmcpush::pprof::decode(body).expect("the body is a pprof profile");
    let name = |location_id: u64| {
        let location = profile.location.iter().find(|l| l.id == location_id).unwrap();
        let line = location.line.first().expect("a symbolised location");
        let function = profile.function.iter().find(|f| f.id == line.function_id).unwrap();
        profile.string_table[function.name as usize].clone()
    };
    let mut counts = HashMap::new();
    for sample in &profile.sample {
        *counts.entry(name(sample.location_id[0])).or_default() += sample.value[0];
    }
    counts
}

#[test]
fn a_log_is_pushed_as_windows_of_its_samples() {
    let p = Program::build(false);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.log");
    log(&p, &path);
    let (port, requests) = receiver();
    let url = format!("pyroscope=http://127.0.0.1:{port}");
    let run = pmcstat(
        Host::Linux,
        &["-R", arg(&path), "--push", &url, "--push-window", "1", "--push-service", "db"],
    );
    run.assert_status(0);
    assert!(run.stderr.contains("3 offered, 3 sent"), "{}", run.describe());
    let requests = requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 3, "{requests:?}");
    // Windows of 1 s from the first sample (1001 s); the last ends after the last (1003.4 s).
    let times: Vec<(String, String)> = requests
        .iter()
        .map(|r| {
            let q = r.query();
            assert!(r.target.starts_with("/ingest?"), "{}", r.target);
            assert!(q["name"].starts_with("db"), "{}", r.target);
            (q["from"].clone(), q["until"].clone())
        })
        .collect();
    let expected = [("1001", "1002"), ("1002", "1003"), ("1003", "1004")];
    let expected: Vec<(String, String)> =
        expected.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    assert_eq!(times, expected);
    let hot: Vec<i64> = requests.iter().map(|r| leaf_counts(&r.body)["hot"]).collect();
    assert_eq!(hot, [10, 10, 5]);
}

#[test]
fn a_backend_that_is_down_ends_the_run_with_the_windows_counted_as_dropped() {
    let p = Program::build(false);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.log");
    log(&p, &path);
    // A port nothing listens on any more: every connection is refused.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("pyroscope=http://127.0.0.1:{port}");
    let started = std::time::Instant::now();
    let run = pmcstat(
        Host::Linux,
        &["-R", arg(&path), "--push", &url, "--push-window", "1", "--push-retries", "2"],
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "{}", run.describe());
    run.assert_status(69);
    assert!(run.stderr.contains("3 offered, 0 sent"), "{}", run.describe());
    assert!(run.stderr.contains("3 dropped"), "{}", run.describe());
    assert!(run.stderr.contains("6 failed attempts"), "{}", run.describe());
}

#[test]
fn push_options_are_checked() {
    let run = pmcstat(Host::Linux, &["-R", "x.log", "--push", "zipkin=http://127.0.0.1:1"]);
    run.assert_status(64);
    assert!(run.stderr.contains("--push zipkin="), "{}", run.describe());
    let run = pmcstat(Host::Linux, &["-R", "x.log", "--push-window", "5"]);
    run.assert_status(64);
    let url = "pyroscope=http://127.0.0.1:1";
    let run = pmcstat(Host::Linux, &["-R", "x.log", "--push", url, "--push-window", "0"]);
    run.assert_status(64);
    let run = pmcstat(Host::Linux, &["-R", "x.log", "--push", url, "--top", "5"]);
    run.assert_status(64);
    // Live agent mode is not there yet: a measurement with --push is refused, not run unpushed.
    let run = pmcstat(Host::Linux, &["-S", "cpu-clock", "-l", "1", "--push", url]);
    run.assert_status(64);
    assert!(run.stderr.contains("-R file --push"), "{}", run.describe());
}
