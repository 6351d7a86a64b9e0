//! Owners' logs: CONFIGURELOG, the records the operations write, FLUSHLOG, WRITELOG, CLOSELOG,
//! writer errors and buffer exhaustion, each checked by decoding the bytes the log file got.

use hwpmc::abi::{Op, PMC_VERSION, PmcFlags, PmcOpConfigureLog, cpu_type};
use hwpmc::{Errno, Pid, Signal, Tunables};
use hwpmc_sim::pmu::{Ring, Work};
use hwpmc_sim::{AllocateRequest, PmuModel, SinkKind};
use hwpmc_test_support::world::World;
use pmclog::{Record, Records};

/// The world of the logging tests: a driver on two Skylake CPUs with `tunables`, and a process
/// with a log file it has not configured yet.
fn world(tunables: Tunables) -> World {
    World::builder(PmuModel::skylake()).cpus(2).tunables(tunables).log_file().build()
}

/// The log requests and what the log file holds.
trait Logging {
    fn configure(&self, fd: i32) -> Result<(), Errno>;
    fn write_log(&self, data: u32) -> Result<(), Errno>;
    fn flush(&self) -> Result<(), Errno>;
    fn close(&self) -> Result<(), Errno>;
    /// The records the log file holds, decoded.
    fn records(&self) -> Vec<String>;
    /// `pid`'s thread retires `instructions` user instructions on `cpu`, switched in and out.
    fn run(&self, pid: Pid, cpu: u32, instructions: u64);
}

impl Logging for World {
    fn configure(&self, fd: i32) -> Result<(), Errno> {
        self.client().configure_log(fd)
    }

    fn write_log(&self, data: u32) -> Result<(), Errno> {
        self.client().write_log(data)
    }

    fn flush(&self) -> Result<(), Errno> {
        self.client().flush_log()
    }

    fn close(&self) -> Result<(), Errno> {
        self.client().close_log()
    }

    fn records(&self) -> Vec<String> {
        let bytes = self.log_bytes();
        Records::new(&bytes)
            .map(|entry| format!("{:?}", entry.expect("the log decodes").record))
            .collect()
    }

    fn run(&self, pid: Pid, cpu: u32, instructions: u64) {
        let kernel = self.driver.kernel();
        let tid = kernel.threads(pid)[0];
        kernel.hardware().set_current_cpu(cpu as usize);
        self.driver.switch_in(cpu, pid, tid);
        let work = Work { instructions, core_cycles: instructions, ..Work::default() };
        kernel.hardware().pmu(cpu as usize).retire(Ring::User, &work);
        self.driver.switch_out(cpu, pid, tid);
    }
}

#[test]
fn configurelog_writes_initialize_at_once() {
    let w = world(Tunables::default());
    w.configure(w.log_file().fd).unwrap();
    let bytes = w.driver.kernel().sink_bytes(w.log_file().sink);
    let first = Records::new(&bytes).next().expect("a record").unwrap();
    let Record::Initialize(init) = first.record else { panic!("{:?}", first.record) };
    assert_eq!(init.version, PMC_VERSION);
    assert_eq!(init.cpu_type, cpu_type::INTEL_SKYLAKE);
    assert_eq!(init.cpuid, b"GenuineIntel-6-5E");
    assert_eq!(init.tsc_freq, 2_000_000_000);
    assert_eq!((init.time_sec, init.time_nsec), (1_700_000_000, 0));
    assert_eq!(first.count, 1);
}

#[test]
fn configurelog_refuses_what_it_must() {
    let w = world(Tunables::default());
    let kernel = w.driver.kernel();
    let read_only = kernel.open_sink(w.pid, SinkKind::ReadOnly);
    let directory = kernel.open_sink(w.pid, SinkKind::Directory);
    assert_eq!(w.configure(read_only), Err(Errno::Badf));
    assert_eq!(w.configure(directory), Err(Errno::Badf));
    assert_eq!(w.configure(77), Err(Errno::Badf));
    let mut flags = PmcOpConfigureLog { pm_flags: 4, pm_logfd: w.log_file().fd };
    assert_eq!(w.client().call(Op::ConfigureLog, &mut flags), Err(Errno::Inval));
    w.configure(w.log_file().fd).unwrap();
    assert_eq!(w.configure(w.log_file().fd), Err(Errno::Busy));
    // Closing with fd < 0, then a closed log is gone.
    w.configure(-1).unwrap();
    assert_eq!(w.configure(-1), Err(Errno::Inval));
    assert_eq!(w.flush(), Err(Errno::Inval));
    assert_eq!(kernel.open_log_files(), 0);
}

#[test]
fn the_log_outlives_the_caller_s_descriptor() {
    let w = world(Tunables::default());
    w.configure(w.log_file().fd).unwrap();
    w.driver.kernel().close_fd(w.pid, w.log_file().fd);
    w.write_log(0xfeed).unwrap();
    w.flush().unwrap();
    assert_eq!(w.records().last().unwrap(), "UserData(UserData { data: 65261 })");
}

#[test]
fn operations_write_their_records() {
    let w = world(Tunables::default());
    let kernel = w.driver.kernel().clone();
    let c = w.client();
    // A PMC allocated before the log is described when the log starts.
    let early = c.allocate(AllocateRequest::iap(0x00C0).with_count(5)).unwrap();
    w.configure(w.log_file().fd).unwrap();
    let soft = w.driver.register_soft_event("PAGE_FAULT.ALL").unwrap();
    let dynamic = c.allocate(AllocateRequest::soft(soft)).unwrap();
    let child = kernel.fork(w.pid).unwrap();
    kernel.with_process(child, |p| p.path = b"/usr/bin/child".to_vec());
    c.attach(early, child).unwrap();
    c.detach(early, child).unwrap();
    w.write_log(7).unwrap();
    w.close().unwrap();
    let records = w.records();
    let expected = [
        format!("PmcAllocate(PmcAllocate {{ pmcid: {early}, event: 0, flags: 512, rate: 5 }})"),
        format!(
            "PmcAllocateDyn(PmcAllocateDyn {{ pmcid: {dynamic}, event: {soft}, flags: 0, \
             rate: 0, name: [80, 65, 71, 69, 95, 70, 65, 85, 76, 84, 46, 65, 76, 76], \
             layout: Kernel }})"
        ),
        format!(
            "PmcAttach(PmcAttach {{ pmcid: {early}, pid: {child}, path: {:?} }})",
            b"/usr/bin/child"
        ),
        format!("PmcDetach(PmcDetach {{ pmcid: {early}, pid: {child} }})"),
        "UserData(UserData { data: 7 })".to_string(),
        "CloseLog".to_string(),
    ];
    assert!(records[0].starts_with("Initialize("), "{records:?}");
    assert_eq!(&records[1..], &expected, "{records:#?}");
    // After CLOSELOG the owner has no log.
    assert_eq!(w.flush(), Err(Errno::Inval));
    assert_eq!(kernel.open_log_files(), 0);
}

#[test]
fn pmcs_that_need_a_log_start_once_there_is_one() {
    let w = world(Tunables::default());
    let kernel = w.driver.kernel().clone();
    let c = w.client();
    let child = kernel.fork(w.pid).unwrap();
    let id = c.allocate(AllocateRequest::iap(0x00C0).with_flags(PmcFlags::LOG_PROCEXIT)).unwrap();
    c.attach(id, child).unwrap();
    assert_eq!(c.start(id), Err(Errno::Doofus));
    w.configure(w.log_file().fd).unwrap();
    c.start(id).unwrap();
    w.run(child, 0, 1000);
    w.run(child, 1, 234);
    // The target exits: PROCEXIT carries what it counted.
    kernel.begin_exit(child);
    w.driver.process_exit(child);
    w.flush().unwrap();
    let exit = format!("ProcExit(ProcExit {{ pmcid: {id}, pid: {child}, value: 1234 }})");
    assert_eq!(w.records().last().unwrap(), &exit);
    assert_eq!(c.read(id), Ok(1234));
}

#[test]
fn proccsw_records_each_stay_on_a_cpu() {
    let w = world(Tunables::default());
    let c = w.client();
    w.configure(w.log_file().fd).unwrap();
    let id = c.allocate(AllocateRequest::iap(0x00C0).with_flags(PmcFlags::LOG_PROCCSW)).unwrap();
    c.start(id).unwrap();
    for (cpu, n) in [(0, 10), (1, 20), (0, 30)] {
        w.run(w.pid, cpu, n);
    }
    w.flush().unwrap();
    let tid = w.driver.kernel().threads(w.pid)[0];
    // Each CPU's buffer goes out whole, so records of different CPUs interleave by buffer.
    let mut csw: Vec<String> =
        w.records().into_iter().filter(|r| r.starts_with("ProcCsw")).collect();
    csw.sort();
    let expected: Vec<String> = [10, 20, 30]
        .iter()
        .map(|v| {
            format!("ProcCsw(ProcCsw {{ value: {v}, pmcid: {id}, pid: {}, tid: {tid} }})", w.pid)
        })
        .collect();
    assert_eq!(csw, expected);
}

#[test]
fn a_writer_error_stops_the_log_signals_the_owner_and_is_returned_by_flushlog() {
    let w = world(Tunables::default());
    let kernel = w.driver.kernel().clone();
    let c = w.client();
    w.configure(w.log_file().fd).unwrap();
    let id = c.allocate(AllocateRequest::iap(0x00C0)).unwrap();
    c.start(id).unwrap();
    kernel.set_sink_failure(w.log_file().sink, Some(Errno::NoSpc));
    w.write_log(1).unwrap();
    assert_eq!(w.flush(), Err(Errno::NoSpc));
    assert!(kernel.take_signals().contains(&(w.pid, Signal::Io)));
    assert_eq!(w.flush(), Err(Errno::NoSpc), "the error stays until the log is closed");
    // The driver keeps counting.
    w.run(w.pid, 0, 500);
    assert_eq!(c.read(id), Ok(500));
    // Closing releases the log; a new one can be configured.
    w.configure(-1).unwrap();
    assert_eq!(kernel.open_log_files(), 0);
    kernel.set_sink_failure(w.log_file().sink, None);
    w.configure(w.log_file().fd).unwrap();
    assert_eq!(w.flush(), Ok(()));
}

#[test]
fn after_a_writer_error_writelog_still_succeeds_and_flushlog_and_closelog_report_it() {
    let tunables = Tunables { log_buffer_kib: 1, log_buffers_per_cpu: 1, ..Tunables::default() };
    let w = world(tunables);
    let kernel = w.driver.kernel().clone();
    kernel.hardware().set_current_cpu(0);
    w.configure(w.log_file().fd).unwrap();
    kernel.set_sink_failure(w.log_file().sink, Some(Errno::Io));
    w.write_log(1).unwrap();
    assert_eq!(w.flush(), Err(Errno::Io), "FLUSHLOG reports the write error");
    assert!(kernel.take_signals().contains(&(w.pid, Signal::Io)), "the writer signalled it");
    // More records than the two 1 KiB buffers hold: each is dropped and counted, none fails.
    for n in 0..200 {
        assert_eq!(w.write_log(n), Ok(()), "WRITELOG {n} after the error");
    }
    let stats = w.client().driver_stats().unwrap();
    assert_eq!(stats.pm_buffer_requests_failed, 200, "every dropped record is counted");
    assert_eq!(w.client().close_log(), Err(Errno::Io), "CLOSELOG reports it too");
    assert_eq!(kernel.open_log_files(), 0, "and the log is closed");
}

#[test]
fn exhausted_buffers_drop_records_and_say_so_with_dropnotify() {
    let tunables = Tunables { log_buffer_kib: 1, log_buffers_per_cpu: 1, ..Tunables::default() };
    let w = world(tunables);
    let kernel = w.driver.kernel().clone();
    // Two CPUs, one buffer each: the log has two 1 KiB buffers. Keep everything on CPU 0.
    kernel.hardware().set_current_cpu(0);
    w.configure(w.log_file().fd).unwrap();
    let written_at_configure = kernel.sink_bytes(w.log_file().sink).len();
    assert_eq!(written_at_configure, 112, "INITIALIZE went out at once");
    // 1024 bytes hold 42 USERDATA records of 24 bytes; the second buffer 42 more.
    let mut accepted = 0;
    while accepted < 10_000 && w.write_log(accepted).is_ok() {
        accepted += 1;
    }
    assert_eq!(accepted, 2 * (1024 / 24));
    assert_eq!(w.write_log(9999), Err(Errno::NoMem));
    let stats = w.client().driver_stats().unwrap();
    assert_eq!(stats.pm_buffer_requests_failed, 2);
    assert!(kernel.writer_wakeups() > 0, "the writer was asked to run");
    // The writer empties the full buffer; the next record comes after a DROPNOTIFY.
    w.driver.write_logs();
    w.write_log(4242).unwrap();
    w.flush().unwrap();
    let records = w.records();
    let tail: Vec<&str> = records[records.len() - 2..].iter().map(String::as_str).collect();
    assert_eq!(tail, ["DropNotify", "UserData(UserData { data: 4242 })"]);
    let userdata = records.iter().filter(|r| r.starts_with("UserData")).count();
    assert_eq!(userdata as u32, accepted + 1, "everything accepted reached the file");
}

#[test]
fn an_owner_that_exits_closes_its_log() {
    let w = world(Tunables::default());
    let kernel = w.driver.kernel().clone();
    w.configure(w.log_file().fd).unwrap();
    w.write_log(5).unwrap();
    kernel.begin_exit(w.pid);
    w.driver.process_exit(w.pid);
    assert_eq!(kernel.open_log_files(), 0);
    assert_eq!(w.records().last().unwrap(), "UserData(UserData { data: 5 })");
}
