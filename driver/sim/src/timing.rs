//! PMI timing as hardware has it, for a [`Machine`](crate::Machine): the simulator's exact mode
//! serves every PMI at the end of the block that overflowed, before anything else retires; these
//! modes make it as late, as noisy and as crowded as a real CPU.
//!
//! * **Latency and skid** ([`PmiTiming::max_latency`]): between raising a PMI and serving it, the
//!   CPU goes on retiring the thread's blocks, one execution at a time, a seed-chosen number of
//!   executions. Counters that are not frozen keep counting (and may overflow again, their PMI
//!   raised while the LVT entry is masked); frozen counters lose those events; and the sample's
//!   PC and ring are those of the block where the PMI is served, not of the one that overflowed
//!   (a user-only counter can be sampled in the kernel, just after a system call).
//! * **The driver as work** ([`PmiTiming::driver_work_percent`]): at an MSR access or RDPMC the
//!   driver makes, the CPU may retire [`PmiTiming::driver_work`] in ring 0, so OS-mode counters
//!   count the driver's own instructions and can overflow inside it; a pending PMI is then served
//!   there, in the middle of the driver.
//! * **Other users of the PMU** ([`PmiTiming::foreign_status_percent`]): after a block, the PMU
//!   may set a GLOBAL_STATUS bit that is not the driver's (Intel PT's ToPA PMI, the DS buffer's
//!   OvfBuf, LBR_Frz, CondChgd, an uncore overflow) and raise a PMI for it; the driver must leave
//!   it alone.
//!
//! Every choice comes from a SplitMix64 seeded from the machine's seed, so a run is reproduced
//! by its seed. A test chooses its timing as a value, alone ([`MachineConfig::timing`]) or with
//! the other modes of a suite ([`SimModes`], [`MachineConfig::modes`]).
//!
//! [`MachineConfig::timing`]: crate::machine::MachineConfig::timing
//! [`MachineConfig::modes`]: crate::machine::MachineConfig::modes
//! [`SimModes`]: crate::modes::SimModes

use std::cell::RefCell;
use std::rc::Rc;

use crate::ground_truth::GroundTruth;
use crate::pmu::bits::{
    STATUS_COND_CHGD, STATUS_LBR_FRZ, STATUS_OVF_BUF, STATUS_OVF_UNCORE, STATUS_TRACE_TOPA_PMI,
};
use crate::pmu::{Ring, SimPmu, Work};
use crate::prng::SplitMix64;

/// How late PMIs are served and what else happens around the driver (see the module
/// documentation). The default is the exact mode: none of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PmiTiming {
    /// The most block executions retired between raising a PMI and serving it (each PMI's
    /// delay is chosen in `0..=max_latency`).
    pub max_latency: u64,
    /// The chance, in percent, that an MSR access or RDPMC of the driver retires
    /// [`PmiTiming::driver_work`] in ring 0 first.
    pub driver_work_percent: u64,
    /// The ring-0 work one driver MSR access stands for.
    pub driver_work: Work,
    /// The chance, in percent, that a block's end sets a foreign GLOBAL_STATUS bit.
    pub foreign_status_percent: u64,
}

impl PmiTiming {
    /// The exact mode: every PMI served at once, nothing else.
    pub fn exact() -> Self {
        PmiTiming::default()
    }

    /// Whether this is the exact mode.
    pub fn is_exact(&self) -> bool {
        self.max_latency == 0 && self.driver_work_percent == 0 && self.foreign_status_percent == 0
    }

    /// PMIs served up to `executions` block executions late.
    pub fn latency(mut self, executions: u64) -> Self {
        self.max_latency = executions;
        self
    }

    /// `percent` of the driver's MSR accesses retire 40 instructions (60 cycles) in ring 0.
    pub fn driver_work(mut self, percent: u64) -> Self {
        self.driver_work_percent = percent;
        self.driver_work =
            Work { instructions: 40, core_cycles: 60, ref_cycles: 50, ..Work::default() };
        self
    }

    /// `percent` of blocks set a foreign status bit.
    pub fn foreign_status(mut self, percent: u64) -> Self {
        self.foreign_status_percent = percent;
        self
    }
}

/// The machine's PMI-timing state: the seeded choices, each CPU's PMI waiting to be served, and
/// what retired while one waited (what a frozen PMU lost).
#[derive(Debug)]
pub(crate) struct PmiDelays {
    timing: PmiTiming,
    rng: SplitMix64,
    /// Per CPU: block executions still to retire before its pending PMI is served.
    waiting: Vec<Option<u64>>,
    /// Per CPU: what retired while a PMI waited.
    late: Vec<GroundTruth>,
    /// Per CPU: the driver's own work (shared with the access hook).
    driver: Rc<RefCell<Vec<GroundTruth>>>,
    /// The foreign status bits set so far, per CPU.
    foreign: Vec<u64>,
}

impl PmiDelays {
    /// The state of `cpus` CPUs under `timing`, seeded from `seed`.
    pub(crate) fn new(timing: PmiTiming, seed: u64, cpus: usize) -> Self {
        PmiDelays {
            timing,
            // Its own sequence: the scheduler's choices stay those of the exact mode's.
            rng: SplitMix64(seed ^ 0x5EED_0F71_411A_7E00),
            waiting: vec![None; cpus],
            late: vec![GroundTruth::default(); cpus],
            driver: Rc::new(RefCell::new(vec![GroundTruth::default(); cpus])),
            foreign: vec![0; cpus],
        }
    }

    /// The timing.
    pub(crate) fn timing(&self) -> &PmiTiming {
        &self.timing
    }

    /// Whether `cpu` has a PMI that waits: then the thread retires one execution at a time.
    pub(crate) fn waiting(&self, cpu: usize) -> bool {
        self.waiting[cpu].is_some()
    }

    /// After a block retired on `cpu` (whose PMU is `pmu`; `late` executions of `work` in
    /// `ring` retired while a PMI already waited): whether the pending PMI, if any, waits
    /// longer instead of being served now.
    pub(crate) fn defer(
        &mut self,
        cpu: usize,
        pmu: &SimPmu,
        late: Option<(Ring, &Work, u64)>,
    ) -> bool {
        if let (Some((ring, work, repeat)), Some(_)) = (late, self.waiting[cpu]) {
            self.late[cpu].record(ring, work, repeat, pmu.model().topdown_slots_per_cycle);
        }
        if !pmu.pmi_pending() || self.timing.max_latency == 0 {
            self.waiting[cpu] = None;
            return false;
        }
        let left = match self.waiting[cpu] {
            Some(left) => left.saturating_sub(1),
            None => self.rng.below(self.timing.max_latency + 1),
        };
        self.waiting[cpu] = (left > 0).then_some(left);
        left > 0
    }

    /// Forgets `cpu`'s waiting PMI (it is being served, whatever the thread does next).
    pub(crate) fn served(&mut self, cpu: usize) {
        self.waiting[cpu] = None;
    }

    /// After a block on `cpu`: maybe sets a foreign GLOBAL_STATUS bit (one the PMU's version
    /// defines) and raises a PMI for it, as another user of the PMU would.
    pub(crate) fn maybe_foreign_status(&mut self, cpu: usize, pmu: &mut SimPmu) {
        let percent = self.timing.foreign_status_percent;
        if percent == 0 || pmu.model().version < 2 || !self.rng.chance(percent) {
            return;
        }
        let mut bits = vec![STATUS_OVF_BUF, STATUS_COND_CHGD];
        if pmu.model().version >= 3 {
            bits.push(STATUS_OVF_UNCORE);
        }
        if pmu.model().version >= 4 {
            bits.extend([STATUS_TRACE_TOPA_PMI, STATUS_LBR_FRZ]);
        }
        let bit = self.rng.pick(&bits);
        // CondChgd and LBR_Frz come with another PMI, not one of their own.
        let raise = !matches!(bit, STATUS_COND_CHGD | STATUS_LBR_FRZ);
        pmu.inject_foreign_status(bit, raise);
        self.foreign[cpu] |= bit;
    }

    /// The foreign status bits set on `cpu` so far.
    pub(crate) fn foreign(&self, cpu: usize) -> u64 {
        self.foreign[cpu]
    }

    /// What retired on `cpu` while a PMI waited.
    pub(crate) fn late(&self, cpu: usize) -> &GroundTruth {
        &self.late[cpu]
    }

    /// The driver's own work on `cpu`.
    pub(crate) fn driver_truth(&self, cpu: usize) -> GroundTruth {
        self.driver.borrow()[cpu].clone()
    }

    /// The access hook's share of the state: the chance, the work, its record and the seeded
    /// choices (its own sequence, so the hook needs no borrow of the machine).
    pub(crate) fn driver_work_hook(&self) -> DriverWork {
        DriverWork {
            percent: self.timing.driver_work_percent,
            work: self.timing.driver_work.clone(),
            truth: self.driver.clone(),
            rng: RefCell::new(SplitMix64(self.rng.0 ^ 0x00D7_1EE5)),
        }
    }
}

/// What the access hook of [`PmiTiming::driver_work_percent`] needs.
pub(crate) struct DriverWork {
    percent: u64,
    work: Work,
    truth: Rc<RefCell<Vec<GroundTruth>>>,
    rng: RefCell<SplitMix64>,
}

impl DriverWork {
    /// Maybe retires the driver's work on `cpu`'s PMU `pmu`, in ring 0; returns whether it did.
    pub(crate) fn maybe_retire(&self, cpu: usize, pmu: &mut SimPmu) -> bool {
        if !self.rng.borrow_mut().chance(self.percent) {
            return false;
        }
        pmu.retire(Ring::Kernel, &self.work);
        let slots = pmu.model().topdown_slots_per_cycle;
        self.truth.borrow_mut()[cpu].record(Ring::Kernel, &self.work, 1, slots);
        true
    }
}

/// Has the hardware retire the driver's work at its MSR accesses (with `work`'s chance), and
/// serve a PMI pending then in the middle of the driver, with a kernel-mode frame at `pc` (the
/// machine's [`DRIVER_PC`](crate::machine::DRIVER_PC)) (but not inside the PMI handler: NMIs do
/// not nest).
pub(crate) fn install_driver_work(
    driver: std::rc::Weak<crate::client::SimDriver>,
    kernel: crate::kernel::SimKernel,
    work: DriverWork,
    pc: u64,
) {
    let hw = kernel.hardware().clone();
    hw.clone().after_each_access(Some(Rc::new(move || {
        let Some(driver) = driver.upgrade() else { return };
        let cpu = hw.current_cpu();
        if !work.maybe_retire(cpu, &mut hw.pmu(cpu)) || kernel.is_in_interrupt() {
            return;
        }
        if hw.pmu(cpu).take_pmi().is_none() {
            return;
        }
        let frame = hwpmc::TrapFrame { pc, fp: 0, sp: 0, user: false };
        kernel.in_interrupt(|| driver.interrupt(cpu as hwpmc::Cpu, &frame));
    })));
}
