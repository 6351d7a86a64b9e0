//! The modes a test suite runs under, as one value ([`SimModes`]): what the local APIC does with
//! a PMI raised while its entry is masked, the driver's freeze tunable, the PMI timing
//! ([`PmiTiming`]) and PMIs injected in the middle of the driver's work ([`PmiInjection`]).
//!
//! A test passes the value to [`MachineConfig::modes`](crate::machine::MachineConfig::modes);
//! nothing here reads the environment, so a test's name says which modes it ran under.

use crate::pmu::MaskedPmi;
use crate::timing::PmiTiming;

/// PMIs delivered at the driver's MSR and counter accesses, in the middle of whatever the driver
/// was doing (see [`MachineConfig::pmi_at_every_msr_access`] and [`MachineConfig::pmi_seed`]).
///
/// [`MachineConfig::pmi_at_every_msr_access`]: crate::machine::MachineConfig::pmi_at_every_msr_access
/// [`MachineConfig::pmi_seed`]: crate::machine::MachineConfig::pmi_seed
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PmiInjection {
    /// None (the default).
    #[default]
    None,
    /// One at every access.
    EveryMsrAccess,
    /// One at the accesses this seed chooses.
    SeededAccesses(u64),
}

/// The modes a test suite runs under. The default is the exact mode: the model's masked-PMI
/// policy, the driver's default tunables, PMIs served at once, none injected.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimModes {
    /// The masked-PMI policy, if one is asked for (the model's otherwise).
    pub masked_pmi: Option<MaskedPmi>,
    /// The driver's freeze tunable, if one is asked for (the test's tunables otherwise).
    pub freeze_on_pmi: Option<bool>,
    /// PMI timing.
    pub timing: PmiTiming,
    /// PMIs injected at the driver's accesses.
    pub pmi_injection: PmiInjection,
}

impl SimModes {
    /// The exact mode (see the type's documentation).
    pub fn exact() -> Self {
        SimModes::default()
    }

    /// With the local APIC treating a PMI raised while its entry is masked so.
    pub fn masked_pmi(mut self, policy: MaskedPmi) -> Self {
        self.masked_pmi = Some(policy);
        self
    }

    /// With the driver's `freeze_on_pmi` tunable so.
    pub fn freeze_on_pmi(mut self, freeze: bool) -> Self {
        self.freeze_on_pmi = Some(freeze);
        self
    }

    /// With this PMI timing.
    pub fn timing(mut self, timing: PmiTiming) -> Self {
        self.timing = timing;
        self
    }

    /// With PMIs injected so.
    pub fn pmi_injection(mut self, injection: PmiInjection) -> Self {
        self.pmi_injection = injection;
        self
    }

    /// Whether counts and samples are exact under these modes: no latency and no driver work
    /// (the masked-PMI policy, freezing and foreign status bits change no count).
    pub fn exact_counts(&self) -> bool {
        self.timing.max_latency == 0 && self.timing.driver_work_percent == 0
    }
}
