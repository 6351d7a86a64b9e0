//! `pmcstat -g`: gprof-compatible profiles, one per image and event (`freebsd-abi.md` §5.4).
//!
//! Each image that has samples (or call arcs) gets, for each event, the file
//! `<dir>/<event>/<sample name>.gmon`, where the sample name is the image's basename, or
//! `<basename>~001`, `~002`, … when images of different paths share a basename (FreeBSD's
//! `%s~%3.3d`). PMCs with the same event name (a system-mode PMC is one PMC per CPU) add up in
//! one file, the file FreeBSD names for each of them. A file is a BSD gmon file:
//!
//! - a `struct gmonhdr`: `lpc`, `hpc` (8 bytes each), `ncnt`, `version` ([`GMONVERSION`]),
//!   `profrate`, `histcounter_type` (0: the historical 16-bit counters) and spare words (4 bytes
//!   each), all little-endian (amd64) — see [`GmonHeader`] for its length. `profrate` is the
//!   samples per second of a clock event ([`PmcProfile::clock_period_ns`]: 1000 for
//!   `cpu-clock` sampling every 1 ms), so gprof's seconds are CPU time; for any other
//!   event it is 1, so gprof's "seconds" are samples (FreeBSD writes 0, and gprof then takes
//!   each sample for a tick of its own clock, 10 ms on Linux: time no counter measured);
//! - the histogram: one `u16` counter per [`FUNCTION_ALIGNMENT`] bytes of the image's code,
//!   bucket `(pc - lpc) / 16` for each sample whose program counter (the innermost one, in the
//!   image's link-time addresses) lies in the code; a counter stops at 0xFFFF (a file with a
//!   counter that would have gone past it is marked `*` in the `-M` mapping);
//! - the call arcs, `struct rawarc { u_long frompc; u_long selfpc; long count; }` (24 bytes),
//!   sorted: for each caller → callee pair of adjacent frames of a call chain that are both in
//!   the image's code, `frompc` is the return address in the caller and `selfpc` the callee's
//!   start (its exact address when unresolved), and `count` the samples with that pair (once per
//!   occurrence: recursion counts each level). FreeBSD's pmcstat fills in only the histogram;
//!   gprof reads arcs as call counts, so its "called" column is here a number of samples.
//!
//! `lpc` is the start of the image's code ([`Profile::text_range`], FreeBSD's `pi_start`), and
//! `hpc` its end rounded up to a whole bucket: gprof (GNU's and FreeBSD's) derives the bucket
//! size as `(hpc - lpc) / buckets`, which is then exactly [`FUNCTION_ALIGNMENT`]. (FreeBSD writes
//! the unrounded end, which makes gprof's buckets slightly smaller than pmcstat's.)
//!
//! Images that could not be read, and addresses no mapping covers, have no link-time addresses
//! and get no file. Arcs between two images are left out: a gmon file describes one image. The
//! Linux kernel (the [`pmc::host::KERNEL_SYMBOLS`] pseudo-image) gets a file only when asked:
//! its text and modules span about a gigabyte, a histogram of over 100 MB.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::profile::frame::Location;
use crate::profile::{PmcProfile, Profile};

/// `GMONVERSION`: the version word of a 4.4BSD gmon header.
pub const GMONVERSION: u32 = 0x0005_1879;

/// Bytes of code per histogram counter: amd64's `FUNCTION_ALIGNMENT` (`<machine/profile.h>`).
pub const FUNCTION_ALIGNMENT: u64 = 16;

/// The length of the gmon header, which decides where the histogram starts. The fields are the
/// same in both; they differ in the padding after them.
///
/// FreeBSD's `struct gmonhdr` has 44 bytes of fields (`lpc`, `hpc`, `ncnt`, `version`,
/// `profrate`, `histcounter_type`, `spare[3]`), padded to 48 on amd64, and FreeBSD's gprof reads
/// `sizeof(struct gmonhdr)` bytes. GNU gprof (binutils 2.40, checked with its `--debug` output)
/// reads a 4.4BSD header of 40 bytes on a 64-bit target (`lpc`, `hpc`, `ncnt`, `version`,
/// `profrate`, `spare[3]`: `histcounter_type` is its `spare[0]`) and takes the histogram to run
/// from byte 40 to `ncnt`. A file with FreeBSD's header is read by GNU gprof with four empty
/// counters in front and every sample moved 64 bytes up, so a file is written for one gprof or
/// the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GmonHeader {
    /// 48 bytes: FreeBSD's `sizeof(struct gmonhdr)` on amd64, for FreeBSD's gprof.
    FreeBsd,
    /// 40 bytes: the 4.4BSD header as GNU gprof reads it.
    Gnu,
}

impl GmonHeader {
    /// The header of the gprof of the system pmcstat is built for: [`GmonHeader::FreeBsd`] on
    /// FreeBSD, [`GmonHeader::Gnu`] elsewhere.
    pub fn native() -> GmonHeader {
        if cfg!(target_os = "freebsd") { GmonHeader::FreeBsd } else { GmonHeader::Gnu }
    }

    /// Bytes before the histogram.
    pub fn size(self) -> usize {
        match self {
            GmonHeader::FreeBsd => 48,
            GmonHeader::Gnu => 40,
        }
    }
}

/// A call arc (`struct rawarc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CallArc {
    /// The return address in the caller.
    pub from_pc: u64,
    /// The callee's start.
    pub self_pc: u64,
    /// Samples with this caller → callee pair.
    pub count: u64,
}

/// The gprof profile of one image for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GmonProfile {
    /// The event (PMC) name; the file's directory.
    pub event: String,
    /// The image as the log names it.
    pub image: Arc<str>,
    /// The file name without `.gmon`: the image's basename, with `~NNN` after it when another
    /// image has the same basename.
    pub sample_name: String,
    /// `lpc`: the start of the image's code.
    pub low_pc: u64,
    /// `hpc`: `low_pc` plus [`FUNCTION_ALIGNMENT`] for every counter.
    pub high_pc: u64,
    /// One counter per [`FUNCTION_ALIGNMENT`] bytes from `low_pc`.
    pub histogram: Vec<u16>,
    /// The arcs, sorted by `from_pc` then `self_pc`.
    pub arcs: Vec<CallArc>,
    /// Samples counted in the histogram (before saturation).
    pub samples: u64,
    /// Whether a counter had more samples than 0xFFFF and stopped there.
    pub saturated: bool,
    /// `profrate`: samples per second for a clock event, 1 for any other.
    pub profile_rate: u32,
}

impl GmonProfile {
    /// `<event>/<sample name>.gmon`, relative to the `-D` directory. Both names come from
    /// the log, so they are made safe file names (no `/`, `.` or `..`): the path never leaves the
    /// directory.
    pub fn relative_path(&self) -> PathBuf {
        Path::new(&file_name(&self.event)).join(file_name(&format!("{}.gmon", self.sample_name)))
    }

    /// The file's bytes with the header `header`. Fails (`InvalidData`) only for a histogram
    /// too large for `ncnt` (over 2 GiB, code of 16 GiB).
    pub fn to_bytes(&self, header: GmonHeader) -> io::Result<Vec<u8>> {
        let ncnt = header.size() + 2 * self.histogram.len();
        let ncnt = i32::try_from(ncnt).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: the gmon histogram is too large for its header", self.image),
            )
        })?;
        let mut bytes = Vec::with_capacity(ncnt as usize + 24 * self.arcs.len());
        bytes.extend_from_slice(&self.low_pc.to_le_bytes());
        bytes.extend_from_slice(&self.high_pc.to_le_bytes());
        bytes.extend_from_slice(&ncnt.to_le_bytes());
        bytes.extend_from_slice(&GMONVERSION.to_le_bytes());
        bytes.extend_from_slice(&self.profile_rate.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes()); // histcounter_type (GNU: spare[0])
        bytes.resize(header.size(), 0); // spare words and padding
        for counter in &self.histogram {
            bytes.extend_from_slice(&counter.to_le_bytes());
        }
        for arc in &self.arcs {
            bytes.extend_from_slice(&arc.from_pc.to_le_bytes());
            bytes.extend_from_slice(&arc.self_pc.to_le_bytes());
            bytes.extend_from_slice(&arc.count.to_le_bytes());
        }
        Ok(bytes)
    }
}

/// What one (event, image) pair collects before it becomes a [`GmonProfile`].
#[derive(Default)]
struct Collect {
    histogram: Vec<u64>,
    arcs: BTreeMap<(u64, u64), u64>,
    samples: u64,
}

/// The gprof profiles of `profile`: per event (in the order of
/// [`Profile::sample_counts`]), per image (in the order the images first appear in
/// [`Profile::frames`]); the Linux kernel's only with `kernel`.
pub fn gmon_profiles(profile: &Profile, kernel: bool) -> Vec<GmonProfile> {
    // Images in order of first appearance, with their code ranges.
    let mut image_order: Vec<Arc<str>> = Vec::new();
    let mut image_index: HashMap<Arc<str>, usize> = HashMap::new();
    for frame in profile.frames() {
        let wanted = kernel || &*frame.image != pmc::host::KERNEL_SYMBOLS;
        if wanted
            && !image_index.contains_key(&frame.image)
            && profile.text_range(&frame.image).is_some()
        {
            image_index.insert(frame.image.clone(), image_order.len());
            image_order.push(frame.image.clone());
        }
    }
    let ranges: Vec<(u64, u64)> = image_order
        .iter()
        .map(|image| {
            let range = profile.text_range(image).expect("filtered above");
            let buckets = (range.end - range.start).div_ceil(FUNCTION_ALIGNMENT);
            (range.start, buckets)
        })
        .collect();
    let in_code = |image: usize, address: u64| {
        let (low, buckets) = ranges[image];
        address.checked_sub(low).map(|d| d / FUNCTION_ALIGNMENT).filter(|&b| b < buckets)
    };
    let image_of = |location: &Location| image_index.get(&profile.frame(location.frame).image);

    // Per event (with its samples per second): per image.
    let mut events: Vec<(String, u32, HashMap<usize, Collect>)> = Vec::new();
    for pmc in profile.pmcs() {
        let at = match events.iter().position(|(name, ..)| name == pmc.name()) {
            Some(i) => i,
            None => {
                events.push((pmc.name().to_owned(), profile_rate(pmc), HashMap::new()));
                events.len() - 1
            }
        };
        let images = &mut events[at].2;
        for (stack, count) in pmc.location_stacks() {
            let Some(leaf) = stack.first() else { continue };
            if let Some(&image) = image_of(leaf) {
                if let Some(bucket) = in_code(image, leaf.address) {
                    let c = images.entry(image).or_default();
                    if c.histogram.is_empty() {
                        c.histogram = vec![0; ranges[image].1 as usize];
                    }
                    c.histogram[bucket as usize] += count;
                    c.samples += count;
                }
            }
            for pair in stack.windows(2) {
                let (callee, caller) = (&pair[0], &pair[1]);
                let (Some(&image), Some(&caller_image)) = (image_of(callee), image_of(caller))
                else {
                    continue;
                };
                if image != caller_image {
                    continue;
                }
                let frame = profile.frame(callee.frame);
                let self_pc = match &frame.symbol {
                    Some(_) => frame.address - frame.offset.unwrap_or(0),
                    None => callee.address,
                };
                if in_code(image, self_pc).is_none() || in_code(image, caller.address).is_none() {
                    continue;
                }
                *images
                    .entry(image)
                    .or_default()
                    .arcs
                    .entry((caller.address, self_pc))
                    .or_default() += count;
            }
        }
    }

    // Sample names: the basename, then basename~001, … in image order.
    let used: Vec<bool> = (0..image_order.len())
        .map(|i| events.iter().any(|(.., images)| images.contains_key(&i)))
        .collect();
    let mut names: Vec<String> = vec![String::new(); image_order.len()];
    let mut taken: HashSet<String> = HashSet::new();
    for (i, image) in image_order.iter().enumerate().filter(|(i, _)| used[*i]) {
        let base = image.rsplit('/').next().unwrap_or(image);
        // Made a safe file name before numbering, so that names the cleaning makes equal
        // are numbered apart.
        let base = if base.is_empty() { "image".to_owned() } else { file_name(base) };
        let mut n = 0u32;
        let name = loop {
            let name = if n == 0 { base.clone() } else { format!("{base}~{n:03}") };
            if !taken.contains(&name) {
                break name;
            }
            n += 1;
        };
        taken.insert(name.clone());
        names[i] = name;
    }

    let mut out = Vec::new();
    for (event, profile_rate, mut images) in events {
        for (i, image) in image_order.iter().enumerate() {
            let Some(c) = images.remove(&i) else { continue };
            let (low_pc, buckets) = ranges[i];
            let mut histogram = c.histogram;
            histogram.resize(buckets as usize, 0);
            let saturated = histogram.iter().any(|&n| n > u64::from(u16::MAX));
            out.push(GmonProfile {
                event: event.clone(),
                image: image.clone(),
                sample_name: names[i].clone(),
                low_pc,
                high_pc: low_pc + buckets * FUNCTION_ALIGNMENT,
                histogram: histogram
                    .into_iter()
                    .map(|n| n.min(u64::from(u16::MAX)) as u16)
                    .collect(),
                arcs: c
                    .arcs
                    .into_iter()
                    .map(|((from_pc, self_pc), count)| CallArc { from_pc, self_pc, count })
                    .collect(),
                samples: c.samples,
                saturated,
                profile_rate,
            });
        }
    }
    out
}

/// `profrate` for the samples of `pmc`: samples per second of a clock event (at least 1), else 1.
fn profile_rate(pmc: &PmcProfile) -> u32 {
    match pmc.clock_period_ns() {
        Some(period) => u32::try_from(1_000_000_000 / period).unwrap_or(u32::MAX).max(1),
        None => 1,
    }
}

/// The longest file name made from a log's name (NAME_MAX is 255 bytes).
const FILE_NAME_MAX: usize = 200;

/// `name` as one file name that stays in its directory: `/`, NUL, backslashes and control
/// characters become `_`, a name of dots only (`.`, `..`) or an empty one gets a `_` in front,
/// and a name is cut to [`FILE_NAME_MAX`] bytes.
pub(crate) fn file_name(name: &str) -> String {
    let mut safe: String = name
        .chars()
        .map(|c| if c == '/' || c == '\\' || c.is_control() { '_' } else { c })
        .collect();
    if safe.chars().all(|c| c == '.') {
        safe.insert(0, '_');
    }
    if safe.len() > FILE_NAME_MAX {
        let mut cut = FILE_NAME_MAX;
        while !safe.is_char_boundary(cut) {
            cut -= 1;
        }
        safe.truncate(cut);
    }
    safe
}

/// Writes every profile under `dir` (creating `dir/<event>/`) with the header `header`. Each
/// file's bytes go through `write_file(path, bytes)`, which the caller makes write the file whole
/// or not at all (pmcstat's output rules: a failure leaves an existing file as it was).
pub fn write_gmon_files(
    profiles: &[GmonProfile],
    dir: &Path,
    header: GmonHeader,
    mut write_file: impl FnMut(&Path, &[u8]) -> io::Result<()>,
) -> io::Result<()> {
    for gmon in profiles {
        let relative = gmon.relative_path();
        // Defence in depth: only plain names below `dir`.
        if !relative.components().all(|c| matches!(c, std::path::Component::Normal(_))) {
            let message =
                format!("{}: not a file name below {}", relative.display(), dir.display());
            return Err(io::Error::new(io::ErrorKind::InvalidData, message));
        }
        let path = dir.join(relative);
        let with_path = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(with_path)?;
        }
        // Written whole or not at all: a failure leaves an existing file as it was.
        let bytes = gmon.to_bytes(header)?;
        write_file(&path, &bytes).map_err(with_path)?;
    }
    Ok(())
}

/// Writes the `-M` mapping: for each image, ` "<path>" => "<sample name>"`, then
/// ` <event>/<samples>` for each of its files (with `*` after a file whose histogram
/// saturated), and a newline.
pub fn write_gmon_map(profiles: &[GmonProfile], out: &mut dyn Write) -> io::Result<()> {
    let mut lines: Vec<(&Arc<str>, String)> = Vec::new();
    for gmon in profiles {
        let at = match lines.iter().position(|(image, _)| *image == &gmon.image) {
            Some(i) => i,
            None => {
                lines.push((
                    &gmon.image,
                    format!(" \"{}\" => \"{}\"", gmon.image, gmon.sample_name),
                ));
                lines.len() - 1
            }
        };
        let line = &mut lines[at].1;
        line.push_str(&format!(" {}/{}", gmon.event, gmon.samples));
        if gmon.saturated {
            line.push('*');
        }
    }
    let mut text = String::new();
    for (_, line) in lines {
        text.push_str(&line);
        text.push('\n');
    }
    out.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ResolveOptions;
    use object::{Object, ObjectSection, SectionKind};
    use pmcprof_fixtures::{
        CPU_CLK_UNHALTED_CORE, INSTR_RETIRED_ANY, LogBuilder, Program, hot_warm_main,
    };

    fn profiles(log: &LogBuilder) -> Vec<GmonProfile> {
        gmon_profiles(&Profile::from_log(&log.bytes(), &ResolveOptions::default()).unwrap(), false)
    }

    /// The code of the program: its text sections as `object` classifies them.
    fn code(p: &Program) -> (u64, u64) {
        let data = std::fs::read(&p.path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let text = file.sections().filter(|s| s.kind() == SectionKind::Text && s.size() > 0);
        text.fold((u64::MAX, 0), |(lo, hi), s| {
            (lo.min(s.address()), hi.max(s.address() + s.size()))
        })
    }

    fn u32_at(bytes: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
    }

    fn u64_at(bytes: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn gmon_profile_has_a_bucket_per_16_bytes_of_code_and_the_arcs_of_the_chains() {
        let p = Program::build(false);
        let gmons = profiles(&hot_warm_main(&p));
        assert_eq!(gmons.len(), 1);
        let g = &gmons[0];
        let (low, high) = code(&p);
        let buckets = (high - low).div_ceil(16);
        assert_eq!((g.event.as_str(), &*g.image), ("INSTR_RETIRED_ANY", p.log_path()));
        assert_eq!(
            (g.sample_name.as_str(), g.relative_path()),
            ("prog", "INSTR_RETIRED_ANY/prog.gmon".into())
        );
        assert_eq!((g.low_pc, g.high_pc), (low, low + 16 * buckets), "hpc: a whole last bucket");
        assert_eq!(g.histogram.len() as u64, buckets);
        let bucket = |pc: u64| ((pc - low) / 16) as usize;
        let mut expected = vec![0u16; buckets as usize];
        expected[bucket(p.at("hot", 4))] += 6;
        expected[bucket(p.at("hot", 8))] += 1;
        expected[bucket(p.at("warm", 4))] += 3;
        assert_eq!(g.histogram, expected);
        assert_eq!((g.samples, g.saturated), (10, false));
        let hot = p.at("hot", 0);
        let warm = p.at("warm", 0);
        let mut arcs = vec![
            CallArc { from_pc: p.at("warm", 10), self_pc: hot, count: 6 },
            CallArc { from_pc: p.at("main", 20), self_pc: warm, count: 9 },
            CallArc { from_pc: p.at("main", 30), self_pc: hot, count: 1 },
        ];
        arcs.sort();
        assert_eq!(g.arcs, arcs);
    }

    #[test]
    fn gmon_bytes_are_the_bsd_header_the_u16_histogram_and_24_byte_arcs() {
        let p = Program::build(false);
        let g = &profiles(&hot_warm_main(&p))[0];
        for (header, length) in [(GmonHeader::Gnu, 40), (GmonHeader::FreeBsd, 48)] {
            assert_eq!(header.size(), length);
            let bytes = g.to_bytes(header).unwrap();
            let n = g.histogram.len();
            assert_eq!(bytes.len(), length + 2 * n + 24 * 3);
            assert_eq!(u64_at(&bytes, 0), g.low_pc, "lpc");
            assert_eq!(u64_at(&bytes, 8), g.high_pc, "hpc");
            assert_eq!(u32_at(&bytes, 16) as usize, length + 2 * n, "ncnt");
            assert_eq!(u32_at(&bytes, 20), 0x0005_1879, "version");
            assert_eq!(u32_at(&bytes, 24), 1, "profrate: one sample of INSTR_RETIRED_ANY a unit");
            assert!(bytes[28..length].iter().all(|&b| b == 0), "histcounter_type and spares");
            let histogram: Vec<u16> = bytes[length..length + 2 * n]
                .chunks(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            assert_eq!(histogram, g.histogram);
            let arcs: Vec<CallArc> = bytes[length + 2 * n..]
                .chunks(24)
                .map(|c| CallArc {
                    from_pc: u64_at(c, 0),
                    self_pc: u64_at(c, 8),
                    count: u64_at(c, 16),
                })
                .collect();
            assert_eq!(arcs, g.arcs);
        }
        let native = if cfg!(target_os = "freebsd") { 48 } else { 40 };
        assert_eq!(GmonHeader::native().size(), native);
    }

    #[test]
    fn a_clock_event_gives_gprof_its_samples_per_second() {
        let p = Program::build(false);
        for (rate, per_second) in [(1_000_000, 1000), (4_000_000, 250), (5_000_000_000, 1)] {
            let mut log = LogBuilder::new();
            log.push(&pmclog::Record::PmcAllocateDyn(pmclog::PmcAllocateDyn {
                pmcid: 0x300,
                event: 0x20001,
                flags: 0,
                rate,
                name: b"cpu-clock",
                layout: pmclog::DynLayout::Kernel,
            }));
            log.exec(1, p.log_path(), 0, 0).samples(1, 0x300, &[p.at("cold", 1)], 3);
            let g = &profiles(&log)[0];
            assert_eq!(g.profile_rate, per_second, "every {rate} ns");
            assert_eq!(u32_at(&g.to_bytes(GmonHeader::Gnu).unwrap(), 24), per_second);
        }
    }

    #[test]
    fn the_linux_kernel_gets_a_gmon_file_only_when_asked() {
        let root = tempfile::tempdir().unwrap();
        let kallsyms = root.path().join(pmc::host::KERNEL_SYMBOLS.trim_start_matches('/'));
        std::fs::create_dir_all(kallsyms.parent().unwrap()).unwrap();
        std::fs::write(&kallsyms, "ffffffff81000000 T _stext\nffffffff81000100 T handler\n")
            .unwrap();
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).map_in(
            -1,
            0xffff_ffff_8100_0000,
            pmc::host::KERNEL_SYMBOLS,
        );
        log.samples_mode(5, 0x100, false, &[0xffff_ffff_8100_0104], 2);
        let opts = ResolveOptions { fsroot: Some(root.path().to_owned()), ..Default::default() };
        let profile = Profile::from_log(&log.bytes(), &opts).unwrap();
        assert!(gmon_profiles(&profile, false).is_empty());
        let with_kernel = gmon_profiles(&profile, true);
        assert_eq!(with_kernel.len(), 1);
        assert_eq!(
            (&*with_kernel[0].image, with_kernel[0].samples),
            (pmc::host::KERNEL_SYMBOLS, 2)
        );
    }

    #[test]
    fn pie_samples_are_placed_at_link_time_addresses() {
        let p = Program::build(true);
        let base = 0x5555_5555_0000;
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).map_in(9, base, p.log_path());
        log.samples(9, 0x100, &[base + p.at("cold", 2), base + p.at("main", 9)], 4);
        let g = &profiles(&log)[0];
        let (low, _) = code(&p);
        assert_eq!(g.low_pc, low);
        assert_eq!(g.histogram[((p.at("cold", 2) - low) / 16) as usize], 4);
        assert_eq!(
            g.arcs,
            [CallArc { from_pc: p.at("main", 9), self_pc: p.at("cold", 0), count: 4 }]
        );
    }

    #[test]
    fn names_from_a_log_become_single_file_names() {
        for (name, safe) in [
            ("INSTR_RETIRED_ANY", "INSTR_RETIRED_ANY"),
            ("..", "_.."),
            (".", "_."),
            ("", "_"),
            ("../../etc", ".._.._etc"),
            ("a\\b\0c\nd", "a_b_c_d"),
            ("...x", "...x"),
        ] {
            assert_eq!(file_name(name), safe, "{name:?}");
        }
        let long = "é".repeat(200);
        assert_eq!(file_name(&long).len(), 200);
        let mut log = LogBuilder::new();
        let p = Program::build(false);
        log.push(&pmclog::Record::PmcAllocateDyn(pmclog::PmcAllocateDyn {
            pmcid: 0x100,
            event: 0x1000,
            flags: 0,
            rate: 1,
            name: b"..",
            layout: pmclog::DynLayout::Kernel,
        }));
        log.exec(1, p.log_path(), 0, 0).samples(1, 0x100, &[p.at("hot", 1)], 1);
        let gmons = profiles(&log);
        assert_eq!(gmons[0].relative_path(), Path::new("_../prog.gmon"));
    }

    #[test]
    fn images_with_one_basename_get_numbered_sample_names() {
        let (a, b) = (Program::build(false), Program::build(true));
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).exec(1, a.log_path(), 0, 0);
        log.map_in(1, 0x7000_0000_0000, b.log_path());
        log.samples(1, 0x100, &[0x7000_0000_0000 + b.at("hot", 1)], 1);
        log.samples(1, 0x100, &[a.at("hot", 1)], 2);
        let names: Vec<(String, u64)> = profiles(&log)
            .iter()
            .map(|g| (g.relative_path().display().to_string(), g.samples))
            .collect();
        // In the order the images were first sampled.
        assert_eq!(
            names,
            [
                ("INSTR_RETIRED_ANY/prog.gmon".to_owned(), 1),
                ("INSTR_RETIRED_ANY/prog~001.gmon".to_owned(), 2)
            ]
        );
    }

    #[test]
    fn a_counter_stops_at_0xffff_and_the_mapping_marks_the_file() {
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).exec(1, p.log_path(), 0, 0);
        log.samples(1, 0x100, &[p.at("hot", 1)], 70_000);
        log.samples(1, 0x100, &[p.at("cold", 1)], 2);
        let gmons = profiles(&log);
        let g = &gmons[0];
        let (low, _) = code(&p);
        assert_eq!(g.histogram[((p.at("hot", 1) - low) / 16) as usize], 0xFFFF);
        assert_eq!((g.samples, g.saturated), (70_002, true));
        let mut map = Vec::new();
        write_gmon_map(&gmons, &mut map).unwrap();
        assert_eq!(
            String::from_utf8(map).unwrap(),
            format!(" \"{}\" => \"prog\" INSTR_RETIRED_ANY/70002*\n", p.log_path())
        );
    }

    #[test]
    fn events_get_their_own_files_and_pmcs_of_one_event_share_one() {
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY)
            .allocate(0x101, INSTR_RETIRED_ANY)
            .allocate(0x200, CPU_CLK_UNHALTED_CORE)
            .exec(1, p.log_path(), 0, 0);
        log.samples(1, 0x100, &[p.at("hot", 1)], 2);
        log.samples(1, 0x200, &[p.at("hot", 1)], 5);
        log.samples(1, 0x101, &[p.at("hot", 1)], 3);
        let gmons = profiles(&log);
        let files: Vec<(String, u64)> =
            gmons.iter().map(|g| (g.relative_path().display().to_string(), g.samples)).collect();
        assert_eq!(
            files,
            [
                ("INSTR_RETIRED_ANY/prog.gmon".to_owned(), 5),
                ("CPU_CLK_UNHALTED_CORE/prog.gmon".to_owned(), 5)
            ]
        );
        let mut map = Vec::new();
        write_gmon_map(&gmons, &mut map).unwrap();
        assert_eq!(
            String::from_utf8(map).unwrap(),
            format!(
                " \"{}\" => \"prog\" INSTR_RETIRED_ANY/5 CPU_CLK_UNHALTED_CORE/5\n",
                p.log_path()
            )
        );
        let dir = tempfile::tempdir().unwrap();
        write_gmon_files(&gmons, dir.path(), GmonHeader::Gnu, |path, bytes| {
            std::fs::write(path, bytes)
        })
        .unwrap();
        for g in &gmons {
            let bytes = std::fs::read(dir.path().join(g.relative_path())).unwrap();
            assert_eq!(bytes, g.to_bytes(GmonHeader::Gnu).unwrap());
        }
    }

    #[test]
    fn unreadable_images_and_arcs_between_images_are_left_out() {
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).exec(1, p.log_path(), 0, 0);
        log.map_in(1, 0x1000_0000, "/nonexistent/libx.so");
        // libx ← hot ← main: the library has no file, and the arc hot → libx crosses images.
        log.samples(1, 0x100, &[0x1000_0040, p.at("hot", 3), p.at("main", 5)], 3);
        let gmons = profiles(&log);
        assert_eq!(gmons.len(), 1, "{gmons:?}");
        let g = &gmons[0];
        assert_eq!(&*g.image, p.log_path());
        assert_eq!((g.samples, g.histogram.iter().map(|&n| u64::from(n)).sum::<u64>()), (0, 0));
        assert_eq!(
            g.arcs,
            [CallArc { from_pc: p.at("main", 5), self_pc: p.at("hot", 0), count: 3 }]
        );
    }

    #[test]
    fn an_event_name_with_a_slash_stays_one_directory() {
        let g = GmonProfile {
            event: "a/b".into(),
            image: Arc::from("/x/prog"),
            sample_name: "prog".into(),
            low_pc: 0,
            high_pc: 0,
            histogram: Vec::new(),
            arcs: Vec::new(),
            samples: 0,
            saturated: false,
            profile_rate: 1,
        };
        assert_eq!(g.relative_path(), PathBuf::from("a_b/prog.gmon"));
    }
}
