//! What the machine has (`pmc_cpuinfo`, `pmc_ncpu`, `pmc_npmc`, `pmc_pmcinfo`,
//! `pmc_event_names_of_class`) and the names of the ABI's numbers (`pmc_name_of_*`).

use std::ffi::{CStr, c_char, c_int, c_uint};
use std::ptr;

use hwpmc::abi::{Class, PmcInfo, PmcOpGetCpuInfo, PmcOpGetPmcInfo, event};
use zerocopy::IntoBytes;

use super::boundary::{guard, intern, invalid, non_null, status, store};
use super::ops::initialized;
use crate::api;
use crate::error::{Error, Result};

/// `struct pmc_cpuinfo`: the layout of `struct pmc_op_getcpuinfo`.
#[allow(non_camel_case_types)]
pub type pmc_cpuinfo = PmcOpGetCpuInfo;

/// `struct pmc_pmcinfo`: the CPU, then `pmc_npmc(cpu)` rows (`struct pmc_op_getpmcinfo`).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug)]
pub struct pmc_pmcinfo {
    /// The CPU.
    pub pm_cpu: i32,
    /// The rows (a flexible array member in C).
    pub pm_pmcs: [PmcInfo; 0],
}

const _: () = assert!(size_of::<pmc_pmcinfo>() == size_of::<PmcOpGetPmcInfo>());

/// Stores a pointer to the machine's description, cached by `pmc_init`, in `*cpu_info`
/// (`pmc_cpuinfo(3)`). The structure lives as long as the process. `ENXIO` before `pmc_init`.
///
/// # Safety
///
/// `cpu_info` must be NULL (`EINVAL`) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_cpuinfo(cpu_info: *mut *const pmc_cpuinfo) -> c_int {
    status(|| {
        let out = non_null("pmc_cpuinfo", "cpu_info", cpu_info)?;
        let info: *const pmc_cpuinfo = initialized("pmc_cpuinfo")?;
        // SAFETY: checked non-null; writable by the caller's promise.
        unsafe { store(out, info) };
        Ok(())
    })
}

/// The number of CPUs (highest CPU id + 1) (`pmc_ncpu(3)`), or -1 with `ENXIO` before
/// `pmc_init`.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_ncpu() -> c_int {
    guard(-1, || Ok(initialized("pmc_ncpu")?.pm_ncpu as c_int))
}

/// The number of rows of CPU `cpu` (`pmc_npmc(3)`), or -1 with `ENXIO` before `pmc_init` or
/// `EINVAL` for a CPU out of range.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_npmc(cpu: c_int) -> c_int {
    guard(-1, || npmc("pmc_npmc", cpu))
}

fn npmc(op: &'static str, cpu: c_int) -> Result<c_int> {
    let info = initialized(op)?;
    if cpu < 0 || cpu as u32 >= info.pm_ncpu {
        return Err(invalid(op, format!("CPU {cpu} is not in 0..{}", info.pm_ncpu)));
    }
    Ok(info.pm_npmc as c_int)
}

/// Stores in `*pmc_info` a `struct pmc_pmcinfo` describing every row of CPU `cpu`
/// (`pmc_pmcinfo(3)`): `pmc_npmc(cpu)` entries, in memory from `malloc(3)` the caller releases
/// with `free(3)`. `ENXIO` before `pmc_init` or for an inactive CPU, `EINVAL` for a CPU out of
/// range, `ENOMEM` if memory runs out.
///
/// # Safety
///
/// `pmc_info` must be NULL (`EINVAL`) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_pmcinfo(cpu: c_int, pmc_info: *mut *mut pmc_pmcinfo) -> c_int {
    const OP: &str = "pmc_pmcinfo";
    status(|| {
        let out = non_null(OP, "pmc_info", pmc_info)?;
        npmc(OP, cpu)?;
        let rows = api::pmc_info(cpu as u32)?;
        let head = PmcOpGetPmcInfo { pm_cpu: cpu, pm_pad: 0 };
        let mut bytes = head.as_bytes().to_vec();
        for row in &rows {
            bytes.extend_from_slice(row.as_bytes());
        }
        debug_assert_eq!(bytes.len(), size_of::<pmc_pmcinfo>() + rows.len() * size_of::<PmcInfo>());
        let block = malloc_copy(OP, &bytes)?;
        // SAFETY: checked non-null; writable by the caller's promise. The block is as long as
        // the header and rows, and malloc's alignment suits `struct pmc_pmcinfo`.
        unsafe { store(out, block.cast::<pmc_pmcinfo>()) };
        Ok(())
    })
}

/// A `malloc(3)` block holding a copy of `items` (at least one byte long, so it is never NULL
/// on success), for the caller to `free(3)`.
fn malloc_copy<T: Copy>(op: &'static str, items: &[T]) -> Result<*mut T> {
    const { assert!(align_of::<T>() <= align_of::<libc::max_align_t>()) };
    let size = size_of_val(items);
    // SAFETY: malloc has no preconditions; the result is checked for NULL.
    let block = unsafe { libc::malloc(size.max(1)) }.cast::<T>();
    if block.is_null() {
        return Err(Error::new(op, libc::ENOMEM));
    }
    // SAFETY: `block` is fresh, suitably aligned for any type up to max_align_t, has room for
    // `items.len()` values of T, and does not overlap `items`.
    unsafe { ptr::copy_nonoverlapping(items.as_ptr(), block, items.len()) };
    Ok(block)
}

/// Stores in `*eventnames` an array of the names of the events of class `cl` this host offers,
/// and their number in `*nevents` (`pmc_event_names_of_class(3)`). The array is from
/// `malloc(3)` and the caller frees it (only it: the names are the library's and live as long
/// as the process). `EINVAL` for a class this machine does not have.
///
/// # Safety
///
/// `eventnames` and `nevents` must each be NULL (`EINVAL`) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_event_names_of_class(
    cl: c_uint,
    eventnames: *mut *mut *const c_char,
    nevents: *mut c_int,
) -> c_int {
    const OP: &str = "pmc_event_names_of_class";
    status(|| {
        let names_out = non_null(OP, "eventnames", eventnames)?;
        let count_out = non_null(OP, "nevents", nevents)?;
        let class = Class::from_u32(cl).ok_or_else(|| invalid(OP, format!("no class {cl}")))?;
        if !api::classes()?.iter().any(|c| c.pm_class == cl) {
            return Err(invalid(OP, format!("this machine has no class {}", class.name())));
        }
        let names: Vec<*const c_char> = api::list_events()?
            .into_iter()
            .filter(|(c, _)| *c == class)
            .map(|(_, name)| intern(&name).as_ptr())
            .collect();
        let block = malloc_copy(OP, &names)?;
        // SAFETY: both checked non-null; writable by the caller's promise.
        unsafe {
            store(names_out, block);
            store(count_out, names.len() as c_int);
        }
        Ok(())
    })
}

/// The name `lookup` finds for `value`, or NULL with `errno` `EINVAL` if it finds none (the
/// convention of the `pmc_name_of_*` functions).
fn name_or_einval(
    op: &'static str,
    value: c_uint,
    lookup: impl FnOnce() -> Option<&'static CStr>,
) -> *const c_char {
    guard(ptr::null(), || {
        lookup().map(CStr::as_ptr).ok_or_else(|| invalid(op, format!("no such value: {value:#x}")))
    })
}

/// FreeBSD's names of the PMC_CAP_* bits, bit 0 first.
const CAPABILITY_NAMES: [&CStr; 14] = [
    c"INTERRUPT",
    c"USER",
    c"SYSTEM",
    c"EDGE",
    c"THRESHOLD",
    c"READ",
    c"WRITE",
    c"INVERT",
    c"QUALIFIER",
    c"PRECISE",
    c"TAGGING",
    c"CASCADE",
    c"SYSWIDE",
    c"DOMWIDE",
];

/// The name of capability `c`, which must be exactly one PMC_CAP_* bit (`"INTERRUPT"`, …,
/// `"DOMWIDE"`), or NULL with `EINVAL` (`pmc_name_of_capability(3)`).
#[unsafe(no_mangle)]
pub extern "C" fn pmc_name_of_capability(c: c_uint) -> *const c_char {
    name_or_einval("pmc_name_of_capability", c, || {
        (c.count_ones() == 1)
            .then(|| CAPABILITY_NAMES.get(c.trailing_zeros() as usize))
            .flatten()
            .copied()
    })
}

/// The name of class `pc` (`"TSC"`, `"IAF"`, `"IAP"`, `"SOFT"`, …), or NULL with `EINVAL`
/// (`pmc_name_of_class(3)`).
#[unsafe(no_mangle)]
pub extern "C" fn pmc_name_of_class(pc: c_uint) -> *const c_char {
    name_or_einval("pmc_name_of_class", pc, || Class::from_u32(pc).map(|c| intern(c.name())))
}

/// The name of CPU type `cp` (`"INTEL_SKYLAKE"`, `"GENERIC"`, …), or NULL with `EINVAL`
/// (`pmc_name_of_cputype(3)`).
#[unsafe(no_mangle)]
pub extern "C" fn pmc_name_of_cputype(cp: c_uint) -> *const c_char {
    name_or_einval("pmc_name_of_cputype", cp, || pmclog::names::cpu_type_name(cp).map(intern))
}

/// The name of row disposition `pd`: `"STANDALONE"`, `"FREE"` or `"THREAD"`; NULL with
/// `EINVAL` otherwise (PMC_DISP_UNKNOWN included, as FreeBSD) (`pmc_name_of_disposition(3)`).
#[unsafe(no_mangle)]
pub extern "C" fn pmc_name_of_disposition(pd: c_uint) -> *const c_char {
    let names = [c"STANDALONE", c"FREE", c"THREAD"];
    name_or_einval("pmc_name_of_disposition", pd, || names.get(pd as usize).copied())
}

/// The name of event `pe` (`pmc_name_of_event(3)`): FreeBSD's name of a static event
/// (`"TSC"`, `"INSTR_RETIRED_ANY"`, …) or the host's name of a SOFT event (`"page-faults"`,
/// `"CLOCK.PROF"`, …); NULL with `EINVAL` for any other value.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_name_of_event(pe: c_uint) -> *const c_char {
    const OP: &str = "pmc_name_of_event";
    guard(ptr::null(), || {
        if let Some(name) = pmclog::names::event_name(pe) {
            return Ok(intern(name).as_ptr());
        }
        if (event::SOFT_FIRST..=event::SOFT_LAST).contains(&pe) {
            if let Some((name, _)) = api::soft_events()?.into_iter().find(|&(_, code)| code == pe) {
                return Ok(intern(&name).as_ptr());
            }
        }
        Err(invalid(OP, format!("no event {pe:#x}")))
    })
}

/// The name of mode `pm`: `"SS"`, `"SC"`, `"TS"` or `"TC"`; NULL with `EINVAL` otherwise
/// (`pmc_name_of_mode(3)`).
#[unsafe(no_mangle)]
pub extern "C" fn pmc_name_of_mode(pm: c_uint) -> *const c_char {
    let names = [c"SS", c"SC", c"TS", c"TC"];
    name_or_einval("pmc_name_of_mode", pm, || names.get(pm as usize).copied())
}

/// The name of state `ps`: `"DISABLED"`, `"FREE"`, `"ALLOCATED"`, `"STOPPED"`, `"RUNNING"`,
/// `"DELETED"` or `"MAX"` (PMC_STATE_MAX, as FreeBSD); NULL with `EINVAL` otherwise
/// (`pmc_name_of_state(3)`).
#[unsafe(no_mangle)]
pub extern "C" fn pmc_name_of_state(ps: c_uint) -> *const c_char {
    let names = [c"DISABLED", c"FREE", c"ALLOCATED", c"STOPPED", c"RUNNING", c"DELETED", c"MAX"];
    name_or_einval("pmc_name_of_state", ps, || names.get(ps as usize).copied())
}
