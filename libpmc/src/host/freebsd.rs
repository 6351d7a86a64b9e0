//! The FreeBSD host: the hwpmc(4) system call of the `hwpmc` kernel module, found with
//! `modfind`/`modstat` as FreeBSD's libpmc does, after checking the module's PMC_VERSION.

use std::ffi::{CStr, OsString};
use std::sync::OnceLock;

use hwpmc::abi::{Op, PMC_VERSION_CLIENT};

use super::{ChildPid, Host, HostKind, op_name};
use crate::error::{EPROGMISMATCH, Error, Result};

/// `MAXMODNAME`.
const MAXMODNAME: usize = 32;

/// `struct module_stat` (sys/module.h), amd64.
#[repr(C)]
struct ModuleStat {
    version: i32,
    name: [u8; MAXMODNAME],
    refs: i32,
    id: i32,
    /// `modspecific_t`: for a system-call module, `intval` is the syscall number.
    data: i64,
}

unsafe extern "C" {
    fn modfind(name: *const libc::c_char) -> libc::c_int;
    fn modstat(modid: libc::c_int, stat: *mut ModuleStat) -> libc::c_int;
}

/// The FreeBSD host.
pub(crate) struct FreeBsdHost {
    syscall: libc::c_long,
}

/// This process's FreeBSD host: ENXIO if the hwpmc module is not loaded, EPROGMISMATCH if its
/// major version differs.
pub(crate) fn get() -> Result<&'static FreeBsdHost> {
    static HOST: OnceLock<Result<FreeBsdHost>> = OnceLock::new();
    HOST.get_or_init(FreeBsdHost::open).as_ref().map_err(Clone::clone)
}

impl FreeBsdHost {
    fn open() -> Result<FreeBsdHost> {
        let name = CStr::from_bytes_with_nul(b"hwpmc\0").expect("literal");
        // SAFETY: `name` is a NUL-terminated string.
        let id = unsafe { modfind(name.as_ptr()) };
        if id < 0 {
            return Err(Error::with_detail(
                "pmc_init",
                libc::ENXIO,
                "the hwpmc kernel module is not loaded (kldload hwpmc)",
            ));
        }
        let mut stat = ModuleStat {
            version: size_of::<ModuleStat>() as i32,
            name: [0; MAXMODNAME],
            refs: 0,
            id: 0,
            data: 0,
        };
        // SAFETY: `stat` is a module_stat whose version field says its size, as modstat requires.
        if unsafe { modstat(id, &mut stat) } < 0 {
            return Err(Error::os("pmc_init", &std::io::Error::last_os_error()));
        }
        let host = FreeBsdHost { syscall: libc::c_long::from(stat.data as i32) };
        let mut version = PMC_VERSION_CLIENT;
        host.syscall(Op::GetModuleVersion, zerocopy::IntoBytes::as_mut_bytes(&mut version))?;
        if version >> 24 != PMC_VERSION_CLIENT >> 24 {
            return Err(Error::new("pmc_init", EPROGMISMATCH));
        }
        Ok(host)
    }
}

impl Host for FreeBsdHost {
    fn kind(&self) -> HostKind {
        HostKind::FreeBsd
    }

    fn syscall(&self, op: Op, arg: &mut [u8]) -> Result<()> {
        super::refuse_thread_scope(op, arg)?;
        let ptr = if arg.is_empty() { std::ptr::null_mut() } else { arg.as_mut_ptr() };
        // SAFETY: the hwpmc system call reads and writes at most the argument struct of `op`,
        // which `arg` holds in full (the callers size it from the struct).
        let r =
            unsafe { libc::syscall(self.syscall as libc::c_int, op.as_u32() as libc::c_int, ptr) };
        if r < 0 {
            return Err(Error::os(op_name(op), &std::io::Error::last_os_error()));
        }
        Ok(())
    }

    fn extension_call(&self, op: u32, arg: &mut [u8]) -> Result<()> {
        // SAFETY: as in `syscall`: the argument struct of `op` is `arg` in full. A kernel
        // module without the extension answers EINVAL and touches nothing.
        let r = unsafe {
            libc::syscall(self.syscall as libc::c_int, op as libc::c_int, arg.as_mut_ptr())
        };
        if r < 0 {
            return Err(Error::os("extension op", &std::io::Error::last_os_error()));
        }
        Ok(())
    }

    fn spawn(&self, argv: &[OsString]) -> Result<ChildPid> {
        super::unix_process::spawn(argv)
    }

    fn spawn_file(&self, file: &std::ffi::OsStr, argv: &[OsString]) -> Result<ChildPid> {
        super::unix_process::spawn_file(file, argv)
    }

    fn resume(&self, pid: ChildPid) -> Result<()> {
        super::unix_process::resume(pid)
    }

    fn wait(&self, pid: ChildPid) -> Result<i32> {
        super::unix_process::wait(pid)
    }
}
