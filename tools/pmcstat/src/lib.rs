//! pmcstat(8) as a library: the command line ([`cli`]), measurements over libpmc ([`measure`]),
//! the signals that end them ([`signals`]), counting output ([`counts`]), and the offline
//! analysis of pmclog files ([`report`], over the profile engine of the `pmcprof` crate).

pub mod cli;
pub mod counts;
pub mod counts_json;
pub mod failure;
pub mod live;
pub mod measure;
pub mod outputs;
pub mod push;
pub mod report;
pub mod signals;
pub mod summary;

use std::ffi::OsString;
use std::io::Write;

use failure::{Failure, io_failure};
use pmc::api;

/// Runs pmcstat with `args` (without the program name) and returns its exit status: the
/// measured command's status, 0, or a sysexits(3) status after a one-line message on standard
/// error.
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let options = match cli::parse(args) {
        Ok(o) => o,
        Err(cli::CliError::Help(text)) => {
            return match write_stdout(text.as_bytes()) {
                Ok(()) => 0,
                Err(failure) => failure.status,
            };
        }
        Err(cli::CliError::Usage(message)) => {
            failure::tell(format_args!("{message}"));
            return failure::EX_USAGE;
        }
    };
    let status = match run(&options) {
        Ok(status) => status,
        Err(failure) => {
            if !failure.message.is_empty() {
                failure::tell(format_args!("{failure}"));
            }
            failure.status
        }
    };
    signals::hold_if_ending_at_once();
    status
}

/// Writes `bytes` to standard output (a closed pipe is a quiet [`io_failure`]).
fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes).and_then(|()| out.flush()).map_err(|e| io_failure("writing", &e))
}

fn run(o: &cli::Options) -> Result<i32, Failure> {
    if o.print_man {
        let mut page = Vec::new();
        clap_mangen::Man::new(cli::command())
            .section("8")
            .render(&mut page)
            .map_err(|e| io_failure("rendering the manual page", &e))?;
        write_stdout(&page)?;
        return Ok(0);
    }
    if let Some(shell) = o.print_completions {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut cli::command(), "pmcstat", &mut script);
        write_stdout(&script)?;
        return Ok(0);
    }
    if let Some(log) = &o.read_log {
        if o.push.enabled() {
            return push::replay::run(o, log);
        }
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

/// `-L`: each class of this host and its events, with their categories, then the CPU model's
/// events this host cannot count ([`listing_text`]).
fn list_events() -> Result<i32, Failure> {
    let listing = api::event_listing().map_err(|e| Failure::pmc("listing events", &e))?;
    // An offcore-response event's MSR value follows its rate, as the qualifier that sets it.
    let rate = |event: &pmc::events::ListedEvent| {
        api::lookup_event(&event.name).ok().map(|e| match e.kind {
            pmc::events::EventKind::Iap { offcore_rsp: Some(value), .. } => {
                format!("{} offcore_rsp={value:#x}", rate_text(&e))
            }
            _ => rate_text(&e),
        })
    };
    let mut text = listing_text(&listing, rate);
    text += &counters_by_cpu_text(&usable_counters_by_cpu());
    write_stdout(text.as_bytes())?;
    Ok(0)
}

/// Each CPU's usable hardware counters, (class name, count) in row order (GETPMCINFO: a row
/// whose counter the CPU lacks, such as a P-core counter on a hybrid CPU's E-core, or that
/// PMCADMIN disabled, is not usable); empty when the driver does not say.
fn usable_counters_by_cpu() -> Vec<Vec<(&'static str, usize)>> {
    let ncpu = api::cpu_info().map_or(0, |info| info.pm_ncpu);
    (0..ncpu)
        .map_while(|cpu| {
            let rows = api::pmc_info(cpu).ok()?;
            let mut counts: Vec<(&'static str, usize)> = Vec::new();
            for row in rows.iter().filter(|r| r.pm_enabled != 0) {
                let Some(class) = pmc::events::Class::from_u32(row.pm_class) else { continue };
                if !matches!(class.name(), "IAP" | "IAF" | "K8") {
                    continue;
                }
                match counts.iter_mut().find(|(name, _)| *name == class.name()) {
                    Some((_, count)) => *count += 1,
                    None => counts.push((class.name(), 1)),
                }
            }
            Some(counts)
        })
        .collect()
}

/// The `-L` line that says which CPUs have which counters, when not all have the same (a
/// hybrid CPU's P- and E-cores): `# counters: CPU 0: IAP 8, IAF 4; CPU 1: IAP 6, IAF 3`,
/// with CPUs of the same counters listed together.
pub fn counters_by_cpu_text(by_cpu: &[Vec<(&str, usize)>]) -> String {
    /// One CPU's counters, (class name, count).
    type Counters<'a> = Vec<(&'a str, usize)>;
    let mut groups: Vec<(&Counters, Vec<usize>)> = Vec::new();
    for (cpu, counts) in by_cpu.iter().enumerate() {
        match groups.iter_mut().find(|(c, _)| *c == counts) {
            Some((_, cpus)) => cpus.push(cpu),
            None => groups.push((counts, vec![cpu])),
        }
    }
    if groups.len() < 2 {
        return String::new();
    }
    let group_text = |(counts, cpus): &(&Counters, Vec<usize>)| {
        let cpus: Vec<String> = cpus.iter().map(ToString::to_string).collect();
        let counts: Vec<String> = counts.iter().map(|(c, n)| format!("{c} {n}")).collect();
        let label = if cpus.len() == 1 { "CPU" } else { "CPUs" };
        format!("{label} {}: {}", cpus.join(","), counts.join(", "))
    };
    let groups: Vec<String> = groups.iter().map(group_text).collect();
    format!("# counters: {}\n", groups.join("; "))
}

/// What `-L` prints: as FreeBSD, each class name on a line of its own and its events below it
/// after a tab, here each followed by its default sampling rate with its unit (`rate`: `every
/// 2000003 events`, `every 1000000 ns`) and its category (vendor-table events); then, under a
/// `CLASS (not available on this host)` header, the CPU model's events this host cannot count,
/// each with the reason, and a last line naming the CPU and its tables.
pub fn listing_text(
    listing: &pmc::events::EventListing,
    rate: impl Fn(&pmc::events::ListedEvent) -> Option<String>,
) -> String {
    let mut out = String::new();
    let mut class = None;
    for event in &listing.offered {
        if class != Some(event.class) {
            out += &format!("{}\n", event.class.name());
            class = Some(event.class);
        }
        let rate = rate(event).unwrap_or_default();
        let category = event.category.unwrap_or_default();
        let line = format!("\t{:<56} {rate:<24} {category}", event.name);
        out += line.trim_end();
        out.push('\n');
    }
    let mut class = None;
    for missing in &listing.unavailable {
        let event = &missing.event;
        if class != Some(event.class) {
            let why = listing.missing_reason.as_deref().unwrap_or("the host lacks this class");
            out += &format!("{} (not available on this host: {why})\n", event.class.name());
            class = Some(event.class);
        }
        let category = event.category.unwrap_or("");
        let core = missing.core_type.as_deref().map(|c| format!(" [{c}]")).unwrap_or_default();
        let reason = missing.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
        out += &format!("\t{:<56} {category}{core}{reason}\n", event.name);
    }
    if let Some(cpu) = &listing.cpu {
        let tables =
            if listing.tables.is_empty() { "none".to_string() } else { listing.tables.join(", ") };
        out += &format!("# CPU {cpu}, event tables: {tables}\n");
    }
    out
}

/// `-u spec`: what an event is for the selected CPU model ([`describe_event_text`]), and why
/// this host cannot count it, if it cannot.
fn describe_event(spec: &str) -> Result<i32, Failure> {
    let (event, unavailable) =
        api::encode_event(spec).map_err(|e| Failure::pmc(&format!("event {spec:?}"), &e))?;
    let mut text = describe_event_text(&event);
    // A hybrid CPU whose core types encode the event differently: a PMC of every core type
    // loads each one's own (the E-cores' travels after pm_iap).
    let per_core_type = api::encode_every_core_type(spec)
        .map_err(|e| Failure::pmc(&format!("event {spec:?}"), &e))?;
    if let Some((core, atom)) = per_core_type {
        text += &format!("{:<16}{core:#010x} (cpu_core, Core table)\n", "P-cores:");
        text += &format!("{:<16}{atom:#010x} (cpu_atom, Atom table)\n", "E-cores:");
    }
    if let Some(reason) = unavailable {
        text += &format!("{:<16}no: {reason}\n", "on this host:");
    }
    write_stdout(text.as_bytes())?;
    Ok(0)
}

/// Which offcore-response MSR an event select reads: RSP_1 for Core's 0xBB, Golden Cove's 0x2B
/// and Atom's 0xB7 with umask 0x02; RSP_0 otherwise.
fn offcore_msr_text(evtsel: u32) -> &'static str {
    match (evtsel & 0xFF, evtsel >> 8 & 0xFF) {
        (0xBB | 0x2B, _) | (0xB7, 0x02) => "MSR_OFFCORE_RSP_1, 1A7h",
        _ => "MSR_OFFCORE_RSP_0, 1A6h",
    }
}

/// The `umask`, `rings` and `flags` lines of an event-select image (IA32_PERFEVTSELx, or AMD
/// PERF_CTL's low 32 bits): umask 15:8, USR 16, OS 17, EDGE 18, INV 23, CMASK 31:24.
fn selector_lines(lines: &mut Vec<(&str, String)>, selector: u32) {
    let bit = |n: u32| selector & (1 << n) != 0;
    lines.push(("umask", format!("{:#04x}", (selector >> 8) & 0xFF)));
    lines.push(("rings", rings_text(bit(16), bit(17)).to_owned()));
    let mut flags: Vec<String> = Vec::new();
    if bit(18) {
        flags.push("edge".into());
    }
    if bit(23) {
        flags.push("inv".into());
    }
    if selector >> 24 != 0 {
        flags.push(format!("cmask={}", selector >> 24));
    }
    lines.push(("flags", if flags.is_empty() { "none".into() } else { flags.join(" ") }));
}

/// The rings an event counts in, as `-u` says them (neither bit set: both).
fn rings_text(usr: bool, os: bool) -> &'static str {
    match (usr, os) {
        (true, false) => "user",
        (false, true) => "kernel",
        _ => "user and kernel",
    }
}

/// An event's default sampling rate with its unit, as `-L` shows it: `every 2000003 events`,
/// `every 1000000 ns` (the Linux clock events), `every 1 ticks` (FreeBSD's clock events),
/// `counts only` (the TSC).
pub fn rate_text(event: &pmc::events::Event) -> String {
    match event.kind {
        pmc::events::EventKind::Tsc => "counts only".to_owned(),
        _ => format!("every {}", rate_unit(event)),
    }
}

/// `N UNIT` for an event's default rate.
fn rate_unit(event: &pmc::events::Event) -> String {
    use pmc::events::EventKind;
    let unit = match &event.kind {
        EventKind::Soft { name } if pmc::host::is_clock_event(name) => "ns",
        EventKind::Soft { name } if pmc::events::freebsd_soft_events().any(|n| n == name) => {
            "ticks of the kernel's clock"
        }
        _ => "events",
    };
    format!("{} {unit}", event.default_rate)
}

/// What `-u` prints about an event: one `label: value` line each for its name (and the spec
/// when it was spelled differently), its class, how the counter is programmed, and the
/// sampling rate used when `-n` is not given, with its unit:
///
/// ```text
/// event:          INST_RETIRED.ANY_P
/// class:          IAP (Intel programmable counter)
/// event select:   0xc0
/// umask:          0x00
/// rings:          user and kernel
/// flags:          none
/// PERFEVTSEL:     0x000300c0
/// sampling rate:  65536 events (when -n is not given)
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
        "K8" => " (AMD core counter)",
        "TSC" => " (time-stamp counter)",
        "SOFT" => " (software event)",
        _ => "",
    };
    lines.push(("class", format!("{class}{what}")));
    match &event.kind {
        EventKind::Iap { evtsel, umask2, offcore_rsp } => {
            lines.push(("event select", format!("{:#04x}", evtsel & 0xFF)));
            selector_lines(&mut lines, *evtsel);
            if *umask2 != 0 {
                lines.push(("umask2", format!("{umask2:#04x} (bits 47:40)")));
            }
            let perfevtsel = u64::from(*evtsel) | u64::from(*umask2) << 40;
            lines.push(("PERFEVTSEL", format!("{perfevtsel:#010x}")));
            if let Some(value) = offcore_rsp {
                let msr = offcore_msr_text(*evtsel);
                lines.push(("offcore_rsp", format!("{value:#x} ({msr})")));
            }
        }
        EventKind::Iaf { index, event: code, usr, os } => {
            let counts = match index {
                0 => " (INSTR_RETIRED.ANY)",
                1 => " (CPU_CLK_UNHALTED.CORE)",
                2 => " (CPU_CLK_UNHALTED.REF_TSC)",
                3 => " (TOPDOWN.SLOTS)",
                _ => "",
            };
            lines.push(("counter", format!("fixed counter {index}{counts}")));
            if *index == 3 {
                // No static event: allocated by its PMU encoding.
                lines.push(("PERFEVTSEL", "0x01a4 (PMC_F_EV_PMU)".to_owned()));
            } else {
                let name =
                    pmclog::names::event_name(*code).map(|n| format!(" ({n})")).unwrap_or_default();
                lines.push(("FreeBSD event", format!("{code:#x}{name}")));
            }
            lines.push(("rings", rings_text(*usr, *os).to_owned()));
        }
        EventKind::K8 { perf_ctl } => {
            let code = (perf_ctl & 0xFF) | ((perf_ctl >> 32) & 0xF) << 8;
            lines.push(("event select", format!("{code:#05x}")));
            // PERF_CTL's low 32 bits are laid out as IA32_PERFEVTSELx.
            selector_lines(&mut lines, *perf_ctl as u32);
            lines.push(("PERF_CTL", format!("{perf_ctl:#012x}")));
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
    let rate = match &event.kind {
        EventKind::Tsc => "none: the TSC only counts".to_owned(),
        EventKind::Soft { name } if pmc::host::is_clock_event(name) => format!(
            "{} ns, {} samples a second (when -n or --freq is not given)",
            event.default_rate,
            1_000_000_000 / event.default_rate.max(1)
        ),
        _ => format!("{} (when -n is not given)", rate_unit(event)),
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
            EventKind::Iap { evtsel: 0x0385_00c5, umask2: 0, offcore_rsp: None },
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
             sampling rate:  400009 events (when -n is not given)\n"
        );
    }

    #[test]
    fn the_default_rate_is_shown_with_its_unit() {
        let soft = |name: &str, rate| {
            event(name, name, Class::Soft, EventKind::Soft { name: name.into() }, rate)
        };
        assert_eq!(rate_text(&soft("cpu-clock", 1_000_000)), "every 1000000 ns");
        assert_eq!(rate_text(&soft("page-faults", 1)), "every 1 events");
        assert_eq!(rate_text(&soft("CLOCK.PROF", 1)), "every 1 ticks of the kernel's clock");
        let iap = event(
            "X",
            "x",
            Class::Iap,
            EventKind::Iap { evtsel: 0xc0, umask2: 0, offcore_rsp: None },
            2_000_003,
        );
        assert_eq!(rate_text(&iap), "every 2000003 events");
        assert_eq!(rate_text(&event("TSC", "tsc", Class::Tsc, EventKind::Tsc, 1)), "counts only");
    }

    #[test]
    fn listing_shows_classes_categories_and_what_the_host_cannot_count() {
        use pmc::events::{EventListing, ListedEvent, UnavailableEvent};
        let listed =
            |class, name: &str, category| ListedEvent { class, name: name.into(), category };
        let listing = EventListing {
            cpu: Some("GenuineIntel-6-97-2".into()),
            tables: vec!["alderlake_gracemont", "alderlake_goldencove"],
            offered: vec![listed(Class::Tsc, "TSC", None), listed(Class::Soft, "cpu-clock", None)],
            unavailable: vec![
                UnavailableEvent {
                    event: listed(Class::Iaf, "TOPDOWN.SLOTS", Some("pipeline")),
                    core_type: Some("Core".into()),
                    reason: Some("fixed counter 3".into()),
                },
                UnavailableEvent {
                    event: listed(Class::Iap, "BR_INST_RETIRED.ALL_BRANCHES", Some("branch")),
                    core_type: None,
                    reason: None,
                },
            ],
            missing_reason: Some("no PMU".into()),
        };
        let rate = |e: &ListedEvent| (e.class == Class::Soft).then(|| "every 1000000 ns".into());
        assert_eq!(
            listing_text(&listing, rate),
            format!(
                "TSC\n\tTSC\nSOFT\n\t{:<56} every 1000000 ns\n\
                 IAF (not available on this host: no PMU)\n\t{:<56} pipeline [Core]: fixed counter 3\n\
                 IAP (not available on this host: no PMU)\n\t{:<56} branch\n\
                 # CPU GenuineIntel-6-97-2, event tables: alderlake_gracemont, alderlake_goldencove\n",
                "cpu-clock", "TOPDOWN.SLOTS", "BR_INST_RETIRED.ALL_BRANCHES"
            )
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
             sampling rate:  65536 events (when -n is not given)\n"
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
        let soft = |name: &str, rate: u64| {
            let kind = EventKind::Soft { name: name.into() };
            describe_event_text(&event(name, name, Class::Soft, kind, rate))
        };
        assert!(soft("page-faults", 1).contains(
            "software event: page-faults (a Linux perf software event)\nsampling rate:  1 events (when"
        ));
        assert!(soft("cpu-clock", 250_000).contains(
            "sampling rate:  250000 ns, 4000 samples a second (when -n or --freq is not given)"
        ));
        assert!(soft("CLOCK.HARD", 1).contains("sampling rate:  1 ticks of the kernel's clock"));
        assert!(
            soft("CLOCK.HARD", 1).contains("software event: CLOCK.HARD (a FreeBSD kernel software")
        );
    }
}
