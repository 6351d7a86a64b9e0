//! The hwpmc system call: decoding each `PMC_OP_*` request, checking it, doing it, and encoding
//! the reply, with the errno hwpmc(4) documents for every failure. A request that fails changes
//! nothing: checks come first, and a reply that cannot be copied out undoes the request.

use alloc::vec::Vec;

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::abi::{
    Caps, Class, Disposition, Mode, Op, PMC_CPU_ANY, PMC_OP_PMCREADTIMES, PMC_VERSION,
    PmcDynEventDescr, PmcFlags, PmcId, PmcInfo, PmcOpCaps, PmcOpGetCpuInfo, PmcOpGetDriverStats,
    PmcOpGetMsr, PmcOpGetPmcInfo, PmcOpPmcAdmin, PmcOpPmcAllocate, PmcOpPmcAttach,
    PmcOpPmcReadTimes, PmcOpPmcRw, PmcOpPmcSetCount, PmcOpSimple, State,
};
use crate::arch::Backend;
use crate::backend::{AllocateRequest, PmuBackend};
use crate::class::{self, ClassDesc, HwConfig, RowCounter};
use crate::driver::Driver;
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, Pid, Privilege, ProcessState, Signal, Tid, UserPtr};
use crate::loads::{ALL_THREADS, NO_CELL};
use crate::mux::{MuxPmc, NOT_MULTIPLEXED};
use crate::percpu::CpuStats;
use crate::state::{Core, Pmc, SecondEncoding};
use crate::sync::AtomicU64;
use crate::text::FixedText;
use crate::types::PmcHandle;
use core::fmt::Write;

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// The hwpmc system call: `op` is a `PMC_OP_*` number and `arg` the caller's argument
    /// pointer. Returns the errno hwpmc(4) documents on failure; a failed call changes nothing.
    pub fn syscall(&self, op: u32, arg: UserPtr) -> Result<(), Errno> {
        use core::sync::atomic::Ordering::Relaxed;
        self.local_stats().syscalls.fetch_add(1, Relaxed);
        let result = match Op::from_u32(op) {
            Some(op) => self.dispatch(op, arg),
            None if op == PMC_OP_PMCREADTIMES => self.op_read_times(arg),
            None => Err(Errno::Inval),
        };
        if result.is_err() {
            self.local_stats().syscall_errors.fetch_add(1, Relaxed);
        }
        result
    }

    fn dispatch(&self, op: Op, arg: UserPtr) -> Result<(), Errno> {
        match op {
            Op::GetModuleVersion => self.op_get_module_version(arg),
            Op::GetCpuInfo => self.op_get_cpu_info(arg),
            Op::GetDriverStats => self.op_get_driver_stats(arg),
            Op::GetPmcInfo => self.op_get_pmc_info(arg),
            Op::GetDynEventInfo => self.op_get_dyn_event_info(arg),
            Op::GetCaps => self.op_get_caps(arg),
            Op::PmcAdmin => self.op_pmc_admin(arg),
            Op::PmcAllocate => self.op_allocate(arg),
            Op::PmcAttach => self.op_attach(arg),
            Op::PmcDetach => self.op_detach(arg),
            Op::PmcStart => self.op_start(arg),
            Op::PmcStop => self.op_stop(arg),
            Op::PmcRw => self.op_rw(arg),
            Op::PmcSetCount => self.op_set_count(arg),
            Op::PmcGetMsr => self.op_get_msr(arg),
            Op::PmcRelease => self.op_release(arg),
            Op::ConfigureLog => self.op_configure_log(arg),
            Op::FlushLog => self.op_flush_log(),
            Op::CloseLog => self.op_close_log(),
            Op::WriteLog => self.op_write_log(arg),
        }
    }

    pub(crate) fn copy_in<T: FromBytes + IntoBytes + KnownLayout + Immutable>(
        &self,
        arg: UserPtr,
    ) -> Result<T, Errno> {
        let mut value = T::new_zeroed();
        self.kernel.copy_in(arg, value.as_mut_bytes())?;
        Ok(value)
    }

    fn copy_out<T: IntoBytes + Immutable>(&self, value: &T, arg: UserPtr) -> Result<(), Errno> {
        self.kernel.copy_out(value.as_bytes(), arg)
    }

    /// GETMODULEVERSION: refuse a client whose major.minor is newer than ours, then tell it ours.
    fn op_get_module_version(&self, arg: UserPtr) -> Result<(), Errno> {
        let client: u32 = self.copy_in(arg)?;
        if client & 0xFFFF_0000 > PMC_VERSION & 0xFFFF_0000 {
            return Err(Errno::ProgMismatch);
        }
        self.copy_out(&PMC_VERSION, arg)
    }

    fn op_get_cpu_info(&self, arg: UserPtr) -> Result<(), Errno> {
        let mut info = PmcOpGetCpuInfo::new_zeroed();
        info.pm_cputype = self.cpu_type();
        info.pm_ncpu = self.kernel.cpu_count();
        info.pm_npmc = self.layout.rows();
        info.pm_nclass = self.layout.classes.len() as u32;
        for (out, class) in info.pm_classes.iter_mut().zip(&self.layout.classes) {
            out.pm_class = class.class.as_u32();
            out.pm_caps = class.caps.bits();
            out.pm_width = class.width;
            out.pm_num = class.rows;
        }
        self.copy_out(&info, arg)
    }

    fn op_get_driver_stats(&self, arg: UserPtr) -> Result<(), Errno> {
        use core::sync::atomic::Ordering::Relaxed;
        // The sum over every CPU; the ABI has 32-bit fields, so it saturates instead of wrapping.
        let get = |counter: fn(&CpuStats) -> &AtomicU64| {
            let total = self.cpus.iter().map(|c| counter(&c.stats).load(Relaxed)).sum::<u64>();
            total.min(u64::from(u32::MAX)) as u32
        };
        let stats = PmcOpGetDriverStats {
            pm_intr_ignored: get(|s| &s.intr_ignored),
            pm_intr_processed: get(|s| &s.intr_processed),
            pm_intr_bufferfull: get(|s| &s.intr_bufferfull),
            pm_syscalls: get(|s| &s.syscalls),
            pm_syscall_errors: get(|s| &s.syscall_errors),
            pm_buffer_requests: get(|s| &s.buffer_requests),
            pm_buffer_requests_failed: get(|s| &s.buffer_requests_failed),
            pm_log_sweeps: get(|s| &s.log_sweeps),
        };
        self.copy_out(&stats, arg)
    }

    /// GETPMCINFO: one `pmc_info` per row of a CPU, after the 8-byte header.
    fn op_get_pmc_info(&self, arg: UserPtr) -> Result<(), Errno> {
        let head: PmcOpGetPmcInfo = self.copy_in(arg)?;
        let cpu = self.checked_cpu(head.pm_cpu)?;
        let infos: Vec<PmcInfo> = {
            let core = self.core.lock(&self.kernel);
            (0..self.layout.rows()).map(|row| self.row_info(&core, cpu, row)).collect()
        };
        let base = arg.offset(core::mem::size_of::<PmcOpGetPmcInfo>()).ok_or(Errno::Fault)?;
        self.kernel.copy_out(infos.as_bytes(), base)
    }

    fn row_info(&self, core: &Core, cpu: Cpu, row: u32) -> PmcInfo {
        let mut info = PmcInfo::new_zeroed();
        let Some(class) = self.layout.class_of_row(row) else { return info };
        write_row_name(&mut info.pm_name, class.class.name(), row - class.first_row);
        info.pm_class = class.class.as_u32();
        // A row of a counter this CPU lacks (a hybrid machine's P-core counter on an E-core)
        // is never usable here: shown disabled.
        let absent = self.slot(cpu, row).is_some_and(|s| matches!(s.counter(), RowCounter::Absent));
        info.pm_enabled = i32::from(!core.is_disabled(cpu, row) && !absent);
        info.pm_rowdisp = match core.disposition(row) {
            0 => Disposition::Free,
            n if n > 0 => Disposition::Thread,
            _ => Disposition::Standalone,
        }
        .as_u32();
        info.pm_ownerpid = -1;
        let on_row =
            core.system_pmc_on(cpu, row).or_else(|| self.slot(cpu, row).and_then(|s| s.handle()));
        if let Some(pmc) = on_row.and_then(|h| core.pmc(h)) {
            info.pm_ownerpid = pmc.owner;
            info.pm_mode = pmc.mode().as_u32();
            info.pm_event = pmc.event;
            info.pm_flags = pmc.flags.bits();
            if pmc.mode().is_sampling() {
                info.pm_reloadcount = pmc.reload;
            }
        }
        info
    }

    /// GETDYNEVENTINFO: the registered software events (class SOFT only).
    fn op_get_dyn_event_info(&self, arg: UserPtr) -> Result<(), Errno> {
        let class: u32 = self.copy_in(arg)?;
        if class != Class::Soft.as_u32() {
            return Err(Errno::Inval);
        }
        let events: Vec<PmcDynEventDescr> = self
            .core
            .lock(&self.kernel)
            .soft_events()
            .iter()
            .map(|e| {
                let mut descr = PmcDynEventDescr::new_zeroed();
                let name = e.name.as_bytes();
                let len = name.len().min(descr.pm_ev_name.len() - 1);
                descr.pm_ev_name[..len].copy_from_slice(&name[..len]);
                descr.pm_ev_code = e.code;
                descr
            })
            .collect();
        let count = events.len() as u32;
        self.kernel.copy_out(events.as_bytes(), arg.offset(8).ok_or(Errno::Fault)?)?;
        self.kernel.copy_out(count.as_bytes(), arg.offset(4).ok_or(Errno::Fault)?)
    }

    fn op_get_caps(&self, arg: UserPtr) -> Result<(), Errno> {
        let mut request: PmcOpCaps = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let core = self.core.lock(&self.kernel);
        let handle = core.find(caller, request.pm_pmcid)?;
        request.pm_caps = core.pmc(handle).map_or(0, |p| p.caps.bits());
        drop(core);
        self.copy_out(&request, arg)
    }

    /// PMCADMIN: enable or disable a row on a CPU (PRIV_PMC_MANAGE).
    fn op_pmc_admin(&self, arg: UserPtr) -> Result<(), Errno> {
        let request: PmcOpPmcAdmin = self.copy_in(arg)?;
        if self.kernel.is_jailed() || !self.kernel.has_privilege(Privilege::PmcManage) {
            return Err(Errno::Perm);
        }
        let cpu = self.checked_cpu(request.pm_cpu)?;
        let disable = match State::from_u32(request.pm_state) {
            Some(State::Disabled) => true,
            Some(State::Free) => false,
            _ => return Err(Errno::Inval),
        };
        let row = u32::try_from(request.pm_pmc).map_err(|_| Errno::Inval)?;
        if row >= self.layout.rows() {
            return Err(Errno::Inval);
        }
        let mut core = self.core.lock(&self.kernel);
        if disable {
            // The row's counter in every multiplexing turn (the row itself is turn 0).
            for r in self.mux_geometry().rows_on(row) {
                if core.disposition(r) > 0 || core.system_pmc_on(cpu, r).is_some() {
                    return Err(Errno::Busy);
                }
            }
        }
        core.set_disabled(cpu, row, disable);
        Ok(())
    }

    /// A CPU number from a request: EINVAL if out of range, ENXIO if not active.
    fn checked_cpu(&self, cpu: i32) -> Result<Cpu, Errno> {
        let cpu = u32::try_from(cpu).map_err(|_| Errno::Inval)?;
        if cpu >= self.kernel.cpu_count() {
            return Err(Errno::Inval);
        }
        if !self.kernel.cpu_active(cpu) {
            return Err(Errno::Nxio);
        }
        Ok(cpu)
    }

    /// PMCALLOCATE.
    fn op_allocate(&self, arg: UserPtr) -> Result<(), Errno> {
        let mut request: PmcOpPmcAllocate = self.copy_in(arg)?;
        let mode = Mode::from_u32(request.pm_mode).ok_or(Errno::Inval)?;
        let cpu = if mode.is_system() {
            if request.pm_cpu == PMC_CPU_ANY {
                return Err(Errno::Inval);
            }
            Some(self.checked_cpu(i32::try_from(request.pm_cpu).map_err(|_| Errno::Inval)?)?)
        } else if request.pm_cpu != PMC_CPU_ANY {
            return Err(Errno::Inval);
        } else {
            None
        };
        let flags = PmcFlags::from_bits(request.pm_flags)
            .filter(|f| {
                let extensions = PmcFlags::MULTIPLEX_FLAGS
                    .union(PmcFlags::HYBRID_FLAGS)
                    .union(PmcFlags::THREAD_FLAGS);
                PmcFlags::ALLOCATE_ACCEPTED.union(extensions).contains(*f)
            })
            .ok_or(Errno::Inval)?;
        let grouped = flags.intersects(PmcFlags::GROUP_LEADER | PmcFlags::GROUP_MEMBER);
        if flags.contains(PmcFlags::GROUP_LEADER | PmcFlags::GROUP_MEMBER)
            || (flags.intersects(PmcFlags::MULTIPLEX_FLAGS) && mode.is_sampling())
        {
            // A PMC leads a group or joins one; sampling PMCs are not multiplexed.
            return Err(Errno::Inval);
        }
        if flags.intersects(PmcFlags::THREAD_FLAGS) && !thread_scope_valid(mode, flags) {
            return Err(Errno::Inval);
        }
        if mode.is_system() && flags.intersects(PmcFlags::LOG_PROCCSW | PmcFlags::LOG_PROCEXIT) {
            return Err(Errno::Inval);
        }
        if flags.contains(PmcFlags::USERCALLCHAIN)
            && (!flags.contains(PmcFlags::CALLCHAIN) || !mode.is_sampling())
        {
            return Err(Errno::Inval);
        }
        if mode.is_system()
            && (self.kernel.is_jailed()
                || !(self.kernel.unprivileged_syspmcs()
                    || self.kernel.has_privilege(Privilege::PmcSystem)))
        {
            return Err(Errno::Perm);
        }
        let class = Class::from_u32(request.pm_class)
            .and_then(|c| self.layout.class(c))
            .ok_or(Errno::Inval)?;
        let mut caps = Caps::from_bits_retain(request.pm_caps);
        if mode.is_sampling() {
            caps |= Caps::INTERRUPT;
        }
        if !class.caps.contains(caps) {
            return Err(Errno::OpNotSupp);
        }
        self.check_core_type(flags, class, cpu)?;
        let (config, rows, second) = self.configure(class, &request, mode, caps, flags)?;
        let min_reload = self.min_reload(class.class);
        let owner = self.kernel.current_pid();
        let mut pmc = Pmc {
            id: PmcId { cpu: cpu.map(|c| c as u16), mode, class: class.class, row: 0 },
            owner,
            state: State::Allocated,
            event: request.pm_ev,
            caps,
            flags,
            config,
            second,
            row: 0,
            slot_row: 0,
            mux: MuxPmc { grouped, ..MuxPmc::default() },
            class_row: 0,
            width_mask: class.mask(),
            value: if mode.is_sampling() { 0 } else { request.pm_count },
            reload: if mode.is_sampling() { request.pm_count.max(min_reload) } else { 0 },
            start: 0,
            targets: Vec::new(),
            threads: Vec::new(),
            cells: Vec::new(),
            msr_granted: false,
            dropped: 0,
            hosted: self.host_counts(class.class),
        };
        if pmc.hosted {
            if pmc.second.is_some() {
                // The host kernel is given one event select.
                return Err(Errno::OpNotSupp);
            }
            self.hosted_check(&pmc)?;
        }
        pmc.start = self.counter_start(&pmc);
        if mode == Mode::SystemSampling {
            pmc.flags |= PmcFlags::NEEDS_LOGFILE;
        }
        if flags.intersects(PmcFlags::LOG_PROCCSW | PmcFlags::LOG_PROCEXIT) {
            pmc.flags |= PmcFlags::NEEDS_LOGFILE;
        }
        if flags.contains(PmcFlags::USERCALLCHAIN) && !pmc.hosted {
            // Kernel-mode samples wait for their user stacks on every CPU: room for a ring's
            // worth each, made once.
            let (entries, depth) = (self.tunables.nsamples, self.tunables.callchain_depth);
            for state in self.cpus.iter() {
                state
                    .pending
                    .reserve_kernel_samples(entries as usize, depth as usize)
                    .map_err(|_| Errno::NoMem)?;
            }
        }
        // The host kernel multiplexes what it counts itself; SOFT and TSC rows are shared.
        let multiplexed =
            flags.intersects(PmcFlags::MULTIPLEX_FLAGS) && class.hardware && !pmc.hosted;
        let geometry = self.mux_geometry();
        let handle = {
            let mut core = self.core.lock(&self.kernel);
            let (row, turn) = if multiplexed {
                let usable = |core: &Core, slot_row, row| {
                    self.row_usable(core, class, (slot_row, row, true), mode, cpu, owner)
                };
                self.mux_place(&core, rows.clone(), (mode, cpu, owner), flags, usable)?
            } else {
                let row = rows
                    .clone()
                    .find(|&row| self.row_usable(&core, class, (row, row, false), mode, cpu, owner))
                    .ok_or(Errno::Inval)?;
                (row, NOT_MULTIPLEXED)
            };
            pmc.row = row;
            pmc.slot_row = geometry.slot_row(row);
            pmc.mux.turn = turn;
            pmc.class_row = pmc.slot_row - class.first_row;
            pmc.id.row = row as u8;
            self.claim_shared(&pmc)?;
            core.insert(pmc.clone())
        };
        request.pm_pmcid = pmc.id.to_u32();
        request.pm_caps = caps.bits();
        if let Err(e) = self.copy_out(&request, arg) {
            self.release_pmc(handle);
            return Err(e);
        }
        self.log_allocation(&pmc);
        Ok(())
    }

    /// EINVAL for a core type ([`PmcFlags::HYBRID_FLAGS`]) that is not a hardware class's, that
    /// no active CPU has, or that a system PMC's CPU does not have. For a class the host counts
    /// itself, the host decides ([`HostCounters::check`](crate::HostCounters::check)).
    fn check_core_type(
        &self,
        flags: PmcFlags,
        class: &ClassDesc,
        cpu: Option<Cpu>,
    ) -> Result<(), Errno> {
        let wanted = crate::state::core_type_of(flags);
        if wanted == 0 {
            return Ok(());
        }
        if flags.contains(PmcFlags::HYBRID_FLAGS) || !class.hardware {
            return Err(Errno::Inval);
        }
        if self.host_counts(class.class) {
            // The host kernel knows its own core PMUs (Linux's cpu_core and cpu_atom): it takes
            // or refuses the core type when asked whether it can count the PMC.
            return Ok(());
        }
        let has = |c: Cpu| self.cpus.get(c as usize).is_some_and(|s| s.core_type == wanted);
        let found = match cpu {
            Some(cpu) => has(cpu),
            None => (0..self.kernel.cpu_count()).any(|c| self.kernel.cpu_active(c) && has(c)),
        };
        if found { Ok(()) } else { Err(Errno::Inval) }
    }

    /// The class's hardware configuration for a request, and the rows that may hold it.
    fn configure(
        &self,
        class: &ClassDesc,
        request: &PmcOpPmcAllocate,
        mode: Mode,
        caps: Caps,
        flags: PmcFlags,
    ) -> Result<(HwConfig, core::ops::Range<u32>, Option<SecondEncoding>), Errno> {
        let all_rows = class.first_row..class.first_row + class.rows;
        match class.class {
            Class::Soft => {
                let known = self
                    .core
                    .lock(&self.kernel)
                    .soft_events()
                    .iter()
                    .any(|e| e.code == request.pm_ev);
                let (config, rows) = class::soft::configure(request, known, all_rows)?;
                Ok((config, rows, None))
            }
            Class::Tsc => {
                let (config, rows) = class::tsc::configure(request, mode, all_rows)?;
                Ok((config, rows, None))
            }
            _ if class.hardware => {
                let request = AllocateRequest {
                    raw: request,
                    caps,
                    flags,
                    any_thread_allowed: &|| self.kernel.has_privilege(Privilege::PmcAnyThread),
                    // A host that counts the class checks the core type against its own core
                    // PMUs (see `check_core_type`): the driver's do not constrain the encoding.
                    core_type: if self.host_counts(class.class) {
                        0
                    } else {
                        crate::state::core_type_of(flags)
                    },
                };
                let (config, rows) = self.backend.configure(class.class, class.rows, &request)?;
                let second = self
                    .backend
                    .configure_other_core_type(class.class, &request, config)?
                    .map(|o| SecondEncoding {
                        primary: o.primary,
                        other: o.other,
                        config: HwConfig::Hardware(o.config),
                    });
                let first = class.first_row;
                Ok((HwConfig::Hardware(config), first + rows.start..first + rows.end, second))
            }
            _ => Err(Errno::Inval),
        }
    }

    /// Whether a new PMC of `mode` may take `row` (FreeBSD's `pmc_can_allocate_row` and
    /// `pmc_can_allocate_rowindex`), a virtual row on `slot_row`'s counter for a `multiplexed`
    /// one: the counter's rows of every turn are free of PMCs of the other kind (system or
    /// process), and of PMCs of the same CPU or owner that cannot take turns with it.
    fn row_usable(
        &self,
        core: &Core,
        class: &ClassDesc,
        (slot_row, row, multiplexed): (u32, u32, bool),
        mode: Mode,
        cpu: Option<Cpu>,
        owner: Pid,
    ) -> bool {
        let same_counter = self.mux_geometry().rows_on(slot_row);
        // Another PMC on the counter in another turn: both must be multiplexed.
        let takes_turns = |r: u32, other: Option<&Pmc>| {
            r == row || other.is_none_or(|o| multiplexed && o.mux.is_multiplexed())
        };
        match cpu {
            Some(cpu) => {
                if core.is_disabled(cpu, slot_row) {
                    return false;
                }
                if same_counter.clone().any(|r| core.disposition(r) > 0) {
                    return false;
                }
                let taken = core.system_pmc_on(cpu, row).is_some();
                if taken && !class.shareable() {
                    return false;
                }
                let system_pmc = |r| core.system_pmc_on(cpu, r).and_then(|h| core.pmc(h));
                if !same_counter.clone().all(|r| takes_turns(r, system_pmc(r))) {
                    return false;
                }
            }
            None => {
                if same_counter.clone().any(|r| core.disposition(r) < 0) {
                    return false;
                }
                let ncpu = self.kernel.cpu_count();
                if (0..ncpu).any(|c| self.kernel.cpu_active(c) && core.is_disabled(c, slot_row)) {
                    return false;
                }
            }
        }
        if mode.is_virtual() {
            let owned = |r: u32| {
                core.owned(owner)
                    .iter()
                    .filter_map(|&h| core.pmc(h))
                    .find(|p| p.row == r && p.mode().is_virtual())
            };
            let targeted =
                |r: u32| core.target(owner).and_then(|t| t.get(r)).and_then(|t| core.pmc(t.pmc));
            if owned(row).is_some() || targeted(row).is_some() {
                return false;
            }
            if !same_counter
                .clone()
                .all(|r| takes_turns(r, owned(r)) && takes_turns(r, targeted(r)))
            {
                return false;
            }
        }
        true
    }

    /// The PMC and target of a PMCATTACH or PMCDETACH request: a process PMC of the caller,
    /// and a pid (0 is the caller; negative is EINVAL).
    fn attach_request(&self, arg: UserPtr) -> Result<(PmcHandle, Pmc, Pid, Pid), Errno> {
        let request: PmcOpPmcAttach = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let (handle, pmc) = self.find_cloned(caller, request.pm_pmc)?;
        if pmc.mode().is_system() {
            return Err(Errno::Inval);
        }
        let pid = match request.pm_pid {
            0 => caller,
            pid if pid < 0 => return Err(Errno::Inval),
            pid => pid,
        };
        Ok((handle, pmc, pid, caller))
    }

    /// PMCATTACH.
    fn op_attach(&self, arg: UserPtr) -> Result<(), Errno> {
        let (handle, pmc, pid, caller) = self.attach_request(arg)?;
        if pmc.is_running() {
            return Err(Errno::Busy);
        }
        // A thread PMC counts the calling thread: of no other process.
        let thread = if pmc.flags.contains(PmcFlags::THREAD) {
            if pid != caller {
                return Err(Errno::Inval);
            }
            Some(self.calling_thread(caller).ok_or(Errno::OpNotSupp)?)
        } else {
            None
        };
        if self.kernel.process_state(pid) != ProcessState::Alive {
            return Err(Errno::Srch);
        }
        if pid != caller {
            self.kernel.can_debug(pid)?;
        }
        if pmc.msr_granted && pid != pmc.owner {
            return Err(Errno::Perm);
        }
        let mut pids = alloc::vec![pid];
        if pmc.flags.contains(PmcFlags::DESCENDANTS) {
            self.collect_descendants(pid, &mut pids);
        }
        let mut core = self.core.lock(&self.kernel);
        let pmc = core.pmc(handle).ok_or(Errno::Inval)?;
        if pmc.is_running() {
            return Err(Errno::Busy);
        }
        if pmc.targets.contains(&pid) {
            return Err(Errno::Exist);
        }
        let row = pmc.row;
        for &p in &pids {
            let holder = core.target(p).and_then(|t| t.get(row)).map(|r| r.pmc);
            if holder.is_some_and(|h| h != handle) || self.mux_attach_conflict(&core, handle, p) {
                return Err(Errno::Busy);
            }
        }
        match thread {
            Some(tid) => core.link_thread(handle, row, pid, tid)?,
            None => {
                for &p in &pids {
                    core.link_target(handle, row, p)?;
                }
            }
        }
        let pmc = core.pmc(handle).cloned();
        drop(core);
        self.publish_loads(&pids);
        if let Some(pmc) = pmc {
            for p in pids {
                self.log_attach(&pmc, p);
                // A sampling PMC's log needs the target's executables to name its samples.
                if pmc.mode().is_sampling() {
                    self.log_mappings(pmc.owner, p);
                }
            }
        }
        Ok(())
    }

    /// Appends every descendant of `pid` to `out`.
    fn collect_descendants(&self, pid: Pid, out: &mut Vec<Pid>) {
        let mut children = Vec::new();
        self.kernel.for_each_child(pid, &mut |child| children.push(child));
        for child in children {
            if self.kernel.process_state(child) == ProcessState::Alive && !out.contains(&child) {
                out.push(child);
                self.collect_descendants(child, out);
            }
        }
    }

    /// The thread of process `pid` that calls (a system call, or a hook in the thread's
    /// context): the kernel's answer ([`Kernel::current_tid`]), else the thread switched in on
    /// the current CPU if it is `pid`'s.
    pub(crate) fn calling_thread(&self, pid: Pid) -> Option<Tid> {
        if self.kernel.current_pid() == pid {
            if let Some(tid) = self.kernel.current_tid() {
                return Some(tid);
            }
        }
        let state = self.cpus.get(self.kernel.current_cpu() as usize)?;
        let tid = state.current_tid();
        (state.current_pid() == pid && tid != ALL_THREADS && tid > 0).then_some(tid)
    }

    /// PMCDETACH.
    fn op_detach(&self, arg: UserPtr) -> Result<(), Errno> {
        let (handle, pmc, pid, _) = self.attach_request(arg)?;
        if self.kernel.process_state(pid) == ProcessState::NotFound {
            return Err(Errno::Srch);
        }
        {
            let core = self.core.lock(&self.kernel);
            let target = core.target(pid).ok_or(Errno::Srch)?;
            if target.get(pmc.row).map(|r| r.pmc) != Some(handle) {
                return Err(Errno::Inval);
            }
        }
        let mut pids = alloc::vec![pid];
        if pmc.flags.contains(PmcFlags::DESCENDANTS) {
            self.collect_descendants(pid, &mut pids);
        }
        self.detach_targets(handle, &pids);
        for p in pids {
            self.log_detach(&pmc, p);
        }
        Ok(())
    }

    /// Detaches `handle` from `pids`: unlinks them (so that no CPU loads it for them any more),
    /// then unloads it from the CPUs where it still runs for one of them; the owner gets SIGIO
    /// if the PMC lost its last target.
    pub(crate) fn detach_targets(&self, handle: PmcHandle, pids: &[Pid]) {
        if self.core.lock(&self.kernel).pmc(handle).is_some_and(Pmc::runs_on_host) {
            for &pid in pids {
                self.hosted_detach(handle, pid);
            }
        }
        // Each target's share so far (PROCEXIT's value), then the links go.
        let (pmc, mut shares) = {
            let mut core = self.core.lock(&self.kernel);
            core.settle(handle);
            let Some(pmc) = core.pmc(handle).cloned() else { return };
            let mut shares: Vec<(Pid, u64)> = Vec::with_capacity(pids.len());
            for &pid in pids {
                let share = core.target(pid).and_then(|t| t.get(pmc.row));
                let share = share.filter(|r| r.pmc == handle).map_or(0, |r| r.value);
                shares.push((pid, share));
                core.unlink_target(handle, pmc.row, pid);
            }
            (pmc, shares)
        };
        self.publish_loads(pids);
        // No switch-in loads it for them now: what still runs is unloaded, and what switch-outs
        // handed back meanwhile is in the cells.
        let mut unloaded: Vec<(Pid, u64, u64)> = Vec::new();
        self.on_cpus_holding(handle, |cpu, row| {
            let for_target = self.slot(cpu, row).is_some_and(|s| pids.contains(&s.pid()));
            if for_target {
                if let Some(Some(found)) = self.on_cpu(cpu, || self.unload_pmc(cpu, handle, row)) {
                    unloaded.push(found);
                }
            }
        });
        let mut core = self.core.lock(&self.kernel);
        for (pid, share) in &mut shares {
            let (handed_back, lost) = core.take_cell(handle, *pid);
            let (delta, dropped) = unloaded
                .iter()
                .filter(|(p, _, _)| p == pid)
                .fold((handed_back, lost), |(d, l), &(_, delta, dropped)| {
                    (d.wrapping_add(delta), l + dropped)
                });
            // The link is gone: the PMC's count takes it, and the share adds it up.
            core.credit(handle, *pid, delta, dropped);
            *share = share.wrapping_add(delta);
            if dropped > 0 {
                self.stats.unreported_drops.store(true, core::sync::atomic::Ordering::Relaxed);
            }
        }
        let now_empty = core.pmc(handle).is_some_and(|p| p.targets.is_empty());
        drop(core);
        let log_exit = pmc.flags.contains(PmcFlags::LOG_PROCEXIT) && !pmc.mode().is_sampling();
        if log_exit {
            for &(pid, share) in &shares {
                self.log_proc_exit(&pmc, pid, share);
            }
        }
        // A thread PMC's owner is its target, told of its threads' ends by its own kernel.
        if !pmc.targets.is_empty() && now_empty && !pmc.flags.contains(PmcFlags::THREAD) {
            self.kernel.signal(pmc.owner, Signal::Io);
        }
    }

    /// PMCSTART.
    fn op_start(&self, arg: UserPtr) -> Result<(), Errno> {
        let request: PmcOpSimple = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let (handle, pmc) = self.find_cloned(caller, request.pm_pmcid)?;
        match pmc.state {
            State::Running => return Ok(()),
            State::Allocated | State::Stopped => {}
            _ => return Err(Errno::Inval),
        }
        if pmc.flags.contains(PmcFlags::NEEDS_LOGFILE) && !self.has_log(pmc.owner) {
            return Err(Errno::Doofus);
        }
        if pmc.mode().is_sampling() {
            self.log_kernel_images(pmc.owner);
        }
        let multiplexed = pmc.mux.is_multiplexed();
        if let Some(cpu) = pmc.cpu() {
            if !self.kernel.cpu_active(cpu) {
                return Err(Errno::Nxio);
            }
            if pmc.mode() == Mode::SystemSampling {
                self.log_initial_mappings(pmc.owner);
            }
            if pmc.hosted {
                return self.start_hosted(handle, pmc.state, &[]);
            }
            if multiplexed {
                // The others' times up to now, then the turn due on the CPU.
                self.mux_checkpoint();
                self.set_state(handle, State::Running);
                self.mux_reschedule(handle);
                return Ok(());
            }
            self.set_state(handle, State::Running);
            self.on_cpu(cpu, || {
                let core = self.core.lock(&self.kernel);
                if let Some(pmc) = core.pmc(handle).filter(|p| p.is_running()) {
                    self.load_pmc(cpu, handle, pmc, -1, NO_CELL);
                }
            });
            return Ok(());
        }
        if multiplexed {
            self.mux_checkpoint();
        }
        // The thread a thread PMC attaches to, if PMCSTART attaches it.
        let thread = if pmc.flags.contains(PmcFlags::THREAD) && pmc.targets.is_empty() {
            Some(self.calling_thread(caller).ok_or(Errno::OpNotSupp)?)
        } else {
            None
        };
        let (self_attached, targets) = {
            let mut core = self.core.lock(&self.kernel);
            let current = core.pmc(handle).ok_or(Errno::Inval)?;
            let attach_self = current.targets.is_empty();
            if attach_self {
                if current.flags.contains(PmcFlags::ATTACH_DONE) {
                    return Err(Errno::Srch);
                }
                let row = current.row;
                let holder = core.target(caller).and_then(|t| t.get(row));
                if holder.is_some_and(|r| r.pmc != handle)
                    || self.mux_attach_conflict(&core, handle, caller)
                {
                    return Err(Errno::Busy);
                }
                match thread {
                    Some(tid) => core.link_thread(handle, row, caller, tid)?,
                    None => core.link_target(handle, row, caller)?,
                }
            }
            let targets =
                if pmc.hosted { Vec::new() } else { core.set_state(handle, State::Running) };
            (attach_self, targets)
        };
        self.publish_loads(&targets);
        if pmc.hosted {
            let targets = self.core.lock(&self.kernel).pmc(handle).map(|p| p.targets.clone());
            let started = self.start_hosted(handle, pmc.state, &targets.unwrap_or_default());
            if started.is_err() && self_attached {
                // PMCSTART attached the PMC to its owner: undone, flags included.
                let mut core = self.core.lock(&self.kernel);
                core.unlink_target(handle, pmc.row, caller);
                if let Some(p) = core.pmc_mut(handle) {
                    p.flags = pmc.flags;
                }
            }
            return started;
        }
        if multiplexed {
            // Threads of the targets that are on a CPU right now count from their turn.
            self.mux_reschedule(handle);
            return Ok(());
        }
        // Threads of the targets that are on a CPU right now start counting at once.
        for cpu in 0..self.kernel.cpu_count() {
            let current = self.cpus.get(cpu as usize).map_or(-1, |c| c.current_pid());
            let running_target = current >= 0
                && self
                    .core
                    .lock(&self.kernel)
                    .pmc(handle)
                    .is_some_and(|p| p.targets.contains(&current));
            if running_target {
                self.on_cpu(cpu, || self.load_for_current(cpu, handle));
            }
        }
        Ok(())
    }

    /// Starts a host-counted PMC that was in state `previous` on `targets`: it is running as
    /// the host starts it (a sample that comes at once belongs to it), and back in `previous`
    /// if the host refuses.
    fn start_hosted(
        &self,
        handle: PmcHandle,
        previous: State,
        targets: &[Pid],
    ) -> Result<(), Errno> {
        self.set_state(handle, State::Running);
        let started = self.hosted_start(handle, targets);
        if started.is_err() {
            self.set_state(handle, previous);
        }
        started
    }

    /// Loads `handle` on the current CPU `cpu` if it runs and a target runs here.
    fn load_for_current(&self, cpu: Cpu, handle: PmcHandle) {
        let (pid, tid) =
            (self.cpus[cpu as usize].current_pid(), self.cpus[cpu as usize].current_tid());
        let core = self.core.lock(&self.kernel);
        let Some(pmc) = core.pmc(handle) else { return };
        // What another process parked here leaves first (see `crate::parking`).
        if let Some(state) = self.cpus.get(cpu as usize) {
            self.evict_parked(state);
        }
        let free = self.slot(cpu, pmc.slot_row).is_some_and(|s| s.handle().is_none());
        if pmc.is_running() && pmc.targets.contains(&pid) && pmc.counts_thread(tid) && free {
            let cell = pmc.cell_of(pid).unwrap_or(NO_CELL);
            self.load_pmc(cpu, handle, pmc, pid, cell);
        }
    }

    /// Sets `handle`'s state and gives every CPU its targets' new load lists.
    fn set_state(&self, handle: PmcHandle, state: State) {
        let targets = self.core.lock(&self.kernel).set_state(handle, state);
        self.publish_loads(&targets);
    }

    /// PMCSTOP: the PMC leaves every CPU at once and its count is final until restarted.
    fn op_stop(&self, arg: UserPtr) -> Result<(), Errno> {
        let request: PmcOpSimple = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let (handle, pmc) = self.find_cloned(caller, request.pm_pmcid)?;
        if pmc.state != State::Running {
            return Ok(());
        }
        if let Some(cpu) = pmc.cpu() {
            if !self.kernel.cpu_active(cpu) {
                return Err(Errno::Nxio);
            }
        }
        let multiplexed = pmc.mux.is_multiplexed();
        if multiplexed {
            // Its times and the others' end here.
            self.mux_checkpoint();
        }
        self.set_state(handle, State::Stopped);
        if pmc.hosted {
            self.hosted_stop(handle);
        } else {
            self.unload_everywhere(handle);
        }
        if multiplexed {
            self.mux_reschedule(handle);
        }
        Ok(())
    }

    /// PMCRW: read and/or write a PMC's value.
    fn op_rw(&self, arg: UserPtr) -> Result<(), Errno> {
        let mut request: PmcOpPmcRw = self.copy_in(arg)?;
        let flags = PmcFlags::from_bits(request.pm_flags)
            .filter(|f| !f.is_empty() && (PmcFlags::OLDVALUE | PmcFlags::NEWVALUE).contains(*f))
            .ok_or(Errno::Inval)?;
        let caller = self.kernel.current_pid();
        // The fields a read needs, copied under the lock (PMCRW is the hot operation: no clone
        // of the whole PMC).
        let (handle, pmc) = {
            let core = self.core.lock(&self.kernel);
            let handle = core.find(caller, request.pm_pmcid)?;
            (handle, core.pmc(handle).map(ValueView::of).ok_or(Errno::Inval)?)
        };
        let write = flags.contains(PmcFlags::NEWVALUE);
        if write && pmc.running {
            return Err(Errno::Busy);
        }
        // Read and write together: the old value goes back to the caller, the new one is kept.
        let new_value = request.pm_value;
        if flags.contains(PmcFlags::OLDVALUE) {
            request.pm_value = self.current_value(handle, &pmc)?;
            let value_at = arg.offset(8).ok_or(Errno::Fault)?;
            self.kernel.copy_out(request.pm_value.as_bytes(), value_at)?;
        }
        if write {
            let mut core = self.core.lock(&self.kernel);
            // What the hooks handed back belongs to the value being replaced.
            core.settle(handle);
            let pmc = core.pmc_mut(handle).ok_or(Errno::Inval)?;
            if pmc.mode().is_sampling() {
                pmc.reload = new_value;
                pmc.start = self.counter_start(pmc);
            } else {
                pmc.value = new_value;
            }
        }
        Ok(())
    }

    /// The value PMCRW reads: the count (including what runs right now on every CPU), the TSC
    /// for the TSC class, or the reload count of a sampling PMC.
    fn current_value(&self, handle: PmcHandle, pmc: &ValueView) -> Result<u64, Errno> {
        if pmc.id.mode.is_sampling() {
            return Ok(pmc.reload);
        }
        if let Some(cpu) = pmc.id.cpu.map(Cpu::from) {
            if !self.kernel.cpu_active(cpu) {
                return Err(Errno::Nxio);
            }
            if pmc.id.class == Class::Tsc {
                return self.on_cpu(cpu, || self.hw.read_tsc()).ok_or(Errno::Nxio);
            }
        }
        if pmc.running && pmc.hosted {
            // The count credited so far and what the host counted since, taken together.
            return self.hosted_value(handle).ok_or(Errno::Inval);
        }
        // The count first, then what the CPUs hold: a PMC unloaded in between makes the read
        // late, never counts twice.
        let value = {
            let mut core = self.core.lock(&self.kernel);
            core.settle(handle);
            core.pmc(handle).map(|p| p.value).ok_or(Errno::Inval)?
        };
        if !pmc.running {
            return Ok(value);
        }
        Ok(value.wrapping_add(self.peek_everywhere(handle)))
    }

    /// The smallest reload a sampling PMC of `class` takes: `kern.hwpmc.mincount` for hardware
    /// events, 1 for software ones.
    fn min_reload(&self, class: Class) -> u64 {
        if class == Class::Soft { 1 } else { self.tunables.min_count.max(1) }
    }

    /// PMCSETCOUNT: the reload of a sampling PMC, or the initial count of a counting one.
    fn op_set_count(&self, arg: UserPtr) -> Result<(), Errno> {
        let request: PmcOpPmcSetCount = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let mut core = self.core.lock(&self.kernel);
        let handle = core.find(caller, request.pm_pmcid)?;
        if core.pmc(handle).ok_or(Errno::Inval)?.is_running() {
            return Err(Errno::Busy);
        }
        core.settle(handle);
        let pmc = core.pmc_mut(handle).ok_or(Errno::Inval)?;
        if pmc.mode().is_sampling() {
            pmc.reload = request.pm_count.max(self.min_reload(pmc.id.class));
            pmc.start = self.counter_start(pmc);
        } else {
            pmc.value = request.pm_count;
        }
        Ok(())
    }

    /// PMCGETMSR: the RDPMC index of a process PMC attached only to its owner.
    fn op_get_msr(&self, arg: UserPtr) -> Result<(), Errno> {
        let mut request: PmcOpGetMsr = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let (handle, pmc) = self.find_cloned(caller, request.pm_pmcid)?;
        let self_only = pmc.targets.len() == 1 && pmc.targets[0] == pmc.owner;
        // A multiplexed PMC's counter is another PMC's in the other turns.
        if !pmc.mode().is_virtual()
            || pmc.flags.contains(PmcFlags::DESCENDANTS)
            || !self_only
            || pmc.mux.is_multiplexed()
        {
            return Err(Errno::Inval);
        }
        if pmc.hosted {
            // The host's counter is not the driver's to give out.
            return Err(Errno::NoSys);
        }
        let HwConfig::Hardware(config) = pmc.config else { return Err(Errno::NoSys) };
        request.pm_msr = Backend::rdpmc_index(config, pmc.class_row).ok_or(Errno::NoSys)?;
        self.copy_out(&request, arg)?;
        let targets = {
            let mut core = self.core.lock(&self.kernel);
            if let Some(pmc) = core.pmc_mut(handle) {
                pmc.msr_granted = true;
            }
            core.refresh_targets_of(handle)
        };
        self.publish_loads(&targets);
        // The caller runs now: if the PMC is on this CPU, RDPMC works from its next instruction.
        let cpu = self.kernel.current_cpu();
        let loaded_here = self.slot(cpu, pmc.slot_row).is_some_and(|s| s.handle() == Some(handle));
        if let Some(state) = self.cpus.get(cpu as usize).filter(|_| loaded_here) {
            state.allow_rdpmc();
            self.kernel.set_user_rdpmc(true);
        }
        Ok(())
    }

    /// PMC_OP_PMCREADTIMES (extension): the count as PMCRW reads it, with a multiplexed PMC's
    /// times enabled and running (both 0 for other PMCs).
    fn op_read_times(&self, arg: UserPtr) -> Result<(), Errno> {
        let mut request: PmcOpPmcReadTimes = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let (handle, view, multiplexed) = {
            let core = self.core.lock(&self.kernel);
            let handle = core.find(caller, request.pm_pmcid)?;
            let pmc = core.pmc(handle).ok_or(Errno::Inval)?;
            (handle, ValueView::of(pmc), pmc.mux.is_multiplexed())
        };
        if multiplexed && view.running {
            self.mux_checkpoint();
        }
        request.pm_value = self.current_value(handle, &view)?;
        let times = self.core.lock(&self.kernel).pmc(handle).map(|p| p.mux).ok_or(Errno::Inval)?;
        (request.pm_enabled, request.pm_running) = (times.enabled, times.running);
        self.copy_out(&request, arg)
    }

    /// PMCRELEASE.
    fn op_release(&self, arg: UserPtr) -> Result<(), Errno> {
        let request: PmcOpSimple = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let handle = self.core.lock(&self.kernel).find(caller, request.pm_pmcid)?;
        self.release_pmc(handle);
        Ok(())
    }

    /// The caller's PMC `id` and a copy of it.
    fn find_cloned(&self, caller: Pid, id: u32) -> Result<(PmcHandle, Pmc), Errno> {
        let core = self.core.lock(&self.kernel);
        let handle = core.find(caller, id)?;
        let pmc = core.pmc(handle).cloned().ok_or(Errno::Inval)?;
        Ok((handle, pmc))
    }
}

/// What PMCRW needs to know of a PMC.
struct ValueView {
    id: PmcId,
    running: bool,
    hosted: bool,
    reload: u64,
}

impl ValueView {
    fn of(pmc: &Pmc) -> ValueView {
        ValueView { id: pmc.id, running: pmc.is_running(), hosted: pmc.hosted, reload: pmc.reload }
    }
}

/// `<CLASS>-<n>`, NUL-padded.
fn write_row_name(out: &mut [u8; 64], class: &str, index: u32) {
    let mut name = FixedText::<64>::new();
    // Writing into a fixed buffer cannot fail; it truncates.
    let _ = write!(name, "{class}-{index}");
    *out = name.field();
}

/// Whether a PMC of `mode` may have the thread-scope flags `flags` (see
/// [`PmcFlags::THREAD_FLAGS`]): a process PMC with PMC_F_THREAD (THREAD_INHERIT only beside it),
/// neither following forks nor multiplexed.
fn thread_scope_valid(mode: Mode, flags: PmcFlags) -> bool {
    let excluded = PmcFlags::DESCENDANTS.union(PmcFlags::MULTIPLEX_FLAGS);
    mode.is_virtual() && flags.contains(PmcFlags::THREAD) && !flags.intersects(excluded)
}
