//! [`FreeMsrs`]: hardware whose registers cost nothing, for benchmarks that count the driver's
//! own instructions (callgrind) or time it without the simulated PMU's work.

use crate::cpuid::CpuidModel;
use hwpmc::hw::{Hardware, Lapic, Msrs};

/// Hardware whose MSRs cost nothing: reads return 0, writes are dropped; CPUID is the model's.
#[derive(Clone)]
pub struct FreeMsrs(pub CpuidModel);

// The methods are `unsafe` on real hardware; here they touch nothing, so no caller can be
// unsound.
#[allow(unsafe_code)]
impl Msrs for FreeMsrs {
    #[inline]
    unsafe fn read_msr(&self, _msr: u32) -> u64 {
        0
    }
    #[inline]
    unsafe fn write_msr(&self, _msr: u32, _value: u64) {}
    #[inline]
    unsafe fn read_pmc(&self, _index: u32) -> u64 {
        0
    }
}

impl Lapic for FreeMsrs {
    #[inline]
    fn unmask_pmi(&self) {}
    #[inline]
    fn mask_pmi(&self) {}
}

impl Hardware for FreeMsrs {
    type Cpuid = CpuidModel;
    #[inline]
    fn cpuid(&self) -> CpuidModel {
        self.0
    }
    #[inline]
    fn read_tsc(&self) -> u64 {
        0
    }
}
