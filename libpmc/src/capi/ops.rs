//! The pmc(3) operations: initialisation, allocation and the calls on a PMC id, the log.

use std::ffi::{c_char, c_int, c_uint};
use std::sync::OnceLock;

use hwpmc::abi::{Mode, PMC_VERSION_MAJOR, PmcFlags, PmcOpGetCpuInfo};

use super::boundary::{c_str, invalid, non_null, status, store};
use super::{pmc_driverstats, pmc_id_t, pmc_value_t, pmu};
use crate::api::{self, PmcSpec};
use crate::error::{EPROGMISMATCH, Error, Result};

/// What `pmc_init` learnt: the machine's description, kept for the life of the process (the
/// `cpu_info` of FreeBSD's libpmc).
static CPU_INFO: OnceLock<PmcOpGetCpuInfo> = OnceLock::new();

/// The machine's description if `pmc_init` succeeded, else `ENXIO` (FreeBSD's `pmc_syscall ==
/// -1` check).
pub(super) fn initialized(op: &'static str) -> Result<&'static PmcOpGetCpuInfo> {
    CPU_INFO.get().ok_or_else(|| {
        Error::with_detail(op, libc::ENXIO, "libpmc is not initialised: call pmc_init() first")
    })
}

/// Initialises the library (`pmc_init(3)`): checks that the host speaks this library's ABI
/// version and caches the machine's description. Returns 0, also when already initialised, or
/// -1 with `errno`: `EPROGMISMATCH` if the driver's major version differs, the host's error if
/// it cannot start (e.g. `EINVAL` for an unknown `PMC_HOST`, `ENOSYS` for a host this system
/// lacks).
#[unsafe(no_mangle)]
pub extern "C" fn pmc_init() -> c_int {
    status(|| {
        if CPU_INFO.get().is_some() {
            return Ok(());
        }
        let version = api::init()?;
        if version >> 24 != PMC_VERSION_MAJOR {
            return Err(Error::with_detail(
                "pmc_init",
                EPROGMISMATCH,
                format!(
                    "the driver speaks PMC_VERSION {version:#010x}, this library major version \
                     {PMC_VERSION_MAJOR:#x}"
                ),
            ));
        }
        let info = api::cpu_info()?;
        let _ = CPU_INFO.set(info);
        Ok(())
    })
}

/// Allocates a PMC counting or sampling event `ctrspec` (`pmc_allocate(3)`): `"instructions"`,
/// `"page-faults"`, `"INST_RETIRED.ANY,usr"`, `"event=0xc0,umask=0x00,os"`, … (see
/// [`crate::events`]) in `mode`, with PMC_F_* `flags`, on `cpu` (system modes; `PMC_CPU_ANY`
/// for process modes) with initial count (counting modes) or reload count (sampling modes)
/// `count`. Stores its id in `*pmcid`.
///
/// Returns 0, or -1 with `errno`: `EINVAL` before [`pmc_init`] (as FreeBSD's libpmc, which
/// knows no event class until then), for a NULL argument, a bad mode, or an event this host
/// does not have (where FreeBSD's libpmc exits the process; `pmc_host_error()` says why), and
/// the driver's errno for the PMCALLOCATE request (`EINVAL` bad flags or cpu, or no free row;
/// `EOPNOTSUPP` capabilities the class lacks; `EPERM` a system mode without privilege; `ENXIO`
/// an absent CPU).
///
/// # Safety
///
/// `ctrspec` must be NULL or a NUL-terminated string; `pmcid` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_allocate(
    ctrspec: *const c_char,
    mode: c_uint,
    flags: u32,
    cpu: c_int,
    pmcid: *mut pmc_id_t,
    count: u64,
) -> c_int {
    const OP: &str = "pmc_allocate";
    status(|| {
        // SAFETY: NULL or NUL-terminated, by the caller's promise.
        let spec = unsafe { c_str(OP, "ctrspec", ctrspec) }?;
        let out = non_null(OP, "pmcid", pmcid)?;
        let mode = Mode::from_u32(mode)
            .ok_or_else(|| invalid(OP, format!("mode {mode} is not SS, SC, TS or TC")))?;
        if CPU_INFO.get().is_none() {
            return Err(invalid(OP, "libpmc is not initialised: call pmc_init() first"));
        }
        let mut request =
            PmcSpec::new(spec).mode(mode).flags(PmcFlags::from_bits_retain(flags)).request()?;
        // As FreeBSD: the caller's cpu and count as given (the driver checks them).
        request.pm_cpu = cpu as u32;
        request.pm_count = count;
        if request.pm_flags & PmcFlags::EV_PMU.bits() != 0 {
            request.pm_ev = pmu::host_index_of(spec).unwrap_or(0);
        }
        api::allocate_spec(spec, &mut request)?;
        // SAFETY: checked non-null; writable by the caller's promise.
        unsafe { store(out, request.pm_pmcid) };
        Ok(())
    })
}

/// Attaches a process PMC to process `pid`, 0 meaning the caller (`pmc_attach(3)`). `EEXIST` if
/// already attached to it, `ESRCH` for no such process, `EPERM` if the caller may not debug it,
/// `EBUSY` if the PMC is running, `EINVAL` for a system PMC or a bad id or pid.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_attach(pmc: pmc_id_t, pid: libc::pid_t) -> c_int {
    status(|| api::attach(pmc, pid))
}

/// Detaches a process PMC from process `pid`, 0 meaning the caller (`pmc_detach(3)`). `EINVAL`
/// if not attached to it, `ESRCH` if the process is gone.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_detach(pmc: pmc_id_t, pid: libc::pid_t) -> c_int {
    status(|| api::detach(pmc, pid))
}

/// Starts a PMC (`pmc_start(3)`). `EDOOFUS` if it needs a log and none is configured.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_start(pmc: pmc_id_t) -> c_int {
    status(|| api::start(pmc))
}

/// Stops a PMC (`pmc_stop(3)`).
#[unsafe(no_mangle)]
pub extern "C" fn pmc_stop(pmc: pmc_id_t) -> c_int {
    status(|| api::stop(pmc))
}

/// Releases a PMC (`pmc_release(3)`), running and attached or not.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_release(pmc: pmc_id_t) -> c_int {
    status(|| api::release(pmc))
}

/// Reads a PMC into `*value` (`pmc_read(3)`, PMCRW with PMC_F_OLDVALUE).
///
/// # Safety
///
/// `value` must be NULL (`EINVAL`) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_read(pmc: pmc_id_t, value: *mut pmc_value_t) -> c_int {
    status(|| {
        let out = non_null("pmc_read", "value", value)?;
        let v = api::read(pmc)?;
        // SAFETY: checked non-null; writable by the caller's promise.
        unsafe { store(out, v) };
        Ok(())
    })
}

/// Reads a PMC's count scaled to the time it was enabled into `*value`, and the times enabled
/// and on a counter into `*enabled` and `*running` unless NULL (extension, see `pmc_host.h`).
///
/// # Safety
///
/// `value` must be NULL (`EINVAL`) or writable; `enabled` and `running` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_read_scaled(
    pmc: pmc_id_t,
    value: *mut pmc_value_t,
    enabled: *mut u64,
    running: *mut u64,
) -> c_int {
    status(|| {
        let out = non_null("pmc_read_scaled", "value", value)?;
        let read = api::read_scaled(pmc)?;
        // SAFETY: checked non-null; writable by the caller's promise.
        unsafe { store(out, read.scaled().unwrap_or(0)) };
        for (ptr, time) in [(enabled, read.enabled), (running, read.running)] {
            if !ptr.is_null() {
                // SAFETY: non-null, so writable by the caller's promise.
                unsafe { store(ptr, time) };
            }
        }
        Ok(())
    })
}

/// Sets a stopped PMC's value (`pmc_write(3)`, PMCRW with PMC_F_NEWVALUE); `EBUSY` if running.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_write(pmc: pmc_id_t, value: pmc_value_t) -> c_int {
    status(|| api::write(pmc, value))
}

/// Sets a stopped PMC's value to `newvalue` and stores the previous one in `*oldvalue`
/// (`pmc_rw(3)`).
///
/// # Safety
///
/// `oldvalue` must be NULL (`EINVAL`) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_rw(
    pmc: pmc_id_t,
    newvalue: pmc_value_t,
    oldvalue: *mut pmc_value_t,
) -> c_int {
    status(|| {
        let out = non_null("pmc_rw", "oldvalue", oldvalue)?;
        let old = api::rw(pmc, PmcFlags::NEWVALUE | PmcFlags::OLDVALUE, newvalue)?;
        // SAFETY: checked non-null; writable by the caller's promise.
        unsafe { store(out, old) };
        Ok(())
    })
}

/// Sets a stopped PMC's reload count (sampling) or initial count (`pmc_set(3)`, PMCSETCOUNT).
#[unsafe(no_mangle)]
pub extern "C" fn pmc_set(pmc: pmc_id_t, value: pmc_value_t) -> c_int {
    status(|| api::set_count(pmc, value))
}

/// A PMC's capabilities, PMC_CAP_* bits (`pmc_capabilities(3)`). Asks the driver, so `EINVAL`
/// for a PMC the caller does not own.
///
/// # Safety
///
/// `caps` must be NULL (`EINVAL`) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_capabilities(pmc: pmc_id_t, caps: *mut u32) -> c_int {
    status(|| {
        let out = non_null("pmc_capabilities", "caps", caps)?;
        let value = api::capabilities(pmc)?;
        // SAFETY: checked non-null; writable by the caller's promise.
        unsafe { store(out, value.bits()) };
        Ok(())
    })
}

/// The width in bits of a PMC's counter (`pmc_width(3)`): its class's width. `EINVAL` for a PMC
/// the caller does not own.
///
/// # Safety
///
/// `width` must be NULL (`EINVAL`) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_width(pmc: pmc_id_t, width: *mut u32) -> c_int {
    const OP: &str = "pmc_width";
    status(|| {
        let out = non_null(OP, "width", width)?;
        // Ownership first: the driver refuses a PMC the caller does not own.
        api::capabilities(pmc)?;
        let info = match CPU_INFO.get() {
            Some(info) => *info,
            None => api::cpu_info()?,
        };
        let class = (pmc >> 8) & 0xFF;
        let n = (info.pm_nclass as usize).min(info.pm_classes.len());
        let value = info.pm_classes[..n]
            .iter()
            .find(|c| c.pm_class == class)
            .map(|c| c.pm_width)
            .ok_or_else(|| invalid(OP, format!("class {class} is not on this machine")))?;
        // SAFETY: checked non-null; writable by the caller's promise.
        unsafe { store(out, value) };
        Ok(())
    })
}

/// The RDPMC index of a process PMC attached only to its owner (`pmc_get_msr(3)`): `EINVAL`
/// otherwise, `ENOSYS` if the class cannot be read with RDPMC.
///
/// # Safety
///
/// `msr` must be NULL (`EINVAL`) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_get_msr(pmc: pmc_id_t, msr: *mut u32) -> c_int {
    status(|| {
        let out = non_null("pmc_get_msr", "msr", msr)?;
        let value = api::get_msr(pmc)?;
        // SAFETY: checked non-null; writable by the caller's promise.
        unsafe { store(out, value) };
        Ok(())
    })
}

/// Makes row `pmc` of `cpu` available again (`pmc_enable(3)`, PMCADMIN to FREE). `EPERM`
/// without privilege, `EINVAL` a bad row or cpu, `ENXIO` an absent CPU, `EBUSY` a row in use.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_enable(cpu: c_int, pmc: c_int) -> c_int {
    status(|| api::admin(cpu, pmc, true))
}

/// Disables row `pmc` of `cpu` (`pmc_disable(3)`, PMCADMIN to DISABLED); errors as
/// [`pmc_enable`].
#[unsafe(no_mangle)]
pub extern "C" fn pmc_disable(cpu: c_int, pmc: c_int) -> c_int {
    status(|| api::admin(cpu, pmc, false))
}

/// The driver's statistics (`pmc_get_driver_stats(3)`).
///
/// # Safety
///
/// `gms` must be NULL (`EINVAL`) or writable for a `struct pmc_driverstats`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_get_driver_stats(gms: *mut pmc_driverstats) -> c_int {
    status(|| {
        let out = non_null("pmc_get_driver_stats", "gms", gms)?;
        let stats = api::driver_stats()?;
        // SAFETY: checked non-null; writable by the caller's promise.
        unsafe { store(out, stats) };
        Ok(())
    })
}

/// Sends the caller's log to descriptor `fd`, or closes it for a negative `fd`
/// (`pmc_configure_logfile(3)`). `EBADF` for a descriptor not open for writing (closed,
/// read-only, a directory), `EBUSY` if a log is already configured, `EINVAL` closing a log
/// that does not exist. The library keeps its own reference to the descriptor.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_configure_logfile(fd: c_int) -> c_int {
    status(|| api::configure_log(fd))
}

/// Writes the log's buffered data out (`pmc_flush_logfile(3)`). `EINVAL` without a log; a
/// write error of the log (e.g. `ENOSPC`) is returned here.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_flush_logfile() -> c_int {
    status(api::flush_log)
}

/// Ends the log with a CLOSELOG record and closes it (`pmc_close_logfile(3)`).
#[unsafe(no_mangle)]
pub extern "C" fn pmc_close_logfile() -> c_int {
    status(api::close_log)
}

/// Writes a USERDATA record holding `udata` to the log (`pmc_writelog(3)`). `EINVAL` without
/// a log.
#[unsafe(no_mangle)]
pub extern "C" fn pmc_writelog(udata: u32) -> c_int {
    status(|| api::write_log(udata))
}
