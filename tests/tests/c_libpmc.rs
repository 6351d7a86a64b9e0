//! C programs written against libpmc's `<pmc.h>`, `<pmclog.h>` and `<pmc_host.h>`
//! (`c/libpmc/client_*.c`), compiled with the system C compiler as C99 with every warning an
//! error, linked with `libpmc.so` (found through an rpath) and with `libpmc.a`, and run on the
//! Linux and simulator hosts. Each program checks its own results and exits 0; it prints what it
//! measured. The libraries are those built from the sources under test, next to this test's
//! executable ([`hwpmc_tests::c_clients`] says how they are found).
//!
//! The compiler is `$CC` (default `cc`).
#![cfg(unix)]

use hwpmc_tests::c_clients::{self, Library, Linkage};

/// Builds and runs client `name` on `host`, with a scratch directory of its own as its
/// argument; fails the test unless it exits 0; returns its standard output.
fn run(name: &str, linkage: Linkage, host: &str) -> String {
    let scratch = tempfile::Builder::new()
        .prefix(&format!("c-clients-{name}-{linkage:?}-{host}-"))
        .tempdir()
        .expect("create the scratch directory");
    let dir = scratch.path().to_str().expect("a UTF-8 scratch path");
    let exe = c_clients::build(Library::Pmc, name, linkage);
    let what = format!("{name} ({linkage:?})");
    c_clients::run_exe(&exe, &what, host, &[dir]).0
}

#[cfg(target_os = "linux")]
#[test]
fn own_page_faults_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("client_page_faults", linkage, "linux");
        assert!(out.starts_with("page-faults "), "{out}");
    }
}

#[test]
fn simulated_instructions_are_exact() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("client_sim_instructions", linkage, "sim");
        assert_eq!(out, "instructions 10000000\n");
    }
}

#[test]
fn life_cycle_on_the_simulator() {
    let out = run("client_lifecycle", Linkage::Shared, "sim");
    assert!(out.contains("counted 10000000\n") && out.ends_with("lifecycle ok\n"), "{out}");
}

#[cfg(target_os = "linux")]
#[test]
fn life_cycle_on_the_linux_host() {
    let out = run("client_lifecycle", Linkage::Static, "linux");
    assert!(out.ends_with("lifecycle ok\n"), "{out}");
}

#[test]
fn a_forked_child_owns_none_of_its_parents_pmcs_on_either_host() {
    for host in ["sim", "linux"] {
        let out = run("client_fork", Linkage::Shared, host);
        assert_eq!(out, "fork ok\n", "{host}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn an_owner_that_exits_without_closing_its_log_has_it_written_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("client_exit_log", linkage, "linux");
        assert_eq!(out, "exit log ok\n");
    }
}

#[test]
fn error_paths_on_the_simulator() {
    let out = run("client_errors", Linkage::Shared, "sim");
    assert!(out.ends_with("errors ok\n"), "{out}");
}

#[cfg(target_os = "linux")]
#[test]
fn error_paths_on_the_linux_host() {
    let out = run("client_errors", Linkage::Shared, "linux");
    assert!(out.ends_with("errors ok\n"), "{out}");
}

#[test]
fn pmclog_reads_a_simulator_log_the_same_in_any_chunks() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("client_pmclog", linkage, "sim");
        assert!(out.contains(" 100 callchains,") && out.ends_with("pmclog ok\n"), "{out}");
    }
}

/// The pmc(3), pmclog(3) and `<pmc_host.h>` functions are all exported by `libpmc.so`.
#[cfg(target_os = "linux")]
#[test]
fn the_shared_library_exports_every_declared_function() {
    let Some(exported) = c_clients::exported_symbols(Library::Pmc) else {
        eprintln!("nm is not installed; skipping");
        return;
    };
    let include = Library::Pmc.include_dir();
    let mut missing = Vec::new();
    for header in ["pmc.h", "pmclog.h", "pmc_host.h"] {
        let text = std::fs::read_to_string(include.join(header)).expect("read the header");
        for name in declared_functions(&text) {
            if !exported.contains(name.as_str()) {
                missing.push(format!("{name} ({header})"));
            }
        }
    }
    assert!(missing.is_empty(), "declared but not exported by libpmc.so: {missing:?}");
}

/// The names of the functions a header declares: identifiers directly followed by `(` on lines
/// that start a prototype (`int\tpmc_read(`, `const char\t*pmc_name_of_class(`, …).
fn declared_functions(header: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in header.lines() {
        let line = line.trim_start();
        if line.starts_with('#') || line.starts_with('*') || line.starts_with("/*") {
            continue;
        }
        let Some(open) = line.find('(') else { continue };
        let head = &line[..open];
        if !head.contains(char::is_whitespace) || head.contains('=') || head.contains("typedef") {
            continue;
        }
        let name = head.rsplit(|c: char| c.is_whitespace() || c == '*').next().unwrap_or("");
        if name.starts_with("pmc") {
            names.push(name.to_string());
        }
    }
    names
}

#[test]
fn pmu_events_on_the_simulator() {
    let out = run("client_pmu", Linkage::Shared, "sim");
    assert!(out.contains("branches 1000000\n") && out.ends_with("pmu ok\n"), "{out}");
    // The print functions write through the C library's stdout, in order with printf.
    // Every event whose name contains the filter, any case, as FreeBSD's strcasestr.
    let counters = out.split("-- counters\n").nth(1).and_then(|s| s.split("-- desc\n").next());
    let counters: Vec<&str> = counters.unwrap_or_default().lines().collect();
    assert!(counters.contains(&"\tBR_INST_RETIRED.ALL_BRANCHES"), "{out}");
    assert!(counters.iter().all(|l| l.starts_with("\tBR_INST_RETIRED.ALL_BRANCHES")), "{out}");
    assert!(out.contains("-- desc\nBR_INST_RETIRED.ALL_BRANCHES:\t"), "{out}");
    assert!(out.contains("-- full\nBR_INST_RETIRED.ALL_BRANCHES:\n\tdesc:"), "{out}");
}
