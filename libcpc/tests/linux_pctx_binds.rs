//! Sets bound with `cpc_bind_pctx` on the Linux host: binding another set to an LWP unbinds the
//! one bound there before, and the end of the process gives its sets' counters back (they keep
//! its final values), so no
//! number of processes measured in turn, or of sets cycled on one, runs out of the host's 16
//! software counters.
#![cfg(target_os = "linux")]

use cpc::consts::{CPC_COUNT_USER, CPC_VER_CURRENT};
use cpc::pctx::CallbackFailed;
use cpc::{Buf, Cpc, Pctx, PctxEvents, Set};
use pmc::host::{self, HostKind};

fn set_of(cpc: &Cpc, events: &[&str]) -> Set {
    let mut set = Set::new();
    for event in events {
        set.add_request(cpc.platform(), event, 0, CPC_COUNT_USER, &[]).expect("add");
    }
    set
}

/// Binds a new set (two counters) to each process's main LWP at its start, and keeps it.
struct KeepsSets<'a> {
    cpc: &'a Cpc,
    sets: Vec<Set>,
}

impl PctxEvents for KeepsSets<'_> {
    fn init_lwp(&mut self, pid: i32, lwp: i32) -> Result<(), CallbackFailed> {
        let mut set = set_of(self.cpc, &["task-clock", "page-faults"]);
        set.bind_process(self.cpc.platform(), pid, lwp, 0).map_err(|e| {
            eprintln!("bind {}: {e}", self.sets.len());
            CallbackFailed
        })?;
        self.sets.push(set);
        Ok(())
    }
}

#[test]
fn the_sets_of_ended_processes_give_their_counters_back_without_being_destroyed() {
    host::select(HostKind::Linux).expect("the Linux host");
    let cpc = Cpc::open(CPC_VER_CURRENT).expect("cpc_open");
    let mut events = KeepsSets { cpc: &cpc, sets: Vec::new() };
    for run in 0..24 {
        let mut process = Pctx::create(&["true".into()]).expect("pctx_create");
        process.run(0, 0, &mut events).unwrap_or_else(|e| panic!("run {run}: {e}"));
    }
    assert_eq!(events.sets.len(), 24);
    // Each stays bound, with its process's final counts.
    for set in &events.sets {
        let mut buf = Buf::for_set(set);
        set.sample(&mut buf).expect("the final values");
        assert!(buf.get(0).is_some_and(|ns| ns > 0), "{:?}", buf.values());
    }
}

/// Binds the next of its sets to the process at every tick, never unbinding one itself.
struct CyclesSets<'a> {
    cpc: &'a Cpc,
    sets: Vec<Set>,
    next: usize,
    samples: Vec<u64>,
}

impl CyclesSets<'_> {
    fn bind_next(&mut self, pid: i32, lwp: i32) -> Result<(), CallbackFailed> {
        let platform = self.cpc.platform();
        let set = &mut self.sets[self.next % 64];
        set.bind_process(platform, pid, lwp, 0).map_err(|e| {
            eprintln!("bind {}: {e}", self.next);
            CallbackFailed
        })?;
        self.next += 1;
        Ok(())
    }
}

impl PctxEvents for CyclesSets<'_> {
    fn init_lwp(&mut self, pid: i32, lwp: i32) -> Result<(), CallbackFailed> {
        self.bind_next(pid, lwp)
    }

    fn tick(&mut self, pid: i32, lwp: i32) -> Result<(), CallbackFailed> {
        let current = &self.sets[(self.next - 1) % 64];
        let mut buf = Buf::for_set(current);
        current.sample(&mut buf).map_err(|_| CallbackFailed)?;
        self.samples.push(buf.get(0).unwrap_or(0));
        // The set bound before is unbound by this bind (illumos).
        self.bind_next(pid, lwp)?;
        let before = &self.sets[(self.next - 2) % 64];
        if before.is_bound() { Err(CallbackFailed) } else { Ok(()) }
    }
}

#[test]
fn binding_another_set_to_an_lwp_unbinds_the_one_bound_before_through_64_sets() {
    host::select(HostKind::Linux).expect("the Linux host");
    let cpc = Cpc::open(CPC_VER_CURRENT).expect("cpc_open");
    let sets = (0..64).map(|_| set_of(&cpc, &["task-clock"])).collect();
    let mut events = CyclesSets { cpc: &cpc, sets, next: 0, samples: Vec::new() };
    let mut process = Pctx::create(&["sleep".into(), "30".into()]).expect("pctx_create");
    process.run(1, 130, &mut events).expect("130 ticks, two rounds of the 64 sets");
    assert_eq!(events.samples.len(), 130);
    assert_eq!(events.next, 131);
}
