//! System sampling (SS) on every CPU of a 4-CPU machine running several processes: per-CPU and
//! per-process sample counts equal the ground truth, and the owner's log tells the processes'
//! lives (MAP_IN, PROCFORK, PROC_CREATE, THR_CREATE, THR_EXIT, SYSEXIT) with their fields.

use std::collections::BTreeMap;

use hwpmc::Pid;
use hwpmc::abi::Mode;
use hwpmc_sim::machine::{Machine, MachineConfig};
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::workload::ProgramBuilder;
use hwpmc_sim::{AllocateRequest, ArchEvent, Credentials, PmuModel, SinkKind};
use pmclog::{Record, Records};

/// The sampling period; every block retires exactly this many instructions, so each block
/// execution overflows the CPU's counter once, at its end, in the process that ran it.
const PERIOD: u64 = 10_000;
const CPUS: u32 = 4;

/// One run: the owner's log bytes, the machine, and the pids (a, b, c, c's child).
fn run(seed: u64) -> (Vec<u8>, Machine, [Pid; 4]) {
    run_on(PmuModel::skylake(), seed)
}

/// [`run`] on a machine of `model`.
fn run_on(model: PmuModel, seed: u64) -> (Vec<u8>, Machine, [Pid; 4]) {
    let work = Work { instructions: PERIOD, core_cycles: 12_000, ..Work::default() };
    let (w1, w2, w3) = (work.clone(), work.clone(), work.clone());
    let a = ProgramBuilder::new("/usr/bin/a")
        .function("main", move |f| f.repeat(Ring::User, w1.clone(), 40).exit())
        .build();
    let b = ProgramBuilder::new("/usr/bin/b")
        .function("main", |f| f.spawn_thread("worker").call("body").exit())
        .function("worker", |f| f.call("body").exit_thread())
        .function("body", move |f| f.repeat(Ring::User, w2.clone(), 25).ret())
        .build();
    let c = ProgramBuilder::new("/usr/bin/c")
        .function("main", |f| f.fork("child").call("body").exit())
        .function("child", |f| f.call("body").exit())
        .function("body", move |f| f.repeat(Ring::Kernel, w3.clone(), 15).ret())
        .build();
    let config = MachineConfig::new(model, CPUS as usize).seed(seed).quantum(7);
    let mut machine = Machine::new(config);
    let pa = machine.spawn(&a, Credentials::user(1000));
    let pb = machine.spawn(&b, Credentials::user(1001));
    let tool = machine.spawn_tool(Credentials::root());
    let kernel = machine.kernel().clone();
    let fd = kernel.open_sink(tool, SinkKind::Writable);
    machine.client(tool).configure_log(fd).unwrap();
    for cpu in 0..CPUS {
        let request = AllocateRequest::arch(&model, ArchEvent::Instructions, 0);
        let request = request.in_mode(Mode::SystemSampling, Some(cpu));
        let id = machine.client(tool).allocate(request.with_count(PERIOD)).unwrap();
        machine.client(tool).start(id).unwrap();
    }
    let pc = machine.spawn(&c, Credentials::user(1002));
    machine.run_until_idle();
    machine.client(tool).flush_log().unwrap();
    let bytes = kernel.sink_bytes(kernel.sink_of(tool, fd).unwrap());
    let child = machine.children(pc)[0];
    machine.hardware().assert_no_faults();
    (bytes, machine, [pa, pb, pc, child])
}

#[test]
fn per_cpu_and_per_process_sample_counts_equal_the_ground_truth() {
    for model in [PmuModel::skylake(), PmuModel::zen2(), PmuModel::zen4()] {
        sample_counts_equal_the_ground_truth(model);
    }
}

fn sample_counts_equal_the_ground_truth(model: PmuModel) {
    let (bytes, machine, pids) = run_on(model, 1);
    let mut per_cpu: BTreeMap<u32, u128> = BTreeMap::new();
    let mut per_pid: BTreeMap<Pid, u128> = BTreeMap::new();
    let mut kernel_samples = 0u128;
    for entry in Records::new(&bytes) {
        if let Record::Callchain(cc) = entry.expect("the log decodes").record {
            *per_cpu.entry(cc.cpuflags.cpu()).or_default() += 1;
            *per_pid.entry(cc.pid).or_default() += 1;
            kernel_samples += u128::from(!cc.cpuflags.is_user());
        }
    }
    for cpu in 0..CPUS {
        let expected = machine.cpu_truth(cpu).arch(ArchEvent::Instructions) / u128::from(PERIOD);
        assert_eq!(per_cpu.get(&cpu).copied().unwrap_or(0), expected, "CPU {cpu}");
    }
    let [pa, pb, pc, child] = pids;
    for (pid, blocks) in [(pa, 40), (pb, 50), (pc, 15), (child, 15)] {
        let truth = machine.process_truth(pid).arch(ArchEvent::Instructions);
        assert_eq!(truth, blocks * u128::from(PERIOD), "pid {pid} ran its blocks");
        assert_eq!(per_pid.get(&pid).copied(), Some(blocks), "pid {pid}");
    }
    assert_eq!(kernel_samples, 30, "c and its child run in kernel mode");
    assert!(per_cpu.len() > 1, "the work spread over CPUs: {per_cpu:?}");
}

#[test]
fn the_log_tells_every_process_s_life_with_its_fields() {
    let (bytes, machine, [pa, pb, pc, child]) = run(1);
    let records: Vec<Record<'_>> = Records::new(&bytes).map(|e| e.unwrap().record).collect();
    let text: Vec<String> = records
        .iter()
        .filter(|r| !matches!(r, Record::Callchain(_) | Record::PmcAllocate(_)))
        .map(|r| format!("{r:?}"))
        .collect();
    let has = |wanted: &str| text.iter().any(|t| t == wanted);
    let map_in = |pid: Pid, path: &[u8]| {
        let start = 0x40_0000u64; // ProgramBuilder's default text base
        format!("MapIn(MapIn {{ pid: {pid}, start: {start}, path: {path:?} }})")
    };
    // Processes alive at the first SS start have their executables logged.
    assert!(has(&map_in(pa, b"/usr/bin/a")), "{text:#?}");
    assert!(has(&map_in(pb, b"/usr/bin/b")), "{text:#?}");
    assert!(has(&format!("ProcFork(ProcFork {{ old_pid: {pc}, new_pid: {child} }})")));
    let comm = b"c".to_vec();
    assert!(has(&format!("ProcCreate(ProcCreate {{ pid: {child}, flags: 0, comm: {comm:?} }})")));
    let worker = machine.threads_of(pb).into_iter().find(|&t| t != machine.threads_of(pb)[0]);
    let worker = worker.expect("b has a worker thread");
    let name = b"b".to_vec();
    assert!(has(&format!(
        "ThrCreate(ThrCreate {{ tid: {worker}, pid: {pb}, flags: 0, name: {name:?} }})"
    )));
    assert!(has(&format!("ThrExit(ThrExit {{ tid: {worker} }})")), "{text:#?}");
    for pid in [pa, pb, pc, child] {
        assert!(has(&format!("SysExit(SysExit {{ pid: {pid} }})")), "pid {pid}: {text:#?}");
    }
}

#[test]
fn the_same_seed_gives_a_byte_identical_log_and_another_seed_the_same_counts() {
    let (first, _, _) = run(7);
    let (second, _, _) = run(7);
    assert_eq!(first, second, "same seed, same bytes");
    let (other, _, _) = run(8);
    assert_ne!(first, other, "another seed, another interleaving");
    let samples = |bytes: &[u8]| {
        Records::new(bytes)
            .filter(|e| matches!(e.as_ref().unwrap().record, Record::Callchain(_)))
            .count()
    };
    assert_eq!(samples(&first), samples(&other), "120 blocks, 120 samples, whatever the schedule");
    assert_eq!(samples(&first), 120);
}
