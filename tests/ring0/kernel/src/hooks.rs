//! The kernel's hooks into the driver, as FreeBSD's scheduler and process code reach hwpmc through
//! a hook pointer: the scheduler calls these at its events, and they do nothing until the driver's
//! glue (`pmc.rs`) installs its table at load, nor after it removes it at unload. The table keeps
//! the scheduler independent of the driver's glue, which itself calls into the scheduler.

use core::sync::atomic::{AtomicPtr, Ordering};

use hwpmc::{Cpu, Pid, Tid};

/// The driver's entry points for the scheduler's and the process code's events.
pub struct Hooks {
    pub switch_in: fn(Cpu, Pid, Tid),
    pub switch_out: fn(Cpu, Pid, Tid),
    pub process_fork: fn(Pid, Pid),
    pub process_exec: fn(Pid, &[u8]),
    pub process_exit: fn(Pid),
    pub thread_create: fn(Pid, Tid),
    pub thread_exit: fn(Pid, Tid),
    pub mmap: fn(Pid, u64, u64, &[u8]),
}

static INSTALLED: AtomicPtr<Hooks> = AtomicPtr::new(core::ptr::null_mut());

/// Installs the driver's table (at load).
pub fn install(hooks: &'static Hooks) {
    INSTALLED.store(core::ptr::from_ref(hooks).cast_mut(), Ordering::Release);
}

/// Removes the driver's table (at unload): the events that follow reach no driver.
pub fn remove() {
    INSTALLED.store(core::ptr::null_mut(), Ordering::Release);
}

fn installed() -> Option<&'static Hooks> {
    let hooks = INSTALLED.load(Ordering::Acquire);
    // SAFETY: only `install` stores a non-null pointer, from a `&'static Hooks`.
    unsafe { hooks.as_ref() }
}

pub fn switch_in(cpu: Cpu, pid: Pid, tid: Tid) {
    if let Some(h) = installed() {
        (h.switch_in)(cpu, pid, tid);
    }
}
pub fn switch_out(cpu: Cpu, pid: Pid, tid: Tid) {
    if let Some(h) = installed() {
        (h.switch_out)(cpu, pid, tid);
    }
}
pub fn process_fork(parent: Pid, child: Pid) {
    if let Some(h) = installed() {
        (h.process_fork)(parent, child);
    }
}
pub fn process_exec(pid: Pid, path: &[u8]) {
    if let Some(h) = installed() {
        (h.process_exec)(pid, path);
    }
}
pub fn process_exit(pid: Pid) {
    if let Some(h) = installed() {
        (h.process_exit)(pid);
    }
}
pub fn thread_create(pid: Pid, tid: Tid) {
    if let Some(h) = installed() {
        (h.thread_create)(pid, tid);
    }
}
pub fn thread_exit(pid: Pid, tid: Tid) {
    if let Some(h) = installed() {
        (h.thread_exit)(pid, tid);
    }
}
pub fn mmap(pid: Pid, start: u64, end: u64, path: &[u8]) {
    if let Some(h) = installed() {
        (h.mmap)(pid, start, end, path);
    }
}
