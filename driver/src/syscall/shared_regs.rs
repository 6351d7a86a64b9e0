//! The registers a hardware PMC shares with the other counters of a CPU (Intel's
//! offcore-response MSRs): claimed when the PMC is allocated, for the CPUs it may be loaded on,
//! and given back when it is released. The backend keeps the claims in its per-CPU state
//! ([`PmuBackend::claim`]); this module only says which CPUs.

use crate::backend::PmuBackend;
use crate::book::Pmc;
use crate::class::HwConfig;
use crate::driver::Driver;
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::Kernel;

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Claims what `pmc`'s configuration shares on its CPU (system PMCs) or on every CPU
    /// (process PMCs, which may be loaded anywhere): EBUSY when a PMC allocated there holds it
    /// with another value. Called under the bookkeeping lock, which serialises claims.
    pub(crate) fn claim_shared(&self, pmc: &Pmc) -> Result<(), Errno> {
        let HwConfig::Hardware(config) = pmc.config else { return Ok(()) };
        let cpus = self.machine.cpus().iter().enumerate();
        let only = pmc.cpu();
        let cpus = cpus.filter(move |(i, _)| only.is_none_or(|c| *i == c as usize));
        self.backend.claim(cpus.map(|(_, state)| &state.pmu), config)
    }

    /// Gives back what [`Driver::claim_shared`] claimed for `pmc` (at release, under the
    /// bookkeeping lock).
    pub(crate) fn unclaim_shared(&self, pmc: &Pmc) {
        let HwConfig::Hardware(config) = pmc.config else { return };
        let only = pmc.cpu();
        let cpus = self.machine.cpus().iter().enumerate();
        let cpus = cpus.filter(move |(i, _)| only.is_none_or(|c| *i == c as usize));
        self.backend.unclaim(cpus.map(|(_, state)| &state.pmu), config);
    }
}
