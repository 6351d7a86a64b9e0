//! TLS: a backend whose certificate a private CA signed (made here with rcgen) is reached when
//! that CA is configured, and refused, counted, when it is not; over gRPC and HTTPS.

mod common;

use std::time::Duration;

use common::*;
use pmcpush::{Backend, Pusher, Target, TlsConfig};

/// A CA, and a certificate for 127.0.0.1 it signed: (CA PEM, server identity).
fn private_pki() -> (String, Identity) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "pmcpush test CA");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    (ca.pem(), Identity { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

/// Pushes one window to `url` trusting `ca`; the final status.
fn push_one(backend: Backend, url: &str, ca: Option<&str>) -> pmcpush::Status {
    let mut config = quick_config(Target::new(backend, url));
    config.connection.tls = TlsConfig { ca_pem: ca.map(|pem| pem.as_bytes().to_vec()) };
    config.backoff.max_attempts = 1;
    let pusher = Pusher::start(config).unwrap();
    pusher.offer(window(0));
    pusher.shutdown(Duration::from_secs(30))
}

#[test]
fn grpc_over_tls_trusts_the_configured_ca_only() {
    let (ca, identity) = private_pki();
    let receiver = otlp_grpc_receiver_with(0, Some(identity));
    let url = format!("https://{}", receiver.addr);

    let status = push_one(Backend::OtlpGrpc, &url, None);
    assert_eq!((status.windows_sent, status.dropped.retries_exhausted), (0, 1), "{status}");
    let error = status.last_error.unwrap_or_default();
    assert!(error.contains("invalid peer certificate: UnknownIssuer"), "{error}");
    assert_eq!(receiver.count(), 0);

    let status = push_one(Backend::OtlpGrpc, &url, Some(&ca));
    assert_eq!((status.windows_sent, status.dropped.total()), (1, 0), "{status}");
    assert_eq!(summarize(&receiver.received.lock().unwrap()[0].message), expected_summary(0));
}

#[test]
fn https_trusts_the_configured_ca_only() {
    let (ca, identity) = private_pki();
    let receiver = http_receiver_with(0, "/v1development/profiles", Some(identity));
    let url = format!("https://{}", receiver.addr);

    let status = push_one(Backend::OtlpHttp, &url, None);
    assert_eq!((status.windows_sent, status.dropped.retries_exhausted), (0, 1), "{status}");
    let error = status.last_error.unwrap_or_default();
    assert!(error.contains("invalid peer certificate: UnknownIssuer"), "{error}");
    assert_eq!(receiver.count(), 0);

    let status = push_one(Backend::OtlpHttp, &url, Some(&ca));
    assert_eq!((status.windows_sent, status.dropped.total()), (1, 0), "{status}");
    assert_eq!(receiver.count(), 1);
}
