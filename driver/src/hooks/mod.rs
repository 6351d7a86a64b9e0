//! The hooks a kernel calls, one file per kind:
//!
//! * `switch.rs`: [`Driver::switch_in`](crate::Driver::switch_in) and
//!   [`Driver::switch_out`](crate::Driver::switch_out), and `parking.rs`, the switch-out that
//!   only stops its counters (with [`Driver::cpu_offline`](crate::Driver::cpu_offline));
//! * `process.rs`: fork, exec, exit, mmap and munmap; `thread.rs`: thread creation and exit;
//! * `pmi.rs`: the performance-monitoring interrupt and software events;
//! * `tick.rs`: the drain of the sample rings into the logs, and the multiplexing rotation;
//! * `callchain.rs`: kernel callchains walked in the interrupt, user callchains at the return
//!   to user mode.

mod callchain;
mod parking;
mod pmi;
mod process;
mod switch;
mod thread;
mod tick;
