//! C programs written against `<libcpc.h>` (`tests/c/*.c`), compiled as C99 with every warning
//! an error, linked with `libcpc.so` (through an rpath) and with `libcpc.a`, and run on the
//! simulator and Linux hosts. Each program checks its own results and exits 0.
#![cfg(target_os = "linux")]

mod common;

use common::{Linkage, run, run_with_stderr};

#[test]
fn a_simulated_program_is_counted_exactly_through_pctx_on_the_simulator() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_sim_count", linkage, "sim", &[]);
        assert!(out.contains("PAPI_tot_ins 10000000\n"), "{out}");
        assert!(out.contains("instr_retired.any 10000005\n"), "{out}");
    }
}

/// What the default error handler prints for the first, handler-less failure.
const DEFAULT_HANDLER_LINE: &str = "libcpc: cpc_set_add_request: Unknown event\n";

#[test]
fn every_errno_and_subcode_on_the_simulator() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let (out, err) = run_with_stderr("cpc_errors", linkage, "sim", &[]);
        assert_eq!(out, "errors ok\n");
        assert!(err.starts_with(DEFAULT_HANDLER_LINE), "{err}");
    }
}

#[test]
fn every_errno_and_subcode_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let (out, err) = run_with_stderr("cpc_errors", linkage, "linux", &[]);
        assert_eq!(out, "errors ok\n");
        assert!(err.starts_with(DEFAULT_HANDLER_LINE), "{err}");
    }
}

#[test]
fn presets_restart_freezing_buffers_and_walkers_on_the_simulator() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_api", linkage, "sim", &[]);
        assert!(out.contains("PAPI_tot_ins 1000 -> 1000 (+0)\n"), "{out}");
        assert!(out.contains("after restart 7 9\n") && out.ends_with("api ok\n"), "{out}");
    }
}

#[test]
fn page_faults_of_the_calling_thread_on_the_linux_host() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_api", linkage, "linux", &[]);
        assert!(out.ends_with("api ok\n"), "{out}");
    }
}
