//! An event spec without a core type on a hybrid CPU (P-cores and E-cores with an event table
//! each): a PMC that counts on every core type needs the event in both tables, with the
//! P-cores' encoding in `pm_iap_config` and, where the E-cores encode it differently, theirs in
//! the driver's extension after `pm_iap` (`PmcMdOpPmcAllocate::iap_config_atom`).

use super::model::Hybrid;
use super::{Event, EventError, EventKind, HostEvents};

/// A P-core (Intel Core), CPUID.1AH:EAX\[31:24\].
const CORE: u8 = 0x40;
/// An E-core (Intel Atom).
const ATOM: u8 = 0x20;

/// How an event counts on every core type of a hybrid CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HybridEvent {
    /// The event as the P-cores (or a CPU that is not hybrid) encode it.
    pub event: Event,
    /// The E-cores' own encoding (the 64-bit IA32_PERFEVTSELx image, UMASK2 in bits 47:40),
    /// when it differs from the P-cores'.
    pub atom_evtsel: Option<u64>,
}

impl HostEvents {
    /// On a hybrid CPU, `spec` resolved in each core type's table alone (with the events every
    /// CPU has), as (core type, result) in the order of [`HostEvents::tables`]; empty on a CPU
    /// that is not hybrid.
    pub fn lookup_per_core_type(&self, spec: &str) -> Vec<(u8, Result<Event, EventError>)> {
        let tables = self.tables();
        tables
            .iter()
            .filter_map(|t| {
                let core_type = t.hybrid?.core_type;
                let own = tables.iter().filter(|o| same_type(o.hybrid, core_type)).copied();
                Some((core_type, self.lookup_in(spec, own.collect())))
            })
            .collect()
    }

    /// `spec` for a PMC that counts on every CPU: on a hybrid CPU, the P-cores' encoding and,
    /// where it differs, the E-cores' own; [`EventError::OneCoreType`] when only one core type
    /// has the event, and a [`EventError::BadQualifier`] when the two count it on different
    /// kinds of counter or it reads an offcore-response MSR (whose layouts differ). Elsewhere,
    /// [`HostEvents::lookup`].
    pub fn lookup_every_core_type(&self, spec: &str) -> Result<HybridEvent, EventError> {
        let per_type = self.lookup_per_core_type(spec);
        let of = |core_type: u8| per_type.iter().find(|(t, _)| *t == core_type).map(|(_, r)| r);
        let (Some(core), Some(atom)) = (of(CORE), of(ATOM)) else {
            return Ok(HybridEvent { event: self.lookup(spec)?, atom_evtsel: None });
        };
        let (core, atom) = match (core, atom) {
            (Ok(core), Ok(atom)) => (core, atom),
            (Ok(core), Err(EventError::Unknown { .. })) => return Err(one_type(spec, core, CORE)),
            (Err(EventError::Unknown { .. }), Ok(atom)) => return Err(one_type(spec, atom, ATOM)),
            (Err(error), _) | (_, Err(error)) => return Err(error.clone()),
        };
        if core.kind == atom.kind {
            return Ok(HybridEvent { event: core.clone(), atom_evtsel: None });
        }
        let differs = |detail: &str| {
            super::bad_qualifier(
                spec,
                format!(
                    "{} {detail} on the P-cores and the E-cores of this hybrid CPU: name one \
                     core type, cpu_core/{spec}/ or cpu_atom/{spec}/",
                    core.name
                ),
            )
        };
        match (&core.kind, &atom.kind) {
            (
                EventKind::Iap { offcore_rsp: None, .. },
                EventKind::Iap { evtsel, umask2, offcore_rsp: None },
            ) => Ok(HybridEvent {
                event: core.clone(),
                atom_evtsel: Some(u64::from(*evtsel) | u64::from(*umask2) << 40),
            }),
            (EventKind::Iap { .. }, EventKind::Iap { .. }) => {
                Err(differs("reads an offcore-response MSR laid out differently"))
            }
            _ => Err(differs("counts on different kinds of counter")),
        }
    }
}

/// Whether a table of core type `hybrid` is one of `core_type`.
fn same_type(hybrid: Option<Hybrid>, core_type: u8) -> bool {
    hybrid.is_some_and(|h| h.core_type == core_type)
}

/// [`EventError::OneCoreType`] for `event`, found only in the table of `core_type`.
fn one_type(spec: &str, event: &Event, core_type: u8) -> EventError {
    let (cores, table, prefix) = if core_type == CORE {
        ("P-cores", "Core", "cpu_core")
    } else {
        ("E-cores", "Atom", "cpu_atom")
    };
    EventError::OneCoreType {
        spec: spec.to_string(),
        name: event.name.clone(),
        cores: cores.to_string(),
        table: table.to_string(),
        prefix: prefix.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::CpuId;
    use super::{EventError, EventKind, HostEvents};
    use hwpmc::abi::Class;

    /// An Alder Lake host (family 6 model 0x97: a Core and an Atom table).
    fn alder_lake() -> HostEvents {
        HostEvents {
            classes: vec![Class::Tsc, Class::Iaf, Class::Iap, Class::Soft],
            cpu: Some(CpuId::parse("GenuineIntel-6-97-2").unwrap()),
            ..HostEvents::default()
        }
    }

    #[test]
    fn an_event_encoded_differently_carries_the_e_cores_encoding() {
        let found = alder_lake().lookup_every_core_type("UOPS_ISSUED.ANY,usr").unwrap();
        let EventKind::Iap { evtsel, .. } = found.event.kind else { panic!("{found:?}") };
        assert_eq!(evtsel, 0x01_01AE, "the P-cores' 0xAE/0x01, user mode");
        assert_eq!(found.atom_evtsel, Some(0x01_000E), "the E-cores' 0x0E/0x00, user mode");
    }

    #[test]
    fn an_event_encoded_alike_needs_one_encoding() {
        for spec in ["INST_RETIRED.ANY_P", "instructions", "event=0xc4,umask=0"] {
            let found = alder_lake().lookup_every_core_type(spec).unwrap();
            assert_eq!(found.atom_evtsel, None, "{spec}");
        }
    }

    #[test]
    fn an_event_of_one_core_type_is_refused_naming_it() {
        let error = alder_lake().lookup_every_core_type("MEM_SCHEDULER_BLOCK.ALL").unwrap_err();
        assert!(matches!(&error, EventError::OneCoreType { prefix, .. } if prefix == "cpu_atom"));
        assert!(error.to_string().contains("cpu_atom/MEM_SCHEDULER_BLOCK.ALL/"), "{error}");
        let error = alder_lake().lookup_every_core_type("LD_BLOCKS.STORE_FORWARD").unwrap_err();
        assert!(error.to_string().contains("P-cores only"), "{error}");
    }

    #[test]
    fn a_cpu_that_is_not_hybrid_looks_up_as_usual() {
        let skylake =
            HostEvents { cpu: Some(CpuId::parse("GenuineIntel-6-5E-3").unwrap()), ..alder_lake() };
        assert!(skylake.lookup_per_core_type("UOPS_ISSUED.ANY").is_empty());
        let found = skylake.lookup_every_core_type("UOPS_ISSUED.ANY").unwrap();
        assert_eq!(
            (found.event, found.atom_evtsel),
            (skylake.lookup("UOPS_ISSUED.ANY").unwrap(), None)
        );
    }
}
