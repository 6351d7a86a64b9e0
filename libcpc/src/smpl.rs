//! SMPL requests (Oracle Solaris 11.4 hardware sampling, reference §6) over libpmc's sampling
//! PMCs: the driver samples the request's event every n-th occurrence and writes each sample
//! (its instruction pointer) to the owner's log; libcpc keeps that log in an anonymous memory
//! file, reads the samples of its PMCs from it at `cpc_set_sample`, and keeps up to
//! `smpl_nrecs` records per request in the buffer.
//!
//! Choices (the reference leaves them open, tagged \[I\]):
//! * one sampling unit (`cpc_smpl_npic` = 1) counting any event a PIC counts;
//! * a record has one item, `"ip"` (index 0): no backend has precise sampling (data addresses,
//!   latencies) yet;
//! * the sampling period n comes from the preset as for overflow requests: a preset of
//!   `UINT64_MAX - (n - 1)` samples every n-th event; preset 0 uses the event's default rate;
//! * `smpl_nrecs` is 1..=[`MAX_RECORDS`]; records past it are dropped;
//! * the log is the process's pmc log: a program using SMPL requests cannot configure a log of
//!   its own with libpmc at the same time (the bind fails `EBUSY`).

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::sync::{Mutex, PoisonError};

use crate::error::{Error, Result};

/// The number of sampling units (`cpc_smpl_npic`).
pub const SMPL_NPIC: u32 = 1;

/// The largest `smpl_nrecs` (`cpc_get_smpl_max_rec_count`).
pub const MAX_RECORDS: u32 = 65536;

/// The names of a record's items, by index (`cpc_walk_smpl_recitems`).
pub const RECORD_ITEMS: &[&str] = &["ip"];

/// The attribute giving an SMPL request's record count.
pub const SMPL_NRECS: &str = "smpl_nrecs";

/// The process's sample log: where the driver writes, and what has been read of it.
#[derive(Debug)]
struct SampleLog {
    file: File,
    read: u64,
    /// The records so far (it keeps a record cut by the end of what was written).
    decoder: Box<pmclog::StreamDecoder>,
    /// Where the file is read into.
    chunk: Vec<u8>,
    /// Up to where the file's pages were given back (read bytes are not needed again).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))] // Linux gives the pages back.
    released: u64,
    /// Samples read but not yet taken by their PMC's request: PMC id → (time, instruction
    /// pointer).
    pending: HashMap<u32, Vec<Sample>>,
}

/// The process's log (a forked child's is its own: see [`crate::fork`]).
static LOG: crate::fork::PerProcess<Mutex<Option<SampleLog>>> = crate::fork::PerProcess::new();

/// This process's log, locked.
fn log() -> std::sync::MutexGuard<'static, Option<SampleLog>> {
    LOG.get(|| Mutex::new(None)).lock().unwrap_or_else(PoisonError::into_inner)
}

/// How many bytes of the log are read before their memory is given back.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // Linux gives the pages back.
const RELEASE_EVERY: u64 = 1 << 20;

/// Makes sure the process's log goes to libcpc's memory file.
pub(crate) fn ensure_log(op: &'static str) -> Result<()> {
    let mut log = log();
    if log.is_some() {
        return Ok(());
    }
    // SAFETY: memfd_create with a NUL-terminated name; the descriptor it returns is ours.
    let fd = unsafe { libc::memfd_create(c"libcpc-smpl".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(Error::new(
            op,
            std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOMEM),
        ));
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let file = unsafe { File::from_raw_fd(fd) };
    pmc::api::configure_log(file.as_raw_fd()).map_err(|e| {
        Error::new(op, e.errno)
            .because(format!("cannot log the samples (is a pmc log configured?): {e}"))
    })?;
    *log = Some(SampleLog {
        file,
        read: 0,
        decoder: Box::new(pmclog::StreamDecoder::new()),
        chunk: vec![0; 1 << 16],
        released: 0,
        pending: HashMap::new(),
    });
    Ok(())
}

/// One sample: when it was taken (the log's TSC) and the instruction pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sample {
    pub(crate) tsc: u64,
    pub(crate) ip: u64,
}

/// Reads the samples written since the last call and hands `pmc`'s over.
pub(crate) fn take_samples(op: &'static str, pmc: u32) -> Result<Vec<Sample>> {
    let mut guard = log();
    let Some(log) = guard.as_mut() else { return Ok(Vec::new()) };
    pmc::api::flush_log().map_err(|e| Error::pmc(op, &e))?;
    loop {
        let n = log
            .file
            .read_at(&mut log.chunk, log.read)
            .map_err(|e| Error::new(op, e.raw_os_error().unwrap_or(libc::EIO)))?;
        if n == 0 {
            break;
        }
        log.read += n as u64;
        let mut rest = &log.chunk[..n];
        loop {
            let (used, step) = log.decoder.next(rest);
            rest = &rest[used..];
            match step {
                pmclog::Step::Record(entry) => {
                    if let pmclog::Record::Callchain(sample) = entry.record
                        && let Some(ip) = sample.pcs.get(0)
                    {
                        let kept = log.pending.entry(sample.pmcid).or_default();
                        // No request keeps more; a PMC nobody samples cannot grow it.
                        if kept.len() < MAX_RECORDS as usize {
                            kept.push(Sample { tsc: entry.tsc, ip });
                        }
                    }
                }
                pmclog::Step::NeedData | pmclog::Step::Eof => break,
                pmclog::Step::Error(e) => {
                    return Err(Error::new(op, libc::EIO).because(format!("the sample log: {e}")));
                }
            }
        }
    }
    #[cfg(target_os = "linux")]
    if log.read - log.released >= RELEASE_EVERY {
        // SAFETY: punching a hole in our own memory file; the driver keeps writing at its own
        // offset, past the hole.
        unsafe {
            libc::fallocate(
                log.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                0,
                log.read as libc::off_t,
            )
        };
        log.released = log.read;
    }
    Ok(log.pending.remove(&pmc).unwrap_or_default())
}

/// Gives the samples of `pmcs` up (their PMCs are released).
pub(crate) fn forget(pmcs: &[u32]) {
    if let Some(log) = log().as_mut() {
        log.pending.retain(|pmc, _| !pmcs.contains(pmc));
    }
}

/// The sampling period of an SMPL request with `preset`: `2^64 - preset`, or `None` (the
/// event's default) for preset 0.
pub fn period(preset: u64) -> Option<u64> {
    (preset != 0).then(|| preset.wrapping_neg())
}

#[cfg(test)]
mod tests {
    use super::period;

    #[test]
    fn the_period_is_what_the_preset_lacks_to_wrap() {
        assert_eq!(period(u64::MAX - 999_999), Some(1_000_000));
        assert_eq!(period(u64::MAX), Some(1));
        assert_eq!(period(0), None);
    }
}
