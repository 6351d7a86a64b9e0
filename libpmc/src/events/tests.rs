//! Tests of the event catalog. Expected encodings come from the Intel SDM (IA32_PERFEVTSELx
//! layout, Vol. 3B "Architectural Performance Monitoring"; the pre-defined architectural events
//! table), FreeBSD's libpmc alias tables and `sys/dev/hwpmc/pmc_events.h` numbering, and Intel's
//! perfmon JSON file for Skylake (`skylake_core_v42.json`), written out here by hand.

use super::*;
use crate::events::model::CpuId;

// IA32_PERFEVTSELx fields (Intel SDM Vol. 3B, Figure "Layout of IA32_PERFEVTSELx MSRs").
const SEL_USR: u32 = 1 << 16;
const SEL_OS: u32 = 1 << 17;
const SEL_EDGE: u32 = 1 << 18;
const SEL_INT: u32 = 1 << 20;
const SEL_ANY: u32 = 1 << 21;
const SEL_EN: u32 = 1 << 22;
const SEL_INV: u32 = 1 << 23;

/// Event select in bits 7:0, unit mask in bits 15:8.
fn sel(event: u32, umask: u32) -> u32 {
    event | umask << 8
}

/// Counter mask in bits 31:24.
fn cmask(value: u32) -> u32 {
    value << 24
}

// FreeBSD's pmc_events.h: the IAF block starts at 0x10000, TSC_TSC is 0x1000.
const FREEBSD_IAF_INSTR_RETIRED_ANY: u32 = 0x10000;
const FREEBSD_IAF_CPU_CLK_UNHALTED_CORE: u32 = 0x10001;
const FREEBSD_IAF_CPU_CLK_UNHALTED_REF: u32 = 0x10002;

const PMU_LESS_REASON: &str =
    "no hardware PMU: CPUID leaf 0xA reports perfmon version 0 (a VM without a virtual PMU)";

const LINUX_SOFT: [&str; 7] = [
    "task-clock",
    "cpu-clock",
    "page-faults",
    "context-switches",
    "cpu-migrations",
    "minor-faults",
    "major-faults",
];

const FREEBSD_SOFT: [&str; 6] = [
    "CLOCK.HARD",
    "CLOCK.STAT",
    "CLOCK.PROF",
    "PAGE_FAULT.ALL",
    "PAGE_FAULT.READ",
    "PAGE_FAULT.WRITE",
];

/// A Linux VM without a PMU: TSC and perf's software events.
fn pmu_less_linux() -> HostEvents {
    HostEvents {
        classes: vec![Class::Tsc, Class::Soft],
        missing_reason: Some(PMU_LESS_REASON.to_string()),
        soft_events: LINUX_SOFT.iter().map(|s| s.to_string()).collect(),
        cpu: None,
        core_type: None,
        arch_events_unavailable: 0,
        fixed_counters: None,
    }
}

/// An Intel FreeBSD-like host without a model table, with or without fixed counters.
fn intel_freebsd(with_iaf: bool) -> HostEvents {
    let mut classes = vec![Class::Tsc, Class::Iap, Class::Soft];
    if with_iaf {
        classes.push(Class::Iaf);
    }
    HostEvents {
        classes,
        missing_reason: None,
        soft_events: FREEBSD_SOFT.iter().map(|s| s.to_string()).collect(),
        cpu: None,
        core_type: None,
        arch_events_unavailable: 0,
        fixed_counters: None,
    }
}

/// A Skylake client (family 6, model 0x5E) Linux host with a PMU.
fn skylake_linux() -> HostEvents {
    HostEvents {
        classes: vec![Class::Tsc, Class::Iaf, Class::Iap, Class::Soft],
        missing_reason: None,
        soft_events: LINUX_SOFT.iter().map(|s| s.to_string()).collect(),
        cpu: Some(CpuId::parse("GenuineIntel-6-5E-3").unwrap()),
        core_type: None,
        arch_events_unavailable: 0,
        fixed_counters: None,
    }
}

fn iap_evtsel(host: &HostEvents, spec: &str) -> u32 {
    match host.lookup(spec) {
        Ok(Event { kind: EventKind::Iap { evtsel, .. }, class: Class::Iap, .. }) => evtsel,
        other => panic!("{spec}: expected an IAP event, got {other:?}"),
    }
}

fn bad_qualifier_detail(host: &HostEvents, spec: &str) -> String {
    match host.lookup(spec) {
        Err(EventError::BadQualifier { spec: got, detail }) => {
            assert_eq!(got, spec);
            detail
        }
        other => panic!("{spec}: expected BadQualifier, got {other:?}"),
    }
}

fn unavailable(host: &HostEvents, spec: &str) -> (Class, String, Vec<String>) {
    match host.lookup(spec) {
        Err(EventError::Unavailable { spec: got, class, reason, offered }) => {
            assert_eq!(got, spec);
            (class, reason, offered)
        }
        other => panic!("{spec}: expected Unavailable, got {other:?}"),
    }
}

fn unknown_suggestions(host: &HostEvents, spec: &str) -> Vec<String> {
    match host.lookup(spec) {
        Err(EventError::Unknown { spec: got, suggestions }) => {
            assert_eq!(got, spec);
            suggestions
        }
        other => panic!("{spec}: expected Unknown, got {other:?}"),
    }
}

#[test]
fn alias_instructions_is_fixed_counter_0_when_iaf_is_offered() {
    let event = intel_freebsd(true).lookup("instructions").unwrap();
    assert_eq!(event.class, Class::Iaf);
    assert_eq!(
        event.kind,
        EventKind::Iaf { index: 0, event: FREEBSD_IAF_INSTR_RETIRED_ANY, usr: true, os: true }
    );
    assert_eq!(event.name, "instructions");
    assert_eq!(event.spec, "instructions");
    assert_eq!(event.default_rate, 65536);
}

#[test]
fn alias_instructions_is_inst_retired_any_p_without_iaf() {
    // FreeBSD's core_aliases_without_iaf: instructions -> iap-inst-retired.any_p, C0H/00H.
    let host = intel_freebsd(false);
    assert_eq!(iap_evtsel(&host, "instructions"), sel(0xC0, 0x00) | SEL_USR | SEL_OS);
    assert_eq!(host.lookup("instructions").unwrap().name, "instructions");
}

#[test]
fn alias_unhalted_cycles_is_fixed_counter_1_or_event_3c_umask_00() {
    let event = intel_freebsd(true).lookup("unhalted-cycles").unwrap();
    assert_eq!(
        event.kind,
        EventKind::Iaf { index: 1, event: FREEBSD_IAF_CPU_CLK_UNHALTED_CORE, usr: true, os: true }
    );
    assert_eq!(
        iap_evtsel(&intel_freebsd(false), "unhalted-cycles"),
        sel(0x3C, 0x00) | SEL_USR | SEL_OS
    );
}

#[test]
fn alias_unhalted_reference_cycles_is_fixed_counter_2_or_event_3c_umask_01() {
    let event = intel_freebsd(true).lookup("unhalted-reference-cycles").unwrap();
    assert_eq!(
        event.kind,
        EventKind::Iaf { index: 2, event: FREEBSD_IAF_CPU_CLK_UNHALTED_REF, usr: true, os: true }
    );
    assert_eq!(
        iap_evtsel(&intel_freebsd(false), "unhalted-reference-cycles"),
        sel(0x3C, 0x01) | SEL_USR | SEL_OS
    );
}

#[test]
fn aliases_without_a_fixed_counter_use_their_architectural_encoding_with_or_without_iaf() {
    let expected = [
        ("branches", sel(0xC4, 0x00)),
        ("branch-mispredicts", sel(0xC5, 0x00)),
        ("cache-references", sel(0x2E, 0x4F)),
        ("cache-misses", sel(0x2E, 0x41)),
    ];
    for host in [intel_freebsd(true), intel_freebsd(false)] {
        for (alias, encoding) in expected {
            assert_eq!(iap_evtsel(&host, alias), encoding | SEL_USR | SEL_OS, "{alias}");
            let event = host.lookup(alias).unwrap();
            assert_eq!(event.name, alias);
            assert_eq!(event.default_rate, 65536);
        }
    }
}

#[test]
fn static_aliases_are_the_ones_without_a_table_and_cycles_is_the_tsc() {
    let mut names: Vec<&str> = aliases().collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "branch-mispredicts",
            "branches",
            "cache-misses",
            "cache-references",
            "instructions",
            "unhalted-cycles",
            "unhalted-reference-cycles",
        ]
    );
    let host = intel_freebsd(true);
    assert_eq!(host.lookup("cycles").map(|e| e.kind), Ok(EventKind::Tsc));
}

#[test]
fn names_are_case_insensitive() {
    let host = intel_freebsd(true);
    assert_eq!(
        host.lookup("INSTRUCTIONS").unwrap().kind,
        host.lookup("instructions").unwrap().kind
    );
    assert_eq!(iap_evtsel(&host, "inst_retired.any_p"), sel(0xC0, 0x00) | SEL_USR | SEL_OS);
    assert_eq!(iap_evtsel(&host, "Branch_Misses_Retired"), sel(0xC5, 0x00) | SEL_USR | SEL_OS);
    let clock = host.lookup("Clock.Prof").unwrap();
    assert_eq!(clock.name, "CLOCK.PROF");
    assert_eq!(clock.kind, EventKind::Soft { name: "CLOCK.PROF".into() });
    assert_eq!(host.lookup("tsc").unwrap().kind, EventKind::Tsc);
    let linux = pmu_less_linux();
    assert_eq!(
        linux.lookup("TASK-CLOCK").unwrap().kind,
        EventKind::Soft { name: "task-clock".into() }
    );
}

#[test]
fn separators_are_interchangeable_as_in_freebsd() {
    let host = intel_freebsd(true);
    let event = host.lookup("cpu-clk-unhalted.ref-tsc").unwrap();
    assert_eq!(event.name, "CPU_CLK_UNHALTED.REF_TSC");
    assert!(matches!(event.kind, EventKind::Iaf { index: 2, .. }));
    assert_eq!(iap_evtsel(&host, "llc misses"), sel(0x2E, 0x41) | SEL_USR | SEL_OS);
    assert_eq!(host.lookup("clock-hard").unwrap().name, "CLOCK.HARD");
}

#[test]
fn class_prefixes_limit_the_search_to_their_class() {
    let host = intel_freebsd(true);
    // FreeBSD's alias targets: iaf-instr-retired.any, iap-inst-retired.any_p, tsc-tsc.
    let fixed = host.lookup("iaf-instr-retired.any").unwrap();
    assert_eq!(fixed.name, "INSTR_RETIRED.ANY");
    assert!(matches!(fixed.kind, EventKind::Iaf { index: 0, .. }));
    assert_eq!(iap_evtsel(&host, "iap-inst-retired.any_p"), sel(0xC0, 0x00) | SEL_USR | SEL_OS);
    let tsc = host.lookup("tsc-tsc").unwrap();
    assert_eq!((tsc.class, tsc.kind, tsc.name.as_str()), (Class::Tsc, EventKind::Tsc, "TSC"));
    assert_eq!(host.lookup("soft-clock.prof").unwrap().name, "CLOCK.PROF");
    // The wrong class finds nothing, and aliases have no class prefix.
    unknown_suggestions(&host, "iaf-inst-retired.any_p");
    unknown_suggestions(&host, "iap-instructions");
}

#[test]
fn fixed_counter_names_resolve_to_their_index_and_freebsd_event_number() {
    let host = intel_freebsd(true);
    let expected = [
        ("INSTR_RETIRED.ANY", 0, FREEBSD_IAF_INSTR_RETIRED_ANY),
        ("INST_RETIRED.ANY", 0, FREEBSD_IAF_INSTR_RETIRED_ANY),
        ("CPU_CLK_UNHALTED.CORE", 1, FREEBSD_IAF_CPU_CLK_UNHALTED_CORE),
        ("CPU_CLK_UNHALTED.THREAD", 1, FREEBSD_IAF_CPU_CLK_UNHALTED_CORE),
        ("CPU_CLK_UNHALTED.REF", 2, FREEBSD_IAF_CPU_CLK_UNHALTED_REF),
        ("CPU_CLK_UNHALTED.REF_TSC", 2, FREEBSD_IAF_CPU_CLK_UNHALTED_REF),
    ];
    for (name, index, number) in expected {
        let event = host.lookup(name).unwrap();
        assert_eq!(event.name, name);
        assert_eq!(event.class, Class::Iaf);
        assert_eq!(event.kind, EventKind::Iaf { index, event: number, usr: true, os: true });
        assert_eq!(event.default_rate, 65536);
    }
}

#[test]
fn fixed_counter_names_are_unavailable_without_iaf() {
    let (class, reason, _) = unavailable(&intel_freebsd(false), "INSTR_RETIRED.ANY");
    assert_eq!(class, Class::Iaf);
    assert!(reason.contains("IAF"), "{reason}");
}

#[test]
fn fixed_counters_take_usr_and_os() {
    let host = intel_freebsd(true);
    let rings = |spec: &str| match host.lookup(spec).unwrap().kind {
        EventKind::Iaf { usr, os, .. } => (usr, os),
        other => panic!("{spec}: {other:?}"),
    };
    assert_eq!(rings("INST_RETIRED.ANY,usr"), (true, false));
    assert_eq!(rings("INST_RETIRED.ANY,os"), (false, true));
    assert_eq!(rings("INST_RETIRED.ANY,usr,os"), (true, true));
    assert_eq!(rings("instructions,USR"), (true, false));
}

#[test]
fn fixed_counters_refuse_edge_inv_cmask_and_umask_and_name_the_programmable_equivalent() {
    let host = intel_freebsd(true);
    for qualifier in ["edge", "inv", "cmask=1", "umask=1"] {
        let detail = bad_qualifier_detail(&host, &format!("INST_RETIRED.ANY,{qualifier}"));
        assert!(detail.contains("fixed counter 0"), "{detail}");
        assert!(detail.contains("INST_RETIRED.ANY_P"), "{detail}");
        let detail = bad_qualifier_detail(&host, &format!("unhalted-cycles,{qualifier}"));
        assert!(detail.contains("fixed counter 1"), "{detail}");
    }
    // Without IAF the alias is a programmable event and takes them.
    assert_eq!(
        iap_evtsel(&intel_freebsd(false), "instructions,cmask=2"),
        sel(0xC0, 0x00) | cmask(2) | SEL_USR | SEL_OS
    );
}

#[test]
fn architectural_events_have_the_sdm_encodings() {
    // Intel SDM Vol. 3B, pre-defined architectural performance events (CPUID.0AH:EBX bits 0-7).
    let expected = [
        ("UNHALTED_CORE_CYCLES", 0x3C, 0x00),
        ("INSTRUCTION_RETIRED", 0xC0, 0x00),
        ("UNHALTED_REFERENCE_CYCLES", 0x3C, 0x01),
        ("LLC_REFERENCE", 0x2E, 0x4F),
        ("LLC_MISSES", 0x2E, 0x41),
        ("BRANCH_INSTRUCTION_RETIRED", 0xC4, 0x00),
        ("BRANCH_MISSES_RETIRED", 0xC5, 0x00),
        ("TOPDOWN.SLOTS", 0xA4, 0x01),
        ("INST_RETIRED.ANY_P", 0xC0, 0x00),
    ];
    let host = intel_freebsd(false);
    for (name, event, umask) in expected {
        let resolved = host.lookup(name).unwrap();
        assert_eq!(resolved.name, name);
        assert_eq!(resolved.class, Class::Iap);
        assert_eq!(
            resolved.kind,
            EventKind::Iap {
                evtsel: sel(event, umask) | SEL_USR | SEL_OS,
                umask2: 0,
                offcore_rsp: None
            }
        );
        assert_eq!(resolved.default_rate, 65536);
    }
}

#[test]
fn an_architectural_event_marked_unavailable_in_cpuid_0xa_is_unavailable() {
    // EBX bit 5: Branch Instruction Retired not available.
    let host = HostEvents { arch_events_unavailable: 1 << 5, ..intel_freebsd(true) };
    for spec in ["BRANCH_INSTRUCTION_RETIRED", "branches"] {
        let (class, reason, _) = unavailable(&host, spec);
        assert_eq!(class, Class::Iap);
        assert!(reason.contains("bit 5"), "{reason}");
        assert!(reason.contains("BRANCH_INSTRUCTION_RETIRED"), "{reason}");
    }
    // The other architectural events stay.
    assert_eq!(iap_evtsel(&host, "BRANCH_MISSES_RETIRED"), sel(0xC5, 0x00) | SEL_USR | SEL_OS);
    let listed = host.list();
    assert!(!listed.contains(&(Class::Iap, "BRANCH_INSTRUCTION_RETIRED".into())));
    assert!(listed.contains(&(Class::Iap, "BRANCH_MISSES_RETIRED".into())));
    // Instructions retired unavailable (bit 1): the fixed counter still serves `instructions`,
    // but not without IAF.
    let no_instructions = HostEvents { arch_events_unavailable: 1 << 1, ..intel_freebsd(true) };
    assert!(matches!(
        no_instructions.lookup("instructions").unwrap().kind,
        EventKind::Iaf { index: 0, .. }
    ));
    let no_instructions = HostEvents { arch_events_unavailable: 1 << 1, ..intel_freebsd(false) };
    assert_eq!(unavailable(&no_instructions, "instructions").0, Class::Iap);
    assert_eq!(unavailable(&no_instructions, "INST_RETIRED.ANY_P").0, Class::Iap);
}

#[test]
fn arch_events_unavailable_from_cpuid_marks_events_past_the_vector_length() {
    // EAX[31:24] = 7 events, EBX = 0: events 0-6 available, 7 (topdown slots) and up not.
    assert_eq!(arch_events_unavailable_from_cpuid(7 << 24, 0), 0xFFFF_FF80);
    // EAX[31:24] = 8, EBX bit 2 set: only reference cycles and bits 8 and up unavailable.
    assert_eq!(arch_events_unavailable_from_cpuid(8 << 24 | 0x0830_0004, 1 << 2), 0xFFFF_FF04);
    assert_eq!(arch_events_unavailable_from_cpuid(0, 0), 0xFFFF_FFFF);
    assert_eq!(arch_events_unavailable_from_cpuid(32 << 24, 0), 0);
    let host = HostEvents {
        arch_events_unavailable: arch_events_unavailable_from_cpuid(7 << 24, 0),
        ..intel_freebsd(false)
    };
    assert_eq!(unavailable(&host, "TOPDOWN.SLOTS").0, Class::Iap);
    assert_eq!(iap_evtsel(&host, "BRANCH_MISSES_RETIRED"), sel(0xC5, 0x00) | SEL_USR | SEL_OS);
}

#[test]
fn raw_encoding_defaults_to_both_rings_and_names_itself_by_event_and_umask() {
    let host = intel_freebsd(true);
    let event = host.lookup("event=0xc0,umask=0x00").unwrap();
    assert_eq!(event.class, Class::Iap);
    assert_eq!(
        event.kind,
        EventKind::Iap { evtsel: 0xC0 | SEL_USR | SEL_OS, umask2: 0, offcore_rsp: None }
    );
    assert_eq!(event.name, "event=0xc0,umask=0x0");
    assert_eq!(event.spec, "event=0xc0,umask=0x00");
    assert_eq!(event.default_rate, 65536);
    // Decimal, upper-case hex and an absent umask give the same encoding.
    assert_eq!(iap_evtsel(&host, "event=192,umask=0"), 0xC0 | SEL_USR | SEL_OS);
    assert_eq!(iap_evtsel(&host, "EVENT=0XC0"), 0xC0 | SEL_USR | SEL_OS);
    assert_eq!(host.lookup("event=0x3c,umask=0x1").unwrap().name, "event=0x3c,umask=0x1");
}

#[test]
fn raw_encoding_qualifiers_set_their_sdm_bits() {
    let host = intel_freebsd(false);
    let base = sel(0x2E, 0x41);
    let cases = [
        ("event=0x2e,umask=0x41,usr", base | SEL_USR),
        ("event=0x2e,umask=0x41,os", base | SEL_OS),
        ("event=0x2e,umask=0x41,usr,os", base | SEL_USR | SEL_OS),
        ("event=0x2e,umask=0x41,edge", base | SEL_EDGE | SEL_USR | SEL_OS),
        ("event=0x2e,umask=0x41,inv", base | SEL_INV | SEL_USR | SEL_OS),
        ("event=0x2e,umask=0x41,cmask=5", base | cmask(5) | SEL_USR | SEL_OS),
        ("event=0x2e,umask=0x41,cmask=0xff", base | cmask(0xFF) | SEL_USR | SEL_OS),
        ("event=0x2e,umask=65", base | SEL_USR | SEL_OS),
        (
            "event=0x2e,umask=0x41,usr,edge,inv,cmask=3",
            base | SEL_USR | SEL_EDGE | SEL_INV | cmask(3),
        ),
    ];
    for (spec, expected) in cases {
        assert_eq!(iap_evtsel(&host, spec), expected, "{spec}");
    }
    // The bits the driver owns are never set by the catalog.
    let all = iap_evtsel(&host, "event=0xff,umask=0xff,usr,os,edge,inv,cmask=255");
    assert_eq!(all & (SEL_EN | SEL_INT | SEL_ANY), 0);
    assert_eq!(all, 0xFF | 0xFF << 8 | SEL_USR | SEL_OS | SEL_EDGE | SEL_INV | 0xFF << 24);
}

#[test]
fn raw_encoding_needs_event_and_a_programmable_counter() {
    let detail = bad_qualifier_detail(&intel_freebsd(true), "umask=0x41,usr");
    assert!(detail.contains("event="), "{detail}");
    let (class, reason, offered) = unavailable(&pmu_less_linux(), "event=0xc0,umask=0x00");
    assert_eq!(class, Class::Iap);
    assert_eq!(reason, PMU_LESS_REASON);
    assert_eq!(offered, LINUX_SOFT);
}

#[test]
fn named_events_take_qualifiers_and_umask_overrides() {
    let host = intel_freebsd(true);
    assert_eq!(iap_evtsel(&host, "INST_RETIRED.ANY_P,usr"), sel(0xC0, 0x00) | SEL_USR);
    assert_eq!(iap_evtsel(&host, "UNHALTED_CORE_CYCLES,umask=0x01,os"), sel(0x3C, 0x01) | SEL_OS);
    assert_eq!(
        iap_evtsel(&host, "branches,cmask=1,inv,edge"),
        sel(0xC4, 0x00) | cmask(1) | SEL_INV | SEL_EDGE | SEL_USR | SEL_OS
    );
    // Whitespace around the name and the qualifiers is ignored; the spec is kept as given.
    let event = host.lookup(" INST_RETIRED.ANY_P , usr ").unwrap();
    assert_eq!(
        event.kind,
        EventKind::Iap { evtsel: sel(0xC0, 0x00) | SEL_USR, umask2: 0, offcore_rsp: None }
    );
    assert_eq!(event.spec, " INST_RETIRED.ANY_P , usr ");
}

#[test]
fn bad_cmask_umask_and_unknown_qualifiers_say_what_is_accepted() {
    let host = intel_freebsd(true);
    let detail = bad_qualifier_detail(&host, "INST_RETIRED.ANY_P,cmask=300");
    assert!(detail.contains("cmask=300") && detail.contains("0-255"), "{detail}");
    let detail = bad_qualifier_detail(&host, "event=0x2e,umask=zz");
    assert!(detail.contains("umask=zz") && detail.contains("0x"), "{detail}");
    let detail = bad_qualifier_detail(&host, "event=0x100");
    assert!(detail.contains("event=0x100") && detail.contains("0-255"), "{detail}");
    let detail = bad_qualifier_detail(&host, "event=0x2e,cmask=99999999999999999999999");
    assert!(detail.contains("out of range"), "{detail}");
    let detail = bad_qualifier_detail(&host, "INST_RETIRED.ANY_P,foo");
    assert!(detail.contains("`foo`") && detail.contains("usr") && detail.contains("cmask="));
    let detail = bad_qualifier_detail(&host, "INST_RETIRED.ANY_P,period=100");
    assert!(detail.contains("`period=100`"), "{detail}");
    let detail = bad_qualifier_detail(&host, "INST_RETIRED.ANY_P,,usr");
    assert!(detail.contains("empty qualifier"), "{detail}");
    let detail = bad_qualifier_detail(&host, "INST_RETIRED.ANY_P,usr,");
    assert!(detail.contains("empty qualifier"), "{detail}");
}

#[test]
fn anythread_is_refused_because_it_needs_privilege() {
    let host = intel_freebsd(true);
    for spec in ["INST_RETIRED.ANY_P,anythread", "event=0x3c,anythread", "instructions,ANYTHREAD"] {
        let detail = bad_qualifier_detail(&host, spec);
        assert!(detail.contains("privilege"), "{detail}");
    }
}

#[test]
fn event_field_is_only_for_raw_encodings() {
    let detail = bad_qualifier_detail(&intel_freebsd(true), "INST_RETIRED.ANY_P,event=0xc4");
    assert!(detail.contains("raw"), "{detail}");
}

#[test]
fn tsc_and_soft_events_refuse_qualifiers() {
    let host = intel_freebsd(true);
    for spec in ["TSC,usr", "CLOCK.PROF,os", "PAGE_FAULT.ALL,cmask=1"] {
        let detail = bad_qualifier_detail(&host, spec);
        assert!(detail.contains("no qualifiers"), "{detail}");
    }
    bad_qualifier_detail(&pmu_less_linux(), "task-clock,usr");
    bad_qualifier_detail(&pmu_less_linux(), "CLOCK.PROF,edge");
}

#[test]
fn unknown_names_suggest_close_matches_and_point_at_pmcstat_l() {
    let host = intel_freebsd(true);
    let suggestions = unknown_suggestions(&host, "instructoins");
    assert_eq!(suggestions.first().map(String::as_str), Some("instructions"));
    assert!(suggestions.len() <= 5);
    let message = host.lookup("instructoins").unwrap_err().to_string();
    assert!(message.contains("instructoins"), "{message}");
    assert!(message.contains("did you mean instructions"), "{message}");
    assert!(message.contains("pmcstat -L"), "{message}");

    assert!(unknown_suggestions(&host, "brnaches").contains(&"branches".to_string()));
    assert!(unknown_suggestions(&host, "CLOCK.PORF").contains(&"CLOCK.PROF".to_string()));
    assert!(unknown_suggestions(&pmu_less_linux(), "task-clk").contains(&"task-clock".to_string()));
}

#[test]
fn a_spec_longer_than_any_event_spec_is_refused_before_any_look_up() {
    let host = skylake_linux();
    let long = "x".repeat(MAX_SPEC_LEN + 1);
    assert_eq!(host.lookup(&long), Err(EventError::TooLong { length: MAX_SPEC_LEN + 1 }));
    let message = host.lookup(&long).unwrap_err().to_string();
    assert!(message.contains(&format!("at most {MAX_SPEC_LEN} bytes")), "{message}");
    // A megabyte of name (which took minutes to find suggestions for) is refused the same way.
    let huge = format!("INST_RETIRED.ANY,{}", "usr,".repeat(1 << 18));
    assert!(matches!(host.lookup(&huge), Err(EventError::TooLong { .. })));
    // The longest real spec still resolves: a long event name with qualifiers.
    let real = "INST_RETIRED.ANY_P,usr,os,cmask=1,inv,edge";
    assert!(real.len() <= MAX_SPEC_LEN);
    assert!(host.lookup(real).is_ok(), "{:?}", host.lookup(real));
}

#[test]
fn unknown_names_suggest_names_containing_them_at_most_five() {
    let suggestions = unknown_suggestions(&intel_freebsd(true), "cycle");
    assert!(suggestions.contains(&"unhalted-cycles".to_string()), "{suggestions:?}");
    assert!(suggestions.len() <= 5);
    let suggestions = unknown_suggestions(&skylake_linux(), "MISS");
    assert_eq!(suggestions.len(), 5, "{suggestions:?}");
}

#[test]
fn unknown_names_without_close_matches_still_point_at_pmcstat_l() {
    let host = intel_freebsd(true);
    assert!(unknown_suggestions(&host, "zzzzzzzzzzzz").is_empty());
    let message = host.lookup("zzzzzzzzzzzz").unwrap_err().to_string();
    assert!(message.contains("`zzzzzzzzzzzz`") && message.contains("pmcstat -L"), "{message}");
    let message = host.lookup("").unwrap_err().to_string();
    assert!(message.contains("no event name"), "{message}");
    let message = host.lookup(",usr").unwrap_err().to_string();
    assert!(message.contains("no event name"), "{message}");
    let message = host.lookup("zzzzzzzzzzzz,usr").unwrap_err().to_string();
    assert!(message.contains("`zzzzzzzzzzzz` (in `zzzzzzzzzzzz,usr`)"), "{message}");
}

#[test]
fn hardware_events_on_a_pmu_less_host_are_unavailable_with_the_reason_and_soft_events() {
    let host = pmu_less_linux();
    let cases = [
        ("instructions", Class::Iaf),
        ("branches", Class::Iap),
        ("INST_RETIRED.ANY", Class::Iaf),
        ("INST_RETIRED.ANY_P", Class::Iap),
        ("UNHALTED_CORE_CYCLES", Class::Iap),
    ];
    for (spec, expected_class) in cases {
        let (class, reason, offered) = unavailable(&host, spec);
        assert_eq!(class, expected_class, "{spec}");
        assert_eq!(reason, PMU_LESS_REASON);
        assert_eq!(offered, LINUX_SOFT);
        let message = host.lookup(spec).unwrap_err().to_string();
        assert!(message.contains(PMU_LESS_REASON), "{message}");
        assert!(message.contains(expected_class.name()), "{message}");
        for soft in LINUX_SOFT {
            assert!(message.contains(soft), "{message}");
        }
    }
}

#[test]
fn an_unavailable_class_without_a_reason_names_the_class() {
    let host = HostEvents { classes: vec![Class::Soft], ..HostEvents::default() };
    let (class, reason, offered) = unavailable(&host, "TSC");
    assert_eq!(class, Class::Tsc);
    assert!(reason.contains("TSC"), "{reason}");
    assert!(offered.is_empty());
    let message = host.lookup("TSC").unwrap_err().to_string();
    assert!(message.contains("no software events"), "{message}");
}

#[test]
fn tsc_resolves_when_offered() {
    let event = pmu_less_linux().lookup("TSC").unwrap();
    assert_eq!(event.class, Class::Tsc);
    assert_eq!(event.kind, EventKind::Tsc);
    assert_eq!(event.name, "TSC");
    assert_eq!(pmu_less_linux().lookup("tsc-tsc").unwrap().kind, EventKind::Tsc);
}

#[test]
fn freebsd_soft_events_resolve_by_their_own_name_on_freebsd() {
    let host = intel_freebsd(true);
    for name in FREEBSD_SOFT {
        let event = host.lookup(name).unwrap();
        assert_eq!(event.class, Class::Soft);
        assert_eq!(event.name, name);
        assert_eq!(event.kind, EventKind::Soft { name: name.to_string() });
        assert_eq!(event.default_rate, 1);
    }
}

#[test]
fn freebsd_soft_events_map_to_perf_stand_ins_on_linux() {
    let host = pmu_less_linux();
    let cases = [
        ("CLOCK.HARD", "cpu-clock"),
        ("CLOCK.STAT", "cpu-clock"),
        ("CLOCK.PROF", "cpu-clock"),
        ("PAGE_FAULT.ALL", "page-faults"),
        ("clock.prof", "cpu-clock"),
    ];
    for (spec, host_name) in cases {
        let event = host.lookup(spec).unwrap();
        assert_eq!(event.class, Class::Soft);
        assert_eq!(event.name, spec.to_ascii_uppercase());
        assert_eq!(event.kind, EventKind::Soft { name: host_name.to_string() });
        // A clock stand-in samples every 1 ms (its rate is in nanoseconds on Linux).
        let rate = if host_name == "cpu-clock" { 1_000_000 } else { 1 };
        assert_eq!(event.default_rate, rate, "{spec}");
    }
    for spec in ["PAGE_FAULT.READ", "PAGE_FAULT.WRITE"] {
        let (class, reason, offered) = unavailable(&host, spec);
        assert_eq!(class, Class::Soft);
        assert!(reason.contains(spec), "{reason}");
        assert_eq!(offered, LINUX_SOFT);
    }
    // Without cpu-clock, CLOCK.PROF has no stand-in.
    let no_cpu_clock =
        HostEvents { soft_events: vec!["task-clock".to_string()], ..pmu_less_linux() };
    let (_, reason, offered) = unavailable(&no_cpu_clock, "CLOCK.PROF");
    assert!(reason.contains("cpu-clock"), "{reason}");
    assert_eq!(offered, ["task-clock"]);
}

#[test]
fn perf_soft_events_resolve_on_linux_and_not_on_freebsd() {
    let host = pmu_less_linux();
    for name in LINUX_SOFT {
        let event = host.lookup(name).unwrap();
        assert_eq!(event.class, Class::Soft);
        assert_eq!(event.name, name);
        assert_eq!(event.kind, EventKind::Soft { name: name.to_string() });
        // The clock events sample every 1 ms: their rate is in nanoseconds.
        let clock = name == "cpu-clock" || name == "task-clock";
        assert_eq!(event.default_rate, if clock { 1_000_000 } else { 1 }, "{name}");
    }
    let (class, _, offered) = unavailable(&intel_freebsd(true), "task-clock");
    assert_eq!(class, Class::Soft);
    assert_eq!(offered, FREEBSD_SOFT);
}

#[test]
fn soft_events_the_host_registers_resolve_even_if_libpmc_does_not_know_them() {
    let host = HostEvents {
        classes: vec![Class::Soft],
        soft_events: vec!["CALLOUT.FIRED".to_string()],
        ..HostEvents::default()
    };
    let event = host.lookup("callout.fired").unwrap();
    assert_eq!(event.name, "CALLOUT.FIRED");
    assert_eq!(event.kind, EventKind::Soft { name: "CALLOUT.FIRED".into() });
    assert_eq!(host.list(), [(Class::Soft, "CALLOUT.FIRED".to_string())]);
}

#[test]
fn intel_model_key_is_family_decimal_and_model_two_hex_digits() {
    assert_eq!(intel_model_key(6, 0x5E), "GenuineIntel-6-5E");
    assert_eq!(intel_model_key(6, 0x0F), "GenuineIntel-6-0F");
    assert_eq!(intel_model_key(15, 0x6), "GenuineIntel-15-06");
}

#[test]
fn skylake_table_events_have_the_json_encodings() {
    // From skylake_core_v42.json (EventCode, UMask, CounterMask, Invert, EdgeDetect,
    // SampleAfterValue).
    let host = skylake_linux();
    let cases = [
        ("BR_MISP_RETIRED.ALL_BRANCHES", sel(0xC5, 0x00), 400_009),
        ("LONGEST_LAT_CACHE.MISS", sel(0x2E, 0x41), 100_003),
        ("UOPS_ISSUED.STALL_CYCLES", sel(0x0E, 0x01) | cmask(1) | SEL_INV, 2_000_003),
        ("MACHINE_CLEARS.COUNT", sel(0xC3, 0x01) | cmask(1) | SEL_EDGE, 100_003),
        ("UOPS_RETIRED.STALL_CYCLES", sel(0xC2, 0x02) | cmask(1) | SEL_INV, 2_000_003),
    ];
    for (name, encoding, rate) in cases {
        let event = host.lookup(name).unwrap();
        assert_eq!(event.name, name);
        assert_eq!(event.class, Class::Iap);
        assert_eq!(
            event.kind,
            EventKind::Iap { evtsel: encoding | SEL_USR | SEL_OS, umask2: 0, offcore_rsp: None },
            "{name}"
        );
        assert_eq!(event.default_rate, rate, "{name}");
    }
    assert_eq!(iap_evtsel(&host, "br_misp_retired.all_branches,usr"), sel(0xC5, 0x00) | SEL_USR);
    // The user's cmask replaces the table's; edge and inv add to it.
    assert_eq!(
        iap_evtsel(&host, "UOPS_ISSUED.STALL_CYCLES,cmask=2,os"),
        sel(0x0E, 0x01) | cmask(2) | SEL_INV | SEL_OS
    );
    // The lower-case spelling of the model works too.
    let lower = HostEvents { cpu: CpuId::parse("GenuineIntel-6-5e").ok(), ..skylake_linux() };
    assert_eq!(iap_evtsel(&lower, "LONGEST_LAT_CACHE.MISS"), sel(0x2E, 0x41) | SEL_USR | SEL_OS);
}

#[test]
fn skylake_fixed_counter_entries_resolve_to_fixed_counters() {
    // The JSON's INST_RETIRED.ANY (Fixed counter 0), CPU_CLK_UNHALTED.THREAD (1) and
    // CPU_CLK_UNHALTED.REF_TSC (2).
    let host = skylake_linux();
    for (name, index) in
        [("INST_RETIRED.ANY", 0), ("CPU_CLK_UNHALTED.THREAD", 1), ("CPU_CLK_UNHALTED.REF_TSC", 2)]
    {
        let event = host.lookup(name).unwrap();
        assert_eq!(event.class, Class::Iaf);
        assert!(matches!(event.kind, EventKind::Iaf { index: i, .. } if i == index), "{name}");
    }
    // The programmable forms are in the table too.
    assert_eq!(iap_evtsel(&host, "CPU_CLK_UNHALTED.THREAD_P"), sel(0x3C, 0x00) | SEL_USR | SEL_OS);
}

#[test]
fn skylake_anythread_pebs_and_uncore_entries_are_refused() {
    let host = skylake_linux();
    // CPU_CLK_UNHALTED.THREAD_ANY has AnyThread=1.
    let detail = bad_qualifier_detail(&host, "CPU_CLK_UNHALTED.THREAD_ANY");
    assert!(detail.contains("privilege"), "{detail}");
    // Load-latency and frontend events name the MSR, its value and PEBS, without which the
    // MSR changes nothing.
    let (_, reason, _) = unavailable(&host, "MEM_TRANS_RETIRED.LOAD_LATENCY_GT_4");
    assert!(reason.contains("3F6h") && reason.contains("set to 4"), "{reason}");
    assert!(reason.contains("only with PEBS") && reason.contains("driver"), "{reason}");
    let (_, reason, _) = unavailable(&host, "FRONTEND_RETIRED.DSB_MISS");
    assert!(reason.contains("3F7h") && reason.contains("0x11"), "{reason}");
    assert!(reason.contains("only with PEBS"), "{reason}");
    // Uncore events are not in the core tables.
    unknown_suggestions(&host, "UNC_ARB_TRK_OCCUPANCY.ALL");
}

#[test]
fn skylake_offcore_events_carry_their_response_value() {
    let host = skylake_linux();
    let kind = |spec: &str| host.lookup(spec).map(|e| e.kind);
    // Skylake's JSON: OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE is 0xB7/0x01 (or 0xBB/0x01)
    // with MSRValue 0x10001.
    assert_eq!(
        kind("OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE"),
        Ok(EventKind::Iap {
            evtsel: sel(0xB7, 0x01) | SEL_USR | SEL_OS,
            umask2: 0,
            offcore_rsp: Some(0x10001)
        })
    );
    // offcore_rsp= replaces the value, and gives the generic event its value.
    assert_eq!(
        kind("OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE,offcore_rsp=0x10002,usr"),
        Ok(EventKind::Iap {
            evtsel: sel(0xB7, 0x01) | SEL_USR,
            umask2: 0,
            offcore_rsp: Some(0x10002)
        })
    );
    assert_eq!(
        kind("OFFCORE_RESPONSE,rsp=65537"),
        Ok(EventKind::Iap {
            evtsel: sel(0xB7, 0x01) | SEL_USR | SEL_OS,
            umask2: 0,
            offcore_rsp: Some(0x10001)
        })
    );
    assert_eq!(
        kind("event=0xbb,umask=1,offcore_rsp=0x3f80408fff"),
        Ok(EventKind::Iap {
            evtsel: sel(0xBB, 0x01) | SEL_USR | SEL_OS,
            umask2: 0,
            offcore_rsp: Some(0x3f80408fff)
        })
    );
    // Without a value the generic event says how to give one.
    let detail = bad_qualifier_detail(&host, "OFFCORE_RESPONSE");
    assert!(detail.contains("offcore_rsp=") && detail.contains("1A6h/1A7h"), "{detail}");
    // Other events take no response value.
    let detail = bad_qualifier_detail(&host, "INST_RETIRED.ANY_P,offcore_rsp=1");
    assert!(detail.contains("not an offcore-response event"), "{detail}");
    let detail = bad_qualifier_detail(&host, "OFFCORE_RESPONSE,offcore_rsp=0xZZ");
    assert!(detail.contains("64-bit number"), "{detail}");
}

#[test]
fn table_events_need_the_model_and_a_pmu() {
    unknown_suggestions(&intel_freebsd(true), "BR_MISP_RETIRED.ALL_BRANCHES");
    let unknown_model =
        HostEvents { cpu: CpuId::parse("GenuineIntel-6-FF").ok(), ..skylake_linux() };
    unknown_suggestions(&unknown_model, "BR_MISP_RETIRED.ALL_BRANCHES");
    let no_pmu = HostEvents { cpu: CpuId::parse("GenuineIntel-6-5E").ok(), ..pmu_less_linux() };
    let (class, reason, _) = unavailable(&no_pmu, "BR_MISP_RETIRED.ALL_BRANCHES");
    assert_eq!(class, Class::Iap);
    assert_eq!(reason, PMU_LESS_REASON);
}

#[test]
fn skylake_table_names_are_suggested() {
    let suggestions = unknown_suggestions(&skylake_linux(), "BR_MISP_RETIRED.ALL_BRANCHE");
    assert_eq!(suggestions.first().map(String::as_str), Some("BR_MISP_RETIRED.ALL_BRANCHES"));
}

#[test]
fn list_of_a_pmu_less_linux_host_is_tsc_and_its_soft_events() {
    let mut expected = vec![(Class::Tsc, "TSC".to_string())];
    let mut soft: Vec<String> = LINUX_SOFT.iter().map(|s| s.to_string()).collect();
    soft.sort();
    expected.extend(soft.into_iter().map(|name| (Class::Soft, name)));
    assert_eq!(pmu_less_linux().list(), expected);
}

#[test]
fn list_of_an_intel_host_without_a_table() {
    let listed = intel_freebsd(true).list();
    let iaf: Vec<&str> =
        listed.iter().filter(|(c, _)| *c == Class::Iaf).map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        iaf,
        [
            "CPU_CLK_UNHALTED.CORE",
            "CPU_CLK_UNHALTED.REF",
            "CPU_CLK_UNHALTED.REF_TSC",
            "CPU_CLK_UNHALTED.THREAD",
            "INSTR_RETIRED.ANY",
            "INST_RETIRED.ANY",
        ]
    );
    let iap: Vec<&str> =
        listed.iter().filter(|(c, _)| *c == Class::Iap).map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        iap,
        [
            "BRANCH_INSTRUCTION_RETIRED",
            "BRANCH_MISSES_RETIRED",
            "INSTRUCTION_RETIRED",
            "INST_RETIRED.ANY_P",
            "LLC_MISSES",
            "LLC_REFERENCE",
            "TOPDOWN.SLOTS",
            "UNHALTED_CORE_CYCLES",
        ]
    );
    // UNHALTED_REFERENCE_CYCLES is fixed counter 2 where there is one (so listed with neither).
    let soft: Vec<&str> =
        listed.iter().filter(|(c, _)| *c == Class::Soft).map(|(_, n)| n.as_str()).collect();
    let mut expected_soft = FREEBSD_SOFT.to_vec();
    expected_soft.sort_unstable();
    assert_eq!(soft, expected_soft);
    assert!(listed.contains(&(Class::Tsc, "TSC".into())));
    assert_eq!(listed.len(), iaf.len() + iap.len() + soft.len() + 1);
}

#[test]
fn list_of_a_skylake_host_includes_the_table_core_events() {
    let listed = skylake_linux().list();
    for (class, name) in [
        (Class::Tsc, "TSC"),
        (Class::Iaf, "INSTR_RETIRED.ANY"),
        (Class::Iaf, "INST_RETIRED.ANY"),
        (Class::Iaf, "CPU_CLK_UNHALTED.REF_TSC"),
        (Class::Iap, "UNHALTED_CORE_CYCLES"),
        (Class::Iap, "INST_RETIRED.ANY_P"),
        (Class::Iap, "BR_MISP_RETIRED.ALL_BRANCHES"),
        (Class::Iap, "UOPS_ISSUED.STALL_CYCLES"),
        (Class::Iap, "CPU_CLK_UNHALTED.THREAD_P"),
        (Class::Soft, "cpu-clock"),
    ] {
        assert!(listed.contains(&(class, name.to_string())), "{class:?} {name}");
    }
    for name in ["instructions", "CPU_CLK_UNHALTED.THREAD_ANY", "OFFCORE_RESPONSE", "CLOCK.PROF"] {
        assert!(!listed.iter().any(|(_, n)| n == name), "{name} listed");
    }
    assert!(!listed.iter().any(|(_, n)| n.starts_with("UNC_")));
    // CPU_CLK_UNHALTED.THREAD is a fixed counter, not also a programmable event.
    assert!(!listed.contains(&(Class::Iap, "CPU_CLK_UNHALTED.THREAD".into())));
    // Sorted by class (TSC 0x00 < IAF 0x06 < IAP 0x07 < SOFT 0x0F), then name, no duplicates.
    assert!(listed.windows(2).all(|pair| pair[0] < pair[1]));
    assert_eq!(listed.first(), Some(&(Class::Tsc, "TSC".to_string())));
    assert_eq!(listed.last().map(|(c, _)| *c), Some(Class::Soft));
    // The table adds well over the nine architectural events (the Skylake JSON has hundreds).
    assert!(listed.iter().filter(|(c, _)| *c == Class::Iap).count() > 100);
}

#[test]
fn every_listed_event_resolves_to_its_class() {
    for host in [pmu_less_linux(), intel_freebsd(true), intel_freebsd(false), skylake_linux()] {
        for (class, name) in host.list() {
            let event = host.lookup(&name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(event.class, class, "{name}");
            assert_eq!(event.name, name);
        }
    }
}

#[test]
fn list_offers_only_the_hosts_classes() {
    let host = skylake_linux();
    for (class, _) in host.list() {
        assert!(host.classes.contains(&class), "{class:?}");
    }
    let only_soft = HostEvents {
        classes: vec![Class::Soft],
        soft_events: vec!["cpu-clock".into()],
        cpu: CpuId::parse("GenuineIntel-6-5E").ok(),
        ..HostEvents::default()
    };
    assert_eq!(only_soft.list(), [(Class::Soft, "cpu-clock".to_string())]);
}

#[test]
fn soft_event_name_lists_are_freebsds_and_perfs() {
    assert_eq!(freebsd_soft_events().collect::<Vec<_>>(), FREEBSD_SOFT);
    assert_eq!(perf_soft_events().collect::<Vec<_>>(), LINUX_SOFT);
}

#[test]
fn edit_distance_counts_transpositions_as_one() {
    let chars = |s: &str| s.chars().collect::<Vec<_>>();
    assert_eq!(suggest::edit_distance(&chars("instructoins"), &chars("instructions")), 1);
    assert_eq!(suggest::edit_distance(&chars("kitten"), &chars("sitting")), 3);
    assert_eq!(suggest::edit_distance(&chars(""), &chars("abc")), 3);
    assert_eq!(suggest::edit_distance(&chars("abc"), &chars("abc")), 0);
}
