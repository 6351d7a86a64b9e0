//! `-R file`: a log printed as text, or turned into call graphs, folded stacks, flame graphs,
//! pprof profiles and flat profiles.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

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
    let bytes = std::fs::read(log)
        .map_err(|e| io_failure(&format!("cannot read log {}", log.display()), &e))?;
    if !wants_analysis(o) {
        let mut out = text_output(o)?;
        let end = pmclog::dump_bytes_with_names(&bytes, PmuEventNames, &mut out)
            .map_err(|e| io_failure("writing the dump", &e))?;
        out.flush().map_err(|e| io_failure("writing the dump", &e))?;
        if let Some(message) = end.error_message() {
            return Err(Failure::data(format!("{}: {message}", log.display())));
        }
        return Ok(0);
    }
    analyse(o, &bytes, &log.display().to_string())
}

/// Writes every analysis the options ask for from the log in `bytes`.
pub fn analyse(o: &Options, bytes: &[u8], name: &str) -> Result<i32, Failure> {
    let resolve = ResolveOptions {
        fsroot: o.fsroot.clone(),
        show_offsets: o.offsets,
        raw_addresses: o.addresses,
    };
    let profile = Profile::from_log_with_names(bytes, &resolve, &PmuEventNames).map_err(|e| {
        Failure::data(format!(
            "{name}: corrupt log at byte offset {:#x} (record {}): {}",
            e.offset(),
            e.record(),
            e.message()
        ))
    })?;
    let depth = o.depth.unwrap_or(analysis::DEFAULT_CALLGRAPH_DEPTH);
    if let Some(target) = &o.callgraph {
        write_to(o, target, |out| analysis::write_callgraph_depth(&profile, depth, out))?;
    }
    if let Some(path) = &o.folded {
        write_file(path, |out| analysis::write_folded(&profile, out))?;
    }
    if let Some(path) = &o.flamegraph {
        write_file(path, |out| analysis::write_flamegraph(&profile, out))?;
    }
    if let Some(path) = &o.pprof {
        write_file(path, |out| analysis::write_pprof(&profile, out))?;
    }
    if let Some(rows) = o.top {
        let mut out = text_output(o)?;
        analysis::write_top(&profile, rows, &mut out)
            .map_err(|e| io_failure("writing the profile", &e))?;
        out.flush().map_err(|e| io_failure("writing the profile", &e))?;
    }
    if o.gmon || o.calltree.is_some() {
        return Err(Failure::usage(
            "-g (gmon) and -F (calltree) output are not available yet; use -G, --folded, --flamegraph, --pprof or --top",
        ));
    }
    for (image, why) in profile.unreadable_images() {
        if o.verbosity >= 0 {
            eprintln!("pmcstat: warning: symbols of {image} unavailable: {why}");
        }
    }
    report_drops(profile.dropped_notices(), 0);
    Ok(0)
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

fn write_file(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Failure> {
    let mut out = BufWriter::new(create(path)?);
    f(&mut out)
        .and_then(|()| out.flush())
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
            .and_then(|()| out.flush())
            .map_err(|e| io_failure("writing output", &e));
    }
    write_file(Path::new(target), f)
}
