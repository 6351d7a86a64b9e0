//! The PMU event tables (`pmc_pmu_*`).
//!
//! FreeBSD compiles Intel's perfmon JSON tables into libpmc; its "PMU events" are the rows of the
//! table of the running CPU, and a PMC_F_EV_PMU allocation carries the row's index in `pm_ev`.
//! Here a CPU's table is the hardware part of the event catalog for its model: the fixed
//! counters, the architectural events and the model's vendor tables (generated from the same
//! JSON files), sorted by class and name — [`crate::events::HostEvents::list`] for a machine with both
//! classes. As with FreeBSD, an index means something only to a libpmc of the same build.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;

use hwpmc::abi::{Caps, Class, Mode, PmcFlags};

use super::boundary::{c_str, configure, guard, intern, invalid, non_null, report};
use super::pmc_op_pmcallocate;
use crate::api;
use crate::error::{Error, Result};
use crate::events::pmu_table::{full_machine, index_in, model_key, summary, table};
use crate::events::{DEFAULT_SAMPLE_RATE, Event, EventKind};

/// The table key `cpuid` names (NULL: the host's CPU), or `EINVAL`.
///
/// # Safety
///
/// `cpuid` must be NULL or a NUL-terminated string.
unsafe fn key_of(op: &'static str, cpuid: *const c_char) -> Result<String> {
    let key = if cpuid.is_null() {
        api::host_pmu_key()
    } else {
        // SAFETY: non-null and NUL-terminated by the caller's promise.
        model_key(unsafe { c_str(op, "cpuid", cpuid) }?)
    };
    key.ok_or_else(|| invalid(op, "no PMU event table for this CPU (not an Intel CPU)"))
}

/// The index in the host CPU's table of the event of spec `spec`, if it has one.
pub(super) fn host_index_of(spec: &str) -> Option<u32> {
    let event = api::lookup_event(spec).ok()?;
    index_in(&table(&api::host_pmu_key()?), &event.name)
}

/// Whether this host counts PMU events: 1 if it offers the IAP class, else 0
/// (`pmc_pmu_enabled(3)`).
#[unsafe(no_mangle)]
pub extern "C" fn pmc_pmu_enabled() -> c_int {
    guard(0, || Ok(c_int::from(pmu_enabled())))
}

fn pmu_enabled() -> bool {
    api::classes().is_ok_and(|classes| classes.iter().any(|c| c.pm_class == Class::Iap.as_u32()))
}

/// The sampling rate used for event `event_name` when none is given: the catalog's default
/// (the JSON tables' `SampleAfterValue` for their events, 1 for software events), or 65536
/// (FreeBSD's `DEFAULT_SAMPLE_COUNT`) for NULL or an event this host does not have
/// (`pmc_pmu_sample_rate_get(3)`).
///
/// # Safety
///
/// `event_name` must be NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_pmu_sample_rate_get(event_name: *const c_char) -> u64 {
    guard(DEFAULT_SAMPLE_RATE, || {
        // SAFETY: NULL or NUL-terminated by the caller's promise.
        let Ok(name) = (unsafe { c_str("pmc_pmu_sample_rate_get", "event_name", event_name) })
        else {
            return Ok(DEFAULT_SAMPLE_RATE);
        };
        Ok(api::lookup_event(name).map_or(DEFAULT_SAMPLE_RATE, |e| e.default_rate))
    })
}

/// Fills the class, event and hardware configuration of `*pm` for PMU event `event_name` as
/// FreeBSD's libpmc does before PMCALLOCATE (`pmc_pmu_pmcallocate(3)`): `pm_class` IAP (or IAF
/// for a fixed counter), `pm_md.pm_iap` the IA32_PERFEVTSELx image (the rings limited to
/// `pm_caps`' USER / SYSTEM when it names exactly one), `PMC_F_EV_PMU` and `pm_ev` the table
/// index for IAP; `pm_caps` gains READ, WRITE and what the event needs. The caller's
/// `pm_mode`, `pm_cpu`, `pm_count` and other flags are kept. An IAF event is expressed as
/// FreeBSD's static IAF event (`pm_ev` `PMC_EV_IAF_*`, no PMC_F_EV_PMU), which every host takes.
///
/// As FreeBSD, returns 0 or an errno value (and sets `errno` to it as well): `ENOENT` for a name
/// that is not a PMU event of this host, `EOPNOTSUPP` if the host has no PMU (no IAP class),
/// `EINVAL` for a NULL argument.
///
/// # Safety
///
/// `event_name` must be NULL or a NUL-terminated string; `pm` NULL or a readable and writable
/// `struct pmc_op_pmcallocate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_pmu_pmcallocate(
    event_name: *const c_char,
    pm: *mut pmc_op_pmcallocate,
) -> c_int {
    const OP: &str = "pmc_pmu_pmcallocate";
    configure();
    let body = || -> Result<()> {
        // SAFETY: NULL or NUL-terminated by the caller's promise.
        let name = unsafe { c_str(OP, "event_name", event_name) }?;
        let pm = non_null(OP, "pm", pm)?;
        if !pmu_enabled() {
            return Err(Error::with_detail(
                OP,
                libc::EOPNOTSUPP,
                "this host has no PMU (no IAP class)",
            ));
        }
        let not_pmu = |detail: String| Error::with_detail(OP, libc::ENOENT, detail);
        let event = api::lookup_event(name).map_err(|e| not_pmu(e.to_string()))?;
        if !matches!(event.class, Class::Iap | Class::Iaf) {
            return Err(not_pmu(format!(
                "{name} is a {} event, not a PMU event",
                event.class.name()
            )));
        }
        // SAFETY: non-null; readable by the caller's promise (no alignment assumed).
        let mut request = unsafe { pm.read_unaligned() };
        fill_pmu_request(&mut request, &event)?;
        // SAFETY: non-null; writable by the caller's promise (no alignment assumed).
        unsafe { pm.write_unaligned(request) };
        Ok(())
    };
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(error)) => {
            report(&error);
            error.errno
        }
        Err(_) => {
            report(&Error::with_detail(OP, libc::EIO, "internal error"));
            libc::EIO
        }
    }
}

/// Merges the configuration of PMU event `event` into `request`.
fn fill_pmu_request(request: &mut pmc_op_pmcallocate, event: &Event) -> Result<()> {
    let mode = Mode::from_u32(request.pm_mode).unwrap_or(Mode::ThreadCounting);
    let flags = PmcFlags::from_bits_retain(request.pm_flags);
    let filled = api::allocate_request(event, mode, request.pm_cpu, flags, None, &HashMap::new())?;
    let rings = Caps::USER | Caps::SYSTEM;
    let asked = Caps::from_bits_retain(request.pm_caps) & rings;
    let mut caps = Caps::from_bits_retain(filled.pm_caps) | Caps::READ | Caps::WRITE;
    let mut md = filled.pm_md;
    if asked != rings && !asked.is_empty() {
        // One ring asked for: count in it only, as FreeBSD's pmc_pmu_intel_pmcallocate.
        caps = (caps - rings) | asked;
        if let EventKind::Iap { evtsel, .. } = event.kind {
            let usr = if asked == Caps::USER { 1 << 16 } else { 0 };
            let os = if asked == Caps::SYSTEM { 1 << 17 } else { 0 };
            md.set_iap_config(evtsel & !(3 << 16) | usr | os);
        }
        if let EventKind::K8 { perf_ctl } = event.kind {
            let usr = if asked == Caps::USER { 1 << 16 } else { 0 };
            let os = if asked == Caps::SYSTEM { 1 << 17 } else { 0 };
            md.set_amd_config(perf_ctl & !(3 << 16) | usr | os);
        }
    }
    request.pm_class = filled.pm_class;
    request.pm_ev = filled.pm_ev;
    request.pm_md = md;
    request.pm_caps |= caps.bits();
    request.pm_flags |= filled.pm_flags & PmcFlags::EV_PMU.bits();
    if filled.pm_flags & PmcFlags::EV_PMU.bits() != 0 {
        request.pm_ev =
            api::host_pmu_key().and_then(|key| index_in(&table(&key), &event.name)).unwrap_or(0);
    }
    Ok(())
}

/// The name of PMU event `idx` in the table of CPU `cpuid` (`"GenuineIntel-6-55"`, as
/// `kern.hwpmc.cpuid` and the log's INITIALIZE record give it; NULL for this host's CPU), or
/// NULL (with `errno` `EINVAL`) if there is no such table or index
/// (`pmc_pmu_event_get_by_idx(3)`). The name lives as long as the process.
///
/// # Safety
///
/// `cpuid` must be NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_pmu_event_get_by_idx(
    cpuid: *const c_char,
    idx: c_int,
) -> *const c_char {
    const OP: &str = "pmc_pmu_event_get_by_idx";
    guard(ptr::null(), || {
        // SAFETY: NULL or NUL-terminated by the caller's promise.
        let key = unsafe { key_of(OP, cpuid) }?;
        let table = table(&key);
        let name = usize::try_from(idx)
            .ok()
            .and_then(|i| table.get(i))
            .ok_or_else(|| invalid(OP, format!("no event {idx} in the table of {key}")))?;
        Ok(intern(name).as_ptr())
    })
}

/// The index of PMU event `event` (a name of the table, any case, or one of FreeBSD's aliases
/// such as `instructions`) in the table of CPU `cpuid` (NULL for this host's CPU), or -1
/// (`errno` `ENOENT`, or `EINVAL` for a NULL event or an unknown CPU)
/// (`pmc_pmu_idx_get_by_event(3)`).
///
/// # Safety
///
/// `cpuid` must be NULL or a NUL-terminated string; `event` NULL or one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_pmu_idx_get_by_event(
    cpuid: *const c_char,
    event: *const c_char,
) -> c_int {
    const OP: &str = "pmc_pmu_idx_get_by_event";
    guard(-1, || {
        // SAFETY: NULL or NUL-terminated by the caller's promise.
        let name = unsafe { c_str(OP, "event", event) }?;
        // SAFETY: NULL or NUL-terminated by the caller's promise.
        let key = unsafe { key_of(OP, cpuid) }?;
        let canonical = full_machine(&key).lookup(name).map(|e| e.name);
        let canonical = canonical.as_deref().unwrap_or(name);
        let index = index_in(&table(&key), canonical).ok_or_else(|| {
            Error::with_detail(OP, libc::ENOENT, format!("{name} is not in the table of {key}"))
        })?;
        Ok(index as c_int)
    })
}

/// The PMU events of this host (IAF, IAP and K8) whose names contain `filter` (any case; all
/// for NULL), with a description of our own for vendor-table events (their category, encoding
/// and constraints: the vendors' texts are not carried).
///
/// # Safety
///
/// `filter` must be NULL or a NUL-terminated string.
unsafe fn matching_events(filter: *const c_char) -> Result<Vec<(String, Option<String>)>> {
    let filter = if filter.is_null() {
        None
    } else {
        // SAFETY: non-null and NUL-terminated by the caller's promise.
        Some(unsafe { CStr::from_ptr(filter) }.to_string_lossy().to_ascii_lowercase())
    };
    let key = api::host_pmu_key();
    Ok(api::list_events()?
        .into_iter()
        .filter(|(class, _)| matches!(class, Class::Iap | Class::Iaf | Class::K8))
        .map(|(_, name)| name)
        .filter(|name| filter.as_ref().is_none_or(|f| name.to_ascii_lowercase().contains(f)))
        .map(|name| {
            let description = key.as_deref().and_then(|key| summary(key, &name));
            (name, description)
        })
        .collect())
}

/// Writes `text` to the C library's `stdout`, so it stays in order with the caller's `printf`s.
fn print(text: &str) {
    let Ok(text) = CString::new(text.replace('\0', " ")) else { return };
    // SAFETY: a constant "%s" format with one NUL-terminated string argument.
    unsafe { libc::printf(c"%s".as_ptr(), text.as_ptr()) };
}

/// Runs a printing function's body; printing functions report nothing.
fn printing(body: impl FnOnce() -> Result<()>) {
    guard((), body);
}

/// Prints the names of this host's PMU events containing `event_name` (any case; every one for
/// NULL), one per line after a tab (`pmc_pmu_print_counters(3)`).
///
/// # Safety
///
/// `event_name` must be NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_pmu_print_counters(event_name: *const c_char) {
    printing(|| {
        // SAFETY: NULL or NUL-terminated by the caller's promise.
        for (name, _) in unsafe { matching_events(event_name) }? {
            print(&format!("\t{name}\n"));
        }
        Ok(())
    });
}

/// Prints `NAME:\tdescription` for this host's PMU events whose names contain `ev` and that
/// have a description (`pmc_pmu_print_counter_desc(3)`).
///
/// # Safety
///
/// `ev` must be NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_pmu_print_counter_desc(ev: *const c_char) {
    printing(|| {
        // SAFETY: NULL or NUL-terminated by the caller's promise.
        for (name, description) in unsafe { matching_events(ev) }? {
            if let Some(d) = description {
                print(&format!("{name}:\t{d}\n"));
            }
        }
        Ok(())
    });
}

/// Prints `NAME:` and the long description on the next line for this host's PMU events whose
/// names contain `ev` and that have one (`pmc_pmu_print_counter_desc_long(3)`).
///
/// # Safety
///
/// `ev` must be NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_pmu_print_counter_desc_long(ev: *const c_char) {
    printing(|| {
        // SAFETY: NULL or NUL-terminated by the caller's promise.
        for (name, description) in unsafe { matching_events(ev) }? {
            if let Some(d) = description {
                print(&format!("{name}:\n{d}\n"));
            }
        }
        Ok(())
    });
}

/// Prints everything known about this host's PMU events whose names contain `ev`: the name,
/// then tab-indented `desc`, `long_desc`, the class, the encoding and the default sampling rate
/// (`pmc_pmu_print_counter_full(3)`).
///
/// # Safety
///
/// `ev` must be NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmc_pmu_print_counter_full(ev: *const c_char) {
    printing(|| {
        // SAFETY: NULL or NUL-terminated by the caller's promise.
        for (name, description) in unsafe { matching_events(ev) }? {
            let mut text = format!("{name}:\n");
            if let Some(d) = description {
                text += &format!("\tdesc:\t\t{d}\n");
            }
            if let Ok(event) = api::lookup_event(&name) {
                text += &format!("\tclass:\t\t{}\n", event.class.name());
                match event.kind {
                    EventKind::Iap { evtsel, umask2, offcore_rsp } => {
                        text += &format!(
                            "\tevent:\t\tevent={:#04x},umask={:#04x}{}{}{}{}{}\n",
                            evtsel & 0xFF,
                            (evtsel >> 8) & 0xFF,
                            if evtsel >> 24 != 0 {
                                format!(",cmask={}", evtsel >> 24)
                            } else {
                                String::new()
                            },
                            if evtsel & 1 << 18 != 0 { ",edge" } else { "" },
                            if evtsel & 1 << 23 != 0 { ",inv" } else { "" },
                            if umask2 != 0 {
                                format!(",umask2={umask2:#04x}")
                            } else {
                                String::new()
                            },
                            offcore_rsp.map_or(String::new(), |v| format!(",offcore_rsp={v:#x}")),
                        )
                    }
                    EventKind::Iaf { index, .. } => {
                        text += &format!("\tevent:\t\tfixed counter {index}\n");
                    }
                    EventKind::K8 { perf_ctl } => {
                        text += &format!("\tevent:\t\tPERF_CTL={perf_ctl:#x}\n");
                    }
                    EventKind::Tsc | EventKind::Soft { .. } => {}
                }
                text += &format!("\tsample_rate:\t{}\n", event.default_rate);
            }
            print(&text);
        }
        Ok(())
    });
}
