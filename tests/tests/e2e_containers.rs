//! pmcstat on the Linux host sampling a program that runs in another mount namespace (as in a
//! container): `unshare -m --propagation private` with the program bind-mounted at a path that
//! exists only inside the namespace, or that holds another program on the host. The profile
//! must name the program's own functions and carry its whole CFI stacks, never the functions of
//! the host's file of the same name.
//!
//! The mounts are made inside a private mount namespace in a temporary directory, so nothing
//! leaks to the host. Without the right to make one (not root) the tests say so and pass.

use std::path::Path;
use std::process::Command;

use hwpmc_tests::{Host, Run, arg, c_program, c_program_with, parse_folded, parse_top, pmcstat};

/// Whether this user may make a private mount namespace; prints why not.
fn may_unshare() -> bool {
    let out = Command::new("unshare").args(["-m", "--propagation", "private", "true"]).output();
    match out {
        Ok(out) if out.status.success() => true,
        Ok(out) => {
            eprintln!(
                "skipped: `unshare -m` is not permitted here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            false
        }
        Err(e) => {
            eprintln!("skipped: unshare cannot run: {e}");
            false
        }
    }
}

/// `chain` built without frame pointers (only its CFI gives whole stacks), copied into `dir`.
fn chain_in(dir: &Path) -> std::path::PathBuf {
    let program = c_program_with("chain", "chain-O2-nofp", &["-O2", "-fomit-frame-pointer"]);
    std::fs::create_dir_all(dir).unwrap();
    let copy = dir.join("chain");
    std::fs::copy(&program, &copy).unwrap();
    copy
}

/// A different program (`hot`) at `path` on the host.
fn decoy_at(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::copy(c_program("hot"), path).unwrap();
}

/// Samples `script` run by `sh` in a new private mount namespace (it ends by executing the
/// program), with CFI stacks, and returns the log's folded stacks, flat profile and the
/// analysis runs.
fn sample_in_namespace(dir: &Path, script: &str) -> (Vec<(Vec<String>, u64)>, Run, Run) {
    let (log, folded) = (dir.join("ns.log"), dir.join("ns.folded"));
    let options = ["--call-graph", "dwarf", "-P", "cpu-clock", "-O", arg(&log), "--"];
    let command = ["unshare", "-m", "--propagation", "private", "sh", "-c", script];
    pmcstat(Host::Linux, &[&options[..], &command[..]].concat()).assert_status(0);
    let folding = pmcstat(Host::Linux, &["-R", arg(&log), "--folded", arg(&folded)]);
    folding.assert_status(0);
    let top = pmcstat(Host::Linux, &["-R", arg(&log), "--top", "100"]);
    top.assert_status(0);
    (parse_folded(&std::fs::read_to_string(&folded).unwrap()), folding, top)
}

/// The samples whose stack ends main → a → b → c (c sampled).
fn full_chain_samples(stacks: &[(Vec<String>, u64)]) -> u64 {
    let chain = ["main", "a", "b", "c"].map(String::from);
    stacks.iter().filter(|(frames, _)| frames.ends_with(&chain)).map(|(_, n)| n).sum()
}

/// Asserts that `c` is the hottest function with whole stacks, and no function of the decoy
/// (`hot`) is named.
#[track_caller]
fn assert_whole_chain_stacks(stacks: &[(Vec<String>, u64)], top: &Run) {
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    assert!(total >= 100, "{total} samples of about a second: {stacks:?}");
    let full = full_chain_samples(stacks);
    assert!(full * 10 >= total * 8, "{full} of {total} are main;a;b;c: {stacks:?}");
    let blocks = parse_top(&top.stdout);
    assert_eq!(blocks.len(), 1, "{}", top.describe());
    let rows = &blocks[0].2;
    assert_eq!(rows[0].function, "c", "{rows:?}");
    for decoy in ["hot_function", "cold_function"] {
        assert!(!top.stdout.contains(decoy), "the host's file was used:\n{}", top.stdout);
        assert!(stacks.iter().all(|(f, _)| !f.iter().any(|f| f == decoy)), "{stacks:?}");
    }
}

#[test]
fn a_program_bind_mounted_where_only_its_namespace_sees_it_gets_names_and_whole_stacks() {
    if !may_unshare() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let real = chain_in(&dir.path().join("real"));
    let inside = dir.path().join("inside");
    std::fs::create_dir(&inside).unwrap();
    let script = format!(
        "mount --bind '{}' '{}' && exec '{}/chain' 1500000000",
        arg(real.parent().unwrap()),
        arg(&inside),
        arg(&inside)
    );
    let (stacks, _, top) = sample_in_namespace(dir.path(), &script);
    assert_whole_chain_stacks(&stacks, &top);
}

#[test]
fn another_program_at_the_same_path_on_the_host_is_not_used() {
    if !may_unshare() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let real = chain_in(&dir.path().join("real"));
    let seen = dir.path().join("inside").join("chain");
    decoy_at(&seen);
    let script = format!(
        "mount --bind '{}' '{}' && exec '{}' 1500000000",
        arg(&real),
        arg(&seen),
        arg(&seen)
    );
    let (stacks, _, top) = sample_in_namespace(dir.path(), &script);
    assert_whole_chain_stacks(&stacks, &top);
}

#[test]
fn a_program_on_a_filesystem_only_its_namespace_mounts_is_reported_missing_not_replaced() {
    if !may_unshare() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let real = chain_in(&dir.path().join("real"));
    let private = dir.path().join("private");
    decoy_at(&private.join("chain"));
    // A tmpfs mounted inside the namespace alone: the program's file is nowhere on the host
    // once the run is over.
    let script = format!(
        "mount -t tmpfs none '{p}' && cp '{}' '{p}/chain' && exec '{p}/chain' 1500000000",
        arg(&real),
        p = arg(&private)
    );
    let (stacks, folding, top) = sample_in_namespace(dir.path(), &script);
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    assert!(total >= 100, "{total} samples of about a second: {stacks:?}");
    for decoy in ["hot_function", "cold_function"] {
        assert!(!top.stdout.contains(decoy), "the host's file was used:\n{}", top.stdout);
    }
    // The image that could not be read is named, as the process saw it.
    let seen = format!("{}/chain", arg(&private));
    for run in [&folding, &top] {
        assert!(run.stderr.contains(&seen), "no word of {seen}:\n{}", run.describe());
    }
    // The stacks were still unwound whole while recording: the program's frames sit under
    // the frames of `sh`'s start-up, several deep.
    let deep: u64 = stacks.iter().filter(|(f, _)| f.len() >= 4).map(|(_, n)| n).sum();
    assert!(deep * 10 >= total * 8, "{deep} of {total} are 4 frames deep: {stacks:?}");
}

#[test]
fn attaching_to_a_process_already_in_another_namespace_finds_its_program() {
    if !may_unshare() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let real = chain_in(&dir.path().join("real"));
    let seen = dir.path().join("inside").join("chain");
    decoy_at(&seen);
    let script = format!(
        "mount --bind '{}' '{}' && exec '{}' 100000000000",
        arg(&real),
        arg(&seen),
        arg(&seen)
    );
    let target = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .spawn()
        .expect("unshare");
    let target = KilledOnDrop(target);
    let pid = target.0.id().to_string();
    // unshare, then sh, become the program (one process throughout).
    let comm = format!("/proc/{pid}/comm");
    hwpmc_tests::wait_for("the program to start in its namespace", || {
        std::fs::read_to_string(&comm).is_ok_and(|c| c.trim() == "chain")
    });
    let (log, folded) = (dir.path().join("t.log"), dir.path().join("t.folded"));
    let options = ["--call-graph", "dwarf", "-P", "cpu-clock", "-t", &pid, "-O", arg(&log)];
    let run = pmcstat(Host::Linux, &[&options[..], &["-l", "1.5"]].concat());
    drop(target);
    run.assert_status(0);
    pmcstat(Host::Linux, &["-R", arg(&log), "--folded", arg(&folded)]).assert_status(0);
    let top = pmcstat(Host::Linux, &["-R", arg(&log), "--top", "100"]);
    top.assert_status(0);
    let stacks = parse_folded(&std::fs::read_to_string(&folded).unwrap());
    assert_whole_chain_stacks(&stacks, &top);
}

/// A child process killed and reaped when the test ends, also when it fails.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
