//! The PMCs of a run: allocated from the command line's requests (one per CPU for a system
//! PMC), and the counting PMCs' counts read.

use pmc::api;
use pmc::{Pmc, PmcSpec};

use crate::cli::{Options, PmcRequest};
use crate::failure::Failure;

/// One allocated PMC and how to show it.
pub(super) struct Allocated {
    pub(super) pmc: Pmc,
    pub(super) request: PmcRequest,
    pub(super) cpu: Option<u32>,
}

/// The CPUs a system PMC goes on.
fn cpus_of(request: &PmcRequest, ncpu: u32) -> Result<Vec<u32>, Failure> {
    match &request.cpus {
        None => Ok((0..ncpu).collect()),
        Some(cpus) => {
            if let Some(bad) = cpus.iter().find(|&&c| c >= ncpu) {
                return Err(Failure::usage(format!(
                    "-c: CPU {bad} does not exist (this machine has {ncpu})"
                )));
            }
            Ok(cpus.clone())
        }
    }
}

pub(super) fn allocate(o: &Options, ncpu: u32) -> Result<Vec<Allocated>, Failure> {
    let mut out = Vec::new();
    for request in &o.pmcs {
        let cpus: Vec<Option<u32>> = if request.mode.is_system() {
            cpus_of(request, ncpu)?.into_iter().map(Some).collect()
        } else {
            vec![None]
        };
        for cpu in cpus {
            let mut spec = PmcSpec::new(&request.spec).mode(request.mode).flags(request.flags);
            if let Some(cpu) = cpu {
                spec = spec.cpu(cpu);
            }
            if let Some(rate) = request.rate {
                spec = spec.rate(rate);
            }
            if let Some(hz) = request.frequency {
                spec = spec.rate(clock_period(request, hz)?);
            }
            let pmc = spec.allocate().map_err(|e| allocation_failure(request, cpu, &out, &e))?;
            out.push(Allocated { pmc, request: request.clone(), cpu });
        }
    }
    Ok(out)
}

/// The sampling period of `request`'s clock event for `hz` samples a second (`--freq`); only
/// the clock events, whose rate is a time, have one.
fn clock_period(request: &PmcRequest, hz: u64) -> Result<u64, Failure> {
    let event = api::lookup_event(&request.spec)
        .map_err(|e| Failure::pmc(&format!("event {:?}", request.spec), &e))?;
    match &event.kind {
        pmc::events::EventKind::Soft { name } if pmc::host::is_clock_event(name) => {
            Ok(1_000_000_000 / hz)
        }
        _ => Err(Failure::usage(format!(
            "--freq {hz}: {:?} is not a clock event (its rate counts events, not time): give -n \
             for it, or sample cpu-clock",
            request.spec
        ))),
    }
}

/// Why `request` (on `cpu`) could not be allocated after `allocated`: when its class has no
/// row left, the error names the class's number of rows.
fn allocation_failure(
    request: &PmcRequest,
    cpu: Option<u32>,
    allocated: &[Allocated],
    e: &pmc::Error,
) -> Failure {
    let doing = format!("cannot allocate {:?}", request.spec);
    if let Some(hint) =
        api::lookup_event(&request.spec).ok().and_then(|event| event.refusal_hint(e.errno))
    {
        let mut failure = Failure::pmc(&doing, e);
        failure.message = format!("{doing}: {hint} ({e})");
        return failure;
    }
    let class = api::lookup_event(&request.spec).map(|event| event.class.as_u32());
    let rows = class.ok().and_then(|class| {
        let info = api::classes().ok()?.into_iter().find(|c| c.pm_class == class)?;
        Some((class, info.pm_num))
    });
    let Some((class, rows)) = rows else { return Failure::pmc(&doing, e) };
    let used = allocated
        .iter()
        .filter(|a| a.cpu == cpu)
        .filter(|a| pmc::PmcId::from_u32(a.pmc.id()).is_some_and(|id| id.class.as_u32() == class))
        .count();
    if used < rows as usize {
        return Failure::pmc(&doing, e);
    }
    let name = pmc::Class::from_u32(class).map_or("this", |c| c.name());
    let where_ = cpu.map(|c| format!(" on CPU {c}")).unwrap_or_default();
    let mut failure = Failure::pmc(&doing, e);
    failure.message = format!(
        "{doing}: the {name} class has {rows} rows and this run already uses all of them{where_}: \
         give at most {rows} {name} PMC options ({e})"
    );
    failure
}

/// The counting PMCs' counts. With --multiplex, each count with its times, scaled to the whole
/// time enabled; else FreeBSD's read.
pub(super) fn read_readings(
    o: &Options,
    counting: &[&Allocated],
) -> Result<Vec<pmc::ScaledValue>, Failure> {
    counting
        .iter()
        .map(|a| {
            let read = if o.multiplex {
                a.pmc.read_scaled()
            } else {
                a.pmc.read().map(|value| pmc::ScaledValue { value, ..Default::default() })
            };
            read.map_err(|e| Failure::pmc(&format!("cannot read {:?}", a.request.spec), &e))
        })
        .collect()
}

/// The counts as printed: scaled, 0 for a PMC that never ran.
pub(super) fn scaled_values(readings: &[pmc::ScaledValue]) -> Vec<u64> {
    readings.iter().map(|r| r.scaled().unwrap_or(0)).collect()
}
