//! C programs written against `<libcpc.h>` (`tests/c/*.c`), compiled as C99 with every warning
//! an error, linked with `libcpc.so` (through an rpath) and with `libcpc.a`, and run on the
//! simulator and Linux hosts. Each program checks its own results and exits 0.
#![cfg(target_os = "linux")]

mod common;

use common::{Linkage, run};

#[test]
fn a_simulated_program_is_counted_exactly_through_pctx_on_the_simulator() {
    for linkage in [Linkage::Shared, Linkage::Static] {
        let out = run("cpc_sim_count", linkage, "sim", &[]);
        assert!(out.contains("PAPI_tot_ins 10000000\n"), "{out}");
        assert!(out.contains("instr_retired.any 10000005\n"), "{out}");
    }
}
