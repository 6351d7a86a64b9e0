//! libpmc's error: what was being done, the errno FreeBSD's pmc(3) would set, and why.

use hwpmc::Errno;

/// `EDOOFUS` as libpmc reports it where the C library has no such errno (Linux): a value outside
/// Linux's errno range, so it never collides with a real one. On FreeBSD it is the system's (88).
pub const EDOOFUS: i32 = if cfg!(target_os = "freebsd") { 88 } else { 344 };
/// `EPROGMISMATCH` as libpmc reports it where the C library has no such errno (Linux); on
/// FreeBSD the system's (75).
pub const EPROGMISMATCH: i32 = if cfg!(target_os = "freebsd") { 75 } else { 331 };

/// A failed libpmc operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{op}: {}{}", errno_text(*.errno), detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
pub struct Error {
    /// What was being done, e.g. `"PMCALLOCATE"` or `"allocate instructions"`.
    pub op: &'static str,
    /// The errno pmc(3) sets for it, in this system's numbering.
    pub errno: i32,
    /// Why, in words, when there is more to say than the errno.
    pub detail: Option<String>,
}

impl Error {
    /// An error with errno `errno` and no detail.
    pub fn new(op: &'static str, errno: i32) -> Self {
        Error { op, errno, detail: None }
    }

    /// The error of the driver's `errno`, in this system's numbering.
    pub fn driver(op: &'static str, errno: Errno) -> Self {
        Error::new(op, host_errno(errno))
    }

    /// An error with errno `errno` and the reason `detail`.
    pub fn with_detail(op: &'static str, errno: i32, detail: impl Into<String>) -> Self {
        Error { op, errno, detail: Some(detail.into()) }
    }

    /// The error of a failed system call.
    pub fn os(op: &'static str, err: &std::io::Error) -> Self {
        Error::new(op, err.raw_os_error().unwrap_or(libc::EIO))
    }
}

/// libpmc's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The driver's errno in this system's numbering: the C library's value where it has one, and
/// [`EDOOFUS`] / [`EPROGMISMATCH`] for FreeBSD's own.
pub fn host_errno(errno: Errno) -> i32 {
    match errno {
        Errno::Perm => libc::EPERM,
        Errno::Srch => libc::ESRCH,
        Errno::Io => libc::EIO,
        Errno::Nxio => libc::ENXIO,
        Errno::Badf => libc::EBADF,
        Errno::NoMem => libc::ENOMEM,
        Errno::Fault => libc::EFAULT,
        Errno::Busy => libc::EBUSY,
        Errno::Exist => libc::EEXIST,
        Errno::Inval => libc::EINVAL,
        Errno::NoSpc => libc::ENOSPC,
        Errno::Again => libc::EAGAIN,
        Errno::OpNotSupp => libc::EOPNOTSUPP,
        Errno::NoSys => libc::ENOSYS,
        Errno::ProgMismatch => EPROGMISMATCH,
        Errno::Doofus => EDOOFUS,
        _ => libc::EINVAL,
    }
}

/// The name and description of errno `errno`, e.g. `"EBUSY (Device or resource busy)"`.
pub fn errno_text(errno: i32) -> String {
    match errno {
        EDOOFUS => {
            "EDOOFUS (programming error: the operation needs a log or is out of order)".into()
        }
        EPROGMISMATCH => "EPROGMISMATCH (driver and library versions differ)".into(),
        _ => {
            let text = std::io::Error::from_raw_os_error(errno).to_string();
            // "Device or resource busy (os error 16)" → "Device or resource busy".
            let text = text.split(" (os error").next().unwrap_or(&text);
            format!("{} ({text})", errno_name(errno))
        }
    }
}

/// The symbolic name of errno `errno` (`"E?"` followed by the number when unknown).
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::EBADF => "EBADF",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::EAGAIN => "EAGAIN",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENOSYS => "ENOSYS",
        libc::ENODEV => "ENODEV",
        EDOOFUS => "EDOOFUS",
        EPROGMISMATCH => "EPROGMISMATCH",
        _ => return format!("E?{errno}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freebsd_only_errnos_do_not_collide_with_the_c_library() {
        for errno in [EDOOFUS, EPROGMISMATCH] {
            let text = std::io::Error::from_raw_os_error(errno).to_string();
            assert!(text.starts_with("Unknown error"), "{errno} is a real errno here: {text}");
        }
    }

    #[test]
    fn message_names_the_operation_the_errno_and_the_reason() {
        let e = Error::with_detail("PMCATTACH", libc::EBUSY, "already attached to 42");
        assert_eq!(
            e.to_string(),
            "PMCATTACH: EBUSY (Device or resource busy): already attached to 42"
        );
        assert_eq!(Error::driver("PMCSTART", Errno::Doofus).errno, EDOOFUS);
    }
}
