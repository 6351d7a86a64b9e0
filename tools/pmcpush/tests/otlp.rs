//! OTLP profiles over gRPC and HTTP/protobuf, against receivers built from the generated
//! definitions of `opentelemetry-proto` (a tonic server, and an HTTP server decoding the body
//! with prost): the decoded profiles, resource attributes, window times and credentials.

mod common;

use std::io::Read as _;
use std::time::Duration;

use common::*;
use pmcpush::opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use pmcpush::{Auth, Backend, Pusher, Target};
use prost::Message as _;

#[test]
fn grpc_windows_arrive_with_their_samples_mappings_resource_and_times() {
    grpc_windows_arrive(false);
}

#[test]
fn grpc_windows_arrive_gzipped() {
    grpc_windows_arrive(true);
}

fn grpc_windows_arrive(gzip: bool) {
    let receiver = otlp_grpc_receiver(0);
    let mut config = quick_config(Target::new(Backend::OtlpGrpc, &receiver.url()));
    config.convert.gzip = gzip;
    config.connection.auth = Auth::Bearer("s3cret".into());
    config.connection.headers.push(("X-Tenant".into(), "team-a".into()));
    let pusher = Pusher::start(config).unwrap();
    assert!(pusher.offer(window(0)));
    assert!(pusher.offer(window(1)));
    let status = pusher.shutdown(Duration::from_secs(30));
    assert_eq!((status.windows_sent, status.dropped.total()), (2, 0), "{status}");
    assert!(status.bytes_sent > 0);

    let received = receiver.received.lock().unwrap();
    assert_eq!(received.len(), 2);
    for (n, request) in received.iter().enumerate() {
        assert_eq!(summarize(&request.message), expected_summary(n as u64));
        assert_eq!(request.metadata.get("authorization").unwrap(), "Bearer s3cret");
        assert_eq!(request.metadata.get("x-tenant").unwrap(), "team-a");
        let encoding = request.metadata.get("grpc-encoding").map(|v| v.to_str().unwrap());
        assert_eq!(encoding, gzip.then_some("gzip"));
    }
}

#[test]
fn http_windows_arrive_as_protobuf_on_the_profiles_path() {
    http_windows_arrive(false);
}

#[test]
fn http_windows_arrive_gzipped() {
    http_windows_arrive(true);
}

fn http_windows_arrive(gzip: bool) {
    let receiver = http_receiver(0, "/v1development/profiles");
    let mut config = quick_config(Target::new(Backend::OtlpHttp, &receiver.url()));
    config.convert.gzip = gzip;
    config.connection.auth = Auth::Basic { user: "agent".into(), password: "pw".into() };
    let pusher = Pusher::start(config).unwrap();
    assert!(pusher.offer(window(3)));
    let status = pusher.shutdown(Duration::from_secs(30));
    assert_eq!((status.windows_sent, status.dropped.total()), (1, 0), "{status}");

    let received = receiver.received.lock().unwrap();
    let request = &received[0];
    assert_eq!(request.headers["content-type"], "application/x-protobuf");
    assert_eq!(request.headers["authorization"], "Basic YWdlbnQ6cHc=");
    assert_eq!(status.bytes_sent, request.body.len() as u64);
    let body = if gzip {
        assert_eq!(request.headers["content-encoding"], "gzip");
        let mut body = Vec::new();
        flate2::read::GzDecoder::new(request.body.as_slice()).read_to_end(&mut body).unwrap();
        body
    } else {
        assert!(!request.headers.contains_key("content-encoding"));
        request.body.clone()
    };
    let message = ExportProfilesServiceRequest::decode(body.as_slice()).unwrap();
    assert_eq!(summarize(&message), expected_summary(3));
}

/// The receiver keeps the window but refuses a profile of it: counted as sent, counted as
/// partly rejected, its words reported, and not sent again.
fn partial_success_is_reported(backend: Backend) {
    let (url, script, received): (String, _, Box<dyn Fn() -> usize>) = match backend {
        Backend::OtlpGrpc => {
            let r = otlp_grpc_receiver(0);
            (r.url(), std::sync::Arc::clone(&r.script), Box::new(move || r.count()))
        }
        _ => {
            let r = http_receiver(0, "/v1development/profiles");
            (r.url(), std::sync::Arc::clone(&r.script), Box::new(move || r.count()))
        }
    };
    script.push(&[Answer::Partial(1)]);
    let pusher = Pusher::start(quick_config(Target::new(backend, &url))).unwrap();
    pusher.offer(window(0));
    let status = pusher.shutdown(Duration::from_secs(30));
    assert_eq!(
        (status.windows_sent, status.windows_partially_rejected, status.failed_attempts),
        (1, 1, 0),
        "{backend}: {status}"
    );
    let said = status.last_error.unwrap_or_default();
    assert!(
        said.contains("rejected 1 profile(s): sample type not supported by the test"),
        "{said}"
    );
    assert_eq!(received(), 1);
}

#[test]
fn a_grpc_partial_success_is_counted_and_reported() {
    partial_success_is_reported(Backend::OtlpGrpc);
}

#[test]
fn an_http_partial_success_is_counted_and_reported() {
    partial_success_is_reported(Backend::OtlpHttp);
}
