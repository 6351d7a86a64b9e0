//! The PMU event tables: FreeBSD's "PMU events" are the rows of the running CPU's table (Intel's
//! perfmon JSON compiled into libpmc), and a PMC_F_EV_PMU allocation carries its event's row
//! index in `pm_ev`. Here a CPU's table is the IAF and IAP part of the catalog for its model —
//! the fixed counters, the architectural events and the x86 crate's table (the same JSON files)
//! — sorted by class and name. As with FreeBSD, an index means something only to a libpmc of the
//! same build. [`PmuEventNames`] names such events in logs, for readers such as pmcstat.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::{HostEvents, intel_model_key};
use hwpmc::abi::Class;

/// The catalog's table key (`"GenuineIntel-6-55"`) of a CPU id string as `kern.hwpmc.cpuid`
/// and the hosts spell it (`"GenuineIntel-6-55"`, `"GenuineIntel-6-55-4"` with the stepping):
/// vendor, decimal family, hex model. `None` for anything but Intel.
pub fn model_key(cpuid: &str) -> Option<String> {
    let mut parts = cpuid.trim().split('-');
    if parts.next()? != "GenuineIntel" {
        return None;
    }
    let family = parts.next()?.parse().ok()?;
    let model = u32::from_str_radix(parts.next()?, 16).ok()?;
    Some(intel_model_key(family, model))
}

/// The events of a CPU whose PMU has every IAF and IAP event of model `key`.
pub fn full_machine(key: &str) -> HostEvents {
    HostEvents {
        classes: vec![Class::Iaf, Class::Iap],
        intel_model: Some(key.to_string()),
        ..HostEvents::default()
    }
}

/// The tables made so far, by key.
static TABLES: Mutex<Option<HashMap<String, Arc<Vec<String>>>>> = Mutex::new(None);

/// The PMU table of model `key`: event names, in index order.
pub fn table(key: &str) -> Arc<Vec<String>> {
    let mut tables = TABLES.lock().unwrap_or_else(PoisonError::into_inner);
    let tables = tables.get_or_insert_with(HashMap::new);
    tables
        .entry(key.to_string())
        .or_insert_with(|| {
            Arc::new(full_machine(key).list().into_iter().map(|(_, name)| name).collect())
        })
        .clone()
}

/// FreeBSD's PMU aliases (`pmu_alias_get`) for the catalog's aliases: the table names they stand
/// for, the first one present in a table winning.
const PMU_ALIASES: &[(&str, &[&str])] = &[
    ("instructions", &["INST_RETIRED.ANY", "INSTR_RETIRED.ANY", "INSTRUCTION_RETIRED"]),
    (
        "unhalted-cycles",
        &["CPU_CLK_UNHALTED.THREAD", "CPU_CLK_UNHALTED.CORE", "UNHALTED_CORE_CYCLES"],
    ),
    (
        "unhalted-reference-cycles",
        &["CPU_CLK_UNHALTED.REF_TSC", "CPU_CLK_UNHALTED.REF", "UNHALTED_REFERENCE_CYCLES"],
    ),
    ("branches", &["BR_INST_RETIRED.ALL_BRANCHES", "BRANCH_INSTRUCTION_RETIRED"]),
    ("branch-mispredicts", &["BR_MISP_RETIRED.ALL_BRANCHES", "BRANCH_MISSES_RETIRED"]),
    ("cache-references", &["LONGEST_LAT_CACHE.REFERENCE", "LLC_REFERENCE"]),
    ("cache-misses", &["LONGEST_LAT_CACHE.MISS", "LLC_MISSES"]),
];

/// The index in `table` of the event the catalog calls `name` (a canonical name or an alias).
pub fn index_in(table: &[String], name: &str) -> Option<u32> {
    let aliases = PMU_ALIASES.iter().find(|(alias, _)| alias.eq_ignore_ascii_case(name));
    let candidates =
        std::iter::once(name).chain(aliases.into_iter().flat_map(|(_, n)| n.iter().copied()));
    candidates
        .filter_map(|candidate| table.iter().position(|n| n.eq_ignore_ascii_case(candidate)))
        .map(|i| i as u32)
        .next()
}

/// Names PMU-table events in logs (`pmclog::EventNames`): entry `index` of the table of the CPU
/// the log's INITIALIZE record names.
#[derive(Debug, Clone, Copy, Default)]
pub struct PmuEventNames;

/// Tables lent to [`PmuEventNames`] for the life of the process: one per CPU model a reader
/// meets, so the memory is bounded by the models in this build's tables.
static LENT: Mutex<Option<HashMap<String, &'static [String]>>> = Mutex::new(None);

impl pmclog::EventNames for PmuEventNames {
    fn pmu_event(&self, cpuid: &[u8], index: u32) -> Option<&str> {
        // The record's field is NUL-padded.
        let cpuid = &cpuid[..cpuid.iter().position(|&b| b == 0).unwrap_or(cpuid.len())];
        let key = model_key(std::str::from_utf8(cpuid).ok()?)?;
        let mut lent = LENT.lock().unwrap_or_else(PoisonError::into_inner);
        let table: &'static [String] = lent
            .get_or_insert_with(HashMap::new)
            .entry(key.clone())
            .or_insert_with(|| Box::leak(table(&key).to_vec().into_boxed_slice()));
        table.get(index as usize).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmclog::EventNames;

    #[test]
    fn an_index_names_the_same_event_in_a_log_of_the_same_cpu() {
        let key = "GenuineIntel-6-55";
        let index = index_in(&table(key), "branches").expect("branches has a row");
        let name = PmuEventNames.pmu_event(b"GenuineIntel-6-55-4\0\0\0", index);
        assert_eq!(name, Some(table(key)[index as usize].as_str()));
        assert!(name.is_some_and(|n| n.contains("BR") || n.contains("BRANCH")), "{name:?}");
    }

    #[test]
    fn cpus_without_a_table_name_nothing() {
        assert_eq!(PmuEventNames.pmu_event(b"AuthenticAMD-23-1", 0), None);
        assert_eq!(PmuEventNames.pmu_event(b"\xff", 0), None);
    }
}
