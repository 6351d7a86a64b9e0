//! The event catalog: turns the event spec a user gives `pmcstat` or `pmc_allocate(3)` into what
//! the host and the hardware are asked for, and lists what a host offers (`pmcstat -L`).
//!
//! # Spec syntax
//!
//! `NAME[,qualifier...]`, names case-insensitive, and as in FreeBSD's `pmc_match_event_name`
//! the separators ' ', '_', '-' and '.' match one another (`cpu-clk-unhalted.ref-tsc` is
//! `CPU_CLK_UNHALTED.REF_TSC`). A FreeBSD class prefix (`iaf-`, `iap-`, `tsc-`, `soft-`) limits
//! the search to that class (`tsc-tsc`, `iaf-instr-retired.any`). Names, first match wins:
//!
//! * FreeBSD's aliases: `instructions`, `unhalted-cycles`, `unhalted-reference-cycles` (a fixed
//!   counter when the host offers IAF, else the architectural event on a programmable counter),
//!   `branches`, `branch-mispredicts`, `cache-references`, `cache-misses`;
//! * the fixed counters: `INSTR_RETIRED.ANY` / `INST_RETIRED.ANY` (0), `CPU_CLK_UNHALTED.CORE` /
//!   `.THREAD` (1), `CPU_CLK_UNHALTED.REF` / `.REF_TSC` (2);
//! * `TSC`;
//! * software events: those the host lists, FreeBSD's (`CLOCK.HARD`, `CLOCK.STAT`, `CLOCK.PROF`,
//!   `PAGE_FAULT.ALL`, `.READ`, `.WRITE`) and perf's (`task-clock`, `cpu-clock`, …);
//! * the architectural events of CPUID leaf 0xA (`UNHALTED_CORE_CYCLES`, …) and
//!   `INST_RETIRED.ANY_P`;
//! * the core events of the x86 crate's Intel table for the host's model.
//!
//! Qualifiers: `usr`, `os` (neither = both rings), `edge`, `inv`, `cmask=N`, `umask=N` (N in
//! 0..=255, decimal or `0x` hex). `anythread` is refused. A fixed counter takes only `usr` and
//! `os`; TSC and software events take none.
//!
//! A raw encoding is `event=N[,umask=N][,usr][,os][,edge][,inv][,cmask=N]`.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet};
use std::num::IntErrorKind;

use hwpmc::abi::event as abi_event;
use hwpmc::regs::PerfEvtSel;

mod catalog;
mod intel;
pub mod pmu_table;
mod suggest;
#[cfg(test)]
mod tests;

use catalog::Programmable;
use intel::TableEvent;

pub use hwpmc::abi::Class;

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

/// The x86 crate's / FreeBSD's model key for an Intel CPU: `"GenuineIntel-6-5E"` for family 6,
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
    },
    /// A fixed counter.
    Iaf {
        /// 0 = INSTR_RETIRED.ANY, 1 = CPU_CLK_UNHALTED.CORE/THREAD, 2 = CPU_CLK_UNHALTED.REF_TSC.
        index: u8,
        /// FreeBSD's static event number (`hwpmc::abi::event::IAF_*`).
        event: u32,
        /// Count in user mode (ring 3). Neither `usr` nor `os` given means both.
        usr: bool,
        /// Count in kernel mode (ring 0).
        os: bool,
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
    /// Intel model key for the x86 crate's tables, e.g. `Some("GenuineIntel-6-55")` (see
    /// [`intel_model_key`]); `None` if not Intel or unknown.
    pub intel_model: Option<String>,
    /// The architectural events of CPUID leaf 0xA the CPU does not support: bit i set = event i
    /// (Intel SDM order: 0 core cycles, 1 instructions, 2 reference cycles, 3 LLC references,
    /// 4 LLC misses, 5 branches, 6 branch misses, 7 topdown slots) unavailable. See
    /// [`arch_events_unavailable_from_cpuid`]; 0 when all are supported.
    pub arch_events_unavailable: u32,
}

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
const ACCEPTED_QUALIFIERS: &str = "accepted qualifiers: usr, os, edge, inv, cmask=N, umask=N \
                                   (N in 0-255, decimal or 0x hex)";

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
    /// The class it belongs to; `None` for an alias, whose class depends on the host.
    class: Option<Class>,
    /// What it resolves to.
    target: Target,
}

/// What a catalog entry resolves to, before the host is consulted.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// An alias: the fixed counter it prefers and the programmable encoding otherwise.
    Alias { fixed: Option<u8>, programmable: Programmable },
    /// A fixed counter.
    Fixed(u8),
    /// A programmable-counter encoding.
    Programmable(Programmable),
    /// A table event that needs AnyThread.
    AnyThread,
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
    event: Option<u8>,
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
                    let slot = match key.as_str() {
                        "cmask" => &mut qualifiers.cmask,
                        "umask" => &mut qualifiers.umask,
                        "event" => &mut qualifiers.event,
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
    }

    /// (count in user mode, count in kernel mode): both when neither was asked for.
    fn rings(&self) -> (bool, bool) {
        if self.usr || self.os { (self.usr, self.os) } else { (true, true) }
    }
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

/// The entry `name` names among `entries` (of class `class`, if given): an exact
/// case-insensitive match first, else one where FreeBSD's separators are interchangeable.
fn find<'a>(entries: &'a [Entry], name: &str, class: Option<Class>) -> Option<&'a Entry> {
    let in_class = |entry: &&Entry| class.is_none() || entry.class == class;
    entries.iter().filter(in_class).find(|entry| entry.name.eq_ignore_ascii_case(name)).or_else(
        || {
            let wanted = suggest::normalize(name);
            entries.iter().filter(in_class).find(|entry| suggest::normalize(&entry.name) == wanted)
        },
    )
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

    /// Resolves a pmcstat / `pmc_allocate` event spec.
    pub fn lookup(&self, spec: &str) -> Result<Event, EventError> {
        let mut tokens = spec.split(',');
        let head = tokens.next().unwrap_or_default().trim();
        if head.contains('=') {
            return self.lookup_raw(spec);
        }
        let entries = self.entries();
        let entry = find(&entries, head, None).or_else(|| {
            let (class, rest) = split_class_prefix(head)?;
            find(&entries, rest, Some(class))
        });
        let Some(entry) = entry else {
            let suggestions = suggest::suggestions(
                head,
                entries.iter().map(|entry| (entry.name.as_ref(), self.entry_offered(entry))),
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
        self.resolve(spec, entry, &qualifiers)
    }

    /// Every event this host offers, as (class, canonical name), sorted by class then name: for
    /// `pmcstat -L` and `pmc_event_names_of_class`. Aliases and FreeBSD soft-event names that
    /// resolve to a stand-in are not listed.
    pub fn list(&self) -> Vec<(Class, String)> {
        let listed: BTreeSet<(Class, String)> = self
            .entries()
            .into_iter()
            .filter(|entry| !matches!(entry.target, Target::Soft { .. }))
            .filter(|entry| self.entry_offered(entry))
            .filter_map(|entry| Some((entry.class?, entry.name.into_owned())))
            .collect();
        listed.into_iter().collect()
    }

    /// The catalog for this host, in lookup priority order; a name already present shadows later
    /// entries of the same name.
    fn entries(&self) -> Vec<Entry> {
        let mut entries = Vec::new();
        let mut seen = HashSet::new();
        let mut push = |name: Cow<'static, str>, class: Option<Class>, target: Target| {
            if seen.insert(name.to_ascii_uppercase()) {
                entries.push(Entry { name, class, target });
            }
        };
        for alias in catalog::ALIASES {
            let target = Target::Alias { fixed: alias.fixed, programmable: alias.programmable };
            push(Cow::Borrowed(alias.name), None, target);
        }
        for &(name, index) in catalog::FIXED_NAMES {
            push(Cow::Borrowed(name), Some(Class::Iaf), Target::Fixed(index));
        }
        push(Cow::Borrowed("TSC"), Some(Class::Tsc), Target::Tsc);
        for name in &self.soft_events {
            push(Cow::Owned(name.clone()), Some(Class::Soft), Target::HostSoft);
        }
        for &(name, stand_in) in catalog::FREEBSD_SOFT {
            push(Cow::Borrowed(name), Some(Class::Soft), Target::Soft { stand_in });
        }
        for &name in catalog::PERF_SOFT {
            push(Cow::Borrowed(name), Some(Class::Soft), Target::Soft { stand_in: None });
        }
        for &(name, programmable) in catalog::ARCHITECTURAL {
            push(Cow::Borrowed(name), Some(Class::Iap), Target::Programmable(programmable));
        }
        if let Some(model) = &self.intel_model {
            for (name, event) in intel::events(model) {
                let (class, target) = match event {
                    TableEvent::Fixed(index) => (Class::Iaf, Target::Fixed(index)),
                    TableEvent::Programmable(programmable) => {
                        (Class::Iap, Target::Programmable(programmable))
                    }
                    TableEvent::AnyThread => (Class::Iap, Target::AnyThread),
                };
                push(Cow::Borrowed(name), Some(class), target);
            }
        }
        entries
    }

    /// Whether [`HostEvents::lookup`] of the entry's name succeeds (without qualifiers).
    fn entry_offered(&self, entry: &Entry) -> bool {
        match entry.target {
            Target::Alias { fixed, programmable } => {
                (fixed.is_some() && self.offers(Class::Iaf))
                    || self.programmable_supported(&programmable)
            }
            Target::Fixed(_) => self.offers(Class::Iaf),
            Target::Programmable(programmable) => self.programmable_supported(&programmable),
            Target::AnyThread => false,
            Target::Tsc => self.offers(Class::Tsc),
            Target::HostSoft => true,
            Target::Soft { stand_in } => stand_in.and_then(|name| self.host_soft(name)).is_some(),
        }
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
        let programmable = Programmable {
            event,
            umask,
            cmask: 0,
            invert: false,
            edge: false,
            arch_bit: None,
            rate: DEFAULT_SAMPLE_RATE,
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
        match entry.target {
            Target::Alias { fixed, programmable } => match fixed {
                Some(index) if self.offers(Class::Iaf) => {
                    self.fixed_event(spec, name, index, qualifiers)
                }
                _ if self.offers(Class::Iap) => {
                    self.programmable_event(spec, name, &programmable, qualifiers)
                }
                Some(_) => Err(self.unavailable(spec, Class::Iaf, None)),
                None => Err(self.unavailable(spec, Class::Iap, None)),
            },
            Target::Fixed(index) => self.fixed_event(spec, name, index, qualifiers),
            Target::Programmable(programmable) => {
                self.programmable_event(spec, name, &programmable, qualifiers)
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
        if qualifiers.edge
            || qualifiers.inv
            || qualifiers.cmask.is_some()
            || qualifiers.umask.is_some()
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
            _ => abi_event::IAF_CPU_CLK_UNHALTED_REF,
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
            kind: EventKind::Iap { evtsel },
            default_rate: programmable.rate,
        })
    }
}

/// What a class counts, for error messages.
const fn class_purpose(class: Class) -> &'static str {
    match class {
        Class::Iaf => "the fixed-function hardware counters",
        Class::Iap => "the programmable hardware counters",
        Class::Tsc => "the time-stamp counter",
        Class::Soft => "software events",
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
