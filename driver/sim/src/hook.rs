//! The context a workload's hook runs with: the thread that reached it and where it runs, and
//! the machine (`machine.rs` gives the typed view: `HookContext::machine`, `client`, `thread`).
//!
//! The machine is held as `dyn Any` so that describing a program (`workload.rs`) does not depend
//! on the machine that runs it, while the machine depends on programs.

use std::any::Any;

use hwpmc::{Cpu, Pid, Tid};

/// A hook's view of the machine: the thread calling it and where it runs.
#[derive(Clone, Copy)]
pub struct HookContext<'a> {
    pub(crate) machine: &'a dyn Any,
    pub(crate) pid: Pid,
    pub(crate) tid: Tid,
    pub(crate) cpu: Cpu,
}

impl HookContext<'_> {
    /// The calling process.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The calling thread.
    pub fn tid(&self) -> Tid {
        self.tid
    }

    /// The CPU it runs on.
    pub fn cpu(&self) -> Cpu {
        self.cpu
    }
}
