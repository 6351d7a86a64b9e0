//! The machine-dependent layer: each architecture's hardware access and PMU backends. Nothing
//! here depends on the generic driver but the `PmuBackend` trait
//! it implements and the leaf types (ABI, errno, hardware traits).

pub mod x86;

/// The PMU backend of the machine the driver is built for.
pub(crate) type Backend = x86::dispatch::X86Backend;
