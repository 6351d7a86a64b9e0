//! `pmcstat -R log --json`: the flat profile as one JSON document, for scripts.
//!
//! ```json
//! {"records": 13, "samples": 10, "dropped_notices": 0, "empty_samples": 0,
//!  "pmcs": [{"event": "INSTR_RETIRED_ANY", "samples": 10, "functions": [
//!     {"function": "hot", "image": "/tmp/prog", "address": "0x401126",
//!      "self": 7, "total": 7}, …]}],
//!  "unreadable_images": [{"image": "/lib/libfoo.so", "reason": "…"}]}
//! ```
//!
//! One entry per PMC name (as [`Profile::sample_counts`]), its functions sorted as
//! [`super::write_top`] prints them, at most `rows` of them; `address` is the function's
//! link-time start (an unresolved frame's own address), as a hex string.

use std::io::{self, Write};

use serde_json::{Value, json};

use super::profile::Profile;
use super::top::flat_rows;

/// Writes the profile as JSON, at most `rows` functions per PMC, and a newline.
pub fn write_json(profile: &Profile, rows: usize, out: &mut dyn Write) -> io::Result<()> {
    let pmcs: Vec<Value> = profile
        .sample_counts()
        .into_iter()
        .map(|(name, samples)| {
            let functions: Vec<Value> = flat_rows(profile, &name, rows)
                .into_iter()
                .map(|row| {
                    let frame = profile.frame(row.frame);
                    json!({
                        "function": frame.name(),
                        "image": &*frame.image,
                        "address": format!("{:#x}", frame.address),
                        "self": row.self_samples,
                        "total": row.total_samples,
                    })
                })
                .collect();
            json!({"event": name, "samples": samples, "functions": functions})
        })
        .collect();
    let unreadable: Vec<Value> = profile
        .unreadable_images()
        .iter()
        .map(|(image, reason)| json!({"image": image, "reason": reason}))
        .collect();
    let document = json!({
        "records": profile.records(),
        "samples": profile.total_samples(),
        "dropped_notices": profile.dropped_notices(),
        "empty_samples": profile.empty_samples(),
        "pmcs": pmcs,
        "unreadable_images": unreadable,
    });
    serde_json::to_writer(&mut *out, &document)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::ResolveOptions;
    use crate::analysis::testutil::{Program, hot_warm_main};

    #[test]
    fn the_json_profile_has_every_pmcs_functions_with_their_samples() {
        let p = Program::build(false);
        let profile =
            Profile::from_log(&hot_warm_main(&p).bytes(), &ResolveOptions::default()).unwrap();
        let mut out = Vec::new();
        write_json(&profile, usize::MAX, &mut out).unwrap();
        assert_eq!(out.last(), Some(&b'\n'));
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!((v["records"].as_u64(), v["samples"].as_u64()), (Some(13), Some(10)));
        assert_eq!(v["pmcs"].as_array().unwrap().len(), 1);
        let pmc = &v["pmcs"][0];
        assert_eq!(
            (pmc["event"].as_str(), pmc["samples"].as_u64()),
            (Some("INSTR_RETIRED_ANY"), Some(10))
        );
        let rows: Vec<(&str, u64, u64, String)> = pmc["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                assert_eq!(f["image"].as_str(), Some(p.log_path()));
                let name = f["function"].as_str().unwrap();
                (
                    name,
                    f["self"].as_u64().unwrap(),
                    f["total"].as_u64().unwrap(),
                    f["address"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let at = |name: &str| format!("{:#x}", p.at(name, 0));
        assert_eq!(
            rows,
            [("hot", 7, 7, at("hot")), ("warm", 3, 9, at("warm")), ("main", 0, 10, at("main"))]
        );
        let mut two = Vec::new();
        write_json(&profile, 2, &mut two).unwrap();
        let v: Value = serde_json::from_slice(&two).unwrap();
        assert_eq!(v["pmcs"][0]["functions"].as_array().unwrap().len(), 2);
    }
}
