//! The handle: `cpc_open`, `cpc_close`, the processor queries, the error handler and the event
//! and attribute walkers.

use std::collections::BTreeSet;
use std::ffi::{CString, c_char, c_int, c_uint, c_void};
use std::ptr;

use super::{cpc_t, guard, handle, register, status, unregister};
use crate::error::Error;
use crate::{Buf, Cpc, Set};

/// `cpc_errhndlr_t`.
#[allow(non_camel_case_types)]
pub type cpc_errhndlr_t = unsafe extern "C" fn(*const c_char, c_int, *const c_char, *mut c_void);

/// Opens the library: NULL with `EINVAL` unless `ver` is `CPC_VER_CURRENT`, or with the host's
/// errno when it offers no counters.
#[unsafe(no_mangle)]
pub extern "C" fn cpc_open(ver: c_int) -> *mut cpc_t {
    guard(None, ptr::null_mut(), || {
        let cpc = Cpc::open(ver)?;
        let text = |s: &str| CString::new(s.replace('\0', " ")).unwrap_or_default();
        Ok(register(Box::new(cpc_t {
            cciname: text(cpc.cciname()),
            cpuref: text(cpc.cpuref()),
            cpc,
            lists: Default::default(),
        })))
    })
}

/// Closes the handle: unbinds and destroys its sets, destroys its buffers. Returns 0 (-1 with
/// `EINVAL` for a NULL or closed handle).
///
/// # Safety
///
/// No other thread may use `cpc` meanwhile; nothing of it is used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_close(cpc: *mut cpc_t) -> c_int {
    status(None, || {
        // SAFETY: by the caller's promise, no other thread uses the handle.
        let h = unsafe { unregister("cpc_close", cpc)? };
        let lists = std::mem::take(&mut *h.lists());
        for set in lists.sets {
            // SAFETY: every set on the list is a Box<Set> of this handle.
            drop(unsafe { Box::from_raw(set as *mut Set) });
        }
        for buf in lists.bufs {
            // SAFETY: every buffer on the list is a Box<Buf> of this handle.
            drop(unsafe { Box::from_raw(buf as *mut Buf) });
        }
        Ok(())
    })
}

/// The number of counters (0 for a NULL handle).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_npic(cpc: *mut cpc_t) -> c_uint {
    // SAFETY: NULL or a live handle, by the caller's promise.
    guard(None, 0, || Ok(unsafe { handle("cpc_npic", cpc)? }.cpc.npic()))
}

/// The `CPC_CAP_*` capabilities (0 for a NULL handle).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_caps(cpc: *mut cpc_t) -> c_uint {
    // SAFETY: NULL or a live handle, by the caller's promise.
    guard(None, 0, || Ok(unsafe { handle("cpc_caps", cpc)? }.cpc.caps()))
}

/// The name of the counter interface; the handle owns it ("" for a NULL handle).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_cciname(cpc: *mut cpc_t) -> *const c_char {
    // SAFETY: NULL or a live handle, by the caller's promise.
    guard(None, c"".as_ptr(), || Ok(unsafe { handle("cpc_cciname", cpc)? }.cciname.as_ptr()))
}

/// Where the events are documented; the handle owns it ("" for a NULL handle).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_cpuref(cpc: *mut cpc_t) -> *const c_char {
    // SAFETY: NULL or a live handle, by the caller's promise.
    guard(None, c"".as_ptr(), || Ok(unsafe { handle("cpc_cpuref", cpc)? }.cpuref.as_ptr()))
}

/// Sets the handle's error handler (NULL: print to standard error). Returns 0.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one; `fn_` NULL or a function of type `cpc_errhndlr_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_seterrhndlr(cpc: *mut cpc_t, fn_: Option<cpc_errhndlr_t>) -> c_int {
    status(None, || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle("cpc_seterrhndlr", cpc)? };
        h.lists().handler = fn_.map(|f| f as usize);
        Ok(())
    })
}

/// Whether `name` is a generic event (it starts with `PAPI`).
fn is_generic(name: &str) -> bool {
    name.starts_with("PAPI")
}

/// The names of PIC `pic`, platform or generic, in list order.
fn pic_names(cpc: &Cpc, pic: usize, generic: bool) -> Vec<String> {
    let p = &cpc.platform().pics[pic];
    let names = p.events.iter().cloned().chain(p.generics.iter().map(|(g, _)| g.to_string()));
    names.filter(|n| is_generic(n) == generic).collect()
}

/// Calls `action(arg, name)` once per distinct name over all PICs.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one; `action` a valid function.
pub(super) unsafe fn walk_all(
    op: &'static str,
    cpc: *mut cpc_t,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
    generic: bool,
) {
    guard(None, (), || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(op, cpc)? };
        let action = action.ok_or_else(|| Error::invalid(op, "action is NULL"))?;
        let mut names = BTreeSet::new();
        for pic in 0..h.cpc.platform().pics.len() {
            names.extend(pic_names(&h.cpc, pic, generic));
        }
        for name in names {
            let name = CString::new(name).unwrap_or_default();
            // SAFETY: the application's callback, with its own argument and a string valid
            // for the call.
            unsafe { action(arg, name.as_ptr()) };
        }
        Ok(())
    })
}

/// Calls `action(arg, picno, name)` once per name of PIC `picno`; `errno` `EINVAL` for a PIC
/// past the last.
///
/// # Safety
///
/// As [`walk_all`].
pub(super) unsafe fn walk_pic(
    op: &'static str,
    cpc: *mut cpc_t,
    picno: c_uint,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(*mut c_void, c_uint, *const c_char)>,
    generic: bool,
    sampling: bool,
) {
    guard(None, (), || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(op, cpc)? };
        let action = action.ok_or_else(|| Error::invalid(op, "action is NULL"))?;
        let units = if sampling { crate::smpl::SMPL_NPIC } else { h.cpc.npic() };
        if picno >= units {
            return Err(Error::invalid(op, format!("no counter {picno}")));
        }
        let names = if sampling {
            // The sampling unit samples whatever a counter counts.
            let all: BTreeSet<String> = (0..h.cpc.platform().pics.len())
                .flat_map(|p| pic_names(&h.cpc, p, generic))
                .collect();
            all.into_iter().collect()
        } else {
            pic_names(&h.cpc, picno as usize, generic)
        };
        for name in names {
            let name = CString::new(name).unwrap_or_default();
            // SAFETY: as in walk_all.
            unsafe { action(arg, picno, name.as_ptr()) };
        }
        Ok(())
    })
}

/// Walks every platform event of every counter, each name once.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one; `action` NULL or a valid function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_walk_events_all(
    cpc: *mut cpc_t,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
) {
    // SAFETY: forwarded promises.
    unsafe { walk_all("cpc_walk_events_all", cpc, arg, action, false) }
}

/// Walks every generic (`PAPI_*`) event of every counter, each name once.
///
/// # Safety
///
/// As [`cpc_walk_events_all`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_walk_generic_events_all(
    cpc: *mut cpc_t,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
) {
    // SAFETY: forwarded promises.
    unsafe { walk_all("cpc_walk_generic_events_all", cpc, arg, action, true) }
}

/// Walks the platform events of counter `picno`.
///
/// # Safety
///
/// As [`cpc_walk_events_all`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_walk_events_pic(
    cpc: *mut cpc_t,
    picno: c_uint,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(*mut c_void, c_uint, *const c_char)>,
) {
    // SAFETY: forwarded promises.
    unsafe { walk_pic("cpc_walk_events_pic", cpc, picno, arg, action, false, false) }
}

/// Walks the generic events of counter `picno`.
///
/// # Safety
///
/// As [`cpc_walk_events_all`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_walk_generic_events_pic(
    cpc: *mut cpc_t,
    picno: c_uint,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(*mut c_void, c_uint, *const c_char)>,
) {
    // SAFETY: forwarded promises.
    unsafe { walk_pic("cpc_walk_generic_events_pic", cpc, picno, arg, action, true, false) }
}

/// Walks the attribute names, `picnum` last.
///
/// # Safety
///
/// As [`cpc_walk_events_all`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_walk_attrs(
    cpc: *mut cpc_t,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
) {
    // SAFETY: forwarded promises.
    unsafe { walk_attrs("cpc_walk_attrs", cpc, arg, action, false) }
}

/// Calls `action(arg, name)` for every attribute of counter requests, or (`sampling`) of SMPL
/// requests.
///
/// # Safety
///
/// As [`walk_all`].
pub(super) unsafe fn walk_attrs(
    op: &'static str,
    cpc: *mut cpc_t,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
    sampling: bool,
) {
    guard(None, (), || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(op, cpc)? };
        let action = action.ok_or_else(|| Error::invalid(op, "action is NULL"))?;
        let smpl_attrs = [crate::smpl::SMPL_NRECS, crate::consts::PICNUM];
        let names: &[&str] = if sampling { &smpl_attrs } else { &h.cpc.platform().attrs };
        for name in names {
            let name = CString::new(*name).unwrap_or_default();
            // SAFETY: as in walk_all.
            unsafe { action(arg, name.as_ptr()) };
        }
        Ok(())
    })
}

/// Nanoseconds of `CLOCK_MONOTONIC`, the clock of `cpc_buf_hrtime` (Solaris' `gethrtime(3C)`,
/// which Linux lacks).
#[unsafe(no_mangle)]
pub extern "C" fn gethrtime() -> i64 {
    crate::buf::gethrtime()
}
