//! The core PMUs perf offers, read from sysfs: one `cpu` PMU on most machines; on a hybrid Intel
//! machine `cpu_core` (the P-cores) and `cpu_atom` (the E-cores) instead, each with its perf
//! type number (`type`), its CPUs (`cpus`) and the events it names (`events/`, in the terms of
//! its `format/`).
//!
//! The sysfs root is a parameter, so tests describe a machine with a fake tree.

use std::collections::BTreeMap;
use std::path::Path;

use hwpmc::abi::PmcFlags;

/// Where perf's event sources are under the sysfs root.
pub(crate) const DEVICES: &str = "bus/event_source/devices";

/// The most CPUs a `cpus` list may name (a garbled range is an error, not an allocation).
const MAX_CPUS: u32 = 1 << 16;

/// A core type of a hybrid machine, as perf names its PMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum CoreType {
    /// The P-cores: PMU `cpu_core`, PMC_F_CORE_TYPE_CORE.
    Core,
    /// The E-cores: PMU `cpu_atom`, PMC_F_CORE_TYPE_ATOM.
    Atom,
}

impl CoreType {
    pub(crate) const ALL: [CoreType; 2] = [CoreType::Core, CoreType::Atom];

    /// perf's name of the core type's PMU.
    pub(crate) fn pmu_name(self) -> &'static str {
        match self {
            CoreType::Core => "cpu_core",
            CoreType::Atom => "cpu_atom",
        }
    }

    /// The cores in words.
    pub(crate) fn cores(self) -> &'static str {
        match self {
            CoreType::Core => "P-cores",
            CoreType::Atom => "E-cores",
        }
    }

    /// The core type a PMC's flags ask for, if one (the driver refuses both at once).
    pub(crate) fn of_flags(flags: PmcFlags) -> Option<CoreType> {
        if flags.contains(PmcFlags::CORE_TYPE_CORE) {
            Some(CoreType::Core)
        } else if flags.contains(PmcFlags::CORE_TYPE_ATOM) {
            Some(CoreType::Atom)
        } else {
            None
        }
    }
}

/// One core type's PMU on a hybrid machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CorePmu {
    pub(crate) core_type: CoreType,
    /// Its `perf_event_attr.type`.
    pub(crate) perf_type: u32,
    /// The CPUs it counts on, ascending.
    pub(crate) cpus: Vec<u32>,
    /// The events its `events/` directory names, with their raw `config` (events with terms
    /// outside `config`, such as `ldlat`, are left out); `None` without an `events/` directory.
    pub(crate) events: Option<BTreeMap<String, u64>>,
}

impl CorePmu {
    /// Its CPUs as sysfs writes them (`0-3,8`).
    pub(crate) fn cpu_list(&self) -> String {
        format_cpu_list(&self.cpus)
    }

    /// `cpu_core (P-cores, CPUs 0-3)`.
    pub(crate) fn described(&self) -> String {
        format!(
            "{} ({}, CPUs {})",
            self.core_type.pmu_name(),
            self.core_type.cores(),
            self.cpu_list()
        )
    }
}

/// The machine's core PMUs: empty when it is not hybrid (one `cpu` PMU, or none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CorePmus {
    pub(crate) hybrid: Vec<CorePmu>,
}

impl CorePmus {
    /// The PMU of `core_type`, if the machine has it.
    pub(crate) fn of(&self, core_type: CoreType) -> Option<&CorePmu> {
        self.hybrid.iter().find(|p| p.core_type == core_type)
    }

    /// The PMU whose CPUs include `cpu`.
    pub(crate) fn of_cpu(&self, cpu: u32) -> Option<&CorePmu> {
        self.hybrid.iter().find(|p| p.cpus.binary_search(&cpu).is_ok())
    }

    /// `cpu_core (P-cores, CPUs 0-3) and cpu_atom (E-cores, CPUs 4-7)`.
    pub(crate) fn described(&self) -> String {
        let all: Vec<String> = self.hybrid.iter().map(CorePmu::described).collect();
        all.join(" and ")
    }
}

/// Reads the core PMUs under the sysfs root `sysfs` (`/sys` on a real machine). A machine
/// without `cpu_core` and `cpu_atom` is not hybrid; a garbled `type` or `cpus` file is an
/// error naming the file.
pub(crate) fn discover(sysfs: &Path) -> Result<CorePmus, String> {
    let mut hybrid = Vec::new();
    for core_type in CoreType::ALL {
        let dir = sysfs.join(DEVICES).join(core_type.pmu_name());
        if !dir.is_dir() {
            continue;
        }
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
        };
        let type_text = read("type")?;
        let perf_type = type_text.trim().parse::<u32>().map_err(|_| {
            format!("{}: {:?} is not a perf type number", dir.join("type").display(), type_text)
        })?;
        let cpus = parse_cpu_list(&read("cpus")?)
            .map_err(|why| format!("{}: {why}", dir.join("cpus").display()))?;
        let formats = read_formats(&dir.join("format"));
        let events = read_events(&dir.join("events"), &formats);
        hybrid.push(CorePmu { core_type, perf_type, cpus, events });
    }
    Ok(CorePmus { hybrid })
}

/// Parses a CPU list as sysfs writes it (`0-3,8,10-11`; empty for none), ascending and without
/// repeats.
pub(crate) fn parse_cpu_list(text: &str) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let number =
            |s: &str| {
                s.trim().parse::<u32>().ok().filter(|&n| n < MAX_CPUS).ok_or_else(|| {
                    format!("{part:?} is not a CPU number or range below {MAX_CPUS}")
                })
            };
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(part)?, number(part)?),
        };
        if first > last {
            return Err(format!("the range {part:?} runs backwards"));
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Writes a CPU list as sysfs does (`0-3,8`).
pub(crate) fn format_cpu_list(cpus: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    parts.join(",")
}

/// Where a format term's bits go in `config`: (lowest bit, highest bit) ranges, low bits of the
/// value first. `None` for a term of `config1`/`config2` (ldlat, offcore_rsp, frontend).
type Format = Option<Vec<(u32, u32)>>;

/// The PMU's `format/` files: `event` is `config:0-7`, `umask` `config:8-15`, … Unreadable or
/// garbled files are left out (an event using them is then left out too).
fn read_formats(dir: &Path) -> BTreeMap<String, Format> {
    let mut formats = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return formats };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
        if let Some(format) = parse_format(&text) {
            formats.insert(name, format);
        }
    }
    formats
}

/// Parses one format file (`config:0-7,32-35`, `config:18`, `config1:0-15`).
fn parse_format(text: &str) -> Option<Format> {
    let (field, ranges) = text.trim().split_once(':')?;
    let mut bits = Vec::new();
    for range in ranges.split(',') {
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            None => (range.parse().ok()?, range.parse().ok()?),
        };
        if lo > hi || hi > 63 {
            return None;
        }
        bits.push((lo, hi));
    }
    match field {
        "config" => Some(Some(bits)),
        "config1" | "config2" | "config3" => Some(None),
        _ => None,
    }
}

/// The PMU's `events/` files as raw configs (`instructions` is `event=0xc0`). Scale and unit
/// files (`name.scale`, `name.unit`) are not events.
fn read_events(dir: &Path, formats: &BTreeMap<String, Format>) -> Option<BTreeMap<String, u64>> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut events = BTreeMap::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.contains('.') {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
        if let Some(config) = event_config(&text, formats) {
            events.insert(name, config);
        }
    }
    Some(events)
}

/// The raw config of an event's terms (`event=0x00,umask=0x3`; a term without a value is 1),
/// if every term is a `config` field the PMU's format describes.
fn event_config(text: &str, formats: &BTreeMap<String, Format>) -> Option<u64> {
    let mut config = 0u64;
    for term in text.trim().split(',').filter(|t| !t.is_empty()) {
        let (key, value) = match term.split_once('=') {
            Some((k, v)) => (k.trim(), parse_number(v.trim())?),
            None => (term.trim(), 1),
        };
        let ranges = formats.get(key)?.as_ref()?;
        let mut rest = value;
        for &(lo, hi) in ranges {
            let width = hi - lo + 1;
            let mask = if width == 64 { u64::MAX } else { (1 << width) - 1 };
            config |= (rest & mask) << lo;
            rest = if width == 64 { 0 } else { rest >> width };
        }
        if rest != 0 {
            // More bits than the field holds: not what the kernel means.
            return None;
        }
    }
    Some(config)
}

fn parse_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

#[cfg(test)]
pub(crate) mod fake {
    //! Fake sysfs trees for tests.

    use std::path::{Path, PathBuf};

    /// A fake sysfs root in a fresh temporary directory, removed when dropped.
    pub(crate) struct FakeSysfs {
        pub(crate) root: PathBuf,
    }

    impl FakeSysfs {
        pub(crate) fn new(name: &str) -> FakeSysfs {
            static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let root = std::env::temp_dir()
                .join(format!("libpmc-sysfs-{name}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            std::fs::create_dir_all(&root).unwrap();
            FakeSysfs { root }
        }

        /// Writes `text` to `path` under the root, making its directories.
        pub(crate) fn write(&self, path: &str, text: &str) -> &FakeSysfs {
            let path = self.root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
            self
        }

        /// A PMU as Linux describes Alder Lake's: Intel's format files and a few events.
        pub(crate) fn pmu(&self, name: &str, perf_type: u32, cpus: &str, events: &[(&str, &str)]) {
            let dir = format!("{}/{name}", super::DEVICES);
            self.write(&format!("{dir}/type"), &format!("{perf_type}\n"));
            self.write(&format!("{dir}/cpus"), &format!("{cpus}\n"));
            for (field, bits) in [
                ("event", "config:0-7"),
                ("umask", "config:8-15"),
                ("edge", "config:18"),
                ("pc", "config:19"),
                ("any", "config:21"),
                ("inv", "config:23"),
                ("cmask", "config:24-31"),
                ("ldlat", "config1:0-15"),
            ] {
                self.write(&format!("{dir}/format/{field}"), &format!("{bits}\n"));
            }
            for (event, terms) in events {
                self.write(&format!("{dir}/events/{event}"), &format!("{terms}\n"));
            }
        }

        /// The hybrid machine of the tests: cpu_core (type 4) on CPUs 0-3 with the generic
        /// events and a load-latency event, cpu_atom (type 8) on CPUs 4-7 without ref-cycles.
        pub(crate) fn hybrid(name: &str) -> FakeSysfs {
            let sysfs = FakeSysfs::new(name);
            let common = [
                ("instructions", "event=0xc0"),
                ("cpu-cycles", "event=0x3c"),
                ("branch-instructions", "event=0xc4"),
                ("branch-misses", "event=0xc5"),
                ("cache-misses", "event=0x2e,umask=0x41"),
            ];
            let mut core = common.to_vec();
            core.extend([
                ("ref-cycles", "event=0x00,umask=0x03"),
                ("mem-loads", "event=0xcd,umask=0x1,ldlat=3"),
                ("mem-loads.unit", "ns"),
            ]);
            sysfs.pmu("cpu_core", 4, "0-3", &core);
            sysfs.pmu("cpu_atom", 8, "4-7", &common);
            sysfs
        }

        pub(crate) fn path(&self) -> &Path {
            &self.root
        }
    }

    impl Drop for FakeSysfs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeSysfs;
    use super::*;

    #[test]
    fn cpu_lists_parse_as_sysfs_writes_them_and_garbled_ones_are_errors() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), Ok(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpu_list("\n"), Ok(vec![]));
        assert_eq!(parse_cpu_list("4,4,2"), Ok(vec![2, 4]));
        assert!(parse_cpu_list("3-1").unwrap_err().contains("backwards"));
        assert!(parse_cpu_list("a-b").unwrap_err().contains("not a CPU number"));
        assert!(parse_cpu_list("0-4294967295").is_err(), "a huge range is refused, not made");
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn a_hybrid_machine_has_cpu_core_and_cpu_atom_with_their_types_cpus_and_events() {
        let sysfs = FakeSysfs::hybrid("discover");
        let pmus = discover(sysfs.path()).unwrap();
        assert_eq!(pmus.hybrid.len(), 2);
        let core = pmus.of(CoreType::Core).unwrap();
        let atom = pmus.of(CoreType::Atom).unwrap();
        assert_eq!((core.perf_type, core.cpus.clone()), (4, vec![0, 1, 2, 3]));
        assert_eq!((atom.perf_type, atom.cpus.clone()), (8, vec![4, 5, 6, 7]));
        let events = core.events.as_ref().unwrap();
        assert_eq!(events.get("instructions"), Some(&0xC0));
        assert_eq!(events.get("cache-misses"), Some(&0x41_2E));
        assert_eq!(events.get("ref-cycles"), Some(&0x0300));
        assert_eq!(events.get("mem-loads"), None, "ldlat is config1's: no raw config alone");
        assert!(!events.contains_key("mem-loads.unit"));
        assert!(!atom.events.as_ref().unwrap().contains_key("ref-cycles"));
        assert_eq!(pmus.of_cpu(5).map(|p| p.core_type), Some(CoreType::Atom));
        assert_eq!(pmus.of_cpu(8), None);
        assert_eq!(
            pmus.described(),
            "cpu_core (P-cores, CPUs 0-3) and cpu_atom (E-cores, CPUs 4-7)"
        );
    }

    #[test]
    fn a_machine_without_hybrid_pmus_is_not_hybrid_and_a_garbled_type_is_an_error() {
        let plain = FakeSysfs::new("plain");
        plain.write(&format!("{DEVICES}/cpu/type"), "4\n");
        assert_eq!(discover(plain.path()), Ok(CorePmus::default()));
        let garbled = FakeSysfs::hybrid("garbled");
        garbled.write(&format!("{DEVICES}/cpu_atom/type"), "eight\n");
        let why = discover(garbled.path()).unwrap_err();
        assert!(why.contains("cpu_atom/type") && why.contains("not a perf type"), "{why}");
        let bad_cpus = FakeSysfs::hybrid("badcpus");
        bad_cpus.write(&format!("{DEVICES}/cpu_core/cpus"), "0-x\n");
        assert!(discover(bad_cpus.path()).unwrap_err().contains("cpu_core/cpus"));
    }

    #[test]
    fn this_machines_sysfs_says_whether_it_is_hybrid() {
        let sysfs = Path::new("/sys");
        let pmus = discover(sysfs).unwrap();
        let named = |t: CoreType| sysfs.join(DEVICES).join(t.pmu_name()).is_dir();
        let expected: Vec<CoreType> = CoreType::ALL.into_iter().filter(|&t| named(t)).collect();
        let found: Vec<CoreType> = pmus.hybrid.iter().map(|p| p.core_type).collect();
        assert_eq!(found, expected);
        for pmu in &pmus.hybrid {
            assert!(!pmu.cpus.is_empty(), "{pmu:?}");
        }
    }

    #[test]
    fn format_terms_place_values_in_their_bits() {
        let formats: BTreeMap<String, Format> = [
            ("event".to_string(), Some(vec![(0, 7), (32, 35)])),
            ("umask".to_string(), Some(vec![(8, 15)])),
            ("edge".to_string(), Some(vec![(18, 18)])),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            event_config("event=0x1c7,umask=3,edge", &formats),
            Some(0x1_0000_03C7 | 1 << 18)
        );
        assert_eq!(event_config("umask=0x1ff", &formats), None, "too wide for its field");
        assert_eq!(event_config("cmask=1", &formats), None, "no such format term");
    }
}
