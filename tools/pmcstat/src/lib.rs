//! pmcstat(8) as a library: the command line ([`cli`]), measurements over libpmc ([`measure`]),
//! counting output ([`counts`]), and the offline analysis of pmclog files ([`analysis`],
//! [`report`]).

pub mod analysis;
pub mod cli;
pub mod counts;
pub mod failure;
pub mod measure;
pub mod report;

use std::ffi::OsString;

use failure::Failure;
use pmc::api;

/// Runs pmcstat with `args` (without the program name) and returns its exit status: the
/// measured command's status, 0, or a sysexits(3) status after a one-line message on standard
/// error.
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let options = match cli::parse(args) {
        Ok(o) => o,
        Err(cli::CliError::Help(text)) => {
            print!("{text}");
            return 0;
        }
        Err(cli::CliError::Usage(message)) => {
            eprintln!("pmcstat: {message}");
            return failure::EX_USAGE;
        }
    };
    match run(&options) {
        Ok(status) => status,
        Err(failure) => {
            eprintln!("pmcstat: {failure}");
            failure.status
        }
    }
}

fn run(o: &cli::Options) -> Result<i32, Failure> {
    if let Some(log) = &o.read_log {
        return report::run(o, log);
    }
    if o.list {
        return list_events();
    }
    if let Some(spec) = &o.describe {
        return describe_event(spec);
    }
    measure::run(o)
}

/// `-L`: each class of this host and its events.
fn list_events() -> Result<i32, Failure> {
    let events = api::list_events().map_err(|e| Failure::pmc("listing events", &e))?;
    let mut class = None;
    for (c, name) in events {
        if class != Some(c) {
            println!("{}", c.name());
            class = Some(c);
        }
        println!("\t{name}");
    }
    Ok(0)
}

/// `-u spec`: what an event is on this host.
fn describe_event(spec: &str) -> Result<i32, Failure> {
    let event =
        api::lookup_event(spec).map_err(|e| Failure::pmc(&format!("event {spec:?}"), &e))?;
    println!(
        "{}: class {}, {:?}, default sampling rate {}",
        event.name,
        event.class.name(),
        event.kind,
        event.default_rate
    );
    Ok(0)
}
