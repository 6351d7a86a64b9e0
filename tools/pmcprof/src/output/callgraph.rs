//! `pmcstat -G`: the call graph as text, byte for byte as FreeBSD's `pmcpl_callgraph.c` prints it
//! (`freebsd-abi.md` §5.3).
//!
//! For each PMC that has samples: `@ NAME [N samples]` and a blank line. Then one tree per
//! sampled function (the innermost frame of the samples), the most sampled first; below each
//! function its callers, below those their callers, and so on, each level sorted by count. A
//! line is `depth` spaces, the share of the parent's count (`%05.2f%%`, or `100.0%` when equal;
//! at the top the share of the PMC's samples), ` [count] ` padded to 12 characters, `depth`
//! spaces again, the function (or its address as `%p`), and ` @ image` whenever the image differs
//! from the one printed last in the same tree. A blank line ends each tree.
//!
//! Where FreeBSD leaves the order of equal counts to `qsort`, this sorts equal counts by name,
//! then image, then address, so the output is deterministic. FreeBSD drops program counters that
//! no mapping covers; here they are frames of the `kernel` or `[unknown]` image (see
//! [`super::Frame`]). PMCs are printed in the order the log allocated them.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Arc;

use crate::profile::frame::FrameId;
use crate::profile::{PmcProfile, Profile};

/// pmcstat's default `-z` depth: frames per chain shown in the call graph, the sampled function
/// included.
pub const DEFAULT_CALLGRAPH_DEPTH: usize = 16;

/// Writes the `-G` call graph with the default depth ([`DEFAULT_CALLGRAPH_DEPTH`]).
pub fn write_callgraph(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    write_callgraph_depth(profile, DEFAULT_CALLGRAPH_DEPTH, out)
}

/// Writes the `-G` call graph showing at most `depth` frames per chain (`-z depth`; 0 is taken
/// as 1).
pub fn write_callgraph_depth(
    profile: &Profile,
    depth: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let depth = depth.max(1);
    for pmc in profile.pmcs() {
        let tree = Tree::build(pmc, depth);
        if tree.roots.is_empty() {
            continue;
        }
        let total: u64 = tree.roots.iter().map(|&r| tree.nodes[r].count).sum();
        let mut text = format!("@ {} [{} samples]\n\n", pmc.name(), total);
        let roots = tree.sorted(profile, &tree.roots);
        for root in roots {
            let mut last_image = None;
            tree.print(profile, root, 0, total, &mut last_image, &mut text);
            text.push('\n');
        }
        out.write_all(text.as_bytes())?;
    }
    Ok(())
}

/// A call-graph node: a function reached through the chain of its ancestors.
struct Node {
    frame: FrameId,
    count: u64,
    children: Vec<usize>,
    child_index: HashMap<FrameId, usize>,
}

/// The callee-first tree of one PMC (`pmcpl_cg_process`).
struct Tree {
    nodes: Vec<Node>,
    roots: Vec<usize>,
}

impl Tree {
    fn build(pmc: &PmcProfile, depth: usize) -> Tree {
        let mut tree = Tree { nodes: Vec::new(), roots: Vec::new() };
        let mut root_index: HashMap<FrameId, usize> = HashMap::new();
        for (stack, count) in pmc.stacks() {
            let Some((&leaf, callers)) = stack.split_first() else { continue };
            let mut parent = *root_index.entry(leaf).or_insert_with(|| {
                tree.nodes.push(Node::new(leaf));
                tree.roots.push(tree.nodes.len() - 1);
                tree.nodes.len() - 1
            });
            tree.nodes[parent].count += count;
            for &frame in callers.iter().take(depth - 1) {
                let child = match tree.nodes[parent].child_index.get(&frame) {
                    Some(&c) => c,
                    None => {
                        tree.nodes.push(Node::new(frame));
                        let c = tree.nodes.len() - 1;
                        tree.nodes[parent].children.push(c);
                        tree.nodes[parent].child_index.insert(frame, c);
                        c
                    }
                };
                tree.nodes[child].count += count;
                parent = child;
            }
        }
        tree
    }

    /// `nodes` by count, descending; equal counts by name, image and address.
    fn sorted(&self, profile: &Profile, nodes: &[usize]) -> Vec<usize> {
        let mut keyed: Vec<(u64, String, &Arc<str>, u64, usize)> = nodes
            .iter()
            .map(|&n| {
                let frame = profile.frame(self.nodes[n].frame);
                (self.nodes[n].count, frame.name(), &frame.image, frame.address, n)
            })
            .collect();
        keyed.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| (&a.1, a.2, a.3).cmp(&(&b.1, b.2, b.3))));
        keyed.into_iter().map(|k| k.4).collect()
    }

    /// `pmcstat_cgnode_print`.
    fn print(
        &self,
        profile: &Profile,
        node: usize,
        depth: usize,
        total: u64,
        last_image: &mut Option<Arc<str>>,
        text: &mut String,
    ) {
        use std::fmt::Write as _;
        let n = &self.nodes[node];
        let frame = profile.frame(n.frame);
        text.extend(std::iter::repeat_n(' ', depth));
        if n.count == total {
            text.push_str("100.0% ");
        } else {
            let _ = write!(text, "{:05.2}% ", 100.0 * n.count as f64 / total as f64);
        }
        let count = format!(" [{}] ", n.count);
        text.push_str(&count);
        text.extend(std::iter::repeat_n(' ', 12usize.saturating_sub(count.len())));
        text.extend(std::iter::repeat_n(' ', depth));
        text.push_str(&frame.name());
        if last_image.as_ref() != Some(&frame.image) {
            let _ = write!(text, " @ {}", frame.image);
            *last_image = Some(frame.image.clone());
        }
        text.push('\n');
        for child in self.sorted(profile, &n.children) {
            self.print(profile, child, depth + 1, n.count, last_image, text);
        }
    }
}

impl Node {
    fn new(frame: FrameId) -> Node {
        Node { frame, count: 0, children: Vec::new(), child_index: HashMap::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ResolveOptions;
    use pmcprof_fixtures::{CPU_CLK_UNHALTED_CORE, LogBuilder, Program, hot_warm_main};

    fn callgraph(log: &LogBuilder, depth: usize) -> String {
        let profile = Profile::from_log(&log.bytes(), &ResolveOptions::default()).unwrap();
        let mut out = Vec::new();
        write_callgraph_depth(&profile, depth, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn callgraph_text_matches_freebsd_format() {
        let p = Program::build(false);
        let path = p.log_path();
        let expected = format!(
            "@ INSTR_RETIRED_ANY [10 samples]\n\
             \n\
             70.00%  [7]        hot @ {path}\n \
             85.71%  [6]         warm\n  \
             100.0%  [6]          main\n \
             14.29%  [1]         main\n\
             \n\
             30.00%  [3]        warm @ {path}\n \
             100.0%  [3]         main\n\
             \n"
        );
        assert_eq!(callgraph(&hot_warm_main(&p), DEFAULT_CALLGRAPH_DEPTH), expected);
        let profile =
            Profile::from_log(&hot_warm_main(&p).bytes(), &ResolveOptions::default()).unwrap();
        let mut out = Vec::new();
        write_callgraph(&profile, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn callgraph_marks_image_changes_and_prints_unresolved_addresses() {
        let p = Program::build(false);
        let path = p.log_path();
        let mut log = LogBuilder::new();
        log.allocate(0x100, CPU_CLK_UNHALTED_CORE).exec(7, path, 0, 0);
        // A kernel-mode sample whose chain runs on into the program.
        log.samples_mode(
            7,
            0x100,
            false,
            &[0xffff_ffff_8000_1234, p.at("hot", 4), p.at("main", 8)],
            2,
        );
        // The ELF header of the program: mapped, but in no function.
        log.samples(7, 0x100, &[0x40_0010, p.at("main", 8)], 1);
        let expected = format!(
            "@ CPU_CLK_UNHALTED_CORE [3 samples]\n\
             \n\
             66.67%  [2]        0xffffffff80001234 @ kernel\n \
             100.0%  [2]         hot @ {path}\n  \
             100.0%  [2]          main\n\
             \n\
             33.33%  [1]        0x400010 @ {path}\n \
             100.0%  [1]         main\n\
             \n"
        );
        assert_eq!(callgraph(&log, DEFAULT_CALLGRAPH_DEPTH), expected);
    }

    #[test]
    fn callgraph_depth_limits_the_chain() {
        let p = Program::build(false);
        let path = p.log_path();
        let expected = format!(
            "@ INSTR_RETIRED_ANY [10 samples]\n\
             \n\
             70.00%  [7]        hot @ {path}\n \
             85.71%  [6]         warm\n \
             14.29%  [1]         main\n\
             \n\
             30.00%  [3]        warm @ {path}\n \
             100.0%  [3]         main\n\
             \n"
        );
        assert_eq!(callgraph(&hot_warm_main(&p), 2), expected);
        let only_leaves = callgraph(&hot_warm_main(&p), 0);
        assert_eq!(
            only_leaves,
            format!(
                "@ INSTR_RETIRED_ANY [10 samples]\n\n70.00%  [7]        hot @ {path}\n\n\
                 30.00%  [3]        warm @ {path}\n\n"
            )
        );
    }

    #[test]
    fn callgraph_percentages_round_like_printf() {
        // printf rounds the exact binary value: 1/32 = 3.125 exactly → "03.12" (ties to even),
        // 2/3 → "66.67", and the count field grows past 12 characters without padding.
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.allocate(0x100, CPU_CLK_UNHALTED_CORE).exec(7, p.log_path(), 0, 0);
        log.samples(7, 0x100, &[p.at("cold", 1)], 1);
        log.samples(7, 0x100, &[p.at("hot", 1)], 31);
        let text = callgraph(&log, DEFAULT_CALLGRAPH_DEPTH);
        assert!(text.contains("\n96.88%  [31]       hot @ "), "{text}");
        assert!(text.contains("\n03.12%  [1]        cold @ "), "{text}");
        assert_eq!(format!("{:05.2}", 100.0 * 1.0 / 32.0), "03.12");
        assert_eq!(format!("{:05.2}", 100.0 * 2.0 / 3.0), "66.67");
        let count = format!(" [{}] ", 12_345_678_901u64);
        assert!(count.len() > 12);
    }

    #[test]
    fn callgraph_prints_each_pmc_in_allocation_order() {
        let p = Program::build(false);
        let path = p.log_path();
        let mut log = LogBuilder::new();
        log.allocate(0x200, CPU_CLK_UNHALTED_CORE)
            .allocate(0x100, pmcprof_fixtures::INSTR_RETIRED_ANY)
            .allocate(0x300, pmcprof_fixtures::INSTR_RETIRED_ANY)
            .exec(7, path, 0, 0);
        log.samples(7, 0x100, &[p.at("hot", 1)], 1);
        log.samples(7, 0x200, &[p.at("warm", 1)], 2);
        let expected = format!(
            "@ CPU_CLK_UNHALTED_CORE [2 samples]\n\n100.0%  [2]        warm @ {path}\n\n\
             @ INSTR_RETIRED_ANY [1 samples]\n\n100.0%  [1]        hot @ {path}\n\n"
        );
        assert_eq!(callgraph(&log, DEFAULT_CALLGRAPH_DEPTH), expected);
    }

    #[test]
    fn callgraph_of_a_log_without_samples_is_empty() {
        let mut log = LogBuilder::new();
        log.allocate(0x100, CPU_CLK_UNHALTED_CORE);
        assert_eq!(callgraph(&log, DEFAULT_CALLGRAPH_DEPTH), "");
    }

    #[test]
    fn callgraph_names_the_image_again_only_after_another_was_printed() {
        // FreeBSD compares with the image printed last in the tree, not with the parent's.
        let p = Program::build(false);
        let path = p.log_path();
        let mut log = LogBuilder::new();
        log.allocate(0x100, CPU_CLK_UNHALTED_CORE).exec(7, path, 0, 0).map_in(
            7,
            0x1000_0000,
            "/nonexistent/lib.so",
        );
        log.samples(7, 0x100, &[p.at("hot", 1), 0x1000_0010, p.at("main", 1)], 2);
        log.samples(7, 0x100, &[p.at("hot", 1), p.at("warm", 1), p.at("main", 1)], 1);
        let expected = format!(
            "@ CPU_CLK_UNHALTED_CORE [3 samples]\n\
             \n\
             100.0%  [3]        hot @ {path}\n \
             66.67%  [2]         0x10000010 @ /nonexistent/lib.so\n  \
             100.0%  [2]          main @ {path}\n \
             33.33%  [1]         warm\n  \
             100.0%  [1]          main\n\
             \n"
        );
        assert_eq!(callgraph(&log, DEFAULT_CALLGRAPH_DEPTH), expected);
    }
}
