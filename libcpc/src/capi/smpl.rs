//! The SMPL (hardware sampling) functions of Oracle Solaris 11.4 and the `_common` walkers
//! with a target (reference §6; the choices are in [`crate::smpl`]).

use std::ffi::{CString, c_char, c_int, c_uint, c_void};
use std::ptr;

use super::handle::{walk_all, walk_attrs, walk_pic};
use super::{buf_of, cpc_buf_t, cpc_set_t, cpc_t, guard, handle, set_of, status};
use crate::error::Error;
use crate::smpl::{MAX_RECORDS, RECORD_ITEMS, SMPL_NPIC};

/// `target` of the `_common` walkers: counter requests. (Oracle publishes no name or value;
/// this one is libcpc's own.)
pub const CPC_TARGET_CPC: c_int = 0;
/// `target` of the `_common` walkers: SMPL requests (libcpc's own name and value).
pub const CPC_TARGET_SMPL: c_int = 1;

/// The number of sampling units (1; 0 for a NULL handle).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_smpl_npic(cpc: *mut cpc_t) -> c_uint {
    // SAFETY: NULL or a live handle, by the caller's promise.
    guard(None, 0, || unsafe { handle("cpc_smpl_npic", cpc) }.map(|_| SMPL_NPIC))
}

/// The name of the sampling facility ("" for a NULL handle).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_smpl_iname(cpc: *mut cpc_t) -> *const c_char {
    const NAME: &std::ffi::CStr = c"libpmc sampling PMCs: the instruction pointer every n-th event";
    // SAFETY: NULL or a live handle, by the caller's promise.
    guard(None, c"".as_ptr(), || unsafe { handle("cpc_smpl_iname", cpc) }.map(|_| NAME.as_ptr()))
}

/// The largest `smpl_nrecs` (Oracle's man-page spelling).
#[unsafe(no_mangle)]
pub extern "C" fn cpc_get_smpl_max_rec_count(_cpc: *mut cpc_t) -> c_uint {
    MAX_RECORDS
}

/// The largest `smpl_nrecs` (the seed page's spelling).
#[unsafe(no_mangle)]
pub extern "C" fn cpc_get_max_smpl_rec_count(_cpc: *mut cpc_t) -> c_uint {
    MAX_RECORDS
}

type ItemFn = unsafe extern "C" fn(*mut c_void, *const c_char, c_int);

/// Calls `action(arg, name, index)` for each item of a record.
fn walk_items(op: &'static str, arg: *mut c_void, action: Option<ItemFn>) -> crate::Result<()> {
    let action = action.ok_or_else(|| Error::invalid(op, "action is NULL"))?;
    for (index, name) in RECORD_ITEMS.iter().enumerate() {
        let name = CString::new(*name).unwrap_or_default();
        // SAFETY: the application's callback; the name is valid for the call.
        unsafe { action(arg, name.as_ptr(), index as c_int) };
    }
    Ok(())
}

/// Walks the items of an SMPL record: `"ip"` (index 0).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one; `action` NULL or a valid function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_walk_smpl_recitems(
    cpc: *mut cpc_t,
    arg: *mut c_void,
    action: Option<ItemFn>,
) {
    const OP: &str = "cpc_walk_smpl_recitems";
    guard(None, (), || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        unsafe { handle(OP, cpc)? };
        walk_items(OP, arg, action)
    })
}

/// Walks the items of SMPL request `request_index` of `set`; `errno` `EINVAL` (no calls) if it
/// is no SMPL request.
///
/// # Safety
///
/// As [`cpc_walk_smpl_recitems`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_walk_smpl_recitems_req(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    request_index: c_int,
    arg: *mut c_void,
    action: Option<ItemFn>,
) {
    const OP: &str = "cpc_walk_smpl_recitems_req";
    guard(None, (), || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(OP, cpc)? };
        // SAFETY: one thread uses a set at a time.
        let set = unsafe { set_of(OP, h, set)? };
        let request = usize::try_from(request_index).ok().and_then(|i| set.requests().get(i));
        if !request.is_some_and(|r| r.is_smpl()) {
            return Err(Error::invalid(OP, format!("request {request_index} is no SMPL request")));
        }
        walk_items(OP, arg, action)
    })
}

/// The records of SMPL request `request_index` in buffer `buf` of handle `cpc`.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
unsafe fn records<'a>(
    op: &'static str,
    cpc: *mut cpc_t,
    buf: *mut cpc_buf_t,
    request_index: c_int,
) -> crate::Result<&'a [u64]> {
    // SAFETY: NULL or a live handle, by the caller's promise.
    let h = unsafe { handle(op, cpc)? };
    // SAFETY: one thread uses a buffer at a time.
    let buf = unsafe { buf_of(op, h, buf)? };
    let records = usize::try_from(request_index).ok().and_then(|i| buf.smpl_records(i));
    records.ok_or_else(|| Error::invalid(op, format!("request {request_index} is no SMPL request")))
}

/// Stores the number of records of SMPL request `request_index` in `*rec_count`; -1 with
/// `EINVAL` for a request that is not one.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one; `rec_count` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_buf_smpl_rec_count(
    cpc: *mut cpc_t,
    buf: *mut cpc_buf_t,
    request_index: c_int,
    rec_count: *mut c_uint,
) -> c_int {
    const OP: &str = "cpc_buf_smpl_rec_count";
    status(None, || {
        // SAFETY: forwarded promise.
        let count = unsafe { records(OP, cpc, buf, request_index)? }.len() as c_uint;
        if rec_count.is_null() {
            return Err(Error::invalid(OP, "rec_count is NULL"));
        }
        // SAFETY: non-null and writable by the caller's promise.
        unsafe { rec_count.write_unaligned(count) };
        Ok(())
    })
}

/// Stores item `record_item_index` of record `record_index` of SMPL request `request_index` in
/// `*val`; -1 with `EINVAL` for any index out of range.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one; `val` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_buf_smpl_get_item(
    cpc: *mut cpc_t,
    buf: *mut cpc_buf_t,
    request_index: c_int,
    record_index: c_int,
    record_item_index: c_int,
    val: *mut u64,
) -> c_int {
    const OP: &str = "cpc_buf_smpl_get_item";
    status(None, || {
        // SAFETY: forwarded promise.
        let records = unsafe { records(OP, cpc, buf, request_index)? };
        let record = usize::try_from(record_index).ok().and_then(|i| records.get(i));
        let record =
            record.ok_or_else(|| Error::invalid(OP, format!("no record {record_index}")))?;
        if record_item_index != 0 {
            return Err(Error::invalid(
                OP,
                format!("no item {record_item_index}: a record has only \"ip\" (0)"),
            ));
        }
        if val.is_null() {
            return Err(Error::invalid(OP, "val is NULL"));
        }
        // SAFETY: non-null and writable by the caller's promise.
        unsafe { val.write_unaligned(*record) };
        Ok(())
    })
}

/// Record `record_index` of SMPL request `request_index`: its items, valid until the buffer is
/// next written or destroyed; NULL with `EINVAL` for an index out of range.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_buf_smpl_get_record(
    cpc: *mut cpc_t,
    buf: *mut cpc_buf_t,
    request_index: c_int,
    record_index: c_int,
) -> *mut u64 {
    const OP: &str = "cpc_buf_smpl_get_record";
    guard(None, ptr::null_mut(), || {
        // SAFETY: forwarded promise.
        let records = unsafe { records(OP, cpc, buf, request_index)? };
        let record = usize::try_from(record_index).ok().and_then(|i| records.get(i));
        let record =
            record.ok_or_else(|| Error::invalid(OP, format!("no record {record_index}")))?;
        Ok(ptr::from_ref(record).cast_mut())
    })
}

fn sampling(op: &'static str, target: c_int) -> crate::Result<bool> {
    match target {
        CPC_TARGET_CPC => Ok(false),
        CPC_TARGET_SMPL => Ok(true),
        _ => Err(Error::invalid(
            op,
            format!("target {target}: CPC_TARGET_CPC (0) or CPC_TARGET_SMPL (1)"),
        )),
    }
}

/// `cpc_walk_events_all` for counter (`CPC_TARGET_CPC`) or SMPL (`CPC_TARGET_SMPL`) requests;
/// `errno` `EINVAL` for another target.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one; `action` NULL or a valid function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_walk_events_all_common(
    cpc: *mut cpc_t,
    arg: *mut c_void,
    target: c_int,
    action: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
) {
    const OP: &str = "cpc_walk_events_all_common";
    // The sampling unit samples every event a counter counts: the same list.
    if guard(None, false, || sampling(OP, target).map(|_| true)) {
        // SAFETY: forwarded promises.
        unsafe { walk_all(OP, cpc, arg, action, false) }
    }
}

/// `cpc_walk_events_pic` for counter or SMPL requests (`picno` below `cpc_smpl_npic` then).
///
/// # Safety
///
/// As [`cpc_walk_events_all_common`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_walk_events_pic_common(
    cpc: *mut cpc_t,
    picno: c_uint,
    arg: *mut c_void,
    target: c_int,
    action: Option<unsafe extern "C" fn(*mut c_void, c_uint, *const c_char)>,
) {
    const OP: &str = "cpc_walk_events_pic_common";
    if let Some(sampling) = guard(None, None, || sampling(OP, target).map(Some)) {
        // SAFETY: forwarded promises.
        unsafe { walk_pic(OP, cpc, picno, arg, action, false, sampling) }
    }
}

/// `cpc_walk_attrs` for counter or SMPL requests (`smpl_nrecs`, `picnum`).
///
/// # Safety
///
/// As [`cpc_walk_events_all_common`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_walk_attrs_common(
    cpc: *mut cpc_t,
    arg: *mut c_void,
    target: c_int,
    action: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
) {
    const OP: &str = "cpc_walk_attrs_common";
    if let Some(sampling) = guard(None, None, || sampling(OP, target).map(Some)) {
        // SAFETY: forwarded promises.
        unsafe { walk_attrs(OP, cpc, arg, action, sampling) }
    }
}
