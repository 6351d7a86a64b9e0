//! The architectural performance events a [`Work`](crate::work::Work) is counted in, and the
//! event selects that count them: Intel's architectural encodings and the AMD core-counter
//! events of the same names.
//!
//! A leaf of the crate (it names no other module): the CPU models, the PMU registers and the
//! workloads all speak of these events.

/// An Intel architectural performance event (SDM Vol. 3B §21.2.1.2, "Pre-defined Architectural
/// Performance Events", Table 21-1): its bit in CPUID leaf 0xA EBX and its event-select / unit-mask
/// encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ArchEvent {
    /// UnHalted Core Cycles, 0x3C / 0x00 (EBX bit 0).
    CoreCycles,
    /// Instructions Retired, 0xC0 / 0x00 (EBX bit 1).
    Instructions,
    /// UnHalted Reference Cycles, 0x3C / 0x01 (EBX bit 2).
    RefCycles,
    /// LLC References, 0x2E / 0x4F (EBX bit 3).
    LlcReferences,
    /// LLC Misses, 0x2E / 0x41 (EBX bit 4).
    LlcMisses,
    /// Branch Instructions Retired, 0xC4 / 0x00 (EBX bit 5).
    Branches,
    /// Branch Misses Retired, 0xC5 / 0x00 (EBX bit 6).
    BranchMispredicts,
    /// Topdown Slots, 0xA4 / 0x01 (EBX bit 7; perfmon v5 processors).
    TopdownSlots,
}

impl ArchEvent {
    /// Every architectural event this simulator models, in EBX bit order.
    pub const ALL: [ArchEvent; 8] = [
        ArchEvent::CoreCycles,
        ArchEvent::Instructions,
        ArchEvent::RefCycles,
        ArchEvent::LlcReferences,
        ArchEvent::LlcMisses,
        ArchEvent::Branches,
        ArchEvent::BranchMispredicts,
        ArchEvent::TopdownSlots,
    ];

    /// The event's bit in CPUID leaf 0xA EBX (1 = not available).
    pub const fn index(self) -> u8 {
        self as u8
    }

    /// The event-select code (IA32_PERFEVTSELx bits 7:0).
    pub const fn event_select(self) -> u8 {
        match self {
            ArchEvent::CoreCycles | ArchEvent::RefCycles => 0x3C,
            ArchEvent::Instructions => 0xC0,
            ArchEvent::LlcReferences | ArchEvent::LlcMisses => 0x2E,
            ArchEvent::Branches => 0xC4,
            ArchEvent::BranchMispredicts => 0xC5,
            ArchEvent::TopdownSlots => 0xA4,
        }
    }

    /// The unit mask (IA32_PERFEVTSELx bits 15:8).
    pub const fn umask(self) -> u8 {
        match self {
            ArchEvent::RefCycles | ArchEvent::TopdownSlots => 0x01,
            ArchEvent::LlcReferences => 0x4F,
            ArchEvent::LlcMisses => 0x41,
            _ => 0x00,
        }
    }

    /// The architectural event with this encoding, if any.
    pub fn from_encoding(event_select: u8, umask: u8) -> Option<ArchEvent> {
        ArchEvent::ALL.into_iter().find(|e| e.event_select() == event_select && e.umask() == umask)
    }
}

/// The AMD event select (unit mask 0) that counts architectural event `event`, if an AMD CPU's
/// core counters count it.
pub const fn amd_event(event: ArchEvent) -> Option<u16> {
    match event {
        ArchEvent::CoreCycles => Some(0x076),
        ArchEvent::Instructions => Some(0x0C0),
        ArchEvent::Branches => Some(0x0C2),
        ArchEvent::BranchMispredicts => Some(0x0C3),
        _ => None,
    }
}

/// The architectural event AMD event select `event` with unit mask `umask` counts, if any.
pub fn arch_event_of(event: u16, umask: u8) -> Option<ArchEvent> {
    if umask != 0 {
        return None;
    }
    ArchEvent::ALL.into_iter().find(|&e| amd_event(e) == Some(event))
}
