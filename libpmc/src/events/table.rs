//! The vendors' event tables (generated into `generated/` by `eventgen`): each table is parsed
//! on first use and indexed by name with FreeBSD's separator folding.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::generated::TABLES;
use super::suggest::normalize;
use super::table_rows::{TableSource, Vendor};

/// Which counters may count an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counters {
    /// Any general-purpose counter (AMD's files give no constraint).
    Any,
    /// The general-purpose counters of this mask (bit i: counter i).
    General(u32),
    /// Only fixed counter N.
    Fixed(u8),
}

/// The PMU an AMD event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// The core's counters (Intel's are all core events here).
    Core,
    /// AMD's L3 cache PMU.
    L3,
    /// AMD's data fabric PMU.
    DataFabric,
    /// AMD's memory-controller (UMC) PMU.
    MemoryController,
}

/// The extra MSR an event needs programmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtraMsr {
    /// The first MSR (0x1A6 offcore response 0, 0x3F6 load latency, 0x3F7 frontend, …).
    pub index: u32,
    /// How many MSRs the event may use (2 for offcore response: 0x1A6 or 0x1A7).
    pub count: u8,
    /// The value the vendor's file gives.
    pub value: u64,
}

/// One event of a vendor table, as the vendor's file describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorEvent {
    /// The vendor's name (`INST_RETIRED.ANY_P`, `ex_ret_instr`).
    pub name: &'static str,
    /// The event select code (12 bits on AMD).
    pub code: u16,
    /// A second code the event may also use (older offcore-response events: 0xB7 or 0xBB).
    pub second_code: Option<u16>,
    /// The unit mask (12 bits for AMD's data fabric).
    pub umask: u16,
    /// A second unit mask (hybrid Atom offcore-response events, one per MSR).
    pub second_umask: Option<u16>,
    /// The extended unit mask (IA32_PERFEVTSELx bits 47:40), 0 if none.
    pub umask_ext: u8,
    /// Counter mask (CMASK).
    pub cmask: u8,
    /// Invert the counter-mask comparison.
    pub invert: bool,
    /// Edge detect.
    pub edge: bool,
    /// Counts both hyperthreads of a core (AnyThread).
    pub any_thread: bool,
    /// Which counters may count it.
    pub counters: Counters,
    /// The extra MSR it needs, if any.
    pub extra_msr: Option<ExtraMsr>,
    /// The vendor's sampling period; 0 when it gives none.
    pub sample_after: u64,
    /// 0: no precise sampling; 1: can sample precisely (PEBS); 2: only precisely.
    pub precise: u8,
    /// The vendor marks it deprecated.
    pub deprecated: bool,
    /// Which PMU counts it.
    pub unit: Unit,
    /// A short category (`cache`, `branch`, `pipeline`, …; AMD: the Linux file's topic).
    pub category: &'static str,
}

impl VendorEvent {
    /// A one-line description of our own: category, encoding, counters, sample-after value,
    /// precise sampling and the extra MSR (`cache: event 0x24, umask 0xc1; counters 0-3`).
    pub fn summary(&self) -> String {
        let mut text = format!("{}: event {:#x}", self.category, self.code);
        if let Some(second) = self.second_code {
            text += &format!(" or {second:#x}");
        }
        text += &format!(", umask {:#x}", self.umask);
        if let Some(second) = self.second_umask {
            text += &format!(" or {second:#x}");
        }
        if self.umask_ext != 0 {
            text += &format!(", extended umask {:#x}", self.umask_ext);
        }
        if self.cmask != 0 {
            text += &format!(", cmask {}", self.cmask);
        }
        for (set, flag) in [(self.invert, "inv"), (self.edge, "edge"), (self.any_thread, "any")] {
            if set {
                text += &format!(", {flag}");
            }
        }
        match self.counters {
            Counters::Any => {}
            Counters::Fixed(index) => text += &format!("; fixed counter {index}"),
            Counters::General(mask) => {
                let list: Vec<String> =
                    (0..32).filter(|i| mask & (1 << i) != 0).map(|i| i.to_string()).collect();
                text += &format!("; counters {}", list.join(","));
            }
        }
        if self.sample_after != 0 {
            text += &format!("; sample after {}", self.sample_after);
        }
        match self.precise {
            0 => {}
            1 => text += "; precise sampling",
            _ => text += "; precise sampling only",
        }
        if let Some(msr) = self.extra_msr {
            text += &format!("; MSR {:#x} = {:#x}", msr.index, msr.value);
        }
        if self.deprecated {
            text += "; deprecated";
        }
        text
    }
}

/// A parsed table with its name index.
#[derive(Debug)]
pub struct Table {
    source: &'static TableSource,
    events: Vec<VendorEvent>,
    by_name: HashMap<String, u32>,
}

/// The parsed tables, one slot per generated table.
static PARSED: [OnceLock<Table>; TABLES.len()] = [const { OnceLock::new() }; TABLES.len()];

impl Table {
    /// Table `index` of the generated list, parsed on first use.
    pub(crate) fn get(index: usize) -> Option<&'static Table> {
        let source = TABLES.get(index)?;
        Some(PARSED[index].get_or_init(|| Table::parse(source)))
    }

    /// Every generated table's name, in index order.
    pub fn names() -> impl Iterator<Item = &'static str> {
        TABLES.iter().map(|t| t.name)
    }

    /// The table named `name` (`skylake`, `amdzen4`).
    pub fn by_table_name(name: &str) -> Option<&'static Table> {
        Table::get(TABLES.iter().position(|t| t.name == name)?)
    }

    fn parse(source: &'static TableSource) -> Table {
        let events: Vec<VendorEvent> = source.events.lines().filter_map(parse_line).collect();
        let mut by_name = HashMap::with_capacity(events.len());
        for (index, event) in events.iter().enumerate() {
            by_name.entry(normalize(event.name)).or_insert(index as u32);
        }
        Table { source, events, by_name }
    }

    /// The table's name (`skylake`).
    pub fn name(&self) -> &'static str {
        self.source.name
    }

    /// Whose events these are.
    pub fn vendor(&self) -> Vendor {
        self.source.vendor
    }

    /// The events, in the vendor's order.
    pub fn events(&self) -> &[VendorEvent] {
        &self.events
    }

    /// How many lines the generated file has (each one event; for checking that none was
    /// dropped by the parser).
    pub fn line_count(&self) -> usize {
        self.source.events.lines().count()
    }

    /// The size of the table's generated text, in bytes (what it adds to the library).
    pub fn text_len(&self) -> usize {
        self.source.events.len()
    }

    /// The event called `name`: case-insensitive, ' ', '_', '-' and '.' interchangeable.
    pub fn find(&self, name: &str) -> Option<&VendorEvent> {
        self.position(name).map(|i| &self.events[i as usize])
    }

    /// The index of the event called `name` (as [`Table::find`]).
    pub fn position(&self, name: &str) -> Option<u32> {
        self.by_name.get(&normalize(name)).copied()
    }
}

/// `0x1f`-less hex as a number.
fn hex(text: &str) -> Option<u64> {
    u64::from_str_radix(text, 16).ok()
}

/// One or two comma-separated hex numbers.
fn hex_pair(text: &str) -> Option<(u16, Option<u16>)> {
    let mut items = text.split(',');
    let first = u16::try_from(hex(items.next()?)?).ok()?;
    let second = match items.next() {
        Some(item) => Some(u16::try_from(hex(item)?).ok()?),
        None => None,
    };
    Some((first, second))
}

/// A `.tsv` line (see `generated/mod.rs`); `None` if it is malformed, which the generator
/// never writes (a test checks that every line parses).
fn parse_line(line: &'static str) -> Option<VendorEvent> {
    let mut fields = line.split('\t');
    let name = fields.next()?;
    let (code, second_code) = hex_pair(fields.next()?)?;
    let (umask, second_umask) = hex_pair(fields.next()?)?;
    let counters = match fields.next()? {
        "" => Counters::Any,
        text => match text.strip_prefix("fixed") {
            Some(index) => Counters::Fixed(index.parse().ok()?),
            None => Counters::General(u32::try_from(hex(text)?).ok()?),
        },
    };
    let sample_after = match fields.next()? {
        "" => 0,
        text => text.parse().ok()?,
    };
    let category = fields.next()?;
    let mut event = VendorEvent {
        name,
        code,
        second_code,
        umask,
        second_umask,
        umask_ext: 0,
        cmask: 0,
        invert: false,
        edge: false,
        any_thread: false,
        counters,
        extra_msr: None,
        sample_after,
        precise: 0,
        deprecated: false,
        unit: Unit::Core,
        category,
    };
    let mut msr: Option<(u32, u8)> = None;
    let mut msr_value = 0;
    for token in fields.next().unwrap_or_default().split(' ').filter(|t| !t.is_empty()) {
        let (key, value) = token.split_once('=').unwrap_or((token, ""));
        let number = || {
            let value = value.strip_prefix("0x").unwrap_or(value);
            if token.contains("=0x") { hex(value) } else { value.parse().ok() }
        };
        match key {
            "inv" => event.invert = true,
            "edge" => event.edge = true,
            "any" => event.any_thread = true,
            "deprecated" => event.deprecated = true,
            "cmask" => event.cmask = u8::try_from(number()?).ok()?,
            "umaskext" => event.umask_ext = u8::try_from(number()?).ok()?,
            "precise" => event.precise = u8::try_from(number()?).ok()?,
            "msr" => {
                let indices: Vec<&str> = value.split(',').collect();
                let first = indices.first()?.strip_prefix("0x")?;
                msr = Some((u32::try_from(hex(first)?).ok()?, u8::try_from(indices.len()).ok()?));
            }
            "msrvalue" => msr_value = number()?,
            "unit" => {
                event.unit = match value {
                    "l3" => Unit::L3,
                    "df" => Unit::DataFabric,
                    "umc" => Unit::MemoryController,
                    _ => return None,
                }
            }
            // Facts kept in the table that the catalog does not use yet.
            "offcore" | "takenalone" | "perpkg" | "enallcores" | "enallslices" | "sliceid"
            | "threadmask" | "rdwrmask" => {}
            _ => return None,
        }
    }
    event.extra_msr = msr.map(|(index, count)| ExtraMsr { index, count, value: msr_value });
    Some(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generated_line_parses() {
        for (index, source) in TABLES.iter().enumerate() {
            let table = Table::get(index).expect("generated table");
            assert_eq!(table.events().len(), table.line_count(), "table {}", source.name);
        }
    }

    #[test]
    fn the_summary_states_the_encoding_and_constraints() {
        let event = parse_line("L2_RQSTS.X\t24\tc1\tf\t200003\tcache\tcmask=2 inv precise=1")
            .expect("valid line");
        assert_eq!(
            event.summary(),
            "cache: event 0x24, umask 0xc1, cmask 2, inv; counters 0,1,2,3; sample after \
             200003; precise sampling"
        );
    }

    #[test]
    fn a_line_with_an_unknown_attribute_is_refused() {
        assert!(parse_line("X\tc0\t0\tf\t\tpipeline\tbogus").is_none());
        assert!(parse_line("X\tc0\t0\tf\t\tpipeline\tcmask=4").is_some());
        assert!(parse_line("X\tzz\t0\tf\t\tpipeline\t").is_none());
    }
}
