//! hwpmc-test-support: what the simulator's tests (`driver/sim/tests`) share.
//!
//! * [`modes`] — the modes the simulator's suites run under, each named, and
//!   [`for_each_sim_mode!`], which instantiates a suite once per mode so that every test's name
//!   says which mode it ran under.
//! * [`world`] — the driver on simulated CPUs without the machine's scheduler, and the processes
//!   a test acts as ([`world::World`]).
//! * [`prng`] — seeded random numbers ([`prng::SplitMix64`], [`prng::XorShift64`]).
#![deny(unsafe_code)]

pub mod modes;
pub mod prng;
pub mod world;
