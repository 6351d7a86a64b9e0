//! The event catalog against the vendors' data: every mapfile model's table has the JSON's
//! event count, hand-written encodings per model, FreeBSD's aliases on an Intel and an AMD
//! model, hybrid table selection by core type, and FreeBSD's `pmc_cpuid` format.

use std::path::PathBuf;

use pmc::Class;
use pmc::events::model::{CpuId, Vendor, order_by_core_type};
use pmc::events::table::Table;
use pmc::events::{EventError, EventKind, HostEvents};

/// The vendor data beside the repository (`../shared/data`), if present.
fn data_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data");
    dir.join("intel-perfmon/mapfile.csv").is_file().then_some(dir)
}

/// A host that counts every hardware class on CPU `cpuid`.
fn machine(cpuid: &str) -> HostEvents {
    HostEvents {
        classes: vec![Class::Iaf, Class::Iap, Class::K8, Class::Tsc],
        cpu: Some(CpuId::parse(cpuid).expect("valid cpuid")),
        ..HostEvents::default()
    }
}

/// The IA32_PERFEVTSELx image `spec` programs on `cpuid`.
fn evtsel(cpuid: &str, spec: &str) -> u32 {
    match machine(cpuid).lookup(spec).map(|e| e.kind) {
        Ok(EventKind::Iap { evtsel, .. }) => evtsel,
        other => panic!("{cpuid} {spec}: expected IAP, got {other:?}"),
    }
}

/// The PERF_CTL image `spec` programs on `cpuid`.
fn perf_ctl(cpuid: &str, spec: &str) -> u64 {
    match machine(cpuid).lookup(spec).map(|e| e.kind) {
        Ok(EventKind::K8 { perf_ctl }) => perf_ctl,
        other => panic!("{cpuid} {spec}: expected K8, got {other:?}"),
    }
}

/// The reason `spec` is refused on `cpuid`.
fn refusal(cpuid: &str, spec: &str) -> String {
    match machine(cpuid).lookup(spec) {
        Err(EventError::Unavailable { reason, .. }) => reason,
        other => panic!("{cpuid} {spec}: expected a refusal, got {other:?}"),
    }
}

const USR_OS: u32 = 3 << 16;

#[test]
fn every_mapfile_table_has_the_json_event_count() {
    let Some(data) = data_dir() else {
        eprintln!("../shared/data is absent: nothing to compare with");
        return;
    };
    let mapfile = std::fs::read_to_string(data.join("intel-perfmon/mapfile.csv")).unwrap();
    let mut checked = 0;
    for line in mapfile.lines().skip(1) {
        let columns: Vec<&str> = line.split(',').collect();
        if !matches!(columns[3], "core" | "hybridcore") {
            continue;
        }
        let path = data.join("intel-perfmon").join(columns[2].trim_start_matches('/'));
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let count = json["Events"].as_array().unwrap().len();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_ascii_lowercase();
        let name = stem.strip_suffix("_core").unwrap();
        let table = Table::by_table_name(name).unwrap_or_else(|| panic!("no table {name}"));
        assert_eq!(table.events().len(), count, "{}", columns[2]);
        // A line naming one model selects this table for it.
        if !columns[0].contains(['[', '(', '|', '+']) {
            let tables = CpuId::parse(columns[0]).unwrap().tables();
            assert!(tables.iter().any(|t| t.table.name() == name), "{} → {name}", columns[0]);
        }
        checked += 1;
    }
    for zen in 1..=6 {
        let folder = data.join(format!("amd-pmu-events/amdzen{zen}"));
        let mut count = 0;
        for file in std::fs::read_dir(&folder).unwrap() {
            let json: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(file.unwrap().path()).unwrap())
                    .unwrap();
            count +=
                json.as_array().unwrap().iter().filter(|e| e.get("EventCode").is_some()).count();
        }
        let table = Table::by_table_name(&format!("amdzen{zen}")).unwrap();
        assert_eq!(table.events().len(), count, "amdzen{zen}");
        checked += 1;
    }
    assert!(checked > 90, "{checked} mapfile lines checked");
}

#[test]
fn models_pick_their_tables_by_family_model_and_stepping() {
    let table = |cpuid: &str| {
        let tables = CpuId::parse(cpuid).unwrap().tables();
        tables.iter().map(|t| t.table.name()).collect::<Vec<_>>().join(" ")
    };
    assert_eq!(table("GenuineIntel-6-5E-3"), "skylake");
    assert_eq!(table("GenuineIntel-6-55-4"), "skylakex");
    assert_eq!(table("GenuineIntel-6-55-7"), "cascadelakex");
    assert_eq!(table("GenuineIntel-6-8F-8"), "sapphirerapids");
    assert_eq!(table("GenuineIntel-6-1A-5"), "nehalemep");
    assert_eq!(table("GenuineIntel-6-AD-1"), "graniterapids");
    assert_eq!(table("AuthenticAMD-23-1-2"), "amdzen1");
    assert_eq!(table("AuthenticAMD-23-31-0"), "amdzen2");
    assert_eq!(table("AuthenticAMD-25-1-1"), "amdzen3");
    assert_eq!(table("AuthenticAMD-25-11-1"), "amdzen4");
    assert_eq!(table("AuthenticAMD-26-2-0"), "amdzen5");
    assert_eq!(table("AuthenticAMD-26-50-0"), "amdzen6");
    assert_eq!(table("GenuineIntel-6-0F-6"), "", "Core 2 has no perfmon table");
    assert_eq!(table("AuthenticAMD-21-1-0"), "", "family 15h has no table");
}

#[test]
fn hybrid_parts_have_one_table_per_core_type_chosen_by_cpuid_1a() {
    let tables = CpuId::parse("GenuineIntel-6-97-2").unwrap().tables();
    let types: Vec<_> =
        tables.iter().map(|t| (t.table.name(), t.hybrid.map(|h| h.core_type))).collect();
    assert_eq!(types, [("alderlake_gracemont", Some(0x20)), ("alderlake_goldencove", Some(0x40))]);
    let first = |core_type| order_by_core_type(tables.clone(), core_type)[0].table.name();
    assert_eq!(first(Some(0x20)), "alderlake_gracemont");
    assert_eq!(first(Some(0x40)), "alderlake_goldencove");
    assert_eq!(first(None), "alderlake_goldencove", "P-core table first when unknown");
    // Arrow Lake has three: two Atom tables (native models 3 and 2) and a Core one.
    let arrow = CpuId::parse("GenuineIntel-6-C5-0").unwrap().tables();
    assert_eq!(arrow.len(), 3);
    // An Atom-only event resolves on the hybrid part, with the Atom core's counters.
    let atom = HostEvents { core_type: Some(0x20), ..machine("GenuineIntel-6-97-2") };
    assert_eq!(
        atom.lookup("LD_HEAD.ANY_AT_RET").map(|e| e.kind),
        Ok(EventKind::Iap { evtsel: 0x05 | 0xff << 8 | USR_OS, umask2: 0, offcore_rsp: None })
    );
    // TOPDOWN.SLOTS is only the P-core's, on fixed counter 3.
    assert!(refusal("GenuineIntel-6-97-2", "TOPDOWN.SLOTS").contains("fixed counter 3"));
}

#[test]
fn intel_encodings_are_those_of_the_json() {
    // Written by hand from the models' JSON files.
    assert_eq!(evtsel("GenuineIntel-6-5E-3", "INST_RETIRED.ANY_P"), 0xC0 | USR_OS);
    // UOPS_RETIRED.TOTAL_CYCLES: 0xC2/0x02, cmask 16, inv.
    assert_eq!(
        evtsel("GenuineIntel-6-5E-3", "UOPS_RETIRED.TOTAL_CYCLES"),
        0xC2 | 0x02 << 8 | USR_OS | 1 << 23 | 16 << 24
    );
    assert_eq!(
        evtsel("GenuineIntel-6-55-4", "MEM_LOAD_L3_MISS_RETIRED.REMOTE_HITM"),
        0xD3 | 0x04 << 8 | USR_OS
    );
    assert_eq!(
        evtsel("GenuineIntel-6-55-7", "MEM_LOAD_RETIRED.LOCAL_PMM"),
        0xD1 | 0x80 << 8 | USR_OS
    );
    // Broadwell-DE's L2 hits use umasks 0xC1/0xD0.
    assert_eq!(
        evtsel("GenuineIntel-6-56-3", "L2_RQSTS.DEMAND_DATA_RD_HIT"),
        0x24 | 0xC1 << 8 | USR_OS
    );
    assert_eq!(evtsel("GenuineIntel-6-56-3", "L2_RQSTS.L2_PF_HIT"), 0x24 | 0xD0 << 8 | USR_OS);
    // Nehalem's INST_RETIRED.ANY_P is umask 0x01, not the architectural 0x00.
    assert_eq!(evtsel("GenuineIntel-6-1A-5", "INST_RETIRED.ANY_P"), 0xC0 | 0x01 << 8 | USR_OS);
    assert_eq!(
        evtsel("GenuineIntel-6-8F-8", "EXE_ACTIVITY.1_PORTS_UTIL"),
        0xA6 | 0x02 << 8 | USR_OS
    );
    assert_eq!(
        evtsel("GenuineIntel-6-AD-1", "ARITH.DIV_ACTIVE"),
        0xB0 | 0x09 << 8 | USR_OS | 1 << 24
    );
    // Names are case-insensitive with FreeBSD's separators folded.
    assert_eq!(evtsel("GenuineIntel-6-5E-3", "inst-retired-any-p"), 0xC0 | USR_OS);
    // The vendor's sample-after value is the default rate.
    let event = machine("GenuineIntel-6-5E-3").lookup("BR_INST_RETIRED.ALL_BRANCHES").unwrap();
    assert_eq!(event.default_rate, 400009);
    // Fixed counters as Intel places them.
    assert!(matches!(
        machine("GenuineIntel-6-5E-3").lookup("CPU_CLK_UNHALTED.REF_TSC").map(|e| e.kind),
        Ok(EventKind::Iaf { index: 2, .. })
    ));
    assert!(matches!(
        machine("GenuineIntel-6-5E-3").lookup("UNHALTED_REFERENCE_CYCLES").map(|e| e.kind),
        Ok(EventKind::Iaf { index: 2, .. })
    ));
    assert!(refusal("GenuineIntel-6-7E-5", "TOPDOWN.SLOTS").contains("fixed counter 3"));
}

#[test]
fn amd_events_encode_to_perf_ctl_with_the_event_select_split() {
    const USR_OS_64: u64 = 3 << 16;
    assert_eq!(perf_ctl("AuthenticAMD-23-1-2", "ex_ret_instr"), 0xC0 | USR_OS_64);
    assert_eq!(
        perf_ctl("AuthenticAMD-25-1-1", "ls_dispatch.ld_dispatch"),
        0x29 | 0x01 << 8 | USR_OS_64
    );
    // A 12-bit event select: bits 7:0 and 35:32.
    assert_eq!(
        perf_ctl("AuthenticAMD-25-11-1", "ic_tag_hit_miss.instruction_cache_hit"),
        0x8E | 0x07 << 8 | USR_OS_64 | 1 << 32
    );
    assert_eq!(perf_ctl("AuthenticAMD-26-2-0", "EX_RET_INSTR,usr"), 0xC0 | 1 << 16);
    assert_eq!(
        perf_ctl("AuthenticAMD-25-11-1", "ex_ret_instr,cmask=2,inv,edge"),
        0xC0 | USR_OS_64 | 2 << 24 | 1 << 23 | 1 << 18
    );
    // L3 events need the L3 PMU.
    assert!(refusal("AuthenticAMD-25-1-1", "l3_comb_clstr_state.request_miss").contains("L3"));
    // Without a K8 class, the host says so.
    let host = HostEvents { classes: vec![Class::Tsc], ..machine("AuthenticAMD-25-1-1") };
    assert!(matches!(
        host.lookup("ex_ret_instr"),
        Err(EventError::Unavailable { class: Class::K8, .. })
    ));
    assert!(matches!(host.encode("ex_ret_instr").map(|e| e.kind), Ok(EventKind::K8 { .. })));
}

#[test]
fn freebsd_intel_aliases_have_freebsds_targets() {
    let skl = "GenuineIntel-6-5E-3";
    // cpu_clk_unhalted.thread_p_any (0x3C/0x00 with AnyThread) counts without AnyThread:
    // the thread's own unhalted cycles.
    for alias in ["unhalted-cycles", "UNHALTED_CORE_CYCLES", "UNHALTED-CORE-CYCLES"] {
        assert_eq!(evtsel(skl, alias), 0x3C | USR_OS, "{alias}");
    }
    assert_eq!(evtsel(skl, "instructions"), 0xC0 | USR_OS);
    for alias in ["LLC_MISSES", "LLC-MISSES"] {
        assert_eq!(evtsel(skl, alias), 0x2E | 0x41 << 8 | USR_OS);
    }
    for alias in ["LLC_REFERENCE", "LLC-REFERENCE"] {
        assert_eq!(evtsel(skl, alias), 0x2E | 0x4F << 8 | USR_OS);
    }
    for alias in ["RESOURCE_STALL", "RESOURCE_STALLS_ANY"] {
        assert_eq!(evtsel(skl, alias), 0xA2 | 0x01 << 8 | USR_OS);
    }
    for alias in ["branches", "BRANCH_INSTRUCTION_RETIRED", "BRANCH-INSTRUCTION-RETIRED"] {
        assert_eq!(evtsel(skl, alias), 0xC4 | USR_OS, "{alias}");
    }
    for alias in ["branch-mispredicts", "BRANCH_MISSES_RETIRED", "BRANCH-MISSES-RETIRED"] {
        assert_eq!(evtsel(skl, alias), 0xC5 | USR_OS, "{alias}");
    }
    assert_eq!(evtsel(skl, "interrupts"), 0xCB | 0x01 << 8 | USR_OS);
    // ic-misses is FRONTEND_RETIRED.L1I_MISS, which needs MSR_PEBS_FRONTEND.
    assert!(refusal(skl, "ic-misses").contains("3F7h"));
    // LLC_MISS_RHITM is mem_load_l3_miss_retired.remote_hitm (Skylake-SP has it).
    for alias in ["LLC_MISS_RHITM", "LLC-MISS-RHITM"] {
        assert_eq!(evtsel("GenuineIntel-6-55-4", alias), 0xD3 | 0x04 << 8 | USR_OS);
    }
    // cycles is FreeBSD's TSC.
    assert_eq!(machine(skl).lookup("cycles").map(|e| e.kind), Ok(EventKind::Tsc));
}

#[test]
fn freebsd_amd_aliases_have_freebsds_targets() {
    const USR_OS_64: u64 = 3 << 16;
    let zen3 = "AuthenticAMD-25-1-1";
    for alias in ["unhalted-cycles", "UNHALTED_CORE_CYCLES", "UNHALTED-CORE-CYCLES"] {
        assert_eq!(perf_ctl(zen3, alias), 0x76 | USR_OS_64, "{alias}");
    }
    assert_eq!(perf_ctl(zen3, "instructions"), 0xC0 | USR_OS_64);
    for alias in ["branches", "BRANCH_INSTRUCTION_RETIRED", "BRANCH-INSTRUCTION-RETIRED"] {
        assert_eq!(perf_ctl(zen3, alias), 0xC2 | USR_OS_64, "{alias}");
    }
    for alias in ["branch-mispredicts", "BRANCH_MISSES_RETIRED", "BRANCH-MISSES-RETIRED"] {
        assert_eq!(perf_ctl(zen3, alias), 0xC3 | USR_OS_64, "{alias}");
    }
    assert_eq!(perf_ctl(zen3, "interrupts"), 0x2C | USR_OS_64);
    // The LLC aliases are L3 PMU events (FreeBSD's K8 L3 sub-class).
    for alias in ["LLC_MISSES", "LLC-MISSES", "LLC_REFERENCE", "LLC-REFERENCE"] {
        assert!(refusal(zen3, alias).contains("L3 cache PMU"), "{alias}");
    }
    // Zen 1 lacks ls_int_taken: FreeBSD's lookup of `interrupts` fails there.
    assert!(machine("AuthenticAMD-23-1-2").lookup("interrupts").is_err());
    assert_eq!(Vendor::Amd.id(), "AuthenticAMD");
}

#[test]
fn pmc_cpuid_strings_parse_as_freebsd_writes_them() {
    let cpu = CpuId::parse("GenuineIntel-6-8F-8").unwrap();
    assert_eq!(
        (cpu.vendor, cpu.family, cpu.model, cpu.stepping),
        (Vendor::Intel, 6, 0x8F, Some(8))
    );
    assert_eq!(cpu.to_string(), "GenuineIntel-6-8F-8");
    let cpu = CpuId::parse("AuthenticAMD-25-11-1").unwrap();
    assert_eq!((cpu.vendor, cpu.family, cpu.model, cpu.stepping), (Vendor::Amd, 25, 0x11, Some(1)));
    assert_eq!(CpuId::parse("GenuineIntel-6-5e").unwrap().stepping, None);
    for bad in [
        "",
        "GenuineIntel",
        "GenuineIntel-6",
        "GenuineIntel-6-55-4-1",
        "CyrixInstead-6-55-4",
        "GenuineIntel-six-55-4",
        "GenuineIntel-6-5G-4",
        "GenuineIntel-6-155-4",
        "GenuineIntel-6-55-10",
        "GenuineIntel-6--4",
    ] {
        let error = CpuId::parse(bad).expect_err(bad).to_string();
        assert!(error.contains("GenuineIntel-6-8F-8") && error.contains(bad), "{bad}: {error}");
    }
}

#[test]
fn pebs_msr_qualifiers_are_refused_with_the_msr_they_need() {
    for (spec, msr) in [
        ("MEM_TRANS_RETIRED.LOAD_LATENCY_GT_4,ldlat=8", "3F6h"),
        ("FRONTEND_RETIRED.DSB_MISS,frontend=0x11", "3F7h"),
    ] {
        match machine("GenuineIntel-6-5E-3").lookup(spec) {
            Err(EventError::BadQualifier { detail, .. }) => {
                assert!(
                    detail.contains(msr) && detail.contains("only with PEBS"),
                    "{spec}: {detail}"
                )
            }
            other => panic!("{spec}: {other:?}"),
        }
    }
}

/// The (IA32_PERFEVTSELx, MSR_OFFCORE_RSP value) `spec` programs on `host`.
fn offcore(host: &HostEvents, spec: &str) -> (u32, Option<u64>) {
    match host.lookup(spec).map(|e| e.kind) {
        Ok(EventKind::Iap { evtsel, offcore_rsp, .. }) => (evtsel, offcore_rsp),
        other => panic!("{spec}: expected IAP, got {other:?}"),
    }
}

#[test]
fn offcore_events_encode_with_the_jsons_msr_values() {
    // Written by hand from the models' JSON files (EventCode, UMask, MSRValue).
    let skylake = machine("GenuineIntel-6-5E-3");
    assert_eq!(
        offcore(&skylake, "OFFCORE_RESPONSE.DEMAND_RFO.L3_MISS.ANY_SNOOP"),
        (0xB7 | 0x01 << 8 | USR_OS, Some(0x3F_FC40_0002))
    );
    // Sapphire Rapids: OCR events are 0x2A (or 0x2B), umask 0x01.
    let spr = machine("GenuineIntel-6-8F-8");
    assert_eq!(
        offcore(&spr, "OCR.DEMAND_RFO.L3_MISS"),
        (0x2A | 0x01 << 8 | USR_OS, Some(0x3F_3FC0_0002))
    );
    assert_eq!(offcore(&spr, "OCR.DEMAND_DATA_RD.ANY_RESPONSE"), (0x012A | USR_OS, Some(0x10001)));
    // Alder Lake's E-core: 0xB7, umask 0x01 (or 0x02 for MSR_OFFCORE_RSP_1).
    let gracemont = HostEvents { core_type: Some(0x20), ..machine("GenuineIntel-6-97-2") };
    assert_eq!(
        offcore(&gracemont, "OCR.DEMAND_DATA_RD.ANY_RESPONSE"),
        (0x01B7 | USR_OS, Some(0x10001))
    );
    // Other events read no response MSR.
    assert_eq!(offcore(&spr, "INST_RETIRED.ANY_P"), (0xC0 | USR_OS, None));
}

/// The (IA32_PERFEVTSELx bits 31:0, UMASK2) `spec` programs on `cpuid`.
fn with_umask2(cpuid: &str, spec: &str) -> (u32, u8) {
    match machine(cpuid).lookup(spec).map(|e| e.kind) {
        Ok(EventKind::Iap { evtsel, umask2, .. }) => (evtsel, umask2),
        other => panic!("{cpuid} {spec}: expected IAP, got {other:?}"),
    }
}

#[test]
fn extended_unit_masks_encode_to_umask2() {
    // Written by hand from the JSON files (EventCode, UMask, UMaskExt).
    let arrow_lake = "GenuineIntel-6-C6-2";
    assert_eq!(with_umask2(arrow_lake, "ITLB_MISSES.STLB_HIT"), (0x11 | 0x20 << 8 | USR_OS, 0x01));
    assert_eq!(
        with_umask2(arrow_lake, "DTLB_LOAD_MISSES.STLB_HIT"),
        (0x12 | 0x20 << 8 | USR_OS, 0x03)
    );
    let clearwater_forest = "GenuineIntel-6-DD-0";
    assert_eq!(
        with_umask2(clearwater_forest, "L2_REQUEST.MISS"),
        (0x24 | 0x7F << 8 | USR_OS, 0x01)
    );
    assert_eq!(
        with_umask2(clearwater_forest, "MACHINE_CLEARS.MEMORY_ORDERING_FAST"),
        (0xC3 | 0x02 << 8 | USR_OS, 0x80)
    );
    // umask2= replaces it, on table events and raw encodings.
    assert_eq!(with_umask2(arrow_lake, "ITLB_MISSES.STLB_HIT,umask2=0"), (0x2011 | USR_OS, 0));
    assert_eq!(with_umask2(arrow_lake, "event=0x11,umask=0x20,umask2=0x3"), (0x2011 | USR_OS, 3));
    // Events without one have 0.
    assert_eq!(with_umask2("GenuineIntel-6-5E-3", "INST_RETIRED.ANY_P"), (0xC0 | USR_OS, 0));
}

#[test]
fn reference_cycles_are_fixed_counter_2_on_every_intel_model() {
    // The programmable encoding (0x3C/0x01) counts at the bus clock; fixed counter 2 at the
    // TSC's rate, which is what the names promise.
    let mut models = 0;
    for model in 0..=0xFFu32 {
        let cpuid = format!("GenuineIntel-6-{model:02X}-0");
        if CpuId::parse(&cpuid).map_or(true, |cpu| cpu.tables().is_empty()) {
            continue;
        }
        for core_type in [None, Some(0x20), Some(0x40)] {
            let host = HostEvents { core_type, ..machine(&cpuid) };
            for name in ["UNHALTED_REFERENCE_CYCLES", "unhalted-reference-cycles"] {
                let kind = host.lookup(name).map(|e| e.kind);
                assert!(matches!(kind, Ok(EventKind::Iaf { index: 2, .. })), "{cpuid} {name}");
            }
        }
        models += 1;
    }
    assert!(models > 60, "{models} models");
}

#[test]
fn offcore_events_have_an_encoding_for_the_other_msr() {
    let alternate = |host: &HostEvents, spec: &str| {
        let event = host.lookup(spec).unwrap();
        host.offcore_alternate(&event)
    };
    // Core: 0xB7 <-> 0xBB; Golden Cove: 0x2A <-> 0x2B; Atom: umask 0x01 <-> 0x02.
    let skylake = machine("GenuineIntel-6-5E-3");
    let demand = "OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE";
    assert_eq!(alternate(&skylake, demand), Some(0xBB | 0x01 << 8 | USR_OS));
    assert_eq!(
        alternate(&skylake, "OFFCORE_RESPONSE,offcore_rsp=0x10002,usr"),
        Some(0x01BB | 1 << 16)
    );
    let spr = machine("GenuineIntel-6-8F-8");
    assert_eq!(alternate(&spr, "OCR.DEMAND_RFO.L3_MISS"), Some(0x2B | 0x01 << 8 | USR_OS));
    let gracemont = HostEvents { core_type: Some(0x20), ..machine("GenuineIntel-6-97-2") };
    assert_eq!(
        alternate(&gracemont, "OCR.DEMAND_DATA_RD.ANY_RESPONSE"),
        Some(0xB7 | 0x02 << 8 | USR_OS)
    );
    // Nehalem's events have MSR_OFFCORE_RSP_0 only; a umask of the user's is neither encoding;
    // other events have none.
    let nehalem = machine("GenuineIntel-6-1A-5");
    assert_eq!(alternate(&nehalem, "OFFCORE_RESPONSE_0.ANY_DATA.ANY_CACHE_DRAM"), None);
    assert_eq!(alternate(&skylake, &format!("{demand},umask=0x03")), None);
    assert_eq!(alternate(&skylake, "INST_RETIRED.ANY_P"), None);
}

#[test]
fn topdown_slots_is_fixed_counter_3_where_the_host_has_it() {
    for cpuid in ["GenuineIntel-6-7E-5", "GenuineIntel-6-8F-8"] {
        let with_four = HostEvents { fixed_counters: Some(4), ..machine(cpuid) };
        let event = with_four.lookup("TOPDOWN.SLOTS").unwrap();
        assert_eq!(event.class, Class::Iaf, "{cpuid}");
        assert!(matches!(event.kind, EventKind::Iaf { index: 3, event: 0, .. }), "{cpuid}");
        assert!(with_four.list().contains(&(Class::Iaf, "TOPDOWN.SLOTS".to_string())));
        // A PMU with fixed counters 0-2 only (perfmon v4, or a hybrid part's common PMU).
        let with_three = HostEvents { fixed_counters: Some(3), ..machine(cpuid) };
        match with_three.lookup("TOPDOWN.SLOTS") {
            Err(EventError::Unavailable { reason, class, .. }) => {
                assert_eq!(class, Class::Iaf);
                assert!(reason.contains("fixed counter 3") && reason.contains("does not have"));
            }
            other => panic!("{cpuid}: {other:?}"),
        }
        assert!(!with_three.list().contains(&(Class::Iaf, "TOPDOWN.SLOTS".to_string())));
    }
}

#[test]
fn every_offcore_value_in_the_tables_is_one_the_driver_accepts() {
    use hwpmc::arch::x86::cpuid::CpuSignature;
    use hwpmc::arch::x86::intel::offcore::OffcoreLayout;
    let mut checked = 0;
    for model in 0..=0xFFu32 {
        let Ok(cpu) = CpuId::parse(&format!("GenuineIntel-6-{model:02X}-0")) else { continue };
        let signature = CpuSignature { vendor: *b"GenuineIntel", family: 6, model, stepping: 0 };
        for table in cpu.tables() {
            let core_type = table.hybrid.map_or(0, |h| u32::from(h.core_type));
            for event in table.table.events() {
                let Some(msr) = event.extra_msr.filter(|m| m.index == 0x1A6 || m.index == 0x1A7)
                else {
                    continue;
                };
                let name = (table.table.name(), event.name);
                let layout = OffcoreLayout::of(&signature, core_type)
                    .unwrap_or_else(|| panic!("{model:#x} {name:?}: no offcore layout"));
                let first = usize::from(msr.index == 0x1A7);
                let msrs = first..first + usize::from(msr.count.max(1));
                for i in msrs {
                    let valid = layout.valid[i];
                    assert_eq!(msr.value & !valid, 0, "{model:#x} {name:?} MSR {i}: {valid:#x}");
                }
                assert_eq!(
                    layout.events[first],
                    (event_code(event, first), event_umask(event, first))
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 5_000, "{checked} offcore events checked");
}

/// The event select of `event` for offcore MSR `i` (its second code or umask for RSP_1).
fn event_code(event: &pmc::events::table::VendorEvent, i: usize) -> u8 {
    let code = if i == 1 { event.second_code.unwrap_or(event.code) } else { event.code };
    code as u8
}

/// The unit mask of `event` for offcore MSR `i`.
fn event_umask(event: &pmc::events::table::VendorEvent, i: usize) -> u8 {
    let umask = if i == 1 { event.second_umask.unwrap_or(event.umask) } else { event.umask };
    umask as u8
}

/// `"0,1,2,3"` as a counter mask.
fn counter_mask(list: &str) -> u32 {
    list.split(',').map(|i| 1u32 << i.parse::<u32>().unwrap()).sum()
}

/// Table, event name, event code, umask, cmask, inv, edge, counters, sample-after value.
type IntelFacts = (&'static str, &'static str, u16, u16, u8, bool, bool, &'static str, u64);

#[test]
fn every_intel_table_has_its_json_facts() {
    use pmc::events::table::Counters;
    // One event per table, read by hand from the model's JSON: table, name, event code, umask,
    // cmask, inv, edge, counters, sample-after value.
    let checks: &[IntelFacts] = &[
        ("nehalemex", "ARITH.DIV", 0x14, 0x01, 1, true, true, "0,1,2,3", 2000000),
        ("nehalemep", "ARITH.DIV", 0x14, 0x01, 1, true, true, "0,1,2,3", 2000000),
        ("westmereex", "ARITH.DIV", 0x14, 0x01, 1, true, true, "0,1,2,3", 2000000),
        ("westmereep-sp", "ARITH.DIV", 0x14, 0x01, 1, true, true, "0,1,2,3", 2000000),
        ("westmereep-dp", "ARITH.DIV", 0x14, 0x01, 1, true, true, "0,1,2,3", 2000000),
        ("silvermont", "BR_INST_RETIRED.IND_CALL", 0xC4, 0xFB, 0, false, false, "0,1", 200003),
        ("goldmont", "PAGE_WALKS.D_SIDE_CYCLES", 0x05, 0x01, 0, false, false, "0,1,2,3", 200003),
        ("bonnell", "UOPS.MS_CYCLES", 0xA9, 0x01, 1, false, false, "0,1", 2000000),
        (
            "sandybridge",
            "INT_MISC.RECOVERY_CYCLES",
            0x0D,
            0x03,
            1,
            false,
            false,
            "0,1,2,3",
            2000003,
        ),
        ("jaketown", "LSD.CYCLES_ACTIVE", 0xA8, 0x01, 1, false, false, "0,1,2,3", 2000003),
        ("ivybridge", "INT_MISC.RECOVERY_CYCLES", 0x0D, 0x03, 1, false, false, "0,1,2,3", 2000003),
        ("ivytown", "INT_MISC.RECOVERY_CYCLES", 0x0D, 0x03, 1, false, false, "0,1,2,3", 2000003),
        ("haswell", "INT_MISC.RECOVERY_CYCLES", 0x0D, 0x03, 1, false, false, "0,1,2,3", 2000003),
        ("haswellx", "INT_MISC.RECOVERY_CYCLES", 0x0D, 0x03, 1, false, false, "0,1,2,3", 2000003),
        ("broadwell", "INT_MISC.RECOVERY_CYCLES", 0x0D, 0x03, 1, false, false, "0,1,2,3", 2000003),
        ("broadwellx", "INT_MISC.RECOVERY_CYCLES", 0x0D, 0x03, 1, false, false, "0,1,2,3", 2000003),
        (
            "broadwellde",
            "INT_MISC.RECOVERY_CYCLES",
            0x0D,
            0x03,
            1,
            false,
            false,
            "0,1,2,3",
            2000003,
        ),
        ("skylake", "DTLB_LOAD_MISSES.WALK_ACTIVE", 0x08, 0x10, 1, false, false, "0,1,2,3", 100003),
        ("knightslanding", "RECYCLEQ.STA_FULL", 0x03, 0x20, 0, false, false, "0,1", 200003),
        (
            "skylakex",
            "DTLB_LOAD_MISSES.WALK_ACTIVE",
            0x08,
            0x10,
            1,
            false,
            false,
            "0,1,2,3",
            100003,
        ),
        (
            "cascadelakex",
            "DTLB_LOAD_MISSES.WALK_ACTIVE",
            0x08,
            0x10,
            1,
            false,
            false,
            "0,1,2,3",
            100003,
        ),
        (
            "goldmontplus",
            "DTLB_LOAD_MISSES.WALK_COMPLETED_4K",
            0x08,
            0x02,
            0,
            false,
            false,
            "0,1,2,3",
            200003,
        ),
        ("icelake", "DTLB_LOAD_MISSES.WALK_ACTIVE", 0x08, 0x10, 1, false, false, "0,1,2,3", 100003),
        (
            "rocketlake",
            "DTLB_LOAD_MISSES.WALK_ACTIVE",
            0x08,
            0x10,
            1,
            false,
            false,
            "0,1,2,3",
            100003,
        ),
        (
            "snowridgex",
            "DTLB_LOAD_MISSES.WALK_COMPLETED_4K",
            0x08,
            0x02,
            0,
            false,
            false,
            "0,1,2,3",
            200003,
        ),
        (
            "tigerlake",
            "DTLB_LOAD_MISSES.WALK_ACTIVE",
            0x08,
            0x10,
            1,
            false,
            false,
            "0,1,2,3",
            100003,
        ),
        (
            "sapphirerapids",
            "ITLB_MISSES.WALK_ACTIVE",
            0x11,
            0x10,
            1,
            false,
            false,
            "0,1,2,3",
            100003,
        ),
        (
            "emeraldrapids",
            "ITLB_MISSES.WALK_ACTIVE",
            0x11,
            0x10,
            1,
            false,
            false,
            "0,1,2,3",
            100003,
        ),
        (
            "icelakex",
            "DTLB_LOAD_MISSES.WALK_ACTIVE",
            0x08,
            0x10,
            1,
            false,
            false,
            "0,1,2,3",
            100003,
        ),
        (
            "elkhartlake",
            "DTLB_LOAD_MISSES.WALK_COMPLETED_4K",
            0x08,
            0x02,
            0,
            false,
            false,
            "0,1,2,3",
            200003,
        ),
        (
            "alderlake_gracemont",
            "ARITH.IDIV_ACTIVE",
            0xCD,
            0x01,
            1,
            false,
            false,
            "0,1,2,3,4,5",
            1000003,
        ),
        (
            "alderlake_goldencove",
            "ITLB_MISSES.WALK_ACTIVE",
            0x11,
            0x10,
            1,
            false,
            false,
            "0,1,2,3",
            100003,
        ),
        (
            "meteorlake_crestmont",
            "ARITH.IDIV_ACTIVE",
            0xCD,
            0x01,
            1,
            false,
            false,
            "0,1,2,3,4,5,6,7",
            1000003,
        ),
        (
            "meteorlake_redwoodcove",
            "ITLB_MISSES.WALK_ACTIVE",
            0x11,
            0x10,
            1,
            false,
            false,
            "0,1,2,3",
            100003,
        ),
        (
            "graniterapids",
            "ITLB_MISSES.WALK_ACTIVE",
            0x11,
            0x10,
            1,
            false,
            false,
            "0,1,2,3",
            100003,
        ),
        (
            "sierraforest",
            "ARITH.IDIV_ACTIVE",
            0xCD,
            0x01,
            1,
            false,
            false,
            "0,1,2,3,4,5,6,7",
            1000003,
        ),
        (
            "grandridge",
            "ARITH.IDIV_ACTIVE",
            0xCD,
            0x01,
            1,
            false,
            false,
            "0,1,2,3,4,5,6,7",
            1000003,
        ),
        (
            "lunarlake_skymont",
            "ARITH.IDIV_ACTIVE",
            0xCD,
            0x01,
            1,
            false,
            false,
            "0,1,2,3,4,5,6,7",
            1000003,
        ),
        (
            "lunarlake_lioncove",
            "ITLB_MISSES.WALK_ACTIVE",
            0x11,
            0x10,
            1,
            false,
            false,
            "0,1,2,3,4,5,6,7,8,9",
            100003,
        ),
        (
            "arrowlake_skymont",
            "ARITH.IDIV_ACTIVE",
            0xCD,
            0x01,
            1,
            false,
            false,
            "0,1,2,3,4,5,6,7",
            1000003,
        ),
        (
            "arrowlake_crestmont",
            "ARITH.FPDIV_ACTIVE",
            0xCD,
            0x02,
            1,
            false,
            false,
            "0,1,2,3,4,5,6,7",
            1000003,
        ),
        (
            "arrowlake_lioncove",
            "ITLB_MISSES.WALK_ACTIVE",
            0x11,
            0x10,
            1,
            false,
            false,
            "0,1,2,3,4,5,6,7,8,9",
            100003,
        ),
        (
            "pantherlake_darkmont",
            "ARITH.IDIV_ACTIVE",
            0xCD,
            0x01,
            1,
            false,
            false,
            "0,1,2,3,4,5,6,7",
            1000003,
        ),
        (
            "pantherlake_cougarcove",
            "ITLB_MISSES.WALK_ACTIVE",
            0x11,
            0x10,
            1,
            false,
            false,
            "0,1,2,3,4,5,6,7,8,9",
            100003,
        ),
        (
            "clearwaterforest",
            "ARITH.IDIV_ACTIVE",
            0xCD,
            0x01,
            1,
            false,
            false,
            "0,1,2,3,4,5,6,7",
            1000003,
        ),
        (
            "novalake_arcticwolf",
            "ARITH.FPDIV_ACTIVE",
            0xCD,
            0x02,
            1,
            false,
            false,
            "0,1,2,3,4,5,6,7",
            1000003,
        ),
        (
            "novalake_coyotecove",
            "ITLB_MISSES.WALK_ACTIVE",
            0x11,
            0x10,
            1,
            false,
            false,
            "0,1,2,3,4,5,6,7",
            100003,
        ),
    ];
    for &(table, name, code, umask, cmask, invert, edge, counters, sample_after) in checks {
        let event = Table::by_table_name(table)
            .unwrap_or_else(|| panic!("no table {table}"))
            .find(name)
            .unwrap_or_else(|| panic!("{table}: no {name}"));
        assert_eq!(
            (event.code, event.umask, event.cmask, event.invert, event.edge),
            (code, umask, cmask, invert, edge),
            "{table} {name}"
        );
        assert_eq!(event.counters, Counters::General(counter_mask(counters)), "{table} {name}");
        assert_eq!(event.sample_after, sample_after, "{table} {name}");
    }
    let intel_tables = Table::names().filter(|n| !n.starts_with("amdzen")).count();
    assert_eq!(checks.len(), intel_tables, "one check per Intel table");
}

#[test]
fn every_amd_table_has_its_json_facts() {
    use pmc::events::table::Unit;
    // Read by hand from Linux perf's amdzenN files: table, name, event code, umask, unit.
    let checks: &[(&str, &str, u16, u16, Unit)] = &[
        ("amdzen1", "ex_ret_instr", 0xC0, 0x00, Unit::Core),
        ("amdzen2", "ic_oc_mode_switch.oc_ic_mode_switch", 0x28A, 0x02, Unit::Core),
        ("amdzen3", "ls_dispatch.ld_dispatch", 0x29, 0x01, Unit::Core),
        ("amdzen4", "ic_tag_hit_miss.instruction_cache_hit", 0x18E, 0x07, Unit::Core),
        ("amdzen5", "l2_fill_rsp_src.local_ccx", 0x165, 0x02, Unit::Core),
        ("amdzen5", "local_or_remote_socket_read_data_beats_dram_0", 0x1F, 0xFFE, Unit::DataFabric),
        ("amdzen6", "ic_fetch_ibs_events.tagged", 0x188, 0x02, Unit::Core),
        ("amdzen3", "l3_comb_clstr_state.request_miss", 0x06, 0x01, Unit::L3),
    ];
    for &(table, name, code, umask, unit) in checks {
        let event =
            Table::by_table_name(table).unwrap().find(name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!((event.code, event.umask, event.unit), (code, umask, unit), "{table} {name}");
    }
}

/// USR and OS in a PERF_CTL image.
const AMD_USR_OS: u64 = 3 << 16;

#[test]
fn raw_specs_on_amd_are_perf_ctl_images_with_twelve_bit_event_selects() {
    let zen4 = "AuthenticAMD-25-11-1";
    assert_eq!(perf_ctl(zen4, "event=0xc0,umask=0x0,usr"), 0xC0 | 1 << 16);
    assert_eq!(
        perf_ctl(zen4, "event=0x1c7,umask=0x3f,os,edge,cmask=3"),
        0xC7 | 1 << 32 | 0x3F << 8 | 1 << 17 | 1 << 18 | 3 << 24
    );
    assert_eq!(perf_ctl(zen4, "event=0xfff"), 0xFF | 0xF << 32 | AMD_USR_OS);
    // 12 bits at most; Intel's event select has 8.
    assert!(matches!(machine(zen4).lookup("event=0x1000"), Err(EventError::BadQualifier { .. })));
    let skl = machine("GenuineIntel-6-5E-3");
    assert!(matches!(skl.lookup("event=0x1c7"), Err(EventError::BadQualifier { .. })));
    assert_eq!(evtsel("GenuineIntel-6-5E-3", "event=0xc0"), 0xC0 | USR_OS);
}

#[test]
fn freebsd_s_static_aliases_count_amd_events_on_an_amd_cpu_without_a_table() {
    // Family 10h has no event table: the aliases fall back to the static ones, which count
    // AMD's core events on a host that offers K8 alone.
    let k10 =
        HostEvents { classes: vec![Class::K8, Class::Tsc], ..machine("AuthenticAMD-16-04-2") };
    let ctl = |spec: &str| match k10.lookup(spec).map(|e| e.kind) {
        Ok(EventKind::K8 { perf_ctl }) => perf_ctl,
        other => panic!("{spec}: expected K8, got {other:?}"),
    };
    assert_eq!(ctl("instructions"), 0x0C0 | AMD_USR_OS);
    assert_eq!(ctl("unhalted-cycles,usr"), 0x076 | 1 << 16);
    assert_eq!(ctl("branches"), 0x0C2 | AMD_USR_OS);
    assert_eq!(ctl("branch-mispredicts"), 0x0C3 | AMD_USR_OS);
    // No AMD core event counts reference cycles.
    assert!(k10.lookup("unhalted-reference-cycles").is_err());
}
