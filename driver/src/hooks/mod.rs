//! The hooks a kernel calls: context switches (and parking), fork, exec, exit, threads, the
//! performance-monitoring interrupt and software events, the tick, and the return to user mode
//! that walks deferred user callchains.

mod callchain;
mod parking;
mod pmi;
mod process;
mod switch;
mod thread;
mod tick;
