//! The Linux host's log: the owner's descriptor, the records written to it, and the drain that
//! turns what perf's sampling rings hold into pmclog records (CALLCHAIN for samples; MAP_IN,
//! PROCEXEC, PROCFORK, THR_CREATE, THR_EXIT and SYSEXIT from perf's side-band records; a
//! DROPNOTIFY for every loss).

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use perf_event::Sampler;
use perf_event::data::Record as PerfRecord;
use pmclog::{
    Callchain, CallchainFlags, MapIn, ProcExec, ProcFork, ProgramCounters, Record, SysExit,
    ThrCreate, ThrExit,
};

use super::super::unix_process as process;
use crate::host::KERNEL_SYMBOLS;

/// `PERF_RECORD_MISC_CPUMODE_MASK` and its user value.
const MISC_CPUMODE_MASK: u16 = 0x7;
const MISC_USER: u16 = 2;
/// `PERF_RECORD_MISC_COMM_EXEC`: the COMM record comes from an exec.
const MISC_COMM_EXEC: u16 = 0x2000;
/// perf marks callchain contexts with values from `-4095` up (`PERF_CONTEXT_MAX`).
const CONTEXT_MARKER_MIN: u64 = (-4095i64) as u64;
/// `PERF_CONTEXT_USER`.
const CONTEXT_USER: u64 = (-512i64) as u64;

/// One sampling ring and the PMC whose samples it holds.
pub(crate) struct Ring {
    pub(crate) meta: RingMeta,
    pub(crate) sampler: Sampler,
}

/// What the drain needs to know of a ring's PMC.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RingMeta {
    pub(crate) pmcid: u32,
    /// The deepest callchain to log (`kern.hwpmc.callchaindepth`); 1 without PMC_F_CALLCHAIN.
    pub(crate) depth: usize,
    /// Whether kernel-mode samples get the user stack appended (PMC_F_USERCALLCHAIN).
    pub(crate) user_callchain: bool,
}

/// The log and the sampling rings that feed it.
#[derive(Default)]
pub(crate) struct Log {
    state: Mutex<LogState>,
    rings: Mutex<Vec<Ring>>,
    /// Processes that executed a program whose path is not known yet (see [`convert`]).
    pending_exec: Mutex<Vec<i32>>,
    /// Samples perf reported lost (ring full), in total.
    pub(crate) lost: AtomicU64,
    drain_running: AtomicBool,
    /// Whether this log has the executable mappings of every process (written once, at the
    /// first system-sampling start).
    all_mappings: AtomicBool,
    /// Whether this log has the kernel's pseudo-mapping.
    kernel_mapping: AtomicBool,
}

/// The address of the kernel's text (`_stext`, else `_text`) from [`KERNEL_SYMBOLS`], if the
/// kernel shows its addresses.
fn kernel_text_start() -> Option<u64> {
    let text = std::fs::read_to_string(KERNEL_SYMBOLS).ok()?;
    let find = |name: &str| {
        text.lines().find_map(|line| {
            let mut f = line.split_ascii_whitespace();
            let (addr, _kind, sym) = (f.next()?, f.next()?, f.next()?);
            (sym == name).then(|| u64::from_str_radix(addr, 16).ok()).flatten()
        })
    };
    find("_stext").or_else(|| find("_text")).filter(|&a| a != 0)
}

#[derive(Default)]
struct LogState {
    file: Option<File>,
    /// The first write error, until FLUSHLOG reports it.
    error: Option<i32>,
    /// Whether logging stopped after a write error (until the log is deconfigured).
    failed: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A monotonic timestamp in nanoseconds: the log's "TSC" (INITIALIZE says 1 GHz), the clock
/// perf stamps samples with too.
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for clock_gettime to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

impl Log {
    /// Whether a log is configured.
    pub(crate) fn is_open(&self) -> bool {
        lock(&self.state).file.is_some()
    }

    /// Starts logging to `file` (the host's own descriptor).
    pub(crate) fn open(self: &Arc<Self>, file: File) {
        *lock(&self.state) = LogState { file: Some(file), error: None, failed: false };
        self.all_mappings.store(false, Ordering::Relaxed);
        self.kernel_mapping.store(false, Ordering::Relaxed);
        if !self.drain_running.swap(true, Ordering::AcqRel) {
            let log = Arc::downgrade(self);
            std::thread::Builder::new()
                .name("pmclog-drain".into())
                .spawn(move || {
                    while let Some(log) = log.upgrade() {
                        if !log.is_open() {
                            log.drain_running.store(false, Ordering::Release);
                            return;
                        }
                        log.drain();
                        drop(log);
                        if let Ok(host) = super::get() {
                            host.log_ended_targets();
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                })
                .ok();
        }
    }

    /// Writes one record (dropped if no log is configured or logging failed).
    pub(crate) fn write(&self, record: &Record<'_>) {
        let mut buf = [0u8; 4200];
        let Ok(len) = pmclog::encode(record, now_ns(), &mut buf) else { return };
        self.write_bytes(&buf[..len]);
    }

    fn write_bytes(&self, bytes: &[u8]) {
        let mut state = lock(&self.state);
        if state.failed {
            return;
        }
        let Some(file) = state.file.as_mut() else { return };
        if let Err(e) = file.write_all(bytes) {
            state.error.get_or_insert(e.raw_os_error().unwrap_or(libc::EIO));
            state.failed = true;
        }
    }

    /// Drains every ring and returns (and forgets) a pending write error.
    pub(crate) fn flush(&self) -> Result<(), i32> {
        self.drain();
        let mut state = lock(&self.state);
        if let Some(file) = state.file.as_mut() {
            if let Err(e) = file.flush() {
                state.error.get_or_insert(e.raw_os_error().unwrap_or(libc::EIO));
            }
        }
        match state.error.take() {
            Some(errno) => Err(errno),
            None => Ok(()),
        }
    }

    /// Drains the rings, writes `last` and closes the log.
    pub(crate) fn close(&self, last: Option<&Record<'_>>) {
        self.drain();
        if let Some(record) = last {
            self.write(record);
        }
        *lock(&self.state) = LogState::default();
    }

    /// Writes, once per log, the kernel's pseudo-mapping: MAP_IN of process -1 (the kernel, as
    /// FreeBSD logs its kernel and modules) at the start of the kernel's text, with the path
    /// [`KERNEL_SYMBOLS`]: log readers take the kernel's function symbols from that file. Not
    /// written when the kernel hides its addresses (`kernel.kptr_restrict`).
    pub(crate) fn write_kernel_mapping(&self) {
        if self.kernel_mapping.swap(true, Ordering::Relaxed) {
            return;
        }
        if let Some(start) = kernel_text_start() {
            let path = KERNEL_SYMBOLS.as_bytes();
            self.write(&Record::MapIn(MapIn { pid: -1, start, path }));
        }
    }

    /// Whether [`Log::write_all_mappings`] ran for this log.
    pub(crate) fn wrote_all_mappings(&self) -> bool {
        self.all_mappings.load(Ordering::Relaxed)
    }

    /// Writes MAP_IN records for the executable mappings of every process (from `/proc`).
    pub(crate) fn write_all_mappings(&self) {
        self.all_mappings.store(true, Ordering::Relaxed);
        let Ok(dir) = std::fs::read_dir("/proc") else { return };
        let mut pids: Vec<i32> =
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
        pids.sort_unstable();
        for pid in pids {
            for (start, path) in process::executable_mappings(pid) {
                self.write(&Record::MapIn(MapIn { pid, start, path: &path }));
            }
        }
    }

    /// Adds a sampling ring.
    pub(crate) fn add_ring(&self, ring: Ring) {
        lock(&self.rings).push(ring);
    }

    /// Removes PMC `pmcid`'s rings after draining what they hold.
    pub(crate) fn remove_rings(&self, pmcid: u32) {
        self.drain();
        lock(&self.rings).retain(|r| r.meta.pmcid != pmcid);
    }

    /// Enables or disables PMC `pmcid`'s rings.
    pub(crate) fn enable_rings(&self, pmcid: u32, enable: bool) -> std::io::Result<()> {
        for ring in lock(&self.rings).iter_mut().filter(|r| r.meta.pmcid == pmcid) {
            if enable { ring.sampler.enable()? } else { ring.sampler.disable()? }
        }
        Ok(())
    }

    /// Moves every record the rings hold into the log.
    pub(crate) fn drain(&self) {
        let mut out = Vec::new();
        let mut pcs = Vec::with_capacity(pmclog::CALLCHAIN_DEPTH_MAX);
        let mut lost = 0;
        let mut pending = std::mem::take(&mut *lock(&self.pending_exec));
        for ring in lock(&self.rings).iter_mut() {
            let meta = ring.meta;
            while let Some(raw) = ring.sampler.next_record() {
                let Ok(record) = raw.parse_record() else { continue };
                let misc = raw.misc();
                lost += convert(meta, misc, &record, &mut pcs, &mut pending, &mut out);
            }
        }
        *lock(&self.pending_exec) = pending;
        if lost > 0 {
            self.lost.fetch_add(lost, Ordering::Relaxed);
            let mut buf = [0u8; 64];
            if let Ok(len) = pmclog::encode(&Record::DropNotify, now_ns(), &mut buf) {
                out.extend_from_slice(&buf[..len]);
            }
        }
        if !out.is_empty() {
            self.write_bytes(&out);
        }
    }
}

/// Appends the pmclog record of one perf record to `out`; returns the samples it says were lost.
fn convert(
    ring: RingMeta,
    misc: u16,
    record: &PerfRecord<'_>,
    pcs: &mut Vec<u64>,
    pending: &mut Vec<i32>,
    out: &mut Vec<u8>,
) -> u64 {
    let mut emit = |record: &Record<'_>, tsc: u64| {
        let start = out.len();
        out.resize(start + 4200, 0);
        match pmclog::encode(record, tsc, &mut out[start..]) {
            Ok(len) => out.truncate(start + len),
            Err(_) => out.truncate(start),
        }
    };
    let now = now_ns();
    match record {
        PerfRecord::Sample(s) => {
            let user = misc & MISC_CPUMODE_MASK == MISC_USER;
            pcs.clear();
            match s.callchain() {
                Some(chain) => callchain_pcs(chain, user, ring.user_callchain, pcs),
                None => pcs.extend(s.ip()),
            }
            if pcs.is_empty() {
                pcs.extend(s.ip());
            }
            pcs.truncate(ring.depth.max(1));
            let cpu = s.cpu().unwrap_or(0) as u16;
            let flags = if user { CallchainFlags::USERSPACE as u16 } else { 0 };
            let cc = Callchain {
                pid: s.pid().unwrap_or(0) as i32,
                tid: s.tid().unwrap_or(0) as i32,
                pmcid: ring.pmcid,
                cpuflags: CallchainFlags::new(cpu, flags),
                pcs: ProgramCounters::from_words(pcs),
            };
            emit(&Record::Callchain(cc), s.time().unwrap_or(now));
            0
        }
        PerfRecord::Mmap(m) => {
            map_in(m.pid, m.addr, m.pgoff, &m.filename, ring.pmcid, pending, &mut emit, now);
            0
        }
        PerfRecord::Mmap2(m) => {
            map_in(m.pid, m.addr, m.pgoff, &m.filename, ring.pmcid, pending, &mut emit, now);
            0
        }
        PerfRecord::Comm(c) if misc & MISC_COMM_EXEC != 0 && c.pid == c.tid => {
            // The executable's path: from /proc while the process lives, else from its first
            // file mapping after the exec (the executable itself), which follows in the ring.
            let path = process::exe_path(c.pid as i32);
            if path.is_empty() {
                pending.push(c.pid as i32);
            } else {
                emit(&Record::ProcExec(exec_record(c.pid as i32, ring.pmcid, &path)), now);
            }
            0
        }
        PerfRecord::Fork(f) if f.pid != f.ppid => {
            emit(
                &Record::ProcFork(ProcFork { old_pid: f.ppid as i32, new_pid: f.pid as i32 }),
                f.time,
            );
            0
        }
        PerfRecord::Fork(f) => {
            let thr = ThrCreate { tid: f.tid as i32, pid: f.pid as i32, flags: 0, name: b"" };
            emit(&Record::ThrCreate(thr), f.time);
            0
        }
        PerfRecord::Exit(e) if e.pid == e.tid => {
            emit(&Record::SysExit(SysExit { pid: e.pid as i32 }), e.time);
            0
        }
        PerfRecord::Exit(e) => {
            emit(&Record::ThrExit(ThrExit { tid: e.tid as i32 }), e.time);
            0
        }
        PerfRecord::Lost(l) => l.lost,
        PerfRecord::LostSamples(l) => l.lost,
        _ => 0,
    }
}

fn exec_record(pid: i32, pmcid: u32, path: &[u8]) -> ProcExec<'_> {
    ProcExec { pid, pmcid, base_addr: 0, dyn_addr: 0, path }
}

/// A MAP_IN record for an executable file mapping (its load base: the address of file offset
/// 0), preceded by the PROCEXEC of a process whose exec was waiting for its path.
#[allow(clippy::too_many_arguments)]
fn map_in(
    pid: u32,
    addr: u64,
    pgoff: u64,
    filename: &[u8],
    pmcid: u32,
    pending: &mut Vec<i32>,
    emit: &mut impl FnMut(&Record<'_>, u64),
    now: u64,
) {
    let path = c_string(filename);
    if !path.starts_with(b"/") {
        return;
    }
    let pid = pid as i32;
    if let Some(at) = pending.iter().position(|&p| p == pid) {
        pending.swap_remove(at);
        emit(&Record::ProcExec(exec_record(pid, pmcid, path)), now);
    }
    emit(&Record::MapIn(MapIn { pid, start: addr.wrapping_sub(pgoff), path }), now);
}

/// The bytes of a NUL-padded perf string up to its first NUL (perf-event-data leaves the padding,
/// and with `sample_id_all` the sample id fields, in the name).
fn c_string(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())]
}

/// The program counters of a perf callchain, without perf's context markers: the user frames
/// of a user-mode sample; the kernel frames of a kernel-mode one, followed by the user frames
/// when `append_user` (PMC_F_USERCALLCHAIN).
fn callchain_pcs(chain: &[u64], user: bool, append_user: bool, pcs: &mut Vec<u64>) {
    let user_start = chain.iter().position(|&pc| pc == CONTEXT_USER);
    let frames = |part: &[u64]| {
        part.iter().copied().filter(|&pc| pc < CONTEXT_MARKER_MIN).collect::<Vec<_>>()
    };
    match (user, user_start) {
        (true, Some(at)) => pcs.extend(frames(&chain[at..])),
        (true, None) => pcs.extend(frames(chain)),
        (false, at) => {
            let kernel_end = at.unwrap_or(chain.len());
            pcs.extend(frames(&chain[..kernel_end]));
            if append_user {
                pcs.extend(frames(&chain[kernel_end..]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: u64 = (-128i64) as u64;

    #[test]
    fn user_samples_keep_only_user_frames_without_markers() {
        let chain = [KERNEL, 0xffff_ffff_8100_0000, CONTEXT_USER, 0x401000, 0x401100];
        let mut pcs = Vec::new();
        callchain_pcs(&chain, true, false, &mut pcs);
        assert_eq!(pcs, [0x401000, 0x401100]);
    }

    #[test]
    fn kernel_samples_append_the_user_stack_only_when_asked() {
        let chain = [KERNEL, 0xffff_ffff_8100_0000, CONTEXT_USER, 0x401000];
        let mut pcs = Vec::new();
        callchain_pcs(&chain, false, false, &mut pcs);
        assert_eq!(pcs, [0xffff_ffff_8100_0000]);
        pcs.clear();
        callchain_pcs(&chain, false, true, &mut pcs);
        assert_eq!(pcs, [0xffff_ffff_8100_0000, 0x401000]);
    }
}
