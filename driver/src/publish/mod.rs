//! What the context-switch hooks load: for every process with running PMCs, the immutable list
//! the bookkeeping built for it ([`LoadSpec`]s), gathered in an immutable, versioned map, and
//! worked out for each kind of CPU into a [`LoadImage`] that a switch-in loads in one pass.
//!
//! The bookkeeping builds a new map under its lock whenever a list changes (copy on write:
//! unchanged lists are shared). The driver then images it, in thread context, once for each
//! flavor of CPU (CPUs of one core type whose rows have the same counters share one
//! [`ImageMap`]; an image of an unchanged list is shared too) and gives each CPU its flavor's.
//! Each CPU keeps its own reference to the image map its hooks read; it is replaced only on that
//! CPU, by a closure the driver runs there through
//! [`Kernel::run_on_cpu`](crate::Kernel::run_on_cpu) (`Driver::publish_loads`), and read only
//! there, by the switch hooks. Both run with preemption disabled, so they never overlap and the
//! hooks take no lock shared with system calls (the mutex only proves that to the compiler: the
//! hooks `try_lock` it, and nobody else holds it when they do). This is RCU by rendezvous, as
//! FreeBSD updates per-CPU data: once the closure has run on every CPU, no hook anywhere loads
//! from an older map — the writer waits for that before it unloads a PMC that left its list. The
//! closure only swaps two references: the map it replaces goes back to the writer, which drops it
//! in thread context, so nothing is allocated or freed on the CPU it runs on, and never by a hook.
//!
//! [`ImageMap`]: image::ImageMap

mod credits;
mod image;
mod load_map;
mod published;

pub(crate) use self::credits::{CellAllocator, Credits};
pub(crate) use self::image::LoadImage;
pub(crate) use self::load_map::{ImageEntry, LoadMap, LoadSpec, NO_CELL};
pub(crate) use self::published::{Published, running_pid_bit};
