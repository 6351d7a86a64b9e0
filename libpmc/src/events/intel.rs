//! The x86 crate's Intel event tables (generated from Intel's perfmon JSON files), reduced to the
//! core events libpmc can program: one event code, one unit mask, no extra MSR, not uncore.

use x86::perfcnt::intel::events::COUNTER_MAP;
use x86::perfcnt::intel::{Counter, EventDescription, MSRIndex, Tuple};

use super::catalog::{self, Programmable};

/// What a table entry asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TableEvent {
    /// A fixed counter.
    Fixed(u8),
    /// A programmable counter.
    Programmable(Programmable),
    /// An event that needs the AnyThread bit, which libpmc refuses.
    AnyThread,
}

/// The table of `model` (`"GenuineIntel-6-5E"`; the model's hex digits in either case), as
/// (name, event) pairs, skipping what libpmc cannot program. Empty when the crate has no table.
pub(super) fn events(model: &str) -> impl Iterator<Item = (&'static str, TableEvent)> {
    let table = COUNTER_MAP.get(model).or_else(|| COUNTER_MAP.get(normalize_key(model).as_str()));
    table.into_iter().flat_map(|map| map.values()).filter_map(convert)
}

/// `model` with the hex digits after the last '-' in upper case and at least two wide, as the
/// table keys (and FreeBSD's `kern.hwpmc.cpuid`) spell them.
fn normalize_key(model: &str) -> String {
    match model.rsplit_once('-') {
        Some((head, hex)) => format!("{head}-{:0>2}", hex.to_ascii_uppercase()),
        None => model.to_string(),
    }
}

/// The entry as libpmc programs it, or `None` for what it cannot: uncore events, offcore-response
/// events (they need MSR_OFFCORE_RSP_x), events with two codes or two unit masks, extended event
/// selects, and fixed-counter entries other than the three fixed counters libpmc knows.
fn convert(description: &'static EventDescription<'static>) -> Option<(&'static str, TableEvent)> {
    let name = description.event_name;
    if description.uncore
        || description.offcore
        || description.extsel
        || description.umask_ext != 0
        || description.msr_index != MSRIndex::None
        || name.starts_with("UNC_")
    {
        return None;
    }
    let (Tuple::One(event), Tuple::One(umask)) = (&description.event_code, &description.umask)
    else {
        return None;
    };
    if description.any_thread {
        return Some((name, TableEvent::AnyThread));
    }
    // Fixed-counter entries are spelled inconsistently across the tables (event 0 with umask 1-3
    // on recent cores, 0/0 or 0xA/0 on older ones, counters numbered from 0 or from 1), so they
    // are recognised by name.
    if matches!(description.counter, Counter::Fixed(_)) || *event == 0 {
        return Some((name, TableEvent::Fixed(catalog::fixed_index(name)?)));
    }
    let rate = match description.sample_after_value {
        0 => super::DEFAULT_SAMPLE_RATE,
        rate => rate,
    };
    Some((
        name,
        TableEvent::Programmable(Programmable {
            event: *event,
            umask: *umask,
            cmask: description.counter_mask,
            invert: description.invert,
            edge: description.edge_detect,
            arch_bit: None,
            rate,
        }),
    ))
}
