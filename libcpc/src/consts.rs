//! The constants of `<libcpc.h>`: versions, request and bind flags, capabilities, limits and the
//! error subcodes with their default messages (reference §3).

/// `CPC_VER_CURRENT`: the only version `cpc_open` accepts.
pub const CPC_VER_CURRENT: i32 = 2;

/// Request flag: signal (SIGEMT) when the counter overflows / the SMPL record cap is reached.
pub const CPC_OVF_NOTIFY_EMT: u32 = 0x1;
/// Request flag: count in user mode.
pub const CPC_COUNT_USER: u32 = 0x2;
/// Request flag: count in privileged mode.
pub const CPC_COUNT_SYSTEM: u32 = 0x4;
/// Request flag: count hypervisor events (sun4v; accepted and ignored on x86, as illumos does).
pub const CPC_COUNT_HV: u32 = 0x8;
/// Request flag of illumos 2010+ (the DTrace cpc provider); accepted, no effect here.
pub const CPC_COUNT_SAMPLE_MODE: u32 = 0x10;
/// Request flag of Oracle Solaris 11.4 marking an SMPL (hardware sampling) request. Oracle does
/// not publish its value; this library uses 0x100, a bit no illumos request flag uses.
pub const CPC_HW_SMPL: u32 = 0x100;
/// Every request flag this library accepts at bind time (illumos' `KCPC_REQ_ALL_FLAGS` plus
/// [`CPC_HW_SMPL`]); any other bit fails the bind with `CPC_REQ_INVALID_FLAGS`.
pub const REQ_ALL_FLAGS: u32 = 0x1f | CPC_HW_SMPL;

/// Bind flag: LWPs created later by the bound LWP get a copy of the set.
pub const CPC_BIND_LWP_INHERIT: u32 = 0x1;
/// Bind flag (an extension, not illumos'): the set's counters may share the hardware counters
/// with other sets bound so, taking turns: the set is one event group (always counted together,
/// never partly), and its values are scaled to the whole time it was bound. Without it a bind
/// fails when the counters are taken, as illumos'.
pub const CPC_BIND_MULTIPLEX: u32 = 0x1000;

/// Capability: the counters can interrupt on overflow.
pub const CPC_CAP_OVERFLOW_INTERRUPT: u32 = 0x1;
/// Capability: the interrupt says which counter overflowed.
pub const CPC_CAP_OVERFLOW_PRECISE: u32 = 0x2;

/// Longest event name, NUL included; longer names are truncated.
pub const CPC_MAX_EVENT_LEN: usize = 512;
/// Longest attribute name, NUL included; longer names are truncated.
pub const CPC_MAX_ATTR_LEN: usize = 32;
/// Most requests a set may bind with.
pub const CPC_MAX_NREQS: usize = 100;
/// Most attributes of one request (besides `picnum`).
pub const CPC_MAX_ATTRS: usize = 50;

/// The attribute naming a request's counter.
pub const PICNUM: &str = "picnum";

/// `si_code` of an overflow signal (the illumos x86 value).
pub const EMT_CPCOVF: i32 = 1;

/// The error subcodes passed to the error handler (reference §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Subcode {
    /// `CPC_INVALID_EVENT`.
    InvalidEvent = 1,
    /// `CPC_INVALID_PICNUM`.
    InvalidPicnum = 2,
    /// `CPC_INVALID_ATTRIBUTE`.
    InvalidAttribute = 3,
    /// `CPC_ATTRIBUTE_OUT_OF_RANGE`.
    AttributeOutOfRange = 4,
    /// `CPC_RESOURCE_UNAVAIL`.
    ResourceUnavail = 5,
    /// `CPC_PIC_NOT_CAPABLE`.
    PicNotCapable = 6,
    /// `CPC_REQ_INVALID_FLAGS`.
    ReqInvalidFlags = 7,
    /// `CPC_CONFLICTING_REQS`.
    ConflictingReqs = 8,
    /// `CPC_ATTR_REQUIRES_PRIVILEGE`.
    AttrRequiresPrivilege = 9,
    /// `CPC_PBIND_FAILED`.
    PbindFailed = 10,
    /// `CPC_HV_NO_ACCESS`.
    HvNoAccess = 11,
}

impl Subcode {
    /// The default message for this subcode, as illumos prints it (without the newline).
    pub fn message(self) -> &'static str {
        match self {
            Subcode::InvalidEvent => "Unknown event",
            Subcode::InvalidPicnum => "Invalid counter number",
            Subcode::InvalidAttribute => "Unknown attribute",
            Subcode::AttributeOutOfRange => "Attribute out of range",
            Subcode::ResourceUnavail => "Hardware resource unavailable",
            Subcode::PicNotCapable => "Counter cannot count requested event",
            Subcode::ReqInvalidFlags => "Invalid flags in a request",
            Subcode::ConflictingReqs => "Requests conflict with each other",
            Subcode::AttrRequiresPrivilege => "Attribute requires the cpc_cpu privilege",
            Subcode::PbindFailed => "Couldn't bind LWP to requested processor",
            Subcode::HvNoAccess => "Hypervisor event access denied",
        }
    }

    /// The subcode's number (`CPC_INVALID_EVENT` = 1, …).
    pub fn code(self) -> i32 {
        self as i32
    }
}

#[cfg(test)]
mod tests {
    use super::Subcode;

    #[test]
    fn subcodes_have_illumos_numbers_and_default_messages() {
        let all = [
            (Subcode::InvalidEvent, 1, "Unknown event"),
            (Subcode::InvalidPicnum, 2, "Invalid counter number"),
            (Subcode::InvalidAttribute, 3, "Unknown attribute"),
            (Subcode::AttributeOutOfRange, 4, "Attribute out of range"),
            (Subcode::ResourceUnavail, 5, "Hardware resource unavailable"),
            (Subcode::PicNotCapable, 6, "Counter cannot count requested event"),
            (Subcode::ReqInvalidFlags, 7, "Invalid flags in a request"),
            (Subcode::ConflictingReqs, 8, "Requests conflict with each other"),
            (Subcode::AttrRequiresPrivilege, 9, "Attribute requires the cpc_cpu privilege"),
            (Subcode::PbindFailed, 10, "Couldn't bind LWP to requested processor"),
            (Subcode::HvNoAccess, 11, "Hypervisor event access denied"),
        ];
        for (subcode, code, message) in all {
            assert_eq!((subcode.code(), subcode.message()), (code, message));
        }
    }
}
