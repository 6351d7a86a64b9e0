//! The Rust API: PMC handles that release themselves, and the calls of pmc(3) over the host.
//!
//! ```no_run
//! use pmc::{Mode, PmcSpec};
//! let pmc = PmcSpec::new("page-faults").mode(Mode::ThreadCounting).allocate()?;
//! pmc.attach(0)?; // this process
//! pmc.start()?;
//! let v: Vec<u8> = vec![1; 1 << 20];
//! pmc.stop()?;
//! println!("{} page faults", pmc.read()?);
//! # Ok::<(), pmc::Error>(())
//! ```

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsString;

use hwpmc::abi::{
    Caps, Class, Mode, Op, PMC_CPU_ANY, PMC_VERSION_CLIENT, PmcClassInfo, PmcFlags, PmcInfo,
    PmcOpCaps, PmcOpConfigureLog, PmcOpGetCpuInfo, PmcOpGetDriverStats, PmcOpGetDynEventInfo,
    PmcOpGetMsr, PmcOpGetPmcInfo, PmcOpPmcAdmin, PmcOpPmcAllocate, PmcOpPmcAttach, PmcOpPmcRw,
    PmcOpPmcSetCount, PmcOpSimple, PmcOpWriteLog, State, event,
};
use hwpmc::abi::{PMC_OP_PMCREADTIMES, PmcOpPmcReadTimes};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use crate::error::{Error, Result};
use crate::events::model::{self, CpuId};
use crate::events::{
    Event, EventError, EventKind, EventListing, HostEvents, HybridEvent, pmu_table,
};
use crate::host::{self, HostKind};

/// Issues `op` with `arg` on this process's host.
pub fn call<T: IntoBytes + FromBytes>(op: Op, arg: &mut T) -> Result<()> {
    host::with_host(|h| h.syscall(op, arg.as_mut_bytes()))
}

/// Issues `op` with no argument.
fn call_empty(op: Op) -> Result<()> {
    host::with_host(|h| h.syscall(op, &mut []))
}

/// The host this process uses.
pub fn host_kind() -> Result<HostKind> {
    host::selected()
}

/// Checks that the host speaks this library's ABI version (FreeBSD's `pmc_init`): the host's
/// PMC_VERSION, or EPROGMISMATCH.
pub fn init() -> Result<u32> {
    let mut version = PMC_VERSION_CLIENT;
    call(Op::GetModuleVersion, &mut version)?;
    Ok(version)
}

/// The machine's description (`pmc_cpuinfo`).
pub fn cpu_info() -> Result<PmcOpGetCpuInfo> {
    let mut info = PmcOpGetCpuInfo::new_zeroed();
    call(Op::GetCpuInfo, &mut info)?;
    Ok(info)
}

/// The classes of this machine, from [`cpu_info`].
pub fn classes() -> Result<Vec<PmcClassInfo>> {
    let info = cpu_info()?;
    Ok(info.pm_classes[..(info.pm_nclass as usize).min(info.pm_classes.len())].to_vec())
}

/// The rows of `cpu` (`pmc_pmcinfo`).
pub fn pmc_info(cpu: u32) -> Result<Vec<PmcInfo>> {
    let npmc = cpu_info()?.pm_npmc as usize;
    let header = size_of::<PmcOpGetPmcInfo>();
    let mut buf = vec![0u8; header + npmc * size_of::<PmcInfo>()];
    let head = PmcOpGetPmcInfo { pm_cpu: cpu as i32, pm_pad: 0 };
    buf[..header].copy_from_slice(head.as_bytes());
    host::with_host(|h| h.syscall(Op::GetPmcInfo, &mut buf))?;
    Ok(buf[header..]
        .chunks_exact(size_of::<PmcInfo>())
        .filter_map(|c| PmcInfo::read_from_bytes(c).ok())
        .collect())
}

/// Driver statistics (`pmc_get_driver_stats`).
pub fn driver_stats() -> Result<PmcOpGetDriverStats> {
    let mut stats = PmcOpGetDriverStats::new_zeroed();
    call(Op::GetDriverStats, &mut stats)?;
    Ok(stats)
}

/// The host's software events: (name, event code).
pub fn soft_events() -> Result<Vec<(String, u32)>> {
    // 272 KiB: on the heap, not the stack.
    let mut info = PmcOpGetDynEventInfo::new_box_zeroed()
        .map_err(|_| Error::new("GETDYNEVENTINFO", libc::ENOMEM))?;
    info.pm_class = Class::Soft.as_u32();
    call(Op::GetDynEventInfo, &mut *info)?;
    let n = (info.pm_nevent as usize).min(info.pm_events.len());
    Ok(info.pm_events[..n]
        .iter()
        .map(|e| {
            let end = e.pm_ev_name.iter().position(|&b| b == 0).unwrap_or(e.pm_ev_name.len());
            (String::from_utf8_lossy(&e.pm_ev_name[..end]).into_owned(), e.pm_ev_code)
        })
        .collect())
}

thread_local! {
    /// The event catalog of this thread's host, made on first use.
    static CATALOG: RefCell<Option<(HostEvents, HashMap<String, u32>)>> = const { RefCell::new(None) };
}

fn with_catalog<R>(f: impl FnOnce(&HostEvents, &HashMap<String, u32>) -> Result<R>) -> Result<R> {
    CATALOG.with(|cell| {
        if cell.borrow().is_none() {
            let infos = classes()?;
            let classes = infos.iter().filter_map(|c| Class::from_u32(c.pm_class)).collect();
            let fixed_counters =
                infos.iter().find(|c| c.pm_class == Class::Iaf.as_u32()).map(|c| c.pm_num);
            let soft = soft_events().unwrap_or_default();
            let (missing_reason, host_cpu, kind, arch_leaf) = host::with_host(|h| {
                Ok((h.missing_hardware_reason(), h.intel_model(), h.kind(), h.arch_perfmon_leaf()))
            })?;
            let cpu = catalog_cpu(host_cpu.as_deref())?;
            // A real CPU's hybrid core type picks its table; not for the simulated CPU or a CPU
            // PMC_CPUID names.
            let core_type = match kind {
                HostKind::Sim => None,
                _ if model::cpuid_override().ok().flatten().is_some() => None,
                _ => model::current_core_type(),
            };
            let events = HostEvents {
                classes,
                missing_reason,
                soft_events: soft.iter().map(|(n, _)| n.clone()).collect(),
                cpu,
                core_type,
                // What the host's CPU lacks of the architectural events (not for a CPU PMC_CPUID
                // names: its leaf 0xA is unknown here).
                arch_events_unavailable: match arch_leaf {
                    Some((eax, ebx)) if model::cpuid_override().ok().flatten().is_none() => {
                        crate::events::arch_events_unavailable_from_cpuid(eax, ebx)
                    }
                    _ => 0,
                },
                fixed_counters,
            };
            *cell.borrow_mut() = Some((events, soft.into_iter().collect()));
        }
        let catalog = cell.borrow();
        let (events, codes) = catalog.as_ref().expect("filled above");
        f(events, codes)
    })
}

/// Resolves an event spec for this host.
pub fn lookup_event(spec: &str) -> Result<Event> {
    with_catalog(|events, _| {
        events.lookup(spec).map_err(|e| Error::with_detail("event", libc::EINVAL, e.to_string()))
    })
}

/// Resolves an event spec in the table of core type `core_type` (leaf 0x1A numbering) first.
fn lookup_event_on(spec: &str, core_type: u8) -> Result<Event> {
    with_catalog(|events, _| {
        let events = HostEvents { core_type: Some(core_type), ..events.clone() };
        events.lookup(spec).map_err(|e| Error::with_detail("event", libc::EINVAL, e.to_string()))
    })
}

/// Whether a PMC without a core type counts with each core type's own encoding here: on a
/// hybrid machine whose driver loads PMCs itself. The Linux host hands PMCs to perf, which is
/// given one encoding (its hybrid PMUs are named with `cpu_core/`, `cpu_atom/`), so there the
/// event is looked up as on any CPU.
fn counts_on_core_types() -> Result<bool> {
    host::with_host(|h| Ok(h.kind() != HostKind::Linux && h.is_hybrid()))
}

/// Resolves an event spec for a PMC of every core type (see
/// [`crate::events::HostEvents::lookup_every_core_type`]).
fn lookup_event_every_core_type(spec: &str) -> Result<HybridEvent> {
    with_catalog(|events, _| {
        events
            .lookup_every_core_type(spec)
            .map_err(|e| Error::with_detail("event", libc::EINVAL, e.to_string()))
    })
}

/// On a hybrid CPU whose core types encode `spec` differently, the 64-bit PERFEVTSEL images of
/// the P-cores and of the E-cores (for `pmcstat -u`), as if the host could count every class;
/// `None` when one encoding serves every CPU.
pub fn encode_every_core_type(spec: &str) -> Result<Option<(u64, u64)>> {
    with_catalog(|events, _| {
        let Ok(hybrid) = events.encoding_view().lookup_every_core_type(spec) else {
            return Ok(None);
        };
        let Some(atom) = hybrid.atom_evtsel else { return Ok(None) };
        let EventKind::Iap { evtsel, umask2, .. } = hybrid.event.kind else { return Ok(None) };
        Ok(Some((u64::from(evtsel) | u64::from(umask2) << 40, atom)))
    })
}

/// Splits perf's hybrid PMU prefix off a spec: `cpu_core/EVENT/` is EVENT on the P-cores (core
/// type 0x40), `cpu_atom/EVENT/` on the E-cores (0x20), with the allocation flag that says so.
pub fn hybrid_prefix(spec: &str) -> (Option<(u8, PmcFlags)>, &str) {
    let inner = |prefix: &str| spec.strip_prefix(prefix)?.strip_suffix('/');
    if let Some(event) = inner("cpu_core/") {
        (Some((0x40, PmcFlags::CORE_TYPE_CORE)), event)
    } else if let Some(event) = inner("cpu_atom/") {
        (Some((0x20, PmcFlags::CORE_TYPE_ATOM)), event)
    } else {
        (None, spec)
    }
}

/// Every event this host offers, (class, name).
pub fn list_events() -> Result<Vec<(Class, String)>> {
    with_catalog(|events, _| Ok(events.list()))
}

/// The encoding of `spec` for the selected CPU model (the host's, or `PMC_CPUID`'s) as if the
/// host could count every hardware class, and why this host cannot count it, if it cannot:
/// for `pmcstat -u`.
pub fn encode_event(spec: &str) -> Result<(Event, Option<String>)> {
    with_catalog(|events, _| {
        let unavailable = match events.lookup(spec) {
            Ok(event) => return Ok((event, None)),
            Err(error @ EventError::Unavailable { .. }) => error.to_string(),
            Err(error) => return Err(Error::with_detail("event", libc::EINVAL, error.to_string())),
        };
        let event = events
            .encode(spec)
            .map_err(|e| Error::with_detail("event", libc::EINVAL, e.to_string()))?;
        Ok((event, Some(unavailable)))
    })
}

/// The catalog as `pmcstat -L` shows it: every event this host offers, with its class and
/// category, then the selected CPU model's events this host cannot count.
pub fn event_listing() -> Result<EventListing> {
    with_catalog(|events, _| Ok(events.listing()))
}

/// What to allocate.
#[derive(Debug, Clone)]
pub struct PmcSpec {
    spec: String,
    mode: Mode,
    cpu: Option<u32>,
    flags: PmcFlags,
    rate: Option<u64>,
    /// The modes a software event counts in (user, system); `None`: both.
    soft_rings: Option<(bool, bool)>,
}

impl PmcSpec {
    /// A process-counting PMC of event `spec` (`"instructions"`, `"page-faults,usr"`, …).
    pub fn new(spec: &str) -> Self {
        PmcSpec {
            spec: spec.to_string(),
            mode: Mode::ThreadCounting,
            cpu: None,
            flags: PmcFlags::empty(),
            rate: None,
            soft_rings: None,
        }
    }
    /// In `mode`.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }
    /// On `cpu` (system modes).
    pub fn cpu(mut self, cpu: u32) -> Self {
        self.cpu = Some(cpu);
        self
    }
    /// With PMC_F_* `flags` added.
    pub fn flags(mut self, flags: PmcFlags) -> Self {
        self.flags |= flags;
        self
    }
    /// Counting only the thread that attaches it (PMCATTACH with pid 0, or the attach PMCSTART
    /// makes), with `inherit` the threads that thread creates afterwards too
    /// ([`PmcFlags::THREAD`], [`PmcFlags::THREAD_INHERIT`]: an extension of the process modes;
    /// refused with `EOPNOTSUPP` on the FreeBSD host, whose kernel has no thread scope).
    pub fn thread(self, inherit: bool) -> Self {
        let inherit = if inherit { PmcFlags::THREAD_INHERIT } else { PmcFlags::empty() };
        self.flags(PmcFlags::THREAD | inherit)
    }
    /// Sampling every `rate` events (default: the event's default rate); for a counting PMC,
    /// the initial count (`pm_count`).
    pub fn rate(mut self, rate: u64) -> Self {
        self.rate = Some(rate);
        self
    }

    /// For a software event, which take no ring qualifiers in their spec: count in user mode
    /// (`user`), in system mode (`system`), or both (at least one must be set), as
    /// `PMC_CAP_USER` and `PMC_CAP_SYSTEM` ask (perf's `exclude_kernel` and `exclude_user` on
    /// the Linux host). Hardware events keep the rings of their spec (`usr`, `os`).
    pub fn soft_rings(mut self, user: bool, system: bool) -> Self {
        self.soft_rings = Some((user, system));
        self
    }

    /// The PMCALLOCATE request for this spec on this host. A spec in perf's hybrid form,
    /// `cpu_core/EVENT/` or `cpu_atom/EVENT/`, names the event in the P-cores' or the E-cores'
    /// table and counts only on CPUs of that core type ([`PmcFlags::CORE_TYPE_CORE`],
    /// [`PmcFlags::CORE_TYPE_ATOM`]).
    ///
    /// Without a core type, on a hybrid CPU, the event must be one both core types have (see
    /// [`crate::events::HostEvents::lookup_every_core_type`]): where the E-cores encode it
    /// differently, their encoding goes in the driver's extension after `pm_iap`
    /// (`pm_iap_config_atom`), and the driver loads each core type's own.
    pub fn request(&self) -> Result<PmcOpPmcAllocate> {
        let (core_type, spec) = hybrid_prefix(&self.spec);
        let (event, atom_evtsel, flags) = match core_type {
            Some((core_type, flag)) => (lookup_event_on(spec, core_type)?, None, self.flags | flag),
            None if self.flags.intersects(PmcFlags::HYBRID_FLAGS) || !counts_on_core_types()? => {
                (lookup_event(spec)?, None, self.flags)
            }
            None => {
                let hybrid = lookup_event_every_core_type(spec)?;
                (hybrid.event, hybrid.atom_evtsel, self.flags)
            }
        };
        let cpu = if self.mode.is_system() { self.cpu.unwrap_or(0) } else { PMC_CPU_ANY };
        let mut request = with_catalog(|_, codes| {
            allocate_request(&event, self.mode, cpu, flags, self.rate, codes)
        })?;
        if let Some(atom_evtsel) = atom_evtsel {
            request.pm_md.set_iap_config_atom(atom_evtsel);
        }
        if let (EventKind::Soft { .. }, Some((user, system))) = (&event.kind, self.soft_rings) {
            let mut caps = Caps::from_bits_retain(request.pm_caps);
            caps.set(Caps::USER, user);
            caps.set(Caps::SYSTEM, system);
            request.pm_caps = caps.bits();
        }
        Ok(request)
    }

    /// Allocates the PMC (see [`allocate_spec`]).
    pub fn allocate(&self) -> Result<Pmc> {
        let mut request = self.request()?;
        allocate_spec(&self.spec, &mut request)?;
        Ok(Pmc { id: request.pm_pmcid, mode: self.mode })
    }
}

/// PMCALLOCATE of `request`, made for event `spec`. An offcore-response event whose MSR another
/// PMC holds with another value (EBUSY) is allocated on the other MSR where the event has an
/// encoding for it, as Linux perf does.
pub fn allocate_spec(spec: &str, request: &mut PmcOpPmcAllocate) -> Result<()> {
    match call(Op::PmcAllocate, request) {
        Err(busy) if busy.errno == libc::EBUSY => {
            let event = lookup_event(spec)?;
            let alternate = with_catalog(|events, _| Ok(events.offcore_alternate(&event)))?;
            let Some(evtsel) = alternate else { return Err(busy) };
            request.pm_md.set_iap_config(evtsel);
            call(Op::PmcAllocate, request)
        }
        result => result,
    }
}

/// The PMCALLOCATE request for `event`: how FreeBSD's libpmc fills `struct pmc_op_pmcallocate`.
pub fn allocate_request(
    event: &Event,
    mode: Mode,
    cpu: u32,
    flags: PmcFlags,
    rate: Option<u64>,
    soft_codes: &HashMap<String, u32>,
) -> Result<PmcOpPmcAllocate> {
    let mut req = PmcOpPmcAllocate::new_zeroed();
    req.pm_class = event.class.as_u32();
    req.pm_mode = mode.as_u32();
    req.pm_cpu = cpu;
    req.pm_flags = flags.bits();
    let mut caps = Caps::empty();
    let rings = |usr: bool, os: bool| {
        let mut c = Caps::empty();
        c.set(Caps::USER, usr);
        c.set(Caps::SYSTEM, os);
        c
    };
    match &event.kind {
        EventKind::Iap { evtsel, umask2, offcore_rsp } => {
            req.pm_flags |= PmcFlags::EV_PMU.bits();
            // FreeBSD's pm_ev for a PMU event: its row in the CPU's table (0 for a raw
            // encoding), which logs carry and readers name with `PmuEventNames`.
            req.pm_ev = pmu_index(&event.name).unwrap_or(0);
            req.pm_md.set_iap_config64(u64::from(*evtsel) | u64::from(*umask2) << 40);
            req.pm_md.set_iap_rsp(offcore_rsp.unwrap_or(0));
            caps |= selector_caps(*evtsel);
        }
        EventKind::Iaf { index: 3, usr, os, .. } => {
            // Fixed counter 3 has no static event: FreeBSD's PMU form, TOPDOWN.SLOTS's
            // encoding (0xA4/0x01) with the rings, which the IAF class maps to the counter.
            req.pm_flags |= PmcFlags::EV_PMU.bits();
            req.pm_ev = pmu_index(&event.name).unwrap_or(0);
            let mut config = 0xA4 | 0x01 << 8;
            config |= if *usr { hwpmc::regs::PerfEvtSel::USR as u32 } else { 0 };
            config |= if *os { hwpmc::regs::PerfEvtSel::OS as u32 } else { 0 };
            req.pm_md.set_iap_config(config);
            caps |= rings(*usr, *os);
        }
        EventKind::Iaf { event, usr, os, .. } => {
            req.pm_ev = *event;
            caps |= rings(*usr, *os);
        }
        EventKind::K8 { perf_ctl } => {
            req.pm_flags |= PmcFlags::EV_PMU.bits();
            req.pm_ev = pmu_index(&event.name).unwrap_or(0);
            req.pm_md.set_amd_config(*perf_ctl);
            // PERF_CTL's low 32 bits are laid out as IA32_PERFEVTSELx.
            caps |= selector_caps(*perf_ctl as u32);
        }
        EventKind::Tsc => {
            req.pm_ev = event::TSC_TSC;
            caps |= Caps::READ;
        }
        EventKind::Soft { name } => {
            req.pm_ev = *soft_codes.get(name).ok_or_else(|| {
                Error::with_detail(
                    "event",
                    libc::EINVAL,
                    format!("this host has no SOFT event {name}"),
                )
            })?;
        }
    }
    if mode.is_sampling() {
        caps |= Caps::INTERRUPT;
        req.pm_count = rate.unwrap_or(event.default_rate);
    } else {
        req.pm_count = rate.unwrap_or(0);
    }
    req.pm_caps = caps.bits();
    Ok(req)
}

/// The capabilities an event-select image asks for (IA32_PERFEVTSELx, or AMD PERF_CTL's low 32
/// bits, which have the same layout): USR 16, OS 17, EDGE 18, INV 23, CMASK 31:24.
fn selector_caps(selector: u32) -> Caps {
    let mut caps = Caps::empty();
    for (bit, cap) in [(16, Caps::USER), (17, Caps::SYSTEM), (18, Caps::EDGE), (23, Caps::INVERT)] {
        caps.set(cap, selector & 1 << bit != 0);
    }
    caps.set(Caps::THRESHOLD, selector >> 24 != 0);
    caps
}

/// The row of event `name` in the host CPU's PMU table, if it has one.
fn pmu_index(name: &str) -> Option<u32> {
    pmu_table::index_in(&pmu_table::table(&host_pmu_key()?), name)
}

/// The PMU table key of the host's CPU (`"GenuineIntel-6-55-4"`, or `PMC_CPUID`'s CPU), if it
/// has an event table.
pub(crate) fn host_pmu_key() -> Option<String> {
    let host_cpu = host::with_host(|h| Ok(h.intel_model())).ok().flatten();
    let cpu = catalog_cpu(host_cpu.as_deref()).ok().flatten()?;
    pmu_table::model_key(&cpu.to_string())
}

/// The CPU the catalog answers for: the one `PMC_CPUID` names (FreeBSD's `pmc_cpuid` format),
/// else the host's. A malformed `PMC_CPUID` is an EINVAL error that shows the expected format.
fn catalog_cpu(host_cpu: Option<&str>) -> Result<Option<CpuId>> {
    match model::cpuid_override() {
        Ok(Some(cpu)) => Ok(Some(cpu)),
        Ok(None) => Ok(host_cpu.and_then(|id| CpuId::parse(id).ok())),
        Err(error) => Err(Error::with_detail("event catalog", libc::EINVAL, error.to_string())),
    }
}

/// An allocated PMC, released when dropped.
#[derive(Debug)]
pub struct Pmc {
    id: u32,
    mode: Mode,
}

impl Pmc {
    /// The PMC id.
    pub fn id(&self) -> u32 {
        self.id
    }
    /// Its mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// Attaches it to process `pid` (0: this process).
    pub fn attach(&self, pid: i32) -> Result<()> {
        attach(self.id, pid)
    }
    /// Detaches it from process `pid` (0: this process).
    pub fn detach(&self, pid: i32) -> Result<()> {
        detach(self.id, pid)
    }
    /// Starts it.
    pub fn start(&self) -> Result<()> {
        start(self.id)
    }
    /// Stops it.
    pub fn stop(&self) -> Result<()> {
        stop(self.id)
    }
    /// Its value (the count; the reload count for sampling PMCs).
    pub fn read(&self) -> Result<u64> {
        read(self.id)
    }
    /// Its count with the times it was enabled and counted (see [`read_scaled`]).
    pub fn read_scaled(&self) -> Result<ScaledValue> {
        read_scaled(self.id)
    }
    /// Sets its value (it must be stopped).
    pub fn write(&self, value: u64) -> Result<()> {
        write(self.id, value)
    }
    /// Sets a sampling PMC's reload count.
    pub fn set_count(&self, count: u64) -> Result<()> {
        set_count(self.id, count)
    }
    /// Its capabilities.
    pub fn capabilities(&self) -> Result<Caps> {
        capabilities(self.id)
    }
    /// Gives up the handle without releasing the PMC; returns its id.
    pub fn into_id(self) -> u32 {
        let id = self.id;
        std::mem::forget(self);
        id
    }
}

impl Drop for Pmc {
    fn drop(&mut self) {
        let _ = release(self.id);
    }
}

/// PMCATTACH.
pub fn attach(id: u32, pid: i32) -> Result<()> {
    call(Op::PmcAttach, &mut PmcOpPmcAttach { pm_pmc: id, pm_pid: pid })
}
/// PMCDETACH.
pub fn detach(id: u32, pid: i32) -> Result<()> {
    call(Op::PmcDetach, &mut PmcOpPmcAttach { pm_pmc: id, pm_pid: pid })
}
/// PMCSTART.
pub fn start(id: u32) -> Result<()> {
    call(Op::PmcStart, &mut PmcOpSimple { pm_pmcid: id })
}
/// PMCSTOP.
pub fn stop(id: u32) -> Result<()> {
    call(Op::PmcStop, &mut PmcOpSimple { pm_pmcid: id })
}
/// PMCRELEASE.
pub fn release(id: u32) -> Result<()> {
    call(Op::PmcRelease, &mut PmcOpSimple { pm_pmcid: id })
}
/// PMCRW with `flags` (PMC_F_OLDVALUE / PMC_F_NEWVALUE): returns the old value.
pub fn rw(id: u32, flags: PmcFlags, value: u64) -> Result<u64> {
    let mut op = PmcOpPmcRw { pm_flags: flags.bits(), pm_pmcid: id, pm_value: value };
    call(Op::PmcRw, &mut op)?;
    Ok(op.pm_value)
}
/// Reads a PMC.
pub fn read(id: u32) -> Result<u64> {
    rw(id, PmcFlags::OLDVALUE, 0)
}
/// A count with the time its PMC was enabled and the time it was on a counter: a multiplexed
/// PMC ([`PmcFlags::MULTIPLEX`]) counts only during its turns, and its count scaled to the whole
/// time enabled is `value × enabled / running`, as perf scales multiplexed counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScaledValue {
    /// The count as [`read`] returns it.
    pub value: u64,
    /// Time the PMC was enabled: running, and for a process PMC, a thread of a target on a
    /// CPU. In reference cycles (TSC ticks) from this project's driver, 0 for a PMC it does not
    /// multiplex; on the Linux host perf's nanoseconds, for every PMC perf counts.
    pub enabled: u64,
    /// Time it was on a counter, in the same unit. 0 when `enabled` is 0.
    pub running: u64,
}

impl ScaledValue {
    /// Whether the PMC shared its counter (it was not counting all the time it was enabled).
    pub fn multiplexed(&self) -> bool {
        self.running < self.enabled
    }
    /// The fraction of the time enabled it was counted: 1 when it was not multiplexed (or not
    /// yet enabled), 0 when it never had a turn.
    pub fn fraction_counted(&self) -> f64 {
        if self.enabled == 0 { 1.0 } else { self.running as f64 / self.enabled as f64 }
    }
    /// The count scaled to the whole time enabled; `None` when it never had a turn (perf's
    /// `<not counted>`). The count itself when it was not multiplexed.
    pub fn scaled(&self) -> Option<u64> {
        if !self.multiplexed() {
            return Some(self.value);
        }
        if self.running == 0 {
            return None;
        }
        let scaled = u128::from(self.value) * u128::from(self.enabled) / u128::from(self.running);
        Some(u64::try_from(scaled).unwrap_or(u64::MAX))
    }
}

/// Reads a PMC's count with its times enabled and running (the driver's
/// [`PMC_OP_PMCREADTIMES`] extension). On a host without the
/// extension (FreeBSD's own kernel module) the count comes with no times, as for a PMC that is
/// not multiplexed.
pub fn read_scaled(id: u32) -> Result<ScaledValue> {
    let mut op = PmcOpPmcReadTimes::new_zeroed();
    op.pm_pmcid = id;
    let ext = host::with_host(|h| h.extension_call(PMC_OP_PMCREADTIMES, op.as_mut_bytes()));
    match ext {
        Ok(()) => {
            Ok(ScaledValue { value: op.pm_value, enabled: op.pm_enabled, running: op.pm_running })
        }
        Err(e) if e.errno == libc::ENOSYS || e.errno == libc::EINVAL => {
            // No such op (EINVAL from a kernel without it), or a bad id: PMCRW says which.
            Ok(ScaledValue { value: read(id)?, enabled: 0, running: 0 })
        }
        Err(e) => Err(e),
    }
}
/// Writes a PMC.
pub fn write(id: u32, value: u64) -> Result<()> {
    rw(id, PmcFlags::NEWVALUE, value).map(drop)
}
/// PMCSETCOUNT.
pub fn set_count(id: u32, count: u64) -> Result<()> {
    call(Op::PmcSetCount, &mut PmcOpPmcSetCount { pm_count: count, pm_pmcid: id, pm_pad: 0 })
}
/// GETCAPS.
pub fn capabilities(id: u32) -> Result<Caps> {
    let mut op = PmcOpCaps { pm_pmcid: id, pm_caps: 0 };
    call(Op::GetCaps, &mut op)?;
    Ok(Caps::from_bits_truncate(op.pm_caps))
}
/// PMCX86GETMSR: the RDPMC index of a self-attached process PMC.
pub fn get_msr(id: u32) -> Result<u32> {
    let mut op = PmcOpGetMsr { pm_msr: 0, pm_pmcid: id };
    call(Op::PmcGetMsr, &mut op)?;
    Ok(op.pm_msr)
}
/// PMCADMIN: enables or disables row `row` of `cpu`.
pub fn admin(cpu: i32, row: i32, enable: bool) -> Result<()> {
    let state = if enable { State::Free } else { State::Disabled };
    call(
        Op::PmcAdmin,
        &mut PmcOpPmcAdmin { pm_cpu: cpu, pm_flags: 0, pm_pmc: row, pm_state: state.as_u32() },
    )
}
/// CONFIGURELOG: logs to descriptor `fd` (negative: deconfigure).
pub fn configure_log(fd: i32) -> Result<()> {
    call(Op::ConfigureLog, &mut PmcOpConfigureLog { pm_flags: 0, pm_logfd: fd })
}
/// FLUSHLOG.
pub fn flush_log() -> Result<()> {
    call_empty(Op::FlushLog)
}
/// CLOSELOG.
pub fn close_log() -> Result<()> {
    call_empty(Op::CloseLog)
}
/// WRITELOG: a USERDATA record.
pub fn write_log(data: u32) -> Result<()> {
    call(Op::WriteLog, &mut PmcOpWriteLog { pm_userdata: data })
}

/// Launches `argv` held before it runs (a command on Linux and FreeBSD; a simulated program's
/// name on the simulator); attach PMCs to the pid, then [`resume`] it.
pub fn spawn(argv: &[OsString]) -> Result<i32> {
    host::with_host(|h| h.spawn(argv))
}
/// [`spawn`] executing `file` (a path, or a name looked up in `PATH` as `execvp` does) with the
/// arguments `argv`, whose first is the name the program is given for itself; on the simulator
/// `file` names the program.
pub fn spawn_file(file: &std::ffi::OsStr, argv: &[OsString]) -> Result<i32> {
    host::with_host(|h| h.spawn_file(file, argv))
}
/// Lets a child from [`spawn`] run.
pub fn resume(pid: i32) -> Result<()> {
    host::with_host(|h| h.resume(pid))
}
/// Waits for a child from [`spawn`]; its exit status (128 + signal if killed).
pub fn wait(pid: i32) -> Result<i32> {
    host::with_host(|h| h.wait(pid))
}

#[cfg(test)]
mod hybrid_tests {
    use super::hybrid_prefix;
    use hwpmc::abi::PmcFlags;

    #[test]
    fn perfs_hybrid_pmu_prefixes_name_a_core_type() {
        assert_eq!(
            hybrid_prefix("cpu_core/INST_RETIRED.ANY_P,usr/"),
            (Some((0x40, PmcFlags::CORE_TYPE_CORE)), "INST_RETIRED.ANY_P,usr")
        );
        assert_eq!(
            hybrid_prefix("cpu_atom/branches/"),
            (Some((0x20, PmcFlags::CORE_TYPE_ATOM)), "branches")
        );
        assert_eq!(hybrid_prefix("cpu_core/branches"), (None, "cpu_core/branches"), "unclosed");
        assert_eq!(hybrid_prefix("instructions"), (None, "instructions"));
    }
}
