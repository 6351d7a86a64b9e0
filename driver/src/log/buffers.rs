//! Per-owner log buffers: one current buffer per CPU, a queue of full ones for the writer, and
//! a free list.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

use pmclog::Record;

use crate::errno::Errno;
use crate::kernel::{Cpu, LogFile, Pid};

/// One owner's log.
#[derive(Debug)]
pub(crate) struct OwnerLog {
    pub(crate) file: LogFile,
    buffer_size: usize,
    /// The buffer each CPU appends to.
    current: Vec<Option<Vec<u8>>>,
    /// Full buffers waiting for the writer, oldest first.
    full: VecDeque<Vec<u8>>,
    /// Empty buffers.
    free: Vec<Vec<u8>>,
    /// The first write error; logging stops there.
    pub(crate) error: Option<Errno>,
    /// Records dropped since the last DROPNOTIFY record.
    unreported_drops: u64,
    /// Whether every process's mappings went into this log (at the first system-sampling
    /// start).
    pub(crate) mappings_logged: bool,
    /// Whether the kernel's images went into this log (at the first sampling start).
    pub(crate) kernel_logged: bool,
}

impl OwnerLog {
    /// The oldest full buffer, with the file it goes to, unless the log stopped on an error.
    fn pop_full(&mut self) -> Option<(LogFile, Vec<u8>)> {
        if self.error.is_some() {
            return None;
        }
        self.full.pop_front().map(|buffer| (self.file, buffer))
    }

    /// A log on `file` with `buffers` buffers of `buffer_size` bytes, all allocated now.
    pub(crate) fn new(file: LogFile, cpus: usize, buffers: usize, buffer_size: usize) -> Self {
        OwnerLog {
            file,
            buffer_size,
            current: (0..cpus).map(|_| None).collect(),
            full: VecDeque::with_capacity(buffers),
            free: (0..buffers).map(|_| Vec::with_capacity(buffer_size)).collect(),
            error: None,
            unreported_drops: 0,
            mappings_logged: false,
            kernel_logged: false,
        }
    }

    /// Appends `record` to `cpu`'s buffer (with a DROPNOTIFY first if records were lost).
    /// Returns false, counting the record as lost, when no buffer has room. Allocates nothing.
    pub(crate) fn append(&mut self, cpu: Cpu, record: &Record<'_>, tsc: u64) -> bool {
        if self.error.is_some() {
            self.unreported_drops += 1;
            return false;
        }
        if self.unreported_drops > 0 {
            if !self.append_one(cpu, &Record::DropNotify, tsc) {
                self.unreported_drops += 1;
                return false;
            }
            self.unreported_drops = 0;
        }
        if !self.append_one(cpu, record, tsc) {
            self.unreported_drops += 1;
            return false;
        }
        true
    }

    fn append_one(&mut self, cpu: Cpu, record: &Record<'_>, tsc: u64) -> bool {
        let Ok(len) = pmclog::encoded_len(record) else { return false };
        let Some(current) = self.current.get_mut(cpu as usize) else { return false };
        if current.as_ref().is_some_and(|b| self.buffer_size - b.len() < len) {
            if let Some(buffer) = current.take() {
                self.full.push_back(buffer);
            }
        }
        if current.is_none() {
            *current = self.free.pop();
        }
        let Some(buffer) = current.as_mut() else { return false };
        let at = buffer.len();
        if self.buffer_size - at < len {
            return false;
        }
        buffer.resize(at + len, 0);
        pmclog::encode(record, tsc, &mut buffer[at..]).is_ok()
    }

    /// Queues every CPU's non-empty current buffer for the writer.
    pub(crate) fn queue_current(&mut self) {
        for current in &mut self.current {
            if current.as_ref().is_some_and(|b| !b.is_empty()) {
                if let Some(buffer) = current.take() {
                    self.full.push_back(buffer);
                }
            }
        }
    }

    /// Whether full buffers wait for the writer.
    pub(crate) fn has_full(&self) -> bool {
        !self.full.is_empty()
    }
}

/// Every owner's log, behind the driver's logs lock.
#[derive(Debug, Default)]
pub(crate) struct Logs {
    pub(crate) owners: BTreeMap<Pid, OwnerLog>,
}

impl Logs {
    /// The oldest full buffer of any owner whose log still writes, with its file.
    pub(crate) fn next_full(&mut self) -> Option<(Pid, LogFile, Vec<u8>)> {
        self.owners.iter_mut().find_map(|(&pid, log)| log.pop_full().map(|(f, b)| (pid, f, b)))
    }

    /// The oldest full buffer of `owner`.
    pub(crate) fn next_full_of(&mut self, owner: Pid) -> Option<(LogFile, Vec<u8>)> {
        self.owners.get_mut(&owner)?.pop_full()
    }

    /// Takes back a buffer the writer wrote (`result` is the write's outcome): an error stops
    /// the log; the buffer is emptied and freed either way.
    pub(crate) fn written(&mut self, owner: Pid, mut buffer: Vec<u8>, result: Result<(), Errno>) {
        let Some(log) = self.owners.get_mut(&owner) else { return };
        if let Err(e) = result {
            log.error.get_or_insert(e);
        }
        buffer.clear();
        log.free.push(buffer);
    }
}
