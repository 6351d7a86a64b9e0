//! What the catalog makes of a vendor-table event: the counter class and how it is programmed,
//! or why it cannot be (what the driver would need).

use hwpmc::abi::Class;

use super::Target;
use super::catalog::Programmable;
use super::model::Vendor;
use super::table::{Counters, Unit, VendorEvent};

/// An AMD core event: the parts of PERF_CTL it defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AmdCore {
    /// The 12-bit event select (PERF_CTL bits 7:0 and 35:32).
    pub(super) code: u16,
    /// Unit mask, bits 15:8.
    pub(super) umask: u8,
}

/// The class and target of `event` from a `vendor` table.
pub(super) fn target(vendor: Vendor, event: &VendorEvent) -> (Class, Target) {
    match vendor {
        Vendor::Intel => intel(event),
        Vendor::Amd => amd(event),
    }
}

fn refused(class: Class, reason: String) -> (Class, Target) {
    (class, Target::Refused { reason })
}

fn intel(event: &VendorEvent) -> (Class, Target) {
    let name = event.name;
    if event.any_thread {
        return (Class::Iap, Target::AnyThread);
    }
    if let Counters::Fixed(index) = event.counters {
        return match index {
            0..=2 => (Class::Iaf, Target::Fixed(index)),
            _ => refused(
                Class::Iaf,
                format!(
                    "{name} is counted by fixed counter {index} only{}, which the driver does not \
                     support yet",
                    if index == 3 {
                        " (the slots counter)"
                    } else {
                        " (perfmon v5 fixed-counter bitmap)"
                    }
                ),
            ),
        };
    }
    if let Some(msr) = event.extra_msr {
        let what = match msr.index {
            0x1A6 | 0x1A7 => format!(
                "MSR_OFFCORE_RSP_0/1 (1A6h/1A7h) set to {:#x} (offcore response)",
                msr.value
            ),
            0x3F6 => format!(
                "MSR_PEBS_LD_LAT_THRESHOLD (3F6h) set to {} and PEBS (load latency)",
                msr.value
            ),
            0x3F7 => {
                format!("MSR_PEBS_FRONTEND (3F7h) set to {:#x} and PEBS (frontend)", msr.value)
            }
            index => format!("MSR {index:#x} set to {:#x}", msr.value),
        };
        return refused(
            Class::Iap,
            format!("{name} needs {what}, which the driver does not program yet"),
        );
    }
    if event.second_code.is_some() {
        return refused(
            Class::Iap,
            format!(
                "{name} is the generic offcore-response event: it needs a request/response value \
                 in MSR_OFFCORE_RSP_0/1 (1A6h/1A7h), which the driver does not program yet"
            ),
        );
    }
    if event.umask_ext != 0 {
        return refused(
            Class::Iap,
            format!(
                "{name} needs the extended unit mask {:#x} (IA32_PERFEVTSELx bits 47:40), which \
                 the driver does not program yet",
                event.umask_ext
            ),
        );
    }
    if event.precise == 2 {
        return refused(
            Class::Iap,
            format!(
                "{name} counts only with precise sampling (PEBS), which the driver does not support yet"
            ),
        );
    }
    let (Ok(code), Ok(umask)) = (u8::try_from(event.code), u8::try_from(event.umask)) else {
        return refused(
            Class::Iap,
            format!("{name} has an event code or unit mask wider than 8 bits"),
        );
    };
    (
        Class::Iap,
        Target::Programmable(Programmable {
            event: code,
            umask,
            cmask: event.cmask,
            invert: event.invert,
            edge: event.edge,
            arch_bit: None,
            rate: match event.sample_after {
                0 => super::DEFAULT_SAMPLE_RATE,
                rate => rate,
            },
        }),
    )
}

fn amd(event: &VendorEvent) -> (Class, Target) {
    let name = event.name;
    let unit = match event.unit {
        Unit::Core => None,
        Unit::L3 => Some("the L3 cache PMU"),
        Unit::DataFabric => Some("the data fabric PMU"),
        Unit::MemoryController => Some("the memory-controller (UMC) PMU"),
    };
    if let Some(unit) = unit {
        return refused(
            Class::K8,
            format!("{name} is counted by {unit}, for which the driver has no class yet"),
        );
    }
    match u8::try_from(event.umask) {
        Ok(umask) if event.code <= 0xFFF => {
            (Class::K8, Target::Amd(AmdCore { code: event.code, umask }))
        }
        _ => refused(
            Class::K8,
            format!("{name} has an event code wider than 12 bits or a unit mask wider than 8"),
        ),
    }
}
