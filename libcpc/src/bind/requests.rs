//! What a set's requests ask libpmc for: the checks illumos' kernel makes of a set before
//! assigning counters, each request's libpmc event spec, and the bind errors libpmc's refusals
//! become.

use pmc::Class;

use crate::consts::{
    CPC_CAP_OVERFLOW_INTERRUPT, CPC_COUNT_SYSTEM, CPC_COUNT_USER, CPC_MAX_ATTRS, CPC_MAX_NREQS,
    CPC_OVF_NOTIFY_EMT, PICNUM, REQ_ALL_FLAGS, Subcode,
};
use crate::error::{Error, Result};
use crate::platform::Platform;
use crate::request::Request;
use crate::smpl;

/// The checks illumos' kernel makes of a set before assigning counters (reference §2.6 table):
/// sizes, request flags, explicit picnums, overflow capability.
pub(super) fn check_set(op: &'static str, platform: &Platform, requests: &[Request]) -> Result<()> {
    if requests.is_empty() {
        return Err(Error::invalid(op, "the set has no requests"));
    }
    let counters = requests.iter().filter(|r| !r.is_smpl()).count();
    if counters > platform.pics.len() || requests.len() > CPC_MAX_NREQS {
        return Err(Error::invalid(
            op,
            format!("{counters} counter requests for {} counters", platform.pics.len()),
        ));
    }
    let mut explicit = Vec::new();
    for (index, request) in requests.iter().enumerate() {
        if request.attrs.iter().filter(|a| a.name != PICNUM).count() > CPC_MAX_ATTRS {
            return Err(Error::invalid(op, format!("request {index} has over 50 attributes")));
        }
        if request.flags & !REQ_ALL_FLAGS != 0 {
            return Err(Error::sub(
                op,
                libc::EINVAL,
                Subcode::ReqInvalidFlags,
                format!("request {index} has flags {:#x}", request.flags & !REQ_ALL_FLAGS),
            ));
        }
        if request.is_smpl() {
            let nrecs = request.attr(smpl::SMPL_NRECS).unwrap_or(0);
            if nrecs == 0 || nrecs > u64::from(smpl::MAX_RECORDS) {
                return Err(Error::sub(
                    op,
                    libc::EINVAL,
                    Subcode::AttributeOutOfRange,
                    format!(
                        "request {index}: smpl_nrecs {nrecs} is not in 1..={}",
                        smpl::MAX_RECORDS
                    ),
                ));
            }
            continue;
        }
        if let Some(pic) = request.picnum() {
            if pic >= u64::from(platform.npic()) {
                return Err(Error::sub(
                    op,
                    libc::EINVAL,
                    Subcode::InvalidPicnum,
                    format!("request {index}: picnum {pic}"),
                ));
            }
            if explicit.contains(&pic) {
                return Err(Error::invalid(op, format!("two requests name picnum {pic}")));
            }
            explicit.push(pic);
        }
    }
    for (index, request) in requests.iter().enumerate() {
        if request.flags & CPC_OVF_NOTIFY_EMT != 0
            && platform.caps & CPC_CAP_OVERFLOW_INTERRUPT == 0
        {
            return Err(Error::new(op, libc::ENOTSUP).because(format!(
                "request {index} asks for overflow signals; these counters cannot interrupt"
            )));
        }
    }
    Ok(())
}

/// The libpmc spec of SMPL request `request`: its event as the first PIC that counts it (a raw
/// code as PIC 0) counts it, in the request's rings.
pub(super) fn smpl_spec(
    op: &'static str,
    platform: &Platform,
    request: &Request,
) -> Result<String> {
    let pic = platform.coverage(&request.event).first().copied().unwrap_or(0);
    let sampled = Request { attrs: Vec::new(), ..request.clone() };
    pmc_spec(op, platform, pic, &sampled)
}

/// The libpmc spec of `request` on PIC `pic`: the event plus its attributes and rings, checked
/// as a back-end checks them.
pub(super) fn pmc_spec(
    op: &'static str,
    platform: &Platform,
    pic: usize,
    request: &Request,
) -> Result<String> {
    let umask = request.attr("umask");
    let Some(mut spec) = platform.spec_on(pic, &request.event, umask) else {
        return Err(Error::sub(
            op,
            libc::EINVAL,
            Subcode::InvalidEvent,
            format!("counter {pic} has no event {:?}", request.event),
        ));
    };
    let class = platform.pics[pic].class;
    let generic = platform.pics[pic].generic(&request.event).is_some();
    let named = platform.pics[pic].has_platform_event(&request.event);
    for attr in request.attrs.iter().filter(|a| a.name != PICNUM) {
        let out_of_range =
            |why: String| Err(Error::sub(op, libc::EINVAL, Subcode::AttributeOutOfRange, why));
        match attr.name.as_str() {
            "nouser" | "sys" => continue,
            _ if generic => {
                return out_of_range(format!(
                    "the generic event {} takes no attribute {}",
                    request.event, attr.name
                ));
            }
            _ if !matches!(class, Class::Iap | Class::K8) => {
                return out_of_range(format!("counter {pic} takes no attribute {}", attr.name));
            }
            "umask" | "cmask" if attr.value > 0xff => {
                return out_of_range(format!("{} {:#x} is over 0xff", attr.name, attr.value));
            }
            // AMD: ORed into the event's own unit mask (illumos), below; Intel: replaces it.
            "umask" if named && class == Class::K8 => {}
            "umask" if named => spec.push_str(&format!(",umask={:#x}", attr.value)),
            "cmask" if attr.value != 0 => spec.push_str(&format!(",cmask={}", attr.value)),
            "edge" | "inv" if attr.value != 0 => spec.push_str(&format!(",{}", attr.name)),
            _ => {}
        }
    }
    if let (Class::K8, true, Some(umask)) = (class, named, umask) {
        // Checked above: at most 0xff.
        spec = platform.amd_with_umask(&spec, umask).ok_or_else(|| {
            Error::sub(
                op,
                libc::EINVAL,
                Subcode::InvalidEvent,
                format!("{:?} is not an AMD core event here", request.event),
            )
        })?;
    }
    if matches!(class, Class::Iap | Class::Iaf | Class::K8) {
        let (usr, os) = rings(request);
        if usr {
            spec.push_str(",usr");
        }
        if os {
            spec.push_str(",os");
        }
    }
    Ok(spec)
}

/// The rings a request counts in: its flags, with the `nouser` and `sys` attributes applied.
pub(super) fn rings(request: &Request) -> (bool, bool) {
    let usr = request.flags & CPC_COUNT_USER != 0 && request.attr("nouser").unwrap_or(0) == 0;
    let os = request.flags & CPC_COUNT_SYSTEM != 0 || request.attr("sys").unwrap_or(0) != 0;
    (usr, os)
}

/// libpmc's allocation error as a bind error.
pub(super) fn allocation_error(op: &'static str, e: &pmc::Error, request: usize) -> Error {
    let detail = format!("request {request}: {e}");
    match e.errno {
        libc::EPERM | libc::EACCES => Error::new(op, libc::EACCES).because(detail),
        libc::EBUSY | libc::ENOSPC | libc::EAGAIN => {
            Error::sub(op, libc::EINVAL, Subcode::ResourceUnavail, detail)
        }
        libc::EINVAL if e.op == "event" => {
            Error::sub(op, libc::EINVAL, Subcode::InvalidEvent, detail)
        }
        // The event and its attributes were checked: the driver found no row for it.
        libc::EINVAL if e.op == "PMCALLOCATE" => {
            Error::sub(op, libc::EINVAL, Subcode::ResourceUnavail, detail)
        }
        errno => Error::new(op, errno).because(detail),
    }
}
