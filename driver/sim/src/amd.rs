//! Simulated AMD CPUs: what their CPUID reports about the core performance counters (AMD64
//! APM vol. 2 §13.2; vol. 3, CPUID Fn8000_0001 ECX and Fn8000_0022), and the presets
//! `PMC_SIM_MODEL` names: [`PmuModel::zen2`], [`PmuModel::zen4`] and [`PmuModel::k10`].
//!
//! The registers themselves are modelled in `pmu/amd.rs`: 48-bit counters, PERF_CTL with the
//! 12-bit event select split over bits 7:0 and 35:32, the legacy and the extended MSR layouts,
//! and PerfMonV2's global control and status.
//!
//! An AMD CPU counts the events of a [`Work`] through these event selects (unit mask 0):
//! `ls_not_halted_cyc` 0x076 (core cycles), `ex_ret_instr` 0x0C0 (instructions), `ex_ret_brn`
//! 0x0C2 (branches) and `ex_ret_brn_misp` 0x0C3 (mispredicted branches); a [`Work::raw`] entry
//! counts for the event select it names (events 0x000–0x0FF).

pub use crate::amd_features::{AUTHENTIC_AMD, AmdFeatures, PERF_CTR_EXT_CORE, PERFMON_V2};
pub use crate::arch_event::{amd_event, arch_event_of};
use crate::cpuid::PmuModel;
use crate::quirks::Quirks;
#[cfg(doc)]
use crate::work::Work;

/// An AMD model: `signature` (family, model, stepping), `max_basic_leaf`, `amd` features and
/// `counters` core counters; otherwise no Intel performance-monitoring feature.
const fn amd_model(
    (family, model, stepping): (u32, u32, u32),
    max_basic_leaf: u32,
    amd: AmdFeatures,
) -> PmuModel {
    PmuModel {
        vendor: AUTHENTIC_AMD,
        family,
        model,
        stepping,
        max_basic_leaf,
        version: 0,
        gp_counters: amd.core_counters(),
        gp_width: 48,
        fixed_counters: 0,
        fixed_bitmap: 0,
        fixed_width: 0,
        arch_events_len: 0,
        arch_events_unavailable: 0,
        anythread_deprecated: false,
        pdcm: false,
        perf_capabilities: 0,
        freeze_on_pmi: false,
        topdown_slots_per_cycle: 0,
        hypervisor: false,
        offcore_rsp_valid: [0; 2],
        umask2: false,
        quirks: Quirks::BARE_METAL,
        core_type: 0,
        amd: Some(amd),
    }
}

/// 8000_0001h ECX of Zen 2 and Zen 4 EPYCs: LahfSahf to TopologyExtensions, with
/// PerfCtrExtCore (23), PerfCtrExtNB (24) and PerfCtrExtLLC (28).
const ZEN_EXT_ECX: u32 = 0x75C2_37FF;

impl PmuModel {
    /// Zen 2 (EPYC 7002 "Rome": family 17h model 31h stepping 0, signature 0x830F10):
    /// PerfCtrExtCore, 6 core counters of 48 bits, no PerfMonV2 (extended leaves up to
    /// 8000_0020h).
    pub const fn zen2() -> Self {
        amd_model(
            (0x17, 0x31, 0),
            0x10,
            AmdFeatures {
                max_extended_leaf: 0x8000_0020,
                ext_features_ecx: ZEN_EXT_ECX,
                leaf_8000_0022: (0, 0),
            },
        )
    }

    /// Zen 4 (EPYC 9004 "Genoa": family 19h model 11h stepping 1, signature 0xA10F11):
    /// PerfCtrExtCore and PerfMonV2 with 6 core counters of 48 bits (8000_0022h EAX = 3,
    /// PerfMonV2 and LbrExtV2; EBX = 0x4106: 6 core counters, 16 LBR entries, 16 data-fabric
    /// counters). The default AMD model.
    pub const fn zen4() -> Self {
        amd_model(
            (0x19, 0x11, 1),
            0x10,
            AmdFeatures {
                max_extended_leaf: 0x8000_0028,
                ext_features_ecx: ZEN_EXT_ECX,
                leaf_8000_0022: (0x3, 0x4106),
            },
        )
    }

    /// Family 10h (Phenom II X4 "Deneb": family 10h model 04h stepping 2, signature 0x100F42):
    /// the 4 legacy core counters at C001_0000h / C001_0004h only, no PerfCtrExtCore, no
    /// PerfMonV2.
    pub const fn k10() -> Self {
        amd_model(
            (0x10, 0x04, 2),
            0x5,
            AmdFeatures {
                max_extended_leaf: 0x8000_001B,
                ext_features_ecx: 0x37FF,
                leaf_8000_0022: (0, 0),
            },
        )
    }

    /// Whether this is an AMD model.
    pub const fn is_amd(&self) -> bool {
        self.amd.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch_event::ArchEvent;
    use crate::cpuid::CpuidModel;
    use raw_cpuid::{CpuIdReader, CpuIdResult};

    #[test]
    fn presets_are_valid_and_report_real_signatures() {
        for (model, signature, counters) in [
            (PmuModel::zen2(), 0x0083_0F10, 6),
            (PmuModel::zen4(), 0x00A1_0F11, 6),
            (PmuModel::k10(), 0x0010_0F42, 4),
        ] {
            assert_eq!(model.validate(), Ok(()), "{model:?}");
            assert_eq!(model.signature(), signature);
            assert_eq!(model.gp_counter_count(), counters);
            let cpuid = CpuidModel::new(model, 0);
            assert_eq!(cpuid.cpuid1(0xA), CpuIdResult { eax: 0, ebx: 0, ecx: 0, edx: 0 });
            assert_eq!(cpuid.cpuid1(0x8000_0001).eax, signature);
        }
        let zen4 = CpuidModel::new(PmuModel::zen4(), 0);
        assert_eq!(zen4.cpuid1(0x8000_0022).ebx & 0xF, 6);
        assert!(!PmuModel::zen2().amd.unwrap().perfmon_v2());
        assert_eq!(CpuidModel::new(PmuModel::zen2(), 0).cpuid1(0x8000_0022).eax, 0);
    }

    #[test]
    fn validate_refuses_inconsistent_amd_models() {
        let bad = [
            PmuModel { gp_counters: 4, ..PmuModel::zen4() },
            PmuModel { gp_width: 40, ..PmuModel::zen2() },
            PmuModel { family: 6, ..PmuModel::zen2() },
            PmuModel { version: 2, ..PmuModel::zen2() },
        ];
        for model in bad {
            assert!(model.validate().is_err(), "{model:?}");
        }
    }

    #[test]
    fn architectural_events_map_to_amd_event_selects() {
        assert_eq!(arch_event_of(0x0C0, 0), Some(ArchEvent::Instructions));
        assert_eq!(arch_event_of(0x076, 0), Some(ArchEvent::CoreCycles));
        assert_eq!(arch_event_of(0x0C0, 1), None);
        assert!(!PmuModel::zen4().arch_event_available(ArchEvent::RefCycles));
        assert!(PmuModel::zen4().arch_event_available(ArchEvent::BranchMispredicts));
    }
}
