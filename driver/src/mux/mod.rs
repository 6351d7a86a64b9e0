//! Counter multiplexing: more PMCs than a CPU has counters, rotated at the tick, each keeping the
//! time it was enabled and the time it was on a counter, so its count can be scaled (an
//! extension of FreeBSD's hwpmc, asked for per PMC).
//!
//! # What the owner asks for
//!
//! FreeBSD's behaviour stays the default: a PMC allocated without the extension's flags gets a
//! row of its own or fails when the rows run out. A counting PMC allocated with
//! [`PmcFlags::MULTIPLEX`] may share its row's counter with other multiplexed PMCs:
//!
//! * **Turns.** Rows are the counters; a multiplexed PMC gets a *virtual row*: a counter's row
//!   and a turn (`row + turn × rows`, so the PMC id stays FreeBSD's 32-bit `cpu:mode:class:row`).
//!   Turns fill in order, so 32 events on 8 counters take 4 turns. Every tick, the driver
//!   moves each CPU (system PMCs) and each process running there (process PMCs) to its next
//!   turn that has PMCs: it unloads the PMCs of the turn that ends, adding what they counted,
//!   and loads those of the turn that begins. A PMC that is not multiplexed is never unloaded
//!   for one that is: allocation and PMCATTACH refuse a multiplexed PMC on a counter a
//!   non-multiplexed one of the same CPU (or process) holds, and the other way round.
//! * **Groups.** A PMC with [`PmcFlags::GROUP_LEADER`] takes a turn where its CPU (system PMCs)
//!   or owner (process PMCs) has nothing; PMCs with [`PmcFlags::GROUP_MEMBER`] join the turn
//!   of the owner's last group PMC of the same mode and CPU. A turn is loaded whole or not at
//!   all, so a group is always counted together (perf's groups, libcpc's sets); EBUSY when a
//!   member does not fit its group's turn.
//! * **Times.** Each multiplexed PMC keeps the time it was enabled (running, and for a process
//!   PMC, one of its target's threads on a CPU) and the time it was loaded, in reference cycles
//!   (the TSC), read with [`PMC_OP_PMCREADTIMES`](crate::abi::PMC_OP_PMCREADTIMES). Both are
//!   exact: they are accounted on the CPU, from one TSC reading to the next, at each event that
//!   changes what runs there (switch-in, switch-out, the tick's rotation, and the start, stop
//!   and time read of a multiplexed PMC). The scaled count is `value × enabled / running`.
//!
//! Sampling PMCs are not multiplexed (EINVAL): a sample's period would restart at every turn.
//! PMCs a host kernel counts itself ([`crate::hosted`]) are allocated as without the flag: the
//! host schedules its own counters.
//!
//! # Logs
//!
//! The times are not in any log record: FreeBSD's records have fixed sizes that pmcstat and
//! other readers check (PROCEXIT, PROCCSW and PMCALLOCATE have no spare field), so a longer
//! record would break existing readers. A tool that logs multiplexed counts reads the times with
//! the extension op and may write them as USERDATA.
//!
//! [`PmcFlags::MULTIPLEX`]: crate::abi::PmcFlags::MULTIPLEX
//! [`PmcFlags::GROUP_LEADER`]: crate::abi::PmcFlags::GROUP_LEADER
//! [`PmcFlags::GROUP_MEMBER`]: crate::abi::PmcFlags::GROUP_MEMBER

mod model;
mod rotate;

pub(crate) use model::{Geometry, MuxCpu, MuxPmc, NOT_MULTIPLEXED, TargetTurns};
