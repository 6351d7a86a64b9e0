//! x86_64: MSR numbers, native access to the CPU, the CPU's identity, and one folder per vendor
//! (`intel/`: architectural performance monitoring).

pub mod cpuid;
pub mod intel;
pub mod msr;
pub mod native;
