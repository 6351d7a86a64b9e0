//! The thread hooks: a thread created or exiting, for thread PMCs and the log.

use crate::driver::Driver;
use crate::hw::Hardware;
use crate::kernel::{Kernel, Pid, Tid};
use pmclog::{Record, ThrCreate, ThrExit};

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Thread `tid` was created in process `pid` (called in the creating thread's context,
    /// before the new thread runs). Inheriting thread PMCs (`PmcFlags::THREAD_INHERIT`) that
    /// count the creator count it too.
    pub fn thread_create(&self, pid: Pid, tid: Tid) {
        let creator = self.calling_thread(pid);
        // One lock for the inheriting thread PMCs and the THR_CREATE audience.
        let (inherited, owners) = {
            let mut book = self.book.lock(&self.kernel);
            let inherited = creator.is_some_and(|c| book.thread_created(pid, c, tid));
            (inherited, Self::ss_owners_of(&book))
        };
        if inherited {
            self.publish_loads(&[pid]);
        }
        if owners.is_empty() {
            return;
        }
        let name = self.command_name(pid);
        let record = Record::ThrCreate(ThrCreate { tid, pid, flags: 0, name: name.as_bytes() });
        for owner in owners {
            self.log_record(owner, &record);
        }
    }

    /// Thread `tid` of process `pid` exited (or is exiting: its last switch-out may come
    /// after). Thread PMCs stop counting it (what it counted until it leaves its CPU is kept);
    /// those that counted it alone are detached (unloaded at once, their counts readable).
    pub fn thread_exit(&self, pid: Pid, tid: Tid) {
        // One lock for the thread PMCs counting it and the THR_EXIT audience.
        let (changed, orphaned, owners) = {
            let mut book = self.book.lock(&self.kernel);
            let (changed, orphaned) = book.thread_exited(pid, tid);
            (changed, orphaned, Self::ss_owners_of(&book))
        };
        if changed {
            self.publish_loads(&[pid]);
        }
        for handle in orphaned {
            self.detach_targets(handle, &[pid]);
        }
        for owner in owners {
            self.log_record(owner, &Record::ThrExit(ThrExit { tid }));
        }
    }
}
