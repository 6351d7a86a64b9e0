//! The interrupt path (the PMI, software events) allocates nothing and takes no lock: a counting
//! allocator sees no allocation on the thread while it runs, and the simulated kernel's critical
//! section (which the driver's locks go through) is never entered. The context-switch hooks of a
//! process with running PMCs neither.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use hwpmc::abi::{Mode, PmcFlags};
use hwpmc::{TrapFrame, Tunables};
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{
    AllocateRequest, ArchEvent, Credentials, PmcClient, PmuModel, SinkKind, load_driver,
};

/// Counts the allocations of each thread.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every method forwards to the system allocator; counting touches only a thread-local
// cell that needs no allocation.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract is `GlobalAlloc::alloc`'s, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: as for `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

#[test]
fn the_pmi_and_software_events_allocate_nothing_and_take_no_lock() {
    pmi_and_software_events_allocate_nothing_and_take_no_lock(PmuModel::skylake());
}

/// The same on AMD's PMI handler (PerfMonV2 on Zen 4, the counters' top bits on Zen 2).
#[test]
fn amds_pmi_handlers_allocate_nothing_and_take_no_lock() {
    pmi_and_software_events_allocate_nothing_and_take_no_lock(PmuModel::zen4());
    pmi_and_software_events_allocate_nothing_and_take_no_lock(PmuModel::zen2());
}

fn pmi_and_software_events_allocate_nothing_and_take_no_lock(model: PmuModel) {
    let driver = load_driver(model, 1, Tunables::default());
    let kernel = driver.kernel().clone();
    let hw = kernel.hardware().clone();
    let pid = kernel.spawn(None, Credentials::user(1000));
    let tid = kernel.threads(pid)[0];
    let fd = kernel.open_sink(pid, SinkKind::Writable);
    let client = PmcClient::new(&driver, pid);
    client.configure_log(fd).unwrap();
    // Samples of every kind: the PC alone, a user callchain to complete later, a kernel
    // callchain walked in the interrupt, and a software event's.
    let sampling = |flags| {
        let request = AllocateRequest::arch(&model, ArchEvent::Instructions, 0);
        let request = request.in_mode(Mode::ThreadSampling, None);
        client.allocate(request.with_count(1000).with_flags(flags)).unwrap()
    };
    let plain = sampling(PmcFlags::empty());
    let callchain = sampling(PmcFlags::CALLCHAIN);
    let faults = driver.register_soft_event("PAGE_FAULT.ALL").unwrap();
    let soft = AllocateRequest::soft(faults).in_mode(Mode::ThreadSampling, None).with_count(2);
    let soft = client.allocate(soft).unwrap();
    for id in [plain, callchain, soft] {
        client.start(id).unwrap();
    }
    driver.switch_in(0, pid, tid);
    hw.set_current_cpu(0);
    let work = Work { instructions: 1000, core_cycles: 1500, ..Work::default() };
    let (mut pmis, mut events) = (0, 0);
    for block in 0..40u64 {
        let user = block % 2 == 0;
        hw.pmu(0).retire(if user { Ring::User } else { Ring::Kernel }, &work);
        let frame = TrapFrame { pc: 0x40_1000 + block, fp: 0, sp: 0, user };
        let (before, sections) = (allocations(), kernel.critical_sections());
        if hw.pmu(0).take_pmi().is_some() {
            assert!(kernel.in_interrupt(|| driver.interrupt(0, &frame)), "the PMI is ours");
            pmis += 1;
        }
        kernel.in_interrupt(|| driver.soft_event(0, faults, &frame));
        events += 1;
        assert_eq!(allocations(), before, "no allocation in the interrupt path (block {block})");
        assert_eq!(kernel.critical_sections(), sections, "no lock in the interrupt path");
        if block % 8 == 7 {
            driver.user_return(0, pid, tid, &frame);
            driver.tick(0);
        }
    }
    driver.switch_out(0, pid, tid);
    assert!(pmis >= 30 && events == 40, "the interrupt path ran: {pmis} PMIs, {events} events");
    assert!(kernel.critical_sections() > 0, "thread context does take the driver's locks");
}

#[test]
fn context_switches_of_a_process_with_running_pmcs_allocate_nothing_take_no_lock_and_count_exactly()
{
    let driver = load_driver(PmuModel::skylake(), 2, Tunables::default());
    let kernel = driver.kernel().clone();
    let hw = kernel.hardware().clone();
    let pid = kernel.spawn(None, Credentials::user(1000));
    let tid = kernel.threads(pid)[0];
    let fd = kernel.open_sink(pid, SinkKind::Writable);
    let client = PmcClient::new(&driver, pid);
    client.configure_log(fd).unwrap();
    let instructions = client.allocate(AllocateRequest::iap(0x00C0)).unwrap();
    let sampling = AllocateRequest::iap(0x003C).in_mode(Mode::ThreadSampling, None);
    let sampling = client.allocate(sampling.with_count(100_000)).unwrap();
    for id in [instructions, sampling] {
        client.start(id).unwrap();
    }
    let work = Work { instructions: 1000, core_cycles: 1500, ..Work::default() };
    let sections = kernel.critical_sections();
    for switch in 0..20u32 {
        // The process moves between the two CPUs.
        let cpu = switch % 2;
        hw.set_current_cpu(cpu as usize);
        let before = allocations();
        driver.switch_in(cpu, pid, tid);
        assert_eq!(allocations(), before, "switch-in allocates nothing (switch {switch})");
        hw.pmu(cpu as usize).retire(Ring::User, &work);
        let before = allocations();
        driver.switch_out(cpu, pid, tid);
        assert_eq!(allocations(), before, "switch-out allocates nothing (switch {switch})");
    }
    assert_eq!(kernel.critical_sections(), sections, "no lock in the context-switch hooks");
    assert_eq!(client.read(instructions), Ok(20 * 1000), "every event counted once");
}
