//! The multiplexing data: how virtual rows map onto counters, each PMC's turn and times, a
//! process's turns and a CPU's marks. A leaf below the bookkeeping and the per-CPU state, which
//! keep these; the rotation that uses them is in `rotate.rs`.

use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// The most turns: PMC ids have 8 bits of row, so `rows × turns` stays below 256.
pub(crate) const MAX_TURNS: u32 = 8;

/// The turn of a PMC that is not multiplexed.
pub(crate) const NOT_MULTIPLEXED: u8 = u8::MAX;

/// How virtual rows map onto the counters' rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// The rows of the layout (counters, SOFT and TSC).
    rows: u32,
    turns: u32,
}

impl Geometry {
    /// The geometry of a layout of `rows` rows.
    pub(crate) fn new(rows: u32) -> Self {
        let rows = rows.max(1);
        Geometry { rows, turns: (256 / rows).clamp(1, MAX_TURNS) }
    }
    /// Every row, virtual ones included (the size of the per-row bookkeeping).
    pub(crate) fn total_rows(self) -> u32 {
        self.rows * self.turns
    }
    pub(crate) fn turns(self) -> u32 {
        self.turns
    }
    /// The row whose counter (slot) virtual row `row` uses.
    pub(crate) fn slot_row(self, row: u32) -> u32 {
        row % self.rows
    }
    /// The virtual row of `slot_row` in `turn`.
    pub(crate) fn row(self, slot_row: u32, turn: u32) -> u32 {
        turn * self.rows + slot_row
    }
    /// The virtual rows of every turn on `slot_row`'s counter.
    pub(crate) fn rows_on(self, slot_row: u32) -> impl Iterator<Item = u32> + Clone {
        (0..self.turns).map(move |turn| self.row(slot_row, turn))
    }
}

/// A PMC's multiplexing state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MuxPmc {
    /// Its turn, or [`NOT_MULTIPLEXED`].
    pub(crate) turn: u8,
    /// Allocated as a group leader or member.
    pub(crate) grouped: bool,
    /// Reference cycles it was enabled.
    pub(crate) enabled: u64,
    /// Reference cycles it was loaded.
    pub(crate) running: u64,
}

impl Default for MuxPmc {
    fn default() -> Self {
        MuxPmc { turn: NOT_MULTIPLEXED, grouped: false, enabled: 0, running: 0 }
    }
}

impl MuxPmc {
    pub(crate) fn is_multiplexed(&self) -> bool {
        self.turn != NOT_MULTIPLEXED
    }
}

/// The turns of a process's multiplexed PMCs, and which one is loaded.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TargetTurns {
    /// The turns that have running PMCs (bit per turn).
    used: u32,
    /// Rotations so far.
    rotations: u32,
    /// The turn loaded now.
    pub(super) current: u8,
}

impl TargetTurns {
    /// The turns of the running PMCs whose turns are `turns`, continuing after `previous`
    /// rotations.
    pub(crate) fn of(turns: impl Iterator<Item = u8>, previous: TargetTurns) -> Self {
        let used = turns
            .filter(|&turn| turn != NOT_MULTIPLEXED)
            .fold(0u32, |used, turn| used | 1 << (turn & 31));
        TargetTurns {
            used,
            rotations: previous.rotations,
            current: nth_turn(used, previous.rotations),
        }
    }
    /// Whether the process has multiplexed PMCs running.
    #[inline]
    pub(crate) fn is_active(&self) -> bool {
        self.used != 0
    }
    /// Moves to the next used turn.
    pub(super) fn rotate(&mut self) {
        self.rotations = self.rotations.wrapping_add(1);
        self.current = nth_turn(self.used, self.rotations);
    }
}

/// The turn loaded after `rotations` rotations among the turns of `used`.
pub(super) fn nth_turn(used: u32, rotations: u32) -> u8 {
    let count = used.count_ones();
    if count == 0 {
        return 0;
    }
    let mut n = rotations % count;
    let mut bits = used;
    loop {
        let turn = bits.trailing_zeros();
        if n == 0 {
            return turn as u8;
        }
        n -= 1;
        bits &= bits - 1;
    }
}

/// One CPU's multiplexing state. Changed under the bookkeeping lock, except the flag the
/// switch-out reads (atomics, so the lock-free paths may look).
#[derive(Debug, Default)]
pub(crate) struct MuxCpu {
    /// Running multiplexed system PMCs here (the tick has work when not 0).
    pub(super) system_pmcs: AtomicU32,
    /// Rotations of the system PMCs here.
    pub(super) system_rotations: AtomicU32,
    /// TSC when the system PMCs' times were last accounted.
    pub(super) system_mark: AtomicU64,
    /// TSC when that process's times were last accounted here.
    pub(super) process_mark: AtomicU64,
}

impl MuxCpu {
    /// Whether running multiplexed system PMCs give the tick something to do here.
    #[inline]
    pub(crate) fn has_system_pmcs(&self) -> bool {
        self.system_pmcs.load(Ordering::Relaxed) != 0
    }

    /// The running process's times count from `now`.
    #[inline]
    pub(crate) fn mark_process(&self, now: u64) {
        self.process_mark.store(now, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::{Geometry, nth_turn};

    #[test]
    fn virtual_rows_name_a_counter_row_and_a_turn() {
        let g = Geometry::new(29);
        assert_eq!(g.turns(), 8);
        assert_eq!(g.total_rows(), 232);
        let row = g.row(20, 3);
        assert_eq!((g.slot_row(row), row / 29), (20, 3));
        assert_eq!(g.rows_on(5).collect::<Vec<_>>(), [5, 34, 63, 92, 121, 150, 179, 208]);
        assert_eq!(Geometry::new(200).turns(), 1, "no room for virtual rows in 8 bits");
    }

    #[test]
    fn rotation_visits_the_used_turns_in_order_and_skips_empty_ones() {
        let used = 0b1011; // turns 0, 1 and 3
        let turns: Vec<u8> = (0..6).map(|n| nth_turn(used, n)).collect();
        assert_eq!(turns, [0, 1, 3, 0, 1, 3]);
        assert_eq!(nth_turn(0, 5), 0);
    }
}
