//! The modes the simulator's counting, sampling and thread-scope suites run under, each a value
//! of [`SimModes`] with a name, and [`for_each_sim_mode!`](crate::for_each_sim_mode), which
//! instantiates a suite once per mode: `cargo test -p hwpmc-sim <name>` runs one mode, and a
//! test's path (`pmi_at_every_msr_access::skylake::counter_wrap`) says which mode it ran under.
//!
//! The set: the exact mode; a PMI at every MSR and counter access the driver makes, or at the
//! accesses two fixed seeds choose (the same assertions must hold with PMIs in the middle of the
//! driver's work); and a representative corner of the PMI-timing matrix (masked-PMI policy ×
//! latency × freezing × other users' status bits, and the driver's own ring-0 work), where the
//! tests check the range hardware guarantees when an exact count is impossible on hardware.

use hwpmc_sim::modes::{PmiInjection, SimModes};
use hwpmc_sim::pmu::MaskedPmi;
use hwpmc_sim::timing::PmiTiming;

/// Every PMI served at once, none injected.
pub fn exact() -> SimModes {
    SimModes::exact()
}

/// A PMI at every MSR and counter access the driver makes.
pub fn pmi_at_every_msr_access() -> SimModes {
    SimModes::exact().pmi_injection(PmiInjection::EveryMsrAccess)
}

/// A PMI at the driver's accesses seed 1 chooses.
pub fn pmi_at_seeded_accesses_1() -> SimModes {
    SimModes::exact().pmi_injection(PmiInjection::SeededAccesses(1))
}

/// A PMI at the driver's accesses seed 2 chooses.
pub fn pmi_at_seeded_accesses_2() -> SimModes {
    SimModes::exact().pmi_injection(PmiInjection::SeededAccesses(2))
}

/// PMIs raised while masked are dropped, served up to 4 block executions late to a frozen PMU,
/// and 10 % of blocks set a status bit that is not the driver's.
pub fn masked_dropped_late_frozen_foreign_status() -> SimModes {
    SimModes::exact()
        .masked_pmi(MaskedPmi::Dropped)
        .freeze_on_pmi(true)
        .timing(PmiTiming::exact().latency(4).foreign_status(10))
}

/// Level-triggered PMIs, served up to 4 block executions late to a PMU that keeps counting.
pub fn masked_level_late_unfrozen() -> SimModes {
    SimModes::exact()
        .masked_pmi(MaskedPmi::Level)
        .freeze_on_pmi(false)
        .timing(PmiTiming::exact().latency(4))
}

/// PMIs raised while masked are held, and the PMU freezes on a PMI.
pub fn masked_held_frozen() -> SimModes {
    SimModes::exact().masked_pmi(MaskedPmi::Held).freeze_on_pmi(true)
}

/// 20 % of the driver's MSR accesses retire ring-0 work (OS-mode counters count the driver and
/// can overflow inside it), and PMIs are served up to 2 block executions late.
pub fn driver_work_late() -> SimModes {
    SimModes::exact().timing(PmiTiming::exact().latency(2).driver_work(20))
}

/// Every mode with its name, in the order [`for_each_sim_mode!`](crate::for_each_sim_mode)
/// instantiates them.
pub fn all() -> Vec<(&'static str, SimModes)> {
    vec![
        ("exact", exact()),
        ("pmi_at_every_msr_access", pmi_at_every_msr_access()),
        ("pmi_at_seeded_accesses_1", pmi_at_seeded_accesses_1()),
        ("pmi_at_seeded_accesses_2", pmi_at_seeded_accesses_2()),
        ("masked_dropped_late_frozen_foreign_status", masked_dropped_late_frozen_foreign_status()),
        ("masked_level_late_unfrozen", masked_level_late_unfrozen()),
        ("masked_held_frozen", masked_held_frozen()),
        ("driver_work_late", driver_work_late()),
    ]
}

/// Instantiates a suite once per mode of [`crate::modes`]: `$suite!(name, modes)` for each,
/// where `name` is the mode's name (an identifier, for the suite's module) and `modes` an
/// expression of its [`SimModes`].
///
/// ```
/// macro_rules! suite {
///     ($mode:ident, $modes:expr) => {
///         mod $mode {
///             pub fn modes() -> hwpmc_sim::modes::SimModes {
///                 $modes
///             }
///         }
///     };
/// }
/// hwpmc_test_support::for_each_sim_mode!(suite);
/// assert!(exact::modes().exact_counts());
/// assert!(!driver_work_late::modes().exact_counts());
/// ```
#[macro_export]
macro_rules! for_each_sim_mode {
    ($suite:ident) => {
        $suite!(exact, $crate::modes::exact());
        $suite!(pmi_at_every_msr_access, $crate::modes::pmi_at_every_msr_access());
        $suite!(pmi_at_seeded_accesses_1, $crate::modes::pmi_at_seeded_accesses_1());
        $suite!(pmi_at_seeded_accesses_2, $crate::modes::pmi_at_seeded_accesses_2());
        $suite!(
            masked_dropped_late_frozen_foreign_status,
            $crate::modes::masked_dropped_late_frozen_foreign_status()
        );
        $suite!(masked_level_late_unfrozen, $crate::modes::masked_level_late_unfrozen());
        $suite!(masked_held_frozen, $crate::modes::masked_held_frozen());
        $suite!(driver_work_late, $crate::modes::driver_work_late());
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modes_have_distinct_names_and_values() {
        let modes = all();
        for (i, (name, value)) in modes.iter().enumerate() {
            for (other, other_value) in &modes[i + 1..] {
                assert_ne!(name, other);
                assert_ne!(value, other_value, "{name} and {other}");
            }
        }
    }

    #[test]
    fn only_latency_and_driver_work_make_counts_inexact() {
        let inexact: Vec<&str> =
            all().into_iter().filter(|(_, m)| !m.exact_counts()).map(|(n, _)| n).collect();
        assert_eq!(
            inexact,
            [
                "masked_dropped_late_frozen_foreign_status",
                "masked_level_late_unfrozen",
                "driver_work_late"
            ]
        );
    }
}
