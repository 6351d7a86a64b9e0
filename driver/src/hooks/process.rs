//! The process hooks: fork, exec, exit, and the mappings a process makes and removes, with the
//! records they log.

use crate::abi::PmcFlags;
use crate::abi::{Mode, PMC_ID_INVALID};
use crate::book::Book;
use crate::driver::{Driver, ExecInfo};
use crate::hw::Hardware;
use crate::kernel::{Kernel, Pid};
use crate::log::records::record_path;
use crate::text::FixedText;
use crate::types::PmcHandle;
use alloc::vec::Vec;
use core::fmt::Write;
use pmclog::{MapIn, MapOut, ProcCreate, ProcExec, ProcFork, Record, SysExit};

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// Process `parent` forked `child` (called after the child exists, before it runs). PMCs
    /// attached to the parent with PMC_F_DESCENDANTS follow the child; the child owns nothing.
    pub fn process_fork(&self, parent: Pid, child: Pid) {
        let mut book = self.book.lock(&self.kernel);
        let inherited: Vec<(u32, PmcHandle)> = book.target(parent).map_or_else(Vec::new, |t| {
            t.iter()
                .filter(|(_, r)| {
                    book.pmc(r.pmc).is_some_and(|p| p.flags.contains(PmcFlags::DESCENDANTS))
                })
                .map(|(row, r)| (row, r.pmc))
                .collect()
        });
        let mut followers: Vec<Pid> = Vec::new();
        for &(row, handle) in &inherited {
            // Without a credit cell left (the arena holds millions) the child is not counted.
            if book.link_target(handle, row, child).is_ok() {
                if let Some(pmc) = book.pmc(handle) {
                    followers.push(pmc.owner);
                }
            }
        }
        drop(book);
        if !inherited.is_empty() {
            self.publish_loads(&[child]);
        }
        let ss_owners = self.ss_owners();
        followers.extend(ss_owners.iter().copied());
        followers.sort_unstable();
        followers.dedup();
        for owner in followers {
            self.log_record(owner, &Record::ProcFork(ProcFork { old_pid: parent, new_pid: child }));
        }
        if !ss_owners.is_empty() {
            let comm = self.command_name(child);
            let record =
                Record::ProcCreate(ProcCreate { pid: child, flags: 0, comm: comm.as_bytes() });
            for owner in ss_owners {
                self.log_record(owner, &record);
            }
        }
    }

    /// Owners of running system-sampling PMCs: they see every process (FreeBSD's
    /// `pmc_ss_owners`).
    fn ss_owners(&self) -> Vec<Pid> {
        Self::ss_owners_of(&self.book.lock(&self.kernel))
    }

    /// [`Self::ss_owners`], with the bookkeeping lock held.
    pub(super) fn ss_owners_of(book: &Book) -> Vec<Pid> {
        let mut owners: Vec<Pid> = book
            .handles()
            .filter_map(|h| book.pmc(h))
            .filter(|p| p.mode() == Mode::SystemSampling && p.is_running())
            .map(|p| p.owner)
            .collect();
        owners.sort_unstable();
        owners.dedup();
        owners
    }

    /// The command name of `pid`: its executable's base name, cut to 19 bytes.
    pub(super) fn command_name(&self, pid: Pid) -> FixedText<{ pmclog::COMM_LEN }> {
        let mut path = [0u8; 1024];
        let len = self.kernel.process_path(pid, &mut path).min(path.len());
        let path = &path[..len];
        let base = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
        let mut name = FixedText::new();
        // Writing into a fixed buffer cannot fail; it truncates.
        let _ = name.write_str(core::str::from_utf8(base).unwrap_or("?"));
        name
    }

    /// Process `pid` executed a new program. A process that owned PMCs loses them; after a
    /// set-id exec, PMCs whose owners may no longer debug the process are detached from it.
    /// (FreeBSD's check is inverted and keeps exactly those; see hwpmc-internals §4.2.)
    pub fn process_exec(&self, pid: Pid, exec: &ExecInfo<'_>) {
        let path = record_path(exec.path);
        let exec_record = |pmcid| {
            Record::ProcExec(ProcExec {
                pid,
                pmcid,
                base_addr: exec.base_addr,
                dyn_addr: exec.dyn_addr,
                path,
            })
        };
        for owner in self.ss_owners() {
            self.log_record(owner, &exec_record(PMC_ID_INVALID));
        }
        let attached: Vec<(Pid, u32)> = {
            let book = self.book.lock(&self.kernel);
            book.target(pid).map_or_else(Vec::new, |t| {
                t.iter()
                    .filter_map(|(_, r)| book.pmc(r.pmc))
                    .map(|p| (p.owner, p.id.to_u32()))
                    .collect()
            })
        };
        for (owner, pmcid) in attached {
            self.log_record(owner, &exec_record(pmcid));
        }
        if self.book.lock(&self.kernel).owns_any(pid) {
            self.release_all_of(pid);
        }
        if !exec.credentials_changed {
            return;
        }
        let attached: Vec<(PmcHandle, Pid)> = {
            let book = self.book.lock(&self.kernel);
            let Some(target) = book.target(pid) else { return };
            target.iter().filter_map(|(_, r)| book.pmc(r.pmc).map(|p| (r.pmc, p.owner))).collect()
        };
        for (handle, owner) in attached {
            if owner != pid && !self.kernel.may_debug(owner, pid) {
                self.detach_targets(handle, &[pid]);
            }
        }
    }

    /// Process `pid` is exiting (called once, from its last thread). Its PMCs are unloaded and
    /// detached (an owner gets SIGIO when its PMC loses its last target), and the PMCs it owned
    /// are released.
    pub fn process_exit(&self, pid: Pid) {
        for owner in self.ss_owners() {
            self.log_record(owner, &Record::SysExit(SysExit { pid }));
        }
        let attached: Vec<PmcHandle> = {
            let book = self.book.lock(&self.kernel);
            book.target(pid).map(|t| t.iter().map(|(_, r)| r.pmc).collect())
        }
        .unwrap_or_default();
        for handle in attached {
            self.detach_targets(handle, &[pid]);
        }
        if self.book.lock(&self.kernel).owns_any(pid) {
            self.release_all_of(pid);
        }
        if self.has_log(pid) {
            let _ = self.close_log(pid);
        }
    }

    /// Process `pid` mapped `path` executable at `start..end` (mmap, or a dynamic loader).
    /// Owners of system-sampling PMCs and of sampling PMCs attached to `pid` get MAP_IN.
    /// (A MAP_IN record carries no end: FreeBSD's format names only the start.)
    pub fn mmap(&self, pid: Pid, start: u64, _end: u64, path: &[u8]) {
        let path = record_path(path);
        for owner in self.mapping_audience(pid) {
            self.log_record(owner, &Record::MapIn(MapIn { pid, start, path }));
        }
    }

    /// Process `pid` unmapped the executable mapping `start..end`: MAP_OUT, to the same owners
    /// as [`Self::mmap`].
    pub fn munmap(&self, pid: Pid, start: u64, end: u64) {
        for owner in self.mapping_audience(pid) {
            self.log_record(owner, &Record::MapOut(MapOut { pid, start, end }));
        }
    }

    /// Who hears about `pid`'s mappings: owners of running system-sampling PMCs and of sampling
    /// PMCs attached to `pid`.
    fn mapping_audience(&self, pid: Pid) -> Vec<Pid> {
        let mut owners = self.ss_owners();
        {
            let book = self.book.lock(&self.kernel);
            if let Some(target) = book.target(pid) {
                let sampling = target.iter().filter_map(|(_, r)| book.pmc(r.pmc));
                owners.extend(sampling.filter(|p| p.mode().is_sampling()).map(|p| p.owner));
            }
        }
        owners.sort_unstable();
        owners.dedup();
        owners
    }
}
