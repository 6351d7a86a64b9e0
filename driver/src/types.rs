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

/// How a loaded PMC samples, as its slot keeps it (one word, stored at once when loading).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SampleFlags(u8);

impl SampleFlags {
    /// The PMC samples, and its samples are the interrupted PC alone (the common sample: one
    /// bit to test on the interrupt path).
    pub(crate) const PC_ALONE: u8 = 1;
    /// It samples, and its samples carry callchains (never set with [`Self::PC_ALONE`]).
    pub(crate) const CALLCHAIN: u8 = 2;
    /// Its kernel-mode samples of user threads get the user stack too (PMC_F_USERCALLCHAIN).
    pub(crate) const USER_STACK: u8 = 4;
    /// It logs a PROCCSW record at every switch-out (PMC_F_LOG_PROCCSW).
    pub(crate) const LOG_CSW: u8 = 8;

    pub(crate) const fn new(sampling: bool, callchain: bool, user_stack: bool) -> Self {
        SampleFlags(
            if sampling && !callchain { Self::PC_ALONE } else { 0 }
                | if sampling && callchain { Self::CALLCHAIN } else { 0 }
                | if user_stack { Self::USER_STACK } else { 0 },
        )
    }

    /// These flags, logging context switches or not.
    pub(crate) const fn logging_context_switches(self, on: bool) -> Self {
        SampleFlags(if on { self.0 | Self::LOG_CSW } else { self.0 & !Self::LOG_CSW })
    }

    /// Whether the PMC samples.
    #[inline]
    pub(crate) const fn is_sampling(self) -> bool {
        self.0 & (Self::PC_ALONE | Self::CALLCHAIN) != 0
    }

    /// Whether the PMC samples the interrupted PC alone.
    #[inline]
    pub(crate) const fn samples_pc_alone(self) -> bool {
        self.contains(Self::PC_ALONE)
    }

    /// Whether the PMC counts and logs nothing at switch-out (its switch-out only hands back
    /// its count).
    #[inline]
    pub(crate) const fn is_plain_counting(self) -> bool {
        self.0 == 0
    }

    /// Whether the PMC logs a PROCCSW record at every switch-out.
    #[inline]
    pub(crate) const fn logs_context_switches(self) -> bool {
        self.contains(Self::LOG_CSW)
    }

    /// Whether its samples carry callchains.
    #[inline]
    pub(crate) const fn records_callchains(self) -> bool {
        self.contains(Self::CALLCHAIN)
    }

    /// Whether its kernel-mode samples of user threads get the user stack too.
    #[inline]
    pub(crate) const fn appends_user_stack(self) -> bool {
        self.contains(Self::USER_STACK)
    }

    /// The flags as one byte (what a slot stores).
    #[inline]
    pub(crate) const fn bits(self) -> u8 {
        self.0
    }

    /// The flags a slot stored with [`SampleFlags::bits`].
    #[inline]
    pub(crate) const fn from_bits(bits: u8) -> Self {
        SampleFlags(bits)
    }

    #[inline]
    const fn contains(self, flag: u8) -> bool {
        self.0 & flag != 0
    }
}
