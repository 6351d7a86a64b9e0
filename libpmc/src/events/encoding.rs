//! What an event is programmed as: the parts of an Intel IA32_PERFEVTSELx (with its
//! offcore-response value) or of an AMD PERF_CTL that an event defines. A leaf: the static
//! catalog ([`super::catalog`]) and the vendor tables' events ([`super::vendor`]) both resolve to
//! these.

/// A general-purpose counter encoding (the parts of IA32_PERFEVTSELx an event defines), with the
/// CPUID 0xA EBX bit that says whether the CPU supports it, if it is an architectural event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Programmable {
    /// Event select, IA32_PERFEVTSELx bits 7:0.
    pub(super) event: u8,
    /// Unit mask, bits 15:8.
    pub(super) umask: u8,
    /// Counter mask, bits 31:24.
    pub(super) cmask: u8,
    /// Invert the counter-mask comparison, bit 23.
    pub(super) invert: bool,
    /// Edge detect, bit 18.
    pub(super) edge: bool,
    /// The CPUID.0AH:EBX bit that must be clear for the CPU to support this encoding.
    pub(super) arch_bit: Option<u8>,
    /// The default sampling rate.
    pub(super) rate: u64,
    /// The offcore-response value it reads, if it is an offcore-response event.
    pub(super) offcore: Offcore,
    /// The second unit mask, IA32_PERFEVTSELx bits 47:40 (0: none).
    pub(super) umask2: u8,
}

/// What an encoding puts in MSR_OFFCORE_RSP_0/1 (1A6h/1A7h), through `pm_iap_rsp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Offcore {
    /// Nothing: not an offcore-response event.
    No,
    /// The vendor's request/response value (`offcore_rsp=` replaces it).
    Value(u64),
    /// The generic offcore-response event: `offcore_rsp=` gives the value.
    Needed,
}

impl Programmable {
    /// An architectural event: `event`/`umask`, no cmask/inv/edge, availability by `arch_bit`.
    pub(super) const fn architectural(event: u8, umask: u8, arch_bit: u8) -> Self {
        Programmable {
            event,
            umask,
            cmask: 0,
            invert: false,
            edge: false,
            arch_bit: Some(arch_bit),
            rate: super::DEFAULT_SAMPLE_RATE,
            offcore: Offcore::No,
            umask2: 0,
        }
    }
}

/// An AMD core event: the parts of PERF_CTL it defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AmdCore {
    /// The 12-bit event select (PERF_CTL bits 7:0 and 35:32).
    pub(super) code: u16,
    /// Unit mask, bits 15:8.
    pub(super) umask: u8,
}
