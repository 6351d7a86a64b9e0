//! Linux perf's AMD files: `amdzenN/*.json`, each an array of events (and metrics, which have no
//! `EventCode` and are skipped).

use std::path::Path;

use serde_json::Value;

use crate::mapfile::parse_hex;
use crate::{Error, EventLine, Table};

/// The table of one `amdzenN` folder: its files in name order, each file's events in order.
pub(crate) fn table(dir: &Path, folder: &str) -> Result<Table, Error> {
    let path = dir.join(folder);
    let mut files: Vec<_> = std::fs::read_dir(&path)
        .map_err(|e| format!("reading {}: {e}", path.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut events = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("reading {}: {e}", file.display()))?;
        let json: Value =
            serde_json::from_str(&text).map_err(|e| format!("parsing {}: {e}", file.display()))?;
        let list = json.as_array().ok_or_else(|| format!("{}: not an array", file.display()))?;
        let category = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        for event in list.iter().filter(|e| e.get("EventCode").is_some()) {
            events.push(
                event_line(event, &category).map_err(|e| format!("{}: {e}", file.display()))?,
            );
        }
    }
    Ok(Table { name: folder.to_string(), vendor: "Amd", events })
}

fn text<'a>(event: &'a Value, key: &str) -> &'a str {
    event.get(key).and_then(Value::as_str).unwrap_or_default().trim()
}

fn event_line(event: &Value, category: &str) -> Result<EventLine, Error> {
    let name = text(event, "EventName").to_string();
    let code = parse_hex(text(event, "EventCode"))
        .ok_or_else(|| format!("{name}: bad EventCode `{}`", text(event, "EventCode")))?;
    let umask = match text(event, "UMask") {
        "" => 0,
        umask => parse_hex(umask).ok_or_else(|| format!("{name}: bad UMask `{umask}`"))?,
    };
    let mut attributes = Vec::new();
    match text(event, "Unit") {
        "" => {}
        "L3PMC" => attributes.push("unit=l3".to_string()),
        "DFPMC" => attributes.push("unit=df".to_string()),
        "UMCPMC" => attributes.push("unit=umc".to_string()),
        unit => return Err(format!("{name}: unknown Unit `{unit}`")),
    }
    if text(event, "PerPkg") == "1" {
        attributes.push("perpkg".to_string());
    }
    if text(event, "Deprecated") == "1" {
        attributes.push("deprecated".to_string());
    }
    // The L3 and memory-controller PMUs' extra fields, as numbers.
    for (key, token) in [
        ("EnAllCores", "enallcores"),
        ("EnAllSlices", "enallslices"),
        ("SliceId", "sliceid"),
        ("ThreadMask", "threadmask"),
        ("RdWrMask", "rdwrmask"),
    ] {
        let value = text(event, key);
        if !value.is_empty() {
            let value = parse_hex(value).ok_or_else(|| format!("{name}: bad {key} `{value}`"))?;
            attributes.push(format!("{token}={value:#x}"));
        }
    }
    Ok(EventLine {
        name,
        codes: vec![code as u32],
        umasks: vec![umask as u32],
        counters: String::new(),
        sample_after: 0,
        category: category.to_string(),
        attributes,
    })
}
