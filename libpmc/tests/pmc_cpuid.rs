//! `PMC_CPUID` makes the Rust and C APIs answer for another CPU, and a malformed value is an
//! EINVAL error that shows the expected format. One test, as the variable is process-wide.

use pmc::api;
use pmc::config::{self, Config};
use pmc::events::EventKind;

#[test]
fn pmc_cpuid_selects_the_model_of_the_rust_and_c_apis() {
    // SAFETY: this test binary has one test, so no other thread reads the environment.
    unsafe {
        std::env::set_var("PMC_HOST", "sim");
        std::env::set_var("PMC_CPUID", "Genuine-Intel-6");
    }
    // The environment reaches the Rust API as a program's edge passes it in (the tools' `main`,
    // the C ABI's entry points).
    config::install(Config::from_env());
    let error = api::lookup_event("instructions").expect_err("malformed PMC_CPUID");
    assert_eq!(error.errno, libc::EINVAL);
    let detail = error.detail.unwrap_or_default();
    assert!(
        detail.contains("Genuine-Intel-6") && detail.contains("GenuineIntel-6-8F-8"),
        "{detail}"
    );

    // SAFETY: as above.
    unsafe { std::env::set_var("PMC_CPUID", "AuthenticAMD-25-11-1") };
    config::install(Config::from_env());
    // The simulated CPU has no AMD counters: the event is known, unavailable, and encodable.
    let error = api::lookup_event("ex_ret_instr").expect_err("no K8 class on the simulator");
    assert!(error.detail.unwrap_or_default().contains("class K8"));
    let (event, unavailable) = api::encode_event("instructions").expect("FreeBSD's AMD alias");
    assert_eq!(event.kind, EventKind::K8 { perf_ctl: 0xC0 | 3 << 16 });
    assert!(unavailable.is_some());
    // The C API's PMU table is Zen 4's.
    // SAFETY: NUL-terminated strings.
    let index = unsafe {
        pmc::capi::pmc_pmu_idx_get_by_event(std::ptr::null(), c"ls_dispatch.ld_dispatch".as_ptr())
    };
    assert!(index >= 0, "ls_dispatch.ld_dispatch has a row");
}
