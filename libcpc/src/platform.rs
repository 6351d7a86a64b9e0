//! The counters libcpc offers on this host (its "PICs") and the events each can count: the
//! answer to `cpc_npic`, `cpc_caps`, `cpc_cciname`, `cpc_cpuref`, the event and attribute
//! walkers, and the translation of a request into a libpmc event spec.
//!
//! PICs, in order (a design choice; illumos numbers Intel's the same way):
//! * a host with an Intel PMU (class IAP): one PIC per general-purpose row, then one per fixed
//!   counter (class IAF), e.g. 4 + 3 = 7 on the simulator's Skylake;
//! * a host with AMD's core counters (class K8): one PIC per counter, each counting every
//!   event (4 on family 10h, 6 on Zen 2 and Zen 4), as illumos numbers them;
//! * a host without a hardware PMU (the Linux host in a VM): one PIC per SOFT row, each able to
//!   count every software event the host offers (`page-faults`, `task-clock`, …).
//!
//! A PIC is a logical counter: a bind asks the driver for a PMC of the PIC's class, and the
//! driver chooses the row. `picnum` therefore decides which PIC (and class) a request uses and
//! which requests conflict, not which physical row of that class counts.

use std::collections::HashSet;

use pmc::Class;
use pmc::events::EventKind;

use crate::error::{Error, Result};
use crate::generics;

/// What kind of counters back the PICs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Intel architectural performance monitoring: general-purpose then fixed counters.
    Intel,
    /// AMD's core performance counters.
    Amd,
    /// The host's software events (no hardware PMU).
    Software,
}

/// One counter.
#[derive(Debug, Clone)]
pub struct Pic {
    /// The libpmc class a request on this PIC allocates.
    pub class: Class,
    /// The platform event names it counts, lowercase, in list order.
    pub events: Vec<String>,
    /// Its generic events: (`PAPI_*` name, the libpmc spec counting it).
    pub generics: Vec<(&'static str, &'static str)>,
    /// `events`, for lookup.
    names: HashSet<String>,
}

/// The request attributes of x86 counters (Intel's and AMD's event selects have the same
/// fields), as illumos's x86 PCBEs accept them.
const X86_ATTRS: [&str; 5] = ["edge", "inv", "umask", "cmask", crate::consts::PICNUM];

/// Request flags that requests may also give as attributes (an extension, as the tools' spec
/// tokens of the same names): `nouser` clears `CPC_COUNT_USER`, `sys` sets `CPC_COUNT_SYSTEM`.
/// Not attributes to `cpc_walk_attrs` (illumos's tools add them to what it lists).
pub const FLAG_ATTRS: [&str; 2] = ["nouser", "sys"];

impl Pic {
    fn new(class: Class, events: Vec<String>, generics: Vec<(&'static str, &'static str)>) -> Pic {
        let names = events.iter().cloned().collect();
        Pic { class, events, generics, names }
    }

    /// Whether `event` is one of its platform events (any case).
    pub fn has_platform_event(&self, event: &str) -> bool {
        self.names.contains(&event.to_ascii_lowercase())
    }

    /// The libpmc spec of its generic event `event`, if it has it.
    pub fn generic(&self, event: &str) -> Option<&'static str> {
        self.generics.iter().find(|(name, _)| *name == event).map(|(_, spec)| *spec)
    }

    /// Whether it can count `event` by name (platform or generic; raw codes aside).
    pub fn counts(&self, event: &str) -> bool {
        self.has_platform_event(event) || self.generic(event).is_some()
    }
}

/// The family and model (decimal) of the CPU the host counts on, from its `pmc_cpuid`
/// (`"AuthenticAMD-25-11-1"`, `"GenuineIntel-6-55"`).
fn cpu_signature() -> Option<(u32, u32)> {
    let id = pmc::host::with_host(|h| Ok(h.intel_model())).ok().flatten()?;
    let mut parts = id.split('-').skip(1);
    let family = parts.next()?.parse::<u32>().ok()?;
    let model = u32::from_str_radix(parts.next()?, 16).ok()?;
    Some((family, model))
}

/// `cpc_cpuref` of an AMD CPU of `family`: the document that describes its events.
fn amd_reference(family: u32) -> String {
    if family >= 0x17 {
        format!(
            "See the \"Processor Programming Reference (PPR) for AMD Family {family:02X}h\" of \
             this processor's model, section \"Core Performance Monitor Counters\""
        )
    } else {
        format!(
            "See \"BIOS and Kernel Developer's Guide (BKDG) For AMD Family {family:02X}h \
             Processors\", section \"Performance Counter Events\""
        )
    }
}

/// A raw event code as `strtol(s, &end, 0)` accepts it with nothing left over: leading blanks,
/// a sign, `0x` hex, `0` octal or decimal; `""` is 0 (an illumos quirk kept). `None` if
/// something is left over or the value does not fit a `long`.
pub fn parse_raw_code(s: &str) -> Option<i64> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    if t.is_empty() {
        return Some(0);
    }
    let (negative, t) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, h)
    } else if t.len() > 1 && t.starts_with('0') {
        (8, &t[1..])
    } else {
        (10, t)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    let value = if negative { -magnitude } else { magnitude };
    i64::try_from(value).ok()
}

/// The counters of this host and what they count.
#[derive(Debug, Clone)]
pub struct Platform {
    /// The backend.
    pub backend: Backend,
    /// The PICs, numbered from 0.
    pub pics: Vec<Pic>,
    /// `cpc_caps`.
    pub caps: u32,
    /// `cpc_cciname`.
    pub cciname: String,
    /// `cpc_cpuref`.
    pub cpuref: String,
    /// The attribute names, `picnum` last (not [`FLAG_ATTRS`], which requests accept too).
    pub attrs: Vec<&'static str>,
    /// The software events by code, for raw codes on the software backend.
    soft_codes: Vec<(String, u32)>,
    /// The number of CPUs.
    pub ncpu: u32,
    /// The libpmc host.
    pub host: pmc::host::HostKind,
}

impl Platform {
    /// The platform of this process's libpmc host.
    pub fn probe() -> Result<Platform> {
        const OP: &str = "cpc_open";
        let info = pmc::api::cpu_info().map_err(|e| Error::pmc(OP, &e))?;
        let classes = pmc::api::classes().map_err(|e| Error::pmc(OP, &e))?;
        let rows = |class: Class| {
            classes
                .iter()
                .find(|c| c.pm_class == class.as_u32())
                .map(|c| c.pm_num as usize)
                .unwrap_or(0)
        };
        let host = pmc::api::host_kind().map_err(|e| Error::pmc(OP, &e))?;
        // Overflow signals: the Linux host (see crate::overflow::linux) and the simulator
        // (crate::overflow::sim).
        let caps = if matches!(host, pmc::host::HostKind::Linux | pmc::host::HostKind::Sim) {
            crate::consts::CPC_CAP_OVERFLOW_INTERRUPT | crate::consts::CPC_CAP_OVERFLOW_PRECISE
        } else {
            0
        };
        let listed = pmc::api::list_events().map_err(|e| Error::pmc(OP, &e))?;
        let (gp, fixed) = (rows(Class::Iap), rows(Class::Iaf));
        if gp > 0 {
            let lower = |class: Class| -> Vec<String> {
                listed
                    .iter()
                    .filter(|(c, _)| *c == class)
                    .map(|(_, n)| n.to_ascii_lowercase())
                    .collect()
            };
            let mut pics: Vec<Pic> = (0..gp)
                .map(|_| Pic::new(Class::Iap, lower(Class::Iap), generics::INTEL_GP.to_vec()))
                .collect();
            let fixed_names = lower(Class::Iaf);
            for (index, generics) in generics::INTEL_FIXED.iter().enumerate().take(fixed) {
                let names = fixed_names
                    .iter()
                    .filter(|n| {
                        matches!(pmc::api::lookup_event(n).map(|e| e.kind),
                            Ok(EventKind::Iaf { index: i, .. }) if usize::from(i) == index)
                    })
                    .cloned()
                    .collect();
                pics.push(Pic::new(Class::Iaf, names, generics.to_vec()));
            }
            let (family, model) = cpu_signature().unwrap_or((0, 0));
            return Ok(Platform {
                backend: Backend::Intel,
                pics,
                caps,
                cciname: format!("Intel Arch PerfMon on Family {family} Model {model}"),
                cpuref: "See Appendix A of the \"Intel 64 and IA-32 Architectures Software \
                         Developer's Manual Volume 3B: System Programming Guide, Part 2\""
                    .into(),
                attrs: X86_ATTRS.to_vec(),
                soft_codes: Vec::new(),
                ncpu: info.pm_ncpu,
                host,
            });
        }
        let amd = rows(Class::K8);
        if amd > 0 {
            let family = cpu_signature().map_or(0, |(family, _)| family);
            let names: Vec<String> = listed
                .iter()
                .filter(|(c, _)| *c == Class::K8)
                .map(|(_, n)| n.to_ascii_lowercase())
                .collect();
            let generics = generics::amd(family).to_vec();
            let pics = (0..amd).map(|_| Pic::new(Class::K8, names.clone(), generics.clone()));
            // Overflow signals: the Linux host (see crate::overflow::linux), not precise on AMD (illumos).
            let caps = caps & crate::consts::CPC_CAP_OVERFLOW_INTERRUPT;
            return Ok(Platform {
                backend: Backend::Amd,
                pics: pics.collect(),
                caps,
                cciname: format!("AMD Family {family:02x}h"),
                cpuref: amd_reference(family),
                attrs: X86_ATTRS.to_vec(),
                soft_codes: Vec::new(),
                ncpu: info.pm_ncpu,
                host,
            });
        }
        let soft = pmc::api::soft_events().unwrap_or_default();
        let names: Vec<String> = soft.iter().map(|(n, _)| n.to_ascii_lowercase()).collect();
        let pics = (0..rows(Class::Soft)).map(|_| Pic::new(Class::Soft, names.clone(), Vec::new()));
        Ok(Platform {
            backend: Backend::Software,
            pics: pics.collect(),
            caps,
            cciname: format!("Software events of the {} host (no hardware PMU)", host.name()),
            cpuref: "See perf_event_open(2), PERF_TYPE_SOFTWARE, for what each software event \
                     counts"
                .into(),
            attrs: vec![crate::consts::PICNUM],
            soft_codes: soft,
            ncpu: info.pm_ncpu,
            host,
        })
    }

    /// `cpc_npic`.
    pub fn npic(&self) -> u32 {
        self.pics.len() as u32
    }

    /// Whether `event` names something on at least one PIC, or is a raw code.
    pub fn event_known(&self, event: &str) -> bool {
        self.pics.iter().any(|p| p.counts(event)) || parse_raw_code(event).is_some()
    }

    /// Whether requests accept attribute `name`: one of the platform's, or of [`FLAG_ATTRS`].
    pub fn has_attr(&self, name: &str) -> bool {
        self.attrs.contains(&name) || FLAG_ATTRS.contains(&name)
    }

    /// The libpmc event (without ring qualifiers) that PIC `pic` counts for `event`: a platform
    /// name, a generic's spec, or a raw code's encoding; `None` if `pic` cannot count it.
    pub fn spec_on(&self, pic: usize, event: &str, umask: Option<u64>) -> Option<String> {
        let p = self.pics.get(pic)?;
        if p.has_platform_event(event) {
            return Some(event.to_string());
        }
        if let Some(spec) = p.generic(event) {
            return Some(spec.to_string());
        }
        let code = parse_raw_code(event)?;
        match p.class {
            Class::Iap => {
                Some(format!("event={:#x},umask={:#x}", code & 0xff, umask.unwrap_or(0) & 0xff))
            }
            // AMD's event select has 12 bits (bits 8-11 go to PERF_CTL bits 35:32).
            Class::K8 => {
                Some(format!("event={:#x},umask={:#x}", code & 0xfff, umask.unwrap_or(0) & 0xff))
            }
            Class::Soft => {
                self.soft_codes.iter().find(|(_, c)| i64::from(*c) == code).map(|(n, _)| n.clone())
            }
            _ => None,
        }
    }

    /// AMD named event `spec` (with the attributes `spec_on` appended) with `umask` ORed into
    /// its unit mask, as a raw encoding; `None` if it is not an AMD core event.
    pub fn amd_with_umask(&self, spec: &str, umask: u64) -> Option<String> {
        let (name, rest) = spec.split_once(',').unwrap_or((spec, ""));
        let EventKind::K8 { perf_ctl } = pmc::api::lookup_event(name).ok()?.kind else {
            return None;
        };
        let code = perf_ctl & 0xff | (perf_ctl >> 32 & 0xf) << 8;
        let umask = (perf_ctl >> 8 & 0xff) | (umask & 0xff);
        let mut raw = format!("event={code:#x},umask={umask:#x}");
        let cmask = perf_ctl >> 24 & 0xff;
        if cmask != 0 {
            raw.push_str(&format!(",cmask={cmask}"));
        }
        for (bit, qualifier) in [(18, "edge"), (23, "inv")] {
            if perf_ctl >> bit & 1 != 0 {
                raw.push_str(&format!(",{qualifier}"));
            }
        }
        if !rest.is_empty() {
            raw.push(',');
            raw.push_str(rest);
        }
        Some(raw)
    }

    /// The PICs that can count `event` by name (a raw code counts on none unless placed with
    /// `picnum`, as in illumos' Intel and AMD back-ends).
    pub fn coverage(&self, event: &str) -> Vec<usize> {
        (0..self.pics.len()).filter(|&i| self.pics[i].counts(event)).collect()
    }

    /// Whether an explicit `picnum` of `pic` can count `event` (names, generics, raw codes on
    /// general-purpose or software PICs).
    pub fn pic_accepts(&self, pic: usize, event: &str) -> bool {
        self.pics.get(pic).is_some_and(|p| {
            p.counts(event) || (parse_raw_code(event).is_some() && p.class != Class::Iaf)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::parse_raw_code;

    #[test]
    fn raw_codes_parse_as_strtol_with_base_zero() {
        assert_eq!(parse_raw_code("0xc0"), Some(0xc0));
        assert_eq!(parse_raw_code("0X1F"), Some(0x1f));
        assert_eq!(parse_raw_code("017"), Some(0o17));
        assert_eq!(parse_raw_code("42"), Some(42));
        assert_eq!(parse_raw_code("  -1"), Some(-1));
        assert_eq!(parse_raw_code("+7"), Some(7));
        assert_eq!(parse_raw_code(""), Some(0), "strtol leaves an empty string consumed");
        assert_eq!(parse_raw_code("0"), Some(0));
        assert_eq!(parse_raw_code("0x"), None);
        assert_eq!(parse_raw_code("12abc"), None);
        assert_eq!(parse_raw_code("inst_retired"), None);
        assert_eq!(parse_raw_code("99999999999999999999"), None, "out of range sets errno");
    }
}
