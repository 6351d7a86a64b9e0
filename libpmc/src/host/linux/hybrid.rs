//! Which core PMUs a PMC's perf events open on, and with which `perf_event_attr` type and
//! config.
//!
//! On a machine that is not hybrid every PMC is one kind of perf event (software, generic
//! hardware, raw). On a hybrid machine a hardware PMC opens on `cpu_core`, `cpu_atom` or both:
//!
//! * with PMC_F_CORE_TYPE_CORE / _ATOM, on that core type's PMU (a system PMC's CPU must be
//!   one of its CPUs);
//! * a system PMC without a core type, on the PMU of its CPU;
//! * a process PMC without a core type, on every core PMU (perf's `cpu_core/instructions/` and
//!   `cpu_atom/instructions/`), its count their sum.
//!
//! Without a core type the event must exist on each PMU it opens on, as sysfs says: a generic
//! event by its name in the PMU's `events/` (`instructions`, `cpu-cycles`, `ref-cycles`), a raw
//! encoding by being one of the encodings listed there (the architectural events). Any other
//! raw encoding belongs to one core type's event table, and the PMC must name the core type.
//! Generic events use perf's extended type (`PERF_TYPE_HARDWARE` with the PMU's type in config
//! bits 63:32); raw events the PMU's own type.

use super::perf::{EventAttr, PERF_TYPE_HARDWARE, Source};
use super::pmus::{CorePmu, CorePmus, CoreType};

/// One perf event of a PMC (per thread for a process PMC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    /// Its type and config.
    pub(crate) attr: EventAttr,
    /// The core type whose PMU counts it, on a hybrid machine.
    pub(crate) core_type: Option<CoreType>,
    /// The CPUs it can count on (`None`: all).
    pub(crate) cpus: Option<Vec<u32>>,
}

/// sysfs's name of perf generic hardware event `hw` (`PERF_COUNT_HW_*`).
fn generic_name(hw: u64) -> Option<&'static str> {
    Some(match hw {
        0 => "cpu-cycles",
        1 => "instructions",
        2 => "cache-references",
        3 => "cache-misses",
        4 => "branch-instructions",
        5 => "branch-misses",
        6 => "bus-cycles",
        9 => "ref-cycles",
        _ => return None,
    })
}

/// The event in words, for messages.
fn described(source: Source) -> String {
    match source {
        Source::Hardware(hw) => match generic_name(hw) {
            Some(name) => format!("the generic event {name}"),
            None => format!("generic hardware event {hw}"),
        },
        Source::Raw(config) => format!("the raw encoding {config:#x}"),
        Source::Software(config) => format!("software event {config}"),
    }
}

/// Whether `pmu`'s sysfs events include `source` (an event it has no `events/` for is taken to
/// exist when generic, and not proven when raw).
fn listed(pmu: &CorePmu, source: Source) -> bool {
    match (source, &pmu.events) {
        (Source::Hardware(_), None) => true,
        (Source::Hardware(hw), Some(events)) => {
            generic_name(hw).is_some_and(|name| events.contains_key(name))
        }
        (Source::Raw(config), Some(events)) => events.values().any(|&c| c == config),
        _ => false,
    }
}

/// The attr of `source` on `pmu`.
fn attr_on(pmu: &CorePmu, source: Source) -> EventAttr {
    match source {
        Source::Hardware(hw) => {
            EventAttr { kind: PERF_TYPE_HARDWARE, config: u64::from(pmu.perf_type) << 32 | hw }
        }
        Source::Raw(config) => EventAttr { kind: pmu.perf_type, config },
        Source::Software(_) => source.attr(),
    }
}

fn on(pmu: &CorePmu, source: Source) -> Placement {
    Placement {
        attr: attr_on(pmu, source),
        core_type: Some(pmu.core_type),
        cpus: Some(pmu.cpus.clone()),
    }
}

/// The perf events of a PMC counting `source`, of core type `wanted` if one, on `cpu` for a
/// system PMC. `Err` says why it cannot be counted (for EINVAL).
pub(crate) fn place(
    pmus: &CorePmus,
    source: Source,
    wanted: Option<CoreType>,
    cpu: Option<u32>,
) -> Result<Vec<Placement>, String> {
    let plain = Placement { attr: source.attr(), core_type: None, cpus: None };
    if pmus.hybrid.is_empty() {
        return match wanted {
            None => Ok(vec![plain]),
            Some(core_type) => Err(format!(
                "{}/…/ counts on the {} of a hybrid machine, and this one is not hybrid (perf \
                 has no cpu_core or cpu_atom PMU)",
                core_type.pmu_name(),
                core_type.cores()
            )),
        };
    }
    if matches!(source, Source::Software(_)) {
        return Ok(vec![plain]);
    }
    if let Some(core_type) = wanted {
        let pmu = pmus.of(core_type).ok_or_else(|| {
            format!(
                "this machine has no {} PMU: its core PMUs are {}",
                core_type.pmu_name(),
                pmus.described()
            )
        })?;
        if let Some(cpu) = cpu.filter(|c| pmu.cpus.binary_search(c).is_err()) {
            let actual = pmus.of_cpu(cpu).map_or_else(
                || "a CPU of no core PMU".to_string(),
                |p| format!("one of the {} ({})", p.core_type.cores(), p.core_type.pmu_name()),
            );
            return Err(format!(
                "CPU {cpu} is {actual}, not one of {}'s CPUs ({}): a {}/…/ PMC counts on {}",
                pmu.core_type.pmu_name(),
                pmu.cpu_list(),
                pmu.core_type.pmu_name(),
                pmu.core_type.cores()
            ));
        }
        return Ok(vec![on(pmu, source)]);
    }
    let candidates: Vec<&CorePmu> = match cpu {
        Some(cpu) => vec![pmus.of_cpu(cpu).ok_or_else(|| {
            format!("CPU {cpu} is in no core PMU's CPU list: {}", pmus.described())
        })?],
        None => pmus.hybrid.iter().collect(),
    };
    let missing: Vec<&CorePmu> =
        candidates.iter().copied().filter(|p| !listed(p, source)).collect();
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|p| p.core_type.pmu_name()).collect();
        let why = match source {
            Source::Raw(_) => "a raw encoding that is not one of the architectural events sysfs \
                               lists belongs to one core type's event table"
                .to_string(),
            _ => format!("sysfs lists it for no {}", names.join(" or ")),
        };
        let prefixes: Vec<String> = candidates
            .iter()
            .map(|p| format!("{}/EVENT/ ({})", p.core_type.pmu_name(), p.core_type.cores()))
            .collect();
        return Err(format!(
            "on this hybrid machine ({}) {} cannot be counted without a core type ({why}): \
             name the core type, as {}",
            pmus.described(),
            described(source),
            prefixes.join(" or ")
        ));
    }
    Ok(candidates.into_iter().map(|p| on(p, source)).collect())
}

#[cfg(test)]
mod tests {
    use super::super::perf::PERF_TYPE_RAW;
    use super::super::pmus::discover;
    use super::super::pmus::fake::FakeSysfs;
    use super::*;

    const INSTRUCTIONS: u64 = 1;
    const REF_CYCLES: u64 = 9;

    fn hybrid() -> CorePmus {
        discover(FakeSysfs::hybrid("place").path()).unwrap()
    }

    #[test]
    fn a_core_type_opens_generic_events_with_the_extended_type_and_raw_ones_on_the_pmus_type() {
        let pmus = hybrid();
        let core = place(&pmus, Source::Hardware(INSTRUCTIONS), Some(CoreType::Core), None);
        assert_eq!(
            core.unwrap(),
            [Placement {
                attr: EventAttr { kind: PERF_TYPE_HARDWARE, config: 4 << 32 | INSTRUCTIONS },
                core_type: Some(CoreType::Core),
                cpus: Some(vec![0, 1, 2, 3]),
            }]
        );
        let atom = place(&pmus, Source::Raw(0x01_D1), Some(CoreType::Atom), None).unwrap();
        assert_eq!(atom[0].attr, EventAttr { kind: 8, config: 0x01_D1 });
        assert_eq!(atom[0].cpus.as_deref(), Some(&[4, 5, 6, 7][..]));
    }

    #[test]
    fn a_process_pmc_without_a_core_type_opens_on_both_pmus_when_both_list_the_event() {
        let pmus = hybrid();
        let both = place(&pmus, Source::Hardware(INSTRUCTIONS), None, None).unwrap();
        let attrs: Vec<EventAttr> = both.iter().map(|p| p.attr).collect();
        assert_eq!(
            attrs,
            [
                EventAttr { kind: PERF_TYPE_HARDWARE, config: 4 << 32 | INSTRUCTIONS },
                EventAttr { kind: PERF_TYPE_HARDWARE, config: 8 << 32 | INSTRUCTIONS },
            ]
        );
        // branch-instructions' encoding (0xC4) is listed by both: an architectural event.
        let raw = place(&pmus, Source::Raw(0xC4), None, None).unwrap();
        assert_eq!(raw.iter().map(|p| p.attr.kind).collect::<Vec<_>>(), [4, 8]);
    }

    #[test]
    fn an_event_one_pmu_lacks_is_refused_without_a_core_type_naming_the_core_types() {
        let pmus = hybrid();
        let why = place(&pmus, Source::Hardware(REF_CYCLES), None, None).unwrap_err();
        assert!(why.contains("ref-cycles") && why.contains("no cpu_atom"), "{why}");
        assert!(why.contains("cpu_core/EVENT/ (P-cores) or cpu_atom/EVENT/ (E-cores)"), "{why}");
        let why = place(&pmus, Source::Raw(0x01_D1), None, None).unwrap_err();
        assert!(why.contains("0x1d1") && why.contains("one core type's event table"), "{why}");
        // With the core type it is counted.
        assert!(place(&pmus, Source::Hardware(REF_CYCLES), Some(CoreType::Core), None).is_ok());
    }

    #[test]
    fn a_system_pmc_opens_on_its_cpus_pmu_and_a_core_type_of_another_cpu_is_refused() {
        let pmus = hybrid();
        let on5 = place(&pmus, Source::Hardware(INSTRUCTIONS), None, Some(5)).unwrap();
        assert_eq!(on5.len(), 1);
        assert_eq!(on5[0].attr.config, 8 << 32 | INSTRUCTIONS);
        assert_eq!(on5[0].core_type, Some(CoreType::Atom));
        let why = place(&pmus, Source::Hardware(INSTRUCTIONS), Some(CoreType::Core), Some(5))
            .unwrap_err();
        assert!(
            why.contains(
                "CPU 5 is one of the E-cores (cpu_atom), not one of cpu_core's CPUs (0-3)"
            ),
            "{why}"
        );
        let why = place(&pmus, Source::Hardware(INSTRUCTIONS), None, Some(9)).unwrap_err();
        assert!(why.contains("CPU 9 is in no core PMU"), "{why}");
    }

    #[test]
    fn a_machine_that_is_not_hybrid_uses_perfs_plain_types_and_refuses_a_core_type() {
        let plain = CorePmus::default();
        let raw = place(&plain, Source::Raw(0xC0), None, None).unwrap();
        assert_eq!(raw[0].attr, EventAttr { kind: PERF_TYPE_RAW, config: 0xC0 });
        assert_eq!(raw[0].cpus, None);
        let why = place(&plain, Source::Raw(0xC0), Some(CoreType::Atom), None).unwrap_err();
        assert!(why.contains("cpu_atom/…/") && why.contains("not hybrid"), "{why}");
        // Software events are no PMU's on a hybrid machine either.
        let pmus = hybrid();
        let soft = place(&pmus, Source::Software(1), None, None).unwrap();
        assert_eq!(soft[0].attr, EventAttr { kind: 1, config: 1 });
    }
}
