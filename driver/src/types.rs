//! The leaf types every layer names: processes, threads, CPUs and user addresses, and the
//! driver's own handles of PMCs and how a loaded PMC samples.

/// A process id (`pid_t`).
pub type Pid = i32;
/// A thread id (`lwpid_t`).
pub type Tid = i32;
/// A CPU number, from 0 to [`Kernel::cpu_count`](crate::Kernel::cpu_count) − 1.
pub type Cpu = u32;

/// An address in the calling process's address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserPtr(pub u64);

impl UserPtr {
    /// The null pointer.
    pub const NULL: UserPtr = UserPtr(0);

    /// The address `offset` bytes further on, or `None` on overflow.
    pub fn offset(self, offset: usize) -> Option<UserPtr> {
        self.0.checked_add(offset as u64).map(UserPtr)
    }
}

/// A PMC in the driver's table: index and generation, so a stale reference never matches a
/// reused entry. Zero means "none".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PmcHandle(u64);

impl PmcHandle {
    #[inline]
    pub(crate) fn new(index: usize, generation: u32) -> Self {
        PmcHandle(u64::from(generation) << 32 | (index as u64 + 1))
    }
    #[inline]
    pub(crate) fn index(self) -> usize {
        (self.0 as u32 as usize).wrapping_sub(1)
    }
    /// The raw value (what samples carry).
    #[inline]
    pub(crate) fn raw(self) -> u64 {
        self.0
    }
    #[inline]
    pub(crate) fn from_raw(raw: u64) -> Option<Self> {
        (raw != 0).then_some(PmcHandle(raw))
    }
}

bitflags::bitflags! {
    /// How a loaded PMC samples, as its slot keeps it (one word, stored at once when loading).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub(crate) struct SampleFlags: u8 {
        /// The PMC samples, and its samples are the interrupted PC alone (the common sample:
        /// one bit to test on the interrupt path).
        const PC_ALONE = 1;
        /// It samples, and its samples carry callchains (never set with [`Self::PC_ALONE`]).
        const CALLCHAIN = 2;
        /// Its kernel-mode samples of user threads get the user stack too
        /// (PMC_F_USERCALLCHAIN).
        const USER_STACK = 4;
        /// It logs a PROCCSW record at every switch-out (PMC_F_LOG_PROCCSW).
        const LOG_CSW = 8;
    }
}

impl SampleFlags {
    pub(crate) const fn new(sampling: bool, callchain: bool, user_stack: bool) -> Self {
        let mut flags = SampleFlags::empty();
        if sampling {
            flags = flags.union(if callchain { Self::CALLCHAIN } else { Self::PC_ALONE });
        }
        if user_stack {
            flags = flags.union(Self::USER_STACK);
        }
        flags
    }

    /// These flags, logging context switches or not.
    pub(crate) const fn logging_context_switches(self, on: bool) -> Self {
        if on { self.union(Self::LOG_CSW) } else { self.difference(Self::LOG_CSW) }
    }

    // The queries below test their bits with `&` where bitflags' `contains` would do: its
    // `flags & bit == bit` cost the interrupt path one more instruction per sample
    // (`driver/sim/benches/instructions.sh`).

    /// Whether the PMC samples.
    #[inline]
    pub(crate) const fn is_sampling(self) -> bool {
        self.bits() & (Self::PC_ALONE.bits() | Self::CALLCHAIN.bits()) != 0
    }

    /// Whether the PMC samples the interrupted PC alone.
    #[inline]
    pub(crate) const fn samples_pc_alone(self) -> bool {
        self.bits() & Self::PC_ALONE.bits() != 0
    }

    /// Whether the PMC counts and logs nothing at switch-out (its switch-out only hands back
    /// its count).
    #[inline]
    pub(crate) const fn is_plain_counting(self) -> bool {
        self.bits() == 0
    }

    /// Whether the PMC logs a PROCCSW record at every switch-out.
    #[inline]
    pub(crate) const fn logs_context_switches(self) -> bool {
        self.bits() & Self::LOG_CSW.bits() != 0
    }

    /// Whether its samples carry callchains.
    #[inline]
    pub(crate) const fn records_callchains(self) -> bool {
        self.bits() & Self::CALLCHAIN.bits() != 0
    }

    /// Whether its kernel-mode samples of user threads get the user stack too.
    #[inline]
    pub(crate) const fn appends_user_stack(self) -> bool {
        self.bits() & Self::USER_STACK.bits() != 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::SampleFlags;

    #[test]
    fn only_a_sampling_pmc_records_callchains() {
        assert!(SampleFlags::new(true, true, false).records_callchains());
        assert!(!SampleFlags::new(false, true, true).records_callchains());
        assert!(!SampleFlags::new(true, false, false).records_callchains());
        assert!(SampleFlags::new(true, true, true).appends_user_stack());
    }

    #[test]
    fn a_sampling_pmc_samples_the_pc_alone_or_callchains_and_a_counting_one_neither() {
        let pc_alone = SampleFlags::new(true, false, true);
        assert!(pc_alone.is_sampling() && pc_alone.samples_pc_alone());
        let callchains = SampleFlags::new(true, true, false);
        assert!(callchains.is_sampling() && !callchains.samples_pc_alone());
        let counting = SampleFlags::new(false, true, true).logging_context_switches(true);
        assert!(!counting.is_sampling() && !counting.samples_pc_alone());
    }

    #[test]
    fn only_a_counting_pmc_that_logs_nothing_takes_the_plain_switch_out() {
        assert!(SampleFlags::default().is_plain_counting());
        assert!(!SampleFlags::new(true, false, false).is_plain_counting(), "sampling");
        assert!(
            !SampleFlags::default().logging_context_switches(true).is_plain_counting(),
            "PROCCSW"
        );
    }
}
