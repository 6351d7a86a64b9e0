//! Sets: creation, requests, binding and the calling thread's set.

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::ptr;

use super::{cpc_attr_t, cpc_set_t, cpc_t, guard, handle, set_of, status};
use crate::error::Error;
use crate::{Attr, Set};

/// A new empty set of handle `cpc`, or NULL with `EINVAL` for a NULL handle.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_set_create(cpc: *mut cpc_t) -> *mut cpc_set_t {
    guard(None, ptr::null_mut(), || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle("cpc_set_create", cpc)? };
        let set = Box::into_raw(Box::new(Set::new()));
        h.lists().sets.push(set as usize);
        Ok(set)
    })
}

/// Destroys a set of the handle, unbinding it first. Returns 0, or -1 with `EINVAL` for a set
/// that is not the handle's. Its buffers stay.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one; `set` is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_set_destroy(cpc: *mut cpc_t, set: *mut cpc_set_t) -> c_int {
    const OP: &str = "cpc_set_destroy";
    status(None, || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(OP, cpc)? };
        let mut lists = h.lists();
        let at = lists.sets.iter().position(|&s| s == set as usize);
        let at =
            at.ok_or_else(|| Error::invalid(OP, "the set was not created with this handle"))?;
        lists.sets.swap_remove(at);
        drop(lists);
        // SAFETY: it was on the list: a Box<Set> of ours, now off the list.
        drop(unsafe { Box::from_raw(set) });
        Ok(())
    })
}

/// Adds a request to an unbound set; returns its index, or -1 with `errno` (`EINVAL`, with the
/// subcodes of [`Set::add_request`]).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one; `event` NULL or a C string; `attrs` NULL or `nattrs`
/// attributes whose names are NULL or C strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_set_add_request(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    event: *const c_char,
    preset: u64,
    flags: c_uint,
    nattrs: c_uint,
    attrs: *const cpc_attr_t,
) -> c_int {
    const OP: &str = "cpc_set_add_request";
    // SAFETY: NULL or a live handle, by the caller's promise.
    let h = unsafe { handle(OP, cpc) }.ok();
    guard(h, -1, || {
        let h = h.ok_or_else(|| Error::invalid(OP, "the cpc handle is NULL"))?;
        // SAFETY: a set is used by one thread at a time (the API's rule).
        let set = unsafe { set_of(OP, h, set)? };
        if event.is_null() {
            return Err(Error::invalid(OP, "event is NULL"));
        }
        // SAFETY: a C string by the caller's promise.
        let event = unsafe { CStr::from_ptr(event) }.to_string_lossy();
        if nattrs > 0 && attrs.is_null() {
            return Err(Error::invalid(OP, format!("attrs is NULL with nattrs {nattrs}")));
        }
        let mut list = Vec::new();
        for i in 0..nattrs as usize {
            // SAFETY: `attrs` holds `nattrs` attributes by the caller's promise.
            let attr = unsafe { &*attrs.add(i) };
            let name = if attr.ca_name.is_null() {
                String::new()
            } else {
                // SAFETY: a C string by the caller's promise.
                unsafe { CStr::from_ptr(attr.ca_name) }.to_string_lossy().into_owned()
            };
            list.push(Attr { name, value: attr.ca_val });
        }
        let index = set.add_request(h.cpc.platform(), &event, preset, flags, &list)?;
        Ok(index as c_int)
    })
}

/// The action of [`cpc_walk_requests`].
#[allow(non_camel_case_types)]
pub type cpc_walk_requests_fn =
    unsafe extern "C" fn(*mut c_void, c_int, *const c_char, u64, c_uint, c_int, *const cpc_attr_t);

/// Calls `action` once per request of the set, last added first, with its index, event,
/// preset, flags and attributes (valid only during the call).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one; `action` NULL or a valid function that does not change
/// the set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_walk_requests(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    arg: *mut c_void,
    action: Option<cpc_walk_requests_fn>,
) {
    const OP: &str = "cpc_walk_requests";
    guard(None, (), || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(OP, cpc)? };
        // SAFETY: one thread uses a set at a time.
        let set = unsafe { set_of(OP, h, set)? };
        let action = action.ok_or_else(|| Error::invalid(OP, "action is NULL"))?;
        for (index, request) in set.requests().iter().enumerate().rev() {
            let event = CString::new(request.event.clone()).unwrap_or_default();
            let names: Vec<CString> = request
                .attrs
                .iter()
                .map(|a| CString::new(a.name.clone()).unwrap_or_default())
                .collect();
            let attrs: Vec<cpc_attr_t> = request
                .attrs
                .iter()
                .zip(&names)
                .map(|(a, n)| cpc_attr_t { ca_name: n.as_ptr().cast_mut(), ca_val: a.value })
                .collect();
            // SAFETY: the application's callback; every pointer is valid for the call.
            unsafe {
                action(
                    arg,
                    index as c_int,
                    event.as_ptr(),
                    request.preset,
                    request.flags,
                    attrs.len() as c_int,
                    if attrs.is_empty() { ptr::null() } else { attrs.as_ptr() },
                )
            };
        }
        Ok(())
    })
}

/// Runs a bind of `set` of handle `cpc`, reporting its failure through the handle.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
unsafe fn bind(
    op: &'static str,
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    body: impl FnOnce(&crate::Cpc, &mut Set) -> crate::Result<()>,
) -> c_int {
    // SAFETY: NULL or a live handle, by the caller's promise.
    let h = unsafe { handle(op, cpc) }.ok();
    status(h, || {
        let h = h.ok_or_else(|| Error::invalid(op, "the cpc handle is NULL"))?;
        // SAFETY: one thread uses a set at a time.
        let set = unsafe { set_of(op, h, set)? };
        body(&h.cpc, set)
    })
}

/// Binds the set to the calling thread (`flags`: `CPC_BIND_LWP_INHERIT`, `CPC_BIND_MULTIPLEX`).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_bind_curlwp(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    flags: c_uint,
) -> c_int {
    // SAFETY: forwarded promise.
    unsafe { bind("cpc_bind_curlwp", cpc, set, |c, s| s.bind_curlwp(c.platform(), flags)) }
}

/// Binds the set to processor `id` (`flags` 0 or `CPC_BIND_MULTIPLEX`); the calling thread runs on that processor
/// until `cpc_unbind` (Linux host).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_bind_cpu(
    cpc: *mut cpc_t,
    id: c_int,
    set: *mut cpc_set_t,
    flags: c_uint,
) -> c_int {
    // SAFETY: forwarded promise.
    unsafe { bind("cpc_bind_cpu", cpc, set, |c, s| s.bind_cpu(c.platform(), id, flags)) }
}

/// Releases the set's counters; -1 with `EINVAL` if it is not bound.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_unbind(cpc: *mut cpc_t, set: *mut cpc_set_t) -> c_int {
    // SAFETY: forwarded promise.
    unsafe { bind("cpc_unbind", cpc, set, |_, s| s.unbind()) }
}

/// Sets the preset of request `index` of the calling thread's set for the next
/// `cpc_set_restart`; -1 with `EINVAL` if the thread has no set or no such request.
#[unsafe(no_mangle)]
pub extern "C" fn cpc_request_preset(_cpc: *mut cpc_t, index: c_int, preset: u64) -> c_int {
    status(None, || crate::request_preset(index, preset))
}

/// Oracle Solaris' `cpc_set_request_preset`: sets the preset of request `index` of `set`, used
/// from its next bind, and (when the set is the calling thread's bound set) from its next
/// `cpc_set_restart`.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_set_request_preset(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    index: c_int,
    preset: u64,
) -> c_int {
    const OP: &str = "cpc_set_request_preset";
    // SAFETY: forwarded promise.
    unsafe {
        bind(OP, cpc, set, |_, s| {
            let request = usize::try_from(index).ok().and_then(|i| s.requests.get_mut(i));
            let request =
                request.ok_or_else(|| Error::invalid(OP, format!("no request {index}")))?;
            request.preset = preset;
            if s.is_bound() {
                let _ = crate::request_preset(index, preset);
            }
            Ok(())
        })
    }
}

/// Restarts the calling thread's set from its presets; safe in a signal handler that
/// interrupted no libcpc call of the same thread.
#[unsafe(no_mangle)]
pub extern "C" fn cpc_set_restart(_cpc: *mut cpc_t, _set: *mut cpc_set_t) -> c_int {
    status(None, crate::set_restart)
}

/// Resumes counting of the calling thread's set.
#[unsafe(no_mangle)]
pub extern "C" fn cpc_enable(_cpc: *mut cpc_t) -> c_int {
    status(None, crate::enable)
}

/// Stops counting of the calling thread's set, keeping its values.
#[unsafe(no_mangle)]
pub extern "C" fn cpc_disable(_cpc: *mut cpc_t) -> c_int {
    status(None, crate::disable)
}
