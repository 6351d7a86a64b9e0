//! [`Pctx::run`] on the simulator host: the simulated machine runs the launched program from one
//! event of the followed processes to the next, and libpctx's callbacks are made at each (see
//! the module documentation of [`super`]). Built with the cargo feature `sim`.

use std::sync::atomic::Ordering;

use super::events::{CallbackFailed, PctxEvents};
use super::{Pctx, exec_refused};
use crate::bind::process_binds::retire_process_binds;
use crate::error::{Error, Result};

impl Pctx {
    /// [`Pctx::run`] on the simulator: the machine runs from one event of the followed
    /// processes to the next (`init_lwp` of the first LWP is done).
    pub(super) fn run_sim(&mut self, events: &mut dyn PctxEvents) -> Result<()> {
        const OP: &str = "pctx_run";
        let failed = || Error::invalid(OP, "a callback failed");
        let root = self.pid;
        // The followed processes and their live LWPs.
        let mut followed: Vec<(i32, Vec<i32>)> = vec![(root, vec![1])];
        while !followed.is_empty() {
            if self.terminate.load(Ordering::Acquire) {
                return Ok(());
            }
            let pids: Vec<i32> = followed.iter().map(|(pid, _)| *pid).collect();
            let mut overflow = None;
            let event = if crate::overflow::sim::watching() {
                // A bound set signals its overflows: the machine stops at each.
                let mut stop = || {
                    overflow = crate::overflow::sim::check();
                    overflow.is_some()
                };
                pmc::host::sim::next_process_event_until(&pids, &mut stop)
            } else {
                pmc::host::sim::next_process_event(&pids)
            };
            let event = event.map_err(|e| Error::pmc(OP, &e))?;
            use pmc::host::sim::ProcessEvent as E;
            let Some(event) = event else { break };
            let lwps_of = |followed: &[(i32, Vec<i32>)], pid| {
                followed.iter().position(|(p, _): &(i32, Vec<i32>)| *p == pid)
            };
            match event {
                E::Fork { parent, child } => {
                    events.fork(parent, 1, child);
                    if self.follow_forks {
                        followed.push((child, vec![1]));
                        events.init_lwp(child, 1).map_err(|CallbackFailed| failed())?;
                    }
                }
                E::LwpCreate { pid, lwp } => {
                    if let Some(at) = lwps_of(&followed, pid) {
                        followed[at].1.push(lwp);
                    }
                    events.init_lwp(pid, lwp).map_err(|CallbackFailed| failed())?;
                    events.lwp_create(pid, lwp).map_err(|CallbackFailed| failed())?;
                }
                E::LwpExit { pid, lwp } => {
                    if let Some(at) = lwps_of(&followed, pid) {
                        followed[at].1.retain(|&l| l != lwp);
                    }
                    events.fini_lwp(pid, lwp).map_err(|CallbackFailed| failed())?;
                    events.lwp_exit(pid, lwp).map_err(|CallbackFailed| failed())?;
                    retire_process_binds(pid, Some(lwp));
                }
                E::Exec { pid } => {
                    let Some(at) = lwps_of(&followed, pid) else { continue };
                    for lwp in std::mem::replace(&mut followed[at].1, vec![1]) {
                        events.fini_lwp(pid, lwp).map_err(|CallbackFailed| failed())?;
                    }
                    let command =
                        pmc::host::sim::process_program(pid).map_err(|e| Error::pmc(OP, &e))?;
                    if events.exec(pid, 1, &command).is_err() {
                        // Its tracking ends; the machine runs it on, unreported.
                        followed.remove(at);
                        self.released |= pid == root;
                        continue;
                    }
                    events.init_lwp(pid, 1).map_err(|CallbackFailed| failed())?;
                }
                E::Stopped => {
                    if let Some(overflow) = overflow {
                        crate::overflow::sim::deliver(overflow);
                    }
                }
                E::Exit { pid, status } => {
                    let Some(at) = lwps_of(&followed, pid) else { continue };
                    let (_, lwps) = followed.remove(at);
                    for lwp in lwps {
                        events.fini_lwp(pid, lwp).map_err(|CallbackFailed| failed())?;
                    }
                    events.exit(pid, 1, status);
                    retire_process_binds(pid, None);
                }
            }
        }
        // Reaps the program (the processes it forked and nobody followed run to their end).
        self.ended = true;
        let status = pmc::api::wait(root).map_err(|e| Error::pmc(OP, &e))?;
        if !followed.is_empty() {
            // The machine went idle with the program still there: report its end as wait saw it.
            for (pid, lwps) in followed {
                for lwp in lwps {
                    events.fini_lwp(pid, lwp).map_err(|CallbackFailed| failed())?;
                }
                events.exit(pid, 1, if pid == root { status } else { 0 });
                retire_process_binds(pid, None);
            }
        }
        if self.released { Err(exec_refused()) } else { Ok(()) }
    }
}
