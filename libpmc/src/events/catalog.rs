//! The static part of the catalog: FreeBSD's aliases, the fixed-counter names, the architectural
//! events of CPUID leaf 0xA and the software event names.

use super::encoding::{AmdCore, Programmable};

/// A FreeBSD alias (`pmc_alias` tables of libpmc for Intel CPUs, with and without IAF): the fixed
/// counter it prefers, if any, and the programmable encoding used otherwise.
#[derive(Debug, Clone, Copy)]
pub(super) struct Alias {
    /// The alias, as FreeBSD spells it.
    pub(super) name: &'static str,
    /// The fixed counter used when the host offers class IAF.
    pub(super) fixed: Option<u8>,
    /// The programmable-counter encoding.
    pub(super) programmable: Programmable,
}

/// The aliases. Architectural event bits are those of Intel SDM Vol. 3B, Table 20-1 ("UnHalted
/// Core Cycles" = bit 0 … "Branch Misses Retired" = bit 6).
pub(super) const ALIASES: &[Alias] = &[
    Alias {
        name: "instructions",
        fixed: Some(0),
        programmable: Programmable::architectural(0xC0, 0x00, 1),
    },
    Alias {
        name: "unhalted-cycles",
        fixed: Some(1),
        programmable: Programmable::architectural(0x3C, 0x00, 0),
    },
    Alias {
        name: "unhalted-reference-cycles",
        fixed: Some(2),
        programmable: Programmable::architectural(0x3C, 0x01, 2),
    },
    Alias {
        name: "branches",
        fixed: None,
        programmable: Programmable::architectural(0xC4, 0x00, 5),
    },
    Alias {
        name: "branch-mispredicts",
        fixed: None,
        programmable: Programmable::architectural(0xC5, 0x00, 6),
    },
    Alias {
        name: "cache-references",
        fixed: None,
        programmable: Programmable::architectural(0x2E, 0x4F, 3),
    },
    Alias {
        name: "cache-misses",
        fixed: None,
        programmable: Programmable::architectural(0x2E, 0x41, 4),
    },
];

/// The AMD core event that counts what the architectural `programmable` event counts (the
/// events FreeBSD's AMD alias table names: `ex_ret_instr` 0x0C0, `ls_not_halted_cyc` 0x076,
/// `ex_ret_brn` 0x0C2, `ex_ret_brn_misp` 0x0C3), if AMD's core counters count it.
pub(super) fn amd_equivalent(programmable: &Programmable) -> Option<AmdCore> {
    let code = match (programmable.event, programmable.umask) {
        (0xC0, 0x00) => 0x0C0,
        (0x3C, 0x00) => 0x076,
        (0xC4, 0x00) => 0x0C2,
        (0xC5, 0x00) => 0x0C3,
        _ => return None,
    };
    Some(AmdCore { code, umask: 0 })
}

/// The names of the fixed counters: FreeBSD's IAF names and Intel's (the JSON tables') names.
pub(super) const FIXED_NAMES: &[(&str, u8)] = &[
    ("INSTR_RETIRED.ANY", 0),
    ("INST_RETIRED.ANY", 0),
    ("CPU_CLK_UNHALTED.CORE", 1),
    ("CPU_CLK_UNHALTED.THREAD", 1),
    ("CPU_CLK_UNHALTED.REF", 2),
    ("CPU_CLK_UNHALTED.REF_TSC", 2),
];

/// The programmable event that counts what fixed counter `index` counts, for error hints.
pub(super) const fn fixed_equivalent(index: u8) -> &'static str {
    match index {
        0 => "INST_RETIRED.ANY_P",
        1 => "UNHALTED_CORE_CYCLES",
        _ => "UNHALTED_REFERENCE_CYCLES",
    }
}

/// The architectural events of CPUID leaf 0xA (Intel SDM Vol. 3B, Table 20-1), named as Intel and
/// FreeBSD print them, and `INST_RETIRED.ANY_P` (the programmable form of instructions retired).
pub(super) const ARCHITECTURAL: &[(&str, Programmable)] = &[
    ("UNHALTED_CORE_CYCLES", Programmable::architectural(0x3C, 0x00, 0)),
    ("INSTRUCTION_RETIRED", Programmable::architectural(0xC0, 0x00, 1)),
    ("UNHALTED_REFERENCE_CYCLES", Programmable::architectural(0x3C, 0x01, 2)),
    ("LLC_REFERENCE", Programmable::architectural(0x2E, 0x4F, 3)),
    ("LLC_MISSES", Programmable::architectural(0x2E, 0x41, 4)),
    ("BRANCH_INSTRUCTION_RETIRED", Programmable::architectural(0xC4, 0x00, 5)),
    ("BRANCH_MISSES_RETIRED", Programmable::architectural(0xC5, 0x00, 6)),
    ("TOPDOWN.SLOTS", Programmable::architectural(0xA4, 0x01, 7)),
    ("INST_RETIRED.ANY_P", Programmable::architectural(0xC0, 0x00, 1)),
];

/// FreeBSD's software events, each with the Linux perf software event that stands in for it on a
/// host that lacks the FreeBSD one.
pub(super) const FREEBSD_SOFT: &[(&str, Option<&str>)] = &[
    ("CLOCK.HARD", Some("cpu-clock")),
    ("CLOCK.STAT", Some("cpu-clock")),
    ("CLOCK.PROF", Some("cpu-clock")),
    ("PAGE_FAULT.ALL", Some("page-faults")),
    ("PAGE_FAULT.READ", None),
    ("PAGE_FAULT.WRITE", None),
];

/// Linux perf's software events libpmc knows by name.
pub(super) const PERF_SOFT: &[&str] = &[
    "task-clock",
    "cpu-clock",
    "page-faults",
    "context-switches",
    "cpu-migrations",
    "minor-faults",
    "major-faults",
];
