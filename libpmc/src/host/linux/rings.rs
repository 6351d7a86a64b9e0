//! Perf's sampling rings and what their records become: samples and side-band events (exec,
//! mmap, fork, exit, lost records) that the host posts into the driver.

use perf_event::Sampler;
use perf_event::data::Record as PerfRecord;
use perf_event::data::SampleRegsAbi;

pub(crate) use super::mount_ns::FileId;
pub(crate) use super::unwind::{Mapping, UserStack};

/// `PERF_RECORD_MISC_CPUMODE_MASK` and its user value.
const MISC_CPUMODE_MASK: u16 = 0x7;
const MISC_USER: u16 = 2;
/// `PERF_RECORD_MISC_COMM_EXEC`: the COMM record comes from an exec.
const MISC_COMM_EXEC: u16 = 0x2000;
/// perf marks callchain contexts with values from `-4095` up (`PERF_CONTEXT_MAX`).
const CONTEXT_MARKER_MIN: u64 = (-4095i64) as u64;
/// `PERF_CONTEXT_USER`.
const CONTEXT_USER: u64 = (-512i64) as u64;
/// Where x86-64's kernel half of the address space starts.
pub(crate) const KERNEL_START: u64 = 0xffff_8000_0000_0000;

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
    /// The driver's token for the PMC.
    pub(crate) token: u64,
    /// The deepest callchain to log (`kern.hwpmc.callchaindepth`); 1 without PMC_F_CALLCHAIN.
    pub(crate) depth: usize,
}

impl Ring {
    /// Enables or disables the ring's events.
    pub(crate) fn enable(&mut self, enable: bool) -> std::io::Result<()> {
        if enable {
            self.sampler.enable()?
        } else {
            self.sampler.disable()?
        }
        for event in &mut self.sharing {
            if enable { event.enable()? } else { event.disable()? }
        }
        Ok(())
    }

    /// Appends the events of every record the ring holds to `out`, with their times.
    pub(crate) fn read_into(&mut self, out: &mut Vec<(u64, Event)>) {
        let meta = self.meta;
        while let Some(raw) = self.sampler.next_record() {
            let Ok(record) = raw.parse_record() else { continue };
            let time = record_time(&record, &raw.to_contiguous());
            if let Some(event) = event_of(meta, raw.misc(), &record) {
                out.push((time, event));
            }
        }
    }
}

/// What one perf record says, for the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// A sample of the PMC `token`: the sampled PC, then the callchain (perf's frame-pointer
    /// walk), and the user stack to unwind with CFI when the PMC copies it.
    Sample {
        token: u64,
        cpu: u32,
        pid: i32,
        tid: i32,
        user: bool,
        pcs: Vec<u64>,
        stack: Option<Box<UserStack>>,
    },
    /// An executable file mapping: where it is and the file offset it maps, and `start`, the
    /// MAP_IN start: the mapping's address minus its file offset (where the file's offset 0
    /// would be; the image's load base only if, as GNU ld lays images out, its segments' addresses
    /// are their file offsets plus one constant: not for LLD's and mold's).
    /// `file` is the mapped file's identity (MMAP2 records give it), for finding the file of a
    /// process in another mount namespace.
    Map { pid: i32, start: u64, mapping: Mapping, path: Vec<u8>, file: Option<FileId> },
    /// A process executed a program.
    Exec { pid: i32 },
    /// A process forked a child.
    Fork { parent: i32, child: i32 },
    /// A process created a thread.
    Thread { pid: i32, tid: i32 },
    /// A process ended.
    ProcessExit { pid: i32 },
    /// A thread ended.
    ThreadExit { pid: i32, tid: i32 },
    /// Samples of the PMC `token` perf lost (its ring was full).
    Lost { token: u64, count: u64 },
}

impl Event {
    /// Whether the event is a side-band record every sampling PMC's rings carry (so the rings
    /// of two PMCs hold it twice).
    pub(crate) fn is_side_band(&self) -> bool {
        !matches!(self, Event::Sample { .. } | Event::Lost { .. })
    }
}

/// The user stack of sample `s`, if it carries one (perf gives none for a kernel thread).
fn user_stack(s: &perf_event::data::Sample<'_>, pcs: &[u64], user: bool) -> Option<Box<UserStack>> {
    let regs = s.regs_user()?;
    let bytes = s.stack_user()?;
    if regs.abi != SampleRegsAbi::ABI_64 || regs.mask != crate::host::linux::perf::USER_REGS {
        return None;
    }
    let [bp, sp, ip] = regs.regs[..] else { return None };
    let user_at = if user { 0 } else { pcs.iter().take_while(|&&pc| pc >= KERNEL_START).count() };
    Some(Box::new(UserStack { ip, sp, bp, bytes: bytes.to_vec(), user_at }))
}

/// The event of one perf record of `ring` (with header flags `misc`), if it says anything.
fn event_of(ring: RingMeta, misc: u16, record: &PerfRecord<'_>) -> Option<Event> {
    Some(match record {
        PerfRecord::Sample(s) => {
            let user = misc & MISC_CPUMODE_MASK == MISC_USER;
            let mut pcs = Vec::new();
            match s.callchain() {
                Some(chain) => callchain_pcs(chain, user, &mut pcs),
                None => pcs.extend(s.ip()),
            }
            if pcs.is_empty() {
                pcs.extend(s.ip());
            }
            pcs.truncate(ring.depth.max(1));
            let stack = if ring.depth > 1 { user_stack(s, &pcs, user) } else { None };
            Event::Sample {
                token: ring.token,
                cpu: s.cpu().unwrap_or(0),
                pid: s.pid().unwrap_or(0) as i32,
                tid: s.tid().unwrap_or(0) as i32,
                user,
                pcs,
                stack,
            }
        }
        PerfRecord::Mmap(m) => map_event(m.pid, m.addr, m.len, m.pgoff, &m.filename, None)?,
        PerfRecord::Mmap2(m) => {
            let file = match (m.maj(), m.min(), m.ino()) {
                (Some(maj), Some(min), Some(ino)) => {
                    Some(FileId { dev: libc::makedev(maj, min), ino })
                }
                _ => None,
            };
            map_event(m.pid, m.addr, m.len, m.pgoff, &m.filename, file)?
        }
        PerfRecord::Comm(c) if misc & MISC_COMM_EXEC != 0 && c.pid == c.tid => {
            Event::Exec { pid: c.pid as i32 }
        }
        PerfRecord::Fork(f) if f.pid != f.ppid => {
            Event::Fork { parent: f.ppid as i32, child: f.pid as i32 }
        }
        PerfRecord::Fork(f) => Event::Thread { pid: f.pid as i32, tid: f.tid as i32 },
        PerfRecord::Exit(e) if e.pid == e.tid => Event::ProcessExit { pid: e.pid as i32 },
        PerfRecord::Exit(e) => Event::ThreadExit { pid: e.pid as i32, tid: e.tid as i32 },
        PerfRecord::Lost(l) => Event::Lost { token: ring.token, count: l.lost },
        PerfRecord::LostSamples(l) => Event::Lost { token: ring.token, count: l.lost },
        _ => return None,
    })
}

/// The event of an executable file mapping or of the vDSO (none for anonymous and other special
/// mappings).
fn map_event(
    pid: u32,
    addr: u64,
    len: u64,
    pgoff: u64,
    filename: &[u8],
    file: Option<FileId>,
) -> Option<Event> {
    let path = c_string(filename);
    (path.starts_with(b"/") || path == super::unwind::VDSO_NAME).then(|| Event::Map {
        pid: pid as i32,
        start: addr.wrapping_sub(pgoff),
        mapping: Mapping { addr, len, pgoff },
        path: path.to_vec(),
        file,
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

/// The bytes of a NUL-padded perf string up to its first NUL (perf-event-data leaves the padding,
/// and with `sample_id_all` the sample id fields, in the name).
fn c_string(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())]
}

/// The program counters of a perf callchain, without perf's context markers: the user frames
/// of a user-mode sample; the kernel frames of a kernel-mode one followed by the user frames of
/// the same sample, as perf joins them (FreeBSD's driver appends the user stack only with
/// PMC_F_USERCALLCHAIN, `pmcstat -U`; on Linux the kernel and user stacks are joined always,
/// so a page fault is charged to the user function that took it).
fn callchain_pcs(chain: &[u64], user: bool, pcs: &mut Vec<u64>) {
    let user_start = chain.iter().position(|&pc| pc == CONTEXT_USER);
    let part = match (user, user_start) {
        (true, Some(at)) => &chain[at..],
        _ => chain,
    };
    pcs.extend(part.iter().copied().filter(|&pc| pc < CONTEXT_MARKER_MIN));
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: u64 = (-128i64) as u64;

    #[test]
    fn user_samples_keep_only_user_frames_without_markers() {
        let chain = [KERNEL, 0xffff_ffff_8100_0000, CONTEXT_USER, 0x401000, 0x401100];
        let mut pcs = Vec::new();
        callchain_pcs(&chain, true, &mut pcs);
        assert_eq!(pcs, [0x401000, 0x401100]);
    }

    #[test]
    fn kernel_samples_carry_the_kernel_frames_then_the_user_frames() {
        let chain = [KERNEL, 0xffff_ffff_8100_0000, 0xffff_ffff_8100_0100, CONTEXT_USER, 0x401000];
        let mut pcs = Vec::new();
        callchain_pcs(&chain, false, &mut pcs);
        assert_eq!(pcs, [0xffff_ffff_8100_0000, 0xffff_ffff_8100_0100, 0x401000]);
    }
}
