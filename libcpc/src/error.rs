//! libcpc's error: the errno the C API sets, the subcode its error handler receives (if any) and
//! why, in words.

use crate::consts::Subcode;

/// A failed libcpc operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{op}: {}{}{}", std::io::Error::from_raw_os_error(*.errno),
    subcode.map(|s| format!(" ({})", s.message())).unwrap_or_default(),
    detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
pub struct Error {
    /// The operation (`"cpc_bind_curlwp"`, …).
    pub op: &'static str,
    /// The errno, in this system's numbering.
    pub errno: i32,
    /// The subcode the error handler is called with, when the failure has one.
    pub subcode: Option<Subcode>,
    /// What was wrong, when there is more to say.
    pub detail: Option<String>,
}

impl Error {
    /// An error with `errno` and nothing more.
    pub fn new(op: &'static str, errno: i32) -> Error {
        Error { op, errno, subcode: None, detail: None }
    }

    /// An `EINVAL` saying `detail`.
    pub fn invalid(op: &'static str, detail: impl Into<String>) -> Error {
        Error { op, errno: libc::EINVAL, subcode: None, detail: Some(detail.into()) }
    }

    /// An error with `errno`, `subcode` and `detail`.
    pub fn sub(op: &'static str, errno: i32, subcode: Subcode, detail: impl Into<String>) -> Error {
        Error { op, errno, subcode: Some(subcode), detail: Some(detail.into()) }
    }

    /// This error with `detail`.
    pub fn because(mut self, detail: impl Into<String>) -> Error {
        self.detail = Some(detail.into());
        self
    }

    /// libpmc's error `e` met while doing `op`.
    pub fn pmc(op: &'static str, e: &pmc::Error) -> Error {
        Error { op, errno: e.errno, subcode: None, detail: Some(e.to_string()) }
    }
}

/// libcpc's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
