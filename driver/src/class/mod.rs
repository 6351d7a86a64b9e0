//! PMC classes: which rows each class owns, what it can do, how a PMC of it is configured, and
//! how that configuration reaches the counter behind its row on the current CPU.
//!
//! Rows are numbered globally, as in FreeBSD: SOFT first ([`soft`]), then TSC ([`tsc`]), then
//! the hardware classes of the machine's PMU backend ([`crate::backend`]), in its order. A
//! hardware class has as many rows as the CPU with the fewest counters has, so a process PMC can
//! run on any CPU; what is behind a row on a given CPU is the backend's to say. Loading a
//! configuration on a row's counter is the per-CPU runtime's (`machine/`).

pub(crate) mod soft;
pub(crate) mod tsc;

use alloc::vec::Vec;

use crate::abi::{Caps, Class, SOFT_ROWS};
use crate::arch::Backend;
use crate::backend::{CounterMask, PmuBackend, low_bits};

/// A hardware class's configuration (the backend's).
pub(crate) type HardwareConfig = <Backend as PmuBackend>::Config;
/// The counter behind a hardware row on one CPU (the backend's).
pub(crate) type HardwareCounter = <Backend as PmuBackend>::Counter;

/// One class and its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClassDesc {
    pub(crate) class: Class,
    pub(crate) first_row: u32,
    pub(crate) rows: u32,
    /// Counter width in bits.
    pub(crate) width: u32,
    pub(crate) caps: Caps,
    /// Whether the machine's PMU backend drives it.
    pub(crate) hardware: bool,
}

impl ClassDesc {
    pub(crate) fn contains(&self, row: u32) -> bool {
        (self.first_row..self.first_row + self.rows).contains(&row)
    }
    pub(crate) fn mask(&self) -> u64 {
        low_bits(self.width)
    }
    /// Rows of this class may hold several PMCs at once (the TSC).
    pub(crate) fn shareable(&self) -> bool {
        self.class == Class::Tsc
    }
}

/// The classes of this machine and their rows.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) classes: Vec<ClassDesc>,
}

impl Layout {
    /// SOFT, TSC, then the hardware classes of `backend`.
    pub(crate) fn new(backend: &Backend) -> Layout {
        let mut classes = Vec::new();
        let mut next = 0;
        let mut push = |class, rows, width, caps, hardware| {
            classes.push(ClassDesc { class, first_row: next, rows, width, caps, hardware });
            next += rows;
        };
        push(Class::Soft, SOFT_ROWS, 64, Caps::SOFT_CLASS, false);
        push(Class::Tsc, 1, 64, Caps::READ, false);
        for class in backend.classes() {
            push(class.class, class.rows, class.width, class.caps, true);
        }
        Layout { classes }
    }

    /// The width mask of each row's counter.
    pub(crate) fn row_masks(&self) -> Vec<u64> {
        self.classes.iter().flat_map(|c| (0..c.rows).map(move |_| c.mask())).collect()
    }

    /// Total rows (`pm_npmc`).
    pub(crate) fn rows(&self) -> u32 {
        self.classes.iter().map(|c| c.rows).sum()
    }

    pub(crate) fn class(&self, class: Class) -> Option<&ClassDesc> {
        self.classes.iter().find(|c| c.class == class)
    }

    pub(crate) fn class_of_row(&self, row: u32) -> Option<&ClassDesc> {
        self.classes.iter().find(|c| c.contains(row))
    }
}

/// How a PMC is programmed on its row (what the class accepted at allocation).
// An explicit tag: the hooks read it for every PMC, and a niche-packed one costs instructions.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum HwConfig {
    /// A software event.
    Soft { event: u32 },
    /// The time-stamp counter.
    #[default]
    Tsc,
    /// A hardware class's configuration.
    Hardware(HardwareConfig),
}

impl HwConfig {
    /// The configuration as loading writes it (see [`PmuBackend::armed`]).
    pub(crate) fn armed(self) -> HwConfig {
        match self {
            HwConfig::Hardware(config) => HwConfig::Hardware(Backend::armed(config)),
            HwConfig::Soft { .. } | HwConfig::Tsc => self,
        }
    }
}

/// The counter behind a row on one CPU, fixed when the driver loads.
// An explicit tag, as for `HwConfig`.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum RowCounter {
    /// A SOFT row: the slot's software counter.
    Soft,
    /// The TSC row.
    Tsc,
    /// A hardware counter.
    Hardware(HardwareCounter),
    /// A hardware row this CPU has no counter for.
    #[default]
    Absent,
}

impl RowCounter {
    /// The counter behind `row` of `layout` on a CPU whose backend state is `cpu`.
    pub(crate) fn of(
        layout: &Layout,
        backend: &Backend,
        row: u32,
        cpu: &<Backend as PmuBackend>::Cpu,
    ) -> RowCounter {
        let Some(class) = layout.class_of_row(row) else { return RowCounter::Absent };
        match class.class {
            Class::Soft => RowCounter::Soft,
            Class::Tsc => RowCounter::Tsc,
            _ if class.hardware => backend
                .row_counter(cpu, class.class, row - class.first_row)
                .map_or(RowCounter::Absent, RowCounter::Hardware),
            _ => RowCounter::Absent,
        }
    }

    /// The hardware counter's bit (empty for software rows).
    #[inline]
    pub(crate) fn mask(self) -> CounterMask {
        match self {
            RowCounter::Hardware(counter) => Backend::counter_mask(counter),
            _ => CounterMask::EMPTY,
        }
    }
}
