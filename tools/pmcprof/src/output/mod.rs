//! The writers of a [`Profile`](crate::Profile): FreeBSD's call graph (`-G`), gprof's gmon files
//! (`-g`), the callgrind calltree (`-F`), folded stacks and flame graphs, pprof, the flat
//! profile (`--top`), JSON and the Firefox Profiler's format (`--firefox`).

pub(crate) mod callgraph;
pub(crate) mod calltree;
pub(crate) mod firefox;
pub(crate) mod folded;
pub(crate) mod gmon;
pub(crate) mod json;
pub(crate) mod pprof;
pub(crate) mod top;
