//! PMCRELEASE, and the release of every PMC of an owner that exits or of a driver that unloads:
//! stopping, detaching and freeing a PMC.

use crate::abi::{PmcOpSimple, State};
use crate::book::Pmc;
use crate::driver::Driver;
use crate::hw::Hardware;
use crate::kernel::{Kernel, Pid, UserPtr};
use crate::refusal::Refusal;
use crate::types::PmcHandle;
use alloc::vec::Vec;

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// PMCRELEASE.
    pub(super) fn op_release(&self, arg: UserPtr) -> Result<(), Refusal> {
        let request: PmcOpSimple = self.copy_in(arg)?;
        let caller = self.kernel.current_pid();
        let handle = self.book.lock(&self.kernel).find(caller, request.pm_pmcid)?;
        self.release_pmc(handle);
        Ok(())
    }

    /// Stops, detaches and frees every PMC `owner` owns.
    pub(crate) fn release_all_of(&self, owner: Pid) {
        let handles: Vec<PmcHandle> = self.book.lock(&self.kernel).owned(owner).to_vec();
        for handle in handles {
            self.release_pmc(handle);
        }
    }

    /// Stops, detaches and frees one PMC. Its samples still in the CPUs' rings and pending
    /// tables are logged first: a PMC is freed only when no sample refers to it.
    pub(crate) fn release_pmc(&self, handle: PmcHandle) {
        let (hosted_running, targets) = {
            let mut book = self.book.lock(&self.kernel);
            let hosted_running = book.pmc(handle).is_some_and(Pmc::runs_on_host);
            (hosted_running, book.set_state(handle, State::Deleted))
        };
        // No CPU loads it any more, then it is unloaded where it is.
        self.publish_loads(&targets);
        if hosted_running {
            self.hosted_stop(handle);
        }
        self.unload_everywhere(handle);
        for cpu in 0..self.kernel.cpu_count() {
            if self.kernel.cpu_active(cpu) {
                self.on_cpu(cpu, || self.drain_samples_of(cpu, handle));
            }
        }
        let mut book = self.book.lock(&self.kernel);
        let Some(pmc) = book.pmc(handle).cloned() else { return };
        for target in &pmc.targets {
            book.unlink_target(handle, pmc.row, *target);
        }
        self.unclaim_shared(&pmc);
        book.remove(handle);
    }
}
