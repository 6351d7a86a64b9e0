//! The C ABI of `libpmc.so` / `libpmc.a`: pmc(3) as FreeBSD's `lib/libpmc/pmc.h` declares it
//! (headers in `libpmc/include`), pmclog(3) (re-exported from the `pmclog` crate), and the
//! hwpmc-rs extensions of `<pmc_host.h>` for launching measured programs.
//!
//! Every function keeps FreeBSD's name, signature and return convention: 0 (or a count) on
//! success, -1 with `errno` set on failure, NULL with `errno` set for the functions returning a
//! pointer. Beyond FreeBSD:
//!
//! * Every pointer argument is checked for NULL before use (`EINVAL`); FreeBSD's libpmc
//!   dereferences it.
//! * No panic crosses into C: each entry point catches it and fails with `EIO` (or NULL).
//! * `pmc_allocate` fails with `EINVAL` on an unknown or unavailable event where FreeBSD's calls
//!   `errx(3)` and ends the process; `pmc_host_error()` says why.
//! * `pmc_capabilities` and `pmc_width` ask the driver (`PMC_OP_GETCAPS`), so they fail on a PMC
//!   the caller does not own.
//! * The operations that FreeBSD's library sends straight to the kernel work before `pmc_init`
//!   (the host starts on first use); those that read the cache `pmc_init` fills (`pmc_ncpu`,
//!   `pmc_npmc`, `pmc_cpuinfo`, `pmc_pmcinfo`) fail with `ENXIO` before it, as FreeBSD's do.
//!
//! The Rust side of each entry point is the [`crate::api`] call of the same name; this module
//! only checks and converts arguments, and maps [`crate::Error`] to `errno`.

mod boundary;
mod info;
mod launch;
mod ops;
mod pmu;
#[cfg(test)]
mod tests;

pub use boundary::pmc_host_error;
pub use info::{
    pmc_cpuinfo, pmc_event_names_of_class, pmc_name_of_capability, pmc_name_of_class,
    pmc_name_of_cputype, pmc_name_of_disposition, pmc_name_of_event, pmc_name_of_mode,
    pmc_name_of_state, pmc_ncpu, pmc_npmc, pmc_pmcinfo,
};
pub use launch::{pmc_host_name, pmc_resume, pmc_spawn, pmc_wait};
pub use ops::{
    pmc_allocate, pmc_attach, pmc_capabilities, pmc_close_logfile, pmc_configure_logfile,
    pmc_detach, pmc_disable, pmc_enable, pmc_flush_logfile, pmc_get_driver_stats, pmc_get_msr,
    pmc_init, pmc_read, pmc_read_scaled, pmc_release, pmc_rw, pmc_set, pmc_start, pmc_stop,
    pmc_width, pmc_write, pmc_writelog,
};
/// pmclog(3), implemented by the `pmclog` crate and exported from libpmc as on FreeBSD.
pub use pmclog::capi::{pmclog_close, pmclog_ev, pmclog_feed, pmclog_open, pmclog_read};
pub use pmu::{
    pmc_pmu_enabled, pmc_pmu_event_get_by_idx, pmc_pmu_idx_get_by_event, pmc_pmu_pmcallocate,
    pmc_pmu_print_counter_desc, pmc_pmu_print_counter_desc_long, pmc_pmu_print_counter_full,
    pmc_pmu_print_counters, pmc_pmu_sample_rate_get,
};

/// `pmc_id_t`.
#[allow(non_camel_case_types)]
pub type pmc_id_t = u32;
/// `pmc_value_t`.
#[allow(non_camel_case_types)]
pub type pmc_value_t = u64;
/// `struct pmc_driverstats`: the layout of `struct pmc_op_getdriverstats`.
#[allow(non_camel_case_types)]
pub type pmc_driverstats = hwpmc::abi::PmcOpGetDriverStats;
/// `struct pmc_op_pmcallocate`.
#[allow(non_camel_case_types)]
pub type pmc_op_pmcallocate = hwpmc::abi::PmcOpPmcAllocate;
