//! `-R file`: a log printed as text, or turned into call graphs, gmon files, calltree profiles,
//! folded stacks, flame graphs, pprof profiles and flat profiles.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use pmc::events::pmu_table::PmuEventNames;

use crate::analysis::{self, Profile, ResolveOptions};
use crate::cli::Options;
use crate::failure::{Failure, io_failure};

/// Whether the options ask for any analysis of a log (beyond the text dump).
pub fn wants_analysis(o: &Options) -> bool {
    o.callgraph.is_some()
        || o.gmon
        || o.calltree.is_some()
        || o.folded.is_some()
        || o.flamegraph.is_some()
        || o.pprof.is_some()
        || o.top.is_some()
}

/// Where text goes: the `-o` file, else standard output.
pub fn text_output(o: &Options) -> Result<Box<dyn Write>, Failure> {
    match &o.output {
        Some(path) => Ok(Box::new(BufWriter::new(create(path)?))),
        None => Ok(Box::new(BufWriter::new(std::io::stdout()))),
    }
}

fn create(path: &Path) -> Result<File, Failure> {
    File::create(path).map_err(|e| io_failure(&format!("cannot create {}", path.display()), &e))
}

/// `-R file` with the options' analyses (or the text dump without any).
pub fn run(o: &Options, log: &Path) -> Result<i32, Failure> {
    if !wants_analysis(o) && !o.json {
        let file = File::open(log)
            .map_err(|e| io_failure(&format!("cannot read log {}", log.display()), &e))?;
        let mut out = text_output(o)?;
        let end = pmclog::dump_reader_with_names(file, PmuEventNames, &mut out)
            .map_err(|e| io_failure("writing the dump", &e))?;
        out.flush().map_err(|e| io_failure("writing the dump", &e))?;
        if let Some(message) = end.error_message() {
            return Err(Failure::data(format!("{}: {message}", log.display())));
        }
        if let Some(warning) = end.warning() {
            eprintln!("pmcstat: warning: {}: {warning}", log.display());
        }
        return Ok(0);
    }
    let bytes = std::fs::read(log)
        .map_err(|e| io_failure(&format!("cannot read log {}", log.display()), &e))?;
    let profile = load_profile(o, &bytes, &log.display().to_string())?;
    check_thread(o, &profile, &log.display().to_string())?;
    write_analyses(o, &profile)?;
    report_profile_warnings(o, &profile);
    // pmcstat exits next: freeing every symbol of every image (a kernel alone has ~100 000)
    // would take longer than writing the reports did.
    std::mem::forget(profile);
    Ok(0)
}

/// Writes every analysis the options ask for from the log in `bytes` (`name` names it in
/// errors), then the warnings of [`report_profile_warnings`].
pub fn analyse(o: &Options, bytes: &[u8], name: &str) -> Result<i32, Failure> {
    let profile = load_profile(o, bytes, name)?;
    write_analyses(o, &profile)?;
    report_profile_warnings(o, &profile);
    Ok(0)
}

/// Reads the log in `bytes` with the options' `-r`, `-I` and `-A`; `name` names it in errors.
pub fn load_profile(o: &Options, bytes: &[u8], name: &str) -> Result<Profile, Failure> {
    let resolve = ResolveOptions {
        fsroot: o.fsroot.clone(),
        show_offsets: o.offsets,
        raw_addresses: o.addresses,
        thread: o.thread,
        lines: o.calltree.is_some() || o.pprof.is_some(),
        ..ResolveOptions::default()
    };
    Profile::from_log_with_names(bytes, &resolve, &PmuEventNames).map_err(|e| {
        Failure::data(format!(
            "{name}: corrupt log at byte offset {:#x} (record {}): {}",
            e.offset(),
            e.record(),
            e.message()
        ))
    })
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

/// The longest prefix of `bytes` made of whole records: a log still being written may end
/// inside a record (or, read at the wrong moment, anywhere), and the part after the last
/// record that decodes is left for a later read.
pub fn whole_records(bytes: &[u8]) -> &[u8] {
    let mut records = pmclog::Records::new(bytes);
    for entry in records.by_ref() {
        if let Err(e) = entry {
            return &bytes[..usize::try_from(e.offset()).unwrap_or(0).min(bytes.len())];
        }
    }
    &bytes[..usize::try_from(records.offset()).unwrap_or(bytes.len()).min(bytes.len())]
}

/// Writes the analyses the options ask for.
pub fn write_analyses(o: &Options, profile: &Profile) -> Result<(), Failure> {
    let depth = o.depth.unwrap_or(analysis::DEFAULT_CALLGRAPH_DEPTH);
    if let Some(target) = &o.callgraph {
        write_to(o, target, |out| analysis::write_callgraph_depth(profile, depth, out))?;
    }
    if let Some(target) = &o.calltree {
        write_to(o, target, |out| analysis::write_calltree(profile, out))?;
    }
    if o.gmon {
        write_gmon(o, profile)?;
    }
    if let Some(path) = &o.folded {
        write_file(path, |out| analysis::write_folded(profile, out))?;
    }
    if let Some(path) = &o.flamegraph {
        write_file(path, |out| analysis::write_flamegraph(profile, out))?;
    }
    if let Some(path) = &o.pprof {
        write_file(path, |out| analysis::write_pprof(profile, out))?;
    }
    // With -R, --json is the flat profile (in a measurement it is the counts).
    let json = o.json && o.read_log.is_some();
    if let Some(rows) = o.top.filter(|_| !json) {
        let mut out = text_output(o)?;
        analysis::write_top(profile, rows, &mut out)
            .map_err(|e| io_failure("writing the profile", &e))?;
        out.flush().map_err(|e| io_failure("writing the profile", &e))?;
    }
    if json {
        let mut out = text_output(o)?;
        analysis::write_json(profile, o.top.unwrap_or(usize::MAX), &mut out)
            .map_err(|e| io_failure("writing the profile", &e))?;
        out.flush().map_err(|e| io_failure("writing the profile", &e))?;
    }
    Ok(())
}

/// `-g`: the gmon files under the `-D` directory (default `.`), in the layout of the gprof of
/// this system ([`analysis::GmonHeader::native`]); `-M`: the mapping of images to them.
fn write_gmon(o: &Options, profile: &Profile) -> Result<(), Failure> {
    let gmons = analysis::gmon_profiles(profile, o.gmon_kernel);
    let dir = o.gmon_dir.clone().unwrap_or_else(|| PathBuf::from("."));
    analysis::write_gmon_files(&gmons, &dir, analysis::GmonHeader::native())
        .map_err(|e| io_failure("writing gmon files", &e))?;
    if let Some(path) = &o.gmon_map {
        write_file(path, |out| analysis::write_gmon_map(&gmons, out))?;
    }
    Ok(())
}

/// Says on standard error which images had no symbols (unless `-q`) and what the log lost.
pub fn report_profile_warnings(o: &Options, profile: &Profile) {
    for (image, why) in profile.unreadable_images() {
        if o.verbosity >= 0 {
            eprintln!("pmcstat: warning: symbols of {image} unavailable: {why}");
        }
    }
    report_drops(profile.dropped_notices(), 0);
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
    eprintln!(
        "pmcstat: {what}: the sample rings or log buffers filled up; sample less often (-n with a \
         larger count) or enlarge kern.hwpmc.nsamples / kern.hwpmc.logbuffersize"
    );
}

/// Writes the file `path` with `f`; a file `f` fails to write is removed rather than left
/// empty or cut short.
fn write_file(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Failure> {
    let mut out = BufWriter::new(create(path)?);
    let written = f(&mut out).and_then(|()| out.flush());
    written.map_err(|e| {
        drop(out);
        let _ = std::fs::remove_file(path);
        io_failure(&format!("writing {}", path.display()), &e)
    })
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
            .and_then(|()| out.flush())
            .map_err(|e| io_failure("writing output", &e));
    }
    write_file(Path::new(target), f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pmcid: u32, pcs: &[u64]) -> Vec<u8> {
        let mut buf = vec![0u8; pmclog::MAX_RECORD_LEN];
        let record = pmclog::Record::Callchain(pmclog::Callchain {
            pid: 1,
            tid: 1,
            pmcid,
            cpuflags: pmclog::CallchainFlags::new(0, 1),
            pcs: pmclog::ProgramCounters::from_words(pcs),
        });
        let len = pmclog::encode(&record, 0, &mut buf).unwrap();
        buf.truncate(len);
        buf
    }

    #[test]
    fn a_log_being_written_is_read_up_to_its_last_whole_record() {
        let (first, second) = (record(1, &[0x10, 0x20]), record(2, &[0x30]));
        let log = [first.clone(), second.clone()].concat();
        assert_eq!(whole_records(&log), &log[..]);
        for cut in 0..log.len() {
            let expected = if cut < first.len() { 0 } else { first.len() };
            assert_eq!(whole_records(&log[..cut]).len(), expected, "cut at {cut}");
        }
        assert_eq!(whole_records(&[]), &[] as &[u8]);
    }
}
