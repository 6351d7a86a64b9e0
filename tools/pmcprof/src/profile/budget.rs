//! The memory budget of a profile's tables: what a frame and a stack cost, and the pruning
//! that drops the rarest stacks when the tables are full.
//!
//! The costs are estimates of the heap the tables take (the entries, their share of the hash
//! tables at the load factor they grow to, and the allocator's rounding), not measurements: the
//! point is a bound that holds whatever the log, not an exact figure.

use std::collections::HashMap;
use std::hash::Hash;
use std::mem::size_of;

use super::frame::{Frame, FrameId};
use crate::symbols::lines::SourceFrame;

/// The most entries the program-counter cache keeps before it starts again (about 40 MiB).
pub(crate) const CACHE_ENTRIES: usize = 1 << 20;

/// A hash table entry's cost: the entry and its control byte, at a load factor of 7/8, and as
/// much again for the table being at most half full after it grew.
fn slot_bytes<T>() -> u64 {
    2 * (size_of::<T>() as u64 * 8 / 7 + 1)
}

/// What a frame costs: itself, its entry in the frame index, and its symbol's name.
pub(crate) fn frame_bytes(frame: &Frame) -> u64 {
    let symbol = frame.symbol.as_ref().map_or(0, |s| s.len() as u64 + 16);
    size_of::<Frame>() as u64 * 2 + slot_bytes::<(u64, u64, u64, u32)>() + symbol
}

/// What the source positions of one address cost: the entry in the table of positions, the
/// shared slice, and the names (counted as if not shared with other addresses).
pub(crate) fn source_bytes(frames: &[SourceFrame]) -> u64 {
    let names: usize = frames
        .iter()
        .map(|f| {
            f.function.as_ref().map_or(0, |n| n.len() + 16)
                + f.file.as_ref().map_or(0, |n| n.len() + 16)
        })
        .sum();
    slot_bytes::<((u32, u64), usize, usize)>()
        + (16 + std::mem::size_of_val(frames)).next_multiple_of(16) as u64
        + names as u64
}

/// What a stack of `len` elements of type `T` costs in its table.
fn stack_bytes<T>(len: usize) -> u64 {
    // The boxed slice, rounded up to the allocator's 16 bytes, and its slot.
    (len * size_of::<T>()).next_multiple_of(16) as u64 + slot_bytes::<(Box<[T]>, u64)>()
}

/// What the stacks of `table` cost.
pub(crate) fn table_bytes<T>(table: &HashMap<Box<[T]>, u64>) -> u64 {
    table.keys().map(|stack| stack_bytes::<T>(stack.len())).sum()
}

/// Counts a sample of `stack` in `table`; returns the bytes it added (0 for a known stack).
pub(crate) fn count_stack<T: Eq + Hash>(
    table: &mut HashMap<Box<[T]>, u64>,
    stack: Box<[T]>,
) -> u64 {
    if let Some(count) = table.get_mut(&stack) {
        *count += 1;
        return 0;
    }
    let bytes = stack_bytes::<T>(stack.len());
    table.insert(stack, 1);
    bytes
}

/// Drops the stacks with the fewest samples from `tables` (each with its folded-sample
/// counter) until what is left is estimated at `target` of the `total` bytes they and the
/// `frames` frames take now; ties are broken by the stacks' elements, so that the stacks kept
/// do not depend on hashing. Returns which frames the kept stacks use (`frame_of` names an
/// element's frame) and how many stacks were dropped.
pub(crate) fn prune<'t, T: Ord + Hash + 't>(
    tables: impl Iterator<Item = (&'t mut HashMap<Box<[T]>, u64>, &'t mut u64)>,
    total: u64,
    target: u64,
    frames: usize,
    frame_of: impl Fn(&T) -> FrameId,
) -> (Vec<bool>, u64) {
    let mut tables: Vec<_> = tables.collect();
    let mut all: Vec<(u64, usize, Box<[T]>)> = Vec::new();
    for (i, (table, _)) in tables.iter_mut().enumerate() {
        all.extend(table.drain().map(|(stack, count)| (count, i, stack)));
        table.shrink_to_fit();
    }
    // The stacks' share of the total is kept in proportion: frames go with the stacks that use
    // them.
    let keep = (all.len() as u128 * u128::from(target) / u128::from(total.max(1))) as usize;
    let keep = keep.min(all.len());
    let order = |a: &(u64, usize, Box<[T]>), b: &(u64, usize, Box<[T]>)| {
        b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)).then_with(|| a.2.cmp(&b.2))
    };
    if keep < all.len() && keep > 0 {
        all.select_nth_unstable_by(keep, order);
    }
    let dropped = all.split_off(keep);
    for (count, i, _) in &dropped {
        *tables[*i].1 += count;
    }
    let mut used = vec![false; frames];
    for (count, i, stack) in all {
        for element in stack.iter() {
            used[frame_of(element).index()] = true;
        }
        tables[i].0.insert(stack, count);
    }
    (used, dropped.len() as u64)
}

/// `table` with every element of every stack replaced by `map` of it (stacks that become equal
/// are merged).
pub(crate) fn renumber<T: Eq + Hash>(
    table: HashMap<Box<[T]>, u64>,
    map: impl Fn(&T) -> T,
) -> HashMap<Box<[T]>, u64> {
    let mut out = HashMap::with_capacity(table.len());
    for (stack, count) in table {
        let stack: Box<[T]> = stack.iter().map(&map).collect();
        *out.entry(stack).or_default() += count;
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::{OTHER_FRAME, Profile, ResolveOptions, write_folded};
    use pmcprof_fixtures::{LogBuilder, Program, hot_warm_main};

    /// [`hot_warm_main`] with 50 more samples of `hot ← main` (51 in all), then `distinct`
    /// stacks of eight unresolved addresses each,
    /// one sample each, all different.
    fn many_stacks(p: &Program, distinct: u64) -> LogBuilder {
        let mut log = hot_warm_main(p);
        log.samples(100, 0x100, &[p.at("hot", 1), p.at("main", 1)], 50);
        for i in 0..distinct {
            let pcs: Vec<u64> = (0..8).map(|d| 0x7000_0000_0000 + i * 64 + d * 8).collect();
            log.samples(7, 0x100, &pcs, 1);
        }
        log
    }

    fn opts(frames_only: bool, budget: Option<u64>) -> ResolveOptions {
        ResolveOptions { frames_only, table_budget: budget, ..ResolveOptions::default() }
    }

    fn named_stacks(profile: &Profile) -> Vec<(Vec<String>, u64)> {
        let pmc = &profile.pmcs()[0];
        let name = |f: &crate::FrameId| profile.frame(*f).name();
        pmc.stacks().map(|(s, n)| (s.iter().map(name).collect(), n)).collect()
    }

    #[test]
    fn within_the_budget_nothing_is_folded_and_frames_only_gives_the_same_stacks() {
        let p = Program::build(false);
        let log = many_stacks(&p, 500).bytes();
        let full = Profile::from_log(&log, &opts(false, None)).unwrap();
        let frames = Profile::from_log(&log, &opts(true, None)).unwrap();
        assert_eq!(full.overflow(), None);
        assert_eq!(frames.overflow(), None);
        assert_eq!(named_stacks(&full), named_stacks(&frames));
        assert_eq!(named_stacks(&full).len(), 3 + 500);
        assert!(full.frames().iter().all(|f| f.name() != OTHER_FRAME));
        assert_eq!(frames.pmcs()[0].location_stacks().count(), 0);
        assert_eq!(full.pmcs()[0].location_stacks().count(), 3 + 1 + 500);
    }

    #[test]
    fn over_the_budget_the_rarest_stacks_are_counted_as_other() {
        let p = Program::build(false);
        let log = many_stacks(&p, 20_000).bytes();
        for frames_only in [true, false] {
            let budget = 256 << 10;
            let profile = Profile::from_log(&log, &opts(frames_only, Some(budget))).unwrap();
            let overflow = profile.overflow().expect("the tables overflowed");
            assert_eq!(overflow.budget, budget);
            assert!(overflow.prunes >= 1 && overflow.stacks > 0, "{overflow:?}");
            let stacks = named_stacks(&profile);
            // Every sample is still counted, under its own stack or under [other].
            let total: u64 = stacks.iter().map(|(_, n)| n).sum();
            assert_eq!(total, profile.total_samples());
            assert_eq!(total, 10 + 50 + 20_000);
            let other: Vec<_> = stacks.iter().filter(|(s, _)| s == &[OTHER_FRAME]).collect();
            assert_eq!(other.len(), 1, "one [other] stack: {frames_only}");
            assert_eq!(other[0].1, overflow.samples);
            assert_eq!(profile.pmcs()[0].folded_samples(), overflow.samples);
            // The stacks with many samples survive every pruning.
            let hot = ["hot", "main"].map(str::to_owned).to_vec();
            assert!(stacks.contains(&(hot, 51)), "{frames_only}");
            // What is kept fits the budget: far fewer stacks than the log has.
            assert!(stacks.len() < 20_000 / 2, "{} stacks kept", stacks.len());
            assert!(profile.frames().len() < 20_000 * 8 / 2, "{} frames", profile.frames().len());
        }
    }

    #[test]
    fn the_folded_output_shows_the_other_stack() {
        let p = Program::build(false);
        let log = many_stacks(&p, 20_000).bytes();
        let profile = Profile::from_log(&log, &opts(true, Some(256 << 10))).unwrap();
        let mut out = Vec::new();
        write_folded(&profile, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let folded = profile.overflow().unwrap().samples;
        assert!(text.lines().any(|l| l == format!("{OTHER_FRAME} {folded}")), "{text}");
        assert!(text.lines().any(|l| l == "main;hot 51"), "{text}");
    }

    #[test]
    fn pruning_is_deterministic() {
        let p = Program::build(false);
        let log = many_stacks(&p, 5_000).bytes();
        let once = Profile::from_log(&log, &opts(true, Some(64 << 10))).unwrap();
        let again = Profile::from_log(&log, &opts(true, Some(64 << 10))).unwrap();
        assert!(once.overflow().is_some());
        assert_eq!(named_stacks(&once), named_stacks(&again));
    }
}
