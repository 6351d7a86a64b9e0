//! Launching a command held before `exec`, so PMCs can be attached to it first (as FreeBSD's
//! pmcstat does), then letting it go and waiting for it.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::per_process::PerProcess;
use crate::error::{Error, Result};

/// The write ends of the pipes held children wait on, by pid (this process's children only).
static GATES: PerProcess<Mutex<BTreeMap<i32, i32>>> = PerProcess::new();

fn gates() -> std::sync::MutexGuard<'static, BTreeMap<i32, i32>> {
    let gates = GATES.get_or_init(|| Mutex::new(BTreeMap::new()));
    gates.lock().unwrap_or_else(|e| e.into_inner())
}

/// Finds `program` as `execvp` would: a path if it has a slash, else the first executable file
/// of that name in `PATH`.
fn resolve(program: &OsStr) -> Option<PathBuf> {
    let is_executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.as_bytes().contains(&b'/') {
        let path = PathBuf::from(program);
        return is_executable(&path).then_some(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| is_executable(p))
}

fn cstring(s: &OsStr) -> Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        Error::with_detail("spawn", libc::EINVAL, format!("{s:?} contains a NUL byte"))
    })
}

/// Asks the kernel to kill the calling (child) process with SIGKILL when the thread that
/// forked it ends, so a measured command never outlives a measurer killed by SIGKILL as an
/// orphan; false if the parent `parent` already ended. Async-signal-safe (system calls only).
#[cfg(target_os = "linux")]
fn die_with_parent(parent: libc::pid_t) -> bool {
    // SAFETY: prctl(PR_SET_PDEATHSIG) and getppid take no pointers.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) == 0
            && libc::getppid() == parent
    }
}

/// FreeBSD's equivalent of Linux's PR_SET_PDEATHSIG (procctl(2) PROC_PDEATHSIG_CTL).
#[cfg(target_os = "freebsd")]
fn die_with_parent(parent: libc::pid_t) -> bool {
    let mut signal: libc::c_int = libc::SIGKILL;
    // SAFETY: procctl reads one int from `signal`, a valid local; getppid takes no pointers.
    unsafe {
        libc::procctl(libc::P_PID, 0, libc::PROC_PDEATHSIG_CTL, (&raw mut signal).cast()) == 0
            && libc::getppid() == parent
    }
}

/// Elsewhere there is no such request: the child is left as `fork` made it.
#[cfg(not(any(target_os = "linux", target_os = "freebsd")))]
fn die_with_parent(_parent: libc::pid_t) -> bool {
    true
}

/// Forks a child that waits for [`resume`] before it executes `argv`. The child is killed
/// (SIGKILL) if the thread that called `spawn` ends before it: a measurer killed outright
/// leaves no orphaned command running.
pub(crate) fn spawn(argv: &[OsString]) -> Result<i32> {
    let program = argv
        .first()
        .ok_or_else(|| Error::with_detail("spawn", libc::EINVAL, "no command given"))?;
    spawn_file(program, argv)
}

/// [`spawn`] executing `program` (found as `execvp` finds it) with the arguments `argv`, whose
/// first is the name the program is given for itself (libpctx's `pctx_create(file, argv)`).
pub(crate) fn spawn_file(program: &OsStr, argv: &[OsString]) -> Result<i32> {
    let path = resolve(program).ok_or_else(|| {
        Error::with_detail(
            "spawn",
            libc::ENOENT,
            format!("{}: command not found", program.to_string_lossy()),
        )
    })?;
    // Everything the child needs is built before fork: after it, the child only calls
    // async-signal-safe functions (prctl, getppid, signal, read, close, execve, _exit).
    let path = cstring(path.as_os_str())?;
    let args = argv.iter().map(|a| cstring(a)).collect::<Result<Vec<_>>>()?;
    let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    arg_ptrs.push(std::ptr::null());
    let env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = std::os::unix::ffi::OsStringExt::into_vec(k);
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let mut env_ptrs: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());

    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::os("spawn", &std::io::Error::last_os_error()));
    }
    let (gate_read, gate_write) = (fds[0], fds[1]);
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: fork has no memory-safety preconditions; the child below only makes
    // async-signal-safe calls on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let err = std::io::Error::last_os_error();
        // SAFETY: closing the two descriptors pipe2 just gave us.
        unsafe {
            libc::close(gate_read);
            libc::close(gate_write);
        }
        return Err(Error::os("spawn", &err));
    }
    if pid == 0 {
        // SAFETY: the child: read/close/execve/_exit are async-signal-safe, and every pointer
        // refers to memory built before fork that the child's copy still holds.
        unsafe {
            libc::close(gate_write);
            if !die_with_parent(parent) {
                libc::_exit(127);
            }
            // A Rust parent ignores SIGPIPE, and an ignored signal stays ignored across
            // execve: the command gets the default action back, as from a shell.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            let mut byte = 0u8;
            let n = libc::read(gate_read, (&raw mut byte).cast(), 1);
            if n != 1 {
                libc::_exit(127);
            }
            libc::execve(path.as_ptr(), arg_ptrs.as_ptr(), env_ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    // SAFETY: the parent closes its copy of the read end.
    unsafe { libc::close(gate_read) };
    gates().insert(pid, gate_write);
    Ok(pid)
}

/// Lets a held child execute its command.
pub(crate) fn resume(pid: i32) -> Result<()> {
    let gate = gates().remove(&pid);
    let gate = gate.ok_or_else(|| {
        Error::with_detail("resume", libc::ESRCH, format!("process {pid} is not a held child"))
    })?;
    let byte = 1u8;
    // SAFETY: `gate` is the write end of the child's pipe, owned by us; one byte from a valid
    // local.
    let n = unsafe { libc::write(gate, (&raw const byte).cast(), 1) };
    let err = std::io::Error::last_os_error();
    // SAFETY: closing our own descriptor once.
    unsafe { libc::close(gate) };
    if n != 1 {
        return Err(Error::os("resume", &err));
    }
    Ok(())
}

/// Waits for child `pid`; its exit status, or 128 + the signal that killed it.
pub(crate) fn wait(pid: i32) -> Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid int for waitpid to fill.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(Error::os("wait", &err));
        }
    }
    if libc::WIFEXITED(status) {
        Ok(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Ok(128 + libc::WTERMSIG(status))
    } else {
        Ok(status)
    }
}

#[cfg(target_os = "linux")]
/// The executable path of process `pid` (`/proc/PID/exe`, Linux), empty if unknown.
pub(crate) fn exe_path(pid: i32) -> Vec<u8> {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| std::os::unix::ffi::OsStringExt::into_vec(p.into_os_string()))
        .unwrap_or_default()
}

#[cfg(target_os = "linux")]
/// The executable mappings of process `pid` (`/proc/PID/maps`, Linux) as (MAP_IN start, path):
/// for each file mapped executable, the mapping's address minus its file offset (where the
/// file's offset 0 would be; the analysis makes offsets addresses through the image's
/// `PT_LOAD` headers).
pub(crate) fn executable_mappings(pid: i32) -> Vec<(u64, Vec<u8>)> {
    let Ok(maps) = std::fs::read(format!("/proc/{pid}/maps")) else { return Vec::new() };
    let mut out = Vec::new();
    for line in maps.split(|&b| b == b'\n') {
        // start-end perms offset dev inode path
        let mut fields = line.splitn(6, |&b| b == b' ');
        let (Some(range), Some(perms), Some(offset)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let path = fields.nth(2).map(|p| p.trim_ascii_start()).unwrap_or_default();
        if perms.get(2) != Some(&b'x') || !path.starts_with(b"/") {
            continue;
        }
        let hex = |b: &[u8]| u64::from_str_radix(std::str::from_utf8(b).ok()?, 16).ok();
        let start = range.split(|&b| b == b'-').next().and_then(hex);
        if let (Some(start), Some(offset)) = (start, hex(offset)) {
            out.push((start.wrapping_sub(offset), path.to_vec()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_child_runs_only_when_resumed_and_reports_its_status() {
        let pid = spawn(&["sh".into(), "-c".into(), "exit 7".into()]).unwrap();
        // Held: it has not exec'd, so it is still a copy of this test binary.
        assert_eq!(exe_path(pid), exe_path(std::process::id() as i32));
        resume(pid).unwrap();
        assert_eq!(wait(pid).unwrap(), 7);
    }

    #[test]
    fn a_missing_command_is_reported_before_forking() {
        let e = spawn(&["/no/such/program".into()]).unwrap_err();
        assert_eq!(e.errno, libc::ENOENT);
        assert!(e.to_string().contains("command not found"), "{e}");
    }

    #[test]
    fn own_executable_mappings_include_this_test_binary() {
        let me = exe_path(std::process::id() as i32);
        let maps = executable_mappings(std::process::id() as i32);
        assert!(maps.iter().any(|(_, p)| *p == me), "{me:?} not in {maps:?}");
    }
}
