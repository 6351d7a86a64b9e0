//! A libpmc built without the simulator host (`cargo build -p libpmc --no-default-features`, as
//! a packaged `libpmc.so` may be) refuses the `sim` host with ENOSYS and says why. With the `sim`
//! feature (the default) this file has no tests.
#![cfg(not(feature = "sim"))]

use pmc::host::{self, HostKind};

#[test]
fn the_sim_host_is_enosys_without_its_cargo_feature() {
    host::select(HostKind::Sim).expect("this test binary chooses the host first");
    let error = host::with_host(|h| Ok(h.kind())).expect_err("no simulator in this build");
    assert_eq!(error.errno, libc::ENOSYS);
    assert!(error.to_string().contains("feature `sim`"), "{error}");
}
