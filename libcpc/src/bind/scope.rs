//! Where a set is bound ([`Scope`]): a thread, a CPU (the calling thread pinned to it on the
//! Linux host) or a process, and the PMC flags each scope counts with.

use std::thread::ThreadId;

use pmc::PmcFlags;
use pmc::host::HostKind;

use crate::platform::Platform;

/// Where a set is bound.
#[derive(Debug)]
pub(crate) enum Scope {
    /// To the thread `thread`, bound when CPU binds had happened `epoch` times; with
    /// `inherit` (CPC_BIND_LWP_INHERIT) the threads it creates afterwards count too.
    Lwp { thread: ThreadId, epoch: u64, inherit: bool },
    /// To CPU `cpu` by thread `thread`, whose previous CPU mask is restored at unbind.
    Cpu { cpu: u32, thread: ThreadId, previous: Option<SavedMask> },
    /// To process `pid`.
    Process { pid: i32 },
}

/// The CPU mask of a thread before `cpc_bind_cpu` pinned it (Linux).
#[cfg(target_os = "linux")]
pub(crate) type SavedMask = Box<libc::cpu_set_t>;
/// Elsewhere the thread is not pinned: nothing is saved.
#[cfg(not(target_os = "linux"))]
pub(crate) type SavedMask = std::convert::Infallible;

/// Pins the calling thread to `cpu` for a CPU bind on the Linux host (the simulator's CPUs are
/// not this machine's; elsewhere the thread is not pinned); its previous mask, or the errno.
pub(super) fn pin_for_bind(cpu: u32) -> std::result::Result<Option<SavedMask>, i32> {
    #[cfg(target_os = "linux")]
    if pmc::api::host_kind().ok() == Some(pmc::host::HostKind::Linux) {
        return pin_to(cpu).map(Some);
    }
    let _ = cpu;
    Ok(None)
}

/// Gives the calling thread back the mask [`pin_for_bind`] saved.
pub(super) fn restore_mask(mask: &SavedMask) {
    #[cfg(target_os = "linux")]
    set_affinity(mask);
    #[cfg(not(target_os = "linux"))]
    match *mask {}
}

#[cfg(target_os = "linux")]
fn set_affinity(mask: &libc::cpu_set_t) -> bool {
    // SAFETY: sched_setaffinity reads one cpu_set_t of the size given.
    unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), mask) == 0 }
}

#[cfg(target_os = "linux")]
/// Pins the calling thread to `cpu`; its previous mask, or the errno of the failure.
fn pin_to(cpu: u32) -> std::result::Result<Box<libc::cpu_set_t>, i32> {
    // SAFETY: an all-zero cpu_set_t is a valid empty mask.
    let mut previous: Box<libc::cpu_set_t> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: sched_getaffinity writes one cpu_set_t of the size given.
    if unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut *previous) } != 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
    }
    // SAFETY: as above.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes a bit of the mask; `cpu` is below the mask's size (checked by the
    // caller against the host's CPU count, which is far below CPU_SETSIZE).
    unsafe { libc::CPU_SET(cpu as usize, &mut mask) };
    if !set_affinity(&mask) {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
    }
    Ok(previous)
}

/// The PMC flags of `scope`: the thread scope of libpmc's driver for a per-LWP bind
/// (PMC_F_THREAD, with PMC_F_THREAD_INHERIT for CPC_BIND_LWP_INHERIT), so a set counts its own
/// thread. Process counting (no flag) where the scope is missing: on FreeBSD, whose kernel has
/// no thread scope, and for CPC_BIND_MULTIPLEX, whose rotating PMCs the driver loads for the
/// whole process.
pub(super) fn thread_scope(platform: &Platform, scope: &Scope, multiplex: bool) -> PmcFlags {
    match scope {
        Scope::Lwp { inherit, .. } if !multiplex && platform.host != HostKind::FreeBsd => {
            let inherit = if *inherit { PmcFlags::THREAD_INHERIT } else { PmcFlags::empty() };
            PmcFlags::THREAD | inherit
        }
        _ => PmcFlags::empty(),
    }
}
