//! Intel's perfmon `*_core.json` files: `{"Header": {...}, "Events": [...]}`.

use std::path::Path;

use serde_json::Value;

use crate::mapfile::{parse_hex, table_name};
use crate::{Error, EventLine, Table, category};

/// The table of one core-event file.
pub(crate) fn table(dir: &Path, file: &str) -> Result<Table, Error> {
    let path = dir.join(file);
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| format!("parsing {}: {e}", path.display()))?;
    let events = json
        .get("Events")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{}: no \"Events\" array", path.display()))?;
    let mut lines = Vec::with_capacity(events.len());
    for (index, event) in events.iter().enumerate() {
        lines.push(
            event_line(event).map_err(|e| format!("{}: event {index}: {e}", path.display()))?,
        );
    }
    Ok(Table { name: table_name(file), vendor: "Intel", events: lines })
}

/// A string field, empty when absent.
fn field<'a>(event: &'a Value, key: &str) -> &'a str {
    event.get(key).and_then(Value::as_str).unwrap_or_default().trim()
}

/// A numeric field given in hex (`0x1a6`) or decimal; 0 when absent, `0`, `na` or `null`.
fn number(event: &Value, key: &str) -> Result<u64, Error> {
    let text = field(event, key);
    if text.is_empty() || text.eq_ignore_ascii_case("na") || text == "null" {
        return Ok(0);
    }
    let parsed = if text.starts_with("0x") || text.starts_with("0X") {
        parse_hex(text)
    } else {
        text.parse().ok()
    };
    parsed.ok_or_else(|| format!("{key} `{text}` is not a number"))
}

/// A field holding one hex number or several separated by commas (`0xB7, 0xBB`).
fn hex_list(event: &Value, key: &str, name: &str) -> Result<Vec<u32>, Error> {
    field(event, key)
        .split(',')
        .map(|item| {
            parse_hex(item)
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| format!("{name}: bad {key} `{}`", field(event, key)))
        })
        .collect()
}

fn event_line(event: &Value) -> Result<EventLine, Error> {
    let name = field(event, "EventName").to_string();
    if name.is_empty() {
        return Err("no EventName".into());
    }
    let codes = hex_list(event, "EventCode", &name)?;
    let counter = field(event, "Counter");
    let counters = match counter.strip_prefix("Fixed counter ") {
        Some(index) => format!("fixed{}", index.trim()),
        None => {
            let mut mask = 0u64;
            for index in counter.split(',') {
                let index: u32 =
                    index.trim().parse().map_err(|_| format!("{name}: bad Counter `{counter}`"))?;
                mask |= 1 << index;
            }
            format!("{mask:x}")
        }
    };
    let mut attributes = Vec::new();
    let mut flag = |key: &str, token: &str| -> Result<(), Error> {
        if number(event, key)? != 0 {
            attributes.push(token.to_string());
        }
        Ok(())
    };
    flag("Invert", "inv")?;
    flag("EdgeDetect", "edge")?;
    flag("AnyThread", "any")?;
    flag("Offcore", "offcore")?;
    flag("TakenAlone", "takenalone")?;
    flag("Deprecated", "deprecated")?;
    let cmask = number(event, "CounterMask")?;
    if cmask != 0 {
        attributes.push(format!("cmask={cmask}"));
    }
    let umask_ext = number(event, "UMaskExt")?;
    if umask_ext != 0 {
        attributes.push(format!("umaskext={umask_ext:#x}"));
    }
    let msr_index = field(event, "MSRIndex");
    let msrs: Vec<u64> = msr_index.split(',').filter_map(parse_hex).filter(|&m| m != 0).collect();
    if !msrs.is_empty() {
        let list: Vec<String> = msrs.iter().map(|m| format!("{m:#x}")).collect();
        attributes.push(format!("msr={}", list.join(",")));
        attributes.push(format!("msrvalue={:#x}", number(event, "MSRValue")?));
    }
    // Older files say PEBS 1 (can sample precisely) or 2 (only precisely); newer ones Precise 1.
    let precise = match number(event, "PEBS")? {
        0 => number(event, "Precise")?.min(1),
        level => level,
    };
    if precise != 0 {
        attributes.push(format!("precise={precise}"));
    }
    let umasks = hex_list(event, "UMask", &name)?;
    Ok(EventLine {
        category: category::intel(&name).to_string(),
        name,
        codes,
        umasks,
        counters,
        sample_after: number(event, "SampleAfterValue")?,
        attributes,
    })
}
