//! The pmclog(3) C API: `pmclog_open`, `pmclog_feed`, `pmclog_read`, `pmclog_close` and
//! `struct pmclog_ev`, laid out as FreeBSD's `lib/libpmc/pmclog.h` has them on amd64.
//!
//! Built with the `capi` feature; libpmc exports these symbols. The parser is the crate's
//! [`StreamDecoder`]; this module adds the C types, the file-descriptor input and the copying of
//! each record into `struct pmclog_ev`.
//!
//! Where FreeBSD is vague or does something a caller cannot want, this implementation decides:
//!
//! * **CLOSELOG** ends the log: `pmclog_read` returns -1 with `PMCLOG_EOF` for it (as newer libpmc
//!   does) and reads nothing after it. `pl_offset` and `pl_count` stay those of the last real
//!   record (the end of the log before CLOSELOG, as FreeBSD's reader leaves them); the record's
//!   `pl_ts`, `pl_type`, `pl_len` and `pl_data` are filled.
//! * **End of file between records** (a `read` that returns 0) gives `PMCLOG_EOF` but is not
//!   final: the next `pmclog_read` reads the descriptor again, so a log that is still being written
//!   can be followed, as with FreeBSD.
//! * **End of file inside a record** gives `PMCLOG_ERROR` with `errno` `EINVAL`, and the parser
//!   stays in error. FreeBSD reports `PMCLOG_EOF` there and so hides a truncated log.
//! * **A failed `read`** other than `EAGAIN` gives `PMCLOG_ERROR` with the read's `errno` but, as in
//!   FreeBSD, is not final: the next call tries again. `EINTR` is retried at once (FreeBSD reports
//!   it as an error).
//! * **PMCALLOCATE names**: `pl_a.pl_evname` is FreeBSD's name of a static event. A PMU-table event
//!   (`PMC_F_EV_PMU`) is named `EV_PMU_0x<index>` and any other event this crate does not know
//!   `UNKNOWN_EVENT_0x<event>` (hex digits in lower case). FreeBSD's parser fails the whole log on an
//!   event it cannot name; this one keeps going. The string stays valid until `pmclog_close`
//!   (FreeBSD's are static), except past the first 4096 distinct names, which only a hostile log
//!   has: those last until the next `pmclog_read`.
//! * **Memory mode**: once `pmclog_read` returns -1, the parser no longer looks at the bytes fed to
//!   it (pmclog(3) lets the caller free them then), so after CLOSELOG or an error the rest of them
//!   is dropped, and `pmclog_feed` accepts (and the parser ignores) further data.
//! * `pl_ts` holds the record's 64-bit TSC in `tv_sec` (as upstream stores it) and 0 in `tv_nsec`.
//! * `pl_cc.pl_cpuflags2` is always 0.
//! * `pmclog_close` does not close the descriptor given to `pmclog_open`, and a second
//!   `pmclog_close` of the same cookie does nothing (`EINVAL`) instead of corrupting the heap.
//!
//! No panic crosses into C: every entry point catches it and fails with -1 (or NULL), and a parser
//! that panicked stays in error.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::ptr;
use std::alloc::Layout;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::handles::HandleTable;
use crate::names::{PMC_F_EV_PMU, event_name};
use crate::{
    CALLCHAIN_DEPTH_MAX, COMM_LEN, Entry, MAX_RECORD_LEN, NAME_MAX, PATH_MAX, Record, Step,
    StreamDecoder,
};

// ---------------------------------------------------------------------------------------------
// The C types.

/// `enum pmclog_state`: what `pmclog_read` found (`pl_state`).
pub type pmclog_state = c_uint;
/// A complete record was read into the event.
pub const PMCLOG_OK: pmclog_state = 0;
/// The log is over: a file descriptor read returned 0 between records, or CLOSELOG was read.
pub const PMCLOG_EOF: pmclog_state = 1;
/// The input is used up: feed more (memory mode) or retry when the descriptor has data.
pub const PMCLOG_REQUIRE_DATA: pmclog_state = 2;
/// The log is malformed or a read failed; `errno` says which.
pub const PMCLOG_ERROR: pmclog_state = 3;

/// The `fd` to give `pmclog_open` for a parser fed from memory with `pmclog_feed`.
pub const PMCLOG_FD_NONE: c_int = -1;

/// `enum pmclog_type`: the kind of a record (`pl_type`).
pub type pmclog_type = c_uint;
/// The log was closed.
pub const PMCLOG_TYPE_CLOSELOG: pmclog_type = 1;
/// hwpmc(4) had to drop data.
pub const PMCLOG_TYPE_DROPNOTIFY: pmclog_type = 2;
/// The first record of a log.
pub const PMCLOG_TYPE_INITIALIZE: pmclog_type = 3;
/// A retired slot: no current kernel writes it and the parser rejects it.
pub const PMCLOG_TYPE_MAPPINGCHANGE: pmclog_type = 4;
/// A PMC was allocated.
pub const PMCLOG_TYPE_PMCALLOCATE: pmclog_type = 5;
/// A PMC was attached to a process.
pub const PMCLOG_TYPE_PMCATTACH: pmclog_type = 6;
/// A PMC was detached from a process.
pub const PMCLOG_TYPE_PMCDETACH: pmclog_type = 7;
/// A process PMC's count at a context switch.
pub const PMCLOG_TYPE_PROCCSW: pmclog_type = 8;
/// A target process called execve(2).
pub const PMCLOG_TYPE_PROCEXEC: pmclog_type = 9;
/// A target process exited.
pub const PMCLOG_TYPE_PROCEXIT: pmclog_type = 10;
/// A target process forked.
pub const PMCLOG_TYPE_PROCFORK: pmclog_type = 11;
/// A process exited (for owners of system sampling PMCs).
pub const PMCLOG_TYPE_SYSEXIT: pmclog_type = 12;
/// Data written with PMC_OP_WRITELOG.
pub const PMCLOG_TYPE_USERDATA: pmclog_type = 13;
/// An executable mapping appeared.
pub const PMCLOG_TYPE_MAP_IN: pmclog_type = 14;
/// An executable mapping went away.
pub const PMCLOG_TYPE_MAP_OUT: pmclog_type = 15;
/// A sample and its call chain.
pub const PMCLOG_TYPE_CALLCHAIN: pmclog_type = 16;
/// A PMC of a dynamic (SOFT) event was allocated.
pub const PMCLOG_TYPE_PMCALLOCATEDYN: pmclog_type = 17;
/// A thread was created.
pub const PMCLOG_TYPE_THR_CREATE: pmclog_type = 18;
/// A thread exited.
pub const PMCLOG_TYPE_THR_EXIT: pmclog_type = 19;
/// A process was created.
pub const PMCLOG_TYPE_PROC_CREATE: pmclog_type = 20;

/// `pid_t`.
pub type pid_t = i32;
/// `lwpid_t`.
pub type lwpid_t = i32;
/// `pmc_id_t`.
pub type pmc_id_t = u32;
/// `pmc_value_t`.
pub type pmc_value_t = u64;
/// `uintfptr_t` (a code address; 64 bits on amd64).
pub type uintfptr_t = u64;

/// `PMC_CALLCHAIN_DEPTH_MAX`: the room in `pl_cc.pl_pc`.
pub const PMC_CALLCHAIN_DEPTH_MAX: usize = CALLCHAIN_DEPTH_MAX;
/// `PMC_NAME_MAX`: the room in `pl_ad.pl_evname`.
pub const PMC_NAME_MAX: usize = NAME_MAX;
/// `MAXCOMLEN`: `pl_pc.pl_pcomm` and `pl_tc.pl_tdname` hold `MAXCOMLEN + 1` bytes.
pub const MAXCOMLEN: usize = COMM_LEN - 1;

/// CALLCHAIN (`pl_cc`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_callchain {
    /// The process.
    pub pl_pid: u32,
    /// The thread.
    pub pl_tid: u32,
    /// The PMC id.
    pub pl_pmcid: u32,
    /// `cpu << 16 | flags` (`PMC_CC_F_USERSPACE` 0x1, `PMC_CC_F_MULTIPART` 0x2).
    pub pl_cpuflags: u32,
    /// Unused; always 0.
    pub pl_cpuflags2: u32,
    /// How many entries of `pl_pc` are valid.
    pub pl_npc: u32,
    /// The sampled PC, then the return addresses.
    pub pl_pc: [uintfptr_t; PMC_CALLCHAIN_DEPTH_MAX],
}

/// CLOSELOG (`pl_cl`): no data.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_closelog {}

/// DROPNOTIFY (`pl_dn`): no data.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_dropnotify {}

/// INITIALIZE (`pl_i`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_initialize {
    /// The kernel's `PMC_VERSION`.
    pub pl_version: u32,
    /// The CPU type (`enum pmc_cputype`).
    pub pl_arch: u32,
    /// TSC frequency in Hz; 0 where there is no TSC.
    pub pl_tsc_freq: u64,
    /// Wall-clock time when the log was configured.
    pub pl_ts: libc::timespec,
    /// The `kern.hwpmc.cpuid` string, NUL-terminated.
    pub pl_cpuid: [c_char; PATH_MAX],
}

/// MAP_IN (`pl_mi`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_map_in {
    /// The process; -1 for kernel mappings.
    pub pl_pid: pid_t,
    /// Start address of the mapping.
    pub pl_start: uintfptr_t,
    /// The mapped object, NUL-terminated.
    pub pl_pathname: [c_char; PATH_MAX],
}

/// MAP_OUT (`pl_mo`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_map_out {
    /// The process.
    pub pl_pid: pid_t,
    /// Start address.
    pub pl_start: uintfptr_t,
    /// End address.
    pub pl_end: uintfptr_t,
}

/// PMCALLOCATE (`pl_a`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_pmcallocate {
    /// The event (a PMU table index when `pl_flags` has `PMC_F_EV_PMU`).
    pub pl_event: u32,
    /// The event's name, NUL-terminated, owned by the parser until `pmclog_close` (past the first
    /// 4096 distinct names of a log, only until the next `pmclog_read`).
    pub pl_evname: *const c_char,
    /// The allocation flags (`PMC_F_*`).
    pub pl_flags: u32,
    /// The PMC id.
    pub pl_pmcid: pmc_id_t,
    /// The reload count of a sampling PMC, otherwise the initial count.
    pub pl_rate: u64,
}

/// PMCALLOCATEDYN (`pl_ad`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_pmcallocatedyn {
    /// The event.
    pub pl_event: u32,
    /// The event's name, NUL-terminated.
    pub pl_evname: [c_char; PMC_NAME_MAX],
    /// The allocation flags.
    pub pl_flags: u32,
    /// The PMC id.
    pub pl_pmcid: pmc_id_t,
}

/// PMCATTACH (`pl_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_pmcattach {
    /// The PMC id.
    pub pl_pmcid: pmc_id_t,
    /// The target process.
    pub pl_pid: pid_t,
    /// The target's executable, NUL-terminated.
    pub pl_pathname: [c_char; PATH_MAX],
}

/// PMCDETACH (`pl_d`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_pmcdetach {
    /// The PMC id.
    pub pl_pmcid: pmc_id_t,
    /// The target process.
    pub pl_pid: pid_t,
}

/// PROCCSW (`pl_c`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_proccsw {
    /// The process.
    pub pl_pid: pid_t,
    /// The thread.
    pub pl_tid: pid_t,
    /// The PMC id.
    pub pl_pmcid: pmc_id_t,
    /// The count for this stay on the CPU.
    pub pl_value: pmc_value_t,
}

/// PROC_CREATE (`pl_pc`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_proccreate {
    /// The process.
    pub pl_pid: pid_t,
    /// The process's `p_flag`.
    pub pl_flags: u32,
    /// The command name, NUL-terminated.
    pub pl_pcomm: [c_char; MAXCOMLEN + 1],
}

/// PROCEXEC (`pl_x`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_procexec {
    /// The process.
    pub pl_pid: pid_t,
    /// The PMC id.
    pub pl_pmcid: pmc_id_t,
    /// AT_BASE: where the dynamic loader was loaded.
    pub pl_baseaddr: u64,
    /// The load base of a position-independent executable.
    pub pl_dynaddr: u64,
    /// The new executable, NUL-terminated.
    pub pl_pathname: [c_char; PATH_MAX],
}

/// PROCEXIT (`pl_e`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_procexit {
    /// The process.
    pub pl_pid: u32,
    /// The PMC id.
    pub pl_pmcid: pmc_id_t,
    /// The accumulated count.
    pub pl_value: pmc_value_t,
}

/// PROCFORK (`pl_f`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_procfork {
    /// The parent.
    pub pl_oldpid: pid_t,
    /// The child.
    pub pl_newpid: pid_t,
}

/// SYSEXIT (`pl_se`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_sysexit {
    /// The process.
    pub pl_pid: pid_t,
}

/// THR_CREATE (`pl_tc`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_threadcreate {
    /// The thread.
    pub pl_tid: lwpid_t,
    /// Its process.
    pub pl_pid: pid_t,
    /// The process's `p_flag`.
    pub pl_flags: u32,
    /// The thread's name, NUL-terminated.
    pub pl_tdname: [c_char; MAXCOMLEN + 1],
}

/// THR_EXIT (`pl_te`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_threadexit {
    /// The thread.
    pub pl_tid: lwpid_t,
}

/// USERDATA (`pl_u`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pmclog_ev_userdata {
    /// The word written with PMC_OP_WRITELOG.
    pub pl_userdata: u32,
}

/// The record data of `struct pmclog_ev` (C's anonymous `union { … } pl_u`); the member to read is
/// the one for `pl_type`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union pmclog_ev_u {
    /// CALLCHAIN.
    pub pl_cc: pmclog_ev_callchain,
    /// CLOSELOG.
    pub pl_cl: pmclog_ev_closelog,
    /// DROPNOTIFY.
    pub pl_dn: pmclog_ev_dropnotify,
    /// INITIALIZE.
    pub pl_i: pmclog_ev_initialize,
    /// MAP_IN.
    pub pl_mi: pmclog_ev_map_in,
    /// MAP_OUT.
    pub pl_mo: pmclog_ev_map_out,
    /// PMCALLOCATE.
    pub pl_a: pmclog_ev_pmcallocate,
    /// PMCALLOCATEDYN.
    pub pl_ad: pmclog_ev_pmcallocatedyn,
    /// PMCATTACH.
    pub pl_t: pmclog_ev_pmcattach,
    /// PMCDETACH.
    pub pl_d: pmclog_ev_pmcdetach,
    /// PROCCSW.
    pub pl_c: pmclog_ev_proccsw,
    /// PROC_CREATE.
    pub pl_pc: pmclog_ev_proccreate,
    /// PROCEXEC.
    pub pl_x: pmclog_ev_procexec,
    /// PROCEXIT.
    pub pl_e: pmclog_ev_procexit,
    /// PROCFORK.
    pub pl_f: pmclog_ev_procfork,
    /// SYSEXIT.
    pub pl_se: pmclog_ev_sysexit,
    /// THR_CREATE.
    pub pl_tc: pmclog_ev_threadcreate,
    /// THR_EXIT.
    pub pl_te: pmclog_ev_threadexit,
    /// USERDATA.
    pub pl_u: pmclog_ev_userdata,
}

/// `struct pmclog_ev`: one event as `pmclog_read` returns it. Only `pl_state` is set when the
/// call fails (except for CLOSELOG, see the module documentation).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmclog_ev {
    /// `PMCLOG_OK`, `PMCLOG_EOF`, `PMCLOG_REQUIRE_DATA` or `PMCLOG_ERROR`.
    pub pl_state: pmclog_state,
    /// Byte offset of the end of the record in the stream.
    pub pl_offset: i64,
    /// Serial number of the record, from 1.
    pub pl_count: usize,
    /// The record's 64-bit TSC in `tv_sec`; `tv_nsec` is 0.
    pub pl_ts: libc::timespec,
    /// The record's type, a `PMCLOG_TYPE_*` value.
    pub pl_type: pmclog_type,
    /// The record's raw bytes, owned by the parser until the next `pmclog_read` or `pmclog_close`.
    pub pl_data: *mut c_void,
    /// The record's length in bytes.
    pub pl_len: c_int,
    /// The record's data.
    pub pl_u: pmclog_ev_u,
}

impl Default for pmclog_ev {
    /// An all-zero event, for callers that do not want to start from uninitialized memory.
    fn default() -> Self {
        let pl_cc = pmclog_ev_callchain {
            pl_pid: 0,
            pl_tid: 0,
            pl_pmcid: 0,
            pl_cpuflags: 0,
            pl_cpuflags2: 0,
            pl_npc: 0,
            pl_pc: [0; PMC_CALLCHAIN_DEPTH_MAX],
        };
        pmclog_ev {
            pl_state: PMCLOG_OK,
            pl_offset: 0,
            pl_count: 0,
            pl_ts: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            pl_type: 0,
            pl_data: ptr::null_mut(),
            pl_len: 0,
            // pl_cc is the largest member, so this sets every byte of the union.
            pl_u: pmclog_ev_u { pl_cc },
        }
    }
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(size_of::<pmclog_ev>() == 4184 && size_of::<pmclog_ev_u>() == 4120);

// ---------------------------------------------------------------------------------------------
// The entry points.

/// Creates a parser. `fd` is a descriptor open for reading, or [`PMCLOG_FD_NONE`] for a parser
/// fed with [`pmclog_feed`]. Returns NULL if memory cannot be allocated.
///
/// # Safety
///
/// Always safe to call. If `fd` is a descriptor, it must stay open (and must not be reused for
/// another file) while the parser reads from it; the parser does not close it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmclog_open(fd: c_int) -> *mut c_void {
    match catch_unwind(|| Parser::try_new(fd)) {
        Ok(Some(parser)) => {
            PARSERS.insert(parser).map_or(ptr::null_mut(), ptr::without_provenance_mut)
        }
        _ => ptr::null_mut(),
    }
}

/// Gives a memory parser the next `len` bytes of the log at `data`. Returns 0, or -1 with `errno`
/// `EINVAL` if `cookie` is NULL, `len` is negative, the parser reads from a descriptor, or the
/// bytes given before have not all been consumed yet.
///
/// # Safety
///
/// `cookie` may be any value (NULL, a closed cookie or one `pmclog_open` never returned fail
/// with `EINVAL`). `data` must point
/// to `len` readable bytes (it may be NULL when `len` is 0), and those bytes must stay valid and
/// unchanged until [`pmclog_read`] next returns -1 (which it does with `PMCLOG_REQUIRE_DATA` once
/// they are all consumed) or the parser is closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmclog_feed(cookie: *mut c_void, data: *mut c_char, len: c_int) -> c_int {
    let Ok(len) = usize::try_from(len) else {
        return fail(libc::EINVAL);
    };
    if data.is_null() && len != 0 {
        return fail(libc::EINVAL);
    }
    let Some(mut parser) = check_out(cookie) else {
        return fail(libc::EINVAL);
    };
    let accepted = catch_unwind(AssertUnwindSafe(|| match &mut parser.input {
        Input::Memory { data: pending, len: pending_len } if *pending_len == 0 => {
            *pending = data.cast::<u8>().cast_const();
            *pending_len = len;
            true
        }
        _ => false,
    }));
    PARSERS.check_in(cookie.addr(), parser);
    if matches!(accepted, Ok(true)) { 0 } else { fail(libc::EINVAL) }
}

/// Reads the next record into `*ev`. Returns 0 with `pl_state` `PMCLOG_OK`, or -1 with `pl_state`
/// `PMCLOG_REQUIRE_DATA` (the input is used up; with a descriptor, its read failed with `EAGAIN`),
/// `PMCLOG_EOF` (see the module documentation) or `PMCLOG_ERROR` (`errno` is `EINVAL` for a
/// malformed log, or the failed read's error). Returns -1 with `errno` `EINVAL`, touching nothing,
/// if `cookie` or `ev` is NULL.
///
/// # Safety
///
/// `cookie` may be any value (NULL, a closed cookie or one `pmclog_open` never returned fail
/// with `EINVAL`; so does a cookie another thread's call is using). `ev` must be NULL or point
/// to writable memory for a `struct pmclog_ev`; it need not be initialized.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmclog_read(cookie: *mut c_void, ev: *mut pmclog_ev) -> c_int {
    if ev.is_null() || !ev.is_aligned() {
        return fail(libc::EINVAL);
    }
    let Some(mut parser) = check_out(cookie) else {
        return fail(libc::EINVAL);
    };
    // SAFETY: `ev` is non-null, aligned and writable (the caller's promise). A union may hold any
    // bytes, even uninitialized ones (as `MaybeUninit` does), so the reference is valid whatever
    // the caller's struct holds, and it is the only reference to that memory while it lives.
    let data = unsafe { &mut *ptr::addr_of_mut!((*ev).pl_u) };
    let outcome = catch_unwind(AssertUnwindSafe(|| parser.read(data))).unwrap_or_else(|_| {
        parser.poisoned = true;
        Outcome::Error(libc::EINVAL)
    });
    PARSERS.check_in(cookie.addr(), parser);
    let (state, header) = match outcome {
        Outcome::Record(header) => (PMCLOG_OK, Some(header)),
        Outcome::Closed(header) => (PMCLOG_EOF, Some(header)),
        Outcome::RequireData => (PMCLOG_REQUIRE_DATA, None),
        Outcome::Eof => (PMCLOG_EOF, None),
        Outcome::Error(errno) => {
            set_errno(errno);
            (PMCLOG_ERROR, None)
        }
    };
    // SAFETY: `ev` is non-null, aligned and writable; these are plain field writes through the raw
    // pointer (no reference is made to the possibly uninitialized fields), and `data` is dead.
    unsafe {
        (*ev).pl_state = state;
        if let Some(h) = header {
            // For CLOSELOG, as FreeBSD: the offset and count of the last real record.
            let closed = state == PMCLOG_EOF;
            let (offset, count) = if closed {
                (h.end_offset - h.len as u64, h.count - 1)
            } else {
                (h.end_offset, h.count)
            };
            (*ev).pl_offset = offset as i64;
            (*ev).pl_count = count as usize;
            (*ev).pl_ts = libc::timespec { tv_sec: h.tsc as libc::time_t, tv_nsec: 0 };
            (*ev).pl_type = h.record_type;
            (*ev).pl_data = h.data;
            (*ev).pl_len = h.len;
        }
    }
    if state == PMCLOG_OK { 0 } else { -1 }
}

/// Frees a parser. NULL is ignored. The descriptor given to [`pmclog_open`] stays open.
///
/// A cookie is a handle, not an address: a closed one is recognised for ever, in memory
/// bounded by the parsers open at once (a slot and a generation number). FreeBSD frees the parser, and
/// a second `pmclog_close` corrupts the heap; here `pmclog_close` on a closed cookie (or on any
/// value `pmclog_open` did not return) does nothing and sets `errno` to `EINVAL`, and
/// `pmclog_read` or `pmclog_feed` on it fail with `EINVAL`.
///
/// # Safety
///
/// Always safe to call. No `pl_data` or `pl_evname` pointer the parser returned may be used
/// after it is closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmclog_close(cookie: *mut c_void) {
    if cookie.is_null() {
        return;
    }
    let Ok(parser) = PARSERS.remove(cookie.addr()) else {
        set_errno(libc::EINVAL);
        return;
    };
    // Dropping frees memory only; should anything panic there, leak rather than unwind into C.
    let _ = catch_unwind(AssertUnwindSafe(|| drop(parser)));
}

/// The parsers `pmclog_open` made, by cookie.
static PARSERS: HandleTable<Parser> = HandleTable::new();

/// The parser of `cookie`, checked out for one call (to be checked in at its end), or `None`
/// for NULL, a closed cookie, a value that never was one, or a cookie another call is using.
fn check_out(cookie: *mut c_void) -> Option<Box<Parser>> {
    PARSERS.check_out(cookie.addr()).ok()
}

/// Sets `errno` and returns -1.
fn fail(errno: c_int) -> c_int {
    set_errno(errno);
    -1
}

fn set_errno(errno: c_int) {
    #[cfg(any(target_os = "android", target_os = "netbsd", target_os = "openbsd"))]
    use libc::__errno as errno_location;
    #[cfg(any(target_os = "linux", target_os = "dragonfly", target_os = "hurd"))]
    use libc::__errno_location as errno_location;
    #[cfg(any(target_os = "freebsd", target_vendor = "apple"))]
    use libc::__error as errno_location;
    // SAFETY: the C library returns the calling thread's `errno`, which is always writable.
    unsafe { *errno_location() = errno };
}

// ---------------------------------------------------------------------------------------------
// The parser.

/// How much one `read` asks for: 256 KiB (FreeBSD's `PMCLOG_BUFFER_SIZE` is 4 KiB, where a
/// system call per 4 KiB costs as much as decoding them).
const READ_SIZE: usize = 256 * 1024;

/// How many distinct event names a parser keeps for its lifetime. Real logs name a few dozen
/// events; the bound only stops a hostile log from growing the set without end.
const KEPT_NAMES_MAX: usize = 4096;

/// What a `pmclog_parse_state` cookie points to.
struct Parser {
    decoder: StreamDecoder,
    input: Input,
    /// A copy of the last record; `pl_data` points here.
    raw: Vec<u8>,
    names: EventNames,
    /// A panic happened inside the parser; it reports errors from now on.
    poisoned: bool,
}

/// Where the bytes come from.
enum Input {
    /// Fed by `pmclog_feed`: the part of the caller's bytes not consumed yet.
    Memory { data: *const u8, len: usize },
    /// Read from a descriptor; `buffer[start..end]` is not consumed yet.
    Fd { fd: c_int, buffer: Vec<u8>, start: usize, end: usize },
}

// SAFETY: the only pointer a parser holds is the caller's fed buffer, which pmclog(3) lets the
// caller hand from one thread's call to another's; the table of cookies gives a parser to one
// call at a time, so it is never used from two threads at once.
unsafe impl Send for Input {}

/// What one `pmclog_read` call found.
enum Outcome {
    /// A record; its data is in the union.
    Record(Header),
    /// The CLOSELOG record.
    Closed(Header),
    RequireData,
    Eof,
    /// Carries the `errno` to set.
    Error(c_int),
}

/// The fields of `struct pmclog_ev` outside the union.
struct Header {
    end_offset: u64,
    count: u64,
    tsc: u64,
    record_type: pmclog_type,
    data: *mut c_void,
    len: c_int,
}

/// What refilling the input gave.
enum Refill {
    /// New bytes are there.
    Data,
    /// Nothing until the caller feeds more or the descriptor has data (`EAGAIN`).
    Exhausted,
    /// `read` returned 0.
    EndOfFile,
    /// `read` failed with this `errno`.
    Failed(c_int),
}

impl Parser {
    /// A parser reading `fd`, or fed from memory for [`PMCLOG_FD_NONE`]; `None` when memory runs
    /// out.
    fn try_new(fd: c_int) -> Option<Box<Parser>> {
        let input = if fd == PMCLOG_FD_NONE {
            Input::Memory { data: ptr::null(), len: 0 }
        } else {
            Input::Fd { fd, buffer: try_zeroed_vec(READ_SIZE)?, start: 0, end: 0 }
        };
        let mut raw = Vec::new();
        raw.try_reserve_exact(MAX_RECORD_LEN).ok()?;
        try_box(Parser {
            decoder: StreamDecoder::new(),
            input,
            raw,
            names: EventNames::default(),
            poisoned: false,
        })
    }

    /// The next record into `out`, reading the descriptor as often as it takes.
    fn read(&mut self, out: &mut pmclog_ev_u) -> Outcome {
        if self.poisoned {
            return Outcome::Error(libc::EINVAL);
        }
        loop {
            let (used, found) = {
                let (used, step) = self.decoder.next(self.input.pending());
                let found = match step {
                    Step::Record(entry) => Some(store(&entry, out, &mut self.raw, &mut self.names)),
                    Step::NeedData => None,
                    Step::Eof => Some(Outcome::Eof),
                    Step::Error(_) => Some(Outcome::Error(libc::EINVAL)),
                };
                (used, found)
            };
            self.input.consume(used);
            if let Some(outcome) = found {
                if !matches!(outcome, Outcome::Record(_)) {
                    // pmclog(3): fed bytes need stay valid only until pmclog_read returns -1.
                    self.input.forget_fed();
                }
                return outcome;
            }
            match self.input.refill() {
                Refill::Data => {}
                Refill::Exhausted => return Outcome::RequireData,
                Refill::EndOfFile if self.decoder.buffered() == 0 => return Outcome::Eof,
                Refill::EndOfFile => {
                    self.decoder.end_of_input();
                    return Outcome::Error(libc::EINVAL);
                }
                Refill::Failed(errno) => return Outcome::Error(errno),
            }
        }
    }
}

impl Input {
    /// The bytes given but not consumed yet.
    fn pending(&self) -> &[u8] {
        match *self {
            Input::Memory { len: 0, .. } => &[],
            // SAFETY: `pmclog_feed` checked that `data` is non-null when `len` is not 0, and its
            // caller promised `len` readable bytes there, unchanged until `pmclog_read` returns -1;
            // `Parser::read` forgets them (sets `len` to 0) before it does.
            Input::Memory { data, len } => unsafe { core::slice::from_raw_parts(data, len) },
            Input::Fd { ref buffer, start, end, .. } => &buffer[start..end],
        }
    }

    fn consume(&mut self, used: usize) {
        match self {
            Input::Memory { data, len } => {
                let used = used.min(*len);
                *data = data.wrapping_add(used);
                *len -= used;
            }
            Input::Fd { start, end, .. } => *start = (*start + used).min(*end),
        }
    }

    /// Drops what is left of the bytes given to `pmclog_feed`.
    fn forget_fed(&mut self) {
        if let Input::Memory { data, len } = self {
            (*data, *len) = (ptr::null(), 0);
        }
    }

    /// Gets more bytes once the pending ones are all consumed: the only I/O the parser does.
    fn refill(&mut self) -> Refill {
        let Input::Fd { fd, buffer, start, end } = self else {
            return Refill::Exhausted;
        };
        loop {
            // SAFETY: `buffer` is an initialized, writable allocation of `buffer.len()` bytes.
            let got = unsafe { libc::read(*fd, buffer.as_mut_ptr().cast(), buffer.len()) };
            match usize::try_from(got) {
                Ok(0) => return Refill::EndOfFile,
                Ok(got) => {
                    (*start, *end) = (0, got.min(buffer.len()));
                    return Refill::Data;
                }
                Err(_) => match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => {}
                    Some(errno) if errno == libc::EAGAIN || errno == libc::EWOULDBLOCK => {
                        return Refill::Exhausted;
                    }
                    errno => return Refill::Failed(errno.unwrap_or(libc::EIO)),
                },
            }
        }
    }
}

/// Copies a decoded record into `out` and `raw`, and returns the fields outside the union.
fn store(
    entry: &Entry<'_>,
    out: &mut pmclog_ev_u,
    raw: &mut Vec<u8>,
    names: &mut EventNames,
) -> Outcome {
    match entry.record {
        Record::CloseLog | Record::DropNotify => {}
        Record::Initialize(r) => {
            out.pl_i = pmclog_ev_initialize {
                pl_version: r.version,
                pl_arch: r.cpu_type,
                pl_tsc_freq: r.tsc_freq,
                pl_ts: libc::timespec {
                    tv_sec: r.time_sec as libc::time_t,
                    tv_nsec: r.time_nsec as libc::c_long,
                },
                pl_cpuid: c_string(r.cpuid),
            };
        }
        Record::PmcAllocate(r) => {
            out.pl_a = pmclog_ev_pmcallocate {
                pl_evname: names.get(r.event, r.flags),
                pl_rate: r.rate,
                pl_event: r.event,
                pl_flags: r.flags,
                pl_pmcid: r.pmcid,
            };
        }
        Record::PmcAllocateDyn(r) => {
            out.pl_ad = pmclog_ev_pmcallocatedyn {
                pl_evname: c_string(r.name),
                pl_event: r.event,
                pl_flags: r.flags,
                pl_pmcid: r.pmcid,
            };
        }
        Record::PmcAttach(r) => {
            out.pl_t = pmclog_ev_pmcattach {
                pl_pmcid: r.pmcid,
                pl_pid: r.pid,
                pl_pathname: c_string(r.path),
            };
        }
        Record::PmcDetach(r) => out.pl_d = pmclog_ev_pmcdetach { pl_pmcid: r.pmcid, pl_pid: r.pid },
        Record::ProcCsw(r) => {
            out.pl_c = pmclog_ev_proccsw {
                pl_pid: r.pid,
                pl_tid: r.tid,
                pl_pmcid: r.pmcid,
                pl_value: r.value,
            };
        }
        Record::ProcExec(r) => {
            out.pl_x = pmclog_ev_procexec {
                pl_pid: r.pid,
                pl_pmcid: r.pmcid,
                pl_baseaddr: r.base_addr,
                pl_dynaddr: r.dyn_addr,
                pl_pathname: c_string(r.path),
            };
        }
        Record::ProcExit(r) => {
            out.pl_e =
                pmclog_ev_procexit { pl_pid: r.pid as u32, pl_pmcid: r.pmcid, pl_value: r.value };
        }
        Record::ProcFork(r) => {
            out.pl_f = pmclog_ev_procfork { pl_oldpid: r.old_pid, pl_newpid: r.new_pid };
        }
        Record::SysExit(r) => out.pl_se = pmclog_ev_sysexit { pl_pid: r.pid },
        Record::UserData(r) => out.pl_u = pmclog_ev_userdata { pl_userdata: r.data },
        Record::MapIn(r) => {
            out.pl_mi = pmclog_ev_map_in {
                pl_pid: r.pid,
                pl_start: r.start,
                pl_pathname: c_string(r.path),
            };
        }
        Record::MapOut(r) => {
            out.pl_mo = pmclog_ev_map_out { pl_pid: r.pid, pl_start: r.start, pl_end: r.end };
        }
        Record::Callchain(r) => {
            // Field by field, so a sample costs the frames it has rather than all 512.
            // SAFETY: `pl_cc` is plain data that any bytes are a valid value of, and `out` is
            // the only reference to the union: a reference to its array is sound.
            let pc_array: &mut [u64; PMC_CALLCHAIN_DEPTH_MAX] = unsafe { &mut out.pl_cc.pl_pc };
            let npc = r.pcs.copy_into(pc_array);
            out.pl_cc.pl_pid = r.pid as u32;
            out.pl_cc.pl_tid = r.tid as u32;
            out.pl_cc.pl_pmcid = r.pmcid;
            out.pl_cc.pl_cpuflags = r.cpuflags.0;
            out.pl_cc.pl_cpuflags2 = 0;
            out.pl_cc.pl_npc = npc as u32;
        }
        Record::ThrCreate(r) => {
            out.pl_tc = pmclog_ev_threadcreate {
                pl_tid: r.tid,
                pl_pid: r.pid,
                pl_flags: r.flags,
                pl_tdname: c_string(r.name),
            };
        }
        Record::ThrExit(r) => out.pl_te = pmclog_ev_threadexit { pl_tid: r.tid },
        Record::ProcCreate(r) => {
            out.pl_pc = pmclog_ev_proccreate {
                pl_pid: r.pid,
                pl_flags: r.flags,
                pl_pcomm: c_string(r.comm),
            };
        }
    }
    raw.clear();
    raw.extend_from_slice(entry.raw);
    let header = Header {
        end_offset: entry.end_offset(),
        count: entry.count,
        tsc: entry.tsc,
        record_type: pmclog_type::from(entry.record.record_type().code()),
        data: raw.as_mut_ptr().cast(),
        len: raw.len() as c_int,
    };
    if matches!(entry.record, Record::CloseLog) {
        Outcome::Closed(header)
    } else {
        Outcome::Record(header)
    }
}

/// `bytes` as a NUL-terminated C string in an `N`-byte field, cut short if it does not fit.
fn c_string<const N: usize>(bytes: &[u8]) -> [c_char; N] {
    let mut field = [0; N];
    let len = bytes.len().min(N.saturating_sub(1));
    for (to, &from) in field.iter_mut().zip(&bytes[..len]) {
        *to = from as c_char;
    }
    field
}

/// The names `pl_a.pl_evname` points to.
#[derive(Default)]
struct EventNames {
    /// By event and whether it is a PMU-table index; valid until the parser is freed.
    kept: BTreeMap<(u32, bool), CString>,
    /// Once [`KEPT_NAMES_MAX`] names are kept: the latest other name, valid until the next read.
    overflow: CString,
}

impl EventNames {
    fn get(&mut self, event: u32, flags: u32) -> *const c_char {
        let key = (event, flags & PMC_F_EV_PMU != 0);
        if let Some(name) = self.kept.get(&key) {
            return name.as_ptr();
        }
        let name = match key {
            (index, true) => format!("EV_PMU_0x{index:x}"),
            (event, false) => match event_name(event) {
                Some(name) => name.to_owned(),
                None => format!("UNKNOWN_EVENT_0x{event:x}"),
            },
        };
        // The names above hold no NUL, so this never falls back to the empty string.
        let name = CString::new(name).unwrap_or_default();
        if self.kept.len() < KEPT_NAMES_MAX {
            self.kept.entry(key).or_insert(name).as_ptr()
        } else {
            self.overflow = name;
            self.overflow.as_ptr()
        }
    }
}

/// `Box::new` that returns `None` instead of aborting when memory runs out.
fn try_box(parser: Parser) -> Option<Box<Parser>> {
    const { assert!(size_of::<Parser>() != 0) };
    let layout = Layout::new::<Parser>();
    // SAFETY: the layout's size is not zero (asserted above).
    let memory = unsafe { std::alloc::alloc(layout) }.cast::<Parser>();
    if memory.is_null() {
        return None;
    }
    // SAFETY: `memory` was just allocated by the global allocator with `Parser`'s layout, so it is
    // valid for writing one `Parser`, and the `Box` may own and later free it.
    unsafe {
        memory.write(parser);
        Some(Box::from_raw(memory))
    }
}

/// `vec![0; len]` that returns `None` instead of aborting when memory runs out.
fn try_zeroed_vec(len: usize) -> Option<Vec<u8>> {
    let mut vec = Vec::new();
    vec.try_reserve_exact(len).ok()?;
    vec.resize(len, 0);
    Some(vec)
}
