//! Parca `WriteRaw`, against a tonic receiver generated from Parca's profile store definition:
//! the series labels, the pprof bytes as pmcstat wrote them, and credentials.

mod common;

use std::time::Duration;

use common::*;
use pmcpush::{Auth, Backend, Pusher, Target};

#[test]
fn write_raw_carries_the_labels_and_the_profile() {
    let receiver = parca_receiver(0);
    let mut config = quick_config(Target::new(Backend::Parca, &receiver.url()));
    config.connection.auth = Auth::Bearer("parca-token".into());
    let pusher = Pusher::start(config).unwrap();
    assert!(pusher.offer(window(0)));
    let status = pusher.shutdown(Duration::from_secs(30));
    assert_eq!((status.windows_sent, status.dropped.total()), (1, 0), "{status}");

    let received = receiver.received.lock().unwrap();
    let request = &received[0];
    assert_eq!(request.metadata.get("authorization").unwrap(), "Bearer parca-token");
    assert!(request.message.normalized);
    let [series] = request.message.series.as_slice() else { panic!("one series") };
    let labels: Vec<(&str, &str)> = series
        .labels
        .as_ref()
        .unwrap()
        .labels
        .iter()
        .map(|l| (l.name.as_str(), l.value.as_str()))
        .collect();
    assert_eq!(
        &labels[..3],
        [("__name__", "instructions"), ("service_name", "db"), ("host_name", "h1")]
    );
    assert!(labels.contains(&("process_pid", "4242")), "{labels:?}");
    assert!(labels.contains(&("env", "test")), "{labels:?}");
    let [sample] = series.samples.as_slice() else { panic!("one sample") };
    assert_eq!(sample.raw_profile, sample_pprof());
    let profile = pmcpush::pprof::decode(&sample.raw_profile).unwrap();
    let build_ids: Vec<&str> = profile
        .mapping
        .iter()
        .map(|m| profile.string_table[m.build_id as usize].as_str())
        .collect();
    assert_eq!(build_ids, [APP_BUILD_ID, LIBC_BUILD_ID]);
    let total: i64 = profile.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(total, 100);
}
