//! Why a system call was refused: a typed cause, each with its errno and its text.
//!
//! The syscall paths (and the class and backend checks they call) refuse with a [`Cause`];
//! errors that come from the kernel's services (a bad user address, a bad descriptor, no
//! right to debug a process) pass through as a bare [`Errno`]. The dispatcher maps a
//! [`Refusal`] to its errno once, at the ABI edge, and hands the text to the kernel
//! ([`Kernel::set_error_text`](crate::Kernel::set_error_text)), which keeps it for the calling
//! thread (FreeBSD's extended errors, read with `uexterr_gettext(3)`).
//!
//! Where FreeBSD's hwpmc has a text for a cause, the text is FreeBSD's, so that programs and
//! tests that look for it find it; the others are ours, in the same short style. Nothing on
//! the hooks or the interrupt path uses this module.

use crate::errno::Errno;

/// A cause of refusal: one variant per distinct reason a request is turned down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Cause {
    // Any operation.
    /// An operation number the driver does not know.
    UnknownOp,
    /// The caller owns no PMC.
    NoPmcs,
    /// The caller owns no PMC with the id it named.
    UnknownPmc,
    /// A CPU number outside the machine's.
    InvalidCpu,
    /// A CPU that is offline.
    CpuOffline,

    // PMCALLOCATE.
    /// A mode that is none of the four.
    InvalidMode,
    /// Flags PMCALLOCATE does not accept.
    InvalidFlags,
    /// PMC_F_GROUP_LEADER and PMC_F_GROUP_MEMBER together.
    LeaderAndMember,
    /// Multiplexing flags on a sampling PMC.
    SamplingMultiplexed,
    /// Thread-scope flags on a system PMC, or beside DESCENDANTS or multiplexing.
    InvalidThreadScope,
    /// PMC_F_LOG_PROCCSW or PMC_F_LOG_PROCEXIT on a system PMC.
    SystemLogFlags,
    /// PMC_F_USERCALLCHAIN without PMC_F_CALLCHAIN, or on a counting PMC.
    UserCallchain,
    /// A system PMC asked for by a jailed or unprivileged caller.
    SystemPrivilege,
    /// A class the machine does not have.
    InvalidClass,
    /// Capabilities the class does not have.
    UnsupportedCaps,
    /// A core type no CPU (or not the PMC's CPU) has, or on a class without core types.
    InvalidCoreType,
    /// A software event nobody registered.
    UnknownSoftEvent,
    /// A TSC PMC that is not system counting of TSC_TSC.
    InvalidTscEvent,
    /// An event configuration the class does not accept (a bad event or a reserved bit).
    InvalidEventConfig,
    /// AnyThread counting without the privilege.
    AnyThreadPrivilege,
    /// A K8 request without PMC_F_EV_PMU.
    AmdNeedsEvPmu,
    /// A K8 sub-class other than the core counters'.
    AmdSubClass,
    /// A K8 PERF_CTL image with a reserved bit.
    AmdConfigBits,
    /// Two core types' encodings for a PMC the host counts.
    HostedTwoEncodings,
    /// No row can take the PMC.
    NoRow,
    /// A multiplexed PMC finds no turn, or a group member no leader.
    NoTurn,
    /// A group member does not fit on a counter in its leader's turn.
    GroupNoRoom,
    /// A register the PMC shares with other counters holds another PMC's value.
    SharedRegisterBusy,

    // PMCATTACH, PMCDETACH.
    /// Attaching or detaching a system PMC.
    AttachSystemMode,
    /// A negative pid.
    InvalidPid,
    /// Attaching a running PMC.
    AttachRunning,
    /// A thread PMC attached to another process.
    ThreadOtherProcess,
    /// The calling thread is unknown to the driver (thread PMCs).
    ThreadUnknown,
    /// The target process is gone or exiting.
    NoSuchProcess,
    /// Attaching a PMC granted direct RDPMC access to another process.
    AttachGranted,
    /// Attaching a PMC to a process it is attached to already.
    AlreadyAttached,
    /// The PMC's row is another PMC's in the target.
    RowInUse,
    /// Detaching a PMC from a process it is not attached to.
    NotAttached,

    // PMCSTART, PMCSTOP.
    /// Starting a PMC that is being released.
    NotStartable,
    /// Starting a PMC that needs a log before CONFIGURELOG.
    NeedsLog,
    /// Starting a PMC whose targets have all gone.
    TargetsGone,

    // PMCRW, PMCSETCOUNT, PMCGETMSR.
    /// PMCRW with neither PMC_F_OLDVALUE nor PMC_F_NEWVALUE.
    RwNeedsFlags,
    /// PMCRW with other flags.
    InvalidRwFlags,
    /// PMCRW writing a running PMC.
    WriteRunning,
    /// PMCSETCOUNT on a running PMC.
    SetCountRunning,
    /// PMCGETMSR on a PMC that is not a process PMC of its owner alone, or is multiplexed.
    GetMsrScope,
    /// PMCGETMSR on a PMC whose counter RDPMC cannot read.
    GetMsrNoCounter,

    // PMCADMIN.
    /// PMCADMIN without PRIV_PMC_MANAGE.
    AdminPrivilege,
    /// PMCADMIN with a state other than enabled or disabled.
    InvalidAdminState,
    /// PMCADMIN naming a row the machine does not have.
    InvalidRow,
    /// PMCADMIN disabling a row a PMC holds.
    RowBusy,

    // GETPMCINFO, GETMODULEVERSION, GETDYNEVENTINFO.
    /// A client whose PMC_VERSION is newer than the driver's.
    VersionMismatch,
    /// GETDYNEVENTINFO for a class without dynamic events.
    NoDynamicEvents,

    // The log operations.
    /// CONFIGURELOG with a log already configured.
    LogActive,
    /// CONFIGURELOG with flags.
    InvalidLogFlags,
    /// FLUSHLOG, CLOSELOG or WRITELOG without a log.
    NoLog,
    /// WRITELOG finding no free log buffer.
    LogNoMemory,
}

impl Cause {
    /// The errno the cause is refused with (what hwpmc(4) documents for it).
    pub(crate) const fn errno(self) -> Errno {
        use Cause::*;
        match self {
            CpuOffline => Errno::Nxio,
            SystemPrivilege | AnyThreadPrivilege | AttachGranted | AdminPrivilege => Errno::Perm,
            UnsupportedCaps | HostedTwoEncodings | ThreadUnknown => Errno::OpNotSupp,
            AttachRunning | RowInUse | WriteRunning | SetCountRunning | RowBusy | LogActive
            | GroupNoRoom | SharedRegisterBusy => Errno::Busy,
            NoPmcs | NoSuchProcess | TargetsGone => Errno::Srch,
            AlreadyAttached => Errno::Exist,
            NeedsLog => Errno::Doofus,
            GetMsrNoCounter => Errno::NoSys,
            VersionMismatch => Errno::ProgMismatch,
            LogNoMemory => Errno::NoMem,
            NoTurn | UnknownOp | UnknownPmc | InvalidCpu | InvalidMode | InvalidFlags
            | LeaderAndMember | SamplingMultiplexed | InvalidThreadScope | SystemLogFlags
            | UserCallchain | InvalidClass | InvalidCoreType | UnknownSoftEvent
            | InvalidTscEvent | InvalidEventConfig | AmdNeedsEvPmu | AmdSubClass
            | AmdConfigBits | NoRow | AttachSystemMode | InvalidPid | ThreadOtherProcess
            | NotAttached | NotStartable | RwNeedsFlags | InvalidRwFlags | GetMsrScope
            | InvalidAdminState | InvalidRow | NoDynamicEvents | InvalidLogFlags | NoLog => {
                Errno::Inval
            }
        }
    }

    /// The text the calling thread reads with the errno. FreeBSD's own where it has one (marked
    /// "FreeBSD" below); ours, in the same style, elsewhere.
    pub(crate) const fn text(self) -> &'static str {
        use Cause::*;
        match self {
            UnknownOp => "Unknown PMC operation",
            NoPmcs => "The process owns no PMCs",
            UnknownPmc => "No PMC with this id",
            InvalidCpu => "Invalid PMC CPU", // FreeBSD
            CpuOffline => "PMC CPU is offline",
            InvalidMode => "Invalid PMC mode",   // FreeBSD
            InvalidFlags => "Invalid PMC flags", // FreeBSD
            LeaderAndMember => "A PMC cannot both lead and join a group",
            SamplingMultiplexed => "Sampling PMCs cannot be multiplexed",
            InvalidThreadScope => "Invalid PMC thread-scope flags",
            SystemLogFlags => "System-mode PMCs cannot log process events",
            UserCallchain => "PMC_F_USERCALLCHAIN requires a sampling PMC with PMC_F_CALLCHAIN",
            SystemPrivilege => "System-mode PMCs require privilege",
            InvalidClass => "Invalid PMC class",
            UnsupportedCaps => "PMC class lacks the requested capabilities",
            InvalidCoreType => "Invalid PMC core type",
            UnknownSoftEvent => "Unknown software event",
            InvalidTscEvent => "TSC PMCs are system counting of TSC_TSC only",
            InvalidEventConfig => "PMC event config not accepted by its class",
            AnyThreadPrivilege => "AnyThread counting requires privilege",
            AmdNeedsEvPmu => "AMD PMCs require PMC_F_EV_PMU", // FreeBSD
            // FreeBSD's tests look for "AMD subclass".
            AmdSubClass => "Unsupported AMD subclass",
            AmdConfigBits => "AMD PMU config has unsupported bits", // FreeBSD
            HostedTwoEncodings => "The host counts one core type's encoding only",
            NoRow => "No PMC row accepted", // FreeBSD
            NoTurn => "No multiplexing turn accepted",
            GroupNoRoom => "No room for the PMC in its group's turn",
            SharedRegisterBusy => "Shared PMC register holds another value",
            AttachSystemMode => "Cannot attach a system-mode PMC", // FreeBSD
            InvalidPid => "Invalid PMC target pid",
            AttachRunning => "PMC must be stopped before attach", // FreeBSD
            ThreadOtherProcess => "Thread PMCs attach to the caller's process only",
            ThreadUnknown => "Calling thread unknown to the PMC driver",
            NoSuchProcess => "PMC target process not found",
            AttachGranted => "PMC with RDPMC access attaches to its owner only",
            AlreadyAttached => "PMC already attached to the process",
            RowInUse => "PMC row already in use in the target",
            NotAttached => "PMC not attached to the process",
            NotStartable => "PMC cannot be started in its state",
            NeedsLog => "PMC requires a configured log",
            TargetsGone => "PMC targets have exited",
            // FreeBSD's tests look for "PMCRW requires OLDVALUE".
            RwNeedsFlags => "PMCRW requires OLDVALUE or NEWVALUE",
            InvalidRwFlags => "Invalid PMCRW flags",
            WriteRunning => "Cannot write a PMC while it is running", // FreeBSD
            SetCountRunning => "Cannot set the count of a running PMC",
            GetMsrScope => "PMCGETMSR requires a process PMC of its owner alone",
            GetMsrNoCounter => "PMC has no counter RDPMC can read",
            AdminPrivilege => "PMCADMIN requires privilege",
            InvalidAdminState => "Invalid PMCADMIN state",
            InvalidRow => "Invalid PMC row",
            RowBusy => "PMC row in use",
            VersionMismatch => "PMC client version newer than the driver",
            NoDynamicEvents => "PMC class has no dynamic events",
            LogActive => "PMC log already configured",
            InvalidLogFlags => "Invalid CONFIGURELOG flags",
            NoLog => "No PMC log configured",
            LogNoMemory => "No free PMC log buffer",
        }
    }
}

/// A refused request: a cause of the driver's, or an errno from the kernel's services (which
/// carries no text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The driver's reason.
    Cause(Cause),
    /// An errno a kernel service returned, passed on as it is.
    Errno(Errno),
}

impl Refusal {
    /// The errno the system call returns.
    pub(crate) const fn errno(self) -> Errno {
        match self {
            Refusal::Cause(cause) => cause.errno(),
            Refusal::Errno(errno) => errno,
        }
    }

    /// The text handed to the calling thread, if the driver has one.
    pub(crate) const fn text(self) -> Option<&'static str> {
        match self {
            Refusal::Cause(cause) => Some(cause.text()),
            Refusal::Errno(_) => None,
        }
    }

    /// This refusal, with `cause` for a bare errno equal to `errno` (for the checks below the
    /// syscall layer that still answer in errno).
    pub(crate) fn or_cause(self, errno: Errno, cause: Cause) -> Refusal {
        match self {
            Refusal::Errno(e) if e == errno => Refusal::Cause(cause),
            other => other,
        }
    }
}

impl From<Cause> for Refusal {
    fn from(cause: Cause) -> Self {
        Refusal::Cause(cause)
    }
}

impl From<Errno> for Refusal {
    fn from(errno: Errno) -> Self {
        Refusal::Errno(errno)
    }
}

#[cfg(test)]
mod tests {
    use super::{Cause, Refusal};
    use crate::errno::Errno;

    #[test]
    fn freebsd_texts_and_errnos() {
        assert_eq!(Cause::InvalidMode.text(), "Invalid PMC mode");
        assert_eq!(Cause::AttachRunning.errno(), Errno::Busy);
        assert_eq!(Cause::WriteRunning.errno(), Errno::Busy);
        assert_eq!(Cause::AttachSystemMode.errno(), Errno::Inval);
        assert!(Cause::RwNeedsFlags.text().contains("PMCRW requires OLDVALUE"));
    }

    #[test]
    fn bare_errnos_have_no_text() {
        let refusal = Refusal::from(Errno::Fault);
        assert_eq!((refusal.errno(), refusal.text()), (Errno::Fault, None));
        let named = Refusal::from(Errno::Inval).or_cause(Errno::Inval, Cause::NoRow);
        assert_eq!(named, Refusal::Cause(Cause::NoRow));
    }
}
