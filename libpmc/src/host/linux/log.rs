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
    /// Events of the target's other threads on the same CPU, writing into this ring
    /// (PERF_EVENT_IOC_SET_OUTPUT): one ring per CPU however many threads the target has.
    pub(crate) sharing: Vec<perf_event::Counter>,
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
            if enable {
                ring.sampler.enable()?
            } else {
                ring.sampler.disable()?
            }
            for event in &mut ring.sharing {
                if enable { event.enable()? } else { event.disable()? }
            }
        }
        Ok(())
    }

    /// Moves every record the rings hold into the log, in time order across the rings (a
    /// child's FORK may sit in one CPU's ring and its EXEC and MMAP in another's: a reader that
    /// met them out of order would give the child its parent's mappings).
    pub(crate) fn drain(&self) {
        let mut events = Vec::new();
        let mut lost = 0;
        for ring in lock(&self.rings).iter_mut() {
            let meta = ring.meta;
            while let Some(raw) = ring.sampler.next_record() {
                let Ok(record) = raw.parse_record() else { continue };
                let time = record_time(&record, &raw.to_contiguous());
                match event_of(meta, raw.misc(), &record) {
                    Some(Event::Lost(n)) => lost += n,
                    Some(event) => events.push((time, event)),
                    None => {}
                }
            }
        }
        // Stable: records of one ring keep their order when their times are equal.
        events.sort_by_key(|(time, _)| *time);
        let mut out = Vec::new();
        let mut pending = lock(&self.pending_exec);
        for (time, event) in &events {
            emit_event(event, *time, &mut pending, &mut out);
        }
        drop(pending);
        if lost > 0 {
            self.lost.fetch_add(lost, Ordering::Relaxed);
            append(&mut out, &Record::DropNotify, now_ns());
        }
        if !out.is_empty() {
            self.write_bytes(&out);
        }
    }
}

/// What one perf record becomes in the log.
enum Event {
    /// A sample: CALLCHAIN.
    Sample { pid: i32, tid: i32, pmcid: u32, flags: CallchainFlags, pcs: Vec<u64> },
    /// An executable file mapping (its load base): MAP_IN.
    Map { pid: i32, start: u64, path: Vec<u8>, pmcid: u32 },
    /// A process executed a program: PROCEXEC.
    Exec { pid: i32, pmcid: u32 },
    /// PROCFORK.
    Fork { parent: i32, child: i32 },
    /// THR_CREATE.
    Thread { pid: i32, tid: i32 },
    /// SYSEXIT: a process ended.
    ProcessExit { pid: i32 },
    /// THR_EXIT.
    ThreadExit { tid: i32 },
    /// Samples perf lost.
    Lost(u64),
}

/// The event of one perf record of `ring` (with header flags `misc`), if it logs anything.
fn event_of(ring: RingMeta, misc: u16, record: &PerfRecord<'_>) -> Option<Event> {
    Some(match record {
        PerfRecord::Sample(s) => {
            let user = misc & MISC_CPUMODE_MASK == MISC_USER;
            let mut pcs = Vec::new();
            match s.callchain() {
                Some(chain) => callchain_pcs(chain, user, ring.user_callchain, &mut pcs),
                None => pcs.extend(s.ip()),
            }
            if pcs.is_empty() {
                pcs.extend(s.ip());
            }
            pcs.truncate(ring.depth.max(1));
            let cpu = s.cpu().unwrap_or(0) as u16;
            let flags = if user { CallchainFlags::USERSPACE as u16 } else { 0 };
            Event::Sample {
                pid: s.pid().unwrap_or(0) as i32,
                tid: s.tid().unwrap_or(0) as i32,
                pmcid: ring.pmcid,
                flags: CallchainFlags::new(cpu, flags),
                pcs,
            }
        }
        PerfRecord::Mmap(m) => map_event(m.pid, m.addr, m.pgoff, &m.filename, ring.pmcid)?,
        PerfRecord::Mmap2(m) => map_event(m.pid, m.addr, m.pgoff, &m.filename, ring.pmcid)?,
        PerfRecord::Comm(c) if misc & MISC_COMM_EXEC != 0 && c.pid == c.tid => {
            Event::Exec { pid: c.pid as i32, pmcid: ring.pmcid }
        }
        PerfRecord::Fork(f) if f.pid != f.ppid => {
            Event::Fork { parent: f.ppid as i32, child: f.pid as i32 }
        }
        PerfRecord::Fork(f) => Event::Thread { pid: f.pid as i32, tid: f.tid as i32 },
        PerfRecord::Exit(e) if e.pid == e.tid => Event::ProcessExit { pid: e.pid as i32 },
        PerfRecord::Exit(e) => Event::ThreadExit { tid: e.tid as i32 },
        PerfRecord::Lost(l) => Event::Lost(l.lost),
        PerfRecord::LostSamples(l) => Event::Lost(l.lost),
        _ => return None,
    })
}

/// The MAP_IN event of an executable file mapping (none for anonymous and special mappings).
fn map_event(pid: u32, addr: u64, pgoff: u64, filename: &[u8], pmcid: u32) -> Option<Event> {
    let path = c_string(filename);
    path.starts_with(b"/").then(|| Event::Map {
        pid: pid as i32,
        start: addr.wrapping_sub(pgoff),
        path: path.to_vec(),
        pmcid,
    })
}

/// When a perf record happened: a sample's time, else the time of its `sample_id_all` trailer
/// (`{pid, tid}`, `time`, `{cpu, res}` for the sample type the samplers use: time is the
/// second-to-last word).
fn record_time(record: &PerfRecord<'_>, bytes: &[u8]) -> u64 {
    match record {
        PerfRecord::Sample(s) => s.time().unwrap_or(0),
        PerfRecord::Fork(f) => f.time,
        PerfRecord::Exit(e) => e.time,
        _ => bytes
            .len()
            .checked_sub(16)
            .and_then(|at| bytes.get(at..at + 8))
            .and_then(|w| w.try_into().ok())
            .map_or(0, u64::from_le_bytes),
    }
}

/// Appends `record`, stamped `tsc`, to `out`.
fn append(out: &mut Vec<u8>, record: &Record<'_>, tsc: u64) {
    let start = out.len();
    out.resize(start + 4200, 0);
    match pmclog::encode(record, tsc, &mut out[start..]) {
        Ok(len) => out.truncate(start + len),
        Err(_) => out.truncate(start),
    }
}

/// Appends the record(s) of `event` to `out`. A PROCEXEC waits in `pending` for its path when
/// `/proc` no longer has it: the process's first file mapping after the exec is the executable.
fn emit_event(event: &Event, time: u64, pending: &mut Vec<i32>, out: &mut Vec<u8>) {
    match event {
        Event::Sample { pid, tid, pmcid, flags, pcs } => {
            let pcs = ProgramCounters::from_words(pcs);
            let cc = Callchain { pid: *pid, tid: *tid, pmcid: *pmcid, cpuflags: *flags, pcs };
            append(out, &Record::Callchain(cc), time);
        }
        Event::Map { pid, start, path, pmcid } => {
            if let Some(at) = pending.iter().position(|p| p == pid) {
                pending.swap_remove(at);
                append(out, &Record::ProcExec(exec_record(*pid, *pmcid, path)), time);
            }
            append(out, &Record::MapIn(MapIn { pid: *pid, start: *start, path }), time);
        }
        Event::Exec { pid, pmcid } => {
            let path = process::exe_path(*pid);
            if path.is_empty() {
                pending.push(*pid);
            } else {
                append(out, &Record::ProcExec(exec_record(*pid, *pmcid, &path)), time);
            }
        }
        Event::Fork { parent, child } => {
            append(out, &Record::ProcFork(ProcFork { old_pid: *parent, new_pid: *child }), time);
        }
        Event::Thread { pid, tid } => {
            let thr = ThrCreate { tid: *tid, pid: *pid, flags: 0, name: b"" };
            append(out, &Record::ThrCreate(thr), time);
        }
        Event::ProcessExit { pid } => append(out, &Record::SysExit(SysExit { pid: *pid }), time),
        Event::ThreadExit { tid } => append(out, &Record::ThrExit(ThrExit { tid: *tid }), time),
        Event::Lost(_) => {}
    }
}

fn exec_record(pid: i32, pmcid: u32, path: &[u8]) -> ProcExec<'_> {
    ProcExec { pid, pmcid, base_addr: 0, dyn_addr: 0, path }
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
