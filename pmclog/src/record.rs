//! Typed records. They borrow their strings and program counters from the bytes they were decoded
//! from, so decoding copies nothing.
//!
//! Strings (`path`, `name`, `cpuid`, …) are the bytes before the NUL, as stored: FreeBSD does not
//! promise UTF-8, so they stay `&[u8]`.

use crate::bytes::read_u64;
use crate::layout::RecordType;

/// One decoded record with where it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Byte offset of the record's first byte in the stream.
    pub offset: u64,
    /// Serial number of the record in the stream, starting at 1 (`pl_count`).
    pub count: u64,
    /// The 64-bit timestamp of the header (`pl_tsc`).
    pub tsc: u64,
    /// The record's raw bytes, header included (`pl_data`, `pl_len`).
    pub raw: &'a [u8],
    /// The decoded record.
    pub record: Record<'a>,
}

impl Entry<'_> {
    /// Byte offset just past the record: what FreeBSD's parser reports as `pl_offset`.
    pub fn end_offset(&self) -> u64 {
        self.offset + self.raw.len() as u64
    }
}

/// A pmclog record, one variant per [`RecordType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    /// CLOSELOG (1).
    CloseLog,
    /// DROPNOTIFY (2).
    DropNotify,
    /// INITIALIZE (3).
    Initialize(Initialize<'a>),
    /// PMCALLOCATE (5).
    PmcAllocate(PmcAllocate),
    /// PMCATTACH (6).
    PmcAttach(PmcAttach<'a>),
    /// PMCDETACH (7).
    PmcDetach(PmcDetach),
    /// PROCCSW (8).
    ProcCsw(ProcCsw),
    /// PROCEXEC (9).
    ProcExec(ProcExec<'a>),
    /// PROCEXIT (10).
    ProcExit(ProcExit),
    /// PROCFORK (11).
    ProcFork(ProcFork),
    /// SYSEXIT (12).
    SysExit(SysExit),
    /// USERDATA (13).
    UserData(UserData),
    /// MAP_IN (14).
    MapIn(MapIn<'a>),
    /// MAP_OUT (15).
    MapOut(MapOut),
    /// CALLCHAIN (16).
    Callchain(Callchain<'a>),
    /// PMCALLOCATEDYN (17).
    PmcAllocateDyn(PmcAllocateDyn<'a>),
    /// THR_CREATE (18).
    ThrCreate(ThrCreate<'a>),
    /// THR_EXIT (19).
    ThrExit(ThrExit),
    /// PROC_CREATE (20).
    ProcCreate(ProcCreate<'a>),
}

impl Record<'_> {
    /// The record's type.
    pub fn record_type(&self) -> RecordType {
        match self {
            Record::CloseLog => RecordType::CloseLog,
            Record::DropNotify => RecordType::DropNotify,
            Record::Initialize(_) => RecordType::Initialize,
            Record::PmcAllocate(_) => RecordType::PmcAllocate,
            Record::PmcAttach(_) => RecordType::PmcAttach,
            Record::PmcDetach(_) => RecordType::PmcDetach,
            Record::ProcCsw(_) => RecordType::ProcCsw,
            Record::ProcExec(_) => RecordType::ProcExec,
            Record::ProcExit(_) => RecordType::ProcExit,
            Record::ProcFork(_) => RecordType::ProcFork,
            Record::SysExit(_) => RecordType::SysExit,
            Record::UserData(_) => RecordType::UserData,
            Record::MapIn(_) => RecordType::MapIn,
            Record::MapOut(_) => RecordType::MapOut,
            Record::Callchain(_) => RecordType::Callchain,
            Record::PmcAllocateDyn(_) => RecordType::PmcAllocateDyn,
            Record::ThrCreate(_) => RecordType::ThrCreate,
            Record::ThrExit(_) => RecordType::ThrExit,
            Record::ProcCreate(_) => RecordType::ProcCreate,
        }
    }
}

/// INITIALIZE: the first record, written when the log is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Initialize<'a> {
    /// The kernel's PMC_VERSION (`pl_version`).
    pub version: u32,
    /// The CPU type, an `enum pmc_cputype` value (`pl_cpu`).
    pub cpu_type: u32,
    /// TSC frequency in Hz; 0 where there is no TSC (`pl_tsc_freq`).
    pub tsc_freq: u64,
    /// Wall-clock seconds when the log was configured (`pl_ts.tv_sec`).
    pub time_sec: i64,
    /// Nanoseconds of that time (`pl_ts.tv_nsec`).
    pub time_nsec: i64,
    /// The `kern.hwpmc.cpuid` string, e.g. `GenuineIntel-6-55` (at most 63 bytes).
    pub cpuid: &'a [u8],
}

/// PMCALLOCATE: a PMC was allocated by an owner that has a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmcAllocate {
    /// The PMC id.
    pub pmcid: u32,
    /// The event: an `enum pmc_event` value, or a PMU table index when `flags` has `PMC_F_EV_PMU`.
    pub event: u32,
    /// The allocation flags (`PMC_F_*`).
    pub flags: u32,
    /// The reload count of a sampling PMC, otherwise the initial count (`pl_rate`).
    pub rate: u64,
}

/// Where a PMCALLOCATEDYN record keeps its event name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DynLayout {
    /// What FreeBSD kernels write: a u64 rate at offset 32 and the name at offset 40, cut to the
    /// 56 bytes left in the 96-byte record.
    Kernel,
    /// What `struct pmclog_pmcallocatedyn` documents: the name at offset 32, no rate.
    Documented,
}

/// PMCALLOCATEDYN: a PMC of a dynamic (SOFT) event was allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmcAllocateDyn<'a> {
    /// The PMC id.
    pub pmcid: u32,
    /// The event code (`PMC_EV_SOFT_FIRST` and up).
    pub event: u32,
    /// The allocation flags (`PMC_F_*`).
    pub flags: u32,
    /// The reload or initial count. Only the [`DynLayout::Kernel`] layout carries it: decoding the
    /// documented layout gives 0, and encoding it leaves the rate out.
    pub rate: u64,
    /// The event name, e.g. `CLOCK.PROF`.
    pub name: &'a [u8],
    /// Which of the two layouts the record uses.
    pub layout: DynLayout,
}

/// PMCATTACH: a PMC was attached to a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmcAttach<'a> {
    /// The PMC id.
    pub pmcid: u32,
    /// The target process.
    pub pid: i32,
    /// The target's executable.
    pub path: &'a [u8],
}

/// PMCDETACH: a PMC was detached from a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmcDetach {
    /// The PMC id.
    pub pmcid: u32,
    /// The target process.
    pub pid: i32,
}

/// PROCCSW: what a process PMC counted while a thread was on a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcCsw {
    /// The count for this stay on the CPU.
    pub value: u64,
    /// The PMC id.
    pub pmcid: u32,
    /// The process.
    pub pid: i32,
    /// The thread.
    pub tid: i32,
}

/// PROCEXEC: a target process called execve(2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcExec<'a> {
    /// The process.
    pub pid: i32,
    /// The PMC id.
    pub pmcid: u32,
    /// AT_BASE: where the dynamic loader was loaded (`pl_base`).
    pub base_addr: u64,
    /// The load base of a position-independent executable (`pl_dyn`).
    pub dyn_addr: u64,
    /// The new executable.
    pub path: &'a [u8],
}

/// PROCEXIT: a target process exited; what the PMC counted for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcExit {
    /// The PMC id.
    pub pmcid: u32,
    /// The process.
    pub pid: i32,
    /// The accumulated count.
    pub value: u64,
}

/// PROCFORK: a target process forked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcFork {
    /// The parent.
    pub old_pid: i32,
    /// The child.
    pub new_pid: i32,
}

/// SYSEXIT: a process exited (sent to owners of system sampling PMCs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SysExit {
    /// The process.
    pub pid: i32,
}

/// USERDATA: a word written by the owner with PMC_OP_WRITELOG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserData {
    /// The word.
    pub data: u32,
}

/// MAP_IN: an executable mapping appeared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapIn<'a> {
    /// The process; -1 for kernel mappings.
    pub pid: i32,
    /// The start address of the mapping.
    pub start: u64,
    /// The mapped object.
    pub path: &'a [u8],
}

/// MAP_OUT: an executable mapping went away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapOut {
    /// The process.
    pub pid: i32,
    /// The start address.
    pub start: u64,
    /// The end address.
    pub end: u64,
}

/// THR_CREATE: a thread was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrCreate<'a> {
    /// The thread.
    pub tid: i32,
    /// Its process.
    pub pid: i32,
    /// The process's `p_flag`.
    pub flags: u32,
    /// The thread's name (at most 19 bytes).
    pub name: &'a [u8],
}

/// THR_EXIT: a thread exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrExit {
    /// The thread.
    pub tid: i32,
}

/// PROC_CREATE: a process was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcCreate<'a> {
    /// The process.
    pub pid: i32,
    /// The process's `p_flag`.
    pub flags: u32,
    /// The command name (at most 19 bytes).
    pub comm: &'a [u8],
}

/// The `cpuflags` word of a CALLCHAIN record: `cpu << 16 | flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallchainFlags(pub u32);

impl CallchainFlags {
    /// `PMC_CC_F_USERSPACE`: the sample was taken in user mode.
    pub const USERSPACE: u32 = 0x1;
    /// `PMC_CC_F_MULTIPART`: `pc[0]` is a multipart header (AMD IBS).
    pub const MULTIPART: u32 = 0x2;

    /// Builds the word from a CPU number and the low 16 flag bits.
    pub const fn new(cpu: u16, flags: u16) -> Self {
        CallchainFlags((cpu as u32) << 16 | flags as u32)
    }
    /// The CPU the sample was taken on.
    pub const fn cpu(self) -> u32 {
        self.0 >> 16
    }
    /// The flag bits (low 16 bits).
    pub const fn flags(self) -> u32 {
        self.0 & 0xFFFF
    }
    /// Whether the sample was taken in user mode.
    pub const fn is_user(self) -> bool {
        self.0 & Self::USERSPACE != 0
    }
    /// Whether the program counters start with a multipart header.
    pub const fn is_multipart(self) -> bool {
        self.0 & Self::MULTIPART != 0
    }
}

/// CALLCHAIN: one sample. `pcs[0]` is the sampled PC, later entries are return addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Callchain<'a> {
    /// The process.
    pub pid: i32,
    /// The thread.
    pub tid: i32,
    /// The PMC id.
    pub pmcid: u32,
    /// CPU and flags.
    pub cpuflags: CallchainFlags,
    /// The program counters.
    pub pcs: ProgramCounters<'a>,
}

impl<'a> Callchain<'a> {
    /// The parts of a multipart (IBS) sample, or `None` for an ordinary callchain.
    pub fn multipart(&self) -> Option<Result<Multipart<'a>, MultipartError>> {
        self.cpuflags.is_multipart().then(|| Multipart::parse(self.pcs))
    }
}

/// Program counters, stored either as the log's raw little-endian bytes (when decoded) or as
/// words (when a writer builds a record to encode).
#[derive(Clone, Copy)]
pub struct ProgramCounters<'a>(PcStorage<'a>);

#[derive(Clone, Copy)]
enum PcStorage<'a> {
    Bytes(&'a [u8]),
    Words(&'a [u64]),
}

impl<'a> ProgramCounters<'a> {
    /// Program counters held as words.
    pub const fn from_words(words: &'a [u64]) -> Self {
        ProgramCounters(PcStorage::Words(words))
    }

    /// Program counters held as little-endian bytes; trailing bytes short of 8 are ignored.
    pub const fn from_le_bytes(bytes: &'a [u8]) -> Self {
        ProgramCounters(PcStorage::Bytes(bytes))
    }

    /// How many program counters there are.
    #[inline]
    pub fn len(&self) -> usize {
        match self.0 {
            PcStorage::Bytes(b) => b.len() / 8,
            PcStorage::Words(w) => w.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The program counter at `index`.
    #[inline]
    pub fn get(&self, index: usize) -> Option<u64> {
        match self.0 {
            PcStorage::Bytes(b) => (index < b.len() / 8).then(|| read_u64(b, index * 8)),
            PcStorage::Words(w) => w.get(index).copied(),
        }
    }

    /// Copies the program counters, in order, to the start of `out` (as many as fit); returns
    /// how many it copied. One pass without per-element checks: a log reader's hottest copy.
    #[inline]
    pub fn copy_into(&self, out: &mut [u64]) -> usize {
        match self.0 {
            PcStorage::Bytes(b) => {
                let n = (b.len() / 8).min(out.len());
                for (to, chunk) in out[..n].iter_mut().zip(b.chunks_exact(8)) {
                    *to = le_word(chunk);
                }
                n
            }
            PcStorage::Words(w) => {
                let n = w.len().min(out.len());
                out[..n].copy_from_slice(&w[..n]);
                n
            }
        }
    }

    /// The program counters in order.
    #[inline]
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u64> + 'a {
        match self.0 {
            PcStorage::Bytes(b) => PcIter::Bytes(b.chunks_exact(8)),
            PcStorage::Words(w) => PcIter::Words(w.iter()),
        }
    }
}

/// The iterator of [`ProgramCounters::iter`]: decoding 8 bytes at a time (the hot loop of every
/// log reader, so it avoids per-element bounds checks).
enum PcIter<'a> {
    Bytes(core::slice::ChunksExact<'a, u8>),
    Words(core::slice::Iter<'a, u64>),
}

#[inline]
fn le_word(chunk: &[u8]) -> u64 {
    u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]))
}

impl Iterator for PcIter<'_> {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        match self {
            PcIter::Bytes(chunks) => chunks.next().map(le_word),
            PcIter::Words(words) => words.next().copied(),
        }
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            PcIter::Bytes(chunks) => chunks.size_hint(),
            PcIter::Words(words) => words.size_hint(),
        }
    }

    #[inline]
    fn fold<B, F: FnMut(B, u64) -> B>(self, init: B, mut f: F) -> B {
        match self {
            PcIter::Bytes(chunks) => chunks.fold(init, |acc, c| f(acc, le_word(c))),
            PcIter::Words(words) => words.fold(init, |acc, &w| f(acc, w)),
        }
    }
}

impl ExactSizeIterator for PcIter<'_> {}

impl PartialEq for ProgramCounters<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for ProgramCounters<'_> {}

impl core::fmt::Debug for ProgramCounters<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter().map(HexWord)).finish()
    }
}

struct HexWord(u64);

impl core::fmt::Debug for HexWord {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// What a part of a multipart sample holds (`PMC_CC_MULTIPART_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MultipartKind {
    /// Call-chain program counters.
    Callchain,
    /// IBS fetch registers: CTL, EXTCTL, LINADDR, PHYSADDR.
    IbsFetch,
    /// IBS op registers: CTL, RIP, DATA, DATA2, DATA3, DC_LINADDR, DC_PHYSADDR, TGT_RIP, DATA4.
    IbsOp,
    /// A type code this crate does not know.
    Unknown(u8),
}

impl MultipartKind {
    fn from_code(code: u8) -> Self {
        match code {
            1 => MultipartKind::Callchain,
            2 => MultipartKind::IbsFetch,
            3 => MultipartKind::IbsOp,
            other => MultipartKind::Unknown(other),
        }
    }
}

/// One part of a multipart sample: its kind and its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part<'a> {
    /// What the words are.
    pub kind: MultipartKind,
    /// Index of the part's first word in the record's program counters.
    pub first: usize,
    /// The words.
    pub words: ProgramCounters<'a>,
}

/// The parts of a multipart (IBS) CALLCHAIN record.
///
/// `pc[0]` is a header of up to four (type, length) byte pairs, byte `2i` the type and byte `2i+1`
/// the length in 8-byte words; type 0 ends the list. The parts' words follow in order. (The byte
/// order of the pairs inside the header word is read from `hwpmc_ibs.c`'s description and is not
/// confirmed against a real IBS log: UNVERIFIED.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Multipart<'a> {
    parts: [Option<Part<'a>>; 4],
}

/// Why a multipart header does not describe the record it heads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MultipartError {
    /// There is no header word at all.
    #[error("multipart callchain has no header word")]
    Empty,
    /// The parts claim more words than the record has.
    #[error(
        "multipart header claims {claimed} words but the record has {available} after the header"
    )]
    PartsOverrun {
        /// Words the header's parts add up to.
        claimed: usize,
        /// Words after the header.
        available: usize,
    },
}

impl<'a> Multipart<'a> {
    fn parse(pcs: ProgramCounters<'a>) -> Result<Self, MultipartError> {
        let header = pcs.get(0).ok_or(MultipartError::Empty)?.to_le_bytes();
        let available = pcs.len() - 1;
        let mut parts = [None; 4];
        let mut next = 1;
        for (slot, pair) in parts.iter_mut().zip(header.chunks_exact(2)) {
            if pair[0] == 0 {
                break;
            }
            let len = usize::from(pair[1]);
            if next - 1 + len > available {
                return Err(MultipartError::PartsOverrun { claimed: next - 1 + len, available });
            }
            let words = match pcs.0 {
                PcStorage::Bytes(b) => {
                    ProgramCounters::from_le_bytes(&b[next * 8..(next + len) * 8])
                }
                PcStorage::Words(w) => ProgramCounters::from_words(&w[next..next + len]),
            };
            *slot = Some(Part { kind: MultipartKind::from_code(pair[0]), first: next, words });
            next += len;
        }
        Ok(Multipart { parts })
    }

    /// The parts, in order.
    pub fn parts(&self) -> impl Iterator<Item = Part<'a>> + '_ {
        self.parts.iter().flatten().copied()
    }

    /// The call-chain part, if the sample has one.
    pub fn callchain(&self) -> Option<Part<'a>> {
        self.parts().find(|p| p.kind == MultipartKind::Callchain)
    }
}

#[cfg(test)]
mod program_counter_tests {
    use super::*;

    #[test]
    fn copy_into_copies_what_iter_yields_as_far_as_it_fits() {
        let words: Vec<u64> = (0..40).map(|i| 0x1111_2222_3333_0000 + i * 0x10001).collect();
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).chain([7, 7, 7]).collect();
        for pcs in [ProgramCounters::from_words(&words), ProgramCounters::from_le_bytes(&bytes)] {
            for room in [0, 1, 39, 40, 64] {
                let mut out = vec![0u64; room];
                let n = pcs.copy_into(&mut out);
                assert_eq!(n, room.min(40));
                assert!(out[..n].iter().copied().eq(pcs.iter().take(n)), "room {room}");
                assert!(out[n..].iter().all(|&w| w == 0), "wrote past the counters");
            }
        }
    }
}
