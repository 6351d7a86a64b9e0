//! What the catalog makes of a vendor-table event: the counter class and how it is programmed,
//! or why it cannot be (what the driver would need).

use hwpmc::abi::Class;

use super::Target;
use super::encoding::{AmdCore, Offcore, Programmable};
use super::model::Vendor;
use super::table::{Counters, Unit, VendorEvent};

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
            // Fixed counter 3 (TOPDOWN.SLOTS): allocated where the host's PMU has it.
            0..=3 => (Class::Iaf, Target::Fixed(index)),
            _ => refused(
                Class::Iaf,
                format!(
                    "{name} is counted by fixed counter {index} only (perfmon v6 fixed-counter \
                     bitmap), which the driver does not support yet"
                ),
            ),
        };
    }
    let mut code = event.code;
    let mut umask = event.umask;
    let mut offcore = Offcore::No;
    if let Some(msr) = event.extra_msr {
        let pebs = match msr.index {
            0x1A6 | 0x1A7 => None,
            0x3F6 => Some(format!(
                "MSR_PEBS_LD_LAT_THRESHOLD (3F6h) set to {} (load latency)",
                msr.value
            )),
            0x3F7 => Some(format!("MSR_PEBS_FRONTEND (3F7h) set to {:#x} (frontend)", msr.value)),
            index => Some(format!("MSR {index:#x} set to {:#x}", msr.value)),
        };
        if let Some(what) = pebs {
            // Without PEBS these MSRs change nothing: the event would count every occurrence
            // instead of the ones the value selects.
            return refused(
                Class::Iap,
                format!(
                    "{name} needs {what}, which takes effect only with PEBS (precise sampling); \
                     the driver does not support PEBS"
                ),
            );
        }
        // An event the file allows through MSR_OFFCORE_RSP_1 only is counted by its second
        // encoding (0xBB on Core, umask 0x02 on Atom, 0x2B from Golden Cove).
        if msr.index == 0x1A7 && msr.count == 1 {
            code = event.second_code.unwrap_or(code);
            umask = event.second_umask.unwrap_or(umask);
        }
        offcore = Offcore::Value(msr.value);
    } else if event.second_code.is_some() || event.second_umask.is_some() {
        // The generic OFFCORE_RESPONSE event: the user gives the value.
        offcore = Offcore::Needed;
    }
    if event.precise == 2 {
        return refused(
            Class::Iap,
            format!(
                "{name} counts only with precise sampling (PEBS), which the driver does not support yet"
            ),
        );
    }
    let (Ok(code), Ok(umask)) = (u8::try_from(code), u8::try_from(umask)) else {
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
            offcore,
            // The extended unit mask: the driver refuses it on a CPU without UMASK2.
            umask2: event.umask_ext,
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
