//! Folded ("collapsed") stacks, the input of flame-graph tools, and the flame graph itself.
//!
//! One line per distinct stack: the frames from the outermost caller to the sampled function,
//! separated by `;`, a space, and the number of samples — `main;warm;hot 6`. Lines are sorted.
//!
//! When the log has several PMCs, their stacks are written merged (identical stacks add up) with
//! no per-PMC marker, because folded-stack consumers read one kind of sample per file; use
//! [`write_folded_pmc`] for the stacks of one event.
//!
//! A resolved frame is its function's name (`hot`, or `hot+0x1a` with `-I`); an unresolved one is
//! its address and image, `0x401136 (prog)`, so that addresses of different images stay apart.
//! A `;` inside a name (as in the Rust type `[u8; 4]`) is written as `:`.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::profile::frame::{Frame, FrameId};
use crate::profile::{PmcProfile, Profile};

/// Writes the folded stacks of every PMC, merged.
pub fn write_folded(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    write_sorted(profile, |_| true, out)
}

/// Writes the folded stacks of the PMCs named `pmc_name` (several PMCs can share a name: a
/// system-mode PMC is one PMC per CPU).
pub fn write_folded_pmc(profile: &Profile, pmc_name: &str, out: &mut dyn Write) -> io::Result<()> {
    write_sorted(profile, |p| p.name() == pmc_name, out)
}

/// Writes the lines of [`folded_lines`] without building them all first: the stacks are sorted
/// by the text of their lines, compared byte by byte as it would be written, and equal lines
/// are merged as they are written. The memory it takes is a pointer and a count per stack.
fn write_sorted(
    profile: &Profile,
    keep: impl Fn(&PmcProfile) -> bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    let names: Vec<String> = profile.frames().iter().map(folded_name).collect();
    let text = |stack| line_text(&names, stack);
    let mut stacks: Vec<(&[FrameId], u64)> =
        profile.pmcs().iter().filter(|p| keep(p)).flat_map(|p| p.stacks()).collect();
    stacks.sort_unstable_by(|(a, _), (b, _)| text(a).cmp(text(b)));
    let mut line = String::new();
    let mut i = 0;
    while i < stacks.len() {
        let (stack, mut count) = stacks[i];
        i += 1;
        while i < stacks.len() && text(stacks[i].0).eq(text(stack)) {
            count += stacks[i].1;
            i += 1;
        }
        line.clear();
        for (n, frame) in stack.iter().rev().enumerate() {
            if n > 0 {
                line.push(';');
            }
            line.push_str(&names[frame.index()]);
        }
        line.push(' ');
        line.push_str(&count.to_string());
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

/// Writes a flame graph (SVG, drawn by the `inferno` crate) of the folded stacks of every PMC.
/// A profile without samples is an error of kind [`io::ErrorKind::InvalidData`], and nothing is
/// written.
pub fn write_flamegraph(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let lines = folded_lines(profile, |_| true);
    if lines.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "no samples to draw: the log has no CALLCHAIN records (sample with -P or -S)",
        ));
    }
    let lines: Vec<String> =
        lines.into_iter().map(|(stack, count)| format!("{stack} {count}")).collect();
    let names: Vec<String> = profile.sample_counts().into_iter().map(|(name, _)| name).collect();
    let mut options = inferno::flamegraph::Options::default();
    options.title = if names.is_empty() {
        "pmcstat".to_owned()
    } else {
        format!("pmcstat: {}", names.join(", "))
    };
    options.count_name = "samples".to_owned();
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
        .map_err(|e| io::Error::other(format!("cannot draw the flame graph: {e}")))
}

/// The stacks of the PMCs `keep` accepts, root first, with their counts, sorted and merged.
pub(crate) fn folded_lines(
    profile: &Profile,
    keep: impl Fn(&PmcProfile) -> bool,
) -> BTreeMap<String, u64> {
    let names: Vec<String> = profile.frames().iter().map(folded_name).collect();
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for pmc in profile.pmcs().iter().filter(|p| keep(p)) {
        for (stack, count) in pmc.stacks() {
            let mut line = String::new();
            for (i, frame) in stack.iter().rev().enumerate() {
                if i > 0 {
                    line.push(';');
                }
                line.push_str(&names[frame.index()]);
            }
            *lines.entry(line).or_default() += count;
        }
    }
    lines
}

/// The bytes of the line of `stack` up to its count, as [`write_sorted`] writes them.
fn line_text<'a>(names: &'a [String], stack: &'a [FrameId]) -> impl Iterator<Item = u8> + 'a {
    stack.iter().rev().enumerate().flat_map(move |(i, frame)| {
        let separator = (i > 0).then_some(b';');
        separator.into_iter().chain(names[frame.index()].bytes())
    })
}

/// A frame's name in a folded line.
fn folded_name(frame: &Frame) -> String {
    let name = match frame.symbol {
        Some(_) => frame.name(),
        None => format!("{} ({})", frame.name(), frame.image_basename()),
    };
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ResolveOptions;
    use pmcprof_fixtures::{CPU_CLK_UNHALTED_CORE, LogBuilder, Program, hot_warm_main};

    fn text(f: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut out = Vec::new();
        f(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn folded_lines_are_root_first_and_sorted() {
        let p = Program::build(false);
        let profile =
            Profile::from_log(&hot_warm_main(&p).bytes(), &ResolveOptions::default()).unwrap();
        assert_eq!(
            text(|o| write_folded(&profile, o)),
            "main;hot 1\nmain;warm 3\nmain;warm;hot 6\n"
        );
    }

    #[test]
    fn folded_stacks_of_several_pmcs_are_merged() {
        let p = Program::build(false);
        let mut log = hot_warm_main(&p);
        log.allocate(0x200, CPU_CLK_UNHALTED_CORE);
        log.samples(100, 0x200, &[p.at("warm", 1), p.at("main", 1)], 4);
        log.samples(100, 0x200, &[p.at("cold", 1), p.at("main", 1)], 2);
        let profile = Profile::from_log(&log.bytes(), &ResolveOptions::default()).unwrap();
        assert_eq!(
            text(|o| write_folded(&profile, o)),
            "main;cold 2\nmain;hot 1\nmain;warm 7\nmain;warm;hot 6\n"
        );
        assert_eq!(
            text(|o| write_folded_pmc(&profile, "CPU_CLK_UNHALTED_CORE", o)),
            "main;cold 2\nmain;warm 4\n"
        );
    }

    #[test]
    fn folded_unresolved_frames_name_their_image() {
        let mut log = LogBuilder::new();
        log.allocate(0x200, CPU_CLK_UNHALTED_CORE).map_in(1, 0x1000_0000, "/no/such/lib.so");
        log.samples_mode(1, 0x200, false, &[0xffff_ffff_8000_0010, 0x1000_0020], 1);
        let profile = Profile::from_log(&log.bytes(), &ResolveOptions::default()).unwrap();
        assert_eq!(
            text(|o| write_folded(&profile, o)),
            "0x10000020 (lib.so);0xffffffff80000010 (kernel) 1\n"
        );
    }

    #[test]
    fn flamegraph_svg_names_the_functions() {
        let p = Program::build(false);
        let profile =
            Profile::from_log(&hot_warm_main(&p).bytes(), &ResolveOptions::default()).unwrap();
        let svg = text(|o| write_flamegraph(&profile, o));
        assert!(svg.starts_with("<?xml"), "{}", &svg[..svg.len().min(200)]);
        assert!(svg.contains("pmcstat: INSTR_RETIRED_ANY"));
        for function in ["hot", "warm", "main"] {
            assert!(
                svg.contains(&format!(">{function}<")) || svg.contains(&format!("{function} ("))
            );
        }
    }

    #[test]
    fn flamegraph_of_an_empty_profile_is_an_error() {
        let profile =
            Profile::from_log(&LogBuilder::new().bytes(), &ResolveOptions::default()).unwrap();
        let mut out = Vec::new();
        let error = write_flamegraph(&profile, &mut out).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("no samples"));
        assert!(out.is_empty());
    }
}
