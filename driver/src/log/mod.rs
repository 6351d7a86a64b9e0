//! Owners' logs: per-CPU buffers of pmclog records and the protocol that writes them out.
//!
//! CONFIGURELOG allocates an owner's buffers (`nbuffers_pcpu` per CPU of `logbuffersize` KiB)
//! — nothing is allocated at load. A record is encoded with the pmclog crate straight into the
//! current buffer of the CPU it happens on; records never span buffers. A full buffer joins the
//! owner's queue and the kernel is asked to run the writer, which hands whole buffers to the
//! kernel's log sink and returns them to the free list. When no buffer is free the record is
//! dropped and counted, and a DROPNOTIFY record goes out with the next record that fits: lost
//! data is never silent. A write error stops the owner's logging, sends it SIGIO, and is returned
//! by FLUSHLOG; the buffers are released when the log is closed.
//!
//! Lock order: the driver's bookkeeping lock, then the logs lock.

mod buffers;
pub(crate) mod records;
mod writer;

pub(crate) use self::buffers::{Logs, OwnerLog};
