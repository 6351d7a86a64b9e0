//! Pyroscope ingest, against an HTTP receiver that checks the query parameters Pyroscope reads
//! and decodes the pprof body with `go tool pprof` (an independent pprof reader).

mod common;

use std::time::Duration;

use common::*;
use pmcprof_fixtures::go_pprof;
use pmcpush::{Backend, Pusher, Target};

#[test]
fn ingest_carries_the_series_name_window_and_a_profile_go_pprof_reads() {
    let receiver = http_receiver(0, "/ingest");
    let mut config = quick_config(Target::new(Backend::Pyroscope, &receiver.url()));
    config.connection.headers.push(("X-Scope-OrgID".into(), "tenant-7".into()));
    let pusher = Pusher::start(config).unwrap();
    assert!(pusher.offer(window(2)));
    let status = pusher.shutdown(Duration::from_secs(30));
    assert_eq!((status.windows_sent, status.dropped.total()), (1, 0), "{status}");

    let received = receiver.received.lock().unwrap();
    let request = &received[0];
    assert_eq!(request.headers["x-scope-orgid"], "tenant-7");
    assert_eq!(
        request.param("name"),
        Some(
            "db{host_name=h1,host_id=0f1e2d3c4b5a69788796a5b4c3d2e1f0,process_pid=4242,\
             process_executable_name=app,thread_id=4243,thread_name=worker,\
             container_id=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef,\
             pmc_event=instructions,env=test}"
        )
    );
    let from = window_start(2).duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert_eq!(request.param("from"), Some(from.to_string().as_str()));
    assert_eq!(request.param("until"), Some((from + 10).to_string().as_str()));
    assert_eq!(request.param("format"), Some("pprof"));
    assert_eq!(request.param("sampleRate"), Some("100"));
    assert_eq!(request.param("spyName"), Some("pmcstat"));
    assert_eq!(request.body, sample_pprof(), "the profile goes as pmcstat wrote it");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ingested.pb.gz");
    std::fs::write(&file, &request.body).unwrap();
    let Some(raw) = go_pprof(&["-raw"], &file) else { return };
    // -raw prints each sample's value and its stack (location numbers, leaf first), then each
    // location's address, mapping and function, then the mappings with their build IDs.
    let section = |name: &str| -> Vec<&str> {
        raw.lines()
            .skip_while(|l| !l.starts_with(name))
            .skip(1)
            .take_while(|l| l.starts_with(' ') || l.starts_with(|c: char| c.is_ascii_digit()))
            .collect()
    };
    // Location number → (mapping number, function name).
    let locations: std::collections::HashMap<&str, (&str, &str)> = section("Locations")
        .iter()
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            (words[0].trim_end_matches(':'), (words[2], words[3]))
        })
        .collect();
    let samples: std::collections::BTreeMap<String, u64> = section("samples/count")
        .iter()
        .map(|l| {
            let (value, stack) = l.trim().split_once(':').unwrap();
            let mut names: Vec<&str> = stack.split_whitespace().map(|id| locations[id].1).collect();
            names.reverse();
            (names.join(";"), value.parse().unwrap())
        })
        .collect();
    let expected: std::collections::BTreeMap<String, u64> =
        [("main", 5), ("main;compute", 70), ("main;compute;memcpy", 25)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
    assert_eq!(samples, expected, "{raw}");
    let mapping_of = |function: &str| locations.values().find(|(_, f)| *f == function).unwrap().0;
    let mappings = section("Mappings");
    let mapping = |m: &str| {
        let number = m.trim_start_matches("M=");
        *mappings.iter().find(|l| l.starts_with(&format!("{number}:"))).unwrap()
    };
    assert!(mapping(mapping_of("main")).contains(&format!("/usr/bin/app {APP_BUILD_ID}")), "{raw}");
    assert!(mapping(mapping_of("memcpy")).contains(&format!("libc.so.6 {LIBC_BUILD_ID}")), "{raw}");
    assert!(
        raw.contains("PeriodType: instructions count") && raw.contains("Period: 65536"),
        "{raw}"
    );
}
