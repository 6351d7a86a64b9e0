//! x86_64: MSR numbers, native access to the CPU, the CPU's identity, one folder per vendor
//! (`intel/`: architectural performance monitoring; `amd/`: AMD core counters) and the backend
//! that picks one at load ([`dispatch`]).

pub mod amd;
pub mod cpuid;
pub mod dispatch;
pub mod intel;
pub mod msr;
pub mod native;
