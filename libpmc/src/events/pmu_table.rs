//! The PMU event tables: FreeBSD's "PMU events" are the rows of the running CPU's table (Intel's
//! perfmon JSON compiled into libpmc), and a PMC_F_EV_PMU allocation carries its event's row
//! index in `pm_ev`. Here a CPU's table is the hardware part of the catalog for its model —
//! the fixed counters, the architectural events and the model's vendor tables (generated from
//! the same JSON files) — sorted by class and name. As with FreeBSD, an index means something only to a libpmc of the
//! same build. [`PmuEventNames`] names such events in logs, for readers such as pmcstat.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::model::CpuId;
use super::{HostEvents, freebsd_alias};
use hwpmc::abi::Class;

/// The catalog's table key of a CPU id string as `kern.hwpmc.cpuid`, pmclog and the hosts
/// spell it (`"GenuineIntel-6-55"`, `"GenuineIntel-6-55-4"` with the stepping): the id in
/// FreeBSD's `pmc_cpuid` format (`"GenuineIntel-6-55-4"`). `None` if it is malformed or the CPU
/// has no event table.
pub fn model_key(cpuid: &str) -> Option<String> {
    let cpu = CpuId::parse(cpuid).ok()?;
    (!cpu.tables().is_empty()).then(|| cpu.to_string())
}

/// The events of a CPU whose PMU has every hardware event (IAF, IAP, K8) of model `key`.
pub fn full_machine(key: &str) -> HostEvents {
    HostEvents {
        classes: vec![Class::Iaf, Class::Iap, Class::K8],
        cpu: CpuId::parse(key).ok(),
        // Every fixed counter the catalog places events on (0 to 3).
        fixed_counters: Some(4),
        ..HostEvents::default()
    }
}

/// A description of our own of the vendor-table event `name` of model `key`: its category,
/// encoding and constraints (`cache: event 0x24, umask 0xc1; counters 0-3; sample after
/// 200003`), as `pmc_pmu_print_counter_desc` prints it.
pub fn summary(key: &str, name: &str) -> Option<String> {
    let tables = CpuId::parse(key).ok()?.tables();
    tables.iter().find_map(|t| t.table.find(name)).map(|event| event.summary())
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

/// The static aliases' table names when the CPU's tables lack FreeBSD's PMU alias target.
const STATIC_ALIASES: &[(&str, &[&str])] = &[
    ("instructions", &["INSTRUCTION_RETIRED"]),
    ("unhalted-cycles", &["UNHALTED_CORE_CYCLES"]),
    ("branches", &["BRANCH_INSTRUCTION_RETIRED"]),
    ("branch-mispredicts", &["BRANCH_MISSES_RETIRED"]),
    ("cache-references", &["LLC_REFERENCE"]),
    ("cache-misses", &["LLC_MISSES"]),
];

/// The index in `table` of the event the catalog calls `name` (a canonical name or an alias:
/// FreeBSD's PMU alias target first, then the static alias's).
pub fn index_in(table: &[String], name: &str) -> Option<u32> {
    let pmu_targets = [freebsd_alias::INTEL, freebsd_alias::AMD]
        .into_iter()
        .flat_map(|aliases| aliases.iter())
        .filter(|(alias, _)| alias.eq_ignore_ascii_case(name))
        .flat_map(|&(_, target)| std::iter::once(target).chain(super::own_thread_name(target)));
    let static_targets = STATIC_ALIASES
        .iter()
        .filter(|(alias, _)| alias.eq_ignore_ascii_case(name))
        .flat_map(|(_, names)| names.iter().copied());
    let candidates = std::iter::once(name).chain(pmu_targets).chain(static_targets);
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
        assert_eq!(PmuEventNames.pmu_event(b"AuthenticAMD-21-1", 0), None);
        assert_eq!(PmuEventNames.pmu_event(b"\xff", 0), None);
    }
}
