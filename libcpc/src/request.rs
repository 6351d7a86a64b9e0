//! A set's requests (`cpc_set_add_request`): an event, its preset, flags and attributes. A leaf:
//! sets ([`crate::set`]) hold them, binds ([`crate::bind`]) turn them into PMCs.

use crate::consts::PICNUM;

/// One attribute of a request: a name and a 64-bit value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    /// The name (`picnum`, `umask`, …), at most 31 bytes.
    pub name: String,
    /// The value.
    pub value: u64,
}

impl Attr {
    /// An attribute `name` = `value`.
    pub fn new(name: &str, value: u64) -> Attr {
        Attr { name: name.to_string(), value }
    }
}

/// One counter configuration of a set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The event: a platform name, a `PAPI_*` generic or a raw code.
    pub event: String,
    /// The value the counter starts from.
    pub preset: u64,
    /// `CPC_COUNT_USER`, `CPC_COUNT_SYSTEM`, `CPC_OVF_NOTIFY_EMT`, …
    pub flags: u32,
    /// The attributes, in the order given.
    pub attrs: Vec<Attr>,
}

impl Request {
    /// The explicit counter (`picnum`; the last one given wins).
    pub fn picnum(&self) -> Option<u64> {
        self.attrs.iter().rev().find(|a| a.name == PICNUM).map(|a| a.value)
    }

    /// Whether it is an SMPL (hardware sampling) request.
    pub fn is_smpl(&self) -> bool {
        self.flags & crate::consts::CPC_HW_SMPL != 0
    }

    /// The value of attribute `name` (the last one given wins).
    pub fn attr(&self, name: &str) -> Option<u64> {
        self.attrs.iter().rev().find(|a| a.name == name).map(|a| a.value)
    }
}
