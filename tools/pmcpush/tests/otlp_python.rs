//! A second, independent OTLP decoder: a receiver in Python (`python/otlp_receiver.py`) on
//! PyPI's `opentelemetry-proto` and `grpcio`, over gRPC and HTTP. It must read every window as
//! the Rust receivers do. Skipped, with a note, when python3 or those packages are absent
//! (`pip install opentelemetry-proto grpcio`).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use pmcpush::{Backend, Pusher, Target};

/// The Python receiver and the lines it prints.
struct PythonReceiver {
    child: Child,
    lines: mpsc::Receiver<String>,
    port: u16,
}

impl Drop for PythonReceiver {
    fn drop(&mut self) {
        // It exits by itself once it has its requests; this only ends one a failed test left.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the receiver for `count` requests; `None` (with a note) when it cannot run here.
fn python_receiver(protocol: &str, count: usize) -> Option<PythonReceiver> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/otlp_receiver.py");
    let mut child = match Command::new("python3")
        .args([script, protocol, &count.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("skipped: python3 not run ({e})");
            return None;
        }
    };
    let (tx, lines) = mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = lines.recv_timeout(Duration::from_secs(60)).expect("the receiver's first line");
    if let Some(missing) = first.strip_prefix("missing: ") {
        eprintln!(
            "skipped: the Python package {missing} is absent (pip install opentelemetry-proto grpcio)"
        );
        return None;
    }
    let port = first.strip_prefix("port ").expect("`port N`").parse().unwrap();
    Some(PythonReceiver { child, lines, port })
}

impl PythonReceiver {
    /// The lines of the next request, up to `end`.
    fn request(&self) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            let line = self.lines.recv_timeout(Duration::from_secs(60)).expect("a request's lines");
            if line == "end" {
                return out;
            }
            out.push(line);
        }
    }
}

/// [`expected_summary`] in the receiver's words.
fn expected_lines(n: u64) -> Vec<String> {
    let summary = expected_summary(n);
    let mut lines: Vec<String> =
        summary.resource.iter().map(|(k, v)| format!("resource {k}={v}")).collect();
    for (file, start, limit, offset, build_id) in &summary.mappings {
        lines.push(format!("mapping {file} {start:#x} {limit:#x} {offset:#x} {build_id}"));
    }
    for (((kind, unit), samples), (time, duration, period_type, period)) in
        summary.profiles.iter().zip(&summary.times)
    {
        lines.push(format!(
            "profile {kind}/{unit} time={time} duration={duration} period={period_type}/{period}"
        ));
        lines.extend(samples.iter().map(|(stack, value)| format!("sample {stack} {value}")));
        lines.extend(summary.attributes.iter().map(|(k, v)| format!("attribute {k}={v}")));
    }
    lines
}

fn python_reads_what_rust_reads(backend: Backend, protocol: &str) {
    let Some(receiver) = python_receiver(protocol, 2) else { return };
    let target = Target::new(backend, &format!("http://127.0.0.1:{}", receiver.port));
    let mut config = quick_config(target);
    // Gzipped, as a fleet would send it (grpcio and the HTTP receiver both decompress).
    config.convert.gzip = true;
    let pusher = Pusher::start(config).unwrap();
    pusher.offer(window(0));
    pusher.offer(window(1));
    let status = pusher.shutdown(Duration::from_secs(30));
    assert_eq!((status.windows_sent, status.dropped.total()), (2, 0), "{status}");
    assert_eq!(receiver.request(), expected_lines(0));
    assert_eq!(receiver.request(), expected_lines(1));
}

#[test]
fn python_grpc_receiver_reads_the_windows_as_the_rust_one_does() {
    python_reads_what_rust_reads(Backend::OtlpGrpc, "grpc");
}

#[test]
fn python_http_receiver_reads_the_windows_as_the_rust_one_does() {
    python_reads_what_rust_reads(Backend::OtlpHttp, "http");
}
