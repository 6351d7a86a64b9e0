//! The second MSR of an offcore-response event: each CPU has two offcore-response MSRs
//! (MSR_OFFCORE_RSP_0/1, 1A6h/1A7h), each holding one request/response value, and an event
//! the vendor's file allows on both has an encoding per MSR (0xB7/0xBB on Core, umask 0x01/0x02
//! on Atom, 0x2A/0x2B from Golden Cove). When the driver finds the first MSR held with another
//! value (EBUSY), the allocation is retried with the other encoding, as Linux perf does.

use super::{Event, EventKind, HostEvents};

impl HostEvents {
    /// `event`'s IA32_PERFEVTSELx image (bits 31:0) with its other offcore-response encoding,
    /// if it is an offcore-response event of this CPU's tables that the vendor allows through
    /// either MSR and it is encoded with one of the two.
    pub fn offcore_alternate(&self, event: &Event) -> Option<u32> {
        let EventKind::Iap { evtsel, offcore_rsp: Some(_), .. } = event.kind else { return None };
        let tables = self.tables();
        let vendor = tables.iter().find_map(|t| t.table.find(&event.name))?;
        if vendor.extra_msr.is_some_and(|msr| msr.count < 2) {
            return None;
        }
        let first = (vendor.code, vendor.umask);
        let second = (
            vendor.second_code.unwrap_or(vendor.code),
            vendor.second_umask.unwrap_or(vendor.umask),
        );
        let current = (u16::from(evtsel as u8), u16::from((evtsel >> 8) as u8));
        let other = match current {
            _ if first == second => return None,
            c if c == first => second,
            c if c == second => first,
            _ => return None,
        };
        let (code, umask) = (u8::try_from(other.0).ok()?, u8::try_from(other.1).ok()?);
        Some(evtsel & !0xFFFF | u32::from(code) | u32::from(umask) << 8)
    }
}
