//! The Linux host's operations over a scripted perf: perf's times reach PMC_OP_PMCREADTIMES,
//! and a PMC whose pinned event lost its counter fails its reads with EBUSY.

use std::io;
use std::sync::{Arc, Mutex};

use hwpmc::abi::{
    Class, Mode, Op, PMC_CPU_ANY, PMC_OP_PMCREADTIMES, PmcFlags, PmcOpPmcAllocate, PmcOpPmcAttach,
    PmcOpPmcReadTimes, PmcOpPmcRw, PmcOpSimple, event,
};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::counters::PerfCounters;
use super::kernel::LinuxKernel;
use super::perf::{self, CounterRequest, Reading, Scope};
use super::pmus::CorePmus;
use super::scripted_perf::ScriptedPerf;
use super::{Host, LinuxHost};
use crate::api::ScaledValue;
use crate::error::Result;

/// A Linux host (software events and the TSC only) whose perf is `script`.
fn host(
    script: impl Fn(&CounterRequest, usize) -> io::Result<Reading> + Send + Sync + 'static,
) -> LinuxHost {
    let perf = ScriptedPerf { opened: Arc::new(Mutex::new(Vec::new())), script: Arc::new(script) };
    let counters = PerfCounters::new(1, |_| {}, CorePmus::default(), Box::new(perf));
    let kernel = LinuxKernel::with_counters(1, counters);
    LinuxHost::load(kernel, Some("scripted: no hardware".into()), None).unwrap()
}

fn call<T: IntoBytes + FromBytes>(host: &LinuxHost, op: Op, arg: &mut T) -> Result<()> {
    host.syscall(op, arg.as_mut_bytes())
}

/// Allocates, attaches to this process and starts a task-clock PMC with `flags`.
fn started_task_clock(host: &LinuxHost, flags: PmcFlags) -> Result<u32> {
    let task_clock = perf::SOFTWARE_EVENTS.iter().position(|(n, _)| *n == "task-clock").unwrap();
    let mut request = PmcOpPmcAllocate::new_zeroed();
    request.pm_class = Class::Soft.as_u32();
    request.pm_mode = Mode::ThreadCounting.as_u32();
    request.pm_cpu = PMC_CPU_ANY;
    request.pm_ev = event::SOFT_FIRST + task_clock as u32;
    request.pm_flags = flags.bits();
    call(host, Op::PmcAllocate, &mut request)?;
    let id = request.pm_pmcid;
    call(host, Op::PmcAttach, &mut PmcOpPmcAttach { pm_pmc: id, pm_pid: 0 })?;
    call(host, Op::PmcStart, &mut PmcOpSimple { pm_pmcid: id })?;
    Ok(id)
}

fn read_times(host: &LinuxHost, id: u32) -> Result<ScaledValue> {
    let mut op = PmcOpPmcReadTimes::new_zeroed();
    op.pm_pmcid = id;
    host.extension_call(PMC_OP_PMCREADTIMES, op.as_mut_bytes())?;
    Ok(ScaledValue { value: op.pm_value, enabled: op.pm_enabled, running: op.pm_running })
}

#[test]
fn pmcreadtimes_gives_perfs_times_and_the_count_scales_with_them() {
    // perf rotated the main thread's event: on a counter a quarter of the 2000 ns it was
    // enabled. The test harness's other threads (one event each) did not run.
    let main = std::process::id() as i32;
    let host = host(move |request, _| match request.scope {
        Scope::Thread { tid, .. } if tid == main => {
            Ok(Reading { value: 100, enabled: 2000, running: 500 })
        }
        _ => Ok(Reading::default()),
    });
    let id = started_task_clock(&host, PmcFlags::MULTIPLEX).unwrap();
    let read = read_times(&host, id).unwrap();
    assert_eq!(read, ScaledValue { value: 100, enabled: 2000, running: 500 });
    assert!(read.multiplexed());
    assert_eq!(read.scaled(), Some(400), "value x enabled / running");
    call(&host, Op::PmcStop, &mut PmcOpSimple { pm_pmcid: id }).unwrap();
    assert_eq!(read_times(&host, id).unwrap(), read, "the stopped PMC keeps count and times");
    call(&host, Op::PmcRelease, &mut PmcOpSimple { pm_pmcid: id }).unwrap();
    assert_eq!(host.kernel().counters.times(id), None, "released with the PMC");
}

#[test]
fn reads_of_a_pmc_whose_pinned_event_lost_its_counter_fail_with_ebusy_naming_it() {
    let host = host(|_, n| match n {
        0 => Ok(Reading { value: 5, enabled: 10, running: 10 }),
        _ => Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
    });
    let id = started_task_clock(&host, PmcFlags::empty()).unwrap();
    let mut rw = PmcOpPmcRw { pm_flags: PmcFlags::OLDVALUE.bits(), pm_pmcid: id, pm_value: 0 };
    let error = call(&host, Op::PmcRw, &mut rw).unwrap_err();
    assert_eq!(error.errno, libc::EBUSY);
    let why = error.detail.unwrap();
    assert!(why.contains("(task-clock) lost its counter"), "{why}");
    let error = read_times(&host, id).unwrap_err();
    assert_eq!(error.errno, libc::EBUSY, "PMCREADTIMES too");
    // Writing a stopped PMC's value is no read: it works.
    call(&host, Op::PmcStop, &mut PmcOpSimple { pm_pmcid: id }).unwrap();
    let mut write = PmcOpPmcRw { pm_flags: PmcFlags::NEWVALUE.bits(), pm_pmcid: id, pm_value: 0 };
    call(&host, Op::PmcRw, &mut write).unwrap();
}

#[test]
fn a_pinned_event_without_a_counter_at_the_start_fails_pmcstart_with_ebusy() {
    let host = host(|_, _| Err(io::Error::from(io::ErrorKind::UnexpectedEof)));
    let error = started_task_clock(&host, PmcFlags::empty()).unwrap_err();
    assert_eq!((error.op, error.errno), ("PMCSTART", libc::EBUSY));
    assert!(error.detail.unwrap().contains("PMC_F_MULTIPLEX"));
}
