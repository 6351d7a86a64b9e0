//! `-R file`: a log printed as text, or turned into call graphs, gmon files, calltree profiles,
//! folded stacks, flame graphs, pprof profiles, Firefox Profiler profiles and flat profiles.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use pmc::events::pmu_table::PmuEventNames;

use crate::cli::Options;
use crate::failure::{Failure, io_failure, tell};
use crate::outputs::{self, Output};
use pmcprof::{Profile, ReadLog, ResolveOptions};

/// Whether the options ask for any analysis of a log (beyond the text dump).
pub fn wants_analysis(o: &Options) -> bool {
    o.callgraph.is_some()
        || o.gmon
        || o.calltree.is_some()
        || o.folded.is_some()
        || o.flamegraph.is_some()
        || o.pprof.is_some()
        || o.firefox.is_some()
        || o.top.is_some()
}

/// Where text goes: the `-o` file, else standard output.
pub fn text_output(o: &Options) -> Result<TextOutput, Failure> {
    let file = match &o.output {
        Some(path) => Some(
            Output::create(path)
                .map_err(|e| io_failure(&format!("cannot create {}", path.display()), &e))?,
        ),
        None => None,
    };
    Ok(TextOutput { buffer: Vec::new(), file })
}

/// Text on its way to the `-o` file or standard output: [`TextOutput::finish`] writes it out
/// and puts the `-o` file in place (dropped before, a new `-o` file is not created and an
/// existing one keeps its content).
pub struct TextOutput {
    buffer: Vec<u8>,
    file: Option<Output>,
}

/// How much text is held before it is written.
const TEXT_BUFFER: usize = 64 * 1024;

impl TextOutput {
    /// Writes out what is held, and puts the `-o` file in place.
    pub fn finish(mut self) -> std::io::Result<()> {
        self.flush()?;
        match self.file.take() {
            Some(file) => file.commit().map(drop),
            None => Ok(()),
        }
    }
}

impl Write for TextOutput {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.buffer.len() + bytes.len() > TEXT_BUFFER {
            self.flush()?;
        }
        self.buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &self.file {
            Some(file) => file.file().write_all(&self.buffer)?,
            None => {
                let mut out = std::io::stdout().lock();
                out.write_all(&self.buffer)?;
                out.flush()?;
            }
        }
        self.buffer.clear();
        Ok(())
    }
}

/// Opens the log `path` for reading; a directory is refused with a clear error.
fn open_log(path: &Path) -> Result<File, Failure> {
    let failed = |e: &std::io::Error| io_failure(&format!("cannot read log {}", path.display()), e);
    let file = File::open(path).map_err(|e| failed(&e))?;
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(failed(&std::io::Error::from_raw_os_error(libc::EISDIR)));
    }
    Ok(file)
}

/// `-R file` with the options' analyses (or the text dump without any). The log is read
/// through a bounded window, whatever its size.
pub fn run(o: &Options, log: &Path) -> Result<i32, Failure> {
    let file = open_log(log)?;
    let name = log.display().to_string();
    if !wants_analysis(o) && !o.json {
        let mut out = text_output(o)?;
        let end = pmclog::dump_reader_with_names(file, PmuEventNames, &mut out)
            .map_err(|e| io_failure("writing the dump", &e))?;
        out.finish().map_err(|e| io_failure("writing the dump", &e))?;
        if let Some(message) = end.error_message() {
            return Err(Failure::data(format!("{name}: {message}")));
        }
        if let Some(warning) = end.warning() {
            tell(format_args!("warning: {name}: {warning}"));
        }
        return Ok(0);
    }
    let read = read_log(o, file, &name)?;
    check_thread(o, &read.profile, &name)?;
    if let Err(failure) = write_analyses(o, &read.profile) {
        // A damaged log with no sample before the damage: the damage is the news (65), not
        // an empty flame graph.
        let no_samples = read.profile.sample_counts().iter().all(|(_, n)| *n == 0);
        if read.error.is_some() && no_samples {
            check_end(&read, &name)?;
        }
        return Err(failure);
    }
    report_profile_warnings(o, &read.profile);
    let status = check_end(&read, &name).map(|()| 0);
    // pmcstat exits next: freeing every symbol of every image (a kernel alone has ~100 000)
    // would take longer than writing the reports did.
    std::mem::forget(read);
    status
}

/// Reads the log from `input` with the options' `-r`, `-I`, `-A` and `-i`, through a bounded
/// window; `name` names it in errors. A damaged log gives what precedes the damage (see
/// [`check_end`]).
pub fn read_log(o: &Options, input: impl Read, name: &str) -> Result<ReadLog, Failure> {
    let resolve = ResolveOptions {
        fsroot: o.fsroot.clone(),
        show_offsets: o.offsets,
        raw_addresses: o.addresses,
        thread: o.thread,
        lines: o.calltree.is_some() || o.pprof.is_some(),
        // Only -g, -F and --pprof work below the function.
        frames_only: !(o.gmon || o.calltree.is_some() || o.pprof.is_some()),
        table_budget: o.analysis_memory.map(|mib| mib << 20),
        // --firefox shows each sample in its thread at its time.
        timeline: o.firefox.is_some(),
        ..ResolveOptions::default()
    };
    Profile::from_reader_with_names(input, &resolve, &PmuEventNames)
        .map_err(|e| io_failure(&format!("cannot read log {name}"), &e))
}

/// After the reports of `read` were written: a damaged log is a failure (EX_DATAERR) that
/// names the error, its offset and how many records the reports cover; a log without
/// CLOSELOG gets a warning.
pub fn check_end(read: &ReadLog, name: &str) -> Result<(), Failure> {
    if let Some(e) = &read.error {
        let before = e.record().saturating_sub(1);
        return Err(Failure::data(format!(
            "{name}: corrupt log at byte offset {:#x} (record {}): {}; the reports cover the \
             {before} records before it",
            e.offset(),
            e.record(),
            e.message()
        )));
    }
    if !read.closed {
        let end =
            pmclog::DumpEnd::Unclosed { offset: read.end_offset, records: read.profile.records() };
        tell(format_args!("warning: {name}: {}", end.warning().unwrap_or_default()));
    }
    Ok(())
}

/// `-i tid` on a log (`name`) without a sample of that thread is a mistake, not an empty
/// report: say which threads it has.
fn check_thread(o: &Options, profile: &Profile, name: &str) -> Result<(), Failure> {
    let Some(tid) = o.thread.filter(|tid| !profile.threads().contains(tid)) else {
        return Ok(());
    };
    let threads: Vec<String> = profile.threads().iter().map(i32::to_string).collect();
    let known = match threads.is_empty() {
        true => "it has no samples".to_owned(),
        false => format!("threads with samples: {}", threads.join(", ")),
    };
    Err(Failure::usage(format!("-i {tid}: no samples of thread {tid} in {name} ({known})")))
}

/// Writes the analyses the options ask for.
pub fn write_analyses(o: &Options, profile: &Profile) -> Result<(), Failure> {
    let depth = o.depth.unwrap_or(pmcprof::DEFAULT_CALLGRAPH_DEPTH);
    if let Some(target) = &o.callgraph {
        write_to(o, target, |out| pmcprof::write_callgraph_depth(profile, depth, out))?;
    }
    if let Some(target) = &o.calltree {
        write_to(o, target, |out| pmcprof::write_calltree(profile, out))?;
    }
    if o.gmon {
        write_gmon(o, profile)?;
    }
    if let Some(path) = &o.folded {
        write_file(path, |out| pmcprof::write_folded(profile, out))?;
    }
    if let Some(path) = &o.flamegraph {
        write_file(path, |out| pmcprof::write_flamegraph(profile, out))?;
    }
    if let Some(path) = &o.pprof {
        write_file(path, |out| pmcprof::write_pprof(profile, out))?;
    }
    if let Some(path) = &o.firefox {
        let gzip = path.extension().is_some_and(|ext| ext == "gz");
        write_file(path, |out| pmcprof::write_firefox(profile, gzip, out))?;
    }
    // With -R, --json is the flat profile (in a measurement it is the counts).
    let json = o.json && o.read_log.is_some();
    if let Some(rows) = o.top.filter(|_| !json) {
        let mut out = text_output(o)?;
        pmcprof::write_top(profile, rows, &mut out)
            .map_err(|e| io_failure("writing the profile", &e))?;
        out.finish().map_err(|e| io_failure("writing the profile", &e))?;
    }
    if json {
        let mut out = text_output(o)?;
        pmcprof::write_json(profile, o.top.unwrap_or(usize::MAX), &mut out)
            .map_err(|e| io_failure("writing the profile", &e))?;
        out.finish().map_err(|e| io_failure("writing the profile", &e))?;
    }
    Ok(())
}

/// `-g`: the gmon files under the `-D` directory (default `.`), in the layout of the gprof of
/// this system ([`pmcprof::GmonHeader::native`]); `-M`: the mapping of images to them.
fn write_gmon(o: &Options, profile: &Profile) -> Result<(), Failure> {
    let gmons = pmcprof::gmon_profiles(profile, o.gmon_kernel);
    let dir = o.gmon_dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let whole = |path: &Path, bytes: &[u8]| outputs::write_whole(path, |out| out.write_all(bytes));
    pmcprof::write_gmon_files(&gmons, &dir, pmcprof::GmonHeader::native(), whole)
        .map_err(|e| io_failure("writing gmon files", &e))?;
    if let Some(path) = &o.gmon_map {
        write_file(path, |out| pmcprof::write_gmon_map(&gmons, out))?;
    }
    Ok(())
}

/// Says on standard error which images had no symbols (unless `-q`) and what the log lost.
pub fn report_profile_warnings(o: &Options, profile: &Profile) {
    for (image, why) in profile.unreadable_images() {
        if o.verbosity >= 0 {
            tell(format_args!("warning: symbols of {image} unavailable: {why}"));
        }
    }
    report_drops(profile.dropped_notices(), 0);
    if let Some(overflow) = profile.overflow() {
        tell(format_args!(
            "warning: the analysis tables reached their {} MiB limit: {} samples of {} \
             dropped stacks (those with the fewest samples) are counted as {} in the reports; \
             --analysis-memory MIB raises the limit",
            overflow.budget >> 20,
            overflow.samples,
            overflow.stacks,
            pmcprof::OTHER_FRAME
        ));
    }
    let left_out = profile.timeline().map_or(0, pmcprof::Timeline::left_out);
    if left_out > 0 {
        let mib = o.analysis_memory.unwrap_or(pmcprof::DEFAULT_TABLE_BUDGET >> 20);
        tell(format_args!(
            "warning: the --firefox timeline reached the {mib} MiB limit of the analysis \
             tables: its last {left_out} samples are left out (the other reports count them); \
             --analysis-memory MIB raises the limit"
        ));
    }
}

/// Says, on standard error, how much was lost and what fixes it.
pub fn report_drops(drop_records: u64, lost_samples: u64) {
    if drop_records == 0 && lost_samples == 0 {
        return;
    }
    let what = if lost_samples > 0 {
        format!("{lost_samples} samples were lost")
    } else {
        format!("the log records {drop_records} losses (DROPNOTIFY)")
    };
    tell(format_args!(
        "{what}: the sample rings or log buffers filled up; sample less often (-n with a \
         larger count) or enlarge kern.hwpmc.nsamples / kern.hwpmc.logbuffersize"
    ));
}

/// Writes the file `path` with `f`, whole or not at all ([`outputs::write_whole`]): a file
/// that cannot be written is neither left empty or cut short nor harmed if it was there.
fn write_file(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Failure> {
    outputs::write_whole(path, f)
        .map_err(|e| io_failure(&format!("writing {}", path.display()), &e))
}

/// Writes to `target`, where "-" means the `-o` output.
fn write_to(
    o: &Options,
    target: &str,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Failure> {
    if target == "-" {
        let mut out = text_output(o)?;
        return f(&mut out)
            .and_then(|()| out.finish())
            .map_err(|e| io_failure("writing output", &e));
    }
    write_file(Path::new(target), f)
}
