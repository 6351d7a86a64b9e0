//! The profile engine: offline analysis of pmclog files, what `pmcstat -R file` does with `-G`
//! and beyond. pmcstat parses its command line and calls this crate; nothing here knows the
//! command line, and the outputs that write files take the function that creates them from the
//! caller (pmcstat's rule: a file is written whole or not at all).
//!
//! The crate's folders: `profile/` builds the [`Profile`] (its frames and the memory budget of
//! its tables), `symbols/` turns program counters into functions and source lines (address
//! spaces, ELF images and debug files, JIT maps, the kernel's symbols, demangling), and
//! `output/` holds the writers.
//!
//! [`Profile::from_log`] reads a log once. It follows each process's address space (PROCEXEC,
//! MAP_IN, MAP_OUT, PROCFORK; MAP_IN records of pid -1 are the kernel's), names the PMCs
//! (PMCALLOCATE, PMCALLOCATEDYN), and turns every CALLCHAIN sample into a stack of frames: each
//! program counter is looked up in the mappings, made an address of the image's own link-time
//! layout, and resolved to the function containing it with the image's ELF symbol table
//! (`.symtab`, else `.dynsym`; names demangled). The writers then print it:
//!
//! - [`write_callgraph`]: `pmcstat -G`, FreeBSD's text call graph, byte for byte;
//! - [`write_folded`]: folded stacks for flame-graph tools; [`write_flamegraph`]: the SVG;
//! - [`write_top`]: a flat profile (self and total samples per function);
//! - [`write_pprof`]: a gzipped pprof profile;
//! - [`write_firefox`]: the Firefox Profiler's processed format, with processes, threads and
//!   each sample at its time (from the profile's [`Timeline`], [`ResolveOptions::timeline`]);
//! - [`gmon_profiles`] / [`write_gmon_files`]: `pmcstat -g`, gprof's gmon files per image and
//!   event (and [`write_gmon_map`], `-M`);
//! - [`write_calltree`]: `pmcstat -F`, a callgrind-format profile for KCachegrind.
//!
//! A sample is kept both as a stack of frames ([`PmcProfile::stacks`]: functions) and as a stack
//! of exact program counters ([`PmcProfile::location_stacks`]: [`Location`]s, in the image's
//! link-time addresses), for the outputs that work below the function: the gmon histogram and
//! arcs, and the calltree's instruction positions. [`Profile::text_range`] gives an image's code
//! in the same addresses.
//!
//! # Where images are
//!
//! A MAP_IN record carries only a start address. It is taken as the address where the mapping's
//! file offset 0 would be (what the Linux host writes: an executable mapping's start minus its
//! file offset, from perf's mmap records or `/proc/PID/maps`), so a program counter `pc` of an
//! `ET_DYN` image (shared object or PIE) is at file offset `pc - start`, made a link-time
//! address through the image's own `PT_LOAD` headers (the segment whose file bytes hold it).
//! GNU ld keeps every segment's address and file offset a constant distance apart; LLD (and so
//! every Rust binary rustc links with rust-lld) and mold do not, which is why the offset goes
//! through the segments. FreeBSD's kernel writes the start of the executable mapping and its
//! pmcstat takes that as the address of link-time address 0 (`pi_vaddr` is 0 for `ET_DYN`); the
//! two readings agree for an image whose executable segment starts at file offset 0 and
//! address 0, and FreeBSD's own pmcstat is right for no other. `ET_EXEC` images run at their link-time addresses. A mapping
//! reaches over the image's `PT_LOAD` segments; an image that cannot be read reaches to the
//! next mapping. A PROCEXEC places the executable at its PIE load base (`pl_dyn`: link-time
//! address 0 at run time) and its run-time linker (`PT_INTERP`) at `pl_base`, as FreeBSD's
//! pmcstat does.
//!
//! Program counters outside every mapping become unresolved frames of the image [`KERNEL_IMAGE`]
//! (addresses in the upper half, and the sampled PC and kernel-half frames of a kernel-mode
//! sample) or [`UNKNOWN_IMAGE`] (other user addresses). FreeBSD drops such frames instead.
//!
//! # Memory
//!
//! The log is read through a bounded window; the profile's own tables (frames and stacks) are
//! bounded by [`ResolveOptions::table_budget`] (`--analysis-memory`, 1 GiB by default). A log
//! with more distinct stacks than fit keeps the stacks with the most samples: each time the
//! tables are full, those with the fewest samples so far are dropped and their samples counted
//! in one [`OTHER_FRAME`] stack per PMC, which every output shows, and [`Profile::overflow`]
//! says how many (pmcstat warns on standard error). Only the outputs that work below the
//! function (`-g`, `-F`, `--pprof`) keep the stacks of exact program counters
//! ([`ResolveOptions::frames_only`]).
//!
//! # Several PMCs
//!
//! [`write_callgraph`] prints each PMC (each PMC id) on its own, as FreeBSD does.
//! [`write_top`] and [`Profile::sample_counts`] add up PMCs of the same event name (a system-mode
//! PMC is one PMC per CPU). [`write_folded`] and [`write_flamegraph`] merge all PMCs
//! ([`write_folded_pmc`] selects one event); [`write_pprof`] has a value column per event.

mod error;
mod output;
mod profile;
mod symbols;
mod text;

pub use error::AnalysisError;
pub use output::callgraph::{DEFAULT_CALLGRAPH_DEPTH, write_callgraph, write_callgraph_depth};
pub use output::calltree::write_calltree;
pub use output::firefox::write_firefox;
pub use output::folded::{write_flamegraph, write_folded, write_folded_pmc};
pub use output::gmon::{
    CallArc, FUNCTION_ALIGNMENT, GMONVERSION, GmonHeader, GmonProfile, gmon_profiles,
    write_gmon_files, write_gmon_map,
};
pub use output::json::write_json;
pub use output::pprof::write_pprof;
pub use output::top::{FlatRow, flat_rows, write_top};
pub use profile::frame::{Frame, FrameId, Location};
pub use profile::timeline::{StackNode, TimedSample, Timeline};
pub use profile::{
    DEFAULT_TABLE_BUDGET, ImageInfo, KERNEL_IMAGE, LogInfo, OTHER_FRAME, Overflow, PmcProfile,
    Profile, ReadLog, ResolveOptions, UNKNOWN_IMAGE,
};
pub use symbols::debuginfo::{DebugSearch, SYSTEM_DEBUG_DIR};
pub use symbols::lines::SourceFrame;
pub use text::one_line;
