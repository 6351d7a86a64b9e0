//! hwpmc-test-support: what the simulator's tests (`driver/sim/tests`) share.
//!
//! * [`modes`] — the modes the simulator's suites run under, each named, and
//!   [`for_each_sim_mode!`], which instantiates a suite once per mode so that every test's name
//!   says which mode it ran under.
#![deny(unsafe_code)]

pub mod modes;
