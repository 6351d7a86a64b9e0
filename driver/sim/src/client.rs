//! Issuing hwpmc system calls as a simulated process, the way libpmc does on FreeBSD: the
//! argument struct is written into the process's memory, the driver is called with its address,
//! and the reply is read back.

use hwpmc::abi::{
    Caps, Class, Mode, Op, PMC_CPU_ANY, PMC_VERSION_CLIENT, PmcFlags, PmcInfo, PmcOpCaps,
    PmcOpConfigureLog, PmcOpGetCpuInfo, PmcOpGetDriverStats, PmcOpGetMsr, PmcOpGetPmcInfo,
    PmcOpPmcAdmin, PmcOpPmcAllocate, PmcOpPmcAttach, PmcOpPmcRw, PmcOpPmcSetCount, PmcOpSimple,
    PmcOpWriteLog, State,
};
use hwpmc::abi::{PMC_OP_PMCREADTIMES, PmcOpPmcReadTimes};
use hwpmc::hw::Hardware;
use hwpmc::{Driver, Errno, Kernel, Pid, Tunables, UserPtr};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::arch_event::ArchEvent;
use crate::cpuid::PmuModel;
use crate::kernel::{SCRATCH_BASE, SCRATCH_LEN, SimKernel};
use crate::pmu::SimHardware;

/// The driver on the simulated machine.
pub type SimDriver = Driver<SimKernel, SimHardware>;

/// Builds a machine of `cpus` CPUs of `model` and loads the driver on it with `tunables`.
pub fn load_driver(model: PmuModel, cpus: usize, tunables: Tunables) -> SimDriver {
    let hw = SimHardware::new(model, cpus);
    let kernel = SimKernel::new(hw.clone());
    match Driver::load(kernel, hw, tunables) {
        Ok(driver) => driver,
        Err(e) => panic!("the driver refused to load: {e}"),
    }
}

/// What to allocate: the fields of `struct pmc_op_pmcallocate` a caller chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocateRequest {
    /// `pm_class`.
    pub class: u32,
    /// `pm_ev`.
    pub event: u32,
    /// `pm_mode`.
    pub mode: u32,
    /// `pm_flags`.
    pub flags: u32,
    /// `pm_cpu` (`PMC_CPU_ANY` for process modes).
    pub cpu: u32,
    /// `pm_caps`.
    pub caps: u32,
    /// `pm_count`.
    pub count: u64,
    /// `pm_md.pm_iap.pm_iap_config`.
    pub iap_config: u32,
    /// `pm_md.pm_amd.pm_amd_config` (used for the K8 class, whose union member it is).
    pub amd_config: u64,
    /// `pm_md.pm_amd.pm_amd_sub_class` (K8 class).
    pub amd_sub_class: u32,
    /// `pm_md.pm_iap.pm_iap_rsp` (the offcore-response value).
    pub iap_rsp: u64,
    /// Bits 63:32 of the IA32_PERFEVTSELx image, in the padding after `pm_iap_config` (see
    /// [`hwpmc::abi::PmcMdOpPmcAllocate::iap_config64`]).
    pub iap_config_high: u32,
    /// The E-cores' IA32_PERFEVTSELx image on a hybrid machine, after `pm_iap` (see
    /// [`hwpmc::abi::PmcMdOpPmcAllocate::iap_config_atom`]); 0: the same encoding everywhere.
    pub iap_config_atom: u64,
}

impl AllocateRequest {
    /// A request for an IAP event given as an IA32_PERFEVTSEL image (`PMC_F_EV_PMU`, as libpmc
    /// sends PMU events), in process-counting mode.
    pub fn iap(config: u32) -> Self {
        AllocateRequest {
            class: Class::Iap.as_u32(),
            event: 0,
            mode: Mode::ThreadCounting.as_u32(),
            flags: PmcFlags::EV_PMU.bits(),
            cpu: PMC_CPU_ANY,
            caps: (Caps::USER | Caps::SYSTEM).bits(),
            count: 0,
            iap_config: config,
            amd_config: 0,
            amd_sub_class: 0,
            iap_rsp: 0,
            iap_config_high: 0,
            iap_config_atom: 0,
        }
    }

    /// A request for an AMD core event given as a PERF_CTL image (K8 class, core sub-class,
    /// `PMC_F_EV_PMU`, as libpmc sends AMD events), in process-counting mode.
    pub fn k8(config: u64) -> Self {
        AllocateRequest {
            class: Class::K8.as_u32(),
            iap_config: 0,
            amd_config: config,
            ..Self::iap(0)
        }
    }

    /// A request for a programmable counter of `model` counting architectural event `event` in
    /// the rings of `usr_os` (bits 16 and 17 of the event select; from the caps when 0): IAP
    /// with an IA32_PERFEVTSEL image on Intel, K8 with a PERF_CTL image on AMD (the 12-bit event
    /// select split over bits 7:0 and 35:32), process counting.
    ///
    /// # Panics
    /// If an AMD model's core counters do not count `event` ([`crate::arch_event::amd_event`]).
    pub fn arch(model: &PmuModel, event: ArchEvent, usr_os: u32) -> Self {
        if model.is_amd() {
            let select =
                crate::arch_event::amd_event(event).expect("an event AMD's core counters count");
            let select = u64::from(select);
            Self::k8(select & 0xFF | (select >> 8) << 32 | u64::from(usr_os))
        } else {
            let umask = u32::from(event.umask()) << 8;
            Self::iap(u32::from(event.event_select()) | umask | usr_os)
        }
    }

    /// A request for fixed counter `event` (an `IAF_*` static event), process counting.
    pub fn iaf(event: u32) -> Self {
        AllocateRequest {
            class: Class::Iaf.as_u32(),
            event,
            flags: 0,
            iap_config: 0,
            ..Self::iap(0)
        }
    }

    /// A request for the TSC on `cpu` (system counting).
    pub fn tsc(cpu: u32) -> Self {
        AllocateRequest {
            class: Class::Tsc.as_u32(),
            event: hwpmc::abi::event::TSC_TSC,
            mode: Mode::SystemCounting.as_u32(),
            flags: 0,
            cpu,
            caps: Caps::READ.bits(),
            count: 0,
            iap_config: 0,
            amd_config: 0,
            amd_sub_class: 0,
            iap_rsp: 0,
            iap_config_high: 0,
            iap_config_atom: 0,
        }
    }

    /// A request for software event `event`, process counting.
    pub fn soft(event: u32) -> Self {
        AllocateRequest {
            class: Class::Soft.as_u32(),
            event,
            flags: 0,
            iap_config: 0,
            ..Self::iap(0)
        }
    }

    /// The same request in `mode` (and on `cpu` for the system modes).
    pub fn in_mode(mut self, mode: Mode, cpu: Option<u32>) -> Self {
        self.mode = mode.as_u32();
        self.cpu = cpu.unwrap_or(PMC_CPU_ANY);
        self
    }

    /// The same request with `flags` added.
    pub fn with_flags(mut self, flags: PmcFlags) -> Self {
        self.flags |= flags.bits();
        self
    }

    /// The same request with the offcore-response value `rsp` (`pm_iap_rsp`).
    pub fn with_rsp(mut self, rsp: u64) -> Self {
        self.iap_rsp = rsp;
        self
    }

    /// The same request with UMASK2 (IA32_PERFEVTSELx bits 47:40) set to `umask2`.
    pub fn with_umask2(mut self, umask2: u8) -> Self {
        self.iap_config_high = u32::from(umask2) << 8;
        self
    }

    /// The same request with `config` as the E-cores' encoding of its event (a hybrid machine's
    /// P-cores load `iap_config`).
    pub fn with_atom_encoding(mut self, config: u64) -> Self {
        self.iap_config_atom = config;
        self
    }

    /// The same request with `pm_count`.
    pub fn with_count(mut self, count: u64) -> Self {
        self.count = count;
        self
    }

    /// The PMCALLOCATE argument of the request.
    pub fn to_op(self) -> PmcOpPmcAllocate {
        let mut op = PmcOpPmcAllocate::new_zeroed();
        op.pm_caps = self.caps;
        op.pm_cpu = self.cpu;
        op.pm_class = self.class;
        op.pm_ev = self.event;
        op.pm_flags = self.flags;
        op.pm_mode = self.mode;
        op.pm_count = self.count;
        if self.class == Class::K8.as_u32() {
            op.pm_md.set_amd_config(self.amd_config);
            op.pm_md.set_amd_sub_class(self.amd_sub_class);
        } else {
            op.pm_md.set_iap_config64(
                u64::from(self.iap_config_high) << 32 | u64::from(self.iap_config),
            );
            op.pm_md.set_iap_rsp(self.iap_rsp);
            op.pm_md.set_iap_config_atom(self.iap_config_atom);
        }
        op
    }
}

/// A process's view of the hwpmc system call (on the simulated kernel; the hardware may be any).
pub struct PmcClient<'a, H: Hardware = SimHardware> {
    driver: &'a Driver<SimKernel, H>,
    pid: Pid,
}

impl<H: Hardware> Clone for PmcClient<'_, H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<H: Hardware> Copy for PmcClient<'_, H> {}

impl<'a, H: Hardware> PmcClient<'a, H> {
    /// Calls as process `pid`.
    pub fn new(driver: &'a Driver<SimKernel, H>, pid: Pid) -> Self {
        PmcClient { driver, pid }
    }

    /// The calling process.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Calls `op` with `arg` written at the start of the scratch memory and read back after.
    pub fn call<T: IntoBytes + FromBytes + Immutable + KnownLayout>(
        &self,
        op: Op,
        arg: &mut T,
    ) -> Result<(), Errno> {
        let kernel = self.driver.kernel();
        kernel.write_memory(self.pid, SCRATCH_BASE, arg.as_bytes())?;
        let result = self.call_raw(op.as_u32(), UserPtr(SCRATCH_BASE));
        let bytes = kernel.read_memory(self.pid, SCRATCH_BASE, core::mem::size_of::<T>())?;
        arg.as_mut_bytes().copy_from_slice(&bytes);
        result
    }

    /// Calls operation number `op` (one of FreeBSD's or an extension's) with `arg` written at
    /// the start of the scratch memory and read back after.
    pub fn call_number<T: IntoBytes + FromBytes + Immutable + KnownLayout>(
        &self,
        op: u32,
        arg: &mut T,
    ) -> Result<(), Errno> {
        let kernel = self.driver.kernel();
        kernel.write_memory(self.pid, SCRATCH_BASE, arg.as_bytes())?;
        let result = self.call_raw(op, UserPtr(SCRATCH_BASE));
        let bytes = kernel.read_memory(self.pid, SCRATCH_BASE, core::mem::size_of::<T>())?;
        arg.as_mut_bytes().copy_from_slice(&bytes);
        result
    }

    /// PMC_OP_PMCREADTIMES (extension): the count, and the times enabled and running.
    pub fn read_times(&self, id: u32) -> Result<PmcOpPmcReadTimes, Errno> {
        let mut op = PmcOpPmcReadTimes::new_zeroed();
        op.pm_pmcid = id;
        self.call_number(PMC_OP_PMCREADTIMES, &mut op)?;
        Ok(op)
    }

    /// The extended error of the calling thread (see [`SimKernel::error_text`]): why its last
    /// failed call failed, as `uexterr_gettext(3)` would read it after that call.
    pub fn error_text(&self) -> &'static str {
        let kernel = self.driver.kernel();
        kernel.set_caller(self.pid);
        kernel.error_text(kernel.current_tid().unwrap_or(0))
    }

    /// Calls operation number `op` with argument pointer `arg` as is.
    pub fn call_raw(&self, op: u32, arg: UserPtr) -> Result<(), Errno> {
        self.driver.kernel().set_caller(self.pid);
        self.driver.syscall(op, arg)
    }

    /// CONFIGURELOG with descriptor `fd` (flags 0; a negative `fd` closes the log).
    pub fn configure_log(&self, fd: i32) -> Result<(), Errno> {
        self.call(Op::ConfigureLog, &mut PmcOpConfigureLog { pm_flags: 0, pm_logfd: fd })
    }

    /// FLUSHLOG.
    pub fn flush_log(&self) -> Result<(), Errno> {
        self.call_raw(Op::FlushLog.as_u32(), UserPtr::NULL)
    }

    /// CLOSELOG.
    pub fn close_log(&self) -> Result<(), Errno> {
        self.call_raw(Op::CloseLog.as_u32(), UserPtr::NULL)
    }

    /// WRITELOG with user data `data`.
    pub fn write_log(&self, data: u32) -> Result<(), Errno> {
        self.call(Op::WriteLog, &mut PmcOpWriteLog { pm_userdata: data })
    }

    /// PMCALLOCATE; returns the PMC id.
    pub fn allocate(&self, request: AllocateRequest) -> Result<u32, Errno> {
        let mut op = request.to_op();
        self.call(Op::PmcAllocate, &mut op)?;
        Ok(op.pm_pmcid)
    }

    /// PMCATTACH.
    pub fn attach(&self, id: u32, pid: Pid) -> Result<(), Errno> {
        self.call(Op::PmcAttach, &mut PmcOpPmcAttach { pm_pmc: id, pm_pid: pid })
    }

    /// PMCDETACH.
    pub fn detach(&self, id: u32, pid: Pid) -> Result<(), Errno> {
        self.call(Op::PmcDetach, &mut PmcOpPmcAttach { pm_pmc: id, pm_pid: pid })
    }

    /// PMCSTART.
    pub fn start(&self, id: u32) -> Result<(), Errno> {
        self.call(Op::PmcStart, &mut PmcOpSimple { pm_pmcid: id })
    }

    /// PMCSTOP.
    pub fn stop(&self, id: u32) -> Result<(), Errno> {
        self.call(Op::PmcStop, &mut PmcOpSimple { pm_pmcid: id })
    }

    /// PMCRELEASE.
    pub fn release(&self, id: u32) -> Result<(), Errno> {
        self.call(Op::PmcRelease, &mut PmcOpSimple { pm_pmcid: id })
    }

    /// PMCRW with `flags`; returns `pm_value` as the driver left it.
    pub fn rw(&self, id: u32, flags: u32, value: u64) -> Result<u64, Errno> {
        let mut op = PmcOpPmcRw { pm_flags: flags, pm_pmcid: id, pm_value: value };
        self.call(Op::PmcRw, &mut op)?;
        Ok(op.pm_value)
    }

    /// PMCRW read.
    pub fn read(&self, id: u32) -> Result<u64, Errno> {
        self.rw(id, PmcFlags::OLDVALUE.bits(), 0)
    }

    /// PMCRW write.
    pub fn write(&self, id: u32, value: u64) -> Result<(), Errno> {
        self.rw(id, PmcFlags::NEWVALUE.bits(), value).map(|_| ())
    }

    /// PMCSETCOUNT.
    pub fn set_count(&self, id: u32, count: u64) -> Result<(), Errno> {
        let mut op = PmcOpPmcSetCount { pm_count: count, pm_pmcid: id, pm_pad: 0 };
        self.call(Op::PmcSetCount, &mut op)
    }

    /// PMCGETMSR; returns the RDPMC index.
    pub fn get_msr(&self, id: u32) -> Result<u32, Errno> {
        let mut op = PmcOpGetMsr { pm_msr: 0, pm_pmcid: id };
        self.call(Op::PmcGetMsr, &mut op)?;
        Ok(op.pm_msr)
    }

    /// GETCAPS.
    pub fn caps(&self, id: u32) -> Result<u32, Errno> {
        let mut op = PmcOpCaps { pm_pmcid: id, pm_caps: 0 };
        self.call(Op::GetCaps, &mut op)?;
        Ok(op.pm_caps)
    }

    /// PMCADMIN.
    pub fn admin(&self, cpu: i32, row: i32, state: State) -> Result<(), Errno> {
        let mut op =
            PmcOpPmcAdmin { pm_cpu: cpu, pm_flags: 0, pm_pmc: row, pm_state: state.as_u32() };
        self.call(Op::PmcAdmin, &mut op)
    }

    /// GETCPUINFO.
    pub fn cpu_info(&self) -> Result<PmcOpGetCpuInfo, Errno> {
        let mut op = PmcOpGetCpuInfo::new_zeroed();
        self.call(Op::GetCpuInfo, &mut op)?;
        Ok(op)
    }

    /// GETPMCINFO for `cpu`: one entry per row.
    pub fn pmc_info(&self, cpu: i32) -> Result<Vec<PmcInfo>, Errno> {
        let rows = self.cpu_info()?.pm_npmc as usize;
        let kernel = self.driver.kernel();
        let head = PmcOpGetPmcInfo { pm_cpu: cpu, pm_pad: 0 };
        kernel.write_memory(self.pid, SCRATCH_BASE, head.as_bytes())?;
        self.call_raw(Op::GetPmcInfo.as_u32(), UserPtr(SCRATCH_BASE))?;
        let size = core::mem::size_of::<PmcInfo>();
        assert!(8 + rows * size <= SCRATCH_LEN);
        let bytes = kernel.read_memory(self.pid, SCRATCH_BASE + 8, rows * size)?;
        Ok(bytes.chunks_exact(size).map(|c| PmcInfo::read_from_bytes(c).unwrap()).collect())
    }

    /// GETDRIVERSTATS.
    pub fn driver_stats(&self) -> Result<PmcOpGetDriverStats, Errno> {
        let mut op = PmcOpGetDriverStats::new_zeroed();
        self.call(Op::GetDriverStats, &mut op)?;
        Ok(op)
    }

    /// GETMODULEVERSION with `version` (default: what libpmc sends); returns the driver's.
    pub fn module_version(&self, version: Option<u32>) -> Result<u32, Errno> {
        let mut value = version.unwrap_or(PMC_VERSION_CLIENT);
        self.call(Op::GetModuleVersion, &mut value)?;
        Ok(value)
    }

    /// GETDYNEVENTINFO for `class`: (name, code) of each event.
    pub fn dyn_events(&self, class: u32) -> Result<Vec<(String, u32)>, Errno> {
        let kernel = self.driver.kernel();
        kernel.write_memory(self.pid, SCRATCH_BASE, class.as_bytes())?;
        self.call_raw(Op::GetDynEventInfo.as_u32(), UserPtr(SCRATCH_BASE))?;
        let head = kernel.read_memory(self.pid, SCRATCH_BASE + 4, 4)?;
        let count = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let bytes = kernel.read_memory(self.pid, SCRATCH_BASE + 8, count * 68)?;
        Ok(bytes
            .chunks_exact(68)
            .map(|c| {
                let end = c[..64].iter().position(|&b| b == 0).unwrap_or(64);
                let name = String::from_utf8_lossy(&c[..end]).into_owned();
                (name, u32::from_le_bytes([c[64], c[65], c[66], c[67]]))
            })
            .collect())
    }
}
