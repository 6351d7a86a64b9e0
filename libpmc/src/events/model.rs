//! Which event table a CPU uses: FreeBSD's `pmc_cpuid` string (`GenuineIntel-6-8F-8`), matched
//! against the vendors' mapfile patterns (expanded into model ranges by `eventgen`); hybrid
//! parts have one table per core type (CPUID leaf 1AH).

use std::fmt;

use super::generated::MODELS;
use super::table::Table;
use super::table_rows::ModelRow;
pub use super::table_rows::{Hybrid, Vendor};

/// The setting (and environment variable) that makes the catalog answer for another CPU.
pub use crate::config::PMC_CPUID_VAR;

/// A CPU as FreeBSD's `pmc_cpuid` names it: vendor, family (decimal), model and stepping (hex).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuId {
    /// The vendor.
    pub vendor: Vendor,
    /// The display family.
    pub family: u32,
    /// The display model.
    pub model: u32,
    /// The stepping, when known (Skylake-SP and Cascade Lake differ only by it).
    pub stepping: Option<u32>,
}

/// A malformed `pmc_cpuid` string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "malformed CPU id `{text}`: {problem}; expected vendor-family-model-stepping as FreeBSD's \
     pmc_cpuid spells it (vendor GenuineIntel or AuthenticAMD, family in decimal, model and \
     stepping in hex), e.g. GenuineIntel-6-8F-8 or AuthenticAMD-25-11-1"
)]
pub struct CpuIdError {
    /// The string given.
    pub text: String,
    /// What is wrong with it.
    pub problem: String,
}

impl CpuId {
    /// Parses `GenuineIntel-6-8F-8` (the stepping may be left out: `GenuineIntel-6-8F`).
    pub fn parse(text: &str) -> Result<CpuId, CpuIdError> {
        let error = |problem: String| CpuIdError { text: text.to_string(), problem };
        let parts: Vec<&str> = text.trim().split('-').collect();
        if !(3..=4).contains(&parts.len()) {
            return Err(error(format!("it has {} '-'-separated parts, not 3 or 4", parts.len())));
        }
        let vendor = match parts[0] {
            "GenuineIntel" => Vendor::Intel,
            "AuthenticAMD" => Vendor::Amd,
            other => return Err(error(format!("unknown vendor `{other}`"))),
        };
        let family = parts[1]
            .parse::<u32>()
            .ok()
            .filter(|f| *f <= 0x10F && !parts[1].starts_with('+'))
            .ok_or_else(|| {
                error(format!("family `{}` is not a decimal number up to 271", parts[1]))
            })?;
        let hex = |what: &str, digits: &str, max: u32| {
            u32::from_str_radix(digits, 16)
                .ok()
                .filter(|v| *v <= max && !digits.starts_with('+') && digits.len() <= 2)
                .ok_or_else(|| {
                    error(format!("{what} `{digits}` is not a hex number up to {max:#X}"))
                })
        };
        let model = hex("model", parts[2], 0xFF)?;
        let stepping = parts.get(3).map(|s| hex("stepping", s, 0xF)).transpose()?;
        Ok(CpuId { vendor, family, model, stepping })
    }

    /// The tables of this CPU: one, or one per core type for a hybrid part (the mapfile's
    /// first matching line decides; a hybrid part's lines for the same model follow it).
    pub fn tables(&self) -> Vec<ModelTable> {
        let matches = |row: &ModelRow| {
            row.vendor == self.vendor
                && row.family == self.family
                && row.models.contains(&self.model)
                && self.stepping.is_none_or(|s| row.steppings & (1 << s) != 0)
        };
        let Some(first) = MODELS.iter().position(matches) else {
            return Vec::new();
        };
        let rows = &MODELS[first..];
        let count = if rows[0].hybrid.is_some() {
            rows.iter().take_while(|row| row.hybrid.is_some() && matches(row)).count()
        } else {
            1
        };
        rows[..count]
            .iter()
            .filter_map(|row| {
                Some(ModelTable { table: Table::get(row.table)?, hybrid: row.hybrid })
            })
            .collect()
    }
}

impl fmt::Display for CpuId {
    /// FreeBSD's `pmc_cpuid` format: `GenuineIntel-6-8F-8`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{:02X}", self.vendor.id(), self.family, self.model)?;
        if let Some(stepping) = self.stepping {
            write!(f, "-{stepping:X}")?;
        }
        Ok(())
    }
}

/// A table a CPU uses, with the core type it is for on a hybrid part.
#[derive(Debug, Clone, Copy)]
pub struct ModelTable {
    /// The table.
    pub table: &'static Table,
    /// The core type, on a hybrid part.
    pub hybrid: Option<Hybrid>,
}

/// `tables` ordered for lookup on a CPU of core type `core_type` (CPUID.1AH:EAX\[31:24\]):
/// that core type's table first; without one, the P-core (0x40) table first, as it has the
/// most events.
pub fn order_by_core_type(mut tables: Vec<ModelTable>, core_type: Option<u8>) -> Vec<ModelTable> {
    let wanted = core_type.unwrap_or(0x40);
    tables.sort_by_key(|t| t.hybrid.is_some_and(|h| h.core_type != wanted));
    tables
}

/// The core type of the CPU this thread runs on (CPUID.1AH:EAX\[31:24\]), on a hybrid part
/// (CPUID.07H:EDX\[15\]); `None` elsewhere.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub fn current_core_type() -> Option<u8> {
    use raw_cpuid::{CpuIdReader, CpuIdReaderNative};
    let reader = CpuIdReaderNative;
    let max_leaf = reader.cpuid1(0).eax;
    if max_leaf < 0x1A || reader.cpuid2(7, 0).edx & (1 << 15) == 0 {
        return None;
    }
    Some((reader.cpuid2(0x1A, 0).eax >> 24) as u8).filter(|&core_type| core_type != 0)
}

/// The core type of the CPU this thread runs on: no hybrid parts off x86.
#[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
pub fn current_core_type() -> Option<u8> {
    None
}

/// The CPU named by the `PMC_CPUID` setting (see [`crate::config`]), if it is set.
pub fn cpuid_override() -> Result<Option<CpuId>, CpuIdError> {
    match crate::config::with(|config| config.cpuid.clone()).map(|text| text.into_string()) {
        Some(Ok(text)) => CpuId::parse(&text).map(Some).map_err(|mut e| {
            e.problem = format!("{} (from {PMC_CPUID_VAR})", e.problem);
            e
        }),
        None => Ok(None),
        Some(Err(_)) => Err(CpuIdError {
            text: "<not UTF-8>".into(),
            problem: format!("{PMC_CPUID_VAR} is not valid UTF-8"),
        }),
    }
}
