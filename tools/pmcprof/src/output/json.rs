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
//! [`crate::write_top`] prints them, at most `rows` of them; `address` is the function's
//! link-time start (an unresolved frame's own address), as a hex string.

use std::io::{self, Write};

use serde::ser::{Serialize, Serializer};

use super::top::flat_rows;
use crate::profile::Profile;

/// Writes the profile as JSON, at most `rows` functions per PMC, and a newline.
///
/// The document is written as it is made, one function at a time: a profile of millions of
/// functions (a log of unreadable images, each address its own frame) would otherwise take a
/// tree of JSON values several times the size of the profile's own tables, which are what the
/// memory budget bounds. Keys come in sorted order (the fields below are declared so), as
/// `serde_json`'s maps put them.
pub fn write_json(profile: &Profile, rows: usize, out: &mut dyn Write) -> io::Result<()> {
    let document = Document {
        dropped_notices: profile.dropped_notices(),
        empty_samples: profile.empty_samples(),
        pmcs: Pmcs { profile, rows },
        records: profile.records(),
        samples: profile.total_samples(),
        unreadable_images: profile
            .unreadable_images()
            .iter()
            .map(|(image, reason)| Unreadable { image, reason })
            .collect(),
    };
    serde_json::to_writer(&mut *out, &document)?;
    out.write_all(b"\n")
}

/// The whole document.
#[derive(serde::Serialize)]
struct Document<'a> {
    dropped_notices: u64,
    empty_samples: u64,
    pmcs: Pmcs<'a>,
    records: u64,
    samples: u64,
    unreadable_images: Vec<Unreadable<'a>>,
}

/// The PMCs, one per name, each made when it is written.
struct Pmcs<'a> {
    profile: &'a Profile,
    rows: usize,
}

impl Serialize for Pmcs<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Pmcs { profile, rows } = *self;
        let counts = profile.sample_counts();
        serializer.collect_seq(counts.iter().map(|(event, samples)| Pmc {
            event,
            functions: Functions { profile, event, rows },
            samples: *samples,
        }))
    }
}

/// One PMC name's samples.
#[derive(serde::Serialize)]
struct Pmc<'a> {
    event: &'a str,
    functions: Functions<'a>,
    samples: u64,
}

/// The flat profile of one PMC name, made when it is written.
struct Functions<'a> {
    profile: &'a Profile,
    event: &'a str,
    rows: usize,
}

impl Serialize for Functions<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let profile = self.profile;
        serializer.collect_seq(flat_rows(profile, self.event, self.rows).into_iter().map(|row| {
            let frame = profile.frame(row.frame);
            Function {
                address: format!("{:#x}", frame.address),
                function: frame.name(),
                image: &frame.image,
                self_samples: row.self_samples,
                total: row.total_samples,
            }
        }))
    }
}

/// One function of a flat profile.
#[derive(serde::Serialize)]
struct Function<'a> {
    address: String,
    function: String,
    image: &'a str,
    #[serde(rename = "self")]
    self_samples: u64,
    total: u64,
}

/// An image whose symbols could not be read, and why.
#[derive(serde::Serialize)]
struct Unreadable<'a> {
    image: &'a str,
    reason: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ResolveOptions;
    use pmcprof_fixtures::{Program, hot_warm_main};
    use serde_json::Value;

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
