//! pmcstat(8) as a library: the command line ([`cli`]), measurements over libpmc ([`measure`]),
//! the signals that end them ([`signals`]), counting output ([`counts`]), and the offline
//! analysis of pmclog files ([`analysis`], [`report`]).

pub mod analysis;
pub mod cli;
pub mod counts;
pub mod failure;
pub mod measure;
pub mod report;
pub mod signals;

use std::ffi::OsString;

use failure::Failure;
use pmc::api;

/// Runs pmcstat with `args` (without the program name) and returns its exit status: the
/// measured command's status, 0, or a sysexits(3) status after a one-line message on standard
/// error.
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let options = match cli::parse(args) {
        Ok(o) => o,
        Err(cli::CliError::Help(text)) => {
            print!("{text}");
            return 0;
        }
        Err(cli::CliError::Usage(message)) => {
            eprintln!("pmcstat: {message}");
            return failure::EX_USAGE;
        }
    };
    match run(&options) {
        Ok(status) => status,
        Err(failure) => {
            eprintln!("pmcstat: {failure}");
            failure.status
        }
    }
}

fn run(o: &cli::Options) -> Result<i32, Failure> {
    if let Some(log) = &o.read_log {
        return report::run(o, log);
    }
    if o.list {
        return list_events();
    }
    if let Some(spec) = &o.describe {
        return describe_event(spec);
    }
    measure::run(o)
}

/// `-L`: each class of this host and its events.
fn list_events() -> Result<i32, Failure> {
    let events = api::list_events().map_err(|e| Failure::pmc("listing events", &e))?;
    let mut class = None;
    for (c, name) in events {
        if class != Some(c) {
            println!("{}", c.name());
            class = Some(c);
        }
        println!("\t{name}");
    }
    Ok(0)
}

/// `-u spec`: what an event is on this host ([`describe_event_text`]).
fn describe_event(spec: &str) -> Result<i32, Failure> {
    let event =
        api::lookup_event(spec).map_err(|e| Failure::pmc(&format!("event {spec:?}"), &e))?;
    print!("{}", describe_event_text(&event));
    Ok(0)
}

/// What `-u` prints about an event: one `label: value` line each for its name (and the spec
/// when it was spelled differently), its class, how the counter is programmed, and the
/// sampling rate used when `-n` is not given:
///
/// ```text
/// event:          INST_RETIRED.ANY_P
/// class:          IAP (Intel programmable counter)
/// event select:   0xc0
/// umask:          0x00
/// rings:          user and kernel
/// flags:          none
/// PERFEVTSEL:     0x000300c0
/// sampling rate:  65536 (when -n is not given)
/// ```
///
/// A programmable (IAP) event shows its `IA32_PERFEVTSELx` fields (event select 7:0, umask
/// 15:8, USR 16, OS 17, EDGE 18, INV 23, CMASK 31:24); a fixed (IAF) event its counter and
/// FreeBSD event; a software event the name the host offers it under.
pub fn describe_event_text(event: &pmc::events::Event) -> String {
    use pmc::events::EventKind;
    let mut lines: Vec<(&str, String)> = vec![("event", event.name.clone())];
    if event.spec != event.name {
        lines.push(("spec", event.spec.clone()));
    }
    let class = event.class.name();
    let what = match class {
        "IAF" => " (Intel fixed-function counter)",
        "IAP" => " (Intel programmable counter)",
        "TSC" => " (time-stamp counter)",
        "SOFT" => " (software event)",
        _ => "",
    };
    lines.push(("class", format!("{class}{what}")));
    let rings = |usr: bool, os: bool| match (usr, os) {
        (true, false) => "user",
        (false, true) => "kernel",
        _ => "user and kernel",
    };
    match &event.kind {
        EventKind::Iap { evtsel } => {
            let bit = |n: u32| evtsel & (1 << n) != 0;
            lines.push(("event select", format!("{:#04x}", evtsel & 0xFF)));
            lines.push(("umask", format!("{:#04x}", (evtsel >> 8) & 0xFF)));
            lines.push(("rings", rings(bit(16), bit(17)).to_owned()));
            let mut flags: Vec<String> = Vec::new();
            if bit(18) {
                flags.push("edge".into());
            }
            if bit(23) {
                flags.push("inv".into());
            }
            if evtsel >> 24 != 0 {
                flags.push(format!("cmask={}", evtsel >> 24));
            }
            lines.push(("flags", if flags.is_empty() { "none".into() } else { flags.join(" ") }));
            lines.push(("PERFEVTSEL", format!("{evtsel:#010x}")));
        }
        EventKind::Iaf { index, event: code, usr, os } => {
            let counts = match index {
                0 => " (INSTR_RETIRED.ANY)",
                1 => " (CPU_CLK_UNHALTED.CORE)",
                2 => " (CPU_CLK_UNHALTED.REF_TSC)",
                _ => "",
            };
            lines.push(("counter", format!("fixed counter {index}{counts}")));
            let name =
                pmclog::names::event_name(*code).map(|n| format!(" ({n})")).unwrap_or_default();
            lines.push(("FreeBSD event", format!("{code:#x}{name}")));
            lines.push(("rings", rings(*usr, *os).to_owned()));
        }
        EventKind::Tsc => {
            lines.push(("counter", "the time-stamp counter (counting only, read-only)".into()))
        }
        EventKind::Soft { name } => {
            let origin = if pmc::events::perf_soft_events().any(|n| n == name) {
                " (a Linux perf software event)"
            } else if pmc::events::freebsd_soft_events().any(|n| n == name) {
                " (a FreeBSD kernel software event)"
            } else {
                ""
            };
            lines.push(("software event", format!("{name}{origin}")));
        }
    }
    let rate = match event.kind {
        EventKind::Tsc => "none: the TSC only counts".to_owned(),
        _ => format!("{} (when -n is not given)", event.default_rate),
    };
    lines.push(("sampling rate", rate));
    lines
        .into_iter()
        .map(|(label, value)| format!("{:<16}{value}\n", format!("{label}:")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmc::Class;
    use pmc::events::{Event, EventKind};

    fn event(name: &str, spec: &str, class: Class, kind: EventKind, rate: u64) -> Event {
        Event { name: name.into(), spec: spec.into(), class, kind, default_rate: rate }
    }

    #[test]
    fn describe_shows_the_perfevtsel_fields_of_a_programmable_event() {
        let e = event(
            "BR_MISP_RETIRED.ALL_BRANCHES",
            "br_misp_retired.all_branches,usr,inv,edge,cmask=3",
            Class::Iap,
            EventKind::Iap { evtsel: 0x0385_00c5 },
            400_009,
        );
        assert_eq!(
            describe_event_text(&e),
            "event:          BR_MISP_RETIRED.ALL_BRANCHES\n\
             spec:           br_misp_retired.all_branches,usr,inv,edge,cmask=3\n\
             class:          IAP (Intel programmable counter)\n\
             event select:   0xc5\n\
             umask:          0x00\n\
             rings:          user\n\
             flags:          edge inv cmask=3\n\
             PERFEVTSEL:     0x038500c5\n\
             sampling rate:  400009 (when -n is not given)\n"
        );
    }

    #[test]
    fn describe_shows_the_counter_of_fixed_tsc_and_software_events() {
        let fixed = event(
            "unhalted-reference-cycles",
            "unhalted-reference-cycles",
            Class::Iaf,
            EventKind::Iaf { index: 2, event: 0x10002, usr: false, os: true },
            65536,
        );
        assert_eq!(
            describe_event_text(&fixed),
            "event:          unhalted-reference-cycles\n\
             class:          IAF (Intel fixed-function counter)\n\
             counter:        fixed counter 2 (CPU_CLK_UNHALTED.REF_TSC)\n\
             FreeBSD event:  0x10002 (CPU_CLK_UNHALTED_REF)\n\
             rings:          kernel\n\
             sampling rate:  65536 (when -n is not given)\n"
        );
        let tsc = event("TSC", "tsc", Class::Tsc, EventKind::Tsc, 65536);
        assert_eq!(
            describe_event_text(&tsc),
            "event:          TSC\n\
             spec:           tsc\n\
             class:          TSC (time-stamp counter)\n\
             counter:        the time-stamp counter (counting only, read-only)\n\
             sampling rate:  none: the TSC only counts\n"
        );
        let soft = |name: &str| {
            let kind = EventKind::Soft { name: name.into() };
            describe_event_text(&event(name, name, Class::Soft, kind, 1))
        };
        assert!(soft("page-faults").contains(
            "software event: page-faults (a Linux perf software event)\nsampling rate:  1 (when"
        ));
        assert!(
            soft("CLOCK.HARD").contains("software event: CLOCK.HARD (a FreeBSD kernel software")
        );
    }
}
