//! Reading a log into a [`Profile`]: which images each process has mapped where, which PMC each
//! sample belongs to, and each sample's call chain resolved to functions.

mod budget;
pub(crate) mod frame;
pub(crate) mod timeline;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pmclog::{Callchain, EventNames, MultipartKind, Record, Records, StaticEventNames};

use self::frame::{Frame, FrameId, Location};
use self::timeline::Timeline;
use crate::error::AnalysisError;
use crate::symbols::address_space::{AddressSpace, Mapping, Place, USER_END};
use crate::symbols::debuginfo::DebugSearch;
use crate::symbols::demangle::demangle;
use crate::symbols::image::Image;
use crate::symbols::jitmap;
use crate::symbols::kallsyms;
use crate::symbols::lines::SourceFrame;
use crate::text::one_line;

/// How program counters are turned into functions (pmcstat's `-r`, `-I` and `-A`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolveOptions {
    /// `-r fsroot`: look executables up under this directory instead of `/`. The log's path names
    /// are still the ones printed.
    pub fsroot: Option<PathBuf>,
    /// `-I`: keep the offset of each program counter inside its function, so that different
    /// addresses in one function are different frames, printed `name+0x1a`.
    pub show_offsets: bool,
    /// `-A`: do not resolve symbols; every frame is its address (in the image's link-time
    /// addresses), printed `0x…`.
    pub raw_addresses: bool,
    /// `-i lwp`: only the samples of this thread.
    pub thread: Option<i32>,
    /// Where separate debug files are looked for (images without a symbol table of their own).
    pub debug: DebugSearch,
    /// Read source positions (file, line, inlined functions) from DWARF for every sampled
    /// address ([`Profile::source`]): for the outputs that show them (`-F`, `--pprof`).
    pub lines: bool,
    /// Keep only the stacks of frames ([`PmcProfile::stacks`]), not those of exact program
    /// counters ([`PmcProfile::location_stacks`] is then empty): enough for `-G`, `--folded`,
    /// `--flamegraph` and `--top`, in a quarter of the memory.
    pub frames_only: bool,
    /// The most memory, in bytes, the profile's own tables (frames and stacks) may take; `None`
    /// is [`DEFAULT_TABLE_BUDGET`]. Beyond it the rarest stacks are folded into one
    /// [`OTHER_FRAME`] stack per PMC, and [`Profile::overflow`] says so.
    pub table_budget: Option<u64>,
    /// Also keep every sample on its own, in log order, with its process, thread and time
    /// ([`Profile::timeline`]): for the outputs that show time and threads (`--firefox`).
    pub timeline: bool,
}

/// The default of [`ResolveOptions::table_budget`]: 1 GiB.
pub const DEFAULT_TABLE_BUDGET: u64 = 1 << 30;

/// The name (symbol and image) of the frame that stands for the stacks the profile dropped
/// to stay within its memory budget.
pub const OTHER_FRAME: &str = "[other]";

/// Start of the upper (kernel) half of the x86-64 address space.
const KERNEL_HALF: u64 = 0xffff_8000_0000_0000;

/// The image name of frames in kernel addresses that no mapping covers.
pub const KERNEL_IMAGE: &str = "kernel";
/// The image name of frames in user addresses that no mapping covers.
pub const UNKNOWN_IMAGE: &str = "[unknown]";

/// The samples of one PMC.
#[derive(Debug, Clone)]
pub struct PmcProfile {
    pmcid: u32,
    name: String,
    rate: u64,
    samples: u64,
    stacks: Vec<(Vec<FrameId>, u64)>,
    locations: Vec<(Vec<Location>, u64)>,
    folded: u64,
}

impl PmcProfile {
    /// The PMC id from the log.
    pub fn pmcid(&self) -> u32 {
        self.pmcid
    }

    /// The event name (`INSTR_RETIRED_ANY`, `CLOCK.PROF`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sampling rate the PMC was allocated with (0 when not known).
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// The time between two samples in nanoseconds, for clock events (the Linux host's
    /// `cpu-clock` and `task-clock`, whose rate is in nanoseconds, [`pmc::host::CLOCK_EVENTS`]);
    /// `None` for events that do not count time.
    pub fn clock_period_ns(&self) -> Option<u64> {
        pmc::host::CLOCK_EVENTS
            .iter()
            .any(|clock| clock.eq_ignore_ascii_case(&self.name))
            .then(|| self.rate.max(1))
    }

    /// Samples with at least one program counter.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Samples whose stacks were folded into the [`OTHER_FRAME`] stack because the profile's
    /// tables reached their budget (see [`Profile::overflow`]); 0 normally.
    pub fn folded_samples(&self) -> u64 {
        self.folded
    }

    /// The distinct call stacks, each innermost frame first (the sampled function, then its
    /// callers), with how many samples had it. Sorted by frame ids.
    pub fn stacks(&self) -> impl Iterator<Item = (&[FrameId], u64)> + '_ {
        self.stacks.iter().map(|(frames, count)| (frames.as_slice(), *count))
    }

    /// The distinct call stacks of exact program counters, innermost first, with how many
    /// samples had it; sorted. [`PmcProfile::stacks`] is these stacks with each location
    /// replaced by its frame (and equal stacks merged).
    pub fn location_stacks(&self) -> impl Iterator<Item = (&[Location], u64)> + '_ {
        self.locations.iter().map(|(locations, count)| (locations.as_slice(), *count))
    }
}

/// What a log's INITIALIZE record says about the machine and the time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogInfo {
    /// `kern.hwpmc.cpuid`.
    pub cpuid: String,
    /// `enum pmc_cputype`.
    pub cpu_type: u32,
    /// The TSC frequency in Hz (0 if unknown).
    pub tsc_freq: u64,
    /// Wall-clock time when the log was configured, in nanoseconds since the epoch.
    pub start_time_ns: i128,
    /// The first and last TSC values of CALLCHAIN records.
    pub tsc_range: Option<(u64, u64)>,
}

/// A log read by [`Profile::from_reader_with_names`].
#[derive(Debug)]
pub struct ReadLog {
    /// Every record up to the end of the log, or up to the first bad one.
    pub profile: Profile,
    /// Why the reading stopped before the end of the log, if it did.
    pub error: Option<AnalysisError>,
    /// Whether the log ended with CLOSELOG (else the run that wrote it did not finish).
    pub closed: bool,
    /// Byte offset of the end of the last record read.
    pub end_offset: u64,
}

/// A log's samples, aggregated per PMC and resolved to functions.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    frames: Vec<Frame>,
    pmcs: Vec<PmcProfile>,
    dropped_notices: u64,
    empty_samples: u64,
    records: u64,
    info: LogInfo,
    unreadable_images: Vec<(String, String)>,
    images: HashMap<Arc<str>, ImageInfo>,
    sources: HashMap<(Arc<str>, u64), Arc<[SourceFrame]>>,
    main_image: Option<Arc<str>>,
    threads: std::collections::BTreeSet<i32>,
    overflow: Option<Overflow>,
    timeline: Option<Timeline>,
}

/// How a profile whose tables reached their memory budget was degraded: the rarest stacks
/// (fewest samples so far) were dropped, each time the tables were full, and their samples
/// counted in one [`OTHER_FRAME`] stack per PMC. A stack dropped and seen again later has only
/// its later samples under its own name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow {
    /// The budget, in bytes ([`ResolveOptions::table_budget`]).
    pub budget: u64,
    /// Samples counted under [`OTHER_FRAME`], over all PMCs.
    pub samples: u64,
    /// Distinct stacks dropped (a stack dropped twice counts twice).
    pub stacks: u64,
    /// How many times the tables were pruned.
    pub prunes: u64,
}

/// What the profile knows of an image it could read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// The executable code, in link-time addresses (see [`Profile::text_range`]).
    pub text: Range<u64>,
    /// The file offset of `text.start`, from the image's `PT_LOAD` headers (LLD and mold place
    /// segments at addresses that differ from their file offsets by more than a constant).
    pub text_offset: u64,
    /// The build ID (`NT_GNU_BUILD_ID`), in hex.
    pub build_id: Option<String>,
}

impl Profile {
    /// Reads the whole log in `bytes`. PMC names come from PMCALLOCATE (FreeBSD's static event
    /// names) and PMCALLOCATEDYN records.
    pub fn from_log(bytes: &[u8], opts: &ResolveOptions) -> Result<Profile, AnalysisError> {
        Profile::from_log_with_names(bytes, opts, &StaticEventNames)
    }

    /// Reads the whole log in `bytes`, naming PMU-table events (`PMC_F_EV_PMU`) with `names`.
    pub fn from_log_with_names(
        bytes: &[u8],
        opts: &ResolveOptions,
        names: &dyn EventNames,
    ) -> Result<Profile, AnalysisError> {
        let mut builder = Builder::new(opts, names);
        for entry in Records::new(bytes) {
            let entry = entry.map_err(|e| AnalysisError::decode(e, builder.records + 1))?;
            builder.record(&entry.record, entry.tsc);
        }
        Ok(builder.finish())
    }

    /// Reads a log from `input` (a file, a pipe) through [`pmclog::LogReader`]'s bounded window:
    /// the memory it takes is that of the profile, whatever the log's size. A malformed log, or
    /// one that ends inside a record, ends the reading there: the profile holds every record
    /// before the bad one, and [`ReadLog::error`] says what was wrong and where. Fails only if
    /// `input` cannot be read.
    pub fn from_reader_with_names<R: std::io::Read>(
        input: R,
        opts: &ResolveOptions,
        names: &dyn EventNames,
    ) -> std::io::Result<ReadLog> {
        Profile::window_from_reader(input, opts, names, None)
    }

    /// [`Profile::from_reader_with_names`] keeping only the samples whose timestamp (TSC) is in
    /// `tsc`: one window of a log, as `pmcstat -R log --push` cuts it. Every other record
    /// (mappings, PMCs) is read as usual, so that the window's samples resolve as they would in
    /// the whole log; [`LogInfo::tsc_range`] is then the span of the window's samples.
    pub fn window_from_reader<R: std::io::Read>(
        input: R,
        opts: &ResolveOptions,
        names: &dyn EventNames,
        tsc: Option<Range<u64>>,
    ) -> std::io::Result<ReadLog> {
        let mut builder = Builder::new(opts, names);
        builder.tsc_window = tsc;
        let mut reader = pmclog::LogReader::new(input);
        let mut closed = false;
        let error = loop {
            match reader.next_entry() {
                Ok(Some(entry)) => {
                    closed = matches!(entry.record, Record::CloseLog);
                    builder.record(&entry.record, entry.tsc);
                }
                Ok(None) => break None,
                Err(pmclog::ReadError::Io(e)) => return Err(e),
                Err(pmclog::ReadError::Decode(e)) => {
                    break Some(AnalysisError::decode(e, builder.records + 1));
                }
            }
        };
        let end_offset = reader.offset();
        Ok(ReadLog { profile: builder.finish(), error, closed, end_offset })
    }

    /// Every frame the stacks refer to; index with [`FrameId::index`].
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// The frame `id`.
    pub fn frame(&self, id: FrameId) -> &Frame {
        &self.frames[id.index()]
    }

    /// The PMCs that have samples or were allocated, in the order the log introduced them.
    pub fn pmcs(&self) -> &[PmcProfile] {
        &self.pmcs
    }

    /// Samples per PMC name, in the order the names first appear. PMCs with the same name (a
    /// system-mode PMC is one PMC per CPU) are added together.
    pub fn sample_counts(&self) -> Vec<(String, u64)> {
        let mut counts: Vec<(String, u64)> = Vec::new();
        for pmc in &self.pmcs {
            match counts.iter_mut().find(|(name, _)| *name == pmc.name) {
                Some((_, n)) => *n += pmc.samples,
                None => counts.push((pmc.name.clone(), pmc.samples)),
            }
        }
        counts
    }

    /// All samples of all PMCs.
    pub fn total_samples(&self) -> u64 {
        self.pmcs.iter().map(|p| p.samples).sum()
    }

    /// DROPNOTIFY records: each says the kernel lost samples because its buffers were full.
    pub fn dropped_notices(&self) -> u64 {
        self.dropped_notices
    }

    /// CALLCHAIN records with no program counter (or an IBS record without an address); they
    /// are not counted as samples.
    pub fn empty_samples(&self) -> u64 {
        self.empty_samples
    }

    /// Records read.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// What INITIALIZE said, and the span of the samples' timestamps.
    pub fn info(&self) -> &LogInfo {
        &self.info
    }

    /// Images named in the log that could not be read as ELF files, with the reason; their
    /// frames stay unresolved.
    pub fn unreadable_images(&self) -> &[(String, String)] {
        &self.unreadable_images
    }

    /// The executable code of the image named `image` (as [`Frame::image`] names it), in its
    /// link-time addresses: from the lowest to the end of the highest `SHF_EXECINSTR` section,
    /// as FreeBSD's pmcstat delimits an image's gmon histogram. `None` for images that could not
    /// be read (and for [`KERNEL_IMAGE`] and [`UNKNOWN_IMAGE`]): their addresses are run-time
    /// addresses.
    pub fn text_range(&self, image: &str) -> Option<Range<u64>> {
        self.images.get(image).map(|info| info.text.clone())
    }

    /// What is known of the image named `image`, if it could be read and has code.
    pub fn image_info(&self, image: &str) -> Option<&ImageInfo> {
        self.images.get(image)
    }

    /// The program the log's first PROCEXEC started (the measured command), as images are
    /// named.
    pub fn main_image(&self) -> Option<&Arc<str>> {
        self.main_image.as_ref()
    }

    /// The source frames of a sampled location, innermost first (an inlined function's line,
    /// then the line of the function it was inlined into); empty when the profile was read
    /// without [`ResolveOptions::lines`] or the image has no line information.
    pub fn source(&self, location: &Location) -> &[SourceFrame] {
        let at = location.address.wrapping_sub(u64::from(location.return_address));
        self.source_in(&self.frame(location.frame).image, at)
    }

    /// The source frames at `address` (a link-time address) of the image named `image`.
    pub fn source_in(&self, image: &Arc<str>, address: u64) -> &[SourceFrame] {
        self.sources.get(&(image.clone(), address)).map_or(&[], |frames| frames)
    }

    /// The threads with samples in the log (all of them, also with [`ResolveOptions::thread`]).
    pub fn threads(&self) -> &std::collections::BTreeSet<i32> {
        &self.threads
    }

    /// Whether the profile's tables reached their memory budget, and what was folded into
    /// [`OTHER_FRAME`] stacks then; `None` when every stack is there under its own name.
    pub fn overflow(&self) -> Option<Overflow> {
        self.overflow
    }

    /// Every sample in log order with its process, thread and time, when read with
    /// [`ResolveOptions::timeline`].
    pub fn timeline(&self) -> Option<&Timeline> {
        self.timeline.as_ref()
    }

    /// Whether any sampled address has a source position.
    pub fn has_sources(&self) -> bool {
        self.sources.values().any(|frames| !frames.is_empty())
    }
}

#[derive(Debug, Default)]
struct PmcBuild {
    pmcid: u32,
    name: String,
    rate: u64,
    samples: u64,
    /// Stacks of exact program counters (unless [`ResolveOptions::frames_only`]).
    stacks: HashMap<Box<[Location]>, u64>,
    /// Stacks of frames, with [`ResolveOptions::frames_only`].
    frame_stacks: HashMap<Box<[FrameId]>, u64>,
    /// Samples of stacks dropped to stay within the budget.
    folded: u64,
}

/// How a frame is told apart from others: image, address, and whether the address is a
/// function's start (resolved), an exact address in a function (`-I`), or unresolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FrameKey {
    image: u32,
    address: u64,
    kind: u8,
}

struct Builder<'a> {
    opts: &'a ResolveOptions,
    names: &'a dyn EventNames,
    cpuid: Vec<u8>,
    images: HashMap<Vec<u8>, Option<Arc<Image>>>,
    image_names: Vec<Arc<str>>,
    image_ids: HashMap<Arc<str>, u32>,
    processes: HashMap<i32, AddressSpace>,
    kernel: AddressSpace,
    /// Per process: its JIT map file's functions (`/tmp/perf-PID.map`), read the first time a
    /// program counter of the process is in no image.
    jit_maps: HashMap<i32, Option<Arc<Image>>>,
    /// Per process: the jitdump files (`jit-PID.dump`) its MAP_IN records name.
    jit_dumps: HashMap<i32, Vec<PathBuf>>,
    frames: Vec<Frame>,
    frame_ids: HashMap<FrameKey, FrameId>,
    /// Resolved program counters, valid while their generation is [`Builder::generation`].
    cache: HashMap<(i32, bool, u64, bool), (u64, Location)>,
    /// Changed with every mapping, so that the cache forgets without being cleared (clearing
    /// a large table at each of a JIT's MAP_IN records costs more than the records).
    generation: u64,
    pmcs: Vec<PmcBuild>,
    pmc_index: HashMap<u32, usize>,
    dropped_notices: u64,
    empty_samples: u64,
    records: u64,
    info: LogInfo,
    unreadable_images: Vec<(String, String)>,
    /// Per (image name, link-time address): its source frames, with [`ResolveOptions::lines`].
    sources: HashMap<(u32, u64), Arc<[SourceFrame]>>,
    main_image: Option<u32>,
    threads: std::collections::BTreeSet<i32>,
    /// What the frames and stacks take, as [`budget`] estimates it.
    table_bytes: u64,
    budget: u64,
    overflow: Option<Overflow>,
    timeline: Option<Timeline>,
    /// Only the samples with a timestamp in this range ([`Profile::window_from_reader`]).
    tsc_window: Option<Range<u64>>,
}

impl<'a> Builder<'a> {
    fn new(opts: &'a ResolveOptions, names: &'a dyn EventNames) -> Self {
        Builder {
            opts,
            names,
            cpuid: Vec::new(),
            images: HashMap::new(),
            image_names: Vec::new(),
            image_ids: HashMap::new(),
            processes: HashMap::new(),
            kernel: AddressSpace::default(),
            jit_maps: HashMap::new(),
            jit_dumps: HashMap::new(),
            frames: Vec::new(),
            frame_ids: HashMap::new(),
            cache: HashMap::new(),
            generation: 0,
            pmcs: Vec::new(),
            pmc_index: HashMap::new(),
            dropped_notices: 0,
            empty_samples: 0,
            records: 0,
            info: LogInfo::default(),
            unreadable_images: Vec::new(),
            sources: HashMap::new(),
            main_image: None,
            threads: std::collections::BTreeSet::new(),
            table_bytes: 0,
            budget: opts.table_budget.unwrap_or(DEFAULT_TABLE_BUDGET),
            overflow: None,
            timeline: opts
                .timeline
                .then(|| Timeline::new(opts.table_budget.unwrap_or(DEFAULT_TABLE_BUDGET))),
            tsc_window: None,
        }
    }

    fn record(&mut self, record: &Record<'_>, tsc: u64) {
        self.records += 1;
        if let Some(timeline) = &mut self.timeline {
            timeline.record(record, tsc);
        }
        match record {
            Record::Initialize(init) => {
                self.cpuid = init.cpuid.to_vec();
                self.info.cpuid = String::from_utf8_lossy(init.cpuid).into_owned();
                self.info.cpu_type = init.cpu_type;
                self.info.tsc_freq = init.tsc_freq;
                self.info.start_time_ns =
                    i128::from(init.time_sec) * 1_000_000_000 + i128::from(init.time_nsec);
            }
            Record::DropNotify => self.dropped_notices += 1,
            Record::PmcAllocate(a) => {
                let name = if a.flags & pmclog::names::PMC_F_EV_PMU != 0 {
                    self.names.pmu_event(&self.cpuid, a.event)
                } else {
                    self.names.static_event(a.event)
                };
                let name =
                    name.map_or_else(|| format!("(unknown event {:#x})", a.event), str::to_owned);
                self.allocate(a.pmcid, name, a.rate);
            }
            Record::PmcAllocateDyn(a) => {
                let name = String::from_utf8_lossy(a.name).into_owned();
                let name =
                    if name.is_empty() { format!("(unknown event {:#x})", a.event) } else { name };
                self.allocate(a.pmcid, name, a.rate);
            }
            Record::ProcExec(exec) => self.exec(exec.pid, exec.path, exec.base_addr, exec.dyn_addr),
            Record::MapIn(map) => {
                if jitmap::is_dump(map.path) {
                    let dump = file_path(self.opts.fsroot.as_deref(), map.path);
                    self.jit_dumps.entry(map.pid).or_default().push(dump);
                    // Read again with this file the next time the process's JIT code is named.
                    self.jit_maps.remove(&map.pid);
                }
                let name = self.image_name(&String::from_utf8_lossy(map.path));
                let pending = Some(Arc::from(map.path));
                let place = Place::FileBase(map.start);
                let mapping =
                    Mapping { lo: map.start, hi: None, place, name, image: None, pending };
                self.add_mapping(map.pid, mapping);
            }
            Record::MapOut(map) => {
                let maps = if map.pid == -1 {
                    &mut self.kernel
                } else {
                    self.processes.entry(map.pid).or_default()
                };
                maps.unmap(map.start, map.end);
                self.generation += 1;
            }
            Record::ProcFork(fork) => {
                let maps = self.processes.get(&fork.old_pid).cloned().unwrap_or_default();
                self.processes.insert(fork.new_pid, maps);
                self.generation += 1;
            }
            Record::Callchain(cc) => self.sample(cc, tsc),
            _ => {}
        }
    }

    fn allocate(&mut self, pmcid: u32, name: String, rate: u64) {
        if let Some(&i) = self.pmc_index.get(&pmcid) {
            if self.pmcs[i].name == name {
                return;
            }
            if self.pmcs[i].samples == 0 {
                self.pmcs[i].name = name;
                self.pmcs[i].rate = rate;
                return;
            }
        }
        self.pmc_index.insert(pmcid, self.pmcs.len());
        self.pmcs.push(PmcBuild { pmcid, name, rate, ..PmcBuild::default() });
    }

    fn pmc(&mut self, pmcid: u32) -> &mut PmcBuild {
        let index = self.pmc_position(pmcid);
        &mut self.pmcs[index]
    }

    /// The index in `pmcs` of the PMC `pmcid` (added if the log did not allocate it).
    fn pmc_position(&mut self, pmcid: u32) -> usize {
        match self.pmc_index.get(&pmcid) {
            Some(&i) => i,
            None => {
                let name = format!("(unallocated pmc {pmcid:#x})");
                self.pmc_index.insert(pmcid, self.pmcs.len());
                self.pmcs.push(PmcBuild { pmcid, name, ..PmcBuild::default() });
                self.pmcs.len() - 1
            }
        }
    }

    /// The image file behind a path from the log (read once per path).
    fn image(&mut self, path: &[u8]) -> Option<Arc<Image>> {
        if let Some(image) = self.images.get(path) {
            return image.clone();
        }
        let file = file_path(self.opts.fsroot.as_deref(), path);
        let simulated = || {
            let path = std::str::from_utf8(path).ok()?;
            Image::from_symbols(pmc::host::sim::symbols(path)?)
        };
        if path == pmc::host::KERNEL_SYMBOLS.as_bytes() {
            // The Linux host's kernel pseudo-mapping: a text symbol table, not an ELF file.
            let image = kallsyms::read(&file).and_then(Image::from_kallsyms);
            if image.is_none() {
                let why =
                    "no kernel text symbols with addresses (kernel.kptr_restrict?)".to_owned();
                self.unreadable_images.push((String::from_utf8_lossy(path).into_owned(), why));
            }
            let image = image.map(Arc::new);
            self.images.insert(path.to_vec(), image.clone());
            return image;
        }
        if jitmap::is_dump(path) {
            // A jitdump file is mapped only to tell profilers where it is: no ELF image.
            self.images.insert(path.to_vec(), None);
            return None;
        }
        let image = match Image::load_with(&file, self.opts.fsroot.as_deref(), &self.opts.debug) {
            Ok(image) => Some(Arc::new(image)),
            // A program of the simulated machine: no file, but libpmc knows its functions.
            Err(_) if simulated().is_some() => simulated().map(Arc::new),
            Err(reason) => {
                self.unreadable_images.push((String::from_utf8_lossy(path).into_owned(), reason));
                None
            }
        };
        self.images.insert(path.to_vec(), image.clone());
        image
    }

    fn image_name(&mut self, name: &str) -> u32 {
        // Names go into line-based reports: a control character (a newline in a path the log
        // names) is written escaped, so that it cannot start a forged line.
        let name = one_line(name);
        if let Some(&id) = self.image_ids.get(name.as_ref()) {
            return id;
        }
        let id = self.image_names.len() as u32;
        let name: Arc<str> = Arc::from(name.as_ref());
        self.image_names.push(name.clone());
        self.image_ids.insert(name, id);
        id
    }

    /// The mapping of the image at `path` placed at `place` (an `ET_EXEC` image is at its
    /// link-time addresses wherever the record says it is).
    fn mapping(&mut self, path: &[u8], place: Place) -> Mapping {
        let name = self.image_name(&String::from_utf8_lossy(path));
        let image = self.image(path);
        let Some(img) = &image else {
            let (Place::Moved(lo) | Place::FileBase(lo)) = place;
            return Mapping { lo, hi: None, place, name, image, pending: None };
        };
        let (lo, reach) = match place {
            Place::Moved(bias) => (bias.wrapping_add(img.link_base), img.span),
            Place::FileBase(base) => (base, img.file_span()),
        };
        if img.fixed && lo >= img.link_base && lo < img.link_base + img.span {
            let (lo, hi) = (img.link_base, Some(img.link_base + img.span));
            return Mapping { lo, hi, place: Place::Moved(0), name, image, pending: None };
        }
        Mapping { lo, hi: Some(lo.saturating_add(reach)), place, name, image, pending: None }
    }

    fn add_mapping(&mut self, pid: i32, mapping: Mapping) {
        let maps =
            if pid == -1 { &mut self.kernel } else { self.processes.entry(pid).or_default() };
        maps.insert(mapping);
        self.generation += 1;
    }

    /// PROCEXEC: a new address space with the executable at `dyn_addr` (its PIE load base; an
    /// `ET_EXEC` image at its link-time addresses) and, for a dynamically linked executable, the
    /// run-time linker at `base_addr` (AT_BASE) when that is not 0, as pmcstat does.
    fn exec(&mut self, pid: i32, path: &[u8], base_addr: u64, dyn_addr: u64) {
        if self.main_image.is_none() {
            self.main_image = Some(self.image_name(&String::from_utf8_lossy(path)));
        }
        self.processes.insert(pid, AddressSpace::default());
        self.generation += 1;
        let image = self.image(path);
        let bias = match &image {
            Some(img) if img.fixed => 0,
            // No PIE is loaded at 0: a zero `pl_dyn` (as Linux hosts write) leaves the placing
            // to the MAP_IN records that follow.
            _ if dyn_addr == 0 => return,
            _ => dyn_addr,
        };
        let mapping = self.mapping(path, Place::Moved(bias));
        self.add_mapping(pid, mapping);
        if let Some(interp) = image.as_ref().and_then(|img| img.interp.clone()) {
            if base_addr != 0 {
                let mapping = self.mapping(&interp, Place::Moved(base_addr));
                self.add_mapping(pid, mapping);
            }
        }
    }

    fn sample(&mut self, cc: &Callchain<'_>, tsc: u64) {
        if self.tsc_window.as_ref().is_some_and(|window| !window.contains(&tsc)) {
            return;
        }
        self.threads.insert(cc.tid);
        if self.opts.thread.is_some_and(|tid| tid != cc.tid) {
            return;
        }
        let pcs: Vec<u64> = match cc.multipart() {
            None => cc.pcs.iter().collect(),
            Some(Ok(parts)) => {
                if let Some(chain) = parts.callchain() {
                    chain.words.iter().collect()
                } else {
                    // An IBS sample without a call chain: the op's RIP, or the fetch address.
                    parts
                        .parts()
                        .find_map(|p| match p.kind {
                            MultipartKind::IbsOp => p.words.get(1),
                            MultipartKind::IbsFetch => p.words.get(2),
                            _ => None,
                        })
                        .into_iter()
                        .collect()
                }
            }
            Some(Err(_)) => Vec::new(),
        };
        if pcs.is_empty() {
            self.empty_samples += 1;
            return;
        }
        self.info.tsc_range = Some(match self.info.tsc_range {
            None => (tsc, tsc),
            Some((lo, hi)) => (lo.min(tsc), hi.max(tsc)),
        });
        let user = cc.cpuflags.is_user();
        // Every program counter after the first is a return address, except the first user one
        // after kernel frames: where the thread entered the kernel (a fault's or an interrupt's
        // own instruction).
        let entry = |i: usize| pcs[i - 1] >= KERNEL_HALF && pcs[i] < USER_END;
        let calls: Vec<bool> = (0..pcs.len()).map(|i| i > 0 && !entry(i)).collect();
        let stack: Box<[Location]> = pcs
            .iter()
            .enumerate()
            .map(|(i, &pc)| self.resolve(cc.pid, user, i, pc, calls[i]))
            .collect();
        let frames_only = self.opts.frames_only;
        if self.timeline.is_some() {
            let pmc = self.pmc_position(cc.pmcid);
            if let Some(timeline) = &mut self.timeline {
                timeline.sample(pmc, cc.pid, cc.tid, tsc, stack.iter().map(|l| l.frame));
            }
        }
        let pmc = self.pmc(cc.pmcid);
        pmc.samples += 1;
        let added = if frames_only {
            let frames: Box<[FrameId]> = stack.iter().map(|l| l.frame).collect();
            budget::count_stack(&mut pmc.frame_stacks, frames)
        } else {
            budget::count_stack(&mut pmc.stacks, stack)
        };
        self.table_bytes += added;
        if self.table_bytes > self.budget {
            self.prune();
        }
    }

    /// Brings the tables back to half their budget: drops the stacks with the fewest samples
    /// (ties broken by their frames, so that the result does not depend on hashing), counts
    /// their samples as folded, and forgets the frames no stack left refers to.
    fn prune(&mut self) {
        let (target, frames) = (self.budget / 2, self.frames.len());
        let (kept, dropped) = if self.opts.frames_only {
            let tables = self.pmcs.iter_mut().map(|p| (&mut p.frame_stacks, &mut p.folded));
            budget::prune(tables, self.table_bytes, target, frames, |f| *f)
        } else {
            let tables = self.pmcs.iter_mut().map(|p| (&mut p.stacks, &mut p.folded));
            budget::prune(tables, self.table_bytes, target, frames, |l| l.frame)
        };
        let mut kept = kept;
        if let Some(timeline) = &self.timeline {
            timeline.keep_frames(&mut kept);
        }
        // Renumber the frames still referred to.
        let mut renumber = vec![u32::MAX; self.frames.len()];
        let mut next = 0u32;
        for (old, keep) in kept.iter().enumerate() {
            if *keep {
                renumber[old] = next;
                next += 1;
            }
        }
        let mut old = 0;
        self.frames.retain(|_| {
            old += 1;
            kept[old - 1]
        });
        self.frame_ids.retain(|_, id| {
            let new = renumber[id.index()];
            *id = FrameId::new(new);
            new != u32::MAX
        });
        self.frame_ids.shrink_to_fit();
        self.frames.shrink_to_fit();
        let map = |id: FrameId| FrameId::new(renumber[id.index()]);
        if let Some(timeline) = &mut self.timeline {
            timeline.renumber(map);
        }
        for pmc in &mut self.pmcs {
            let frame_stacks = std::mem::take(&mut pmc.frame_stacks);
            pmc.frame_stacks = budget::renumber(frame_stacks, |f| map(*f));
            let stacks = std::mem::take(&mut pmc.stacks);
            pmc.stacks = budget::renumber(stacks, |l| Location { frame: map(l.frame), ..*l });
        }
        // Its locations name frames by their old numbers.
        self.cache = HashMap::new();
        // Source positions only of the addresses the kept stacks still have.
        if !self.sources.is_empty() {
            let mut kept = std::collections::HashSet::new();
            for pmc in &self.pmcs {
                for location in pmc.stacks.keys().flat_map(|stack| stack.iter()) {
                    let image = &self.frames[location.frame.index()].image;
                    if let Some(&id) = self.image_ids.get(image) {
                        kept.insert((id, location.address));
                    }
                }
            }
            self.sources.retain(|key, _| kept.contains(key));
            self.sources.shrink_to_fit();
        }
        self.table_bytes = self.frames.iter().map(budget::frame_bytes).sum::<u64>()
            + self.pmcs.iter().map(|p| budget::table_bytes(&p.stacks)).sum::<u64>()
            + self.pmcs.iter().map(|p| budget::table_bytes(&p.frame_stacks)).sum::<u64>()
            + self.sources.values().map(|frames| budget::source_bytes(frames)).sum::<u64>();
        let samples = self.pmcs.iter().map(|p| p.folded).sum();
        let overflow = self.overflow.get_or_insert(Overflow {
            budget: self.budget,
            samples: 0,
            stacks: 0,
            prunes: 0,
        });
        overflow.prunes += 1;
        overflow.stacks += dropped;
        overflow.samples = samples;
    }

    /// The frame and link-time address of `pc`, the `index`-th program counter of a sample of
    /// `pid` taken in user (`user`) or kernel mode. Kernel-mode samples look in the kernel's
    /// mappings first and then in the process's (a chain that runs on into user space),
    /// user-mode ones only in the process's.
    fn resolve(&mut self, pid: i32, user: bool, index: usize, pc: u64, call: bool) -> Location {
        match self.cache.get(&(pid, user, pc, call)) {
            Some(&(generation, location)) if generation == self.generation => return location,
            _ => {}
        }
        if !user {
            self.settle(None, pc, false);
        }
        self.settle(Some(pid), pc, true);
        let empty = AddressSpace::default();
        let process = self.processes.get(&pid).unwrap_or(&empty);
        let mapping = if user {
            process.find(pc, true)
        } else {
            self.kernel.find(pc, false).or_else(|| process.find(pc, true))
        };
        // User code in no image (JIT compilers' code is in anonymous memory, which perf reports
        // as `//anon`): named by the process's JIT map file, if it has one.
        let in_no_image = pc < USER_END && pid > 0 && mapping.is_none_or(|m| m.image.is_none());
        let jit = if in_no_image { self.jit_symbol(pid, pc) } else { None };
        let empty = AddressSpace::default();
        let process = self.processes.get(&pid).unwrap_or(&empty);
        let mapping = match jit {
            Some(_) => None,
            None if user => process.find(pc, true),
            None => self.kernel.find(pc, false).or_else(|| process.find(pc, true)),
        };
        let mut address = pc;
        let (image_name, key, symbol, offset) = match mapping {
            Some(m) => {
                let image_name = m.name;
                match &m.image {
                    Some(image) => {
                        let link = match m.place {
                            Place::Moved(bias) => pc.wrapping_sub(bias),
                            Place::FileBase(base) => image.address_of_offset(pc.wrapping_sub(base)),
                        };
                        address = link;
                        if self.opts.lines {
                            let at = link.wrapping_sub(u64::from(call));
                            if let Entry::Vacant(entry) = self.sources.entry((image_name, at)) {
                                let frames: Arc<[SourceFrame]> = image.source_at(at).into();
                                self.table_bytes += budget::source_bytes(&frames);
                                entry.insert(frames);
                            }
                        }
                        match image.symbol_at(link).filter(|_| !self.opts.raw_addresses) {
                            Some(sym) if self.opts.show_offsets => (
                                image_name,
                                FrameKey { image: image_name, address: link, kind: 2 },
                                Some(sym.name.clone()),
                                Some(link - sym.start),
                            ),
                            Some(sym) => (
                                image_name,
                                FrameKey { image: image_name, address: sym.start, kind: 1 },
                                Some(sym.name.clone()),
                                None,
                            ),
                            None => (
                                image_name,
                                FrameKey { image: image_name, address: link, kind: 0 },
                                None,
                                None,
                            ),
                        }
                    }
                    None => (
                        image_name,
                        FrameKey { image: image_name, address: pc, kind: 0 },
                        None,
                        None,
                    ),
                }
            }
            None if jit.is_some() => {
                let (image_name, sym) = jit.expect("matched");
                match self.opts.show_offsets {
                    true => (
                        image_name,
                        FrameKey { image: image_name, address: pc, kind: 2 },
                        Some(sym.name.clone()),
                        Some(pc - sym.start),
                    ),
                    false => (
                        image_name,
                        FrameKey { image: image_name, address: sym.start, kind: 1 },
                        Some(sym.name.clone()),
                        None,
                    ),
                }
            }
            None => {
                let kernel = pc >= KERNEL_HALF || (!user && (index == 0 || pc >= USER_END));
                let name = self.image_name(if kernel { KERNEL_IMAGE } else { UNKNOWN_IMAGE });
                (name, FrameKey { image: name, address: pc, kind: 0 }, None, None)
            }
        };
        let id = match self.frame_ids.get(&key) {
            Some(&id) => id,
            None => {
                let id = FrameId::new(self.frames.len() as u32);
                let frame = Frame {
                    image: self.image_names[image_name as usize].clone(),
                    symbol: symbol.map(|s| Arc::from(one_line(&demangle(&s)).as_ref())),
                    address: key.address,
                    offset,
                };
                self.table_bytes += budget::frame_bytes(&frame);
                self.frames.push(frame);
                self.frame_ids.insert(key, id);
                id
            }
        };
        let location = Location { frame: id, address, return_address: call };
        if self.cache.len() >= budget::CACHE_ENTRIES {
            self.cache.clear();
        }
        self.cache.insert((pid, user, pc, call), (self.generation, location));
        location
    }

    /// The mappings of process `pid` (`None`: the kernel's).
    fn maps_mut(&mut self, pid: Option<i32>) -> Option<&mut AddressSpace> {
        match pid {
            None => Some(&mut self.kernel),
            Some(pid) => self.processes.get_mut(&pid),
        }
    }

    /// Reads the images of the not-yet-read mappings that could cover `pc` (in `pid`'s
    /// mappings, or the kernel's for `None`), until the mapping that covers it, if any, is one
    /// whose image was read (or could not be): then the lookup sees the real extents.
    /// The function of process `pid`'s JIT map file at `pc`, and the file's image name.
    fn jit_symbol(&mut self, pid: i32, pc: u64) -> Option<(u32, crate::symbols::image::Symbol)> {
        let fsroot = self.opts.fsroot.as_deref();
        let dumps = self.jit_dumps.get(&pid).map_or(&[][..], Vec::as_slice);
        let map = self
            .jit_maps
            .entry(pid)
            .or_insert_with(|| jitmap::read(&jitmap::path(fsroot, pid), dumps).map(Arc::new))
            .clone()?;
        let symbol = map.symbol_at(pc)?;
        // Named after the file that names the code: the jitdump when there is one.
        let name = match self.jit_dumps.get(&pid).and_then(|d| d.first()) {
            Some(dump) => dump.to_string_lossy().into_owned(),
            None => format!("/tmp/perf-{pid}.map"),
        };
        Some((self.image_name(&name), symbol))
    }

    fn settle(&mut self, pid: Option<i32>, pc: u64, user_space: bool) {
        // Each pass reads one image: a mapping read may turn out not to cover `pc`, and then
        // the one below it is tried (mappings rarely overlap, so a few passes do).
        for _ in 0..=8 {
            let Some(maps) = self.maps_mut(pid) else { return };
            let Some((lo, place, path)) = maps.take_pending(pc, user_space) else { return };
            let real = self.mapping(&path, place);
            let Some(maps) = self.maps_mut(pid) else { return };
            maps.replace(lo, real);
            // Earlier look-ups may have resolved against the provisional extent.
            self.generation += 1;
        }
    }

    fn finish(mut self) -> Profile {
        // The stacks dropped to stay within the budget are one stack of one frame per PMC.
        let other = self.overflow.map(|_| {
            let name: Arc<str> = Arc::from(OTHER_FRAME);
            let frame = Frame { image: name.clone(), symbol: Some(name), address: 0, offset: None };
            self.frames.push(frame);
            FrameId::new(self.frames.len() as u32 - 1)
        });
        let pmcs = self
            .pmcs
            .into_iter()
            .map(|p| {
                let other = other.filter(|_| p.folded > 0);
                let mut locations: Vec<(Vec<Location>, u64)> =
                    p.stacks.into_iter().map(|(stack, n)| (stack.into_vec(), n)).collect();
                let mut stacks: Vec<(Vec<FrameId>, u64)> = if self.opts.frames_only {
                    let frames = p.frame_stacks.into_iter();
                    let mut stacks: Vec<_> = frames.map(|(s, n)| (s.into_vec(), n)).collect();
                    stacks.extend(other.map(|frame| (vec![frame], p.folded)));
                    stacks
                } else {
                    let at = |frame| Location { frame, address: 0, return_address: false };
                    locations.extend(other.map(|frame| (vec![at(frame)], p.folded)));
                    let mut frames: HashMap<Vec<FrameId>, u64> = HashMap::new();
                    for (stack, count) in &locations {
                        *frames.entry(stack.iter().map(|l| l.frame).collect()).or_default() +=
                            count;
                    }
                    frames.into_iter().collect()
                };
                locations.sort_unstable();
                stacks.sort_unstable();
                PmcProfile {
                    pmcid: p.pmcid,
                    name: p.name,
                    rate: p.rate,
                    samples: p.samples,
                    stacks,
                    locations,
                    folded: p.folded,
                }
            })
            .collect();
        let images = self
            .images
            .iter()
            .filter_map(|(path, image)| {
                let image = image.as_ref()?;
                let (start, end) = image.text?;
                let info = ImageInfo {
                    text: start..end,
                    text_offset: image.offset_of_address(start),
                    build_id: image.build_id.as_deref().map(crate::symbols::debuginfo::hex),
                };
                Some((Arc::from(one_line(&String::from_utf8_lossy(path)).as_ref()), info))
            })
            .collect();
        Profile {
            frames: self.frames,
            pmcs,
            dropped_notices: self.dropped_notices,
            empty_samples: self.empty_samples,
            records: self.records,
            info: self.info,
            unreadable_images: self.unreadable_images,
            images,
            main_image: self.main_image.map(|id| self.image_names[id as usize].clone()),
            threads: self.threads,
            overflow: self.overflow,
            timeline: self.timeline.map(|mut timeline| {
                timeline.finish();
                timeline
            }),
            sources: self
                .sources
                .into_iter()
                .map(|((image, address), frames)| {
                    ((self.image_names[image as usize].clone(), address), frames)
                })
                .collect(),
        }
    }
}

/// The file to read for a path from the log: under `fsroot` when given.
fn file_path(fsroot: Option<&Path>, path: &[u8]) -> PathBuf {
    let path = PathBuf::from(String::from_utf8_lossy(path).into_owned());
    match fsroot {
        Some(root) => root.join(path.strip_prefix("/").unwrap_or(&path)),
        None => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object, ObjectSection, ObjectSymbol};
    use pmclog::{MapOut, PmcAllocateDyn, ProcFork};
    use pmcprof_fixtures::{
        CPU_CLK_UNHALTED_CORE, INSTR_RETIRED_ANY, LogBuilder, Program, hot_warm_main,
    };

    fn profile(log: &LogBuilder, opts: &ResolveOptions) -> Profile {
        Profile::from_log(&log.bytes(), opts).unwrap()
    }

    /// Each stack of the first PMC as `name@image-basename` strings, with its count.
    fn stacks(profile: &Profile) -> Vec<(Vec<String>, u64)> {
        let mut out: Vec<(Vec<String>, u64)> = profile.pmcs()[0]
            .stacks()
            .map(|(frames, count)| {
                let names = frames
                    .iter()
                    .map(|&f| {
                        let frame = profile.frame(f);
                        format!("{}@{}", frame.name(), frame.image_basename())
                    })
                    .collect();
                (names, count)
            })
            .collect();
        out.sort();
        out
    }

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_window_keeps_only_the_samples_of_its_time_range() {
        let p = Program::build(false);
        // Records are 1000 ticks apart: INITIALIZE, PMCALLOCATE and PROCEXEC at 0 to 2000, the
        // six hot ← warm ← main samples at 3000 to 8000, then the four others.
        let bytes = hot_warm_main(&p).bytes();
        let window = |tsc| {
            let opts = ResolveOptions::default();
            Profile::window_from_reader(&bytes[..], &opts, &StaticEventNames, Some(tsc))
                .unwrap()
                .profile
        };
        let first = window(3000..9000);
        assert_eq!(stacks(&first), vec![(strings(&["hot@prog", "warm@prog", "main@prog"]), 6)]);
        assert_eq!(first.info().tsc_range, Some((3000, 8000)));
        assert_eq!(window(9000..13000).total_samples(), 4);
        assert_eq!(window(20000..30000).total_samples(), 0);
    }

    #[test]
    fn samples_resolve_to_functions_of_a_non_pie_executable() {
        let p = Program::build(false);
        let profile = profile(&hot_warm_main(&p), &ResolveOptions::default());
        assert_eq!(profile.sample_counts(), vec![("INSTR_RETIRED_ANY".to_owned(), 10)]);
        assert_eq!(profile.total_samples(), 10);
        assert_eq!(profile.pmcs()[0].pmcid(), 0x100);
        assert_eq!(profile.pmcs()[0].rate(), 65536);
        assert_eq!(
            stacks(&profile),
            vec![
                (strings(&["hot@prog", "main@prog"]), 1),
                (strings(&["hot@prog", "warm@prog", "main@prog"]), 6),
                (strings(&["warm@prog", "main@prog"]), 3),
            ]
        );
        let hot = profile.frames().iter().find(|f| f.name() == "hot").unwrap();
        assert_eq!(hot.address, p.functions["hot"].0);
        assert_eq!(&*hot.image, p.log_path());
        assert_eq!(profile.records(), 1 + 1 + 1 + 10);
        assert!(profile.unreadable_images().is_empty());
        assert_eq!(profile.info().cpuid, "GenuineIntel-6-55");
        assert_eq!(profile.info().start_time_ns, 1_000_000_000_005);
    }

    #[test]
    fn pie_mapped_at_a_nonzero_base_resolves() {
        let p = Program::build(true);
        let base = 0x5555_5555_4000;
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).map_in(200, base, p.log_path());
        log.samples(
            200,
            0x100,
            &[base + p.at("hot", 3), base + p.at("warm", 9), base + p.at("main", 17)],
            2,
        );
        // Outside the image's segments: not resolved.
        log.samples(200, 0x100, &[base - 0x10], 1);
        let profile = profile(&log, &ResolveOptions::default());
        assert_eq!(
            stacks(&profile),
            vec![
                (vec![format!("{:#x}@[unknown]", base - 0x10)], 1),
                (strings(&["hot@prog", "warm@prog", "main@prog"]), 2),
            ]
        );
        // The link-time address of the function, as `nm` prints it.
        let hot = profile.frames().iter().find(|f| f.name() == "hot").unwrap();
        assert_eq!(hot.address, p.functions["hot"].0);
    }

    /// The lowest `PT_LOAD` address minus its file offset: what an image's `.eh_frame` functions
    /// are named after when it has no symbols (`prog+0x…`).
    fn first_byte_address(path: &Path) -> u64 {
        use object::ObjectSegment;
        let data = std::fs::read(path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        file.segments().map(|s| s.address() - s.file_range().0).min().unwrap()
    }

    #[test]
    fn lld_and_mold_links_resolve_through_their_load_segments() {
        for linker in ["lld", "mold", "bfd"] {
            for (pie, stripped) in [(true, false), (true, true), (false, false), (false, true)] {
                let Some(p) = Program::build_linked(linker, pie, stripped) else { continue };
                let case = format!("{linker}, pie {pie}, stripped {stripped}");
                let bias = if pie { 0x5555_5555_0000 } else { 0 };
                let mut log = LogBuilder::new();
                let start = Program::map_in_start(&p.path, bias);
                log.allocate(0x100, INSTR_RETIRED_ANY).map_in(7, start, p.log_path());
                let middle = |name: &str| bias + p.at(name, p.functions[name].1 / 2);
                log.samples(7, 0x100, &[middle("hot"), middle("warm"), middle("main")], 1);
                let opts = ResolveOptions { lines: true, ..ResolveOptions::default() };
                let profile = profile(&log, &opts);
                let first_byte = first_byte_address(&p.path);
                let expected: Vec<String> = ["hot", "warm", "main"]
                    .iter()
                    .map(|name| match stripped {
                        false => format!("{name}@prog"),
                        true => format!("prog+{:#x}@prog", p.functions[*name].0 - first_byte),
                    })
                    .collect();
                assert_eq!(stacks(&profile), vec![(expected, 1)], "{case}");
                // Each frame is at the function's link-time address, as `nm` prints it.
                let (locations, _) = profile.pmcs()[0].location_stacks().next().unwrap();
                for (location, name) in locations.iter().zip(["hot", "warm", "main"]) {
                    let frame = profile.frame(location.frame);
                    assert_eq!(frame.address, p.functions[name].0, "{case}: {name}");
                    assert_eq!(location.address, middle(name) - bias, "{case}: {name}");
                    if !stripped {
                        let line = profile.source(location).first().map(|f| f.line);
                        assert_eq!(line, Some(p.line_of(location.address)), "{case}: {name}");
                    }
                }
            }
        }
    }

    #[test]
    fn every_function_of_a_rust_release_binary_resolves_to_its_own_symbol() {
        // rustc's default linker on x86_64 Linux is rust-lld: segments off their file offsets.
        let dir = tempfile::tempdir().unwrap();
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/programs/hot_rust.rs");
        let path = dir.path().join("hot_rust");
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let status = std::process::Command::new(rustc)
            .args(["-O", "-g", "--edition", "2021", "-o"])
            .arg(&path)
            .arg(&source)
            .status()
            .unwrap();
        assert!(status.success());
        let functions = pmcprof_fixtures::functions_of(&path);
        let mut sized: Vec<(String, u64, u64)> = functions
            .into_iter()
            .filter(|(_, (start, size))| *start != 0 && *size > 1)
            .map(|(name, (start, size))| (name, start, size))
            .collect();
        sized.sort_by_key(|f| f.1);
        assert!(sized.len() > 100, "{} functions", sized.len());
        let bias = 0x5600_0000_0000;
        let start = Program::map_in_start(&path, bias);
        let name = path.to_str().unwrap();
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).map_in(8, start, name);
        for (_, address, size) in &sized {
            log.samples(8, 0x100, &[bias + address + size / 2], 1);
        }
        let profile = profile(&log, &ResolveOptions::default());
        let mut resolved: Vec<(u64, Option<String>)> = profile.pmcs()[0]
            .location_stacks()
            .map(|(stack, _)| {
                let frame = profile.frame(stack[0].frame);
                (frame.address, frame.symbol.as_deref().map(str::to_owned))
            })
            .collect();
        resolved.sort();
        resolved.dedup_by_key(|(address, _)| *address);
        let mut expected: Vec<u64> = sized.iter().map(|f| f.1).collect();
        expected.dedup();
        let addresses: Vec<u64> = resolved.iter().map(|(address, _)| *address).collect();
        assert_eq!(addresses, expected, "each sample is in the function `nm` puts it in");
        assert!(resolved.iter().all(|(_, symbol)| symbol.is_some()));
        let hot = sized.iter().find(|f| f.0.contains("hot_function")).unwrap();
        let named = resolved.iter().find(|(a, _)| *a == hot.1).unwrap();
        assert_eq!(named.1.as_deref(), Some("hot_rust::hot_function"));
    }

    /// A program whose `caller` calls `leaf` on line 5 and then, on line 6, runs code inlined
    /// from `helper` (line 3): the return address of the call is in that inlined code.
    const CALL_THEN_INLINED: &str = "volatile int sink;
__attribute__((noinline)) int leaf(int x) { sink = x; return x; }
static inline __attribute__((always_inline)) int helper(int x) { return x * 3 + sink; }
__attribute__((noinline)) int caller(int x) {
    leaf(x);
    sink = helper(x);
    return 0;
}
int main(int argc, char **argv) { (void)argv; return caller(argc); }
";

    /// The return address of the first `call rel32` in `function` to `callee`, read from the
    /// code of the ELF file at `path`.
    fn return_address_of_call(path: &Path, function: (u64, u64), callee: u64) -> u64 {
        let data = std::fs::read(path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let text = file.section_by_name(".text").unwrap();
        let code = text.data_range(function.0, function.1).unwrap().unwrap();
        (0..code.len().saturating_sub(4))
            .find_map(|i| {
                let rel = i32::from_le_bytes(code.get(i + 1..i + 5)?.try_into().ok()?);
                let next = function.0 + i as u64 + 5;
                (code[i] == 0xe8 && next.wrapping_add(rel as i64 as u64) == callee).then_some(next)
            })
            .expect("a call to the callee")
    }

    #[test]
    fn a_callers_source_position_is_its_calls_not_the_code_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let (source, path) = (dir.path().join("calls.c"), dir.path().join("calls"));
        std::fs::write(&source, CALL_THEN_INLINED).unwrap();
        let status = std::process::Command::new("gcc")
            .args(["-O1", "-g", "-fno-omit-frame-pointer", "-no-pie", "-o"])
            .arg(&path)
            .arg(&source)
            .status()
            .unwrap();
        assert!(status.success());
        let functions = pmcprof_fixtures::functions_of(&path);
        let ret = return_address_of_call(&path, functions["caller"], functions["leaf"].0);
        let name = path.to_str().unwrap();
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).exec(5, name, 0, 0);
        log.samples(5, 0x100, &[functions["leaf"].0 + 1, ret], 1);
        let profile = profile(&log, &ResolveOptions { lines: true, ..ResolveOptions::default() });
        let (stack, _) = profile.pmcs()[0].location_stacks().next().unwrap();
        assert!(!stack[0].return_address && stack[1].return_address);
        assert_eq!(stack[1].address, ret, "the frame keeps the return address");
        let position: Vec<(Option<&str>, u32)> =
            profile.source(&stack[1]).iter().map(|f| (f.function.as_deref(), f.line)).collect();
        assert_eq!(position, [(Some("caller"), 5)], "the call's line, no inlined frame");
        // The return address itself is in `helper`'s code, on the next line.
        let image = Image::load(&path).unwrap();
        let after: Vec<u32> = image.source_at(ret).iter().map(|f| f.line).collect();
        assert_ne!(after, [5], "the program does not test what it should");
    }

    #[test]
    fn code_in_no_image_is_named_by_the_processs_jit_map_file() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("tmp")).unwrap();
        let map = "7f0000001000 40 jitted_hot_loop\n7f0000001040 20 jitted_helper\n";
        std::fs::write(root.path().join("tmp/perf-42.map"), map).unwrap();
        let p = Program::build(false);
        // The program where `-r` looks for it.
        let under_root = root.path().join(p.path.strip_prefix("/").unwrap());
        std::fs::create_dir_all(under_root.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&p.path, &under_root).unwrap();
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).exec(42, p.log_path(), 0, 0);
        // perf reports the JIT's executable anonymous memory as a mapping of `//anon`.
        log.map_in(42, 0x7f00_0000_0000, "//anon");
        log.samples(42, 0x100, &[0x7f00_0000_1010, 0x7f00_0000_1044, p.at("main", 4)], 3);
        // Past the map file's functions, and a process without a map file: unresolved.
        log.samples(42, 0x100, &[0x7f00_0000_2000], 1);
        log.samples(43, 0x100, &[0x7f00_0000_1010], 1);
        let opts = ResolveOptions { fsroot: Some(root.path().to_owned()), ..Default::default() };
        let profile = profile(&log, &opts);
        let jitted = ["jitted_hot_loop@perf-42.map", "jitted_helper@perf-42.map", "main@prog"];
        assert_eq!(
            stacks(&profile),
            vec![
                (vec!["0x7f0000001010@[unknown]".to_owned()], 1),
                (vec!["0x7f0000002000@anon".to_owned()], 1),
                (strings(&jitted), 3),
            ]
        );
        let hot = profile.frames().iter().find(|f| f.name() == "jitted_hot_loop").unwrap();
        assert_eq!((&*hot.image, hot.address), ("/tmp/perf-42.map", 0x7f00_0000_1000));
    }

    #[test]
    fn procexec_places_a_pie_at_its_load_base_and_the_runtime_linker_at_at_base() {
        let p = Program::build(true);
        let data = std::fs::read(&p.path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let interp = file.section_by_name(".interp").unwrap().data().unwrap();
        let interp = std::str::from_utf8(interp).unwrap().trim_end_matches('\0').to_owned();
        let ld_data = std::fs::read(&interp).unwrap();
        let ld = object::File::parse(&*ld_data).unwrap();
        let (ld_name, ld_addr) = ld
            .dynamic_symbols()
            .chain(ld.symbols())
            .filter(|s| s.kind() == object::SymbolKind::Text && s.is_definition() && s.size() > 4)
            .map(|s| (s.name().unwrap().to_owned(), s.address()))
            .min_by_key(|(_, a)| *a)
            .expect("a function in the run-time linker");
        let (pie_base, ld_base) = (0x5600_0000_0000u64, 0x7f00_0000_0000u64);
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).exec(300, p.log_path(), ld_base, pie_base);
        log.samples(300, 0x100, &[ld_base + ld_addr + 2, pie_base + p.at("main", 5)], 1);
        let profile = profile(&log, &ResolveOptions::default());
        let ld_basename = interp.rsplit('/').next().unwrap();
        assert_eq!(
            stacks(&profile),
            vec![(
                vec![format!("{}@{ld_basename}", demangle(&ld_name)), "main@prog".to_owned()],
                1
            )]
        );
    }

    #[test]
    fn corrupt_log_error_carries_the_offset() {
        let p = Program::build(false);
        let mut log = hot_warm_main(&p);
        let bad = log.push(&Record::DropNotify);
        log.samples(100, 0x100, &[p.at("hot", 4)], 1);
        let mut bytes = log.bytes();
        bytes[bad as usize + 3] = 0xAB; // the magic byte of the header word
        let error = Profile::from_log(&bytes, &ResolveOptions::default()).unwrap_err();
        assert_eq!(error.offset(), bad);
        assert_eq!(error.record(), 14);
        assert!(error.message().contains("bad magic"), "{}", error.message());
        assert!(matches!(error.decode_error(), Some(pmclog::DecodeError::BadMagic { .. })));
        assert!(error.to_string().contains(&format!("offset {bad:#x}")), "{error}");
    }

    #[test]
    fn truncated_log_error_carries_the_offset() {
        let p = Program::build(false);
        let log = hot_warm_main(&p);
        let bytes = log.bytes();
        let last = bytes.len() as u64 - (32 + 8 * 2);
        let error =
            Profile::from_log(&bytes[..bytes.len() - 4], &ResolveOptions::default()).unwrap_err();
        assert_eq!(error.offset(), last);
        assert!(matches!(error.decode_error(), Some(pmclog::DecodeError::Truncated { .. })));
    }

    #[test]
    fn dropnotify_records_are_counted() {
        let p = Program::build(false);
        let mut log = hot_warm_main(&p);
        log.push(&Record::DropNotify);
        log.push(&Record::DropNotify);
        log.push(&Record::CloseLog);
        let profile = profile(&log, &ResolveOptions::default());
        assert_eq!(profile.dropped_notices(), 2);
        assert_eq!(profile.total_samples(), 10);
    }

    #[test]
    fn fsroot_prefixes_image_lookups() {
        let p = Program::build(false);
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("usr/bin")).unwrap();
        std::fs::copy(&p.path, root.path().join("usr/bin/prog")).unwrap();
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).exec(5, "/usr/bin/prog", 0, 0);
        log.samples(5, 0x100, &[p.at("cold", 2), p.at("main", 2)], 4);
        let opts = ResolveOptions { fsroot: Some(root.path().to_owned()), ..Default::default() };
        let profile = profile(&log, &opts);
        assert_eq!(stacks(&profile), vec![(strings(&["cold@prog", "main@prog"]), 4)]);
        assert_eq!(&*profile.frames()[0].image, "/usr/bin/prog");
        // Without the root the image cannot be read and its frames stay addresses.
        let profile = super::tests::profile(&log, &ResolveOptions::default());
        assert_eq!(profile.unreadable_images().len(), 1);
        assert_eq!(profile.unreadable_images()[0].0, "/usr/bin/prog");
    }

    #[test]
    fn a_thread_filter_keeps_only_that_threads_samples() {
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).exec(1, p.log_path(), 0, 0);
        // LogBuilder gives each sample tid = pid + 1: process 2's samples are thread 3's.
        log.exec(2, p.log_path(), 0, 0);
        log.samples(1, 0x100, &[p.at("hot", 1)], 3);
        log.samples(2, 0x100, &[p.at("hot", 1)], 5);
        let all = profile(&log, &ResolveOptions::default());
        assert_eq!(all.sample_counts(), vec![("INSTR_RETIRED_ANY".to_owned(), 8)]);
        let only = ResolveOptions { thread: Some(3), ..ResolveOptions::default() };
        assert_eq!(profile(&log, &only).sample_counts(), vec![("INSTR_RETIRED_ANY".to_owned(), 5)]);
    }

    #[test]
    fn an_image_is_read_only_when_a_sample_falls_in_its_mapping() {
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY)
            .map_in(9, 0x1000_0000, "/nonexistent/sampled.so")
            .map_in(9, 0x2000_0000, "/nonexistent/never-sampled.so");
        log.samples(9, 0x100, &[0x1000_0040], 1);
        let profile = profile(&log, &ResolveOptions::default());
        // Only the sampled image was looked for (and found missing).
        let tried: Vec<&str> =
            profile.unreadable_images().iter().map(|(i, _)| i.as_str()).collect();
        assert_eq!(tried, ["/nonexistent/sampled.so"]);
    }

    #[test]
    fn source_positions_count_in_the_budget_and_only_kept_stacks_keep_theirs() {
        let p = Program::build_with_lines(false);
        let mut log = hot_warm_main(&p);
        // Every address of the three functions, one sample each: each its own stack.
        let mut addresses = Vec::new();
        for function in ["hot", "warm", "main"] {
            let (start, size) = p.functions[function];
            addresses.extend(start..start + size);
        }
        for &pc in &addresses {
            log.samples(100, 0x100, &[pc], 1);
        }
        let opts = ResolveOptions {
            lines: true,
            frames_only: false,
            table_budget: Some(8 << 10),
            ..Default::default()
        };
        let profile = profile(&log, &opts);
        assert!(profile.overflow().is_some(), "the tables overflowed");
        let kept: std::collections::HashSet<(Arc<str>, u64)> = profile.pmcs()[0]
            .location_stacks()
            .flat_map(|(stack, _)| stack.iter())
            .map(|l| (profile.frame(l.frame).image.clone(), l.address))
            .collect();
        assert!(!profile.sources.is_empty());
        assert!(profile.sources.keys().all(|key| kept.contains(key)));
        assert!(profile.sources.len() < addresses.len() / 2, "{} kept", profile.sources.len());
        // The stacks kept still have their lines: the six samples of hot ← warm ← main.
        let (stack, _) = profile.pmcs()[0].location_stacks().find(|(_, n)| *n == 6).unwrap();
        let line = profile.source(&stack[0]).last().map(|f| f.line);
        assert_eq!(line, Some(p.line_of(stack[0].address)));
    }

    #[test]
    fn control_characters_in_image_names_are_escaped_for_line_based_reports() {
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).map_in(9, 0x1000_0000, "/nonexistent/a\nforged");
        log.samples(9, 0x100, &[0x1000_0042], 1);
        let profile = profile(&log, &ResolveOptions::default());
        let image = &profile.frame(profile.pmcs()[0].stacks().next().unwrap().0[0]).image;
        assert_eq!(&**image, "/nonexistent/a\\nforged");
    }

    #[test]
    fn a_procfs_file_named_as_an_image_is_not_read() {
        // /proc/self/pagemap says it is a regular file of size 0 and reads as 256 GiB.
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).map_in(9, 0x1000_0000, "/proc/self/pagemap");
        log.samples(9, 0x100, &[0x1000_0042], 1);
        let profile = profile(&log, &ResolveOptions::default());
        assert_eq!(stacks(&profile), vec![(strings(&["0x10000042@pagemap"]), 1)]);
        let (image, why) = &profile.unreadable_images()[0];
        assert_eq!(image, "/proc/self/pagemap");
        assert!(why.contains("empty (or a /proc or /sys file)"), "{why}");
    }

    #[test]
    fn unreadable_image_frames_keep_runtime_addresses() {
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).map_in(9, 0x1000_0000, "/nonexistent/a.so").map_in(
            9,
            0x2000_0000,
            "/nonexistent/b.so",
        );
        log.samples(9, 0x100, &[0x1000_0042, 0x2000_0010, 0x7fff_0000_0000], 1);
        let profile = profile(&log, &ResolveOptions::default());
        assert_eq!(
            stacks(&profile),
            vec![(strings(&["0x10000042@a.so", "0x20000010@b.so", "0x7fff00000000@b.so"]), 1)]
        );
        // Past the user half, an unreadable image does not reach.
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).map_in(9, 0x1000_0000, "/nonexistent/a.so");
        log.samples(9, 0x100, &[0xffff_ffff_8000_0000, 0x10], 1);
        let profile = super::tests::profile(&log, &ResolveOptions::default());
        assert_eq!(
            stacks(&profile),
            vec![(strings(&["0xffffffff80000000@kernel", "0x10@[unknown]"]), 1)]
        );
    }

    #[test]
    fn show_offsets_keeps_offsets_inside_functions() {
        let p = Program::build(false);
        let opts = ResolveOptions { show_offsets: true, ..Default::default() };
        let profile = profile(&hot_warm_main(&p), &opts);
        assert_eq!(
            stacks(&profile),
            vec![
                (strings(&["hot+0x4@prog", "warm+0xa@prog", "main+0x14@prog"]), 6),
                (strings(&["hot+0x8@prog", "main+0x1e@prog"]), 1),
                (strings(&["warm+0x4@prog", "main+0x14@prog"]), 3),
            ]
        );
    }

    #[test]
    fn raw_addresses_skip_symbol_resolution() {
        let p = Program::build(false);
        let opts = ResolveOptions { raw_addresses: true, ..Default::default() };
        let profile = profile(&hot_warm_main(&p), &opts);
        let frames = stacks(&profile);
        assert_eq!(frames.len(), 3);
        let want = format!("{:#x}@prog", p.at("hot", 4));
        assert!(frames.iter().any(|(names, _)| names[0] == want), "{frames:?}");
        assert!(profile.frames().iter().all(|f| f.symbol.is_none()));
    }

    #[test]
    fn map_out_removes_a_mapping() {
        let p = Program::build(true);
        let base = 0x4000_0000;
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).map_in(3, base, p.log_path());
        log.samples(3, 0x100, &[base + p.at("hot", 1)], 1);
        log.push(&Record::MapOut(MapOut { pid: 3, start: base, end: base + 0x10000 }));
        log.samples(3, 0x100, &[base + p.at("hot", 1)], 1);
        let profile = profile(&log, &ResolveOptions::default());
        let unmapped = format!("{:#x}@[unknown]", base + p.at("hot", 1));
        assert_eq!(stacks(&profile), vec![(vec![unmapped], 1), (strings(&["hot@prog"]), 1)]);
    }

    #[test]
    fn fork_inherits_mappings_and_exec_replaces_them() {
        let p = Program::build(false);
        let pie = Program::build(true);
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).exec(10, p.log_path(), 0, 0);
        log.push(&Record::ProcFork(ProcFork { old_pid: 10, new_pid: 11 }));
        log.samples(11, 0x100, &[p.at("warm", 1)], 1);
        log.exec(11, pie.log_path(), 0, 0x10_0000);
        log.samples(11, 0x100, &[0x10_0000 + pie.at("cold", 1)], 1);
        log.samples(11, 0x100, &[p.at("warm", 1)], 1);
        let profile = profile(&log, &ResolveOptions::default());
        let gone = format!("{:#x}@[unknown]", p.at("warm", 1));
        assert_eq!(
            stacks(&profile),
            vec![(vec![gone], 1), (strings(&["cold@prog"]), 1), (strings(&["warm@prog"]), 1)]
        );
    }

    #[test]
    fn samples_of_unallocated_pmcs_are_kept_under_their_id() {
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.exec(1, p.log_path(), 0, 0);
        log.samples(1, 0x42, &[p.at("hot", 1)], 2);
        let profile = profile(&log, &ResolveOptions::default());
        assert_eq!(profile.sample_counts(), vec![("(unallocated pmc 0x42)".to_owned(), 2)]);
    }

    #[test]
    fn pmcs_with_the_same_name_add_up_in_sample_counts() {
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY)
            .allocate(0x101, INSTR_RETIRED_ANY)
            .allocate(0x200, CPU_CLK_UNHALTED_CORE)
            .exec(1, p.log_path(), 0, 0);
        log.samples(1, 0x101, &[p.at("hot", 1)], 2);
        log.samples(1, 0x100, &[p.at("hot", 1)], 3);
        log.samples(1, 0x200, &[p.at("hot", 1)], 4);
        let profile = profile(&log, &ResolveOptions::default());
        assert_eq!(
            profile.sample_counts(),
            vec![("INSTR_RETIRED_ANY".to_owned(), 5), ("CPU_CLK_UNHALTED_CORE".to_owned(), 4)]
        );
        assert_eq!(profile.pmcs().len(), 3);
    }

    #[test]
    fn allocatedyn_and_unknown_events_name_the_pmc() {
        let mut log = LogBuilder::new();
        log.push(&Record::PmcAllocateDyn(PmcAllocateDyn {
            pmcid: 0x300,
            event: 0x20001,
            flags: 0,
            rate: 100,
            name: b"CLOCK.PROF",
            layout: pmclog::DynLayout::Kernel,
        }));
        log.allocate(0x301, 0x7777);
        log.samples(1, 0x300, &[0x1000], 1);
        log.samples(1, 0x301, &[0x1000], 1);
        let profile = profile(&log, &ResolveOptions::default());
        assert_eq!(
            profile.sample_counts(),
            vec![("CLOCK.PROF".to_owned(), 1), ("(unknown event 0x7777)".to_owned(), 1)]
        );
    }

    #[test]
    fn empty_callchains_are_not_samples() {
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY);
        log.samples(1, 0x100, &[], 3);
        let profile = profile(&log, &ResolveOptions::default());
        assert_eq!(profile.empty_samples(), 3);
        assert_eq!(profile.total_samples(), 0);
    }

    #[test]
    fn kernel_mappings_resolve_kernel_mode_samples() {
        // A pid -1 MAP_IN is the kernel's; use the test program as a stand-in kernel image.
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).map_in(-1, 0x40_0000, p.log_path());
        log.samples_mode(55, 0x100, false, &[p.at("hot", 1), p.at("warm", 1)], 1);
        log.samples_mode(55, 0x100, true, &[p.at("hot", 1)], 1);
        let profile = profile(&log, &ResolveOptions::default());
        let user_view = format!("{:#x}@[unknown]", p.at("hot", 1));
        assert_eq!(
            stacks(&profile),
            vec![(vec![user_view], 1), (strings(&["hot@prog", "warm@prog"]), 1)]
        );
    }

    #[test]
    fn exec_of_a_pie_without_load_base_waits_for_map_in() {
        let p = Program::build(true);
        let base = 0x5600_0000_0000;
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).exec(4, p.log_path(), 0, 0);
        log.samples(4, 0x100, &[p.at("hot", 1)], 1);
        log.map_in(4, base, p.log_path());
        log.samples(4, 0x100, &[base + p.at("hot", 1)], 1);
        let profile = profile(&log, &ResolveOptions::default());
        let unplaced = format!("{:#x}@[unknown]", p.at("hot", 1));
        assert_eq!(stacks(&profile), vec![(vec![unplaced], 1), (strings(&["hot@prog"]), 1)]);
    }

    #[test]
    fn ibs_samples_use_their_callchain_part_or_the_op_address() {
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.allocate(0x100, 0x2001).exec(8, p.log_path(), 0, 0);
        let mut op = vec![0u64; 9];
        op[1] = p.at("cold", 2); // IBS_OP_RIP
        let flags = pmclog::CallchainFlags::new(0, 0x3);
        // An op part alone, then an op part followed by a two-frame call chain.
        let alone: Vec<u64> = [vec![0x0903], op.clone()].concat();
        let chained: Vec<u64> =
            [vec![0x0201_0903], op, vec![p.at("hot", 1), p.at("main", 1)]].concat();
        for pcs in [&alone, &chained] {
            log.push(&Record::Callchain(pmclog::Callchain {
                pid: 8,
                tid: 8,
                pmcid: 0x100,
                cpuflags: flags,
                pcs: pmclog::ProgramCounters::from_words(pcs),
            }));
        }
        let profile = profile(&log, &ResolveOptions::default());
        assert_eq!(profile.sample_counts(), vec![("IBS_OP".to_owned(), 2)]);
        assert_eq!(
            stacks(&profile),
            vec![(strings(&["cold@prog"]), 1), (strings(&["hot@prog", "main@prog"]), 1)]
        );
    }

    #[test]
    fn location_stacks_keep_exact_link_time_addresses() {
        let p = Program::build(true);
        let base = 0x5600_0000_0000;
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).map_in(4, base, p.log_path());
        log.map_in(4, 0x7000_0000, "/nonexistent/lib.so");
        log.samples(4, 0x100, &[base + p.at("hot", 3), base + p.at("main", 9)], 2);
        log.samples(4, 0x100, &[base + p.at("hot", 7), base + p.at("main", 9)], 1);
        log.samples(4, 0x100, &[0x7000_0010, 0x10, 0xffff_ffff_8000_0000], 1);
        let profile = profile(&log, &ResolveOptions::default());
        let pmc = &profile.pmcs()[0];
        let described: Vec<(Vec<(String, u64)>, u64)> = pmc
            .location_stacks()
            .map(|(locations, count)| {
                let named =
                    locations.iter().map(|l| (profile.frame(l.frame).name(), l.address)).collect();
                (named, count)
            })
            .collect();
        let main = ("main".to_owned(), p.at("main", 9));
        assert_eq!(
            described,
            [
                (vec![("hot".to_owned(), p.at("hot", 3)), main.clone()], 2),
                (vec![("hot".to_owned(), p.at("hot", 7)), main], 1),
                (
                    vec![
                        ("0x70000010".to_owned(), 0x7000_0010),
                        ("0x10".to_owned(), 0x10),
                        ("0xffffffff80000000".to_owned(), 0xffff_ffff_8000_0000)
                    ],
                    1
                ),
            ]
        );
        // The frame stacks merge the two hot addresses.
        assert_eq!(pmc.stacks().map(|(_, n)| n).collect::<Vec<_>>(), [3, 1]);
        // Only the readable image has link-time addresses.
        let text = profile.text_range(p.log_path()).unwrap();
        assert!(text.contains(&p.at("hot", 0)) && text.contains(&p.at("main", 0)), "{text:x?}");
        for image in ["/nonexistent/lib.so", KERNEL_IMAGE, UNKNOWN_IMAGE] {
            assert_eq!(profile.text_range(image), None, "{image}");
        }
    }
}
