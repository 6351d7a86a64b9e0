//! The event catalog: turns the event spec a user gives `pmcstat` or `pmc_allocate(3)` into what
//! the host and the hardware are asked for, and lists what a host offers (`pmcstat -L`).
//!
//! # Spec syntax
//!
//! `NAME[,qualifier...]`, names case-insensitive, and as in FreeBSD's `pmc_match_event_name`
//! the separators ' ', '_', '-' and '.' match one another (`cpu-clk-unhalted.ref-tsc` is
//! `CPU_CLK_UNHALTED.REF_TSC`). A FreeBSD class prefix (`iaf-`, `iap-`, `tsc-`, `soft-`) limits
//! the search to that class (`tsc-tsc`, `iaf-instr-retired.any`). Names, first match wins,
//! in FreeBSD's order:
//!
//! 1. on a CPU with an event table ([`model`]: the vendors' mapfile patterns matched against
//!    the CPU's vendor-family-model-stepping, or `PMC_CPUID`), FreeBSD's PMU aliases
//!    (`pmu_alias_get`, exactly: its Intel and AMD tables, e.g. `instructions` is
//!    `inst_retired.any_p` on Intel and `ex_ret_instr` on AMD);
//! 2. the model's tables ([`table`], generated from Intel perfmon and Linux perf's AMD JSON):
//!    Intel's names (`INST_RETIRED.ANY_P`), Linux perf's AMD names (`ex_ret_instr`,
//!    `ls_dispatch.ld_dispatch`); a hybrid CPU's core-type table first. Offcore-response events
//!    carry their MSR_OFFCORE_RSP_0/1 value to the driver; `TOPDOWN.SLOTS` is counted by fixed
//!    counter 3 where the host has it. Events the driver cannot count (load latency and frontend,
//!    which take effect only with PEBS; fixed counters above 3; PEBS-only;
//!    AMD L3/DF/UMC PMUs) are known but refused with the reason;
//! 3. FreeBSD's static aliases, for CPUs without a table or whose table lacks the PMU alias's
//!    target: `instructions`, `unhalted-cycles` (a fixed counter when the host offers IAF, else
//!    the architectural event), `branches`, `branch-mispredicts`, and `cycles` (the TSC);
//!    `unhalted-reference-cycles` / `UNHALTED_REFERENCE_CYCLES` (fixed counter 2: TSC rate),
//!    `cache-references` and `cache-misses` are Linux perf's names for architectural events;
//! 4. the fixed counters: `INSTR_RETIRED.ANY` / `INST_RETIRED.ANY` (0), `CPU_CLK_UNHALTED.CORE` /
//!    `.THREAD` (1), `CPU_CLK_UNHALTED.REF` / `.REF_TSC` (2);
//! 5. `TSC`;
//! 6. software events: those the host lists, FreeBSD's (`CLOCK.HARD`, `CLOCK.STAT`, `CLOCK.PROF`,
//!    `PAGE_FAULT.ALL`, `.READ`, `.WRITE`) and perf's (`task-clock`, `cpu-clock`, …);
//! 7. the architectural events of CPUID leaf 0xA (`UNHALTED_CORE_CYCLES`, …) and
//!    `INST_RETIRED.ANY_P`.
//!
//! FreeBSD's `unhalted-cycles` / `UNHALTED_CORE_CYCLES` is `cpu_clk_unhalted.thread_p_any`,
//! which counts with AnyThread (both hyperthreads of a core): AnyThread needs privilege and is
//! deprecated from perfmon v5, so the same encoding without it is counted instead — the thread's
//! own unhalted cycles, `CPU_CLK_UNHALTED.THREAD_P` (0x3C/0x00).
//!
//! AMD core events resolve to class K8 with their PERF_CTL image (the 12-bit event select split
//! between bits 7:0 and 35:32); they are allocatable on a host that offers K8.
//!
//! Qualifiers: `usr`, `os` (neither = both rings), `edge`, `inv`, `cmask=N`, `umask=N` (N in
//! 0..=255, decimal or `0x` hex), `umask2=N` (IA32_PERFEVTSELx bits 47:40, on CPUs with
//! UMASK2), and on an offcore-response event `offcore_rsp=V` (or `rsp=V`,
//! the 64-bit MSR_OFFCORE_RSP value; the driver refuses bits the model leaves undefined).
//! `anythread` is refused, and so are the JSON's PEBS keys `ldlat=` and `frontend=` (their MSRs
//! take effect only with PEBS, which the driver does not do). A fixed counter takes only `usr`
//! and `os`; TSC and software events take none.
//!
//! A raw encoding is
//! `event=N[,umask=N][,umask2=N][,usr][,os][,edge][,inv][,cmask=N][,offcore_rsp=V]`; on an AMD
//! CPU it is a K8 PERF_CTL image and N may have 12 bits (up to `0xfff`). On an AMD CPU without an
//! event table, FreeBSD's static aliases count AMD's core events (`instructions` is
//! `ex_ret_instr`, `unhalted-cycles` `ls_not_halted_cyc`, `branches` `ex_ret_brn`,
//! `branch-mispredicts` `ex_ret_brn_misp`).

use std::borrow::Cow;
use std::collections::HashSet;
use std::num::IntErrorKind;
use std::sync::OnceLock;

use hwpmc::abi::event as abi_event;
use hwpmc::regs::PerfEvtSel;

mod catalog;
mod encoding;
mod freebsd_alias;
mod hybrid;
mod offcore;
#[rustfmt::skip]
mod generated;
pub mod model;
pub mod pmu_table;
mod suggest;
pub mod table;
mod table_rows;
#[cfg(test)]
mod tests;
mod vendor;

use encoding::{AmdCore, Offcore, Programmable};
pub use hybrid::HybridEvent;
use model::{CpuId, ModelTable, Vendor};

pub use hwpmc::abi::Class;

/// The Intel perfmon commit the generated Intel tables come from.
pub const INTEL_PERFMON_COMMIT: &str = generated::INTEL_PERFMON_COMMIT;

/// The sampling rate of a hardware event when the user gives none (FreeBSD's
/// `DEFAULT_SAMPLE_COUNT`). Events of the Intel tables use the table's `SampleAfterValue`
/// instead, as FreeBSD's `pmc_pmu_sample_rate_get` does.
pub const DEFAULT_SAMPLE_RATE: u64 = 65536;

/// The sampling rate of a software event when the user gives none: every tick or occurrence.
pub const SOFT_SAMPLE_RATE: u64 = 1;

/// The software events of FreeBSD's kernel.
pub fn freebsd_soft_events() -> impl Iterator<Item = &'static str> {
    catalog::FREEBSD_SOFT.iter().map(|&(name, _)| name)
}

/// The Linux perf software events libpmc knows by name, as perf spells them.
pub fn perf_soft_events() -> impl Iterator<Item = &'static str> {
    catalog::PERF_SOFT.iter().copied()
}

/// FreeBSD's event aliases (`instructions`, `branches`, …). They resolve on a host that offers
/// the classes they need, but [`HostEvents::list`] does not list them (nor does FreeBSD).
pub fn aliases() -> impl Iterator<Item = &'static str> {
    catalog::ALIASES.iter().map(|alias| alias.name)
}

/// FreeBSD's `kern.hwpmc.cpuid` key for an Intel CPU: `"GenuineIntel-6-5E"` for family 6,
/// model 0x5E (the display family and model of CPUID leaf 1).
pub fn intel_model_key(family: u32, model: u32) -> String {
    format!("GenuineIntel-{family}-{model:02X}")
}

/// [`HostEvents::arch_events_unavailable`] from CPUID leaf 0xA: EBX (bit set = architectural
/// event not available), with every event at or past the vector length EAX\[31:24\] marked
/// unavailable too (Intel SDM Vol. 3B, "Architectural Performance Monitoring").
pub fn arch_events_unavailable_from_cpuid(eax: u32, ebx: u32) -> u32 {
    let length = (eax >> 24) & 0xFF;
    let supported = if length >= 32 { u32::MAX } else { (1u32 << length) - 1 };
    ebx | !supported
}

/// What a resolved event asks the hardware or host for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// A general-purpose counter.
    Iap {
        /// The IA32_PERFEVTSELx image: event select bits 7:0, umask 15:8, USR 16, OS 17, EDGE
        /// 18, INV 23, CMASK 31:24; never EN (22), INT (20) or ANY (21).
        evtsel: u32,
        /// UMASK2, IA32_PERFEVTSELx bits 47:40 (CPUs with CPUID leaf 23H's UMASK2; 0: none),
        /// sent in the high half of the 64-bit `pm_iap_config`.
        umask2: u8,
        /// The MSR_OFFCORE_RSP_0/1 value of an offcore-response event (`pm_iap_rsp`).
        offcore_rsp: Option<u64>,
    },
    /// A fixed counter.
    Iaf {
        /// 0 = INSTR_RETIRED.ANY, 1 = CPU_CLK_UNHALTED.CORE/THREAD, 2 = CPU_CLK_UNHALTED.REF_TSC,
        /// 3 = TOPDOWN.SLOTS.
        index: u8,
        /// FreeBSD's static event number (`hwpmc::abi::event::IAF_*`); 0 for fixed counter 3,
        /// which FreeBSD allocates by its PMU encoding (0xA4/0x01, `PMC_F_EV_PMU`).
        event: u32,
        /// Count in user mode (ring 3). Neither `usr` nor `os` given means both.
        usr: bool,
        /// Count in kernel mode (ring 0).
        os: bool,
    },
    /// An AMD core counter (class K8).
    K8 {
        /// The PERF_CTL image: event select bits 7:0 and 35:32 (the 12-bit event code split),
        /// umask 15:8, USR 16, OS 17, EDGE 18, INV 23, CMASK 31:24; never EN (22) or INT (20).
        perf_ctl: u64,
    },
    /// The time-stamp counter (`hwpmc::abi::event::TSC_TSC`).
    Tsc,
    /// A software event.
    Soft {
        /// The name the host offers it under: a FreeBSD name (`CLOCK.PROF`, `PAGE_FAULT.ALL`, …)
        /// or a Linux perf software event (`cpu-clock`, `page-faults`, …).
        name: String,
    },
}

/// A resolved event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The canonical name, as pmcstat prints it in its header: `INST_RETIRED.ANY`, `CLOCK.PROF`,
    /// `TSC`, `task-clock`, `instructions`, or `event=0xc0,umask=0x0` for a raw encoding.
    pub name: String,
    /// The spec the user gave (FreeBSD prints this one).
    pub spec: String,
    /// The class of counter the event needs.
    pub class: Class,
    /// What the hardware or host is asked for.
    pub kind: EventKind,
    /// The sampling rate (`pm_count`) when the user gives no `-n`.
    pub default_rate: u64,
}

/// What a host offers, for lookup and listing.
#[derive(Debug, Clone, Default)]
pub struct HostEvents {
    /// Classes this host can allocate.
    pub classes: Vec<Class>,
    /// Why the classes not offered are missing, e.g. "no hardware PMU: CPUID leaf 0xA reports
    /// perfmon version 0 (a VM without a virtual PMU)". Used in errors.
    pub missing_reason: Option<String>,
    /// Software event names the host provides (`CLOCK.PROF`, `cpu-clock`, …).
    pub soft_events: Vec<String>,
    /// The CPU whose event tables apply (from the host, or `PMC_CPUID`); `None` if unknown.
    pub cpu: Option<CpuId>,
    /// The core type of a hybrid CPU (CPUID.1AH:EAX\[31:24\]: 0x20 Atom, 0x40 Core), which
    /// picks the table searched first; `None`: the P-core table first.
    pub core_type: Option<u8>,
    /// The architectural events of CPUID leaf 0xA the CPU does not support: bit i set = event i
    /// (Intel SDM order: 0 core cycles, 1 instructions, 2 reference cycles, 3 LLC references,
    /// 4 LLC misses, 5 branches, 6 branch misses, 7 topdown slots) unavailable. See
    /// [`arch_events_unavailable_from_cpuid`]; 0 when all are supported.
    pub arch_events_unavailable: u32,
    /// How many fixed counters the host's IAF class has (its rows), if known; `None`: fixed
    /// counters 0 to 2, which every CPU with IAF has.
    pub fixed_counters: Option<u32>,
}

/// The longest event spec looked up, in bytes (FreeBSD's event names are at most 64 bytes;
/// this leaves room for a core-type prefix and every qualifier).
pub const MAX_SPEC_LEN: usize = 512;

/// Why an event spec cannot be used on this host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// No event has this name.
    #[error("{}", unknown_message(spec, suggestions))]
    Unknown {
        /// The spec the user gave.
        spec: String,
        /// Up to five known names close to it.
        suggestions: Vec<String>,
    },
    /// The event is known, but this host cannot count it.
    #[error("{}", unavailable_message(spec, *class, reason, offered))]
    Unavailable {
        /// The spec the user gave.
        spec: String,
        /// The class the event needs.
        class: Class,
        /// Why the host cannot count it.
        reason: String,
        /// The software events this host offers instead.
        offered: Vec<String>,
    },
    /// On a hybrid CPU, only one core type has the event: a PMC of every core type cannot
    /// count it.
    #[error(
        "`{name}` is an event of the {cores} only (the {table} table of this hybrid CPU): \
         name it {prefix}/{spec}/ to count it on those cores"
    )]
    OneCoreType {
        /// The spec the user gave.
        spec: String,
        /// The event's name.
        name: String,
        /// `P-cores` or `E-cores`.
        cores: String,
        /// The table's core type (`Core`, `Atom`).
        table: String,
        /// perf's PMU prefix that names the core type (`cpu_core`, `cpu_atom`).
        prefix: String,
    },
    /// The spec is longer than any event spec can be: refused before any look-up, whose
    /// suggestions would cost time in proportion to its length.
    #[error(
        "an event spec of {length} bytes: an event spec is at most {MAX_SPEC_LEN} bytes (event \
         names are under 100, and a raw encoding with every qualifier well under 200)"
    )]
    TooLong {
        /// The spec's length in bytes.
        length: usize,
    },
    /// A qualifier or raw field is wrong.
    #[error("bad event spec `{spec}`: {detail}")]
    BadQualifier {
        /// The spec the user gave.
        spec: String,
        /// What was wrong and what is accepted.
        detail: String,
    },
}

/// The message of [`EventError::Unknown`].
fn unknown_message(spec: &str, suggestions: &[String]) -> String {
    let hint = "`pmcstat -L` lists the events this host offers";
    let name = spec.split(',').next().unwrap_or_default().trim();
    if name.is_empty() {
        return format!("no event name given in `{spec}`; {hint}");
    }
    let what = if name == spec { format!("`{name}`") } else { format!("`{name}` (in `{spec}`)") };
    if suggestions.is_empty() {
        format!("unknown event {what}; {hint}")
    } else {
        format!("unknown event {what}; did you mean {}? {hint}", suggestions.join(", "))
    }
}

/// The message of [`EventError::Unavailable`].
fn unavailable_message(spec: &str, class: Class, reason: &str, offered: &[String]) -> String {
    let offered = if offered.is_empty() {
        "this host offers no software events".to_string()
    } else {
        format!("software events this host offers: {}", offered.join(", "))
    };
    format!(
        "event `{spec}` is not available on this host (class {}): {reason}; {offered}; \
         `pmcstat -L` lists every event this host offers",
        class.name()
    )
}

/// The accepted qualifiers, for error messages.
const ACCEPTED_QUALIFIERS: &str = "accepted qualifiers: usr, os, edge, inv, cmask=N, umask=N, \
                                   umask2=N (N in 0-255, decimal or 0x hex), and offcore_rsp=V \
                                   on offcore-response events";

/// IA32_PERFEVTSELx bits, as the u32 image [`EventKind::Iap`] carries.
const USR: u32 = PerfEvtSel::USR as u32;
const OS: u32 = PerfEvtSel::OS as u32;
const EDGE: u32 = PerfEvtSel::EDGE as u32;
const INV: u32 = PerfEvtSel::INV as u32;

/// A catalog entry: a name and what it stands for.
#[derive(Debug, Clone)]
struct Entry {
    /// The canonical name.
    name: Cow<'static, str>,
    /// A short category for listings (vendor-table events only).
    category: Option<&'static str>,
    /// The class it belongs to; `None` for an alias, whose class depends on the host.
    class: Option<Class>,
    /// What it resolves to.
    target: Target,
}

/// What a catalog entry resolves to, before the host is consulted.
#[derive(Debug, Clone)]
enum Target {
    /// An alias: the fixed counter it prefers and the programmable encoding otherwise.
    Alias { fixed: Option<u8>, programmable: Programmable },
    /// A fixed counter.
    Fixed(u8),
    /// A programmable-counter encoding.
    Programmable(Programmable),
    /// A table event that needs AnyThread.
    AnyThread,
    /// An AMD core event.
    Amd(AmdCore),
    /// A table event the driver cannot count yet, and why.
    Refused { reason: String },
    /// The time-stamp counter.
    Tsc,
    /// A software event the host lists, by the host's name.
    HostSoft,
    /// A software event libpmc knows by name, with the host event that stands in for it.
    Soft { stand_in: Option<&'static str> },
}

/// The qualifiers of a spec.
#[derive(Debug, Clone, Copy, Default)]
struct Qualifiers {
    usr: bool,
    os: bool,
    edge: bool,
    inv: bool,
    cmask: Option<u8>,
    umask: Option<u8>,
    /// The raw event select: 0–255 on Intel, 0–0xFFF (12 bits) on AMD.
    event: Option<u16>,
    umask2: Option<u8>,
    offcore_rsp: Option<u64>,
}

impl Qualifiers {
    /// Parses comma-separated qualifier tokens of `spec`.
    fn parse<'a>(spec: &str, tokens: impl Iterator<Item = &'a str>) -> Result<Self, EventError> {
        let mut qualifiers = Qualifiers::default();
        for token in tokens {
            let token = token.trim();
            if token.is_empty() {
                return Err(bad_qualifier(
                    spec,
                    format!(
                        "an empty qualifier (a doubled or trailing comma); {ACCEPTED_QUALIFIERS}"
                    ),
                ));
            }
            match token.split_once('=') {
                None => match token.to_ascii_lowercase().as_str() {
                    "usr" => qualifiers.usr = true,
                    "os" => qualifiers.os = true,
                    "edge" => qualifiers.edge = true,
                    "inv" => qualifiers.inv = true,
                    "anythread" | "any" => {
                        return Err(bad_qualifier(
                            spec,
                            format!(
                                "`{token}` (count the events of both hyperthreads of a core) \
                                 needs privilege and is not supported: a thread may not count \
                                 its sibling's events; {ACCEPTED_QUALIFIERS}"
                            ),
                        ));
                    }
                    _ => {
                        return Err(bad_qualifier(
                            spec,
                            format!("unknown qualifier `{token}`; {ACCEPTED_QUALIFIERS}"),
                        ));
                    }
                },
                Some((key, value)) => {
                    let key = key.trim().to_ascii_lowercase();
                    if let Some(msr) = pebs_msr_qualifier(&key) {
                        return Err(bad_qualifier(
                            spec,
                            format!(
                                "`{token}` sets {msr}, which takes effect only with PEBS \
                                 (precise sampling), which the driver does not support; \
                                 {ACCEPTED_QUALIFIERS}"
                            ),
                        ));
                    }
                    if key == "event" {
                        qualifiers.event = Some(parse_event_select(spec, value.trim())?);
                        continue;
                    }
                    if key == "offcore_rsp" || key == "rsp" {
                        qualifiers.offcore_rsp = Some(parse_u64(spec, &key, value.trim())?);
                        continue;
                    }
                    let slot = match key.as_str() {
                        "cmask" => &mut qualifiers.cmask,
                        "umask" => &mut qualifiers.umask,
                        "umask2" => &mut qualifiers.umask2,
                        _ => {
                            return Err(bad_qualifier(
                                spec,
                                format!("unknown qualifier `{token}`; {ACCEPTED_QUALIFIERS}"),
                            ));
                        }
                    };
                    *slot = Some(parse_field(spec, &key, value.trim())?);
                }
            }
        }
        Ok(qualifiers)
    }

    /// Whether any qualifier was given.
    fn any(&self) -> bool {
        self.usr
            || self.os
            || self.edge
            || self.inv
            || self.cmask.is_some()
            || self.umask.is_some()
            || self.event.is_some()
            || self.umask2.is_some()
            || self.offcore_rsp.is_some()
    }

    /// (count in user mode, count in kernel mode): both when neither was asked for.
    fn rings(&self) -> (bool, bool) {
        if self.usr || self.os { (self.usr, self.os) } else { (true, true) }
    }
}

/// The PEBS MSR a qualifier of the vendors' JSON keys (as Linux perf and FreeBSD's libpmc spell
/// them) would set: `ldlat=` load latency, `frontend=`.
fn pebs_msr_qualifier(key: &str) -> Option<&'static str> {
    match key {
        "ldlat" => Some("MSR_PEBS_LD_LAT_THRESHOLD (3F6h, load latency)"),
        "frontend" => Some("MSR_PEBS_FRONTEND (3F7h)"),
        _ => None,
    }
}

/// A raw event select: 0 to 0xFFF (AMD's 12 bits; Intel's 8 are checked where the event is
/// resolved), decimal or `0x` hex.
fn parse_event_select(spec: &str, value: &str) -> Result<u16, EventError> {
    let lower = value.to_ascii_lowercase();
    let parsed = match lower.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => lower.parse::<u64>(),
    };
    match parsed {
        Ok(number) if number <= 0xFFF => Ok(number as u16),
        Ok(_) => Err(bad_qualifier(
            spec,
            format!("event={value} is out of range: event takes 0-255 (AMD: 0-0xfff)"),
        )),
        Err(error) if *error.kind() == IntErrorKind::PosOverflow => Err(bad_qualifier(
            spec,
            format!("event={value} is out of range: event takes 0-255 (AMD: 0-0xfff)"),
        )),
        Err(_) => Err(bad_qualifier(
            spec,
            format!("event={value} is not a number (decimal, or hexadecimal with 0x)"),
        )),
    }
}

/// A 64-bit qualifier value (`offcore_rsp=`): decimal or `0x` hex.
fn parse_u64(spec: &str, key: &str, value: &str) -> Result<u64, EventError> {
    let lower = value.to_ascii_lowercase();
    let parsed = match lower.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => lower.parse::<u64>(),
    };
    parsed.map_err(|_| {
        bad_qualifier(
            spec,
            format!("{key}={value} is not a 64-bit number (decimal or 0x hex): {key}=0x10001"),
        )
    })
}

/// An 8-bit field value: decimal or `0x` hex.
fn parse_field(spec: &str, key: &str, value: &str) -> Result<u8, EventError> {
    let lower = value.to_ascii_lowercase();
    let parsed = match lower.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => lower.parse::<u64>(),
    };
    match parsed {
        Ok(number) => u8::try_from(number).map_err(|_| {
            bad_qualifier(spec, format!("{key}={value} is out of range: {key} takes 0-255"))
        }),
        Err(error) if *error.kind() == IntErrorKind::PosOverflow => {
            Err(bad_qualifier(spec, format!("{key}={value} is out of range: {key} takes 0-255")))
        }
        Err(_) => Err(bad_qualifier(
            spec,
            format!(
                "{key}={value} is not a number: {key} takes 0-255, in decimal or as 0x hex \
                 (e.g. {key}=0x41)"
            ),
        )),
    }
}

/// A [`EventError::BadQualifier`].
fn bad_qualifier(spec: &str, detail: String) -> EventError {
    EventError::BadQualifier { spec: spec.to_string(), detail }
}

/// The class a FreeBSD class prefix (`iaf-`, `iap-`, `tsc-`, `soft-`) of `name` names, and the
/// rest of the name.
fn split_class_prefix(name: &str) -> Option<(Class, &str)> {
    [("iaf-", Class::Iaf), ("iap-", Class::Iap), ("tsc-", Class::Tsc), ("soft-", Class::Soft)]
        .into_iter()
        .find_map(|(prefix, class)| {
            let head = name.get(..prefix.len())?;
            let rest = &name[prefix.len()..];
            (head.eq_ignore_ascii_case(prefix) && !rest.is_empty()).then_some((class, rest))
        })
}

/// The static entries before and after the host's software events, in lookup priority order
/// (an entry shadows later ones of the same name), made once.
fn static_parts() -> (&'static [Entry], &'static [Entry]) {
    static PARTS: OnceLock<(Vec<Entry>, Vec<Entry>)> = OnceLock::new();
    let (before, after) = PARTS.get_or_init(|| {
        let entry = |name: &'static str, class: Option<Class>, target: Target| Entry {
            name: Cow::Borrowed(name),
            category: None,
            class,
            target,
        };
        let mut before = Vec::new();
        for alias in catalog::ALIASES {
            let target = Target::Alias { fixed: alias.fixed, programmable: alias.programmable };
            before.push(entry(alias.name, None, target));
        }
        for &(name, index) in catalog::FIXED_NAMES {
            before.push(entry(name, Some(Class::Iaf), Target::Fixed(index)));
        }
        before.push(entry("TSC", Some(Class::Tsc), Target::Tsc));
        // FreeBSD's generic alias for the TSC.
        before.push(entry("cycles", None, Target::Tsc));
        let mut after = Vec::new();
        for &(name, stand_in) in catalog::FREEBSD_SOFT {
            after.push(entry(name, Some(Class::Soft), Target::Soft { stand_in }));
        }
        for &name in catalog::PERF_SOFT {
            after.push(entry(name, Some(Class::Soft), Target::Soft { stand_in: None }));
        }
        // Reference cycles at the TSC rate: fixed counter 2 where there is one (the
        // programmable encoding counts at the bus clock).
        let (reference, programmable) = catalog::ARCHITECTURAL[2];
        after.push(entry(reference, None, Target::Alias { fixed: Some(2), programmable }));
        for &(name, programmable) in catalog::ARCHITECTURAL {
            after.push(entry(name, Some(Class::Iap), Target::Programmable(programmable)));
        }
        (before, after)
    });
    (before, after)
}

/// The entry of a software event the host offers under `name`.
fn host_soft_entry(name: &str) -> Entry {
    Entry {
        name: Cow::Owned(name.to_string()),
        category: None,
        class: Some(Class::Soft),
        target: Target::HostSoft,
    }
}

/// A listed event: its class, name and category.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedEvent {
    /// The class that counts it.
    pub class: Class,
    /// Its canonical name.
    pub name: String,
    /// A short category (`cache`, `branch`, …) for vendor-table events.
    pub category: Option<&'static str>,
}

/// A model event this host cannot count, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnavailableEvent {
    /// The event.
    pub event: ListedEvent,
    /// The core type of its table on a hybrid CPU (`Core`, `Atom`).
    pub core_type: Option<String>,
    /// Why it cannot be counted, when that is the event's own reason (an extra MSR, a fixed
    /// counter the driver lacks, AnyThread); `None` when the host lacks its class (see
    /// [`EventListing::missing_reason`]).
    pub reason: Option<String>,
}

/// What `pmcstat -L` lists ([`HostEvents::listing`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventListing {
    /// The CPU the tables were chosen for (`GenuineIntel-6-55-4`), if known.
    pub cpu: Option<String>,
    /// The names of its event tables.
    pub tables: Vec<&'static str>,
    /// The events this host offers, sorted by class and name.
    pub offered: Vec<ListedEvent>,
    /// The CPU's table events this host cannot count, sorted by class and name.
    pub unavailable: Vec<UnavailableEvent>,
    /// Why the host lacks the hardware classes, if it says.
    pub missing_reason: Option<String>,
}

/// The catalog entry of a vendor-table event.
fn table_entry(vendor: Vendor, event: &table::VendorEvent) -> Entry {
    let (class, target) = vendor::target(vendor, event);
    Entry {
        name: Cow::Borrowed(event.name),
        category: Some(event.category),
        class: Some(class),
        target,
    }
}

/// Every event of a table as catalog entries.
fn table_entries(table: &ModelTable) -> impl Iterator<Item = Entry> + '_ {
    let vendor = table.table.vendor();
    table.table.events().iter().map(move |event| table_entry(vendor, event))
}

/// FreeBSD's alias `alias` as the table event `target` it stands for, or `None` when the
/// tables lack it (FreeBSD then falls back to its static aliases). Where the target counts with
/// AnyThread (`cpu_clk_unhalted.thread_p_any`, both hyperthreads of a core), which needs
/// privilege and is deprecated from perfmon v5, the same encoding without AnyThread is used: it
/// counts the thread's own unhalted cycles (`CPU_CLK_UNHALTED.THREAD_P`).
fn alias_entry(tables: &[ModelTable], alias: &str, target: &str) -> Option<Entry> {
    let (table, event) = tables.iter().find_map(|t| Some((t.table, t.table.find(target)?)))?;
    let mut entry = table_entry(table.vendor(), event);
    if event.any_thread {
        let own_thread = table::VendorEvent { any_thread: false, ..event.clone() };
        entry = table_entry(table.vendor(), &own_thread);
    }
    entry.name = Cow::Owned(alias.to_string());
    Some(entry)
}

/// The event counted for a FreeBSD alias target that needs AnyThread: the same name without
/// its `_ANY` suffix (`cpu_clk_unhalted.thread_p_any` → `cpu_clk_unhalted.thread_p`).
pub(crate) fn own_thread_name(target: &str) -> Option<&str> {
    let cut = target.len().checked_sub(4)?;
    target.get(cut..)?.eq_ignore_ascii_case("_any").then(|| &target[..cut])
}

/// The name of the architectural event of CPUID.0AH:EBX bit `bit`.
fn architectural_name(bit: u8) -> &'static str {
    catalog::ARCHITECTURAL
        .iter()
        .find(|(_, programmable)| programmable.arch_bit == Some(bit))
        .map_or("?", |&(name, _)| name)
}

impl HostEvents {
    /// Whether the host can allocate `class`.
    pub fn offers(&self, class: Class) -> bool {
        self.classes.contains(&class)
    }

    /// The event tables of this host's CPU, the table of its core type first (empty when the
    /// CPU is unknown or has none).
    pub fn tables(&self) -> Vec<ModelTable> {
        self.cpu
            .map(|cpu| model::order_by_core_type(cpu.tables(), self.core_type))
            .unwrap_or_default()
    }

    /// Resolves a pmcstat / `pmc_allocate` event spec.
    pub fn lookup(&self, spec: &str) -> Result<Event, EventError> {
        self.lookup_in(spec, self.tables())
    }

    /// [`HostEvents::lookup`] in `tables`.
    pub(crate) fn lookup_in(
        &self,
        spec: &str,
        tables: Vec<ModelTable>,
    ) -> Result<Event, EventError> {
        if spec.len() > MAX_SPEC_LEN {
            return Err(EventError::TooLong { length: spec.len() });
        }
        let mut tokens = spec.split(',');
        let head = tokens.next().unwrap_or_default().trim();
        if head.contains('=') {
            return self.lookup_raw(spec);
        }
        let entry = self.find_entry(&tables, head, None).or_else(|| {
            let (class, rest) = split_class_prefix(head)?;
            self.find_entry(&tables, rest, Some(class))
        });
        let Some(entry) = entry else {
            let entries = self.static_entries();
            let table_entries: Vec<Entry> = tables.iter().flat_map(table_entries).collect();
            let suggestions = suggest::suggestions(
                head,
                entries
                    .iter()
                    .chain(&table_entries)
                    .map(|entry| (entry.name.as_ref(), self.entry_offered(entry))),
            );
            return Err(EventError::Unknown { spec: spec.to_string(), suggestions });
        };
        let qualifiers = Qualifiers::parse(spec, tokens)?;
        if qualifiers.event.is_some() {
            return Err(bad_qualifier(
                spec,
                format!(
                    "event= belongs to a raw encoding, which starts with it \
                     (event=0xc0,umask=0x00,...), not to the named event {}",
                    entry.name
                ),
            ));
        }
        self.resolve(spec, &entry, &qualifiers)
    }

    /// Resolves `spec` as if this host could count every hardware class (IAF, IAP, K8): the
    /// encoding for the selected model, for `pmcstat -u`.
    pub fn encode(&self, spec: &str) -> Result<Event, EventError> {
        self.encoding_view().lookup(spec)
    }

    /// This host as if it could count every hardware class (see [`HostEvents::encode`]).
    pub(crate) fn encoding_view(&self) -> HostEvents {
        let mut classes = self.classes.clone();
        for class in [Class::Iaf, Class::Iap, Class::K8, Class::Tsc] {
            if !classes.contains(&class) {
                classes.push(class);
            }
        }
        HostEvents { classes, arch_events_unavailable: 0, ..self.clone() }
    }

    /// The entry `name` names (of class `class`, if given), in FreeBSD's order: its PMU alias
    /// table when the CPU has an event table, the tables themselves, then the static names.
    fn find_entry(&self, tables: &[ModelTable], name: &str, class: Option<Class>) -> Option<Entry> {
        let in_class = |entry: &Entry| class.is_none() || entry.class == class;
        let vendor = tables.first().map(|t| t.table.vendor());
        let alias = vendor
            .and_then(|vendor| freebsd_alias::target(vendor, name))
            .and_then(|target| alias_entry(tables, name, target));
        if let Some(entry) = alias.filter(in_class) {
            return Some(entry);
        }
        let table_hit = tables.iter().find_map(|t| {
            let event = t.table.find(name)?;
            Some(table_entry(t.table.vendor(), event))
        });
        if let Some(entry) = table_hit.filter(in_class) {
            return Some(entry);
        }
        self.find_static(name, class)
    }

    /// Every event this host offers, as (class, canonical name), sorted by class then name: for
    /// `pmcstat -L` and `pmc_event_names_of_class`. Aliases and FreeBSD soft-event names that
    /// resolve to a stand-in are not listed.
    pub fn list(&self) -> Vec<(Class, String)> {
        self.list_with_categories().into_iter().map(|e| (e.class, e.name)).collect()
    }

    /// [`HostEvents::list`] with each event's category (vendor-table events only).
    pub fn list_with_categories(&self) -> Vec<ListedEvent> {
        // Names as lookup finds them: a table's entry shadows a static one of the same name
        // (Nehalem's INST_RETIRED.ANY_P, TOPDOWN.SLOTS on fixed counter 3), offered or not.
        let mut seen = HashSet::new();
        let mut listed = Vec::new();
        let tables = self.tables();
        let entries = tables.iter().flat_map(table_entries).chain(self.static_entries());
        for entry in entries {
            if !seen.insert(entry.name.to_ascii_uppercase()) {
                continue;
            }
            if matches!(entry.target, Target::Soft { .. }) || !self.entry_offered(&entry) {
                continue;
            }
            let Some(class) = entry.class else { continue };
            listed.push(ListedEvent {
                class,
                name: entry.name.into_owned(),
                category: entry.category,
            });
        }
        listed.sort_by(|a, b| (a.class, &a.name).cmp(&(b.class, &b.name)));
        listed
    }

    /// [`HostEvents::list_with_categories`], then the events of the CPU's tables this host
    /// cannot count (on a host without their class, or refused), for `pmcstat -L`.
    pub fn listing(&self) -> EventListing {
        let offered = self.list_with_categories();
        let known: HashSet<(Class, String)> =
            offered.iter().map(|e| (e.class, e.name.to_ascii_uppercase())).collect();
        let mut unavailable = Vec::new();
        for table in self.tables() {
            for entry in table_entries(&table) {
                let Some(class) = entry.class else { continue };
                if self.entry_offered(&entry)
                    || known.contains(&(class, entry.name.to_ascii_uppercase()))
                {
                    continue;
                }
                let reason = match &entry.target {
                    Target::Refused { reason } => Some(reason.clone()),
                    Target::AnyThread => {
                        Some("counts with AnyThread, which needs privilege".into())
                    }
                    Target::Programmable(p) if p.offcore == Offcore::Needed => Some(
                        "the generic offcore-response event: give its request/response value \
                         with offcore_rsp=V"
                            .into(),
                    ),
                    Target::Fixed(index) if self.offers(Class::Iaf) => {
                        Some(format!("fixed counter {index}, which this host's PMU does not have"))
                    }
                    _ => None,
                };
                unavailable.push(UnavailableEvent {
                    event: ListedEvent {
                        class,
                        name: entry.name.into_owned(),
                        category: entry.category,
                    },
                    core_type: table.hybrid.map(|h| h.core_type_name()),
                    reason,
                });
            }
        }
        unavailable
            .sort_by(|a, b| (a.event.class, &a.event.name).cmp(&(b.event.class, &b.event.name)));
        unavailable.dedup_by(|a, b| a.event == b.event);
        EventListing {
            cpu: self.cpu.map(|cpu| cpu.to_string()),
            tables: self.tables().iter().map(|t| t.table.name()).collect(),
            offered,
            unavailable,
            missing_reason: self.missing_reason.clone(),
        }
    }

    /// The names libpmc knows without an event table, in lookup priority order; an entry
    /// shadows later entries of the same name (lookup and listing take the first).
    fn static_entries(&self) -> Vec<Entry> {
        let (before, after) = static_parts();
        let host = self.soft_events.iter().map(|name| host_soft_entry(name));
        before.iter().cloned().chain(host).chain(after.iter().cloned()).collect()
    }

    /// The first of [`HostEvents::static_entries`] that `name` names (of class `class`, if
    /// given), found without building that list: an exact case-insensitive match first, else
    /// one with FreeBSD's separators folded (`pmc_match_event_name`).
    fn find_static(&self, name: &str, class: Option<Class>) -> Option<Entry> {
        let (before, after) = static_parts();
        let in_class = |entry: &&Entry| class.is_none() || entry.class == class;
        let host_in_class = class.is_none_or(|class| class == Class::Soft);
        let exact = |candidate: &str| candidate.eq_ignore_ascii_case(name);
        let wanted = suggest::normalize(name);
        let folded = |candidate: &str| suggest::normalize(candidate) == wanted;
        for matches in [&exact as &dyn Fn(&str) -> bool, &folded] {
            if let Some(entry) = before.iter().filter(in_class).find(|e| matches(&e.name)) {
                return Some(entry.clone());
            }
            if host_in_class {
                if let Some(host) = self.soft_events.iter().find(|n| matches(n)) {
                    return Some(host_soft_entry(host));
                }
            }
            if let Some(entry) = after.iter().filter(in_class).find(|e| matches(&e.name)) {
                return Some(entry.clone());
            }
        }
        None
    }

    /// Whether [`HostEvents::lookup`] of the entry's name succeeds (without qualifiers).
    fn entry_offered(&self, entry: &Entry) -> bool {
        match &entry.target {
            Target::Alias { fixed, programmable } => {
                (fixed.is_some() && self.offers(Class::Iaf))
                    || self.programmable_supported(programmable)
                    || (self.offers(Class::K8) && catalog::amd_equivalent(programmable).is_some())
            }
            Target::Fixed(index) => self.offers(Class::Iaf) && self.has_fixed(*index),
            // The generic offcore-response event resolves only with `offcore_rsp=`.
            Target::Programmable(programmable) => {
                self.programmable_supported(programmable) && programmable.offcore != Offcore::Needed
            }
            Target::AnyThread | Target::Refused { .. } => false,
            Target::Amd(_) => self.offers(Class::K8),
            Target::Tsc => self.offers(Class::Tsc),
            Target::HostSoft => true,
            Target::Soft { stand_in } => stand_in.and_then(|name| self.host_soft(name)).is_some(),
        }
    }

    /// Whether the host's IAF class has fixed counter `index`.
    fn has_fixed(&self, index: u8) -> bool {
        u32::from(index) < self.fixed_counters.unwrap_or(3)
    }

    /// Whether the host offers IAP and the CPU supports the encoding.
    fn programmable_supported(&self, programmable: &Programmable) -> bool {
        self.offers(Class::Iap) && self.arch_bit_supported(programmable.arch_bit)
    }

    /// Whether CPUID leaf 0xA leaves architectural event `bit` available.
    fn arch_bit_supported(&self, bit: Option<u8>) -> bool {
        bit.is_none_or(|bit| self.arch_events_unavailable & (1u32 << bit) == 0)
    }

    /// The host's spelling of software event `name`, if it offers it.
    fn host_soft(&self, name: &str) -> Option<&str> {
        self.soft_events
            .iter()
            .find(|offered| offered.eq_ignore_ascii_case(name))
            .map(|s| s.as_str())
    }

    /// An [`EventError::Unavailable`] for `class`, with the host's reason.
    fn unavailable(&self, spec: &str, class: Class, reason: Option<String>) -> EventError {
        let reason = reason.or_else(|| self.missing_reason.clone()).unwrap_or_else(|| {
            format!("this host does not offer class {} ({})", class.name(), class_purpose(class))
        });
        EventError::Unavailable {
            spec: spec.to_string(),
            class,
            reason,
            offered: self.soft_events.clone(),
        }
    }

    /// Resolves a raw `event=…` spec.
    fn lookup_raw(&self, spec: &str) -> Result<Event, EventError> {
        let qualifiers = Qualifiers::parse(spec, spec.split(','))?;
        let Some(event) = qualifiers.event else {
            return Err(bad_qualifier(
                spec,
                "a raw encoding needs event=N, the event select (0-255), first: e.g. \
                 event=0xc0,umask=0x00,usr"
                    .to_string(),
            ));
        };
        let umask = qualifiers.umask.unwrap_or(0);
        let amd_cpu = self.cpu.as_ref().is_some_and(|cpu| cpu.vendor == Vendor::Amd);
        if amd_cpu || (self.offers(Class::K8) && !self.offers(Class::Iap)) {
            // AMD's PERF_CTL: the 12-bit event select split over bits 7:0 and 35:32.
            let name = format!("event={event:#x},umask={umask:#x}");
            return self.amd_event(spec, name, AmdCore { code: event, umask }, &qualifiers);
        }
        let Ok(event) = u8::try_from(event) else {
            return Err(bad_qualifier(
                spec,
                format!(
                    "event={event:#x} is out of range: Intel's event select takes 0-255 \
                     (12-bit events are AMD's)"
                ),
            ));
        };
        let programmable = Programmable {
            event,
            umask,
            cmask: 0,
            invert: false,
            edge: false,
            arch_bit: None,
            rate: DEFAULT_SAMPLE_RATE,
            // The driver checks that the event reads an offcore-response MSR of the CPU.
            offcore: qualifiers.offcore_rsp.map_or(Offcore::No, Offcore::Value),
            umask2: 0,
        };
        let name = format!("event={event:#x},umask={umask:#x}");
        self.programmable_event(spec, name, &programmable, &qualifiers)
    }

    /// Resolves a catalog entry with its qualifiers against this host.
    fn resolve(
        &self,
        spec: &str,
        entry: &Entry,
        qualifiers: &Qualifiers,
    ) -> Result<Event, EventError> {
        let name = entry.name.to_string();
        match entry.target.clone() {
            Target::Alias { fixed, programmable } => match fixed {
                Some(index) if self.offers(Class::Iaf) => {
                    self.fixed_event(spec, name, index, qualifiers)
                }
                _ if self.offers(Class::Iap) => {
                    self.programmable_event(spec, name, &programmable, qualifiers)
                }
                // An AMD CPU without an event table (family 10h, say): the alias's AMD core
                // event, where AMD has one.
                _ if self.offers(Class::K8) && catalog::amd_equivalent(&programmable).is_some() => {
                    let amd = catalog::amd_equivalent(&programmable).expect("checked");
                    self.amd_event(spec, name, amd, qualifiers)
                }
                Some(_) => Err(self.unavailable(spec, Class::Iaf, None)),
                None => Err(self.unavailable(spec, Class::Iap, None)),
            },
            Target::Fixed(index) => self.fixed_event(spec, name, index, qualifiers),
            Target::Programmable(programmable) => {
                self.programmable_event(spec, name, &programmable, qualifiers)
            }
            Target::Amd(amd) => self.amd_event(spec, name, amd, qualifiers),
            Target::Refused { ref reason } => {
                let class = entry.class.unwrap_or(Class::Iap);
                Err(self.unavailable(spec, class, Some(reason.clone())))
            }
            Target::AnyThread => Err(bad_qualifier(
                spec,
                format!(
                    "{name} counts with AnyThread (the events of both hyperthreads of a core), \
                     which needs privilege and is not supported; count the thread's own events \
                     instead"
                ),
            )),
            Target::Tsc => {
                if !self.offers(Class::Tsc) {
                    return Err(self.unavailable(spec, Class::Tsc, None));
                }
                no_qualifiers(spec, &name, qualifiers)?;
                Ok(Event {
                    name,
                    spec: spec.to_string(),
                    class: Class::Tsc,
                    kind: EventKind::Tsc,
                    default_rate: DEFAULT_SAMPLE_RATE,
                })
            }
            Target::HostSoft => {
                no_qualifiers(spec, &name, qualifiers)?;
                Ok(soft_event(spec, name.clone(), name))
            }
            Target::Soft { stand_in } => {
                let Some(host_name) = stand_in.and_then(|stand_in| self.host_soft(stand_in)) else {
                    let reason = match stand_in {
                        Some(stand_in) => format!(
                            "this host provides neither the software event {name} nor \
                             {stand_in}, which stands in for it"
                        ),
                        None => format!("this host does not provide the software event {name}"),
                    };
                    return Err(self.unavailable(spec, Class::Soft, Some(reason)));
                };
                no_qualifiers(spec, &name, qualifiers)?;
                Ok(soft_event(spec, name, host_name.to_string()))
            }
        }
    }

    /// Fixed counter `index` with its qualifiers (only `usr` and `os`).
    fn fixed_event(
        &self,
        spec: &str,
        name: String,
        index: u8,
        qualifiers: &Qualifiers,
    ) -> Result<Event, EventError> {
        if !self.offers(Class::Iaf) {
            return Err(self.unavailable(spec, Class::Iaf, None));
        }
        if !self.has_fixed(index) {
            let reason = format!(
                "{name} is counted by fixed counter {index}, which this host's PMU does not have \
                 (it has {} fixed counters; fixed counter 3 comes with perfmon v5, and a hybrid \
                 CPU offers only the counters every core type has)",
                self.fixed_counters.unwrap_or(3)
            );
            return Err(self.unavailable(spec, Class::Iaf, Some(reason)));
        }
        if qualifiers.edge
            || qualifiers.inv
            || qualifiers.cmask.is_some()
            || qualifiers.umask.is_some()
            || qualifiers.umask2.is_some()
            || qualifiers.offcore_rsp.is_some()
        {
            return Err(bad_qualifier(
                spec,
                format!(
                    "{name} is counted by fixed counter {index}, which takes only usr and os; \
                     edge, inv, cmask and umask need a programmable counter (use {} instead)",
                    catalog::fixed_equivalent(index)
                ),
            ));
        }
        let event = match index {
            0 => abi_event::IAF_INSTR_RETIRED_ANY,
            1 => abi_event::IAF_CPU_CLK_UNHALTED_CORE,
            2 => abi_event::IAF_CPU_CLK_UNHALTED_REF,
            _ => 0,
        };
        let (usr, os) = qualifiers.rings();
        Ok(Event {
            name,
            spec: spec.to_string(),
            class: Class::Iaf,
            kind: EventKind::Iaf { index, event, usr, os },
            default_rate: DEFAULT_SAMPLE_RATE,
        })
    }

    /// An AMD core event with its qualifiers applied: the PERF_CTL image.
    fn amd_event(
        &self,
        spec: &str,
        name: String,
        amd: AmdCore,
        qualifiers: &Qualifiers,
    ) -> Result<Event, EventError> {
        if !self.offers(Class::K8) {
            return Err(self.unavailable(spec, Class::K8, None));
        }
        let umask = qualifiers.umask.unwrap_or(amd.umask);
        let cmask = qualifiers.cmask.unwrap_or(0);
        let (usr, os) = qualifiers.rings();
        let code = u64::from(amd.code);
        let mut perf_ctl =
            (code & 0xFF) | (code >> 8) << 32 | u64::from(umask) << 8 | u64::from(cmask) << 24;
        for (set, bit) in [(usr, USR), (os, OS), (qualifiers.edge, EDGE), (qualifiers.inv, INV)] {
            if set {
                perf_ctl |= u64::from(bit);
            }
        }
        Ok(Event {
            name,
            spec: spec.to_string(),
            class: Class::K8,
            kind: EventKind::K8 { perf_ctl },
            default_rate: DEFAULT_SAMPLE_RATE,
        })
    }

    /// A programmable-counter event with its qualifiers applied.
    fn programmable_event(
        &self,
        spec: &str,
        name: String,
        programmable: &Programmable,
        qualifiers: &Qualifiers,
    ) -> Result<Event, EventError> {
        if !self.offers(Class::Iap) {
            return Err(self.unavailable(spec, Class::Iap, None));
        }
        if !self.arch_bit_supported(programmable.arch_bit) {
            let bit = programmable.arch_bit.unwrap_or_default();
            let reason = format!(
                "CPUID leaf 0xA (EBX bit {bit}) says this CPU does not support the architectural \
                 event {}",
                architectural_name(bit)
            );
            return Err(self.unavailable(spec, Class::Iap, Some(reason)));
        }
        let offcore_rsp = match (programmable.offcore, qualifiers.offcore_rsp) {
            (Offcore::No, None) => None,
            (Offcore::Value(value), None) => Some(value),
            (Offcore::Value(_) | Offcore::Needed, Some(value)) => Some(value),
            (Offcore::No, Some(_)) => {
                return Err(bad_qualifier(
                    spec,
                    format!(
                        "{name} is not an offcore-response event: offcore_rsp= sets \
                         MSR_OFFCORE_RSP_0/1 (1A6h/1A7h) for the OFFCORE_RESPONSE events only"
                    ),
                ));
            }
            (Offcore::Needed, None) => {
                return Err(bad_qualifier(
                    spec,
                    format!(
                        "{name} is the generic offcore-response event: give its \
                         MSR_OFFCORE_RSP_0/1 (1A6h/1A7h) request/response value with \
                         offcore_rsp=V (e.g. {name},offcore_rsp=0x10001), or use one of the \
                         model's OFFCORE_RESPONSE.* events"
                    ),
                ));
            }
        };
        let umask = qualifiers.umask.unwrap_or(programmable.umask);
        let cmask = qualifiers.cmask.unwrap_or(programmable.cmask);
        let (usr, os) = qualifiers.rings();
        let mut evtsel =
            u32::from(programmable.event) | u32::from(umask) << 8 | u32::from(cmask) << 24;
        if usr {
            evtsel |= USR;
        }
        if os {
            evtsel |= OS;
        }
        if programmable.edge || qualifiers.edge {
            evtsel |= EDGE;
        }
        if programmable.invert || qualifiers.inv {
            evtsel |= INV;
        }
        Ok(Event {
            name,
            spec: spec.to_string(),
            class: Class::Iap,
            kind: EventKind::Iap {
                evtsel,
                umask2: qualifiers.umask2.unwrap_or(programmable.umask2),
                offcore_rsp,
            },
            default_rate: programmable.rate,
        })
    }
}

impl Event {
    /// Why the driver may have refused this event with `errno` (this system's numbering), where
    /// there is more to say than the errno: an offcore-response value.
    pub fn refusal_hint(&self, errno: i32) -> Option<String> {
        let EventKind::Iap { evtsel, offcore_rsp: Some(value), .. } = self.kind else {
            return None;
        };
        match errno {
            libc::EBUSY => Some(
                "other PMCs that may run on the same CPU hold its offcore-response MSRs with \
                 other values (the event's encoding for the other MSR is tried too, where it has \
                 one): a CPU holds at most two offcore-response values at once, one in each of \
                 MSR_OFFCORE_RSP_0/1 (1A6h/1A7h)"
                    .to_string(),
            ),
            libc::EINVAL => Some(format!(
                "the driver refused offcore_rsp={value:#x} with event {:#04x}, umask {:#04x}: \
                 the value sets bits this CPU's offcore-response MSR leaves undefined, the event \
                 reads no offcore-response MSR on this CPU, or the driver does not know this \
                 model's offcore-response MSRs (nor those of a hybrid CPU, whose core types \
                 differ)",
                evtsel & 0xFF,
                evtsel >> 8 & 0xFF
            )),
            libc::EOPNOTSUPP => Some(
                "this host counts through the host kernel (Linux perf), which is not given \
                 offcore-response values yet"
                    .to_string(),
            ),
            _ => None,
        }
    }
}

/// What a class counts, for error messages.
const fn class_purpose(class: Class) -> &'static str {
    match class {
        Class::Iaf => "the fixed-function hardware counters",
        Class::Iap => "the programmable hardware counters",
        Class::Tsc => "the time-stamp counter",
        Class::Soft => "software events",
        Class::K8 => "AMD's core counters",
        _ => "other counters",
    }
}

/// Refuses qualifiers on an event that takes none.
fn no_qualifiers(spec: &str, name: &str, qualifiers: &Qualifiers) -> Result<(), EventError> {
    if qualifiers.any() {
        return Err(bad_qualifier(
            spec,
            format!(
                "{name} takes no qualifiers (usr, os, edge, inv, cmask and umask are for hardware counters)"
            ),
        ));
    }
    Ok(())
}

/// A software event named `name` that the host counts as `host_name`. The Linux clock events
/// sample every [`crate::host::CLOCK_DEFAULT_PERIOD_NS`] nanoseconds by default, the others
/// every [`SOFT_SAMPLE_RATE`] occurrences or ticks.
fn soft_event(spec: &str, name: String, host_name: String) -> Event {
    let default_rate = if crate::host::is_clock_event(&host_name) {
        crate::host::CLOCK_DEFAULT_PERIOD_NS
    } else {
        SOFT_SAMPLE_RATE
    };
    Event {
        name,
        spec: spec.to_string(),
        class: Class::Soft,
        kind: EventKind::Soft { name: host_name },
        default_rate,
    }
}
