//! The hwpmc system call as libpmc makes it: an argument struct in the caller's memory, its
//! address passed with the `PMC_OP_*` number.

use hwpmc::abi::{
    Caps, Class, Mode, Op, PMC_CPU_ANY, PmcFlags, PmcOpConfigureLog, PmcOpGetCpuInfo,
    PmcOpPmcAllocate, PmcOpPmcAttach, PmcOpPmcRw, PmcOpSimple,
};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes};

use ring0_abi as abi;

use crate::sys;

/// A failed call's errno.
#[derive(Debug, Clone, Copy)]
pub struct Errno(pub i64);

/// Calls `op` with `arg`.
pub fn call<T: IntoBytes + FromBytes + Immutable>(op: Op, arg: &mut T) -> Result<(), Errno> {
    let result = sys::call(
        abi::SYS_HWPMC,
        u64::from(op.as_u32()),
        arg.as_mut_bytes().as_mut_ptr() as u64,
        0,
    );
    if result < 0 { Err(Errno(-result)) } else { Ok(()) }
}

/// Calls `op` with no argument.
pub fn call_simple(op: Op) -> Result<(), Errno> {
    let result = sys::call(abi::SYS_HWPMC, u64::from(op.as_u32()), 0, 0);
    if result < 0 { Err(Errno(-result)) } else { Ok(()) }
}

/// GETCPUINFO.
pub fn cpu_info() -> Result<PmcOpGetCpuInfo, Errno> {
    let mut info = PmcOpGetCpuInfo::new_zeroed();
    call(Op::GetCpuInfo, &mut info)?;
    Ok(info)
}

/// The code of software event `name` (GETDYNEVENTINFO of the SOFT class).
pub fn soft_event(name: &str) -> Result<Option<u32>, Errno> {
    /// The head of `struct pmc_op_getdyneventinfo` and room for 16 events.
    #[derive(FromBytes, IntoBytes, Immutable)]
    #[repr(C)]
    struct DynEvents {
        class: u32,
        count: u32,
        events: [hwpmc::abi::PmcDynEventDescr; 16],
    }
    let mut request = DynEvents::new_zeroed();
    request.class = Class::Soft.as_u32();
    call(Op::GetDynEventInfo, &mut request)?;
    let found = request.events[..(request.count as usize).min(16)].iter().find(|e| {
        let end = e.pm_ev_name.iter().position(|&b| b == 0).unwrap_or(e.pm_ev_name.len());
        &e.pm_ev_name[..end] == name.as_bytes()
    });
    Ok(found.map(|e| e.pm_ev_code))
}

/// What to allocate.
#[derive(Clone, Copy)]
pub struct Request {
    pub class: Class,
    pub event: u32,
    pub mode: Mode,
    pub flags: PmcFlags,
    pub cpu: u32,
    pub count: u64,
    pub iap_config: u32,
}

impl Request {
    /// Counting `event` of `class` in `mode` (on `cpu` for the system modes).
    pub fn new(class: Class, event: u32, mode: Mode, cpu: Option<u32>) -> Self {
        Request {
            class,
            event,
            mode,
            flags: PmcFlags::empty(),
            cpu: cpu.unwrap_or(PMC_CPU_ANY),
            count: 0,
            iap_config: 0,
        }
    }

    /// Sampling every `count` events, with callchains.
    pub fn sampling_every(mut self, count: u64) -> Self {
        self.count = count;
        self.flags |= PmcFlags::CALLCHAIN;
        self
    }
}

/// PMCALLOCATE: the new PMC's id.
pub fn allocate(r: Request) -> Result<u32, Errno> {
    let mut op = PmcOpPmcAllocate::new_zeroed();
    op.pm_caps = match r.class {
        Class::Tsc => Caps::READ.bits(),
        _ => {
            (Caps::USER | Caps::SYSTEM).bits()
                | if r.mode.is_sampling() { Caps::INTERRUPT.bits() } else { 0 }
        }
    };
    op.pm_cpu = r.cpu;
    op.pm_class = r.class.as_u32();
    op.pm_ev = r.event;
    op.pm_flags = r.flags.bits();
    op.pm_mode = r.mode.as_u32();
    op.pm_count = r.count;
    op.pm_md.set_iap_config(r.iap_config);
    call(Op::PmcAllocate, &mut op)?;
    Ok(op.pm_pmcid)
}

/// PMCATTACH to `pid` (0: the caller).
pub fn attach(id: u32, pid: i32) -> Result<(), Errno> {
    call(Op::PmcAttach, &mut PmcOpPmcAttach { pm_pmc: id, pm_pid: pid })
}

/// PMCSTART.
pub fn start(id: u32) -> Result<(), Errno> {
    call(Op::PmcStart, &mut PmcOpSimple { pm_pmcid: id })
}

/// PMCSTOP.
pub fn stop(id: u32) -> Result<(), Errno> {
    call(Op::PmcStop, &mut PmcOpSimple { pm_pmcid: id })
}

/// PMCRELEASE.
pub fn release(id: u32) -> Result<(), Errno> {
    call(Op::PmcRelease, &mut PmcOpSimple { pm_pmcid: id })
}

/// PMCRW reading the value.
pub fn read(id: u32) -> Result<u64, Errno> {
    let mut op = PmcOpPmcRw { pm_flags: PmcFlags::OLDVALUE.bits(), pm_pmcid: id, pm_value: 0 };
    call(Op::PmcRw, &mut op)?;
    Ok(op.pm_value)
}

/// CONFIGURELOG to the kernel's log device.
pub fn configure_log() -> Result<(), Errno> {
    call(Op::ConfigureLog, &mut PmcOpConfigureLog { pm_flags: 0, pm_logfd: abi::LOG_FD })
}

/// FLUSHLOG.
pub fn flush_log() -> Result<(), Errno> {
    call_simple(Op::FlushLog)
}

/// CLOSELOG.
pub fn close_log() -> Result<(), Errno> {
    call_simple(Op::CloseLog)
}
