//! `eventgen`: writes libpmc's event tables (`libpmc/src/events/generated/`) from the vendors'
//! event data — Intel's perfmon repository (`intel-perfmon/`: `mapfile.csv` and every model's
//! `*_core.json`) and Linux perf's AMD files (`amd-pmu-events/`: `amdzenN/*.json` and
//! `mapfile.csv`).
//!
//! ```text
//! cargo run -p eventgen [-- [DATA_DIR] [--check]]
//! ```
//!
//! `DATA_DIR` defaults to `../shared/data` beside the repository. With `--check` nothing is
//! written: the exit status is 1 when the committed tables differ from what the data gives.
//!
//! Only facts are kept (names, codes, unit masks, counter masks and flags, extra MSR values,
//! counter constraints, sample-after values, precise-sampling capability, the hybrid core type);
//! the vendors' description texts are not copied.

mod amd;
mod category;
mod intel;
mod mapfile;
mod output;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// One event of a table, as written to its `.tsv` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EventLine {
    /// The vendor's name.
    pub(crate) name: String,
    /// Event select codes (two for Intel's older offcore-response pseudo-events).
    pub(crate) codes: Vec<u32>,
    /// Unit masks (two for the offcore-response events of some Atom cores, one per MSR).
    pub(crate) umasks: Vec<u32>,
    /// Counters: `fixedN`, a hex mask of general counters, or empty for "any".
    pub(crate) counters: String,
    /// The vendor's suggested sampling period; 0 when none is given.
    pub(crate) sample_after: u64,
    /// A short category of our own (`cache`, `branch`, …).
    pub(crate) category: String,
    /// The rare attributes, as `key` or `key=value` tokens (`cmask=1`, `inv`, `msr=0x3f6`, …).
    pub(crate) attributes: Vec<String>,
}

/// One table: the events of one core type of one model family.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    /// Its name (`skylake`, `alderlake_goldencove`, `amdzen4`).
    pub(crate) name: String,
    /// `Intel` or `Amd`.
    pub(crate) vendor: &'static str,
    /// Its events, in the order of the vendor's files.
    pub(crate) events: Vec<EventLine>,
}

/// What went wrong, said to the user.
pub(crate) type Error = String;

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("eventgen: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Vec<String>) -> Result<ExitCode, Error> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut data = repo.join("../shared/data");
    let mut check = false;
    let mut positional = 0;
    for arg in args {
        match arg.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                println!(
                    "usage: eventgen [DATA_DIR] [--check]\n\
                     DATA_DIR holds intel-perfmon/ and amd-pmu-events/ (default ../shared/data \
                     beside the repository); --check compares instead of writing"
                );
                return Ok(ExitCode::SUCCESS);
            }
            flag if flag.starts_with('-') => {
                return Err(format!(
                    "unknown option `{flag}`; usage: eventgen [DATA_DIR] [--check]"
                ));
            }
            _ if positional == 0 => {
                data = PathBuf::from(arg);
                positional += 1;
            }
            _ => {
                return Err(
                    "more than one DATA_DIR given; usage: eventgen [DATA_DIR] [--check]".into()
                );
            }
        }
    }
    let intel_dir = data.join("intel-perfmon");
    let amd_dir = data.join("amd-pmu-events");
    for dir in [&intel_dir, &amd_dir] {
        if !dir.is_dir() {
            return Err(format!(
                "{} is not a directory: DATA_DIR must hold intel-perfmon/ and amd-pmu-events/",
                dir.display()
            ));
        }
    }
    let intel_rows = mapfile::intel_rows(&intel_dir)?;
    let amd_rows = mapfile::amd_rows(&amd_dir)?;
    let mut tables = Vec::new();
    for file in mapfile::table_files(&intel_rows) {
        tables.push(intel::table(&intel_dir, &file)?);
    }
    for file in mapfile::table_files(&amd_rows) {
        tables.push(amd::table(&amd_dir, &file)?);
    }
    let models = mapfile::expand(&intel_rows, &amd_rows, &tables)?;
    let sources = output::Sources { intel_commit: output::intel_commit(&intel_dir)? };
    let files = output::render(&tables, &models, &sources);
    let out = repo.join("libpmc/src/events/generated");
    if check {
        let stale = output::stale(&out, &files)?;
        if stale.is_empty() {
            println!("eventgen: the tables in {} are up to date", out.display());
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!(
            "eventgen: the tables in {} are out of date ({}); run `cargo run -p eventgen`",
            out.display(),
            stale.join(", ")
        );
        return Ok(ExitCode::FAILURE);
    }
    output::write(&out, &files)?;
    let events: usize = tables.iter().map(|t| t.events.len()).sum();
    println!(
        "eventgen: wrote {} tables ({events} events) and {} model rows to {}",
        tables.len(),
        models.len(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}
