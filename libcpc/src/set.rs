//! Sets of requests (`cpc_set_t`) and their validation at `cpc_set_add_request` time.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use crate::bind::binding::{Binding, lock};
use crate::consts::{CPC_MAX_ATTR_LEN, CPC_MAX_EVENT_LEN, PICNUM, REQ_ALL_FLAGS, Subcode};
use crate::error::{Error, Result};
use crate::platform::Platform;
pub use crate::request::{Attr, Request};

/// A set of requests, unbound or bound (`cpc_set_t`).
#[derive(Debug, Default)]
pub struct Set {
    pub(crate) requests: Vec<Request>,
    pub(crate) binding: Option<Arc<Mutex<Binding>>>,
    /// The terminate flag of the process it was last bound to (`cpc_terminate`).
    pub(crate) terminator: Option<Arc<AtomicBool>>,
    /// Whether its binding signals overflows (SIGEMT is blocked while it is locked).
    pub(crate) holds_signal: bool,
}

/// `s` cut to at most `max - 1` bytes on a character boundary (C's buffer of `max` with its NUL).
fn truncated(s: &str, max: usize) -> String {
    let mut end = s.len().min(max - 1);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

impl Set {
    /// An empty, unbound set.
    pub fn new() -> Set {
        Set::default()
    }

    /// The requests, by index.
    pub fn requests(&self) -> &[Request] {
        &self.requests
    }

    /// Whether the set is bound (and has not been superseded by another bind of its LWP).
    pub fn is_bound(&self) -> bool {
        self.binding.as_ref().is_some_and(|b| lock(b).is_live())
    }

    /// Adds a request, checked as `cpc_set_add_request` does (reference §2.5): the set must be
    /// unbound (`EINVAL`); the event must be known on some PIC or be a raw code (`EINVAL`,
    /// `CPC_INVALID_EVENT`); every attribute must be one of the platform's (`EINVAL`,
    /// `CPC_INVALID_ATTRIBUTE`), a `picnum` below `npic` (`CPC_INVALID_PICNUM`) naming a PIC
    /// that counts the event (`CPC_PIC_NOT_CAPABLE`). Checked here where illumos checks them
    /// later (at bind, with the same errno and subcode) or not at all: the flags
    /// (`CPC_REQ_INVALID_FLAGS`), an SMPL request's `smpl_nrecs` (`CPC_ATTRIBUTE_OUT_OF_RANGE`)
    /// and an empty event name (`CPC_INVALID_EVENT`; illumos's raw-code check lets it through).
    /// The other attribute values are checked at bind. Returns the request's index.
    pub fn add_request(
        &mut self,
        platform: &Platform,
        event: &str,
        preset: u64,
        flags: u32,
        attrs: &[Attr],
    ) -> Result<usize> {
        const OP: &str = "cpc_set_add_request";
        if self.binding.is_some() {
            return Err(Error::invalid(OP, "requests are added only to an unbound set"));
        }
        if flags & !REQ_ALL_FLAGS != 0 {
            return Err(Error::sub(
                OP,
                libc::EINVAL,
                Subcode::ReqInvalidFlags,
                format!("unknown request flags {:#x}", flags & !REQ_ALL_FLAGS),
            ));
        }
        let event = truncated(event, CPC_MAX_EVENT_LEN);
        if event.trim().is_empty() || !platform.event_known(&event) {
            return Err(Error::sub(
                OP,
                libc::EINVAL,
                Subcode::InvalidEvent,
                format!("no counter of this processor counts {event:?}; it is no raw code either"),
            ));
        }
        let smpl = flags & crate::consts::CPC_HW_SMPL != 0;
        let known = |name: &str| {
            if smpl {
                name == PICNUM || name == crate::smpl::SMPL_NRECS
            } else {
                platform.has_attr(name)
            }
        };
        let mut kept = Vec::with_capacity(attrs.len());
        for attr in attrs {
            let name = truncated(&attr.name, CPC_MAX_ATTR_LEN);
            if name.is_empty() || !known(&name) {
                return Err(Error::sub(
                    OP,
                    libc::EINVAL,
                    Subcode::InvalidAttribute,
                    format!("unknown attribute {name:?}; known: {}", platform.attrs.join(" ")),
                ));
            }
            if name == PICNUM && smpl && attr.value >= u64::from(crate::smpl::SMPL_NPIC) {
                return Err(Error::sub(
                    OP,
                    libc::EINVAL,
                    Subcode::InvalidPicnum,
                    format!(
                        "picnum {} of an SMPL request is not below {}",
                        attr.value,
                        crate::smpl::SMPL_NPIC
                    ),
                ));
            }
            if name == PICNUM && !smpl {
                if attr.value >= u64::from(platform.npic()) {
                    return Err(Error::sub(
                        OP,
                        libc::EINVAL,
                        Subcode::InvalidPicnum,
                        format!("picnum {} is not below npic {}", attr.value, platform.npic()),
                    ));
                }
                if !platform.pic_accepts(attr.value as usize, &event) {
                    return Err(Error::sub(
                        OP,
                        libc::EINVAL,
                        Subcode::PicNotCapable,
                        format!("counter {} cannot count {event:?}", attr.value),
                    ));
                }
            }
            kept.push(Attr { name, value: attr.value });
        }
        if smpl {
            let nrecs = kept.iter().rev().find(|a| a.name == crate::smpl::SMPL_NRECS);
            let nrecs = nrecs.map(|a| a.value);
            let max = u64::from(crate::smpl::MAX_RECORDS);
            if !nrecs.is_some_and(|n| (1..=max).contains(&n)) {
                return Err(Error::sub(
                    OP,
                    libc::EINVAL,
                    Subcode::AttributeOutOfRange,
                    match nrecs {
                        Some(n) => format!("smpl_nrecs {n} is not in 1..={max}"),
                        None => format!("an SMPL request needs smpl_nrecs (1..={max})"),
                    },
                ));
            }
        }
        self.requests.push(Request { event, preset, flags, attrs: kept });
        Ok(self.requests.len() - 1)
    }
}

impl Drop for Set {
    fn drop(&mut self) {
        let _ = self.unbind();
    }
}
