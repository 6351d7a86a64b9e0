//! PMCALLOCATE: checking a request, configuring the PMC for its class and choosing its row
//! (a virtual row for a multiplexed PMC).

use crate::abi::{Caps, Class, Mode, PMC_CPU_ANY, PmcFlags, PmcId, PmcOpPmcAllocate, State};
use crate::backend::{AllocateRequest, PmuBackend};
use crate::book::{Book, Pmc, SecondEncoding};
use crate::class::{self, ClassDesc, HwConfig};
use crate::driver::Driver;
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Cpu, Kernel, Pid, Privilege, UserPtr};
use crate::mux::{MuxPmc, NOT_MULTIPLEXED};
use crate::refusal::{Cause, Refusal};
use alloc::vec::Vec;

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// PMCALLOCATE.
    pub(super) fn op_allocate(&self, arg: UserPtr) -> Result<(), Refusal> {
        let mut request: PmcOpPmcAllocate = self.copy_in(arg)?;
        let mode = Mode::from_u32(request.pm_mode).ok_or(Cause::InvalidMode)?;
        let cpu = if mode.is_system() {
            if request.pm_cpu == PMC_CPU_ANY {
                return Err(Cause::InvalidCpu.into());
            }
            Some(self.checked_cpu(i32::try_from(request.pm_cpu).map_err(|_| Cause::InvalidCpu)?)?)
        } else if request.pm_cpu != PMC_CPU_ANY {
            return Err(Cause::InvalidCpu.into());
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
            .ok_or(Cause::InvalidFlags)?;
        let grouped = flags.intersects(PmcFlags::GROUP_LEADER | PmcFlags::GROUP_MEMBER);
        // A PMC leads a group or joins one.
        if flags.contains(PmcFlags::GROUP_LEADER | PmcFlags::GROUP_MEMBER) {
            return Err(Cause::LeaderAndMember.into());
        }
        // A sample's period would restart at every turn.
        if flags.intersects(PmcFlags::MULTIPLEX_FLAGS) && mode.is_sampling() {
            return Err(Cause::SamplingMultiplexed.into());
        }
        if flags.intersects(PmcFlags::THREAD_FLAGS) && !thread_scope_valid(mode, flags) {
            return Err(Cause::InvalidThreadScope.into());
        }
        if mode.is_system() && flags.intersects(PmcFlags::LOG_PROCCSW | PmcFlags::LOG_PROCEXIT) {
            return Err(Cause::SystemLogFlags.into());
        }
        if flags.contains(PmcFlags::USERCALLCHAIN)
            && (!flags.contains(PmcFlags::CALLCHAIN) || !mode.is_sampling())
        {
            return Err(Cause::UserCallchain.into());
        }
        if mode.is_system()
            && (self.kernel.is_jailed()
                || !(self.kernel.unprivileged_syspmcs()
                    || self.kernel.has_privilege(Privilege::PmcSystem)))
        {
            return Err(Cause::SystemPrivilege.into());
        }
        let class = Class::from_u32(request.pm_class)
            .and_then(|c| self.layout.class(c))
            .ok_or(Cause::InvalidClass)?;
        let mut caps = Caps::from_bits_retain(request.pm_caps);
        if mode.is_sampling() {
            caps |= Caps::INTERRUPT;
        }
        if !class.caps.contains(caps) {
            return Err(Cause::UnsupportedCaps.into());
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
                return Err(Cause::HostedTwoEncodings.into());
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
            for state in self.machine.cpus().iter() {
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
            let mut book = self.book.lock(&self.kernel);
            let (row, turn) = if multiplexed {
                let usable = |book: &Book, slot_row, row| {
                    self.row_usable(book, class, (slot_row, row, true), mode, cpu, owner)
                };
                self.mux_place(&book, rows.clone(), (mode, cpu, owner), flags, usable).map_err(
                    |e| {
                        let e = Refusal::from(e).or_cause(Errno::Inval, Cause::NoTurn);
                        e.or_cause(Errno::Busy, Cause::GroupNoRoom)
                    },
                )?
            } else {
                let row = rows
                    .clone()
                    .find(|&row| self.row_usable(&book, class, (row, row, false), mode, cpu, owner))
                    .ok_or(Cause::NoRow)?;
                (row, NOT_MULTIPLEXED)
            };
            pmc.row = row;
            pmc.slot_row = geometry.slot_row(row);
            pmc.mux.turn = turn;
            pmc.class_row = pmc.slot_row - class.first_row;
            pmc.id.row = row as u8;
            self.claim_shared(&pmc)
                .map_err(|e| Refusal::from(e).or_cause(Errno::Busy, Cause::SharedRegisterBusy))?;
            book.insert(pmc.clone())
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
    ) -> Result<(), Cause> {
        let wanted = crate::book::core_type_of(flags);
        if wanted == 0 {
            return Ok(());
        }
        if flags.contains(PmcFlags::HYBRID_FLAGS) || !class.hardware {
            return Err(Cause::InvalidCoreType);
        }
        if self.host_counts(class.class) {
            // The host kernel knows its own core PMUs (Linux's cpu_core and cpu_atom): it takes
            // or refuses the core type when asked whether it can count the PMC.
            return Ok(());
        }
        let has = |c: Cpu| self.machine.cpu(c).is_some_and(|s| s.core_type == wanted);
        let found = match cpu {
            Some(cpu) => has(cpu),
            None => (0..self.kernel.cpu_count()).any(|c| self.kernel.cpu_active(c) && has(c)),
        };
        if found { Ok(()) } else { Err(Cause::InvalidCoreType) }
    }

    /// The class's hardware configuration for a request, and the rows that may hold it.
    fn configure(
        &self,
        class: &ClassDesc,
        request: &PmcOpPmcAllocate,
        mode: Mode,
        caps: Caps,
        flags: PmcFlags,
    ) -> Result<(HwConfig, core::ops::Range<u32>, Option<SecondEncoding>), Refusal> {
        let all_rows = class.first_row..class.first_row + class.rows;
        match class.class {
            Class::Soft => {
                let known = self
                    .book
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
                        crate::book::core_type_of(flags)
                    },
                };
                // The backends' checks that answer in bare errno: a bad event or reserved bit,
                // AnyThread without the privilege.
                let named = |e: Refusal| {
                    e.or_cause(Errno::Inval, Cause::InvalidEventConfig)
                        .or_cause(Errno::Perm, Cause::AnyThreadPrivilege)
                };
                let (config, rows) =
                    self.backend.configure(class.class, class.rows, &request).map_err(named)?;
                let second = self
                    .backend
                    .configure_other_core_type(class.class, &request, config)
                    .map_err(|e| named(e.into()))?
                    .map(|o| SecondEncoding {
                        primary: o.primary,
                        other: o.other,
                        config: HwConfig::Hardware(o.config),
                    });
                let first = class.first_row;
                Ok((HwConfig::Hardware(config), first + rows.start..first + rows.end, second))
            }
            _ => Err(Cause::InvalidClass.into()),
        }
    }

    /// Whether a new PMC of `mode` may take `row` (FreeBSD's `pmc_can_allocate_row` and
    /// `pmc_can_allocate_rowindex`), a virtual row on `slot_row`'s counter for a `multiplexed`
    /// one: the counter's rows of every turn are free of PMCs of the other kind (system or
    /// process), and of PMCs of the same CPU or owner that cannot take turns with it.
    fn row_usable(
        &self,
        book: &Book,
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
                if book.is_disabled(cpu, slot_row) {
                    return false;
                }
                if same_counter.clone().any(|r| book.disposition(r) > 0) {
                    return false;
                }
                let taken = book.system_pmc_on(cpu, row).is_some();
                if taken && !class.shareable() {
                    return false;
                }
                let system_pmc = |r| book.system_pmc_on(cpu, r).and_then(|h| book.pmc(h));
                if !same_counter.clone().all(|r| takes_turns(r, system_pmc(r))) {
                    return false;
                }
            }
            None => {
                if same_counter.clone().any(|r| book.disposition(r) < 0) {
                    return false;
                }
                let ncpu = self.kernel.cpu_count();
                if (0..ncpu).any(|c| self.kernel.cpu_active(c) && book.is_disabled(c, slot_row)) {
                    return false;
                }
            }
        }
        if mode.is_virtual() {
            let owned = |r: u32| {
                book.owned(owner)
                    .iter()
                    .filter_map(|&h| book.pmc(h))
                    .find(|p| p.row == r && p.mode().is_virtual())
            };
            let targeted =
                |r: u32| book.target(owner).and_then(|t| t.get(r)).and_then(|t| book.pmc(t.pmc));
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
}

/// Whether a PMC of `mode` may have the thread-scope flags `flags` (see
/// [`PmcFlags::THREAD_FLAGS`]): a process PMC with PMC_F_THREAD (THREAD_INHERIT only beside it),
/// neither following forks nor multiplexed.
fn thread_scope_valid(mode: Mode, flags: PmcFlags) -> bool {
    let excluded = PmcFlags::DESCENDANTS.union(PmcFlags::MULTIPLEX_FLAGS);
    mode.is_virtual() && flags.contains(PmcFlags::THREAD) && !flags.intersects(excluded)
}
