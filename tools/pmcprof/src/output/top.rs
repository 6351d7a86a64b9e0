//! A flat profile: per function, the samples taken in it (self) and the samples with it anywhere
//! on the stack (total).
//!
//! One block per PMC name (PMCs of the same name, such as a system-mode PMC's one PMC per CPU,
//! are added together), blocks separated by a blank line:
//!
//! ```text
//! @ INSTR_RETIRED_ANY [10 samples]
//!  self%     self  total%    total  function  image
//!  70.00        7   70.00        7  hot       /tmp/prog
//!  30.00        3   90.00        9  warm      /tmp/prog
//!   0.00        0  100.00       10  main      /tmp/prog
//! ```
//!
//! Columns: `self%` (`%6.2f`), `self` (`%8u`), `total%` (`%7.2f`), `total` (`%8u`), two spaces,
//! the function left-justified to the widest one shown, two spaces, the image's path. Rows are
//! sorted by self samples, then total samples (both descending), then name. A function that
//! calls itself counts once per sample in its total. When functions are left out, a last line
//! says how many: `(12 more functions: --top N shows N)`.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use crate::profile::Profile;
use crate::profile::frame::FrameId;

/// Writes the flat profile, at most `rows` functions per PMC (`usize::MAX` for all).
pub fn write_top(profile: &Profile, rows: usize, out: &mut dyn Write) -> io::Result<()> {
    let mut text = String::new();
    for (name, samples) in profile.sample_counts() {
        if samples == 0 {
            continue;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        let mut rows_all = flat_rows(profile, &name, usize::MAX);
        let more = rows_all.len().saturating_sub(rows);
        rows_all.truncate(rows);
        let rows = rows_all;
        let width = rows
            .iter()
            .map(|r| profile.frame(r.frame).name().chars().count())
            .max()
            .unwrap_or(0)
            .max("function".len());
        text.push_str(&format!("@ {name} [{samples} samples]\n"));
        text.push_str(&format!(
            "{:>6} {:>8} {:>7} {:>8}  {:<width$}  {}\n",
            "self%", "self", "total%", "total", "function", "image"
        ));
        for row in rows {
            let frame = profile.frame(row.frame);
            let pct = |n: u64| 100.0 * n as f64 / samples as f64;
            text.push_str(&format!(
                "{:>6.2} {:>8} {:>7.2} {:>8}  {:<width$}  {}\n",
                pct(row.self_samples),
                row.self_samples,
                pct(row.total_samples),
                row.total_samples,
                frame.name(),
                frame.image
            ));
        }
        if more > 0 {
            let s = if more == 1 { "" } else { "s" };
            text.push_str(&format!("({more} more function{s}: --top N shows N)\n"));
        }
    }
    out.write_all(text.as_bytes())
}

/// One function of the flat profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlatRow {
    /// The function.
    pub frame: FrameId,
    /// Samples taken in the function itself.
    pub self_samples: u64,
    /// Samples with the function anywhere on the stack.
    pub total_samples: u64,
}

/// The flat profile of the PMCs named `pmc_name`: at most `rows` functions, sorted as
/// [`write_top`] prints them.
pub fn flat_rows(profile: &Profile, pmc_name: &str, rows: usize) -> Vec<FlatRow> {
    let mut table: HashMap<FrameId, (u64, u64)> = HashMap::new();
    let mut seen = HashSet::new();
    for pmc in profile.pmcs().iter().filter(|p| p.name() == pmc_name) {
        for (stack, count) in pmc.stacks() {
            if let Some(&leaf) = stack.first() {
                table.entry(leaf).or_default().0 += count;
            }
            seen.clear();
            for &frame in stack {
                if seen.insert(frame) {
                    table.entry(frame).or_default().1 += count;
                }
            }
        }
    }
    let mut rows_out: Vec<(FlatRow, String)> = table
        .into_iter()
        .map(|(frame, (s, t))| {
            let row = FlatRow { frame, self_samples: s, total_samples: t };
            (row, profile.frame(frame).name())
        })
        .collect();
    rows_out.sort_by(|(a, an), (b, bn)| {
        b.self_samples
            .cmp(&a.self_samples)
            .then(b.total_samples.cmp(&a.total_samples))
            .then_with(|| an.cmp(bn))
            .then_with(|| profile.frame(a.frame).image.cmp(&profile.frame(b.frame).image))
            .then(a.frame.cmp(&b.frame))
    });
    rows_out.into_iter().take(rows).map(|(row, _)| row).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ResolveOptions;
    use pmcprof_fixtures::{CPU_CLK_UNHALTED_CORE, Program, hot_warm_main};

    #[test]
    fn top_rows_are_sorted_by_self_samples() {
        let p = Program::build(false);
        let profile =
            Profile::from_log(&hot_warm_main(&p).bytes(), &ResolveOptions::default()).unwrap();
        let mut out = Vec::new();
        write_top(&profile, usize::MAX, &mut out).unwrap();
        let path = p.log_path();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "@ INSTR_RETIRED_ANY [10 samples]\n \
                 self%     self  total%    total  function  image\n \
                 70.00        7   70.00        7  hot       {path}\n \
                 30.00        3   90.00        9  warm      {path}\n  \
                 0.00        0  100.00       10  main      {path}\n"
            )
        );
        let mut two = Vec::new();
        write_top(&profile, 2, &mut two).unwrap();
        let two = String::from_utf8(two).unwrap();
        assert!(
            two.ends_with(&format!("warm      {path}\n(1 more function: --top N shows N)\n")),
            "{two}"
        );
        let rows = flat_rows(&profile, "INSTR_RETIRED_ANY", 2);
        let names: Vec<String> = rows.iter().map(|r| profile.frame(r.frame).name()).collect();
        assert_eq!(names, ["hot", "warm"]);
        assert_eq!((rows[1].self_samples, rows[1].total_samples), (3, 9));
    }

    #[test]
    fn top_limits_rows_and_prints_one_block_per_pmc_name() {
        let p = Program::build(false);
        let mut log = hot_warm_main(&p);
        log.allocate(0x200, CPU_CLK_UNHALTED_CORE);
        // Recursion counts once per sample in the total.
        log.samples(100, 0x200, &[p.at("cold", 1), p.at("cold", 2), p.at("main", 3)], 4);
        let profile = Profile::from_log(&log.bytes(), &ResolveOptions::default()).unwrap();
        let mut out = Vec::new();
        write_top(&profile, 1, &mut out).unwrap();
        let path = p.log_path();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "@ INSTR_RETIRED_ANY [10 samples]\n \
                 self%     self  total%    total  function  image\n \
                 70.00        7   70.00        7  hot       {path}\n\
                 (2 more functions: --top N shows N)\n\
                 \n\
                 @ CPU_CLK_UNHALTED_CORE [4 samples]\n \
                 self%     self  total%    total  function  image\n\
                 100.00        4  100.00        4  cold      {path}\n\
                 (1 more function: --top N shows N)\n"
            )
        );
    }
}
