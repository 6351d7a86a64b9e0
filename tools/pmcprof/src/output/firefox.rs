//! The profile in the Firefox Profiler's processed format (what samply writes), built with the
//! `fxprof-processed-profile` crate from the profile's [`Timeline`]: the samples one by one,
//! with their process, thread and time.
//!
//! - One process per pid, named by its command ([`Timeline::command`]: the executable of its
//!   PROCEXEC, else of PMCATTACH or its first MAP_IN, or PROCCREATE's name; else `pid N`); one
//!   thread per tid,
//!   named by THR_CREATE when the log has it, else by its command. When the log sampled several
//!   events, each thread has one track per event (`name (EVENT)`), since adding samples of
//!   different events together would mean nothing.
//! - Every sample with its whole stack, at its time: the record's TSC stamp counted from the
//!   log's first record, whose wall-clock time (INITIALIZE's) is the profile's start. Without a
//!   TSC frequency the stamps are taken as nanoseconds (what the Linux host writes).
//! - Each sample weighs 1: the call tree counts samples, as pmcstat's other reports do. A
//!   sample of a clock event also carries its period as CPU time (`threadCPUDelta`), so the
//!   profiler's CPU graph is the time the thread ran; other events' samples carry none, since
//!   their period is a count of events, not time. `meta.interval` is the clock period when a
//!   clock event sampled, else the mean time between two samples of a thread.
//! - Frames of images the profile could read are addresses in a library (`libs`: name, path and
//!   build ID as the code ID and breakpad ID), named by a symbol table made of the profile's own
//!   functions, so the profiler needs no symbol server (`meta.symbolicated`); other frames are
//!   labels (`[kernel] 0xffff…`). Frames are in the category `User` or `Kernel`.
//! - `meta.product` names the command (the log's first PROCEXEC, else the first sampled
//!   process) and the sampled events.
//! - No markers: the profile has no context switches to draw off-CPU time with.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::sync::Arc;

use flate2::Compression;
use flate2::write::GzEncoder;
use fxprof_processed_profile::debugid::DebugId;
use fxprof_processed_profile::{
    CategoryColor, CategoryPairHandle, CpuDelta, Frame as FxFrame, FrameFlags, FrameInfo,
    LibraryHandle, LibraryInfo, ProcessHandle, Profile as FxProfile, ReferenceTimestamp,
    SamplingInterval, StackHandle, Symbol, SymbolTable, ThreadHandle, Timestamp,
};

use crate::profile::frame::FrameId;
use crate::profile::timeline::{TimedSample, Timeline};
use crate::profile::{KERNEL_IMAGE, Profile};

/// Writes the profile as the Firefox Profiler's processed-profile JSON, gzipped when
/// `compress` (the profiler opens `.json.gz` files as they are). The profile must have been
/// read with [`ResolveOptions::timeline`](crate::ResolveOptions::timeline).
pub fn write_firefox(profile: &Profile, compress: bool, out: &mut dyn Write) -> io::Result<()> {
    let Some(timeline) = profile.timeline() else {
        let why = "the profile was read without its timeline (ResolveOptions::timeline)";
        return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    };
    let fx = build(profile, timeline);
    if compress {
        let mut gz = GzEncoder::new(out, Compression::default());
        serde_json::to_writer(&mut gz, &fx)?;
        gz.finish()?;
    } else {
        let mut out = io::BufWriter::new(out);
        serde_json::to_writer(&mut out, &fx)?;
        out.flush()?;
    }
    Ok(())
}

/// The processed profile.
fn build(profile: &Profile, timeline: &Timeline) -> FxProfile {
    let clock = Clock::new(profile, timeline);
    let events: Vec<String> = profile.sample_counts().into_iter().map(|(name, _)| name).collect();
    let first_process = timeline.samples().first().and_then(|s| timeline.command(s.pid));
    let command = profile.main_image().map(|image| basename(image)).or(first_process);
    let command = command.unwrap_or("pmcstat");
    let product = format!("{command} ({})", events.join(", "));
    let start =
        ReferenceTimestamp::from_millis_since_unix_epoch(profile.info().start_time_ns as f64 / 1e6);
    let mut fx = FxProfile::new(&product, start, clock.interval(profile, timeline));
    fx.set_symbolicated(true);
    let user = fx.add_category("User", CategoryColor::Yellow).into();
    let kernel = fx.add_category("Kernel", CategoryColor::Orange).into();

    let libs = Libraries::new(profile, timeline, &mut fx);
    let mut writer = Writer {
        profile,
        timeline,
        libs,
        categories: [user, kernel],
        processes: HashMap::new(),
        threads: BTreeMap::new(),
        frames: HashMap::new(),
        stacks: HashMap::new(),
    };
    let several_events = events.len() > 1;
    for sample in timeline.samples() {
        let at = clock.at(sample.tsc);
        let event = several_events.then(|| profile.pmcs()[sample.pmc].name());
        let thread = writer.thread(&mut fx, sample, event, at);
        let stack = writer.stack(&mut fx, thread, sample.stack);
        let cpu = profile.pmcs()[sample.pmc]
            .clock_period_ns()
            .map_or(CpuDelta::ZERO, CpuDelta::from_nanos);
        fx.add_sample(thread, at, Some(stack), cpu, 1);
    }
    fx
}

/// Turns the log's TSC stamps into times since its first record.
struct Clock {
    first: u64,
    /// Ticks per second; 0 when the log does not say.
    freq: u64,
}

impl Clock {
    fn new(profile: &Profile, timeline: &Timeline) -> Clock {
        Clock { first: timeline.first_tsc().unwrap_or(0), freq: profile.info().tsc_freq }
    }

    fn nanos(&self, tsc: u64) -> u64 {
        let ticks = tsc.saturating_sub(self.first);
        match self.freq {
            0 => ticks,
            freq => u64::try_from(u128::from(ticks) * 1_000_000_000 / u128::from(freq))
                .unwrap_or(u64::MAX),
        }
    }

    fn at(&self, tsc: u64) -> Timestamp {
        Timestamp::from_nanos_since_reference(self.nanos(tsc))
    }

    /// The clock period of the first clock event; else the mean time between two samples of
    /// a thread (1 ms when that cannot be told).
    fn interval(&self, profile: &Profile, timeline: &Timeline) -> SamplingInterval {
        if let Some(period) = profile.pmcs().iter().find_map(|pmc| pmc.clock_period_ns()) {
            return SamplingInterval::from_nanos(period);
        }
        let mut spans: HashMap<(i32, usize), (u64, u64, u64)> = HashMap::new();
        for sample in timeline.samples() {
            let at = self.nanos(sample.tsc);
            let span = spans.entry((sample.tid, sample.pmc)).or_insert((at, at, 0));
            *span = (span.0.min(at), span.1.max(at), span.2 + 1);
        }
        let (time, gaps) = spans
            .values()
            .filter(|(_, _, n)| *n > 1)
            .fold((0, 0), |(time, gaps), (lo, hi, n)| (time + (hi - lo), gaps + (n - 1)));
        match time.checked_div(gaps) {
            Some(mean) if mean > 0 => SamplingInterval::from_nanos(mean),
            _ => SamplingInterval::from_millis(1),
        }
    }
}

/// The libraries: every image the profile could read that a sampled frame is in.
struct Libraries {
    handles: HashMap<Arc<str>, LibraryHandle>,
}

impl Libraries {
    fn new(profile: &Profile, timeline: &Timeline, fx: &mut FxProfile) -> Libraries {
        let mut used: BTreeMap<Arc<str>, Vec<FrameId>> = BTreeMap::new();
        let mut seen = vec![false; profile.frames().len()];
        for node in (0..timeline.nodes()).map(|i| timeline.node(i)) {
            if std::mem::replace(&mut seen[node.frame.index()], true) {
                continue;
            }
            let frame = profile.frame(node.frame);
            if address_in_library(profile, node.frame).is_some() {
                used.entry(frame.image.clone()).or_default().push(node.frame);
            }
        }
        let mut handles = HashMap::new();
        for (image, frames) in used {
            let symbols = frames
                .iter()
                .filter_map(|&id| {
                    let address = address_in_library(profile, id)?;
                    Some(Symbol { address, size: None, name: profile.frame(id).name() })
                })
                .collect();
            let build_id = profile.image_info(&image).and_then(|info| info.build_id.clone());
            let name = basename(&image).to_owned();
            let info = LibraryInfo {
                name: name.clone(),
                debug_name: name,
                path: image.to_string(),
                debug_path: image.to_string(),
                debug_id: build_id.as_deref().map_or_else(DebugId::nil, debug_id),
                code_id: build_id,
                arch: None,
                symbol_table: Some(Arc::new(SymbolTable::new(symbols))),
            };
            handles.insert(image, fx.add_lib(info));
        }
        Libraries { handles }
    }
}

/// The address of a frame in its library, for frames of images the profile could read whose
/// link-time address fits the profiler's 32-bit library offsets; `None` for the others.
fn address_in_library(profile: &Profile, id: FrameId) -> Option<u32> {
    let frame = profile.frame(id);
    profile.image_info(&frame.image)?;
    frame.symbol.as_ref()?;
    u32::try_from(frame.address).ok()
}

/// The breakpad ID the profiler expects of an ELF image: the build ID's first 16 bytes read
/// as a GUID (its first three fields little-endian), as the Linux profilers make it.
fn debug_id(build_id: &str) -> DebugId {
    let mut bytes = [0u8; 16];
    let hex = build_id.as_bytes();
    for (i, byte) in bytes.iter_mut().enumerate() {
        let digit = |at: usize| hex.get(at).and_then(|&c| (c as char).to_digit(16)).unwrap_or(0);
        *byte = (digit(2 * i) * 16 + digit(2 * i + 1)) as u8;
    }
    DebugId::from_guid_age(&bytes, 0).unwrap_or_else(|_| DebugId::nil())
}

/// The last component of a path.
fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Adds processes, threads, frames and stacks as the samples need them.
struct Writer<'p> {
    profile: &'p Profile,
    timeline: &'p Timeline,
    libs: Libraries,
    /// `User`, `Kernel`.
    categories: [CategoryPairHandle; 2],
    processes: HashMap<i32, ProcessHandle>,
    threads: BTreeMap<(i32, i32, Option<&'p str>), ThreadHandle>,
    frames: HashMap<(ThreadHandle, FrameId), fxprof_processed_profile::FrameHandle>,
    stacks: HashMap<(ThreadHandle, usize), StackHandle>,
}

impl<'p> Writer<'p> {
    /// The thread of a sample (and its process), added at the sample's time if new.
    fn thread(
        &mut self,
        fx: &mut FxProfile,
        sample: &TimedSample,
        event: Option<&'p str>,
        at: Timestamp,
    ) -> ThreadHandle {
        let key = (sample.pid, sample.tid, event);
        if let Some(&thread) = self.threads.get(&key) {
            return thread;
        }
        let command = self.timeline.command(sample.pid).map(str::to_owned);
        let command = command.unwrap_or_else(|| format!("pid {}", sample.pid));
        let process = *self
            .processes
            .entry(sample.pid)
            .or_insert_with(|| fx.add_process(&command, sample.pid as u32, at));
        // The profiler names a main thread after its process: with one track per event, the
        // tracks need their own names.
        let main = sample.pid == sample.tid && event.is_none();
        let thread = fx.add_thread(process, sample.tid as u32, at, main);
        let name = self.timeline.thread_name(sample.tid).unwrap_or(&command);
        match event {
            Some(event) => fx.set_thread_name(thread, &format!("{name} ({event})")),
            None => fx.set_thread_name(thread, name),
        }
        self.threads.insert(key, thread);
        thread
    }

    /// The stack of the timeline's node `node` in `thread`: its callers' stack, then its frame.
    fn stack(&mut self, fx: &mut FxProfile, thread: ThreadHandle, node: usize) -> StackHandle {
        // The nodes up to the first one this thread already has, innermost first.
        let mut missing = Vec::new();
        let mut next = Some(node);
        let mut known = None;
        while let Some(index) = next {
            if let Some(&stack) = self.stacks.get(&(thread, index)) {
                known = Some(stack);
                break;
            }
            missing.push(index);
            next = self.timeline.node(index).parent;
        }
        let mut parent = known;
        for index in missing.into_iter().rev() {
            let frame = self.frame(fx, thread, self.timeline.node(index).frame);
            let stack = fx.intern_stack(thread, parent, frame);
            self.stacks.insert((thread, index), stack);
            parent = Some(stack);
        }
        parent.expect("a node has a frame")
    }

    fn frame(
        &mut self,
        fx: &mut FxProfile,
        thread: ThreadHandle,
        id: FrameId,
    ) -> fxprof_processed_profile::FrameHandle {
        if let Some(&frame) = self.frames.get(&(thread, id)) {
            return frame;
        }
        let info = self.frame_info(fx, id);
        let frame = fx.intern_frame(thread, info);
        self.frames.insert((thread, id), frame);
        frame
    }

    fn frame_info(&self, fx: &mut FxProfile, id: FrameId) -> FrameInfo {
        let frame = self.profile.frame(id);
        let kernel = &*frame.image == KERNEL_IMAGE || &*frame.image == pmc::host::KERNEL_SYMBOLS;
        let category_pair = self.categories[usize::from(kernel)];
        let lib = self.libs.handles.get(&frame.image);
        let fx_frame = match (lib, address_in_library(self.profile, id)) {
            (Some(&lib), Some(address)) => {
                FxFrame::RelativeAddressFromInstructionPointer(lib, address)
            }
            _ => {
                let label = match &frame.symbol {
                    Some(_) => frame.name(),
                    None => format!("[{}] {}", frame.image_basename(), frame.name()),
                };
                FxFrame::Label(fx.intern_string(&label))
            }
        };
        FrameInfo { frame: fx_frame, category_pair, flags: FrameFlags::empty() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ResolveOptions;
    use pmclog::{
        Callchain, CallchainFlags, DynLayout, PmcAllocateDyn, ProcCreate, ProgramCounters, Record,
        ThrCreate,
    };
    use pmcprof_fixtures::{INSTR_RETIRED_ANY, LogBuilder, Program, hot_warm_main};
    use serde_json::Value;

    fn timeline_options() -> ResolveOptions {
        ResolveOptions { timeline: true, ..ResolveOptions::default() }
    }

    fn written(profile: &Profile) -> Value {
        let mut out = Vec::new();
        write_firefox(profile, false, &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    /// A thread's samples as call chains of function names (innermost first, `a<b<c`), with
    /// their times in milliseconds: stack index → stackTable (frame, prefix) → frameTable.func
    /// → funcTable.name → the thread's string array.
    fn chains(thread: &Value) -> Vec<(String, f64)> {
        let column = |table: &str, name: &str| thread[table][name].as_array().unwrap().clone();
        let (frame, prefix) = (column("stackTable", "frame"), column("stackTable", "prefix"));
        let (func, names) = (column("frameTable", "func"), column("funcTable", "name"));
        let strings = thread["stringArray"].as_array().unwrap();
        let mut time = 0.0;
        let deltas = column("samples", "timeDeltas");
        column("samples", "stack")
            .iter()
            .zip(deltas)
            .map(|(stack, delta)| {
                time += delta.as_f64().unwrap();
                let mut chain = Vec::new();
                let mut at = stack.as_u64();
                while let Some(index) = at.map(|i| i as usize) {
                    let f = func[frame[index].as_u64().unwrap() as usize].as_u64().unwrap();
                    let name = names[f as usize].as_u64().unwrap() as usize;
                    chain.push(strings[name].as_str().unwrap().to_owned());
                    at = prefix[index].as_u64();
                }
                (chain.join("<"), time)
            })
            .collect()
    }

    #[test]
    fn every_sample_is_in_its_thread_at_its_time_with_its_callers() {
        let p = Program::build(false);
        let profile = Profile::from_log(&hot_warm_main(&p).bytes(), &timeline_options()).unwrap();
        let v = written(&profile);

        let meta = &v["meta"];
        assert!(meta["preprocessedProfileVersion"].as_u64().unwrap() > 0);
        assert_eq!(meta["product"], "prog (INSTR_RETIRED_ANY)");
        assert_eq!(meta["symbolicated"], true);
        // INITIALIZE said 1000 s + 5 ns.
        assert_eq!(meta["startTime"].as_f64(), Some(1_000_000.000_005));
        // Samples 1000 TSC ticks (1 µs at 1 GHz) apart, no clock event: the mean gap.
        assert_eq!(meta["interval"].as_f64(), Some(0.001));
        let categories: Vec<&str> = meta["categories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(categories, ["Other", "User", "Kernel"]);

        let threads = v["threads"].as_array().unwrap();
        assert_eq!(threads.len(), 1);
        let thread = &threads[0];
        assert_eq!((thread["pid"].as_str(), thread["tid"].as_str()), (Some("100"), Some("101")));
        assert_eq!(
            (thread["name"].as_str(), thread["processName"].as_str()),
            (Some("prog"), Some("prog"))
        );
        assert_eq!(thread["samples"]["length"].as_u64(), Some(profile.pmcs()[0].samples()));
        assert_eq!(thread["samples"]["weightType"], "samples");

        // The log's records are 1000 ticks apart from the allocation (the first stamped record,
        // time 0); the samples are the 3rd to the 12th record.
        let chains = chains(thread);
        let expected: Vec<(&str, f64)> = (0..10)
            .map(|i| {
                let chain = match i {
                    0..6 => "hot<warm<main",
                    6..9 => "warm<main",
                    _ => "hot<main",
                };
                (chain, 0.002 + f64::from(i) * 0.001)
            })
            .collect();
        assert_eq!(chains.len(), expected.len());
        for ((chain, time), (want, at)) in chains.iter().zip(&expected) {
            assert_eq!(chain, want);
            assert!((time - at).abs() < 1e-9, "{time} != {at}");
        }

        // One library, the program, with its build ID; every function is in it.
        let libs = v["libs"].as_array().unwrap();
        assert_eq!(libs.len(), 1);
        assert_eq!(libs[0]["path"], p.log_path());
        assert_eq!(libs[0]["name"], "prog");
        let build_id = profile.image_info(p.log_path()).unwrap().build_id.clone().unwrap();
        assert_eq!(libs[0]["codeId"].as_str(), Some(build_id.as_str()));
        // The breakpad ID is the build ID's first 16 bytes as a GUID, and an age of 0.
        let guid = &build_id[..32];
        let swapped: String = [
            &guid[6..8],
            &guid[4..6],
            &guid[2..4],
            &guid[0..2],
            &guid[10..12],
            &guid[8..10],
            &guid[14..16],
            &guid[12..14],
            &guid[16..32],
        ]
        .concat();
        assert_eq!(
            libs[0]["breakpadId"].as_str(),
            Some(format!("{}0", swapped.to_uppercase()).as_str())
        );
        let resources = &thread["resourceTable"]["lib"];
        assert!(
            thread["funcTable"]["resource"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| resources[r.as_u64().unwrap() as usize] == 0)
        );
        // Each frame is the function's link-time address in the program.
        let addresses: Vec<u64> = thread["frameTable"]["address"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_u64().unwrap())
            .collect();
        assert_eq!(addresses, [p.at("main", 0), p.at("warm", 0), p.at("hot", 0)]);
    }

    /// Two processes, one of them with two threads (one named by THR_CREATE), sampled by two
    /// events, one of them the Linux clock event `cpu-clock` with a period of 250 µs.
    fn threads_log(p: &Program) -> LogBuilder {
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY);
        log.push(&Record::PmcAllocateDyn(PmcAllocateDyn {
            pmcid: 0x200,
            event: 0x1000,
            flags: 0x10,
            rate: 250_000,
            name: b"cpu-clock",
            layout: DynLayout::Kernel,
        }));
        log.exec(100, p.log_path(), 0, 0);
        log.push(&Record::ThrCreate(ThrCreate { tid: 102, pid: 100, flags: 0, name: b"worker" }));
        log.push(&Record::ProcCreate(ProcCreate { pid: 300, flags: 0, comm: b"other" }));
        let mut sample = |pid, tid, pmcid, pcs: &[u64]| {
            log.push(&Record::Callchain(Callchain {
                pid,
                tid,
                pmcid,
                cpuflags: CallchainFlags::new(1, 1),
                pcs: ProgramCounters::from_words(pcs),
            }));
        };
        let hot = [p.at("hot", 4), p.at("warm", 10), p.at("main", 20)];
        for _ in 0..4 {
            sample(100, 100, 0x100, &hot);
            sample(100, 102, 0x200, &hot);
        }
        sample(100, 102, 0x100, &[p.at("warm", 4), p.at("main", 20)]);
        sample(300, 301, 0x200, &[0x7000_1234]);
        log
    }

    #[test]
    fn each_thread_and_event_is_a_track_named_after_its_process_or_thread() {
        let p = Program::build(false);
        let profile = Profile::from_log(&threads_log(&p).bytes(), &timeline_options()).unwrap();
        let v = written(&profile);
        assert_eq!(v["meta"]["product"], "prog (INSTR_RETIRED_ANY, cpu-clock)");
        // The clock event's period.
        assert_eq!(v["meta"]["interval"].as_f64(), Some(0.25));
        let mut tracks: Vec<(String, String, String, String, u64, f64)> = v["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let cpu: f64 = t["samples"]["threadCPUDelta"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_f64().unwrap())
                    .sum();
                (
                    t["pid"].as_str().unwrap().to_owned(),
                    t["tid"].as_str().unwrap().to_owned(),
                    t["name"].as_str().unwrap().to_owned(),
                    t["processName"].as_str().unwrap().to_owned(),
                    t["samples"]["length"].as_u64().unwrap(),
                    cpu,
                )
            })
            .collect();
        tracks.sort_by(|a, b| a.2.cmp(&b.2));
        let s = |text: &str| text.to_owned();
        // Each thread of several events has a track per event; the crate makes the second
        // track's tid unique. CPU time (µs) only for the clock event's samples.
        let found: Vec<_> =
            tracks.iter().map(|t| (t.0.clone(), t.2.clone(), t.3.clone(), t.4, t.5)).collect();
        assert_eq!(
            found,
            [
                (s("300"), s("other (cpu-clock)"), s("other"), 1, 250.0),
                (s("100"), s("prog (INSTR_RETIRED_ANY)"), s("prog"), 4, 0.0),
                (s("100"), s("worker (INSTR_RETIRED_ANY)"), s("prog"), 1, 0.0),
                (s("100"), s("worker (cpu-clock)"), s("prog"), 4, 1000.0),
            ]
        );
        assert_eq!(tracks[1].1, "100");
        assert!(tracks[2].1.starts_with("102") && tracks[3].1.starts_with("102"));
        // The tracks hold every sample of every PMC.
        let per_event: u64 = profile.pmcs().iter().map(|pmc| pmc.samples()).sum();
        assert_eq!(tracks.iter().map(|t| t.4).sum::<u64>(), per_event);
        let worker = v["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "worker (cpu-clock)")
            .unwrap();
        assert!(chains(worker).iter().all(|(chain, _)| chain == "hot<warm<main"));
        // An address in no image is a label naming its image.
        let other = v["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "other (cpu-clock)")
            .unwrap();
        assert_eq!(chains(other)[0].0, "[[unknown]] 0x70001234");
    }

    #[test]
    fn a_gzipped_profile_is_the_same_document() {
        use std::io::Read as _;
        let p = Program::build(false);
        let profile = Profile::from_log(&hot_warm_main(&p).bytes(), &timeline_options()).unwrap();
        let mut gz = Vec::new();
        write_firefox(&profile, true, &mut gz).unwrap();
        assert_eq!(gz[..2], [0x1f, 0x8b]);
        let mut json = Vec::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut json).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&json).unwrap(), written(&profile));
    }

    #[test]
    fn a_profile_read_without_its_timeline_is_refused() {
        let p = Program::build(false);
        let profile =
            Profile::from_log(&hot_warm_main(&p).bytes(), &ResolveOptions::default()).unwrap();
        let err = write_firefox(&profile, false, &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn the_timeline_keeps_to_the_budget_and_its_frames_survive_pruning() {
        let p = Program::build(false);
        let mut log = LogBuilder::new();
        log.allocate(0x100, INSTR_RETIRED_ANY).exec(100, p.log_path(), 0, 0);
        // Many distinct stacks (exact addresses), so that the aggregated tables are pruned.
        for i in 0..200 {
            let (hot, warm, main) = (i % 8, 4 + (i / 8) % 4, 20 + (i / 32) % 4);
            log.samples(100, 0x100, &[p.at("hot", hot), p.at("warm", warm), p.at("main", main)], 1);
        }
        let opts = ResolveOptions { table_budget: Some(8 << 10), ..timeline_options() };
        let profile = Profile::from_log(&log.bytes(), &opts).unwrap();
        assert!(profile.overflow().is_some_and(|o| o.prunes > 0));
        let timeline = profile.timeline().unwrap();
        assert!(timeline.left_out() > 0);
        assert_eq!(timeline.samples().len() as u64 + timeline.left_out(), 200);
        for sample in timeline.samples() {
            let names: Vec<String> =
                timeline.frames(sample).map(|f| profile.frame(f).name()).collect();
            assert_eq!(names, ["hot", "warm", "main"]);
        }
    }
}
