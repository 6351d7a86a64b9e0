//! The core performance counters of a simulated AMD CPU, register by register (AMD64 APM
//! vol. 2 §13.2.1; PerfMonV2 from the family 19h PPR). The counters themselves (value, control,
//! edge state) and the overflow and PMI machinery are [`SimPmu`]'s; this module gives them
//! AMD's MSRs and rules:
//!
//! * PERF_CTL0–3 at C001_0000h and PERF_CTR0–3 at C001_0004h always (on a CPU with
//!   PerfCtrExtCore they are aliases of counters 0–3); with PerfCtrExtCore, PERF_CTLi at
//!   C001_0200h + 2i and PERF_CTRi at C001_0201h + 2i for the 6 counters.
//! * With PerfMonV2, PerfCntrGlobalStatus (C000_0300h, read-only), -GlobalCtl (C000_0301h,
//!   reset to every counter enabled), -GlobalStatusClr and -GlobalStatusSet (C000_0302h/3h,
//!   reading 0). A counter counts when PERF_CTL.EN and, with PerfMonV2, its GlobalCtl bit are
//!   set, in the rings its USR and OS bits select, unless exactly one of GuestOnly and HostOnly
//!   is set (with SVM off, as here, such a counter counts nothing).
//! * #GP: any other MSR (the Intel ones too, but the TSC and the x2APIC LVT entry), PERF_CTL
//!   bits 19, 21, 39:36 and 63:42, counter values of more than 48 bits, global bits of counters
//!   that do not exist, writes to the status; RDPMC of anything but counters 0 to n − 1.

use super::{Access, Fault, FaultKind, GpCounter, Ring, SimPmu, low_bits, msr};

/// PERF_CTL's defined bits: event select 7:0 and 35:32, unit mask, USR, OS, EDGE, INT, EN,
/// INV, CMASK, GuestOnly, HostOnly.
pub(super) const PERF_CTL_VALID: u64 = 0xFFFF
    | 1 << 16
    | 1 << 17
    | 1 << 18
    | 1 << 20
    | 1 << 22
    | 1 << 23
    | 0xFF << 24
    | 0xF << 32
    | GUEST_ONLY
    | HOST_ONLY;
const USR: u64 = 1 << 16;
const OS: u64 = 1 << 17;
const EN: u64 = 1 << 22;
const GUEST_ONLY: u64 = 1 << 40;
const HOST_ONLY: u64 = 1 << 41;

/// PerfCntrGlobalStatus bit 58: the LBR stack is frozen (with LbrExtV2, CPUID 8000_0022h EAX
/// bit 1; Linux's `GLOBAL_STATUS_LBRS_FROZEN`). Another user's indication, not a counter's.
pub const STATUS_LBRS_FROZEN: u64 = 1 << 58;

const PERF_CTL0_LEGACY: u32 = 0xC001_0000;
const PERF_CTR0_LEGACY: u32 = 0xC001_0004;
const PERF_CTL0: u32 = 0xC001_0200;
const GLOBAL_STATUS: u32 = 0xC000_0300;
const GLOBAL_CTL: u32 = 0xC000_0301;
const GLOBAL_STATUS_CLR: u32 = 0xC000_0302;
const GLOBAL_STATUS_SET: u32 = 0xC000_0303;

/// A core counter register.
#[derive(Clone, Copy)]
enum Reg {
    Ctl(usize),
    Ctr(usize),
}

impl SimPmu {
    /// Whether this CPU has PerfMonV2's global registers.
    pub(super) fn amd_perfmon_v2(&self) -> bool {
        self.model().amd.is_some_and(|a| a.perfmon_v2())
    }

    /// The PerfCntrGlobalStatus bits this CPU defines: its counters, and the LBR freeze with
    /// LbrExtV2.
    fn amd_status_valid(&self) -> u64 {
        let lbr = self.model().amd.is_some_and(|a| a.perfmon_v2() && a.leaf_8000_0022.0 & 2 != 0);
        low_bits(self.gp.len() as u32) | if lbr { STATUS_LBRS_FROZEN } else { 0 }
    }

    /// The core counter register at `address`, if this CPU has it.
    fn amd_reg(&self, address: u32) -> Option<Reg> {
        let amd = self.model().amd?;
        let counters = self.gp.len();
        let legacy = counters.min(4);
        if let Some(i) = address.checked_sub(PERF_CTL0_LEGACY).map(|i| i as usize) {
            if i < legacy {
                return Some(Reg::Ctl(i));
            }
        }
        if let Some(i) = address.checked_sub(PERF_CTR0_LEGACY).map(|i| i as usize) {
            if i < legacy {
                return Some(Reg::Ctr(i));
            }
        }
        let offset = address.checked_sub(PERF_CTL0)? as usize;
        if amd.perf_ctr_ext_core() && offset < 2 * counters {
            return Some(if offset % 2 == 0 { Reg::Ctl(offset / 2) } else { Reg::Ctr(offset / 2) });
        }
        None
    }

    fn amd_absent(&self, access: Access) -> Fault {
        let counters = self.gp.len();
        let detail = if self.model().amd.is_some_and(|a| a.perf_ctr_ext_core()) {
            format!("this CPU has {counters} core counters (PerfCtrExtCore)")
        } else {
            format!("this CPU has the {counters} legacy core counters only")
        };
        let detail = match access {
            Access::Rdmsr { msr } | Access::Wrmsr { msr, .. }
                if (GLOBAL_STATUS..=GLOBAL_STATUS_SET).contains(&msr) =>
            {
                "the global registers need PerfMonV2 (CPUID 8000_0022h EAX bit 0)".into()
            }
            _ => detail,
        };
        Fault { access, kind: FaultKind::UnknownMsr, detail }
    }

    /// RDMSR on an AMD CPU.
    pub(super) fn amd_read_msr(&self, address: u32) -> Result<u64, Fault> {
        match self.amd_reg(address) {
            Some(Reg::Ctl(i)) => return Ok(self.gp[i].evtsel),
            Some(Reg::Ctr(i)) => return Ok(self.gp[i].value),
            None => {}
        }
        let v2 = self.amd_perfmon_v2();
        match address {
            msr::IA32_TIME_STAMP_COUNTER => Ok(self.tsc),
            msr::IA32_X2APIC_LVT_PMI => Ok(self.lvt),
            GLOBAL_STATUS if v2 => Ok(self.global_status),
            GLOBAL_CTL if v2 => Ok(self.global_ctrl),
            GLOBAL_STATUS_CLR | GLOBAL_STATUS_SET if v2 => Ok(0),
            _ => Err(self.amd_absent(Access::Rdmsr { msr: address })),
        }
    }

    /// WRMSR on an AMD CPU.
    pub(super) fn amd_write_msr(&mut self, address: u32, value: u64) -> Result<(), Fault> {
        let access = Access::Wrmsr { msr: address, value };
        let reserved = |valid: u64, detail: &dyn Fn() -> String| {
            if value & !valid != 0 {
                Err(Fault {
                    access,
                    kind: FaultKind::ReservedBits(value & !valid),
                    detail: detail(),
                })
            } else {
                Ok(())
            }
        };
        let counters = low_bits(self.gp.len() as u32);
        match self.amd_reg(address) {
            Some(Reg::Ctl(i)) => {
                let detail = || "PERF_CTL bits 19, 21, 39:36 and 63:42 are reserved".into();
                reserved(PERF_CTL_VALID, &detail)?;
                self.gp[i] = GpCounter { evtsel: value, asserted: false, ..self.gp[i] };
                return Ok(());
            }
            Some(Reg::Ctr(i)) => {
                let detail = || "the value is wider than the 48-bit counter".into();
                reserved(low_bits(self.gp_width()), &detail)?;
                self.gp[i].value = value;
                return Ok(());
            }
            None => {}
        }
        let v2 = self.amd_perfmon_v2();
        let missing = || format!("this CPU has {} core counters", self.gp.len());
        match address {
            msr::IA32_TIME_STAMP_COUNTER => {
                self.tsc = value;
                Ok(())
            }
            msr::IA32_X2APIC_LVT_PMI => self.write_lvt(value, access),
            GLOBAL_STATUS if v2 => Err(Fault {
                access,
                kind: FaultKind::ReadOnly,
                detail: "PerfCntrGlobalStatus is read-only: clear it through -StatusClr".into(),
            }),
            GLOBAL_CTL if v2 => {
                reserved(counters, &missing)?;
                self.global_ctrl = value;
                Ok(())
            }
            GLOBAL_STATUS_CLR if v2 => {
                reserved(self.amd_status_valid(), &missing)?;
                self.global_status &= !value;
                Ok(())
            }
            GLOBAL_STATUS_SET if v2 => {
                reserved(self.amd_status_valid(), &missing)?;
                self.global_status |= value;
                Ok(())
            }
            _ => Err(self.amd_absent(access)),
        }
    }

    /// RDPMC on an AMD CPU: ECX = the core counter's number.
    pub(super) fn amd_read_pmc(&self, index: u32) -> Result<u64, Fault> {
        match self.gp.get(index as usize) {
            Some(counter) => Ok(counter.value),
            None => Err(Fault {
                access: Access::Rdpmc { index },
                kind: FaultKind::NoSuchCounter,
                detail: format!("this CPU has core counters 0..{}", self.gp.len()),
            }),
        }
    }

    /// Whether core counter `i` counts in `ring` (see the module documentation).
    pub(super) fn amd_counts(&self, i: usize, ring: Ring) -> bool {
        let ctl = self.gp[i].evtsel;
        let ring_bit = match ring {
            Ring::Kernel => OS,
            Ring::User => USR,
        };
        let host = (ctl & GUEST_ONLY == 0) == (ctl & HOST_ONLY == 0);
        ctl & EN != 0
            && ctl & ring_bit != 0
            && host
            && (!self.amd_perfmon_v2() || self.global_ctrl >> i & 1 != 0)
    }
}

/// The AMD name and address of a performance-monitoring MSR, e.g. `PERF_CTL2 (0xc0010204)`.
pub(super) fn msr_name(address: u32) -> Option<String> {
    let name = match address {
        PERF_CTL0_LEGACY..=0xC001_0003 => format!("PERF_CTL{}", address - PERF_CTL0_LEGACY),
        PERF_CTR0_LEGACY..=0xC001_0007 => format!("PERF_CTR{}", address - PERF_CTR0_LEGACY),
        PERF_CTL0..=0xC001_020B if address % 2 == 0 => {
            format!("PERF_CTL{}", (address - PERF_CTL0) / 2)
        }
        PERF_CTL0..=0xC001_020B => format!("PERF_CTR{}", (address - PERF_CTL0) / 2),
        GLOBAL_STATUS => "PerfCntrGlobalStatus".into(),
        GLOBAL_CTL => "PerfCntrGlobalCtl".into(),
        GLOBAL_STATUS_CLR => "PerfCntrGlobalStatusClr".into(),
        GLOBAL_STATUS_SET => "PerfCntrGlobalStatusSet".into(),
        _ => return None,
    };
    Some(format!("{name} ({address:#x})"))
}

/// The 12-bit event select of a PERF_CTL value.
pub(super) const fn event_select(ctl: u64) -> u16 {
    ((ctl >> 24) & 0xF00 | ctl & 0xFF) as u16
}
