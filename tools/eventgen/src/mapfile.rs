//! The vendors' `mapfile.csv`: which CPUs (a regular expression over `vendor-family-model` or
//! `vendor-family-model-stepping`) use which event file, expanded here into explicit model
//! ranges so libpmc needs no regular expressions.

use std::path::Path;

use regex::Regex;

use crate::{Error, Table};

/// A core-event line of a mapfile.
#[derive(Debug, Clone)]
pub(crate) struct MapRow {
    /// The CPU id pattern (POSIX extended regular expression).
    pattern: String,
    /// The event file, relative to the data folder (`SKL/events/skylake_core.json`, `amdzen4`).
    pub(crate) file: String,
    /// For a hybrid part: the core type (CPUID.1AH:EAX\[31:24\]) and native model id
    /// (EAX\[23:0\]) this file is for.
    hybrid: Option<(u8, u32)>,
}

/// A model range of one vendor and family, with the steppings it covers, and its table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModelRow {
    pub(crate) vendor: &'static str,
    pub(crate) family: u32,
    pub(crate) first_model: u32,
    pub(crate) last_model: u32,
    /// Bit s set: stepping s matches.
    pub(crate) steppings: u16,
    pub(crate) table: usize,
    pub(crate) hybrid: Option<(u8, u32)>,
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

/// The mapfile's data lines: its columns split at commas (no pattern contains one).
fn lines(path: &Path) -> Result<Vec<Vec<String>>, Error> {
    let text = read(path)?;
    let mut rows = Vec::new();
    for (number, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let columns: Vec<String> = line.split(',').map(|c| c.trim().to_string()).collect();
        if columns.len() < 4 {
            return Err(format!(
                "{}:{}: expected at least 4 comma-separated columns (pattern, version, file, \
                 type), found {}",
                path.display(),
                number + 1,
                columns.len()
            ));
        }
        rows.push(columns);
    }
    Ok(rows)
}

/// Intel's core and hybrid-core lines.
pub(crate) fn intel_rows(dir: &Path) -> Result<Vec<MapRow>, Error> {
    let path = dir.join("mapfile.csv");
    let mut rows = Vec::new();
    for columns in lines(&path)? {
        let hybrid = match columns[3].as_str() {
            "core" => None,
            "hybridcore" => {
                let core_type = columns.get(4).map(String::as_str).unwrap_or_default();
                let native = columns.get(5).map(String::as_str).unwrap_or_default();
                let core_type = parse_hex(core_type).and_then(|v| u8::try_from(v).ok());
                let native = parse_hex(native).and_then(|v| u32::try_from(v).ok());
                match (core_type, native) {
                    (Some(core_type), Some(native)) => Some((core_type, native)),
                    _ => {
                        return Err(format!(
                            "{}: hybrid line for {} lacks a hex core type and native model id",
                            path.display(),
                            columns[0]
                        ));
                    }
                }
            }
            _ => continue,
        };
        let file = columns[2].trim_start_matches('/').to_string();
        rows.push(MapRow { pattern: columns[0].clone(), file, hybrid });
    }
    Ok(rows)
}

/// AMD's core lines (the file is Linux perf's whole x86 mapfile; only `AuthenticAMD` lines
/// naming an `amdzen` folder are used).
pub(crate) fn amd_rows(dir: &Path) -> Result<Vec<MapRow>, Error> {
    let path = dir.join("mapfile.csv");
    let mut rows = Vec::new();
    for columns in lines(&path)? {
        if columns[3] == "core"
            && columns[0].starts_with("AuthenticAMD-")
            && columns[2].starts_with("amdzen")
        {
            rows.push(MapRow {
                pattern: columns[0].clone(),
                file: columns[2].clone(),
                hybrid: None,
            });
        }
    }
    Ok(rows)
}

/// `0x1F` or `1F` as a number.
pub(crate) fn parse_hex(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")).unwrap_or(text);
    u64::from_str_radix(digits, 16).ok()
}

/// The distinct event files of `rows`, in order of first appearance.
pub(crate) fn table_files(rows: &[MapRow]) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for row in rows {
        if !files.contains(&row.file) {
            files.push(row.file.clone());
        }
    }
    files
}

/// The table name of an event file: its stem in lower case without `_core`
/// (`SKL/events/skylake_core.json` → `skylake`), or the AMD folder name.
pub(crate) fn table_name(file: &str) -> String {
    let stem = file.rsplit('/').next().unwrap_or(file);
    let stem = stem.strip_suffix(".json").unwrap_or(stem);
    stem.strip_suffix("_core").unwrap_or(stem).to_ascii_lowercase()
}

/// Every mapfile line as explicit model ranges, Intel's first, each file's lines in order (the
/// first matching line wins, as in FreeBSD and Linux).
pub(crate) fn expand(
    intel: &[MapRow],
    amd: &[MapRow],
    tables: &[Table],
) -> Result<Vec<ModelRow>, Error> {
    let mut out = Vec::new();
    for row in intel.iter().chain(amd) {
        let name = table_name(&row.file);
        let table = tables
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| format!("no table for {}", row.file))?;
        expand_row(row, table, &mut out)?;
    }
    Ok(out)
}

/// One line: every (model, stepping) of its vendor and family whose id it matches in full, as
/// Linux perf matches (`vendor-family-model-stepping` when the pattern names a stepping, else
/// `vendor-family-model`; family decimal, model and stepping upper-case hex without padding).
fn expand_row(row: &MapRow, table: usize, out: &mut Vec<ModelRow>) -> Result<(), Error> {
    let mut parts = row.pattern.splitn(3, '-');
    let vendor = match parts.next() {
        Some("GenuineIntel") => "Intel",
        Some("AuthenticAMD") => "Amd",
        _ => return Err(format!("pattern {} names no known vendor", row.pattern)),
    };
    let vendor_id = row.pattern.split('-').next().unwrap_or_default();
    let family: u32 = parts
        .next()
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| format!("pattern {} has no decimal family", row.pattern))?;
    let regex = Regex::new(&format!("^(?:{})$", row.pattern))
        .map_err(|e| format!("pattern {}: {e}", row.pattern))?;
    let mut current: Option<ModelRow> = None;
    for model in 0..=0xFFu32 {
        let mut steppings = 0u16;
        let short = format!("{vendor_id}-{family}-{model:X}");
        for stepping in 0..16u32 {
            if regex.is_match(&short) || regex.is_match(&format!("{short}-{stepping:X}")) {
                steppings |= 1 << stepping;
            }
        }
        match &mut current {
            Some(range)
                if steppings != 0
                    && range.steppings == steppings
                    && range.last_model + 1 == model =>
            {
                range.last_model = model;
            }
            _ => {
                out.extend(current.take());
                if steppings != 0 {
                    current = Some(ModelRow {
                        vendor,
                        family,
                        first_model: model,
                        last_model: model,
                        steppings,
                        table,
                        hybrid: row.hybrid,
                    });
                }
            }
        }
    }
    out.extend(current);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand_one(pattern: &str) -> Vec<ModelRow> {
        let row = MapRow { pattern: pattern.into(), file: "x".into(), hybrid: None };
        let mut out = Vec::new();
        expand_row(&row, 7, &mut out).expect("valid pattern");
        out
    }

    #[test]
    fn a_stepping_pattern_covers_only_its_steppings() {
        let rows = expand_one("GenuineIntel-6-55-[01234]");
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].first_model, rows[0].last_model, rows[0].steppings),
            (0x55, 0x55, 0x1F)
        );
        let rows = expand_one("GenuineIntel-6-55-[56789ABCDEF]");
        assert_eq!(rows[0].steppings, 0xFFE0);
    }

    #[test]
    fn a_model_pattern_covers_every_stepping_and_merges_ranges() {
        let rows = expand_one("AuthenticAMD-23-([12][0-9A-F]|[0-9A-F])");
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].vendor, rows[0].family), ("Amd", 23));
        assert_eq!((rows[0].first_model, rows[0].last_model, rows[0].steppings), (0, 0x2F, 0xFFFF));
        let rows = expand_one("AuthenticAMD-26-([12467][[:xdigit:]]|[[:xdigit:]])");
        let ranges: Vec<_> = rows.iter().map(|r| (r.first_model, r.last_model)).collect();
        assert_eq!(ranges, [(0x00, 0x2F), (0x40, 0x4F), (0x60, 0x7F)]);
    }

    #[test]
    fn a_pattern_without_a_known_vendor_or_family_is_an_error() {
        let row = |p: &str| MapRow { pattern: p.into(), file: "x".into(), hybrid: None };
        assert!(expand_row(&row("CyrixInstead-6-55"), 0, &mut Vec::new()).is_err());
        assert!(expand_row(&row("GenuineIntel-x-55"), 0, &mut Vec::new()).is_err());
    }

    #[test]
    fn table_names_are_the_file_stems_without_core() {
        assert_eq!(table_name("SKL/events/skylake_core.json"), "skylake");
        assert_eq!(table_name("NHM-EP/events/NehalemEP_core.json"), "nehalemep");
        assert_eq!(table_name("amdzen4"), "amdzen4");
    }
}
