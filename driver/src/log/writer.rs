//! The log writer: hands owners' full buffers to the kernel's log sink, and flushes and closes
//! a log.

use crate::driver::Driver;
use crate::errno::Errno;
use crate::hw::Hardware;
use crate::kernel::{Kernel, LogFile, Pid, Signal};

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Writes the full log buffers of every owner to their files. A kernel calls it from a
    /// thread context after [`Kernel::wake_log_writer`]. A write error stops that owner's log
    /// and sends it SIGIO; FLUSHLOG returns the error.
    pub fn write_logs(&self) {
        loop {
            // The lock is released before writing (a `while let` would hold it in the body).
            let next = self.logs.lock(&self.kernel).next_full();
            let Some((owner, file, buffer)) = next else { break };
            self.write_buffer(owner, file, buffer);
        }
    }

    /// Writes one full buffer of `owner`'s log to `file` (no lock held) and gives it back; a
    /// failed write stops the log and sends the owner SIGIO.
    fn write_buffer(&self, owner: Pid, file: LogFile, buffer: alloc::vec::Vec<u8>) {
        let result = self.kernel.log_write(file, &buffer);
        if result.is_err() {
            self.kernel.signal(owner, Signal::Io);
        }
        self.logs.lock(&self.kernel).written(owner, buffer, result);
    }

    /// Writes everything `owner` has logged so far to its file; returns its pending error.
    pub(crate) fn flush_log(&self, owner: Pid) -> Result<(), Errno> {
        {
            let mut logs = self.logs.lock(&self.kernel);
            let log = logs.owners.get_mut(&owner).ok_or(Errno::Inval)?;
            log.queue_current();
        }
        loop {
            let next = self.logs.lock(&self.kernel).next_full_of(owner);
            let Some((file, buffer)) = next else { break };
            self.write_buffer(owner, file, buffer);
        }
        let logs = self.logs.lock(&self.kernel);
        let log = logs.owners.get(&owner).ok_or(Errno::Inval)?;
        match log.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Writes out and closes `owner`'s log; returns the flush's error.
    pub(crate) fn close_log(&self, owner: Pid) -> Result<(), Errno> {
        let flushed = self.flush_log(owner);
        let Some(log) = self.logs.lock(&self.kernel).owners.remove(&owner) else { return flushed };
        self.kernel.log_close(log.file);
        flushed
    }
}
