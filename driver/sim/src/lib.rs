//! hwpmc-sim: a deterministic simulated x86 machine that proves the `hwpmc` driver.
//!
//! The machine is modelled from the Intel SDM (Vol. 3B, chapter 21, "Performance Monitoring";
//! architectural performance monitoring versions 1 to 5), not from what the driver does, so that
//! a driver bug shows up as a wrong count or a simulated #GP that fails the test.
//!
//! * [`arch_event`] — the architectural events ([`ArchEvent`]) and the event selects that count
//!   them on Intel and AMD.
//! * [`work`] — what one execution of a basic block does ([`Work`]).
//! * [`amd_features`] — what an AMD CPU's CPUID says about its core counters.
//! * [`amd`] — the AMD models ([`PmuModel::zen2`], [`PmuModel::zen4`], [`PmuModel::k10`]) and
//!   the CPUID leaves that describe their core counters.
//! * [`cpuid`] — CPU models ([`PmuModel`] presets for every perfmon version and a VM without a
//!   vPMU) and the CPUID they report ([`CpuidModel`], a `raw_cpuid::CpuIdReader`).
//! * [`pmu`] — one CPU's PMU register by register ([`SimPmu`]): MSRs with #GP on reserved bits,
//!   exact O(1) counting of basic blocks, overflow, PMIs through the local APIC's LVT entry, and
//!   freeze on PMI; and [`SimHardware`], the driver's `Hardware` for the current CPU of a machine
//!   of N CPUs.
//! * [`offcore`] — the offcore-response MSRs and the events that read them.
//! * [`quirks`] — how a model departs from the plain architectural registers ([`Quirks`]):
//!   DEBUGCTL's real bits, TSX, a KVM guest's and a Core 2's quirks, reference cycles at their
//!   own clock.
//! * [`timing`] — PMIs served late (skid, counters running or frozen meanwhile), the driver's
//!   own ring-0 work at its MSR accesses, other users' status bits.
//! * [`modes`] — the modes a test suite runs under, as one value ([`modes::SimModes`]): the
//!   masked-PMI policy, freezing, the PMI timing and PMIs injected at the driver's accesses.
//! * [`ground_truth`] — every event retired, split by ring ([`GroundTruth`]).
//! * [`prng`] — the deterministic random numbers ([`prng::SplitMix64`]).
//! * [`kernel`] — the simulated kernel's services to the driver ([`SimKernel`]): processes with
//!   credentials and user memory, CPUs, signals.
//! * [`client`] — issuing hwpmc system calls as a simulated process ([`PmcClient`]).
//! * [`workload`] — programs of functions and basic blocks with exact event counts
//!   ([`Program`], built with [`ProgramBuilder`]).
//! * [`machine`] — the machine that runs them ([`Machine`]): a deterministic scheduler over N
//!   CPUs calling the driver's hooks, and the ground truth of every event ([`GroundTruth`]).
#![deny(unsafe_code)]

pub mod amd;
pub mod amd_features;
pub mod arch_event;
pub mod client;
pub mod cpuid;
mod free_msrs;
pub mod ground_truth;
pub mod hook;
pub mod kernel;
pub mod machine;
pub mod modes;
pub mod offcore;
pub mod pmu;
pub mod prng;
pub mod quirks;
pub mod timing;
pub mod work;
pub mod workload;

pub use arch_event::ArchEvent;
pub use client::{AllocateRequest, PmcClient, SimDriver, load_driver};
pub use cpuid::{CpuidModel, PmuModel};
pub use free_msrs::FreeMsrs;
pub use ground_truth::GroundTruth;
pub use hook::HookContext;
pub use kernel::{Credentials, SimKernel, SinkId, SinkKind};
pub use machine::{Machine, MachineConfig, Thread, ThreadState};
pub use pmu::{Fault, Pmi, Ring, SimHardware, SimPmu, Work};
pub use quirks::Quirks;
pub use workload::{Action, Block, Flow, FunctionId, Program, ProgramBuilder};
