//! `pmcstat -R log --firefox FILE` end to end: the profile of a log of the simulated machine's
//! `hot-cold` (100 samples: 90 in hot, 10 in cold, both called by main) in the Firefox
//! Profiler's processed format, read back as JSON; gzipped when the name ends in `.gz`; and
//! written by pmcstat's output rules (a device stays a device).

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use hwpmc_tests::{Host, arg, files_under, pmcstat};
use serde_json::Value;

/// Samples `hot-cold` every 100 000 instructions into `dir/hot-cold.log`.
fn sample_hot_cold(dir: &Path) -> PathBuf {
    let log = dir.join("hot-cold.log");
    let run = pmcstat(
        Host::Sim,
        &["-n", "100000", "-P", "INST_RETIRED.ANY", "-O", arg(&log), "hot-cold"],
    );
    run.assert_status(0);
    log
}

/// The samples of a thread as call chains of function names, innermost first (`hot<main`):
/// stack → stackTable (frame, prefix) → frameTable.func → funcTable.name → stringArray.
fn chains(thread: &Value) -> Vec<String> {
    let column = |table: &str, name: &str| thread[table][name].as_array().unwrap().clone();
    let (frame, prefix) = (column("stackTable", "frame"), column("stackTable", "prefix"));
    let (func, names) = (column("frameTable", "func"), column("funcTable", "name"));
    let strings = thread["stringArray"].as_array().unwrap();
    column("samples", "stack")
        .iter()
        .map(|stack| {
            let mut chain = Vec::new();
            let mut at = stack.as_u64();
            while let Some(index) = at.map(|i| i as usize) {
                let f = func[frame[index].as_u64().unwrap() as usize].as_u64().unwrap() as usize;
                chain.push(strings[names[f].as_u64().unwrap() as usize].as_str().unwrap());
                at = prefix[index].as_u64();
            }
            chain.join("<")
        })
        .collect()
}

/// Checks the profile of hot-cold: one process and thread, the event in the product, every
/// sample with its callers, at increasing times.
fn check_hot_cold(v: &Value) {
    assert_eq!(v["meta"]["product"], "hot-cold (INSTR_RETIRED_ANY)");
    let threads = v["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 1);
    let thread = &threads[0];
    assert_eq!(thread["processName"], "hot-cold");
    assert_eq!(thread["samples"]["length"].as_u64(), Some(100));
    let chains = chains(thread);
    let count = |name: &str| chains.iter().filter(|c| *c == name).count();
    assert_eq!((count("hot<main"), count("cold<main")), (90, 10), "{chains:?}");
    let deltas = thread["samples"]["timeDeltas"].as_array().unwrap();
    assert!(deltas.iter().all(|d| d.as_f64().unwrap() >= 0.0));
    assert!(deltas.iter().skip(1).any(|d| d.as_f64().unwrap() > 0.0), "the samples have times");
}

#[test]
fn the_firefox_profile_of_hot_cold_has_every_sample_with_its_callers() {
    let dir = tempfile::tempdir().unwrap();
    let log = sample_hot_cold(dir.path());
    let out = dir.path().join("hot-cold.json");
    pmcstat(Host::Sim, &["-q", "-R", arg(&log), "--firefox", arg(&out)]).assert_status(0);
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    check_hot_cold(&v);
    // Nothing but the log and the profile: the temporary file was renamed into place.
    assert_eq!(files_under(dir.path()), ["hot-cold.json", "hot-cold.log"]);
}

#[test]
fn a_firefox_profile_named_gz_is_gzipped() {
    let dir = tempfile::tempdir().unwrap();
    let log = sample_hot_cold(dir.path());
    let out = dir.path().join("hot-cold.json.gz");
    pmcstat(Host::Sim, &["-q", "-R", arg(&log), "--firefox", arg(&out)]).assert_status(0);
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes[..2], [0x1f, 0x8b], "gzip's magic number");
    let Ok(gunzip) = Command::new("gzip").arg("-dc").arg(&out).output() else {
        eprintln!("skipped the content: gzip is not installed");
        return;
    };
    assert!(gunzip.status.success());
    check_hot_cold(&serde_json::from_slice(&gunzip.stdout).unwrap());
}

#[test]
fn a_firefox_profile_to_a_null_device_leaves_the_device_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let log = sample_hot_cold(dir.path());
    let null = hwpmc_tests::null_device(dir.path(), "null");
    let run = pmcstat(Host::Sim, &["-q", "-R", arg(&log), "--firefox", arg(&null)]);
    run.assert_status(0).assert_no_panic();
    let kind = std::fs::symlink_metadata(&null).unwrap().file_type();
    assert!(kind.is_char_device(), "{} is no longer a device", null.display());
    assert_eq!(files_under(dir.path()), ["hot-cold.log", "null"]);
}
