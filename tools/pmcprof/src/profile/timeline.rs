//! The samples one by one, in log order ([`ResolveOptions::timeline`](super::ResolveOptions)):
//! which process and thread each was taken in, when, and its stack, for the outputs that show
//! time and threads (the Firefox Profiler's format). The aggregated stacks of
//! [`PmcProfile`](super::PmcProfile) forget all three.
//!
//! Stacks are kept once each, as a tree of prefixes (a node is a frame and the node of its
//! caller), so a sample costs one small record. The timeline has its own memory limit, the
//! profile's table budget: samples beyond it are counted ([`Timeline::left_out`]), not kept,
//! and the aggregated reports still have them.

use std::collections::{BTreeMap, HashMap};

use pmclog::Record;

use super::frame::FrameId;
use crate::symbols::jitmap;
use crate::text::one_line;

/// What one sample costs: its record, twice (a vector is at most half empty after it grew).
const SAMPLE_BYTES: u64 = 2 * std::mem::size_of::<TimedSample>() as u64;

/// What a node of the tree of stacks costs: itself (twice, as a sample), and its entry in the
/// index at a load factor of 7/8, twice for a table at most half full after it grew.
const NODE_BYTES: u64 = (2 * std::mem::size_of::<StackNode>()
    + 2 * (std::mem::size_of::<(StackNode, usize)>() * 8 / 7 + 1)) as u64;

/// One sample of the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedSample {
    /// The index of its PMC in [`Profile::pmcs`](crate::Profile::pmcs).
    pub pmc: usize,
    /// The process.
    pub pid: i32,
    /// The thread.
    pub tid: i32,
    /// The record's timestamp (TSC ticks, see [`LogInfo::tsc_freq`](crate::LogInfo::tsc_freq)).
    pub tsc: u64,
    /// Its innermost frame's node in [`Timeline::node`].
    pub stack: usize,
}

/// A node of the tree of stacks: a frame, and the node of its caller (`None` for the
/// outermost frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StackNode {
    /// The caller's node.
    pub parent: Option<usize>,
    /// The frame.
    pub frame: FrameId,
}

/// The log's samples in order, with the names of processes and threads.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    first_tsc: Option<u64>,
    nodes: Vec<StackNode>,
    node_ids: HashMap<StackNode, usize>,
    samples: Vec<TimedSample>,
    commands: BTreeMap<i32, String>,
    thread_names: BTreeMap<i32, String>,
    bytes: u64,
    budget: u64,
    left_out: u64,
}

impl Timeline {
    pub(super) fn new(budget: u64) -> Timeline {
        Timeline { budget, ..Timeline::default() }
    }

    /// The timestamp of the log's first record (the first with one): where the profile's time
    /// starts.
    pub fn first_tsc(&self) -> Option<u64> {
        self.first_tsc
    }

    /// The samples, in the order of the log.
    pub fn samples(&self) -> &[TimedSample] {
        &self.samples
    }

    /// The node `index` of the tree of stacks.
    pub fn node(&self, index: usize) -> StackNode {
        self.nodes[index]
    }

    /// How many nodes the tree of stacks has.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// The frames of a sample's stack, innermost first.
    pub fn frames(&self, sample: &TimedSample) -> impl Iterator<Item = FrameId> + '_ {
        std::iter::successors(Some(self.nodes[sample.stack]), |node| {
            node.parent.map(|parent| self.nodes[parent])
        })
        .map(|node| node.frame)
    }

    /// The command of process `pid`: its executable's file name (PROCEXEC, or a parent's for a
    /// forked process); else the first of PROCCREATE's name, the file name of PMCATTACH's path
    /// or of its first MAP_IN.
    pub fn command(&self, pid: i32) -> Option<&str> {
        self.commands.get(&pid).map(String::as_str)
    }

    /// The name of thread `tid`, from THR_CREATE (FreeBSD's logs have them).
    pub fn thread_name(&self, tid: i32) -> Option<&str> {
        self.thread_names.get(&tid).map(String::as_str)
    }

    /// Samples not in the timeline because it reached the profile's table budget.
    pub fn left_out(&self) -> u64 {
        self.left_out
    }

    /// Notes what a record says about time and names.
    pub(super) fn record(&mut self, record: &Record<'_>, tsc: u64) {
        // A host that cannot stamp a record writes 0: the first real stamp starts the time.
        if self.first_tsc.is_none() && tsc != 0 {
            self.first_tsc = Some(tsc);
        }
        match record {
            Record::ProcExec(exec) => {
                self.commands.remove(&exec.pid);
                self.name_by_path(exec.pid, exec.path);
            }
            Record::ProcCreate(create) => {
                let comm = String::from_utf8_lossy(create.comm);
                let comm = one_line(&comm).into_owned();
                self.commands.entry(create.pid).or_insert(comm);
            }
            // Without PROCEXEC (a process attached to, a system-wide run): the path of the
            // attach, else the process's first mapping, which the hosts write for the
            // executable first.
            Record::PmcAttach(attach) => self.name_by_path(attach.pid, attach.path),
            Record::MapIn(map) if map.pid > 0 && !jitmap::is_dump(map.path) => {
                self.name_by_path(map.pid, map.path);
            }
            Record::ProcFork(fork) => {
                if let Some(name) = self.commands.get(&fork.old_pid).cloned() {
                    self.commands.insert(fork.new_pid, name);
                }
            }
            Record::ThrCreate(thread) => {
                let name = String::from_utf8_lossy(thread.name);
                let name = one_line(&name).into_owned();
                self.thread_names.insert(thread.tid, name);
            }
            _ => {}
        }
    }

    /// Names process `pid` by the file name of `path`, unless it has a name.
    fn name_by_path(&mut self, pid: i32, path: &[u8]) {
        if path.is_empty() {
            return;
        }
        let path = String::from_utf8_lossy(path);
        let name = path.rsplit('/').next().unwrap_or(&path);
        self.commands.entry(pid).or_insert_with(|| one_line(name).into_owned());
    }

    /// Adds a sample whose stack is `frames`, innermost first.
    pub(super) fn sample(
        &mut self,
        pmc: usize,
        pid: i32,
        tid: i32,
        tsc: u64,
        frames: impl DoubleEndedIterator<Item = FrameId>,
    ) {
        // A sample's new nodes are counted after it is added: the last sample kept may reach
        // one stack's nodes over the budget.
        if self.bytes + SAMPLE_BYTES > self.budget {
            self.left_out += 1;
            return;
        }
        let mut parent = None;
        for frame in frames.rev() {
            let node = StackNode { parent, frame };
            let next = self.nodes.len();
            let index = *self.node_ids.entry(node).or_insert(next);
            if index == next {
                self.nodes.push(node);
                self.bytes += NODE_BYTES;
            }
            parent = Some(index);
        }
        let Some(stack) = parent else { return };
        self.bytes += SAMPLE_BYTES;
        self.samples.push(TimedSample { pmc, pid, tid, tsc, stack });
    }

    /// Marks the frames the timeline refers to in `kept` (so that pruning the aggregated
    /// stacks keeps them).
    pub(super) fn keep_frames(&self, kept: &mut [bool]) {
        for node in &self.nodes {
            kept[node.frame.index()] = true;
        }
    }

    /// Renames the frames after a pruning renumbered them.
    pub(super) fn renumber(&mut self, map: impl Fn(FrameId) -> FrameId) {
        for node in &mut self.nodes {
            node.frame = map(node.frame);
        }
        self.node_ids = self.nodes.iter().enumerate().map(|(i, node)| (*node, i)).collect();
    }

    /// Drops what only the building needed.
    pub(super) fn finish(&mut self) {
        self.node_ids = HashMap::new();
    }
}
