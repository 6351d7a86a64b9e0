//! Buffers: creation, sampling into them and their arithmetic.

use std::ffi::c_int;
use std::ptr;

use super::{buf_of, cpc_buf_t, cpc_set_t, cpc_t, guard, handle, set_of, status};
use crate::Buf;
use crate::error::Error;

/// A zeroed buffer sized for the set's requests now, or NULL with `EINVAL`.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_buf_create(cpc: *mut cpc_t, set: *mut cpc_set_t) -> *mut cpc_buf_t {
    const OP: &str = "cpc_buf_create";
    guard(None, ptr::null_mut(), || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(OP, cpc)? };
        // SAFETY: one thread uses a set at a time.
        let set = unsafe { set_of(OP, h, set)? };
        let buf = Box::into_raw(Box::new(Buf::for_set(set)));
        h.lists().bufs.push(buf as usize);
        Ok(buf)
    })
}

/// Destroys a buffer of the handle; -1 with `EINVAL` if it is not the handle's.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one; `buf` is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_buf_destroy(cpc: *mut cpc_t, buf: *mut cpc_buf_t) -> c_int {
    const OP: &str = "cpc_buf_destroy";
    status(None, || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(OP, cpc)? };
        let mut lists = h.lists();
        let at = lists.bufs.iter().position(|&b| b == buf as usize);
        let at =
            at.ok_or_else(|| Error::invalid(OP, "the buffer was not created with this handle"))?;
        lists.bufs.swap_remove(at);
        drop(lists);
        // SAFETY: it was on the list: a Box<Buf> of ours, now off the list.
        drop(unsafe { Box::from_raw(buf) });
        Ok(())
    })
}

/// Samples the bound set into `buf`: -1 with `EINVAL` (unbound set, buffer of another size),
/// `EAGAIN` (invalidated by a CPU bind).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_set_sample(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    buf: *mut cpc_buf_t,
) -> c_int {
    const OP: &str = "cpc_set_sample";
    status(None, || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(OP, cpc)? };
        // SAFETY: one thread uses a set and a buffer at a time.
        let (set, buf) = unsafe { (set_of(OP, h, set)?, buf_of(OP, h, buf)?) };
        set.sample(buf)
    })
}

/// The buffers `a` and `b` of handle `cpc`, copied (so that the destination may alias them).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
unsafe fn operands(
    op: &'static str,
    cpc: *mut cpc_t,
    a: *mut cpc_buf_t,
    b: *mut cpc_buf_t,
) -> crate::Result<(Buf, Buf)> {
    // SAFETY: NULL or a live handle, by the caller's promise.
    let h = unsafe { handle(op, cpc)? };
    // SAFETY: only read, and copied before anything is written.
    let (a, b) = unsafe { (buf_of(op, h, a)?.clone(), buf_of(op, h, b)?.clone()) };
    Ok((a, b))
}

/// Stores `value` in buffer `ds` of handle `cpc` if `value` is `Some`.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
unsafe fn store(
    op: &'static str,
    cpc: *mut cpc_t,
    ds: *mut cpc_buf_t,
    value: Option<Buf>,
) -> crate::Result<()> {
    // SAFETY: NULL or a live handle, by the caller's promise.
    let h = unsafe { handle(op, cpc)? };
    // SAFETY: one thread uses a buffer at a time; no other reference to it is live.
    let ds = unsafe { buf_of(op, h, ds)? };
    if let Some(value) = value {
        ds.copy_from(&value);
    }
    Ok(())
}

/// `ds = a − b` (values wrap; tick difference; the later hrtime) when all three have the same
/// size; otherwise nothing. `ds` may be `a` or `b`.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_buf_sub(
    cpc: *mut cpc_t,
    ds: *mut cpc_buf_t,
    a: *mut cpc_buf_t,
    b: *mut cpc_buf_t,
) {
    const OP: &str = "cpc_buf_sub";
    guard(None, (), || {
        // SAFETY: forwarded promise.
        let (a, b) = unsafe { operands(OP, cpc, a, b)? };
        // SAFETY: forwarded promise.
        unsafe { store(OP, cpc, ds, Buf::sub(&a, &b)) }
    })
}

/// `ds = a + b`, as [`cpc_buf_sub`].
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_buf_add(
    cpc: *mut cpc_t,
    ds: *mut cpc_buf_t,
    a: *mut cpc_buf_t,
    b: *mut cpc_buf_t,
) {
    const OP: &str = "cpc_buf_add";
    guard(None, (), || {
        // SAFETY: forwarded promise.
        let (a, b) = unsafe { operands(OP, cpc, a, b)? };
        // SAFETY: forwarded promise.
        unsafe { store(OP, cpc, ds, Buf::add(&a, &b)) }
    })
}

/// Copies `src` into `ds` when their sizes match.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_buf_copy(cpc: *mut cpc_t, ds: *mut cpc_buf_t, src: *mut cpc_buf_t) {
    const OP: &str = "cpc_buf_copy";
    guard(None, (), || {
        // SAFETY: forwarded promise.
        let (src, _) = unsafe { operands(OP, cpc, src, src)? };
        // SAFETY: forwarded promise.
        unsafe { store(OP, cpc, ds, Some(src)) }
    })
}

/// Zeroes a buffer.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_buf_zero(cpc: *mut cpc_t, buf: *mut cpc_buf_t) {
    const OP: &str = "cpc_buf_zero";
    guard(None, (), || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(OP, cpc)? };
        // SAFETY: one thread uses a buffer at a time.
        unsafe { buf_of(OP, h, buf)? }.zero();
        Ok(())
    })
}

/// Stores value `index` of the buffer in `*val`; -1 with `EINVAL` for an index outside it.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one; `val` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_buf_get(
    cpc: *mut cpc_t,
    buf: *mut cpc_buf_t,
    index: c_int,
    val: *mut u64,
) -> c_int {
    const OP: &str = "cpc_buf_get";
    status(None, || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(OP, cpc)? };
        // SAFETY: one thread uses a buffer at a time.
        let buf = unsafe { buf_of(OP, h, buf)? };
        let value = usize::try_from(index).ok().and_then(|i| buf.get(i));
        let value =
            value.ok_or_else(|| Error::invalid(OP, format!("no value {index} in the buffer")))?;
        if val.is_null() {
            return Err(Error::invalid(OP, "val is NULL"));
        }
        // SAFETY: non-null and writable by the caller's promise.
        unsafe { val.write_unaligned(value) };
        Ok(())
    })
}

/// Sets value `index` of the buffer; -1 with `EINVAL` for an index outside it.
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_buf_set(
    cpc: *mut cpc_t,
    buf: *mut cpc_buf_t,
    index: c_int,
    val: u64,
) -> c_int {
    const OP: &str = "cpc_buf_set";
    status(None, || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(OP, cpc)? };
        // SAFETY: one thread uses a buffer at a time.
        let buf = unsafe { buf_of(OP, h, buf)? };
        let stored = usize::try_from(index).is_ok_and(|i| buf.set(i, val));
        if stored {
            Ok(())
        } else {
            Err(Error::invalid(OP, format!("no value {index} in the buffer")))
        }
    })
}

/// The time of the buffer's sample (0 with `errno` `EINVAL` for a foreign buffer).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_buf_hrtime(cpc: *mut cpc_t, buf: *mut cpc_buf_t) -> i64 {
    const OP: &str = "cpc_buf_hrtime";
    guard(None, 0, || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(OP, cpc)? };
        // SAFETY: one thread uses a buffer at a time.
        Ok(unsafe { buf_of(OP, h, buf)? }.hrtime())
    })
}

/// The buffer's virtualized tick (0 with `errno` `EINVAL` for a foreign buffer).
///
/// # Safety
///
/// `cpc` must be NULL, a closed handle or a live one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cpc_buf_tick(cpc: *mut cpc_t, buf: *mut cpc_buf_t) -> u64 {
    const OP: &str = "cpc_buf_tick";
    guard(None, 0, || {
        // SAFETY: NULL or a live handle, by the caller's promise.
        let h = unsafe { handle(OP, cpc)? };
        // SAFETY: one thread uses a buffer at a time.
        Ok(unsafe { buf_of(OP, h, buf)? }.tick())
    })
}
