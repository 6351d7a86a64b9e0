//! The sets bound to LWPs of other processes (`cpc_bind_pctx`): binding another set to an LWP
//! unbinds the one bound there, and libpctx reports the end of an LWP or process here.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::binding::{Binding, lock};

/// A set bound to an LWP of another process (`cpc_bind_pctx`).
pub(super) struct ProcessBind {
    pub(super) pid: i32,
    pub(super) lwp: i32,
    /// Bound with [`CPC_BIND_MULTIPLEX`]: it takes turns with the others bound so.
    pub(super) multiplex: bool,
    pub(super) binding: std::sync::Weak<Mutex<Binding>>,
}

/// The sets bound to LWPs of other processes.
type ProcessBinds = Mutex<Vec<ProcessBind>>;

/// The sets bound to LWPs of other processes, so that binding another set to an LWP unbinds
/// the one bound there before (illumos: "binding another set automatically unbinds the most
/// recently bound set"), and the end of an LWP or process gives its sets' counters back.
static PROCESS_BINDS: crate::fork::PerProcess<ProcessBinds> = crate::fork::PerProcess::new();

/// The table of sets bound to LWPs of other processes, locked.
pub(super) fn process_binds() -> MutexGuard<'static, Vec<ProcessBind>> {
    let table = PROCESS_BINDS.get(|| Mutex::new(Vec::new()));
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes the sets that `which` selects out of the table (and forgets those gone).
fn take_process_binds(which: impl Fn(&ProcessBind) -> bool) -> Vec<Arc<Mutex<Binding>>> {
    let mut taken = Vec::new();
    process_binds().retain(|bind| {
        let matches = which(bind);
        if matches {
            taken.extend(bind.binding.upgrade());
        }
        !matches && bind.binding.strong_count() > 0
    });
    taken
}

/// Releases the counters of the sets bound to LWP `lwp` of process `pid` before a new bind
/// there (`multiplex`: with [`CPC_BIND_MULTIPLEX`], which keeps the sets bound so). Their
/// sets are unbound.
pub(super) fn release_process_binds(pid: i32, lwp: i32, multiplex: bool) {
    let replaced = |b: &ProcessBind| b.pid == pid && b.lwp == lwp && !(multiplex && b.multiplex);
    for binding in take_process_binds(replaced) {
        lock(&binding).release();
    }
}

/// Gives back the counters of the sets bound to LWP `lwp` of process `pid` (`None`: to any of
/// its LWPs), which has ended (libpctx tells, after its callbacks): they stay bound, and sample
/// their final values.
pub(crate) fn retire_process_binds(pid: i32, lwp: Option<i32>) {
    let ended = |b: &ProcessBind| b.pid == pid && lwp.is_none_or(|lwp| lwp == b.lwp);
    for binding in take_process_binds(ended) {
        lock(&binding).retire();
    }
}
