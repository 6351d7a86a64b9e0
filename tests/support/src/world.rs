//! A world: the driver loaded on simulated CPUs *without* the machine's scheduler, and the
//! processes a test acts as. The fixture of the tests that call the driver's entry points
//! themselves (system calls, context switches, the interrupt) instead of running workloads on a
//! [`Machine`](hwpmc_sim::Machine).
//!
//! [`World::new`] is the plainest one (one CPU, default tunables, one user process); a
//! [`WorldBuilder`] gives the options the suites need: the CPU count and tunables, a suite's
//! modes (masked-PMI policy, freezing), a log file, more processes, a host that counts PMCs
//! itself. Everything is set up in one fixed order (load, the process, its log, the other
//! processes), so the same options give the same pids, descriptors and log bytes.

use std::rc::Rc;

use hwpmc::{HostCounters, Pid, Tid, Tunables};
use hwpmc_sim::modes::SimModes;
use hwpmc_sim::{
    Credentials, PmcClient, PmuModel, SimDriver, SimHardware, SimKernel, SinkId, SinkKind,
};

/// The driver on its simulated kernel and hardware, and the processes a test acts as.
pub struct World {
    /// The driver.
    pub driver: SimDriver,
    /// The process the test acts as (the first one spawned).
    pub pid: Pid,
    /// Its only thread.
    pub tid: Tid,
    /// Every process the world spawned, `pid` first, in spawn order.
    pub processes: Vec<Pid>,
    /// The log file of `pid`, if the world opened one.
    pub log: Option<LogFile>,
}

/// A writable file a process opened for its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogFile {
    /// Its descriptor in the process.
    pub fd: i32,
    /// Where its bytes go.
    pub sink: SinkId,
}

/// Whether the process gets a log file, and whether the driver is told to log to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Log {
    None,
    Opened,
    Configured,
}

/// How a [`World`] is built (see the module documentation).
pub struct WorldBuilder {
    model: PmuModel,
    cpus: usize,
    tunables: Tunables,
    modes: SimModes,
    credentials: Credentials,
    log: Log,
    others: Vec<Credentials>,
    host: Option<Rc<dyn HostCounters>>,
}

impl World {
    /// The driver on one CPU of `model` with default tunables, and one process of user 1000.
    pub fn new(model: PmuModel) -> World {
        World::builder(model).build()
    }

    /// A builder for a world on CPUs of `model`, with the options of [`World::new`] to start
    /// from.
    pub fn builder(model: PmuModel) -> WorldBuilder {
        WorldBuilder {
            model,
            cpus: 1,
            tunables: Tunables::default(),
            modes: SimModes::exact(),
            credentials: Credentials::user(1000),
            log: Log::None,
            others: Vec::new(),
            host: None,
        }
    }

    /// The hwpmc system call as the world's process.
    pub fn client(&self) -> PmcClient<'_> {
        PmcClient::new(&self.driver, self.pid)
    }

    /// The hwpmc system call as process `pid`.
    pub fn client_as(&self, pid: Pid) -> PmcClient<'_> {
        PmcClient::new(&self.driver, pid)
    }

    /// The simulated kernel.
    pub fn kernel(&self) -> &SimKernel {
        self.driver.kernel()
    }

    /// The process's log file.
    ///
    /// # Panics
    /// If the world has none ([`WorldBuilder::log_file`], [`WorldBuilder::logging`]).
    pub fn log_file(&self) -> LogFile {
        self.log.expect("a world with a log file")
    }

    /// The bytes written to the process's log file so far.
    pub fn log_bytes(&self) -> Vec<u8> {
        self.kernel().sink_bytes(self.log_file().sink)
    }
}

impl WorldBuilder {
    /// With `cpus` CPUs.
    pub fn cpus(mut self, cpus: usize) -> Self {
        self.cpus = cpus;
        self
    }

    /// With these tunables (the modes' freezing, if they name one, wins).
    pub fn tunables(mut self, tunables: Tunables) -> Self {
        self.tunables = tunables;
        self
    }

    /// Under a suite's modes: their masked-PMI policy on every CPU and their freeze tunable,
    /// where they name one (PMI timing and injection need the machine's scheduler: not here).
    pub fn modes(mut self, modes: &SimModes) -> Self {
        self.modes = modes.clone();
        self
    }

    /// The process has these credentials.
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = credentials;
        self
    }

    /// The process opens a writable log file, but does not configure the driver's log.
    pub fn log_file(mut self) -> Self {
        self.log = Log::Opened;
        self
    }

    /// The process opens a writable log file and configures the driver's log to it.
    pub fn logging(mut self) -> Self {
        self.log = Log::Configured;
        self
    }

    /// Another process, with `credentials`, spawned after the first (and its log file).
    pub fn process(mut self, credentials: Credentials) -> Self {
        self.others.push(credentials);
        self
    }

    /// The kernel counts PMCs itself through `host`.
    pub fn host_counters(mut self, host: Rc<dyn HostCounters>) -> Self {
        self.host = Some(host);
        self
    }

    /// Loads the driver and spawns the processes.
    ///
    /// # Panics
    /// If the driver refuses to load.
    pub fn build(self) -> World {
        let tunables = Tunables {
            freeze_on_pmi: self.modes.freeze_on_pmi.unwrap_or(self.tunables.freeze_on_pmi),
            ..self.tunables
        };
        let hw = SimHardware::new(self.model, self.cpus);
        let mut kernel = SimKernel::new(hw.clone());
        if let Some(host) = self.host {
            kernel = kernel.with_host_counters(host);
        }
        let driver = SimDriver::load(kernel, hw, tunables)
            .unwrap_or_else(|e| panic!("the driver refused to load: {e}"));
        let kernel = driver.kernel().clone();
        if let Some(policy) = self.modes.masked_pmi {
            for cpu in 0..self.cpus {
                kernel.hardware().pmu(cpu).set_masked_pmi(policy);
            }
        }
        let pid = kernel.spawn(None, self.credentials);
        let tid = kernel.threads(pid)[0];
        let log = (self.log != Log::None).then(|| {
            let fd = kernel.open_sink(pid, SinkKind::Writable);
            let sink = kernel.sink_of(pid, fd).expect("the log file was just opened");
            LogFile { fd, sink }
        });
        if let (Log::Configured, Some(file)) = (self.log, log) {
            PmcClient::new(&driver, pid).configure_log(file.fd).expect("PMCCONFIGURELOG");
        }
        let mut processes = vec![pid];
        processes.extend(self.others.into_iter().map(|c| kernel.spawn(None, c)));
        World { driver, pid, tid, processes, log }
    }
}
