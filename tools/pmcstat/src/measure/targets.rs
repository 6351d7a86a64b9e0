//! The processes a run measures: the command it launches and the processes `-t` names.

use pmc::api;
use pmc::host::HostKind;

use crate::cli::Options;
use crate::failure::Failure;
use crate::signals;

use super::pmcs::Allocated;

/// The processes a run measures: the command it launched, if any, and every process it
/// attached to (the command included).
pub(super) struct Targets {
    /// The launched command, stopped until [`start`] resumes it.
    pub(super) child: Option<i32>,
    /// `-t`'s processes and the command.
    pub(super) pids: Vec<i32>,
}

/// The pids `-t` names: a number, or a regex matched against command names (Linux `/proc`).
/// On the simulator the pids are the simulated machine's: they are checked by PMCATTACH, and
/// there are no command names to match.
fn resolve_targets(specs: &[String], host: HostKind) -> Result<Vec<i32>, Failure> {
    let mut pids = Vec::new();
    for spec in specs {
        if let Ok(pid) = spec.parse::<i32>() {
            let real = host != HostKind::Sim;
            if pid <= 0 || (real && !std::path::Path::new(&format!("/proc/{pid}")).exists()) {
                return Err(Failure::usage(format!("-t {spec}: no such process")));
            }
            pids.push(pid);
            continue;
        }
        if host == HostKind::Sim {
            return Err(Failure::usage(format!(
                "-t {spec:?}: the simulator's processes are attached to by pid"
            )));
        }
        let re = regex_lite::Regex::new(spec)
            .map_err(|e| Failure::usage(format!("-t {spec:?}: not a pid or a valid regex: {e}")))?;
        let me = std::process::id() as i32;
        let found: Vec<i32> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| pid != me)
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| re.is_match(c.trim_end()))
            })
            .collect();
        if found.is_empty() {
            return Err(Failure::usage(format!(
                "-t {spec:?}: no process has a matching command name"
            )));
        }
        pids.extend(found);
    }
    pids.sort_unstable();
    pids.dedup();
    Ok(pids)
}

/// Launches the command (stopped before it runs), finds `-t`'s processes, and attaches every
/// process PMC to them all.
pub(super) fn launch_and_attach(
    o: &Options,
    host: HostKind,
    pmcs: &[Allocated],
) -> Result<Targets, Failure> {
    let child = if o.command.is_empty() {
        None
    } else {
        Some(
            api::spawn(&o.command)
                .map_err(|e| Failure::pmc(&format!("cannot run {:?}", o.command[0]), &e))?,
        )
    };
    if let Some(pid) = child {
        signals::launched(pid);
    }
    if host != HostKind::Sim {
        signals::finish_log_at_once();
    }
    let mut pids = resolve_targets(&o.targets, host)?;
    pids.extend(child);
    for a in pmcs.iter().filter(|a| a.request.mode.is_virtual()) {
        for &pid in &pids {
            a.pmc.attach(pid).map_err(|e| {
                Failure::pmc(&format!("cannot attach {:?} to process {pid}", a.request.spec), &e)
            })?;
        }
    }
    Ok(Targets { child, pids })
}
