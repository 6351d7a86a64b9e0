//! PMCADMIN: enabling and disabling rows of a CPU.

use crate::abi::{PmcOpPmcAdmin, State};
use crate::driver::Driver;
use crate::hw::Hardware;
use crate::kernel::{Kernel, Privilege, UserPtr};
use crate::refusal::{Cause, Refusal};

impl<K: Kernel, H: Hardware> Driver<K, H> {
    /// PMCADMIN: enable or disable a row on a CPU (PRIV_PMC_MANAGE).
    pub(super) fn op_pmc_admin(&self, arg: UserPtr) -> Result<(), Refusal> {
        let request: PmcOpPmcAdmin = self.copy_in(arg)?;
        if self.kernel.is_jailed() || !self.kernel.has_privilege(Privilege::PmcManage) {
            return Err(Cause::AdminPrivilege.into());
        }
        let cpu = self.checked_cpu(request.pm_cpu)?;
        let disable = match State::from_u32(request.pm_state) {
            Some(State::Disabled) => true,
            Some(State::Free) => false,
            _ => return Err(Cause::InvalidAdminState.into()),
        };
        let row = u32::try_from(request.pm_pmc).map_err(|_| Cause::InvalidRow)?;
        if row >= self.layout.rows() {
            return Err(Cause::InvalidRow.into());
        }
        let mut book = self.book.lock(&self.kernel);
        if disable {
            // The row's counter in every multiplexing turn (the row itself is turn 0).
            for r in self.mux_geometry().rows_on(row) {
                if book.disposition(r) > 0 || book.system_pmc_on(cpu, r).is_some() {
                    return Err(Cause::RowBusy.into());
                }
            }
        }
        book.set_disabled(cpu, row, disable);
        Ok(())
    }
}
