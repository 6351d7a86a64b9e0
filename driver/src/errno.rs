//! The errors the driver returns, as FreeBSD numbers them.
//!
//! The driver speaks in [`Errno`]; a host maps it to its own numbering at the system-call edge
//! (FreeBSD's numbers are [`Errno::freebsd`]; libpmc's Linux host uses Linux's where one exists).

/// An error a PMC operation returns, with hwpmc(4)'s meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Errno {
    /// Not permitted: privilege, jail, or debug rights missing.
    Perm,
    /// No such process, or the process has no PMCs.
    Srch,
    /// An I/O error from the log's writer.
    Io,
    /// The CPU is absent or inactive.
    Nxio,
    /// A bad file descriptor for the log.
    Badf,
    /// Out of memory.
    NoMem,
    /// A bad user pointer.
    Fault,
    /// The PMC, row or log is busy.
    Busy,
    /// Already attached.
    Exist,
    /// An invalid argument.
    Inval,
    /// The log's device is full.
    NoSpc,
    /// A resource is temporarily unavailable.
    Again,
    /// The class does not support the capabilities asked for.
    OpNotSupp,
    /// The client's PMC_VERSION is newer than the driver's.
    ProgMismatch,
    /// Not implemented by the class.
    NoSys,
    /// A log file is needed and none is configured ("programming error" in FreeBSD).
    Doofus,
}

impl Errno {
    /// FreeBSD's number for this error (`sys/errno.h`).
    pub const fn freebsd(self) -> i32 {
        match self {
            Errno::Perm => 1,
            Errno::Srch => 3,
            Errno::Io => 5,
            Errno::Nxio => 6,
            Errno::Badf => 9,
            Errno::NoMem => 12,
            Errno::Fault => 14,
            Errno::Busy => 16,
            Errno::Exist => 17,
            Errno::Inval => 22,
            Errno::NoSpc => 28,
            Errno::Again => 35,
            Errno::OpNotSupp => 45,
            Errno::ProgMismatch => 75,
            Errno::NoSys => 78,
            Errno::Doofus => 88,
        }
    }

    /// The symbolic name, e.g. `EINVAL`.
    pub const fn name(self) -> &'static str {
        match self {
            Errno::Perm => "EPERM",
            Errno::Srch => "ESRCH",
            Errno::Io => "EIO",
            Errno::Nxio => "ENXIO",
            Errno::Badf => "EBADF",
            Errno::NoMem => "ENOMEM",
            Errno::Fault => "EFAULT",
            Errno::Busy => "EBUSY",
            Errno::Exist => "EEXIST",
            Errno::Inval => "EINVAL",
            Errno::NoSpc => "ENOSPC",
            Errno::Again => "EAGAIN",
            Errno::OpNotSupp => "EOPNOTSUPP",
            Errno::ProgMismatch => "EPROGMISMATCH",
            Errno::NoSys => "ENOSYS",
            Errno::Doofus => "EDOOFUS",
        }
    }
}

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::error::Error for Errno {}

#[cfg(test)]
mod tests {
    use super::Errno;

    #[test]
    fn freebsd_numbers() {
        assert_eq!(Errno::Inval.freebsd(), 22);
        assert_eq!(Errno::ProgMismatch.freebsd(), 75);
        assert_eq!(Errno::Doofus.freebsd(), 88);
        assert_eq!(Errno::Again.freebsd(), 35, "FreeBSD's EAGAIN is 35, not Linux's 11");
        assert_eq!(Errno::Doofus.to_string(), "EDOOFUS");
    }
}
