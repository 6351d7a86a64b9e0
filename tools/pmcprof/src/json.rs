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
///
/// The document is written as it is made, one function at a time: a profile of millions of
/// functions (a log of unreadable images, each address its own frame) would otherwise take a
/// tree of JSON values several times the size of the profile's own tables, which are what the
/// memory budget bounds. Keys come in sorted order, as `serde_json`'s maps put them.
pub fn write_json(profile: &Profile, rows: usize, out: &mut dyn Write) -> io::Result<()> {
    write!(
        out,
        "{{\"dropped_notices\":{},\"empty_samples\":{},\"pmcs\":[",
        profile.dropped_notices(),
        profile.empty_samples()
    )?;
    for (i, (name, samples)) in profile.sample_counts().into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        out.write_all(b"{\"event\":")?;
        serde_json::to_writer(&mut *out, &name)?;
        out.write_all(b",\"functions\":[")?;
        for (j, row) in flat_rows(profile, &name, rows).into_iter().enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            let frame = profile.frame(row.frame);
            let function = json!({
                "function": frame.name(),
                "image": &*frame.image,
                "address": format!("{:#x}", frame.address),
                "self": row.self_samples,
                "total": row.total_samples,
            });
            serde_json::to_writer(&mut *out, &function)?;
        }
        write!(out, "],\"samples\":{samples}}}")?;
    }
    let unreadable: Vec<Value> = profile
        .unreadable_images()
        .iter()
        .map(|(image, reason)| json!({"image": image, "reason": reason}))
        .collect();
    write!(
        out,
        "],\"records\":{},\"samples\":{},\"unreadable_images\":",
        profile.records(),
        profile.total_samples()
    )?;
    serde_json::to_writer(&mut *out, &unreadable)?;
    out.write_all(b"}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ResolveOptions;
    use pmcprof_fixtures::{Program, hot_warm_main};

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
        // The streamed document is the one serde_json makes of the same values.
        let again = serde_json::to_vec(&v).unwrap();
        assert_eq!(String::from_utf8(again).unwrap() + "\n", String::from_utf8(out).unwrap());
        let mut two = Vec::new();
        write_json(&profile, 2, &mut two).unwrap();
        let v: Value = serde_json::from_slice(&two).unwrap();
        assert_eq!(v["pmcs"][0]["functions"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn the_streamed_document_is_valid_json_with_several_pmcs_and_unreadable_images() {
        use pmcprof_fixtures::LogBuilder;
        let mut log = LogBuilder::new();
        log.allocate(0x100, 0x10000).allocate(0x200, 0x10001);
        log.map_in(9, 0x1000_0000, "/nonexistent/a\"quoted\".so");
        log.samples(9, 0x100, &[0x1000_0042], 2).samples(9, 0x200, &[0x1000_0050], 1);
        let profile = Profile::from_log(&log.bytes(), &ResolveOptions::default()).unwrap();
        let mut out = Vec::new();
        write_json(&profile, usize::MAX, &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(serde_json::to_vec(&v).unwrap(), out[..out.len() - 1]);
        assert_eq!(v["pmcs"].as_array().unwrap().len(), 2);
        assert_eq!(v["unreadable_images"][0]["image"], "/nonexistent/a\"quoted\".so");
    }
}
