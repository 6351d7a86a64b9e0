//! Offcore response: MSR_OFFCORE_RSP_0 and MSR_OFFCORE_RSP_1 (1A6h, 1A7h), the request/response
//! filters of the OFFCORE_RESPONSE events (SDM Vol. 3B, the "off-core response" sections of the
//! model-specific performance-monitoring chapters; SDM Vol. 4 lists the MSRs per model).
//!
//! The MSRs are model-specific: which event selects which MSR, and which bits are defined, differ
//! between microarchitectures, so this is the driver's one model table. Its valid masks are the
//! bits the SDM and Linux define for each microarchitecture, widened to every bit Intel's event
//! files use for the model (a test in libpmc checks each file's values against this table). A
//! model missing from the table gets no offcore response: a request with a response value is
//! refused (EINVAL), never written.
//!
//! Both MSRs are shared by every counter of a CPU: two PMCs that could be loaded on one CPU
//! together must want the same value ([`OffcoreClaims`], checked at allocation: EBUSY). A system
//! PMC claims its CPU's MSR; a process PMC may be loaded on any CPU, so it claims the MSR on every
//! CPU (two process PMCs with different values conflict even if their targets never share a
//! CPU, as a row taken by a system PMC is taken for process PMCs everywhere). The value is
//! written when a counter that reads it is programmed and cleared when the last one is unloaded
//! ([`OffcoreLoaded`]).

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::regs::PerfEvtSel;
use crate::arch::x86::cpuid::CpuSignature;
use crate::arch::x86::msr;
use crate::errno::Errno;
use crate::hw::{CpuIdReader, Hardware};

/// One of the two offcore-response MSRs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RspMsr {
    /// MSR_OFFCORE_RSP_0 (1A6h).
    Rsp0,
    /// MSR_OFFCORE_RSP_1 (1A7h).
    Rsp1,
}

impl RspMsr {
    /// The MSR's address.
    pub const fn address(self) -> u32 {
        match self {
            RspMsr::Rsp0 => msr::MSR_OFFCORE_RSP_0,
            RspMsr::Rsp1 => msr::MSR_OFFCORE_RSP_1,
        }
    }
    const fn index(self) -> usize {
        match self {
            RspMsr::Rsp0 => 0,
            RspMsr::Rsp1 => 1,
        }
    }
}

/// How a microarchitecture exposes offcore response: the (event select, unit mask) that reads
/// each MSR and the bits each MSR defines (0: the MSR does not exist).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OffcoreLayout {
    /// The event (select, umask) counting through MSR_OFFCORE_RSP_0 and through _1.
    pub events: [(u8, u8); 2],
    /// The defined bits of MSR_OFFCORE_RSP_0 and _1.
    pub valid: [u64; 2],
}

/// Core (Nehalem to Ice Lake): OFFCORE_RESPONSE_0 is 0xB7/0x01, _1 is 0xBB/0x01.
const CORE_EVENTS: [(u8, u8); 2] = [(0xB7, 0x01), (0xBB, 0x01)];
/// Golden Cove and later P-cores: 0x2A/0x01 and 0x2B/0x01.
const GLC_EVENTS: [(u8, u8); 2] = [(0x2A, 0x01), (0x2B, 0x01)];
/// Atom (Silvermont and later E-cores): one event, 0xB7, umask 0x01 or 0x02.
const ATOM_EVENTS: [(u8, u8); 2] = [(0xB7, 0x01), (0xB7, 0x02)];

/// CPUID leaf 1Ah EAX\[31:24\]: the core type of a hybrid part.
const CORE_TYPE_ATOM: u32 = 0x20;
const CORE_TYPE_CORE: u32 = 0x40;

impl OffcoreLayout {
    const fn core(rsp0: u64, rsp1: u64) -> Self {
        OffcoreLayout { events: CORE_EVENTS, valid: [rsp0, rsp1] }
    }
    const fn glc(valid: u64) -> Self {
        OffcoreLayout { events: GLC_EVENTS, valid: [valid, valid] }
    }
    const fn atom(rsp0: u64, rsp1: u64) -> Self {
        OffcoreLayout { events: ATOM_EVENTS, valid: [rsp0, rsp1] }
    }

    /// The layout of an Intel family 6 CPU, by model (and, on hybrid parts, by the core type of
    /// CPUID leaf 1Ah); `None` for a model the table does not know.
    pub fn of(signature: &CpuSignature, core_type: u32) -> Option<Self> {
        if !signature.is_intel() || signature.family != 6 {
            return None;
        }
        // Valid masks: SDM Vol. 4 and Linux's per-model tables, with every bit Intel's event
        // files use for the model.
        let snb = OffcoreLayout::core(0x3F_807F_8FFF, 0x3F_807F_8FFF);
        let snbep = OffcoreLayout::core(0x3F_FFFF_8FFF, 0x3F_FFFF_8FFF);
        let glc = OffcoreLayout::glc(0x3F_FFFF_FFFF);
        let lion_cove = OffcoreLayout::glc(0xFFF_FFFF_FFFF);
        let crestmont = OffcoreLayout::atom(0x800F_F3FF_FFFF_FFFF, 0xF_F3FF_FFFF_FFFF);
        let layout = match signature.model {
            // Nehalem: MSR_OFFCORE_RSP_0 only.
            0x1A | 0x1E | 0x1F | 0x2E => OffcoreLayout::core(0xFFFF, 0),
            // Westmere.
            0x25 | 0x2C | 0x2F => OffcoreLayout::core(0xFFFF, 0xFFFF),
            // Sandy Bridge, Ivy Bridge clients.
            0x2A | 0x3A => snb,
            // Sandy Bridge-EP, Ivy Bridge-EP, Haswell, Broadwell, Skylake and its successors.
            0x2D | 0x3E | 0x3C | 0x45 | 0x46 | 0x3F | 0x3D | 0x47 | 0x4F | 0x56 | 0x4E | 0x5E
            | 0x55 | 0x8E | 0x9E | 0xA5 | 0xA6 | 0x66 => snbep,
            // Ice Lake, Ice Lake-SP, Tiger Lake, Rocket Lake.
            0x7D | 0x7E | 0x6A | 0x6C | 0x8C | 0x8D | 0xA7 => {
                OffcoreLayout::core(0x3F_FFFF_BFFF, 0x3F_FFFF_BFFF)
            }
            // Sapphire Rapids, Emerald Rapids, Granite Rapids (Golden Cove and successors).
            0x8F | 0xCF | 0xAD | 0xAE => glc,
            // Silvermont, Airmont.
            0x37 | 0x4A | 0x4C | 0x4D | 0x5A | 0x5D => {
                OffcoreLayout::atom(0x76_8005_FFFF, 0x36_8005_FFFF)
            }
            // Goldmont, Goldmont Plus.
            0x5C | 0x5F | 0x7A => OffcoreLayout::atom(0x76_0005_FFBF, 0x36_0005_FFBF),
            // Tremont.
            0x86 | 0x96 | 0x9C => OffcoreLayout::atom(0x800F_F0FF_FFFF_9FFF, 0xF_F0FF_FFFF_9FFF),
            // Knights Landing, Knights Mill.
            0x57 | 0x85 => OffcoreLayout::atom(0x79_9FFB_BFFF, 0x39_9FFB_FFFF),
            // Gracemont, Crestmont and later E-core-only parts.
            0xBE | 0xAF | 0xB6 | 0xDD => crestmont,
            // Hybrid parts: the core type decides.
            0x97 | 0x9A | 0xB7 | 0xBA | 0xBF | 0xAA | 0xAC | 0xB5 => match core_type {
                CORE_TYPE_CORE => glc,
                CORE_TYPE_ATOM => crestmont,
                _ => return None,
            },
            0xC5 | 0xC6 | 0xBD | 0xCC | 0xD5 | 0xE5 => match core_type {
                CORE_TYPE_CORE => lion_cove,
                CORE_TYPE_ATOM => crestmont,
                _ => return None,
            },
            _ => return None,
        };
        Some(layout)
    }

    /// Reads the layout of the CPU whose CPUID `cpuid` answers for. None under a hypervisor
    /// (CPUID.1:ECX\[31\]): a vPMU may not implement the MSRs (KVM's does not), and writing
    /// one would raise #GP.
    pub fn discover<R: CpuIdReader>(cpuid: &R, signature: &CpuSignature) -> Option<Self> {
        if cpuid.cpuid1(1).ecx & (1 << 31) != 0 {
            return None;
        }
        let core_type = if cpuid.cpuid1(0).eax >= 0x1A { cpuid.cpuid1(0x1A).eax >> 24 } else { 0 };
        Self::of(signature, core_type)
    }

    /// The MSR an event select reads, if it is one of this layout's offcore-response events.
    pub fn msr_of(&self, evtsel: PerfEvtSel) -> Option<RspMsr> {
        let event = (evtsel.event_select(), evtsel.umask());
        [RspMsr::Rsp0, RspMsr::Rsp1]
            .into_iter()
            .find(|msr| self.valid[msr.index()] != 0 && self.events[msr.index()] == event)
    }
}

/// An offcore-response value checked against the layout of the CPUs it may be written on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Offcore {
    msr: RspMsr,
    value: u64,
}

impl Offcore {
    /// Which of the two MSRs it is written to (0 or 1).
    pub(super) const fn msr_index(self) -> usize {
        self.msr.index()
    }

    /// The offcore response of an IAP allocation: `None` when the event is not an
    /// offcore-response event of `layout` (then `rsp` must be 0); EINVAL for a value with a bit
    /// the MSR leaves undefined, or a response value for any other event.
    pub fn new(
        layout: Option<&OffcoreLayout>,
        evtsel: PerfEvtSel,
        rsp: u64,
    ) -> Result<Option<Self>, Errno> {
        let Some((layout, msr)) = layout.and_then(|l| Some((l, l.msr_of(evtsel)?))) else {
            return if rsp == 0 { Ok(None) } else { Err(Errno::Inval) };
        };
        if rsp & !layout.valid[msr.index()] != 0 {
            return Err(Errno::Inval);
        }
        Ok(Some(Offcore { msr, value: rsp }))
    }
    /// Which MSR.
    pub const fn msr(self) -> RspMsr {
        self.msr
    }
    /// The value.
    pub const fn value(self) -> u64 {
        self.value
    }
}

/// The values PMCs allocated for one CPU hold in its offcore-response MSRs, with how many hold
/// each. Changed only under the driver's allocation lock (so plain relaxed atomics).
#[derive(Debug, Default)]
pub struct OffcoreClaims {
    value: [AtomicU64; 2],
    users: [AtomicU32; 2],
}

impl OffcoreClaims {
    /// Whether `offcore` may be claimed here: the MSR is free or holds the same value.
    pub fn allows(&self, offcore: Offcore) -> bool {
        let i = offcore.msr.index();
        self.users[i].load(Ordering::Relaxed) == 0
            || self.value[i].load(Ordering::Relaxed) == offcore.value
    }
    /// Claims `offcore` (after [`OffcoreClaims::allows`]).
    pub fn claim(&self, offcore: Offcore) {
        let i = offcore.msr.index();
        self.value[i].store(offcore.value, Ordering::Relaxed);
        self.users[i].fetch_add(1, Ordering::Relaxed);
    }
    /// Gives back one claim of `offcore`.
    pub fn release(&self, offcore: Offcore) {
        let i = offcore.msr.index();
        let users = self.users[i].load(Ordering::Relaxed);
        self.users[i].store(users.saturating_sub(1), Ordering::Relaxed);
    }
}

/// What one CPU's offcore-response MSRs hold now, and which GP counters use them. Changed only
/// on that CPU, with its counters stopped: written when a counter is programmed, cleared when
/// the counters that read it are unloaded (`unprogram`).
#[derive(Debug, Default)]
pub struct OffcoreLoaded {
    /// The value written to each MSR.
    value: [AtomicU64; 2],
    /// The GP counters programmed with an event that reads each MSR: bit i for IA32_PMCi
    /// reading MSR_OFFCORE_RSP_0, bit 32 + i for _1 (one word, so that unprogramming a counter
    /// that reads neither, the common case on the switch path, costs one load).
    counters: AtomicU64,
}

/// The bit of GP counter `index` reading `msr` in [`OffcoreLoaded::counters`].
const fn counter_bit(msr: RspMsr, index: u8) -> u64 {
    1 << (index as u32 % 32 + 32 * msr.index() as u32)
}

/// The bits of every GP counter reading `msr` in [`OffcoreLoaded::counters`].
const fn msr_bits(msr: RspMsr) -> u64 {
    0xFFFF_FFFF << (32 * msr.index() as u32)
}

impl OffcoreLoaded {
    /// Before GP counter `index` is programmed with `offcore`: writes the MSR unless it holds the
    /// value already. `false` (nothing written) when another counter holds the MSR with another
    /// value (allocation keeps this from happening).
    pub fn load<H: Hardware>(&self, hw: &H, index: u8, offcore: Offcore) -> bool {
        let i = offcore.msr.index();
        let bit = counter_bit(offcore.msr, index);
        let counters = self.counters.load(Ordering::Relaxed);
        let others = counters & !bit & msr_bits(offcore.msr);
        let current = self.value[i].load(Ordering::Relaxed);
        if current != offcore.value {
            if others != 0 {
                return false;
            }
            write_rsp(hw, offcore.msr, offcore);
            self.value[i].store(offcore.value, Ordering::Relaxed);
        }
        self.counters.store(counters | bit, Ordering::Relaxed);
        true
    }
    /// GP counters `gp` (bit i: IA32_PMCi) were unprogrammed: an MSR none of the remaining
    /// counters reads is cleared. Called once per unload (from `unprogram`), so that counters that
    /// read no MSR, the common case on the switch path, cost one load per switch.
    #[inline]
    pub fn unloaded<H: Hardware>(&self, hw: &H, gp: u32) {
        let counters = self.counters.load(Ordering::Relaxed);
        let gp = u64::from(gp);
        let leaving = counters & (gp | gp << 32);
        if leaving != 0 {
            self.clear_unread(hw, counters & !leaving);
        }
    }

    /// Records `remaining` as the counters reading the MSRs and clears an MSR none reads.
    fn clear_unread<H: Hardware>(&self, hw: &H, remaining: u64) {
        for msr in [RspMsr::Rsp0, RspMsr::Rsp1] {
            let i = msr.index();
            if remaining & msr_bits(msr) == 0 && self.value[i].load(Ordering::Relaxed) != 0 {
                // The cleared value is valid in every layout.
                write_rsp(hw, msr, Offcore { msr, value: 0 });
                self.value[i].store(0, Ordering::Relaxed);
            }
        }
        self.counters.store(remaining, Ordering::Relaxed);
    }

    /// At load and unload: clears both MSRs where `layout` has them.
    pub fn reset<H: Hardware>(&self, hw: &H, layout: &OffcoreLayout) {
        for msr in [RspMsr::Rsp0, RspMsr::Rsp1] {
            let i = msr.index();
            if layout.valid[i] != 0 {
                write_rsp(hw, msr, Offcore { msr, value: 0 });
            }
            self.value[i].store(0, Ordering::Relaxed);
        }
        self.counters.store(0, Ordering::Relaxed);
    }
}

/// Writes `offcore` to its MSR.
fn write_rsp<H: Hardware>(hw: &H, msr: RspMsr, offcore: Offcore) {
    // SAFETY: an `Offcore` is built only for an MSR the CPU's layout has, with no bit outside
    // the layout's valid mask (`Offcore::new`), or is the value 0; the callers hold the CPU's
    // layout (`OffcoreLoaded::reset`) or an `Offcore` checked against the layout every CPU
    // shares.
    unsafe { hw.write_msr(msr.address(), offcore.value) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(model: u32) -> CpuSignature {
        CpuSignature { vendor: *b"GenuineIntel", family: 6, model, stepping: 0 }
    }

    fn sel(event: u8, umask: u8) -> PerfEvtSel {
        PerfEvtSel::new(u64::from(event) | u64::from(umask) << 8, PerfEvtSel::ARCHITECTURAL)
            .unwrap()
    }

    #[test]
    fn each_microarchitecture_selects_its_own_offcore_events() {
        let skylake = OffcoreLayout::of(&sig(0x5E), 0).unwrap();
        assert_eq!(skylake.msr_of(sel(0xB7, 0x01)), Some(RspMsr::Rsp0));
        assert_eq!(skylake.msr_of(sel(0xBB, 0x01)), Some(RspMsr::Rsp1));
        assert_eq!(skylake.msr_of(sel(0x2A, 0x01)), None);
        let spr = OffcoreLayout::of(&sig(0x8F), 0).unwrap();
        assert_eq!(spr.msr_of(sel(0x2B, 0x01)), Some(RspMsr::Rsp1));
        assert_eq!(spr.msr_of(sel(0xB7, 0x01)), None);
        let nehalem = OffcoreLayout::of(&sig(0x1A), 0).unwrap();
        assert_eq!(nehalem.msr_of(sel(0xBB, 0x01)), None, "Nehalem has no MSR_OFFCORE_RSP_1");
        let alder_p = OffcoreLayout::of(&sig(0x97), CORE_TYPE_CORE).unwrap();
        let alder_e = OffcoreLayout::of(&sig(0x97), CORE_TYPE_ATOM).unwrap();
        assert_eq!(alder_p.msr_of(sel(0x2A, 0x01)), Some(RspMsr::Rsp0));
        assert_eq!(alder_e.msr_of(sel(0xB7, 0x02)), Some(RspMsr::Rsp1));
        assert_eq!(OffcoreLayout::of(&sig(0x97), 0), None, "hybrid without a core type");
        assert_eq!(OffcoreLayout::of(&sig(0x0F), 0), None, "Core 2 has none");
    }

    #[test]
    fn reserved_response_bits_and_stray_values_are_refused() {
        let skylake = OffcoreLayout::of(&sig(0x5E), 0).unwrap();
        let ok = Offcore::new(Some(&skylake), sel(0xB7, 0x01), 0x3F_FFFF_8FFF).unwrap().unwrap();
        assert_eq!((ok.msr(), ok.value()), (RspMsr::Rsp0, 0x3F_FFFF_8FFF));
        assert_eq!(Offcore::new(Some(&skylake), sel(0xB7, 0x01), 1 << 12), Err(Errno::Inval));
        assert_eq!(Offcore::new(Some(&skylake), sel(0xB7, 0x01), 1 << 38), Err(Errno::Inval));
        assert_eq!(Offcore::new(Some(&skylake), sel(0xC0, 0x00), 1), Err(Errno::Inval));
        assert_eq!(Offcore::new(None, sel(0xB7, 0x01), 1), Err(Errno::Inval));
        assert_eq!(Offcore::new(None, sel(0xB7, 0x01), 0), Ok(None));
    }

    #[test]
    fn claims_share_one_value_per_msr() {
        let skylake = OffcoreLayout::of(&sig(0x5E), 0).unwrap();
        let a = Offcore::new(Some(&skylake), sel(0xB7, 0x01), 0x10001).unwrap().unwrap();
        let b = Offcore::new(Some(&skylake), sel(0xB7, 0x01), 0x10002).unwrap().unwrap();
        let other_msr = Offcore::new(Some(&skylake), sel(0xBB, 0x01), 0x10002).unwrap().unwrap();
        let claims = OffcoreClaims::default();
        claims.claim(a);
        assert!(claims.allows(a) && !claims.allows(b) && claims.allows(other_msr));
        claims.claim(a);
        claims.release(a);
        assert!(!claims.allows(b), "one holder left");
        claims.release(a);
        assert!(claims.allows(b));
    }
}
